"""Which leave-one-out rows should score a classifier's candidate
allocations: all rows, or only the calibration rows (those held out of the
projections' fit where there are any).

For each fold (stratified 5-fold, ``StratifiedKFold(5, shuffle=True,
random_state=0)``), each of ``HeadAllocator(MultiHeadNWClassifier())``'s
candidate allocations is fitted once (``MultiHeadNWClassifier(n_heads=H,
head_dim=d, random_state=0)``, one member) and scored by the log-loss of its
leave-one-out probabilities on all rows and on its calibration rows; each
rule picks its best candidate, whose test log-loss is recorded. Printed per
table: the mean test log-loss of each rule's pick and of the best candidate
in hindsight ("oracle"), and the picks. Tables as ``bench_classification.py``
reads them.

Run: ``python benchmarks/levers/bench_classifier_allocation_score.py
[--tables ...]``
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

from nwensemble import HeadAllocator, MultiHeadNWClassifier  # noqa: E402


def run(name):
    X, y = load_table(name, 3000)
    chosen = {"all rows": [], "calibration rows": [], "oracle": []}
    picks = {"all rows": [], "calibration rows": []}
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        allocator = HeadAllocator(MultiHeadNWClassifier(random_state=0))
        candidates = allocator._candidates(len(train), X.shape[1])
        scores = {"all rows": [], "calibration rows": []}
        tests = []
        for H, d in candidates:
            model = MultiHeadNWClassifier(n_heads=H, head_dim=d, random_state=0)
            model.fit(X.iloc[train], y[train])
            codes = np.searchsorted(model.classes_, y[train])
            P = model.loo_proba_
            known = np.all(np.isfinite(P), axis=1)
            scores["all rows"].append(-np.mean(np.log(P[known, codes[known]])))
            rows = model.calibration_rows_
            scores["calibration rows"].append(-np.mean(np.log(P[rows, codes[rows]])))
            P_test = model.predict_proba(X.iloc[test])
            tests.append(log_loss(y[test], P_test, labels=model.classes_))
        for rule, s in scores.items():
            best = int(np.argmin(s))
            chosen[rule].append(tests[best])
            picks[rule].append(candidates[best])
        chosen["oracle"].append(min(tests))
    return chosen, picks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables",
        nargs="*",
        default=[
            "wine",
            "breast_cancer",
            "pima_diabetes",
            "titanic",
            "auto_mpg_mixed",
            "penguins",
        ],
    )
    args = parser.parse_args(argv)
    print(cpu_line())
    print("test log-loss of the candidate each rule picks (mean over 5 folds)")
    for name in args.tables:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chosen, picks = run(name)
        figures = "  ".join(f"{k} {np.mean(v):.4f}" for k, v in chosen.items())
        print(f"{name:<16} {figures}", flush=True)
        for rule, p in picks.items():
            print(f"{'':<16}   {rule} picked {p}")


if __name__ == "__main__":
    main()
