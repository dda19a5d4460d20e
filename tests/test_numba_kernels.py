"""The compiled host kernels: the exp's error bound, and the passes and the
training objective they serve against NumPy's."""

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_allclose

from nwensemble._shared import numba_kernels as compiled
from nwensemble._shared.attention import log_weights
from nwensemble._shared.kernels import KERNELS
from nwensemble._shared.keys import Keys
from nwensemble._shared.numba_tile_passes import CompiledTilePasses
from nwensemble._shared.readout import Readout
from nwensemble._shared.tiles import TilePasses

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba disabled")


@pytest.mark.parametrize("dtype, ulps", [(np.float32, 2), (np.float64, 2)])
def test_exp_is_within_a_few_ulps_over_the_logits_range(dtype, ulps):
    """Relative error against float64 (float32) or long double (float64)
    exp, over the logits the fast path meets: 0 down to where float32 exp
    turns subnormal (-87) and float64's (-708), each exponent's range
    sampled densely; below, exact zeros."""
    low = -87.0 if dtype == np.float32 else -708.0
    x = np.concatenate(
        [
            np.linspace(low, 0.0, 2_000_001),
            -np.logspace(-12, np.log10(-low), 100_001),
            [0.0, -1e-30, low],
        ]
    ).astype(dtype)
    got = compiled.exp_array(x, np.empty_like(x))
    exact = np.exp(x.astype(np.longdouble))
    rel = np.abs(got.astype(np.longdouble) - exact) / exact
    assert float(rel.max()) <= ulps * np.finfo(dtype).eps
    below = np.array([low - 1.0, -1e4, -np.inf], dtype=dtype)
    assert np.all(compiled.exp_array(below, np.empty_like(below)) == 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_derivatives_in_the_scores_are_never_subnormal(dtype):
    """The training passes' derivatives in the scores (``pair_gradient``,
    ``gradient_block``) flush products below the smallest normal number to
    zero, and keep every normal one as it is."""
    tiny = np.finfo(dtype).tiny
    low = -87.0 if dtype == np.float32 else -708.0
    rng = np.random.default_rng(0)
    n = 16
    # Scores within 12 of the exp's lowest, factors log-uniform from 1e-6
    # to 1: many products fall below the smallest normal number, many stay
    # above.
    scores = rng.uniform(low, low + 12.0, (1, n, n)).astype(dtype)
    L = np.exp(rng.uniform(-14.0, 0.0, (1, 2, n))).astype(dtype)
    R = np.exp(rng.uniform(-14.0, 0.0, (2, n))).astype(dtype)
    G = compiled.pair_gradient(scores.copy(), 0, 0, L, R, False)
    E = compiled.exp_array(scores.ravel(), np.empty(n * n, dtype=dtype))
    E = E.reshape(1, n, n)
    f = np.einsum("ki,kj->ij", L[0], R) + np.einsum("ki,kj->ij", R, L[0])
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    exact = np.where(upper, E[0].astype(np.float64) * f, 0.0)
    normal = np.abs(exact) >= tiny
    assert np.any(normal) and np.any(upper & ~normal & (exact != 0.0))
    assert np.all((G[0] == 0.0) | (np.abs(G[0]) >= tiny))
    assert np.all(G[0][~normal] == 0.0)
    assert_allclose(G[0][normal], exact[normal], rtol=10 * np.finfo(dtype).eps)

    A = np.exp(rng.uniform(-14.0, 0.0, (1, n, 1))).astype(dtype)
    c = np.zeros((1, n), dtype=dtype)
    YT = np.ones((1, n), dtype=dtype)
    colsum = np.zeros((1, n), dtype=dtype)
    G = compiled.gradient_block(E.copy(), A, c, YT, colsum)
    exact = E[0].astype(np.float64) * A[0]
    normal = np.abs(exact) >= tiny
    assert np.any(normal) and np.any(~normal & (exact != 0.0))
    assert np.all(G[0][~normal] == 0.0)
    assert_allclose(G[0][normal], exact[normal], rtol=10 * np.finfo(dtype).eps)
    assert np.all((colsum == 0.0) | (np.abs(colsum) >= tiny))


def test_exp_tile_zeroes_the_left_out_keys():
    rng = np.random.default_rng(0)
    A = -rng.uniform(0, 5, (4, 10))
    ref = np.exp(A)
    ref[0, 3] = 0.0
    ref[2, 9] = 0.0
    got = compiled.exp_tile(A.copy(), np.array([3 + 20, -1, 9 + 20, 55]), 20)
    assert_allclose(got, ref, rtol=1e-14)


def _keys(n, d, n_heads, dtype, seed=0, readout=None):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, n_heads * d)).astype(dtype)
    Y = rng.standard_normal((n, 2)).astype(dtype)
    sw = rng.uniform(0.5, 2.0, n).astype(dtype)
    keys = Keys(Z, Y, log_weights(sw / sw.sum(), xp=np), KERNELS["softmax"], n_heads)
    if readout is not None:
        low, high = Y.min(axis=0), Y.max(axis=0)
        keys = dataclasses.replace(keys, readout=Readout(0.1, low, high))
    return keys


@pytest.mark.parametrize("line", [False, True])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_compiled_passes_equal_numpy_tiles(monkeypatch, dtype, rtol, line):
    """Every pass (estimates, squared spread, heads, leave-one-out heads)
    gives the NumPy tiles' results, with the local constant's columns and
    the local line's, keys in chunks of one tile, the last tile partly
    padding with a left-out key in it, and a query far from every key."""
    import nwensemble._shared.tiles as tiles

    monkeypatch.setattr(tiles, "_KEY_TILE", 48)
    monkeypatch.setattr(tiles, "_CHUNK_BYTES", 1)  # one key tile per chunk
    keys = _keys(700, 3, 2, dtype, readout=line or None)
    Q = np.random.default_rng(1).standard_normal((90, 6)).astype(dtype)
    Q[7] += 30.0
    fast, slow = CompiledTilePasses(keys), TilePasses(keys)
    alpha = [0.3, 0.7]
    rows = np.array([5, 0, 699, 13, 200, 690])
    pairs = [
        (fast.estimates(Q, alpha), slow.estimates(Q, alpha)),
        (fast.head_estimates(Q), slow.head_estimates(Q)),
        (
            fast.head_estimates(None, loo_rows=rows),
            slow.head_estimates(None, loo_rows=rows),
        ),
        *zip(
            fast.estimates_and_squared_spread(Q, alpha),
            slow.estimates_and_squared_spread(Q, alpha),
        ),
    ]
    for got, expected in pairs:
        assert got.dtype == dtype
        assert_allclose(got, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


def test_tile_sums_zero_the_left_out_key_and_the_padding():
    """``tile_sums`` against the sums written out: a chunk of 10 keys from
    key 20 in tiles of 4 (the last half padding), a query leaving out a key
    of that last tile, another one of the first, one none and one a key
    outside the chunk."""
    from nwensemble._shared.numba_tile_passes import _tiles

    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 3))
    ops = rng.standard_normal((3, 10))
    R = rng.standard_normal((10, 3))
    own = np.array([29, 21, -1, 5])
    E = np.exp(q @ ops)
    for r, key in enumerate(own):
        if 20 <= key < 30:
            E[r, key - 20] = 0.0
    K, RT = _tiles(ops, 4), _tiles(R.T, 4)
    assert K.shape == (3, 3, 4)
    R_tiles = np.ascontiguousarray(RT.transpose(0, 2, 1))
    num = np.ones((4, 3))
    got = compiled.tile_sums(q, K, R_tiles, own, 20, 10, num, np.empty((4, 4)))
    assert_allclose(got, 1.0 + E @ R, rtol=1e-13)


def test_compiled_passes_exponentiate_every_tile_with_the_compiled_exp(monkeypatch):
    """Each pass of the compiled passes goes through the compiled kernels
    (``tile_sums`` for the sums, ``exp_tile`` for the spread's tiles) and
    none through NumPy's exp: the equality above holds for either."""
    import nwensemble._shared.tile_ops as tile_ops

    keys = _keys(300, 3, 2, np.float32)
    Q = np.random.default_rng(1).standard_normal((40, 6)).astype(np.float32)
    calls = []

    def counting(name):
        original = getattr(compiled, name)

        def count(*args):
            calls.append(name)
            return original(*args)

        monkeypatch.setattr(compiled, name, count)

    def numpy_exp(*args, **kwargs):
        raise AssertionError("a compiled pass took NumPy's exp")

    counting("exp_tile")
    counting("tile_sums")
    monkeypatch.setattr(tile_ops, "exp_inplace", numpy_exp)
    fast = CompiledTilePasses(keys)
    fast.estimates(Q, [0.5, 0.5])
    fast.head_estimates(None, loo_rows=np.array([3, 7]))
    assert set(calls) == {"tile_sums"}
    fast.estimates_and_squared_spread(Q, [0.5, 0.5])
    assert "exp_tile" in calls


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-11), (np.float32, 1e-4)])
def test_training_objective_equals_numpy(monkeypatch, dtype, rtol):
    """The leave-one-out loss and gradient with the compiled exp match the
    NumPy exp's, with several heads and the ambiguity term."""
    from nwensemble._fit.loo_loss import loo_loss_and_grad
    from nwensemble._shared.design import numbers_design

    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 5)).astype(dtype)
    Y = rng.standard_normal((300, 2)).astype(dtype)
    sw = np.full(300, 1 / 300, dtype=dtype)
    W = (0.7 * rng.standard_normal((5, 6))).astype(dtype)
    kw = dict(xp=np, kernel=KERNELS["softmax"], n_heads=3, diversity=-0.5)
    fast = loo_loss_and_grad(W, numbers_design(X), Y, sw, **kw)
    monkeypatch.setattr(compiled, "ENABLED", False)
    slow = loo_loss_and_grad(W, numbers_design(X), Y, sw, **kw)
    assert_allclose(fast[0], slow[0], rtol=rtol)
    assert_allclose(fast[1], slow[1], rtol=rtol, atol=rtol * np.abs(slow[1]).max())


def test_the_kernel_chooses_the_compiled_path_on_the_host_only(monkeypatch):
    softmax = KERNELS["softmax"]
    keys = _keys(50, 2, 1, np.float64)
    assert isinstance(keys.passes(), CompiledTilePasses)
    assert softmax.host_kernels(np) is compiled
    monkeypatch.setattr(compiled, "ENABLED", False)
    assert type(keys.passes()) is TilePasses
    assert softmax.host_kernels(np) is None
    assert KERNELS["biweight"].host_kernels(np) is None
