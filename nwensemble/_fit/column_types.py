"""Which columns of a table are categorical, and the levels each holds:
the fit of a ``table.TableEncoder``.

Levels seen in fewer than ``MIN_LEVEL_ROWS`` training rows (of positive
weight) share the encoder's one "infrequent" code.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np

from nwensemble._shared.backend import to_numpy
from nwensemble._shared.table import (
    NumberColumns,
    TableEncoder,
    as_objects,
    as_pandas,
    columns,
    is_dataframe,
    is_number,
    level_key,
    missing_mask,
    optional_pandas,
)

# A level needs this many training rows for an embedding of its own: with
# fewer, its embedding would be learned from the few rows' own targets.
MIN_LEVEL_ROWS = 5


def categorical_mask(X, categorical_features, n_features):
    """Boolean mask of the categorical columns of ``X``, or None when none is.

    ``'from_dtype'``: a DataFrame's ``category``, string, ``object`` and
    boolean columns; a NumPy ``object`` array's columns holding a string.
    Otherwise a boolean mask, integer indices or column names (names need a
    DataFrame), as in ``HistGradientBoostingRegressor``; None for none.
    """
    if categorical_features is None:
        return None
    if isinstance(categorical_features, str) and categorical_features == "from_dtype":
        mask = _mask_from_dtypes(X)
    else:
        mask = _mask_from_spec(X, categorical_features, n_features)
    return mask if mask is not None and mask.any() else None


def _mask_from_dtypes(X):
    if is_dataframe(X):
        import pandas as pd

        return np.array(
            [
                isinstance(dtype, pd.CategoricalDtype)
                or pd.api.types.is_bool_dtype(dtype)
                or _text_dtype(dtype)
                for dtype in X.dtypes
            ],
            dtype=bool,
        )
    if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 2:
        return np.array(
            [any(isinstance(v, str) for v in X[:, j]) for j in range(X.shape[1])],
            dtype=bool,
        )
    return None


def _mask_from_spec(X, spec, n_features):
    spec = np.asarray(spec)
    if spec.size == 0:
        return None
    if spec.dtype.kind == "b":
        if spec.shape != (n_features,):
            raise ValueError(
                "categorical_features as a boolean mask must have shape "
                f"(n_features,) = ({n_features},); got {spec.shape}."
            )
        return spec.astype(bool)
    mask = np.zeros(n_features, dtype=bool)
    if spec.dtype.kind in "iu":
        if spec.min() < 0 or spec.max() >= n_features:
            raise ValueError(
                "categorical_features as integer indices must lie in "
                f"[0, {n_features - 1}]; got {spec.tolist()}."
            )
        mask[spec] = True
        return mask
    if spec.dtype.kind in "UO" and all(isinstance(s, str) for s in spec.ravel()):
        if not is_dataframe(X):
            raise ValueError(
                "categorical_features as column names needs X with named "
                "columns (a DataFrame); pass indices or a boolean mask instead."
            )
        names = [str(c) for c in X.columns]
        for name in spec.ravel():
            if name not in names:
                raise ValueError(
                    f"categorical_features names {name!r}, which is not a column "
                    f"of X; the columns are {names}."
                )
            mask[names.index(name)] = True
        return mask
    raise ValueError(
        "categorical_features must be 'from_dtype', None, a boolean mask, "
        f"integer indices or column names; got {spec.tolist()!r}."
    )


def fit_encoder(X, mask, sw, names, *, from_dtype=False):
    """The ``TableEncoder`` of training rows ``X`` with categorical columns
    ``mask`` (a boolean array; may be all False) and sample weights ``sw``
    (NumPy). ``from_dtype``: the mask came from the columns' dtypes, so
    warn where a text column so chosen holds numbers (see
    ``_warn_numbers_as_text``)."""
    X = as_pandas(X)
    cols = columns(X)
    text = _text_columns(X) if from_dtype else np.zeros(len(cols), dtype=bool)
    weighted = np.asarray(sw) > 0
    levels, frequent = [], []
    for j in np.flatnonzero(mask):
        values = cols[j]
        missing = missing_mask(values)
        kept, counts = _first_appearance(values, missing, weighted)
        _reject_numbers_written_as_text(kept, names[j])
        levels.append(kept)
        frequent.append(counts >= MIN_LEVEL_ROWS)
        if text[j]:
            _warn_numbers_as_text(kept, counts, names[j])
    return TableEncoder(np.asarray(mask, dtype=bool), list(names), levels, frequent)


def fit_row_encoder(X, sw, *, categorical_features, table):
    """The encoding of training rows ``X`` for the library's own host-side
    fits (a global ridge, series lines): a ``TableEncoder`` where ``table``,
    with the categorical columns ``categorical_features`` names (generic
    names), else ``NumberColumns``."""
    if not table:
        return NumberColumns(X.shape[1])
    mask = categorical_mask(X, categorical_features, X.shape[1])
    if mask is None:
        mask = np.zeros(X.shape[1], dtype=bool)
    return fit_encoder(X, mask, sw, [f"x{j}" for j in range(X.shape[1])])


def encode_on_host(encoder, X):
    """Rows ``X`` as a ``Table`` of host NumPy arrays."""
    if not encoder.takes_tables:
        X = to_numpy(X).astype(np.float64)
    return encoder.encode(X, xp=np, device="cpu")


def _text_columns(X):
    """Which columns of ``X`` hold text or Python objects (see
    ``_text_dtype``); every column of an array."""
    if not is_dataframe(X):
        return np.ones(X.shape[1], dtype=bool)
    return np.array([_text_dtype(dtype) for dtype in X.dtypes], dtype=bool)


def _text_dtype(dtype):
    """Whether a DataFrame column of ``dtype`` holds text or Python objects:
    a string or ``object`` dtype, not ``category`` (whose levels a user
    chose) nor boolean."""
    import pandas as pd

    types = pd.api.types
    return (
        not isinstance(dtype, pd.CategoricalDtype)
        and not types.is_bool_dtype(dtype)
        and (types.is_string_dtype(dtype) or types.is_object_dtype(dtype))
    )


def _reject_numbers_written_as_text(levels, name):
    """A clear error where a column holds a number and the same number as
    text (``10`` and ``'10'``), which would otherwise be two levels."""
    numbers = {
        str(level_key(v)) for v in levels if is_number(v) and not isinstance(v, str)
    }
    both = [v for v in levels if isinstance(v, str) and v.strip() in numbers]
    if both:
        raise ValueError(
            f"Column {name} holds {both[0]!r} both as a number and as text, "
            "which would be two different levels. Give the column one type: "
            "text (for example X[column].astype(str)) for categories, numbers "
            "(pandas.to_numeric) otherwise."
        )


def _warn_numbers_as_text(levels, counts, name):
    """Warn when most rows of a categorical column hold numbers (mostly
    written as text, as a CSV column with a marker such as ``'?'`` for
    missing values is read): it was taken as categories by its dtype, and
    numbers as categories lose their order and their distances."""
    numeric = np.array(
        [is_number(v) and not isinstance(v, (bool, np.bool_)) for v in levels],
        dtype=bool,
    )
    total = int(counts.sum())
    if total == 0 or 2 * int(counts[numeric].sum()) <= total:
        return
    others = [repr(v) for v in levels[~numeric][:3]]
    rest = f"; its other values include {', '.join(others)}" if others else ""
    warnings.warn(
        f"Column {name} is categorical by its dtype, but most of its values "
        f"are numbers (for example {levels[numeric][0]!r}){rest}. If it holds "
        "numbers, convert it (for example with pandas.to_numeric(..., "
        "errors='coerce'), which makes the other values missing); if it holds "
        "categories, give categorical_features explicitly.",
        UserWarning,
        stacklevel=2,
    )


def _first_appearance(values, missing, weighted):
    """The non-missing values of a column in the order they first appear,
    and the rows of positive weight that hold each.

    Values are one level where Python's dicts would make them one key (see
    ``level_key``): by pandas' hash tables where pandas is installed, by a loop
    over the rows in Python otherwise."""
    pd = optional_pandas()
    if pd is None:
        return _first_appearance_by_loop(values, missing, weighted)
    present = ~missing
    codes, uniques = pd.factorize(as_objects(values[present]))
    counts = np.bincount(codes[weighted[present]], minlength=len(uniques))
    out = np.empty(len(uniques), dtype=object)
    out[:] = list(uniques)
    return out, counts.astype(np.int64)


def _first_appearance_by_loop(values, missing, weighted):
    """``_first_appearance`` without pandas."""
    index, counts, order = {}, [], []
    for v, miss, w in zip(values, missing, weighted):
        if miss:
            continue
        key = level_key(v)
        k = index.get(key)
        if k is None:
            k = index[key] = len(order)
            order.append(v)
            counts.append(0)
        counts[k] += int(w)
    out = np.empty(len(order), dtype=object)
    out[:] = order
    return out, np.asarray(counts, dtype=np.int64)
