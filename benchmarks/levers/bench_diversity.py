"""Diversity that pays: the heads' ambiguity weight against the test error.

Two sections, each a table of ``MultiHeadNWRegressor`` fits that differ only
in ``diversity`` (the weight of the heads' ambiguity, see the user guide):

* ``regimes``: Friedman #1 (10 features, 5 informative) with Gaussian noise,
  in the stated regimes (``REGIMES``, or ``--regimes``), ``--seeds`` seeds
  (the data, its noise and the model's ``random_state``), 2000 test rows
  scored against the noiseless truth. For each regime (noise, n,
  n_heads, head_dim) and each ``diversity`` in -1, -0.5 and
  ``'auto'``, the mean test MSE change against ``diversity=0`` with its
  standard error over seeds, the seeds on which it is lower, and the mean
  pairwise correlation of the heads' leave-one-out residuals.
* ``tabular``: every shared set (``../shared/data``, above 5000 rows
  subsampled), on the folds of ``tabular.py`` (``KFold(5, shuffle=True,
  random_state=0)``), the default ``MultiHeadNWRegressor(random_state=0)``
  with ``diversity`` 0, ``'auto'``, -0.5 and -1: mean RMSE over the folds,
  its ratio to ``diversity=0``, the values ``'auto'`` chose per fold, and the
  median ratio of the fit time of ``'auto'`` to that of ``0`` (timed one
  after the other on the same fold).

Tasks run in ``--jobs`` processes with one BLAS thread each.

Run: ``python benchmarks/levers/bench_diversity.py [--sections regimes tabular]
[--seeds 10] [--regimes 3,300,4,2 1,1000,4,2] [--data ../shared/data]
[--markdown diversity.md]``
"""

import argparse
import os
import sys
import time

import numpy as np
from joblib import Parallel, delayed
from sklearn.datasets import make_friedman1
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from nwensemble import MultiHeadNWRegressor

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
from _common import cpu_line  # noqa: E402
from tabular import load_sets  # noqa: E402

SETTINGS = (0.0, -0.5, -1.0, "auto")
# (noise, n, n_heads, head_dim): three where the regime map found gains (the
# last one trains on every row at diversity=0: no early stopping), one
# where it found none.
REGIMES = ((3.0, 1000, 4, 2), (3.0, 1000, 2, 4), (3.0, 3000, 4, 2), (1.0, 300, 8, 1))
N_TEST = 2000


def regime_task(noise, n, n_heads, head_dim, seed):
    """Test MSE against the truth and head correlation for every setting."""
    X, f = make_friedman1(n_samples=n + N_TEST, noise=0.0, random_state=seed)
    y = f + noise * np.random.default_rng(seed).standard_normal(f.shape)
    out = {}
    with threadpool_limits(1):
        for diversity in SETTINGS:
            model = MultiHeadNWRegressor(
                n_heads,
                head_dim=head_dim,
                diversity=diversity,
                bvc_resamples=0,
                random_state=seed,
            ).fit(X[:n], y[:n])
            mse = float(np.mean((model.predict(X[n:]) - f[n:]) ** 2))
            out[diversity] = (mse, model.head_correlation_, model.diversity_)
    return out


def tabular_task(X, y, train, test):
    """RMSE, fit time and the value used for every setting on one fold."""
    out = {}
    with threadpool_limits(1):
        for diversity in SETTINGS:
            model = MultiHeadNWRegressor(diversity=diversity, random_state=0)
            start = time.perf_counter()
            model.fit(X[train], y[train])
            elapsed = time.perf_counter() - start
            rmse = float(np.sqrt(np.mean((model.predict(X[test]) - y[test]) ** 2)))
            out[diversity] = (rmse, elapsed, model.diversity_)
    return out


def regimes(args, emit):
    emit(f"## Regimes: Friedman #1, {args.seeds} seeds, test MSE against the truth\n")
    emit(
        "| noise | n | heads x dim | MSE at 0 | diversity | change +- SE | "
        "lower on | residual corr. (0 -> setting) |"
    )
    emit("|---|---|---|---|---|---|---|---|")
    jobs = [(r, s) for r in args.regimes for s in range(args.seeds)]
    results = Parallel(n_jobs=args.jobs)(delayed(regime_task)(*r, s) for r, s in jobs)
    for regime in args.regimes:
        runs = [res for (r, _), res in zip(jobs, results) if r == regime]
        base = np.array([run[0.0][0] for run in runs])
        corr0 = np.mean([run[0.0][1] for run in runs])
        noise, n, H, d = regime
        for diversity in SETTINGS[1:]:
            diff = np.array([run[diversity][0] for run in runs]) - base
            se = diff.std(ddof=1) / np.sqrt(diff.size)
            corr = np.mean([run[diversity][1] for run in runs])
            label = f"{diversity}"
            if diversity == "auto":
                chosen = [run[diversity][2] for run in runs]
                label += " (chose " + ", ".join(f"{c:g}" for c in chosen) + ")"
            emit(
                f"| {noise:g} | {n} | {H} x {d} | {base.mean():.3f} | {label} | "
                f"{diff.mean():+.3f} +- {se:.3f} | {(diff < 0).sum()}/{diff.size} | "
                f"{corr0:.2f} -> {corr:.2f} |"
            )
    emit("")


def tabular(args, emit):
    emit("## Shared sets: 5-fold RMSE (folds of tabular.py)\n")
    emit(
        "| set | rows | RMSE at 0 | 'auto' / 0 | -0.5 / 0 | -1 / 0 | "
        "'auto' chose | fit time 'auto' / 0 |"
    )
    emit("|---|---|---|---|---|---|---|---|")
    sets = list(load_sets(args.data, 5000, np.random.default_rng(0)))
    jobs = []
    for name, X, y, _ in sets:
        folds = KFold(5, shuffle=True, random_state=0).split(X)
        jobs += [(name, X, y, train, test) for train, test in folds]
    results = Parallel(n_jobs=args.jobs)(
        delayed(tabular_task)(X, y, train, test) for _, X, y, train, test in jobs
    )
    for name, X, _, _ in sets:
        runs = [res for job, res in zip(jobs, results) if job[0] == name]
        rmse = {s: np.mean([run[s][0] for run in runs]) for s in SETTINGS}
        ratio = {s: rmse[s] / rmse[0.0] for s in SETTINGS}
        chosen = ", ".join(f"{run['auto'][2]:g}" for run in runs)
        time_ratio = np.median([run["auto"][1] / run[0.0][1] for run in runs])
        emit(
            f"| {name} | {X.shape[0]} | {rmse[0.0]:.4f} | {ratio['auto']:.3f} | "
            f"{ratio[-0.5]:.3f} | {ratio[-1.0]:.3f} | {chosen} | {time_ratio:.1f}x |"
        )
    emit("")


def _regime(text):
    """``"noise,n,n_heads,head_dim"`` as a regime tuple."""
    noise, n, n_heads, head_dim = text.split(",")
    return float(noise), int(n), int(n_heads), int(head_dim)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["regimes", "tabular"],
        choices=["regimes", "tabular"],
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--regimes",
        nargs="+",
        type=_regime,
        default=list(REGIMES),
        metavar="NOISE,N,HEADS,DIM",
        help="the regimes section's problems (issue 66's: 3,300,4,2 1,1000,4,2)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()
    lines = []

    def emit(line):
        print(line, flush=True)
        lines.append(line)

    emit(cpu_line() + "\n")
    if "regimes" in args.sections:
        regimes(args, emit)
    if "tabular" in args.sections:
        tabular(args, emit)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
