"""String columns of many levels, most of them rare: the recommended start
against CatBoost, whose ordered target statistics are built for them.

Each problem draws ``--rows`` training rows and 5000 test rows of a frame
(``draw``; the rules were written before any model was run on them and are
not tuned): a string column ``place`` of ``--levels`` levels whose
frequencies fall as one over their rank (Zipf's law, so that most levels
have a few rows and some none), a string column ``kind`` of 8 equally
frequent levels, and four standard normal numeric columns ``x0`` to
``x3``; each level's effect and slope drawn once per seed from N(0, 1).
Targets:

* ``levels``: ``effect(place) + sin(2 x0) + 0.5 x1 + 0.5 effect(kind)``;
* ``level_slopes``: ``effect(place) + slope(place) x0 + 0.5 x1`` where the
  kind's number is odd, ``+ 0.3 effect(kind)``;
* ``weak_levels``: ``levels`` with the place's effect at a fifth;
* ``no_levels``: ``levels`` without the place's effect (the column is
  noise).

Gaussian noise of ``--noise`` times the noiseless target's spread is added
to the training targets only, and every model's test RMSE is scored
against the noiseless target, over ``--seeds`` seeds (the data's and the
models' ``random_state``). Models: ``ResidualStageRegressor()`` and, where
installed (the benchmark extra), ``CatBoostRegressor(cat_features=...,
random_seed=seed, verbose=0)``; HistGradientBoosting's native categories
stop at 255 levels, so it is left out. Prints each problem's mean test
RMSE per model with its standard error over seeds, the median fit time and
the paired ratio of the recommended start's RMSE to CatBoost's (the
geometric mean over seeds).

Run: ``python benchmarks/bench_string_levels.py [--rows 2000] [--levels
400] [--seeds 3] [--noise 0.3] [--problems levels ...]``
"""

import argparse
import os
import sys
import warnings

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, noiseless_scores, score_cells  # noqa: E402
from bench_accuracy import geo  # noqa: E402

from nwensemble import ResidualStageRegressor  # noqa: E402

KINDS = 8


def _levels(x, place, kind, effect, slope, kind_effect):
    return effect[place] + np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + 0.5 * kind_effect[kind]


def _level_slopes(x, place, kind, effect, slope, kind_effect):
    gate = kind % 2 == 1
    return (
        effect[place]
        + slope[place] * x[:, 0]
        + 0.5 * x[:, 1] * gate
        + 0.3 * kind_effect[kind]
    )


def _weak_levels(x, place, kind, effect, slope, kind_effect):
    return _levels(x, place, kind, 0.2 * effect, slope, kind_effect)


def _no_levels(x, place, kind, effect, slope, kind_effect):
    return _levels(x, place, kind, 0.0 * effect, slope, kind_effect)


PROBLEMS = {
    "levels": _levels,
    "level_slopes": _level_slopes,
    "weak_levels": _weak_levels,
    "no_levels": _no_levels,
}


def draw(problem, n_train, n_test, n_levels, noise, seed):
    """``(X_train, y_train, X_test, y_test_noiseless)`` of one problem, the
    frames with the string columns ``place`` and ``kind``."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    share = 1.0 / np.arange(1, n_levels + 1)
    place = rng.choice(n_levels, size=n, p=share / share.sum())
    kind = rng.choice(KINDS, size=n)
    x = rng.standard_normal((n, 4))
    effect, slope = rng.standard_normal(n_levels), rng.standard_normal(n_levels)
    f = PROBLEMS[problem](x, place, kind, effect, slope, rng.standard_normal(KINDS))
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(4)])
    frame["place"] = np.array([f"place {k}" for k in place], dtype=object)
    frame["kind"] = np.array([f"kind {k}" for k in kind], dtype=object)
    y = f[:n_train] + noise * f.std() * rng.standard_normal(n_train)
    return frame.iloc[:n_train], y, frame.iloc[n_train:], f[n_train:]


def models(seed):
    out = {"ResidualStage": ResidualStageRegressor(random_state=seed)}
    try:
        from catboost import CatBoostRegressor
    except ImportError:
        return out
    out["CatBoost"] = CatBoostRegressor(
        cat_features=["place", "kind"], random_seed=seed, verbose=0
    )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--levels", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(cpu_line())
    print(
        f"{args.rows} training rows, a {args.levels}-level string column, "
        f"noise {args.noise} of the target's spread, {args.seeds} seeds; test "
        "RMSE against the noiseless target"
    )
    for problem in args.problems:
        draws = (
            (seed, *draw(problem, args.rows, 5000, args.levels, args.noise, seed))
            for seed in range(args.seeds)
        )
        rmse, fit_s = noiseless_scores(draws, models)
        cells = score_cells(rmse, fit_s)
        line = f"{problem:<13} {cells}"
        if "CatBoost" in rmse:
            ratio = geo(
                list(np.array(rmse["ResidualStage"]) / np.array(rmse["CatBoost"]))
            )
            line += f"  ResidualStage / CatBoost {ratio:.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
