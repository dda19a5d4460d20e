"""Time to a model: fit time of the NW estimators against HistGradientBoosting.

Sections (``--sections``, all by default):

* ``sets``: the shared real sets (``benchmarks/tabular.py``'s loader and
  shuffled 5-fold splits) and a synthetic 3000 x 32 table (Friedman #1 with
  27 noise features). Per fold, in turn: ``HistGradientBoostingRegressor()``,
  ``NWAttentionRegressor()``, ``MultiHeadNWRegressor()``, ``HeadAllocator()``,
  ``ResidualStageRegressor()`` (the recommended start), all with defaults
  (``random_state=0``). Prints each model's median fit time over folds, the
  median of its per-fold ratio to HGB's fit time, and its test RMSE.
* ``features``: n = 3000 rows of Friedman #1 padded with noise features to
  8 ... 256 features; median fit time of the two estimators and its growth
  against the number of features (linear growth doubles with the features).
* ``wide``: 200 training rows x 2000 features (5 informative,
  gene-expression-like: most features noise); fit time and test RMSE of the
  defaults against tuned k-NN and HGB.
* ``large``: 40 000 x 9 (Friedman #1 with 4 noise features), one default
  ``NWAttentionRegressor`` fit against HGB, with test RMSE.
* ``solver``: medium n (3 000, 5 000 and 10 000 training rows of
  Friedman #1 with 9 features, 10 000 test rows): fit time and test RMSE of
  both estimators with ``solver='lbfgs'`` and ``'adam'``, the time to
  accuracy behind ``solver='auto'``'s switches to Adam (above 10 000 rows
  for one head, above 4096 for several).
* ``sizes``: what a fit costs by size, for the README: one fit of each
  model with its defaults on Friedman #1 with 10 features at ``--sizes``
  training rows (1000, 3000, 10 000 and 50 000 by default), seconds.
* ``busy``: one default ``NWAttentionRegressor`` fit on 4000 x 10, alone,
  beside a process that keeps one core busy, and as one of two fits run at
  once by ``joblib.Parallel(n_jobs=2)`` (as in a parallel ``GridSearchCV``),
  each against the same fit held to one BLAS thread in the same condition.

Every time is measured side by side in one run; read the ratios, and the
CPU line printed first (AVX-512 machines run ``exp`` several times faster
than AVX2 ones).

``--mode avx2`` runs it with NumPy's AVX-512 paths disabled and OpenBLAS
as Haswell (an AVX2 machine, on an AVX-512 one).

Run: ``python benchmarks/bench_fit_time.py [--mode native|avx2]
[--sections sets features ...] [--folds 5] [--sets abalone ...]``
"""

import argparse
import multiprocessing
import os
import sys
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.datasets import make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from _common import add_mode, apply_mode, cpu_line  # noqa: E402
from tabular import load_sets  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

MODELS = {
    "HGB": lambda: HistGradientBoostingRegressor(random_state=0),
    "NWAttention": lambda: NWAttentionRegressor(random_state=0),
    "MultiHeadNW": lambda: MultiHeadNWRegressor(random_state=0),
    "HeadAllocator": lambda: HeadAllocator(random_state=0),
    "ResidualStage": lambda: ResidualStageRegressor(random_state=0),
}


def rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def timed_fit(factory, X, y):
    model = factory()
    start = time.perf_counter()
    model.fit(X, y)
    return model, time.perf_counter() - start


def friedman(n, p, *, noise=1.0, seed=0):
    """Friedman #1 with ``p - 5`` noise features (``p >= 5``)."""
    return make_friedman1(n_samples=n, n_features=p, noise=noise, random_state=seed)


def section_sets(args):
    print("\n== sets: median fit time per fold, ratio to HGB (median over folds)")
    names = [m for m in MODELS if m in args.models or m == "HGB"]
    sets = list(load_sets(args.data, 5000, np.random.default_rng(0)))
    X, y = friedman(3000, 32)
    sets.append(("synthetic-3000x32", X, y, ""))
    header = f"{'set':<22}" + "".join(f"{m:>26}" for m in names[1:])
    print(header + f"{'HGB s':>9}")
    summary = {m: [] for m in names[1:]}
    for set_name, X, y, _ in sets:
        if args.sets and set_name not in args.sets:
            continue
        folds = list(KFold(5, shuffle=True, random_state=0).split(X))[: args.folds]
        times = {m: [] for m in names}
        scores = {m: [] for m in names}
        for train, test in folds:
            for m in names:
                model, t = timed_fit(MODELS[m], X[train], y[train])
                times[m].append(t)
                scores[m].append(rmse(model, X[test], y[test]))
        row = f"{set_name:<22}"
        for m in names[1:]:
            ratio = float(np.median(np.array(times[m]) / np.array(times["HGB"])))
            summary[m].append(ratio)
            row += (
                f"{np.median(times[m]):>8.2f}s {ratio:>6.1f}x "
                f"{np.mean(scores[m]):>9.4g}"
            )
        row += (
            f"{np.median(times['HGB']):>8.3f}s  (HGB RMSE {np.mean(scores['HGB']):.4g})"
        )
        print(row, flush=True)
    for m, ratios in summary.items():
        if ratios:
            print(
                f"{m}: ratio to HGB median over sets {np.median(ratios):.1f}x, "
                f"largest {max(ratios):.1f}x"
            )


def section_features(args):
    print("\n== features: n = 3000, median fit time of --repeats fits")
    widths = [8, 16, 32, 64, 256]
    print(f"{'p':>5}" + "".join(f"{m:>24}" for m in ("NWAttention", "MultiHeadNW")))
    base = {}
    for p in widths:
        X, y = friedman(3000, p)
        row = f"{p:>5}"
        for m in ("NWAttention", "MultiHeadNW"):
            t = np.median([timed_fit(MODELS[m], X, y)[1] for _ in range(args.repeats)])
            base.setdefault(m, t)
            row += f"{t:>10.2f}s {t / base[m]:>5.1f}x/{p // widths[0]:<3}x p"
        print(row, flush=True)


def _informative_wide(n, p, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    f = 2 * X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3] + np.abs(X[:, 4])
    return X, f + 0.3 * rng.standard_normal(n)


def section_wide(args):
    print("\n== wide: 200 training rows x 2000 features (5 informative), 1000 test")
    X, y = _informative_wide(1200, 2000, 0)
    Xtr, ytr, Xte, yte = X[:200], y[:200], X[200:], y[200:]
    knn = lambda: GridSearchCV(  # noqa: E731
        make_pipeline(StandardScaler(), KNeighborsRegressor()),
        {
            "kneighborsregressor__n_neighbors": [1, 2, 3, 5, 7, 10, 15, 20, 30, 50],
            "kneighborsregressor__weights": ["uniform", "distance"],
        },
        scoring="neg_mean_squared_error",
    )
    for m, factory in [
        ("k-NN (tuned)", knn),
        ("HGB", MODELS["HGB"]),
        ("NWAttention", MODELS["NWAttention"]),
        ("MultiHeadNW", MODELS["MultiHeadNW"]),
    ]:
        model, t = timed_fit(factory, Xtr, ytr)
        print(
            f"  {m:<14} fit {t:7.2f}s  test RMSE {rmse(model, Xte, yte):.4f}",
            flush=True,
        )


def section_large(args):
    print("\n== large: 40 000 training rows x 9 features, 10 000 test")
    X, y = friedman(50_000, 9)
    Xtr, ytr, Xte, yte = X[:40_000], y[:40_000], X[40_000:], y[40_000:]
    for m in ("HGB", "NWAttention"):
        model, t = timed_fit(MODELS[m], Xtr, ytr)
        print(
            f"  {m:<14} fit {t:7.2f}s  test RMSE {rmse(model, Xte, yte):.4f}",
            flush=True,
        )


def section_sizes(args):
    print("\n== sizes: Friedman #1, 10 features; one fit each, seconds")
    names = [m for m in args.models if m in MODELS]
    print(f"{'rows':>8}" + "".join(f"{m:>16}" for m in names), flush=True)
    for n in args.sizes:
        X, y = friedman(n, 10)
        times = [timed_fit(MODELS[m], X, y)[1] for m in names]
        print(f"{n:>8}" + "".join(f"{t:>16.2f}" for t in times), flush=True)


def section_solver(args):
    print("\n== solver: Friedman #1, 9 features, 10 000 test rows; fit s / RMSE")
    X, y = friedman(50_000, 9, seed=1)
    Xte, yte = X[40_000:], y[40_000:]
    print(
        f"{'n':>7}"
        + "".join(
            f"{m + ' ' + s:>26}" for m in ("NWA", "MH") for s in ("lbfgs", "adam")
        )
    )
    for n in (3_000, 5_000, 10_000):
        cells = []
        for cls in (NWAttentionRegressor, MultiHeadNWRegressor):
            for solver in ("lbfgs", "adam"):
                model, t = timed_fit(
                    lambda: cls(solver=solver, random_state=0), X[:n], y[:n]
                )
                cells.append(f"{t:>9.2f}s / {rmse(model, Xte, yte):.4f}")
        print(f"{n:>7}" + "".join(f"{c:>26}" for c in cells), flush=True)


def _spin(stop):
    x = np.random.default_rng(0).standard_normal((400, 400))
    while not stop.is_set():
        x = np.tanh(x @ x / 400.0)


def _one_fit(X, y, threads):
    with threadpool_limits(limits=threads, user_api="blas"):
        return timed_fit(MODELS["NWAttention"], X, y)[1]


def section_busy(args):
    print("\n== busy: one default NWAttention fit on 4000 x 10, median of --repeats")
    X, y = friedman(4000, 10)
    print(f"{'condition':<34}{'default s':>10}{'1 thread s':>11}{'ratio':>7}")

    def measure(run):
        pairs = [(run(None), run(1)) for _ in range(args.repeats)]
        a, b = np.median([p[0] for p in pairs]), np.median([p[1] for p in pairs])
        return a, b, float(np.median([p[0] / p[1] for p in pairs]))

    conditions = [("alone", lambda th: _one_fit(X, y, th))]

    def beside_busy(th):
        ctx = multiprocessing.get_context("spawn")
        stop = ctx.Event()
        proc = ctx.Process(target=_spin, args=(stop,))
        with threadpool_limits(limits=1):
            proc.start()
        time.sleep(0.5)
        try:
            return _one_fit(X, y, th)
        finally:
            stop.set()
            proc.join()

    conditions.append(("beside a process busy on one core", beside_busy))

    def in_parallel(th):
        times = Parallel(n_jobs=2)(delayed(_one_fit)(X, y, th) for _ in range(2))
        return max(times)

    conditions.append(("two at once, joblib n_jobs=2", in_parallel))
    for name, run in conditions:
        a, b, r = measure(run)
        print(f"{name:<34}{a:>10.2f}{b:>11.2f}{r:>7.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument(
        "--sections",
        nargs="*",
        default=["sets", "features", "wide", "large", "solver", "sizes", "busy"],
    )
    parser.add_argument(
        "--sizes", nargs="*", type=int, default=[1000, 3000, 10_000, 50_000]
    )
    parser.add_argument("--sets", nargs="*", help="subset of set names")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = add_mode(parser).parse_args()
    warnings.filterwarnings("ignore")
    print(cpu_line())
    apply_mode(args)
    start = time.perf_counter()
    for name in args.sections:
        globals()[f"section_{name}"](args)
    print(f"\ntotal time {(time.perf_counter() - start) / 60:.1f} min")


if __name__ == "__main__":
    main()
