"""A lever for issue 66, measured: the recommended start's members split
between the target and the target less a global ridge.

``ResidualStageRegressor()`` (``default``: where its first stage has
several members, ``LinearMembers``: ``ceil(k / 2)`` of the ``k`` members
fitted to ``y`` and ``floor(k / 2)`` to ``y - l(x)``, ``l`` a ridge on the
features, their mean the first stage's prediction with ``l`` added to the
second group's; one group alone where it predicts the training rows, left
out, clearly better than the mean) against, side by side on each split:

* ``all members on y``: ``ResidualStageRegressor(linear_members=False)``,
  every member fitted to ``y``, as before;
* ``shares by members``: always the members' mean, without the rule that
  hands one group all the weight;
* ``quadratic ridge``: the ridge's design with every product of two
  standardised numeric features beside its columns (squares included);
* ``hinge ridge``: the ridge's design with, for each numeric feature,
  hinges ``max(0, z - t)`` of its standardised value ``z`` at its training
  octiles ``t`` (an additive piecewise-linear trend);
* ``least loo``: one group alone wherever its leave-one-out error is below
  the mix's (the paired rule with no standard errors).

Tables of more than 2048 rows have one member and fit the same either
way. This is a measurement script: its variants patch the private
``_linear_members`` and ``_fit.linear_term`` modules.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_linear_members.py [--sections numeric]
[--sets ...] [--model-seed 0]``.
"""

import contextlib
import dataclasses
import functools
import os
import sys
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402
import numpy as np  # noqa: E402

from nwensemble import (
    ResidualStageRegressor,  # noqa: E402
    _linear_members,  # noqa: E402
)
from nwensemble._fit import linear_term  # noqa: E402
from nwensemble._fit.paired_rule import paired_gain_is_clear  # noqa: E402

VARIANTS = [
    "all members on y",
    "shares by members",
    "quadratic ridge",
    "hinge ridge",
    "least loo",
]

_LinearDesign = linear_term._Design
_linear_design = _LinearDesign.of


def _quadratic_design(design, encoded):
    """The ridge's design with the products of its standardised numeric
    columns (the first ``encoded.numeric.shape[1]``) beside it."""
    A = _linear_design(design, encoded)
    P = A[:, : encoded.numeric.shape[1]]
    i, j = np.triu_indices(P.shape[1])
    return np.concatenate([A, P[:, i] * P[:, j]], axis=1)


@dataclasses.dataclass(frozen=True, eq=False)
class _HingeDesign(_LinearDesign):
    """The ridge's design with hinges at each numeric feature's training
    octiles beside its columns."""

    knots: tuple = ()

    @classmethod
    def fit(cls, encoded, w, *, rng, raw):
        linear = _LinearDesign.fit(encoded, w, rng=rng, raw=raw)
        Z = _linear_design(linear, encoded)[:, : encoded.numeric.shape[1]]
        octiles = np.arange(1, 8) / 8
        knots = tuple(np.unique(np.quantile(z, octiles)) for z in Z.T)
        fields = {
            f.name: getattr(linear, f.name) for f in dataclasses.fields(_LinearDesign)
        }
        return cls(**fields, knots=knots)

    def of(self, encoded):
        A = _linear_design(self, encoded)
        hinges = [np.maximum(A[:, [j]] - t, 0.0) for j, t in enumerate(self.knots)]
        return np.concatenate([A, *hinges], axis=1)


def _patched(name):
    if name == "shares by members":
        return mock.patch.object(
            _linear_members, "_ONE_FIT_WHERE_CLEARLY_BETTER", False
        )
    if name == "quadratic ridge":
        return mock.patch.object(linear_term._Design, "of", _quadratic_design)
    if name == "hinge ridge":
        return mock.patch.object(linear_term, "_Design", _HingeDesign)
    if name == "least loo":
        return mock.patch.object(
            _linear_members,
            "paired_gain_is_clear",
            functools.partial(paired_gain_is_clear, standard_errors=0.0),
        )
    return contextlib.nullcontext()


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and each variant."""
    out = {}
    for name in ["default", *args.variants]:
        split = name != "all members on y"
        with _patched(name):
            start = time.perf_counter()
            model = table.fit_quietly(
                ResidualStageRegressor(linear_members=split, random_state=seed), X, y
            )
            out[name] = (model.predict(X_test), time.perf_counter() - start)
    return out


if __name__ == "__main__":
    table.main(table.parser(__doc__, VARIANTS), predictions)
