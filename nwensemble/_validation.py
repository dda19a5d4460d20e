"""Input validation shared by the estimators and the allocator."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.utils.validation import validate_data

from nwensemble._shared.backend import get_namespace


def validate_fit_data(estimator, X, y):
    """``fit``'s ``X`` and ``y`` checked by scikit-learn (floating ``X`` of at
    least two rows, numeric ``y`` of one or several outputs), and the
    namespace that serves them."""
    xp, _ = get_namespace(X)
    X, y = validate_data(
        estimator,
        X,
        y,
        dtype=(xp.float64, xp.float32),
        multi_output=True,
        y_numeric=True,
        ensure_min_samples=2,
    )
    return X, y


def as_float(X, *, xp):
    """Return ``X`` as float32 if it already is, else float64."""
    if X.dtype == xp.float32 or X.dtype == xp.float64:
        return X
    return xp.astype(X, xp.float64)
