"""The host's leave-one-out loss and gradient over each pair of rows once
(``loo_pairs``, the first path ``loo_sweep`` takes) against the path
through (n, n) blocks: several heads, targets and weights, strips and
chunks, rows whose sums underflow, the fall-back to the stable path, the
same bits on one thread and on several, and the compiled kernels against
NumPy."""

import numpy as np
import pytest
from helpers import assert_objective_close, host_and_blocks, loo_problem
from numpy.testing import assert_allclose

from nwensemble._fit import loo_loss, loo_pairs, loo_sweep
from nwensemble._shared import numba_kernels as compiled
from nwensemble._shared.host_threads import THREADED_SCORES, products_on_threads
from nwensemble._shared.kernels import KERNELS

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba disabled")

SOFTMAX = KERNELS["softmax"]


@pytest.fixture
def spy(monkeypatch):
    """The results of ``loo_pairs``'s calls, in order (None: it left the
    evaluation to the stable path)."""
    results = []
    original = loo_pairs.loo_pairs

    def record(*args, **kwargs):
        results.append(original(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(loo_sweep, "loo_pairs", record)
    return results


# float32: as the compiled exp's objective against NumPy's (test_numba_kernels).
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-11), (np.float32, 1e-4)])
@pytest.mark.parametrize(
    "n, d, n_heads, t, diversity",
    [
        (300, 4, 1, 1, 0.0),  # one chunk, two strips
        (1100, 3, 1, 1, 0.0),  # several chunks and strips
        (700, 2, 3, 2, 0.5),  # heads, targets and the ambiguity term
        (520, 5, 2, 1, -0.5),
    ],
)
def test_the_pairs_equal_the_blocks(
    monkeypatch, spy, dtype, rtol, n, d, n_heads, t, diversity
):
    Z, Y, sw = loo_problem(n, d, n_heads, t, dtype)
    options = dict(n_heads=n_heads, diversity=diversity)
    pairs, blocks = host_and_blocks(monkeypatch, Z, Y, sw, **options)
    assert spy and spy[0] is not None
    assert_objective_close(pairs, blocks, rtol)
    loss_only, _ = host_and_blocks(monkeypatch, Z, Y, sw, return_grad=False, **options)
    assert loss_only[1] is None
    assert_allclose(loss_only[0], pairs[0], rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_heads", [1, 2])
def test_rows_whose_sums_underflow_are_shifted(monkeypatch, spy, dtype, n_heads):
    """Rows far from every other underflow in the pairs; their own weights
    are taken again shifted by their largest, a few rows at a time (the
    loss stays finite and equal to the blocks' path) while the other rows
    stay in the pairs, and the workspace keeps the pairs for the next
    evaluation."""
    monkeypatch.setattr(loo_pairs, "_STRIP_BYTES", 1 << 12)  # 8 rows a strip
    Z, Y, sw = loo_problem(600, 3, n_heads, 1, dtype, seed=4)
    # Each alone: 20 rows on a circle of radius 130, 41 apart.
    angles = 2 * np.pi * np.arange(20) / 20
    Z[400:420, :2] = 130.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    Z[17, :3] -= 30.0  # far in the first head only
    options = dict(n_heads=n_heads, diversity=0.3)
    pairs, blocks = host_and_blocks(monkeypatch, Z, Y, sw, **options)
    assert spy[0] is not None
    assert np.isfinite(pairs[0])
    # In float32 the far rows' logits lose digits to the cancellation of
    # their squared norms (about 2e4) on every path: each is 2-5e-4 of
    # the largest entry from float64's gradient there.
    assert_objective_close(pairs, blocks, 1e-11 if dtype == np.float64 else 2e-3)
    workspace = {}
    kw = dict(xp=np, kernel=SOFTMAX, n_heads=n_heads)
    loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, **kw)
    assert not workspace.get("stable", False)


def test_many_underflowing_rows_take_the_stable_path(monkeypatch, spy):
    """More than a quarter of the rows underflow: the row sweep's stable
    path, now and (the workspace says so) for the next evaluation."""
    Z, Y, sw = loo_problem(400, 2, 1, 1, np.float64, seed=7)
    Z[:150, 0] += 50.0 * np.arange(1, 151)  # each alone
    pairs, blocks = host_and_blocks(monkeypatch, Z, Y, sw)
    assert spy[0] is None
    assert_objective_close(pairs, blocks, 1e-11)
    workspace = {}
    loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, xp=np, kernel=SOFTMAX)
    assert workspace["stable"]
    calls = len(spy)
    loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, xp=np, kernel=SOFTMAX)
    assert len(spy) == calls


@pytest.mark.parametrize("n_heads", [1, 3])
def test_threads_move_the_time_not_the_value(monkeypatch, spy, n_heads):
    """The chunks on the host's threads and in turn give the same bits."""
    Z, Y, sw = loo_problem(1300, 3, n_heads, 1, np.float32, seed=6)
    Z[5] += 30.0  # a shifted row too
    kw = dict(xp=np, kernel=SOFTMAX, n_heads=n_heads, diversity=0.2)
    monkeypatch.setattr(loo_loss, "THREADED_SCORES", 1)
    with products_on_threads(True):
        threaded = loo_loss.loo_loss_and_grad_z(Z, Y, sw, **kw)
    monkeypatch.setattr(loo_loss, "THREADED_SCORES", THREADED_SCORES * 10**9)
    in_turn = loo_loss.loo_loss_and_grad_z(Z, Y, sw, **kw)
    assert all(result is not None for result in spy)
    assert in_turn[0] == threaded[0]
    np.testing.assert_array_equal(in_turn[1], threaded[1])


def test_chunks_hold_about_as_many_pairs():
    for n, k in [(256, 1), (1000, 2), (4096, 8), (100_003, 8)]:
        bounds = loo_pairs._balanced_bounds(n, k)
        assert bounds[0] == 0 and bounds[-1] == n
        assert all(a < b for a, b in zip(bounds, bounds[1:]))
        pairs = [(b - a) * n - (b * b - a * a) / 2 for a, b in zip(bounds, bounds[1:])]
        assert max(pairs) - min(pairs) <= n


def test_strips_fit_the_cache_budget():
    for width, heads in [(100, 1), (1024, 1), (4096, 1), (5000, 4), (10**6, 8)]:
        rows = loo_pairs._strip_rows(width, heads, 4)
        assert 8 <= rows <= 256 and rows & (rows - 1) == 0
        assert rows == 8 or rows * width * heads * 4 <= loo_pairs._STRIP_BYTES


def _kernel_strip(seed=0):
    """A strip of scores (2 heads, rows 5-11 against keys 3-19 of 20)."""
    rng = np.random.default_rng(seed)
    K = -rng.uniform(0.0, 4.0, (2, 7, 17))
    return K, 5, 3, rng.standard_normal((3, 20)), rng.standard_normal((2, 3, 20))


def _later(r0, c0, shape):
    """Where key ``c0 + j`` comes after row ``r0 + r``: each pair once."""
    rows = r0 + np.arange(shape[0])[:, None]
    return c0 + np.arange(shape[1])[None, :] > rows


def test_pair_weights_read_each_pair_both_ways():
    K, r0, c0, V, _ = _kernel_strip()
    E = np.where(_later(r0, c0, K.shape[1:]), np.exp(K), 0.0)
    expected = np.zeros((2, 3, 20))
    for h in range(2):
        rows, keys = slice(r0, r0 + 7), slice(c0, 20)
        expected[h, :, rows] += V[:, keys] @ E[h].T
        expected[h, :, keys] += V[:, rows] @ E[h]
    got = compiled.pair_weights(K.copy(), r0, c0, V, np.zeros((2, 3, 20)))
    assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_pair_gradient_is_g_plus_its_transpose():
    K, r0, c0, R, L = _kernel_strip(seed=1)
    later = _later(r0, c0, K.shape[1:])
    expected = np.zeros_like(K)
    for h in range(2):
        G_ij = L[h][:, r0 : r0 + 7].T @ R[:, c0:]  # rows as queries
        G_ji = R[:, r0 : r0 + 7].T @ L[h][:, c0:]  # rows as keys
        expected[h] = np.where(later, np.exp(K[h]) * (G_ij + G_ji), 0.0)
    got = compiled.pair_gradient(K.copy(), r0, c0, L, R, False)
    assert_allclose(got, expected, rtol=1e-13, atol=1e-15)
    # Kernel values already taken (as pair_weights leaves a strip).
    weighed = np.where(later, np.exp(K), K)
    got = compiled.pair_gradient(weighed, r0, c0, L, R, True)
    assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("n_heads", [1, 3])
def test_kept_strips_give_the_recomputed_bits(monkeypatch, spy, n_heads):
    """The second pass reading the first pass's kernel values (the triangle
    within ``KEPT_BYTES``) gives the bits of recomputing them, strip by
    strip; across evaluations that share a workspace too."""
    Z, Y, sw = loo_problem(1100, 3, n_heads, 2, np.float32, seed=8)
    kw = dict(xp=np, kernel=SOFTMAX, n_heads=n_heads, diversity=0.2)
    # 1100 rows' triangle is within the default budget.
    assert loo_pairs._Pairs(Z, Y, sw, n_heads, compiled, None).kept
    results = {}
    for budget in (0, 1 << 40):
        monkeypatch.setattr(loo_pairs, "KEPT_BYTES", budget)
        workspace = {}
        first = loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, **kw)
        again = loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, **kw)
        np.testing.assert_array_equal(first[1], again[1])
        results[budget] = first
    assert all(result is not None for result in spy)
    assert results[0][0] == results[1 << 40][0]
    np.testing.assert_array_equal(results[0][1], results[1 << 40][1])
