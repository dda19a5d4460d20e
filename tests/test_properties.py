"""Property tests (hypothesis) for the NW invariants."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)


grid = st.integers(-100, 100).map(float)


@st.composite
def problems(draw, min_rows=3, max_rows=25, elements=finite):
    n = draw(st.integers(min_rows, max_rows))
    p = draw(st.integers(1, 4))
    X = draw(arrays(np.float64, (n, p), elements=elements))
    y = draw(arrays(np.float64, (n,), elements=finite))
    Xq = draw(arrays(np.float64, (5, p), elements=st.floats(-1e4, 1e4, width=64)))
    return X, y, Xq


@settings(max_examples=40, deadline=None)
@given(problems(), st.sampled_from([0, 5]), st.sampled_from(["auto", "linear"]))
def test_predictions_within_target_range(problem, max_iter, local_fit):
    """Every prediction lies inside [min y, max y]: a convex combination, or
    a local line clipped there."""
    X, y, Xq = problem
    reg = NWAttentionRegressor(
        max_iter=max_iter, local_fit=local_fit, random_state=0
    ).fit(X, y)
    pred = reg.predict(np.vstack([X, Xq]))
    assert np.all(np.isfinite(pred))
    span = 1e-9 * max(1.0, np.abs(y).max())
    assert np.all(pred >= y.min() - span) and np.all(pred <= y.max() + span)


@settings(max_examples=30, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_permuting_training_rows_changes_nothing(problem, random):
    """The NW estimate does not depend on the order of the training rows."""
    X, y, Xq = problem
    perm = np.array(random.sample(range(len(y)), len(y)))
    init = np.eye(X.shape[1]) / (1.0 + X.std())
    a = NWAttentionRegressor(init=init, max_iter=0, standardize=False).fit(X, y)
    b = NWAttentionRegressor(init=init, max_iter=0, standardize=False).fit(
        X[perm], y[perm]
    )
    assert_allclose(
        a.predict(Xq), b.predict(Xq), rtol=1e-9, atol=1e-9 * np.abs(y).max()
    )


@settings(max_examples=30, deadline=None)
@given(problems(min_rows=4, elements=grid), st.integers(0, 3))
def test_tiny_bandwidth_reproduces_nearest_neighbour(problem, row):
    """With a tiny bandwidth, a query next to a training row gets its target."""
    X, y, _ = problem
    # Distinct rows only: duplicates share their targets' average.
    X, idx = np.unique(X, axis=0, return_index=True)
    y = y[idx]
    if len(y) < 2:
        return
    row = row % len(y)
    gaps = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    gap = gaps[gaps > 0].min()
    init = np.eye(X.shape[1]) * (60.0 / gap)
    reg = NWAttentionRegressor(init=init, max_iter=0, standardize=False).fit(X, y)
    query = X[row : row + 1] + 0.01 * gap
    assert_allclose(
        reg.predict(query), y[row : row + 1], rtol=1e-6, atol=1e-6 * np.abs(y).max()
    )


@settings(max_examples=15, deadline=None)
@given(problems(min_rows=6), st.integers(0, 10**6))
def test_learned_fit_is_reproducible_and_in_range(problem, seed):
    """Learned fits are seeded: same seed, same predictions."""
    X, y, Xq = problem
    a = NWAttentionRegressor(random_state=seed, max_iter=10).fit(X, y).predict(Xq)
    b = NWAttentionRegressor(random_state=seed, max_iter=10).fit(X, y).predict(Xq)
    assert_allclose(a, b)


# One fixed, learned problem per estimator for the scale property: a negative,
# skewed feature (Yeo-Johnson), a positive one (Box-Cox) and repeated rows.
def _scale_problem():
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=60, n_features=5, noise=0.3, random_state=0)
    X[:, 1] = np.exp(3 * X[:, 1]) - 1.5
    X[5:8], y[5:8] = X[:3], y[:3] + 0.1
    return X, y, X[:12] + 0.05


SCALE_MODELS = {
    "NWAttention": lambda: NWAttentionRegressor(max_iter=5, random_state=0),
    "MultiHeadNW": lambda: MultiHeadNWRegressor(
        n_heads=2, head_dim=2, max_iter=5, random_state=0
    ),
    "compact kernel": lambda: NWAttentionRegressor(
        kernel="epanechnikov", max_iter=5, random_state=0
    ),
}
_SCALE_BASE = {}


@pytest.mark.filterwarnings("ignore:The bias-variance-covariance parts")
@pytest.mark.parametrize("name", list(SCALE_MODELS))
@settings(max_examples=8, deadline=None)
@given(exponent=st.integers(-300, 300), mantissa=st.floats(1.0, 9.99))
def test_predictions_invariant_in_x_and_equivariant_in_y_scale(
    name, exponent, mantissa
):
    """Scaling X by c leaves predictions alone; scaling y by c scales them
    (and their standard errors) by c, for c from 1e-300 to 1e300."""
    X, y, Xq = _scale_problem()
    if name not in _SCALE_BASE:
        _SCALE_BASE[name] = SCALE_MODELS[name]().fit(X, y).predict(Xq, return_std=True)
    pred, std = _SCALE_BASE[name]
    c = mantissa * 10.0**exponent
    tol = 1e-6 * np.ptp(y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow anywhere
        warnings.filterwarnings("ignore", "The bias-variance-covariance parts")
        px, sx = SCALE_MODELS[name]().fit(X * c, y).predict(Xq * c, return_std=True)
        py, sy = SCALE_MODELS[name]().fit(X, y * c).predict(Xq, return_std=True)
    assert_allclose(px, pred, atol=tol)
    assert_allclose(sx, std, atol=tol)
    assert_allclose(py / c, pred, atol=tol)
    assert_allclose(sy / c, std, atol=tol)


@settings(max_examples=25, deadline=None)
@given(problems(min_rows=4), st.sampled_from(["constant", "linear"]))
def test_every_head_predicts_within_target_range(problem, local_fit):
    """Each head's estimate lies inside [min y, max y], queries far outside
    the data included."""
    X, y, Xq = problem
    model = MultiHeadNWRegressor(
        n_heads=2, head_dim=1, max_iter=3, local_fit=local_fit, bvc_resamples=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    predictor = model.predictor_
    Q = predictor.project(np.vstack([X, Xq]))
    heads = np.asarray(predictor.keys.passes().head_estimates(Q))[..., 0]
    assert np.all(np.isfinite(heads))
    span = 1e-9 * max(1.0, np.abs(y).max())
    assert np.all(heads >= y.min() - span) and np.all(heads <= y.max() + span)
