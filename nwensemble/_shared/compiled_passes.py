"""The softmax kernel's passes on the host through compiled kernels (see
``compiled``): the tiles' sums in one fused pass per block of queries."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared import compiled
from nwensemble._shared.tiles import TilePasses


class CompiledTilePasses(TilePasses):
    """``TilePasses`` whose tiles are exponentiated by the compiled kernels
    (the score products stay BLAS's, on tiles that stay in cache): a
    block's sums with the targets in the same pass as the exp
    (``exp_tile_sums``), other tiles by ``exp_tile``."""

    def _block_sums(self, q, operands, Y_aug, left_out):
        m, n = q.shape[0], operands.shape[1]
        tile = self._key_tile()
        own = _own(left_out, m)
        Yt = np.ascontiguousarray(Y_aug.T)
        num = np.zeros((m, Yt.shape[0]))
        buf = np.empty((m, tile), dtype=q.dtype)
        for c0 in range(0, n, tile):
            c1 = min(c0 + tile, n)
            A = np.matmul(q, operands[:, c0:c1], out=buf[:, : c1 - c0])
            compiled.exp_tile_sums(A, own, c0, Yt, num)
        return num.astype(q.dtype)

    def _tile_exp(self, dtype, left_out):
        def exp(A, c0):
            return compiled.exp_tile(A, _own(left_out, A.shape[0]), c0)

        return exp


def _own(left_out, m):
    """The key each of ``m`` queries leaves out, -1 for none (int64)."""
    if left_out is None:
        return np.full(m, -1, dtype=np.int64)
    return np.asarray(left_out, dtype=np.int64)
