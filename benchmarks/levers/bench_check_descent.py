"""A lever for issue 68, measured: the cross-fitted check's common scales
found by a descent from the whole subsample's best scale instead of the
whole grid.

Each start with a scale per feature (``_fit/start.py``) checks those scales
on four cross-fitted folds, and each fold's complement searched the common
scale over the whole grid of 17 scales. The library now descends the
grid's losses from the whole subsample's best scale (``_best_scale``'s
``near``), which lands on the same scale wherever the loss has one minimum
over the grid. This script compares the two, side by side on each fold:
each of ``--models`` with ``random_state=0`` on the numeric tables of
``../shared/data`` with at least ``--min-rows`` rows, the folds of
``bench_accuracy.py`` (its first ``--folds``): mean test RMSE and median
fit time of each, with ``--mode avx2`` as an AVX2 machine runs it.

This is a measurement script: it patches the private start module.

Run: ``python benchmarks/levers/bench_check_descent.py [--folds 5]
[--models ResidualStage] [--sets concrete ...] [--mode native|avx2]``
"""

import argparse
import contextlib
import os
import sys
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import add_mode, apply_mode, cpu_line, lever_runs  # noqa: E402
from bench_accuracy import geo, numeric_sets  # noqa: E402


def whole_grid(start_module):
    """A patch under which every common scale is searched over the whole
    grid (the check's complements too)."""
    search = start_module._best_scale

    def best_scale(*args, near=None, **kwargs):
        return search(*args, **kwargs)

    return mock.patch.object(start_module, "_best_scale", best_scale)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="first folds to run")
    parser.add_argument("--min-rows", type=int, default=0)
    parser.add_argument("--models", nargs="*", default=["ResidualStage"])
    parser.add_argument("--sets", nargs="*", default=None)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    add_mode(parser)
    args = parser.parse_args()
    apply_mode(args)
    # After the mode's environment is set: numba compiles for it.
    import nwensemble
    import nwensemble._fit.start as start_module

    classes = {
        "ResidualStage": nwensemble.ResidualStageRegressor,
        "HeadAllocator": nwensemble.HeadAllocator,
        "MultiHeadNW": nwensemble.MultiHeadNWRegressor,
        "NWAttention": nwensemble.NWAttentionRegressor,
    }
    variants = {
        "whole grid": lambda: whole_grid(start_module),
        "descent": contextlib.nullcontext,
    }
    print(cpu_line())
    print(
        f"{'set':<28}{'model':<15}{'RMSE grid':>11}{'descent':>11}"
        f"{'fit grid s':>11}{'descent s':>10}"
    )
    ratios = {m: [] for m in args.models}
    speeds = {m: [] for m in args.models}
    models = {m: classes[m] for m in args.models}
    sets = numeric_sets(os.path.join(args.data, "data"))
    if args.sets:
        sets = (s for s in sets if s[0] in args.sets)
    for name, model_name, rmse, fit_s in lever_runs(
        sets, models, variants, min_rows=args.min_rows, n_folds=args.folds
    ):
        ratios[model_name].append(rmse["descent"] / rmse["whole grid"])
        speeds[model_name].append(fit_s["whole grid"] / fit_s["descent"])
        print(
            f"{name:<28}{model_name:<15}{rmse['whole grid']:>11.5g}"
            f"{rmse['descent']:>11.5g}{fit_s['whole grid']:>11.2f}"
            f"{fit_s['descent']:>10.2f}",
            flush=True,
        )
    for model_name, r in ratios.items():
        if r:
            r, s = np.array(r), np.array(speeds[model_name])
            print(
                f"{model_name}: RMSE descent / whole grid, geometric mean "
                f"{geo(list(r)):.4f} (range {r.min():.3f}-{r.max():.3f}); "
                f"fit time whole grid / descent median {np.median(s):.2f}x "
                f"(range {s.min():.2f}-{s.max():.2f})"
            )


if __name__ == "__main__":
    main()
