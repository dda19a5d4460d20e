"""The precision a solver evaluates its loss in.

A float64 fit on many rows evaluates its training and held-out losses in
float32: an evaluation costs less (the exp and the (n, n) products run at
twice the width), and the loss's rounding, float32's relative precision,
is far below ``tol`` and below a minibatch's noise. The
parameters, the optimiser's state and the fitted model stay float64
(performance notes).
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
