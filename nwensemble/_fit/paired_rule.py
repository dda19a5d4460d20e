"""The paired rule that decides between two fits by the rows both predict:
the newer is taken only where its rows' squared errors are clearly lower."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

# Clearly: by more than this many standard errors of the rows' paired
# differences (the usual two: a pick between two fits that predict alike is
# a coin flip).
PAIRED_STANDARD_ERRORS = 2.0


def paired_gain_is_clear(before, after, w, *, standard_errors=PAIRED_STANDARD_ERRORS):
    """Whether the rows' squared errors ``after`` are lower than ``before``
    (the same rows) by more than ``standard_errors`` standard errors of
    their weighted mean difference (weights ``w``, any scale)."""
    total = float(np.sum(w))
    if before.size < 2 or total <= 0:
        return False
    w = w / total
    gain = before - after
    mean = float(w @ gain)
    spread = float(w @ (gain - mean) ** 2)
    standard_error = math.sqrt(spread * float(w @ w))
    return mean > standard_errors * standard_error
