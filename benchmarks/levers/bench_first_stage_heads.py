"""A lever for issue 66, measured: two heads in the recommended start's
first stage instead of one.

``ResidualStageRegressor()`` (``default``: one head with members) against
the same start with a first stage of two heads as wide as the input
(``ResidualStageRegressor(first_stage_heads=2)``:
``MultiHeadNWRegressor(n_heads=2, head_dim=n_features, init='identity')``
with the default first stage's members, early stopping and feature
slopes), side by side on each split:

* ``two heads``: that first stage. Both heads start from the identity with
  the scales the start fits per feature; the second is then nudged off the
  first (the start's ``_nudged_repeats``: identical heads would stay
  identical), so the fit can move them apart;
* ``two heads, half the members``: the same with half the default first
  stage's members (at least one), about as many heads in all as the
  default's;
* ``one or two, chosen``: of the two fits, the one whose sum predicts its
  calibrating rows (``interval_residuals_``: rows held out of the
  projections' fits) with the lower mean squared error; its seconds are
  both fits'.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_first_stage_heads.py [--sections numeric]
[--sets ...] [--model-seed 0]``.
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble import MultiHeadNWRegressor, ResidualStageRegressor  # noqa: E402
from nwensemble._fit.allocation import first_stage_members  # noqa: E402

VARIANTS = ["two heads", "two heads, half the members", "one or two, chosen"]


def _two_heads_half_the_members(seed, X):
    """``first_stage_heads=2``'s first stage with half the default members
    (at least one), built by hand (for at least 50 rows)."""
    first = MultiHeadNWRegressor(
        n_heads=2,
        head_dim=X.shape[1],
        init="identity",
        bvc_resamples=0,
        n_members=max(1, first_stage_members(X.shape[0]) // 2),
        early_stopping=True,
        feature_slopes=True,
    )
    return ResidualStageRegressor(first, random_state=seed)


def _calibration_mse(model):
    return float(np.mean(np.asarray(model.interval_residuals_) ** 2))


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and each variant."""
    fits = {}
    models = [
        ("default", ResidualStageRegressor(random_state=seed)),
        ("two heads", ResidualStageRegressor(first_stage_heads=2, random_state=seed)),
    ]
    if "two heads, half the members" in args.variants:
        models.append(
            ("two heads, half the members", _two_heads_half_the_members(seed, X))
        )
    for name, model in models:
        start = time.perf_counter()
        model = table.fit_quietly(model, X, y)
        fits[name] = (model, time.perf_counter() - start)
    out = {name: (model.predict(X_test), s) for name, (model, s) in fits.items()}
    pair = ["default", "two heads"]
    chosen = min(pair, key=lambda name: _calibration_mse(fits[name][0]))
    both = sum(fits[name][1] for name in pair)
    out["one or two, chosen"] = (out[chosen][0], both)
    return {name: out[name] for name in ["default", *args.variants]}


def main():
    table.main(table.parser(__doc__, VARIANTS), predictions)


if __name__ == "__main__":
    main()
