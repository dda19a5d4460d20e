import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import nwensemble._fit.lbfgs as lbfgs
import nwensemble._fit.start as start
from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit.row_scales import RowScales

# Zero or normal floats: subnormal entries carry too few bits for a
# relative comparison.
finite = st.one_of(st.just(0.0), st.floats(1e-100, 1e3), st.floats(-1e3, -1e-100))


@settings(max_examples=50, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 5)), elements=finite)
)
def test_start_is_the_projection_split_balanced(W0):
    params = RowScales(W0)
    np.testing.assert_allclose(params.projection(params.start), W0, rtol=1e-12, atol=0)
    p, k = W0.shape
    V, scales = params.start[: p * k].reshape(p, k), params.start[p * k :]
    nonzero = np.any(W0 != 0, axis=1)
    np.testing.assert_allclose(
        np.abs(scales[nonzero]), np.linalg.norm(V[nonzero], axis=1), rtol=1e-12
    )
    # A zero row starts at scale 1, so that its direction can still move.
    assert np.all(scales[~nonzero] == 1.0)


def test_gradient_is_the_chain_rule_of_the_projection():
    rng = np.random.default_rng(0)
    W0 = rng.standard_normal((4, 3))
    W0[2] = 0.0
    params = RowScales(W0)
    A = rng.standard_normal((4, 3))

    def loss(theta):
        W = params.projection(theta)
        return float(np.sum(A * W) + 0.5 * np.sum(W**4))

    theta = params.start + 0.1 * rng.standard_normal(params.start.shape)
    W = params.projection(theta)
    grad = params.gradient(theta, A + 2.0 * W**3)
    step = 1e-6
    numeric = np.array(
        [
            (loss(theta + step * e) - loss(theta - step * e)) / (2 * step)
            for e in np.eye(theta.size)
        ]
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "make, expected",
    [
        # The identity start fits a scale per feature: W's entries.
        (lambda: NWAttentionRegressor(random_state=0), False),
        # Principal axes and random directions keep one scale per head.
        (lambda: NWAttentionRegressor(head_dim=2, random_state=0), True),
        (lambda: MultiHeadNWRegressor(n_heads=2, head_dim=2, random_state=0), True),
    ],
)
def test_row_scales_unless_the_start_fitted_a_scale_per_feature(
    monkeypatch, friedman, make, expected
):
    X, y = friedman
    monkeypatch.setattr(start, "_own_scales_generalise", lambda *a, **k: True)
    seen = _spy_on_parameters(monkeypatch)
    make().fit(X, y)
    assert seen and all(row_scales == expected for row_scales in seen)


def test_an_identity_start_that_kept_one_scale_takes_row_scales(monkeypatch, friedman):
    # Where the features' own scales do not predict new rows better, the
    # identity start keeps the head's common scale: no scale per feature.
    X, y = friedman
    monkeypatch.setattr(start, "_own_scales_generalise", lambda *a, **k: False)
    seen = _spy_on_parameters(monkeypatch)
    NWAttentionRegressor(random_state=0).fit(X, y)
    assert seen == [True]


def test_several_identity_heads_take_row_scales_unless_every_head_kept_its_own(
    monkeypatch, friedman
):
    X, y = friedman
    verdicts = iter([True, False])
    monkeypatch.setattr(start, "_own_scales_generalise", lambda *a, **k: next(verdicts))
    seen = _spy_on_parameters(monkeypatch)
    MultiHeadNWRegressor(n_heads=2, head_dim=2, init="identity", random_state=0).fit(
        X, y
    )
    assert next(verdicts, None) is None  # both heads asked
    assert seen == [True]


def test_a_warm_start_takes_row_scales(monkeypatch, friedman):
    X, y = friedman
    reg = NWAttentionRegressor(warm_start=True, max_iter=5, random_state=0).fit(X, y)
    seen = _spy_on_parameters(monkeypatch)
    reg.fit(X, y)
    assert seen == [True]


def test_categorical_columns_follow_the_same_rule(monkeypatch):
    monkeypatch.setattr(start, "_own_scales_generalise", lambda *a, **k: True)
    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {"x": rng.standard_normal(120), "c": rng.choice(["a", "b", "c"], 120)}
    )
    y = X["x"].to_numpy() + (X["c"] == "b")
    seen = _spy_on_parameters(monkeypatch)
    NWAttentionRegressor(random_state=0).fit(X, y)
    MultiHeadNWRegressor(n_heads=2, head_dim=1, random_state=0).fit(X, y)
    assert seen == [False, True]


def _spy_on_parameters(monkeypatch):
    """Record ``row_scales`` of every L-BFGS fit from here on."""
    seen = []
    original = lbfgs.parameters

    def spy(W0, row_scales):
        seen.append(row_scales)
        return original(W0, row_scales)

    monkeypatch.setattr(lbfgs, "parameters", spy)
    return seen
