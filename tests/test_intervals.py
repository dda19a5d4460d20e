"""predict_interval: jackknife+ and adaptive conformal intervals."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from nwensemble import HeadAllocator, MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._predict.intervals import calibration_rows, conformal_rank

METHODS = ["jackknife+", "adaptive"]


def _heteroscedastic(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 3))
    f = 4 * np.sin(np.pi * X[:, 0]) + 2 * X[:, 1]
    return X, f + (0.1 + X[:, 0]) * rng.standard_normal(n)


@pytest.fixture(scope="module")
def fitted():
    X, y = _heteroscedastic(500, 0)
    model = NWAttentionRegressor(early_stopping=True, random_state=0).fit(X, y)
    return model, X


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_coverage_is_within_binomial_limits_across_seeds(method):
    """90% intervals from held-out rows cover new targets 90% of the time.

    Over seeds the coverage of a conformal interval with ``c`` calibration
    rows varies as a Beta(c + 1 - k, k) variable (``k = floor(0.1 (c + 1))``)
    on top of the binomial noise of the test rows: the mean over seeds must
    lie within four of its standard deviations of the Beta mean."""
    coverages, limits = [], []
    for seed in range(8):
        X, y = _heteroscedastic(2500, seed)
        model = NWAttentionRegressor(early_stopping=True, random_state=seed)
        model.fit(X[:500], y[:500])
        _, bounds = model.predict_interval(X[500:], method=method)
        coverages.append(np.mean((y[500:] >= bounds[:, 0]) & (y[500:] <= bounds[:, 1])))
        c = model.calibration_rows_.shape[0]
        k = conformal_rank(c, 0.1)
        beta = stats.beta(c + 1 - k, k)
        limits.append(
            (beta.mean(), beta.var() + beta.mean() * (1 - beta.mean()) / 2000)
        )
    mean = np.mean([m for m, _ in limits])
    sd = np.sqrt(np.sum([v for _, v in limits])) / len(limits)
    assert abs(np.mean(coverages) - mean) < 4 * sd, (coverages, mean, sd)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_members_cover_at_least_the_confidence_level_across_seeds(method):
    """Members' intervals (each calibration row on the members that held
    it out) cover new targets at least as often as asked, within the
    seeds' noise; their residuals come from fewer heads than the
    prediction, so they may cover a little more, not far more."""
    coverages, limits = [], []
    for seed in range(8):
        X, y = _heteroscedastic(2500, seed)
        model = MultiHeadNWRegressor(
            n_heads=1, n_members=3, early_stopping=True, random_state=seed
        ).fit(X[:500], y[:500])
        _, bounds = model.predict_interval(X[500:], method=method)
        coverages.append(np.mean((y[500:] >= bounds[:, 0]) & (y[500:] <= bounds[:, 1])))
        c = model.calibration_rows_.shape[0]
        k = conformal_rank(c, 0.1)
        beta = stats.beta(c + 1 - k, k)
        limits.append(
            (beta.mean(), beta.var() + beta.mean() * (1 - beta.mean()) / 2000)
        )
    mean = np.mean([m for m, _ in limits])
    sd = np.sqrt(np.sum([v for _, v in limits])) / len(limits)
    assert mean - 4 * sd < np.mean(coverages) < mean + 0.05, (coverages, mean, sd)


@pytest.mark.parametrize("method", METHODS)
def test_intervals_hold_the_prediction_and_grow_with_confidence(fitted, method):
    model, X = fitted
    y_pred, narrow = model.predict_interval(X[:50], confidence_level=0.5, method=method)
    _, wide = model.predict_interval(X[:50], confidence_level=0.95, method=method)
    assert_allclose(y_pred, model.predict(X[:50]))
    assert narrow.shape == (50, 2)
    for bounds in (narrow, wide):
        assert np.all(bounds[:, 0] <= y_pred) and np.all(y_pred <= bounds[:, 1])
    assert np.all(wide[:, 0] <= narrow[:, 0]) and np.all(narrow[:, 1] <= wide[:, 1])
    assert np.mean(wide[:, 1] - wide[:, 0]) > np.mean(narrow[:, 1] - narrow[:, 0])


def test_adaptive_intervals_widen_where_the_noise_is_larger(fitted):
    """The noise grows elevenfold along the first feature."""
    model, X = fitted
    grid = np.column_stack(
        [np.linspace(0.05, 0.95, 10), np.full(10, 0.5), np.zeros(10)]
    )
    _, bounds = model.predict_interval(grid, method="adaptive")
    width = bounds[:, 1] - bounds[:, 0]
    assert width[-3:].mean() > 2 * width[:3].mean()


def test_calibration_rows_are_the_held_out_rows_when_there_are_any():
    X, y = _heteroscedastic(300, 1)
    held = NWAttentionRegressor(early_stopping=True, random_state=0).fit(X, y)
    assert held.calibration_rows_.shape[0] == 90  # validation_fraction="auto": 0.3
    plain = NWAttentionRegressor(early_stopping=False, random_state=0).fit(X, y)
    assert_allclose(plain.calibration_rows_, np.arange(300))
    # One member: the residuals are those of the leave-one-out predictions.
    for model in (held, plain):
        rows = model.calibration_rows_
        expected = y[rows] - model.loo_prediction_[rows]
        assert_allclose(model.calibration_residuals_, expected, rtol=1e-12)


def test_members_calibrate_on_the_rows_some_member_held_out():
    """Each row some member held out calibrates on those members' heads
    alone (weights renormalised); rows no member held out do not."""
    rows = np.arange(6)
    heldout = (np.array([0, 1]), None, np.array([1, 2, 5]))
    weights = [0.1, 0.1, 0.3, 0.3, 0.1, 0.1]  # two heads per member
    positions, row_weights = calibration_rows(rows, heldout, weights)
    assert_allclose(positions, [0, 1, 2, 5])
    assert_allclose(
        row_weights,
        [
            [0.5, 0.5, 0, 0, 0, 0],
            [0.25, 0.25, 0, 0, 0.25, 0.25],
            [0, 0, 0, 0, 0.5, 0.5],
            [0, 0, 0, 0, 0.5, 0.5],
        ],
    )
    # One member: its held-out rows, with the model's weights.
    positions, row_weights = calibration_rows(rows, (np.array([3, 4]),), [0.5, 0.5])
    assert_allclose(positions, [3, 4]) and row_weights is None
    # No held-out rows, or only in members whose heads weigh nothing: all rows.
    for heldout in ((None, None), (np.array([3]), None)):
        positions, row_weights = calibration_rows(rows, heldout, [0, 0, 1, 1])
        assert_allclose(positions, rows) and row_weights is None


def test_members_jackknife_plus_matches_refits_of_the_members_that_held_out():
    """With members, row i's left-out model is the ensemble of the members
    that held it out, refitted without it: computed by hand it gives the
    same bounds."""
    X, y = _heteroscedastic(150, 5)
    kw = dict(
        n_heads=1,
        head_dim=2,
        early_stopping=True,
        standardize=False,
        duplicate_weight=0,
        local_fit="constant",
        random_state=0,
    )
    model = MultiHeadNWRegressor(n_members=2, **kw).fit(X, y)
    first = MultiHeadNWRegressor(**kw).fit(X, y)
    rows = model.calibration_rows_
    W = model.predictor_.combination.calibration.head_weights  # (c, 2)
    assert np.all(np.isin(first.calibration_rows_, rows))
    assert_allclose(W[:, 0] > 0, np.isin(rows, first.calibration_rows_))
    assert_allclose(W.sum(axis=1), 1.0)
    Xq = X[:4] + 0.01
    _, bounds = model.predict_interval(Xq, confidence_level=0.8)
    Zq, Z = model.transform(Xq), model.transform(X)

    def left_out(Zq_h, Z_h, i):
        logits = -0.5 * ((Zq_h[:, None, :] - Z_h[None, :, :]) ** 2).sum(-1)
        E = np.exp(logits - logits.max(axis=1, keepdims=True))
        E[:, i] = 0.0
        return E @ y / E.sum(axis=1)

    heads = [(Zq[:, 2 * h : 2 * h + 2], Z[:, 2 * h : 2 * h + 2]) for h in (0, 1)]
    lows, highs = [], []
    for i, w in zip(rows, W):
        mu = sum(w[h] * left_out(Zq_h, Z_h, i) for h, (Zq_h, Z_h) in enumerate(heads))
        at_i = sum(
            w[h] * left_out(Z_h[i : i + 1], Z_h, i) for h, (_, Z_h) in enumerate(heads)
        )
        assert_allclose(model.calibration_residuals_[len(lows)], y[i] - at_i[0])
        r = abs(y[i] - at_i[0])
        lows.append(mu - r)
        highs.append(mu + r)
    k = conformal_rank(rows.shape[0], 0.2)
    assert_allclose(bounds[:, 0], np.sort(lows, axis=0)[k - 1], rtol=1e-9)
    assert_allclose(bounds[:, 1], np.sort(highs, axis=0)[rows.shape[0] - k], rtol=1e-9)


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, True, "0.9", None])
def test_confidence_level_outside_the_unit_interval_is_refused(fitted, level):
    model, X = fitted
    with pytest.raises(ValueError, match="confidence_level must be a float in"):
        model.predict_interval(X[:3], confidence_level=level)


def test_unknown_method_is_refused(fitted):
    model, X = fitted
    with pytest.raises(ValueError, match="method must be one of"):
        model.predict_interval(X[:3], method="cv+")


def test_too_few_calibration_rows_give_infinite_bounds_with_a_warning(fitted):
    model, X = fitted  # 150 calibration rows: 0.995 needs 199
    with pytest.warns(UserWarning, match="cannot bound"):
        _, bounds = model.predict_interval(X[:4], confidence_level=0.995)
    assert np.all(np.isneginf(bounds[:, 0])) and np.all(np.isposinf(bounds[:, 1]))


def test_jackknife_plus_matches_refits_with_the_projection_held():
    """Each leave-one-out model is the fitted one without row i: refitting
    NW by hand with the same projection gives the same bounds."""
    X, y = _heteroscedastic(80, 2)
    model = NWAttentionRegressor(
        early_stopping=False,
        standardize=False,
        duplicate_weight=0,
        local_fit="constant",
        random_state=0,
    ).fit(X, y)
    Xq = X[:5] + 0.01
    _, bounds = model.predict_interval(Xq, confidence_level=0.8)
    Zq, Z = model.transform(Xq), model.transform(X)
    logits = -0.5 * ((Zq[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    E = np.exp(logits - logits.max(axis=1, keepdims=True))
    R = np.abs(y - model.loo_prediction_)
    lows, highs = [], []
    for i in range(80):
        keep = np.arange(80) != i
        mu = E[:, keep] @ y[keep] / E[:, keep].sum(axis=1)
        lows.append(mu - R[i])
        highs.append(mu + R[i])
    k = conformal_rank(80, 0.2)
    assert_allclose(bounds[:, 0], np.sort(lows, axis=0)[k - 1], rtol=1e-9)
    assert_allclose(bounds[:, 1], np.sort(highs, axis=0)[80 - k], rtol=1e-9)


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_jackknife_plus_of_local_lines_matches_refits_without_the_row(n_outputs):
    """With the local-linear readout each leave-one-out model is the line
    refitted without row i (the ridge's scale held, the clip kept), for
    each output."""
    X, y = _heteroscedastic(80, 2)
    Y = np.column_stack([y, X[:, 0] - 2 * y])[:, :n_outputs]
    model = NWAttentionRegressor(
        early_stopping=False,
        standardize=False,
        duplicate_weight=0,
        local_fit="linear",
        random_state=0,
    ).fit(X, Y if n_outputs > 1 else y)
    ridge = model.local_ridge_
    Xq = X[:5] + 0.01
    _, bounds = model.predict_interval(Xq, confidence_level=0.8)
    bounds = bounds.reshape(5, n_outputs, 2)
    Zq, Z = model.transform(Xq), model.transform(X)
    d = Z.shape[1]
    U = np.hstack([np.ones((80, 1)), Z])
    R = np.abs(Y - model.loo_prediction_.reshape(80, n_outputs))
    k = conformal_rank(80, 0.2)
    lows, highs = [], []
    for q in Zq:
        logits = -0.5 * ((q - Z) ** 2).sum(-1)
        w = np.exp(logits - logits.max())
        w /= w.sum()
        spread = w @ ((Z - q) ** 2).sum(1) / d
        floor = 1e-10 * (1 + w @ (Z**2).sum(1) / d)
        P = np.diag([0.0] + [ridge * spread + floor] * d)
        Uq = U - np.hstack([[0.0], q])
        mus = []
        for i in range(80):
            keep = np.arange(80) != i
            A = Uq[keep].T @ (w[keep, None] * Uq[keep]) + P
            mus.append(np.linalg.solve(A, Uq[keep].T @ (w[keep, None] * Y[keep]))[0])
        mus = np.clip(mus, Y.min(axis=0), Y.max(axis=0))
        lows.append(np.sort(mus - R, axis=0)[k - 1])
        highs.append(np.sort(mus + R, axis=0)[80 - k])
    assert_allclose(bounds[:, :, 0], lows, rtol=1e-7)
    assert_allclose(bounds[:, :, 1], highs, rtol=1e-7)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_members", [1, 2])
@pytest.mark.parametrize("method", METHODS)
def test_intervals_in_every_namespace(ns, method, n_members):
    X, y = _heteroscedastic(200, 3)
    Y = np.column_stack([y, -2 * y])
    with ns.context():
        model = MultiHeadNWRegressor(
            n_heads=2,
            n_members=n_members,
            early_stopping=True,
            max_iter=5,
            random_state=0,
        )
        model.fit(ns.asarray(X), ns.asarray(Y))
        y_pred, bounds = model.predict_interval(ns.asarray(X[:7]), method=method)
    y_pred, bounds = ns.check_output(y_pred), ns.check_output(bounds)
    assert bounds.shape == (7, 2, 2)
    assert np.all(bounds[..., 0] <= y_pred) and np.all(y_pred <= bounds[..., 1])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_head_allocator_predicts_intervals_of_its_best_estimator():
    X, y = _heteroscedastic(200, 4)
    alloc = HeadAllocator(
        MultiHeadNWRegressor(early_stopping=True, max_iter=5, random_state=0),
        budget=4,
        cv=None,
    ).fit(X, y)
    assert_allclose(
        alloc.predict_interval(X[:5])[1],
        alloc.best_estimator_.predict_interval(X[:5])[1],
    )
