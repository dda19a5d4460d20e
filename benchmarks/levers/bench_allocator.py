"""HeadAllocator: leave-one-out scoring (cv=None) against 5-fold CV.

For each problem and budget, fit ``HeadAllocator(cv=None)`` and
``HeadAllocator(cv=KFold(5))`` side by side on the same shortlist, and print
the wall time of each, the speed-up, the Spearman correlation of their
candidate scores, the two choices and the 5-fold score of the leave-one-out
choice against the best 5-fold score. Times are medians of ``--repeats`` runs.

Run: ``python benchmarks/levers/bench_allocator.py [--repeats 3]``
"""

import argparse
import time

import numpy as np
from scipy.stats import spearmanr
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.model_selection import KFold

from nwensemble import HeadAllocator, MultiHeadNWRegressor


def problems():
    yield "Friedman #1, n=300", make_friedman1(n_samples=300, noise=1.0, random_state=0)
    yield "Friedman #1, n=600", make_friedman1(n_samples=600, noise=1.0, random_state=1)
    yield "diabetes, n=442", load_diabetes(return_X_y=True)


def timed(allocator, X, y, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        allocator.fit(X, y)
        times.append(time.perf_counter() - start)
    return allocator, float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    est = MultiHeadNWRegressor(random_state=0, bvc_resamples=0)
    print(
        f"{'problem':<20}{'budget':>7}{'loo s':>8}{'5-fold s':>10}{'speed-up':>10}"
        f"{'spearman':>10}  {'loo choice':<12}{'5-fold choice':<14}{'gap':>7}"
    )
    speedups = []
    for name, (X, y) in problems():
        for budget in (8, 16):
            loo, t_loo = timed(
                HeadAllocator(est, budget=budget, cv=None), X, y, args.repeats
            )
            cv = KFold(5, shuffle=True, random_state=0)
            folds, t_cv = timed(
                HeadAllocator(est, budget=budget, cv=cv), X, y, args.repeats
            )
            rho = spearmanr(
                loo.cv_results_["mean_test_score"], folds.cv_results_["mean_test_score"]
            )[0]
            cv_scores = folds.cv_results_["mean_test_score"]
            # 5-fold score lost by taking the leave-one-out choice (same order).
            gap = cv_scores.max() - cv_scores[loo.best_index_]
            speedups.append(t_cv / t_loo)
            print(
                f"{name:<20}{budget:>7}{t_loo:>8.2f}{t_cv:>10.2f}{t_cv / t_loo:>9.1f}x"
                f"{rho:>10.2f}  {_label(loo):<12}{_label(folds):<14}{gap:>7.3f}"
            )
    print(f"median speed-up of cv=None over cv=5: {np.median(speedups):.1f}x")


def _label(allocator):
    return f"{allocator.n_heads_} x {allocator.head_dim_}"


if __name__ == "__main__":
    main()
