"""Levers for issues 33 and 34, measured: the size of Adam's steps, and the
held-out rows it scores after each epoch.

Adam's step is ``_LEARNING_RATE`` times the root-mean-square entry of the
starting projection (``_fit/adam.py``), from random directions (where
``MultiHeadNWRegressor()`` starts its heads) and from the searched starts
(principal axes, the features: one head) alike. This script fits
``--models`` with the rate set to each of ``--rates`` in turn on each fold,
on the numeric tables of ``../shared/data`` with at least ``--min-rows``
rows (5000: where several heads take Adam; 12 000: where one head does too),
with the folds of ``bench_accuracy.py`` (by patient, by time block, shuffled
elsewhere), the first ``--folds`` of them, once per ``--seeds`` (the models'
``random_state``). Prints per set the mean test RMSE and the median fit
time of each rate, their ratios to the first rate, and
HistGradientBoosting's median fit time on the same folds; then the
geometric means over the sets. ``--friedman`` runs exchangeable synthetic
rows instead: Friedman #1 with 9 features (the data of
``bench_fit_time.py``'s solver section, 10 000 test rows) at ``--sizes``
training rows (at most 40 000), the first of ``--models`` with
``solver='adam'`` once per seed and rate.

``--monitor-rows A B ...`` compares, instead of rates, the number of
held-out rows scored after each epoch (``_MONITOR_ROWS``, drawn from the
at most 1000 that choose the final factor on the scale; 1000 scores them
all, as before the monitor had its own rows).

This is a measurement script: it patches the private Adam module.

Run: ``python benchmarks/levers/bench_adam_rate.py [--rates 0.02 0.04 0.08 |
--monitor-rows 1000 500]
[--folds 3] [--seeds 0 1] [--models MultiHeadNW] [--min-rows 5000]
[--friedman [--sizes 3000 5000 10000]]``
"""

import argparse
import os
import sys
import time
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, lever_runs  # noqa: E402
from bench_accuracy import geo, numeric_sets  # noqa: E402
from sklearn.datasets import make_friedman1  # noqa: E402
from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: E402

import nwensemble._fit.adam as adam  # noqa: E402
from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

MODELS = {
    "MultiHeadNW": MultiHeadNWRegressor,
    "HeadAllocator": HeadAllocator,
    "NWAttention": NWAttentionRegressor,
    "ResidualStage": ResidualStageRegressor,
}
# The models that take ``solver`` (for --friedman).
SOLVER_MODELS = ("MultiHeadNW", "NWAttention")


def rate_variants(rates):
    """Variant name -> context manager factory setting Adam's rate."""
    return {
        f"{rate:g}": (lambda rate=rate: mock.patch.object(adam, "_LEARNING_RATE", rate))
        for rate in rates
    }


def monitor_variants(sizes):
    """Variant name -> context manager factory setting the monitor's rows."""
    return {
        f"{size} rows": (
            lambda size=size: mock.patch.object(adam, "_MONITOR_ROWS", size)
        )
        for size in sizes
    }


def hgb_seconds(X, y, folds):
    """Median fit seconds of ``HistGradientBoostingRegressor()`` on ``folds``."""
    times = []
    for train, _ in folds:
        start = time.perf_counter()
        HistGradientBoostingRegressor(random_state=0).fit(X[train], y[train])
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def friedman_runs(variants, seeds, estimator, sizes):
    """Test RMSE and fit seconds of ``estimator(solver='adam')`` per size,
    seed and variant on Friedman #1; prints a line per size and seed and the
    geometric mean of each variant's RMSE ratio to the first."""
    X, y = make_friedman1(n_samples=50_000, n_features=9, noise=1.0, random_state=1)
    Xte, yte = X[40_000:], y[40_000:]
    names = list(variants)
    ratios = {v: [] for v in names}
    for n in sizes:
        for seed in seeds:
            rmse, cells = {}, []
            for v, setting in variants.items():
                with setting():
                    model = estimator(solver="adam", random_state=seed)
                    start = time.perf_counter()
                    model.fit(X[:n], y[:n])
                    seconds = time.perf_counter() - start
                rmse[v] = float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))
                ratios[v].append(rmse[v] / rmse[names[0]])
                cells.append(f"{v}: {rmse[v]:.4f} {seconds:.2f} s")
            print(f"n={n:<7}seed {seed}  " + "  ".join(cells), flush=True)
    for v in names:
        worse = sum(r > 1 for r in ratios[v])
        print(
            f"{v}: RMSE / {names[0]}'s geometric mean {geo(ratios[v]):.4f}, "
            f"worse on {worse} of {len(ratios[v])}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="*", default=[0.02, 0.04, 0.08])
    parser.add_argument("--monitor-rows", type=int, nargs="*", default=None)
    parser.add_argument("--folds", type=int, default=3, help="first folds to run")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1])
    parser.add_argument("--models", nargs="*", default=["MultiHeadNW"])
    parser.add_argument("--min-rows", type=int, default=5000)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    parser.add_argument("--friedman", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="*", default=[3000, 5000, 10000])
    args = parser.parse_args()
    print(cpu_line())
    if args.monitor_rows:
        variants = monitor_variants(args.monitor_rows)
    else:
        variants = rate_variants(args.rates)
    if args.friedman:
        if args.models[0] not in SOLVER_MODELS:
            parser.error(f"--friedman fits one of {SOLVER_MODELS} (--models)")
        if max(args.sizes) > 40_000:
            parser.error("--sizes: at most 40 000 training rows")
        friedman_runs(variants, args.seeds, MODELS[args.models[0]], args.sizes)
        return
    names = list(variants)
    first = names[0]
    print(f"RMSE (ratio to {first}'s) and median fit seconds (x HGB) per variant")
    ratios = {m: {v: [] for v in names} for m in args.models}
    speed = {m: {v: [] for v in names} for m in args.models}
    models = {m: MODELS[m] for m in args.models}
    sets = list(numeric_sets(os.path.join(args.data, "data")))
    hgb = {
        name: hgb_seconds(X, y, folds[: args.folds])
        for name, X, y, folds, _ in sets
        if X.shape[0] >= args.min_rows
    }
    for name, model_name, rmse, fit_s in lever_runs(
        sets,
        models,
        variants,
        min_rows=args.min_rows,
        n_folds=args.folds,
        seeds=args.seeds,
    ):
        cells = []
        for v in names:
            ratios[model_name][v].append(rmse[v] / rmse[first])
            speed[model_name][v].append(fit_s[first] / fit_s[v])
            cells.append(
                f"{v}: {rmse[v]:.5g} ({rmse[v] / rmse[first]:.3f}) "
                f"{fit_s[v]:.1f} s ({fit_s[v] / hgb[name]:.1f}x)"
            )
        print(f"{name:<26}{model_name:<14}" + "  ".join(cells), flush=True)
        print(f"{'':<40}HGB {hgb[name]:.2f} s", flush=True)
    for model_name in args.models:
        for v in names:
            if ratios[model_name][v]:
                print(
                    f"{model_name} {v}: RMSE / {first}'s geometric mean "
                    f"{geo(ratios[model_name][v]):.4f}; fit time {first}'s / "
                    f"this median {np.median(speed[model_name][v]):.2f}x"
                )


if __name__ == "__main__":
    main()
