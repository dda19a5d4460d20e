"""Numerics of NW attention: loss and gradient against direct formulas."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.optimize import approx_fprime

from nwensemble._nw_math import (
    _log_weights,
    heldout_loss,
    key_bias,
    loo_loss_and_grad,
    predict_block,
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


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_predict_block_is_softmax_average(offset):
    """A prediction block is the softmax-weighted mean of targets, also for
    queries far from every key (the underflow fallback)."""
    rng = np.random.default_rng(3)
    Q, Z = rng.standard_normal((7, 3)) + offset, rng.standard_normal((20, 3))
    Y = rng.standard_normal((20, 2))
    sw = np.full(20, 1 / 20)
    bias = key_bias(Z, _log_weights(sw, xp=np), xp=np)
    got = predict_block(Q, Z, np.hstack([Y, np.ones((20, 1))]), bias, xp=np)
    d2 = ((Q[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    w = np.exp(-0.5 * (d2 - d2.min(1, keepdims=True)))
    assert_allclose(got, (w / w.sum(1, keepdims=True)) @ Y, rtol=1e-9)


def test_heldout_loss_uses_only_keys():
    """The held-out loss predicts queries from the key rows alone."""
    W, X, Y, sw = _problem(30, 4, 2, 1, weighted=False)
    q, k = slice(0, 10), slice(10, None)
    got = heldout_loss(W, X[q], Y[q], sw[q] / sw[q].sum(), X[k], Y[k], sw[k], xp=np)
    Zq, Zk = X[q] @ W, X[k] @ W
    d2 = ((Zq[:, None] - Zk[None]) ** 2).sum(-1)
    w = np.exp(-0.5 * (d2 - d2.min(1, keepdims=True)))
    pred = (w / w.sum(1, keepdims=True)) @ Y[k]
    assert_allclose(got, np.mean(np.sum((pred - Y[q]) ** 2, axis=1)), rtol=1e-12)


def test_loss_is_finite_at_extreme_scales():
    """Tiny or huge projections keep the loss and gradient finite."""
    W, X, Y, sw = _problem(30, 4, 2, 1, weighted=False)
    for scale in (1e-8, 1e8):
        loss, grad = loo_loss_and_grad(W * scale, X, Y, sw, xp=np)
        assert np.isfinite(loss) and np.all(np.isfinite(grad))
