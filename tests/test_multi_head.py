"""MultiHeadNWRegressor: ensemble behaviour, head weights, diagnostics, std."""

import pickle
import warnings

import numpy as np
import pytest
from helpers import friedman_split, rmse
from numpy.testing import assert_allclose
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._multi_head import _optimal_head_weights, _project_to_simplex
from nwensemble.diagnostics import head_diversity_index


@pytest.mark.parametrize(
    "params",
    [{}, {"head_dim": 2}, {"head_dim": 3, "init": "random"}, {"early_stopping": True}],
)
def test_one_head_equals_single_head_estimator(friedman, params):
    """n_heads=1 gives NWAttentionRegressor's predictions for the same seed."""
    X, y = friedman
    single = NWAttentionRegressor(random_state=0, **params).fit(X, y)
    multi = MultiHeadNWRegressor(n_heads=1, random_state=0, **params).fit(X, y)
    assert_allclose(multi.predict(X), single.predict(X), rtol=1e-12)
    assert_allclose(multi.components_[0], single.components_, rtol=1e-12)
    assert np.isnan(multi.hdi_) and np.isnan(multi.head_correlation_)


@pytest.fixture(scope="module")
def friedman_1000():
    """The issue's benchmark problem: 1000 train, 500 test, noise 1, 10 features."""
    return friedman_split(1000, 500, n_features=10)


@pytest.mark.slow
def test_four_heads_beat_one_head_on_friedman(friedman_1000):
    """4 heads x 2 dims predict better than 1 head x 2 dims (same seed)."""
    X, y, Xt, yt = friedman_1000
    one = MultiHeadNWRegressor(n_heads=1, head_dim=2, random_state=0).fit(X, y)
    four = MultiHeadNWRegressor(n_heads=4, head_dim=2, random_state=0).fit(X, y)
    assert rmse(four, Xt, yt) < 0.95 * rmse(one, Xt, yt)


def test_diversity_moves_the_heads_residual_correlation(friedman):
    """Below 0 the heads agree more (towards independent heads, each fitted
    to the target), above 0 they disagree more; ``diversity_`` records it.
    On average over seeds: on 200 rows one seed's heads can land the other
    way round."""
    X, y = friedman
    kw = dict(n_heads=4, head_dim=2, bvc_resamples=0, local_fit="constant")
    corr = {}
    for diversity in (-1.0, 0.0, 0.3):
        values = []
        for seed in range(4):
            model = MultiHeadNWRegressor(diversity=diversity, random_state=seed, **kw)
            model.fit(X, y)
            assert model.diversity_ == diversity
            values.append(model.head_correlation_)
        corr[diversity] = np.mean(values)
    assert corr[-1.0] > corr[0.0] + 0.05
    assert corr[0.3] < corr[0.0] - 0.05


@pytest.mark.parametrize("n_heads, diversity", [(2, 1.0), (4, 1 / 3), (5, 0.3)])
def test_diversity_at_or_above_the_bound_is_refused(friedman, n_heads, diversity):
    X, y = friedman
    model = MultiHeadNWRegressor(n_heads, head_dim=1, diversity=diversity)
    with pytest.raises(ValueError, match=r"below 1 / \(n_heads - 1\)"):
        model.fit(X, y)


@pytest.mark.parametrize("diversity", [-1.5, "high"])
def test_diversity_outside_its_range_is_refused(friedman, diversity):
    X, y = friedman
    with pytest.raises(ValueError, match="'diversity' parameter"):
        MultiHeadNWRegressor(diversity=diversity).fit(X, y)


def test_fitted_attributes(friedman):
    """Shapes and ranges of every diagnostic attribute."""
    X, y = friedman
    H, d = 3, 2
    model = MultiHeadNWRegressor(n_heads=H, head_dim=d, random_state=0).fit(X, y)
    assert model.components_.shape == (H, d, X.shape[1])
    assert_allclose(model.head_weights_, np.full(H, 1 / H))
    assert model.subspace_similarity_.shape == (H, H)
    assert_allclose(np.diag(model.subspace_similarity_), 1.0)
    assert model.principal_angles_.shape == (H, H, d)
    assert 0.0 <= model.hdi_ <= 1.0
    assert -1.0 <= model.head_correlation_ <= 1.0
    parts = model.bvc_decomposition_
    total = parts.bias2 + parts.variance / H + (1 - 1 / H) * parts.covariance
    assert parts.n_heads == H and total == pytest.approx(parts.mse, rel=1e-9)
    assert model.transform(X).shape == (X.shape[0], H * d)
    assert len(model.get_feature_names_out()) == H * d
    assert MultiHeadNWRegressor(bvc_resamples=0).fit(X, y).bvc_decomposition_ is None


def test_hdi_matches_components_without_standardization(friedman):
    """hdi_ is the HDI of components_ when the features are not rescaled."""
    X, y = friedman
    model = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, standardize=False, random_state=0
    ).fit(X, y)
    assert model.hdi_ == pytest.approx(head_diversity_index(model.components_))


def test_default_head_dim_follows_the_allocation_rule():
    """head_dim=None gives several heads floor(log(n / 10)) dimensions (within
    [1, n_features]) and one head all features."""
    X, y = make_friedman1(n_samples=600, n_features=7, random_state=0)
    for n, d in ((80, 2), (600, 4)):  # log(8) = 2.08, log(60) = 4.09
        model = MultiHeadNWRegressor(n_heads=3, max_iter=2, random_state=0)
        assert model.fit(X[:n], y[:n]).components_.shape == (3, d, 7)
    model = MultiHeadNWRegressor(n_heads=9, max_iter=0, random_state=0).fit(X, y)
    assert model.components_.shape == (9, 4, 7)
    model = MultiHeadNWRegressor(n_heads=1, max_iter=0).fit(X[:80], y[:80])
    assert model.components_.shape == (1, 7, 7)
    model = MultiHeadNWRegressor(n_heads=2, max_iter=0).fit(X[:, :3], y)
    assert model.components_.shape == (2, 3, 3)  # capped at n_features


def test_identity_blocks_overlap_without_repeating():
    """With more head dimensions than features, the heads' starting blocks
    overlap but no two heads start in the same subspace."""
    X, y = make_friedman1(n_samples=200, n_features=8, random_state=0)
    model = MultiHeadNWRegressor(
        n_heads=4, head_dim=4, init="identity", max_iter=0, standardize=False
    ).fit(X, y)
    support = np.abs(model.components_) > 0  # (4, 4, 8)
    blocks = [tuple(np.flatnonzero(s.any(axis=0))) for s in support]
    assert blocks == [(0, 1, 2, 3), (2, 3, 4, 5), (4, 5, 6, 7), (0, 1, 6, 7)]
    assert 0 < model.hdi_ < 1


@pytest.mark.parametrize("init", ["random", "pca", "identity"])
def test_string_inits_start_from_disjoint_subspaces(friedman, init):
    """Every string init gives the heads orthogonal starting subspaces."""
    X, y = friedman
    model = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, init=init, max_iter=0, standardize=False
    ).fit(X, y)
    assert model.hdi_ == pytest.approx(1.0, abs=1e-10)


def test_project_to_simplex():
    assert_allclose(_project_to_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])
    assert_allclose(_project_to_simplex(np.array([1.4, -0.4])), [1.0, 0.0])
    out = _project_to_simplex(np.array([0.9, 0.6, -0.5]))
    assert_allclose(out, [0.65, 0.35, 0.0])


def test_optimal_head_weights_minimise_loo_error(friedman):
    """'optimal' weights are on the simplex and give no larger leave-one-out
    error than uniform weights; identical heads get equal weights."""
    rng = np.random.default_rng(0)
    residuals = (
        rng.standard_normal((3, 50, 1)) * np.array([1.0, 2.0, 0.5])[:, None, None]
    )
    sw = np.full(50, 1 / 50)
    alpha = _optimal_head_weights(residuals, sw)
    assert alpha.min() >= 0 and alpha.sum() == pytest.approx(1.0)

    def loo(a):
        return float(sw @ np.tensordot(a, residuals, axes=1)[:, 0] ** 2)

    assert loo(alpha) <= loo(np.full(3, 1 / 3))
    same = np.repeat(residuals[:1], 3, axis=0)
    assert_allclose(_optimal_head_weights(same, sw), np.full(3, 1 / 3))

    X, y = friedman
    model = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, head_weights="optimal", random_state=0
    ).fit(X, y)
    assert model.head_weights_.min() >= 0
    assert float(model.head_weights_.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("local_fit", ["constant", "linear"])
def test_attention_weights_explain_predictions(friedman, local_fit):
    """Weights sum to one (convex for the weighted mean), reproduce predict,
    per head and for the ensemble; top_k returns the largest ones with
    their rows."""
    X, y = friedman
    model = MultiHeadNWRegressor(
        n_heads=3,
        head_dim=2,
        head_weights="optimal",
        local_fit=local_fit,
        random_state=0,
    ).fit(X, y)
    Xq = X[:7] + 0.05
    W = model.attention_weights(Xq)
    assert W.shape == (7, X.shape[0])
    assert (W.min() >= 0) == (local_fit == "constant")
    assert_allclose(W.sum(axis=1), 1.0)
    per_head = [model.attention_weights(Xq, head=h) for h in range(3)]
    # The weights reproduce each head's estimate before it is clipped to
    # the targets' range (a line may leave it): compare where none was.
    estimates = np.stack([w @ y for w in per_head])
    inside = np.all((estimates >= y.min()) & (estimates <= y.max()), axis=0)
    assert inside.sum() >= 5
    assert_allclose((W @ y)[inside], model.predict(Xq)[inside], rtol=1e-10)
    assert_allclose(
        sum(a * w for a, w in zip(model.head_weights_, per_head)), W, atol=1e-15
    )
    weights, rows = model.attention_weights(Xq, top_k=5)
    assert weights.shape == rows.shape == (7, 5)
    assert np.all(np.diff(weights, axis=1) <= 0)
    assert_allclose(weights, np.take_along_axis(W, rows, axis=1))
    assert_allclose(weights[:, 0], W.max(axis=1))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"head": 3}, "head"),
        ({"head": -1}, "head"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 10_000}, "top_k"),
        ({"head": 1.5}, "head"),
    ],
)
def test_attention_weights_rejects_bad_arguments(friedman, kwargs, match):
    X, y = friedman
    model = MultiHeadNWRegressor(n_heads=3, head_dim=2, max_iter=1).fit(X, y)
    with pytest.raises(ValueError, match=match):
        model.attention_weights(X[:2], **kwargs)


@pytest.mark.slow
def test_std_matches_spread_of_a_fixed_smoother():
    """With the projections held fixed, the ensemble is a linear smoother: its
    standard error at the true noise level matches the spread of its
    predictions over fresh noise. (The noise level itself is estimated from
    leave-one-out residuals, which also hold the smoothing bias: here it reads
    0.59 for a true 0.5, so the reported std errs on the wide side.)"""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (400, 3))
    f = np.sin(2 * X[:, 0]) + X[:, 1]
    Xq = rng.uniform(-0.8, 0.8, (50, 3))
    init = 3.0 * rng.standard_normal((2, 2, 3))
    kw = dict(
        n_heads=2,
        head_dim=2,
        init=init,
        max_iter=0,
        bvc_resamples=0,
        local_fit="constant",  # a fixed smoother: no readout chosen per draw
    )
    preds, spreads = [], []
    for _ in range(300):
        y = f + 0.5 * rng.standard_normal(400)
        model = MultiHeadNWRegressor(**kw).fit(X, y)
        pred, std = model.predict(Xq, return_std=True)
        preds.append(pred)
        spreads.append(std / float(model.predictor_.combination.noise_std[0]))
        assert 0.5 <= float(model.predictor_.combination.noise_std[0]) <= 0.7
    empirical = np.std(preds, axis=0)
    # 300 draws: the empirical std is good to about 4 % (1 / sqrt(2 * 300)).
    at_true_noise = 0.5 * spreads[0]
    assert_allclose(at_true_noise, empirical, rtol=0.15)
    assert np.median(at_true_noise / empirical) == pytest.approx(1.0, abs=0.03)


def test_std_interval_coverage_of_f_star():
    """Coverage of f* by +-1.96 std intervals on homoscedastic data.

    The standard error covers the noise the prediction averages, not the
    smoothing bias, so coverage falls below the nominal 95 % by the share of
    error that is bias. Measured (seeds 0-2, n=2000, noise 1): 0.86-0.91 for
    one full-rank head. Tolerance: between 0.80 and 0.99.
    """
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (2000, 4))
    f = lambda A: np.sin(2 * A[:, 0]) + 0.5 * A[:, 1] ** 2 - A[:, 2]  # noqa: E731
    y = f(X) + rng.standard_normal(2000)
    Xq = rng.uniform(-1.5, 1.5, (1000, 4))
    pred, std = (
        NWAttentionRegressor(random_state=0).fit(X, y).predict(Xq, return_std=True)
    )
    coverage = np.mean(np.abs(pred - f(Xq)) <= 1.96 * std)
    print(f"coverage of f* by +-1.96 std: {coverage:.3f}")
    assert 0.80 <= coverage <= 0.99


def test_noise_level_from_every_kth_row(monkeypatch):
    """Above ``NOISE_ROWS`` rows the noise level's denominator is the mean
    over every k-th row: within a percent of the one over all rows, and
    the predictions the same."""
    from nwensemble._predict import combination

    X, y = make_friedman1(n_samples=900, noise=1.0, random_state=0)
    model = NWAttentionRegressor(random_state=0)
    monkeypatch.setattr(combination, "NOISE_ROWS", 10**9)
    every = model.fit(X, y)
    exact, pred = every.predictor_.combination.noise_std, every.predict(X[:20])
    monkeypatch.setattr(combination, "NOISE_ROWS", 100)
    sampled = model.fit(X, y)
    assert not np.array_equal(sampled.predictor_.combination.noise_std, exact)
    assert_allclose(sampled.predictor_.combination.noise_std, exact, rtol=0.01)
    assert_allclose(sampled.predict(X[:20]), pred, rtol=0, atol=0)


def test_std_multi_output_and_noise_scale():
    """std has y's shape; the noise estimate tracks the true noise level."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (600, 2))
    Y = np.column_stack([X[:, 0], X[:, 1]]) + rng.standard_normal((600, 2)) * [0.1, 1.0]
    model = NWAttentionRegressor(random_state=0).fit(X, Y)
    pred, std = model.predict(X[:5], return_std=True)
    assert pred.shape == std.shape == (5, 2)
    assert_allclose(model.predictor_.combination.noise_std, [0.1, 1.0], rtol=0.2)


def test_same_fit_under_namespaces(ns, friedman):
    """NumPy and array_api_strict agree; every fitted array stays in the input's
    namespace."""
    X, y = friedman
    kw = dict(
        n_heads=2, head_dim=2, random_state=0, max_iter=20, head_weights="optimal"
    )
    ref = MultiHeadNWRegressor(**kw).fit(X, y)
    with ns.context():
        model = MultiHeadNWRegressor(**kw).fit(ns.asarray(X), ns.asarray(y))
        pred, std = model.predict(ns.asarray(X[:9]), return_std=True)
        weights, rows = model.attention_weights(ns.asarray(X[:3]), top_k=4)
        attrs = {
            name: ns.check_output(getattr(model, name))
            for name in (
                "components_",
                "head_weights_",
                "subspace_similarity_",
                "principal_angles_",
            )
        }
        pred, std = ns.check_output(pred), ns.check_output(std)
        weights, rows = ns.check_output(weights), ns.check_output(rows)
    ref_pred, ref_std = ref.predict(X[:9], return_std=True)
    assert_allclose(pred, ref_pred, rtol=1e-10)
    assert_allclose(std, ref_std, rtol=1e-10)
    for name, value in attrs.items():
        assert_allclose(value, getattr(ref, name), rtol=1e-9, atol=1e-12)
    assert model.hdi_ == pytest.approx(ref.hdi_)
    ref_w, ref_rows = ref.attention_weights(X[:3], top_k=4)
    assert_allclose(weights, ref_w, rtol=1e-10)
    assert_allclose(rows, ref_rows)


def test_init_array_shape_is_checked(friedman):
    X, y = friedman
    with pytest.raises(ValueError, match=r"\(n_heads, head_dim, n_features\)"):
        MultiHeadNWRegressor(n_heads=2, init=np.ones((3, 6))).fit(X, y)


def test_warm_start_continues_from_previous_heads(friedman):
    X, y = friedman
    model = MultiHeadNWRegressor(
        n_heads=2, head_dim=2, warm_start=True, max_iter=3, random_state=0
    )
    with pytest.warns(Warning):
        model.fit(X, y)
    first = model.components_.copy()
    model.set_params(max_iter=0).fit(X, y)
    assert_allclose(model.components_, first, rtol=1e-12)


@pytest.mark.parametrize("standardize", ["power", True])
def test_float32_end_to_end_matches_float64(friedman, standardize):
    """float32 input stays float32 (fit, attributes, predict, std); with the
    same projections its predictions match float64 to 1e-4 relative."""
    X, y = friedman
    init = np.random.default_rng(0).standard_normal((2, 3, X.shape[1]))
    kw = dict(n_heads=2, head_dim=3, init=init, max_iter=0, standardize=standardize)
    m64 = MultiHeadNWRegressor(**kw).fit(X, y)
    m32 = MultiHeadNWRegressor(**kw).fit(X.astype(np.float32), y.astype(np.float32))
    pred32, std32 = m32.predict(X[:50].astype(np.float32), return_std=True)
    assert pred32.dtype == std32.dtype == np.float32
    assert m32.components_.dtype == m32.head_weights_.dtype == np.float32
    assert m32.transform(X[:5].astype(np.float32)).dtype == np.float32
    assert_allclose(pred32, m64.predict(X[:50]), rtol=1e-4)
    assert_allclose(std32, m64.predict(X[:50], return_std=True)[1], rtol=1e-4)
    # Trained in float32 too: the fit stays float32 and close to float64's.
    t32 = MultiHeadNWRegressor(n_heads=2, head_dim=3, random_state=0).fit(
        X.astype(np.float32), y.astype(np.float32)
    )
    assert t32.predict(X[:5].astype(np.float32)).dtype == np.float32


def test_random_directions_keep_one_scale_per_head():
    """Random start directions mean nothing one by one: each head's
    directions share the scale its search picked."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (300, 4))
    y = np.exp(3.0 * X[:, 0]) + 0.05 * rng.standard_normal(300)
    reg = MultiHeadNWRegressor(
        n_heads=2, head_dim=2, init="random", max_iter=0, standardize=False
    ).fit(X, y)
    for head in reg.components_:
        norms = np.linalg.norm(head, axis=1)
        assert_allclose(norms, norms[0], rtol=1e-10)


def test_zero_weight_equals_removal_with_defaults(friedman):
    """Zero sample weights give the model fitted without those rows, up to
    the rounding of sums that include them: L-BFGS amplifies that rounding
    in the components (to about 1% on some CPUs' exp paths), not in the
    predictions."""
    X, y = friedman
    sw = np.ones(len(y))
    sw[::4] = 0.0
    keep = sw > 0
    params = dict(random_state=0, early_stopping=False)
    a = MultiHeadNWRegressor(**params).fit(X, y, sample_weight=sw)
    b = MultiHeadNWRegressor(**params).fit(X[keep], y[keep])
    assert_allclose(a.predict(X), b.predict(X), atol=1e-3 * np.ptp(y))
    assert_allclose(a.components_, b.components_, rtol=2e-2, atol=1e-6)


def test_members_add_their_heads_to_one_ensemble(friedman):
    """n_members groups of n_heads: every head-counting attribute counts
    them all, and the decomposition's parts still add up."""
    X, y = friedman
    H, d, K = 2, 2, 3
    model = MultiHeadNWRegressor(
        n_heads=H, head_dim=d, n_members=K, random_state=1
    ).fit(X, y)
    assert model.components_.shape == (K * H, d, X.shape[1])
    assert_allclose(model.head_weights_, np.full(K * H, 1 / (K * H)))
    assert model.subspace_similarity_.shape == (K * H, K * H)
    assert 0.0 <= model.hdi_ <= 1.0
    parts = model.bvc_decomposition_
    n = K * H
    total = parts.bias2 + parts.variance / n + (1 - 1 / n) * parts.covariance
    assert parts.n_heads == n and total == pytest.approx(parts.mse, rel=1e-9)
    assert model.transform(X).shape == (X.shape[0], K * H * d)
    full = model.attention_weights(X[:3])
    assert_allclose(np.asarray(full.sum(axis=1)).ravel(), 1.0, rtol=1e-10)
    pred, interval = model.predict_interval(X[:5])
    assert np.all((interval[:, 0] <= pred) & (pred <= interval[:, 1]))
    assert np.all(np.isfinite(interval))
    # The rows some member held out (30 % each) calibrate.
    assert 0.3 * X.shape[0] < model.calibration_rows_.shape[0] < 0.8 * X.shape[0]
    # The members chose their own ridges here; they survive a pickle.
    assert np.shape(model.local_ridge_) == (K * H,)
    loaded = pickle.loads(pickle.dumps(model))
    assert_allclose(loaded.predict(X[:5]), model.predict(X[:5]), rtol=1e-12)


def test_first_member_is_the_one_member_fit(friedman):
    """Members draw one after another from one random state: the first
    member's heads are those of the fit with one member; the others start
    elsewhere and end elsewhere."""
    X, y = friedman
    kw = dict(n_heads=2, head_dim=2, random_state=0, early_stopping=True)
    one = MultiHeadNWRegressor(**kw).fit(X, y)
    two = MultiHeadNWRegressor(n_members=2, **kw).fit(X, y)
    assert_allclose(two.components_[:2], one.components_, rtol=1e-12)
    assert not np.allclose(two.components_[2:], one.components_, rtol=1e-3)


def test_one_head_members_average_single_head_fits(friedman):
    """n_heads=1 with members: one full-width head per member, the first
    NWAttentionRegressor's own."""
    X, y = friedman
    # The weighted mean's readout keeps the fitted width (the members score
    # a wider kernel on other rows than one fit does).
    kw = dict(random_state=0, local_fit="constant")
    single = NWAttentionRegressor(**kw).fit(X, y)
    four = MultiHeadNWRegressor(n_heads=1, n_members=4, **kw).fit(X, y)
    assert four.components_.shape == (4,) + single.components_.shape
    assert_allclose(four.components_[0], single.components_, rtol=1e-12)
    assert four.hdi_ == pytest.approx(0.0, abs=1e-12)  # every head spans all features


def test_joined_members_hold_no_rows_out():
    """The joined fit holds no rows out: the rows no member trained on are
    too few to calibrate intervals on."""
    from nwensemble._fit.config import SolverResult
    from nwensemble._fit.engine import _joined

    def result(heldout, n_iter):
        W = np.full((3, 2), float(n_iter))
        return SolverResult(W, n_iter, 2 * n_iter, [n_iter], False, heldout)

    joined = _joined([result(np.array([1, 4, 7]), 1), result(np.array([4, 5, 7]), 2)])
    assert joined.heldout is None
    assert joined.W.shape == (3, 4) and (joined.n_iter, joined.n_fev) == (3, 6)
    assert joined.loss_curve == [1, 2]
    one = result(np.array([1]), 1)
    assert _joined([one]) is one


def test_warm_start_with_members_keeps_every_member(friedman):
    X, y = friedman
    model = MultiHeadNWRegressor(
        n_heads=2, head_dim=2, n_members=2, warm_start=True, random_state=0
    ).fit(X, y)
    first = model.components_.copy()
    model.set_params(max_iter=0).fit(X, y)
    assert_allclose(model.components_, first, rtol=1e-12)
    with pytest.raises(ValueError, match="warm_start"):
        model.set_params(n_members=3).fit(X, y)


def test_members_fit_alike_under_namespaces(ns, friedman):
    """Members with their own held-out rows (each scoring the readout on its
    own) give the same model under every namespace."""
    X, y = friedman
    kw = dict(
        n_heads=2,
        head_dim=2,
        n_members=2,
        random_state=0,
        max_iter=10,
        bvc_resamples=0,
        early_stopping=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = MultiHeadNWRegressor(**kw).fit(X, y)
        with ns.context():
            model = MultiHeadNWRegressor(**kw).fit(ns.asarray(X), ns.asarray(y))
            pred = ns.check_output(model.predict(ns.asarray(X[:9])))
    assert_allclose(pred, ref.predict(X[:9]), rtol=1e-10)
    np.testing.assert_array_equal(model.local_ridge_, ref.local_ridge_)
