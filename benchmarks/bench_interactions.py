"""Sharp interactions: synthetic tables whose target turns on two or three
features at once, where gradient-boosted trees are strongest.

Each problem draws ``--rows`` training rows and 5000 test rows from a
stated rule (``PROBLEMS``; the rules were written before any model was run
on them and are not tuned), adds noise of a stated share of the target's
spread to the training targets only (Gaussian; with ``--noise-kind t``
Student's t with two degrees of freedom scaled to the same interquartile
range, with ``rising`` Gaussian whose spread rises with the target from
zero to twice the share, ``NOISE``), and scores every model's
test RMSE against the noiseless target, over ``--seeds`` seeds (the data's
and the models' ``random_state``):

* ``xor``: the sign of ``x1`` times the sign of ``x2`` (a checkerboard of
  four quadrants), plus ``sin(pi x3)``; 8 features, 5 of them noise.
* ``gated_slope``: ``x2`` where ``x1 > 0.3``, ``-x2`` elsewhere, plus a step
  of 1 where ``x3 < -0.2``; 8 features.
* ``three_way``: 2 where ``x1``, ``x2`` and ``x3`` are all positive, plus
  ``0.5 x4``; 8 features.
* ``grid_cells``: location on a 4 x 4 grid over ``(x1, x2)``, each cell a
  level drawn once per seed from N(0, 1), plus ``0.3 x3``; 6 features.
* ``rush_hour``: ``x1`` an hour of the day (0-24) and ``x2`` a kind of day
  (0 or 1, one day in three a 1); on days of kind 0 two narrow peaks (one
  hour wide) at 8 and 17, on days of kind 1 one broad hump at 13; plus
  ``0.2 x3``; 5 features.

Features other than those named are uniform on [-1, 1] and carry nothing.
Models: ``ResidualStageRegressor()`` (the recommended start), those of
``--models`` (``HeadAllocator``, ``MultiHeadNW``, ``NWAttention``, with
their defaults; ``ResidualStage (fine slopes)``,
``ResidualStageRegressor(feature_slopes='fine')``),
``HistGradientBoostingRegressor()`` and, where installed
(the benchmark extra), ``CatBoostRegressor(random_seed=seed, verbose=0)``. Prints each
problem's mean test RMSE per model with its standard error over seeds,
and the recommended start's ratio to HistGradientBoosting's (the paired
geometric mean over seeds); issue 66 asks for at most 1 on every problem.

Run: ``python benchmarks/bench_interactions.py [--rows 2000] [--seeds 3]
[--noise 0.3] [--noise-kind gaussian] [--problems xor ...] [--models
HeadAllocator ...]``
"""

import argparse
import functools
import os
import sys
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, noiseless_scores, score_cells  # noqa: E402
from bench_accuracy import geo  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

# Ours beyond the recommended start, added with --models.
OURS = {
    "HeadAllocator": HeadAllocator,
    "MultiHeadNW": MultiHeadNWRegressor,
    "NWAttention": NWAttentionRegressor,
    "ResidualStage (fine slopes)": functools.partial(
        ResidualStageRegressor, feature_slopes="fine"
    ),
}


def _uniform(rng, n, p):
    return rng.uniform(-1.0, 1.0, (n, p))


def xor(rng, n, cells):
    X = _uniform(rng, n, 8)
    return X, np.sign(X[:, 0]) * np.sign(X[:, 1]) + np.sin(np.pi * X[:, 2])


def gated_slope(rng, n, cells):
    X = _uniform(rng, n, 8)
    slope = np.where(X[:, 0] > 0.3, X[:, 1], -X[:, 1])
    return X, slope + (X[:, 2] < -0.2)


def three_way(rng, n, cells):
    X = _uniform(rng, n, 8)
    return X, 2.0 * np.all(X[:, :3] > 0, axis=1) + 0.5 * X[:, 3]


def grid_cells(rng, n, cells):
    X = _uniform(rng, n, 6)
    i = np.minimum(((X[:, 0] + 1) * 2).astype(int), 3)
    j = np.minimum(((X[:, 1] + 1) * 2).astype(int), 3)
    return X, cells[i, j] + 0.3 * X[:, 2]


def rush_hour(rng, n, cells):
    X = _uniform(rng, n, 5)
    X[:, 0] = rng.uniform(0.0, 24.0, n)
    X[:, 1] = rng.uniform(size=n) < 1 / 3
    hour, weekend = X[:, 0], X[:, 1] > 0.5
    peaks = np.exp(-0.5 * (hour - 8) ** 2) + np.exp(-0.5 * (hour - 17) ** 2)
    hump = 0.8 * np.exp(-0.5 * ((hour - 13) / 3) ** 2)
    return X, np.where(weekend, hump, peaks) + 0.2 * X[:, 2]


PROBLEMS = {
    "xor": xor,
    "gated_slope": gated_slope,
    "three_way": three_way,
    "grid_cells": grid_cells,
    "rush_hour": rush_hour,
}


def draw(problem, n_train, n_test, noise, seed, kind="gaussian"):
    """``(X_train, y_train, X_test, y_test_noiseless)`` of one problem: the
    training targets with noise of ``noise`` times the noiseless targets'
    standard deviation, of the kind ``kind`` (see ``NOISE``)."""
    rng = np.random.default_rng(seed)
    cells = rng.standard_normal((4, 4))
    X, f = PROBLEMS[problem](rng, n_train + n_test, cells)
    y = f[:n_train] + noise * f.std() * NOISE[kind](rng, f[:n_train])
    return X[:n_train], y, X[n_train:], f[n_train:]


# The interquartile ranges of the standard normal (quartiles at +-0.6745)
# and of Student's t with two degrees of freedom (at +-sqrt(2/3)).
_NORMAL_IQR = 1.3489795003921634
_T2_IQR = 2.0 * np.sqrt(2.0 / 3.0)


def _student_t(rng, f):
    """Student's t with two degrees of freedom (heavy tails, no variance),
    scaled to the standard normal's interquartile range."""
    return rng.standard_t(2, f.shape[0]) * (_NORMAL_IQR / _T2_IQR)


def _rising(rng, f):
    """Gaussian, its spread rising linearly with the target from zero at
    its least to twice the level at its most."""
    rise = (f - f.min()) / max(float(np.ptp(f)), 1e-300)
    return 2.0 * rise * rng.standard_normal(f.shape[0])


# The kinds of training noise, each a function of the generator and the
# noiseless training targets, at unit level.
NOISE = {
    "gaussian": lambda rng, f: rng.standard_normal(f.shape[0]),
    "t": _student_t,
    "rising": _rising,
}


def models(seed, extra):
    out = {
        "ResidualStage": ResidualStageRegressor(random_state=seed),
        **{name: OURS[name](random_state=seed) for name in extra},
        "HistGB": HistGradientBoostingRegressor(random_state=seed),
    }
    try:
        from catboost import CatBoostRegressor
    except ImportError:
        return out
    out["CatBoost"] = CatBoostRegressor(random_seed=seed, verbose=0, thread_count=1)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--noise-kind", default="gaussian", choices=list(NOISE))
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--models", nargs="*", default=[], choices=list(OURS))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(cpu_line())
    print(
        f"{args.rows} training rows, {args.noise_kind} noise {args.noise} of the "
        "target's spread, "
        f"{args.seeds} seeds; test RMSE against the noiseless target"
    )
    for problem in args.problems:
        draws = (
            (seed, *draw(problem, args.rows, 5000, args.noise, seed, args.noise_kind))
            for seed in range(args.seeds)
        )
        rmse, fit_s = noiseless_scores(draws, lambda seed: models(seed, args.models))
        cells = score_cells(rmse, fit_s)
        ratio = geo(list(np.array(rmse["ResidualStage"]) / np.array(rmse["HistGB"])))
        print(f"{problem:<12} {cells}  ResidualStage / HistGB {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
