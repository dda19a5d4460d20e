"""A lever for issue 66, measured: the feature maps and the members of the
recommended start's first stage.

``ResidualStageRegressor()`` (``default``: where its first stage has
several members, ``LinearMembers``: ``ceil(k / 2)`` members on ``y``, the
first learning the feature slopes and the others fitted through them, and
``floor(k / 2)`` on ``y - l(x)`` through the same slopes, one map for the
stage) against, side by side on each split:

* ``own maps``: the group on ``y - l(x)`` learns its own slopes (two maps,
  one per group);
* ``two learners``: the group on ``y`` as fits of one member each, every
  one learning its own slopes (the group on ``y - l(x)`` as before);
* ``paired maps``: both groups as fits of one member each: the learners
  on ``y`` as in ``two learners``, and on ``y - l(x)`` a member through
  each learner's slopes (two fits of ``n_fits=2``'s halves inside one
  stage, one second stage);
* ``five``: where ``k`` is 4, five members: ``paired maps`` with a member
  through the first learner's slopes added to the group on ``y``
  (shares 3/5 and 2/5);
* ``one on y``: one member on ``y`` and ``k - 1`` on ``y - l(x)``.

What only whole fits averaged (the levers log's "Whole fits averaged")
was the draw of the slopes: these variants draw several maps within one
stage. Tables of more than 2048 rows have one member and fit the same
either way. This is a measurement script: its variants patch the private
``_linear_members`` module.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_member_maps.py [--sections numeric]
[--sets ...] [--model-seed 0]``.
"""

import contextlib
import os
import sys
from unittest import mock

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble import _linear_members  # noqa: E402
from nwensemble._shared.backend import to_host, to_numpy  # noqa: E402

VARIANTS = ["own maps", "two learners", "paired maps", "five", "one on y"]


class _MeanOfFits:
    """Fits of one member each, averaged: what ``LinearMembers`` reads of
    its first group (the predictions, the left-out predictions, the rows
    each held out and their residuals, and the first fit's slopes)."""

    def __init__(self, fits):
        self.fits = fits
        self.loo_prediction_ = np.mean(
            [to_numpy(f.loo_prediction_) for f in fits], axis=0
        )
        rows = [to_host(f.calibration_rows_) for f in fits]
        union = np.unique(np.concatenate(rows))
        values = [
            to_numpy(f.calibration_residuals_).reshape(r.shape[0], -1)
            for f, r in zip(fits, rows)
        ]
        mixed = _linear_members._on_rows(
            union, [(1.0, r, v) for r, v in zip(rows, values)]
        )
        like = to_numpy(fits[0].calibration_residuals_)
        self.calibration_rows_ = union
        self.calibration_residuals_ = mixed.reshape((-1,) + like.shape[1:])
        self.components_ = fits[0].components_
        self.n_features_in_ = fits[0].n_features_in_
        self._first_member = fits[0]._first_member

    def predict(self, X):
        return np.mean([to_numpy(f.predict(X)) for f in self.fits], axis=0)


def _learners(self, X, y):
    """The group on ``y`` as fits of one member each (the first with the
    estimator's own seed), each learning its own slopes; and the seeds
    drawn after them."""
    k = self.estimator.get_params()["n_members"]
    state = self.estimator.get_params()["random_state"]
    rng = check_random_state(state)
    rng.randint(np.iinfo(np.int32).max)  # the group on y - l(x) draws this one
    others = k - k // 2 - 1
    seeds = [state] + [rng.randint(np.iinfo(np.int32).max) for _ in range(others)]
    fits = [
        clone(self.estimator).set_params(n_members=1, random_state=seed).fit(X, y)
        for seed in seeds
    ]
    return fits, rng


class _ThroughEach:
    """The group on ``y - l(x)`` as fits of one member each, the i-th
    through the i-th learner's slopes (as many as there are learners; the
    group's members otherwise): posing as ``LinearMembers``' second clone."""

    def __init__(self, estimator, learners, rng):
        self.estimator, self.learners, self.rng = estimator, learners, rng

    def set_params(self, **params):
        self.estimator = self.estimator.set_params(**params)
        return self

    def fit(self, X, y, **fit_params):
        state = self.estimator.get_params()["random_state"]
        seeds = [state] + [
            self.rng.randint(np.iinfo(np.int32).max) for _ in self.learners[1:]
        ]
        fits = []
        for learner, seed in zip(self.learners, seeds):
            fit = clone(self.estimator).set_params(n_members=1, random_state=seed)
            fit._given_slopes = learner._first_member.slopes
            fits.append(fit.fit(X, y, **fit_params))
        group = _MeanOfFits(fits)
        self.predict = group.predict
        for name in ("loo_prediction_", "calibration_rows_", "calibration_residuals_"):
            setattr(self, name, getattr(group, name))
        return self


def _paired_maps_fit(self, X, y, sample_weight=None):
    """``LinearMembers.fit`` with both groups as fits of one member each:
    a learner of its own slopes per member on ``y``, and on ``y - l(x)`` a
    member through each learner's slopes."""
    learners, rng = _learners(self, X, y)
    through_each = lambda e: _ThroughEach(clone(e), learners, rng)  # noqa: E731
    cloned = _first_is(_MeanOfFits(learners), then=through_each)
    with mock.patch.object(_linear_members, "clone", cloned):
        return _ORIGINAL_FIT(self, X, y, sample_weight)


def _five_fit(self, X, y, sample_weight=None):
    """``LinearMembers.fit`` with five members: on ``y`` two learners of
    their own slopes and a member through the first one's; on ``y - l(x)``
    a member through each learner's slopes."""
    learners, rng = _learners(self, X, y)
    through = clone(self.estimator).set_params(
        n_members=1, random_state=rng.randint(np.iinfo(np.int32).max)
    )
    through._given_slopes = learners[0]._first_member.slopes
    on_y = _MeanOfFits([learners[0], through.fit(X, y), *learners[1:]])
    through_each = lambda e: _ThroughEach(clone(e), learners, rng)  # noqa: E731
    with (
        mock.patch.object(_linear_members, "clone", _first_is(on_y, then=through_each)),
        mock.patch.object(_linear_members, "_group_sizes", lambda k: (3, 2)),
    ):
        return _ORIGINAL_FIT(self, X, y, sample_weight)


def _two_learners_fit(self, X, y, sample_weight=None):
    """``LinearMembers.fit`` with the group on ``y`` as fits of one member
    each, every one learning its own slopes (the group on ``y - l(x)`` as
    before, through the first one's)."""
    fits, _ = _learners(self, X, y)
    with mock.patch.object(_linear_members, "clone", _first_is(_MeanOfFits(fits))):
        return _ORIGINAL_FIT(self, X, y, sample_weight)


def _first_is(group, then=clone):
    """``clone`` for ``LinearMembers.fit`` whose first call returns
    ``group`` (already fitted; its ``set_params`` ignored) and later ones
    ``then(estimator)``."""
    calls = []

    def cloned(estimator):
        calls.append(1)
        return _Fitted(group) if len(calls) == 1 else then(estimator)

    return cloned


class _Fitted:
    """``group`` posing as the first clone: ``set_params`` and ``fit`` do
    nothing, attributes read through."""

    def __init__(self, group):
        self._group = group

    def set_params(self, **params):
        return self

    def fit(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        return getattr(self._group, name)


_ORIGINAL_FIT = _linear_members.LinearMembers.fit


def _patched(name):
    if name == "own maps":
        return mock.patch.object(_linear_members, "_ONE_MAP_PER_STAGE", False)
    if name == "two learners":
        return mock.patch.object(
            _linear_members.LinearMembers, "fit", _two_learners_fit
        )
    if name == "paired maps":
        return mock.patch.object(_linear_members.LinearMembers, "fit", _paired_maps_fit)
    if name == "five":
        return mock.patch.object(_linear_members.LinearMembers, "fit", _five_fit)
    if name == "one on y":
        return mock.patch.object(_linear_members, "_group_sizes", lambda k: (1, k - 1))
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, _patched)
