"""Class labels as the targets the heads learn: one-hot rows, the class
prior and the smoothing toward it that keeps probabilities above zero."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import array_api_compat
import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from nwensemble._shared.backend import to_numpy


def encode_labels(y):
    """Validated labels as ``(labels, classes, codes)``: ``y`` as a 1-d
    NumPy array, its sorted distinct labels and each row's index into them.

    Raises scikit-learn's errors for targets that are not class labels
    (continuous or multi-output) and for fewer than two classes.
    """
    y = to_numpy(y) if array_api_compat.is_array_api_obj(y) else y
    y = column_or_1d(y, warn=True)
    check_classification_targets(y)
    if y.shape[0] == 0:
        raise ValueError(
            "Found array with 0 sample(s) (shape=(0,)) while a minimum of 2 is "
            "required."
        )
    classes, codes = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            "The classifier needs samples of at least 2 classes in the data, "
            f"but the data contains only one class: {classes[0]!r}."
        )
    return y, classes, codes


def one_hot(codes, n_classes):
    """(n, n_classes) float64 indicator rows of the class ``codes``."""
    Y = np.zeros((codes.shape[0], n_classes))
    Y[np.arange(codes.shape[0]), codes] = 1.0
    return Y


def class_sample_weight(class_weight, labels, sample_weight):
    """``sample_weight`` (or ones) times the weight ``class_weight`` (a dict
    keyed by label, or ``'balanced'``) gives each row's class in ``labels``;
    NumPy, or ``sample_weight`` itself without class weights."""
    if class_weight is None:
        return sample_weight
    weights = compute_sample_weight(class_weight, labels)
    if sample_weight is None:
        return weights
    return weights * row_weights(sample_weight, weights.shape[0])


def row_weights(sample_weight, n):
    """The rows' weights as float64 NumPy (ones for None)."""
    if sample_weight is None:
        return np.ones(n)
    if array_api_compat.is_array_api_obj(sample_weight):
        sample_weight = to_numpy(sample_weight)
    return np.asarray(sample_weight, dtype=np.float64)


def class_prior(codes, sw, n_classes):
    """The classes' shares of the (weighted) training rows."""
    counts = np.bincount(codes, weights=sw, minlength=n_classes)
    return counts / counts.sum()


def choose_prior_weight(P, codes, sw, prior):
    """The weight ``a`` of the class prior in ``(1 - a) P + a prior`` that
    minimises the weighted log-loss of the leave-one-out probabilities
    ``P`` (rows with NaN are skipped), at least ``1 / (n + 1)``: as if one
    more row, spread over the classes as the prior, were among every
    query's neighbours, so that no probability is exactly zero.
    """
    n = codes.shape[0]
    floor = 1.0 / (n + 1)
    known = np.all(np.isfinite(P), axis=1) & (sw > 0)
    if not np.any(known):
        return floor
    p_true = np.clip(P[known, codes[known]], 0.0, 1.0)
    w = sw[known] / sw[known].sum()
    pi_true = prior[codes[known]]

    # -log of an affine function of a is convex in a: one bounded search.
    def loss(a):
        return -float(w @ np.log((1.0 - a) * p_true + a * pi_true))

    found = minimize_scalar(loss, bounds=(floor, 1.0), method="bounded")
    return float(max(found.x, floor))
