"""Feature slopes: a monotone piecewise-linear map of each mapped numeric
feature, learned as a continuation of a fitted head.

Each numeric feature of the design (after the feature map's power transform
and standardisation, missing values filled) goes through
``f(x) = k_0 + sum_b s_b clip(x - k_b, 0, k_{b+1} - k_b)``, with knots
``k`` at its quantiles and a positive slope ``s_b`` per bin (the first bin
open below, the last open above, so that slopes of 1 are the identity on
every row). A kernel of fixed width in a head's projection averages across
a jump in the target; a slope steep where the target jumps sets the rows on
its two sides apart, as a tree's split does, and a slope shallow where it is
flat lets the head average more rows there.

The slopes start at 1 and move together with the fitted head's projection
(its ``W``, embedding rows included) on the same leave-one-out loss, stopped
on rows held out of both. Each slope stays within ``exp(+-MAX_LOG_SLOPE)``:
unbounded, the slope between two of a discrete feature's few values can
grow without limit and the head then reads noise. Where some slope ends at
that bound (the fit wanted a steeper or flatter one), a finer map
(``FINE_BINS`` bins, within ``exp(+-FINE_MAX_LOG_SLOPE)``) is continued
too, from the same start, and kept only where the held-out rows predict
clearly better with it (``paired_rule``). Adam, which has no second fit
to choose by, learns the coarse map in its steps, or with
``feature_slopes='fine'`` the finer one. The user guide's "Feature
slopes" has the figures.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from nwensemble._fit.early_stopping import EarlyStopping, heldout_residuals
from nwensemble._fit.loo_loss import loo_loss_and_grad_z
from nwensemble._fit.paired_rule import paired_gain_is_clear
from nwensemble._fit.precision import loss_rows
from nwensemble._fit.solvers import AUTO_ADAM_ROWS_HEADS
from nwensemble._shared import numba_slopes
from nwensemble._shared.backend import device, namespace_of, to_numpy
from nwensemble._shared.rows import take_rows

# Quantile bins per feature.
N_BINS = 8
# Each slope within exp(+-MAX_LOG_SLOPE) of the identity's.
MAX_LOG_SLOPE = 1.0
# The finer map a continuation also fits, and keeps only where its held-out
# rows predict clearly better (``paired_rule``): bins narrow enough, and
# slopes steep enough, to set apart the rows on the two sides of a jump
# that falls inside a coarse bin. Where the target is smooth the finer map
# reads more noise, and the held-out rows keep the coarse one.
# feature_slopes='fine' has Adam's steps learn this map.
FINE_BINS = 64
FINE_MAX_LOG_SLOPE = 3.0
# The continuation is a full-batch L-BFGS fit: on at most as many rows as
# the heads' own full-batch fits take (solver='auto' takes minibatches
# above them). It is stopped on at most MAX_HELDOUT_ROWS held-out rows.
MAX_ROWS = AUTO_ADAM_ROWS_HEADS
MAX_HELDOUT_ROWS = 1024
# Without held-out rows of the head's own fit, this share of the
# continuation's rows is held out to stop on.
HELDOUT_FRACTION = 0.2


@dataclass(frozen=True, eq=False)
class FeatureSlopes:
    """Fitted slopes of the numeric block: knots ``low`` (p, bins) with
    ``width`` (p, bins) and ``slope`` (p, bins), arrays of the model's
    namespace, dtype and device (see the module's docstring)."""

    low: Any
    width: Any
    slope: Any

    def _ramp(self, N, b):
        """Bin ``b``'s part of each value of ``N``."""
        xp, _ = namespace_of(self.low)
        part = N - self.low[:, b]
        if b > 0:
            part = xp.maximum(part, xp.zeros_like(part))
        if b < self.low.shape[1] - 1:
            part = xp.minimum(part, self.width[:, b])
        return part

    def astype(self, dtype):
        """The same slopes in ``dtype``."""
        xp, _ = namespace_of(self.low)
        return FeatureSlopes(
            *(xp.astype(a, dtype) for a in (self.low, self.width, self.slope))
        )

    def apply(self, N):
        """The mapped numeric block of ``N`` (n, p): on the host in one
        compiled pass (``numba_slopes``), else one bin's ramp at a time (at
        most two arrays of ``N``'s size besides it)."""
        xp, _ = namespace_of(N)
        if numba_slopes.compiled(xp, N, self.low, self.width, self.slope):
            return numba_slopes.piecewise_map(N, self.low, self.width, self.slope)
        ramps = (self._ramp(N, b) for b in range(self.low.shape[1]))
        return _mapped(self.low[:, 0], ramps, self.slope)

    def ramp_sums(self, N, dN):
        """``sum_i dN[i, j] ramp_b(N[i, j])`` (p, bins): the derivative of
        ``sum(dN * apply(N))`` in each slope (see ``apply`` for the paths)."""
        xp, _ = namespace_of(N)
        if numba_slopes.compiled(xp, N, dN, self.low, self.width):
            return numba_slopes.ramp_sums(N, dN, self.low, self.width)
        bins = range(self.low.shape[1])
        return xp.stack([xp.sum(dN * self._ramp(N, b), axis=0) for b in bins], axis=1)

    def with_slope(self, slope):
        """The same knots with the slopes ``slope``."""
        return dataclasses.replace(self, slope=slope)

    def design(self, X):
        """The ``Design`` ``X`` with its numeric block mapped."""
        return dataclasses.replace(X, numeric=self.apply(X.numeric))


def _mapped(start, ramps, slope):
    """``start`` plus each bin's ramp times its slope: the map's values."""
    out = start
    for b, ramp in enumerate(ramps):
        out = out + slope[:, b] * ramp
    return out


def identity_slopes(N, sw, *, xp, n_bins=N_BINS):
    """``FeatureSlopes`` at the identity (slopes 1), knots at the ``n_bins +
    1`` quantiles of the rows of positive weight of ``N``."""
    N_np = to_numpy(N).astype(np.float64)[to_numpy(sw) > 0]
    knots = np.quantile(N_np, np.linspace(0.0, 1.0, n_bins + 1), axis=0).T
    dev = device(N)
    low = xp.asarray(knots[:, :-1], dtype=N.dtype, device=dev)
    width = xp.asarray(np.diff(knots, axis=1), dtype=N.dtype, device=dev)
    return FeatureSlopes(low, width, xp.ones_like(low))


def continue_with_slopes(config, fitted, X, Y, sw, *, rng, xp):
    """The slopes and a projection fitted together, from slopes 1 and the
    fitted head's projection.

    ``fitted`` is the head's ``SolverResult`` on the design ``X`` (n, p +
    codes) with scaled targets ``Y`` and weights ``sw``. The continuation
    fits on at most ``MAX_ROWS`` of the rows the head was fitted on and is
    stopped on at most ``MAX_HELDOUT_ROWS`` of those it held out (else on
    ``HELDOUT_FRACTION`` of the continuation's rows). The coarse map
    (``N_BINS``) is fitted first; where the finer one (``FINE_BINS``) is
    tried too (see the module's docstring), it replaces the coarse one only
    where those held-out rows' squared errors are clearly lower with it.
    Returns the ``FeatureSlopes`` and the projection (float64 NumPy), or
    None where there are too few rows or iterations to fit them.
    """
    p = X.numeric.shape[1]
    if config.max_iter == 0 or p == 0:
        return None
    train_rows, val_rows = _rows(fitted.heldout, sw, rng=rng)
    if train_rows is None:
        return None
    Xt, Yt, swt = take_rows(X, Y, sw, train_rows, xp=xp)
    # The loss in the dtype the heads' own fits evaluate it in.
    n_rows = Xt.shape[0]
    Xl, Yl, swl = loss_rows(Xt, Yt, swt, xp=xp)
    heldout = loss_rows(*take_rows(X, Y, sw, val_rows, xp=xp), xp=xp, n_rows=n_rows)
    W0 = np.asarray(fitted.W, dtype=np.float64)
    fits = []
    for n_bins, bound in (_map_size(fine=False), _map_size(fine=True)):
        if fits and not _presses_bound(fits[0][2][W0.size :]):
            break
        identity = identity_slopes(Xt.numeric, swt, xp=xp, n_bins=n_bins)
        train = SlopesObjective.of(
            identity, (Xl, Yl, swl), W0.shape, config, diversity=fitted.diversity
        )
        theta = np.concatenate([W0.ravel(), np.zeros(p * n_bins)])
        theta = _minimised(train, theta, heldout, config, bound=bound)
        fits.append((identity, train, theta))
    identity, train, theta = fits[0]
    if len(fits) > 1:
        Xq, Yq, swq = heldout
        coarse, fine = (fit.heldout_errors(at, Xq, Yq) for _, fit, at in fits)
        if paired_gain_is_clear(coarse, fine, to_numpy(swq).astype(np.float64)):
            identity, train, theta = fits[1]
    W, slope = train.split(theta)
    slopes = dataclasses.replace(identity, slope=xp.astype(slope, identity.low.dtype))
    return slopes, to_numpy(W).astype(np.float64)


def _map_size(*, fine):
    """``(bins, bound)`` of the coarse map, or with ``fine`` of the finer
    one."""
    return (FINE_BINS, FINE_MAX_LOG_SLOPE) if fine else (N_BINS, MAX_LOG_SLOPE)


def _presses_bound(log_slope):
    """Whether some of the coarse map's log-slopes ended at their bound: the
    fit wanted a slope steeper (or flatter) than it may take."""
    return bool(np.any(np.abs(log_slope) >= MAX_LOG_SLOPE * (1.0 - 1e-6)))


def _minimised(objective, theta, heldout, config, *, bound=MAX_LOG_SLOPE):
    """L-BFGS-B on ``objective`` from ``theta`` for at most
    ``config.max_iter`` iterations, the log-slopes within ``+-bound``: the
    iterate that predicts the ``heldout`` rows ``(X, Y, sw)`` best (stopped
    after ``config.n_iter_no_change`` iterations without a gain)."""
    monitor = EarlyStopping(
        lambda theta: objective.heldout_loss(theta, *heldout),
        patience=config.n_iter_no_change,
        tol=config.tol,
    )
    monitor.start(theta)

    def on_iteration(intermediate_result):
        if monitor.update(intermediate_result.x):
            raise StopIteration

    n_w = int(np.prod(objective.shape))
    c = bound
    minimize(
        objective.loss_and_grad,
        theta,
        jac=True,
        method="L-BFGS-B",
        bounds=[(None, None)] * n_w + [(-c, c)] * (theta.shape[0] - n_w),
        callback=on_iteration,
        options={"maxiter": config.max_iter},
    )
    return monitor.best_theta


class SlopesObjective:
    """The heads' leave-one-out loss on the design ``X`` with targets ``Y``
    and weights ``sw``, as a function of the flat float64 vector
    ``theta``: the projection (``shape``, flattened) then the log-slopes (p,
    bins) of ``identity``'s knots (``FeatureSlopes`` at slopes 1). With
    ``n_heads`` heads side by side in the projection, the ensemble's loss
    less ``diversity`` times their ambiguity (``loo_loss_and_grad``)."""

    def __init__(self, identity, X, Y, sw, shape, *, kernel, n_heads=1, diversity=0.0):
        self.identity = identity
        self.X, self.Y, self.sw = X, Y, sw
        self.shape = shape
        self.kernel = kernel
        self.n_heads = n_heads
        self.diversity = diversity

    @classmethod
    def of(cls, identity, rows, shape, config, *, diversity):
        """The objective on ``rows`` (``(X, Y, sw)``), ``identity``'s knots
        cast to their dtype, with ``config``'s kernel and heads."""
        X, Y, sw = rows
        return cls(
            identity.astype(X.dtype),
            X,
            Y,
            sw,
            shape,
            kernel=config.kernel,
            n_heads=config.n_heads,
            diversity=diversity,
        )

    def split(self, theta):
        """The projection and the slopes at ``theta``, in the rows'
        namespace, dtype and device."""
        xp, dev = namespace_of(self.Y)
        n_w = int(np.prod(self.shape))
        p = self.identity.low.shape[0]
        W = xp.asarray(theta[:n_w].reshape(self.shape), dtype=self.Y.dtype, device=dev)
        slope = np.exp(theta[n_w:].reshape(p, -1))
        return W, xp.asarray(slope, dtype=self.Y.dtype, device=dev)

    def mapped(self, X, slope):
        """The design ``X`` through the slopes ``slope``."""
        numeric = self.identity.with_slope(slope).apply(X.numeric)
        return dataclasses.replace(X, numeric=numeric)

    def loss_and_grad(self, theta):
        """The loss and its gradient in ``theta`` (float64 NumPy)."""
        loss, grad_W, grad_u = self.loss_and_grads(*self.split(theta))
        return loss, np.concatenate(
            [
                to_numpy(grad_W).astype(np.float64).ravel(),
                to_numpy(grad_u).astype(np.float64).ravel(),
            ]
        )

    def loss_and_grads(self, W, slope, *, workspace=None, loss_as_array=False):
        """The loss at the projection ``W`` and the slopes ``slope`` (arrays
        of the rows' namespace, dtype and device), its gradient in ``W``
        and in the log-slopes: what a step on the device needs, nothing
        read back (the loss a 0-d array with ``loss_as_array``)."""
        xp, _ = namespace_of(self.Y)
        X = self.mapped(self.X, slope)
        loss, G = loo_loss_and_grad_z(
            X.project(W),
            self.Y,
            self.sw,
            xp=xp,
            kernel=self.kernel,
            n_heads=self.n_heads,
            diversity=self.diversity,
            workspace=workspace,
            loss_as_array=loss_as_array,
        )
        # dloss / dN, then per bin the chain rule through exp.
        dN = G @ W[: X.numeric.shape[1], :].T
        grad_s = self.identity.ramp_sums(self.X.numeric, dN)
        return loss, X.backproject(G), grad_s * slope

    def _heldout_residuals(self, theta, Xq, Yq):
        """The residuals of the rows ``Xq`` predicted from the objective's
        rows at ``theta``, both mapped by its slopes."""
        W, slope = self.split(theta)
        return heldout_residuals(
            W,
            self.mapped(Xq, slope),
            Yq,
            self.mapped(self.X, slope),
            self.Y,
            self.sw,
            kernel=self.kernel,
            n_heads=self.n_heads,
        )

    def heldout_errors(self, theta, Xq, Yq):
        """Each of the rows ``Xq``'s squared error (summed over the outputs;
        float64 NumPy) predicted from the objective's rows at ``theta``."""
        R = self._heldout_residuals(theta, Xq, Yq)
        return np.sum(to_numpy(R).astype(np.float64) ** 2, axis=1)

    def heldout_loss(self, theta, Xq, Yq, swq):
        """The weighted MSE of the rows ``Xq`` predicted from the
        objective's rows at ``theta`` (``early_stopping.heldout_loss``)."""
        xp, _ = namespace_of(self.Y)
        R = self._heldout_residuals(theta, Xq, Yq)
        return float(xp.sum(swq * xp.sum(R * R, axis=1)))


class JointSlopes:
    """Slopes learned together with the projection by a stochastic fit, as
    one more parameter: their logarithms (p, bins), from 0 (the identity)
    and kept within ``+-bound``, at the knots of ``identity``
    (``FeatureSlopes`` at slopes 1)."""

    def __init__(self, identity, bound=MAX_LOG_SLOPE):
        self.identity = identity
        self.bound = bound
        self._at_dtype = {}

    @classmethod
    def on(cls, X, sw, *, xp, feature_slopes=True):
        """The slopes of the design ``X``'s numeric block, knots at the
        quantiles of its rows of positive weight ``sw``: the coarse map, or
        the finer one for ``feature_slopes='fine'``; None without numeric
        columns."""
        if X.numeric.shape[1] == 0:
            return None
        n_bins, bound = _map_size(fine=feature_slopes == "fine")
        return cls(identity_slopes(X.numeric, sw, xp=xp, n_bins=n_bins), bound)

    def start(self):
        """The log-slopes of the identity, in the knots' dtype."""
        xp, _ = namespace_of(self.identity.low)
        return xp.zeros_like(self.identity.low)

    def bounded(self, log_slope):
        """``log_slope`` within ``+-bound``."""
        xp, _ = namespace_of(log_slope)
        return xp.clip(log_slope, -self.bound, self.bound)

    def fitted(self, log_slope):
        """The ``FeatureSlopes`` at ``log_slope``."""
        xp, _ = namespace_of(log_slope)
        return self.identity.with_slope(xp.exp(log_slope))

    def design(self, log_slope, X):
        """The design ``X`` mapped at ``log_slope``, in ``X``'s dtype."""
        slope = _slope_in(log_slope, X.dtype)
        return self._identity_in(X.dtype).with_slope(slope).design(X)

    def _identity_in(self, dtype):
        """``identity`` in ``dtype``, cast once per dtype."""
        identity = self._at_dtype.get(dtype)
        if identity is None:
            identity = self._at_dtype[dtype] = self.identity.astype(dtype)
        return identity

    def loss_and_grads(self, params, X, Y, sw, *, workspace=None, **options):
        """The heads' leave-one-out loss on the rows ``(X, Y, sw)`` at
        ``params`` (the projection, the log-slopes) and its gradient in
        each, in the rows' dtype, nothing read back (``options``:
        ``SlopesObjective``'s keywords)."""
        xp, _ = namespace_of(Y)
        W, log_slope = params
        identity = self._identity_in(X.dtype)
        objective = SlopesObjective(identity, X, Y, sw, W.shape, **options)
        return objective.loss_and_grads(
            xp.astype(W, X.dtype),
            _slope_in(log_slope, X.dtype),
            workspace=workspace,
            loss_as_array=True,
        )


def _slope_in(log_slope, dtype):
    """The slopes at ``log_slope`` in ``dtype``."""
    xp, _ = namespace_of(log_slope)
    return xp.astype(xp.exp(log_slope), dtype)


def _rows(heldout, sw, *, rng):
    """The continuation's training and held-out rows (sorted NumPy
    integers), or ``(None, None)`` where there are too few."""
    positive = np.flatnonzero(to_numpy(sw) > 0)
    if heldout is not None:
        val = rng.permutation(heldout)[:MAX_HELDOUT_ROWS]
        train = np.setdiff1d(positive, heldout)
    else:
        positive = rng.permutation(positive)[: MAX_ROWS + MAX_HELDOUT_ROWS]
        n_val = int(math.ceil(HELDOUT_FRACTION * min(positive.shape[0], MAX_ROWS)))
        val, train = positive[:n_val], positive[n_val:]
    train = rng.permutation(train)[:MAX_ROWS]
    if train.shape[0] < 2 or val.shape[0] < 1:
        return None, None
    return np.sort(train), np.sort(val)
