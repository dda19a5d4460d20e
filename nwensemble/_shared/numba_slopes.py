"""Compiled host kernels for the feature slopes' piecewise-linear map
(numba): its values and its derivative in the slopes, each in one pass
over the values.

The array-API path (``feature_slopes.FeatureSlopes``) takes every bin's
ramp as an array of the values' size and sums them: a pass over the values
per bin, and several arrays besides. Here each value finds its bin by
compares in vector lanes and then takes one line (the map) or adds into
one bin (the gradient), so that the work besides the compares does not
grow with the bins, and there is no array of the values' size besides.
They serve NumPy arrays on the host only; ``compiled`` says when they run
(numba imported, and not disabled with ``NWENSEMBLE_COMPILED=0``, see
``numba_kernels``).
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared import numba_kernels
from nwensemble._shared.backend import eager_host

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency
    numba = None


def compiled(xp, *arrays):
    """Whether the kernels serve ``arrays`` (of namespace ``xp``): on the
    host with numba available, all of one floating dtype."""
    if not (numba_kernels.available() and eager_host(xp)):
        return False
    return len({a.dtype for a in arrays}) == 1


def piecewise_map(N, low, width, slope):
    """The map's values (n, p) at ``N`` (n, p): feature ``j``'s knots
    ``low[j]`` (bins), bin widths ``width[j]`` and slopes ``slope[j]``, the
    first bin open below and the last above; NaN stays NaN."""
    out = np.empty(N.shape, dtype=N.dtype)
    return _piecewise_map(
        N, *(np.ascontiguousarray(a.T) for a in (low, width, slope)), out
    )


def ramp_sums(N, dN, low, width):
    """``sum_i dN[i, j] ramp_b(N[i, j])`` (p, bins), the ramps those of
    ``piecewise_map`` (the map's derivative in ``slope[j, b]``); summed in
    float64, returned in ``N``'s dtype. ``N`` holds no NaN (a fit's rows,
    their missing values filled)."""
    sums = np.zeros(low.shape[::-1], dtype=np.float64)
    _ramp_sums(N, dN, *(np.ascontiguousarray(a.T) for a in (low, width)), sums)
    return sums.T.astype(N.dtype)


if numba is not None:
    # Fast-math for vector lanes, without assuming that no value is NaN.
    _jit = numba.njit(
        nogil=True,
        cache=True,
        fastmath={"nsz", "arcp", "contract", "afn", "reassoc"},
        error_model="numpy",
    )

    # Each value's bin is the count of the knots above the first at or
    # below it (the compares run along the row's features in vector lanes);
    # the map is then that bin's line, through the map's value at the bin's
    # knot, and the gradient gathers, per bin, the sums that the bins below
    # it take in full: a lookup and a scatter per value whatever the bins.

    @_jit
    def _bins_of_row(N, i, low, counts):
        p = N.shape[1]
        for j in range(p):
            counts[j] = 0
        for b in range(1, low.shape[0]):
            for j in range(p):
                counts[j] += N[i, j] >= low[b, j]

    @_jit
    def _piecewise_map(N, low, width, slope, out):
        n, p = N.shape
        # The map's value at each bin's first knot.
        at_knot = np.empty_like(low)
        at_knot[0, :] = low[0, :]
        for b in range(1, low.shape[0]):
            for j in range(p):
                at_knot[b, j] = at_knot[b - 1, j] + slope[b - 1, j] * width[b - 1, j]
        counts = np.zeros(p, dtype=np.int32)
        for i in range(n):
            _bins_of_row(N, i, low, counts)
            for j in range(p):
                b = counts[j]
                # NaN compares false, lands in bin 0 and stays NaN.
                out[i, j] = at_knot[b, j] + slope[b, j] * (N[i, j] - low[b, j])
        return out

    @_jit
    def _ramp_sums(N, dN, low, width, sums):
        n, p = N.shape
        bins = low.shape[0]
        # Per bin, the gradient of the values in it, and that times their
        # distance from its first knot.
        inside = np.zeros((bins, p), dtype=np.float64)
        along = np.zeros((bins, p), dtype=np.float64)
        counts = np.zeros(p, dtype=np.int32)
        for i in range(n):
            _bins_of_row(N, i, low, counts)
            for j in range(p):
                b = counts[j]
                inside[b, j] += dN[i, j]
                along[b, j] += dN[i, j] * (N[i, j] - low[b, j])
        # A bin's ramp is its width for every value in a bin above it.
        for j in range(p):
            above = 0.0
            for b in range(bins - 1, -1, -1):
                sums[b, j] = along[b, j] + width[b, j] * above
                above += inside[b, j]
        return sums
