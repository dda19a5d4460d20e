"""The global linear term: a ridge on a table's numbers and levels, with
exact leave-one-out predictions."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from nwensemble._fit.column_types import encode_on_host
from nwensemble._fit.linear_term import LinearTerm


def _fit(X, y, sw=None, *, table=False, **design):
    sw = np.ones(len(y)) if sw is None else sw
    return LinearTerm.fit(
        X,
        np.reshape(y, (len(y), -1)),
        sw,
        categorical_features="from_dtype",
        table=table,
        rng=np.random.RandomState(0),
        **design,
    )


def _refit_at(term, X, y, w):
    """The ridge of ``term``'s design and penalty refitted under weights
    ``w`` (an unpenalised intercept): its predictions of every row."""
    A = term.design.of(encode_on_host(term.encoder, X))
    D = np.c_[np.ones(len(y)), A]
    penalty = np.diag([0.0] + [term.penalty] * A.shape[1])
    coef = np.linalg.solve(D.T @ (w[:, None] * D) + penalty, D.T @ (w * y))
    return D @ coef


def test_left_out_predictions_are_the_ridges_fitted_without_the_row():
    rng = np.random.default_rng(0)
    n = 60
    X = rng.normal(size=(n, 3))
    X[rng.random((n, 3)) < 0.1] = np.nan
    y = np.nan_to_num(X) @ [1.0, 2.0, 0.0] + rng.normal(size=n)
    sw = rng.uniform(0.5, 1.5, size=n)
    term, in_sample, left_out = _fit(X, y, sw)
    w = sw / sw.sum()
    assert_allclose(in_sample[:, 0], _refit_at(term, X, y, w), atol=1e-10)
    for i in range(n):
        without = _refit_at(term, X, y, np.where(np.arange(n) == i, 0.0, w))
        assert_allclose(left_out[i, 0], without[i], atol=1e-10)
    assert_allclose(term.predict(X), in_sample, atol=1e-10)


def test_the_penalty_follows_the_leave_one_out_error():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    line = X @ [3.0, -1.0, 0.5, 0.0] + 0.01 * rng.normal(size=200)
    noise = rng.normal(size=200)
    exact, fitted, _ = _fit(X, line)
    flat, flat_fit, _ = _fit(X, noise)
    assert exact.penalty < flat.penalty
    assert np.sqrt(np.mean((fitted[:, 0] - line) ** 2)) < 0.05
    # Pure noise: a penalty that keeps the fit near the mean.
    assert np.std(flat_fit[:, 0]) < 0.3 * np.std(noise)


def test_levels_and_missing_values_of_a_table():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    n = 300
    frame = pd.DataFrame(
        {
            "size": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue"], n),
        }
    )
    frame.loc[::7, "size"] = np.nan
    y = 2.0 * (frame["colour"] == "red").to_numpy() + np.nan_to_num(
        frame["size"].to_numpy()
    )
    term, in_sample, _ = _fit(frame, y + 0.1 * rng.normal(size=n), table=True)
    queries = pd.DataFrame(
        {"size": [0.0, 0.0, np.nan, 0.5], "colour": ["red", "blue", "red", "purple"]}
    )
    pred = term.predict(queries)[:, 0]
    assert np.all(np.isfinite(pred))
    assert pred[0] - pred[1] == pytest.approx(2.0, abs=0.1)
    assert_allclose(term.predict(frame), in_sample, atol=1e-10)


def test_several_outputs_share_the_design():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 2))
    Y = np.stack([X[:, 0], -2.0 * X[:, 1]], axis=1) + 0.1 * rng.normal(size=(80, 2))
    term, in_sample, left_out = _fit(X, Y)
    assert in_sample.shape == left_out.shape == (80, 2)
    assert term.predict(X[:5]).shape == (5, 2)
    assert np.corrcoef(in_sample[:, 1], Y[:, 1])[0, 1] > 0.95


def test_features_without_spread_leave_the_mean():
    """Constant features: the term is the mean, each row's left-out
    prediction the mean of the others."""
    y = np.arange(20.0)
    term, in_sample, left_out = _fit(np.ones((20, 2)), y)
    assert_allclose(in_sample[:, 0], y.mean())
    others = (y.sum() - y) / 19
    assert_allclose(left_out[:, 0], others, rtol=1e-10)
    assert_allclose(term.predict(np.ones((3, 2))), y.mean())


def test_a_warped_feature_also_enters_as_it_is():
    """A target straight along a long-tailed feature: the power transform
    bends it, the feature's own column keeps it within the ridge's reach.
    A symmetric feature, left linear by the transform, gets no second
    column."""
    rng = np.random.default_rng(3)
    X = np.c_[rng.lognormal(sigma=1.0, size=400), rng.normal(size=400)]
    y = 2.0 * X[:, 0] - X[:, 1] + 0.05 * rng.normal(size=400)
    term, fitted, _ = _fit(X, y)
    assert_array_equal(term.design.raw.columns, [0])
    assert np.sqrt(np.mean((fitted[:, 0] - y) ** 2)) < 0.1
    warped = _fit(X, y, raw=False)
    assert warped[0].design.raw is None
    assert np.sqrt(np.mean((warped[1][:, 0] - y) ** 2)) > 1.0


def test_a_features_own_column_holds_at_the_edge_of_its_training_range():
    rng = np.random.default_rng(4)
    X = rng.lognormal(sigma=1.0, size=(300, 1))
    term, _, _ = _fit(X, 3.0 * X[:, 0])
    raw = term.design.raw
    top, bottom = X.max(), X.min()
    columns = raw.of(np.array([[top], [10 * top], [bottom], [bottom / 10], [np.nan]]))
    assert_allclose(columns[1], columns[0])
    assert_allclose(columns[3], columns[2])
    assert_allclose(columns[4], 0.0, atol=1e-12)  # a missing value at the mean
