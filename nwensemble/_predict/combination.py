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
    _, sq = keys.passes().estimates_and_squared_spread(
        None, weights, loo_rows=idx, sums=loo.sums
    )
    spread = to_numpy(sq).astype(np.float64)
    sigma2 = (sw @ (R * R)) / (sw @ (1.0 + spread))
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
