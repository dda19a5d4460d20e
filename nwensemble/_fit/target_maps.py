"""Per-feature target maps: each numeric feature's binned mean target, a
column that a head's projection weighs beside the feature itself.

Where the target jumps along a feature (a threshold), the feature's map
jumps there too, so that rows on the two sides lie far apart in a
projection that weighs the map, and a kernel of fixed width no longer
averages across the step (see the user guide's residual stage). The maps
of the training rows are cross-fitted (each row's from the other folds'
rows), so that no row's map holds its own target.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._fit.early_stopping import heldout_residuals
from nwensemble._fit.engine import scaled_targets
from nwensemble._fit.paired_rule import paired_gain_is_clear
from nwensemble._fit.start import (
    _SCALE_GRID,
    _SCALE_SEARCH_SIZE,
    _best_scale,
    fold_scales,
)
from nwensemble._shared.design import numbers_design
from nwensemble._shared.features import fit_scaling
from nwensemble._shared.kernels import KERNELS
from nwensemble._shared.rows import take_rows

# Quantile bins per feature; a feature with fewer distinct values has a bin
# per value (a missing value has a bin of its own).
MAP_BINS = 16
# Folds of the training rows' cross-fitted maps.
MAP_FOLDS = 5
# Folds of the check whether the maps pay (as the start's check of its
# per-feature scales).
CHECK_FOLDS = 4


class TargetMaps:
    """The binned mean target of each column of a numeric table.

    Parameters
    ----------
    edges : list of ndarray
        Per column, the inner edges of its bins, training values (a value
        ``x`` falls in bin ``searchsorted(edges, x, side='right')``; NaN in
        the bin after the last).
    means : list of ndarray of shape (n_bins + 2, n_outputs)
        Per column, each bin's weighted mean target (the overall mean where
        a bin held no training row).
    """

    def __init__(self, edges, means):
        self.edges = edges
        self.means = means

    @classmethod
    def fit(cls, X, Y, sw):
        """Maps of the columns of ``X`` (n, q; float64 NumPy, NaN missing)
        for targets ``Y`` (n, t) weighted by ``sw`` (n,)."""
        overall = (sw @ Y) / np.sum(sw)
        edges, means = [], []
        inner = np.linspace(0.0, 1.0, MAP_BINS + 1)[1:-1]
        for x in X.T:
            seen = ~np.isnan(x) & (sw > 0)
            cuts = np.empty(0)
            if seen.any():
                # Weighted quantiles that are training values, above the
                # least: a feature of few values has a bin per value, and
                # a value between two of them maps as the lower one.
                levels = np.quantile(
                    x[seen], inner, method="inverted_cdf", weights=sw[seen]
                )
                cuts = np.unique(levels)
                cuts = cuts[cuts > np.min(x[seen])]
            codes = _codes(x, cuts)
            n_codes = cuts.size + 2
            weight = np.bincount(codes, weights=sw, minlength=n_codes)
            sums = np.stack(
                [np.bincount(codes, weights=sw * y, minlength=n_codes) for y in Y.T],
                axis=1,
            )
            filled = weight > 0
            mean = np.tile(overall, (n_codes, 1))
            mean[filled] = sums[filled] / weight[filled, None]
            edges.append(cuts)
            means.append(mean)
        return cls(edges, means)

    def transform(self, X):
        """The maps (n, q * t) of rows ``X`` (n, q), column by column, each
        column's outputs side by side."""
        parts = [m[_codes(x, e)] for x, e, m in zip(X.T, self.edges, self.means)]
        return np.concatenate(parts, axis=1)


def _codes(x, cuts):
    """Bin codes of the values ``x`` for inner edges ``cuts``; NaN last."""
    codes = np.searchsorted(cuts, x, side="right")
    return np.where(np.isnan(x), cuts.size + 1, codes)


def cross_fitted_maps(X, Y, sw, *, rng):
    """The training rows' maps: the rows of positive weight in
    ``MAP_FOLDS`` folds of a random permutation, each fold's rows mapped by
    the maps of the other folds; rows of zero weight (which no map holds)
    by the maps of all rows, so that they change nothing, as their removal
    would not."""
    positive = np.flatnonzero(sw > 0)
    n_folds = min(MAP_FOLDS, positive.size)
    if n_folds < 2:  # one row of positive weight: nothing to cross-fit
        return TargetMaps.fit(X, Y, sw).transform(X)
    out = np.empty((X.shape[0], len(X.T) * Y.shape[1]))
    rest = ~(sw > 0)
    if rest.any():
        out[rest] = TargetMaps.fit(X, Y, sw).transform(X[rest])
    for fold in np.array_split(positive[rng.permutation(positive.size)], n_folds):
        others = sw.copy()
        others[fold] = 0.0
        out[fold] = TargetMaps.fit(X, Y, others).transform(X[fold])
    return out


def maps_promise(X, M, Y, sw, *, rng):
    """Whether the maps ``M`` beside the features ``X`` predict rows they
    were not fitted to better than the features alone, at the start of a
    fit: worth a fit with them (whose end can still lose to the features'
    alone, where a fitted projection finds what the maps offered).

    On a subsample of at most ``_SCALE_SEARCH_SIZE`` rows of positive
    weight, each design (the standardised features, and those with the
    standardised maps beside them) gets the identity start of one head
    (``_fit/start.py``: the best common scale, then a scale per column
    where that lowers the loss), fitted on three quarters of the subsample
    and scored on the fourth, for each quarter; the maps pay where they
    lower the rows' weighted mean squared error by more than
    ``paired_rule.PAIRED_STANDARD_ERRORS`` standard errors of the rows'
    differences. A feature along which the target jumps gets a map that
    separates the two sides of the jump; maps that carry nothing the
    features do not (a smooth target's) leave the two starts predicting
    alike, and then the features alone are kept.
    """
    positive = np.flatnonzero(sw > 0)
    rows = positive
    if positive.size > _SCALE_SEARCH_SIZE:
        rows = np.sort(rng.choice(positive, _SCALE_SEARCH_SIZE, replace=False))
    if rows.size < 2 * CHECK_FOLDS:
        return False
    w = sw[rows] / np.sum(sw[rows])
    features = _standardised(X[rows], w)
    both = np.concatenate([features, _standardised(M[rows], w)], axis=1)
    Ys = scaled_targets(Y[rows], w, xp=np)
    folds = np.array_split(rng.permutation(rows.size), CHECK_FOLDS)
    alone, mapped = (_start_heldout_errors(Z, Ys, w, folds) for Z in (features, both))
    return paired_gain_is_clear(alone, mapped, w)


def _standardised(X, w):
    """Columns of ``X`` centred and scaled by their weighted spread over
    their observed values (``fit_scaling``), missing values at the centre."""
    seen = ~np.isnan(X)
    W = np.where(seen, w[:, None], 0.0)
    totals = np.sum(W, axis=0)
    W = W / np.where(totals > 0, totals, 1.0)
    X0 = np.where(seen, X, 0.0)
    centre, scale = fit_scaling(X0, W, standardize=True, xp=np)
    return np.where(seen, (X0 - centre) / scale, 0.0)


def _start_heldout_errors(Z, Ys, w, folds):
    """Each row's squared error (summed over outputs) when one head's
    identity start on ``Z``, fitted to the other folds' rows, predicts it."""
    kernel = KERNELS["softmax"]
    design = numbers_design(Z)
    W = np.eye(Z.shape[1])
    near, _ = _best_scale(W, design, Ys, w, _SCALE_GRID, kernel=kernel, xp=np)
    errors = np.empty(Z.shape[0])
    for k, fold in enumerate(folds):
        rest = np.sort(np.concatenate(folds[:k] + folds[k + 1 :]))
        fold = np.sort(fold)
        train = take_rows(design, Ys, w, rest, xp=np)
        scale, common, scales, own = fold_scales(
            W, W, train, kernel=kernel, xp=np, near=near
        )
        if not own < common:
            scales = np.full(W.shape[1], scale)
        R = heldout_residuals(
            W * scales, design.take(fold), Ys[fold], *train, kernel=kernel, n_heads=1
        )
        errors[fold] = np.sum(R * R, axis=1)
    return errors
