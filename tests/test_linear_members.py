"""LinearMembers: a fit's members split between the target and the target
less a global ridge."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone

from nwensemble import MultiHeadNWRegressor, _linear_members
from nwensemble._fit.linear_term import LinearTerm
from nwensemble._linear_members import LinearMembers, _weights


def _members(n_members, **kw):
    return MultiHeadNWRegressor(
        n_heads=1,
        n_members=n_members,
        bvc_resamples=0,
        early_stopping=True,
        feature_slopes=True,
        random_state=0,
        **kw,
    )


def _ridge_of(X, y):
    """The stage's ridge fitted on its own: ``(term, in_sample, left_out)``."""
    return LinearTerm.fit(
        X,
        y[:, None],
        np.ones(len(y)),
        categorical_features=None,
        table=False,
        rng=np.random.RandomState(0),
    )


@pytest.fixture
def fitted(friedman):
    X, y = friedman
    return LinearMembers(_members(4)).fit(X, y)


def test_the_prediction_mixes_the_fits_with_the_ridge_added(fitted, friedman):
    X, y = friedman
    first, second = fitted.estimators_
    assert first.n_members == second.n_members == 2
    a, b = fitted.weights_
    assert (a, b) == (0.5, 0.5)  # neither group alone clearly better
    linear = fitted.linear_term_.predict(X[:7])[:, 0]
    expected = a * first.predict(X[:7]) + b * (linear + second.predict(X[:7]))
    assert_allclose(fitted.predict(X[:7]), expected, rtol=1e-12)


def test_one_fit_takes_all_the_weight_only_where_clearly_better():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(200, 1))
    sw = np.ones(200)
    members = np.array([0.5, 0.5])
    good = y + 0.3 * rng.normal(size=(200, 1))
    also_good = y + 0.3 * rng.normal(size=(200, 1))
    # Two fits that err alike and apart: the mean.
    assert_allclose(_weights(good, also_good, y, sw, members), members)
    # A second fit that predicts nothing: the first alone; and the reverse.
    assert_allclose(_weights(good, np.zeros_like(y), y, sw, members), [1.0, 0.0])
    assert_allclose(_weights(np.zeros_like(y), good, y, sw, members), [0.0, 1.0])
    # Rows of zero weight take no part.
    assert_allclose(
        _weights(good, np.zeros_like(y), y, np.r_[np.ones(2), np.zeros(198)], members),
        members,
    )


def test_the_second_group_learns_what_the_ridge_leaves(fitted, friedman):
    """The second fit is fitted to ``y - l(x)``; the stage's leave-one-out
    estimates add the ridge fitted without the row to its."""
    X, y = friedman
    first, second = fitted.estimators_
    term, in_sample, left_out = _ridge_of(X, y)
    assert_allclose(fitted.linear_term_.predict(X), in_sample, rtol=1e-12)
    again = clone(second)
    again._given_slopes = first._first_member.slopes
    again.fit(X, y - in_sample[:, 0])
    assert_allclose(again.predict(X[:5]), second.predict(X[:5]), rtol=1e-12)
    a, b = fitted.weights_
    expected = a * first.loo_prediction_ + b * (left_out[:, 0] + second.loo_prediction_)
    assert_allclose(fitted.loo_prediction_, expected, rtol=1e-12)
    assert not np.allclose(left_out, in_sample)


def test_a_lone_second_member_starts_from_the_first_ones_projection(friedman):
    """Where each group has one member, the second is fitted from the first
    one's projection (through its slopes) rather than a start of its own."""
    X, y = friedman
    stage = LinearMembers(_members(2)).fit(X, y)
    first, second = stage.estimators_
    _, in_sample, _ = _ridge_of(X, y)
    fits = []
    for start in (first._first_member.solver.W, None):
        again = clone(second)
        again._given_slopes = first._first_member.slopes
        if start is not None:
            again._given_start = start
        fits.append(again.fit(X, y - in_sample[:, 0]).predict(X[:5]))
    assert_allclose(fits[0], second.predict(X[:5]), rtol=1e-12)
    assert not np.allclose(fits[1], fits[0])


def test_the_second_group_acts_through_the_first_groups_slopes(fitted):
    first, second = fitted.estimators_
    slopes = first.predictor_.features.slopes
    assert slopes is not None
    assert second.predictor_.features.slopes is slopes


@pytest.mark.parametrize("n_members", [2, 4])
def test_both_groups_encode_the_levels_as_the_first_does(n_members):
    """Which levels have codes of their own depends on the targets, and the
    second group learns other targets: it takes the first group's encoding
    (a lone second member starts from the first's projection, a row per
    code)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    place = np.concatenate([np.repeat(np.arange(30), 2), rng.integers(30, 34, 140)])
    effect = rng.standard_normal(34)
    X = pd.DataFrame(
        {"x": rng.standard_normal(place.size), "place": [f"p{k}" for k in place]}
    )
    y = 3 * effect[place] + X["x"].to_numpy() + 0.1 * rng.standard_normal(place.size)
    stage = LinearMembers(_members(n_members, max_iter=20)).fit(X, y)
    first, second = stage.estimators_
    assert second.predictor_.features.encoder is first.predictor_.features.encoder
    assert len(first.categories_[0]) == 34
    assert np.all(np.isfinite(stage.predict(X)))


def test_calibration_rows_take_each_row_from_the_fits_that_held_it_out(
    fitted, friedman
):
    X, y = friedman
    first, second = fitted.estimators_
    rows_a, rows_b = first.calibration_rows_, second.calibration_rows_
    union = np.union1d(rows_a, rows_b)
    assert_allclose(fitted.calibration_rows_, union)
    assert len(union) > max(len(rows_a), len(rows_b))  # each drew its own
    _, in_sample, left_out = _ridge_of(X, y)
    linear, loo_linear = in_sample[:, 0], left_out[:, 0]
    a = dict(zip(rows_a, first.calibration_residuals_))
    b = dict(zip(rows_b, second.calibration_residuals_ + (linear - loo_linear)[rows_b]))
    weights = fitted.weights_
    for row, residual in zip(fitted.calibration_rows_, fitted.calibration_residuals_):
        parts = [(w, part[row]) for w, part in zip(weights, (a, b)) if row in part]
        mixed = sum(w * v for w, v in parts) / sum(w for w, _ in parts)
        assert residual == pytest.approx(mixed, rel=1e-12, abs=1e-12)
    at_queries, at_rows = fitted.local_error_scale(X[:5])
    assert at_queries.shape == (5,) and at_rows.shape == union.shape
    assert np.all(at_rows > 0)


def test_an_odd_number_of_members_gives_the_target_the_larger_group(friedman):
    X, y = friedman
    model = LinearMembers(_members(3, max_iter=5)).fit(X, y)
    first, second = model.estimators_
    assert (first.n_members, second.n_members) == (2, 1)
    a, b = model.weights_
    linear = model.linear_term_.predict(X[:4])[:, 0]
    expected = a * first.predict(X[:4]) + b * (linear + second.predict(X[:4]))
    assert_allclose(model.predict(X[:4]), expected, rtol=1e-12)


def test_one_member_cannot_be_split(friedman):
    X, y = friedman
    with pytest.raises(ValueError, match="n_members=1, at least 2"):
        LinearMembers(_members(1)).fit(X, y)


def test_several_outputs(friedman):
    X, y = friedman
    Y = np.stack([y, -y], axis=1)
    model = LinearMembers(_members(2, max_iter=5)).fit(X, Y)
    assert model.predict(X[:3]).shape == (3, 2)
    assert model.loo_prediction_.shape == (len(y), 2)
    assert model.calibration_residuals_.shape == (len(model.calibration_rows_), 2)


def test_same_fit_under_namespaces(ns, friedman):
    X, y = friedman
    ref = LinearMembers(_members(2, max_iter=10)).fit(X, y)
    with ns.context():
        model = LinearMembers(_members(2, max_iter=10)).fit(
            ns.asarray(X), ns.asarray(y)
        )
        pred = ns.check_output(model.predict(ns.asarray(X[:9])))
        loo = ns.check_output(model.loo_prediction_)
        residuals = ns.check_output(model.calibration_residuals_)
        at_queries, at_rows = model.local_error_scale(ns.asarray(X[:9]))
        at_rows = ns.check_output(at_rows)
    assert_allclose(pred, ref.predict(X[:9]), rtol=1e-9)
    assert_allclose(loo, ref.loo_prediction_, rtol=1e-9)
    assert_allclose(residuals, ref.calibration_residuals_, rtol=1e-9, atol=1e-9)
    assert_allclose(at_rows, ref.local_error_scale(X[:9])[1], rtol=1e-9)


def test_a_fit_that_fails_late_leaves_no_fitted_attributes(friedman, monkeypatch):
    def fail(*args):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(_linear_members, "_calibration", fail)
    X, y = friedman
    stage = LinearMembers(_members(2))
    with pytest.raises(RuntimeError, match="interrupted"):
        stage.fit(X, y)
    fitted = [name for name in vars(stage) if name.endswith("_")]
    assert fitted == []
