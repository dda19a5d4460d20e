"""Series lines: rows equal on every feature but one numeric feature, a
query's knot or the line between its series' neighbours, each training
row's estimate without it, and the weight of the lines."""

import numpy as np
import pandas as pd
import pytest
from helpers import designed_rows
from numpy.testing import assert_allclose
from sklearn.utils import check_random_state

from nwensemble._fit import series_lines
from nwensemble._fit.series_lines import SeriesLines
from nwensemble._shared.power_map import power_transform


def _fit(X, y, fitted=None, sw=None, table=False):
    """``SeriesLines.fit`` on rows ``X`` with targets ``y`` (1-D or 2-D),
    against ``fitted`` (zeros by default: every line takes weight)."""
    Y = np.asarray(y, dtype=float).reshape(len(y), -1)
    fitted = np.zeros_like(Y) if fitted is None else fitted
    sw = np.ones(len(Y)) if sw is None else sw
    return SeriesLines.fit(
        X,
        Y,
        sw,
        fitted,
        categorical_features="from_dtype" if table else None,
        table=table,
        rng=check_random_state(0),
    )


def _hand_table():
    """One setting (0, 0) at t = 1, 2, 4; another (1, 0) at t = 1, 4 with a
    copy at t = 4; a lone row (2, 0) at t = 1."""
    X = np.array(
        [
            [0.0, 0.0, 1.0],
            [0.0, 0.0, 2.0],
            [0.0, 0.0, 4.0],
            [1.0, 0.0, 1.0],
            [1.0, 0.0, 4.0],
            [1.0, 0.0, 4.0],
            [2.0, 0.0, 1.0],
        ]
    )
    y = np.array([10.0, 20.0, 40.0, 5.0, 7.0, 9.0, 3.0])
    return X, y


def _coordinate(series, column, values):
    """Values of numeric feature ``column`` through the lines' transform."""
    position = series.columns.index(column)
    N = np.ones((len(values), len(series.columns)))
    N[:, position] = values
    return power_transform(N, series.power, xp=np)[:, position]


def test_a_query_reads_its_knot_or_the_line_between_its_neighbours():
    X, y = _hand_table()
    series, _ = _fit(X, y)
    assert series is not None and 2 in series.columns
    Q = np.array(
        [
            [0.0, 0.0, 2.0],  # on a knot
            [0.0, 0.0, 3.0],  # between the knots at 2 and 4
            [1.0, 0.0, 2.5],  # between 1 and the copies' knot at 4
            [0.0, 0.0, 5.0],  # beyond its series' range
            [3.0, 0.0, 2.0],  # a setting never seen
            [0.0, 1.0, 2.0],  # another setting never seen
        ]
    )
    s = series.estimate(Q)[:, 0]
    t = _coordinate(series, 2, np.array([1.0, 2.0, 2.5, 3.0, 4.0]))
    assert s[0] == 20.0
    assert_allclose(s[1], 20.0 + 20.0 * (t[3] - t[1]) / (t[4] - t[1]), rtol=1e-12)
    assert_allclose(s[2], 5.0 + 3.0 * (t[2] - t[0]) / (t[4] - t[0]), rtol=1e-12)
    assert np.isnan(s[3:]).all()


def test_each_row_without_it_reads_its_knots_rest_or_its_neighbours_line():
    X, y = _hand_table()
    series, left_out = _fit(X, y)
    t = _coordinate(series, 2, np.array([1.0, 2.0, 4.0]))
    # Row 1 alone at t = 2: the line between t = 1 and t = 4 along t.
    along_t = 10.0 + 30.0 * (t[1] - t[0]) / (t[2] - t[0])
    # Rows at t = 1 also form a series along the first feature (0, 1, 2):
    # row 3 (x = 1) alone there reads the line between x = 0 and x = 2.
    x = _coordinate(series, 0, np.array([0.0, 1.0, 2.0]))
    along_x = 10.0 + (3.0 - 10.0) * (x[1] - x[0]) / (x[2] - x[0])
    assert_allclose(left_out[1, 0], along_t, rtol=1e-12)
    assert_allclose(left_out[3, 0], along_x, rtol=1e-12)
    # The copies at (1, 0, 4) read each other (along t and along x).
    assert left_out[4, 0] == 9.0 and left_out[5, 0] == 7.0
    # Rows 0, 2 and 6 end each series they are in: no line without them.
    assert np.isnan(left_out[[0, 2, 6], 0]).all()


def test_a_table_without_series_has_no_lines():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    series, left_out = _fit(X, X[:, 0])
    assert series is None and np.isnan(left_out).all()


def _designed(seed, n_settings=40, noise=0.2):
    """Settings of two continuous factors, each measured at a few of five
    ages; the target grows with the log of the age at a rate the setting
    sets."""
    rng = np.random.default_rng(seed)
    settings = rng.uniform(size=(n_settings, 2))
    setting, age = designed_rows(rng, n_settings)
    X = np.column_stack([settings[setting], age])
    y = (1.0 + 3.0 * X[:, 0] + 2.0 * X[:, 1]) * np.log(X[:, 2])
    return X, y + noise * rng.standard_normal(len(y))


def test_the_weight_is_the_least_squares_slope_within_zero_and_one():
    X, y = _designed(0)
    rng = np.random.default_rng(1)
    fitted = (y + rng.standard_normal(len(y)))[:, None]
    series, left_out = _fit(X, y, fitted)
    rows = np.isfinite(left_out[:, 0])
    gap = (left_out - fitted)[rows, 0]
    slope = gap @ (y[rows] - fitted[rows, 0]) / (gap @ gap)
    assert 0.0 < slope < 1.0
    assert_allclose(series.weight, [slope], rtol=1e-12)
    # A fit as good as the lines' draws no weight to them.
    assert _fit(X, y, y[:, None].copy())[0] is None


def test_the_prediction_moves_towards_the_lines_by_the_weight():
    X, y = _designed(0)
    fitted = np.full((len(y), 1), y.mean())
    series, _ = _fit(X, y, fitted)
    Q, _ = _designed(1)
    Q = np.concatenate([X[:20], Q[:20]])
    prediction = np.full((len(Q), 1), 7.0)
    s = series.estimate(Q)
    moved = series.adjust(Q, prediction)
    has = np.isfinite(s[:, 0])
    assert has[:20].all() and not has[20:].any()
    assert_allclose(moved[has], 7.0 + series.weight * (s[has] - 7.0), rtol=1e-12)
    assert_allclose(moved[~has], 7.0)


def test_several_outputs_weigh_the_lines_each():
    X, y = _designed(0)
    Y = np.stack([y, -2.0 * y], axis=1)
    fitted = np.stack([np.full(len(y), y.mean()), -2.0 * y], axis=1)
    series, left_out = _fit(X, Y, fitted)
    assert series.weight[0] > 0 and series.weight[1] == 0.0
    one, _ = _fit(X, y, fitted[:, :1])
    assert_allclose(series.estimate(X)[:, 0], one.estimate(X)[:, 0], rtol=1e-12)


def test_rows_of_zero_weight_take_no_part():
    X, y = _designed(0)
    sw = np.ones(len(y))
    sw[::3] = 0.0
    fitted = np.full((len(y), 1), y.mean())
    weighted, _ = _fit(X, y, fitted, sw=sw)
    kept = sw > 0
    removed, _ = _fit(X[kept], y[kept], fitted[kept])
    Q, _ = _designed(0)
    assert_allclose(weighted.estimate(Q), removed.estimate(Q), rtol=1e-12)
    assert_allclose(weighted.weight, removed.weight, rtol=1e-12)


def test_levels_and_missing_values_set_the_series():
    frame = pd.DataFrame(
        {
            "kind": ["a", "a", "a", "b", "b", "b"] * 2,
            "other": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0] + [np.nan] * 3 + [2.0] * 3,
            "t": [1.0, 2.0, 4.0] * 4,
        }
    )
    y = np.arange(12.0) ** 1.5
    series, _ = _fit(frame, y, table=True)
    queries = pd.DataFrame(
        {
            "kind": ["a", "b", "a", "c", "a"],
            "other": [1.0, 1.0, np.nan, 1.0, 1.0],
            "t": [3.0, 3.0, 3.0, 3.0, np.nan],
        }
    )
    s = series.estimate(queries)[:, 0]
    t = _coordinate(series, 1, np.array([2.0, 3.0, 4.0]))
    share = (t[1] - t[0]) / (t[2] - t[0])
    # Each query reads its own setting's rows: level, number, missing alike.
    assert_allclose(s[0], y[1] + share * (y[2] - y[1]), rtol=1e-12)
    assert_allclose(s[1], y[4] + share * (y[5] - y[4]), rtol=1e-12)
    assert_allclose(s[2], y[7] + share * (y[8] - y[7]), rtol=1e-12)
    # A level never seen, or the varying feature missing: no line.
    assert np.isnan(s[3]) and np.isnan(s[4])


def test_rows_whose_hashes_collide_take_no_part(monkeypatch):
    X, y = _designed(0)
    fitted = np.full((len(y), 1), y.mean())
    same = np.all(X[:, :2] == X[0, :2], axis=1)
    honest = _fit(X, y, fitted)[0].estimate(X[same])
    monkeypatch.setattr(
        series_lines,
        "_column_hashes",
        lambda key: np.zeros(key.shape, dtype=np.uint64),
    )
    collided, _ = _fit(X, y, fitted)
    # Every row hashes alike: only the first row's setting keeps its line.
    s = collided.estimate(X)
    assert np.isfinite(s[same]).all() and np.isnan(s[~same]).all()
    assert_allclose(s[same], honest, rtol=1e-12)


@pytest.mark.parametrize("value", [0.0, -0.0])
def test_signed_zeros_are_one_value(value):
    X, y = _hand_table()
    X[:, 1] = value
    series, _ = _fit(X, y)
    Q = np.array([[0.0, 0.0, 2.0], [0.0, -0.0, 2.0]])
    assert_allclose(series.estimate(Q)[:, 0], [20.0, 20.0])
