"""A lever for issue 66, measured: the feature slopes learned within Adam's
minibatch steps instead of a continuation after its fit.

``ResidualStageRegressor()`` (``default``) against the same start with the
slopes learned as before (``continued after Adam``: where a stage's head is
fitted by Adam, above 2048 rows for one head, its fit runs without slopes
and the slopes are then continued from it with L-BFGS on at most 4096 of
its rows, as where L-BFGS fits the head), side by side on each split.
Stages that L-BFGS fits are the same in both. The sections, folds and
lines are ``_variant_table.py``'s; ``--rows 5000`` takes the synthetic
problems onto Adam's side of the switch. Run:
``python benchmarks/levers/bench_adam_slopes.py [--sections numeric]
[--sets ...] [--model-seed 0] [--rows 2000]``.
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble._fit.feature_slopes import JointSlopes  # noqa: E402

VARIANTS = ["continued after Adam"]


@contextlib.contextmanager
def _continued_after_adam():
    """Within, Adam learns no slopes, so the engine continues its fit."""
    on = vars(JointSlopes)["on"]
    JointSlopes.on = classmethod(lambda cls, X, sw, *, xp: None)
    try:
        yield
    finally:
        JointSlopes.on = on


def _patches(name):
    """The variant's patch, as a context."""
    return _continued_after_adam() if name != "default" else contextlib.nullcontext()


def main():
    table.main_patched(__doc__, VARIANTS, _patches)


if __name__ == "__main__":
    main()
