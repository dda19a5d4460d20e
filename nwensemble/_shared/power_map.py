"""The per-feature power transform of ``standardize='power'``: Box-Cox for
features positive on every training row, Yeo-Johnson for the others, with
the exponent of the largest profile likelihood."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from nwensemble._shared.backend import to_numpy

# Candidate exponents; lambda = 1 is a linear map.
_LAMBDAS = np.round(np.arange(-2.0, 4.0001, 0.1), 10)
# Features less skewed than this (in size) keep lambda = 1.
_SKEW_TO_WARP = 0.5
# Rows used to choose the exponents.
POWER_FIT_ROWS = 5000


def fit_power(X, sw, *, rng):
    """Per-feature power transform: kind, normaliser and exponent.

    Features that are positive on every training row get Box-Cox on ``x / g``
    (``g`` their geometric mean); the others Yeo-Johnson on ``x / r`` (``r``
    their root mean square). Both choices make the warped, standardised
    feature independent of the feature's unit. The exponent maximises the
    weighted profile log-likelihood ``-log(var(psi_lambda)) / 2 + (lambda - 1)
    * mean(J)`` (``J = log v`` for Box-Cox, ``sign(v) log(1 + |v|)`` for
    Yeo-Johnson) over a grid from -2 to 4, on at most ``POWER_FIT_ROWS``
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
    if X.shape[0] > POWER_FIT_ROWS:
        rows = rng.choice(X.shape[0], POWER_FIT_ROWS, replace=False, p=w / w.sum())
        X, w = X[rows], np.full(POWER_FIT_ROWS, 1.0 / POWER_FIT_ROWS)
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
    # A warp is for skewed features: symmetric ones are left linear (the
    # user guide's NW attention page weighs it), so only features whose
    # weighted skewness exceeds _SKEW_TO_WARP in size search the grid.
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
