"""How a head reads its estimate out of its attention: the attention-weighted
mean of the targets (local constant: Nadaraya-Watson), or the value at the
query of a weighted least-squares line through the targets in the head's
subspace, under the same weights (local linear).

A pass hands a head's readout the attention-weighted sums of key-side
columns (``columns``; the weights themselves never need to be kept) and
the query's coordinates in the head's subspace. The local-linear readout
fits, per query, ``y ~ a + b . (z - zbar)`` under the normalised weights
``w``: with ``C`` the weighted covariance of the keys ``z`` around their
weighted mean ``zbar`` and ``c`` their weighted covariance with ``y``, the
slope is ``b = (C + ridge * s I)^-1 c`` and the estimate ``ybar + b . (q -
zbar)``. The ridge is relative to ``s = trace(E_w[(z - q)(z - q)^T]) / d``,
the mean squared distance of the weighted keys from the query, so it is
free of the subspace's scale and holds the slope back most where the query
lies off its neighbours' centre (at the edge of the data). The estimate is
still linear in the targets, with the weights ``w_i (1 + g . (z_i -
zbar))``, ``g = (C + ridge * s I)^-1 (q - zbar)``: they sum to one but can
be negative, so every head's estimate is clipped to the training targets'
range.

The local quadratic (``squares``) is the same fit in the design ``[z, z *
z]`` (each coordinate and its square, no cross terms) in place of ``z``:
every formula above with ``2d`` coordinates, and the query's design as the
query.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._shared.backend import device

# A head whose normalised weight on a left-out row is within this of what
# the line's leverage allows leaves nothing to refit: its left-out estimate
# is then taken as its estimate.
_ALL_WEIGHT = 1e-6
# Added to the ridge's scale, relative to the keys' mean square, so that a
# query sitting on its only neighbour still has a definite (flat) line.
_SCALE_FLOOR = 1e-10


@dataclass(frozen=True, eq=False)
class Readout:
    """A head's readout.

    Attributes
    ----------
    ridge : float
        The local-linear fit's ridge, relative to the local spread (see the
        module's notes); ``inf`` reads the weighted mean (local constant).
    low, high : array of shape (n_outputs,) or None
        The training targets' range, which every local-linear estimate is
        clipped to (None for the local constant, which cannot leave it).
    squares : bool
        Whether the fit is the local quadratic: linear in each coordinate
        and its square (``design``).
    """

    ridge: float = math.inf
    low: Any = None
    high: Any = None
    squares: bool = False

    @property
    def is_constant(self):
        """Whether the readout is the weighted mean."""
        return math.isinf(self.ridge)

    def astype(self, dtype, *, xp):
        """This readout with its targets' range in ``dtype``."""
        if self.low is None:
            return self
        return Readout(
            self.ridge,
            xp.astype(self.low, dtype),
            xp.astype(self.high, dtype),
            self.squares,
        )

    def design(self, Zh, *, xp):
        """The coordinates (n, D) the local fit is linear in, of points
        ``Zh`` (n, d) of one head: ``Zh`` itself for a line, ``[Zh, Zh *
        Zh]`` for the local quadratic (``squares``)."""
        if not self.squares:
            return Zh
        return xp.concat([Zh, Zh * Zh], axis=1)

    def design_dim(self, d):
        """``D``, the number of ``design`` coordinates of a ``d``-dimensional
        head."""
        return 2 * d if self.squares else d

    # ------------------------------------------------------------ pass side
    def columns(self, Y, Zh, *, xp):
        """The key-side columns (n, k) whose attention-weighted sums the
        readout needs, for targets ``Y`` (n, t) and keys ``Zh`` (n, d) of one
        head: ``[Y, 1]`` for the local constant, ``[Y, Zh, Y * Zh, vech(Zh
        Zh^T), 1]`` for the local linear, with ``design(Zh)`` for ``Zh`` for
        the local quadratic. The last column is ones (its sum is the
        attention's row sum) and the first ``t`` are ``Y``."""
        ones = xp.ones((Y.shape[0], 1), dtype=Y.dtype, device=device(Y))
        if self.is_constant:
            return xp.concat([Y, ones], axis=1)
        Zh = self.design(Zh, xp=xp)
        d, t = Zh.shape[1], Y.shape[1]
        iu, ju = (xp.asarray(a, device=device(Y)) for a in np.triu_indices(d))
        Yc = Y - self._center(xp=xp)
        yz = [Yc[:, j : j + 1] * Zh for j in range(t)]
        zz = xp.take(Zh, iu, axis=1) * xp.take(Zh, ju, axis=1)
        return xp.concat([Y, Zh, *yz, zz, ones], axis=1)

    def n_columns(self, t, d):
        """How many ``columns`` a key has, for ``t`` targets and a
        ``d``-dimensional head."""
        if self.is_constant:
            return t + 1
        d = self.design_dim(d)
        return t + d + t * d + d * (d + 1) // 2 + 1

    def estimate(self, num, Qh, *, xp):
        """The head's estimates (m, t) from ``num`` (m, k), the attention's
        sums of ``columns``, at the queries ``Qh`` (m, d)."""
        if self.is_constant:
            return num[:, :-1] / num[:, -1:]
        fit = self._fit(num, self.design(Qh, xp=xp), xp=xp)
        return self._clip(fit.estimate, xp=xp)

    def weights(self, E, num, Qh, Zh, *, xp):
        """The normalised weights (m, n) with which the head's estimate
        averages the keys' targets (the attention ``E`` (m, n), unnormalised,
        for the local constant); before the clip."""
        s = num[:, -1:]
        if self.is_constant:
            return E / s
        fit = self._fit(num, self.design(Qh, xp=xp), xp=xp)
        Zh = self.design(Zh, xp=xp)
        return (E / s) * (fit.offset[:, None] + _dot_keys(fit.g, Zh, xp=xp))

    def weight_factors(self, num, Qh, *, xp):
        """The head's estimates (m, t) and the factors ``F`` (m, d + 1) of
        its weights: query ``r``'s normalised weight on key ``i`` is
        ``E[r, i] * (F[r] . [1, design(z_i)])`` (``weights`` without the
        (m, n) arrays; ``F`` is ``[1 / s, 0, ...]`` for the local
        constant)."""
        s = num[:, -1:]
        if self.is_constant:
            d = Qh.shape[1]
            zeros = xp.zeros((s.shape[0], d), dtype=s.dtype, device=device(s))
            return self.estimate(num, Qh, xp=xp), xp.concat([1.0 / s, zeros], axis=1)
        fit = self._fit(num, self.design(Qh, xp=xp), xp=xp)
        factors = xp.concat([fit.offset[:, None], fit.g], axis=1) / s
        return self._clip(fit.estimate, xp=xp), factors

    def left_out(self, E, num, Qh, Zh, Y, rows, *, xp):
        """The head's estimates (m, t) and, for each of the keys ``rows``
        (c,), its estimates without that key (m, c, t): the weighted fit
        refitted on the other keys (the ridge's scale held), by the rank-one
        update of its normal equations. ``Zh`` (c, d) and ``Y`` (c, t) are
        those keys' coordinates and targets."""
        w = xp.take(E, rows, axis=1) / num[:, -1:]  # (m, c)
        if self.is_constant:
            est = self.estimate(num, Qh, xp=xp)
            keep = 1.0 - w
            safe = keep > _ALL_WEIGHT
            denom = xp.where(safe, keep, xp.ones_like(keep))
            moved = (est[:, None, :] - w[:, :, None] * Y[None, :, :]) / denom[
                :, :, None
            ]
            return est, xp.where(safe[:, :, None], moved, est[:, None, :])
        Qh, Zh = self.design(Qh, xp=xp), self.design(Zh, xp=xp)
        fit = self._fit(num, Qh, xp=xp)
        est = fit.estimate
        # The local line's residual at each key, the key's leverage and its
        # share of the estimate, all per query: each (m, c) term one product
        # of two matrices, in float64 (no (m, c, d) arrays of the keys
        # centred on every query).
        f64 = xp.float64
        Z = xp.astype(Zh, f64)
        zbar = xp.astype(fit.zbar, f64)
        slope = xp.astype(fit.slope, f64)  # (m, d, t)
        G = xp.linalg.inv(fit.A)  # (m, d, d), symmetric
        m, d = zbar.shape
        c, t = Y.shape
        # y_i - ybar - (z_i - zbar) . b: the key's product with every slope.
        slopes = xp.reshape(xp.permute_dims(slope, (1, 0, 2)), (d, m * t))
        along = xp.permute_dims(xp.reshape(xp.matmul(Z, slopes), (c, m, t)), (1, 0, 2))
        level = xp.astype(fit.ybar, f64) - xp.sum(zbar[:, :, None] * slope, axis=1)
        residual = xp.astype(Y, f64)[None, :, :] - level[:, None, :] - along
        # 1 + (z_i - zbar)' G (z_i - zbar), expanded.
        pairs = xp.reshape(Z[:, :, None] * Z[:, None, :], (c, d * d))
        G_zbar = xp.sum(G * zbar[:, None, :], axis=2)  # (m, d)
        lever = (
            1.0
            + _dot_keys(xp.reshape(G, (m, d * d)), pairs, xp=xp)
            - 2.0 * _dot_keys(G_zbar, Z, xp=xp)
            + xp.sum(G_zbar * zbar, axis=1)[:, None]
        )
        residual = xp.astype(residual, w.dtype)
        lever = xp.astype(lever, w.dtype)
        share = w * (fit.offset[:, None] + _dot_keys(fit.g, Zh, xp=xp))
        keep = 1.0 - w * lever
        safe = keep > _ALL_WEIGHT
        denom = xp.where(safe, keep, xp.ones_like(keep))
        moved = est[:, None, :] - (share / denom)[:, :, None] * residual
        left = xp.where(safe[:, :, None], moved, est[:, None, :])
        return self._clip(est, xp=xp), self._clip(left, xp=xp)

    # ------------------------------------------------------------- internals
    def _n_outputs(self, k, d):
        """Number of targets ``t`` behind ``k`` columns of ``d``-dim keys."""
        if self.is_constant:
            return k - 1
        return (k - 1 - d - d * (d + 1) // 2) // (d + 1)

    def _center(self, *, xp):
        """The targets' mid-range (0 without a range), taken off ``Y`` in
        the ``Y * Zh`` columns so that their sums keep the digits of the
        local covariance in float32."""
        if self.low is None:
            return 0.0
        return (self.low + self.high) / 2

    def _clip(self, values, *, xp):
        if self.low is None:
            return values
        return xp.clip(values, self.low, self.high)

    def ridge_estimates(self, num, Qh, ridges, *, xp):
        """The estimates (r, m, t) of this readout's fit with each of
        ``ridges`` (r,) in place of its own, from the same sums ``num`` at
        the queries ``Qh``, in one batched solve (the choice of a ridge
        reads them all)."""
        dtype = num.dtype
        moments = self._moments(num, self.design(Qh, xp=xp), xp=xp)
        rhs = xp.permute_dims(moments.cross, (0, 2, 1))  # (m, d, t)
        off = moments.off[:, :, None]
        estimates = []
        # One ridge at a time: the same solves as one batch over the ridges,
        # without a copy of the right-hand sides per ridge.
        for ridge in ridges:
            shift = ridge * moments.spread + moments.floor
            A = moments.cov + shift[:, None, None] * moments.eye
            slope = xp.linalg.solve(A, rhs)
            estimates.append(moments.ybar + xp.sum(off * slope, axis=1))
        estimate = xp.stack(estimates)
        return self._clip(xp.astype(estimate, dtype), xp=xp)

    def _moments(self, num, q, *, xp):
        """The weighted moments of the keys' design about their mean and
        the query's offset from it (``_Moments``), in float64, from the
        sums ``num`` and the query's design ``q``."""
        num = xp.astype(num, xp.float64)
        q = xp.astype(q, xp.float64)
        m, d = q.shape
        t = self._n_outputs(num.shape[1], d)
        mean = num[:, :-1] / num[:, -1:]
        ybar = mean[:, :t]
        zbar = mean[:, t : t + d]
        yz = xp.reshape(mean[:, t + d : t + d + t * d], (m, t, d))
        zz = _unpack_symmetric(mean[:, t + d + t * d :], d, xp=xp)
        cov = zz - zbar[:, :, None] * zbar[:, None, :]
        ybar_c = ybar
        if self.low is not None:
            ybar_c = ybar - xp.astype(self._center(xp=xp), xp.float64)
        off = q - zbar
        # trace(E_w[(z - q)(z - q)^T]) = trace(cov) + |q - zbar|^2
        return _Moments(
            ybar=ybar,
            zbar=zbar,
            cov=cov,
            cross=yz - ybar_c[:, :, None] * zbar[:, None, :],  # (m, t, d)
            off=off,
            spread=(_trace(cov, xp=xp) + xp.sum(off * off, axis=1)) / d,
            floor=_SCALE_FLOOR * (1.0 + _trace(zz, xp=xp) / d),
            eye=xp.eye(d, dtype=xp.float64, device=device(num)),
        )

    def _fit(self, num, q, *, xp):
        """The local lines at the queries of design ``q``
        (``_LocalLines``), in float64."""
        dtype = num.dtype
        mo = self._moments(num, q, xp=xp)
        t = mo.ybar.shape[1]
        A = mo.cov + (self.ridge * mo.spread + mo.floor)[:, None, None] * mo.eye
        rhs = xp.concat(
            [xp.permute_dims(mo.cross, (0, 2, 1)), mo.off[:, :, None]], axis=2
        )
        sol = xp.linalg.solve(A, rhs)  # (m, d, t + 1)
        slope = sol[:, :, :t]
        g = sol[:, :, t]
        estimate = mo.ybar + xp.sum(mo.off[:, :, None] * slope, axis=1)
        return _LocalLines(
            estimate=xp.astype(estimate, dtype),
            ybar=xp.astype(mo.ybar, dtype),
            zbar=xp.astype(mo.zbar, dtype),
            slope=xp.astype(slope, dtype),
            g=xp.astype(g, dtype),
            offset=xp.astype(1.0 - xp.sum(g * mo.zbar, axis=1), dtype),
            A=A,
        )


@dataclass(frozen=True, eq=False)
class _Moments:
    """Per query, in float64: the weighted means ``ybar`` (m, t) and
    ``zbar`` (m, d) of the keys' targets and design, the design's weighted
    covariance ``cov`` (m, d, d), its covariance with the targets ``cross``
    (m, t, d), the query's offset ``off = q - zbar`` (m, d), the ridge's
    scale ``spread`` (m,) and floor ``floor`` (m,), and the identity
    ``eye`` (d, d)."""

    ybar: Any
    zbar: Any
    cov: Any
    cross: Any
    off: Any
    spread: Any
    floor: Any
    eye: Any


@dataclass(frozen=True, eq=False)
class _LocalLines:
    """Per query: the estimate (m, t), the weighted means ``ybar`` (m, t)
    and ``zbar`` (m, d), the slopes (m, d, t), ``g = G (q - zbar)`` (m, d)
    with ``G`` the inverse of ``A`` (m, d, d, float64), the ridged
    covariance, and ``offset = 1 - g . zbar`` (m,), so that key ``i``'s
    share of the estimate is ``w_i (offset + g . z_i)``."""

    estimate: Any
    ybar: Any
    zbar: Any
    slope: Any
    g: Any
    offset: Any
    A: Any


def _dot_keys(g, Zh, *, xp):
    """``g @ Zh^T``: (m, d) by (n, d) to (m, n)."""
    return xp.matmul(g, xp.permute_dims(Zh, (1, 0)))


def _trace(M, *, xp):
    """Traces of a stack of square matrices (m, d, d)."""
    d = M.shape[1]
    return xp.sum(xp.reshape(M, (M.shape[0], d * d))[:, :: d + 1], axis=1)


def _unpack_symmetric(packed, d, *, xp):
    """The (m, d, d) symmetric matrices from their upper triangles (m, d (d +
    1) / 2) in ``np.triu_indices`` order."""
    iu, ju = np.triu_indices(d)
    full = np.empty((d, d), dtype=np.int64)
    full[iu, ju] = np.arange(iu.shape[0])
    full[ju, iu] = full[iu, ju]
    idx = xp.asarray(full.reshape(-1), device=device(packed))
    return xp.reshape(xp.take(packed, idx, axis=1), (packed.shape[0], d, d))


CONSTANT = Readout()


def line_sums(num, t, d, *, xp):
    """The sums (m, k) of a local line's columns within ``num``, the sums of
    a local quadratic's (``Readout.columns`` with ``squares``), for ``t``
    targets and ``d``-dimensional keys: a line's columns are a subset of the
    quadratic's (the squares' columns left out)."""
    index = xp.asarray(_line_columns(t, d), device=device(num))
    return xp.take(num, index, axis=1)


@functools.lru_cache(maxsize=None)
def _line_columns(t, d):
    """The positions of a line's columns among a quadratic's, for ``t``
    targets and ``d``-dimensional keys (see ``line_sums``)."""
    D = 2 * d
    iu, ju = np.triu_indices(D)
    packed = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(iu, ju))}
    cross = t + D
    pairs = cross + t * D
    index = [*range(t + d)]
    index += [cross + j * D + k for j in range(t) for k in range(d)]
    index += [pairs + packed[int(a), int(b)] for a, b in zip(*np.triu_indices(d))]
    index.append(pairs + len(packed))  # the ones
    return np.asarray(index)


def target_range(Y, sw, *, xp):
    """``(low, high)`` (t,) of the targets of the rows with positive weight."""
    positive = sw > 0
    inf = xp.asarray(math.inf, dtype=Y.dtype, device=device(Y))
    low = xp.min(xp.where(positive[:, None], Y, inf), axis=0)
    high = xp.max(xp.where(positive[:, None], Y, -inf), axis=0)
    return low, high
