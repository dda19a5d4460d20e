"""ResidualStageRegressor: the second stage learns the first's leave-one-out
residuals and the prediction adds the two."""

import pickle

import numpy as np
import pandas as pd
import pytest
from helpers import designed_rows
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nwensemble import (
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)
from nwensemble._fit.allocation import first_stage_members
from nwensemble._fit.series_lines import SeriesLines
from nwensemble._linear_members import LinearMembers, ridge_of
from nwensemble._residual_stage import OUTLYING, _sum_residuals, residual_weights
from nwensemble._shared.backend import to_numpy


def _steps_and_waves(n, seed):
    """A step, a line and a wave along separate features, and two noise
    features: effects that a neighbourhood along all of them averages."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 5))
    y = 4.0 * X[:, 0] + 3.0 * (X[:, 1] > 0.5) + np.sin(6 * X[:, 2]) + 0.5 * X[:, 3]
    return X, y


def test_prediction_is_the_sum_of_the_stages(friedman):
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    expected = model.estimator_.predict(X[:7]) + model.residual_estimator_.predict(
        X[:7]
    )
    assert_allclose(model.predict(X[:7]), expected, rtol=1e-12)


def test_the_second_stage_learns_the_first_stages_leave_one_out_residuals(friedman):
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    rows = to_numpy(model.residual_rows_)
    assert_allclose(rows, np.arange(len(y)))  # every row has its leave-one-out
    residuals = y - model.estimator_.loo_prediction_
    weights = residual_weights(residuals[rows], np.ones(len(rows), dtype=bool))
    again = clone(model.residual_estimator_).fit(
        X[rows], residuals[rows], sample_weight=weights
    )
    assert_allclose(
        again.predict(X[:5]), model.residual_estimator_.predict(X[:5]), rtol=1e-12
    )


def _member_fits(model):
    """The fits of ``model``'s first stage: both groups of linear members,
    else the stage itself."""
    first = model.estimator_
    return first.estimators_ if isinstance(first, LinearMembers) else (first,)


def test_the_default_first_stage_is_one_head_with_its_members(friedman, monkeypatch):
    """Split between the target and what a ridge leaves (``LinearMembers``)
    where there are several; all on the target with
    ``linear_members=False``."""
    X, y = friedman
    first = ResidualStageRegressor(random_state=0).fit(X, y).estimator_
    assert isinstance(first, LinearMembers)
    assert first_stage_members(len(y)) == 4
    for fit in first.estimators_:
        assert isinstance(fit, MultiHeadNWRegressor)
        assert fit.n_heads == 1 and fit.n_members == 2
        assert fit.components_.shape[0] == 2
        # No decomposition of the stage; a given first stage keeps its own.
        assert fit.bvc_resamples == 0 and fit.bvc_decomposition_ is None
    whole = ResidualStageRegressor(linear_members=False, random_state=0).fit(X, y)
    assert isinstance(whole.estimator_, MultiHeadNWRegressor)
    assert whole.estimator_.n_members == 4
    given = ResidualStageRegressor(MultiHeadNWRegressor(n_heads=2, max_iter=5))
    assert given.fit(X, y).estimator_.bvc_decomposition_ is not None
    # One member is a fit of NWAttentionRegressor's model.
    monkeypatch.setattr(
        "nwensemble._residual_stage.first_stage_members", lambda n_samples: 1
    )
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    single = NWAttentionRegressor(
        early_stopping=True, feature_slopes=True, random_state=0
    ).fit(X, y)
    assert_allclose(model.estimator_.predict(X[:9]), single.predict(X[:9]))


def test_the_first_stage_has_members_on_twice_the_allocators_rows():
    """Four members up to 2048 rows, then fewer, one above 4096 (the
    allocator's rule at 8192 rows)."""
    rows = (1, 2048, 2049, 2730, 2731, 4096, 4097)
    assert [first_stage_members(n) for n in rows] == [4, 4, 3, 3, 2, 2, 1]


def test_linear_members_fall_back_to_the_target_where_the_ridge_takes_an_effect():
    """A trend along three features and a sine along a fourth: the ridge
    takes the sine's linear part, and the members fitted to what it leaves
    see too little of the rest to learn it. The members fitted to ``y``
    alone then predict, as well as all four on ``y`` do."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(600, 5))
    f = 3 * X[:, 0] + 2 * X[:, 1] - X[:, 2] + np.sin(3 * X[:, 3])
    y = f + 0.3 * rng.normal(size=600)
    model = ResidualStageRegressor(random_state=0).fit(X[:200], y[:200])
    assert_allclose(model.estimator_.weights_, [1.0, 0.0])
    whole = ResidualStageRegressor(linear_members=False, random_state=0)
    whole.fit(X[:200], y[:200])
    errors = [
        np.sqrt(np.mean((m.predict(X[200:]) - f[200:]) ** 2)) for m in (model, whole)
    ]
    assert errors[0] < 1.05 * errors[1], errors


def _trend_along_a_skewed_feature(n, seed):
    """A fare-like target: straight along a long-tailed feature (which the
    power transform squashes), a wave along a second, and noise."""
    rng = np.random.default_rng(seed)
    X = np.c_[rng.lognormal(sigma=1.0, size=n), rng.uniform(size=n)]
    y = 2.0 * X[:, 0] + np.sin(6 * X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


def test_the_linear_base_only_where_asked(friedman):
    """No base by default; with ``linear_base=True`` one under every first
    stage, the default's linear members (on what the base leaves) and a
    given one alike."""
    X, y = friedman
    default = ResidualStageRegressor(random_state=0).fit(X, y)
    assert default.linear_base_ is None
    based = ResidualStageRegressor(linear_base=True, random_state=0).fit(X, y)
    assert based.linear_base_ is not None
    assert isinstance(based.estimator_, LinearMembers)
    given = ResidualStageRegressor(
        NWAttentionRegressor(max_iter=5), linear_base=True, random_state=0
    ).fit(X, y)
    assert given.linear_base_ is not None


def test_the_stages_learn_what_the_base_leaves_and_the_prediction_adds_it():
    X, y = _trend_along_a_skewed_feature(300, 0)
    model = ResidualStageRegressor(linear_base=True, random_state=0).fit(X, y)
    base = model.linear_base_.predict(X).ravel()
    stages = model.estimator_.predict(X) + model.residual_estimator_.predict(X)
    assert model.series_lines_ is None
    assert_allclose(model.predict(X), base + stages, rtol=1e-10)
    # The first stage learned y - l(x): its leave-one-out predictions
    # are of that, not of y.
    loo = to_numpy(model.estimator_.loo_prediction_)
    left = y - base
    assert np.corrcoef(loo, left)[0, 1] > 0.9
    assert abs(np.mean(loo - left)) < 0.1 * np.std(y)


def test_a_trend_straight_along_a_long_tailed_feature_is_the_bases():
    """The power transform folds the feature's tail, where a local average
    then spans very different targets; the base carries the trend there
    (queries within the training rows' range: beyond it the base's column
    of the feature as it is holds at its edge)."""
    X, y = _trend_along_a_skewed_feature(900, 1)
    train, test = slice(0, 600), slice(600, None)
    within = X[test, 0] <= X[train, 0].max()
    errors = {}
    for base in (False, True):
        model = ResidualStageRegressor(
            linear_base=base, linear_members=False, random_state=0
        )
        model.fit(X[train], y[train])
        error = (model.predict(X[test]) - y[test])[within]
        errors[base] = np.sqrt(np.mean(error**2))
    assert errors[True] < 0.8 * errors[False], errors


def test_intervals_with_a_linear_base_cover_new_rows():
    X, y = _trend_along_a_skewed_feature(1200, 2)
    model = ResidualStageRegressor(linear_base=True, random_state=0)
    model.fit(X[:600], y[:600])
    _, bounds = model.predict_interval(X[600:], confidence_level=0.8)
    covered = np.mean((y[600:] >= bounds[:, 0]) & (y[600:] <= bounds[:, 1]))
    assert 0.7 <= covered <= 0.9, covered


def test_intervals_take_the_bases_left_out_fit_of_each_calibrating_row():
    """The sum's residual on a calibrating row is the stages' one plus the
    ridge's in-sample fit less its fit without the row."""
    X, y = _trend_along_a_skewed_feature(300, 3)
    model = ResidualStageRegressor(linear_base=True, random_state=0).fit(X, y)
    _, in_sample, left_out = ridge_of(
        MultiHeadNWRegressor(), X, y[:, None], np.ones(300), rng=None
    )
    assert_allclose(model.linear_base_.predict(X), in_sample, rtol=1e-10)
    stages, positions = _sum_residuals(
        model.estimator_, model.residual_estimator_, to_numpy(model.residual_rows_)
    )
    rows = to_numpy(model.estimator_.calibration_rows_)[to_numpy(positions)]
    expected = to_numpy(stages) + (in_sample - left_out)[rows, 0]
    assert_allclose(to_numpy(model.interval_residuals_), expected, rtol=1e-10)


@pytest.mark.parametrize("value", ["auto", 1.5, None])
def test_linear_base_must_be_a_boolean(friedman, value):
    X, y = friedman
    with pytest.raises(ValueError, match="linear_base"):
        ResidualStageRegressor(linear_base=value).fit(X, y)


def test_linear_members_only_in_the_default_first_stage_with_members(
    friedman, monkeypatch
):
    X, y = friedman
    given = ResidualStageRegressor(
        MultiHeadNWRegressor(n_members=2, max_iter=5), random_state=0
    ).fit(X, y)
    assert isinstance(given.estimator_, MultiHeadNWRegressor)
    monkeypatch.setattr(
        "nwensemble._residual_stage.first_stage_members", lambda n_samples: 1
    )
    single = ResidualStageRegressor(random_state=0).fit(X, y)
    assert isinstance(single.estimator_, MultiHeadNWRegressor)
    assert single.estimator_.n_members == 1


@pytest.mark.parametrize("slopes", [False, True])
def test_feature_slopes_reach_the_default_stages_only(friedman, slopes):
    """``feature_slopes`` is the default stages' own; a given stage keeps
    its setting."""
    X, y = friedman
    model = ResidualStageRegressor(feature_slopes=slopes, random_state=0).fit(X, y)
    for stage in (*_member_fits(model), model.residual_estimator_):
        assert stage.feature_slopes is slopes
    first = _member_fits(model)[0]
    assert (first.predictor_.features.slopes is not None) is slopes
    given = ResidualStageRegressor(
        NWAttentionRegressor(max_iter=5),
        residual_estimator=NWAttentionRegressor(max_iter=5),
        feature_slopes=not slopes,
    ).fit(X, y)
    assert not given.estimator_.feature_slopes
    assert not given.residual_estimator_.feature_slopes


def test_fine_slopes_reach_both_default_stages(friedman):
    """``feature_slopes='fine'`` reaches both default stages; on a table
    whose stages L-BFGS fits it is ``True``."""
    X, y = friedman
    fine = ResidualStageRegressor(feature_slopes="fine", random_state=0).fit(X, y)
    for stage in (*_member_fits(fine), fine.residual_estimator_):
        assert stage.feature_slopes == "fine"
    coarse = ResidualStageRegressor(feature_slopes=True, random_state=0).fit(X, y)
    assert_allclose(fine.predict(X[:20]), coarse.predict(X[:20]))


def test_first_stage_heads_are_as_wide_as_the_rows_the_stage_sees(friedman):
    """Several heads in the default first stage: each as wide as its rows
    (the target maps' columns included), from the identity start, with the
    one head's members and slopes; a given first stage keeps its own."""
    X, y = friedman
    model = ResidualStageRegressor(first_stage_heads=2, random_state=0).fit(X, y)
    first, second = _member_fits(model)
    assert (first.n_heads, first.head_dim, first.init) == (2, X.shape[1], "identity")
    assert (second.n_heads, second.head_dim) == (2, X.shape[1])
    assert first.n_members + second.n_members == first_stage_members(X.shape[0])
    assert np.asarray(first.components_).shape == (
        2 * first.n_members,
        X.shape[1],
        X.shape[1],
    )
    metrics = [c.T @ c for c in np.asarray(first.components_)[:2]]
    assert np.abs(metrics[0] - metrics[1]).max() > 1e-3 * np.abs(metrics[0]).max()
    mapped = ResidualStageRegressor(
        first_stage_heads=2, target_maps=True, feature_slopes=False, random_state=0
    ).fit(X, y)
    assert _member_fits(mapped)[0].head_dim == 2 * X.shape[1]
    given = ResidualStageRegressor(
        NWAttentionRegressor(max_iter=5), first_stage_heads=3
    ).fit(X, y)
    assert isinstance(given.estimator_, NWAttentionRegressor)


def test_first_stage_heads_must_be_a_positive_integer(friedman):
    X, y = friedman
    with pytest.raises(ValueError, match="first_stage_heads"):
        ResidualStageRegressor(first_stage_heads=0).fit(X, y)


def test_a_given_first_stage_keeps_its_members(friedman):
    X, y = friedman
    first = NWAttentionRegressor(max_iter=20)
    model = ResidualStageRegressor(first, random_state=0).fit(X, y)
    assert isinstance(model.estimator_, NWAttentionRegressor)


def test_residual_weights_fall_beyond_three_robust_deviations():
    rng = np.random.default_rng(0)
    r = rng.normal(size=(201, 2))
    r[0, 1] = 40.0
    rows = np.ones(201, dtype=bool)
    w = residual_weights(r, rows)
    center = np.median(r, axis=0)
    spread = 1.4826 * np.median(np.abs(r - center), axis=0)
    d = np.max(np.abs(r - center) / spread, axis=1)
    assert_allclose(w, np.minimum(1.0, OUTLYING / d))
    assert w[0] == pytest.approx(OUTLYING * spread[1] / (40.0 - center[1]))
    assert np.all(w[d <= OUTLYING] == 1.0)
    # Rows outside the mask (zero sample weight) place neither centre nor spread.
    far = np.vstack([r, np.full((150, 2), 1e6)])
    mask = np.r_[rows, np.zeros(150, dtype=bool)]
    assert_allclose(residual_weights(far, mask)[:201], w)
    # Residuals without spread: no weights.
    assert_allclose(residual_weights(np.r_[np.zeros(9), 5.0], np.ones(10, bool)), 1.0)


def test_an_outlying_target_weighs_less_in_the_second_stage(friedman):
    X, y = friedman
    y = y.copy()
    y[3] += 100.0
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    residuals = y - model.estimator_.loo_prediction_
    weights = residual_weights(residuals, np.ones(len(y), dtype=bool))
    assert weights[3] < 0.1
    assert np.median(weights) == 1.0


def test_the_default_second_stage_stops_on_held_out_rows_and_reads_means(friedman):
    X, y = friedman
    second = ResidualStageRegressor(random_state=0).fit(X, y).residual_estimator_
    assert second.get_params()["early_stopping"] is True
    assert second.get_params()["local_fit"] == "constant"
    assert second.get_params()["duplicate_weight"] == 0.0
    assert len(second.calibration_rows_) < len(y)  # rows were held out


def test_the_second_stage_stays_within_the_residuals_range(friedman):
    """Weighted means of the residuals never leave their range."""
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    residuals = y - model.estimator_.loo_prediction_
    queries = np.random.default_rng(1).uniform(-1, 2, size=(300, X.shape[1]))
    added = model.residual_estimator_.predict(queries)
    assert added.min() >= residuals.min() - 1e-9
    assert added.max() <= residuals.max() + 1e-9


def test_effects_along_separate_features_are_added_back():
    """Over three draws, the second stage lowers the test error of one head
    on a noise-free sum of effects along separate features."""
    ratios = []
    for seed in range(3):
        X, y = _steps_and_waves(400, seed)
        X_test, y_test = _steps_and_waves(2000, seed + 100)
        one = NWAttentionRegressor(random_state=0).fit(X, y)
        two = ResidualStageRegressor(random_state=0).fit(X, y)
        ratios.append(
            np.sqrt(np.mean((two.predict(X_test) - y_test) ** 2))
            / np.sqrt(np.mean((one.predict(X_test) - y_test) ** 2))
        )
    assert np.mean(ratios) < 0.98


def test_random_state_reaches_both_stages_and_repeats_the_fit(friedman):
    X, y = friedman
    model = ResidualStageRegressor(MultiHeadNWRegressor(n_heads=2), random_state=3)
    first = model.fit(X, y).predict(X[:5])
    assert model.estimator_.random_state == 3
    assert model.residual_estimator_.random_state == 3
    assert_allclose(model.fit(X, y).predict(X[:5]), first, rtol=0, atol=0)


def test_rows_of_zero_weight_equal_their_removal(friedman):
    """Zero weights reach both stages, where they equal removal."""
    X, y = friedman
    sw = np.ones(len(y))
    sw[:20] = 0.0
    # Held-out rows are drawn among all rows: no early stopping here.
    stage = NWAttentionRegressor(head_dim=2, early_stopping=False, init="pca")
    model = ResidualStageRegressor(
        stage,
        residual_estimator=clone(stage).set_params(local_fit="constant"),
        random_state=0,
    )
    weighted = clone(model).fit(X, y, sample_weight=sw)
    removed = clone(model).fit(X[20:], y[20:])
    # The first stages agree to about 1e-7 (float32 losses), which the
    # second stage's fit to those residuals may amplify a little.
    assert_allclose(weighted.predict(X[:9]), removed.predict(X[:9]), rtol=1e-3)


def test_several_outputs(friedman):
    X, y = friedman
    Y = np.column_stack([y, -2.0 * y])
    model = ResidualStageRegressor(random_state=0).fit(X, Y)
    assert model.predict(X[:4]).shape == (4, 2)
    for method in ("jackknife+", "adaptive"):
        pred, bounds = model.predict_interval(X[:4], method=method)
        assert pred.shape == (4, 2) and bounds.shape == (4, 2, 2)
        assert np.all(bounds[..., 0] < pred) and np.all(pred < bounds[..., 1])


def test_intervals_add_a_quantile_of_the_sums_residuals_where_both_calibrate(
    friedman,
):
    """The sum's residual on a row that calibrates the first stage and that
    the second held out of its projection's fit: the first stage's
    residual there (its members that held the row out) less the second
    stage's left-out estimate."""
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    first, second = model.estimator_, model.residual_estimator_
    rows = first.calibration_rows_
    assert len(_member_fits(model)) == 2 and len(rows) < len(y)  # held rows out
    # The second stage learned every row's residual here (as the first
    # stage's leave-one-out predictions cover them all), and held some out.
    assert len(model.residual_rows_) == len(y)
    held = second.calibration_rows_
    assert 0 < len(held) < len(y)
    both = np.isin(rows, held)
    assert 0 < both.sum() < len(rows)
    # Not the residuals of the whole ensemble's leave-one-out predictions.
    loo_residuals = y[rows] - first.loo_prediction_[rows]
    assert not np.allclose(first.calibration_residuals_, loo_residuals)
    residuals = (first.calibration_residuals_ - second.loo_prediction_[rows])[both]
    assert_allclose(model.interval_residuals_, residuals, rtol=1e-12)
    pred, bounds = model.predict_interval(X[:6], confidence_level=0.8)
    n = len(residuals)
    k = int(np.floor(0.2 * (n + 1)))
    q = np.sort(np.abs(residuals))[n - k]
    assert_allclose(pred, model.predict(X[:6]), rtol=1e-12)
    assert_allclose(bounds, np.stack([pred - q, pred + q], axis=-1), rtol=1e-12)


def test_adaptive_intervals_scale_the_residuals_by_the_first_stages_local_error(
    friedman,
):
    """Each residual divided by the first stage's local error scale at its
    row, the quantile multiplied by that at the query."""
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    at_queries, at_rows = model.estimator_.local_error_scale(X[:6])
    # The first stage's calibration rows that the second held out.
    held = model.estimator_.calibration_rows_
    both = np.isin(held, model.residual_estimator_.calibration_rows_)
    assert len(model.interval_residuals_) == both.sum() < len(held)
    units = np.abs(model.interval_residuals_) / at_rows[both]
    n = len(units)
    k = int(np.floor(0.2 * (n + 1)))
    q = np.sort(units)[n - k]
    pred, bounds = model.predict_interval(
        X[:6], confidence_level=0.8, method="adaptive"
    )
    assert_allclose(pred, model.predict(X[:6]), rtol=1e-12)
    expected = np.stack([pred - q * at_queries, pred + q * at_queries], axis=-1)
    assert_allclose(bounds, expected, rtol=1e-12)


def test_adaptive_intervals_widen_where_the_noise_is_large():
    """The noise grows elevenfold along the first feature: the adaptive
    intervals follow it and cover about 90 % of new rows (over three
    draws), where one width for all covers the noisy end far less."""
    covered, gained = [], []
    for seed in range(3):
        rng = np.random.default_rng(seed)

        def draw(n):
            X = rng.uniform(size=(n, 3))
            noise = (0.2 + 2.0 * X[:, 0]) * rng.standard_normal(n)
            return X, 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 5 * X[:, 2] + noise

        X, y = draw(1000)
        X_new, y_new = draw(3000)
        model = ResidualStageRegressor(random_state=0).fit(X, y)
        noisy, quiet = X_new[:, 0] > 0.8, X_new[:, 0] < 0.2
        inside = {}
        for method in ("jackknife+", "adaptive"):
            _, bounds = model.predict_interval(X_new, method=method)
            inside[method] = (bounds[:, 0] <= y_new) & (y_new <= bounds[:, 1])
        width = bounds[:, 1] - bounds[:, 0]  # the adaptive intervals'
        assert width[noisy].mean() > 2 * width[quiet].mean()
        covered.append(inside["adaptive"].mean())
        gained.append(
            inside["adaptive"][noisy].mean() - inside["jackknife+"][noisy].mean()
        )
    assert 0.85 < np.mean(covered) < 0.95, covered
    assert np.mean(gained) > 0.05, gained
    with pytest.raises(ValueError, match="method must be one of"):
        model.predict_interval(X_new[:2], method="cv+")


@pytest.mark.slow
def test_intervals_cover_new_rows():
    """About 90 % of new targets fall in the 90 % intervals (three draws
    of 1000 rows, each calibrating on the rows that some member of the
    first stage and the second stage held out)."""
    from sklearn.datasets import make_friedman1

    covered = []
    for seed in range(3):
        X, y = make_friedman1(1000, noise=1.0, random_state=seed)
        X_new, y_new = make_friedman1(3000, noise=1.0, random_state=seed + 10)
        model = ResidualStageRegressor(random_state=seed).fit(X, y)
        _, bounds = model.predict_interval(X_new, confidence_level=0.9)
        covered.append(np.mean((bounds[:, 0] <= y_new) & (y_new <= bounds[:, 1])))
    assert 0.82 < np.mean(covered) < 0.97


def test_too_few_rows_for_the_confidence_give_infinite_bounds(friedman):
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match="bounds are infinite"):
        _, bounds = model.predict_interval(X[:3], confidence_level=0.999)
    assert np.all(np.isinf(bounds))
    with pytest.raises(ValueError, match="confidence_level"):
        model.predict_interval(X[:3], confidence_level=1.5)


def test_a_second_stage_without_leave_one_out_has_no_intervals(friedman):
    X, y = friedman
    model = ResidualStageRegressor(residual_estimator=Ridge()).fit(X, y)
    assert model.interval_residuals_ is None
    assert model.predict(X[:3]).shape == (3,)
    with pytest.raises(AttributeError, match="Ridge does not"):
        model.predict_interval(X[:3])


class _WithoutCalibration(NWAttentionRegressor):
    """A first stage with leave-one-out predictions but no calibration."""

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight=sample_weight)
        del self.calibration_residuals_
        return self


def test_a_first_stage_without_calibration_residuals_has_no_intervals(friedman):
    X, y = friedman
    model = ResidualStageRegressor(_WithoutCalibration(max_iter=5)).fit(X, y)
    assert model.interval_residuals_ is None
    with pytest.raises(
        AttributeError, match="_WithoutCalibration does not set calibration_residuals_"
    ):
        model.predict_interval(X[:3])


def test_a_second_stage_that_takes_no_weights_learns_every_row_alike(friedman):
    X, y = friedman
    second = make_pipeline(StandardScaler(), Ridge())
    model = ResidualStageRegressor(residual_estimator=second, random_state=0)
    model.fit(X, y)
    residuals = (y - model.estimator_.loo_prediction_)[model.residual_rows_]
    again = clone(second).fit(X[model.residual_rows_], residuals)
    assert_allclose(model.residual_estimator_.predict(X[:4]), again.predict(X[:4]))


def test_tables_with_strings_and_missing_values():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {
            "size": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue"], n),
        }
    )
    frame.loc[::9, "size"] = np.nan
    y = np.nan_to_num(frame["size"].to_numpy()) + (frame["colour"] == "red") * 2.0
    model = ResidualStageRegressor(random_state=0).fit(frame, y)
    assert list(model.feature_names_in_) == ["size", "colour"]
    unseen = pd.DataFrame({"size": [0.1, np.nan], "colour": ["red", "purple"]})
    assert np.isfinite(model.predict(unseen)).all()


def test_the_allocator_as_first_stage(friedman):
    X, y = friedman
    first = HeadAllocator(MultiHeadNWRegressor(max_iter=5), budget=4, n_members=1)
    model = ResidualStageRegressor(first, random_state=0).fit(X, y)
    assert model.estimator_.n_heads_ * model.estimator_.head_dim_ <= 4
    assert model.predict(X[:3]).shape == (3,)
    # The chosen model's calibration and local error scale serve the sum's.
    for method in ("jackknife+", "adaptive"):
        pred, bounds = model.predict_interval(X[:3], method=method)
        assert np.all(bounds[:, 0] < pred) and np.all(pred < bounds[:, 1])


def test_a_first_stage_without_leave_one_out_predictions_is_refused(friedman):
    X, y = friedman
    with pytest.raises(TypeError, match="loo_prediction_.*Ridge does not"):
        ResidualStageRegressor(Ridge()).fit(X, y)


@pytest.mark.parametrize("n_fits, linear_base", [(1, False), (2, False), (1, True)])
def test_same_fit_under_namespaces(ns, friedman, n_fits, linear_base):
    """NumPy and array_api_strict agree, one fit or the mean of several,
    on ``y`` or on what a linear base leaves; the rows stay in the input's
    namespace."""
    X, y = friedman
    kw = dict(
        estimator=NWAttentionRegressor(max_iter=20),
        n_fits=n_fits,
        linear_base=linear_base,
        random_state=0,
    )
    ref = ResidualStageRegressor(**kw).fit(X, y)
    with ns.context():
        model = ResidualStageRegressor(**kw).fit(ns.asarray(X), ns.asarray(y))
        pred = ns.check_output(model.predict(ns.asarray(X[:9])))
        rows = ns.check_output(model.residual_rows_)
        _, bounds = model.predict_interval(ns.asarray(X[:9]))
        bounds = ns.check_output(bounds)
        _, adaptive = model.predict_interval(ns.asarray(X[:9]), method="adaptive")
        adaptive = ns.check_output(adaptive)
    assert_allclose(pred, ref.predict(X[:9]), rtol=1e-9)
    assert_allclose(rows, ref.residual_rows_)
    assert_allclose(bounds, ref.predict_interval(X[:9])[1], rtol=1e-9)
    expected = ref.predict_interval(X[:9], method="adaptive")[1]
    assert_allclose(adaptive, expected, rtol=1e-9)


def test_verbose_announces_and_times_each_stage(capsys):
    X, y = _steps_and_waves(120, 0)
    ResidualStageRegressor(random_state=0, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    own = [line for line in lines if line.startswith("[ResidualStageRegressor]")]
    assert own[0].startswith("[ResidualStageRegressor] first stage: ")
    assert own[0].endswith("on 120 rows")
    second = "[ResidualStageRegressor] second stage: "
    assert any(line.startswith(second) for line in own)
    assert any("first stage: " in line and line.endswith("s") for line in own[1:])
    # The stages' own progress, with their names.
    assert any(line.startswith("[MultiHeadNWRegressor]") for line in lines)
    assert any(line.startswith("[NWAttentionRegressor]") for line in lines)
    ResidualStageRegressor(random_state=0).fit(X, y)
    assert capsys.readouterr().out == ""


def test_the_default_stages_hold_rows_out_from_fifty_rows():
    """Also where early_stopping='auto' would not (one head on two features
    has 80 rows at 20 per parameter): the intervals then calibrate on rows
    that neither stage's projection learned."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(300)
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    assert all(fit.early_stopping is True for fit in _member_fits(model))
    assert model.residual_estimator_.early_stopping is True
    assert len(model.estimator_.calibration_rows_) < 300
    assert len(model.interval_residuals_) < len(model.estimator_.calibration_rows_)
    small = ResidualStageRegressor(random_state=0).fit(X[:40], y[:40])
    assert all(fit.early_stopping == "auto" for fit in _member_fits(small))
    assert small.residual_estimator_.early_stopping == "auto"


def test_two_rows_fit_without_an_error_about_settings_never_given():
    model = ResidualStageRegressor(random_state=0).fit(np.eye(2), [0.0, 1.0])
    assert np.isfinite(model.predict(np.eye(2))).all()


def test_an_array_query_of_a_frame_fit_warns_once_about_feature_names():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"size": rng.normal(size=120), "colour": rng.choice(["a", "b", "c"], 120)}
    )
    y = frame["size"].to_numpy() + (frame["colour"] == "a")
    model = ResidualStageRegressor(random_state=0).fit(frame, y)
    with pytest.warns(UserWarning, match="feature names") as record:
        from_array = model.predict(frame.to_numpy()[:5])
    assert len(record) == 1
    assert_allclose(from_array, model.predict(frame.iloc[:5]))


def _kept_third_stage(monkeypatch):
    """The third stage kept wherever a member gains on its held-out rows
    (its standard-error rule waived), so that these data exercise it."""
    from nwensemble._fit import null_key

    monkeypatch.setattr(null_key, "_clear_gain", lambda change: True)


def test_the_third_stage_is_off_by_default(friedman):
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    assert model.third_stage_ is None
    with_third = ResidualStageRegressor(third_stage=True, random_state=0).fit(X, y)
    # The first two stages are fitted as without it.
    assert_allclose(
        with_third.residual_estimator_.predict(X[:5]),
        model.residual_estimator_.predict(X[:5]),
        rtol=1e-12,
    )


def test_a_kept_third_stage_adds_null_key_heads_in_the_first_heads_coordinates(
    friedman, monkeypatch
):
    _kept_third_stage(monkeypatch)
    X, y = friedman
    model = ResidualStageRegressor(third_stage=True, random_state=0).fit(X, y)
    heads = model.third_stage_
    assert heads is not None
    first, second = model.estimator_, model.residual_estimator_
    d = first.components_.shape[1]
    coordinates = first.transform(X[:7])[:, :d]
    third = heads.predict(coordinates, xp=np)[:, 0]
    expected = first.predict(X[:7]) + second.predict(X[:7]) + third
    assert_allclose(model.predict(X[:7]), expected, rtol=1e-12)
    assert np.any(third != 0)
    # Its keys are the second stage's rows; its values the sum's residuals.
    rows = model.residual_rows_
    residuals = y[rows] - first.loo_prediction_[rows] - second.loo_prediction_
    assert_allclose(heads.values[:, 0], residuals, rtol=1e-10)
    # The interval residuals take off its left-out estimates, at rows that
    # none of its members learned.
    plain = ResidualStageRegressor(random_state=0).fit(X, y)
    calibrating = first.calibration_rows_[model._interval_positions]
    left_out = heads.left_out(np.searchsorted(rows, calibrating), xp=np)[:, 0]
    assert_allclose(
        model.interval_residuals_, plain.interval_residuals_ - left_out, rtol=1e-10
    )


def test_a_kept_third_stage_under_namespaces_and_outputs(ns, friedman, monkeypatch):
    _kept_third_stage(monkeypatch)
    X, y = friedman
    Y = np.column_stack([y, -2.0 * y])
    kw = dict(
        estimator=NWAttentionRegressor(max_iter=20), third_stage=True, random_state=0
    )
    ref, pred, bounds = _fits_under(ns, kw, X, Y)
    assert ref.third_stage_ is not None
    assert pred.shape == (9, 2)
    assert_allclose(pred, ref.predict(X[:9]), rtol=1e-7)
    assert_allclose(bounds, ref.predict_interval(X[:9])[1], rtol=1e-7)


def _fits_under(ns, kw, X, y):
    """``ResidualStageRegressor(**kw)`` fitted on NumPy rows and under the
    namespace ``ns``: the NumPy fit, and the other's predictions and
    intervals at the first nine rows (checked to be in ``ns``)."""
    ref = ResidualStageRegressor(**kw).fit(X, y)
    with ns.context():
        model = ResidualStageRegressor(**kw).fit(ns.asarray(X), ns.asarray(y))
        pred = ns.check_output(model.predict(ns.asarray(X[:9])))
        _, bounds = model.predict_interval(ns.asarray(X[:9]))
        bounds = ns.check_output(bounds)
    return ref, pred, bounds


def test_several_fits_predict_their_mean(friedman):
    """Whole fits, each of every stage with its own random state (drawn
    from the given one, whatever a given stage's own); the attributes are
    the first fit's."""
    X, y = friedman
    model = ResidualStageRegressor(n_fits=2, random_state=0).fit(X, y)
    assert len(model.fits_) == 2
    seeds = [fit.random_state for fit in model.fits_]
    assert seeds[0] != seeds[1]
    for fit in model.fits_:
        assert fit.n_fits == 1 and fit.fits_ is None
        # Each fit is the default: its members as one fit's.
        members = [m.n_members for m in fit.estimator_.estimators_]
        assert sum(members) == first_stage_members(len(y))
    assert model.estimator_ is model.fits_[0].estimator_
    assert model.residual_estimator_ is model.fits_[0].residual_estimator_
    assert model.interval_residuals_ is model.fits_[0].interval_residuals_
    parts = [fit.predict(X[:7]) for fit in model.fits_]
    assert_allclose(model.predict(X[:7]), np.mean(parts, axis=0), rtol=1e-12)
    assert np.abs(parts[0] - parts[1]).max() > 1e-6
    again = ResidualStageRegressor(n_fits=2, random_state=0).fit(X, y)
    assert_allclose(again.predict(X[:7]), model.predict(X[:7]), rtol=1e-12)
    assert ResidualStageRegressor(random_state=0).fit(X, y).fits_ is None
    given = NWAttentionRegressor(max_iter=5, random_state=3)
    bagged = ResidualStageRegressor(given, n_fits=3, random_state=0).fit(X, y)
    states = [fit.estimator_.random_state for fit in bagged.fits_]
    assert len(set(states)) == 3 and 3 not in states


def test_several_fits_pickle(friedman):
    X, y = friedman
    model = ResidualStageRegressor(n_fits=2, random_state=0).fit(X, y)
    loaded = pickle.loads(pickle.dumps(model))
    assert len(loaded.fits_) == 2
    assert_allclose(loaded.predict(X[:5]), model.predict(X[:5]), rtol=1e-12)


def test_intervals_of_several_fits_pool_their_residuals(friedman):
    """Every fit's interval residuals calibrate the fits' mean, in both
    methods."""
    X, y = friedman
    model = ResidualStageRegressor(n_fits=2, random_state=0).fit(X, y)
    fits = model.fits_
    residuals = np.concatenate([fit.interval_residuals_ for fit in fits])
    n = len(residuals)
    k = int(np.floor(0.2 * (n + 1)))
    q = np.sort(np.abs(residuals))[n - k]
    pred, bounds = model.predict_interval(X[:6], confidence_level=0.8)
    assert_allclose(pred, model.predict(X[:6]), rtol=1e-12)
    assert_allclose(bounds, np.stack([pred - q, pred + q], axis=-1), rtol=1e-12)
    units, at_queries = [], []
    for fit in fits:
        at_query, at_rows = fit.estimator_.local_error_scale(X[:6])
        positions = fit._interval_positions
        units.append(np.abs(fit.interval_residuals_) / at_rows[positions])
        at_queries.append(at_query)
    q = np.sort(np.concatenate(units))[n - k]
    scale = np.mean(at_queries, axis=0)
    pred, bounds = model.predict_interval(
        X[:6], confidence_level=0.8, method="adaptive"
    )
    expected = np.stack([pred - q * scale, pred + q * scale], axis=-1)
    assert_allclose(bounds, expected, rtol=1e-12)


def test_several_fits_take_frames_with_strings_and_missing_values():
    rng = np.random.default_rng(0)
    n = 150
    X = pd.DataFrame(
        {
            "size": np.where(rng.uniform(size=n) < 0.1, np.nan, rng.uniform(size=n)),
            "kind": rng.choice(["a", "b", "c"], size=n),
        }
    )
    y = X["size"].fillna(0.5).to_numpy() + (X["kind"] == "b") + 0.1 * rng.normal(size=n)
    model = ResidualStageRegressor(n_fits=2, random_state=0).fit(X, y)
    parts = [fit.predict(X[:5]) for fit in model.fits_]
    assert_allclose(model.predict(X[:5]), np.mean(parts, axis=0), rtol=1e-12)
    assert list(model.feature_names_in_) == ["size", "kind"]
    with pytest.raises(ValueError, match="feature"):
        model.predict(X[["kind", "size"]].rename(columns={"kind": "other"}))


def test_verbose_announces_each_fit(capsys):
    X, y = _steps_and_waves(120, 0)
    ResidualStageRegressor(n_fits=2, random_state=0, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    own = [line for line in lines if line.startswith("[ResidualStageRegressor] fit ")]
    assert own == [
        "[ResidualStageRegressor] fit 1 of 2",
        "[ResidualStageRegressor] fit 2 of 2",
    ]


@pytest.mark.parametrize("n_fits", [0, -1, "two", 1.5, "auto"])
def test_n_fits_rejects_what_is_not_a_positive_count(friedman, n_fits):
    X, y = friedman
    with pytest.raises(ValueError, match="n_fits"):
        ResidualStageRegressor(n_fits=n_fits).fit(X, y)


def _designed_table(n_settings=50, seed=0):
    """A designed experiment: settings of two continuous factors, each
    measured at a few of five ages, the target growing with the log of the
    age at a rate of the setting's own that the factors do not tell (a
    series along the age per setting)."""
    rng = np.random.default_rng(seed)
    settings = rng.uniform(size=(n_settings, 2))
    rates = rng.uniform(1.0, 3.0, size=n_settings)
    setting, age = designed_rows(rng, n_settings)
    X = np.column_stack([settings[setting], age])
    y = rates[setting] * np.log(age)
    return X, y + 0.1 * rng.standard_normal(len(y))


def test_series_lines_move_the_sum_towards_a_querys_series():
    X, y = _designed_table()
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    series = model.series_lines_
    assert series is not None and series.columns == (2,)
    assert 0.0 < series.weight[0] <= 1.0
    total = np.asarray(model._sum(X)).reshape(-1, 1)
    expected = series.adjust(X, total)[:, 0]
    assert_allclose(model.predict(X), expected, rtol=1e-12)
    # Without the lines: the stages' sum, the same stages.
    plain = ResidualStageRegressor(series_lines=False, random_state=0).fit(X, y)
    assert plain.series_lines_ is None
    assert_allclose(plain.predict(X), total[:, 0], rtol=1e-12)
    # A new setting has no series: the sum alone.
    new = np.array([[0.5, 0.5, 7.0], [0.3, 0.9, 2.0]])
    assert_allclose(model.predict(new), plain.predict(new), rtol=1e-12)


def test_a_table_without_series_is_predicted_as_without_lines(friedman):
    X, y = friedman
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    plain = ResidualStageRegressor(series_lines=False, random_state=0).fit(X, y)
    assert model.series_lines_ is None
    assert_allclose(model.predict(X[:9]), plain.predict(X[:9]), rtol=1e-12)
    assert_allclose(model.interval_residuals_, plain.interval_residuals_, rtol=1e-12)


def test_the_lines_weigh_against_the_sums_leave_one_out_and_move_its_residuals():
    """The weight: least squares of the sum's leave-one-out residuals on the
    rows' left-out lines' gaps from it; the interval residuals: those of
    the sum moved towards the left-out lines."""
    X, y = _designed_table()
    model = ResidualStageRegressor(random_state=0).fit(X, y)
    plain = ResidualStageRegressor(series_lines=False, random_state=0).fit(X, y)
    rows = to_numpy(model.residual_rows_)
    fitted = np.full((len(y), 1), np.nan)
    fitted[rows, 0] = model.estimator_.loo_prediction_[rows]
    fitted[rows, 0] += model.residual_estimator_.loo_prediction_
    series, left_out = SeriesLines.fit(
        X,
        y[:, None],
        np.ones(len(y)),
        fitted,
        categorical_features=None,
        table=False,
        rng=np.random.RandomState(0),
    )
    assert_allclose(series.weight, model.series_lines_.weight, rtol=1e-12)
    calibrating = to_numpy(model.estimator_.calibration_rows_)[
        to_numpy(model._interval_positions)
    ]
    before = to_numpy(plain.interval_residuals_)
    sum_loo = y[calibrating] - before
    moved = series.moved(left_out[calibrating], sum_loo[:, None])[:, 0]
    assert_allclose(model.interval_residuals_, y[calibrating] - moved, rtol=1e-12)
    assert np.any(np.abs(moved - sum_loo) > 1e-6)


@pytest.mark.parametrize("n_fits", [1, 2])
def test_series_lines_under_namespaces(ns, n_fits):
    X, y = _designed_table(n_settings=30)
    kw = dict(
        estimator=NWAttentionRegressor(max_iter=20), n_fits=n_fits, random_state=0
    )
    ref, pred, bounds = _fits_under(ns, kw, X, y)
    assert ref.series_lines_ is not None
    assert_allclose(pred, ref.predict(X[:9]), rtol=1e-9)
    assert_allclose(bounds, ref.predict_interval(X[:9])[1], rtol=1e-9)


def test_series_lines_of_a_frame_with_levels_and_missing_values():
    X, y = _designed_table()
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "a": X[:, 0],
            "kind": np.where(X[:, 1] > 0.5, "high", "low"),
            "age": X[:, 2],
        }
    )
    frame.loc[rng.uniform(size=len(y)) < 0.05, "a"] = np.nan
    model = ResidualStageRegressor(random_state=0).fit(frame, y)
    assert model.series_lines_ is not None
    assert 1 in model.series_lines_.columns  # the age, among the numbers
    assert np.isfinite(model.predict(frame.iloc[:20])).all()
    pred, bounds = model.predict_interval(frame.iloc[:20])
    assert np.all(bounds[:, 0] <= pred) and np.all(pred <= bounds[:, 1])


@pytest.mark.parametrize("value", [0, 1, "yes", None])
def test_series_lines_must_be_a_boolean(friedman, value):
    X, y = friedman
    with pytest.raises(ValueError, match="series_lines"):
        ResidualStageRegressor(series_lines=value).fit(X, y)
