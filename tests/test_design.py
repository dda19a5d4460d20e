"""The rows of a table as a numeric block and embedding codes: the same
linear map as the one-hot matrix, without forming it."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from nwensemble._shared.design import Design, numbers_design


def _problem(seed=0, n=40, p=3, sizes=(4, 2, 7), k=5):
    rng = np.random.default_rng(seed)
    N = rng.standard_normal((n, p))
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    codes = np.stack(
        [rng.integers(0, s, n) + o for s, o in zip(sizes, offsets)], axis=1
    )
    onehot = np.zeros((n, sum(sizes)))
    for j in range(len(sizes)):
        onehot[np.arange(n), codes[:, j]] = 1.0
    W = rng.standard_normal((p + sum(sizes), k))
    return Design(N, codes, int(sum(sizes))), np.hstack([N, onehot]), W


def test_project_and_backproject_equal_the_one_hot_products():
    design, dense, W = _problem()
    assert design.shape == dense.shape
    assert_allclose(design.project(W), dense @ W, rtol=1e-13)
    G = np.random.default_rng(1).standard_normal((dense.shape[0], W.shape[1]))
    assert_allclose(design.backproject(G), dense.T @ G, rtol=1e-12, atol=1e-13)


def test_levels_without_rows_get_zero_gradient():
    design, dense, W = _problem(n=5, sizes=(30,))
    G = np.ones((5, W.shape[1]))
    grad = design.backproject(G)
    assert_allclose(grad, dense.T @ G, atol=1e-14)
    assert np.count_nonzero(np.abs(grad[3:]).sum(axis=1)) <= 5


def test_taken_rows_and_dtype_keep_the_map():
    design, dense, W = _problem(seed=2)
    rows = np.array([5, 0, 17, 17, 33])
    part = design.take(rows)
    assert_allclose(part.project(W), dense[rows] @ W, rtol=1e-13)
    G = np.random.default_rng(3).standard_normal((5, W.shape[1]))
    assert_allclose(part.backproject(G), dense[rows].T @ G, rtol=1e-12, atol=1e-13)
    f32 = design.astype(np.float32)
    assert f32.dtype == np.float32
    assert f32.project(W.astype(np.float32)).dtype == np.float32
    # An array of numbers is a design without code columns: the same products.
    numbers = numbers_design(dense[rows])
    assert_array_equal(numbers.project(W), dense[rows] @ W)
    assert_array_equal(numbers.backproject(G), dense[rows].T @ G)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_design_in_every_namespace(ns, dtype):
    design, dense, W = _problem(seed=4)
    xp_design = Design(
        ns.asarray(design.numeric.astype(dtype)),
        ns.asarray(design.codes),
        design.n_codes,
    )
    Z = ns.check_output(xp_design.project(ns.asarray(W.astype(dtype))))
    assert_allclose(Z, dense @ W, rtol=1e-5)
    G = np.random.default_rng(5).standard_normal((dense.shape[0], W.shape[1]))
    grad = ns.check_output(xp_design.backproject(ns.asarray(G.astype(dtype))))
    assert_allclose(grad, dense.T @ G, rtol=1e-4, atol=1e-5)
