"""A lever for issues 33 and 34, measured: the heads' training passes on
threads.

The leave-one-out loss and gradient run each head's forward and backward
pass on the host's threads once its blocks hold at least
``THREADED_SCORES`` scores (``_fit/loo_loss.py``), with BLAS on one
thread. This script compares that with the passes in order (the threshold
set out of reach), each of ``--models`` with ``random_state=0`` on the
numeric tables of ``../shared/data`` with at least ``--min-rows`` rows, the
folds of ``bench_accuracy.py``: median fit time of each and their ratio,
and the mean test RMSE of each (the same where the fit takes Adam, whose
evaluations run on one BLAS thread either way; L-BFGS's may differ by
rounding, as its evaluations took two BLAS threads where that was faster).

This is a measurement script: it patches the private loss module.

Run: ``python benchmarks/levers/bench_head_threads.py [--folds 2] [--min-rows 1000]
[--models MultiHeadNW]``
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

from _common import cpu_line, lever_runs  # noqa: E402
from bench_accuracy import numeric_sets  # noqa: E402

import nwensemble._fit.loo_loss as loo_loss  # noqa: E402
from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor  # noqa: E402

MODELS = {"MultiHeadNW": MultiHeadNWRegressor, "NWAttention": NWAttentionRegressor}

VARIANTS = {
    "in order": lambda: mock.patch.object(loo_loss, "THREADED_SCORES", np.inf),
    "threads": contextlib.nullcontext,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=2, help="first folds to run")
    parser.add_argument("--min-rows", type=int, default=1000)
    parser.add_argument("--models", nargs="*", default=["MultiHeadNW"])
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    args = parser.parse_args()
    print(cpu_line())
    print(
        f"{'set':<28}{'model':<13}{'RMSE order':>11}{'RMSE thr':>11}"
        f"{'fit order s':>12}{'fit thr s':>10}{'ratio':>7}"
    )
    speed = {m: [] for m in args.models}
    models = {m: MODELS[m] for m in args.models}
    sets = numeric_sets(os.path.join(args.data, "data"))
    for name, model_name, rmse, fit_s in lever_runs(
        sets, models, VARIANTS, min_rows=args.min_rows, n_folds=args.folds
    ):
        t_order, t_threads = fit_s["in order"], fit_s["threads"]
        speed[model_name].append(t_order / t_threads)
        print(
            f"{name:<28}{model_name:<13}{rmse['in order']:>11.5g}"
            f"{rmse['threads']:>11.5g}{t_order:>12.2f}{t_threads:>10.2f}"
            f"{t_order / t_threads:>7.2f}",
            flush=True,
        )
    for model_name, ratios in speed.items():
        if ratios:
            print(
                f"{model_name}: fit time in order / on threads: median "
                f"{np.median(ratios):.2f}x, range {min(ratios):.2f}-"
                f"{max(ratios):.2f}x"
            )


if __name__ == "__main__":
    main()
