"""Exact copies of a query among the training rows, and their blend."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._shared.duplicates import DuplicateIndex, fit_duplicate_weight


def _records(n=240, p=4, n_distinct=120, seed=0):
    """Rows drawn from ``n_distinct`` records (so many repeat), each record's
    target a smooth function plus its own noise, shared by its copies."""
    rng = np.random.default_rng(seed)
    records = rng.integers(0, 5, size=(n_distinct, p)).astype(float)
    records += rng.standard_normal((n_distinct, p))
    target = np.sin(records[:, 0]) + records[:, 1] + rng.standard_normal(n_distinct)
    pick = rng.integers(0, n_distinct, size=n)
    return records[pick], target[pick]


def _brute_force(X_train, Y, sw, Q):
    """For each query: found, and the weighted mean target of equal rows."""
    found, means = [], []
    for q in Q:
        same = np.all(X_train == q, axis=1) & (sw > 0)
        found.append(bool(same.any()))
        w = sw * same
        means.append(w @ Y / w.sum() if same.any() else np.zeros(Y.shape[1]))
    return np.array(found), np.array(means)


def test_lookup_matches_brute_force(ns):
    X, y = _records()
    rng = np.random.default_rng(1)
    Y = np.column_stack([y, -2 * y])
    sw = rng.uniform(0.5, 2.0, len(y))
    sw[:10] = 0.0  # zero-weight rows are no copies
    Q = np.vstack([X[::7], X[:10], X[:5] + 1e-12, rng.standard_normal((5, 4))])
    with ns.context():
        index = DuplicateIndex(ns.asarray(X), ns.asarray(Y), ns.asarray(sw), xp=ns.xp)
        group, found = index.lookup(ns.asarray(Q), xp=ns.xp)
        means = index.means(group, ns.xp.float64, xp=ns.xp)
        found_np = ns.check_output(found)
        means_np = ns.check_output(means)
    expected_found, expected_means = _brute_force(X, Y, sw, Q)
    assert np.array_equal(found_np, expected_found)
    assert not found_np[-10:].any()  # perturbed and new rows have no copy
    assert_allclose(means_np[found_np], expected_means[found_np], rtol=1e-10)


def test_left_out_means_leave_the_row_out(ns):
    X, y = _records()
    Y = y[:, None]
    sw = np.random.default_rng(2).uniform(0.5, 2.0, len(y))
    rows = np.arange(0, len(y), 3)
    with ns.context():
        index = DuplicateIndex(ns.asarray(X), ns.asarray(Y), ns.asarray(sw), xp=ns.xp)
        means, found = index.left_out_means(
            ns.asarray(rows), ns.asarray(Y), ns.asarray(sw[rows]), xp=ns.xp
        )
        means_np, found_np = ns.check_output(means), ns.check_output(found)
    for k, i in enumerate(rows):
        others = np.all(X == X[i], axis=1)
        others[i] = False
        assert found_np[k] == others.any()
        if others.any():
            expected = sw[others] @ Y[others] / sw[others].sum()
            assert_allclose(means_np[k], expected, rtol=1e-10)


def test_blend_weight_from_leave_one_out():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((300, 1))
    F = Y + 0.5 * rng.standard_normal((300, 1))  # a noisy estimate
    found = np.arange(300) % 2 == 0
    sw = np.full(300, 1 / 300)
    # Copies that carry the target exactly: all weight on them.
    assert fit_duplicate_weight(Y, F, Y, found, sw) == pytest.approx(1.0)
    # Copies unrelated to the target: little weight.
    unrelated = rng.standard_normal((300, 1))
    assert fit_duplicate_weight(Y, F, unrelated, found, sw) < 0.3
    # No copies: no blend.
    assert fit_duplicate_weight(Y, F, Y, np.zeros(300, dtype=bool), sw) == 0.0


def test_duplicated_records_are_learned_and_blended():
    X, y = _records()
    reg = NWAttentionRegressor(random_state=0).fit(X, y)
    assert reg.duplicate_weight_ > 0.5
    # A training record's prediction moves towards its copies' target, from
    # the heads' NW estimate (a head's own weights hold no blend).
    query = X[:20]
    nw = reg.attention_weights(query, head=0) @ y
    expected = (1 - reg.duplicate_weight_) * nw + reg.duplicate_weight_ * y[:20]
    assert_allclose(reg.predict(query), expected, rtol=1e-10, atol=1e-10)
    # Queries without copies get the NW estimate.
    far = X[:20] + 0.37
    assert_allclose(reg.predict(far), reg.attention_weights(far, head=0) @ y)
    plain = NWAttentionRegressor(random_state=0, duplicate_weight=0).fit(X, y)
    assert plain.duplicate_weight_ == 0.0
    assert_allclose(plain.predict(query), plain.attention_weights(query) @ y)


def test_heads_learn_from_merged_copies():
    """With the blend on, the projection is learned on the distinct rows,
    each weighted by its copies' total weight, with their mean target (the
    weighted mean's readout, which keeps the fitted width)."""
    X, y = _records()
    reg = NWAttentionRegressor(random_state=0, local_fit="constant").fit(X, y)
    rows, inverse, counts = np.unique(
        X, axis=0, return_inverse=True, return_counts=True
    )
    means = np.bincount(inverse.ravel(), y) / counts
    merged = NWAttentionRegressor(
        random_state=0, duplicate_weight=0, local_fit="constant"
    ).fit(rows, means, sample_weight=counts)
    assert_allclose(reg.components_, merged.components_, rtol=1e-6, atol=1e-8)


def test_fixed_weight_one_predicts_the_copies_mean():
    X, y = _records()
    sw = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    reg = MultiHeadNWRegressor(n_heads=2, duplicate_weight=1.0, random_state=0)
    reg.fit(X, y, sample_weight=sw)
    assert reg.duplicate_weight_ == 1.0
    _, expected = _brute_force(X, y[:, None], sw, X[:15])
    assert_allclose(reg.predict(X[:15]), expected[:, 0], rtol=1e-10)


@pytest.mark.parametrize("kernel", ["softmax", "epanechnikov"])
def test_weights_and_std_include_the_blend(kernel):
    """``attention_weights(X) @ y`` is the prediction, and ``return_std``'s
    spread is the norm of those weights, with the blend included."""
    X, y = _records()
    reg = MultiHeadNWRegressor(n_heads=2, kernel=kernel, random_state=0).fit(X, y)
    assert reg.duplicate_weight_ > 0
    Xq = np.vstack([X[:30], X[:10] + 0.2])
    weights = reg.attention_weights(Xq)
    dense = weights.toarray() if hasattr(weights, "toarray") else weights
    pred, std = reg.predict(Xq, return_std=True)
    assert_allclose(dense @ y, reg.predict(Xq), rtol=1e-10, atol=1e-12)
    assert_allclose(pred, reg.predict(Xq), rtol=1e-12)
    assert_allclose(dense.sum(axis=1), 1.0, rtol=1e-12)
    spread = np.sqrt((dense**2).sum(axis=1))
    assert_allclose(std, spread * reg.predictor_.combination.noise_std[0], rtol=1e-10)
    # A single head's weights are its own, without the blend.
    head = reg.attention_weights(Xq, head=0)
    head = head.toarray() if hasattr(head, "toarray") else head
    assert not np.allclose(head, dense)


def test_estimator_on_strict_device(ns):
    X, y = _records()
    with ns.context():
        reg = MultiHeadNWRegressor(n_heads=2, random_state=0, bvc_resamples=0)
        reg.fit(ns.asarray(X), ns.asarray(y))
        pred = ns.check_output(reg.predict(ns.asarray(X[:25])))
        weights = ns.check_output(reg.attention_weights(ns.asarray(X[:25])))
    ref = MultiHeadNWRegressor(n_heads=2, random_state=0, bvc_resamples=0).fit(X, y)
    assert reg.duplicate_weight_ == pytest.approx(ref.duplicate_weight_)
    assert_allclose(pred, ref.predict(X[:25]), rtol=1e-9)
    assert_allclose(weights @ y, pred, rtol=1e-9)
    # Pickled, the index moves to the host with the rest of the model.
    loaded = pickle.loads(pickle.dumps(reg))
    assert_allclose(loaded.predict(X[:25]), pred, rtol=1e-12)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10**6), st.floats(0.0, 1.0))
def test_blended_predictions_stay_in_the_target_range(seed, weight):
    X, y = _records(n=60, n_distinct=25, seed=seed % 1000)
    reg = NWAttentionRegressor(max_iter=5, duplicate_weight=weight, random_state=seed)
    pred = reg.fit(X, y).predict(np.vstack([X, X + 0.1]))
    assert np.all(pred >= y.min() - 1e-9) and np.all(pred <= y.max() + 1e-9)


def test_identical_rows_fit_and_predict_their_mean():
    """Every row the same: nothing to merge into two records, nothing for the
    blend to add (the copies' mean is the NW estimate); the model predicts
    the (weighted) mean."""
    X = np.ones((12, 3))
    y = np.arange(12.0)
    reg = MultiHeadNWRegressor(n_heads=2, random_state=0).fit(X, y)
    assert reg.duplicate_weight_ == 0.0
    assert_allclose(reg.predict(X[:2]), y.mean())
    X2 = np.vstack([np.zeros((6, 3)), np.ones((6, 3))])
    reg = NWAttentionRegressor(random_state=0).fit(X2, y)
    assert np.all(np.isfinite(reg.predict(X2)))
