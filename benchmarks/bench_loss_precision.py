"""A lever for issues 33 and 34, measured: the precision of the minibatch
(Adam) fit's losses.

A float64 fit on at least ``FLOAT32_LOSS_ROWS`` rows evaluates its
training and held-out losses in float32 (``_fit/precision.py``); the
parameters, Adam's state and the fitted model stay float64. This script
compares that with every loss in float64, on the numeric tables of
``../shared/data`` whose default fits take the Adam solver (at least
``--min-rows`` rows), with the folds of ``bench_accuracy.py`` (by patient,
by time block, shuffled elsewhere) and each of ``--models``: mean test
RMSE, its ratio float32 / float64 and the median fit time of each, the two
variants fitted in turn on each fold.

This is a measurement script: it patches the private Adam module.

Run: ``python benchmarks/bench_loss_precision.py [--folds 5]
[--models MultiHeadNW NWAttention] [--min-rows 5000]``
"""

import argparse
import contextlib
import os
import sys
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, lever_runs  # noqa: E402
from bench_accuracy import numeric_sets  # noqa: E402

import nwensemble._fit.adam as adam  # noqa: E402
from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor  # noqa: E402

MODELS = {"MultiHeadNW": MultiHeadNWRegressor, "NWAttention": NWAttentionRegressor}


def float64(X, Y, sw, *, xp, n_rows=None):
    """Every loss in the rows' own dtype."""
    return X, Y, sw


VARIANTS = {
    "float64": lambda: mock.patch.object(adam, "loss_rows", float64),
    "float32": contextlib.nullcontext,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="first folds to run")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--min-rows", type=int, default=5000)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    args = parser.parse_args()
    print(cpu_line())
    print(
        f"{'set':<28}{'model':<13}{'float64':>10}{'float32':>10}{'ratio':>7}"
        f"{'fit64 s':>9}{'fit32 s':>9}"
    )
    ratios, speed = {m: [] for m in args.models}, {m: [] for m in args.models}
    models = {m: MODELS[m] for m in args.models}
    sets = numeric_sets(os.path.join(args.data, "data"))
    for name, model_name, rmse, fit_s in lever_runs(
        sets, models, VARIANTS, min_rows=args.min_rows, n_folds=args.folds
    ):
        r64, r32 = rmse["float64"], rmse["float32"]
        t64, t32 = fit_s["float64"], fit_s["float32"]
        ratios[model_name].append(r32 / r64)
        speed[model_name].append(t64 / t32)
        print(
            f"{name:<28}{model_name:<13}{r64:>10.4g}{r32:>10.4g}"
            f"{r32 / r64:>7.3f}{t64:>9.2f}{t32:>9.2f}",
            flush=True,
        )
    for model_name in args.models:
        if ratios[model_name]:
            geo = float(np.exp(np.mean(np.log(ratios[model_name]))))
            print(
                f"{model_name}: RMSE float32 / float64 geometric mean {geo:.4f}; "
                f"fit time float64 / float32 median "
                f"{np.median(speed[model_name]):.2f}x"
            )


if __name__ == "__main__":
    main()
