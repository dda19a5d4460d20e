"""Frames as they come against the one-hot pipeline a user would write,
where being missing says something about the target.

A synthetic frame (``draw``; its rule written before any model ran on it):
a string column ``kind`` of 8 levels, each level's effect drawn once per
seed from N(0, 1); three numeric columns uniform on [-1, 1], the target
``effect(kind) + sin(pi x1) + x2 x3``, Gaussian noise of 0.3 of the
noiseless target's spread on the training rows. ``x1`` is missing with
probability 0.5 where the noiseless target is above its median and 0.05
below (so that its being missing carries the target), ``kind`` with
probability 0.05 at random, in training and test rows alike.

Each model of ``--models`` (``NWAttention``, ``MultiHeadNW``,
``ResidualStage``, their defaults) is fitted on the frame natively and
behind ``bench_real_tables.one_hot`` (``SimpleImputer(add_indicator=True)``
for the numbers, a constant imputer and ``OneHotEncoder`` for the strings),
on ``--rows`` training rows, and scored by test RMSE against the
noiseless target on 5000 rows, over ``--seeds`` seeds (the data's and the
models' ``random_state``). Prints each model's RMSE both ways per seed and
the paired ratio native / one-hot (geometric mean over seeds); issue 66
asks that native input never lose to the pipeline.

Run: ``python benchmarks/bench_missing_signal.py [--rows 3000] [--seeds 3]
[--models NWAttention MultiHeadNW ResidualStage]``
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

from _common import cpu_line  # noqa: E402
from bench_accuracy import geo  # noqa: E402
from bench_real_tables import one_hot  # noqa: E402

from nwensemble import (  # noqa: E402
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

MODELS = {
    "NWAttention": NWAttentionRegressor,
    "MultiHeadNW": MultiHeadNWRegressor,
    "ResidualStage": ResidualStageRegressor,
}
N_TEST = 5000
LEVELS = 8


def draw(n_train, seed):
    """``(X_train, y_train, X_test, f_test)``: frames with missing cells,
    the noisy training targets and the noiseless test targets."""
    rng = np.random.default_rng(seed)
    n = n_train + N_TEST
    effect = rng.standard_normal(LEVELS)
    level = rng.integers(0, LEVELS, n)
    x = rng.uniform(-1.0, 1.0, (n, 3))
    f = effect[level] + np.sin(np.pi * x[:, 0]) + x[:, 1] * x[:, 2]
    high = f > np.median(f)
    x1 = np.where(rng.uniform(size=n) < np.where(high, 0.5, 0.05), np.nan, x[:, 0])
    kind = np.array([f"kind_{k}" for k in level], dtype=object)
    kind[rng.uniform(size=n) < 0.05] = None
    X = pd.DataFrame({"kind": kind, "x1": x1, "x2": x[:, 1], "x3": x[:, 2]})
    y = f[:n_train] + 0.3 * f.std() * rng.standard_normal(n_train)
    return X.iloc[:n_train], y, X.iloc[n_train:], f[n_train:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    print(cpu_line())
    print(f"{args.rows} training rows, {N_TEST} test rows, seeds 0-{args.seeds - 1}")
    print(f"{'model':<15}{'seed':>5}{'native':>10}{'one-hot':>10}{'ratio':>8}")
    for name in args.models:
        ratios = []
        for seed in range(args.seeds):
            X, y, X_test, f_test = draw(args.rows, seed)
            rmse = {}
            for way, model in (
                ("native", MODELS[name](random_state=seed)),
                ("one-hot", one_hot(MODELS[name](random_state=seed))),
            ):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.fit(X, y)
                err = np.asarray(model.predict(X_test)).reshape(-1) - f_test
                rmse[way] = float(np.sqrt(np.mean(err**2)))
            ratios.append(rmse["native"] / rmse["one-hot"])
            print(
                f"{name:<15}{seed:>5}{rmse['native']:>10.4f}{rmse['one-hot']:>10.4f}"
                f"{ratios[-1]:>8.3f}",
                flush=True,
            )
        print(f"{name}: native / one-hot, geometric mean over seeds {geo(ratios):.3f}")


if __name__ == "__main__":
    main()
