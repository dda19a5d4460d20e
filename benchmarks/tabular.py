"""Accuracy on real tabular regression sets: the NW estimators against tuned
k-NN, tuned kernel ridge and gradient boosting, on the same folds.

For every ``<name>.csv`` in a folder (default ``../shared/data``: numeric,
header row, target last), shuffled 5-fold CV (``KFold(5, shuffle=True,
random_state=0)``, the same folds for every model) of:

* ``HeadAllocator()``, ``MultiHeadNWRegressor()``, ``NWAttentionRegressor()``
  with their defaults (``random_state=0``);
* k-NN tuned by an inner 5-fold ``GridSearchCV`` over k and weights, after
  ``StandardScaler``;
* ``KernelRidge(kernel="rbf")`` tuned over alpha and gamma, after scaling the
  features and the target;
* ``HistGradientBoostingRegressor()`` with defaults;
* the two grid searches run their candidates on all cores (``n_jobs=-1``),
  so that the baselines' tuning does not dominate the run; their fit times
  are those of a parallel search;
* with ``--mlkr``: metric-learn's MLKR (in its own environment, see
  bench_single_head.py) followed by NW prediction, on sets up to
  ``--mlkr-max-rows`` rows.

Prints per set the RMSE (mean ± std over folds) and median fit and predict
times, then every model's geometric-mean RMSE ratio to HistGradientBoosting
and whether HeadAllocator beat tuned k-NN on every set. Sets above
``--max-rows`` (5000) rows are subsampled (said in the output).

Run: ``python benchmarks/tabular.py [--data ../shared/data] [--models ...]
[--markdown results.md]``
"""

import argparse
import glob
import os
import sys
import time
import warnings

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
)

REFERENCE = "HistGradientBoosting"


def make_models():
    """Fresh, unfitted models by name (called once per fold)."""
    knn = GridSearchCV(
        make_pipeline(StandardScaler(), KNeighborsRegressor()),
        {
            "kneighborsregressor__n_neighbors": [1, 2, 3, 5, 7, 10, 15, 20, 30, 50],
            "kneighborsregressor__weights": ["uniform", "distance"],
        },
        scoring="neg_mean_squared_error",
        n_jobs=-1,
    )
    krr = GridSearchCV(
        TransformedTargetRegressor(
            make_pipeline(StandardScaler(), KernelRidge(kernel="rbf")),
            transformer=StandardScaler(),
        ),
        {
            "regressor__kernelridge__alpha": [1e-3, 1e-2, 1e-1, 1.0],
            "regressor__kernelridge__gamma": [0.01, 0.03, 0.1, 0.3, 1.0],
        },
        scoring="neg_mean_squared_error",
        n_jobs=-1,
    )
    return {
        "HeadAllocator": HeadAllocator(MultiHeadNWRegressor(random_state=0)),
        "MultiHeadNW": MultiHeadNWRegressor(random_state=0),
        "NWAttention": NWAttentionRegressor(random_state=0),
        "k-NN (tuned)": knn,
        "KernelRidge (tuned)": krr,
        REFERENCE: HistGradientBoostingRegressor(random_state=0),
    }


def load_sets(folder, max_rows, rng):
    """``(name, X, y, note)`` of every numeric CSV in ``folder``; without
    any, of the library's benchmark sets fetched by name (OpenML, cached)."""
    paths = sorted(glob.glob(os.path.join(folder, "*.csv")))
    if paths:
        sets = ((os.path.splitext(os.path.basename(p))[0], p) for p in paths)
    else:
        from nwensemble.datasets import BENCHMARK_NAMES

        print(
            f"No CSV files in {folder}: pass --data a folder of numeric CSVs (header "
            "row, target last) or set NWENSEMBLE_DATA; fetching the benchmark sets "
            "from OpenML instead (once; scikit-learn caches them)."
        )
        sets = ((name, None) for name in BENCHMARK_NAMES)
    for name, path in sets:
        X, y = _read(name, path)
        note = ""
        if X.shape[0] > max_rows:
            rows = np.sort(rng.choice(X.shape[0], max_rows, replace=False))
            note = f" (subsampled {max_rows} of {X.shape[0]} rows)"
            X, y = X[rows], y[rows]
        yield name, X, y, note


def _read(name, path):
    """A local CSV, or a set by name through ``fetch_regression_benchmark``."""
    if path is not None:
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        return data[:, :-1], data[:, -1]
    from nwensemble.datasets import fetch_regression_benchmark

    try:
        return fetch_regression_benchmark(name, return_X_y=True)
    except OSError as exc:
        raise SystemExit(f"error: {exc}") from None


def evaluate(name, factory, X, y, folds):
    rmse, fit_t, pred_t = [], [], []
    for train, test in folds:
        model = factory()
        start = time.perf_counter()
        model.fit(X[train], y[train])
        fit_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        pred = model.predict(X[test])
        pred_t.append(time.perf_counter() - start)
        rmse.append(float(np.sqrt(np.mean((pred - y[test]) ** 2))))
    return {
        "rmse": np.array(rmse),
        "fit": float(np.median(fit_t)),
        "predict": float(np.median(pred_t)),
    }


def evaluate_mlkr(python, X, y, folds):
    from bench_single_head import run_mlkr

    res = run_mlkr(python, X, y, folds)
    return {
        "rmse": np.array(res["rmse"]),
        "fit": float(np.median(res["fit_time"])),
        "predict": float("nan"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--models", nargs="*", help="subset of model names")
    parser.add_argument("--sets", nargs="*", help="subset of set names")
    parser.add_argument("--max-rows", type=int, default=5000)
    parser.add_argument("--mlkr", action="store_true", help="also run MLKR + NW")
    parser.add_argument("--mlkr-python", help="interpreter with metric-learn")
    parser.add_argument("--mlkr-max-rows", type=int, default=2000)
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    from sklearn.exceptions import ConvergenceWarning

    warnings.filterwarnings("ignore", category=ConvergenceWarning)

    names = list(make_models())
    if args.models:
        names = [m for m in names if m in args.models or m == REFERENCE]
    mlkr = None
    if args.mlkr:
        from bench_single_head import mlkr_python

        mlkr = mlkr_python(args.mlkr_python)
        names.append("MLKR + NW")
    start_all = time.perf_counter()
    results = {}
    lines = []
    for set_name, X, y, note in load_sets(
        args.data, args.max_rows, np.random.default_rng(0)
    ):
        if args.sets and set_name not in args.sets:
            continue
        folds = list(KFold(5, shuffle=True, random_state=0).split(X))
        header = f"{set_name}: {X.shape[0]} rows x {X.shape[1]} features{note}"
        print(header, flush=True)
        lines += [
            f"**{header}**",
            "",
            "| model | RMSE | fit s | predict s |",
            "|---|---|---|---|",
        ]
        results[set_name] = {}
        for name in names:
            if name == "MLKR + NW":
                if X.shape[0] > args.mlkr_max_rows:
                    print(f"  {name:<22} skipped (over {args.mlkr_max_rows} rows)")
                    continue
                res = evaluate_mlkr(mlkr, X, y, folds)
            else:
                res = evaluate(name, lambda n=name: make_models()[n], X, y, folds)
            results[set_name][name] = res
            r = res["rmse"]
            row = (
                f"  {name:<22}{r.mean():>10.4f} ± {r.std():<8.4f}"
                f"fit {res['fit']:>7.3f}s  predict {res['predict']:>7.4f}s"
            )
            print(row, flush=True)
            lines.append(
                f"| {name} | {r.mean():.4f} ± {r.std():.4f} | {res['fit']:.3f} "
                f"| {res['predict']:.4f} |"
            )
        lines.append("")

    print("\ngeometric-mean RMSE ratio to HistGradientBoosting (sets it ran on):")
    lines += ["| model | geo-mean RMSE / HGB | sets |", "|---|---|---|"]
    for name in names:
        ratios = [
            res[name]["rmse"].mean() / res[REFERENCE]["rmse"].mean()
            for res in results.values()
            if name in res
        ]
        geo = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
        print(f"  {name:<22}{geo:>8.4f}  ({len(ratios)} sets)")
        lines.append(f"| {name} | {geo:.4f} | {len(ratios)} |")
    if "HeadAllocator" in names and "k-NN (tuned)" in names:
        wins = [
            s
            for s, res in results.items()
            if res["HeadAllocator"]["rmse"].mean() < res["k-NN (tuned)"]["rmse"].mean()
        ]
        verdict = (
            f"HeadAllocator beats tuned k-NN on {len(wins)} of {len(results)} sets"
        )
        print(verdict)
        lines += ["", verdict]
    elapsed = time.perf_counter() - start_all
    print(f"total time {elapsed / 60:.1f} min")
    lines.append(f"\nTotal time {elapsed / 60:.1f} min.")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
