"""``fetch_regression_benchmark``: a local CSV folder first, OpenML second."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import os

import numpy as np
from sklearn.utils import Bunch

# name: (OpenML data_id, rows, features of the local CSV layout). The CSVs
# (numeric, header row, target last, named "target") are the layout
# described in ../shared/data/MANIFEST.md.
_SETS = {
    "abalone": (44956, 4177, 10),
    "airfoil_self_noise": (44957, 1503, 5),
    "auto_mpg": (196, 392, 7),
    "concrete": (44959, 1030, 8),
    "energy_heating": (44960, 768, 8),
    "wine_quality_red": (44972, 1599, 11),
    "yacht_hydrodynamics": (42370, 308, 6),
}
BENCHMARK_NAMES = tuple(sorted(_SETS))


def fetch_regression_benchmark(
    name, *, data_home=None, as_frame=False, return_X_y=False
):
    """Load one of the library's benchmark regression data sets by name.

    The set is read from ``<folder>/<name>.csv`` when such a file exists, where
    ``folder`` is ``data_home``, else the ``NWENSEMBLE_DATA`` environment
    variable. The file must be numeric with one header row and the target in
    its last column (the layout of the project's shared data folder). Without
    a local file the set is fetched from OpenML with scikit-learn's
    :func:`~sklearn.datasets.fetch_openml` (cached in scikit-learn's data
    home); nominal columns are then one-hot encoded and rows with missing
    values dropped, so the columns can differ from the CSV layout. The data
    sets are public (UCI, CC BY 4.0) but not shipped with the package.

    Parameters
    ----------
    name : str
        One of ``BENCHMARK_NAMES``: 'abalone', 'airfoil_self_noise',
        'auto_mpg', 'concrete', 'energy_heating', 'wine_quality_red',
        'yacht_hydrodynamics'.
    data_home : str or path-like, default=None
        Folder holding ``<name>.csv``. None uses ``NWENSEMBLE_DATA``.
    as_frame : bool, default=False
        Return pandas objects (``data`` a DataFrame, ``target`` a Series).
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n_samples, n_features), ``target`` (n_samples,),
        ``feature_names``, ``frame`` (with ``as_frame``, else None),
        ``source`` (the file or the OpenML id) and ``DESCR``.
    (data, target) : tuple
        With ``return_X_y``.

    Raises
    ------
    ValueError
        Unknown name, or a file that is not in the expected layout.
    OSError
        No local file and OpenML unreachable; the message says how to
        provide a local copy.

    Examples
    --------
    >>> import os
    >>> from nwensemble.datasets import fetch_regression_benchmark
    >>> folder = os.path.join("..", "shared", "data")
    >>> if os.path.isdir(folder):  # the project's shared data, where present
    ...     X, y = fetch_regression_benchmark(
    ...         "yacht_hydrodynamics", data_home=folder, return_X_y=True)
    ...     print(X.shape)
    ... else:
    ...     print((308, 6))
    (308, 6)
    """
    if name not in _SETS:
        raise ValueError(
            f"Unknown benchmark set {name!r}; choose one of {list(BENCHMARK_NAMES)}."
        )
    folder = data_home if data_home is not None else os.environ.get("NWENSEMBLE_DATA")
    path = None if folder is None else os.path.join(os.fspath(folder), f"{name}.csv")
    if path is not None and os.path.isfile(path):
        X, y, features = read_csv(path)
        source = path
    else:
        X, y, features = _fetch_openml(name, looked_in=path)
        source = f"OpenML data_id={_SETS[name][0]}"
    frame = None
    if as_frame:
        import pandas as pd

        frame = pd.DataFrame(X, columns=features)
        frame["target"] = y
        X, y = frame[features], frame["target"]
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        feature_names=list(features),
        frame=frame,
        source=source,
        DESCR=f"{name}: {len(y)} rows, {len(features)} features, from {source}.",
    )


def read_csv(path):
    """``X``, ``y`` and the feature names of a numeric CSV with a header row
    and the target in the last column."""
    with open(path) as f:
        header = f.readline().strip().split(",")
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except ValueError as exc:
        raise ValueError(
            f"{path} is not a numeric CSV with one header row: {exc}"
        ) from exc
    if data.shape[1] < 2 or len(header) != data.shape[1]:
        raise ValueError(
            f"{path} needs a header naming every column, feature columns and "
            f"the target last; got {len(header)} names for {data.shape[1]} columns."
        )
    return data[:, :-1], data[:, -1], header[:-1]


def _fetch_openml(name, *, looked_in):
    from sklearn.datasets import fetch_openml

    data_id, n_rows, _ = _SETS[name]
    try:
        bunch = fetch_openml(data_id=data_id, as_frame=True, parser="auto")
    except Exception as exc:  # network errors come in many types
        where = looked_in or "no folder (data_home and NWENSEMBLE_DATA unset)"
        raise OSError(
            f"Cannot load {name!r}: no local file at {where}, and fetching OpenML "
            f"data_id={data_id} failed ({type(exc).__name__}: {exc}). Put "
            f"{name}.csv (numeric, header row, target last) in a folder and pass "
            "it as data_home= or set NWENSEMBLE_DATA to it."
        ) from exc
    import pandas as pd

    frame = pd.concat([bunch.data, bunch.target.rename("target")], axis=1).dropna()
    X = pd.get_dummies(frame.drop(columns="target"), dtype=float)
    if X.shape[0] != n_rows:
        raise ValueError(
            f"OpenML data_id={data_id} gave {X.shape[0]} complete rows for "
            f"{name!r}, expected {n_rows}; provide the CSV locally instead."
        )
    return X.to_numpy(float), frame["target"].to_numpy(float), list(X.columns)
