"""Nadaraya-Watson attention numerics: leave-one-out loss, its gradient, prediction.

Every function takes an explicit array namespace ``xp`` and assumes validated,
same-namespace, same-device, same-dtype inputs.

Notation: ``X`` (n, p) standardised training features, ``W`` (p, d) the projection
(``components_`` is ``W.T`` in original units), ``Z = X @ W`` the projected rows,
``Y`` (n, t) targets, ``log_sw`` (n,) log sample weights (``-inf`` drops a row).
The score of query ``q`` for key ``k`` is ``-||q - k||^2 / 2``; the query's own
squared norm is the same for every key of its row, so it is left out of the
logits (softmax is invariant to a per-row constant).
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

from nwensemble._backend import device, exp_inplace


def _set_diagonal(A, value, *, xp):
    """Return square ``A`` with its diagonal set to ``value``.

    Works through a flat view where the namespace gives one (NumPy, CuPy) and
    through a copy elsewhere, without an (n, n) boolean mask.
    """
    n = A.shape[0]
    flat = xp.reshape(A, (n * n,))
    flat[:: n + 1] = value
    return xp.reshape(flat, (n, n))


def key_bias(Z, log_sw, *, xp):
    """Per-key logit offset: ``-||z_j||^2 / 2 + log w_j``."""
    return log_sw - 0.5 * xp.sum(Z * Z, axis=1)


def attention_logits(Q, Z, bias, *, xp):
    """Logits ``q_i . z_j + bias_j`` from one matrix product.

    The bias rides along as an extra column (``[Q, 1] @ [Z, bias]^T``), which
    saves a pass over the (m, n) block.
    """
    ones = xp.ones((Q.shape[0], 1), dtype=Q.dtype, device=device(Q))
    Q_aug = xp.concat([Q, ones], axis=1)
    K_aug = xp.concat([Z, bias[:, None]], axis=1)
    return Q_aug @ K_aug.T


def loo_attention(Z, log_sw, *, xp):
    """Unnormalised leave-one-out attention of the training rows on each other.

    Returns ``E`` (n, n) with ``E[i, j] = exp(logit_ij - max_j logit_ij)`` and
    ``E[i, i] = 0``: a row never attends to itself. Rows are not normalised;
    callers divide by the row sums they get from one matrix product.
    """
    A = attention_logits(Z, Z, key_bias(Z, log_sw, xp=xp), xp=xp)
    A = _set_diagonal(A, -math.inf, xp=xp)
    A -= xp.max(A, axis=1, keepdims=True)
    return exp_inplace(A, xp=xp)


def loo_loss_and_grad(W, X, Y, sw, *, xp, return_grad=True):
    """Weighted leave-one-out mean squared error of NW attention and its gradient.

    Parameters
    ----------
    W : array of shape (p, d)
    X : array of shape (n, p)
    Y : array of shape (n, t)
        Targets, already scaled so that the loss is relative to their variance.
    sw : array of shape (n,)
        Non-negative sample weights summing to one; at least two positive.
    xp : namespace
    return_grad : bool

    Returns
    -------
    loss : float
        ``sum_i sw_i ||y_hat_i - y_i||^2`` with ``y_hat_i`` the leave-one-out NW
        estimate.
    grad : array of shape (p, d) or None

    Notes
    -----
    With ``G[i, j] = dloss / dlogit_ij`` the gradient is ``-X^T L Z`` where
    ``L = diag(rowsum G + colsum G) - G - G^T``; rows of ``G`` sum to zero (a
    softmax row is shift invariant), so the row sums drop out. ``G`` is never
    formed: with ``E`` the unnormalised attention, ``s`` its row sums and
    ``R = Y_hat - Y``,

        G = sum_k diag(a * R[:, k]) E diag(Y[:, k]) - diag(b) E,
        a = 2 sw / s,  b = a * rowsum(R * Y_hat),

    so ``G Z``, ``G^T Z`` and ``colsum G`` come from one product with ``E`` and one
    with ``E^T``. Cost: three (n, n) matrix products of inner size about
    ``(t + 1)(d + 1)``, one exp; two (n, n) arrays alive at most.
    """
    n, t = Y.shape
    d = W.shape[1]
    Z = X @ W
    log_sw = _log_weights(sw, xp=xp)
    E = loo_attention(Z, log_sw, xp=xp)
    ones = xp.ones((n, 1), dtype=X.dtype, device=device(X))
    if not return_grad:
        num = E @ xp.concat([Y, ones], axis=1)
        Y_hat = num[:, :t] / num[:, t:]
        R = Y_hat - Y
        return float(xp.sum(sw * xp.sum(R * R, axis=1))), None

    # One pass over E for the forward values and everything G @ Z needs.
    YZ = xp.concat([Y[:, k : k + 1] * Z for k in range(t)] + [Z, Y, ones], axis=1)
    M = E @ YZ
    s = M[:, -1:]
    Y_hat = M[:, t * d + d : t * d + d + t] / s
    R = Y_hat - Y
    loss = float(xp.sum(sw * xp.sum(R * R, axis=1)))

    a = 2.0 * sw[:, None] / s  # (n, 1)
    b = a * xp.sum(R * Y_hat, axis=1, keepdims=True)
    aR = a * R  # (n, t)
    GZ = -b * M[:, t * d : t * d + d]
    for k in range(t):
        GZ += aR[:, k : k + 1] * M[:, k * d : (k + 1) * d]

    # One pass over E^T for G^T @ Z and the column sums of G.
    V = xp.concat([aR[:, k : k + 1] * Z for k in range(t)] + [b * Z, aR, b], axis=1)
    N = E.T @ V
    del E
    GtZ = -N[:, t * d : t * d + d]
    colsum = -N[:, -1:]
    for k in range(t):
        GtZ += Y[:, k : k + 1] * N[:, k * d : (k + 1) * d]
        colsum += Y[:, k : k + 1] * N[:, t * d + d + k : t * d + d + k + 1]

    LZ = colsum * Z - GZ - GtZ
    grad = -(X.T @ LZ)
    return loss, grad


def predict_block(Q, Z, Y_aug, bias, *, xp):
    """NW estimates for one block of projected queries.

    Parameters
    ----------
    Q : array of shape (m, d)
        Projected queries.
    Z : array of shape (n, d)
        Projected training rows.
    Y_aug : array of shape (n, t + 1)
        Training targets with a column of ones appended, so that the numerator
        and the normaliser come from one matrix product.
    bias : array of shape (n,)
        ``key_bias(Z, log_sw)``.

    Returns
    -------
    Y_hat : array of shape (m, t)
    """
    A = attention_logits(Q, Z, bias, xp=xp)
    A -= xp.max(A, axis=1, keepdims=True)
    num = exp_inplace(A, xp=xp) @ Y_aug
    return num[:, :-1] / num[:, -1:]


def heldout_loss(W, Xq, Yq, swq, Xk, Yk, swk, *, xp):
    """Weighted MSE of queries ``Xq`` predicted from keys ``Xk`` (no overlap).

    Used for early stopping: held-out rows are queries only, never keys.
    """
    Zk = Xk @ W
    bias = key_bias(Zk, _log_weights(swk, xp=xp), xp=xp)
    ones = xp.ones((Yk.shape[0], 1), dtype=Yk.dtype, device=device(Yk))
    Y_hat = predict_block(Xq @ W, Zk, xp.concat([Yk, ones], axis=1), bias, xp=xp)
    R = Y_hat - Yq
    return float(xp.sum(swq * xp.sum(R * R, axis=1)))


def _log_weights(sw, *, xp):
    positive = sw > 0
    safe = xp.where(positive, sw, xp.ones_like(sw))
    return xp.where(positive, xp.log(safe), xp.full_like(sw, -math.inf))
