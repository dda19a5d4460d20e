"""Series of rows: training rows equal on every feature but one numeric
feature, and a query's value on the line between its series' nearest rows.

A *series* along a numeric feature ``j`` is a set of training rows that
hold the same value of every other feature (numbers equal, levels the
same, missing where missing), as a designed experiment repeats one setting
at several values of one factor (a concrete mix tested at several ages).
Its rows at one value of ``j`` make a *knot* (their weighted mean target);
a query of the series reads the knot at its own value, or the line between
the knots on either side of it, along ``j`` through the feature's power
transform (``power_map``: where the heads' feature map starts). A query
outside its series' range, or of no series, has no line.

This is a Nadaraya–Watson estimate of its own kind: its key is exact on
every feature but ``j`` (no row of another setting takes part), its readout
the local line through the nearest knot on each side. Where a row has lines
along several features, their mean is its estimate ``s``. The estimate
enters a prediction ``f`` as ``f + weight * (s - f)``, the weight (within
[0, 1], per output) by least squares of the training rows' leave-one-out
residuals of ``f`` on their leave-one-out gaps ``s - f`` (each row's line
drawn without it): where the series carry nothing that ``f`` does not
read, the weight is near zero.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._fit.column_types import encode_on_host, fit_row_encoder
from nwensemble._fit.linear_term import observed_mean
from nwensemble._shared.power_map import fit_power, power_transform

# splitmix64's finaliser, which spreads a value's bits over its hash.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True, eq=False)
class _Line:
    """The series along numeric feature ``feature``: their settings (one
    cell per setting of the other features: the sorted hashes of their
    values, ``cell_hash``, and each cell's key row, ``cell_rows``, to
    confirm a match) and their knots, sorted by cell, then coordinate
    (``knot_cell``; ``knot_rank``, the coordinate's rank among
    ``distinct_t``; ``knot_value`` (k, t))."""

    feature: int
    column: int
    cell_hash: np.ndarray
    cell_rows: np.ndarray
    distinct_t: np.ndarray
    knot_cell: np.ndarray
    knot_rank: np.ndarray
    knot_value: np.ndarray

    @property
    def knot_t(self):
        """Each knot's coordinate."""
        return self.distinct_t[self.knot_rank]

    def at(self, key, cell_of_row, t):
        """The line's estimate (m, t) at query rows of copy keys ``key`` (m,
        f), hashes of their other features ``cell_of_row`` and coordinates
        ``t`` (m,): the knot at ``t``, or the line between the knots on
        either side; NaN where the query has no series or lies outside its
        series' range."""
        out = np.full((key.shape[0], self.knot_value.shape[1]), np.nan)
        cell = _cells_of(self, key, cell_of_row)
        rows = np.flatnonzero((cell >= 0) & np.isfinite(t))
        if rows.size == 0:
            return out
        cell, t = cell[rows], t[rows]
        n_distinct = self.distinct_t.size
        rank = np.searchsorted(self.distinct_t, t)
        exact = rank < n_distinct
        exact[exact] = self.distinct_t[rank[exact]] == t[exact]
        # On one axis, cell by cell: a knot at twice its rank, a query
        # between two distinct values at the odd number between theirs.
        span = 2 * n_distinct + 2
        query = cell * span + 2 * rank - np.where(exact, 0, 1)
        knots = self.knot_cell * span + 2 * self.knot_rank
        at = np.searchsorted(knots, query)
        on_knot = exact & (at < knots.size)
        on_knot[on_knot] = knots[at[on_knot]] == query[on_knot]
        out[rows[on_knot]] = self.knot_value[at[on_knot]]
        off = ~on_knot
        out[rows[off]] = _between(self, at[off] - 1, at[off], cell[off], t[off])
        return out


@dataclass(frozen=True, eq=False)
class SeriesLines:
    """Fitted series lines of a table and their weight in a prediction
    (see the module's docstring).

    Attributes
    ----------
    encoder : TableEncoder or NumberColumns
        The encoding of the training rows' columns.
    columns : tuple of int
        The numeric features along which some series varies.
    power : tuple
        Their power transform (``power_map.fit_power``).
    lines : tuple of _Line
        One per numeric feature along which some series has two knots.
    weight : ndarray of shape (n_outputs,)
        Each output's weight of the lines' estimate, in [0, 1].
    """

    encoder: Any
    columns: tuple
    power: Any
    lines: tuple
    weight: np.ndarray

    @classmethod
    def fit(cls, X, Y, sw, fitted, *, categorical_features, table, rng):
        """The lines of training rows ``X`` (validated: a table where
        ``table``, else a floating array of any namespace) with targets
        ``Y`` (host (n, t)) and weights ``sw``, weighted against ``fitted``
        (host (n, t): the prediction's leave-one-out estimate of each row,
        NaN where it has none). Returns ``(lines, left_out)``: None where
        no series has two knots or every output's weight is zero, and each
        row's estimate from the lines drawn without it ((n, t), NaN where
        it has none)."""
        Y = np.asarray(Y, dtype=np.float64)
        w = np.asarray(sw, dtype=np.float64)
        encoder = fit_row_encoder(
            X, w, categorical_features=categorical_features, table=table
        )
        encoded = encode_on_host(encoder, X)
        N = np.asarray(encoded.numeric, dtype=np.float64)
        left_out = np.full(Y.shape, np.nan)
        if N.shape[1] == 0:
            return None, left_out
        key, hashes, row_hash = _hashed_keys(encoded)
        usable = ~np.isnan(N) & (w[:, None] > 0)
        columns = [
            j
            for j in range(N.shape[1])
            if _varies_within_a_cell(row_hash - hashes[:, j], N[:, j], usable[:, j])
        ]
        if not columns:
            return None, left_out
        # The transform of the features that vary within a series only.
        observed = ~np.isnan(N[:, columns])
        filled = np.where(
            observed, N[:, columns], observed_mean(N[:, columns], ~observed, w)
        )
        power = fit_power(filled, w, rng=rng)
        T = np.where(observed, power_transform(filled, power, xp=np), np.nan)
        lines, estimates = [], []
        for position, j in enumerate(columns):
            line, estimate = _fit_line(
                j, position, key, row_hash - hashes[:, j], T[:, position], Y, w
            )
            if line is not None:
                lines.append(line)
                estimates.append(estimate)
        if not lines:
            return None, left_out
        left_out = _mean_where_any(estimates)
        weight = _weights(left_out, fitted, Y, w)
        if not np.any(weight > 0):
            return None, left_out
        return cls(encoder, tuple(columns), power, tuple(lines), weight), left_out

    def estimate(self, X):
        """The lines' estimate (m, t) at rows ``X`` (validated as at fit):
        the mean of the lines that reach each row, NaN where none does."""
        encoded = encode_on_host(self.encoder, X)
        N = np.asarray(encoded.numeric, dtype=np.float64)[:, list(self.columns)]
        observed = ~np.isnan(N)
        T = power_transform(np.where(observed, N, 1.0), self.power, xp=np)
        T = np.where(observed, T, np.nan)
        key, hashes, row_hash = _hashed_keys(encoded)
        return _mean_where_any(
            [
                line.at(key, row_hash - hashes[:, line.feature], T[:, line.column])
                for line in self.lines
            ]
        )

    def adjust(self, X, prediction):
        """``prediction`` (host (m, t)) of rows ``X`` moved towards the
        lines' estimate there (see ``moved``)."""
        return self.moved(self.estimate(X), prediction)

    def moved(self, estimate, prediction):
        """``prediction`` moved towards the lines' ``estimate`` (both host
        (m, t)) by ``weight``, where the estimate exists."""
        return np.where(
            np.isnan(estimate),
            prediction,
            prediction + self.weight * (estimate - prediction),
        )


def _fit_line(j, column, key, cell_of_row, t, Y, w):
    """The ``_Line`` along numeric feature ``j`` (``column`` among the
    transformed ones) of the training rows (copy keys ``key``, the hashes
    of their other features ``cell_of_row``, coordinates ``t`` (NaN where
    missing), targets ``Y``, weights ``w``) and each row's estimate
    without it; ``(None, None)`` where no series has two knots."""
    rows = np.flatnonzero(np.isfinite(t) & (w > 0))
    cell_hash, first, cell = np.unique(
        cell_of_row[rows], return_index=True, return_inverse=True
    )
    cell_rows = key[rows[first]]
    # Rows whose hash matches a cell's but whose values do not (a 64-bit
    # collision, if ever) take no part.
    same = _equal_but(key[rows], cell_rows[cell], j)
    rows, cell = rows[same], cell[same]
    distinct_t, rank = np.unique(t[rows], return_inverse=True)
    knot_of, row_knot = np.unique(cell * distinct_t.size + rank, return_inverse=True)
    knot_cell = knot_of // distinct_t.size
    # No series with two knots: no line along this feature.
    if not np.any(knot_cell[1:] == knot_cell[:-1]):
        return None, None
    knot_rank = knot_of % distinct_t.size
    weight = np.bincount(row_knot, weights=w[rows], minlength=knot_of.size)
    total = np.stack(
        [
            np.bincount(row_knot, weights=w[rows] * Y[rows, k], minlength=knot_of.size)
            for k in range(Y.shape[1])
        ],
        axis=1,
    )
    line = _Line(
        feature=j,
        column=column,
        cell_hash=cell_hash,
        cell_rows=cell_rows,
        distinct_t=distinct_t,
        knot_cell=knot_cell,
        knot_rank=knot_rank,
        knot_value=total / weight[:, None],
    )
    estimate = np.full(Y.shape, np.nan)
    # A row that shares its knot reads the rest of the knot; a row alone
    # at its knot, the line between its neighbours.
    rest = weight[row_knot] - w[rows]
    shared = rest > 1e-12 * weight[row_knot]
    k = row_knot[shared]
    estimate[rows[shared]] = (
        total[k] - w[rows[shared], None] * Y[rows[shared]]
    ) / rest[shared, None]
    k = row_knot[~shared]
    estimate[rows[~shared]] = _between(
        line, k - 1, k + 1, knot_cell[k], t[rows[~shared]]
    )
    return line, estimate


def _between(line, left, right, cell, t):
    """The line between knots ``left`` and ``right`` at coordinates ``t``
    (m, t), where both are knots of ``cell``; NaN elsewhere."""
    out = np.full((t.shape[0], line.knot_value.shape[1]), np.nan)
    ok = (left >= 0) & (right < line.knot_cell.size)
    ok[ok] = (line.knot_cell[left[ok]] == cell[ok]) & (
        line.knot_cell[right[ok]] == cell[ok]
    )
    left, right = left[ok], right[ok]
    knot_t = line.knot_t
    share = (t[ok] - knot_t[left]) / (knot_t[right] - knot_t[left])
    low, high = line.knot_value[left], line.knot_value[right]
    out[ok] = low + share[:, None] * (high - low)
    return out


def _cells_of(line, key, cell_of_row):
    """Each query row's cell of ``line`` (-1 for none)."""
    cell = np.searchsorted(line.cell_hash, cell_of_row)
    found = cell < line.cell_hash.size
    found[found] = line.cell_hash[cell[found]] == cell_of_row[found]
    found[found] = _equal_but(key[found], line.cell_rows[cell[found]], line.feature)
    return np.where(found, cell, -1)


def _varies_within_a_cell(cell_of_row, values, usable):
    """Whether two ``usable`` rows of one cell (hash ``cell_of_row``) hold
    different ``values``."""
    h, v = cell_of_row[usable], values[usable]
    # Most tables of continuous features have no two rows in one cell.
    sorted_h = np.sort(h)
    if not np.any(sorted_h[1:] == sorted_h[:-1]):
        return False
    order = np.lexsort((v, h))
    h, v = h[order], v[order]
    return bool(np.any((h[1:] == h[:-1]) & (v[1:] != v[:-1])))


def _hashed_keys(encoded):
    """The encoded rows' copy keys (n, f), each value's hash and each row's
    hash of all its values."""
    key = np.asarray(encoded.copy_key(), dtype=np.float64)
    hashes = _column_hashes(key)
    return key, hashes, np.sum(hashes, axis=1, dtype=np.uint64)


def _column_hashes(key):
    """A 64-bit hash of each value of ``key`` (n, f), mixed per column: a
    row's hash of a set of columns is the sum of theirs (modulo 2**64)."""
    # + 0.0 makes -0.0 the same bits as 0.0.
    bits = np.ascontiguousarray(key + 0.0).view(np.uint64)
    z = bits + _GOLDEN * np.arange(1, key.shape[1] + 1, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


def _equal_but(a, b, j):
    """Whether rows ``a`` and ``b`` (m, f) hold the same values in every
    column but ``j``."""
    same = a == b
    same[:, j] = True
    return np.all(same, axis=1)


def _mean_where_any(estimates):
    """Per row, the mean of ``estimates`` (each (n, t), NaN for none) that
    have the row; NaN where none has it."""
    stack = np.stack(estimates)
    has = ~np.isnan(stack)
    count = has.sum(axis=0)
    total = np.where(has, stack, 0.0).sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _weights(left_out, fitted, Y, w):
    """Each output's weight in [0, 1]: the weighted least-squares slope of
    the residuals ``Y - fitted`` on the gaps ``left_out - fitted``, over
    the rows where both estimates exist."""
    gap = left_out - fitted
    rows = np.isfinite(gap) & (w[:, None] > 0)
    gap = np.where(rows, gap, 0.0)
    residual = np.where(rows, Y - np.where(rows, fitted, 0.0), 0.0)
    spread = w @ (gap * gap)
    fit = w @ (gap * residual)
    slope = np.divide(fit, spread, out=np.zeros_like(fit), where=spread > 0)
    return np.clip(slope, 0.0, 1.0)
