"""Subsets of weighted training rows, their weights renormalised."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared.backend import device, to_numpy


def take_rows(Xs, Ys, sw, rows, *, xp):
    """``(X, Y, sw)`` of ``rows`` (NumPy integers), the weights renormalised
    to sum to one."""
    idx = xp.asarray(rows, device=device(sw))
    w = xp.take(sw, idx, axis=0)
    return Xs.take(idx), xp.take(Ys, idx, axis=0), w / xp.sum(w)


def subsample(Xs, Ys, sw, size, *, rng, xp):
    """At most ``size`` rows with positive weight, weights renormalised."""
    positive = np.flatnonzero(to_numpy(sw) > 0)
    if positive.shape[0] <= size and positive.shape[0] == Xs.shape[0]:
        return Xs, Ys, sw
    rows = np.sort(
        rng.choice(positive, size=min(size, positive.shape[0]), replace=False)
    )
    return take_rows(Xs, Ys, sw, rows, xp=xp)
