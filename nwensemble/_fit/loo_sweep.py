"""The softmax heads' leave-one-out loss and gradient on the host, through
the compiled kernels: one sweep over blocks of query rows.

Each block's weights are formed for every head (score product, exp, the
readout's sums), turned in place into the loss's derivative in the logits
``G`` (which needs only the block's own rows: the ensemble's residual of a
row is known once every head has weighed that row), and multiplied out
(``G Z`` and ``Z^T G``) while the block is in cache. No (n, n) block is
kept, and the products take ``3d + 2`` multiply-adds per pair of rows
against the ``5d + 6`` of the scores, ``E @ [Y Z, Z, Y, 1]`` and ``V^T E``
on the blocks' path (see ``loo_loss``).
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from nwensemble._fit.loo_pairs import loo_pairs
from nwensemble._fit.sweep_ensemble_loss import (
    add_in_order,
    chunk_count,
    ensemble_loss,
    ensemble_upstream,
    rows_within,
)
from nwensemble._shared.attention import (
    largest_safe_entry,
    log_weights,
    underflow_row_sum,
)
from nwensemble._shared.host_threads import blas_single_threaded, map_on_host_threads

# Weights of one block, all heads together, at most this many bytes: the
# block stays in a core's L2 cache between its passes, and its products
# are large enough for BLAS (see the performance notes).
_BLOCK_BYTES = 1 << 20
# Whether evaluations go over each pair of rows once (``loo_pairs``) before
# the rows' blocks: False keeps the row sweep alone, for comparisons.
PAIRS = True


def loo_sweep(
    Z, Y, sw, *, kernels, n_heads, return_grad, workspace, diversity, threaded_scores
):
    """``loo_loss.loo_loss_and_grad_z`` for the softmax kernel on NumPy
    arrays: the loss (a NumPy scalar) and ``dloss / dZ`` (None without
    ``return_grad``).

    ``kernels`` is the ``compiled`` module; ``threaded_scores`` the least
    rows x rows x heads from which the chunks run on the host's threads.
    """
    n = Z.shape[0]
    stable = workspace is not None and workspace.get("stable", False)
    stable = stable or float(np.max(np.abs(Z))) > largest_safe_entry(Z, xp=np)
    if not stable and PAIRS:
        # Each pair of rows once (see ``loo_pairs``); where more than a
        # quarter of the rows' sums underflow, the stable path below, now
        # and in later evaluations.
        result = loo_pairs(
            Z,
            Y,
            sw,
            kernels=kernels,
            n_heads=n_heads,
            return_grad=return_grad,
            workspace=workspace,
            diversity=diversity,
            threaded_scores=threaded_scores,
        )
        if result is not None:
            return result
        stable = True
        if workspace is not None:
            workspace["stable"] = True
    sweep = _Sweep(Z, Y, sw, n_heads, kernels, return_grad, diversity, stable)
    rows = _block_rows(n, n_heads, Z.dtype.itemsize)
    n_chunks = chunk_count(n)
    bounds = [n * k // n_chunks for k in range(n_chunks + 1)]

    def chunk(k):
        # Each chunk keeps its block's buffer in the workspace across
        # evaluations (a chunk runs on one thread at a time).
        space = None if workspace is None else workspace.setdefault(("sweep", k), {})
        return sweep.chunk(bounds[k], bounds[k + 1], rows, space)

    # As the heads of the blocks' path: on threads from a size on, whatever
    # ``products_on_threads`` says (the chunks' sums, in a fixed order, do
    # not depend on it).
    threads = n * n * n_heads >= threaded_scores
    with blas_single_threaded():
        parts = map_on_host_threads(chunk, range(n_chunks), xp=np, threads=threads)
    if workspace is not None and any(part.underflowed for part in parts):
        # The next evaluation (nearly the same projection) takes the stable
        # path at once.
        workspace["stable"] = True
    Y_heads = np.concatenate([part.Y_heads for part in parts], axis=1)
    loss = ensemble_loss(Y_heads, Y, sw, diversity)
    if not return_grad:
        return loss, None
    GZ = np.concatenate([part.GZ for part in parts], axis=1)
    colsum = add_in_order([part.colsum for part in parts])
    GtZ = add_in_order([part.GtZ for part in parts])
    # Rows of G sum to zero (softmax is shift invariant): head h's gradient
    # in its rows is -(diag(colsum G) Z - G Z - G^T Z).
    grad = GZ + np.swapaxes(GtZ, 1, 2) - colsum[:, :, None] * sweep.Z
    return loss, np.concatenate(list(grad), axis=1)


def _block_rows(n, n_heads, itemsize):
    """Query rows per block: a power of two from 8 to 256 whose weights
    (rows x n x heads) fit in ``_BLOCK_BYTES``."""
    return rows_within(_BLOCK_BYTES, n * n_heads * itemsize)


class _ChunkResult:
    """One chunk's rows: every head's estimates, ``G Z``; over all keys,
    its share of ``G``'s column sums and of ``Z^T G``."""

    __slots__ = ("Y_heads", "GZ", "colsum", "GtZ", "underflowed")


class _Sweep:
    """What every chunk of rows reads, and the pass over one chunk.

    The heads' score operands are stacked (heads first): queries ``[z, 1,
    -|z|^2 / 2]`` against keys ``[z, bias, 1]`` give the full scores ``-|q
    - z|^2 / 2 + log(w / max w)``, never positive, so the exp needs no row
    maximum; the first ``d + 1`` columns alone give the logits that the
    stable path shifts by their row maximum.
    """

    def __init__(self, Z, Y, sw, n_heads, kernels, return_grad, diversity, stable):
        n = Z.shape[0]
        d = Z.shape[1] // n_heads
        self.Z = np.ascontiguousarray(np.moveaxis(Z.reshape(n, n_heads, d), 1, 0))
        log_sw = log_weights(sw, xp=np)
        half_norms = 0.5 * np.sum(self.Z * self.Z, axis=2)  # (heads, n)
        bias = (log_sw - np.max(log_sw)) - half_norms
        ones = np.ones((n_heads, n, 1), dtype=Z.dtype)
        self.queries = np.concatenate([self.Z, ones, -half_norms[:, :, None]], axis=2)
        self.keys = np.ascontiguousarray(
            np.swapaxes(np.concatenate([self.Z, bias[:, :, None], ones], axis=2), 1, 2)
        )
        self.Y, self.YT, self.sw = Y, np.ascontiguousarray(Y.T), sw
        self.kernels = kernels
        self.return_grad = return_grad
        self.diversity = diversity
        self.stable = stable
        self.underflow = underflow_row_sum(Z.dtype, xp=np)

    def chunk(self, start, stop, rows, space):
        """Loss terms and gradient parts of rows ``start:stop`` (a
        ``_ChunkResult``), in blocks of ``rows``; ``space`` (a dict or
        None) keeps the block's buffer."""
        H, n, d = self.Z.shape
        t = self.Y.shape[1]
        dtype = self.Z.dtype
        result = _ChunkResult()
        result.underflowed = False
        result.Y_heads = np.empty((H, stop - start, t), dtype=dtype)
        if self.return_grad:
            result.GZ = np.empty((H, stop - start, d), dtype=dtype)
            result.colsum = np.zeros((H, n), dtype=dtype)
            result.GtZ = np.zeros((H, d, n), dtype=dtype)
            product = np.empty((H, d, n), dtype=dtype)
        E = None if space is None else space.get("E")
        if E is None or E.shape != (H, rows, n) or E.dtype != dtype:
            E = np.empty((H, rows, n), dtype=dtype)
            if space is not None:
                space["E"] = E
        sums = np.empty((H, rows, t + 1), dtype=dtype)
        for r0 in range(start, stop, rows):
            r1 = min(r0 + rows, stop)
            block_E, block_sums = E[:, : r1 - r0], sums[:, : r1 - r0]
            result.underflowed |= self._weights(r0, r1, block_E, block_sums)
            s = block_sums[:, :, t:]
            Y_heads = block_sums[:, :, :t] / s
            result.Y_heads[:, r0 - start : r1 - start] = Y_heads
            if not self.return_grad:
                continue
            U = ensemble_upstream(
                Y_heads, self.Y[r0:r1], self.sw[r0:r1], self.diversity
            )
            a = U / s
            c = np.sum(U * Y_heads, axis=2) / s[:, :, 0]
            G = self.kernels.gradient_block(block_E, a, c, self.YT, result.colsum)
            np.matmul(G, self.Z, out=result.GZ[:, r0 - start : r1 - start])
            np.matmul(np.swapaxes(self.Z[:, r0:r1], 1, 2), G, out=product)
            result.GtZ += product
        return result

    def _weights(self, r0, r1, E, sums):
        """Every head's leave-one-out weights of rows ``r0:r1`` into ``E``
        and their sums ``[E @ Y, rowsum E]`` into ``sums``; whether a row
        underflowed on the fast path (the block is then redone on the
        stable one)."""
        kernels = self.kernels
        if not self.stable:
            np.matmul(self.queries[:, r0:r1], self.keys, out=E)
            kernels.softmax_block(E, r0, self.YT, sums)
            if float(np.min(sums[:, :, -1])) >= self.underflow:
                return False
        d1 = self.Z.shape[2] + 1
        np.matmul(self.queries[:, r0:r1, :d1], self.keys[:, :d1], out=E)
        rows = np.arange(r1 - r0)
        E[:, rows, r0 + rows] = -math.inf
        E -= np.max(E, axis=2, keepdims=True)
        kernels.softmax_block(E, r0, self.YT, sums)
        return not self.stable
