"""Passes of the head ensemble's attention over the keys, in blocks of
bounded memory: the path that every kernel and every namespace can take.

A pass is one of the questions prediction and fitting ask of the keys: the
ensemble's estimates, those and the spread of their weights, every head's
estimates (of queries, or of training rows leaving themselves out). A
kernel answers them through ``BlockPasses`` or a subclass with a faster
path of its own (``Kernel.passes``); every pass in blocks, and every other
loop over the heads' attention (intervals, attention weights), goes through
``over_heads``.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from nwensemble._shared.attention import chunk_rows
from nwensemble._shared.backend import device, namespace_of


def iter_head_attention(Q, keys, *, n_blocks=2, loo_rows=None):
    """Unnormalised attention of query blocks on the keys, head by head.

    Yields a ``HeadBlock`` for each block of query rows and each head: its
    ``E`` (m, n) is head ``h``'s unnormalised attention (the buffer is
    reused by the next head and block, so consume it before advancing) and
    ``num`` the attention's sums of the readout's columns (``E @ [Y, 1]``
    for the local constant; see ``readout``), whose last column holds the
    row sums.

    With ``loo_rows`` (an integer array) the queries are those rows of the
    keys (``Q`` is ignored), each leaving itself out.

    Blocks are sized so that ``n_blocks`` arrays of (block, n) fit in
    scikit-learn's ``working_memory``: memory stays O(block x n) whatever the
    number of queries.
    """
    xp, kernel, Z = keys.xp, keys.kernel, keys.Z
    head_keys = [
        kernel.keys(keys.head(h), keys.log_sw, xp=xp) for h in range(keys.n_heads)
    ]
    columns = readout_columns(keys)
    d = keys.head_dim
    m = Q.shape[0] if loo_rows is None else loo_rows.shape[0]
    chunk = chunk_rows(m, Z.shape[0], Z.dtype, n_blocks=n_blocks, xp=xp)
    workspace = {}
    for start in range(0, m, chunk):
        rows = slice(start, min(start + chunk, m))
        if loo_rows is None:
            Qb, exclude = Q[rows, :], None
        else:
            exclude = loo_rows[rows]
            Qb = xp.take(Z, exclude, axis=0)
        for h in range(keys.n_heads):
            cols = slice(h * d, (h + 1) * d)
            E, num, fallback = kernel.attend(
                Qb[:, cols],
                Z[:, cols],
                head_keys[h],
                columns[h],
                xp=xp,
                exclude=exclude,
                workspace=workspace,
                exact_zeros=False,
            )
            yield HeadBlock(rows, h, E, num, fallback, Qb[:, cols], keys)


def readout_columns(keys, rows=slice(None), heads=None):
    """Per head (of ``heads``, all by default), the key-side columns whose
    attention sums its readout reads (``Readout.columns``; one array shared
    by every head for the local constant), of the keys ``rows`` (a slice).
    A line's columns do not depend on its ridge."""
    xp, readout, Y = keys.xp, keys.readout_of(0), keys.Y[rows, :]
    heads = range(keys.n_heads) if heads is None else heads
    if readout.is_constant:
        return [readout.columns(Y, None, xp=xp)] * len(heads)
    return [readout.columns(Y, keys.head(h)[rows, :], xp=xp) for h in heads]


@dataclass(frozen=True, eq=False)
class HeadBlock:
    """One head's attention for a block of queries.

    Attributes
    ----------
    rows : slice
        The block's query rows.
    h : int
        The head.
    E : array of shape (m, n)
        The unnormalised attention (see ``iter_head_attention``).
    num : array of shape (m, k)
        The attention's sums of the readout's columns; last column the row
        sums.
    fallback : array of shape (m,) or None
        Queries whose compact support was empty (they attend to their
        nearest row only), or None when there were none.
    Qh : array of shape (m, head_dim)
        The queries in the head's subspace.
    keys : Keys
        The keys attended to.
    """

    rows: Any
    h: int
    E: Any
    num: Any
    fallback: Any
    Qh: Any
    keys: Any

    def estimate(self):
        """The head's estimates (m, t), as its readout reads them."""
        return self.keys.readout_of(self.h).estimate(self.num, self.Qh, xp=self.keys.xp)

    def weights(self):
        """The normalised weights (m, n) of the head's estimate on the keys."""
        keys = self.keys
        return keys.readout_of(self.h).weights(
            self.E, self.num, self.Qh, keys.head(self.h), xp=keys.xp
        )


def add(total, part):
    """``total + part``, elementwise for tuples; None counts as nothing."""
    if total is None:
        return part
    if part is None:
        return total
    if isinstance(part, tuple):
        return tuple(a + b for a, b in zip(total, part))
    return total + part


def head_sum(parts, weights=None):
    """``sum_h weights[h] * parts[h]`` (a plain sum without ``weights``),
    folded in head order: the one place the heads' results are summed, so
    that every pass rounds alike. ``weights`` are numbers or arrays that
    broadcast against the parts."""
    total = None
    for h, part in enumerate(parts):
        if weights is not None:
            part = weights[h] * part
        total = part if total is None else total + part
    return total


def append(parts, part):
    """``parts`` (a list, None at first) with ``part`` appended."""
    return [part] if parts is None else parts + [part]


def over_heads(Q, keys, per_head, *, combine=add, n_blocks=2, loo_rows=None):
    """For each block of queries, what the heads' attention gives there.

    Yields ``(rows, total)`` per block, ``total`` the results of
    ``per_head(block)`` (a ``HeadBlock``) over the heads in order, folded by
    ``combine(total, part)`` from ``total=None``: ``add`` sums them (tuples
    elementwise; a head that returns None is skipped), ``append`` lists
    them.
    """
    total = None
    for block in iter_head_attention(Q, keys, n_blocks=n_blocks, loo_rows=loo_rows):
        h = block.h
        total = combine(None if h == 0 else total, per_head(block))
        if h == keys.n_heads - 1:
            yield block.rows, total


def uniform_or(head_weights, n_heads):
    """``head_weights`` as a list of floats, uniform when None."""
    if head_weights is None:
        return [1.0 / n_heads] * n_heads
    return [float(a) for a in head_weights]


def concat_rows(blocks, *, xp):
    """Blocks of rows in one array (the block itself when there is one)."""
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


@dataclass(frozen=True, eq=False)
class HeadSums:
    """What ``head_sums`` returns.

    Attributes
    ----------
    nums : list of arrays of shape (m, k)
        Per head, the attention's sums of its readout's columns (see
        ``iter_head_attention``).
    queries : list of arrays of shape (m, d)
        Per head, the queries' coordinates.
    fallback : array of shape (n_heads, m)
        Which queries' compact support was empty.
    stable_tiles : tuple of bool or None
        From the tiles: per tile of queries, whether some head's sums there
        took the stable path (scaled by each row's largest weight); None
        from the blocks.
    """

    nums: list
    queries: list
    fallback: Any
    stable_tiles: Optional[tuple] = None

    def take(self, positions, *, tile=None):
        """The sums of the queries at ``positions`` (sorted NumPy integers),
        in that order. ``stable_tiles`` then counts tiles of ``tile`` of
        those queries, each stable where one of its queries lay in a stable
        tile; None where ``tile`` is None or there were none."""
        xp, dev = namespace_of(self.fallback)
        at = xp.asarray(positions, device=dev)
        stable = None
        if tile is not None and self.stable_tiles is not None:
            was = np.asarray(self.stable_tiles, dtype=bool)[positions // tile]
            stable = tuple(
                bool(np.any(was[r0 : r0 + tile])) for r0 in range(0, was.size, tile)
            )
        return HeadSums(
            [xp.take(a, at, axis=0) for a in self.nums],
            [xp.take(a, at, axis=0) for a in self.queries],
            xp.take(self.fallback, at, axis=1),
            stable,
        )


class BlockPasses:
    """The passes over ``keys`` (a ``Keys``), in blocks of
    ``iter_head_attention``. ``head_weights`` (a sequence of ``n_heads``
    floats, uniform when None) combine the heads; every result lives in the
    keys' namespace and on their device."""

    def __init__(self, keys):
        self.keys = keys

    def estimates(self, Q, head_weights=None):
        """The ensemble's NW estimates (m, t) of projected queries ``Q``."""
        keys = self.keys
        alpha = uniform_or(head_weights, keys.n_heads)
        several = keys.n_heads > 1

        def estimate(block):
            est = block.estimate()
            return alpha[block.h] * est if several else est

        blocks = [total for _, total in over_heads(Q, keys, estimate)]
        return concat_rows(blocks, xp=keys.xp)

    def estimates_and_squared_spread(
        self, Q, head_weights=None, *, loo_rows=None, sums=None
    ):
        """The ensemble's estimates and ``sum_i v_i(x)^2`` of its combined
        weights ``v(x) = sum_h alpha_h w_h(x)``, in one pass: ``(m, t)``
        and ``(m,)``. With ``loo_rows`` (an integer array; ``Q`` None), the
        leave-one-out estimates of those training rows.

        ``sums`` may give this object's ``head_sums`` of the same queries,
        for a pass that would otherwise take them again (the tiles' for
        local-linear heads); the blocks take each head's weights whole and
        read none.

        ``sigma * sqrt(sum_i v_i^2)`` is the standard error of a prediction
        under noise of variance ``sigma^2`` on the training targets.
        """
        keys = self.keys
        xp = keys.xp
        alpha = uniform_or(head_weights, keys.n_heads)

        def estimate_and_weights(block):
            a = alpha[block.h]
            return a * block.estimate(), a * block.weights()

        preds, sq = [], []
        for _, (est, V) in over_heads(
            Q, keys, estimate_and_weights, n_blocks=3, loo_rows=loo_rows
        ):
            preds.append(est)
            sq.append(xp.sum(V * V, axis=1))
        return concat_rows(preds, xp=xp), concat_rows(sq, xp=xp)

    def sums_at(self, sums, positions):
        """``sums`` (this object's ``head_sums``) of the queries at
        ``positions`` only (see ``HeadSums.take``)."""
        return sums.take(positions)

    def head_sums(self, Q, *, loo_rows=None):
        """Every head's attention sums of its readout's columns and its
        queries' coordinates, as ``HeadSums``. With ``loo_rows`` (``Q``
        None), those training rows, each leaving itself out.
        """
        keys = self.keys
        xp = keys.xp
        H = keys.n_heads
        nums, queries, fell = ([[] for _ in range(H)] for _ in range(3))
        for block in iter_head_attention(Q, keys, loo_rows=loo_rows):
            nums[block.h].append(block.num)
            queries[block.h].append(block.Qh)
            mask = block.fallback
            if mask is None:
                m = block.num.shape[0]
                mask = xp.zeros(m, dtype=xp.bool, device=device(block.num))
            fell[block.h].append(mask)
        return HeadSums(
            [concat_rows(parts, xp=xp) for parts in nums],
            [concat_rows(parts, xp=xp) for parts in queries],
            xp.stack([concat_rows(parts, xp=xp) for parts in fell]),
        )

    def head_estimates(self, Q, *, loo_rows=None, fallback=False):
        """Every head's NW estimates, stacked: (n_heads, m, t).

        With ``loo_rows`` (``Q`` None), the leave-one-out estimates of those
        training rows. With ``fallback``, also the boolean (n_heads, m)
        array of queries whose compact support was empty (see
        ``attend_compact``).
        """
        keys = self.keys
        xp = keys.xp

        def estimate(block):
            fell = block.fallback
            if fell is None:
                m = block.num.shape[0]
                fell = xp.zeros(m, dtype=xp.bool, device=device(block.num))
            return block.estimate(), fell

        heads = [[] for _ in range(keys.n_heads)]
        empty = [[] for _ in range(keys.n_heads)]
        for _, parts in over_heads(
            Q, keys, estimate, combine=append, loo_rows=loo_rows
        ):
            for h, (est, fell) in enumerate(parts):
                heads[h].append(est)
                empty[h].append(fell)
        preds = xp.stack([concat_rows(b, xp=xp) for b in heads], axis=0)
        if not fallback:
            return preds
        return preds, xp.stack([concat_rows(b, xp=xp) for b in empty], axis=0)
