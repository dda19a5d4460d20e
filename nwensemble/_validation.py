"""Input validation shared by the estimators and the allocator."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import (
    _check_sample_weight,
    _check_y,
    _num_features,
    _num_samples,
    check_consistent_length,
    validate_data,
)

from nwensemble._fit.column_types import categorical_mask, fit_encoder
from nwensemble._shared.backend import (
    compute_namespace,
    get_namespace,
    move_to,
    to_numpy,
)
from nwensemble._shared.table import (
    NumberColumns,
    as_pandas,
    is_dataframe,
    missing_mask,
)


def training_arrays(estimator, X, y, sample_weight, *, encoder=None):
    """Validate an NW estimator's ``fit`` input; return its namespace and
    arrays on its device.

    Returns ``xp, table, encoder, Y, sw, single_output``: the rows as
    ``encoder`` encoded them (a ``table.Table``; ``encoder`` a fitted
    ``TableEncoder`` when some features are categorical or missing, else
    ``NumberColumns``); ``Y`` of shape (n, t) in the dtype of the numeric
    columns, ``sw`` non-negative weights that sum to one, and whether ``y``
    was 1-d. The estimator's ``device`` and ``categorical_features`` say
    where and what. ``encoder``: a ``TableEncoder`` fitted on the same rows
    by another fit (a stage's other group of members), taken as it is
    instead of fitting one; None fits one.
    """
    X, y, mask = validate_fit_data(
        estimator, X, y, categorical_features=estimator.categorical_features
    )
    table = mask is not None
    xp, dev = get_namespace(X)  # NumPy for a DataFrame
    if not table:
        X = as_float(X, xp=xp)
    # scikit-learn's checks see the input's arrays only: with the dispatch
    # off they would turn arrays of another device into NumPy (which CuPy
    # refuses).
    sample_weight = move_to(sample_weight, xp=xp, device=dev)
    dtype = X.dtype if not table and X.dtype == xp.float32 else xp.float64
    sw = _check_sample_weight(sample_weight, X, dtype=dtype)
    if estimator.device != "auto":
        xp, dev = compute_namespace(estimator.device, X)
        X = X if table else move_to(X, xp=xp, device=dev)
    if table and encoder is None:
        from_dtype = isinstance(estimator.categorical_features, str)
        names = _feature_names(estimator, X)
        encoder = fit_encoder(
            X, mask, to_numpy(sw), names, from_dtype=from_dtype, targets=to_numpy(y)
        )
    elif not table:
        encoder = NumberColumns(X.shape[1])
    float32 = getattr(X, "dtype", None) == xp.float32
    X = encoder.encode(
        X, xp=xp, device=dev, dtype=xp.float32 if float32 else xp.float64
    )
    y = move_to(y, xp=xp, device=dev)
    sw = move_to(sw, xp=xp, device=dev)
    Y = xp.astype(y, X.dtype)
    single_output = Y.ndim == 1
    if single_output:
        Y = xp.reshape(Y, (-1, 1))
    if not bool(xp.all(sw >= 0)):
        raise ValueError("sample_weight must be non-negative.")
    n_positive = int(xp.sum(xp.astype(sw > 0, xp.int64)))
    if n_positive < 2:
        raise ValueError(
            "At least 2 samples with positive sample_weight are needed: a "
            f"leave-one-out fit attends to the other samples; got {n_positive}."
        )
    return xp, X, encoder, Y, sw / xp.sum(sw), single_output


def _feature_names(estimator, X):
    """Column names for messages: ``feature_names_in_``, else ``x<j>``."""
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        return [repr(str(n)) for n in names]
    return [f"x{j}" for j in range(X.shape[1])]


def validate_fit_data(estimator, X, y, *, categorical_features=None, labels=False):
    """``fit``'s ``X`` and ``y`` checked by scikit-learn, and which columns of
    ``X`` are categorical.

    Returns ``(X, y, mask)``. ``mask`` None: ``X`` is a floating array of at
    least two rows without missing values (a table of numbers). All False:
    ``X`` is such an array with missing values. Otherwise ``mask`` is the
    boolean mask of the categorical columns and ``X`` the table as given (a
    DataFrame, or an array), to be encoded (``column_types.fit_encoder``). ``y`` is
    numeric, of one or several outputs, without missing values; with
    ``labels``, class labels of any type (checked by the classifier).
    """
    X = as_pandas(X)
    reject_dates(X)
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
                y_numeric=not labels,
                ensure_min_samples=2,
            )
        except ValueError as exc:
            _raise_for_strings(X, categorical_features, exc)
            raise
        if not bool(xp.any(xp.isnan(Xv))):
            return Xv, y, None
        return Xv, y, np.zeros(Xv.shape[1], dtype=bool)
    validate_data(estimator, X, skip_check_array=True)
    y = _check_y(y, multi_output=True, y_numeric=not labels, estimator=estimator)
    check_consistent_length(X, y)
    if _num_samples(X) < 2:
        raise ValueError(
            f"Found array with {_num_samples(X)} sample(s) while a minimum of 2 "
            "is required."
        )
    return X, y, mask


def as_table_rows(X):
    """Query rows for a model fitted on a table with categorical columns: a
    pandas DataFrame or an array as it is, a polars one as pandas, a list
    of rows as an ``object`` array; 1-d or scalar input gets scikit-learn's
    error for it (the table's checks skip ``check_array``, which would
    otherwise say so)."""
    X = as_pandas(X)
    if is_dataframe(X):
        return X
    if not hasattr(X, "shape"):
        X = np.asarray(X, dtype=object)
    if len(X.shape) == 2:
        return X
    kind = "scalar array" if len(X.shape) == 0 else f"{len(X.shape)}D array"
    raise ValueError(
        f"Expected 2D array, got {kind} instead:\narray={X!r}.\nReshape your "
        "data either using array.reshape(-1, 1) if your data has a single "
        "feature or array.reshape(1, -1) if it contains a single sample."
    )


def reject_dates(X):
    """A clear error for date, time and duration columns, which have no
    single right conversion to numbers (an integer of nanoseconds would be
    a scale nobody chose): NumPy and pandas date and duration dtypes,
    pandas periods, and ``object`` columns whose values are dates, times or
    durations (which would otherwise become categories, one per date)."""
    if is_dataframe(X):
        dated = [
            f"{str(c)!r} ({dtype})"
            for c, dtype in zip(X.columns, X.dtypes)
            if _dated_dtype(dtype) or (_objects(dtype) and _holds_dates(X[c]))
        ]
        subject = f"Columns {', '.join(dated)} hold"
    elif _objects(getattr(X, "dtype", None)) and getattr(X, "ndim", 0) == 2:
        dated = [str(j) for j in range(X.shape[1]) if _holds_dates(X[:, j])]
        subject = f"Columns {', '.join(dated)} of X (object) hold"
    else:
        dtype = getattr(X, "dtype", None)
        dated = _dated_dtype(dtype)
        subject = f"X ({dtype}) holds"
    if dated:
        raise ValueError(
            f"{subject} dates, times or durations, which the estimators do not "
            "convert: give them as numbers (for example days since a reference "
            "date, the hour or the month, or a duration in seconds) or as "
            "categories."
        )


def _dated_dtype(dtype):
    """Whether ``dtype`` is a date, time, duration or period dtype."""
    return getattr(dtype, "kind", None) in ("M", "m") or (
        type(dtype).__name__ == "PeriodDtype"
    )


def _objects(dtype):
    """Whether ``dtype`` is NumPy's ``object`` (Python values of any type)."""
    return isinstance(dtype, np.dtype) and dtype.kind == "O"


def _holds_dates(values):
    """Whether the first present value of an ``object`` column is a date,
    time, duration or period: a column's values share a type as a rule,
    and the first is enough to name the column."""
    import datetime

    values = np.asarray(values, dtype=object)
    present = values[~missing_mask(values)]
    if present.shape[0] == 0:
        return False
    kinds = (datetime.date, datetime.time, datetime.timedelta)
    kinds += (np.datetime64, np.timedelta64)
    return isinstance(present[0], kinds) or type(present[0]).__name__ == "Period"


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
