"""Compiled host kernels for the feature slopes' piecewise-linear map
(numba): its values and its derivative in the slopes, each in one pass
over the values.

The array-API path (``feature_slopes.FeatureSlopes``) takes every bin's
ramp as an array of the values' size and sums them: a pass over the values
per bin, and several arrays besides. Here each row's values take every
bin's part in registers, so that a minibatch's map and its gradient cost
one pass over the values each, with no array besides. They serve NumPy
arrays on the host only; ``compiled`` says when they run (numba imported,
and not disabled with ``NWENSEMBLE_COMPILED=0``, see ``numba_kernels``).
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

    # Each row's values against each bin in turn, the bins' knots, widths
    # and slopes as (bins, p) tables: the inner loops run along the row's
    # features in vector lanes, with no branch on which bin a value is in.

    @_jit
    def _piecewise_map(N, low, width, slope, out):
        n, p = N.shape
        last = low.shape[0] - 1
        if last == 0:  # one bin, open both ways: a line
            for i in range(n):
                for j in range(p):
                    out[i, j] = low[0, j] + slope[0, j] * (N[i, j] - low[0, j])
            return out
        for i in range(n):
            for j in range(p):
                out[i, j] = low[0, j] + slope[0, j] * min(
                    N[i, j] - low[0, j], width[0, j]
                )
            for b in range(1, last):
                for j in range(p):
                    ramp = min(max(N[i, j] - low[b, j], 0.0), width[b, j])
                    out[i, j] += slope[b, j] * ramp
            for j in range(p):
                out[i, j] += slope[last, j] * max(N[i, j] - low[last, j], 0.0)
            for j in range(p):
                if N[i, j] != N[i, j]:
                    out[i, j] = N[i, j]
        return out

    @_jit
    def _ramp_sums(N, dN, low, width, sums):
        n, p = N.shape
        last = low.shape[0] - 1
        if last == 0:
            for i in range(n):
                for j in range(p):
                    sums[0, j] += dN[i, j] * (N[i, j] - low[0, j])
            return sums
        for i in range(n):
            for j in range(p):
                sums[0, j] += dN[i, j] * min(N[i, j] - low[0, j], width[0, j])
            for b in range(1, last):
                for j in range(p):
                    ramp = min(max(N[i, j] - low[b, j], 0.0), width[b, j])
                    sums[b, j] += dN[i, j] * ramp
            for j in range(p):
                sums[last, j] += dN[i, j] * max(N[i, j] - low[last, j], 0.0)
        return sums
