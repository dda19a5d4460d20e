"""Reading a CSV table as a user saved it: with or without a header row,
with a pandas index column, with text columns and empty cells."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import csv
import math
from dataclasses import dataclass, field

import numpy as np

# Header names pandas gives a saved index column.
_INDEX_NAMES = ("", "Unnamed: 0", "index")
# Cells read as missing values (pandas reads these as missing by default).
MISSING = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"})


@dataclass
class CSVTable:
    """A table read by ``read_table``.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        float64 when every feature is numeric, else ``object`` with floats
        (NaN for empty cells) and strings (the text columns' levels).
    y : ndarray of shape (n_samples,)
        The last column: float64 numbers, or, where it holds text, its cells
        as written (``object``), the class labels.
    feature_names : list of str
    text_columns : list of str
        The features read as text (categorical).
    notes : list of str
        What the reader decided that the user should know.
    labels : bool
        Whether ``y`` holds class labels (text) rather than numbers.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: list
    text_columns: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    labels: bool = False


def read_table(path):
    """Read the CSV at ``path``: features first, the target last (numbers,
    or text: class labels).

    A first row of numbers only is data, not a header (the columns are then
    named ``x0``, ``x1``, ...). A first column whose header is empty,
    ``Unnamed: 0`` or ``index`` and whose values count the rows is a saved
    index and is dropped. A column whose cells are all numbers (empty cells
    missing) is numeric; one whose non-empty cells are all text is
    categorical; a column mixing numbers and text is refused, naming its
    first text cell and the line it is on. Empty cells, and the markers in
    ``MISSING``, are missing values. Line numbers count from 1 at the
    file's first line. Raises ``ValueError`` with the reason.
    """
    with open(path, newline="") as fh:
        rows = [
            (i + 1, r)
            for i, r in enumerate(csv.reader(fh))
            if any(c.strip() for c in r)
        ]
    if not rows:
        raise ValueError(f"{path} is empty.")
    notes = []
    first_line, first = rows[0]
    if all(_number(c) is not None for c in first):
        names = [f"x{j}" for j in range(len(first) - 1)] + ["target"]
        notes.append(
            f"{path} has no header row (its first line holds numbers only): "
            f"the columns are named x0..x{len(first) - 2}, the last is the target."
        )
        data = rows
    else:
        names = [c.strip() for c in first]
        data = rows[1:]
    width = len(names)
    for line, row in data:
        if len(row) != width:
            raise ValueError(
                f"{path}, line {line}: {len(row)} fields where the first line has "
                f"{width}." + _separator_hint(first)
            )
    if len(names) < 2 or not data:
        raise ValueError(
            f"{path} needs at least one feature column and the target column, "
            "and at least one row of data." + _separator_hint(first)
        )
    columns = [[row[j].strip() for _, row in data] for j in range(width)]
    lines = [line for line, _ in data]
    if names[0] in _INDEX_NAMES and _counts_rows(columns[0]):
        notes.append(
            f"The first column ({names[0]!r}) counts the rows: a saved index, "
            "not a feature; it is left out."
        )
        names, columns = names[1:], columns[1:]
    y = _target(columns[-1], names[-1], lines, path)
    labels = y.dtype == object
    if labels:
        notes.append(
            f"The target column {names[-1]!r} holds text: its {len(set(y))} "
            "distinct values are class labels."
        )
    X_cols, text = [], []
    for name, cells in zip(names[:-1], columns[:-1]):
        values, is_text = _feature(cells, name, lines, path)
        X_cols.append(values)
        if is_text:
            text.append(name)
    missing = sum(isinstance(v, float) and math.isnan(v) for c in X_cols for v in c)
    if missing:
        notes.append(f"{missing} empty (or NA) cells are read as missing values.")
    if text:
        notes.append(f"Text columns, read as categorical: {', '.join(text)}.")
        X = np.empty((len(lines), len(X_cols)), dtype=object)
        for j, values in enumerate(X_cols):
            X[:, j] = values
    else:
        X = np.array(X_cols, dtype=np.float64).T.reshape(len(lines), len(X_cols))
    return CSVTable(X, y, names[:-1], text, notes, labels)


def _separator_hint(first):
    """Where the first line is one field that another separator would
    split, a sentence that says so (the reader takes commas only, and
    decimal points: a guess could read decimal commas as text)."""
    if len(first) != 1:
        return ""
    for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars")):
        if sep in first[0]:
            return (
                f" Its first line is one field holding {name}: is the file "
                f"separated by {sep!r}? Only commas separate fields here; "
                f"convert it, for example with pandas.read_csv(path, "
                f"sep={sep!r}, decimal=',').to_csv(new_path, index=False) "
                "(decimal=',' where numbers are written 1,5)."
            )
    return ""


def _number(cell):
    """The float a cell holds, or None (empty cells and text)."""
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _counts_rows(cells):
    values = [_number(c) for c in cells]
    if any(v is None or not v.is_integer() for v in values):
        return False
    start = values[0]
    return start in (0.0, 1.0) and values == [start + i for i in range(len(values))]


def _target(cells, name, lines, path):
    """The target: float64 when every cell is a number, else the cells as
    written (class labels); a missing cell is refused."""
    for cell, line in zip(cells, lines):
        if cell in MISSING:
            what = "is empty" if not cell else f"holds {cell!r} (a missing value)"
            raise ValueError(
                f"{path}, line {line}: the target column {name!r} {what}; the "
                "last column must hold a number or a class label on every line."
            )
    values = [_number(cell) for cell in cells]
    if any(v is None for v in values):
        return np.asarray(cells, dtype=object)
    return np.asarray(values)


def _feature(cells, name, lines, path):
    """A feature column's values and whether it is text."""
    missing = [c in MISSING for c in cells]
    numbers = [None if m else _number(c) for c, m in zip(cells, missing)]
    text_at = [
        i for i, (m, v) in enumerate(zip(missing, numbers)) if not m and v is None
    ]
    if not text_at:
        return [math.nan if v is None else v for v in numbers], False
    if len(text_at) == missing.count(False):
        return [math.nan if m else c for c, m in zip(cells, missing)], True
    i = text_at[0]
    raise ValueError(
        f"{path}, line {lines[i]}: column {name!r} holds numbers and also text "
        f"({cells[i]!r}). Leave missing cells empty, or make the column all text "
        "to read it as categorical."
    )
