"""Heads that attend with a null key: the third stage of
``ResidualStageRegressor``.

A null key is one more key, of value zero, that every query sees at one
learned logit ``b``. A head's estimate at a query ``q`` is then

    sum_j e_j r_j / (sum_j e_j + exp(b)),   e_j = w_j exp(-||W^T q - z_j||^2 / 2),

with ``z_j = W^T x_j`` the keys and ``r_j`` their values (residuals). Near
training rows their weighted mean comes through; far from every row the
null key takes the weight and the head adds nothing. A softmax without it
gives all its weight to the nearest rows however far they lie, so a head
that narrows its kernel to resolve what the earlier stages blurred would
carry noise into every sparse region; with the null key it can narrow
where the rows are close (a mix of ingredients measured at several ages,
say) and stay silent elsewhere.

Each member fits its own projection and logit on a random few hundred of
the rows it may learn, early-stopped on a fifth of them held out; a member
whose held-out rows are predicted no better than by zero adds nothing,
and the stage is kept only where the members as kept beat zero on their
held-out rows by more than the standard error of the rows' paired
differences. The members' estimates are averaged, every row serving as a
key.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from nwensemble._fit.early_stopping import EarlyStopping
from nwensemble._fit.paired_rule import paired_gain_is_clear
from nwensemble._shared.attention import (
    attention_logits,
    chunk_rows,
    log_weights,
    set_diagonal,
)
from nwensemble._shared.backend import device, to_numpy

# Rows each member's projection is fitted on (a fifth of them held out to
# stop on): the loss is dense in them, and a few hundred rows are enough
# for a (d, d) projection that only refines the first stage's metric.
FIT_ROWS = 512
N_MEMBERS = 4
# The members start at half the first stage's kernel width (twice its
# coordinates): the stage is for what that width blurred.
START_SCALE = 2.0
MAX_ITER = 50
PATIENCE = 5
TOL = 1e-5
# Fewer learnable rows than this: no stage (too few to hold a fifth out).
MIN_ROWS = 50


@dataclass(frozen=True)
class NullKeyHeads:
    """Fitted null-key heads over one set of keys.

    Attributes
    ----------
    projections : list of arrays of shape (d, d)
        Each member's projection of the coordinates it reads; members that
        add nothing are left out (``n_members`` counts them all).
    log_nulls : list of float
        Each listed member's null-key logit ``b``.
    n_members : int
        The members fitted, those that add nothing included: the estimate
        is the sum of the listed members' estimates over ``n_members``.
    keys : array of shape (n, d)
        The coordinates of the training rows (before the projections).
    values : array of shape (n, t)
        Their residuals.
    log_sw : array of shape (n,)
        Their log weights.
    """

    projections: list
    log_nulls: list
    n_members: int
    keys: object
    values: object
    log_sw: object

    def predict(self, Q, *, xp):
        """The mean of the members' estimates at the coordinates ``Q`` (m, d),
        shape (m, t)."""
        return self._mean(Q, xp=xp)

    def left_out(self, rows, *, xp):
        """Each of the key rows ``rows`` (host ints) estimated from the other
        keys, shape (len(rows), t)."""
        return self._mean(None, rows=rows, xp=xp)

    def _mean(self, Q, *, xp, rows=None):
        n_queries = Q.shape[0] if rows is None else rows.shape[0]
        X = self.keys
        total = xp.zeros(
            (n_queries, self.values.shape[1]), dtype=X.dtype, device=device(X)
        )
        for W, b in zip(self.projections, self.log_nulls):
            Z = X @ W
            if rows is None:
                Zq = Q @ W
            else:
                Zq = xp.take(Z, xp.asarray(rows, device=device(X)), axis=0)
            total = total + _estimates(
                Zq, Z, self.values, self.log_sw, b, xp=xp, self_rows=rows
            )
        return total / self.n_members


def fit_null_key_heads(X, R, sw, learnable, *, rng, xp):
    """``NullKeyHeads`` over the rows ``X`` (n, d) with values ``R`` (n, t),
    or None where no member adds anything or the members' gain on their
    held-out rows is within its standard error.

    Only the rows ``learnable`` (host ints) fit the members' projections
    and stop them; every row of positive weight ``sw`` is a key.
    """
    positive = to_numpy(sw) > 0
    learnable = learnable[positive[learnable]]
    if learnable.shape[0] < MIN_ROWS:
        return None
    # A key of weight one counts as one row against the null key's
    # exp(b), at fit and at prediction alike.
    sw = sw * (float(np.count_nonzero(positive)) / float(xp.sum(sw)))
    scale = _target_scale(R, sw, xp=xp)
    projections, log_nulls, changes = [], [], []
    for _ in range(N_MEMBERS):
        fitted, change = _fit_member(X, R / scale, sw, learnable, rng=rng, xp=xp)
        changes.append(change)
        if fitted is not None:
            projections.append(fitted[0])
            log_nulls.append(fitted[1])
    # The members as kept must predict their held-out rows better than
    # silence by more than the standard error of the rows' paired changes
    # (the one-standard-error rule of the readout's choice).
    change = np.concatenate(changes)
    if not projections or not _clear_gain(change):
        return None
    return NullKeyHeads(projections, log_nulls, N_MEMBERS, X, R, log_weights(sw, xp=xp))


def _clear_gain(change):
    """Whether the rows' changes in squared error have a mean below zero by
    more than its standard error."""
    return paired_gain_is_clear(
        np.zeros_like(change), change, np.ones_like(change), standard_errors=1.0
    )


def _target_scale(R, sw, *, xp):
    """The values' weighted root mean square (1 where it is zero), so that
    the loss reads as a fraction of it."""
    w = sw / xp.sum(sw)
    ms = float(xp.sum(w[:, None] * R * R))
    return math.sqrt(ms) if ms > 0 else 1.0


def _fit_member(X, R, sw, learnable, *, rng, xp):
    """One member's ``(W, b)`` fitted on a random ``FIT_ROWS`` of the rows
    ``learnable`` (None where its held-out rows are predicted no better
    than by zero), and each held-out row's change in weighted squared
    error against zero (zeros for a member that adds nothing)."""
    rows = rng.permutation(learnable)[:FIT_ROWS]
    n_held = rows.shape[0] // 5
    dev = device(X)
    held, fit = (
        xp.asarray(np.sort(part), device=dev) for part in (rows[:n_held], rows[n_held:])
    )
    # In float32: a few hundred rows' loss needs no more, and its
    # exponentials run several times faster.
    Xf, Rf, wf, Xh, Rh, wh = (
        xp.astype(xp.take(a, part, axis=0), xp.float32)
        for part in (fit, held)
        for a in (X, R, sw)
    )
    log_wf = log_weights(wf, xp=xp)
    wf, wh = wf / xp.sum(wf), wh / xp.sum(wh)
    d = X.shape[1]

    def unpack(theta, dtype=xp.float32):
        W = xp.asarray(np.reshape(theta[:-1], (d, d)), dtype=dtype, device=dev)
        return W, float(theta[-1])

    def heldout(theta):
        W, b = unpack(theta)
        E = _estimates(Xh @ W, Xf @ W, Rf, log_wf, b, xp=xp)
        return float(xp.sum(wh[:, None] * (E - Rh) ** 2))

    def fun(theta):
        W, b = unpack(theta)
        return _loo_loss_and_grad(W, b, Xf, Rf, wf, log_wf, xp=xp)

    theta0 = np.concatenate([(START_SCALE * np.eye(d)).ravel(), [0.0]])
    monitor = EarlyStopping(heldout, patience=PATIENCE, tol=TOL)
    monitor.start(theta0)

    def stop_early(intermediate_result):
        if monitor.update(intermediate_result.x):
            raise StopIteration  # scipy ends the run (status 99)

    minimize(
        fun,
        theta0,
        jac=True,
        method="L-BFGS-B",
        callback=stop_early,
        options={"maxiter": MAX_ITER, "ftol": TOL, "gtol": TOL},
    )
    W, b = unpack(monitor.best_theta)
    # Each held-out row's change in squared error against zero, times its
    # weight (the weights' mean one).
    E = _estimates(Xh @ W, Xf @ W, Rf, log_wf, b, xp=xp)
    change = to_numpy(wh * xp.sum((E - Rh) ** 2 - Rh * Rh, axis=1))
    change = change.astype(np.float64) * wh.shape[0]
    if not np.sum(change) < 0:
        return None, np.zeros_like(change)
    return (unpack(monitor.best_theta, X.dtype), change)


def _estimates(Q, Z, R, log_sw, b, *, xp, self_rows=None):
    """Null-key estimates ``(m, t)`` of the projected queries ``Q`` from the
    keys ``Z`` with values ``R``, in blocks of queries; ``self_rows``
    (host ints): the queries are those keys, each left out of its own
    estimate."""
    n_queries = Q.shape[0]
    step = chunk_rows(n_queries, Z.shape[0], Z.dtype, xp=xp)
    blocks = []
    for start in range(0, n_queries, step):
        stop = min(start + step, n_queries)
        S = _scores(Q[start:stop, :], Z, log_sw, xp=xp)
        if self_rows is not None:
            own = xp.asarray(self_rows[start:stop], device=device(Z))
            hit = xp.arange(Z.shape[0], device=device(Z))[None, :] == own[:, None]
            S = xp.where(hit, xp.full_like(S, -math.inf), S)
        P, _ = _normalised(S, b, xp=xp)
        blocks.append(P @ R)
    return xp.concat(blocks, axis=0)


def _scores(Q, Z, log_sw, *, xp):
    """``-||q_i - z_j||^2 / 2 + log w_j``, shape (m, n), from one product."""
    bias = log_sw - 0.5 * xp.sum(Z * Z, axis=1)
    return attention_logits(Q, Z, bias, xp=xp, query_norms=True)


def _normalised(S, b, *, xp):
    """The keys' weights and the null key's, ``(P (m, n), p0 (m,))``, from
    the scores ``S`` and the null logit ``b``."""
    top = xp.max(S, axis=1)
    top = xp.where(top > b, top, xp.full_like(top, b))
    E = xp.exp(S - top[:, None])
    null = xp.exp(b - top)
    total = xp.sum(E, axis=1) + null
    return E / total[:, None], null / total


def _loo_loss_and_grad(W, b, X, R, sw, log_sw, *, xp):
    """Weighted leave-one-out squared error of one null-key head on the
    rows ``X`` (n, p) with values ``R`` (n, t), and its gradient in
    ``[W, b]`` (a float64 NumPy vector).

    With ``P`` the rows' weights, ``Y`` their estimates and ``U = 2 sw (Y -
    R)``, the loss's derivative in the score ``s_ij`` is ``G_ij = P_ij
    U_i . (R_j - Y_i)`` (the null key's value is zero), in ``b`` it is
    ``-sum_i p0_i U_i . Y_i``; and ``s_ij = -||z_i - z_j||^2 / 2`` gives
    ``dZ = (G + G^T) Z - diag(rowsum(G + G^T)) Z``.
    """
    Z = X @ W
    S = set_diagonal(_scores(Z, Z, log_sw, xp=xp), -math.inf, xp=xp)
    P, p0 = _normalised(S, b, xp=xp)
    Y = P @ R
    D = Y - R
    loss = float(xp.sum(sw[:, None] * D * D))
    U = 2.0 * sw[:, None] * D
    c = xp.sum(U * Y, axis=1)
    G = P * (U @ R.T) - P * c[:, None]
    A = G + G.T
    dZ = A @ Z - xp.sum(A, axis=1)[:, None] * Z
    dW = X.T @ dZ
    db = -float(xp.sum(p0 * c))
    grad = np.concatenate([to_numpy(dW).astype(np.float64).ravel(), [db]])
    return loss, grad
