"""Prediction intervals: coverage, width and fit time against MAPIE's CV+.

On every shared set (``../shared/data``, sets above 5000 rows subsampled)
and on two synthetic problems (Friedman #1 with noise 1, and a
heteroscedastic one whose noise grows tenfold across the first feature;
each with 1500 and 2500 rows, and its coverage by third of the test rows'
noise level),
5-fold ``KFold(shuffle=True)`` repeated ``--repeats`` times (seeds 0, 1, ...
for the folds and the models), for 90% intervals:

* ours: the default ``MultiHeadNWRegressor()``, both methods of
  ``predict_interval`` (``jackknife+`` and ``adaptive``) from one fit; it
  calibrates on the leave-one-out residuals of the rows its early stopping
  held out of the projection's fit when it held any (the output says how
  many), else on those of all training rows;
* ``ours (4 members)`` (``--models`` adds it): the same with
  ``n_members=4``, which calibrates on the rows some member held out, each
  with the heads of the members that held it out;
* ``ResidualStage`` (``--models`` adds it): ``ResidualStageRegressor()``,
  both methods, calibrated on the sum's leave-one-out residuals at the
  first stage's calibration rows;
* MAPIE's ``CrossConformalRegressor`` (CV+, 5 folds) around
  ``HistGradientBoostingRegressor`` and around a scaled
  ``KNeighborsRegressor``.

First prints the time of ``predict_interval`` against ``predict`` (2000
queries, 2000 training rows), then per set and model the empirical coverage
over all repeats and that of each 5-fold run, the mean width and the median
fit time (ours: one fit, so the intervals cost no fit time beyond a plain
fit; MAPIE: its six fits). With n calibration rows a 5-fold run's coverage
spreads by about ``sqrt(0.09 / n) / sqrt(5)`` from split to split (0.015
for 80 rows), so with few repeats a set with 60 calibration rows can land
0.02 from its expected coverage by chance.
Needs ``pip install mapie`` (not a dependency of nwensemble).

Run: ``python benchmarks/bench_intervals.py [--data ../shared/data]
[--repeats 5] [--models ours "ours (4 members)" ...] [--markdown intervals.md]``
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

from nwensemble import MultiHeadNWRegressor, ResidualStageRegressor

CONFIDENCE = 0.9


def synthetic_sets(sizes=(1500, 2500)):
    """Friedman #1 with unit noise and a heteroscedastic problem, at each
    size (5-fold: 1200 and 2000 training rows, the second where one head
    has 20 rows per learned parameter and more), with each row's noise
    level (for the coverage by noise third)."""
    for n in sizes:
        rng = np.random.default_rng(0)
        X, y = make_friedman1(n_samples=n, n_features=8, noise=1.0, random_state=0)
        yield f"friedman1 (homoscedastic, n={n})", X, y, "", np.ones(n)
        X = rng.uniform(0, 1, size=(n, 5))
        f = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 5 * X[:, 2]
        noise = 0.2 + 2.0 * X[:, 0]
        y = f + noise * rng.standard_normal(n)
        yield f"heteroscedastic (noise 0.2 to 2.2, n={n})", X, y, "", noise


def ours(model_class=MultiHeadNWRegressor, **params):
    """A fit of ``model_class(**params)`` (the defaults when empty); both
    methods' bounds from it, keyed by method, and its calibration rows when
    they are fewer than the training rows (else 0)."""

    def run(Xtr, ytr, Xte, seed):
        start = time.perf_counter()
        model = model_class(random_state=seed, **params).fit(Xtr, ytr)
        fit_time = time.perf_counter() - start
        bounds = {
            method: model.predict_interval(
                Xte, confidence_level=CONFIDENCE, method=method
            )[1]
            for method in ("jackknife+", "adaptive")
        }
        rows = getattr(model, "interval_residuals_", None)
        if rows is None:
            rows = model.calibration_rows_
        n_cal = rows.shape[0]
        return bounds, fit_time, n_cal if n_cal < Xtr.shape[0] else 0

    return run


def mapie_cv_plus(make_estimator):
    def run(Xtr, ytr, Xte, seed):
        from mapie.regression import CrossConformalRegressor

        start = time.perf_counter()
        model = CrossConformalRegressor(
            make_estimator(),
            confidence_level=CONFIDENCE,
            cv=KFold(5, shuffle=True, random_state=seed),
            method="plus",
        )
        model.fit_conformalize(Xtr, ytr)
        fit_time = time.perf_counter() - start
        _, bounds = model.predict_interval(Xte)
        return {"CV+": bounds[:, :, 0]}, fit_time, 0

    return run


MODELS = {
    "ours": ours(),
    "ours (4 members)": ours(n_members=4),
    "ResidualStage": ours(ResidualStageRegressor),
    "MAPIE HGB": mapie_cv_plus(lambda: HistGradientBoostingRegressor(random_state=0)),
    "MAPIE kNN": mapie_cv_plus(
        lambda: make_pipeline(StandardScaler(), KNeighborsRegressor())
    ),
}


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
    parser.add_argument(
        "--models", nargs="*", default=["ours", "MAPIE HGB", "MAPIE kNN"]
    )
    parser.add_argument("--sets", nargs="*", help="subset of set names")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="repeated 5-fold splits (KFold and model seeds 0, 1, ...)",
    )
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    interval_cost()
    rows = []
    rng = np.random.default_rng(0)
    sets = [(*s, None) for s in load_sets(args.data, args.max_rows, rng)]
    for name, X, y, note, noise in sets + list(synthetic_sets()):
        if args.sets and name not in args.sets:
            continue
        splits = [
            (seed, train, test)
            for seed in range(args.repeats)
            for train, test in KFold(5, shuffle=True, random_state=seed).split(X)
        ]
        print(f"\n{name}{note}: n={X.shape[0]}, p={X.shape[1]}")
        for model in args.models:
            cover, width, fit, n_cal, by_third = {}, {}, [], [], {}
            for seed, train, test in splits:
                bounds, fit_time, held = MODELS[model](
                    X[train], y[train], X[test], seed
                )
                fit.append(fit_time)
                n_cal.append(held)
                for method, b in bounds.items():
                    inside = (y[test] >= b[:, 0]) & (y[test] <= b[:, 1])
                    cover.setdefault(method, []).append(inside.mean())
                    if noise is not None and np.ptp(noise) > 0:
                        # The test rows' coverage by third of their noise level.
                        cuts = np.quantile(noise[test], [1 / 3, 2 / 3])
                        third = np.searchsorted(cuts, noise[test])
                        by_third.setdefault(method, []).append(
                            [inside[third == k].mean() for k in range(3)]
                        )
                    width.setdefault(method, []).append(np.mean(b[:, 1] - b[:, 0]))
            for method in cover:
                label = f"{model} {method}"
                row = (name, label, np.mean(cover[method]), np.mean(width[method]))
                row += (np.median(fit),)
                rows.append(row)
                # A 5-fold run's coverage spreads this much from split to split.
                runs = np.reshape(cover[method], (args.repeats, -1)).mean(axis=1)
                print(
                    f"  {label:26s} coverage {row[2]:.3f} (5-fold runs "
                    f"{' '.join(f'{c:.3f}' for c in runs)})  width "
                    f"{row[3]:9.4g}  fit {row[4]:7.2f} s",
                    flush=True,
                )
                if method in by_third:
                    thirds = np.mean(by_third[method], axis=0)
                    print(
                        f"  {'':26s} by noise third (low, middle, high): "
                        f"{' '.join(f'{c:.3f}' for c in thirds)}",
                        flush=True,
                    )
            if model.startswith("ours") or model == "ResidualStage":
                print(
                    f"  {'':26s} calibration rows held out of the projection's "
                    f"fit: median {int(np.median(n_cal))} (0: none held out)"
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
