"""Sparse attention of compact kernels through a radius search in each head's space.

A compact head gives weight only to training rows within ``sqrt(2 k)`` of
the query in its learned space, often a few dozen of tens of thousands. A
k-d tree per head (scikit-learn's ``KDTree``, built in ``fit`` on the rows
with positive weight) finds them without touching the others; the weights
follow from the distances and form a sparse matrix, so prediction costs
O(m (log n + neighbours)) per head instead of O(m n).

The tree lives on the host. Prediction uses it for NumPy input
(``RadiusSearchPasses``, which the compact kernels choose); for arrays of
other namespaces (a GPU) prediction keeps the dense blocks on the device,
and only ``attention_weights`` (a host ``scipy.sparse`` result anyway) and
the fallback diagnostic use the tree.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from joblib import Parallel, delayed
from scipy import sparse
from sklearn.neighbors import KDTree
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

from nwensemble._shared.attention import EMPTY_ROW_SUMS
from nwensemble._shared.backend import to_numpy
from nwensemble._shared.passes import BlockPasses, head_sum, uniform_or

# KDTree leaf size (measured in the performance notes).
_LEAF_SIZE = 80
# Queries per task of the threaded search (the tree releases the GIL).
_SEARCH_CHUNK = 4096


class SupportIndex:
    """One compact head's training rows, searchable by radius.

    Parameters
    ----------
    Z : ndarray of shape (n, d)
        The head's projected training rows (host, float64).
    key_weight : ndarray of shape (n,)
        Sample weights relative to their maximum; rows of weight zero are
        left out of the tree (they never receive attention).
    kernel : CompactKernel
        The head's kernel (its radius and weights).
    """

    def __init__(self, Z, key_weight, kernel):
        self.kernel = kernel
        self.n_keys = Z.shape[0]
        rows = np.flatnonzero(key_weight > 0)
        # The tree keeps its points in the order given and reaches them
        # through an index: in curve order, a leaf's points lie together.
        self.rows = rows[locality_order(Z[rows])]
        self.weight = key_weight[self.rows]
        self.uniform = bool(np.all(self.weight == 1.0))
        self.tree = KDTree(Z[self.rows], leaf_size=_LEAF_SIZE)

    def weights(self, Q):
        """Unnormalised weights of queries ``Q`` (m, d) as a CSR array (m, n),
        and the boolean (m,) mask of queries whose support was empty: they
        get weight one on their nearest training row instead."""
        Q = np.asarray(Q, dtype=np.float64)
        order = locality_order(Q)
        found = _map_blocks(self.block_weights, Q.shape[0], Q[order])
        found = found or [self.block_weights(Q)]  # no queries: one empty block
        K = sparse.vstack([K for K, _ in found], format="csr")
        empty = np.concatenate([empty for _, empty in found])
        back = np.argsort(order)
        return K[back], empty[back]

    def block_weights(self, Q):
        """``weights`` of one block of queries, on the calling thread."""
        m = Q.shape[0]
        ind, dist = [], []  # the tree refuses an empty query
        if m:
            ind, dist = self.tree.query_radius(
                Q, self.kernel.radius, return_distance=True
            )
        counts = np.fromiter((a.shape[0] for a in ind), dtype=np.int64, count=m)
        cols = np.concatenate(ind) if m else np.zeros(0, dtype=np.int64)
        dist = np.concatenate(dist) if m else np.zeros(0)
        vals = self.kernel.sparse_weights(dist)
        if not self.uniform:
            vals *= self.weight[cols]
        indptr = np.concatenate([[0], np.cumsum(counts)])
        K = sparse.csr_array((vals, self.rows[cols], indptr), shape=(m, self.n_keys))
        sums = np.asarray(K.sum(axis=1)).ravel()
        empty = sums < _EMPTY_ROW_SUM
        if np.any(empty):
            K = self._with_fallback(K, Q, empty)
        return K, empty

    def _with_fallback(self, K, Q, empty):
        """``K`` with each empty row replaced by a one on its nearest key."""
        fell = np.flatnonzero(empty)
        _, nearest = self.tree.query(Q[fell], k=1)
        C = K.tocoo()
        keep = ~empty[C.row]
        rows = np.concatenate([C.row[keep], fell])
        cols = np.concatenate([C.col[keep], self.rows[nearest[:, 0]]])
        vals = np.concatenate([C.data[keep], np.ones(fell.shape[0])])
        return sparse.csr_array((vals, (rows, cols)), shape=K.shape)


# Row sums below this count as an empty support: the dense path's float64
# threshold (the sparse weights are computed in float64 whatever the input).
_EMPTY_ROW_SUM = EMPTY_ROW_SUMS[0]


def locality_order(P):
    """An order of the points ``P`` (m, d) along a Z-order (Morton) curve on
    a grid over their bounding box: points near in the order are near in
    space, so that consecutive radius searches reach the same tree nodes
    while they are in cache (cheap to compute and fair to any d; above 63
    dimensions the first 63 set the order)."""
    m, d = P.shape
    dims = min(d, 63)
    bits = min(16, 63 // max(dims, 1))
    if m < 2 or dims == 0:
        return np.arange(m)
    P = P[:, :dims]
    with np.errstate(invalid="ignore", over="ignore"):
        lo = np.min(P, axis=0)
        span = np.max(P, axis=0) - lo
        span = np.where(np.isfinite(span) & (span > 0), span, 1.0)
        cell = np.nan_to_num((P - lo) / span * (2**bits - 1))
    cell = np.clip(cell, 0, 2**bits - 1).astype(np.uint64)
    code = np.zeros(m, dtype=np.uint64)
    one = np.uint64(1)
    for b in range(bits):
        for j in range(dims):
            bit = (cell[:, j] >> np.uint64(b)) & one
            code |= bit << np.uint64(b * dims + j)
    return np.argsort(code, kind="stable")


def _map_blocks(func, m, *arrays):
    """``func`` on consecutive blocks of ``_SEARCH_CHUNK`` rows of ``arrays``,
    on one thread per core (the tree and scipy's sparse products release the
    GIL); the list of results in order, empty when ``m`` is 0."""
    blocks = [slice(s, min(s + _SEARCH_CHUNK, m)) for s in range(0, m, _SEARCH_CHUNK)]
    n_jobs = min(_openmp_effective_n_threads(), max(len(blocks), 1))
    return Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(func)(*(a[b] for a in arrays)) for b in blocks
    )


def build_support_index(Z, log_sw, *, n_heads, kernel):
    """A ``SupportIndex`` per head of projected training rows ``Z`` (n, H d)."""
    Z = to_numpy(Z).astype(np.float64)
    log_w = to_numpy(log_sw).astype(np.float64)
    key_weight = np.exp(log_w - log_w.max())
    d = Z.shape[1] // n_heads
    return [
        SupportIndex(Z[:, h * d : (h + 1) * d], key_weight, kernel)
        for h in range(n_heads)
    ]


def sparse_head_weights(Q, index, *, n_heads):
    """Every head's normalised weights for projected queries ``Q`` (m, H d):
    a list of CSR arrays (m, n) on the host, and the boolean (n_heads, m)
    fallback mask."""
    Q = to_numpy(Q).astype(np.float64)
    d = Q.shape[1] // n_heads
    heads, empty = [], []
    for h, head in enumerate(index):
        K, fell = head.weights(Q[:, h * d : (h + 1) * d])
        sums = np.asarray(K.sum(axis=1)).ravel()
        heads.append(sparse.diags_array(1.0 / sums) @ K)
        empty.append(fell)
    return heads, np.stack(empty, axis=0)


def sparse_attention(Q, index, *, n_heads, head_weights, head=None, dtype):
    """The normalised attention as one CSR array (m, n): head ``head``'s, or
    the heads' weighted sum (``head=None``)."""
    heads, _ = sparse_head_weights(Q, index, n_heads=n_heads)
    if head is not None:
        total = heads[head]
    else:
        total = head_sum(heads, [float(a) for a in head_weights])
    total = sparse.csr_array(total, dtype=dtype)
    total.eliminate_zeros()
    total.sort_indices()
    return total


def sparse_predict(Q, index, Y, *, n_heads, head_weights):
    """The ensemble's estimates (m, t) as float64 NumPy, from the sparse
    weights and ``Y`` (n, t), head by head and block by block of queries (in
    the head's curve order): memory holds the weights of the blocks in
    flight only, whatever the number of queries."""
    Q = to_numpy(Q).astype(np.float64)
    Y = to_numpy(Y).astype(np.float64)
    d = Q.shape[1] // n_heads
    per_head = []
    for h, (head, a) in enumerate(zip(index, head_weights)):

        def block(Qb, head=head, a=float(a)):
            K, _ = head.block_weights(Qb)
            sums = np.asarray(K.sum(axis=1)).ravel()
            return (a / sums)[:, None] * (K @ Y)

        Qh = Q[:, h * d : (h + 1) * d]
        order = locality_order(Qh)
        parts = _map_blocks(block, Q.shape[0], Qh[order])
        head_est = np.zeros((Q.shape[0], Y.shape[1]))
        if parts:
            head_est[order] = np.concatenate(parts)
        per_head.append(head_est)
    return head_sum(per_head)


class RadiusSearchPasses(BlockPasses):
    """``BlockPasses`` whose ensemble estimates attend only to the rows the
    radius search finds (the keys' ``support_index``); the other passes
    run in blocks."""

    def estimates(self, Q, head_weights=None):
        keys = self.keys
        Y_hat = sparse_predict(
            Q,
            keys.support_index,
            keys.Y,
            n_heads=keys.n_heads,
            head_weights=uniform_or(head_weights, keys.n_heads),
        )
        return Y_hat.astype(Q.dtype, copy=False)
