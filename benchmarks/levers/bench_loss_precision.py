"""Levers for issues 33 and 34, measured: the precision of a fit's losses.

A float64 fit on at least ``FLOAT32_LOSS_ROWS`` rows evaluates its
training and held-out losses in float32 (``_fit/precision.py``); the
parameters, the optimiser's state and the fitted model stay float64. By
default this script compares that with every Adam loss in float64, on the
numeric tables of ``../shared/data`` whose default fits take the Adam
solver (at least ``--min-rows`` rows). ``--from-rows A B`` compares
instead the fits with ``FLOAT32_LOSS_ROWS`` set to ``A`` and to ``B``
(every solver; ``--min-rows 0`` for every table). Either way with the
folds of ``bench_accuracy.py`` (by patient, by time block, shuffled
elsewhere), each of ``--models`` and each of ``--seeds``: mean test RMSE,
its ratio (second variant / first) and the median fit time of each, the two
variants fitted in turn on each fold. ``--statistics`` compares instead
the leave-one-out statistics' attention sums (the readout's choice after
the fit) taken in float64 with those taken in float32 from
``FLOAT32_LOSS_ROWS`` keys on (``precision.statistics_keys``; every solver).
``--evaluations`` times instead one
training evaluation (leave-one-out loss and gradient of one softmax head,
head_dim 8 and 16, one BLAS thread as in a fit) in float64 and in float32
at each of ``--sizes`` rows, in turn, medians of ``--repeats``.

This is a measurement script: it patches private modules.

Run: ``python benchmarks/levers/bench_loss_precision.py [--folds 5]
[--models MultiHeadNW NWAttention ResidualStage] [--min-rows 5000]
[--from-rows 2048 1024 | --statistics] [--seeds 0]``, ``python
benchmarks/levers/bench_loss_precision.py --evaluations [--sizes 256 512 ...]``
"""

import argparse
import contextlib
import os
import sys
import time
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, lever_runs  # noqa: E402
from bench_accuracy import geo, numeric_sets  # noqa: E402

import nwensemble._fit.adam as adam  # noqa: E402
import nwensemble._fit.local_fit as local_fit  # noqa: E402
import nwensemble._fit.precision as precision  # noqa: E402
from nwensemble import (  # noqa: E402
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

MODELS = {
    "MultiHeadNW": MultiHeadNWRegressor,
    "NWAttention": NWAttentionRegressor,
    "ResidualStage": ResidualStageRegressor,
}


def float64(X, Y, sw, *, xp, n_rows=None):
    """Every loss in the rows' own dtype."""
    return X, Y, sw


VARIANTS = {
    "float64": lambda: mock.patch.object(adam, "loss_rows", float64),
    "float32": contextlib.nullcontext,
}


STATISTICS_VARIANTS = {
    "float64 sums": lambda: mock.patch.object(
        local_fit, "statistics_keys", lambda keys: keys
    ),
    "float32 sums": contextlib.nullcontext,
}


def from_rows_variants(first, second):
    """Fits with ``FLOAT32_LOSS_ROWS`` at ``first`` and at ``second``."""
    return {
        f"from {rows}": lambda rows=rows: mock.patch.object(
            precision, "FLOAT32_LOSS_ROWS", rows
        )
        for rows in (first, second)
    }


def evaluation_times(sizes, repeats):
    """Median seconds of one training evaluation in float64 and float32."""
    from threadpoolctl import threadpool_limits

    from nwensemble._fit.loo_loss import loo_loss_and_grad
    from nwensemble._shared.design import numbers_design
    from nwensemble._shared.kernels import KERNELS

    rng = np.random.default_rng(0)
    print(f"{'head_dim':>8}{'rows':>7}{'float64 ms':>12}{'float32 ms':>12}{'ratio':>7}")
    for d in (8, 16):
        for n in sizes:
            X = rng.standard_normal((n, d))
            W = 0.5 * rng.standard_normal((d, d))
            Y = rng.standard_normal((n, 1))
            sw = np.full(n, 1.0 / n)
            times = {np.float64: [], np.float32: []}
            spaces = {dtype: {} for dtype in times}
            with threadpool_limits(1, user_api="blas"):
                for _ in range(repeats + 1):  # the first round warms up
                    for dtype in times:
                        Wd, Xd, Yd, swd = (a.astype(dtype) for a in (W, X, Y, sw))
                        start = time.perf_counter()
                        loo_loss_and_grad(
                            Wd,
                            numbers_design(Xd),
                            Yd,
                            swd,
                            xp=np,
                            kernel=KERNELS["softmax"],
                            workspace=spaces[dtype],
                        )
                        times[dtype].append(time.perf_counter() - start)
            t64, t32 = (float(np.median(t[1:])) for t in times.values())
            print(
                f"{d:>8}{n:>7}{1e3 * t64:>12.2f}{1e3 * t32:>12.2f}{t64 / t32:>7.2f}",
                flush=True,
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="first folds to run")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--min-rows", type=int, default=5000)
    parser.add_argument(
        "--from-rows",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="compare FLOAT32_LOSS_ROWS = A with B instead",
    )
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="compare the leave-one-out statistics' sums in float64 and float32",
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    parser.add_argument(
        "--evaluations", action="store_true", help="time one evaluation per dtype"
    )
    parser.add_argument(
        "--sizes", nargs="*", type=int, default=[256, 512, 1024, 2048, 4096]
    )
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if args.evaluations:
        print(cpu_line())
        evaluation_times(args.sizes, args.repeats)
        return
    variants = VARIANTS
    if args.from_rows is not None:
        variants = from_rows_variants(*args.from_rows)
    elif args.statistics:
        variants = STATISTICS_VARIANTS
    first, second = variants
    print(cpu_line())
    w = max(11, len(first) + 2, len(second) + 2)
    print(
        f"{'set':<28}{'model':<15}{first:>{w}}{second:>{w}}{'ratio':>7}"
        f"{'fit s':>8}{'fit s':>8}"
    )
    ratios, speed = {m: [] for m in args.models}, {m: [] for m in args.models}
    models = {m: MODELS[m] for m in args.models}
    sets = numeric_sets(os.path.join(args.data, "data"))
    for name, model_name, rmse, fit_s in lever_runs(
        sets,
        models,
        variants,
        min_rows=args.min_rows,
        n_folds=args.folds,
        seeds=args.seeds,
    ):
        ratio = rmse[second] / rmse[first]
        ratios[model_name].append(ratio)
        speed[model_name].append(fit_s[first] / fit_s[second])
        print(
            f"{name:<28}{model_name:<15}{rmse[first]:>{w}.4g}{rmse[second]:>{w}.4g}"
            f"{ratio:>7.3f}{fit_s[first]:>8.2f}{fit_s[second]:>8.2f}",
            flush=True,
        )
    for model_name in args.models:
        if ratios[model_name]:
            print(
                f"{model_name}: RMSE {second} / {first} geometric mean "
                f"{geo(ratios[model_name]):.4f}; "
                f"fit time {first} / {second} median "
                f"{np.median(speed[model_name]):.2f}x"
            )


if __name__ == "__main__":
    main()
