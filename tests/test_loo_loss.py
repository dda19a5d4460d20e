"""The training objective: leave-one-out loss and gradient against direct
formulas, and the heads' ambiguity term (``diversity``)."""

from types import SimpleNamespace

import numpy as np
import pytest
from helpers import make_keys
from numpy.testing import assert_allclose
from scipy.optimize import approx_fprime

from nwensemble._fit import loo_loss
from nwensemble._fit.lbfgs import objective
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import KERNELS


def loo_loss_and_grad(W, X, Y, sw, *, kernel="softmax", **options):
    return loo_loss.loo_loss_and_grad(
        W, numbers_design(X), Y, sw, kernel=KERNELS[kernel], **options
    )


def loo_loss_and_grad_z(Z, Y, sw, *, kernel="softmax", **options):
    return loo_loss.loo_loss_and_grad_z(Z, Y, sw, kernel=KERNELS[kernel], **options)


def loo_head_predictions(Z, Y, sw, rows, *, n_heads):
    """Every head's leave-one-out estimates of ``rows`` (softmax)."""
    return (
        make_keys(Z, Y, sw, n_heads=n_heads)
        .passes()
        .head_estimates(None, loo_rows=rows)
    )


def _naive_loo_loss(W, X, Y, sw):
    """Leave-one-out weighted MSE with explicit loops over queries."""
    Z = X @ W
    loss = 0.0
    for i in range(X.shape[0]):
        d2 = np.sum((Z - Z[i]) ** 2, axis=1)
        logits = -0.5 * d2 + np.log(np.where(sw > 0, sw, 1.0))
        logits[sw == 0] = -np.inf
        logits[i] = -np.inf
        w = np.exp(logits - logits.max())
        w /= w.sum()
        loss += sw[i] * np.sum((w @ Y - Y[i]) ** 2)
    return loss


def _problem(n, p, d, t, weighted, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Y = rng.standard_normal((n, t))
    sw = rng.uniform(0.2, 2.0, n) if weighted else np.ones(n)
    W = rng.standard_normal((p, d)) * 0.7
    return W, X, Y, sw / sw.sum()


@pytest.mark.parametrize("t", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("scale", [1.0, 12.0, 40.0])
def test_loss_matches_naive_loop(t, weighted, scale):
    """The vectorised loss equals the loop over leave-one-out queries.

    At ``scale=12`` many weights fall below the zeroing floor; at ``scale=40``
    some rows' attention underflows on the fast path, so the row-maximum
    fallback is exercised too.
    """
    W, X, Y, sw = _problem(40, 5, 3, t, weighted)
    W = W * scale
    loss, _ = loo_loss_and_grad(W, X, Y, sw, xp=np)
    assert_allclose(loss, _naive_loo_loss(W, X, Y, sw), rtol=1e-12)


@pytest.mark.parametrize("t", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_matches_finite_differences(t, weighted):
    """The analytic gradient equals central finite differences to 1e-5."""
    W, X, Y, sw = _problem(50, 6, 3, t, weighted, seed=1)

    def loss(theta):
        return loo_loss_and_grad(theta.reshape(W.shape), X, Y, sw, xp=np)[0]

    _, grad = loo_loss_and_grad(W, X, Y, sw, xp=np)
    step = 1e-6
    numeric = np.array(
        [
            (loss(W.ravel() + step * e) - loss(W.ravel() - step * e)) / (2 * step)
            for e in np.eye(W.size)
        ]
    )
    assert_allclose(grad.ravel(), numeric, rtol=1e-5, atol=1e-9 * np.abs(numeric).max())
    # scipy's forward differences agree too, at their coarser accuracy.
    assert_allclose(
        grad.ravel(), approx_fprime(W.ravel(), loss, 1e-8), rtol=1e-3, atol=1e-6
    )


@pytest.mark.parametrize("kernel", ["softmax", "epanechnikov"])
def test_gradient_wrt_projected_rows(kernel):
    """``dloss / dZ`` gives the projection's gradient as ``X^T dloss/dZ`` and
    equals central finite differences in ``Z``."""
    W, X, Y, sw = _problem(30, 5, 2, 2, weighted=True, seed=3)
    Z = X @ W
    loss, grad_Z = loo_loss_and_grad_z(Z, Y, sw, xp=np, kernel=kernel)
    loss_W, grad_W = loo_loss_and_grad(W, X, Y, sw, xp=np, kernel=kernel)
    assert loss == loss_W
    assert_allclose(X.T @ grad_Z, grad_W, rtol=1e-12, atol=1e-15)
    step = 1e-6
    numeric = np.array(
        [
            (
                loo_loss_and_grad_z(
                    (Z.ravel() + step * e).reshape(Z.shape), Y, sw, xp=np, kernel=kernel
                )[0]
                - loo_loss_and_grad_z(
                    (Z.ravel() - step * e).reshape(Z.shape), Y, sw, xp=np, kernel=kernel
                )[0]
            )
            / (2 * step)
            for e in np.eye(Z.size)
        ]
    )
    assert_allclose(
        grad_Z.ravel(), numeric, rtol=1e-5, atol=1e-9 * np.abs(numeric).max()
    )


def test_zero_weight_rows_are_ignored():
    """A zero-weight row neither queries nor serves as a key."""
    W, X, Y, sw = _problem(30, 4, 2, 1, weighted=True)
    sw0 = sw.copy()
    sw0[:5] = 0.0
    sw0 /= sw0.sum()
    keep = slice(5, None)
    sub_sw = sw0[keep] / sw0[keep].sum()
    full = loo_loss_and_grad(W, X, Y, sw0, xp=np)
    sub = loo_loss_and_grad(W, X[keep], Y[keep], sub_sw, xp=np)
    assert_allclose(full[0], sub[0], rtol=1e-12)
    assert_allclose(full[1], sub[1], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("n_heads", [2, 3])
def test_ensemble_loss_matches_mean_of_heads(n_heads):
    """The multi-head loss is the error of the mean leave-one-out estimate."""
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((30, 4)), rng.standard_normal((30, 2))
    sw = np.full(30, 1 / 30)
    W = rng.standard_normal((4, 2 * n_heads))
    loss, _ = loo_loss_and_grad(W, X, Y, sw, xp=np, n_heads=n_heads)
    heads = loo_head_predictions(X @ W, Y, sw, np.arange(30), n_heads=n_heads)
    R = heads.mean(0) - Y
    assert_allclose(loss, np.sum(sw * np.sum(R**2, axis=1)), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["softmax", "epanechnikov"])
@pytest.mark.parametrize("n_heads, diversity", [(2, 0.5), (4, 0.0)])
def test_heads_on_threads_give_the_sequential_loss(
    monkeypatch, kernel, n_heads, diversity
):
    """The heads' passes on threads (above ``THREADED_SCORES``) give the
    loss and gradient of the passes in order."""
    W, X, Y, sw = _problem(61, 5, 2 * n_heads, 2, weighted=True, seed=3)
    W = W * 0.3 if kernel != "softmax" else W
    options = dict(xp=np, n_heads=n_heads, diversity=diversity, kernel=kernel)
    monkeypatch.setattr(loo_loss, "THREADED_SCORES", np.inf)
    in_order = loo_loss_and_grad(W, X, Y, sw, workspace={}, **options)
    monkeypatch.setattr(loo_loss, "THREADED_SCORES", 1)
    threaded = loo_loss_and_grad(W, X, Y, sw, workspace={}, **options)
    assert_allclose(threaded[0], in_order[0], rtol=1e-14)
    assert_allclose(threaded[1], in_order[1], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("t", [1, 2])
def test_ensemble_gradient_matches_finite_differences(t):
    """The joint gradient of three heads equals central differences to 1e-5."""
    W, X, Y, sw = _problem(40, 5, 6, t, weighted=True, seed=2)

    def loss(theta):
        return loo_loss_and_grad(theta.reshape(W.shape), X, Y, sw, xp=np, n_heads=3)[0]

    _, grad = loo_loss_and_grad(W, X, Y, sw, xp=np, n_heads=3)
    step = 1e-6
    numeric = np.array(
        [
            (loss(W.ravel() + step * e) - loss(W.ravel() - step * e)) / (2 * step)
            for e in np.eye(W.size)
        ]
    )
    assert_allclose(grad.ravel(), numeric, rtol=1e-5, atol=1e-9 * np.abs(numeric).max())


def test_loss_is_finite_at_extreme_scales():
    """Tiny or huge projections keep the loss and gradient finite."""
    W, X, Y, sw = _problem(30, 4, 2, 1, weighted=False)
    for scale in (1e-8, 1e8):
        loss, grad = loo_loss_and_grad(W * scale, X, Y, sw, xp=np)
        assert np.isfinite(loss) and np.all(np.isfinite(grad))


def _heads_loo(W, X, Y, sw, n_heads):
    """Every head's leave-one-out estimates (n_heads, n, t), one head at a time."""
    return loo_head_predictions(X @ W, Y, sw, np.arange(X.shape[0]), n_heads=n_heads)


@pytest.mark.parametrize("diversity", [-1.0, -0.5, 0.3])
def test_diversity_subtracts_the_heads_ambiguity(diversity):
    """The loss is the ensemble's less ``diversity`` times the ambiguity, and
    at -1 the mean of the heads' own leave-one-out losses (the ambiguity
    decomposition)."""
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((30, 4)), rng.standard_normal((30, 2))
    sw = rng.uniform(0.5, 1.5, 30)
    sw /= sw.sum()
    W = rng.standard_normal((4, 6)) * 0.8
    F = _heads_loo(W, X, Y, sw, 3)
    mean = F.mean(axis=0)
    ensemble = np.sum(sw * np.sum((mean - Y) ** 2, axis=1))
    ambiguity = np.mean([np.sum(sw * np.sum((f - mean) ** 2, axis=1)) for f in F])
    own = np.mean([np.sum(sw * np.sum((f - Y) ** 2, axis=1)) for f in F])
    loss, _ = loo_loss_and_grad(W, X, Y, sw, xp=np, n_heads=3, diversity=diversity)
    assert_allclose(loss, ensemble - diversity * ambiguity, rtol=1e-12)
    if diversity == -1.0:
        assert_allclose(loss, own, rtol=1e-12)


@pytest.mark.parametrize("kernel", ["softmax", "biweight"])
@pytest.mark.parametrize("diversity", [-1.0, 0.4])
def test_diversity_gradient_matches_finite_differences(ns, kernel, diversity):
    """The gradient with the ambiguity term equals central differences
    (step 1e-5) in every namespace, and lands on the input's device."""
    import array_api_compat

    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((25, 4)), rng.standard_normal((25, 2))
    sw = rng.uniform(0.5, 1.5, 25)
    sw /= sw.sum()
    W = rng.standard_normal((4, 6)) * 0.6
    Xx, Yx, swx = ns.asarray(X), ns.asarray(Y), ns.asarray(sw)
    xp = array_api_compat.array_namespace(Xx)
    kw = dict(xp=xp, n_heads=3, kernel=kernel, diversity=diversity)

    def f(theta):
        return loo_loss_and_grad(ns.asarray(theta.reshape(W.shape)), Xx, Yx, swx, **kw)[
            0
        ]

    _, grad = loo_loss_and_grad(ns.asarray(W), Xx, Yx, swx, **kw)
    step = 1e-5
    numeric = np.array(
        [
            (f(W.ravel() + step * e) - f(W.ravel() - step * e)) / (2 * step)
            for e in np.eye(W.size)
        ]
    )
    assert_allclose(
        ns.check_output(grad).ravel(),
        numeric,
        rtol=1e-5,
        atol=1e-8 * np.abs(numeric).max(),
    )


@pytest.mark.parametrize("t", [1, 2])
def test_joint_objective_gradient_with_diversity(t):
    """The training objective (ensemble LOO loss less the ambiguity term) and
    its gradient agree with central differences to 1e-5."""
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((35, 5)), rng.standard_normal((35, t))
    sw = rng.uniform(0.5, 1.5, 35)
    sw /= sw.sum()
    W = rng.standard_normal((5, 6)) * 0.8

    config = SimpleNamespace(kernel=KERNELS["softmax"], n_heads=3, diversity=0.3)

    def f(theta):
        return objective(
            theta.reshape(W.shape), numbers_design(X), Y, sw, config=config, xp=np
        )[0]

    _, grad = objective(W, numbers_design(X), Y, sw, config=config, xp=np)
    step = 1e-6
    numeric = np.array(
        [
            (f(W.ravel() + step * e) - f(W.ravel() - step * e)) / (2 * step)
            for e in np.eye(30)
        ]
    )
    assert_allclose(grad.ravel(), numeric, rtol=1e-5, atol=1e-9 * np.abs(numeric).max())
