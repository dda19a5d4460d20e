"""A lever for issue 66, measured: per-feature target maps beside the
features in both stages of the recommended start.

``ResidualStageRegressor(target_maps=...)`` with ``False`` (the features
alone), ``'auto'`` (the maps where the start's cross-fitted check says
they pay) and ``True`` (always), side by side on each fold:

* ``synthetic``: ``bench_interactions.py``'s problems (``--rows`` training
  rows, noise 0.3, ``--seeds`` seeds), test RMSE against the noiseless
  target, with HistGradientBoosting's;
* ``numeric``: the numeric tables of ``../shared/data`` (``--sets``; the
  folds of ``bench_accuracy.py``, at most ``--folds`` of them);
* ``mixed``: the tables of ``../shared/data/mixed`` as frames (the folds of
  ``bench_real_tables.py``, ``--repeats`` reshuffles).

Prints each set's mean test RMSE per variant, how many of its splits
``'auto'`` took the maps on, the median fit times, and per section the
geometric mean of each variant's RMSE over ``False``'s.

Run: ``python benchmarks/levers/bench_target_maps.py [--sections synthetic
numeric mixed] [--sets concrete ...] [--folds 5] [--repeats 1]``
"""

import argparse
import glob
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold, RepeatedKFold

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import bench_interactions  # noqa: E402
from _common import cpu_line  # noqa: E402
from bench_accuracy import geo, numeric_sets  # noqa: E402

from nwensemble import ResidualStageRegressor  # noqa: E402

VARIANTS = {"off": False, "auto": "auto", "on": True}


def fit_all(X_train, y_train, X_test, y_test, seed, extra=()):
    """RMSE, fit seconds and whether maps were taken, per variant (and per
    model of ``extra``, name -> estimator)."""
    out = {}
    models = {
        name: ResidualStageRegressor(target_maps=value, random_state=seed)
        for name, value in VARIANTS.items()
    }
    models.update(dict(extra))
    for name, model in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            model.fit(X_train, y_train)
            seconds = time.perf_counter() - start
        err = np.asarray(model.predict(X_test)).reshape(-1) - y_test
        mapped = getattr(model, "target_maps_", None) is not None
        out[name] = (float(np.sqrt(np.mean(err**2))), seconds, mapped)
    return out


def report(name, runs, ratios):
    names = list(runs[0])
    rmse = {m: np.mean([r[m][0] for r in runs]) for m in names}
    seconds = {m: np.median([r[m][1] for r in runs]) for m in names}
    took = sum(r["auto"][2] for r in runs)
    for m in VARIANTS:
        ratios.setdefault(m, []).append(rmse[m] / rmse["off"])
    print(
        f"{name:<26}"
        + "".join(f"{rmse[m]:>11.5g}" for m in names)
        + f"{took:>4}/{len(runs):<3}"
        + "".join(f"{seconds[m]:>7.2f}" for m in names),
        flush=True,
    )


def header(names):
    print(
        f"{'set':<26}"
        + "".join(f"{m:>11}" for m in names)
        + f"{'auto took':>10}"
        + "".join(f"{m + ' s':>7}" for m in names)
    )


def summary(section, ratios):
    print(
        f"{section}: RMSE / off's, geometric mean: "
        + ", ".join(f"{m} {geo(r):.4f}" for m, r in ratios.items())
        + "\n",
        flush=True,
    )


def synthetic(args):
    print(f"== synthetic: {args.rows} rows, noise 0.3, {args.seeds} seeds")
    header([*VARIANTS, "HistGB"])
    ratios = {}
    for problem in bench_interactions.PROBLEMS:
        runs = []
        for seed in range(args.seeds):
            X, y, X_test, f_test = bench_interactions.draw(
                problem, args.rows, 5000, 0.3, seed
            )
            hgb = HistGradientBoostingRegressor(random_state=seed)
            runs.append(fit_all(X, y, X_test, f_test, seed, [("HistGB", hgb)]))
        report(problem, runs, ratios)
    summary("synthetic", ratios)


def numeric(args):
    print("== numeric tables (folds of bench_accuracy.py)")
    header(list(VARIANTS))
    ratios = {}
    for name, X, y, folds, _ in numeric_sets(os.path.join(args.data, "data")):
        if args.sets and name not in args.sets:
            continue
        runs = [
            fit_all(X[train], y[train], X[test], y[test], 0)
            for train, test in folds[: args.folds]
        ]
        report(name, runs, ratios)
    summary("numeric", ratios)


def mixed(args):
    print("== mixed tables as frames (folds of bench_real_tables.py)")
    header(list(VARIANTS))
    ratios = {}
    for path in sorted(glob.glob(os.path.join(args.data, "data", "mixed", "*.csv"))):
        name = os.path.basename(path)[:-4]
        if args.sets and name not in args.sets:
            continue
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
        X, y = frame.drop(columns="target"), frame["target"].to_numpy(dtype=float)
        cv = KFold(args.folds, shuffle=True, random_state=0)
        if args.repeats > 1:
            cv = RepeatedKFold(
                n_splits=args.folds, n_repeats=args.repeats, random_state=0
            )
        runs = [
            fit_all(X.iloc[train], y[train], X.iloc[test], y[test], 0)
            for train, test in cv.split(X)
        ]
        report(name, runs, ratios)
    summary("mixed", ratios)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["synthetic", "numeric", "mixed"],
        choices=["synthetic", "numeric", "mixed"],
    )
    parser.add_argument("--sets", nargs="*", default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    args = parser.parse_args()
    print(cpu_line())
    sections = {"synthetic": synthetic, "numeric": numeric, "mixed": mixed}
    for section in args.sections:
        sections[section](args)


if __name__ == "__main__":
    main()
