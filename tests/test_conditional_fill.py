"""A missing numeric value sits at its conditional mean given the row's
observed features, under correlations shrunk towards the identity."""

import numpy as np
import pytest
from helpers import shrunk_correlation
from numpy.testing import assert_allclose

from nwensemble._shared.conditional_fill import fill_missing, fit_correlation


def _gaussian(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    C = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 1.0]])
    X = rng.multivariate_normal(np.zeros(3), C, size=n)
    return (X - X.mean(0)) / X.std(0), C


def test_the_fill_is_the_gaussian_conditional_mean(ns):
    X, _ = _gaussian()
    valid = np.ones(X.shape, dtype=bool)
    xp = ns.xp
    C = fit_correlation(
        ns.asarray(X), ns.asarray(valid), ns.asarray(np.full(len(X), 1 / len(X))), xp=xp
    )
    C = ns.check_output(C)
    expected, lam = shrunk_correlation(X)
    assert 0 < lam < 0.01  # 4000 rows of strong correlations: little noise
    assert_allclose(C, expected, atol=1e-10)
    # Feature 1 missing in one row, feature 0 and 2 in another, none in a third.
    rows = np.array([[0.5, 0.0, -1.0], [0.0, 2.0, 0.0], [0.1, 0.2, 0.3]])
    mask = np.array([[True, False, True], [False, True, False], [True, True, True]])
    out = ns.check_output(
        fill_missing(ns.asarray(rows), ns.asarray(mask), ns.asarray(C), xp=xp)
    )
    o, m = [0, 2], [1]
    expected = C[np.ix_(m, o)] @ np.linalg.solve(C[np.ix_(o, o)], rows[0, o])
    assert_allclose(out[0, 1], expected[0], rtol=1e-6)
    assert_allclose(out[1, [0, 2]], C[[0, 2], 1] * 2.0, rtol=1e-6)
    assert_allclose(out[2], rows[2])
    assert_allclose(out[:2][mask[:2]], rows[:2][mask[:2]])


def test_pairwise_estimate_from_rows_with_missing_cells():
    X, C = _gaussian(n=20000, seed=1)
    rng = np.random.default_rng(2)
    valid = rng.random(X.shape) > 0.3
    Xm = np.where(valid, X, 0.0)
    est = fit_correlation(Xm, valid, np.full(len(X), 1 / len(X)), xp=np)
    assert_allclose(est, C, atol=0.03)
    # The fill recovers the missing entries better than the mean does.
    filled = fill_missing(Xm, valid, est, xp=np)
    miss = ~valid & valid[:, [1, 0, 1]].any(axis=1, keepdims=True)
    assert np.mean((filled - X)[miss] ** 2) < 0.8 * np.mean(X[miss] ** 2)


def test_noise_correlations_are_shrunk_away():
    """Between unrelated features the estimated correlations are noise, and
    shrunk nearly to zero; beside a strong correlation they are shrunk
    little, and the fill of a feature unrelated to the others stays near
    its mean, not scattered by the noise of its correlations."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 5))
    X = (X - X.mean(0)) / X.std(0)
    C, lam = shrunk_correlation(X)
    assert lam > 0.5
    assert_allclose(fit_correlation(X, None, np.full(60, 1 / 60), xp=np), C, atol=1e-12)
    a = rng.standard_normal(60)
    related = np.column_stack([a, a + 0.3 * rng.standard_normal(60), X[:, :3]])
    related = (related - related.mean(0)) / related.std(0)
    C, lam = shrunk_correlation(related)
    assert lam < 0.2
    raw = np.corrcoef(related.T)
    valid = np.ones(related.shape, dtype=bool)
    valid[:, 4] = False
    filled = fill_missing(related, valid, C, xp=np)[:, 4]
    unshrunk = fill_missing(related, valid, raw, xp=np)[:, 4]
    assert np.std(filled) < np.std(unshrunk)


def test_a_row_with_nothing_observed_stays_at_the_mean():
    C = np.array([[1.0, 0.9], [0.9, 1.0]])
    out = fill_missing(np.zeros((1, 2)), np.zeros((1, 2), dtype=bool), C, xp=np)
    assert_allclose(out, 0.0)


def test_collinear_and_never_observed_features_give_a_definite_matrix():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(500)
    X = np.stack([a, a, np.zeros(500)], axis=1)
    valid = np.ones(X.shape, dtype=bool)
    valid[:, 2] = False
    C = fit_correlation(X, valid, np.full(500, 1 / 500), xp=np)
    vals = np.linalg.eigvalsh(C)
    assert vals.min() > 0
    assert_allclose(C[2], [0, 0, 1], atol=1e-2)
    out = fill_missing(
        np.array([[1.5, 0.0, 0.0]]), np.array([[True, False, False]]), C, xp=np
    )
    assert_allclose(out[0, 1], 1.5, rtol=1e-2)
    assert abs(out[0, 2]) < 1e-2


@pytest.mark.parametrize("n", [1, 4097])
def test_blocks_of_rows_give_one_answer(n):
    rng = np.random.default_rng(4)
    valid = rng.random((n, 3)) > 0.4
    X = np.where(valid, rng.standard_normal((n, 3)), 0.0)
    C = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]])
    out = fill_missing(X, valid, C, xp=np)
    for i in {0, n // 2, n - 1}:
        row = fill_missing(X[i : i + 1], valid[i : i + 1], C, xp=np)
        assert_allclose(out[i : i + 1], row, rtol=1e-12)
