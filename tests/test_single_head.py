"""Behaviour of NWAttentionRegressor, under NumPy and array_api_strict."""

import glob
import os
import pickle
import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn import config_context
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import KNeighborsRegressor

from nwensemble import NWAttentionRegressor


def _nw_reference(Xtr, ytr, Xte, components):
    """Plain Gaussian NW in the projected space, by explicit distances."""
    Ztr, Zte = Xtr @ components.T, Xte @ components.T
    d2 = ((Zte[:, None, :] - Ztr[None, :, :]) ** 2).sum(-1)
    w = np.exp(-0.5 * (d2 - d2.min(1, keepdims=True)))
    return (w / w.sum(1, keepdims=True)) @ ytr


def test_fixed_projection_is_nadaraya_watson(ns, friedman):
    """With max_iter=0 and a given projection, predict is the NW estimate
    (with a linear feature map, components_ act on the input's units)."""
    X, y = friedman
    C = np.random.default_rng(0).standard_normal((3, X.shape[1]))
    with ns.context():
        reg = NWAttentionRegressor(
            init=ns.asarray(C), max_iter=0, standardize=True, local_fit="constant"
        ).fit(ns.asarray(X), ns.asarray(y))
        pred = ns.check_output(reg.predict(ns.asarray(X[:20])))
        comps = ns.check_output(reg.components_)
    assert_allclose(comps, C, rtol=1e-12)
    assert_allclose(pred, _nw_reference(X, y, X[:20], C), rtol=1e-10)
    assert reg.n_iter_ == 0 and reg.loss_curve_ == []


def test_learning_beats_the_starting_bandwidth(ns):
    """Training lowers the test error of the initial projection, on average
    over seeds, where half the features are noise to learn away.

    One seed is not enough: early stopping judges on a tenth of the rows, and
    some draws stop at the start (ratio 1) or a little past it.
    """
    X, y = make_friedman1(n_samples=600, n_features=10, noise=0.5, random_state=0)
    ratios = []
    with ns.context():
        for seed in range(4):
            rmse = {}
            for max_iter in (0, 200):
                reg = NWAttentionRegressor(max_iter=max_iter, random_state=seed)
                reg.fit(ns.asarray(X[:400]), ns.asarray(y[:400]))
                pred = ns.check_output(reg.predict(ns.asarray(X[400:])))
                rmse[max_iter] = np.sqrt(np.mean((pred - y[400:]) ** 2))
            ratios.append(rmse[200] / rmse[0])
    assert np.mean(ratios) < 0.85


def test_numpy_and_array_api_strict_agree(friedman):
    """Fit and predict give the same numbers in both namespaces.

    Off the host the attention always takes its stable path (see
    ``_backend.eager_host``), whose rounding differs from NumPy's fast
    path; 30 optimiser steps carry that to about 1e-8 in the projection.
    """
    xps = pytest.importorskip("array_api_strict")
    X, y = friedman
    params = dict(head_dim=3, random_state=0, max_iter=30)
    ref = NWAttentionRegressor(**params).fit(X, y)
    with config_context(array_api_dispatch=True):
        est = NWAttentionRegressor(**params).fit(xps.asarray(X), xps.asarray(y))
        pred = est.predict(xps.asarray(X))
        trans = est.transform(xps.asarray(X))
    assert_allclose(np.asarray(pred), ref.predict(X), rtol=1e-7)
    assert_allclose(np.asarray(trans), ref.transform(X), rtol=1e-7, atol=1e-9)
    assert_allclose(np.asarray(est.components_), ref.components_, rtol=1e-7)


def test_non_default_device_keeps_outputs_there(friedman):
    """On array_api_strict's second device, every fitted array and output stays."""
    xps = pytest.importorskip("array_api_strict")
    dev = xps.Device("device1")
    X, y = friedman
    with config_context(array_api_dispatch=True):
        est = NWAttentionRegressor(head_dim=2, random_state=0, max_iter=5).fit(
            xps.asarray(X, device=dev), xps.asarray(y, device=dev)
        )
        assert est.predict(xps.asarray(X, device=dev)).device == dev
        for name, value in vars(est).items():
            if hasattr(value, "device") and hasattr(value, "shape"):
                assert value.device == dev, name


def test_tiny_bandwidth_is_nearest_neighbour(friedman):
    """A huge projection scale reproduces the 1-nearest-neighbour prediction."""
    X, y = friedman
    Xte = X[:30] + 0.01
    reg = NWAttentionRegressor(init=1e3 * np.eye(X.shape[1]), max_iter=0).fit(X, y)
    knn = KNeighborsRegressor(n_neighbors=1).fit(X, y)
    assert_allclose(reg.predict(Xte), knn.predict(Xte), rtol=1e-12)


def test_multi_output_shapes(ns, friedman):
    """2-D y gives 2-D predictions; a (n, 1) y stays 2-D."""
    X, y = friedman
    Y = np.column_stack([y, -y, y**2])
    with ns.context():
        reg = NWAttentionRegressor(head_dim=2, max_iter=5, random_state=0)
        pred = ns.check_output(
            reg.fit(ns.asarray(X), ns.asarray(Y)).predict(ns.asarray(X))
        )
        assert pred.shape == (200, 3)
        pred1 = reg.fit(ns.asarray(X), ns.asarray(Y[:, :1])).predict(ns.asarray(X))
        assert ns.check_output(pred1).shape == (200, 1)


def test_multi_output_columns_are_convex_combinations(friedman):
    """Each output column uses the same weights: predicting -y gives -pred."""
    X, y = friedman
    reg = NWAttentionRegressor(head_dim=2, max_iter=10, random_state=0)
    pred = reg.fit(X, np.column_stack([y, -y])).predict(X)
    assert_allclose(pred[:, 1], -pred[:, 0], rtol=1e-12)


def test_zero_weight_equals_removal(ns, friedman):
    """Zero sample weights give the same model as dropping those rows."""
    X, y = friedman
    sw = np.ones(len(y))
    sw[::4] = 0.0
    keep = sw > 0
    params = dict(head_dim=2, random_state=0, early_stopping=False, init="pca")
    with ns.context():
        a = NWAttentionRegressor(**params).fit(
            ns.asarray(X), ns.asarray(y), sample_weight=ns.asarray(sw)
        )
        b = NWAttentionRegressor(**params).fit(ns.asarray(X[keep]), ns.asarray(y[keep]))
        pa = ns.check_output(a.predict(ns.asarray(X)))
        pb = ns.check_output(b.predict(ns.asarray(X)))
    assert_allclose(pa, pb, rtol=1e-8)


def test_sample_weight_changes_the_fit(friedman):
    """Weights are used: doubling the weight of half the rows moves predictions."""
    X, y = friedman
    sw = np.where(np.arange(len(y)) % 2 == 0, 1.0, 5.0)
    a = NWAttentionRegressor(head_dim=2, random_state=0).fit(X, y)
    b = NWAttentionRegressor(head_dim=2, random_state=0).fit(X, y, sample_weight=sw)
    assert not np.allclose(a.predict(X), b.predict(X))


def test_float32_stays_float32(ns, friedman):
    """float32 input gives float32 attributes and outputs."""
    X, y = friedman
    with ns.context():
        Xf = ns.asarray(X, dtype=np.float32)
        reg = NWAttentionRegressor(head_dim=2, random_state=0, max_iter=20)
        reg.fit(Xf, ns.asarray(y, dtype=np.float32))
        assert ns.check_output(reg.predict(Xf)).dtype == np.float32
        assert ns.check_output(reg.transform(Xf)).dtype == np.float32
        assert ns.check_output(reg.components_).dtype == np.float32
    ref = NWAttentionRegressor(head_dim=2, random_state=0, max_iter=20).fit(X, y)
    pred32 = np.asarray(reg.predict(Xf) if ns.name == "numpy" else ref.predict(X))
    assert np.sqrt(np.mean((pred32 - ref.predict(X)) ** 2)) < 0.05 * np.std(y)


@pytest.mark.parametrize("local_fit, rtol", [("constant", 1e-12), ("linear", 1e-9)])
def test_chunked_prediction_equals_one_block(friedman, local_fit, rtol):
    """A tiny working_memory (many blocks) changes nothing but rounding (the
    product's order of sums follows the block's rows, and a local line's
    solve passes that on)."""
    X, y = friedman
    reg = NWAttentionRegressor(
        head_dim=2, random_state=0, max_iter=5, local_fit=local_fit
    ).fit(X, y)
    whole = reg.predict(X)
    with config_context(working_memory=0.001):
        chunked = reg.predict(X)
    assert_allclose(chunked, whole, rtol=rtol)


def test_transform_projects_with_components(friedman):
    """transform(X) is the data times components_.T, up to translation, for a
    linear feature map; with 'power' it is the warped features times them."""
    X, y = friedman
    reg = NWAttentionRegressor(
        head_dim=3, random_state=0, max_iter=5, standardize=True
    ).fit(X, y)
    Z = reg.transform(X)
    assert Z.shape == (200, 3)
    assert_allclose(Z - Z[0], (X - X[0]) @ reg.components_.T, atol=1e-10)
    assert list(reg.get_feature_names_out()) == [
        "nwattentionregressor0",
        "nwattentionregressor1",
        "nwattentionregressor2",
    ]
    warped = NWAttentionRegressor(head_dim=3, random_state=0, max_iter=5).fit(X, y)
    Zw = warped.transform(X)
    assert_allclose(
        Zw,
        warped.predictor_.features.transform(X) @ warped.components_.T,
        atol=1e-10,
    )


def test_pandas_input_sets_feature_names(friedman):
    """A DataFrame sets feature_names_in_, and mismatched names warn."""
    pd = pytest.importorskip("pandas")
    X, y = friedman
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    reg = NWAttentionRegressor(head_dim=2, max_iter=5, random_state=0).fit(
        df, pd.Series(y)
    )
    assert list(reg.feature_names_in_) == list(df.columns)
    assert_allclose(reg.predict(df), reg.predict(X))


def test_extreme_scales_give_finite_predictions(friedman):
    """Features scaled by 1e150 or 1e-150 fit and predict finitely and alike."""
    X, y = friedman
    ref = NWAttentionRegressor(head_dim=2, random_state=0).fit(X, y).predict(X)
    for scale in (1e150, 1e-150):
        reg = NWAttentionRegressor(head_dim=2, random_state=0).fit(X * scale, y)
        pred = reg.predict(X * scale)
        assert np.all(np.isfinite(pred))
        assert_allclose(pred, ref, rtol=1e-6)


def test_far_queries_are_finite(friedman):
    """Queries at 1e6 in every feature still give finite, in-range values."""
    X, y = friedman
    reg = NWAttentionRegressor(random_state=0, max_iter=10).fit(X, y)
    pred = reg.predict(np.full((3, X.shape[1]), 1e6))
    assert np.all(np.isfinite(pred))
    assert np.all((pred >= y.min()) & (pred <= y.max()))


def test_constant_features_and_duplicate_rows_work(friedman):
    """Constant columns and repeated rows neither fail nor give NaN."""
    X, y = friedman
    Xc = np.column_stack([X, np.full(len(X), 3.0)])
    Xd, yd = np.vstack([Xc, Xc[:50]]), np.concatenate([y, y[:50]])
    reg = NWAttentionRegressor(random_state=0).fit(Xd, yd)
    assert np.all(np.isfinite(reg.predict(Xd)))
    assert np.all(np.isfinite(reg.components_))


def test_constant_target(friedman):
    """A constant y is predicted exactly, without warnings."""
    X, _ = friedman
    reg = NWAttentionRegressor(random_state=0).fit(X, np.full(len(X), 2.5))
    assert_allclose(reg.predict(X), 2.5)


def test_convergence_warning_when_stopped_short(friedman):
    """Hitting max_iter warns, verbose or not."""
    X, y = friedman
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        NWAttentionRegressor(max_iter=1, early_stopping=False, random_state=0).fit(X, y)


SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
# The tables of up to 5000 rows, where the defaults fit by L-BFGS: above,
# Adam's epochs may run out for real (parkinsons_telemonitoring's held-out
# loss still falls at epoch 200), which the warning then reports truly.
SHARED_SETS = [
    path
    for path in sorted(glob.glob(os.path.join(SHARED, "*.csv")))
    if sum(1 for _ in open(path)) - 1 <= 5000
]


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_SETS, reason="../shared/data not present")
@pytest.mark.parametrize("path", SHARED_SETS, ids=os.path.basename)
def test_default_fits_on_the_shared_sets_do_not_warn(path):
    """The defaults converge on every real table of up to 5000 rows (no
    ConvergenceWarning from an internal stage's cap), both estimators; a
    max_iter that really is too small names itself."""
    from nwensemble import MultiHeadNWRegressor

    data = np.loadtxt(path, delimiter=",", skiprows=1)
    X, y = data[:, :-1], data[:, -1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        NWAttentionRegressor(random_state=0).fit(X, y)
        MultiHeadNWRegressor(random_state=0, bvc_resamples=0).fit(X, y)
    # (seeded: from some starts the line search ends L-BFGS after one
    # iteration, and then max_iter was not what stopped it)
    with pytest.warns(ConvergenceWarning, match="stopped after max_iter=2 "):
        NWAttentionRegressor(max_iter=2, early_stopping=False, random_state=1).fit(X, y)


def test_n_iter_and_loss_curve(friedman):
    """n_iter_ counts iterations, one loss per iteration, decreasing overall."""
    X, y = friedman
    reg = NWAttentionRegressor(early_stopping=False, random_state=0).fit(X, y)
    assert reg.n_iter_ == len(reg.loss_curve_) >= 1
    assert reg.n_fev_ >= reg.n_iter_
    assert reg.loss_curve_[-1] < reg.loss_curve_[0]


def test_coarse_to_fine_counts_both_stages():
    """Above 2048 training rows L-BFGS runs a subsample stage, then all rows."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2600, 3))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(2600)
    lines = []
    reg = NWAttentionRegressor(
        solver="lbfgs", head_dim=1, random_state=0, max_iter=5, tol=0
    )
    reg.set_params(callback=lambda comps, n_iter: lines.append(n_iter))
    with pytest.warns(ConvergenceWarning):
        reg.fit(X, y)
    assert lines == list(range(1, reg.n_iter_ + 1))
    assert reg.n_iter_ > 5


def test_verbose_prints_progress(friedman, capsys):
    """verbose prints iteration, loss and elapsed time with the class name."""
    X, y = friedman
    NWAttentionRegressor(head_dim=2, max_iter=3, verbose=1, random_state=0).fit(X, y)
    out = capsys.readouterr().out
    assert re.search(r"\[NWAttentionRegressor\] iter +1 +loss=\S+ .*elapsed=", out)
    # the stages around the iterations say when they are done, and how long
    # they took
    assert re.search(r"\[NWAttentionRegressor\] start .*: \d+\.\d+s", out)
    assert re.search(r"\[NWAttentionRegressor\] leave-one-out .*: \d+\.\d+s", out)


def test_callback_gets_components(friedman):
    """callback receives (head_dim, n_features) arrays and the iteration."""
    X, y = friedman
    seen = []
    NWAttentionRegressor(
        head_dim=2,
        max_iter=3,
        random_state=0,
        callback=lambda c, i: seen.append((c.shape, i)),
    ).fit(X, y)
    assert seen and all(shape == (2, X.shape[1]) for shape, _ in seen)


def test_warm_start_starts_from_previous(friedman):
    """warm_start continues from the last components_ (head_dim ignored)."""
    X, y = friedman
    reg = NWAttentionRegressor(head_dim=2, random_state=0, max_iter=0).fit(X, y)
    before = reg.components_.copy()
    reg.set_params(warm_start=True, head_dim=4)
    reg.fit(X, y)
    assert reg.components_.shape == before.shape
    assert_allclose(reg.components_, before)


def test_random_state_makes_fits_reproducible(friedman):
    """Two fits with one seed give identical models; the model pickles."""
    X, y = friedman
    a = NWAttentionRegressor(init="random", random_state=3).fit(X, y)
    b = NWAttentionRegressor(init="random", random_state=3).fit(X, y)
    assert_allclose(a.components_, b.components_)
    c = pickle.loads(pickle.dumps(a))
    assert_allclose(c.predict(X), a.predict(X))


def test_early_stopping_keeps_the_best_heldout_point(friedman):
    """Early stopping never ends worse than the start on its held-out rows."""
    X, y = friedman
    reg = NWAttentionRegressor(early_stopping=True, random_state=0).fit(X, y)
    assert reg.n_iter_ >= 1


def test_subnormal_features_count_as_constant():
    """Features with a subnormal spread (1e-313) give finite predictions."""
    X = np.array([[2.2e-313], [2.2e-313], [0.0], [0.0]])
    reg = NWAttentionRegressor(max_iter=0).fit(X, [0.0, 1.0, 2.0, 3.0])
    assert np.all(np.isfinite(reg.components_))
    assert np.all(np.isfinite(reg.predict(X)))


def test_rounding_noise_spread_counts_as_constant():
    """A constant tiny feature whose centring leaves rounding noise is constant."""
    X = np.full((3, 1), 2.46264097e-164)
    reg = NWAttentionRegressor(max_iter=0).fit(X, [0.0, 1.0, 2.0])
    assert_allclose(reg.predict(np.ones((2, 1))), 1.0)


def test_query_far_beyond_a_tiny_spread_feature():
    """A feature spread over 1e-251 makes a query at 1 sit 1e250 standard
    deviations out; its squared norm would overflow, so it takes the stable
    path and gets its nearest neighbour's target (found by hypothesis)."""
    X = np.array([[5.6e-251], [0.0], [0.0]])
    y = np.array([1.0, 2.0, 3.0])
    reg = NWAttentionRegressor(max_iter=0, random_state=0).fit(X, y)
    pred = reg.predict(np.ones((2, 1)))
    assert_allclose(pred, [1.0, 1.0])


def test_each_direction_gets_its_own_starting_scale():
    """With init 'identity' each feature's starting scale is searched on its
    own: the feature along which the target changes fast starts narrower
    (a larger scale) than the features it does not depend on."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, (300, 3))
    y = np.exp(3.0 * X[:, 0]) + 0.05 * rng.standard_normal(300)
    reg = NWAttentionRegressor(init="identity", max_iter=0, standardize=False)
    scales = np.abs(np.diag(reg.fit(X, y).components_))
    assert scales[0] > 2.0 * max(scales[1], scales[2])


def test_identical_rows_fit_without_overflow():
    """Constant features standardise to rounding noise (~1e-32); the start
    stage must not scale that noise up until the logits overflow."""
    X = np.full((22, 3), 0.5)
    y = np.array([56.0] + [1.0] * 21)
    reg = NWAttentionRegressor(max_iter=0, random_state=0).fit(X, y)
    assert np.all(np.isfinite(reg.predict(X)))


def test_subnormal_feature_scale_keeps_queries_finite():
    """A feature whose values are subnormal gets scale one: queries divided
    by a subnormal scale would overflow."""
    X = np.array([[2.22507386e-311], [0.0], [0.0]])
    reg = NWAttentionRegressor(max_iter=0, random_state=0).fit(X, np.zeros(3))
    assert np.all(np.isfinite(reg.predict(np.ones((5, 1)))))
