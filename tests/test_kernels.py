"""Compact kernels: weights, gradients, fallback, accuracy and sparsity."""

import math

import array_api_compat
import numpy as np
import pytest
from helpers import friedman_split, make_keys, rmse
from numpy.testing import assert_allclose

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit import loo_loss
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import KERNELS, CompactKernel, Kernel, resolve_kernel
from nwensemble.diagnostics import support_fallback


def loo_loss_and_grad(W, X, Y, sw, **options):
    return loo_loss.loo_loss_and_grad(W, numbers_design(X), Y, sw, **options)


COMPACT = ["epanechnikov", "biweight", "triweight"]


def test_kernel_names_degrees_and_error():
    assert not resolve_kernel("softmax").compact
    assert [resolve_kernel(k).degree for k in COMPACT] == [1, 2, 3]
    assert sorted(KERNELS) == sorted(COMPACT + ["softmax"])
    assert all(isinstance(k, Kernel) and k.name == name for name, k in KERNELS.items())
    assert resolve_kernel("biweight") is KERNELS["biweight"]
    with pytest.raises(ValueError, match="kernel must be one of"):
        resolve_kernel("gaussian")


def _compact(degree):
    kernel = next(k for k in KERNELS.values() if getattr(k, "degree", None) == degree)
    assert isinstance(kernel, CompactKernel)
    return kernel


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_compact_weights_match_their_formula(degree):
    rng = np.random.default_rng(degree)
    dist2 = rng.uniform(0, 3 * degree, size=(7, 9))
    weight = rng.uniform(0.1, 1.0, size=9)
    got = _compact(degree).weights_inplace(-0.5 * dist2, weight, xp=np)
    u = dist2 / (2 * degree)
    expected = weight * np.clip(1 - u, 0, None) ** degree
    assert_allclose(got, expected, rtol=1e-13, atol=1e-15)
    # Zero exactly outside the radius sqrt(2 k).
    assert np.all(got[dist2 >= _compact(degree).radius ** 2] == 0.0)


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_compact_derivative_is_the_derivative(degree):
    rng = np.random.default_rng(degree)
    s = -rng.uniform(0, 3 * degree, size=(6, 8))
    # Stay away from the support boundary s = -k, where the kernel has a kink.
    s = s[:, np.all(np.abs(s + degree) > 1e-3, axis=0)]
    weight = rng.uniform(0.1, 1.0, size=s.shape[1])
    h = 1e-6
    kernel = _compact(degree)
    plus = kernel.weights_inplace(s + h, weight, xp=np)
    minus = kernel.weights_inplace(s - h, weight, xp=np)
    E = kernel.weights_inplace(s.copy(), weight, xp=np)
    got = kernel.derivative_inplace(E, (None, weight), xp=np)
    assert_allclose(got, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-8)


def test_family_approaches_softmax_with_the_degree():
    """(1 + s/k)_+^k -> exp(s): each degree is closer to softmax than the last."""
    s = -np.linspace(0, 6, 50)[None, :]
    gaps = [
        np.max(np.abs(_compact(k).weights_inplace(s.copy(), None, xp=np) - np.exp(s)))
        for k in (1, 2, 3)
    ]
    assert gaps[0] > gaps[1] > gaps[2]


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("n_heads", [1, 2])
def test_leave_one_out_gradient_matches_finite_differences(kernel, n_heads):
    """Analytic gradient of the compact LOO loss, away from the support edge."""
    rng = np.random.default_rng(0)
    n, p, d, t = 50, 4, 2, 2
    X = rng.standard_normal((n, p))
    Y = rng.standard_normal((n, t))
    sw = rng.uniform(0.2, 1.0, n)
    sw /= sw.sum()
    kernel = KERNELS[kernel]
    degree = kernel.degree
    for _ in range(50):  # a W with no pair within 1e-3 of the boundary
        W = 0.6 * rng.standard_normal((p, n_heads * d))
        Z = X @ W
        margins = []
        for h in range(n_heads):
            Zh = Z[:, h * d : (h + 1) * d]
            D2 = ((Zh[:, None] - Zh[None]) ** 2).sum(-1)
            margins.append(np.abs(D2 / (2 * degree) - 1.0).min())
        if min(margins) > 1e-3:
            break

    def loss(theta):
        return loo_loss_and_grad(
            theta.reshape(W.shape), X, Y, sw, xp=np, n_heads=n_heads, kernel=kernel
        )[0]

    _, grad = loo_loss_and_grad(W, X, Y, sw, xp=np, n_heads=n_heads, kernel=kernel)
    eps = 1e-7
    theta = W.ravel()
    numeric = np.array(
        [
            (loss(theta + eps * e) - loss(theta - eps * e)) / (2 * eps)
            for e in np.eye(theta.size)
        ]
    )
    assert_allclose(grad.ravel(), numeric, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("kernel", COMPACT)
def test_isolated_rows_fall_back_and_get_no_gradient(kernel, ns):
    """A training row with no other row in its support predicts its nearest
    row's target, and the loss stays finite with a finite gradient (off the
    host every row is searched for its nearest key: the same result)."""
    X, Y, sw, W = (
        ns.asarray(a)
        for a in (
            [[0.0], [0.1], [0.25], [5.0]],
            [[1.0], [2.0], [3.0], [7.0]],
            np.full(4, 0.25),
            [[4.0]],  # radius sqrt(2k)/4 < 4.75: row 3 is alone
        )
    )
    xp = array_api_compat.array_namespace(X)
    loss, grad = loo_loss_and_grad(W, X, Y, sw, xp=xp, kernel=KERNELS[kernel])
    assert np.isfinite(loss) and np.all(np.isfinite(ns.check_output(grad)))
    pred, fell = (
        make_keys(X @ W, Y, sw, kernel=kernel)
        .passes()
        .head_estimates(None, loo_rows=xp.arange(4, device=X.device), fallback=True)
    )
    assert ns.check_output(fell)[0].tolist() == [False, False, False, True]
    assert ns.check_output(pred)[0, 3, 0] == 3.0  # row 2 is row 3's nearest


@pytest.fixture(scope="module")
def friedman_1000():
    return friedman_split(1000, 500, n_features=8)


def test_epanechnikov_is_sparse_and_as_accurate_as_softmax(friedman_1000):
    """Friedman #1 (1000 train, 8 features, noise 1): most weights are exactly
    zero and the test RMSE is within 10% of softmax's weighted mean."""
    Xtr, ytr, Xte, yte = friedman_1000
    soft = NWAttentionRegressor(random_state=0, local_fit="constant").fit(Xtr, ytr)
    epa = NWAttentionRegressor(kernel="epanechnikov", random_state=0).fit(Xtr, ytr)
    assert rmse(epa, Xte, yte) <= 1.10 * rmse(soft, Xte, yte)
    weights = epa.attention_weights(Xte)
    zero_fraction = 1.0 - weights.nnz / (weights.shape[0] * weights.shape[1])
    assert zero_fraction > 0.5
    assert_allclose(weights @ ytr, epa.predict(Xte), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["softmax", *COMPACT])
@pytest.mark.parametrize(
    "Estimator, params",
    [(NWAttentionRegressor, {}), (MultiHeadNWRegressor, {"n_heads": 2})],
)
def test_queries_far_from_the_data_are_finite(kernel, Estimator, params, friedman):
    X, y = friedman
    reg = Estimator(kernel=kernel, random_state=0, **params).fit(X, y)
    far = np.vstack([np.full(X.shape[1], 1e6), np.full(X.shape[1], -1e6)])
    pred, std = reg.predict(far, return_std=True)
    assert np.all(np.isfinite(pred)) and np.all(np.isfinite(std))
    assert np.all((pred >= y.min()) & (pred <= y.max()))
    weights = reg.attention_weights(far)
    dense = weights.toarray() if hasattr(weights, "toarray") else weights
    assert np.all(np.isfinite(dense))
    assert_allclose(dense.sum(axis=1), 1.0, rtol=1e-12)


def test_far_query_predicts_its_nearest_row(friedman):
    X, y = friedman
    reg = NWAttentionRegressor(kernel="biweight", random_state=0).fit(X, y)
    far = X[:1] + 1e5 * (X[:1] - X.mean(axis=0))
    Z = reg.transform(X)
    nearest = np.argmin(((Z - reg.transform(far)) ** 2).sum(axis=1))
    assert_allclose(reg.predict(far), y[nearest : nearest + 1])
    assert support_fallback(reg, far).tolist() == [True]
    weights = reg.attention_weights(far)
    assert weights.nnz == 1 and weights.indices[0] == nearest


def test_support_fallback_shapes_and_softmax(friedman):
    X, y = friedman
    multi = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, kernel="epanechnikov", random_state=0
    ).fit(X, y)
    far = np.vstack([X[:3], np.full((1, X.shape[1]), 1e6)])
    fell = support_fallback(multi, far)
    assert fell.shape == (4, 3) and fell.dtype == bool
    assert fell[-1].all()
    assert multi.n_support_fallback_.shape == (3,)
    soft = NWAttentionRegressor(random_state=0).fit(X, y)
    assert not support_fallback(soft, far).any()
    assert soft.n_support_fallback_ == 0


@pytest.mark.parametrize("kernel", COMPACT)
def test_zero_weight_rows_get_no_attention(kernel, friedman):
    X, y = friedman
    sw = np.ones(len(y))
    sw[::3] = 0.0
    reg = NWAttentionRegressor(kernel=kernel, random_state=0).fit(
        X, y, sample_weight=sw
    )
    weights = reg.attention_weights(X[:40])
    assert np.all(weights.toarray()[:, ::3] == 0.0)
    far = np.full((1, X.shape[1]), 1e6)
    assert reg.attention_weights(far).indices[0] % 3 != 0


@pytest.mark.parametrize("kernel", COMPACT)
def test_float32_compact_matches_float64(kernel, friedman):
    X, y = friedman
    init = np.eye(X.shape[1])[:3]
    a = NWAttentionRegressor(kernel=kernel, init=init, max_iter=0).fit(X, y)
    b = NWAttentionRegressor(kernel=kernel, init=init, max_iter=0).fit(
        X.astype(np.float32), y.astype(np.float32)
    )
    pa, pb = a.predict(X[:50]), b.predict(X[:50].astype(np.float32))
    assert pb.dtype == np.float32
    assert_allclose(pb, pa, rtol=1e-4, atol=1e-4 * np.abs(y).max())


@pytest.mark.parametrize("kernel", COMPACT)
def test_compact_kernels_under_array_api_namespaces(kernel, ns, friedman):
    """Same fit and predictions in every namespace; attention_weights is a
    host sparse matrix in all of them."""
    X, y = friedman
    ref = MultiHeadNWRegressor(
        n_heads=2, head_dim=2, kernel=kernel, max_iter=5, random_state=0
    ).fit(X, y)
    with ns.context():
        reg = MultiHeadNWRegressor(
            n_heads=2, head_dim=2, kernel=kernel, max_iter=5, random_state=0
        ).fit(ns.asarray(X), ns.asarray(y))
        Xq = ns.asarray(np.vstack([X[:30], np.full((1, X.shape[1]), 1e6)]))
        pred = ns.check_output(reg.predict(Xq))
        fell = ns.check_output(support_fallback(reg, Xq))
        weights = reg.attention_weights(Xq)
    assert_allclose(pred, ref.predict(to_host(Xq)), rtol=1e-9)
    assert fell[-1].all()
    assert hasattr(weights, "tocsr")
    assert_allclose(weights @ y, pred, rtol=1e-9)


def to_host(a):
    from nwensemble._shared.backend import to_numpy

    return to_numpy(a)


def test_radius_is_sqrt_2k():
    assert [_compact(k).radius for k in (1, 2, 3)] == [
        math.sqrt(2),
        2.0,
        math.sqrt(6),
    ]
