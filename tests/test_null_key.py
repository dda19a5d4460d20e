"""Null-key heads (the third stage of ResidualStageRegressor): the loss's
gradient, the null key's silence far from the keys, the members' rule."""

import array_api_compat.numpy as xp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from nwensemble._fit import null_key
from nwensemble._fit.null_key import NullKeyHeads, fit_null_key_heads


def _clusters(seed, n_clusters=40, size=8, noise=0.1):
    """Tight clusters of keys, each with its own offset as the residual."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 10, size=(n_clusters, 2))
    offsets = rng.choice([-1.0, 1.0], size=n_clusters)
    group = np.repeat(np.arange(n_clusters), size)
    X = centers[group] + 0.02 * rng.standard_normal((group.size, 2))
    R = (offsets[group] + noise * rng.standard_normal(group.size))[:, None]
    return X, R, centers, offsets


def test_the_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    R = rng.standard_normal((30, 2))
    sw = rng.uniform(0.5, 1.5, size=30)
    log_sw = np.log(sw)
    sw = sw / sw.sum()
    theta = np.concatenate(
        [(1.5 * np.eye(3) + 0.1 * rng.standard_normal((3, 3))).ravel(), [0.3]]
    )

    def loss(t):
        return null_key._loo_loss_and_grad(
            t[:-1].reshape(3, 3), t[-1], X, R, sw, log_sw, xp=xp
        )

    _, grad = loss(theta)
    step = 1e-6
    numeric = [
        (loss(theta + step * e)[0] - loss(theta - step * e)[0]) / (2 * step)
        for e in np.eye(theta.size)
    ]
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_the_null_key_takes_the_weight_far_from_every_key():
    X, R, _, _ = _clusters(0)
    W = 2.0 * np.eye(2)
    heads = NullKeyHeads([W], [0.0], 1, X, R, np.zeros(X.shape[0]))
    far = heads.predict(np.array([[100.0, 100.0]]), xp=xp)
    assert_allclose(far, 0.0, atol=1e-12)
    # On a key: its cluster's residuals, less the null key's share exp(b).
    near = heads.predict(X[:1], xp=xp)
    scores = -0.5 * np.sum(((X[:1] - X) @ W) ** 2, axis=1)
    e = np.exp(scores)
    assert_allclose(near, ((e @ R) / (e.sum() + 1.0))[None], rtol=1e-10)


def test_left_out_estimates_leave_each_row_out():
    X, R, _, _ = _clusters(1, n_clusters=5)
    W, b = 1.7 * np.eye(2), -0.5
    log_sw = np.log(np.linspace(0.5, 1.5, X.shape[0]))
    heads = NullKeyHeads([W, 0.5 * W], [b, 0.0], 3, X, R, log_sw)
    rows = np.array([0, 7, 21])
    expected = np.zeros((rows.size, 1))
    for Wm, bm in ((W, b), (0.5 * W, 0.0)):
        for k, i in enumerate(rows):
            others = np.delete(np.arange(X.shape[0]), i)
            s = -0.5 * np.sum(((X[i] - X[others]) @ Wm) ** 2, axis=1) + log_sw[others]
            e = np.exp(s)
            expected[k] += (e @ R[others]) / (e.sum() + np.exp(bm))
    assert_allclose(heads.left_out(rows, xp=xp), expected / 3, rtol=1e-10)


def test_members_learn_the_clusters_and_stay_silent_elsewhere():
    X, R, centers, offsets = _clusters(2)
    heads = fit_null_key_heads(
        X,
        R,
        np.ones(X.shape[0]),
        np.arange(X.shape[0]),
        rng=np.random.default_rng(0),
        xp=xp,
    )
    assert heads is not None and len(heads.projections) >= 1
    at_centers = heads.predict(centers, xp=xp)[:, 0]
    # The members that add nothing count in the mean as zeros.
    share = len(heads.projections) / heads.n_members
    assert np.mean(np.sign(at_centers) == offsets) > 0.9
    assert np.mean(np.abs(at_centers - share * offsets)) < 0.3
    assert_allclose(heads.predict(np.array([[60.0, -40.0]]), xp=xp), 0.0, atol=1e-9)


def test_pure_noise_is_not_kept():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, size=(400, 2))
    R = rng.standard_normal((400, 1))
    kept = [
        fit_null_key_heads(
            X, R, np.ones(400), np.arange(400), rng=np.random.default_rng(s), xp=xp
        )
        for s in range(4)
    ]
    assert sum(k is not None for k in kept) <= 1


def test_only_the_learnable_rows_fit_and_too_few_give_no_stage(monkeypatch):
    X, R, _, _ = _clusters(4)
    learnable = np.arange(0, X.shape[0], 2)
    seen = []
    fit_member = null_key._fit_member

    def recording(X, R, sw, rows, **kwargs):
        seen.append(rows)
        return fit_member(X, R, sw, rows, **kwargs)

    monkeypatch.setattr(null_key, "_fit_member", recording)
    fit_null_key_heads(
        X, R, np.ones(X.shape[0]), learnable, rng=np.random.default_rng(0), xp=xp
    )
    assert len(seen) == null_key.N_MEMBERS
    assert all(np.array_equal(rows, learnable) for rows in seen)
    # Rows of weight zero are not learnable, and fewer than MIN_ROWS give none.
    sw = np.zeros(X.shape[0])
    sw[: null_key.MIN_ROWS - 1] = 1.0
    assert (
        fit_null_key_heads(
            X, R, sw, np.arange(X.shape[0]), rng=np.random.default_rng(0), xp=xp
        )
        is None
    )


@pytest.mark.parametrize(
    "changes, clear",
    [
        ([-1.0, -1.2, -0.8, -1.1], True),
        ([-1.0, 1.0, -1.0, 1.2], False),
        ([-0.5], False),
    ],
)
def test_the_gain_must_exceed_its_standard_error(changes, clear):
    assert null_key._clear_gain(np.asarray(changes)) is clear
