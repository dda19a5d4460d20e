"""The passes over the keys (blocks, and the softmax tiles on the host)
against explicit softmax weights."""

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_allclose

import nwensemble._shared.tiles as tiles_module
from nwensemble._shared.attention import log_weights
from nwensemble._shared.kernels import KERNELS
from nwensemble._shared.keys import Keys
from nwensemble._shared.passes import BlockPasses
from nwensemble._shared.readout import Readout, target_range
from nwensemble._shared.tiles import TilePasses


def passes(Z, Y, log_sw, *, n_heads=1, kernel="softmax"):
    """The kernel's passes over keys ``Z``."""
    return Keys(Z, Y, log_sw, KERNELS[kernel], n_heads).passes()


def _small_tiles(monkeypatch):
    """Tiles of a few rows and keys, on threads whatever their size."""
    monkeypatch.setattr(tiles_module, "_QUERY_TILE", 4)
    monkeypatch.setattr(tiles_module, "_KEY_TILE", 7)
    monkeypatch.setattr(tiles_module, "THREADED_SCORES", 1)


def _softmax_weights(Q, Z, sw):
    d2 = ((Q[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    logits = -0.5 * d2 + np.log(sw)
    w = np.exp(logits - logits.max(1, keepdims=True))
    return w / w.sum(1, keepdims=True)


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_estimates_are_softmax_averages(offset):
    """A prediction is the softmax-weighted mean of targets, also for queries
    far from every key (the underflow fallback)."""
    rng = np.random.default_rng(3)
    Q, Z = rng.standard_normal((7, 3)) + offset, rng.standard_normal((20, 3))
    Y = rng.standard_normal((20, 2))
    sw = np.full(20, 1 / 20)
    got = passes(Z, Y, log_weights(sw, xp=np)).estimates(Q)
    assert_allclose(got, _softmax_weights(Q, Z, sw) @ Y, rtol=1e-9)


def _heads_problem(seed=4, n_heads=3, d=2):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((9, n_heads * d))
    Z = rng.standard_normal((25, n_heads * d))
    Y = rng.standard_normal((25, 2))
    sw = rng.uniform(0.5, 2.0, 25)
    sw /= sw.sum()
    per_head = [
        _softmax_weights(Q[:, h * d : (h + 1) * d], Z[:, h * d : (h + 1) * d], sw)
        for h in range(n_heads)
    ]
    return Q, Z, Y, sw, per_head


@pytest.mark.parametrize("Passes", [BlockPasses, TilePasses])
def test_head_predictions_and_ensemble_weights(Passes):
    """Per-head estimates, their weighted ensemble and the combined weights'
    norm match explicit softmax weights, in blocks and in tiles."""
    Q, Z, Y, sw, P = _heads_problem()
    keys = Keys(Z, Y, log_weights(sw, xp=np), KERNELS["softmax"], 3)
    heads = Passes(keys).head_estimates(Q)
    assert_allclose(heads, np.stack([w @ Y for w in P]), rtol=1e-10)
    alpha = [0.5, 0.2, 0.3]
    V = sum(a * w for a, w in zip(alpha, P))
    got = Passes(keys).estimates(Q, alpha)
    assert_allclose(got, V @ Y, rtol=1e-10)
    pred, sq = Passes(keys).estimates_and_squared_spread(Q, alpha)
    assert_allclose(pred, V @ Y, rtol=1e-10)
    assert_allclose(sq, (V**2).sum(1), rtol=1e-10)


def test_prediction_chunks_equal_one_block():
    """Query blocks sized by working_memory give the unchunked result to 1e-12."""
    from sklearn import config_context

    Q, Z, Y, sw, _ = _heads_problem(n_heads=2)
    keys = Keys(Z, Y, log_weights(sw, xp=np), KERNELS["softmax"], 2)
    whole = BlockPasses(keys).estimates_and_squared_spread(Q)
    with config_context(working_memory=1e-3):  # ~1 KiB: a few rows per block
        chunked = BlockPasses(keys).estimates_and_squared_spread(Q)
    for a, b in zip(whole, chunked):
        assert_allclose(a, b, rtol=1e-12)


def test_loo_head_predictions_and_spread():
    """Leave-one-out per-head estimates and weight norms match explicit loops."""
    _, Z, Y, sw, _ = _heads_problem(n_heads=2)
    blocks = BlockPasses(Keys(Z, Y, log_weights(sw, xp=np), KERNELS["softmax"], 2))
    alpha = [0.3, 0.7]
    rows = np.arange(Z.shape[0])
    heads = blocks.head_estimates(None, loo_rows=rows)
    spread = blocks.estimates_and_squared_spread(None, alpha, loo_rows=rows)[1]
    # A subset of rows, in blocks of a few rows, gives the same values.
    from sklearn import config_context

    with config_context(working_memory=1e-3):
        part = blocks.head_estimates(None, loo_rows=rows[3:17])
        part_spread = blocks.estimates_and_squared_spread(
            None, alpha, loo_rows=rows[3:17]
        )[1]
    assert_allclose(part, heads[:, 3:17], rtol=1e-12)
    assert_allclose(part_spread, spread[3:17], rtol=1e-12)
    for i in range(Z.shape[0]):
        keep = np.arange(Z.shape[0]) != i
        v = np.zeros(keep.sum())
        for h in range(2):
            cols = slice(2 * h, 2 * h + 2)
            w = _softmax_weights(Z[i : i + 1, cols], Z[keep, cols], sw[keep])[0]
            assert_allclose(heads[h, i], w @ Y[keep], rtol=1e-10)
            v += alpha[h] * w
        assert_allclose(spread[i], np.sum(v**2), rtol=1e-10)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_tiled_threaded_loo_equals_explicit_weights(monkeypatch, dtype, rtol):
    """Leave-one-out head estimates of a subset of training rows, in small
    tiles on threads: each row's own key lies in some tile and gets no
    weight; a row far from every other (whose fast-path sum underflows once
    its own weight is gone) takes the stable path, still leaving itself out.
    The same for the ensemble's estimates and the squared norm of its
    weights, which sum products of the heads' attention rows tile by tile."""
    _small_tiles(monkeypatch)
    _, Z, Y, sw, _ = _heads_problem(n_heads=2)
    Z = Z.copy()
    Z[11] += 40.0
    rows = np.array([20, 3, 11, 4, 0, 17, 8, 24, 12, 5, 16])
    tiles = passes(
        Z.astype(dtype),
        Y.astype(dtype),
        log_weights(sw.astype(dtype), xp=np),
        n_heads=2,
    )
    assert isinstance(tiles, TilePasses)
    heads = tiles.head_estimates(None, loo_rows=rows)
    alpha = [0.3, 0.7]
    pred, spread = tiles.estimates_and_squared_spread(None, alpha, loo_rows=rows)
    assert heads.dtype == pred.dtype == spread.dtype == dtype
    for r, i in enumerate(rows):
        keep = np.arange(Z.shape[0]) != i
        v = 0.0
        for h in range(2):
            cols = slice(2 * h, 2 * h + 2)
            w = _softmax_weights(Z[i : i + 1, cols], Z[keep, cols], sw[keep])[0]
            assert_allclose(heads[h, r], w @ Y[keep], rtol=rtol, atol=rtol)
            v = v + alpha[h] * w
        assert_allclose(pred[r], v @ Y[keep], rtol=rtol, atol=rtol)
        assert_allclose(spread[r], np.sum(v**2), rtol=rtol)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_tiled_threaded_prediction_equals_explicit_weights(monkeypatch, dtype, rtol):
    """Small tiles on threads (partial last tiles, a query far from every key
    that takes the stable path, sample weights) give the explicit softmax
    average of every head."""
    _small_tiles(monkeypatch)
    Q, Z, Y, sw, P = _heads_problem()
    Q = Q.copy()
    Q[5] += 40.0  # its fast-path weights underflow
    P = [
        _softmax_weights(Q[:, h * 2 : (h + 1) * 2], Z[:, h * 2 : (h + 1) * 2], sw)
        for h in range(3)
    ]
    alpha = [0.5, 0.2, 0.3]
    got = passes(
        Z.astype(dtype),
        Y.astype(dtype),
        log_weights(sw.astype(dtype), xp=np),
        n_heads=3,
    ).estimates(Q.astype(dtype), alpha)
    assert got.dtype == dtype
    V = sum(a * w for a, w in zip(alpha, P))
    assert_allclose(got, V @ Y, rtol=rtol, atol=rtol)


def test_only_the_rows_that_underflow_take_the_stable_path(monkeypatch):
    """On the host a tile with one query far from every key takes that query
    alone again on the stable path; the estimates stay the explicit
    softmax average (far and near queries alike)."""
    _small_tiles(monkeypatch)
    Q, Z, Y, sw, _ = _heads_problem(n_heads=1)
    Q = Q.copy()
    Q[5] += 40.0  # in the second tile of four queries
    kernel = KERNELS["softmax"]
    rows_taken = []
    original = type(kernel).attend

    def spy(self, Q, *args, **kwargs):
        rows_taken.append(Q.shape[0])
        return original(self, Q, *args, **kwargs)

    monkeypatch.setattr(type(kernel), "attend", spy)
    got = passes(Z, Y, log_weights(sw, xp=np)).estimates(Q)
    assert rows_taken == [1]
    assert_allclose(got, _softmax_weights(Q, Z, sw) @ Y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", ["softmax", "biweight"])
def test_prediction_off_the_host_reads_nothing_back_per_block(count_read_backs, kernel):
    """On a device (array_api_strict stands in), predicting 400 queries in 40
    blocks reads back no more than predicting 20 in one, and gives the host's
    estimates."""
    from sklearn import config_context

    from nwensemble._shared.backend import to_numpy

    xps, counts = count_read_backs
    rng = np.random.default_rng(0)
    Q, Z = rng.standard_normal((400, 4)), rng.standard_normal((300, 4))
    Y = rng.standard_normal((300, 1))
    log_sw = np.zeros(300)
    ref = passes(Z, Y, log_sw, n_heads=2, kernel=kernel).estimates(Q)
    dev = xps.Device("device1")
    read_backs = {}
    # 10 rows per block (two (rows, 300) float64 blocks in 0.05 MiB), or all.
    for m, memory in ((400, 0.05), (20, 1024)):
        Qd, *args = [xps.asarray(a, device=dev) for a in (Q[:m], Z, Y, log_sw)]
        counts["n"] = 0
        with config_context(working_memory=memory):
            out = passes(*args, n_heads=2, kernel=kernel).estimates(Qd)
        read_backs[m] = counts["n"]
        assert out.device == dev
        assert_allclose(to_numpy(out), ref[:m], rtol=1e-10)
    assert read_backs[400] == read_backs[20]


def _local_linear_keys(Z, Y, sw, n_heads):
    low, high = target_range(Y, sw, xp=np)
    return Keys(
        Z,
        Y,
        log_weights(sw, xp=np),
        KERNELS["softmax"],
        n_heads,
        readout=Readout(ridge=0.1, low=low, high=high),
    )


def test_key_chunks_leave_the_tiles_sums_unchanged(monkeypatch):
    """The readout's columns built for a chunk of keys at a time, for a
    group of query tiles at a time, give the same sums, to the bit, as one
    chunk of all keys for all queries (each tile's sums still run over the
    keys in order), for queries and for left-out rows, whose own key lies
    in one chunk."""
    _small_tiles(monkeypatch)
    Q, Z, Y, sw, _ = _heads_problem()
    keys = _local_linear_keys(Z, Y, sw, 3)
    rows = np.array([20, 3, 11, 0])

    def sums():
        return [
            *keys.passes().head_sums(Q).nums,
            *keys.passes().head_sums(None, loo_rows=rows).nums,
        ]

    whole = sums()
    monkeypatch.setattr(tiles_module, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(tiles_module, "_QUERY_GROUP", 2 * tiles_module._QUERY_TILE)
    assert tiles_module._keys_per_chunk(keys) == tiles_module._KEY_TILE
    assert Z.shape[0] > 2 * tiles_module._KEY_TILE
    assert Q.shape[0] > tiles_module._QUERY_GROUP
    for a, b in zip(whole, sums(), strict=True):
        assert np.array_equal(a, b)


def test_key_chunks_hold_their_columns_within_the_budget():
    """A chunk of keys is whole key tiles whose readout columns, every
    head's, fit in the budget (at least one tile): fewer keys for wider
    heads and more outputs, more for the local constant, whose one array
    every head shares."""
    rng = np.random.default_rng(0)
    budget, tile = tiles_module._CHUNK_BYTES, tiles_module._KEY_TILE
    chunks = {}
    for d in (2, 8, 32):
        for t in (1, 3):
            Z = rng.standard_normal((40, 4 * d))
            Y = rng.standard_normal((40, t))
            keys = _local_linear_keys(Z, Y, np.full(40, 1 / 40), 4)
            chunk = tiles_module._keys_per_chunk(keys)
            width = 4 * keys.readout_of(0).columns(Y, Z[:, :d], xp=np).shape[1]
            assert chunk % tile == 0
            assert chunk * width * 8 <= budget or chunk == tile
            assert (chunk + tile) * width * 8 > budget
            chunks[d, t] = chunk
            mean = dataclasses.replace(keys, readout=Readout())
            assert tiles_module._keys_per_chunk(mean) >= chunk
    assert chunks[2, 1] > chunks[8, 1] > chunks[32, 1]
    assert chunks[8, 1] > chunks[8, 3]


@pytest.mark.parametrize("chunk", [None, 2])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 1e-4)])
def test_tiles_read_a_local_linear_readout_as_the_blocks_do(
    monkeypatch, dtype, rtol, chunk
):
    """With the local-linear readout the tiles (small, on threads, a query
    far from every key on the stable path; with ``chunk``, the keys'
    columns built that many tiles at a time, for one tile of queries at a
    time) sum its columns, read its
    lines and square its weights as the blocks do, for queries and for
    left-out training rows."""
    _small_tiles(monkeypatch)
    if chunk is not None:
        monkeypatch.setattr(
            tiles_module, "_keys_per_chunk", lambda keys: chunk * tiles_module._KEY_TILE
        )
        monkeypatch.setattr(tiles_module, "_QUERY_GROUP", tiles_module._QUERY_TILE)
    Q, Z, Y, sw, _ = _heads_problem()
    Q = Q.copy()
    Q[5] += 40.0
    Q, Z, Y, sw = (a.astype(dtype) for a in (Q, Z, Y, sw))
    keys = _local_linear_keys(Z, Y, sw, 3)
    tiles, blocks = keys.passes(), BlockPasses(keys)
    assert isinstance(tiles, TilePasses)
    rows = np.array([20, 3, 11, 0])
    alpha = [0.5, 0.2, 0.3]
    pairs = [
        (tiles.estimates(Q, alpha), blocks.estimates(Q, alpha)),
        (tiles.head_estimates(Q), blocks.head_estimates(Q)),
        (
            tiles.head_estimates(None, loo_rows=rows),
            blocks.head_estimates(None, loo_rows=rows),
        ),
        *zip(
            tiles.estimates_and_squared_spread(Q, alpha),
            blocks.estimates_and_squared_spread(Q, alpha),
        ),
        *zip(
            tiles.estimates_and_squared_spread(None, alpha, loo_rows=rows),
            blocks.estimates_and_squared_spread(None, alpha, loo_rows=rows),
        ),
    ]
    sums = tiles.head_sums(None, loo_rows=rows)
    block_sums = blocks.head_sums(None, loo_rows=rows)
    assert not sums.fallback.any() and not block_sums.fallback.any()
    for field in ("nums", "queries"):
        pairs += list(zip(getattr(sums, field), getattr(block_sums, field)))
    # The spread from sums taken before is the spread that takes them.
    pairs += zip(
        tiles.estimates_and_squared_spread(None, alpha, loo_rows=rows, sums=sums),
        blocks.estimates_and_squared_spread(None, alpha, loo_rows=rows),
    )
    for got, expected in pairs:
        assert got.dtype == dtype
        assert_allclose(got, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    # The lines are not the weighted means.
    means = BlockPasses(dataclasses.replace(keys, readout=Readout())).estimates(Q)
    assert np.abs(pairs[0][0] - means).max() > 10 * rtol * np.abs(means).max()


def test_the_sums_of_some_rows_give_their_spread(monkeypatch):
    """``sums_at`` keeps the sums of some of the left-out rows, each new
    tile stable where one of its rows came from a stable tile (a row far
    from every other key), and the local lines' spread from those sums is
    the spread of those rows."""
    _small_tiles(monkeypatch)
    _, Z, Y, sw, _ = _heads_problem()
    Z = Z.copy()
    Z[7] += 40.0
    keys = _local_linear_keys(Z, Y, sw, 3)
    tiles, blocks = keys.passes(), BlockPasses(keys)
    rows = np.arange(25)
    sums = tiles.head_sums(None, loo_rows=rows)
    assert sums.stable_tiles == (False, True, False, False, False, False, False)
    positions = np.array([1, 6, 7, 12, 20, 24])
    taken = tiles.sums_at(sums, positions)
    assert taken.stable_tiles == (True, False)
    for got, expected in zip(taken.nums, sums.nums):
        assert_allclose(got, expected[positions], rtol=0, atol=0)
    alpha = [0.5, 0.2, 0.3]
    pairs = zip(
        tiles.estimates_and_squared_spread(
            None, alpha, loo_rows=rows[positions], sums=taken
        ),
        blocks.estimates_and_squared_spread(None, alpha, loo_rows=rows[positions]),
    )
    for got, expected in pairs:
        assert_allclose(got, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
