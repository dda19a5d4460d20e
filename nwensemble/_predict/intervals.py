"""Conformal prediction intervals from the fit's leave-one-out residuals:
jackknife+ with the projections held at the fitted ones, and its locally
adaptive variant whose residuals are scaled by the model's own estimate of
the local error."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import warnings
from dataclasses import dataclass
from numbers import Real
from typing import Any, Optional

import numpy as np

from nwensemble._shared.backend import device, kth_smallest, namespace_of
from nwensemble._shared.passes import over_heads
from nwensemble._shared.readout import CONSTANT

METHODS = ("jackknife+", "adaptive")


@dataclass(frozen=True, eq=False)
class Calibration:
    """The leave-one-out residuals that calibrate the intervals.

    Attributes
    ----------
    rows : ndarray of int
        Training rows with a leave-one-out residual (positive weight).
    residuals : array of shape (len(rows), n_outputs)
        ``y - loo_prediction`` of those rows, in the model's namespace.
    calibration : ndarray of int
        Positions in ``rows`` of the rows whose residuals set the interval's
        quantile: those held out of the projection's fit when there are any
        (their residuals owe nothing to the projection), else all.
    head_weights : ndarray of shape (len(calibration), n_heads) or None
        The weights of the heads in each calibration row's left-out estimate
        and residual: those of the members that held the row out,
        renormalised (see ``calibration_rows``). None: the model's head
        weights for every row.
    """

    rows: np.ndarray
    residuals: Any
    calibration: np.ndarray
    head_weights: Optional[np.ndarray] = None

    def positions(self):
        """The calibration rows' positions among ``rows`` (c,), in the
        model's namespace."""
        xp, dev = namespace_of(self.residuals)
        return xp.asarray(self.calibration, device=dev)

    def held_out_residuals(self):
        """The residuals of the calibration rows (c, t), in the model's
        namespace."""
        xp, _ = namespace_of(self.residuals)
        return xp.take(self.residuals, self.positions(), axis=0)


def interval_alpha(confidence_level, method=METHODS[0]):
    """``1 - confidence_level``, after checking both arguments."""
    if not (
        isinstance(confidence_level, Real)
        and not isinstance(confidence_level, bool)
        and 0 < confidence_level < 1
    ):
        raise ValueError(
            "confidence_level must be a float in (0, 1) (for example 0.9); "
            f"got {confidence_level!r}."
        )
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
    return 1.0 - float(confidence_level)


def too_few_to_bound(n_calibration, alpha):
    """Whether ``n_calibration`` rows cannot bound a ``1 - alpha`` interval
    (with a warning that the bounds are infinite)."""
    if conformal_rank(n_calibration, alpha) >= 1:
        return False
    warnings.warn(
        f"{n_calibration} calibration rows cannot bound a "
        f"{1 - alpha:g} interval (that needs at least "
        f"{math.ceil(1 / alpha) - 1}); the bounds are infinite.",
        UserWarning,
    )
    return True


def absolute_residual_bounds(Y_hat, residuals, alpha):
    """Bounds ``Y_hat -/+ q`` (shape ``Y_hat.shape + (2,)``), ``q`` per output
    the ``k``-th largest of the absolute leave-one-out ``residuals`` (c, t)
    (``conformal_rank``): the jackknife (Barber et al. 2021), one width for
    every query; infinite, with a warning, when too few rows calibrate."""
    xp, _ = namespace_of(Y_hat)
    n_cal = residuals.shape[0]
    if too_few_to_bound(n_cal, alpha):
        inf = float("inf")
        q = xp.full(Y_hat.shape[1:], inf, dtype=Y_hat.dtype, device=device(Y_hat))
    else:
        k = conformal_rank(n_cal, alpha)
        ordered = xp.sort(xp.abs(residuals), axis=0)  # (c,) or (c, t)
        q = xp.astype(ordered[n_cal - k, ...], Y_hat.dtype)
    return xp.stack([Y_hat - q, Y_hat + q], axis=-1)


def conformal_rank(n_calibration, alpha):
    """``k = floor(alpha * (n + 1))``: the bounds are the k-th smallest and
    largest of ``n`` candidate values (0 means unbounded)."""
    # The guard keeps an exact product such as 0.1 * 10, computed as
    # 0.9999999999999999, from losing a rank.
    return int(math.floor(alpha * (n_calibration + 1) + 1e-9))


def predict_interval(keys, combination, Q, *, alpha, method):
    """The heads' estimates ``mu`` (m, t) of the projected queries ``Q`` and
    the offsets (m, t, 2) of the lower and upper bounds from them, for a
    model with training rows ``keys`` whose heads combine as
    ``combination`` (a ``HeadCombination``).

    For each calibration row ``i`` with residual ``R_i`` and each query ``x``,
    ``mu_{-i}(x)`` is the ensemble's estimate without row ``i`` (every head's
    weights renormalised over the other rows; projections as fitted; only
    the heads of the members that held row ``i`` out, where the
    calibration says so). The
    bounds are the ``k``-th smallest of ``mu_{-i}(x) - s_i`` and the ``k``-th
    largest of ``mu_{-i}(x) + s_i`` (jackknife+, Barber et al. 2021), with
    ``s_i = |R_i|`` or, for ``'adaptive'``, ``|R_i| sigma(x) / sigma_{-i}(x_i)``
    where ``sigma`` is the local error scale (see ``local_scale``). The
    estimates come from the same attention blocks, so that the bounds cost
    one pass over the training rows, not two.
    """
    xp, dev = keys.xp, device(keys.Z)
    cal = combination.calibration
    alpha_h = combination.head_weights
    pos = cal.positions()
    cal_rows = xp.asarray(cal.rows[cal.calibration], device=dev)
    R = xp.abs(cal.held_out_residuals())  # (c, t)
    n_cal = R.shape[0]
    k = conformal_rank(n_cal, alpha)
    if too_few_to_bound(n_cal, alpha):
        mu = keys.passes().estimates(Q, alpha_h)
        inf = xp.full(mu.shape, float("inf"), dtype=mu.dtype, device=dev)
        return mu, xp.stack([-inf, inf], axis=-1)
    scale_q = None
    if method == "adaptive":
        scale_q, scale_cal = local_scale(keys, combination, Q, pos)
        R = R / scale_cal
    Y_cal = xp.take(keys.Y, cal_rows, axis=0)

    Z_cal = [xp.take(keys.head(h), cal_rows, axis=0) for h in range(keys.n_heads)]
    left_weights = _left_out_weights(cal, alpha_h, R.dtype, xp=xp, device=dev)

    def estimate_and_left_out(block):
        h = block.h
        est, left_out = keys.readout_of(h).left_out(
            block.E, block.num, block.Qh, Z_cal[h], Y_cal, cal_rows, xp=xp
        )
        return alpha_h[h] * est, left_weights[h] * left_out

    estimates, lower, upper = [], [], []
    # A local-linear readout's left-out estimates hold about a dozen
    # (block, calibration rows) float64 arrays.
    n_blocks = 2 if keys.reads_mean else 12
    for rows, (mu, M) in over_heads(Q, keys, estimate_and_left_out, n_blocks=n_blocks):
        spread = R[None, :, :]
        if scale_q is not None:
            spread = spread * scale_q[rows, :][:, None, :]
        estimates.append(mu)
        lower.append(kth_smallest(M - spread, k - 1, xp=xp) - mu)
        upper.append(kth_smallest(M + spread, n_cal - k, xp=xp) - mu)
    offsets = [xp.concat(parts, axis=0) for parts in (lower, upper)]
    return xp.concat(estimates, axis=0), xp.stack(offsets, axis=-1)


def _left_out_weights(cal, head_weights, dtype, *, xp, device):
    """Per head, the weight of its left-out estimates: a float, or one per
    calibration row shaped (1, c, 1) to broadcast over ``(m, c, t)``."""
    if cal.head_weights is None:
        return head_weights
    weights = xp.asarray(cal.head_weights.T, dtype=dtype, device=device)
    return [weights[h, :][None, :, None] for h in range(weights.shape[0])]


def local_scale(keys, combination, Q, positions):
    """The local error scale ``sigma`` of the queries ``Q`` (m, t) and of the
    residual rows at ``positions`` (an index into the calibration's rows),
    each of those left out of its own scale (c, t).

    ``sigma^2(x)`` is the NW mean of the squared leave-one-out residuals
    under the model's attention (heads and weights as fitted, keys the rows
    with residuals), shrunk toward their overall mean as if that mean were
    one more neighbour: ``(n_eff m(x) + m_all) / (n_eff + 1)`` with ``n_eff =
    1 / sum_i v_i(x)^2`` the attention's effective number of rows. The
    shrinkage keeps the scale away from zero where a few neighbours happen
    to fit well.
    """
    xp = keys.xp
    cal = combination.calibration
    alpha = combination.head_weights
    R2 = cal.residuals * cal.residuals
    # The rows with residuals as keys, their squared residuals as targets.
    # The residuals' local mean is an average (a line could go negative).
    rows = xp.asarray(cal.rows, device=device(keys.Z))
    passes = keys.take(rows, Y=R2, readout=CONSTANT).passes()
    m_all = xp.mean(R2, axis=0)
    local_q, sq_q = passes.estimates_and_squared_spread(Q, alpha)
    spread = xp.sqrt(sq_q)
    scale_q = _shrunk(local_q, 1.0 / (spread * spread), m_all, xp=xp)
    local_r, sq = passes.estimates_and_squared_spread(None, alpha, loo_rows=positions)
    return scale_q, _shrunk(local_r, 1.0 / sq, m_all, xp=xp)


def _shrunk(local, n_eff, overall, *, xp):
    """``sqrt((n_eff * local + overall) / (n_eff + 1))``, per output."""
    n_eff = n_eff[:, None]
    return xp.sqrt((n_eff * local + overall[None, :]) / (n_eff + 1.0))


def calibration_rows(rows, heldout, head_weights):
    """Positions in ``rows`` (training rows with residuals) of the rows that
    calibrate, and the weights of the heads in their residuals (see
    ``Calibration``).

    ``heldout`` holds, per member (a block of ``len(head_weights) /
    len(heldout)`` heads), the rows held out of its projections' fit (or
    None). A row calibrates when some member held it out, with the estimate
    of those members' heads alone (their weights renormalised), whose
    residual owes nothing to any projection that saw the row: the
    jackknife+-after-bootstrap of Kim, Xu and Barber (2020), with members
    for resamples. Rows that no member held out would calibrate on an
    estimate fitted to them. With one member the weights are the model's
    (None); without held-out rows all rows calibrate.
    """
    head_weights = np.asarray(head_weights, dtype=np.float64)
    per_member = head_weights.shape[0] // len(heldout)
    held = np.stack(
        [
            np.zeros(rows.shape[0], dtype=bool) if h is None else np.isin(rows, h)
            for h in heldout
        ]
    )
    weights = np.repeat(held, per_member, axis=0).T * head_weights  # (rows, H)
    total = weights.sum(axis=1)
    inside = np.flatnonzero(total > 0)
    if inside.shape[0] == 0:
        return np.arange(rows.shape[0]), None
    if len(heldout) == 1:
        return inside, None
    return inside, weights[inside] / total[inside, None]
