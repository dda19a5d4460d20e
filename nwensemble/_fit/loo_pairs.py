"""The softmax heads' leave-one-out loss and gradient on the host, each pair
of rows taken once.

Without its key weights the kernel ``K_ij = exp(-|z_i - z_j|^2 / 2)`` is
symmetric, and every quantity of the loss reads it through products that
can take a pair both ways: row ``i``'s readout sums gain ``K_ij w_j [y_j,
1]`` and row ``j``'s gain ``K_ij w_i [y_i, 1]``; the gradient reads ``C =
G + G^T`` (``G`` the derivative in the scores), whose pair ``(i, j)`` is
``K_ij (L_i . R_j + L_j . R_i)`` for per-row vectors ``L`` and ``R``. So
the rows are swept in strips of the upper triangle, twice: once for the
sums (from which the estimates, the loss and each row's ``L``), once for
``C`` and its products with ``[Z, 1]`` both ways, reading the strips'
kernel values as the first pass left them where the whole triangle fits
``KEPT_BYTES`` (a minibatch's always), else recomputing them strip by
strip. The products take ``2d + 3`` multiply-adds per ordered pair of rows
against the row sweep's ``3d + 2`` (see ``loo_sweep``), the exps as many.
A row whose sum underflows (far from every other) takes its own weights
again, shifted by its largest logit; more than ``_MOST_LOW`` of them are
left to the row sweep's stable path.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from nwensemble._fit.sweep_ensemble_loss import (
    add_in_order,
    chunk_count,
    ensemble_loss,
    ensemble_upstream,
    rows_within,
)
from nwensemble._shared.attention import log_weights, underflow_row_sum
from nwensemble._shared.host_threads import blas_single_threaded, map_on_host_threads

# A strip's kernel values, all heads together, at most this many bytes (as
# the row sweep's blocks: in a core's L2 between the strip's passes).
_STRIP_BYTES = 1 << 20
# The triangle's kernel values, all heads together, kept between the two
# passes up to about this many bytes; beyond, the second pass recomputes
# them strip by strip.
KEPT_BYTES = 64 << 20
# More rows than this share of all rows (over all heads) underflowing: the
# caller's stable path for them all (each underflowing row costs two passes
# over all rows of its own).
_MOST_LOW = 0.25


def loo_pairs(
    Z, Y, sw, *, kernels, n_heads, return_grad, workspace, diversity, threaded_scores
):
    """``loo_sweep``'s loss and gradient (the same arguments) over each pair
    of rows once; None when more than ``_MOST_LOW`` of the rows' sums
    underflow (the caller then takes the stable path for all)."""
    sweep = _Pairs(Z, Y, sw, n_heads, kernels, workspace)
    n = Z.shape[0]
    n_chunks = chunk_count(n)
    bounds = _balanced_bounds(n, n_chunks)
    # The last chunks cost the most (their strips' scores reach below the
    # triangle): taken first, they leave no thread waiting on the last one.
    # The chunks' parts are added in the chunks' order all the same.
    chunks = range(n_chunks - 1, -1, -1)
    threads = n * n * n_heads >= threaded_scores
    with blas_single_threaded():
        parts = map_on_host_threads(
            lambda k: sweep.sums(k, bounds[k], bounds[k + 1]),
            chunks,
            xp=np,
            threads=threads,
        )
    sums = add_in_order(parts[::-1])
    t = Y.shape[1]
    totals = sums[:, t, :]
    # Rows whose sum underflowed (a row far from every other): their own
    # weights again, shifted by their largest, as the row sweep's stable
    # path takes them; as keys of the other rows they stay in the pairs.
    low = ~(totals >= underflow_row_sum(Z.dtype, xp=np))
    if np.count_nonzero(low) > low.size * _MOST_LOW:
        return None
    totals = np.where(low, 1.0, totals).astype(Z.dtype)
    Y_heads = np.swapaxes(sums[:, :t, :], 1, 2) / totals[:, :, None]
    # Most evaluations have none: no pass over the heads for them.
    shifted = [np.flatnonzero(rows) for rows in low] if low.any() else []
    for h, rows in enumerate(shifted):
        for block, E in sweep.shifted_weights(h, rows):
            totals[h, block] = np.sum(E, axis=1)
            Y_heads[h, block] = (E @ Y) / totals[h, block][:, None]
    loss = ensemble_loss(Y_heads, Y, sw, diversity)
    if not return_grad:
        return loss, None
    U = ensemble_upstream(Y_heads, Y, sw, diversity)
    # G_ij = w_j K_ij (a_i . y_j - c_i) = K_ij L_i . R_j, with L_i = [a_i,
    # -c_i] and R_j = [w_j y_j, w_j] (the sums' values); the shifted rows'
    # own G rows are taken from their shifted weights, so zero here.
    a = U / totals[:, :, None]
    c = np.sum(U * Y_heads, axis=2) / totals
    L = np.concatenate([np.swapaxes(a, 1, 2), -c[:, None, :]], axis=1)
    L = np.ascontiguousarray(np.where(low[:, None, :], 0.0, L), dtype=Z.dtype)
    with blas_single_threaded():
        parts = map_on_host_threads(
            lambda k: sweep.products(k, bounds[k], bounds[k + 1], L),
            chunks,
            xp=np,
            threads=threads,
        )
    CZ = add_in_order(parts[::-1])
    Zh = sweep.Z1[:, :, :-1]
    # Head h's gradient in row k: sum_j C_kj (z_j - z_k).
    grad = CZ[:, :, :-1] - CZ[:, :, -1:] * Zh
    for h, rows in enumerate(shifted):
        # G's rows of the shifted rows (each sums to zero): the rows gain G
        # Z, their keys G^T Z_rows - colsum(G) z.
        for block, E in sweep.shifted_weights(h, rows):
            colsum = np.zeros((1, n), dtype=E.dtype)
            G = kernels.gradient_block(
                E[None], a[h, block][None], c[h, block][None], sweep.YT, colsum
            )[0]
            grad[h, block] += G @ Zh[h]
            grad[h] += G.T @ Zh[h, block] - colsum[0][:, None] * Zh[h]
    return loss, np.concatenate(list(grad), axis=1)


def _balanced_bounds(n, n_chunks):
    """Row bounds of ``n_chunks`` chunks with about as many pairs each: rows
    ``[0, r)`` hold ``r n - r^2 / 2`` of the triangle's pairs."""
    cuts = [round(n * (1.0 - math.sqrt(1.0 - k / n_chunks))) for k in range(n_chunks)]
    return cuts + [n]


def _strip_rows(width, n_heads, itemsize):
    """Rows per strip: a power of two from 8 to 256 whose kernel values
    (rows x width x heads) fit in ``_STRIP_BYTES``."""
    return rows_within(_STRIP_BYTES, width * n_heads * itemsize)


class _Pairs:
    """The operands every chunk reads, and a chunk's two passes.

    Queries ``[z, 1, -|z|^2 / 2]`` against keys ``[z, -|z|^2 / 2, 1]`` give
    the scores ``-|z_i - z_j|^2 / 2``, never positive, so their exp needs no
    row maximum; the key weights ``w = sw / max sw`` ride in the values
    ``V = [w y, w]`` (columns, n).
    """

    def __init__(self, Z, Y, sw, n_heads, kernels, workspace):
        n = Z.shape[0]
        d = Z.shape[1] // n_heads
        dtype = Z.dtype
        # The heads first (``np.moveaxis``'s view, without its checks).
        Zh = Z.reshape(n, n_heads, d).transpose(1, 0, 2)
        half = 0.5 * np.sum(Zh * Zh, axis=2)[:, :, None]
        ones = np.ones((n_heads, n, 1), dtype=dtype)
        self.queries = np.concatenate([Zh, ones, -half], axis=2)
        self.keys = np.ascontiguousarray(
            np.swapaxes(np.concatenate([Zh, -half, ones], axis=2), 1, 2)
        )
        self.Z1 = np.concatenate([Zh, ones], axis=2)
        w = (sw / np.max(sw)).astype(dtype)
        self.V = np.ascontiguousarray(np.concatenate([Y.T * w, w[None, :]], axis=0))
        self.YT = np.ascontiguousarray(Y.T)
        self.w = w
        self.kernels = kernels
        # Chunks' buffers, across calls when the caller keeps a workspace
        # and always between the two passes.
        self.workspace = {} if workspace is None else workspace
        # The kernel values of every strip kept for the second pass when
        # the triangle fits the budget (then neither scores nor exps again).
        self.kept = n_heads * n * (n + 1) // 2 * dtype.itemsize <= KEPT_BYTES

    def _strips(self, k, start, stop, *, scored=True):
        """``(r0, r1, K)`` for the strips of rows ``start:stop`` in order,
        ``K`` the strip's scores (heads, r1 - r0, n - r0) in chunk ``k``'s
        buffer; with ``scored=False``, the strip's values as the pass
        before left them (only where the strips are ``kept``)."""
        H, _, n = self.keys.shape
        dtype = self.keys.dtype
        bounds = []
        r0 = start
        while r0 < stop:
            r1 = min(stop, r0 + _strip_rows(n - r0, H, dtype.itemsize))
            bounds.append((r0, r1))
            r0 = r1
        sizes = [H * (r1 - r0) * (n - r0) for r0, r1 in bounds]
        if self.kept:
            size = sum(sizes)
        else:
            # The most any strip takes: the budget, or the least rows at
            # the widest strip.
            size = max(_STRIP_BYTES // dtype.itemsize, 8 * H * (n - start))
        buf = self.workspace.get(("pairs", k))
        if buf is None or buf.shape[0] < size or buf.dtype != dtype:
            buf = np.empty(size, dtype=dtype)
            self.workspace[("pairs", k)] = buf
        offset = 0
        for (r0, r1), size in zip(bounds, sizes):
            K = buf[offset : offset + size].reshape(H, r1 - r0, n - r0)
            if scored:
                np.matmul(self.queries[:, r0:r1], self.keys[:, :, r0:], out=K)
            yield r0, r1, K
            if self.kept:
                offset += size

    def sums(self, k, start, stop):
        """Chunk ``k``'s share (heads, columns, n) of every row's readout
        sums ``[E @ y, rowsum E]``: the pairs of its rows with the rows
        after them."""
        H, _, n = self.keys.shape
        sums = np.zeros((H, self.V.shape[0], n), dtype=self.keys.dtype)
        for r0, _, K in self._strips(k, start, stop):
            self.kernels.pair_weights(K, r0, r0, self.V, sums)
        return sums

    def products(self, k, start, stop, L):
        """Chunk ``k``'s share (heads, n, d + 1) of ``C @ [Z, 1]``, ``L``
        the rows' ``[a, -c]`` (heads, columns, n)."""
        H, n, d1 = self.Z1.shape
        CZ = np.zeros((H, n, d1), dtype=self.Z1.dtype)
        for r0, r1, K in self._strips(k, start, stop, scored=not self.kept):
            self.kernels.pair_gradient(K, r0, r0, L, self.V, self.kept)
            CZ[:, r0:r1] += np.matmul(K, self.Z1[:, r0:])
            CZ[:, r0:] += np.matmul(np.swapaxes(K, 1, 2), self.Z1[:, r0:r1])
        return CZ

    def shifted_weights(self, h, rows):
        """``(block, E)`` for blocks of the rows ``rows`` (a strip's size
        each): head ``h``'s leave-one-out weights of the block's rows on
        every row, shifted by each row's largest logit."""
        H, d2, n = self.keys.shape
        step = _strip_rows(n, 1, self.keys.dtype.itemsize)
        log_w = log_weights(self.w, xp=np)
        for b0 in range(0, rows.size, step):
            block = rows[b0 : b0 + step]
            # z_i . z_j - |z_j|^2 / 2 + log w_j
            logits = self.Z1[h, block] @ self.keys[h, : d2 - 1]
            logits += log_w
            logits[np.arange(block.size), block] = -math.inf
            logits -= np.max(logits, axis=1, keepdims=True)
            own = np.full(block.size, -1, dtype=np.int64)
            yield block, self.kernels.exp_tile(logits, own, 0)
