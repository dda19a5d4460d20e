"""A lever for issue 68, measured: the members after the first take its
start.

With members (the recommended start's first stage has four up to 1024
rows), each member searches its own start (``_fit/start.py``: a grid of
scales on its own subsample of at most 512 rows, a scale per direction
fitted by L-BFGS, and a check of those on four cross-fitted folds). This
script compares that with the later members taking the first member's
start (a patch on the engine's ``initial_projection``; each member still
holds its own rows out and trains from there), and with the later members
searching their own scales but taking the first member's answer to the
cross-fitted check: each of ``--models`` with
``random_state=0`` on the numeric tables of ``../shared/data`` with at
least ``--min-rows`` rows, the folds of ``bench_accuracy.py`` (its first
``--folds``): mean test RMSE and median fit time of each, the variants
side by side on each fold.

This is a measurement script: it patches the private engine module.

Run: ``python benchmarks/levers/bench_shared_start.py [--folds 5]
[--models ResidualStage] [--sets wine_quality_red ...]``
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
from bench_accuracy import geo, numeric_sets  # noqa: E402

import nwensemble._fit.engine as engine  # noqa: E402
import nwensemble._fit.start as start_module  # noqa: E402
from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    ResidualStageRegressor,
)

MODELS = {
    "ResidualStage": ResidualStageRegressor,
    "HeadAllocator": HeadAllocator,
    "MultiHeadNW": MultiHeadNWRegressor,
}


def shared_start():
    """A patch under which a start searched on the same rows as the last
    one (the same arrays: the next member of one fit) is the last one."""
    search = engine.initial_projection
    last = {}

    def initial_projection(config, previous, Xs, Ys, sw, scale_np, *, rng, xp):
        key = (Xs, Ys, sw, config)
        if "key" in last and all(a is b for a, b in zip(last["key"], key)):
            return last["start"]
        start = search(config, previous, Xs, Ys, sw, scale_np, rng=rng, xp=xp)
        last.update(key=key, start=start)
        return start

    return mock.patch.object(engine, "initial_projection", initial_projection)


def shared_check():
    """A patch under which the later members of a fit search their own
    scales but take the first member's answer to whether a scale per
    direction generalises (``_own_scales_generalise``, head by head)."""
    search, check = engine.initial_projection, start_module._own_scales_generalise
    state = {"key": None, "answers": [], "calls": 0}

    def own_scales_generalise(*args, **kwargs):
        i = state["calls"]
        state["calls"] += 1
        if i >= len(state["answers"]):
            state["answers"].append(check(*args, **kwargs))
        return state["answers"][i]

    def initial_projection(config, previous, Xs, Ys, sw, scale_np, *, rng, xp):
        key = (Xs, Ys, sw, config)
        if state["key"] is None or not all(a is b for a, b in zip(state["key"], key)):
            state.update(key=key, answers=[])
        state["calls"] = 0
        return search(config, previous, Xs, Ys, sw, scale_np, rng=rng, xp=xp)

    stack = contextlib.ExitStack()
    stack.enter_context(
        mock.patch.object(engine, "initial_projection", initial_projection)
    )
    stack.enter_context(
        mock.patch.object(start_module, "_own_scales_generalise", own_scales_generalise)
    )
    return stack


VARIANTS = {
    "own starts": contextlib.nullcontext,
    "shared start": shared_start,
    "shared check": shared_check,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="first folds to run")
    parser.add_argument("--min-rows", type=int, default=0)
    parser.add_argument("--models", nargs="*", default=["ResidualStage"])
    parser.add_argument("--sets", nargs="*", default=None)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    args = parser.parse_args()
    print(cpu_line())
    print(
        f"{'set':<28}{'model':<15}{'RMSE own':>10}{'shared start':>13}"
        f"{'shared check':>13}{'fit own s':>10}{'start s':>8}{'check s':>8}"
    )
    others = ("shared start", "shared check")
    ratios = {(m, v): [] for m in args.models for v in others}
    speeds = {(m, v): [] for m in args.models for v in others}
    models = {m: MODELS[m] for m in args.models}
    sets = numeric_sets(os.path.join(args.data, "data"))
    if args.sets:
        sets = (s for s in sets if s[0] in args.sets)
    for name, model_name, rmse, fit_s in lever_runs(
        sets, models, VARIANTS, min_rows=args.min_rows, n_folds=args.folds
    ):
        for v in others:
            ratios[model_name, v].append(rmse[v] / rmse["own starts"])
            speeds[model_name, v].append(fit_s["own starts"] / fit_s[v])
        print(
            f"{name:<28}{model_name:<15}{rmse['own starts']:>10.5g}"
            f"{rmse['shared start']:>13.5g}{rmse['shared check']:>13.5g}"
            f"{fit_s['own starts']:>10.2f}{fit_s['shared start']:>8.2f}"
            f"{fit_s['shared check']:>8.2f}",
            flush=True,
        )
    for (model_name, v), r in ratios.items():
        if r:
            r, s = np.array(r), np.array(speeds[model_name, v])
            print(
                f"{model_name}, {v}: RMSE / own starts', geometric mean "
                f"{geo(list(r)):.4f} (range {r.min():.3f}-"
                f"{r.max():.3f}); fit time own / {v} median {np.median(s):.2f}x"
            )


if __name__ == "__main__":
    main()
