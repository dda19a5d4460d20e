"""Early stopping: whether a fit holds rows out, which rows, their loss, and
the monitor that keeps the best parameters by it."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from dataclasses import dataclass

import numpy as np

from nwensemble._shared.backend import namespace_of, to_numpy
from nwensemble._shared.keys import Keys
from nwensemble._shared.rows import take_rows

# early_stopping='auto' holds out rows from this many positive-weight
# samples on ...
EARLY_STOPPING_MIN_ROWS = 50
# ... and below this many rows per learned parameter: with fewer, fitting
# noise costs more than the held-out rows; with more, they are worth more
# as training data (per-set figures in the performance notes).
_ROWS_PER_PARAMETER = 20
# validation_fraction='auto': the share of rows the full-batch solver holds
# out for early stopping, and the share the stochastic solver holds out
# (always, for its final bandwidth factor). The former judge the stop, the
# readout and its kernel width on tables with few rows per parameter, and
# come back as keys after the fit, so they cost the projection's training
# rows only; the latter choose the width themselves, on large tables.
EARLY_STOPPING_FRACTION = 0.3
SOLVER_FRACTION = 0.1


def holds_out(early_stopping, n_positive, n_params=None):
    """Whether a fit holds rows out for early stopping: as given for a bool;
    for ``'auto'`` from ``EARLY_STOPPING_MIN_ROWS`` positive rows on and
    below ``_ROWS_PER_PARAMETER`` of them per learned parameter
    (``n_params`` None: no upper bound)."""
    if early_stopping != "auto":
        return bool(early_stopping)
    if n_positive < EARLY_STOPPING_MIN_ROWS:
        return False
    return n_params is None or n_positive < _ROWS_PER_PARAMETER * n_params


@dataclass(frozen=True)
class HoldOut:
    """How one solver run holds rows out: the share of the rows of positive
    weight (0: none) and whether its iterates are scored on them (early
    stopping)."""

    fraction: float
    scored: bool


def hold_out_plan(
    early_stopping, validation_fraction, *, n_positive, n_params, stochastic, choosing
):
    """The ``HoldOut`` of a solver run: the one reading of the parameters
    ``early_stopping`` and ``validation_fraction``.

    The stochastic solver always holds rows out (``SOLVER_FRACTION`` for
    ``'auto'``), on which it chooses its final width, and scores its epochs
    on them unless ``early_stopping=False``. L-BFGS holds out
    (``EARLY_STOPPING_FRACTION`` for ``'auto'``) as ``holds_out`` says for
    ``n_params`` learned parameters, with no upper bound when the fit is
    ``choosing`` among candidates on the held-out rows (``diversity=
    'auto'``).
    """
    auto = validation_fraction == "auto"
    if stochastic:
        fraction = SOLVER_FRACTION if auto else validation_fraction
        return HoldOut(fraction, scored=early_stopping is not False)
    limit = None if choosing else n_params
    if not holds_out(early_stopping, n_positive, limit):
        return HoldOut(0.0, scored=False)
    return HoldOut(EARLY_STOPPING_FRACTION if auto else validation_fraction, True)


def split_validation(plan, Xs, Ys, sw, *, rng, xp):
    """Split off the rows the ``HoldOut`` ``plan`` holds out; return
    ``(train, val, val_rows)`` or ``(all, None, None)``.

    Each part is ``(X, Y, sw)`` with weights renormalised to sum to one;
    ``val_rows`` are the held-out rows' indices (sorted NumPy integers).
    """
    if plan.fraction == 0:
        return (Xs, Ys, sw), None, None
    positive = np.flatnonzero(to_numpy(sw) > 0)
    fraction = plan.fraction
    n_val = int(math.ceil(fraction * positive.shape[0]))
    if n_val < 1 or positive.shape[0] - n_val < 2:
        raise ValueError(
            f"early_stopping=True with validation_fraction={fraction}"
            f" leaves {positive.shape[0] - n_val} training and {n_val} validation "
            "rows; need at least 2 and 1. Use more samples or early_stopping=False."
        )
    val_rows = np.sort(rng.choice(positive, size=n_val, replace=False))
    mask = np.ones(Xs.shape[0], dtype=bool)
    mask[val_rows] = False
    train = take_rows(Xs, Ys, sw, np.flatnonzero(mask), xp=xp)
    return train, take_rows(Xs, Ys, sw, val_rows, xp=xp), val_rows


def heldout_loss(W, Xq, Yq, swq, Xk, Yk, swk, *, kernel, n_heads):
    """Weighted MSE of queries ``Xq`` predicted from keys ``Xk`` (no overlap)
    through the projection ``W`` (an array of their namespace), evaluated in
    the rows' dtype.

    Used for early stopping: held-out rows are queries only, never keys.
    """
    xp, _ = namespace_of(Yk)
    R = heldout_residuals(W, Xq, Yq, Xk, Yk, swk, kernel=kernel, n_heads=n_heads)
    return float(xp.sum(swq * xp.sum(R * R, axis=1)))


def heldout_residuals(W, Xq, Yq, Xk, Yk, swk, *, kernel, n_heads):
    """The residuals ``estimate - Yq`` (n_queries, t) of queries ``Xq``
    predicted from keys ``Xk`` (no overlap) through the projection ``W``."""
    xp, _ = namespace_of(Yk)
    W = xp.astype(W, Yk.dtype, copy=False)
    keys = Keys.of(Xk.project(W), Yk, swk, kernel=kernel, n_heads=n_heads)
    return keys.passes().estimates(Xq.project(W)) - Yq


class EarlyStopping:
    """Track a held-out loss across iterations and keep the best parameters.

    Parameters
    ----------
    val_loss : callable
        ``val_loss(theta) -> float`` on held-out rows; ``theta`` is a NumPy
        vector (L-BFGS) or the solver's array on its device (Adam).
    patience : int
        Stop after this many iterations without an improvement of more than
        ``tol`` (relative).
    tol : float
    noisy : bool, default=False
        The losses fluctuate from one iteration to the next (minibatch
        epochs): also stop once they are flat, that is when the best of the
        last ``patience`` losses improves on the best before them by less
        than the standard deviation of those ``patience`` losses (a new best
        that small is the fluctuation, not progress).
    """

    def __init__(self, val_loss, *, patience, tol, noisy=False):
        self.val_loss = val_loss
        self.patience = patience
        self.tol = tol
        self.noisy = noisy
        self.best = np.inf
        self.best_theta = None
        self.last = np.inf
        self.history = []
        self._stale = 0

    def start(self, theta, *, score=True):
        """Begin from ``theta``: scored, so that a fit can never end worse, or
        (``score=False``) only kept as the answer until an iterate is scored."""
        # Kept as the answer until an iterate scores better, also when its
        # own score is not finite.
        self.best_theta = _kept(theta)
        if score:
            self.update(theta)
        self._stale = 0

    def reset_patience(self):
        """Give a new optimisation stage its full patience."""
        self._stale = 0

    def update(self, theta):
        """Record the held-out loss at ``theta``; return True to stop."""
        self.last = self.val_loss(theta)
        self.history.append(self.last)
        if self.last < self.best * (1.0 - self.tol):
            self._stale = 0
        else:
            self._stale += 1
        if self.last < self.best:
            self.best = self.last
            self.best_theta = _kept(theta)
        return self._stale >= self.patience or (self.noisy and self.flat())

    def epochs_left(self, limit):
        """A forecast of the iterations left before the losses are flat (at
        most ``limit``), for progress lines; None before three losses.

        The running best's improvement per iteration, ``g``, over the last
        ``k = min(n / 3, patience)`` iterations is taken to shrink by a
        factor ``q`` per iteration, ``q`` from ``g`` over the ``k`` before
        (within [0.3, 0.97]); the fit should stop ``patience`` iterations
        (less those already without an improvement) after ``g`` falls to
        the losses' own fluctuation (their standard deviation above the
        running best over the last ``patience``, at least ``tol`` times the
        best) spread over ``patience`` iterations.
        """
        h = np.asarray(self.history, dtype=np.float64)
        n, P = h.shape[0], self.patience
        if n < 3 or not np.all(np.isfinite(h)):
            return None
        best = np.minimum.accumulate(h)
        k = max(1, min(n // 3, P))
        now = (best[-1 - k] - best[-1]) / k
        threshold = max(float(np.std(h[-P:] - best[-P:])), self.tol * best[-1]) / P
        # The fit stops ``patience`` iterations after its last improvement,
        # some of which may have passed already.
        waits = max(P - self._stale, 1)
        if now <= threshold:
            return min(waits, limit)
        q = 0.9
        if n > 2 * k:
            before = (best[-1 - 2 * k] - best[-1 - k]) / k
            if before > 0:
                q = min(max((now / before) ** (1.0 / k), 0.3), 0.97)
        more = math.log(threshold / now) / math.log(q)
        return int(min(limit, math.ceil(more) + waits))

    def flat(self):
        """Whether the last ``patience`` losses are flat (see ``noisy``)."""
        P = self.patience
        if len(self.history) <= P:
            return False
        recent = np.asarray(self.history[-P:], dtype=np.float64)
        improvement = min(self.history[:-P]) - recent.min()
        return bool(improvement < recent.std())


def _kept(theta):
    """``theta`` kept as it is now: NumPy arrays are copied (the optimiser
    may write into them), others (device arrays the solver replaces at each
    step) are kept as they are."""
    return theta.copy() if isinstance(theta, np.ndarray) else theta
