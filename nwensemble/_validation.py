"""Input validation shared by the estimators and the allocator."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import (
    _check_y,
    _num_features,
    _num_samples,
    check_consistent_length,
    validate_data,
)

from nwensemble._shared.backend import get_namespace
from nwensemble._shared.table import as_pandas, categorical_mask, is_dataframe


def validate_fit_data(estimator, X, y, *, categorical_features=None):
    """``fit``'s ``X`` and ``y`` checked by scikit-learn, and which columns of
    ``X`` are categorical.

    Returns ``(X, y, mask)``. ``mask`` None: ``X`` is a floating array of at
    least two rows without missing values (a table of numbers). Otherwise
    ``mask`` is the boolean mask of the categorical columns (all False for
    numbers with missing values) and ``X`` the table as given (a DataFrame,
    or an array), to be encoded (``table.fit_encoder``). ``y`` is numeric,
    of one or several outputs, without missing values.
    """
    X = as_pandas(X)
    try:
        n_features = _num_features(X)
    except TypeError:  # not a table (1-d, scalar): scikit-learn's error below
        n_features, categorical_features = 0, None
    mask = categorical_mask(X, categorical_features, n_features)
    if mask is None:
        xp, _ = get_namespace(X)
        try:
            Xv, y = validate_data(
                estimator,
                X,
                y,
                dtype=(xp.float64, xp.float32),
                ensure_all_finite="allow-nan",
                multi_output=True,
                y_numeric=True,
                ensure_min_samples=2,
            )
        except ValueError as exc:
            _raise_for_strings(X, categorical_features, exc)
            raise
        if not bool(xp.any(xp.isnan(Xv))):
            return Xv, y, None
        return Xv, y, np.zeros(Xv.shape[1], dtype=bool)
    validate_data(estimator, X, skip_check_array=True)
    y = _check_y(y, multi_output=True, y_numeric=True, estimator=estimator)
    check_consistent_length(X, y)
    if _num_samples(X) < 2:
        raise ValueError(
            f"Found array with {_num_samples(X)} sample(s) while a minimum of 2 "
            "is required."
        )
    return X, y, mask


def _raise_for_strings(X, categorical_features, exc):
    """A clearer error than NumPy's for string columns that are not declared
    categorical."""
    if not is_dataframe(X):
        return
    import pandas as pd

    text = [
        str(c)
        for c, dtype in zip(X.columns, X.dtypes)
        if not (
            pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
        )
    ]
    if text:
        raise ValueError(
            f"Columns {text} are not numeric, and categorical_features="
            f"{categorical_features!r} does not declare them categorical. Use "
            "categorical_features='from_dtype' (the default) or name them."
        ) from exc


def as_float(X, *, xp):
    """Return ``X`` as float32 if it already is, else float64."""
    if X.dtype == xp.float32 or X.dtype == xp.float64:
        return X
    return xp.astype(X, xp.float64)
