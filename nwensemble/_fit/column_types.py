"""Which columns of a table are categorical, and the levels each holds:
the fit of a ``table.TableEncoder``.

Levels seen in too few training rows (of positive weight) share the
encoder's one "infrequent" code: fewer than ``MIN_LEVEL_ROWS``, or, where
what the numeric columns leave of the fit's targets says how far a
column's levels differ (``rows_for_own_code``), fewer than make a level's
mean at least half signal.
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
    numeric_column,
    optional_pandas,
)

# A level with this many training rows always has an embedding of its own;
# with fewer, its embedding would be learned from the few rows' own
# targets, which only levels that differ strongly can afford.
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


def fit_encoder(X, mask, sw, names, *, from_dtype=False, targets=None):
    """The ``TableEncoder`` of training rows ``X`` with categorical columns
    ``mask`` (a boolean array; may be all False) and sample weights ``sw``
    (NumPy). ``from_dtype``: the mask came from the columns' dtypes, so
    warn where a text column so chosen holds numbers (see
    ``_warn_numbers_as_text``). ``targets`` (NumPy, shape (n,) or (n, t)):
    the fit's targets, by what the numeric columns leave of which
    (``left_by_numbers``) a column's levels of fewer than
    ``MIN_LEVEL_ROWS`` rows may have codes of their own
    (``rows_for_own_code``); None keeps ``MIN_LEVEL_ROWS`` for every
    column."""
    X = as_pandas(X)
    cols = columns(X)
    text = _text_columns(X) if from_dtype else np.zeros(len(cols), dtype=bool)
    weighted = np.asarray(sw) > 0
    left = None
    levels, frequent = [], []
    for j in np.flatnonzero(mask):
        values = cols[j]
        missing = missing_mask(values)
        kept, counts, row_levels = _first_appearance(values, missing, weighted)
        _reject_numbers_written_as_text(kept, names[j])
        levels.append(kept)
        needed = MIN_LEVEL_ROWS
        rare = (counts > 0) & (counts < MIN_LEVEL_ROWS)
        if targets is not None and rare.any():
            if left is None:  # once per fit, and only where some level is rare
                left = left_by_numbers(cols, mask, names, targets, weighted)
            needed = rows_for_own_code(row_levels[weighted], left)
        frequent.append(counts >= needed)
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


def left_by_numbers(cols, mask, names, targets, rows):
    """What a least-squares fit of ``targets`` (shape (n,) or (n, t)) on the
    numeric columns of ``cols`` (those not in ``mask``; missing values at
    the column's mean) leaves at ``rows`` (boolean), each row left out of
    its own fit: shape (rows.sum(), t).

    A column's levels are judged by what the numbers leave of the target:
    levels whose means differ only as the numbers do (a zone's fares as its
    trips' lengths) tell nothing that the numbers do not.
    """
    Y = np.asarray(targets, dtype=np.float64).reshape(len(rows), -1)[rows]
    design = [np.ones(int(rows.sum()))]
    for j in np.flatnonzero(~np.asarray(mask, dtype=bool)):
        x = numeric_column(cols[j], names[j])[rows]
        observed = ~np.isnan(x)
        if observed.sum() < 2:
            continue
        x = np.where(observed, x - x[observed].mean(), 0.0)
        spread = x.std()
        if spread > 0:
            design.append(x / spread)
    U, s, _ = np.linalg.svd(np.column_stack(design), full_matrices=False)
    U = U[:, s > s[0] * 1e-10]
    leverage = np.minimum((U * U).sum(axis=1), 1.0 - 1e-12)
    return (Y - U @ (U.T @ Y)) / (1.0 - leverage)[:, None]


def rows_for_own_code(row_levels, targets):
    """How many training rows a column's level needs for a code of its own:
    ``MIN_LEVEL_ROWS``, or fewer where the column's levels differ strongly.

    ``row_levels``: each row's level number (-1 where missing, which the
    estimate leaves out); ``targets``: the rows' targets, shape (n,) or
    (n, t). With ``sigma2`` the pooled variance of the targets within
    levels and ``tau2`` the variance of the levels' true means (the
    method-of-moments estimate of a one-way random-effects model, both
    summed over the outputs), the mean of a level of ``m`` rows is a
    fraction ``m tau2 / (m tau2 + sigma2)`` signal; a level gets its own
    code from the rows at which that fraction reaches one half,
    ``sigma2 / tau2``, and never needs more than ``MIN_LEVEL_ROWS`` (nor
    fewer than one). Where the levels' means differ no more than their
    rows' noise explains (``tau2 <= 0``) it is ``MIN_LEVEL_ROWS``.
    """
    present = row_levels >= 0
    c = row_levels[present]
    n = len(c)
    if n == 0:
        return MIN_LEVEL_ROWS
    Y = np.asarray(targets, dtype=np.float64)[present].reshape(n, -1)
    sizes = np.bincount(c)
    seen = sizes > 0
    L = int(seen.sum())
    if L < 2 or n - L < 1:
        return MIN_LEVEL_ROWS
    means = np.zeros((len(sizes), Y.shape[1]))
    for k in range(Y.shape[1]):
        means[:, k] = np.bincount(c, weights=Y[:, k], minlength=len(sizes))
    means[seen] /= sizes[seen, None]
    sigma2 = float(((Y - means[c]) ** 2).sum()) / (n - L)
    between = float((sizes[seen, None] * (means[seen] - Y.mean(axis=0)) ** 2).sum())
    rows_per_level = n - float((sizes[seen] ** 2).sum()) / n
    tau2 = (between - (L - 1) * sigma2) / rows_per_level
    if not tau2 > 0:
        return MIN_LEVEL_ROWS
    return min(float(MIN_LEVEL_ROWS), max(1.0, sigma2 / tau2))


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
    the rows of positive weight that hold each, and each row's level as
    its number in that order (-1 where missing).

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
    row_levels = np.full(len(missing), -1, dtype=np.int64)
    row_levels[present] = codes
    return out, counts.astype(np.int64), row_levels


def _first_appearance_by_loop(values, missing, weighted):
    """``_first_appearance`` without pandas."""
    index, counts, order = {}, [], []
    row_levels = np.full(len(missing), -1, dtype=np.int64)
    for i, (v, miss, w) in enumerate(zip(values, missing, weighted)):
        if miss:
            continue
        key = level_key(v)
        k = index.get(key)
        if k is None:
            k = index[key] = len(order)
            order.append(v)
            counts.append(0)
        counts[k] += int(w)
        row_levels[i] = k
    out = np.empty(len(order), dtype=object)
    out[:] = order
    return out, np.asarray(counts, dtype=np.int64), row_levels
