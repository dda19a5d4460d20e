"""How the heads combine, decided from their leave-one-out residuals after
the fit: the head weights, the weight of the copies' blend, the noise level
and the intervals' calibration, as one value."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from nwensemble._predict.intervals import Calibration, calibration_rows
from nwensemble._shared.backend import device, fill_masked, namespace_of, to_numpy
from nwensemble._shared.duplicates import blend, fit_duplicate_weight
from nwensemble._shared.scaling import power_of_two_scale

# Rows of positive weight, at most, whose squared spreads estimate the
# noise level's denominator.
NOISE_ROWS = 512


@dataclass(frozen=True, eq=False)
class HeadCombination:
    """How a fitted model combines its heads.

    Attributes
    ----------
    head_weights : tuple of float
        The weights of the heads' estimates.
    noise_std : array of shape (n_outputs,)
        The noise level ``predict(return_std=True)`` scales by.
    calibration : Calibration
        The leave-one-out residuals ``predict_interval`` calibrates on.
    duplicates : DuplicateIndex or None
        The training rows' copies, when their blend is on (weight above 0).
    duplicate_weight : float
        The blend's weight.
    """

    head_weights: tuple
    noise_std: Any
    calibration: Calibration
    duplicates: Optional[Any]
    duplicate_weight: float


def combine_heads(keys, loo, head_weights, *, duplicates, duplicate_weight, heldout):
    """The ``HeadCombination`` of heads with ``head_weights``, and the
    ensemble's leave-one-out predictions on all training rows (NaN outside
    the rows the statistics use).

    ``keys`` are the training rows (``Keys``), ``loo`` the heads'
    leave-one-out residuals (``engine.LeaveOneOut``), ``duplicates`` the
    rows' copies (or None) and ``duplicate_weight`` the estimator's
    parameter. The ensemble's leave-one-out residual at row ``i`` has
    variance ``sigma^2 (1 + sum_j v_ij^2)`` under homoscedastic noise (the
    row's own noise plus that of the estimate, ``v_i`` its weights on the
    other rows), so ``sigma^2 = sum_i sw_i r_i^2 / sum_i sw_i (1 + sum_j
    v_ij^2)``. The intervals calibrate on the rows some member held out of
    its projections' fit (``heldout``: per member, those rows or None),
    each on the estimate of the members that held it out, where the
    statistics' rows hold any, else on all of them with positive weight
    (see ``calibration_rows``).
    """
    residuals, sw = loo.residuals, loo.sw
    Y = keys.Y
    xp, dev = namespace_of(Y)
    weights = tuple(float(a) for a in head_weights)
    rows_np = np.arange(Y.shape[0]) if loo.rows is None else loo.rows
    idx = xp.asarray(rows_np, device=dev)
    positive = np.flatnonzero(sw > 0)
    calibrating, row_weights = calibration_rows(rows_np[positive], heldout, weights)
    # The statistics of the residuals are taken on residuals / s, exact and
    # free of overflow and underflow whatever the target's scale.
    s = power_of_two_scale(residuals)
    R = np.tensordot(np.asarray(head_weights), residuals / s, axes=1)  # (m, t)
    # The calibration rows' residuals from the heads that held them out.
    R_held = R
    if row_weights is not None:
        R_held = R.copy()
        at = positive[calibrating]
        R_held[at] = np.einsum("ch,hct->ct", row_weights, residuals[:, at] / s)
    Y_rows = xp.take(Y, idx, axis=0)

    def predicted(R):
        return Y_rows + xp.asarray(R * s, dtype=Y.dtype, device=dev)

    prediction = predicted(R)
    held = prediction if R_held is R else predicted(R_held)
    rho = 0.0
    if duplicates is not None:
        rho, M, found = _copies_blend(
            duplicates, idx, Y, Y_rows, prediction, sw, duplicate_weight
        )
        prediction = blend(prediction, M, found, rho, xp=xp)
        held = prediction if R_held is R else blend(held, M, found, rho, xp=xp)
    sigma2 = (sw @ (R * R)) / _variance_factor(keys, weights, rows_np, loo, positive)
    kept = xp.asarray(positive, device=dev)
    calibration = Calibration(
        rows_np[positive],
        xp.take(Y_rows, kept, axis=0) - xp.take(held, kept, axis=0),
        calibrating,
        row_weights,
    )
    combination = HeadCombination(
        head_weights=weights,
        noise_std=xp.asarray(np.sqrt(sigma2) * s, dtype=Y.dtype, device=dev),
        calibration=calibration,
        # Nothing to look up at predict time without a blend.
        duplicates=duplicates if rho != 0.0 else None,
        duplicate_weight=rho,
    )
    return combination, _on_all_rows(prediction, rows_np, Y)


def _variance_factor(keys, weights, rows_np, loo, positive):
    """``sum_i sw_i (1 + sum_j v_ij^2)`` over the statistics' rows
    ``rows_np``: the denominator of ``sigma^2`` (see ``combine_heads``).

    Each row's squared spread is a pass over every key. Above
    ``NOISE_ROWS`` rows of positive weight, every ``k``-th of them (``k``
    the least that leaves at most ``NOISE_ROWS``) stands for all: their
    weighted mean of ``1 + sum_j v_ij^2``, scaled to all the weight. Its
    sampling error is far below that of the residuals' sum it divides.
    """
    sw = loo.sw
    passes = keys.passes()
    step = -(-positive.shape[0] // NOISE_ROWS)
    at, sums = slice(None), loo.sums
    if step > 1:
        at = positive[::step]
        sums = None if sums is None else passes.sums_at(sums, at)
    xp, dev = namespace_of(keys.Y)
    _, sq = passes.estimates_and_squared_spread(
        None, weights, loo_rows=xp.asarray(rows_np[at], device=dev), sums=sums
    )
    factor = sw[at] @ (1.0 + to_numpy(sq).astype(np.float64))
    return factor * (sw.sum() / sw[at].sum())


def _copies_blend(duplicates, rows, Y, Y_rows, prediction, sw, duplicate_weight):
    """The blend's weight (learned for ``'auto'``) from the leave-one-out
    predictions of the rows that have copies, and those rows' copies'
    left-out means with where they are found (``blend``'s arguments)."""
    xp, _ = namespace_of(Y)
    w = xp.asarray(sw, dtype=Y.dtype, device=device(Y))
    M, found = duplicates.left_out_means(rows, Y, w, xp=xp)
    if duplicate_weight == "auto":
        rho = fit_duplicate_weight(Y_rows, prediction, M, found, sw)
    else:
        rho = float(duplicate_weight)
    return rho, M, found


def _on_all_rows(values, rows_np, Y):
    """``values`` of training rows ``rows_np`` spread over all rows (shaped
    like ``Y``), NaN on the others."""
    n = Y.shape[0]
    if rows_np.shape[0] == n:
        return values
    xp, dev = namespace_of(Y)
    mask_np = np.zeros(n, dtype=bool)
    mask_np[rows_np] = True
    mask = xp.asarray(mask_np, device=dev)
    nan = xp.full(Y.shape, float("nan"), dtype=Y.dtype, device=dev)
    return fill_masked(mask, values, nan, xp=xp)
