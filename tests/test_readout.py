"""The heads' readouts: the local constant and the local-linear fit from
the attention's sums."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from nwensemble._shared.readout import CONSTANT, Readout, line_sums, target_range

xp = np


def _attention(rng, m, n, d):
    """Queries, keys, targets and positive attention (m, n) between them."""
    Q = rng.normal(size=(m, d))
    Z = rng.normal(size=(n, d))
    E = np.exp(-0.5 * ((Q[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    return Q, Z, E


def _sums(readout, E, Y, Z):
    return E @ readout.columns(Y, Z, xp=xp)


def _line_at_query(w, Y, Z, q, penalty):
    """Brute force: minimise sum_j w_j (y_j - a - b.(z_j - q))^2 + penalty
    |b|^2 and return a."""
    U = np.hstack([np.ones((Z.shape[0], 1)), Z - q])
    P = np.diag([0.0] + [penalty] * Z.shape[1])
    A = U.T @ (w[:, None] * U) + P
    return np.linalg.solve(A, U.T @ (w[:, None] * Y))[0]


def _penalty(readout, w, Z, q):
    d = Z.shape[1]
    spread = (w * ((Z - q) ** 2).sum(1)).sum() / w.sum() / d
    floor = 1e-10 * (1 + (w * (Z**2).sum(1)).sum() / w.sum() / d)
    return (readout.ridge * spread + floor) * w.sum()


def test_constant_readout_is_the_weighted_mean():
    rng = np.random.default_rng(0)
    Q, Z, E = _attention(rng, 5, 30, 2)
    Y = rng.normal(size=(30, 2))
    num = _sums(CONSTANT, E, Y, Z)
    assert num.shape == (5, 3)
    assert_allclose(CONSTANT.estimate(num, Q, xp=xp), (E @ Y) / E.sum(1)[:, None])


@pytest.mark.parametrize("ridge", [1e-3, 0.1, 3.0])
def test_local_linear_estimate_is_the_weighted_ridge_line(ridge):
    rng = np.random.default_rng(1)
    Q, Z, E = _attention(rng, 6, 40, 3)
    Y = rng.normal(size=(40, 2))
    readout = Readout(ridge)
    num = _sums(readout, E, Y, Z)
    got = readout.estimate(num, Q, xp=xp)
    for r in range(6):
        w = E[r] / E[r].sum()
        expected = _line_at_query(w, Y, Z, Q[r], _penalty(readout, w, Z, Q[r]))
        assert_allclose(got[r], expected, rtol=1e-8, atol=1e-10)


def test_local_linear_reproduces_a_linear_target():
    rng = np.random.default_rng(2)
    Q, Z, E = _attention(rng, 8, 50, 3)
    y = (1.5 + Z @ np.array([2.0, -1.0, 0.5]))[:, None]
    readout = Readout(1e-9)
    got = readout.estimate(_sums(readout, E, y, Z), Q, xp=xp)
    assert_allclose(got[:, 0], 1.5 + Q @ np.array([2.0, -1.0, 0.5]), rtol=1e-6)
    # The weighted mean is biased toward the keys' centre.
    flat = CONSTANT.estimate(_sums(CONSTANT, E, y, Z), Q, xp=xp)
    assert np.abs(flat - got).max() > 0.1


def test_local_linear_weights_sum_to_one_and_give_the_estimate():
    rng = np.random.default_rng(3)
    Q, Z, E = _attention(rng, 7, 35, 2)
    Y = rng.normal(size=(35, 1))
    readout = Readout(0.05)
    num = _sums(readout, E, Y, Z)
    W = readout.weights(E, num, Q, Z, xp=xp)
    assert_allclose(W.sum(1), 1.0, rtol=1e-10)
    assert_allclose(W @ Y, readout.estimate(num, Q, xp=xp), rtol=1e-9, atol=1e-12)
    assert (W < 0).any()  # a line weighs some keys negatively


@pytest.mark.parametrize("ridge", [math.inf, 0.02, 1.0])
def test_left_out_estimates_refit_without_the_key(ridge):
    rng = np.random.default_rng(4)
    Q, Z, E = _attention(rng, 4, 25, 2)
    Y = rng.normal(size=(25, 1))
    readout = Readout(ridge)
    num = _sums(readout, E, Y, Z)
    rows = np.array([0, 3, 7, 24])
    est, left = readout.left_out(E, num, Q, Z[rows], Y[rows], rows, xp=xp)
    assert_allclose(est, readout.estimate(num, Q, xp=xp))
    for r in range(4):
        w = E[r] / E[r].sum()
        for c, i in enumerate(rows):
            keep = np.ones(25, dtype=bool)
            keep[i] = False
            if readout.is_constant:
                expected = (w[keep] @ Y[keep]) / w[keep].sum()
            else:
                # The ridge's scale is held at the full weights'.
                pen = _penalty(readout, w, Z, Q[r])
                expected = _line_at_query(w[keep], Y[keep], Z[keep], Q[r], pen)
            assert_allclose(left[r, c], expected, rtol=1e-7, atol=1e-10)


def test_local_linear_is_clipped_to_the_targets_range():
    rng = np.random.default_rng(5)
    Z = rng.uniform(-1, 1, size=(60, 1))
    y = 3.0 * Z
    Q = np.array([[4.0], [-4.0], [0.0]])  # far outside the keys
    E = np.exp(-0.5 * ((Q - Z.T) / 2.0) ** 2)
    low, high = target_range(y, np.ones(60), xp=xp)
    readout = Readout(1e-6, low, high)
    got = readout.estimate(_sums(readout, E, y, Z), Q, xp=xp)[:, 0]
    assert got[0] == pytest.approx(y.max())
    assert got[1] == pytest.approx(y.min())
    assert abs(got[2]) < 0.1


def test_a_query_on_its_only_key_reads_that_key():
    Z = np.array([[0.0, 1.0]])
    Y = np.array([[2.5]])
    readout = Readout(1e-3)
    num = _sums(readout, np.ones((1, 1)), Y, Z)
    assert_allclose(readout.estimate(num, Z, xp=xp), Y)


def test_target_range_ignores_rows_of_weight_zero():
    Y = np.array([[1.0, -1.0], [5.0, 0.0], [-9.0, 9.0]])
    low, high = target_range(Y, np.array([1.0, 2.0, 0.0]), xp=xp)
    assert_allclose(low, [1.0, -1.0])
    assert_allclose(high, [5.0, 0.0])


@pytest.mark.parametrize(
    "readout", [CONSTANT, Readout(ridge=0.1), Readout(ridge=0.1, squares=True)]
)
@pytest.mark.parametrize("t, d", [(1, 1), (1, 4), (3, 2)])
def test_n_columns_counts_the_columns(readout, t, d):
    """``n_columns`` is the width of ``columns`` for ``t`` targets and a
    ``d``-dimensional head."""
    rng = np.random.default_rng(0)
    Y, Z = rng.standard_normal((5, t)), rng.standard_normal((5, d))
    width = readout.columns(Y, Z, xp=np).shape[1]
    assert readout.n_columns(t, d) == width


def _quadratic_at_query(w, Y, Z, q):
    """Brute force: the unpenalised fit of ``a + b.(z - q) + c.(z - q)^2``
    (each coordinate's square, no cross terms) at the query, ``a``."""
    U = np.hstack([np.ones((Z.shape[0], 1)), Z - q, (Z - q) ** 2])
    A = U.T @ (w[:, None] * U)
    return np.linalg.solve(A, U.T @ (w[:, None] * Y))[0]


def test_local_quadratic_is_the_weighted_fit_with_each_coordinates_square():
    """Without a ridge, the fit in the coordinates and their squares is the
    local quadratic centred on the query (the same span of functions)."""
    rng = np.random.default_rng(6)
    Q, Z, E = _attention(rng, 6, 60, 2)
    Y = rng.normal(size=(60, 2))
    readout = Readout(1e-12, squares=True)
    got = readout.estimate(_sums(readout, E, Y, Z), Q, xp=xp)
    for r in range(6):
        w = E[r] / E[r].sum()
        assert_allclose(got[r], _quadratic_at_query(w, Y, Z, Q[r]), rtol=1e-6)


def test_local_quadratic_reproduces_a_sum_of_parabolas():
    """A target that is a parabola in each coordinate is read exactly; a
    line is not."""
    rng = np.random.default_rng(7)
    Q, Z, E = _attention(rng, 8, 80, 2)

    def f(P):
        return (1.0 + P[:, 0] ** 2 - 0.5 * P[:, 1] ** 2 + 0.3 * P[:, 1])[:, None]

    quadratic = Readout(1e-9, squares=True)
    got = quadratic.estimate(_sums(quadratic, E, f(Z), Z), Q, xp=xp)
    assert_allclose(got, f(Q), rtol=1e-6, atol=1e-8)
    line = Readout(1e-9)
    assert np.abs(line.estimate(_sums(line, E, f(Z), Z), Q, xp=xp) - f(Q)).max() > 0.1


def test_local_quadratic_weights_and_left_out_estimates():
    """The quadratic's weights sum to one and give its estimate; its
    left-out estimates are the fit refitted without the key."""
    rng = np.random.default_rng(8)
    Q, Z, E = _attention(rng, 4, 40, 2)
    Y = rng.normal(size=(40, 1))
    readout = Readout(1e-12, squares=True)
    num = _sums(readout, E, Y, Z)
    W = readout.weights(E, num, Q, Z, xp=xp)
    assert_allclose(W.sum(1), 1.0, rtol=1e-9)
    assert_allclose(W @ Y, readout.estimate(num, Q, xp=xp), rtol=1e-8, atol=1e-10)
    est, factors = readout.weight_factors(num, Q, xp=xp)
    design = np.hstack([np.ones((40, 1)), readout.design(Z, xp=xp)])
    assert_allclose(E * (factors @ design.T), W, rtol=1e-8, atol=1e-12)
    rows = np.array([1, 5, 39])
    est, left = readout.left_out(E, num, Q, Z[rows], Y[rows], rows, xp=xp)
    for r in range(4):
        w = E[r] / E[r].sum()
        for c, i in enumerate(rows):
            keep = np.arange(40) != i
            expected = _quadratic_at_query(w[keep], Y[keep], Z[keep], Q[r])
            assert_allclose(left[r, c], expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("t, d", [(1, 1), (1, 3), (2, 2)])
def test_line_sums_are_the_lines_columns_within_the_quadratics(t, d):
    rng = np.random.default_rng(9)
    Q, Z, E = _attention(rng, 3, 20, d)
    low, high = np.full(t, -2.0), np.full(t, 3.0)
    Y = rng.normal(size=(20, t))
    line = Readout(0.1, low, high)
    quadratic = Readout(0.1, low, high, squares=True)
    assert_allclose(
        line_sums(_sums(quadratic, E, Y, Z), t, d, xp=xp), _sums(line, E, Y, Z)
    )


@pytest.mark.parametrize("squares", [False, True])
def test_ridge_estimates_are_each_ridges_estimate(squares):
    """The batched estimates of several ridges from one set of sums equal
    each ridge's own readout's, clipped alike."""
    rng = np.random.default_rng(10)
    Q, Z, E = _attention(rng, 7, 50, 3)
    Y = rng.normal(size=(50, 2))
    low, high = np.full(2, -1.5), np.full(2, 1.5)
    readout = Readout(1.0, low, high, squares=squares)
    num = _sums(readout, E, Y, Z)
    ridges = [1e-3, 0.1, 10.0]
    got = readout.ridge_estimates(num, Q, ridges, xp=xp)
    assert got.shape == (3, 7, 2)
    for k, ridge in enumerate(ridges):
        own = Readout(ridge, low, high, squares=squares)
        assert_allclose(got[k], own.estimate(num, Q, xp=xp), rtol=1e-10, atol=1e-12)
