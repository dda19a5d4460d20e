"""The feature map the heads work in: centring, scaling and an optional
Yeo-Johnson warp per feature (``standardize='power'``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from nwensemble._backend import device, to_numpy

# Candidate Yeo-Johnson exponents; lambda = 1 is the identity.
_LAMBDAS = np.round(np.arange(-2.0, 4.0001, 0.1), 10)
# Rows used to choose the exponents.
_POWER_FIT_ROWS = 5000


def fit_scaling(X, sw, *, standardize, xp):
    """Weighted centre and per-feature scale of ``X``.

    The scale is the weighted standard deviation when ``standardize``, else
    one. It is computed after dividing by the column's largest magnitude, so
    features near 1e150 or 1e-150 neither overflow nor underflow; constant
    features (and subnormal spreads) get scale one.
    """
    center = xp.sum(sw[:, None] * X, axis=0)
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
    std = xp.sqrt(xp.sum(sw[:, None] * Xn * Xn, axis=0))
    std = xp.where(varies & (std > 0), std, xp.ones_like(std))
    return center, std * max_abs


def fit_power(Z, sw, *, rng):
    """Yeo-Johnson exponent per column of ``Z``, by likelihood.

    For each candidate ``lambda`` the weighted profile log-likelihood of the
    Yeo-Johnson model is ``-log(var(psi_lambda(z))) / 2 + (lambda - 1) *
    mean(sign(z) log(1 + |z|))`` (Yeo and Johnson, 2000); the best candidate
    on a grid from -2 to 4 is kept, on at most ``_POWER_FIT_ROWS`` rows.
    Columns with fewer than three distinct values keep ``lambda = 1``.
    Returns a float64 NumPy array.
    """
    Z = to_numpy(Z).astype(np.float64)
    w = to_numpy(sw).astype(np.float64)
    if Z.shape[0] > _POWER_FIT_ROWS:
        rows = rng.choice(Z.shape[0], _POWER_FIT_ROWS, replace=False, p=w / w.sum())
        Z, w = Z[rows], np.full(_POWER_FIT_ROWS, 1.0 / _POWER_FIT_ROWS)
    w = w / w.sum()
    a = np.log1p(np.abs(Z))
    jacobian = w @ (np.sign(Z) * a)  # (p,)
    best = np.full(Z.shape[1], -np.inf)
    lambdas = np.ones(Z.shape[1])
    for lam in _LAMBDAS:
        psi = _yeo_johnson_np(Z, np.full(Z.shape[1], lam), a)
        mean = w @ psi
        var = w @ (psi - mean) ** 2
        with np.errstate(divide="ignore"):
            ll = -0.5 * np.log(var) + (lam - 1.0) * jacobian
        ll = np.where(np.isfinite(ll), ll, -np.inf)
        better = ll > best + 1e-12
        best = np.where(better, ll, best)
        lambdas = np.where(better, lam, lambdas)
    few_values = np.array([np.unique(col).shape[0] < 3 for col in Z.T])
    return np.where(few_values, 1.0, lambdas)


def _yeo_johnson_np(Z, lam, a):
    """Yeo-Johnson transform in NumPy, ``a = log1p(|Z|)`` precomputed."""
    pos = np.where(
        np.abs(lam) < 1e-12, a, np.expm1(lam * a) / np.where(lam == 0, 1, lam)
    )
    two = 2.0 - lam
    neg = np.where(
        np.abs(two) < 1e-12, -a, -np.expm1(two * a) / np.where(two == 0, 1, two)
    )
    return np.where(Z >= 0, pos, neg)


def yeo_johnson(Z, lambdas, *, xp):
    """Yeo-Johnson transform of each column of ``Z`` with its exponent.

    ``psi(z) = ((1 + z)^lam - 1) / lam`` for ``z >= 0`` and
    ``-((1 - z)^(2 - lam) - 1) / (2 - lam)`` for ``z < 0`` (logs at
    ``lam = 0`` and ``lam = 2``), written with ``expm1`` and ``log1p``. Far
    beyond the training range ``log(1 + |z|)`` is clipped where the power
    would overflow, so extreme queries stay finite (and still far away).
    """
    lam = xp.asarray(lambdas, dtype=Z.dtype, device=device(Z))
    limit = 0.5 * math.log(float(xp.finfo(Z.dtype).max)) / 4.0
    a = xp.minimum(
        xp.log1p(xp.abs(Z)), xp.asarray(limit, dtype=Z.dtype, device=device(Z))
    )
    one = xp.ones_like(lam)
    at_zero = xp.abs(lam) < 1e-12
    pos = xp.where(at_zero, a, xp.expm1(lam * a) / xp.where(at_zero, one, lam))
    two = 2.0 - lam
    at_two = xp.abs(two) < 1e-12
    neg = xp.where(at_two, -a, -xp.expm1(two * a) / xp.where(at_two, one, two))
    return xp.where(Z >= 0, pos, neg)


def _decade_scale(X, *, xp):
    """Per-feature power of ten bringing magnitudes down to at most 1e6."""
    magnitude = to_numpy(xp.max(xp.abs(X), axis=0)).astype(np.float64)
    with np.errstate(divide="ignore"):
        decades = np.ceil(np.log10(np.maximum(magnitude, 1e-300) / 1e6))
    scale = 10.0 ** np.clip(decades, 0, None)
    return xp.asarray(scale, dtype=X.dtype, device=device(X))


class FeatureMap:
    """Fitted map from input features to the space the heads work in.

    ``standardize=False``: centred features. ``True``: centred and scaled to
    unit weighted variance. ``'power'``: Yeo-Johnson warped per feature (on
    the input's scale, divided by a power of ten where magnitudes exceed
    1e6), then centred and scaled.
    """

    def __init__(self, standardize):
        self.standardize = standardize

    def fit_transform(self, X, sw, *, rng, xp):
        self.lambdas = None
        if self.standardize == "power":
            # The warp acts on the input's own scale (where a log-like exponent
            # turns frequencies or ages into their logarithm), brought down by
            # a power of ten only where magnitudes would overflow the power.
            self.prescale = _decade_scale(X, xp=xp)
            V = X / self.prescale
            self.lambdas = xp.asarray(
                fit_power(V, sw, rng=rng), dtype=X.dtype, device=device(X)
            )
            X = yeo_johnson(V, self.lambdas, xp=xp)
        self.center, self.scale = fit_scaling(
            X, sw, standardize=bool(self.standardize), xp=xp
        )
        return (X - self.center) / self.scale

    def transform(self, X, *, xp):
        if self.lambdas is not None:
            X = yeo_johnson(X / self.prescale, self.lambdas, xp=xp)
        return (X - self.center) / self.scale

    @property
    def is_linear(self):
        return self.lambdas is None
