"""Whether a second attention stage pays for the classifiers: a regressor
fitted to the first stage's leave-one-out residuals of the class indicators.

The first stage is the recommended classifier,
``HeadAllocator(MultiHeadNWClassifier(), random_state=0)``. The second is
``NWAttentionRegressor(local_fit='constant', random_state=0)`` fitted to
``Y - P_loo``: the one-hot rows less the first stage's leave-one-out
probabilities (before their smoothing toward the prior), on the rows that
have them. Their sum, clipped at zero and renormalised, is smoothed toward
the prior again with the weight of least leave-one-out log-loss (the sum of
the two stages' leave-one-out estimates), as the classifiers smooth theirs.
Printed per table: the test log-loss of one and of two stages (means over
stratified 5-fold, ``StratifiedKFold(5, shuffle=True, random_state=0)``)
and the paired ratio (two over one) with its standard error over the folds.
Tables as ``bench_classification.py`` reads them (``--tables``).

Run: ``python benchmarks/levers/bench_classifier_second_stage.py [--tables ...]``
"""

import argparse
import os
import sys
import warnings

import numpy as np
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line  # noqa: E402
from bench_classification import load_table  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWClassifier,
    NWAttentionRegressor,
)
from nwensemble._fit.class_targets import choose_prior_weight  # noqa: E402


def smoothed(P, R, prior, a):
    Q = np.clip(P + R, 0, None)
    Q /= Q.sum(axis=1, keepdims=True)
    return (1 - a) * Q + a * prior


def run(name):
    X, y = load_table(name, 3000)
    one, two = [], []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        first = HeadAllocator(MultiHeadNWClassifier(), random_state=0)
        first.fit(X.iloc[train], y[train])
        classes = first.classes_
        codes = np.searchsorted(classes, y[train])
        a0, prior = first.prior_weight_, np.asarray(first.class_prior_)
        P_loo = (first.loo_proba_ - a0 * prior) / (1 - a0)
        rows = np.flatnonzero(np.all(np.isfinite(P_loo), axis=1))
        R = np.eye(classes.size)[codes] - P_loo
        second = NWAttentionRegressor(local_fit="constant", random_state=0)
        second.fit(X.iloc[train].iloc[rows], R[rows])
        R_loo = second.loo_prediction_
        known = np.all(np.isfinite(R_loo), axis=1)
        Q = np.clip(P_loo[rows[known]] + R_loo[known], 0, None)
        Q /= Q.sum(axis=1, keepdims=True)
        a = choose_prior_weight(Q, codes[rows[known]], np.ones(known.sum()), prior)
        P = first.predict_proba(X.iloc[test])
        raw = (P - a0 * prior) / (1 - a0)
        one.append(log_loss(y[test], P, labels=classes))
        both = smoothed(raw, second.predict(X.iloc[test]), prior, a)
        two.append(log_loss(y[test], both, labels=classes))
    return np.array(one), np.array(two)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables",
        nargs="*",
        default=[
            "breast_cancer",
            "wine",
            "pima_diabetes",
            "german_credit",
            "titanic",
            "adult",
            "car_evaluation",
            "penguins",
            "auto_mpg_mixed",
        ],
    )
    args = parser.parse_args(argv)
    print(cpu_line())
    print(f"{'table':<20}{'one stage':>11}{'two stages':>12}{'paired ratio':>20}")
    ratios = []
    for name in args.tables:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            one, two = run(name)
        r = np.log(two / one)
        ratios.append(r.mean())
        print(
            f"{name:<20}{one.mean():>11.4f}{two.mean():>12.4f}"
            f"{np.exp(r.mean()):>12.3f} ± {r.std(ddof=1) / np.sqrt(r.size):.3f}",
            flush=True,
        )
    print(f"geometric mean of the paired ratios: {np.exp(np.mean(ratios)):.3f}")


if __name__ == "__main__":
    main()
