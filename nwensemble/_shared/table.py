"""Tables as they come: which columns are categorical, their levels, and
the numeric columns with their missing values, as arrays of one namespace.

A categorical column's levels are numbered in the order they first appear
among the training rows, so that relabelling a column's levels, reordering
a ``category`` dtype's categories, or giving the column as strings, as
``category`` or as integer codes yields the same codes, hence the same
model. Levels seen in fewer than ``MIN_LEVEL_ROWS`` training rows (of
positive weight) share one "infrequent" code, which levels never seen in
training take too; a missing value has a code of its own.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._shared.backend import device as device_of
from nwensemble._shared.backend import namespace_of, to_numpy

# A level needs this many training rows for an embedding of its own: with
# fewer, its embedding would be learned from the few rows' own targets.
MIN_LEVEL_ROWS = 5


@dataclass(frozen=True, eq=False)
class Table:
    """Validated rows of a table with categorical features or missing values.

    Attributes
    ----------
    numeric : array of shape (n, n_numeric)
        The numeric columns, in input order, NaN where missing.
    codes : array of int of shape (n, n_categorical)
        Per categorical column, the code of each row's level: ``0`` to
        ``L - 1`` for the frequent levels, ``L`` for an infrequent or unseen
        level, ``L + 1`` for a missing value (``L`` the column's frequent
        levels).
    level_ids : array of int of shape (n, n_categorical)
        Each row's level itself: its number among the training levels, -1
        for a level never seen in training, -2 for a missing value (copies
        of a row are found by these, not by the shared codes).
    n_codes : tuple of int
        Codes per categorical column (``L + 2``).
    is_categorical : ndarray of bool of shape (n_features,)
        Which input columns are categorical.
    """

    numeric: Any
    codes: Any
    level_ids: Any
    n_codes: tuple
    is_categorical: np.ndarray

    def copy_key(self):
        """One number per feature for finding a row's exact copies: the
        numeric values (missing as infinity, which no value is) and the
        level ids."""
        xp = namespace_of(self.numeric)[0]
        N = self.numeric
        inf = xp.full(N.shape, float("inf"), dtype=N.dtype, device=device_of(N))
        return xp.concat(
            [xp.where(xp.isnan(N), inf, N), xp.astype(self.level_ids, N.dtype)], axis=1
        )

    @property
    def shape(self):
        """(rows, features)."""
        return (self.numeric.shape[0], self.numeric.shape[1] + self.codes.shape[1])

    @property
    def dtype(self):
        """The numeric columns' dtype."""
        return self.numeric.dtype


def copy_key(X):
    """What rows are compared by to find a row's exact copies: an array
    itself, or a ``Table``'s values and levels."""
    return X.copy_key() if isinstance(X, Table) else X


def is_dataframe(X):
    """Whether ``X`` is a pandas DataFrame (or quacks like one)."""
    return hasattr(X, "dtypes") and hasattr(X, "columns") and hasattr(X, "iloc")


def as_pandas(X):
    """A polars DataFrame as pandas (other inputs as they are)."""
    if type(X).__module__.split(".")[0] == "polars":
        return X.to_pandas()
    return X


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


def columns(X):
    """The columns of ``X`` as NumPy arrays (one per column; a DataFrame's
    columns keep their values, as ``object`` where they are not numbers)."""
    if is_dataframe(X):
        return [X.iloc[:, j].to_numpy() for j in range(X.shape[1])]
    A = X if isinstance(X, np.ndarray) else to_numpy(X)
    A = np.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"Expected a 2-d table; got an array of shape {A.shape}.")
    return [A[:, j] for j in range(A.shape[1])]


def missing_mask(values):
    """Where ``values`` (a NumPy array) are missing: None, NaN, pandas' NA
    and NaT."""
    if values.dtype.kind in "fc":
        return np.isnan(values)
    if values.dtype.kind != "O":
        return np.zeros(values.shape, dtype=bool)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        return np.array([v is None or v != v for v in values], dtype=bool)
    return np.asarray(pd.isna(values), dtype=bool)


def numeric_column(values, name):
    """A numeric column as float64 with NaN for its missing values; a clear
    error for strings and infinities."""
    missing = missing_mask(values)
    if values.dtype.kind == "O" and missing.any():
        values = np.where(missing, np.nan, values)
    try:
        out = np.asarray(values, dtype=np.float64)
    except ValueError:
        bad = next(
            (i, v) for i, v in enumerate(values) if not missing[i] and not _is_number(v)
        )
        raise ValueError(
            f"Column {name} holds a value that is not a number: {bad[1]!r} (row "
            f"{bad[0]}). Declare the column categorical (categorical_features="
            "'from_dtype' with a string or category dtype, or its index or name) "
            "or convert it to numbers."
        ) from None
    if np.isinf(out).any():
        row = int(np.flatnonzero(np.isinf(out))[0])
        raise ValueError(
            f"Column {name} holds an infinite value (row {row}); missing values "
            "are accepted as NaN, infinities are not."
        )
    return out


def _is_number(v):
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True, eq=False)
class TableEncoder:
    """The fitted encoding of a table's columns (see the module docstring).

    Attributes
    ----------
    is_categorical : ndarray of bool of shape (n_features,)
    names : list of str
        Column names for messages (``'x<j>'`` without a DataFrame's).
    levels : list of ndarray
        Per categorical column, its training levels in the order they first
        appear (``object`` arrays).
    frequent : list of ndarray of bool
        Per categorical column, whether each of ``levels`` has a code of its
        own.
    """

    is_categorical: np.ndarray
    names: list
    levels: list
    frequent: list

    @property
    def n_codes(self):
        """Codes per categorical column: its frequent levels, the infrequent
        one and the missing one."""
        return [int(f.sum()) + 2 for f in self.frequent]

    def encode(self, X, *, xp, device, dtype=None):
        """``X`` (validated for its shape) as a ``Table`` in namespace ``xp``."""
        cols = columns(as_pandas(X))
        numeric = [
            numeric_column(c, self.names[j])
            for j, c in enumerate(cols)
            if not self.is_categorical[j]
        ]
        n = len(cols[0]) if cols else 0
        codes, ids = [], []
        cat_cols = [c for j, c in enumerate(cols) if self.is_categorical[j]]
        for values, levels, frequent in zip(cat_cols, self.levels, self.frequent):
            level_ids = _level_ids(values, levels)
            codes.append(_codes(level_ids, frequent))
            ids.append(level_ids)
        num = np.stack(numeric, axis=1) if numeric else np.zeros((n, 0))
        if dtype is None:
            dtype = xp.float64
        return Table(
            xp.asarray(num, dtype=dtype, device=device),
            xp.asarray(_stack_int(codes, n), device=device),
            xp.asarray(_stack_int(ids, n), device=device),
            tuple(self.n_codes),
            self.is_categorical,
        )

    def categories(self):
        """Per categorical column: ``(frequent levels, infrequent levels)``,
        each sorted where the levels can be ordered."""
        out = []
        for levels, frequent in zip(self.levels, self.frequent):
            out.append((_sorted(levels[frequent]), _sorted(levels[~frequent])))
        return out

    def code_order(self):
        """Per categorical column, the codes of its frequent levels in the
        order of ``categories()``."""
        orders = []
        for levels, frequent in zip(self.levels, self.frequent):
            kept = levels[frequent]
            order = _sort_order(kept)
            orders.append(order)
        return orders


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
    numbers = {str(_key(v)) for v in levels if _is_number(v) and not isinstance(v, str)}
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
        [_is_number(v) and not isinstance(v, (bool, np.bool_)) for v in levels],
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
    ``_key``): by pandas' hash tables where pandas is installed, by a loop
    over the rows in Python otherwise."""
    pd = _pandas()
    if pd is None:
        return _first_appearance_by_loop(values, missing, weighted)
    present = ~missing
    codes, uniques = pd.factorize(_as_objects(values[present]))
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
        key = _key(v)
        k = index.get(key)
        if k is None:
            k = index[key] = len(order)
            order.append(v)
            counts.append(0)
        counts[k] += int(w)
    out = np.empty(len(order), dtype=object)
    out[:] = order
    return out, np.asarray(counts, dtype=np.int64)


def _key(v):
    """A hashable stand-in for a level (NumPy scalars as Python ones, so
    that ``np.int64(3)``, ``3`` and ``3.0`` are one level)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _level_ids(values, levels):
    """Each value's position in ``levels``; -1 unseen, -2 missing."""
    missing = missing_mask(values)
    pd = _pandas()
    if pd is None:
        index = {_key(v): k for k, v in enumerate(levels)}
        ids = [index.get(_key(v), -1) for v in values]
    else:
        # Both as object indexes: pandas would otherwise infer the values'
        # type first (a string dtype for text), one more pass over them.
        queries = pd.Index(_as_objects(values), dtype=object)
        ids = pd.Index(levels, dtype=object).get_indexer(queries)
    return np.where(missing, -2, np.asarray(ids, dtype=np.int64))


def _as_objects(values):
    """``values`` as an ``object`` array: pandas then hashes and compares
    them as Python's dicts do (a float 3.0 and an integer 3 alike)."""
    return values.astype(object, copy=False)


def _pandas():
    """pandas, or None where it is not installed (it is optional)."""
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is optional
        return None
    return pandas


def _codes(level_ids, frequent):
    """Codes from level ids: frequent levels numbered in order, then the
    shared infrequent-or-unseen code, then the missing one."""
    L = int(frequent.sum())
    number = np.full(frequent.shape[0], L, dtype=np.int64)
    number[frequent] = np.arange(L)
    codes = np.where(level_ids >= 0, number[np.maximum(level_ids, 0)], L)
    return np.where(level_ids == -2, L + 1, codes).astype(np.int64)


def _stack_int(arrays, n):
    return np.stack(arrays, axis=1) if arrays else np.zeros((n, 0), dtype=np.int64)


def _sort_order(levels):
    """The order that sorts ``levels``, or their own order if they cannot be
    compared (mixed types)."""
    try:
        keys = [_key(v) for v in levels]
        return np.asarray(sorted(range(len(keys)), key=keys.__getitem__), dtype=int)
    except TypeError:
        return np.arange(len(levels))


def _sorted(levels):
    return levels[_sort_order(levels)]
