"""The softmax kernel's passes on the host through compiled kernels (see
``numba_kernels``): the tiles exponentiated by the compiled exp."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared import numba_kernels
from nwensemble._shared.tiles import TilePasses


class CompiledTilePasses(TilePasses):
    """``TilePasses`` whose tiles are exponentiated by the compiled
    ``exp_tile``, which also zeroes each query's left-out key in the same
    pass; the score products and the sums with the readout's columns stay
    BLAS's, on tiles that stay in cache."""

    def _tile_exp(self, dtype, left_out):
        def exp(A, c0):
            return numba_kernels.exp_tile(A, _own(left_out, A.shape[0]), c0)

        return exp


def _own(left_out, m):
    """The key each of ``m`` queries leaves out, -1 for none (int64)."""
    if left_out is None:
        return np.full(m, -1, dtype=np.int64)
    return np.asarray(left_out, dtype=np.int64)
