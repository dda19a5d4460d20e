"""The precision a solver evaluates its loss in, and that of the sums
behind the leave-one-out statistics.

A float64 fit on many rows evaluates its training and held-out losses in
float32: an evaluation costs less (the exp and the (n, n) products run at
twice the width), and the loss's rounding, float32's relative precision,
is far below ``tol`` and below a minibatch's noise. The
parameters, the optimiser's state and the fitted model stay float64
(performance notes). So, after the fit, do the attention's sums behind
the leave-one-out statistics that choose the readout: their rounding is
far below the statistics' own sampling noise, and the local lines are
still solved in float64 from them.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

# From this many float64 rows on, losses are evaluated in float32: from
# the size of one-head L-BFGS's coarse stage and Adam's minibatch, so that
# every stage and fit that size or larger takes the faster evaluation
# (the performance notes compare the two); smaller fits are cheap either
# way.
FLOAT32_LOSS_ROWS = 1024


def loss_rows(X, Y, sw, *, xp, n_rows=None):
    """``(X, Y, sw)`` in the dtype their loss is evaluated in: float32 for
    float64 rows when there are at least ``FLOAT32_LOSS_ROWS`` of them
    (``n_rows``, ``X``'s row count unless given), else as they are."""
    n_rows = X.shape[0] if n_rows is None else n_rows
    if X.dtype != xp.float64 or n_rows < FLOAT32_LOSS_ROWS:
        return X, Y, sw
    return (
        X.astype(xp.float32),
        xp.astype(Y, xp.float32),
        xp.astype(sw, xp.float32),
    )


def statistics_keys(keys):
    """``keys`` (a ``Keys``) in the dtype the leave-one-out statistics take
    their attention sums in: float32 for float64 keys from
    ``FLOAT32_LOSS_ROWS`` of them on, else as they are."""
    xp = keys.xp
    if keys.Z.dtype != xp.float64 or keys.n_samples < FLOAT32_LOSS_ROWS:
        return keys
    return keys.astype(xp.float32)
