"""Per-feature target maps: the binned means, their cross-fitting, the check
whether they pay, and the residual stage that feeds them to its stages."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from nwensemble import NWAttentionRegressor, ResidualStageRegressor
from nwensemble._fit.target_maps import (
    MAP_BINS,
    TargetMaps,
    cross_fitted_maps,
    maps_promise,
)


def _three_way(n, seed):
    """A jump of 2 where three features are all positive, a slope along a
    fourth, four noise features (``bench_interactions.py``'s three_way)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 8))
    f = 2.0 * np.all(X[:, :3] > 0, axis=1) + 0.5 * X[:, 3]
    return X, f + 0.3 * f.std() * rng.standard_normal(n), f


def _smooth(n, seed):
    """A smooth saddle of two features among five: each feature's mean
    target is the same all along it, so that its map holds only noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 5))
    f = 2.0 * X[:, 0] * X[:, 1]
    return X, f + 0.1 * rng.standard_normal(n), f


def test_maps_are_the_bins_weighted_means():
    x = np.array([0.0, 0.0, 1.0, 1.0, 2.0, np.nan])
    y = np.array([1.0, 3.0, 5.0, 7.0, 10.0, -4.0])
    sw = np.array([1.0, 1.0, 1.0, 3.0, 1.0, 1.0])
    maps = TargetMaps.fit(x[:, None], y[:, None], sw)
    assert_array_equal(maps.edges[0], [1.0, 2.0])
    # Bins: below 1, [1, 2), from 2 on, missing.
    assert_allclose(maps.means[0][:, 0], [2.0, 6.5, 10.0, -4.0])
    out = maps.transform(np.array([[-5.0], [1.5], [9.0], [np.nan]]))
    assert_allclose(out[:, 0], [2.0, 6.5, 10.0, -4.0])


def test_a_bin_without_training_rows_maps_to_the_overall_mean():
    x = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([1.0, 2.0, 3.0, 6.0])
    maps = TargetMaps.fit(x[:, None], y[:, None], np.ones(4))
    # No missing value was seen: its bin holds the overall mean.
    assert_allclose(maps.transform(np.array([[np.nan]])), [[3.0]])


def test_many_distinct_values_get_the_quantile_bins():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 2))
    maps = TargetMaps.fit(X, X[:, :1], np.ones(1000))
    assert [e.size for e in maps.edges] == [MAP_BINS - 1] * 2
    # Each output of each feature: one column per (feature, output).
    Y = np.column_stack([X[:, 0], -X[:, 0]])
    assert TargetMaps.fit(X, Y, np.ones(1000)).transform(X).shape == (1000, 4)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(10, 80),
    missing=st.floats(0.0, 0.5),
)
def test_maps_lie_within_the_targets_range(seed, n, missing):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    X[rng.uniform(size=X.shape) < missing] = np.nan
    y = rng.standard_normal((n, 1)) * 10
    M = cross_fitted_maps(X, y, rng.uniform(0.1, 1.0, n), rng=rng)
    assert np.all(np.isfinite(M))
    assert np.all(M >= y.min() - 1e-9) and np.all(M <= y.max() + 1e-9)


def test_a_training_rows_map_does_not_hold_its_own_target():
    X, y, _ = _three_way(200, 0)
    Y = y[:, None]
    M = cross_fitted_maps(X, Y, np.ones(200), rng=np.random.RandomState(0))
    Y2 = Y.copy()
    Y2[17] += 100.0
    M2 = cross_fitted_maps(X, Y2, np.ones(200), rng=np.random.RandomState(0))
    assert_array_equal(M[17], M2[17])
    assert not np.array_equal(M, M2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_maps_promise_where_the_target_jumps_not_where_it_is_smooth(seed):
    for problem, expected in ((_three_way, True), (_smooth, False)):
        X, y, _ = problem(1000, seed)
        Y, sw = y[:, None], np.ones(1000)
        rng = np.random.RandomState(seed)
        M = cross_fitted_maps(X, Y, sw, rng=rng)
        assert maps_promise(X, M, Y, sw, rng=rng) is expected


def test_the_recommended_start_takes_the_maps_where_the_target_jumps():
    # Without the feature slopes, which resolve much of the same steps (with
    # them the stages alone come near the maps here, and 'auto' keeps the
    # features alone).
    X, y, f = _three_way(1000, 0)
    X_test, _, f_test = _three_way(2000, 1)
    params = dict(feature_slopes=False, random_state=0)
    mapped = ResidualStageRegressor(target_maps="auto", **params).fit(X, y)
    alone = ResidualStageRegressor(target_maps=False, **params).fit(X, y)
    assert mapped.target_maps_ is not None and alone.target_maps_ is None
    # The stages see the features and a map of each.
    assert mapped.estimator_.n_features_in_ == 16
    rmse = [
        np.sqrt(np.mean((m.predict(X_test) - f_test) ** 2)) for m in (mapped, alone)
    ]
    assert rmse[0] < 0.8 * rmse[1]


def test_a_smooth_target_keeps_the_features_alone():
    X, y, _ = _smooth(600, 0)
    model = ResidualStageRegressor(target_maps="auto", random_state=0).fit(X, y)
    assert model.target_maps_ is None
    assert model.estimator_.n_features_in_ == 5


def test_prediction_is_the_sum_of_the_stages_on_the_mapped_rows():
    X, y, _ = _three_way(400, 0)
    model = ResidualStageRegressor(target_maps=True, random_state=0).fit(X, y)
    rows = np.hstack([X[:7], model.target_maps_.transform(X[:7])])
    expected = model.estimator_.predict(rows) + model.residual_estimator_.predict(rows)
    assert_allclose(model.predict(X[:7]), expected, rtol=1e-12)
    y_pred, bounds = model.predict_interval(X[:7])
    assert_allclose(y_pred, expected, rtol=1e-12)
    assert np.all(bounds[:, 0] <= y_pred) and np.all(y_pred <= bounds[:, 1])


def test_maps_of_a_frame_map_its_numeric_columns():
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame(
        {
            "kind": rng.choice(["a", "b", "c"], n).astype(object),
            "x1": rng.uniform(-1, 1, n),
            "x2": rng.uniform(-1, 1, n),
        }
    )
    X.loc[rng.uniform(size=n) < 0.1, "x1"] = np.nan
    y = (X["kind"] == "a") * 2.0 + (X["x2"] > 0) + rng.normal(0, 0.1, n)
    model = ResidualStageRegressor(target_maps=True, random_state=0).fit(X, y)
    assert [e.size for e in model.target_maps_.edges] == [MAP_BINS - 1] * 2
    assert list(model.estimator_.feature_names_in_) == [
        "kind",
        "x1",
        "x2",
        "target_map_0",
        "target_map_1",
    ]
    assert model.predict(X.iloc[:5]).shape == (5,)
    # The frame's column order and an unseen level: as the stages take them.
    unseen = X.iloc[:3].copy()
    unseen["kind"] = "z"
    assert np.all(np.isfinite(model.predict(unseen)))


def test_maps_under_every_namespace(ns):
    X, y, _ = _three_way(300, 0)
    with ns.context():
        model = ResidualStageRegressor(target_maps=True, random_state=0)
        model.fit(ns.asarray(X), ns.asarray(y))
        out = ns.check_output(model.predict(ns.asarray(X[:5])))
    reference = ResidualStageRegressor(target_maps=True, random_state=0).fit(X, y)
    assert_allclose(out, reference.predict(X[:5]), rtol=1e-5, atol=1e-8)


def test_auto_takes_no_maps_for_several_outputs():
    X, y, _ = _three_way(300, 0)
    Y = np.column_stack([y, -y])
    model = ResidualStageRegressor(target_maps="auto", random_state=0).fit(X, Y)
    assert model.target_maps_ is None
    forced = ResidualStageRegressor(target_maps=True, random_state=0).fit(X, Y)
    assert forced.estimator_.n_features_in_ == 8 + 16
    assert forced.predict(X[:4]).shape == (4, 2)


def test_zero_weight_rows_do_not_move_the_maps():
    X, y, _ = _three_way(300, 0)
    sw = np.ones(300)
    sw[:50] = 0.0
    y_moved = y.copy()
    y_moved[:50] += 50.0
    maps = [
        ResidualStageRegressor(target_maps=True, random_state=0)
        .fit(X, target, sample_weight=sw)
        .target_maps_
        for target in (y, y_moved)
    ]
    for a, b in zip(maps[0].means, maps[1].means):
        assert_allclose(a, b)
    # The training rows' cross-fitted maps: as if those rows were removed.
    Y = y[:, None]
    weighted = cross_fitted_maps(X, Y, sw, rng=np.random.RandomState(0))
    removed = cross_fitted_maps(X[50:], Y[50:], sw[50:], rng=np.random.RandomState(0))
    assert_allclose(weighted[50:], removed)


def test_a_mask_of_categorical_columns_is_extended_by_the_maps():
    rng = np.random.default_rng(0)
    n = 200
    X = np.column_stack([rng.integers(0, 3, n), rng.uniform(-1, 1, n)])
    y = X[:, 0] + (X[:, 1] > 0) + rng.normal(0, 0.1, n)
    first = NWAttentionRegressor(categorical_features=[True, False])
    model = ResidualStageRegressor(first, target_maps=True, random_state=0)
    model.fit(X, y)
    assert_array_equal(model.estimator_.categorical_features, [True, False, False])
    # The maps are of the numeric column alone; the user's stage is unchanged.
    assert len(model.target_maps_.edges) == 1
    assert first.categorical_features == [True, False]
    assert model.predict(X[:3]).shape == (3,)
