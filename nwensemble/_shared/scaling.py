"""Exact rescaling by powers of two, so that sums of squares of targets and
residuals neither overflow nor underflow at any scale of the data."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

from nwensemble._shared.backend import namespace_of


def power_of_two_scale(A):
    """A power of two ``s`` with ``max |A| / s`` in [1, 2) (1.0 when ``A`` is
    empty, all zero or not finite).

    Dividing by ``s`` (and multiplying back) is exact in floating point away
    from subnormal numbers, so results computed on ``A / s`` and scaled back
    equal those computed on ``A`` wherever those are finite.
    """
    if A.shape[0] == 0:
        return 1.0
    xp, _ = namespace_of(A)
    largest = float(xp.max(xp.abs(A)))
    if not (math.isfinite(largest) and largest > 0):
        return 1.0
    return math.ldexp(1.0, math.frexp(largest)[1] - 1)
