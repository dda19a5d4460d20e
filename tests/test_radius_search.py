"""The radius search equals the dense compact attention."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse

import nwensemble._shared.kernels as kernels_module
import nwensemble._shared.radius_search as radius_search
from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._shared.passes import iter_head_attention


@pytest.mark.parametrize("kernel", ["epanechnikov", "biweight", "triweight"])
def test_search_prediction_equals_dense(kernel, monkeypatch, friedman):
    X, y = friedman
    Y2 = np.column_stack([y, np.sin(y)])
    sw = np.random.default_rng(0).uniform(0.0, 2.0, len(y))
    reg = MultiHeadNWRegressor(
        n_heads=2, head_dim=3, kernel=kernel, random_state=0, bvc_resamples=0
    ).fit(X, Y2, sample_weight=sw)
    Xq = np.vstack([X[:60] + 0.1, np.full((1, X.shape[1]), 1e6)])
    monkeypatch.setattr(kernels_module, "SEARCH_MIN_ROWS", 10**9)
    dense = reg.predict(Xq)
    monkeypatch.setattr(kernels_module, "SEARCH_MIN_ROWS", 1)
    # Small search chunks, so the threaded path runs several tasks.
    monkeypatch.setattr(radius_search, "_SEARCH_CHUNK", 16)
    searched = reg.predict(Xq)
    assert_allclose(searched, dense, rtol=1e-12, atol=1e-12)


def test_sparse_weights_equal_dense_weights(friedman, monkeypatch):
    # Several blocks of queries, searched in curve order and put back.
    monkeypatch.setattr(radius_search, "_SEARCH_CHUNK", 8)
    X, y = friedman
    reg = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, kernel="triweight", random_state=0, bvc_resamples=0
    ).fit(X, y)
    Xq = X[:25] - 0.05
    Q = reg.transform(Xq)
    dense = [None] * 3
    for block in iter_head_attention(Q, reg.predictor_.keys):
        dense[block.h] = block.E / block.num[:, -1:]
    for h in range(3):
        got = reg.attention_weights(Xq, head=h)
        assert sparse.issparse(got)
        assert_allclose(got.toarray(), dense[h], rtol=1e-12, atol=1e-15)
    total = reg.attention_weights(Xq)
    expected = sum(a * W for a, W in zip(reg.head_weights_, dense))
    assert_allclose(total.toarray(), expected, rtol=1e-12, atol=1e-15)
    assert total.nnz == np.count_nonzero(expected)


def test_top_k_stays_dense_for_compact_kernels(friedman):
    X, y = friedman
    reg = NWAttentionRegressor(kernel="epanechnikov", random_state=0).fit(X, y)
    weights, rows = reg.attention_weights(X[:5], top_k=3)
    full = reg.attention_weights(X[:5]).toarray()
    assert_allclose(weights, np.sort(full, axis=1)[:, ::-1][:, :3], rtol=1e-12)
    assert_allclose(np.take_along_axis(full, rows, axis=1), weights)


def test_locality_order_is_a_permutation_along_the_curve():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 1))
    # In one dimension the curve is the line: the order sorts.
    assert_array_equal(radius_search.locality_order(x), np.argsort(x[:, 0]))
    P = rng.standard_normal((200, 70))
    P[3, 5], P[7, 0] = np.inf, np.nan
    order = radius_search.locality_order(P)
    assert_array_equal(np.sort(order), np.arange(200))
    # Each quadrant of the plane is one stretch of the curve.
    Q = np.array([[0.1, 0.1], [0.9, 0.9], [0.2, 0.15], [0.85, 0.8]])
    order = radius_search.locality_order(Q)
    assert {frozenset(order[:2]), frozenset(order[2:])} == {
        frozenset({0, 2}),
        frozenset({1, 3}),
    }


def test_no_queries_give_empty_weights(friedman):
    X, y = friedman
    reg = NWAttentionRegressor(kernel="epanechnikov", random_state=0).fit(X, y)
    index = reg.predictor_.keys.support_index
    Q = np.zeros((0, index[0].tree.data.shape[1]))
    K, empty = index[0].weights(Q)
    assert K.shape == (0, X.shape[0]) and empty.shape == (0,)
    Y = reg.predictor_.keys.Y
    assert radius_search.sparse_predict(
        Q, index, Y, n_heads=1, head_weights=[1.0]
    ).shape == (0, Y.shape[1])
