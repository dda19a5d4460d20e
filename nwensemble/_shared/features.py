"""The feature map the heads work in: centring, scaling and an optional
power transform per feature (``standardize='power'``: Box-Cox or
Yeo-Johnson); for a table with categorical features or missing values, the
numeric block and the embedding codes the projections act on (see
``design``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from nwensemble._shared.backend import device, namespace_of, to_numpy
from nwensemble._shared.conditional_fill import fill_missing, fit_correlation
from nwensemble._shared.design import Design
from nwensemble._shared.table import Table

# Candidate exponents; lambda = 1 is a linear map.
_LAMBDAS = np.round(np.arange(-2.0, 4.0001, 0.1), 10)
# Features less skewed than this (in size) keep lambda = 1.
_SKEW_TO_WARP = 0.5
# Rows used to choose the exponents.
_POWER_FIT_ROWS = 5000


def fit_scaling(X, w, *, standardize, xp):
    """Weighted centre and per-feature scale of ``X``, with weights ``w`` of
    shape (n, 1) or, one set per feature, (n, p), summing to one.

    The scale is the weighted standard deviation when ``standardize``, else
    one. It is computed after dividing by the column's largest magnitude, so
    features near 1e150 or 1e-150 neither overflow nor underflow; constant
    features (and subnormal spreads) get scale one.
    """
    center = xp.sum(w * X, axis=0)
    Xc = X - center
    if not standardize:
        return center, xp.ones_like(center)
    # A feature counts as constant when its spread is rounding noise of its
    # magnitude, or subnormal (not invertible into finite components_).
    max_abs = xp.max(xp.abs(Xc), axis=0)
    magnitude = xp.max(xp.abs(X), axis=0)
    eps = float(xp.finfo(X.dtype).eps)
    tiny = float(xp.finfo(X.dtype).smallest_normal)
    varies = (max_abs >= tiny) & (max_abs > 100 * eps * magnitude)
    max_abs = xp.where(varies, max_abs, xp.ones_like(max_abs))
    Xn = Xc / max_abs
    std = xp.sqrt(xp.sum(w * Xn * Xn, axis=0))
    std = xp.where(varies & (std > 0), std, xp.ones_like(std))
    return center, std * max_abs


def fit_power(X, sw, *, rng):
    """Per-feature power transform: kind, normaliser and exponent.

    Features that are positive on every training row get Box-Cox on ``x / g``
    (``g`` their geometric mean); the others Yeo-Johnson on ``x / r`` (``r``
    their root mean square). Both choices make the warped, standardised
    feature independent of the feature's unit. The exponent maximises the
    weighted profile log-likelihood ``-log(var(psi_lambda)) / 2 + (lambda - 1)
    * mean(J)`` (``J = log v`` for Box-Cox, ``sign(v) log(1 + |v|)`` for
    Yeo-Johnson) over a grid from -2 to 4, on at most ``_POWER_FIT_ROWS``
    rows. Features with fewer than three distinct values, or with weighted
    skewness below 0.5 in size, keep ``lambda = 1`` (a linear map).

    Returns float64 NumPy arrays ``(boxcox, norm, lower, lambdas)``; ``lower``
    is where Box-Cox inputs are clipped (a tenth of the smallest training
    value of ``v``).
    """
    X = to_numpy(X).astype(np.float64)
    w = to_numpy(sw).astype(np.float64)
    # Rows of weight zero take no part (as if removed).
    X, w = X[w > 0], w[w > 0]
    if X.shape[0] > _POWER_FIT_ROWS:
        rows = rng.choice(X.shape[0], _POWER_FIT_ROWS, replace=False, p=w / w.sum())
        X, w = X[rows], np.full(_POWER_FIT_ROWS, 1.0 / _POWER_FIT_ROWS)
    w = w / w.sum()
    boxcox = np.all(X > 0, axis=0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_abs = np.log(np.where(X > 0, X, 1.0))
        geo = np.exp(w @ log_abs)
        # over each column's largest magnitude first: X * X may overflow
        top = np.max(np.abs(X), axis=0)
        top = np.where(np.isfinite(top) & (top > 0), top, 1.0)
        rms = top * np.sqrt(w @ ((X / top) ** 2))
    rms = np.where(np.isfinite(rms) & (rms > 0), rms, 1.0)
    norm = np.where(boxcox, geo, rms)
    # Subnormal normalisers get one, as the linear map's spreads do: queries
    # divided by them would overflow.
    usable = np.isfinite(norm) & (norm >= np.finfo(X.dtype).smallest_normal)
    norm = np.where(usable, norm, 1.0)
    V = X / norm
    a = np.where(boxcox, np.log(np.where(V > 0, V, 1.0)), np.log1p(np.abs(V)))
    # As in power_transform: clip where a power of the value would overflow.
    limit = 0.5 * math.log(float(np.finfo(np.float64).max)) / 4.0
    a = np.clip(a, -limit, limit)
    J = np.where(boxcox, a, np.sign(V) * a)
    few_values = np.array([np.unique(col).shape[0] < 3 for col in X.T])
    # Symmetric features are left linear (warping Friedman #1's uniform
    # features raised its test error): only features whose weighted skewness
    # exceeds _SKEW_TO_WARP in size are warped, and only theirs search the
    # grid.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        centred = V - w @ V
        std = np.sqrt(w @ centred**2)
        skew = w @ (centred / std) ** 3
    symmetric = ~(np.abs(np.nan_to_num(skew, nan=0.0)) > _SKEW_TO_WARP)
    warped = np.flatnonzero(~(few_values | symmetric))
    lambdas = np.ones(X.shape[1])
    lambdas[warped] = _best_exponents(
        V[:, warped], a[:, warped], boxcox[warped], w @ J[:, warped], w
    )
    lower = np.where(boxcox, 0.1 * np.min(np.where(V > 0, V, np.inf), axis=0), 0.0)
    return boxcox, norm, lower, lambdas


def _best_exponents(V, a, boxcox, jacobian, w):
    """Per column of ``V``, the grid's exponent of the largest profile
    log-likelihood (see ``fit_power``)."""
    best = np.full(V.shape[1], -np.inf)
    lambdas = np.ones(V.shape[1])
    for lam in _LAMBDAS:
        psi = _power_np(V, np.full(V.shape[1], lam), a, boxcox)
        mean = w @ psi
        var = w @ (psi - mean) ** 2
        with np.errstate(divide="ignore"):
            ll = -0.5 * np.log(var) + (lam - 1.0) * jacobian
        ll = np.where(np.isfinite(ll), ll, -np.inf)
        better = ll > best + 1e-12
        best = np.where(better, ll, best)
        lambdas = np.where(better, lam, lambdas)
    return lambdas


def _power_np(V, lam, a, boxcox):
    """Box-Cox / Yeo-Johnson in NumPy with ``a`` = log(v) or log1p(|v|)."""
    safe = np.where(lam == 0, 1.0, lam)
    pos = np.where(np.abs(lam) < 1e-12, a, np.expm1(lam * a) / safe)
    two = 2.0 - lam
    safe2 = np.where(two == 0, 1.0, two)
    neg = np.where(np.abs(two) < 1e-12, -a, -np.expm1(two * a) / safe2)
    return np.where(boxcox | (V >= 0), pos, neg)


def power_transform(X, params, *, xp):
    """Apply the fitted per-feature power transform to ``X`` (any namespace).

    ``psi(v) = (v^lam - 1) / lam`` (``log v`` at 0) for Box-Cox features, with
    ``v`` clipped below at ``lower``; Yeo-Johnson's two branches for the
    others; written with ``expm1`` and logs. Far beyond the training range
    the log is clipped where the power would overflow, so extreme queries
    stay finite (and still far away).
    """
    boxcox, norm, lower, lam = params
    limit = 0.5 * math.log(float(xp.finfo(X.dtype).max)) / 4.0
    V = X / norm
    V_bc = xp.maximum(V, lower)
    a = xp.where(
        boxcox, xp.log(xp.where(boxcox, V_bc, xp.ones_like(V))), xp.log1p(xp.abs(V))
    )
    a = xp.clip(a, -limit, limit)
    one = xp.ones_like(lam)
    at_zero = xp.abs(lam) < 1e-12
    pos = xp.where(at_zero, a, xp.expm1(lam * a) / xp.where(at_zero, one, lam))
    two = 2.0 - lam
    at_two = xp.abs(two) < 1e-12
    neg = xp.where(at_two, -a, -xp.expm1(two * a) / xp.where(at_two, one, two))
    return xp.where(boxcox | (V >= 0), pos, neg)


@dataclass(frozen=True, eq=False)
class CodeLayout:
    """Where a table's code columns sit in the embedding block.

    Attributes
    ----------
    offsets : ndarray of int
        First embedding row of each code column: the categorical columns
        (in input order), then one column per numeric feature in
        ``missing`` (codes 0 observed, 1 missing).
    n_codes : ndarray of int
        Embedding rows of each code column.
    missing : ndarray of int
        Numeric features (positions in the numeric block) that had missing
        values in training: their "missing" has an embedding.
    observed : ndarray of bool
        Numeric features with at least one training value; the others are
        always at 0 (their values carry nothing the fit saw).
    is_categorical : ndarray of bool
        Which input features are categorical (the others are the numeric
        block, in order).
    """

    offsets: np.ndarray
    n_codes: np.ndarray
    missing: np.ndarray
    observed: np.ndarray
    is_categorical: np.ndarray

    @property
    def total(self):
        """Rows of the embedding block."""
        return int(self.n_codes.sum())


@dataclass(frozen=True, eq=False)
class FeatureMap:
    """Fitted map from input features to the space the heads work in.

    ``standardize=False``: centred features. ``True``: centred and scaled to
    unit weighted variance. ``'power'``: a per-feature power transform
    (Box-Cox for positive features, Yeo-Johnson for the others, see
    :func:`fit_power`), then centred and scaled. Every map is independent of
    the features' units. For a ``Table``, the numeric features are mapped
    so, a missing value at its conditional mean given the row's observed
    features (``correlation``, see ``conditional_fill``), and the codes
    placed by ``codes`` (a ``CodeLayout``); the result is a ``Design``.
    """

    power: Optional[tuple]
    center: Any
    scale: Any
    codes: Optional[CodeLayout] = None
    correlation: Any = None

    @property
    def is_linear(self):
        return self.power is None

    def components(self, W, n_heads):
        """``components_``: the numeric rows of ``W`` (p + codes, n_heads *
        d) per head and transposed, in the input's units when the map is
        linear, with zero columns for categorical features: (n_heads, d,
        n_features)."""
        xp, _ = namespace_of(W)
        p = self.center.shape[0]
        Wn = W[:p, :] / self.scale[:, None] if self.is_linear else W[:p, :]
        if self.codes is not None:
            Wn = _spread_rows(Wn, self.codes.is_categorical, xp=xp)
        return xp.reshape(Wn.T, (n_heads, -1, Wn.shape[0]))

    def embeddings(self, W, n_heads):
        """Per code column, its embedding rows of ``W`` as (n_heads, codes,
        d): the categorical columns, then the numeric features in
        ``codes.missing``."""
        xp, _ = namespace_of(W)
        p = self.center.shape[0]
        out = []
        for start, size in zip(self.codes.offsets, self.codes.n_codes):
            rows = W[p + int(start) : p + int(start) + int(size), :]
            out.append(
                xp.permute_dims(xp.reshape(rows, (size, n_heads, -1)), (1, 0, 2))
            )
        return out

    def transform(self, X, *, xp):
        """Map an array, or a ``Table`` into a ``Design``."""
        if isinstance(X, Table):
            return self._transform_table(X, xp=xp)
        if self.power is not None:
            X = power_transform(X, self.power, xp=xp)
        return (X - self.center) / self.scale

    def _transform_table(self, table, *, xp):
        N, layout = table.numeric, self.codes
        dev = device(N)
        valid = ~xp.isnan(N) & xp.asarray(layout.observed, device=dev)
        # Filled with the normaliser: finite, and harmless to either warp.
        fill = self.power[1] if self.power is not None else self.center
        N = self.transform(xp.where(valid, N, fill), xp=xp)
        N = fill_missing(N, valid, self.correlation, xp=xp)
        codes = [table.codes[:, j] for j in range(table.codes.shape[1])]
        for j in layout.missing.tolist():
            codes.append(xp.astype(~valid[:, j], table.codes.dtype))
        if not codes:  # numbers only, the missing ones in never-observed columns
            return Design(N, table.codes, layout.total)
        offsets = xp.asarray(layout.offsets, dtype=table.codes.dtype, device=dev)
        C = xp.stack(codes, axis=1) + offsets[None, :]
        return Design(N, C, layout.total)


def _spread_rows(rows, is_categorical, *, xp):
    """``rows`` (one per numeric feature) among all features' rows, zeros
    for the categorical ones."""
    zero = xp.zeros((1, rows.shape[1]), dtype=rows.dtype, device=device(rows))
    numeric = iter(range(rows.shape[0]))
    parts = [zero if cat else rows[next(numeric), :][None, :] for cat in is_categorical]
    return xp.concat(parts, axis=0)


def fit_feature_map(X, sw, *, standardize, rng, xp):
    """The ``FeatureMap`` of training rows ``X`` (an array or a ``Table``)
    with weights ``sw``, and ``X`` mapped by it."""
    if isinstance(X, Table):
        return _fit_table_map(X, sw, standardize, rng, xp)
    power = None
    if standardize == "power":
        power = _device_power(fit_power(X, sw, rng=rng), X, xp)
        X = power_transform(X, power, xp=xp)
    center, scale = fit_scaling(X, sw[:, None], standardize=bool(standardize), xp=xp)
    mapped = (X - center) / scale
    # Only rows at prediction can have missing values here.
    correlation = fit_correlation(mapped, None, sw, xp=xp)
    return FeatureMap(power, center, scale, None, correlation), mapped


def _device_power(params, X, xp):
    """Power-transform parameters (NumPy) on ``X``'s device and dtype."""
    boxcox, norm, lower, lam = params
    dev = device(X)
    return (
        xp.asarray(boxcox, device=dev),
        xp.asarray(norm, dtype=X.dtype, device=dev),
        xp.asarray(lower, dtype=X.dtype, device=dev),
        xp.asarray(lam, dtype=X.dtype, device=dev),
    )


def _fit_table_map(table, sw, standardize, rng, xp):
    N = table.numeric
    dev = device(N)
    valid = ~xp.isnan(N)
    valid_np = to_numpy(valid)
    observed = np.any(valid_np & (to_numpy(sw)[:, None] > 0), axis=0)
    missing = np.flatnonzero(~np.all(valid_np, axis=0) & observed)
    valid = valid & xp.asarray(observed, device=dev)
    # Each feature's weights over the rows where it is observed.
    w = sw[:, None] * xp.astype(valid, N.dtype)
    total = xp.sum(w, axis=0)
    w = w / xp.where(total > 0, total, xp.ones_like(total))
    filled = xp.where(valid, N, xp.zeros_like(N))
    power = None
    if standardize == "power":
        power = _device_power(_fit_power_observed(N, valid_np, sw, rng), N, xp)
        filled = power_transform(xp.where(valid, N, power[1]), power, xp=xp)
    mean = xp.sum(w * xp.where(valid, filled, xp.zeros_like(N)), axis=0)
    filled = xp.where(valid, filled, mean)
    center, scale = fit_scaling(filled, w, standardize=bool(standardize), xp=xp)
    n_codes = list(table.n_codes) + [2] * missing.shape[0]
    is_categorical = np.asarray(table.is_categorical, dtype=bool)
    sizes = np.asarray(n_codes, dtype=np.int64)
    layout = CodeLayout(
        np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
        sizes,
        missing,
        observed,
        is_categorical,
    )
    standardised = xp.where(valid, (filled - center) / scale, xp.zeros_like(N))
    correlation = fit_correlation(standardised, valid, sw, xp=xp)
    features = FeatureMap(power, center, scale, layout, correlation)
    return features, features.transform(table, xp=xp)


def _fit_power_observed(N, valid, sw, rng):
    """``fit_power`` on each feature's observed rows (NumPy parameters)."""
    N = to_numpy(N).astype(np.float64)
    sw = to_numpy(sw).astype(np.float64)
    p = N.shape[1]
    boxcox, norm, lower, lam = (
        np.zeros(p, dtype=bool),
        np.ones(p),
        np.zeros(p),
        np.ones(p),
    )
    for j in range(N.shape[1]):
        rows = valid[:, j] & (sw > 0)
        if rows.sum() < 2:
            continue
        b, g, lo, la = fit_power(N[rows, j : j + 1], sw[rows], rng=rng)
        boxcox[j], norm[j], lower[j], lam[j] = b[0], g[0], lo[0], la[0]
    return boxcox, norm, lower, lam
