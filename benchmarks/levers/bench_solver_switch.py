"""A lever for issue 33, measured: where ``solver='auto'`` switches one head
from L-BFGS to Adam.

``_fit/solvers.py``'s ``AUTO_ADAM_ROWS`` (2048, where L-BFGS would start
on a subsample of 1024 rows; 10 000 before) is the number of rows above
which one head trains by Adam on minibatches, and
``AUTO_ADAM_ROWS_EMBEDDINGS`` (10 000) the same where some features are
embeddings (categorical features, missing values); one head that learns
feature slopes (``ResidualStageRegressor``'s stages) switches at
``AUTO_ADAM_ROWS_HEADS`` (4096) instead, which this script leaves (see
``bench_adam_rows.py``): its ``ResidualStage`` rows no longer move with
the switch it patches. This script fits
``--models`` with the library's switch and with it at ``--at`` rows (by
default 10 000) in turn on each fold, on the numeric tables of
``../shared/data`` whose training folds lie between the two (the folds of
``bench_accuracy.py``: by patient, by time block, shuffled elsewhere), once
per ``--seeds``; prints per table and model the mean test RMSE and median
fit time of each, and their ratio. ``--mixed`` runs
``bench_real_tables.py`` on ``wage`` and ``taxis_fare`` (the mixed tables
in that range), each model natively and behind the one-hot pipeline, with
the switches as they are (the native tables have embeddings, the one-hot
pipelines numbers only), with one head on L-BFGS up to 10 000 rows
whatever the features, and on Adam from 2048 rows whatever the features
(``--variants library lbfgs adam`` picks).

This is a measurement script: it patches the private solvers module.

Run: ``python benchmarks/levers/bench_solver_switch.py [--at 10000] [--seeds 0 1]
[--mixed [--variants library lbfgs adam]]``
"""

import argparse
import contextlib
import os
import sys
from unittest import mock

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import bench_real_tables  # noqa: E402
from _common import cpu_line, lever_runs  # noqa: E402
from bench_accuracy import numeric_sets  # noqa: E402

import nwensemble._fit.solvers as solvers  # noqa: E402
from nwensemble import NWAttentionRegressor, ResidualStageRegressor  # noqa: E402

MODELS = {"ResidualStage": ResidualStageRegressor, "NWAttention": NWAttentionRegressor}
# --mixed: one head's switch as it is, or the same for every table.
MIXED_VARIANTS = {
    "library": ("the switches as they are", contextlib.nullcontext),
    "lbfgs": (
        "one head on L-BFGS up to 10 000 rows on every table",
        lambda: mock.patch.object(solvers, "AUTO_ADAM_ROWS", 10_000),
    ),
    "adam": (
        "one head on Adam from 2048 rows on every table",
        lambda: mock.patch.object(solvers, "AUTO_ADAM_ROWS_EMBEDDINGS", 2048),
    ),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", type=int, default=None)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=list(MIXED_VARIANTS),
        choices=list(MIXED_VARIANTS),
    )
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    args = parser.parse_args()
    print(cpu_line())
    if args.mixed:
        for variant in args.variants:
            name, setting = MIXED_VARIANTS[variant]
            print(f"\n== {name}")
            with setting():
                bench_real_tables.main(
                    [
                        "--data",
                        os.path.join(args.data, "data", "mixed"),
                        "--sets",
                        "wage",
                        "taxis_fare",
                        "--models",
                        *args.models,
                        *(f"{m} one-hot" for m in args.models),
                        "HGB",
                        "--seeds",
                        str(len(args.seeds)),
                    ]
                )
        return
    at = 10_000 if args.at is None else args.at
    now = solvers.AUTO_ADAM_ROWS
    variants = {
        f"Adam above {now}": contextlib.nullcontext,
        f"Adam above {at}": lambda: mock.patch.object(solvers, "AUTO_ADAM_ROWS", at),
    }
    rule, other = variants
    lo, hi = sorted((now, at))
    sets = [
        s
        for s in numeric_sets(os.path.join(args.data, "data"))
        if lo < 0.8 * s[1].shape[0] <= hi
    ]
    models = {m: MODELS[m] for m in args.models}
    print(f"{'set':<28}{'model':<15}{rule:>22}{other:>22}{'ratio':>8}")
    for name, model_name, rmse, fit_s in lever_runs(
        sets, models, variants, min_rows=0, n_folds=5, seeds=args.seeds
    ):
        cells = [f"{rmse[v]:.5g} {fit_s[v]:5.2f} s" for v in (rule, other)]
        print(
            f"{name:<28}{model_name:<15}{cells[0]:>22}{cells[1]:>22}"
            f"{rmse[other] / rmse[rule]:>8.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
