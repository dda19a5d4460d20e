"""Real tables with string columns and missing values: the native estimators
against the one-hot pipeline, HistGradientBoosting and CatBoost.

For every CSV in ``../shared/data/mixed`` (read with
``pandas.read_csv(path, keep_default_na=False, na_values=[''])``: only
empty cells are missing), shuffled 5-fold CV (``KFold(5, shuffle=True,
random_state=0)``, the same folds for every model; ``--repeats`` reshuffles
and repeats them, ``RepeatedKFold(random_state=0)``, for small tables whose
five folds alone are noisy; ``--seeds N`` fits every seeded model on each
fold with seeds 0 to N-1, since on tables of a few hundred rows the seed
of a fit moves its RMSE by a few per cent) of:

* ``ResidualStageRegressor()`` (the recommended start),
  ``HeadAllocator()``, ``NWAttentionRegressor()`` and
  ``MultiHeadNWRegressor()`` on the frame as it comes
  (``categorical_features='from_dtype'``), ``random_state=seed``; on
  request (``--models``) also ``ResidualStage (no feature slopes)``, the
  start with ``feature_slopes=False``, ``ResidualStage (two heads)``,
  the start with ``first_stage_heads=2``, ``ResidualStage (third
  stage)``, the start with ``third_stage=True``, ``ResidualStage
  (fine slopes)``, the start with ``feature_slopes='fine'``, and
  ``ResidualStage (two fits)``, the start with ``n_fits=2``;
* the four estimators behind the pipeline a user had to write before:
  ``SimpleImputer(add_indicator=True)`` on the numeric columns,
  ``SimpleImputer(strategy='constant')`` and
  ``OneHotEncoder(handle_unknown='ignore')`` on the string columns;
* ``HistGradientBoostingRegressor(categorical_features='from_dtype')``,
  defaults (``random_state=seed``), on the frame with its string columns
  cast to ``category`` (over the whole file, as the data's MANIFEST did);
* ``CatBoostRegressor(cat_features=..., random_seed=seed, verbose=0)``,
  defaults otherwise (missing strings as the level ``'nan'``), when
  ``catboost`` is installed (``pip install nwensemble[benchmark]``).

Prints per table the RMSE (mean over folds and seeds) and median fit time
of each model, each RMSE's ratio to HistGradientBoosting's, the
geometric means of those ratios, and for each of our models the median
and largest over the tables of its median fit time over
HistGradientBoosting's (issue 66 asks for at most 10x on every table).
Beside each native estimator whose one-hot pipeline ran too: the paired
ratio of the two (the geometric mean, over the folds and seeds, of the
native RMSE over the pipeline's on the same split) with its standard
error, since on a small table the splits' noise can exceed the
difference.

Run: ``python benchmarks/bench_real_tables.py [--data ../shared/data/mixed]
[--models ...] [--folds 5] [--repeats 1] [--seeds 1]``
"""

import argparse
import glob
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.model_selection import KFold, RepeatedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import catboost_frame, cpu_line, variant_params  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

REFERENCE = "HGB"


def one_hot(estimator):
    """The imputer and one-hot pipeline in front of ``estimator``."""
    strings = make_column_selector(dtype_exclude="number")
    numbers = make_column_selector(dtype_include="number")
    encode = ColumnTransformer(
        [
            ("num", SimpleImputer(add_indicator=True), numbers),
            (
                "cat",
                make_pipeline(
                    SimpleImputer(strategy="constant", fill_value="missing"),
                    OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                ),
                strings,
            ),
        ]
    )
    return make_pipeline(encode, estimator)


class CatBoostOnFrame:
    """CatBoost with the frame's string columns as its categorical features."""

    def __init__(self, seed=0):
        from catboost import CatBoostRegressor

        # allow_writing_files=False: no catboost_info folder (the model is the same).
        self.model = CatBoostRegressor(
            random_seed=seed, verbose=0, allow_writing_files=False
        )

    def fit(self, X, y):
        X, cats = catboost_frame(X)
        self.model.fit(X, y, cat_features=cats)
        return self

    def predict(self, X):
        return self.model.predict(catboost_frame(X)[0])


class HGBOnCategories:
    """HistGradientBoosting on the frame with string columns as ``category``."""

    def __init__(self, categories, seed=0):
        self.categories = categories
        self.model = HistGradientBoostingRegressor(
            categorical_features="from_dtype", random_state=seed
        )

    def _prepared(self, X):
        X = X.copy()
        for c, dtype in self.categories.items():
            X[c] = X[c].astype(dtype)
        return X

    def fit(self, X, y):
        self.model.fit(self._prepared(X), y)
        return self

    def predict(self, X):
        return self.model.predict(self._prepared(X))


def make_models(frame, names, seed=0):
    """Fresh models by name, for the table ``frame`` (its features), each
    with ``seed`` as its random state."""
    strings = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    categories = {c: pd.CategoricalDtype(frame[c].dropna().unique()) for c in strings}
    builders = {
        "HeadAllocator": lambda: HeadAllocator(random_state=seed),
        "NWAttention": lambda: NWAttentionRegressor(random_state=seed),
        "MultiHeadNW": lambda: MultiHeadNWRegressor(random_state=seed),
        "ResidualStage": lambda: ResidualStageRegressor(random_state=seed),
        "ResidualStage (no feature slopes)": lambda: ResidualStageRegressor(
            feature_slopes=False, random_state=seed
        ),
        "ResidualStage (two heads)": lambda: ResidualStageRegressor(
            first_stage_heads=2, random_state=seed
        ),
        "ResidualStage (third stage)": lambda: ResidualStageRegressor(
            third_stage=True, random_state=seed
        ),
        "ResidualStage (fine slopes)": lambda: ResidualStageRegressor(
            feature_slopes="fine", random_state=seed
        ),
        "ResidualStage (two fits)": lambda: ResidualStageRegressor(
            n_fits=2, random_state=seed
        ),
        "NWAttention one-hot": lambda: one_hot(NWAttentionRegressor(random_state=seed)),
        "MultiHeadNW one-hot": lambda: one_hot(MultiHeadNWRegressor(random_state=seed)),
        "ResidualStage one-hot": lambda: one_hot(
            ResidualStageRegressor(random_state=seed)
        ),
        "HeadAllocator one-hot": lambda: one_hot(HeadAllocator(random_state=seed)),
        "NWAttention (local constant)": lambda: NWAttentionRegressor(
            random_state=seed, local_fit="constant"
        ),
        "MultiHeadNW (local constant)": lambda: MultiHeadNWRegressor(
            random_state=seed, local_fit="constant"
        ),
        "HGB": lambda: HGBOnCategories(categories, seed),
        "CatBoost": lambda: CatBoostOnFrame(seed),
    }
    models = {}
    for name in names:
        params = variant_params(name)
        if params is not None:
            models[name] = MultiHeadNWRegressor(random_state=seed, **params)
        else:
            models[name] = builders[name]()
    return models


def read_table(path):
    """``(frame, X, y)`` of a mixed table: only empty cells are missing."""
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    X, y = frame.drop(columns="target"), frame["target"].to_numpy(dtype=float)
    return frame, X, y


def table_paths(folder, sets=None):
    """The mixed tables' CSV files in ``folder`` (those named in ``sets``
    where given), sorted; exits with a message where there are none."""
    paths = sorted(glob.glob(os.path.join(folder, "*.csv")))
    if sets:
        paths = [p for p in paths if os.path.basename(p)[:-4] in sets]
    if not paths:
        raise SystemExit(
            f"No CSV files in {folder}: give --data the folder of the mixed "
            "tables (the project's shared data)."
        )
    return paths


def table_splits(X, folds, repeats=1):
    """The table's ``(train, test)`` splits: shuffled ``KFold``, reshuffled
    ``repeats`` times (``RepeatedKFold``) where more than one."""
    cv = KFold(folds, shuffle=True, random_state=0)
    if repeats > 1:
        cv = RepeatedKFold(n_splits=folds, n_repeats=repeats, random_state=0)
    return cv.split(X)


def run(path, names, folds, repeats=1, seeds=1):
    """RMSE per fold and seed, and fit times, of every model on one table."""
    frame, X, y = read_table(path)
    rmse = {name: [] for name in names}
    fit_time = {name: [] for name in names}
    splits = [
        (train, test, seed)
        for train, test in table_splits(X, folds, repeats)
        for seed in range(seeds)
    ]
    for train, test, seed in splits:
        for name, model in make_models(X, names, seed).items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X.iloc[train], y[train])
            fit_time[name].append(time.perf_counter() - start)
            pred = model.predict(X.iloc[test])
            rmse[name].append(float(np.sqrt(np.mean((pred - y[test]) ** 2))))
    return frame, rmse, fit_time


def paired_note(rmse, name, other):
    """`` native / one-hot: ratio +- se`` when ``other`` ran too: the
    geometric mean over the splits of ``name``'s RMSE over ``other``'s on
    the same fold and seed, and its standard error (from the spread of the
    per-split log ratios), so that a difference can be told from the
    splits' noise."""
    if other not in rmse or len(rmse[name]) < 2:
        return ""
    log_ratio = np.log(rmse[name]) - np.log(rmse[other])
    mean = np.mean(log_ratio)
    se = np.std(log_ratio, ddof=1) / np.sqrt(log_ratio.shape[0])
    return f"  native / one-hot {np.exp(mean):.3f} +- {np.exp(mean) * se:.3f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data", "mixed")
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="repeats of the folds, reshuffled (RepeatedKFold); 1: KFold",
    )
    default = [
        "HeadAllocator",
        "NWAttention",
        "MultiHeadNW",
        "ResidualStage",
        "NWAttention one-hot",
        "MultiHeadNW one-hot",
        "ResidualStage one-hot",
        "HeadAllocator one-hot",
        "HGB",
        "CatBoost",
    ]
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="fit every seeded model with seeds 0 .. N-1 on each fold",
    )
    parser.add_argument("--models", nargs="*", default=default)
    parser.add_argument("--sets", nargs="*", default=None)
    args = parser.parse_args(argv)
    names = list(args.models)
    if "CatBoost" in names:
        try:
            import catboost  # noqa: F401
        except ImportError:
            print("catboost is not installed: pip install 'nwensemble[benchmark]'")
            names.remove("CatBoost")
    if REFERENCE not in names:
        names.append(REFERENCE)
    paths = table_paths(args.data, args.sets)
    print(cpu_line())
    scheme = f"{args.folds}-fold CV, shuffled, seed 0"
    if args.repeats > 1:
        scheme = f"{args.folds}-fold CV repeated {args.repeats} times (RepeatedKFold)"
    if args.seeds > 1:
        scheme += f", seeds 0-{args.seeds - 1} on each fold"
    print(f"{scheme}; RMSE mean over folds (ratio to HGB)")
    ratios = {name: [] for name in names}
    fit_ratios = {name: {} for name in names}
    for path in paths:
        frame, rmse, fit_time = run(path, names, args.folds, args.repeats, args.seeds)
        ref = np.mean(rmse[REFERENCE])
        label = os.path.basename(path)[:-4]
        print(f"\n{label}: {frame.shape[0]} rows, {frame.shape[1] - 1} features")
        for name in names:
            r = np.mean(rmse[name])
            ratios[name].append(r / ref)
            fit_ratios[name][label] = np.median(fit_time[name]) / np.median(
                fit_time[REFERENCE]
            )
            print(
                f"  {name:<22}{r:>12.4f}  ({r / ref:5.3f})  "
                f"fit {np.median(fit_time[name]):7.2f} s"
                + paired_note(rmse, name, f"{name} one-hot")
            )
    print("\ngeometric mean of RMSE / HGB's RMSE over the tables:")
    for name in names:
        print(f"  {name:<22}{np.exp(np.mean(np.log(ratios[name]))):>8.3f}")
    print(f"\nmedian fit time / {REFERENCE}'s, over the tables:")
    for name in names:
        if name in (REFERENCE, "CatBoost"):
            continue
        ratio = fit_ratios[name]
        worst = max(ratio, key=ratio.get)
        print(
            f"  {name:<22}median {np.median(list(ratio.values())):5.1f}x, "
            f"largest {ratio[worst]:5.1f}x ({worst})"
        )


if __name__ == "__main__":
    main()
