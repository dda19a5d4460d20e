"""A second attention stage on the first one's leave-one-out residuals
(twicing, Tukey 1977; boosting with smoothers, Buhlmann and Yu 2003): does
it pay, and when does it overfit?

On the folds of ``bench_accuracy.py`` (``--part cv``: every numeric table of
``../shared/data``; ``--part uci``: the standard UCI splits), each first
stage (``--first``: by default ``default``, the first stage of
``ResidualStageRegressor()``, one head with the allocator's automatic
number of members; ``NWAttention``, ``MultiHeadNW`` and ``HeadAllocator``,
the estimators' defaults; ``random_state=0``) alone and inside
``ResidualStageRegressor(first, residual_estimator=..., random_state=0)``,
whose second stage learns the first's leave-one-out residuals. Second
stages (``--stages`` picks):

* ``default``: ``ResidualStageRegressor``'s own,
  ``NWAttentionRegressor(early_stopping=True, local_fit='constant',
  duplicate_weight=0)``, fitted with the residuals' weights: it stops on
  rows its projection was not fitted to, reads weighted means of the
  residuals, and rows with outlying residuals weigh less;
* ``unweighted``: the same second stage fitted without the residuals'
  weights (every row alike);
* ``auto``: ``NWAttentionRegressor(duplicate_weight=0)``, whose
  ``early_stopping='auto'`` trains on every row of the larger tables and
  whose local lines can extrapolate;
* ``held-out``: ``auto`` with ``early_stopping=True``.

Every second stage reads no copies of a row (a copy's residual is that of
the row, which the first stage already predicts by it; the user guide's
residual-stage page has what reading them cost).

Prints per set the mean RMSE over folds of each first stage and of each
sum, with median fit times, then the geometric means of the sums' RMSE
ratios to their first stage. ``--coverage`` adds, per model, the mean
coverage and width of ``predict_interval(confidence_level=0.9)`` on the
test rows (the first stage's jackknife+, the sum's jackknife).

Run: ``python benchmarks/levers/bench_residual_stage.py [--part cv|uci] [--sets
...] [--first default NWAttention MultiHeadNW HeadAllocator] [--stages
default unweighted auto held-out] [--coverage]``
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from bench_accuracy import geo, numeric_sets, uci_sets  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)
from nwensemble._fit.allocation import first_stage_members  # noqa: E402

# First stages by name, for a table of ``n`` training rows.
FIRST = {
    "default": lambda n: MultiHeadNWRegressor(
        n_heads=1, n_members=first_stage_members(n), random_state=0
    ),
    "NWAttention": lambda n: NWAttentionRegressor(random_state=0),
    "MultiHeadNW": lambda n: MultiHeadNWRegressor(random_state=0),
    "HeadAllocator": lambda n: HeadAllocator(MultiHeadNWRegressor(random_state=0)),
}
SECOND = {
    "default": None,
    "unweighted": {"early_stopping": True, "local_fit": "constant"},
    "auto": {},
    "held-out": {"early_stopping": True},
}


class Unweighted(RegressorMixin, BaseEstimator):
    """``estimator`` with a ``fit`` that takes no ``sample_weight``, so that
    ``ResidualStageRegressor`` fits it without the residuals' weights."""

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, y):
        self.estimator_ = clone(self.estimator).fit(X, y)
        self.loo_prediction_ = self.estimator_.loo_prediction_
        return self

    def predict(self, X):
        return self.estimator_.predict(X)


def second_stage(name):
    if SECOND[name] is None:
        return None
    stage = NWAttentionRegressor(duplicate_weight=0.0, **SECOND[name])
    if name == "unweighted":
        return Unweighted(stage.set_params(random_state=0))
    return stage


def run_set(X, y, folds, firsts, stages, coverage=None):
    """RMSE per fold and fit times of every first stage and sum; with
    ``coverage`` (a dict), also each model's 90 % intervals' coverage and
    mean width per fold, under ``coverage[label]``."""
    rmse, fit_s = {}, {}
    for train, test in folds:
        for first in firsts:
            models = {first: FIRST[first](len(train))}
            for stage in stages:
                models[f"{first} + {stage}"] = ResidualStageRegressor(
                    FIRST[first](len(train)),
                    residual_estimator=second_stage(stage),
                    random_state=0,
                )
            for label, model in models.items():
                start = time.perf_counter()
                model.fit(X[train], y[train])
                fit_s.setdefault(label, []).append(time.perf_counter() - start)
                pred = np.asarray(model.predict(X[test])).reshape(-1)
                err = float(np.sqrt(np.mean((pred - y[test]) ** 2)))
                rmse.setdefault(label, []).append(err)
                if coverage is not None:
                    _, bounds = model.predict_interval(X[test], confidence_level=0.9)
                    lower, upper = np.asarray(bounds).reshape(-1, 2).T
                    inside = (lower <= y[test]) & (y[test] <= upper)
                    record = (float(np.mean(inside)), float(np.mean(upper - lower)))
                    coverage.setdefault(label, []).append(record)
    return rmse, fit_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--part", choices=["cv", "uci"], default="cv")
    parser.add_argument("--sets", nargs="*", help="subset of set names")
    parser.add_argument("--splits", type=int, default=10, help="UCI splits to run")
    parser.add_argument(
        "--first",
        nargs="*",
        choices=list(FIRST),
        default=["default"],
    )
    parser.add_argument(
        "--stages", nargs="*", choices=list(SECOND), default=["default"]
    )
    parser.add_argument(
        "--coverage",
        action="store_true",
        help="also the 90 %% intervals' coverage and width (predict_interval)",
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.part == "cv":
        sets = numeric_sets(args.data)
    else:
        sets = uci_sets(args.data, args.splits)
    start_all = time.perf_counter()
    results = {}
    for set_name, X, y, folds, how in sets:
        if args.sets and set_name not in args.sets:
            continue
        print(f"{set_name}: {X.shape[0]} rows x {X.shape[1]} features, {how}")
        coverage = {} if args.coverage else None
        rmse, fit_s = run_set(X, y, folds, args.first, args.stages, coverage)
        results[set_name] = {k: float(np.mean(v)) for k, v in rmse.items()}
        for label, errors in rmse.items():
            first = label.split(" + ")[0]
            ratio = np.mean(errors) / np.mean(rmse[first])
            print(
                f"  {label:<30}RMSE {np.mean(errors):>10.5g}  "
                f"/ first {ratio:.3f}  fit {np.median(fit_s[label]):>6.2f} s",
                flush=True,
            )
            if coverage is not None:
                cover, width = np.mean(coverage[label], axis=0)
                print(f"    90 % intervals: coverage {cover:.3f}, width {width:.4g}")
    print("\ngeometric-mean RMSE ratio of each sum to its first stage:")
    for first in args.first:
        for stage in args.stages:
            label = f"{first} + {stage}"
            ratios = [r[label] / r[first] for r in results.values()]
            worst = max(ratios) if ratios else float("nan")
            print(f"  {label:<30}{geo(ratios):.4f}  (largest {worst:.3f})")
    print(f"total time {(time.perf_counter() - start_all) / 60:.1f} min")


if __name__ == "__main__":
    main()
