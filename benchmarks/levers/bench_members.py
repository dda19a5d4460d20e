"""A lever for issue 33, measured: several fits of one model averaged
(``MultiHeadNWRegressor(n_members=K)``) against one fit, and against the
average of the predictions of ``K`` separately fitted models.

A fit's random draws (its start's subsample and directions, the rows it
holds out to stop early) move the test RMSE of a table of a few hundred
rows by several per cent. Averaging ``K`` fits removes part of that
variance. ``n_members=K`` joins the ``K`` fits' heads into one ensemble,
with one readout (the local line's ridge) chosen for all heads, each
member scored on the rows it held out; the average of ``K`` separately
fitted models (``random_state`` 0 to K-1, the same as
``sklearn.ensemble.VotingRegressor`` would give) lets each fit keep its own
readout. For each table and model, on the same folds:

- ``one fit``: the mean RMSE of the ``K`` separate fits, one at a time;
- ``members``: ``n_members=K`` with ``random_state=0``;
- ``averaged``: the RMSE of the ``K`` separate fits' mean prediction.

Tables: the numeric tables of ``../shared/data`` up to ``--max-rows``
rows (folds as ``bench_accuracy.py`` makes them) and, with ``--mixed``, the
mixed tables of ``../shared/data/mixed`` (``KFold(5, shuffle=True,
random_state=0)``). Prints each table's three RMSEs with the ratios of
``members`` and ``averaged`` to ``one fit``, their geometric means, and
the median fit-time ratio of ``members`` to one fit.

``--allocator`` instead compares ``HeadAllocator()`` (the chosen
allocation refitted with ``n_members='auto'`` members) with
``HeadAllocator(n_members=1)`` (the best candidate as fitted), both around
``MultiHeadNWRegressor(random_state=0)``, on the same tables and folds.

``--min-rows`` and ``--folds N`` (the first N folds) measure the larger
tables at a bearable cost.

Run: ``python benchmarks/levers/bench_members.py [--members 4] [--heads 1 4]
[--max-rows 2000] [--min-rows 0] [--mixed] [--folds 5] [--allocator]``
"""

import argparse
import glob
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line  # noqa: E402
from bench_accuracy import numeric_sets  # noqa: E402

from nwensemble import HeadAllocator, MultiHeadNWRegressor  # noqa: E402


def tables(data, max_rows, mixed, min_rows=0):
    """``(name, X, y, folds)`` of the numeric tables of ``min_rows`` to
    ``max_rows`` rows, then (``mixed``) the mixed tables up to ``max_rows``."""
    for name, X, y, folds, _ in numeric_sets(data):
        if min_rows <= X.shape[0] <= max_rows:
            yield name, X, y, folds
    if mixed:
        for path in sorted(glob.glob(os.path.join(data, "mixed", "*.csv"))):
            frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
            if frame.shape[0] > max_rows:
                continue
            y = frame.pop("target").to_numpy(float)
            folds = list(KFold(5, shuffle=True, random_state=0).split(frame))
            yield os.path.basename(path)[:-4], frame, y, folds


def compare(X, y, folds, n_heads, members):
    """Mean RMSE of one fit, of ``members`` members and of the averaged
    separate fits; median fit seconds of one fit and of the members."""
    rows = (lambda r: X.iloc[r]) if hasattr(X, "iloc") else (lambda r: X[r])
    one, joined, averaged, one_s, joined_s = [], [], [], [], []
    for train, test in folds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictions = []
            for seed in range(members):
                start = time.perf_counter()
                model = MultiHeadNWRegressor(n_heads=n_heads, random_state=seed)
                model.fit(rows(train), y[train])
                one_s.append(time.perf_counter() - start)
                predictions.append(model.predict(rows(test)))
            start = time.perf_counter()
            model = MultiHeadNWRegressor(
                n_heads=n_heads, n_members=members, random_state=0
            ).fit(rows(train), y[train])
            joined_s.append(time.perf_counter() - start)
            pred = model.predict(rows(test))

        def rmse(p):
            return float(np.sqrt(np.mean((p - y[test]) ** 2)))

        one.append(np.mean([rmse(p) for p in predictions]))
        joined.append(rmse(pred))
        averaged.append(rmse(np.mean(predictions, axis=0)))
    return (
        float(np.mean(one)),
        float(np.mean(joined)),
        float(np.mean(averaged)),
        float(np.median(joined_s) / np.median(one_s)),
    )


def compare_allocators(X, y, folds):
    """Mean RMSE and median fit seconds of ``HeadAllocator`` with one
    member and with ``n_members='auto'``, and the members it chose."""
    rows = (lambda r: X.iloc[r]) if hasattr(X, "iloc") else (lambda r: X[r])
    rmse = {1: [], "auto": []}
    fit_s = {1: [], "auto": []}
    chosen = []
    for train, test in folds:
        for members in rmse:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                model = HeadAllocator(
                    MultiHeadNWRegressor(random_state=0), n_members=members
                ).fit(rows(train), y[train])
                fit_s[members].append(time.perf_counter() - start)
                pred = model.predict(rows(test))
            rmse[members].append(float(np.sqrt(np.mean((pred - y[test]) ** 2))))
        chosen.append(model.n_members_)
    return (
        {k: float(np.mean(v)) for k, v in rmse.items()},
        {k: float(np.median(v)) for k, v in fit_s.items()},
        int(np.median(chosen)),
    )


def allocators(args):
    """The ``--allocator`` table."""
    print("HeadAllocator(): n_members=1 against 'auto'; mean RMSE, median fit")
    print(f"{'table':<24}{'one member':>20}{'auto':>28}")
    ratios, times = [], []
    for name, X, y, folds in tables(
        args.data, args.max_rows, args.mixed, args.min_rows
    ):
        rmse, fit_s, k = compare_allocators(X, y, folds[: args.folds])
        ratios.append(rmse["auto"] / rmse[1])
        times.append(fit_s["auto"] / fit_s[1])
        print(
            f"{name:<24}{rmse[1]:>12.5g} ({fit_s[1]:4.2f} s)"
            f"{rmse['auto']:>12.5g} ({fit_s['auto']:4.2f} s, k={k}) "
            f"{ratios[-1]:5.3f}",
            flush=True,
        )
    print(
        f"geometric mean of the ratios {np.exp(np.mean(np.log(ratios))):.4f}; "
        f"fit time 'auto' / one member: median {np.median(times):.2f}x"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--heads", type=int, nargs="*", default=[1, 4])
    parser.add_argument("--max-rows", type=int, default=2000)
    parser.add_argument("--min-rows", type=int, default=0)
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--folds", type=int, default=5, help="first N folds only")
    parser.add_argument("--allocator", action="store_true")
    args = parser.parse_args()
    print(cpu_line())
    if args.allocator:
        allocators(args)
        return
    K = args.members
    print(f"K = {K}; mean RMSE over folds (ratio to one fit)")
    for n_heads in args.heads:
        print(f"\nMultiHeadNWRegressor(n_heads={n_heads})")
        print(f"{'table':<24}{'one fit':>12}{'members':>20}{'averaged':>20}")
        ratios, times = {"members": [], "averaged": []}, []
        sets = tables(args.data, args.max_rows, args.mixed, args.min_rows)
        for name, X, y, folds in sets:
            folds = folds[: args.folds]
            one, joined, averaged, time_ratio = compare(X, y, folds, n_heads, K)
            ratios["members"].append(joined / one)
            ratios["averaged"].append(averaged / one)
            times.append(time_ratio)
            print(
                f"{name:<24}{one:>12.5g}{joined:>12.5g} ({joined / one:5.3f})"
                f"{averaged:>12.5g} ({averaged / one:5.3f})",
                flush=True,
            )
        print(
            f"{'geometric mean':<24}{'':>12}"
            + "".join(f"{np.exp(np.mean(np.log(r))):>20.4f}" for r in ratios.values())
        )
        print(f"fit time of {K} members / one fit: median {np.median(times):.2f}x")


if __name__ == "__main__":
    main()
