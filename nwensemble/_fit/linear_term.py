"""A global linear term: a ridge on a table's numbers and levels, with the
exact leave-one-out prediction of every training row.

The design has a column per numeric feature (missing values filled with
the feature's weighted mean, after the features' power transform, see
``power_map``, then standardised) and, for a feature with missing values,
an indicator of them; and a column per code of each categorical feature
(its frequent levels, the infrequent level and the missing one, as the
table's encoding numbers them; see ``_shared.table``). Each feature that
the transform warps also has a column of its own values (``raw``;
standardised, held within the training rows' range): a trend straight
along the feature itself, which the warp bends (a fare along the
distance, whose long tail a squashing exponent folds), stays within the
ridge's reach. The ridge's penalty is the one of ``PENALTIES`` with the
least weighted leave-one-out error; each row's leave-one-out residual is
its residual divided by ``1 - h`` (``h`` its leverage), exactly that of
the ridge fitted without the row at the same penalty.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._fit.column_types import encode_on_host, fit_row_encoder
from nwensemble._shared.power_map import fit_power, power_transform

# Penalties relative to the design's weighted second moments (the weights
# sum to one): from nearly least squares to nearly the mean.
PENALTIES = np.logspace(-6, 2, 17)


@dataclass(frozen=True, eq=False)
class _Design:
    """The design's fitted parts: the numeric features' power transform
    (``power_map.fit_power``; None without numeric features), each one's
    fill for a missing value and standardisation (its weighted mean and
    spread after the transform), the numeric features that get a
    missing-value indicator, the codes per categorical feature, and the
    warped features that also enter as they are (``raw``: their indices,
    fills, scales and training range; None without)."""

    power: Any
    fill: np.ndarray
    scale: np.ndarray
    flagged: np.ndarray
    n_codes: tuple
    raw: Any = None

    @classmethod
    def fit(cls, encoded, w, *, rng, raw):
        """The parts fitted to encoded training rows (a ``Table`` of NumPy
        arrays) with weights ``w`` summing to one; with ``raw``, the warped
        features' own columns too."""
        N = encoded.numeric
        missing = np.isnan(N)
        flagged = np.flatnonzero(np.any(missing[w > 0], axis=0))
        power = None
        P = N
        if N.shape[1]:
            # The power transform's fit sees numbers: the missing ones at
            # their feature's mean.
            filled = np.where(missing, observed_mean(N, missing, w), N)
            power = fit_power(filled, w, rng=rng)
            P = power_transform(filled, power, xp=np)
        fill = observed_mean(P, missing, w)
        spread = np.sqrt(observed_mean((P - fill) ** 2, missing, w))
        scale = np.where(spread > 0, spread, 1.0)
        own = None
        if raw and power is not None:
            own = _RawColumns.fit(N, missing, w, np.flatnonzero(power[3] != 1.0))
        return cls(power, fill, scale, flagged, tuple(encoded.n_codes), own)

    def of(self, encoded):
        """The design of encoded rows (a ``Table`` of NumPy arrays)."""
        N = encoded.numeric
        missing = np.isnan(N)
        P = N
        if self.power is not None:
            P = power_transform(np.where(missing, 0.0, N), self.power, xp=np)
        P = (np.where(missing, self.fill, P) - self.fill) / self.scale
        parts = [P, missing[:, self.flagged].astype(np.float64)]
        if self.raw is not None:
            parts.append(self.raw.of(N))
        codes = np.asarray(encoded.codes)
        for j, n_codes in enumerate(self.n_codes):
            parts.append((codes[:, j : j + 1] == np.arange(n_codes)).astype(np.float64))
        return np.concatenate(parts, axis=1)


@dataclass(frozen=True, eq=False)
class _RawColumns:
    """The columns of features ``columns`` as they are: each clipped to its
    training rows' range (a straight trend is not carried beyond the rows
    that showed it), its missing values at its weighted mean, standardised."""

    columns: np.ndarray
    low: np.ndarray
    high: np.ndarray
    fill: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, N, missing, w, columns):
        N, missing = N[:, columns], missing[:, columns]
        seen = missing | (w[:, None] <= 0)
        low = np.min(np.where(seen, np.inf, N), axis=0)
        high = np.max(np.where(seen, -np.inf, N), axis=0)
        fill = observed_mean(N, missing, w)
        spread = np.sqrt(observed_mean((N - fill) ** 2, missing, w))
        return cls(columns, low, high, fill, np.where(spread > 0, spread, 1.0))

    def of(self, N):
        N = N[:, self.columns]
        held = np.clip(N, self.low, self.high)
        return (np.where(np.isnan(N), self.fill, held) - self.fill) / self.scale


@dataclass(frozen=True, eq=False)
class LinearTerm:
    """A fitted ridge on the design of the module's notes.

    Attributes
    ----------
    encoder : TableEncoder or NumberColumns
        The encoding of the training rows' columns.
    design : _Design
        The design's fitted transform.
    coef : ndarray of shape (n_columns, n_outputs)
        The ridge's coefficients on the centred design.
    center : ndarray of shape (n_columns,)
        The design's weighted column means.
    intercept : ndarray of shape (n_outputs,)
    penalty : float
    """

    encoder: Any
    design: _Design
    coef: np.ndarray
    center: np.ndarray
    intercept: np.ndarray
    penalty: float

    @classmethod
    def fit(cls, X, Y, sw, *, categorical_features, table, rng, raw=True):
        """The term fitted to training rows ``X`` (validated: a table where
        ``table``, with categorical columns as ``categorical_features``
        says, else a floating array of any namespace), targets ``Y`` and
        weights ``sw`` (NumPy, (n, t) and (n,)); ``raw=False`` leaves out
        the warped features' own columns (the module's notes). Returns
        ``(term, in_sample, left_out)``: the term and its (n, t) float64
        predictions of the training rows, fitted with each row and without
        it."""
        Y = np.asarray(Y, dtype=np.float64)
        w = np.asarray(sw, dtype=np.float64)
        w = w / w.sum()
        encoder = fit_row_encoder(
            X, w, categorical_features=categorical_features, table=table
        )
        encoded = encode_on_host(encoder, X)
        design = _Design.fit(encoded, w, rng=rng, raw=raw)
        A = design.of(encoded)
        center = w @ A
        A = A - center
        Y_mean = w @ Y
        Yc = Y - Y_mean
        penalty, coef, leverage = _ridge(A, Yc, w)
        fitted = Yc - A @ coef
        in_sample = Y - fitted
        left_out = Y - fitted / (1.0 - leverage)[:, None]
        term = cls(encoder, design, coef, center, Y_mean, penalty)
        return term, in_sample, left_out

    def predict(self, X):
        """The term at rows ``X`` (validated as at fit): (m, t) float64."""
        A = self.design.of(encode_on_host(self.encoder, X)) - self.center
        return self.intercept + A @ self.coef


def observed_mean(V, missing, w):
    """Each column's mean of ``V`` over its rows not ``missing``, weighted
    by ``w`` (0 for a column missing on every row)."""
    observed = np.where(missing, 0.0, w[:, None])
    total = np.maximum(observed.sum(axis=0), np.finfo(float).tiny)
    return np.sum(observed * np.where(missing, 0.0, V), axis=0) / total


def _ridge(A, Yc, w):
    """The penalty of ``PENALTIES`` (times the mean of the weighted design's
    second moments) with the least weighted leave-one-out error (each
    output's relative to its weighted variance), its coefficients and
    every row's leverage, for the centred design ``A`` (n, k), centred
    targets ``Yc`` (n, t) and weights ``w`` summing to one."""
    M = A.T @ (w[:, None] * A)
    s, V = np.linalg.eigh(M)
    s = np.maximum(s, 0.0)
    AV = A @ V
    rhs = V.T @ (A.T @ (w[:, None] * Yc))
    variance = np.maximum(w @ (Yc * Yc), np.finfo(float).tiny)
    trace = float(np.trace(M))
    # A design without spread (constant features) has nothing to fit.
    unit = trace / M.shape[0] if trace > 0 else 1.0
    best = None
    for relative in PENALTIES:
        penalty = relative * unit
        inverse = 1.0 / (s + penalty)
        coef = V @ (inverse[:, None] * rhs)
        # The intercept's share of the leverage is w_i (weights sum to one).
        leverage = w * (1.0 + np.sum(AV * AV * inverse, axis=1))
        leverage = np.minimum(leverage, 1.0 - 1e-12)
        residuals = (Yc - A @ coef) / (1.0 - leverage)[:, None]
        error = float(np.sum((w @ (residuals * residuals)) / variance))
        if best is None or error < best[0]:
            best = (error, penalty, coef, leverage)
    return float(best[1]), best[2], best[3]
