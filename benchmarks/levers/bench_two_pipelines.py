"""A lever for issue 66, measured: two whole pipelines of the recommended
start averaged, one on the target and one on what a ridge leaves.

Against ``ResidualStageRegressor()`` (``default``), side by side on each
split, where the default's first stage has several members (``k``):

* ``pipes linear``: the mean of ``ResidualStageRegressor(linear_members=
  False)`` on ``y`` and ``l(x)`` plus ``ResidualStageRegressor(
  linear_members=False)`` (another seed) on ``y - l(x)``, ``l`` the linear
  members' ridge (its in-sample fit), each pipeline with ``max(1, k // 2)``
  members and its own slopes, second and third stage;
* ``pipes four``: the same only where each pipeline keeps two members
  (``k = 4``), else the default;
* ``pipes one``: one member per pipeline;
* ``pipes hinge``: ``pipes linear`` with the ridge's hinges (see
  ``bench_linear_members.py``'s ``hinge ridge``).

Tables with one member fit the default in every variant. This is a
measurement script: it patches the private ``_residual_stage`` and
``_fit.linear_term`` modules.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_two_pipelines.py [--sections numeric]
[--sets ...] [--model-seed 0] [--variants ...]``.
"""

import os
import sys
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402
import bench_linear_members as designs  # noqa: E402
import numpy as np  # noqa: E402

from nwensemble import ResidualStageRegressor, _residual_stage  # noqa: E402
from nwensemble._fit import linear_term  # noqa: E402
from nwensemble._fit.allocation import first_stage_members  # noqa: E402
from nwensemble._shared.table import is_dataframe  # noqa: E402

VARIANTS = ["pipes linear", "pipes four", "pipes one", "pipes hinge"]


def _half(n):
    """Each pipeline's members: half the default's, at least one."""
    return max(1, first_stage_members(n) // 2)


# Per variant: the ridge's design, each pipeline's members for n rows, and
# the fewest default members at which the variant replaces the default.
_SETUP = {
    "pipes linear": (designs._LinearDesign, _half, 2),
    "pipes four": (designs._LinearDesign, _half, 4),
    "pipes one": (designs._LinearDesign, lambda n: 1, 2),
    "pipes hinge": (designs._HingeDesign, _half, 2),
}


def _pipelines(name, X, y, X_test, seed):
    """The variant's test prediction: the two pipelines' mean."""
    design, members, _ = _SETUP[name]
    y = np.asarray(y, dtype=float)
    frame = is_dataframe(X)
    with mock.patch.object(_residual_stage, "first_stage_members", members):
        on_y = table.fit_quietly(
            ResidualStageRegressor(linear_members=False, random_state=seed), X, y
        )
        with mock.patch.object(linear_term, "_Design", design):
            term, in_sample, _ = linear_term.LinearTerm.fit(
                X,
                y[:, None],
                np.ones(len(y)),
                categorical_features="from_dtype" if frame else None,
                table=frame,
                rng=np.random.RandomState(seed),
            )
        on_rest = table.fit_quietly(
            ResidualStageRegressor(linear_members=False, random_state=seed + 1000),
            X,
            y - in_sample[:, 0],
        )
    rest = np.asarray(on_rest.predict(X_test)).ravel() + term.predict(X_test)[:, 0]
    return 0.5 * np.asarray(on_y.predict(X_test)).ravel() + 0.5 * rest


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and each variant."""
    start = time.perf_counter()
    model = table.fit_quietly(ResidualStageRegressor(random_state=seed), X, y)
    out = {"default": (model.predict(X_test), time.perf_counter() - start)}
    k = first_stage_members(len(y))
    for name in args.variants:
        if k < _SETUP[name][2]:
            out[name] = out["default"]
            continue
        start = time.perf_counter()
        out[name] = (
            _pipelines(name, X, y, X_test, seed),
            time.perf_counter() - start,
        )
    return out


if __name__ == "__main__":
    table.main(table.parser(__doc__, VARIANTS), predictions)
