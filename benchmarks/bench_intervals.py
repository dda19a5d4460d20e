"""Prediction intervals: coverage, width and fit time against MAPIE's CV+.

On every shared set (``../shared/data``, 5-fold ``KFold(shuffle=True,
random_state=0)``, sets above 5000 rows subsampled) and on two synthetic
problems (Friedman #1 with noise 1, and a heteroscedastic one whose noise
grows tenfold across the first feature), for 90% intervals:

* ours: ``MultiHeadNWRegressor(early_stopping=True)``, so that the projection
  is fitted without the early-stopping rows, whose leave-one-out residuals
  then calibrate ``predict_interval`` (methods ``jackknife+`` and
  ``adaptive``); also the default fit (no rows held out), calibrated on the
  leave-one-out residuals of rows the projection was fitted to;
* MAPIE's ``CrossConformalRegressor`` (CV+, 5 folds) around
  ``HistGradientBoostingRegressor`` and around a scaled
  ``KNeighborsRegressor``.

First prints the time of ``predict_interval`` against ``predict`` (2000
queries, 2000 training rows), then per set and model the empirical
coverage, the mean width and the median fit time (ours: one fit; MAPIE:
its six fits), and the fit time of ``early_stopping=True`` as a ratio to a
default fit measured beside it.
Needs ``pip install mapie`` (not a dependency of nwensemble).

Run: ``python benchmarks/bench_intervals.py [--data ../shared/data]
[--markdown intervals.md]``
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from tabular import load_sets

from nwensemble import MultiHeadNWRegressor

CONFIDENCE = 0.9


def synthetic_sets(n=1500):
    rng = np.random.default_rng(0)
    X, y = make_friedman1(n_samples=n, n_features=8, noise=1.0, random_state=0)
    yield "friedman1 (homoscedastic)", X, y, ""
    X = rng.uniform(0, 1, size=(n, 5))
    f = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 5 * X[:, 2]
    y = f + (0.2 + 2.0 * X[:, 0]) * rng.standard_normal(n)
    yield "heteroscedastic (noise 0.2 to 2.2)", X, y, ""


def ours(early_stopping, method):
    def run(Xtr, ytr, Xte):
        start = time.perf_counter()
        model = MultiHeadNWRegressor(early_stopping=early_stopping, random_state=0)
        model.fit(Xtr, ytr)
        fit_time = time.perf_counter() - start
        _, bounds = model.predict_interval(
            Xte, confidence_level=CONFIDENCE, method=method
        )
        return bounds, fit_time

    return run


def mapie_cv_plus(make_estimator):
    from mapie.regression import CrossConformalRegressor

    def run(Xtr, ytr, Xte):
        start = time.perf_counter()
        model = CrossConformalRegressor(
            make_estimator(), confidence_level=CONFIDENCE, cv=5, method="plus"
        )
        model.fit_conformalize(Xtr, ytr)
        fit_time = time.perf_counter() - start
        _, bounds = model.predict_interval(Xte)
        return bounds[:, :, 0], fit_time

    return run


MODELS = {
    "ours jackknife+ (held-out)": ours(True, "jackknife+"),
    "ours adaptive (held-out)": ours(True, "adaptive"),
    "ours jackknife+ (default fit)": ours("auto", "jackknife+"),
    "MAPIE CV+ HGB": mapie_cv_plus(
        lambda: HistGradientBoostingRegressor(random_state=0)
    ),
    "MAPIE CV+ kNN": mapie_cv_plus(
        lambda: make_pipeline(StandardScaler(), KNeighborsRegressor())
    ),
}


def plain_fit_ratio(X, y, folds):
    """Median fit time of early_stopping=True over a default fit."""
    ratios = []
    for train, _ in folds:
        times = []
        for early_stopping in ("auto", True):
            start = time.perf_counter()
            MultiHeadNWRegressor(early_stopping=early_stopping, random_state=0).fit(
                X[train], y[train]
            )
            times.append(time.perf_counter() - start)
        ratios.append(times[1] / times[0])
    return float(np.median(ratios))


def interval_cost(n=2000, repeats=5):
    """Median time of predict_interval against predict, side by side."""
    X, y = make_friedman1(n_samples=2 * n, noise=1.0, random_state=0)
    model = MultiHeadNWRegressor(random_state=0).fit(X[:n], y[:n])
    calls = {
        "predict": lambda: model.predict(X[n:]),
        "jackknife+": lambda: model.predict_interval(X[n:], method="jackknife+"),
        "adaptive": lambda: model.predict_interval(X[n:], method="adaptive"),
    }
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    base = np.median(times["predict"])
    print(
        f"{n} queries, {n} training rows, "
        f"{model.calibration_rows_.shape[0]} calibration rows:"
    )
    for name, t in times.items():
        print(
            f"  {name:11s} {np.median(t):.3f} s  ({np.median(t) / base:.1f}x predict)"
        )


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(here, "..", "..", "shared", "data")
    )
    parser.add_argument("--max-rows", type=int, default=5000)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--sets", nargs="*", help="subset of set names")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    interval_cost()
    rows = []
    sets = list(load_sets(args.data, args.max_rows, np.random.default_rng(0)))
    for name, X, y, note in sets + list(synthetic_sets()):
        if args.sets and name not in args.sets:
            continue
        folds = list(KFold(5, shuffle=True, random_state=0).split(X))
        ratio = plain_fit_ratio(X, y, folds)
        print(
            f"\n{name}{note}: n={X.shape[0]}, p={X.shape[1]}; "
            f"fit time early_stopping=True / default = {ratio:.2f}"
        )
        for model in args.models:
            cover, width, fit = [], [], []
            for train, test in folds:
                bounds, fit_time = MODELS[model](X[train], y[train], X[test])
                inside = (y[test] >= bounds[:, 0]) & (y[test] <= bounds[:, 1])
                cover.append(inside.mean())
                width.append(np.mean(bounds[:, 1] - bounds[:, 0]))
                fit.append(fit_time)
            row = (name, model, np.mean(cover), np.mean(width), np.median(fit))
            rows.append(row)
            print(
                f"  {model:32s} coverage {row[2]:.3f}  width {row[3]:9.4g}  "
                f"fit {row[4]:7.2f} s",
                flush=True,
            )
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("| set | model | coverage | mean width | fit (s) |\n")
            fh.write("|---|---|---:|---:|---:|\n")
            for r in rows:
                fh.write(
                    f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.4g} | {r[4]:.2f} |\n"
                )


if __name__ == "__main__":
    main()
