"""A lead for issue 66, measured: the stages' feature map, warped or
linear, and a check that chooses between them by the target.

The recommended start's stages map each skewed feature by a power
transform whose exponent the feature's own distribution chooses
(``standardize='power'``), whatever the target does along it. The
variants, side by side on each split:

* ``linear map``: every default stage with ``standardize=True`` (centred
  and scaled, no warp);
* ``check, lower``: at every fit of a stage's heads where the power
  transform warps some feature, both maps' starts (one head, a scale per
  feature, fitted by leave-one-out loss as the start fits them) fitted on
  three quarters of a random ``start._SCALE_SEARCH_SIZE`` of the rows
  predict the last quarter, in ``start._CROSS_FIT_FOLDS`` folds, the same
  rows under both maps; the linear map is taken where its rows' squared
  errors are lower. The fit's own draws stay as they were;
* ``check, clearly``: the same, the linear map taken only where its rows'
  squared errors are lower by the paired rule's two standard errors;
* ``once, lower`` and ``once, clearly``: the check asked once per fit of
  the start, by its first fit of heads (the first stage's, on every
  training row and the target), whose answer every later fit of heads in
  that fit of the start takes (the members on what the ridge leaves, the
  second stage).

Ratios are the variant's over the default's: below 1 where the variant
predicts better. This is a measurement script: it patches the stages'
``standardize`` and the fit of the heads (``fit_heads``).

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_feature_map.py [--sections numeric mixed]
[--sets ...] [--model-seed 0] [--repeats 1] [--variants ...]``.
"""

import contextlib
import copy
import functools
import os
import sys
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

import nwensemble._base as base  # noqa: E402
from nwensemble import ResidualStageRegressor  # noqa: E402
from nwensemble._fit import engine, start  # noqa: E402
from nwensemble._fit.early_stopping import heldout_residuals  # noqa: E402
from nwensemble._fit.paired_rule import paired_gain_is_clear  # noqa: E402
from nwensemble._shared.backend import to_numpy  # noqa: E402
from nwensemble._shared.features import fit_feature_map  # noqa: E402
from nwensemble._shared.rows import take_rows  # noqa: E402

VARIANTS = [
    "linear map",
    "check, lower",
    "check, clearly",
    "once, lower",
    "once, clearly",
]
_STAGE = ResidualStageRegressor._stage
_FIT_HEADS = engine.fit_heads


def _linear_stage(self, estimator, default):
    """A default stage with the linear map."""
    stage = _STAGE(self, estimator, default)
    if estimator is None:
        stage.set_params(standardize=True)
    return stage


def _start_errors(Xs, Ys, sw, folds, kernel, xp):
    """Each row's squared error, predicted from the other folds' rows
    through their fitted per-feature-scale start (one head)."""
    unit = start.at_unit_spread(np.eye(Xs.shape[1]), Xs, sw, xp=xp)
    unit_x = xp.asarray(unit, dtype=Xs.dtype)
    errors = []
    for k, fold in enumerate(folds):
        rest = np.sort(np.concatenate(folds[:k] + folds[k + 1 :]))
        train = take_rows(Xs, Ys, sw, rest, xp=xp)
        Xq, Yq, _ = take_rows(Xs, Ys, sw, np.sort(fold), xp=xp)
        _, _, own, _ = start.fold_scales(
            unit, unit_x, train, kernel=kernel, xp=xp, near=None
        )
        W = xp.asarray(unit * own[None, :], dtype=Xs.dtype)
        R = heldout_residuals(W, Xq, Yq, *train, kernel=kernel, n_heads=1)
        errors.append(to_numpy(xp.sum(R * R, axis=1)))
    return np.concatenate(errors)


def _linear_predicts_better(config, table_rows, encoder, Y, sw, rng, xp, clearly):
    """Whether the check takes the linear map (False where the power
    transform warps no feature)."""
    own = copy.deepcopy(rng)  # the fit's own draws stay as they were
    check_rng = np.random.default_rng(int(own.randint(2**31 - 1)))
    features, X_power = fit_feature_map(
        table_rows, encoder, sw, standardize="power", rng=own, xp=xp
    )
    if features.power is None or np.all(to_numpy(features.power[3]) == 1.0):
        return False
    _, X_linear = fit_feature_map(
        table_rows, encoder, sw, standardize=True, rng=own, xp=xp
    )
    Ys = engine.scaled_targets(Y, sw, xp=xp)
    n = X_power.shape[0]
    rows = np.sort(
        check_rng.choice(n, size=min(n, start._SCALE_SEARCH_SIZE), replace=False)
    )
    folds = np.array_split(check_rng.permutation(rows.size), start._CROSS_FIT_FOLDS)
    errors = []
    for X in (X_power, X_linear):
        Xr, Yr, swr = take_rows(X, Ys, sw, rows, xp=xp)
        errors.append(_start_errors(Xr, Yr, swr, folds, config.kernel, xp))
    if clearly:
        return paired_gain_is_clear(errors[0], errors[1], np.ones(rows.size))
    return float(np.mean(errors[1])) < float(np.mean(errors[0]))


def _checked_fit_heads(
    config, table_rows, encoder, Y, sw, *, clearly, answers=None, **kwargs
):
    """``fit_heads`` with the map the check takes; with ``answers`` (a
    list), the check's first answer is kept there and taken by every later
    call."""
    if config.standardize == "power" and kwargs["previous"] is None:
        if answers:
            linear = answers[0]
        else:
            linear = _linear_predicts_better(
                config, table_rows, encoder, Y, sw, kwargs["rng"], kwargs["xp"], clearly
            )
            if answers is not None:
                answers.append(linear)
        if linear:
            config = config.replace(standardize=True)
    return _FIT_HEADS(config, table_rows, encoder, Y, sw, **kwargs)


@contextlib.contextmanager
def _checked_once(clearly):
    """Within, each fit of the start asks the check once."""
    fit = ResidualStageRegressor.fit

    def fit_asking_once(self, *args, **kwargs):
        checked = functools.partial(_checked_fit_heads, clearly=clearly, answers=[])
        with mock.patch.object(base, "fit_heads", checked):
            return fit(self, *args, **kwargs)

    with mock.patch.object(ResidualStageRegressor, "fit", fit_asking_once):
        yield


def patches(name):
    """The context a variant's fit runs under."""
    if name == "linear map":
        return mock.patch.object(ResidualStageRegressor, "_stage", _linear_stage)
    if name in ("check, lower", "check, clearly"):
        checked = functools.partial(
            _checked_fit_heads, clearly=name == "check, clearly"
        )
        return mock.patch.object(base, "fit_heads", checked)
    if name in ("once, lower", "once, clearly"):
        return _checked_once(clearly=name == "once, clearly")
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, patches)
