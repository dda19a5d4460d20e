"""Head diversity, principal angles and the bias-variance-covariance split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from nwensemble import MultiHeadNWRegressor
from nwensemble.diagnostics import (
    bvc_decomposition,
    head_diversity_index,
    principal_angles,
    subspace_similarity,
)


def _orthogonal(p, rng):
    Q, _ = np.linalg.qr(rng.standard_normal((p, p)))
    return Q


def _mix(components, rng):
    """The same subspaces in other bases: each head times a random invertible
    matrix."""
    d = components.shape[1]
    mixers = [rng.standard_normal((d, d)) + 3 * np.eye(d) for _ in components]
    return np.stack([M @ C for M, C in zip(mixers, components)])


heads_and_dims = st.tuples(
    st.integers(2, 5), st.integers(1, 3), st.integers(0, 4), st.integers(0, 2**31)
)


@given(heads_and_dims)
def test_hdi_is_one_for_orthogonal_and_zero_for_shared_subspaces(shape):
    """Pairwise orthogonal subspaces have HDI 1 and heads spanning one subspace
    have HDI 0, in any bases."""
    H, d, extra, seed = shape
    rng = np.random.default_rng(seed)
    Q = _orthogonal(H * d + extra, rng)
    orthogonal = Q[:, : H * d].T.reshape(H, d, -1)
    shared = np.repeat(Q[:, :d].T[None], H, axis=0)
    assert head_diversity_index(_mix(orthogonal, rng)) == pytest.approx(1.0, abs=1e-10)
    assert head_diversity_index(_mix(shared, rng)) == pytest.approx(0.0, abs=1e-10)


@given(heads_and_dims)
def test_hdi_in_unit_interval_and_basis_invariant(shape):
    """Any heads: 0 <= HDI <= 1, unchanged by a change of basis within heads."""
    H, d, extra, seed = shape
    rng = np.random.default_rng(seed)
    p = d + extra
    C = rng.standard_normal((H, d, p)) * rng.uniform(1e-3, 1e3, (H, 1, 1))
    hdi = head_diversity_index(C)
    assert 0.0 <= hdi <= 1.0
    assert head_diversity_index(_mix(C, rng)) == pytest.approx(hdi, abs=1e-9)
    S = subspace_similarity(C)
    assert_allclose(S, S.T)
    assert np.all((S >= 0) & (S <= 1))


def test_principal_angles_known_pair():
    """A plane and a line at 60 degrees to it; zeros on the diagonal."""
    plane = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    line = np.array([[np.cos(np.pi / 3), 0, np.sin(np.pi / 3)], [0, 0, 0]])
    line[1] = 2 * line[0]  # rank one: its second angle is undefined
    angles = principal_angles(np.stack([plane, line]))
    assert_allclose(np.degrees(angles[0, 1, 0]), 60.0)
    assert np.isnan(angles[0, 1, 1])
    assert_allclose(angles[0, 0], 0.0)
    assert_allclose(angles[0, 1, :1], angles[1, 0, :1])


def test_hdi_single_head_is_nan():
    """Diversity is undefined for one head."""
    assert np.isnan(head_diversity_index(np.eye(2, 3)))


@pytest.mark.parametrize(
    "components, match",
    [
        (np.zeros((3,)), "shape"),
        (np.array([[[np.nan, 1.0]]]), "NaN"),
        (np.zeros((2, 1, 3)), "all-zero"),
    ],
)
def test_subspace_functions_reject_bad_input(components, match):
    with pytest.raises(ValueError, match=match):
        head_diversity_index(components)


def _fixed_heads_model(X, y, H, d, seed):
    """A multi-head model with random projections held as given (no training)."""
    rng = np.random.default_rng(seed)
    init = rng.standard_normal((H, d, X.shape[1]))
    return MultiHeadNWRegressor(
        n_heads=H, head_dim=d, init=init, max_iter=0, bvc_resamples=0
    ).fit(X, y)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 4),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(20, 60),
    st.integers(2, 6),
    st.integers(0, 2**31),
)
def test_bvc_parts_add_up_to_the_mse(H, d, t, n, n_resamples, seed):
    """mse = bias2 + variance / H + (1 - 1/H) covariance to 1e-9 relative."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * rng.uniform(0.1, 10)
    y = rng.standard_normal((n, t)) + 100 * rng.standard_normal()
    y = y[:, 0] if t == 1 else y
    model = _fixed_heads_model(X, y, H, d, seed)
    parts = bvc_decomposition(model, X, y, n_resamples=n_resamples, random_state=seed)
    total = parts.bias2 + parts.variance / H + (1 - 1 / H) * parts.covariance
    assert parts.n_heads == H
    assert total == pytest.approx(parts.mse, rel=1e-9)
    assert parts.bias2 >= 0 and parts.variance >= 0


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 4), st.integers(30, 80), st.integers(0, 2**31))
def test_bvc_with_f_true_splits_off_the_noise(H, n, seed):
    """With f*, noise + bias2 + variance / H + (1 - 1/H) covariance = mse; the
    noise, bias, variance and mse are non-negative. The covariance is a
    covariance: hypothesis found it at -5e-4 (2 heads, 30 rows), so it is only
    bounded by the variance (Cauchy-Schwarz), not by zero."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    f = np.sin(3 * X[:, 0]) + X[:, 1]
    y = f + 0.5 * rng.standard_normal(n)
    model = _fixed_heads_model(X, y, H, 1, seed)
    parts = bvc_decomposition(model, X, y, n_resamples=5, f_true=f, random_state=0)
    total = (
        parts.noise + parts.bias2 + parts.variance / H + (1 - 1 / H) * parts.covariance
    )
    assert total == pytest.approx(parts.mse, rel=1e-9)
    for name in ("noise", "bias2", "variance", "mse"):
        assert parts[name] >= 0, name
    assert abs(parts.covariance) <= parts.variance * (1 + 1e-12)


def test_identical_heads_have_covariance_equal_to_variance():
    """Heads with one projection: no variance reduction, covariance = variance."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3))
    y = X[:, 0] + 0.3 * rng.standard_normal(80)
    init = np.repeat(rng.standard_normal((1, 2, 3)), 3, axis=0)
    model = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, init=init, max_iter=0, bvc_resamples=0
    ).fit(X, y)
    parts = bvc_decomposition(model, X, y, n_resamples=8, random_state=0)
    assert parts.covariance == pytest.approx(parts.variance, rel=1e-9)
    assert model.hdi_ == pytest.approx(0.0, abs=1e-12)


def test_bvc_same_under_namespaces(ns):
    """NumPy and array_api_strict give the same decomposition."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 4))
    y = X[:, 0] - X[:, 1] ** 2 + 0.2 * rng.standard_normal(60)
    ref = _fixed_heads_model(X, y, 3, 2, 0)
    expected = bvc_decomposition(ref, X, y, n_resamples=4, random_state=0)
    with ns.context():
        Xn, yn = ns.asarray(X), ns.asarray(y)
        model = _fixed_heads_model(Xn, yn, 3, 2, 0)
        got = bvc_decomposition(model, Xn, yn, n_resamples=4, random_state=0)
    for key in ("mse", "bias2", "variance", "covariance"):
        assert got[key] == pytest.approx(expected[key], rel=1e-10)


def test_bvc_rejects_bad_input():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((30, 3)), rng.standard_normal(30)
    model = _fixed_heads_model(X, y, 2, 1, 0)
    with pytest.raises(ValueError, match="shape"):
        bvc_decomposition(model, X, y[:10])
    with pytest.raises(ValueError, match="n_resamples"):
        bvc_decomposition(model, X, y, n_resamples=0)
    with pytest.raises(ValueError, match="NaN"):
        bvc_decomposition(model, X, np.full(30, np.nan))
    with pytest.raises(ValueError, match="f_true"):
        bvc_decomposition(model, X, y, f_true=np.ones(5))
