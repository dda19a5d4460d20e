"""Training rows that repeat a query exactly, and the blend of their mean
target into the prediction (``duplicate_weight``).

A query identical to training rows gets ``(1 - rho) f(x) + rho m(x)``, with
``f`` the heads' NW estimate and ``m`` the weighted mean target of those
rows; other queries get ``f(x)``. ``rho`` is learned from the training rows
that have copies, by the leave-one-out error (see ``fit_duplicate_weight``).

Rows are matched by a lexicographic sort of the rows (stable argsorts, one
per column), written against the array API, so the lookup runs on the
fitted arrays' device.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np
from scipy import sparse

from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.scaling import power_of_two_scale


def _lexsort_rows(A, *, xp):
    """Permutation that sorts the rows of ``A`` lexicographically (stable)."""
    order = xp.arange(A.shape[0], device=device(A))
    for j in range(A.shape[1] - 1, -1, -1):
        keys = xp.take(A[:, j], order, axis=0)
        order = xp.take(order, xp.argsort(keys, stable=True), axis=0)
    return order


def _groups(A, *, xp):
    """Groups of identical rows of ``A``: ``(order, starts, ends, group)``.

    ``order`` sorts the rows; in sorted order group ``g`` holds positions
    ``starts[g]:ends[g]``; ``group[i]`` is the group of row ``i`` (in ``A``'s
    order).
    """
    order = _lexsort_rows(A, xp=xp)
    A_sorted = xp.take(A, order, axis=0)
    new = xp.any(A_sorted[1:, :] != A_sorted[:-1, :], axis=1)
    new, starts, ends = _runs(new, xp=xp)
    group_sorted = xp.cumulative_sum(xp.astype(new, xp.int64)) - 1
    # argsort of a permutation is its inverse.
    group = xp.take(group_sorted, xp.argsort(order), axis=0)
    return order, starts, ends, group


def _runs(changes, *, xp):
    """Runs of equal neighbours in a sorted sequence, from ``changes`` (n - 1,),
    whether each element differs from the one before: ``(new, starts, ends)``
    with ``new`` (n,) true where a run starts, and each run's start and end
    positions."""
    dev = device(changes)
    new = xp.concat([xp.ones(1, dtype=xp.bool, device=dev), changes])
    starts = xp.nonzero(new)[0]
    n = xp.asarray([new.shape[0]], dtype=starts.dtype, device=dev)
    return new, starts, xp.concat([starts[1:], n])


def _segment_sums(values, order, starts, ends, *, xp):
    """Sums of ``values`` (n, ...) over each group, in float64."""
    v = xp.astype(xp.take(values, order, axis=0), xp.float64)
    zero = xp.zeros((1,) + tuple(v.shape[1:]), dtype=xp.float64, device=device(v))
    cum = xp.concat([zero, xp.cumulative_sum(v, axis=0)], axis=0)
    return xp.take(cum, ends, axis=0) - xp.take(cum, starts, axis=0)


class DuplicateIndex:
    """The distinct training rows, each with its rows' weighted target sum,
    total weight and number of rows of positive weight.

    Parameters
    ----------
    X : array of shape (n, p)
        Training rows, as given to ``fit`` (after validation).
    Y : array of shape (n, t)
        Training targets.
    sw : array of shape (n,)
        Sample weights.
    """

    def __init__(self, X, Y, sw, *, xp):
        order, starts, ends, group = _groups(X, xp=xp)
        self.rows = xp.take(xp.take(X, order, axis=0), starts, axis=0)
        self.target_sums = _segment_sums(sw[:, None] * Y, order, starts, ends, xp=xp)
        self.weights = _segment_sums(sw, order, starts, ends, xp=xp)
        self.counts = _segment_sums(
            xp.astype(sw > 0, xp.int64), order, starts, ends, xp=xp
        )
        self.train_group = group

    def collapse(self, X, Y, sw, *, xp):
        """``(X, Y, sw, group)``: each group of identical rows merged into one
        row of the group's total weight and weighted mean target (rows of
        zero weight dropped), with the group of each merged row (compare
        ``train_group``); the arrays themselves and None when no rows repeat,
        or when fewer than two rows would be left.

        NW attention on the merged rows is the same function as on the
        originals (copies sit at the same place), but leave-one-out on them
        leaves out a row together with its copies.
        """
        n_groups = int(xp.sum(xp.astype(self.counts > 0, xp.int64)))
        n_positive = int(xp.sum(xp.astype(sw > 0, xp.int64)))
        if n_groups == n_positive or n_groups < 2:
            return X, Y, sw, None
        order = xp.argsort(self.train_group, stable=True)
        groups = xp.take(self.train_group, order, axis=0)
        _, starts, ends = _runs(groups[1:] != groups[:-1], xp=xp)
        sums = _segment_sums(sw[:, None] * Y, order, starts, ends, xp=xp)
        weights = _segment_sums(sw, order, starts, ends, xp=xp)
        keep = xp.nonzero(weights > 0)[0]
        weights = xp.take(weights, keep, axis=0)
        first = xp.take(xp.take(order, starts, axis=0), keep, axis=0)
        Y_merged = xp.take(sums, keep, axis=0) / weights[:, None]
        return (
            X.take(first),
            xp.astype(Y_merged, Y.dtype),
            xp.astype(weights / xp.sum(weights), sw.dtype),
            xp.take(self.train_group, first, axis=0),
        )

    def lookup(self, Q, *, xp):
        """Group of each query row (an index into ``rows``) and whether a
        training row of positive weight equals it: ``(group, found)``."""
        G = self.rows.shape[0]
        Q = xp.astype(Q, self.rows.dtype)
        A = xp.concat([self.rows, Q], axis=0)
        order, starts, ends, group = _groups(A, xp=xp)
        # Each group holds at most one of the (distinct) training rows.
        position = xp.arange(A.shape[0], device=device(A))
        is_train = xp.astype(position < G, xp.int64)
        n_train = _segment_sums(is_train, order, starts, ends, xp=xp)
        index = _segment_sums(is_train * position, order, starts, ends, xp=xp)
        q_group = group[G:]
        found = xp.take(n_train, q_group, axis=0) > 0
        train_row = xp.astype(xp.take(index, q_group, axis=0), xp.int64)
        train_row = xp.where(found, train_row, xp.zeros_like(train_row))
        found = found & (xp.take(self.counts, train_row, axis=0) > 0)
        return train_row, found

    def means(self, group, dtype, *, xp):
        """Weighted mean target of each group in ``group``, shape (m, t)."""
        sums = xp.take(self.target_sums, group, axis=0)
        weights = xp.take(self.weights, group, axis=0)
        safe = xp.where(weights > 0, weights, xp.ones_like(weights))
        return xp.astype(sums / safe[:, None], dtype)

    def left_out_means(self, rows, Y, w_rows, *, xp):
        """For training rows ``rows`` (of weights ``w_rows``): the weighted
        mean target of the *other* rows equal to each, and whether there is
        one, ``(means, found)``."""
        group = xp.take(self.train_group, rows, axis=0)
        w = xp.astype(w_rows, xp.float64)
        y = xp.astype(xp.take(Y, rows, axis=0), xp.float64)
        own = xp.astype(w > 0, xp.float64)
        found = xp.take(self.counts, group, axis=0) - own > 0
        sums = xp.take(self.target_sums, group, axis=0) - w[:, None] * y
        weights = xp.take(self.weights, group, axis=0) - w
        safe = xp.where(found & (weights > 0), weights, xp.ones_like(weights))
        return xp.astype(sums / safe[:, None], Y.dtype), found

    def copy_weights(self, group, found, sw, *, xp):
        """Dense (m, n) weights that average each found query's copies (rows
        of zeros for the others); ``sw`` are the training rows' weights."""
        member = (self.train_group[None, :] == group[:, None]) & found[:, None]
        C = xp.astype(member, sw.dtype) * sw[None, :]
        total = xp.sum(C, axis=1, keepdims=True)
        return C / xp.where(total > 0, total, xp.ones_like(total))

    def sparse_copy_weights(self, group, found, sw):
        """``copy_weights`` as a host ``scipy.sparse.csr_array`` (float64),
        from host ``group``, ``found`` and training-row weights ``sw``."""
        train_group = to_numpy(self.train_group)
        sw = np.asarray(sw, dtype=np.float64)
        order = np.argsort(train_group, kind="stable")
        start = np.searchsorted(train_group[order], group, side="left")
        stop = np.searchsorted(train_group[order], group, side="right")
        count = np.where(found, stop - start, 0)
        query = np.repeat(np.arange(group.shape[0]), count)
        offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        column = order[np.repeat(start, count) + offset]
        value = sw[column]
        total = np.bincount(query, value, minlength=group.shape[0])
        value = value / np.where(total > 0, total, 1.0)[query]
        shape = (group.shape[0], train_group.shape[0])
        return sparse.csr_array((value, (query, column)), shape=shape)


def fit_duplicate_weight(Y, F, M, found, sw):
    """``rho`` in [0, 1] minimising the weighted squared leave-one-out error
    of ``(1 - rho) F + rho M`` on the rows with copies (``found``); each
    output counts in units of its variance. 0 when no row has a copy.

    All arguments are host or device arrays of the leave-one-out rows:
    ``Y``, ``F``, ``M`` (m, t), ``found`` (m,), ``sw`` (m,).
    """
    Y, F, M = (to_numpy(a).astype(np.float64) for a in (Y, F, M))
    s = power_of_two_scale(Y)  # exact; keeps the squares finite
    Y, F, M = Y / s, F / s, M / s
    w = to_numpy(sw).astype(np.float64) * to_numpy(found).astype(np.float64)
    if not np.any(w > 0):
        return 0.0
    scale = np.var(Y, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    a = ((Y - F) * (M - F) / scale) @ np.ones(Y.shape[1])
    b = ((M - F) ** 2 / scale) @ np.ones(Y.shape[1])
    denominator = float(w @ b)
    # Copies' means that equal the NW estimates (up to rounding) leave rho
    # undetermined and change nothing: no blend.
    residual = float(w @ (((Y - F) ** 2 / scale) @ np.ones(Y.shape[1])))
    if not (denominator > 1e-12 * residual and math.isfinite(denominator)):
        return 0.0
    return float(np.clip((w @ a) / denominator, 0.0, 1.0))


def blend(F, M, found, rho, *, xp):
    """``(1 - rho) F + rho M`` on the rows with copies, ``F`` elsewhere."""
    return xp.where(found[:, None], (1.0 - rho) * F + rho * M, F)
