"""Feature slopes: the monotone map of each numeric feature and its
continuation from a fitted head (``feature_slopes=True``)."""

import pickle

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit import feature_slopes
from nwensemble._fit.feature_slopes import (
    FINE_BINS,
    FINE_MAX_LOG_SLOPE,
    MAX_LOG_SLOPE,
    N_BINS,
    FeatureSlopes,
    JointSlopes,
    SlopesObjective,
    identity_slopes,
)
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import KERNELS


def _steps(n, seed):
    """A target that jumps where two features cross zero (an xor), plus a
    smooth term and a noise feature."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4))
    f = np.where((X[:, 0] > 0) ^ (X[:, 1] > 0), 1.0, -1.0) + 0.5 * X[:, 2]
    return X, f, f + 0.3 * rng.standard_normal(n)


def test_slopes_of_one_are_the_identity_on_every_row(ns):
    """At slopes 1 the map returns every row as it is, within the knots and
    beyond them (the end bins are open)."""
    rng = np.random.default_rng(0)
    N = rng.standard_normal((50, 3))
    queries = np.vstack([N, 10 * rng.standard_normal((20, 3))])
    slopes = identity_slopes(ns.asarray(N), ns.asarray(np.full(50, 1 / 50)), xp=ns.xp)
    out = ns.check_output(slopes.apply(ns.asarray(queries)))
    assert_allclose(out, queries, rtol=1e-12, atol=1e-12)


def test_the_map_is_monotone_and_piecewise_linear():
    """With positive slopes each feature maps increasingly, with slope
    ``slope[j, b]`` within bin ``b`` and the end bins' slopes beyond."""
    low = np.array([[0.0, 1.0, 3.0]])
    width = np.array([[1.0, 2.0, 1.0]])
    slope = np.array([[2.0, 0.5, 3.0]])
    slopes = FeatureSlopes(low, width, slope)
    x = np.array([[-1.0], [0.5], [2.0], [3.5], [6.0]])
    # f(x) = 0 + 2 min(x, 1) + 0.5 clip(x - 1, 0, 2) + 3 max(x - 3, 0).
    expected = [[-2.0], [1.0], [2.5], [4.5], [12.0]]
    assert_allclose(slopes.apply(x), expected)
    grid = np.linspace(-3, 8, 200)[:, None]
    assert np.all(np.diff(slopes.apply(grid)[:, 0]) > 0)


@pytest.mark.parametrize("n_heads, diversity", [(1, 0.0), (2, 0.5)])
def test_the_objective_gradient_is_the_chain_rule(n_heads, diversity):
    """The gradient in the projection and the log-slopes matches central
    differences of the loss, for one head and for heads with a diversity
    weight."""
    rng = np.random.default_rng(1)
    n, p, d = 40, 3, 2 * n_heads
    X = numbers_design(rng.standard_normal((n, p)))
    Y = rng.standard_normal((n, 1))
    sw = np.full(n, 1.0 / n)
    identity = identity_slopes(X.numeric, sw, xp=np)
    objective = SlopesObjective(
        identity,
        X,
        Y,
        sw,
        (p, d),
        kernel=KERNELS["softmax"],
        n_heads=n_heads,
        diversity=diversity,
    )
    theta = np.concatenate(
        [rng.standard_normal(p * d), 0.3 * rng.standard_normal(p * N_BINS)]
    )
    _, grad = objective.loss_and_grad(theta)
    step = 1e-6
    numeric = np.array(
        [
            (
                objective.loss_and_grad(theta + step * e)[0]
                - objective.loss_and_grad(theta - step * e)[0]
            )
            / (2 * step)
            for e in np.eye(theta.size)
        ]
    )
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_slopes_narrow_the_kernel_at_the_jumps():
    """On a target that jumps where features cross zero, the slopes lower
    one head's test error clearly, for every seed; the slopes stay within
    their bounds and are steepest in the bins at the jump."""
    X, _, y = _steps(1200, 0)
    Xt, ft, _ = _steps(2000, 1)
    for seed in range(2):
        rmse, fitted = {}, {}
        for slopes in (False, True):
            reg = NWAttentionRegressor(feature_slopes=slopes, random_state=seed)
            fitted[slopes] = reg.fit(X, y)
            rmse[slopes] = np.sqrt(np.mean((reg.predict(Xt) - ft) ** 2))
        assert rmse[True] < 0.9 * rmse[False], rmse
        assert fitted[False].predictor_.features.slopes is None
        slope = fitted[True].predictor_.features.slopes.slope
        assert np.all(np.abs(np.log(slope)) <= MAX_LOG_SLOPE + 1e-12)
        # One of the two bins that meet at the jumping features' jump (their
        # median) is steeper than their end bins.
        middle = slope[:2, N_BINS // 2 - 1 : N_BINS // 2 + 1].max(axis=1)
        ends = slope[:2, [0, -1]].max(axis=1)
        assert np.all(middle > ends), slope[:2]


@pytest.mark.parametrize(
    "n_heads, n_members, solver", [(1, 2, "lbfgs"), (2, 1, "lbfgs"), (1, 2, "adam")]
)
def test_members_act_through_one_map(ns, n_heads, n_members, solver):
    """With members, every member's head reads the rows through the first
    member's slopes (learned with all its heads, after its fit or, by
    Adam, within it): the fit predicts in the input's namespace, and
    ``transform`` is the mapped rows projected."""
    X, _, y = _steps(300, 2)
    with ns.context():
        reg = MultiHeadNWRegressor(
            n_heads=n_heads,
            head_dim=2,
            n_members=n_members,
            feature_slopes=True,
            early_stopping=True,
            bvc_resamples=0,
            solver=solver,
            batch_size=64,
            random_state=0,
        ).fit(ns.asarray(X), ns.asarray(y))
        pred = ns.check_output(reg.predict(ns.asarray(X[:20])))
        Z = ns.check_output(reg.transform(ns.asarray(X[:20])))
        features = reg.predictor_.features
        mapped = ns.check_output(features.rows(ns.asarray(X[:20])).numeric)
        W = ns.check_output(reg.predictor_.W)
    assert features.slopes is not None and not features.is_linear
    assert np.all(np.isfinite(pred))
    assert_allclose(Z, mapped @ W, rtol=1e-9, atol=1e-12)
    # A pickled model holds the slopes as NumPy arrays and predicts the same.
    restored = pickle.loads(pickle.dumps(reg))
    assert isinstance(restored.predictor_.features.slopes.slope, np.ndarray)
    assert_allclose(restored.predict(X[:20]), pred, rtol=1e-6)


def test_tables_with_categories_and_missing_values():
    """A frame with a string column and missing numbers fits and predicts,
    the map acting on the filled numeric block; a pickled model predicts
    the same."""
    rng = np.random.default_rng(3)
    n = 400
    x = rng.uniform(-1, 1, (n, 2))
    level = rng.choice(["a", "b", "c"], n)
    y = np.where(x[:, 0] > 0, 1.0, -1.0) + (level == "b") + 0.1 * rng.standard_normal(n)
    frame = pd.DataFrame({"x0": x[:, 0], "x1": x[:, 1], "level": level})
    frame.loc[rng.random(n) < 0.1, "x1"] = np.nan
    reg = NWAttentionRegressor(feature_slopes=True, random_state=0).fit(frame, y)
    assert reg.predictor_.features.slopes is not None
    pred = reg.predict(frame)
    assert np.all(np.isfinite(pred))
    assert_allclose(pickle.loads(pickle.dumps(reg)).predict(frame), pred)


def test_no_iterations_leave_the_features_as_they_are():
    """With ``max_iter=0`` there is nothing to continue: no slopes, and the
    fit is the fit without them."""
    X, _, y = _steps(200, 4)
    fits = [
        NWAttentionRegressor(max_iter=0, feature_slopes=s, random_state=0).fit(X, y)
        for s in (False, True)
    ]
    assert fits[1].predictor_.features.slopes is None
    assert_allclose(fits[1].predict(X), fits[0].predict(X))


@pytest.mark.parametrize("value", ["yes", "coarse", 1.5])
def test_feature_slopes_is_checked(value):
    X, _, y = _steps(60, 5)
    with pytest.raises(ValueError, match="feature_slopes"):
        NWAttentionRegressor(feature_slopes=value).fit(X, y)


def test_adam_learns_the_slopes_with_the_projection(monkeypatch):
    """Adam learns the slopes in its own steps, as a parameter beside the
    projection: no continuation runs after it, the slopes stay within
    their bounds and are steepest at the jumps, and they lower the test
    error of the same fit without them clearly, for every seed."""
    import nwensemble._fit.engine as engine

    def no_continuation(*args, **kwargs):
        raise AssertionError("Adam's fit was continued")

    monkeypatch.setattr(engine, "continue_with_slopes", no_continuation)
    X, _, y = _steps(3000, 0)
    Xt, ft, _ = _steps(2000, 1)
    for seed in range(2):
        rmse, fitted = {}, {}
        for slopes in (False, True):
            reg = NWAttentionRegressor(
                solver="adam", feature_slopes=slopes, random_state=seed
            )
            fitted[slopes] = reg.fit(X, y)
            rmse[slopes] = np.sqrt(np.mean((reg.predict(Xt) - ft) ** 2))
        assert rmse[True] < 0.9 * rmse[False], rmse
        slope = fitted[True].predictor_.features.slopes.slope
        assert np.all(np.abs(np.log(slope)) <= MAX_LOG_SLOPE + 1e-12)
        middle = slope[:2, N_BINS // 2 - 1 : N_BINS // 2 + 1].max(axis=1)
        ends = slope[:2, [0, -1]].max(axis=1)
        assert np.all(middle > ends), slope[:2]


def test_joint_slopes_gradient_is_the_objectives():
    """A stochastic step's gradient in the projection and the log-slopes is
    the slopes objective's at the same point; the bound clips the
    log-slopes and leaves those within it."""
    rng = np.random.default_rng(6)
    n, p, d = 50, 3, 2
    X = numbers_design(rng.standard_normal((n, p)))
    Y = rng.standard_normal((n, 1))
    sw = np.full(n, 1.0 / n)
    joint = JointSlopes.on(X, sw, xp=np)
    W = rng.standard_normal((p, d))
    log_slope = 0.3 * rng.standard_normal((p, N_BINS))
    kernel = KERNELS["softmax"]
    loss, grad_W, grad_u = joint.loss_and_grads(
        [W, log_slope], X, Y, sw, kernel=kernel, n_heads=1, diversity=0.0
    )
    objective = SlopesObjective(joint.identity, X, Y, sw, (p, d), kernel=kernel)
    expected_loss, expected = objective.loss_and_grad(
        np.concatenate([W.ravel(), log_slope.ravel()])
    )
    assert_allclose(float(loss), expected_loss, rtol=1e-12)
    assert_allclose(np.concatenate([grad_W.ravel(), grad_u.ravel()]), expected)
    u = np.array([[-3.0, -0.5, 0.0, 0.5, 3.0]])
    assert_allclose(joint.bounded(u), [[-MAX_LOG_SLOPE, -0.5, 0.0, 0.5, MAX_LOG_SLOPE]])
    assert JointSlopes.on(numbers_design(np.zeros((n, 0))), sw, xp=np) is None


def test_only_the_first_member_learns_slopes(monkeypatch):
    """With members fitted by Adam, the first learns the slopes and the
    later ones fit on the rows they map, learning none of their own."""
    calls = []
    on = JointSlopes.on.__func__

    def counted(cls, X, sw, **kwargs):
        calls.append(X.shape)
        return on(cls, X, sw, **kwargs)

    monkeypatch.setattr(JointSlopes, "on", classmethod(counted))
    X, _, y = _steps(300, 7)
    MultiHeadNWRegressor(
        n_heads=1,
        n_members=3,
        solver="adam",
        batch_size=64,
        feature_slopes=True,
        bvc_resamples=0,
        random_state=0,
    ).fit(X, y)
    assert len(calls) == 1


def _corner_table(n, seed):
    """A target that jumps where three features are all positive (a corner
    of the cube that blurs across the coarse bins at its edges), plus a
    slope along a fourth."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 4))
    f = 2.0 * np.all(X[:, :3] > 0, axis=1) + 0.5 * X[:, 3]
    return X, f + 0.3 * f.std() * rng.standard_normal(n)


def test_a_corner_takes_the_fine_map_and_a_smooth_target_the_coarse():
    """The finer map is kept where the held-out rows clearly prefer it (a
    jump the coarse slopes press their bound against), not where the
    target is smooth."""
    X, y = _corner_table(1500, 0)
    corner = NWAttentionRegressor(feature_slopes=True, random_state=0).fit(X, y)
    slope = corner.predictor_.features.slopes.slope
    assert slope.shape == (4, FINE_BINS)
    # The slopes of a float32 loss, read back in float64.
    assert np.all(np.abs(np.log(slope)) <= FINE_MAX_LOG_SLOPE + 1e-6)
    rng = np.random.default_rng(1)
    smooth = np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(1500)
    flat = NWAttentionRegressor(feature_slopes=True, random_state=0).fit(X, smooth)
    assert flat.predictor_.features.slopes.slope.shape == (4, N_BINS)


def _fitted_maps(monkeypatch):
    """The (rows, bins) of every map a fit starts from the identity,
    recorded as fits ask for them."""
    fitted_bins = []
    identity = feature_slopes.identity_slopes

    def recording(N, sw, *, xp, n_bins=N_BINS):
        fitted_bins.append((N.shape[0], n_bins))
        return identity(N, sw, xp=xp, n_bins=n_bins)

    monkeypatch.setattr(feature_slopes, "identity_slopes", recording)
    return fitted_bins


def test_one_head_above_2048_rows_tries_the_fine_map(monkeypatch):
    """One head on 3000 rows fits by L-BFGS, whose continuation (on more
    than 2048 rows) tries the finer map where a coarse slope presses its
    bound and keeps it on the corner: a table just above 2048 rows finds
    the jump a smaller one finds."""
    fitted_bins = _fitted_maps(monkeypatch)
    X, y = _corner_table(3000, 0)
    model = NWAttentionRegressor(feature_slopes=True, random_state=0).fit(X, y)
    rows = {n_bins: n for n, n_bins in fitted_bins}
    assert sorted(rows) == [N_BINS, FINE_BINS]
    assert rows[FINE_BINS] > 2048
    assert model.predictor_.features.slopes.slope.shape == (4, FINE_BINS)


def test_fine_is_true_where_lbfgs_fits():
    """Where L-BFGS fits, ``'fine'`` is the continuation of ``True``: the
    coarse map, then the finer one where the held-out rows clearly choose
    it, whatever the target."""
    X, y = _corner_table(1500, 0)
    rng = np.random.default_rng(1)
    smooth = np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(1500)
    for target, bins in ((y, FINE_BINS), (smooth, N_BINS)):
        fits = [
            NWAttentionRegressor(feature_slopes=slopes, random_state=0).fit(X, target)
            for slopes in (True, "fine")
        ]
        for fit in fits:
            assert fit.predictor_.features.slopes.slope.shape == (4, bins)
        assert_allclose(fits[1].predict(X), fits[0].predict(X))


def test_adam_learns_the_finer_map_in_its_steps_with_fine():
    """With ``'fine'`` Adam's steps learn the finer map, within its wider
    bound and past the coarse one at the jumps, and it predicts the steps
    better than Adam's coarse map for every seed, clearly so over the
    seeds."""
    joint = JointSlopes.on(
        numbers_design(np.arange(80.0).reshape(20, 4)),
        np.full(20, 0.05),
        xp=np,
        feature_slopes="fine",
    )
    assert joint.identity.slope.shape == (4, FINE_BINS)
    u = np.array([[-5.0, -2.0, 2.0, 5.0]])
    assert_allclose(joint.bounded(u), [[-FINE_MAX_LOG_SLOPE, -2.0, 2.0, 3.0]])
    X, _, y = _steps(3000, 0)
    Xt, ft, _ = _steps(2000, 1)
    ratios = []
    for seed in range(3):
        rmse = {}
        for slopes in (True, "fine"):
            reg = NWAttentionRegressor(
                solver="adam", feature_slopes=slopes, random_state=seed
            ).fit(X, y)
            rmse[slopes] = np.sqrt(np.mean((reg.predict(Xt) - ft) ** 2))
        log_slope = np.log(reg.predictor_.features.slopes.slope)
        assert log_slope.shape == (4, FINE_BINS)
        assert np.all(np.abs(log_slope) <= FINE_MAX_LOG_SLOPE + 1e-6)
        assert log_slope[:2].max() > MAX_LOG_SLOPE
        assert rmse["fine"] < rmse[True], rmse
        ratios.append(rmse["fine"] / rmse[True])
    assert np.exp(np.mean(np.log(ratios))) < 0.8, ratios
