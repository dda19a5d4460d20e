"""The softmax kernel's passes on the host through compiled kernels (see
``numba_kernels``): prediction's sums by ``tile_sums``, the other tiles
exponentiated by the compiled exp."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared import numba_kernels
from nwensemble._shared import tiles as tile_passes
from nwensemble._shared.tiles import TilePasses


class CompiledTilePasses(TilePasses):
    """``TilePasses`` whose sums of query blocks over a chunk of keys run
    in one compiled call (``numba_kernels.tile_sums``), over the keys laid
    out in tiles once per chunk; the other passes' tiles are exponentiated
    by the compiled ``exp_tile``, which also zeroes each query's left-out
    key in the same pass, their products staying BLAS's."""

    def _key_chunk(self, operands, columns, k0):
        # The NumPy tiles' key tile: a chunk's sums then do not depend on
        # where the chunks start (they are whole tiles).
        tile = tile_passes._KEY_TILE
        width = columns[0].shape[0]
        tiled = {}  # the local constant's columns are one array for all heads
        for R in columns:
            if id(R) not in tiled:
                tiled[id(R)] = np.ascontiguousarray(
                    _tiles(R.T, tile).transpose(0, 2, 1)
                )
        return [
            (_tiles(ops[:, k0 : k0 + width], tile), tiled[id(R)], width, R.shape[1])
            for ops, R in zip(operands, columns)
        ]

    def _block_sums(self, q, key_chunk, left_out, k0, num):
        K, R, width, n_columns = key_chunk
        if num is None:
            num = np.zeros((q.shape[0], n_columns), dtype=q.dtype)
        A = np.empty((q.shape[0], K.shape[2]), dtype=q.dtype)
        own = _own(left_out, q.shape[0])
        return numba_kernels.tile_sums(q, K, R, own, k0, width, num, A)

    def _tile_exp(self, dtype, left_out):
        def exp(A, c0):
            return numba_kernels.exp_tile(A, _own(left_out, A.shape[0]), c0)

        return exp


def _tiles(A, tile):
    """``A`` (rows, n) as (tiles, rows, tile), C-ordered, key tile ``t``
    holding columns ``t tile : (t + 1) tile`` (the last one padded with
    zeros)."""
    rows, n = A.shape
    count = -(-n // tile)
    out = np.zeros((count, rows, tile), dtype=A.dtype)
    full = (n // tile) * tile
    out[: n // tile] = A[:, :full].reshape(rows, n // tile, tile).transpose(1, 0, 2)
    if full < n:
        out[-1, :, : n - full] = A[:, full:]
    return out


def _own(left_out, m):
    """The key each of ``m`` queries leaves out, -1 for none (int64)."""
    if left_out is None:
        return np.full(m, -1, dtype=np.int64)
    return np.asarray(left_out, dtype=np.int64)
