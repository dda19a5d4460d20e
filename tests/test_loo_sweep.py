"""The host's one-sweep leave-one-out loss and gradient over blocks of rows
(``loo_sweep``, with the pairs' path ``loo_pairs`` turned off; see
``test_loo_pairs``) against the path through (n, n) blocks it stands
beside: several heads, targets and weights, rows spread over blocks and
chunks, the stable path, and the same bits on one thread and on several."""

import numpy as np
import pytest
from helpers import assert_objective_close, host_and_blocks, loo_problem
from numpy.testing import assert_allclose

from nwensemble._fit import loo_loss, loo_sweep
from nwensemble._shared import numba_kernels as compiled
from nwensemble._shared.host_threads import products_on_threads
from nwensemble._shared.kernels import KERNELS

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba disabled")

SOFTMAX = KERNELS["softmax"]


@pytest.fixture(autouse=True)
def _rows_only(monkeypatch):
    monkeypatch.setattr(loo_sweep, "PAIRS", False)


# float32: as the compiled exp's objective against NumPy's (test_numba_kernels).
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-11), (np.float32, 1e-4)])
@pytest.mark.parametrize(
    "n, d, n_heads, t, diversity",
    [
        (300, 4, 1, 1, 0.0),  # one chunk: a block and a short one
        (1100, 3, 1, 1, 0.0),  # several chunks and blocks, a short last one
        (700, 2, 3, 2, 0.5),  # heads, targets and the ambiguity term
        (520, 5, 2, 1, -0.5),
    ],
)
def test_the_sweep_equals_the_blocks(
    monkeypatch, dtype, rtol, n, d, n_heads, t, diversity
):
    Z, Y, sw = loo_problem(n, d, n_heads, t, dtype)
    options = dict(n_heads=n_heads, diversity=diversity)
    sweep, blocks = host_and_blocks(monkeypatch, Z, Y, sw, **options)
    assert_objective_close(sweep, blocks, rtol)
    loss_only, _ = host_and_blocks(monkeypatch, Z, Y, sw, return_grad=False, **options)
    assert loss_only[1] is None
    assert_allclose(loss_only[0], sweep[0], rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_whose_weights_underflow_take_the_stable_path(monkeypatch, dtype):
    """A row far from every other underflows on the fast path; its block is
    redone with the row maximum subtracted (the loss stays finite and equal
    to the blocks' path), and the workspace sends the next evaluation
    straight to the stable path, which gives the same values."""
    Z, Y, sw = loo_problem(600, 3, 1, 1, dtype, seed=4)
    Z[400] += 40.0
    sweep, blocks = host_and_blocks(monkeypatch, Z, Y, sw)
    assert np.isfinite(sweep[0])
    assert_objective_close(sweep, blocks, 1e-11 if dtype == np.float64 else 1e-4)
    workspace = {}
    kw = dict(xp=np, kernel=SOFTMAX)
    first = loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, **kw)
    assert workspace["stable"]
    again = loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace=workspace, **kw)
    assert_objective_close(again, first, 1e-12 if dtype == np.float64 else 1e-6)


def test_entries_too_large_to_square_start_on_the_stable_path(monkeypatch):
    """Squared norms would overflow: the logits leave them out. Every row
    then weighs only its nearest key, so the gradient is zero up to the
    rounding of products with entries this large."""
    Z, Y, sw = loo_problem(200, 2, 1, 1, np.float32, seed=5)
    Z = Z * np.float32(3e18)
    sweep, blocks = host_and_blocks(monkeypatch, Z, Y, sw)
    assert_allclose(sweep[0], blocks[0], rtol=1e-6)
    assert np.all(np.isfinite(sweep[1]))
    assert np.abs(sweep[1]).max() <= 1e-5 * np.abs(Z).max() * sw.max()


@pytest.mark.parametrize("n_heads", [1, 3])
def test_threads_move_the_time_not_the_value(monkeypatch, n_heads):
    """The chunks on the host's threads and in turn give the same bits."""
    Z, Y, sw = loo_problem(1300, 3, n_heads, 1, np.float32, seed=6)
    kw = dict(xp=np, kernel=SOFTMAX, n_heads=n_heads, diversity=0.2)
    monkeypatch.setattr(loo_loss, "THREADED_SCORES", 1)
    with products_on_threads(True):
        threaded = loo_loss.loo_loss_and_grad_z(Z, Y, sw, **kw)
    with products_on_threads(False):
        in_turn = loo_loss.loo_loss_and_grad_z(Z, Y, sw, **kw)
    outside = loo_loss.loo_loss_and_grad_z(Z, Y, sw, **kw)
    for got in (in_turn, outside):
        assert got[0] == threaded[0]
        np.testing.assert_array_equal(got[1], threaded[1])


def test_blocks_fit_the_cache_budget():
    for n, heads in [(100, 1), (1024, 1), (4096, 1), (5000, 4), (10**6, 8)]:
        rows = loo_sweep._block_rows(n, heads, 4)
        assert 8 <= rows <= 256 and rows & (rows - 1) == 0
        assert rows == 8 or rows * n * heads * 4 <= loo_sweep._BLOCK_BYTES


def test_only_the_softmax_kernel_on_the_host_takes_the_sweep(monkeypatch):
    calls = []
    original = loo_sweep.loo_sweep

    def spy(*args, **kwargs):
        calls.append(True)
        return original(*args, **kwargs)

    monkeypatch.setattr(loo_loss, "loo_sweep", spy)
    Z, Y, sw = loo_problem(60, 2, 1, 1, np.float64)
    loo_loss.loo_loss_and_grad_z(Z, Y, sw, xp=np, kernel=SOFTMAX)
    assert len(calls) == 1
    loo_loss.loo_loss_and_grad_z(Z * 0.2, Y, sw, xp=np, kernel=KERNELS["biweight"])
    monkeypatch.setattr(compiled, "ENABLED", False)
    loo_loss.loo_loss_and_grad_z(Z, Y, sw, xp=np, kernel=SOFTMAX)
    assert len(calls) == 1
