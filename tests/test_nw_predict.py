"""NW prediction of the head ensemble against explicit softmax weights."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from test_loo_loss import _problem

from nwensemble._attention import log_weights
from nwensemble._nw_predict import (
    heldout_loss,
    loo_head_predictions,
    loo_predict_with_squared_spread,
    loo_spread,
    nw_head_predictions,
    nw_predict,
    nw_predict_with_spread,
)


def _softmax_weights(Q, Z, sw):
    d2 = ((Q[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    logits = -0.5 * d2 + np.log(sw)
    w = np.exp(logits - logits.max(1, keepdims=True))
    return w / w.sum(1, keepdims=True)


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_nw_predict_is_softmax_average(offset):
    """A prediction is the softmax-weighted mean of targets, also for queries
    far from every key (the underflow fallback)."""
    rng = np.random.default_rng(3)
    Q, Z = rng.standard_normal((7, 3)) + offset, rng.standard_normal((20, 3))
    Y = rng.standard_normal((20, 2))
    sw = np.full(20, 1 / 20)
    got = nw_predict(Q, Z, Y, log_weights(sw, xp=np), xp=np)
    assert_allclose(got, _softmax_weights(Q, Z, sw) @ Y, rtol=1e-9)


def _heads_problem(seed=4, n_heads=3, d=2):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((9, n_heads * d))
    Z = rng.standard_normal((25, n_heads * d))
    Y = rng.standard_normal((25, 2))
    sw = rng.uniform(0.5, 2.0, 25)
    sw /= sw.sum()
    per_head = [
        _softmax_weights(Q[:, h * d : (h + 1) * d], Z[:, h * d : (h + 1) * d], sw)
        for h in range(n_heads)
    ]
    return Q, Z, Y, sw, per_head


def test_head_predictions_and_ensemble_weights():
    """Per-head estimates, their weighted ensemble and the combined weights'
    norm match explicit softmax weights."""
    Q, Z, Y, sw, P = _heads_problem()
    log_sw = log_weights(sw, xp=np)
    heads = nw_head_predictions(Q, Z, Y, log_sw, xp=np, n_heads=3)
    assert_allclose(heads, np.stack([w @ Y for w in P]), rtol=1e-10)
    alpha = [0.5, 0.2, 0.3]
    V = sum(a * w for a, w in zip(alpha, P))
    got = nw_predict(Q, Z, Y, log_sw, xp=np, n_heads=3, head_weights=alpha)
    assert_allclose(got, V @ Y, rtol=1e-10)
    pred, spread = nw_predict_with_spread(
        Q, Z, Y, log_sw, xp=np, n_heads=3, head_weights=alpha
    )
    assert_allclose(pred, V @ Y, rtol=1e-10)
    assert_allclose(spread, np.sqrt((V**2).sum(1)), rtol=1e-10)


def test_prediction_chunks_equal_one_block():
    """Query blocks sized by working_memory give the unchunked result to 1e-12."""
    from sklearn import config_context

    Q, Z, Y, sw, _ = _heads_problem(n_heads=2)
    log_sw = log_weights(sw, xp=np)
    whole = nw_predict_with_spread(Q, Z, Y, log_sw, xp=np, n_heads=2)
    with config_context(working_memory=1e-3):  # ~1 KiB: a few rows per block
        chunked = nw_predict_with_spread(Q, Z, Y, log_sw, xp=np, n_heads=2)
    for a, b in zip(whole, chunked):
        assert_allclose(a, b, rtol=1e-12)


def test_loo_head_predictions_and_spread():
    """Leave-one-out per-head estimates and weight norms match explicit loops."""
    _, Z, Y, sw, _ = _heads_problem(n_heads=2)
    log_sw = log_weights(sw, xp=np)
    alpha = [0.3, 0.7]
    rows = np.arange(Z.shape[0])
    heads = loo_head_predictions(Z, Y, log_sw, rows, xp=np, n_heads=2)
    spread = loo_spread(Z, Y, log_sw, rows, xp=np, n_heads=2, head_weights=alpha)
    # A subset of rows, in blocks of a few rows, gives the same values.
    from sklearn import config_context

    with config_context(working_memory=1e-3):
        part = loo_head_predictions(Z, Y, log_sw, rows[3:17], xp=np, n_heads=2)
        part_spread = loo_spread(
            Z, Y, log_sw, rows[3:17], xp=np, n_heads=2, head_weights=alpha
        )
    assert_allclose(part, heads[:, 3:17], rtol=1e-12)
    assert_allclose(part_spread, spread[3:17], rtol=1e-12)
    for i in range(Z.shape[0]):
        keep = np.arange(Z.shape[0]) != i
        v = np.zeros(keep.sum())
        for h in range(2):
            cols = slice(2 * h, 2 * h + 2)
            w = _softmax_weights(Z[i : i + 1, cols], Z[keep, cols], sw[keep])[0]
            assert_allclose(heads[h, i], w @ Y[keep], rtol=1e-10)
            v += alpha[h] * w
        assert_allclose(spread[i], np.sum(v**2), rtol=1e-10)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_tiled_threaded_loo_equals_explicit_weights(monkeypatch, dtype, rtol):
    """Leave-one-out head estimates of a subset of training rows, in small
    tiles on threads: each row's own key lies in some tile and gets no
    weight; a row far from every other (whose fast-path sum underflows once
    its own weight is gone) takes the stable path, still leaving itself out.
    The same for the ensemble's estimates and the squared norm of its
    weights, which sum products of the heads' attention rows tile by tile."""
    import nwensemble._nw_predict as nw_predict_module

    monkeypatch.setattr(nw_predict_module, "_QUERY_TILE", 4)
    monkeypatch.setattr(nw_predict_module, "_KEY_TILE", 7)
    monkeypatch.setattr(nw_predict_module, "_THREADED_SCORES", 1)
    _, Z, Y, sw, _ = _heads_problem(n_heads=2)
    Z = Z.copy()
    Z[11] += 40.0
    rows = np.array([20, 3, 11, 4, 0, 17, 8, 24, 12, 5, 16])
    args = (Z.astype(dtype), Y.astype(dtype), log_weights(sw.astype(dtype), xp=np))
    heads = loo_head_predictions(*args, rows, xp=np, n_heads=2)
    alpha = [0.3, 0.7]
    pred, spread = loo_predict_with_squared_spread(
        *args, rows, xp=np, n_heads=2, head_weights=alpha
    )
    assert heads.dtype == pred.dtype == spread.dtype == dtype
    for r, i in enumerate(rows):
        keep = np.arange(Z.shape[0]) != i
        v = 0.0
        for h in range(2):
            cols = slice(2 * h, 2 * h + 2)
            w = _softmax_weights(Z[i : i + 1, cols], Z[keep, cols], sw[keep])[0]
            assert_allclose(heads[h, r], w @ Y[keep], rtol=rtol, atol=rtol)
            v = v + alpha[h] * w
        assert_allclose(pred[r], v @ Y[keep], rtol=rtol, atol=rtol)
        assert_allclose(spread[r], np.sum(v**2), rtol=rtol)


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


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_tiled_threaded_prediction_equals_explicit_weights(monkeypatch, dtype, rtol):
    """Small tiles on threads (partial last tiles, a query far from every key
    that takes the stable path, sample weights) give the explicit softmax
    average of every head."""
    import nwensemble._nw_predict as nw_predict_module

    monkeypatch.setattr(nw_predict_module, "_QUERY_TILE", 4)
    monkeypatch.setattr(nw_predict_module, "_KEY_TILE", 7)
    monkeypatch.setattr(nw_predict_module, "_THREADED_SCORES", 1)
    Q, Z, Y, sw, P = _heads_problem()
    Q = Q.copy()
    Q[5] += 40.0  # its fast-path weights underflow
    P = [
        _softmax_weights(Q[:, h * 2 : (h + 1) * 2], Z[:, h * 2 : (h + 1) * 2], sw)
        for h in range(3)
    ]
    alpha = [0.5, 0.2, 0.3]
    got = nw_predict(
        Q.astype(dtype),
        Z.astype(dtype),
        Y.astype(dtype),
        log_weights(sw.astype(dtype), xp=np),
        xp=np,
        n_heads=3,
        head_weights=alpha,
    )
    assert got.dtype == dtype
    V = sum(a * w for a, w in zip(alpha, P))
    assert_allclose(got, V @ Y, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("kernel", ["softmax", "biweight"])
def test_prediction_off_the_host_reads_nothing_back_per_block(count_read_backs, kernel):
    """On a device (array_api_strict stands in), predicting 400 queries in 40
    blocks reads back no more than predicting 20 in one, and gives the host's
    estimates."""
    import array_api_compat
    from sklearn import config_context

    from nwensemble._backend import to_numpy

    xps, counts = count_read_backs
    rng = np.random.default_rng(0)
    Q, Z = rng.standard_normal((400, 4)), rng.standard_normal((300, 4))
    Y = rng.standard_normal((300, 1))
    log_sw = np.zeros(300)
    ref = nw_predict(Q, Z, Y, log_sw, xp=np, n_heads=2, kernel=kernel)
    dev = xps.Device("device1")
    read_backs = {}
    # 10 rows per block (two (rows, 300) float64 blocks in 0.05 MiB), or all.
    for m, memory in ((400, 0.05), (20, 1024)):
        args = [xps.asarray(a, device=dev) for a in (Q[:m], Z, Y, log_sw)]
        xp = array_api_compat.array_namespace(args[0])
        counts["n"] = 0
        with config_context(working_memory=memory):
            out = nw_predict(*args, xp=xp, n_heads=2, kernel=kernel)
        read_backs[m] = counts["n"]
        assert out.device == dev
        assert_allclose(to_numpy(out), ref[:m], rtol=1e-10)
    assert read_backs[400] == read_backs[20]
