"""What the heads' leave-one-out residuals decide after the fit: the
ensemble's leave-one-out predictions, the weight of the copies' blend and
the noise level."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._backend import device, fill_masked, namespace_of, to_numpy
from nwensemble._duplicates import blend, fit_duplicate_weight
from nwensemble._intervals import Calibration, calibration_rows
from nwensemble._scaling import power_of_two_scale


def combine_heads(
    predictor, residuals, sw, head_weights, *, rows, duplicate_weight, heldout=None
):
    """Set the predictor's head weights, copies' blend, noise level and the
    intervals' calibration; return the ensemble's leave-one-out predictions
    on all training rows (NaN outside ``rows``) and the blend's weight.

    ``residuals`` (n_heads, m, t) are the heads' leave-one-out residuals of
    the training rows ``rows`` (a NumPy index array, all rows when None) and
    ``sw`` (m,) their weights, float64 NumPy. The ensemble's leave-one-out
    residual at row ``i`` has variance ``sigma^2 (1 + sum_j v_ij^2)`` under
    homoscedastic noise (the row's own noise plus that of the estimate,
    ``v_i`` its weights on the other rows), so ``sigma^2 = sum_i sw_i r_i^2 /
    sum_i sw_i (1 + sum_j v_ij^2)``. The intervals calibrate on the rows in
    ``heldout`` (rows the projection was not fitted to) where ``rows`` holds
    any, else on all of ``rows`` with positive weight.
    """
    Y = predictor.Y
    xp, dev = namespace_of(Y)
    predictor.head_weights = [float(a) for a in head_weights]
    rows_np = np.arange(Y.shape[0]) if rows is None else rows
    idx = xp.asarray(rows_np, device=dev)
    # The statistics of the residuals are taken on residuals / s, exact and
    # free of overflow and underflow whatever the target's scale.
    s = power_of_two_scale(residuals)
    R = np.tensordot(np.asarray(head_weights), residuals / s, axes=1)  # (m, t)
    Y_rows = xp.take(Y, idx, axis=0)
    loo = Y_rows + xp.asarray(R * s, dtype=Y.dtype, device=dev)
    loo, rho = _blend_copies(predictor, idx, Y_rows, loo, sw, duplicate_weight)
    spread = to_numpy(predictor.loo_spread(idx)).astype(np.float64)
    sigma2 = (sw @ (R * R)) / (sw @ (1.0 + spread))
    predictor.noise_std = xp.asarray(np.sqrt(sigma2) * s, dtype=Y.dtype, device=dev)
    positive = np.flatnonzero(sw > 0)
    kept = xp.asarray(positive, device=dev)
    predictor.calibration = Calibration(
        rows_np[positive],
        xp.take(Y_rows, kept, axis=0) - xp.take(loo, kept, axis=0),
        calibration_rows(rows_np[positive], heldout),
    )
    return _on_all_rows(loo, rows_np, Y), rho


def _blend_copies(predictor, rows, Y_rows, loo, sw, duplicate_weight):
    """The blend's weight (learned for ``'auto'``) from the leave-one-out
    predictions ``loo`` of the rows that have copies, set on the predictor;
    return those predictions blended, and the weight."""
    rho = 0.0
    if predictor.duplicates is not None:
        Y = predictor.Y
        xp, _ = namespace_of(Y)
        w = xp.asarray(sw, dtype=Y.dtype, device=device(Y))
        M, found = predictor.duplicates.left_out_means(rows, Y, w, xp=xp)
        if duplicate_weight == "auto":
            rho = fit_duplicate_weight(Y_rows, loo, M, found, sw)
        else:
            rho = float(duplicate_weight)
        loo = blend(loo, M, found, rho, xp=xp)
    if rho == 0.0:
        predictor.duplicates = None  # nothing to look up at predict time
    predictor.duplicate_weight = rho
    return loo, rho


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


def original_rows(rows, merged_group, duplicates):
    """Training rows (sorted NumPy integers) of the fitted rows ``rows``:
    each merged row stands for all the copies of its group."""
    if rows is None or merged_group is None:
        return rows
    groups = to_numpy(merged_group)[rows]
    return np.flatnonzero(np.isin(to_numpy(duplicates.train_group), groups))


def sample_loo_rows(positive, heldout, size, *, rng):
    """``size`` of the rows ``positive``, sorted: the rows held out
    of the projection's fit first (their residuals are honest), then a random
    fill."""
    if heldout is None:
        return np.sort(rng.choice(positive, size, replace=False))
    first = heldout
    if heldout.shape[0] > size:
        first = rng.choice(heldout, size, replace=False)
    rest = np.setdiff1d(positive, first)
    fill = rng.choice(rest, size - first.shape[0], replace=False)
    return np.sort(np.concatenate([first, fill]))
