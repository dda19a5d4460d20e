"""The softmax kernel's passes on the host: cache-sized tiles, spread over
threads.

A tile of (``_QUERY_TILE``, ``_KEY_TILE``) logits stays in a core's L2 cache
through the clamp, the exp and the product with ``[y, 1]`` that follow the
score product, instead of making three more passes through memory. A query
so far from every key that its row sum underflows is taken again on the
stable path (the kernel's ``attend``, each row's largest logit subtracted):
on the host that row alone, the tile's other rows keeping their sums.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared.attention import (
    underflow_row_sum,
)
from nwensemble._shared.backend import (
    device,
    itemsize,
    row_major,
    to_numpy,
    workspace_buffer,
)
from nwensemble._shared.host_threads import THREADED_SCORES, map_on_host_threads
from nwensemble._shared.passes import (
    BlockPasses,
    HeadSums,
    concat_rows,
    head_sum,
    readout_columns,
    uniform_or,
)
from nwensemble._shared.tile_ops import logit_operands, tile, tile_exp

# Tile shapes compared in the performance notes.
_QUERY_TILE = 256
_KEY_TILE = 512
# Bytes of readout columns (every head's) that exist at once, in whole key
# tiles, at least one: the local-linear readout's columns grow with the
# square of the head's dimension, so a chunk takes fewer keys as the heads
# widen, and the columns' memory stays bounded whatever the rows.
_CHUNK_BYTES = 8 * 2**20
# Queries taken at once around the key chunks: their sums wait from one
# chunk to the next.
_QUERY_GROUP = 64 * _QUERY_TILE


class TilePasses(BlockPasses):
    """``BlockPasses`` for softmax keys on the host, tile by tile."""

    def sums_at(self, sums, positions):
        return sums.take(positions, tile=_QUERY_TILE)

    def estimates(self, Q, head_weights=None):
        alpha = uniform_or(head_weights, self.keys.n_heads)
        return head_sum(self._heads(Q), [float(a) for a in alpha])

    def head_estimates(self, Q, *, loo_rows=None, fallback=False):
        xp = self.keys.xp
        Q, exclude = self._queries(Q, loo_rows)
        preds = xp.stack(self._heads(Q, exclude=exclude), axis=0)
        if not fallback:
            return preds
        return preds, xp.zeros(preds.shape[:2], dtype=xp.bool, device=device(preds))

    def estimates_and_squared_spread(
        self, Q, head_weights=None, *, loo_rows=None, sums=None
    ):
        """See ``BlockPasses``. ``sum_i v_i^2`` with ``v = sum_h alpha_h E_h /
        s_h`` is ``sum_hg alpha_h alpha_g (E_h . E_g) / (s_h s_g)``: the
        products of the heads' unnormalised attention rows accumulate tile
        by tile beside their sums ``s_h``, so one pass suffices. A block
        whose sums are too small for those products to stay normal (a query
        far from its keys) is computed by the blocks, which normalise first.
        """
        keys = self.keys
        xp, Y = keys.xp, keys.Y
        alpha = uniform_or(head_weights, keys.n_heads)
        n_heads = len(alpha)
        Q, exclude = self._queries(Q, loo_rows)
        if not keys.reads_mean:
            return self._line_spread(Q, alpha, exclude, sums)
        m, n, t = Q.shape[0], keys.n_samples, Y.shape[1]
        dev = device(keys.Z)
        loo = None if exclude is None else xp.asarray(exclude, device=dev)
        blocks = BlockPasses(keys)

        def blocked(rows):
            """The rows ``rows`` of the result, by the blocks."""
            return blocks.estimates_and_squared_spread(
                Q[rows, :] if loo is None else None,
                alpha,
                loo_rows=None if loo is None else loo[rows],
            )

        if m == 0:
            return blocked(slice(0, 0))
        queries, operands, _ = logit_operands(self.keys, Q)
        if queries is None:  # a query far out: the blocks' stable path
            return blocked(slice(0, m))
        Y_aug = xp.concat([Y, xp.ones((n, 1), dtype=Y.dtype, device=dev)], axis=1)
        # Sums above this keep the products of attention rows normal.
        floor_sum = float(xp.finfo(Q.dtype).smallest_normal) ** 0.25

        def query_block(r0):
            r1 = min(r0 + _QUERY_TILE, m)
            left_out = None if exclude is None else exclude[r0:r1]
            exp = self._tile_exp(Q.dtype, left_out)
            nums = [None] * n_heads
            G = {}
            for c0 in range(0, n, _KEY_TILE):
                c1 = min(c0 + _KEY_TILE, n)
                tiles = []
                for h in range(n_heads):
                    A, nums[h] = tile(
                        queries[h][r0:r1, :],
                        operands[h],
                        Y_aug[c0:c1],
                        c0,
                        c1,
                        nums[h],
                        exp=exp,
                        xp=xp,
                    )
                    tiles.append(A)
                    for g, B in enumerate(tiles):  # g <= h: each pair once
                        G[g, h] = G.get((g, h), 0.0) + xp.sum(A * B, axis=1)
            sums = [num[:, t] for num in nums]
            if min(float(xp.min(s)) for s in sums) < floor_sum:
                return blocked(slice(r0, r1))
            c = [float(a) / s for a, s in zip(alpha, sums)]
            est = head_sum([num[:, :t] for num in nums], [ch[:, None] for ch in c])
            sq = 0.0
            for (g, h), gram in G.items():
                sq = sq + (1.0 if g == h else 2.0) * c[g] * c[h] * gram
            return est, sq

        big = m * n * n_heads >= THREADED_SCORES
        parts = map_on_host_threads(
            query_block, range(0, m, _QUERY_TILE), xp=xp, threads=big
        )
        return (
            concat_rows([b[0] for b in parts], xp=xp),
            concat_rows([b[1] for b in parts], xp=xp),
        )

    def _line_spread(self, Q, alpha, exclude, sums=None):
        """``estimates_and_squared_spread`` for local-linear heads, in two
        passes: the first takes every head's sums (or reads them from
        ``sums``, this object's ``head_sums`` of the same queries) and, from
        its local lines, each query's factors ``F_h`` of its weights
        (``Readout.weight_factors``); the second recomputes the attention
        tile by tile and sums the squares of the combined weights ``sum_h
        alpha_h E_h (F_h . [1, z])``. A tile of queries whose sums took the
        stable path is computed by the blocks."""
        keys = self.keys
        xp, n_heads, d = keys.xp, keys.n_heads, keys.head_dim
        m, n = Q.shape[0], keys.n_samples
        dev = device(keys.Z)
        if sums is None or sums.stable_tiles is None:
            sums = self._head_sums(Q, exclude)
        elif sums.nums[0].shape[0] != m:
            raise ValueError(
                f"sums of {sums.nums[0].shape[0]} queries given for {m} queries"
            )
        heads, F = [], []
        for h, (a, num) in enumerate(zip(alpha, sums.nums)):
            head, factors = keys.readout_of(h).weight_factors(
                num, Q[:, h * d : (h + 1) * d], xp=xp
            )
            heads.append(head)
            F.append(a * factors)
        est = head_sum(heads, alpha)
        stable = sums.stable_tiles
        if m == 0:
            return est, xp.zeros((0,), dtype=Q.dtype, device=dev)
        queries, operands, _ = logit_operands(self.keys, Q)
        ones = xp.ones((n, 1), dtype=Q.dtype, device=dev)
        lines = [
            row_major(
                xp.concat(
                    [ones, keys.readout_of(h).design(keys.head(h), xp=xp)], axis=1
                ).T,
                xp=xp,
            )
            for h in range(n_heads)
        ]
        blocks = BlockPasses(keys)
        loo = None if exclude is None else xp.asarray(exclude, device=dev)

        def spread_tile(i):
            r0 = i * _QUERY_TILE
            rows = slice(r0, min(r0 + _QUERY_TILE, m))
            if queries is None or stable[i]:
                return blocks.estimates_and_squared_spread(
                    Q[rows, :] if loo is None else None,
                    alpha,
                    loo_rows=None if loo is None else loo[rows],
                )[1]
            exp = self._tile_exp(Q.dtype, None if exclude is None else exclude[rows])
            sq = None
            for c0 in range(0, n, _KEY_TILE):
                c1 = min(c0 + _KEY_TILE, n)
                V = head_sum(
                    [
                        exp(queries[h][rows, :] @ operands[h][:, c0:c1], c0)
                        * (F[h][rows, :] @ lines[h][:, c0:c1])
                        for h in range(n_heads)
                    ]
                )
                tile_sq = xp.sum(V * V, axis=1)
                sq = tile_sq if sq is None else sq + tile_sq
            return sq

        n_tiles = len(stable)
        big = m * n * n_heads >= THREADED_SCORES
        sq = map_on_host_threads(spread_tile, range(n_tiles), xp=xp, threads=big)
        return est, concat_rows(sq, xp=xp)

    def head_sums(self, Q, *, loo_rows=None):
        """See ``BlockPasses``; no query falls back (softmax keys)."""
        return self._head_sums(*self._queries(Q, loo_rows))

    def _head_sums(self, Q, exclude):
        """``head_sums`` of the queries ``Q`` (see ``_heads`` for
        ``exclude``), with the tiles that took the stable path."""
        keys = self.keys
        xp, d, n_heads = keys.xp, keys.head_dim, keys.n_heads
        parts = self._per_head_tile(
            Q, exclude, lambda h, rows, num, stable: (num, stable)
        )
        nums = [concat_rows([tile[0] for tile in tiles], xp=xp) for tiles in parts]
        stable = tuple(
            any(parts[h][i][1] for h in range(n_heads)) for i in range(len(parts[0]))
        )
        queries = [Q[:, h * d : (h + 1) * d] for h in range(n_heads)]
        fallback = xp.zeros((n_heads, Q.shape[0]), dtype=xp.bool, device=device(keys.Z))
        return HeadSums(nums, queries, fallback, stable)

    def _heads(self, Q, *, exclude=None):
        """Every head's estimates (a list of (m, t) arrays). With ``exclude``
        (a NumPy integer array, one key index per query), query ``r`` gives
        key ``exclude[r]`` no weight (leave-one-out)."""
        keys = self.keys
        d = keys.head_dim

        def estimate(h, rows, num, stable):
            readout = keys.readout_of(h)
            return readout.estimate(num, Q[rows, h * d : (h + 1) * d], xp=keys.xp)

        parts = self._per_head_tile(Q, exclude, estimate)
        return [concat_rows(tiles, xp=keys.xp) for tiles in parts]

    def _per_head_tile(self, Q, exclude, finish):
        """``finish(h, rows, num, stable)`` for every head ``h`` and tile of
        query rows ``rows`` (a slice), ``num`` the attention's sums of the
        head's readout columns there, ``stable`` whether they came from
        ``attend``'s stable path (some query far from every key: sums
        scaled by each row's largest weight); heads and tiles spread over
        threads. Returns the results per head, a list over its tiles in
        order (see ``_heads`` for ``exclude``)."""
        keys = self.keys
        xp, Z, Y, n_heads = keys.xp, keys.Z, keys.Y, keys.n_heads
        m, n = Q.shape[0], Z.shape[0]
        d = keys.head_dim
        dev = device(Z)
        if m == 0:
            columns = readout_columns(keys, slice(0, 0))
            return [
                [
                    finish(
                        h,
                        slice(0, 0),
                        xp.zeros((0, R.shape[1]), dtype=Y.dtype, device=dev),
                        False,
                    )
                ]
                for h, R in enumerate(columns)
            ]
        queries, operands, biases = logit_operands(self.keys, Q)
        floor_sum = underflow_row_sum(Q.dtype, xp=xp)
        big = m * n * n_heads >= THREADED_SCORES

        def tile_rows(r0):
            rows = slice(r0, min(r0 + _QUERY_TILE, m))
            return rows, None if exclude is None else exclude[rows]

        def group_sums(tasks):
            """The sums of the tasks' (head, query tile): the keys in chunks,
            each chunk's columns built once for all the tasks; each tile's
            sums run over the keys in order, as one pass over all keys
            would take them."""
            nums = [None] * len(tasks)
            chunk = _keys_per_chunk(keys)
            for k0 in range(0, n if queries is not None else 0, chunk):
                columns = readout_columns(keys, slice(k0, min(k0 + chunk, n)))
                key_chunk = self._key_chunk(operands, columns, k0)

                def chunk_sums(i, k0=k0, key_chunk=key_chunk, nums=nums):
                    h, r0 = tasks[i]
                    rows, left_out = tile_rows(r0)
                    q = queries[h][rows, :]
                    return self._block_sums(q, key_chunk[h], left_out, k0, nums[i])

                nums = map_on_host_threads(
                    chunk_sums, range(len(tasks)), xp=xp, threads=big
                )
                # Gone before the next chunk's are built.
                del columns, key_chunk, chunk_sums
            return nums

        def stable_sums(h, q, left_out):
            """Head ``h``'s sums for its queries ``q`` by attend's stable
            path."""
            skip = None if left_out is None else xp.asarray(left_out, device=dev)
            _, num, _ = keys.kernel.attend(
                q,
                Z[:, h * d : (h + 1) * d],
                (biases[h], None),
                readout_columns(keys, heads=[h])[0],
                xp=xp,
                exclude=skip,
                exact_zeros=False,
                # Straight to the stable path: these rows underflow.
                workspace={"stable": True},
            )
            return num

        def head_block(task, num):
            h, r0 = task
            rows, left_out = tile_rows(r0)
            q = Q[rows, h * d : (h + 1) * d]
            if num is None:
                # Some query is far from every key: attend's stable path.
                return finish(h, rows, stable_sums(h, q, left_out), True)
            if float(xp.min(num[:, -1])) >= floor_sum:
                return finish(h, rows, num, False)
            # Only the rows whose sums underflowed, by the stable path (their
            # sums scaled by each row's largest weight, as the tile's flag
            # says); the others keep the tile's (``num`` is this task's own).
            low = np.flatnonzero(to_numpy(num[:, -1]) < floor_sum)
            num[low] = stable_sums(
                h, q[low], None if left_out is None else left_out[low]
            )
            return finish(h, rows, num, True)

        parts = []
        for g0 in range(0, m, _QUERY_GROUP):
            starts = range(g0, min(g0 + _QUERY_GROUP, m), _QUERY_TILE)
            tasks = [(h, r0) for r0 in starts for h in range(n_heads)]
            nums = group_sums(tasks)
            parts += map_on_host_threads(
                lambda i, tasks=tasks, nums=nums: head_block(tasks[i], nums[i]),
                range(len(tasks)),
                xp=xp,
                threads=big,
            )
        return [parts[h::n_heads] for h in range(n_heads)]

    def _key_chunk(self, operands, columns, k0):
        """Per head, what ``_block_sums`` reads of the keys ``k0 : k0 +
        len(columns[h])``: their logit operands (``operands[h]``, every
        key's) and readout columns ``columns[h]``; the compiled passes lay
        them out in tiles."""
        return list(zip(operands, columns))

    def _block_sums(self, q, key_chunk, left_out, k0, num):
        """``num`` (None for none yet) plus ``E @ R`` for a block of queries
        ``q`` (operands of ``tile_ops.logit_operands``) on the keys ``k0 :
        k0 + len(R)``, whose readout columns are ``R`` (last column ones),
        tile by tile, the weight of query ``r`` on key ``left_out[r]`` (a
        NumPy array, or None) zero; ``key_chunk`` is ``(operands, R)``, one
        head's of ``_key_chunk``."""
        xp = self.keys.xp
        operands, R = key_chunk
        k1 = k0 + R.shape[0]
        buf = workspace_buffer({}, (q.shape[0], _KEY_TILE), q, xp=xp)
        exp = self._tile_exp(q.dtype, left_out)
        for c0 in range(k0, k1, _KEY_TILE):
            c1 = min(c0 + _KEY_TILE, k1)
            _, num = tile(
                q,
                operands,
                R[c0 - k0 : c1 - k0],
                c0,
                c1,
                num,
                exp=exp,
                xp=xp,
                out=None if buf is None else buf[:, : c1 - c0],
            )
        return num

    def _tile_exp(self, dtype, left_out):
        """A function ``exp(A, c0)`` that exponentiates a tile of logits in
        place (see ``tile_ops.tile_exp``); the compiled passes override it."""
        return tile_exp(dtype, left_out, xp=self.keys.xp)

    def _queries(self, Q, loo_rows):
        """``(Q, exclude)``: with ``loo_rows``, the training rows themselves as
        queries, each excluding its own key (a NumPy index array)."""
        if loo_rows is None:
            return Q, None
        return self.keys.xp.take(self.keys.Z, loo_rows, axis=0), np.asarray(loo_rows)


def _keys_per_chunk(keys):
    """How many keys' readout columns a chunk builds at once: the whole key
    tiles whose columns, for every head, fit in ``_CHUNK_BYTES``, at least
    one tile. The local constant's columns are one array shared by every
    head (see ``readout_columns``)."""
    readout = keys.readout_of(0)
    per_key = readout.n_columns(keys.Y.shape[1], keys.head_dim)
    if not readout.is_constant:
        per_key *= keys.n_heads
    size = itemsize(keys.Y.dtype, xp=keys.xp)
    tiles = _CHUNK_BYTES // (per_key * size * _KEY_TILE)
    return max(1, tiles) * _KEY_TILE
