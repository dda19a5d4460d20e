"""A lever for issue 66, measured: the recommended start on what a global
ridge leaves (``ResidualStageRegressor``'s ``linear_base``), and the
linear members' ridge with each warped feature also as it is.

The default, ``ResidualStageRegressor()``: no base; where its first stage
has several members (up to 4096 rows), half of them learn what a ridge
leaves (``linear_members``), the ridge's design the features' power
transform, each warped feature also as it is (clipped to its training
range), missing-value indicators and a column per level, its penalty by
exact leave-one-out error. Side by side on each split:

* ``before``: the linear members' ridge on the warped features alone
  (the start before it took the features as they are);
* ``linear base``: a ridge ``l`` fitted to ``y`` first on every table,
  every stage on ``y - l(x)``, ``l`` added to the prediction
  (``linear_base=True``);
* ``base where one member``: the base only where the first stage has one
  member (above 4096 rows; ``first_stage_members``), the default
  elsewhere;
* ``base, warped only``: ``linear base`` with both ridges on the warped
  features alone;
* ``base, one group``: ``linear base`` with ``linear_members=False`` (the
  first stage's members all on what the base leaves).

This is a measurement script: ``before`` and ``base, warped only`` patch
the private ``_residual_stage`` and ``_linear_members`` modules.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_linear_base.py [--sections numeric mixed]
[--sets ...] [--model-seed 0] [--variants ...]``.
"""

import contextlib
import os
import sys
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble import (  # noqa: E402
    ResidualStageRegressor,
    _linear_members,
    _residual_stage,
)
from nwensemble._fit.allocation import first_stage_members  # noqa: E402
from nwensemble._linear_members import ridge_of  # noqa: E402

VARIANTS = {
    "before": {},
    "linear base": {"linear_base": True},
    "base where one member": {},
    "base, warped only": {"linear_base": True},
    "base, one group": {"linear_base": True, "linear_members": False},
}


def _warped_only(*args, **kwargs):
    """``ridge_of`` on the warped features alone."""
    return ridge_of(*args, **{**kwargs, "raw": False})


@contextlib.contextmanager
def _ridges_warped_only():
    with (
        mock.patch.object(_residual_stage, "ridge_of", _warped_only),
        mock.patch.object(_linear_members, "ridge_of", _warped_only),
    ):
        yield


def _context(name):
    """What a variant's fit runs under."""
    if name in ("before", "base, warped only"):
        return _ridges_warped_only()
    return contextlib.nullcontext()


def _params(name, n_rows):
    """A variant's parameters on a table of ``n_rows`` training rows."""
    if name == "base where one member":
        return {"linear_base": first_stage_members(n_rows) == 1}
    return VARIANTS.get(name, {})


def predictions(X, y, X_test, seed, args):
    out = {}
    for name in ["default", *args.variants]:
        model = ResidualStageRegressor(**_params(name, len(y)), random_state=seed)
        with _context(name):
            start = time.perf_counter()
            table.fit_quietly(model, X, y)
            out[name] = (model.predict(X_test), time.perf_counter() - start)
    return out


if __name__ == "__main__":
    table.main(table.parser(__doc__, list(VARIANTS)), predictions)
