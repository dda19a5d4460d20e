"""How ``HeadAllocator`` should choose among its candidates: their scores
against their test error, fold by fold.

On every numeric table of ``../shared/data`` (the folds of
``bench_accuracy.py``), fit each of ``HeadAllocator()``'s candidate
allocations (``param_grid``; ``MultiHeadNWRegressor(n_heads, head_dim,
random_state=0)``) on the training rows of each fold and record its
leave-one-out MSE on all training rows (the allocator's score with
``cv=None``), that of the rows held out of the projections' fit (its
``calibration_rows_``, when fewer than all), its number of projection
parameters and its test MSE. Then prints, per table, the test RMSE of the
candidate each rule picks, of each candidate, and of the best candidate of
each fold (the oracle), and the geometric means of their ratios to the
first candidate (``MultiHeadNWRegressor()``'s own allocation when the
budget allows it). Rules:

* ``loo``: the least leave-one-out MSE (today's choice);
* ``held-out``: the least MSE on the held-out rows, where every candidate
  held rows out, else ``loo``;
* ``loo x (1 + 2k/n)``: the leave-one-out MSE inflated by the projections'
  ``k`` parameters per training row, as AIC or Mallows' Cp would (the
  projections were fitted to that same leave-one-out error).

``--save FILE`` keeps the records (JSON) and ``--load FILE`` re-prints the
rules from them without fitting.

Run: ``python benchmarks/levers/bench_allocator_choice.py [--data ../shared/data]
[--sets concrete yacht_hydrodynamics] [--save choice.json]``
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_accuracy import numeric_sets  # noqa: E402

from nwensemble import HeadAllocator, MultiHeadNWRegressor  # noqa: E402


def records(X, y, folds):
    """One record per fold and candidate."""
    out = []
    for f, (train, test) in enumerate(folds):
        n, p = X[train].shape
        for params in HeadAllocator().param_grid(n, p):
            H, d = params["n_heads"][0], params["head_dim"][0]
            model = MultiHeadNWRegressor(n_heads=H, head_dim=d, random_state=0)
            start = time.perf_counter()
            model.fit(X[train], y[train])
            fit_s = time.perf_counter() - start
            loo = np.asarray(model.loo_prediction_).reshape(-1)
            seen = np.isfinite(loo)
            err = (loo - y[train]) ** 2
            held = np.asarray(model.calibration_rows_)
            heldout = float(np.mean(err[held])) if held.shape[0] < n else None
            pred = np.asarray(model.predict(X[test])).reshape(-1)
            out.append(
                dict(
                    fold=f,
                    n_heads=int(H),
                    head_dim=int(d),
                    n=int(n),
                    k=int(H * d * p),
                    loo=float(np.mean(err[seen])),
                    heldout=heldout,
                    test=float(np.mean((pred - y[test]) ** 2)),
                    fit_s=fit_s,
                )
            )
    return out


def pick(cands, rule):
    """Index of the candidate ``rule`` chooses among one fold's ``cands``."""
    if rule == "held-out" and all(c["heldout"] is not None for c in cands):
        return int(np.argmin([c["heldout"] for c in cands]))
    if rule == "loo x (1 + 2k/n)":
        return int(np.argmin([c["loo"] * (1 + 2 * c["k"] / c["n"]) for c in cands]))
    return int(np.argmin([c["loo"] for c in cands]))


RULES = ("loo", "held-out", "loo x (1 + 2k/n)")


def report(all_records):
    """Per table the test RMSE of each rule's choice, each candidate and the
    oracle; geometric means of the ratios to the first candidate."""
    ratios = {}
    header = f"{'set':<28}" + "".join(f"{r:>18}" for r in RULES + ("oracle",))
    print(header + "   candidates (n_heads x head_dim: RMSE)")
    for name, recs in all_records.items():
        folds = sorted({r["fold"] for r in recs})
        per_fold = [[r for r in recs if r["fold"] == f] for f in folds]
        labels = [f"{c['n_heads']}x{c['head_dim']}" for c in per_fold[0]]
        rmse = {}
        for rule in RULES:
            rmse[rule] = np.mean([np.sqrt(c[pick(c, rule)]["test"]) for c in per_fold])
        rmse["oracle"] = np.mean([np.sqrt(min(x["test"] for x in c)) for c in per_fold])
        cand = [
            np.mean([np.sqrt(c[i]["test"]) for c in per_fold])
            for i in range(len(labels))
        ]
        line = f"{name:<28}" + "".join(f"{rmse[r]:>18.4g}" for r in rmse)
        print(
            line + "   " + ", ".join(f"{lab}: {v:.4g}" for lab, v in zip(labels, cand))
        )
        for key, value in list(rmse.items()) + [("first candidate", cand[0])]:
            ratios.setdefault(key, []).append(value / cand[0])
    print(
        "geometric mean / first candidate: "
        + ", ".join(f"{k} {np.exp(np.mean(np.log(v))):.4f}" for k, v in ratios.items())
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument(
        "--data", default=os.path.join(here, "..", "..", "shared", "data")
    )
    parser.add_argument("--sets", nargs="*")
    parser.add_argument("--save")
    parser.add_argument("--load")
    args = parser.parse_args()
    if args.load:
        with open(args.load) as fh:
            report(json.load(fh))
        return
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    found = {}
    for name, X, y, folds, how in numeric_sets(args.data):
        if args.sets and name not in args.sets:
            continue
        start = time.perf_counter()
        found[name] = records(X, y, folds)
        print(f"{name}: {how}, {time.perf_counter() - start:.0f} s", flush=True)
        if args.save:
            with open(args.save, "w") as fh:
                json.dump(found, fh)
    report(found)


if __name__ == "__main__":
    main()
