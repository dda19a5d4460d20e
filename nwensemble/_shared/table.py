"""Tables as they come, encoded: the numeric columns with their missing
values and each categorical column's codes, as arrays of one namespace.

A categorical column's levels are numbered in the order they first appear
among the training rows (see ``_fit.column_types``, which fits the
encoding), so that relabelling a column's levels, reordering a ``category``
dtype's categories, or giving the column as strings, as ``category`` or as
integer codes yields the same codes, hence the same model. Infrequent
levels share one code, which levels never seen in training take too; a
missing value has a code of its own. An array of numbers is a table too
(``NumberColumns``): numeric columns only.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._shared.backend import device as device_of
from nwensemble._shared.backend import namespace_of, to_numpy


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


def is_dataframe(X):
    """Whether ``X`` is a pandas DataFrame (or quacks like one)."""
    return hasattr(X, "dtypes") and hasattr(X, "columns") and hasattr(X, "iloc")


def as_pandas(X):
    """A polars DataFrame as pandas (other inputs as they are)."""
    if type(X).__module__.split(".")[0] == "polars":
        return X.to_pandas()
    return X


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
            (i, v) for i, v in enumerate(values) if not missing[i] and not is_number(v)
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


def is_number(v):
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True, eq=False)
class NumberColumns:
    """The encoding of an array of numbers without missing values at fit:
    every column numeric, the array itself.

    Attributes
    ----------
    n_features : int
    """

    n_features: int

    takes_tables = False

    def encode(self, X, *, xp, device, dtype=None):
        """The validated floating array ``X`` (in namespace ``xp`` on
        ``device``; ``dtype`` unused: a query keeps its own) as a ``Table``."""
        empty = xp.zeros((X.shape[0], 0), dtype=xp.int64, device=device)
        return Table(X, empty, empty, (), np.zeros(self.n_features, dtype=bool))


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

    takes_tables = True

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


def level_key(v):
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
    pd = optional_pandas()
    if pd is None:
        index = {level_key(v): k for k, v in enumerate(levels)}
        ids = [index.get(level_key(v), -1) for v in values]
    else:
        # Both as object indexes: pandas would otherwise infer the values'
        # type first (a string dtype for text), one more pass over them.
        queries = pd.Index(as_objects(values), dtype=object)
        ids = pd.Index(levels, dtype=object).get_indexer(queries)
    return np.where(missing, -2, np.asarray(ids, dtype=np.int64))


def as_objects(values):
    """``values`` as an ``object`` array: pandas then hashes and compares
    them as Python's dicts do (a float 3.0 and an integer 3 alike)."""
    return values.astype(object, copy=False)


def optional_pandas():
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
        keys = [level_key(v) for v in levels]
        return np.asarray(sorted(range(len(keys)), key=keys.__getitem__), dtype=int)
    except TypeError:
        return np.arange(len(levels))


def _sorted(levels):
    return levels[_sort_order(levels)]
