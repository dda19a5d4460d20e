"""A lever for issues 32 and 33, measured: when one head keeps its
per-feature starting scales.

``NWAttentionRegressor()`` starts from the standardised features with one
common scale, then fits each feature's scale on the start's subsample (see
the user guide's "Start"). With few rows per feature those scales can lower
the leave-one-out loss of the rows they were fitted to and still predict new
rows worse than the common scale. The library keeps them only where they
also win by cross-fitting on the subsample (``_own_scales_generalise`` in
``_fit/start.py``, in ``_CROSS_FIT_FOLDS`` folds). This script compares, on
the same folds and seeds:

- ``loo only``: the scales kept wherever they lower the subsample's
  leave-one-out loss (the rule before);
- ``2 folds``: cross-fitted on halves;
- ``4 folds``: the library's rule.

Every variant draws the same random permutation for its folds, so the
variants differ only in the decision, not in the random rows that the rest of
the fit draws afterwards. Tables: the numeric tables of ``../shared/data`` up
to ``--max-rows`` rows and the mixed tables of ``../shared/data/mixed`` (read
as ``bench_real_tables.py`` reads them), ``KFold(5, shuffle=True,
random_state=seed)`` and ``random_state=seed`` for each of ``--seeds`` seeds;
the mean RMSE over seeds and folds, its ratio to ``loo only`` and the
geometric means.

This is a measurement script: it patches the private start module.

Run: ``python benchmarks/levers/bench_start_choice.py [--seeds 8] [--max-rows 5000]``
"""

import argparse
import glob
import os
import sys

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, cv_rmse  # noqa: E402

import nwensemble._fit.start as start  # noqa: E402
from nwensemble import NWAttentionRegressor  # noqa: E402

RULE = start._own_scales_generalise
FOLDS = start._CROSS_FIT_FOLDS


def loo_only(W, Xs, Ys, sw, *, kernel, rng, xp):
    """The rule before: keep the scales (after the same random draw)."""
    rng.permutation(Xs.shape[0])
    return True


VARIANTS = {"loo only": (loo_only, FOLDS), "2 folds": (RULE, 2), "4 folds": (RULE, 4)}


def tables(data, max_rows):
    for path in sorted(glob.glob(os.path.join(data, "*.csv"))):
        frame = pd.read_csv(path)
        if frame.shape[0] <= max_rows:
            y = frame.pop("target").to_numpy(float)
            yield os.path.basename(path)[:-4], frame.to_numpy(float), y
    for path in sorted(glob.glob(os.path.join(data, "mixed", "*.csv"))):
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
        y = frame.pop("target").to_numpy(float)
        yield os.path.basename(path)[:-4], frame, y


def mean_rmse(X, y, seeds):
    """Mean test RMSE over ``seeds`` shuffled 5-fold splits."""
    return float(
        np.mean(
            [
                cv_rmse(
                    lambda: NWAttentionRegressor(random_state=seed), X, y, seed=seed
                )
                for seed in range(seeds)
            ]
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--max-rows", type=int, default=5000)
    args = parser.parse_args()
    print(cpu_line())
    print(f"NWAttentionRegressor(), 5-fold x {args.seeds} seeds; mean RMSE (ratio)")
    print(f"{'table':<22}" + "".join(f"{name:>20}" for name in VARIANTS))
    ratios = {name: [] for name in VARIANTS}
    try:
        for name, X, y in tables(args.data, args.max_rows):
            line, base = f"{name:<22}", None
            for variant, (rule, folds) in VARIANTS.items():
                start._own_scales_generalise, start._CROSS_FIT_FOLDS = rule, folds
                value = mean_rmse(X, y, args.seeds)
                base = value if base is None else base
                ratios[variant].append(value / base)
                line += f"{value:>12.4f} ({value / base:5.3f})"
            print(line, flush=True)
    finally:
        start._own_scales_generalise, start._CROSS_FIT_FOLDS = RULE, FOLDS
    print(
        f"{'geometric mean':<22}"
        + "".join(f"{np.exp(np.mean(np.log(r))):>20.4f}" for r in ratios.values())
    )


if __name__ == "__main__":
    main()
