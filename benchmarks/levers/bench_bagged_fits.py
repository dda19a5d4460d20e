"""A lever for issue 66, measured: the recommended start's fit repeated
with another seed and the two predictions averaged (bagging whole fits).

Against ``ResidualStageRegressor()`` (``default``: one fit), side by side
on each split, where its first stage has ``k`` members (tables with fewer
than four fit the default in every variant):

* ``bag half``: where ``k = 4``, the mean of two fits (seeds ``s`` and
  ``s + 1000``) of two members each (one on ``y``, one on ``y - l``): the
  same number of first-stage members as the default, and two of what they
  share (the first member's feature slopes, the readout's choice, the
  second stage); else the default;
* ``bag nocheck``: ``bag half`` with every start keeping its scales per
  direction wherever they lower its subsample's leave-one-out loss (the
  start's cross-fitted check of them patched out);
* ``bag full``: the mean of two default fits (twice the time), where
  ``k = 4``;
* ``two fits``: ``ResidualStageRegressor(n_fits=2)``, the library's form
  of ``bag full`` (its fits' random states drawn from the seed), where
  ``k = 4``.

The levers log's ``n_fits auto`` (``bag half``, the second fit taking the
first's verdicts of its starts' checks) was the library's code during its
round and went with the decision not to keep it.

This is a measurement script: it patches the private ``_residual_stage``
module's member count and the ``_fit.start`` module's check.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_bagged_fits.py [--sections numeric]
[--sets ...] [--model-seed 0] [--variants ...]``.
"""

import os
import sys
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402
import numpy as np  # noqa: E402

from nwensemble import ResidualStageRegressor, _residual_stage  # noqa: E402
from nwensemble._fit import start as _start  # noqa: E402
from nwensemble._fit.allocation import first_stage_members  # noqa: E402

VARIANTS = ["bag half", "bag nocheck", "bag full", "two fits"]

# Per variant: each fit's members for the default's k.
_MEMBERS = {
    "bag half": lambda k: k // 2,
    "bag nocheck": lambda k: k // 2,
    "bag full": lambda k: k,
}


def _bagged(name, X, y, X_test, seed):
    """The variant's test prediction: the mean of its two fits."""
    k = _MEMBERS[name](first_stage_members(len(y)))
    checks = _start._own_scales_generalise
    if name == "bag nocheck":
        checks = lambda *args, **kwargs: True  # noqa: E731
    with (
        mock.patch.object(_residual_stage, "first_stage_members", lambda n: k),
        mock.patch.object(_start, "_own_scales_generalise", checks),
    ):
        fits = [
            table.fit_quietly(ResidualStageRegressor(random_state=s), X, y)
            for s in (seed, seed + 1000)
        ]
    return np.mean([np.asarray(f.predict(X_test)).ravel() for f in fits], axis=0)


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and each variant."""
    start = time.perf_counter()
    model = table.fit_quietly(ResidualStageRegressor(random_state=seed), X, y)
    out = {"default": (model.predict(X_test), time.perf_counter() - start)}
    for name in args.variants:
        if first_stage_members(len(y)) < 4:
            out[name] = out["default"]
            continue
        start = time.perf_counter()
        if name == "two fits":
            model = ResidualStageRegressor(n_fits=2, random_state=seed)
            model = table.fit_quietly(model, X, y)
            out[name] = (model.predict(X_test), time.perf_counter() - start)
            continue
        out[name] = (_bagged(name, X, y, X_test, seed), time.perf_counter() - start)
    return out


if __name__ == "__main__":
    table.main(table.parser(__doc__, VARIANTS), predictions)
