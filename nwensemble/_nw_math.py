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

from sklearn import get_config

from nwensemble._backend import (
    device,
    exp_inplace,
    matmul_into,
    maximum_inplace,
    workspace_buffer,
)


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
    """Per-key logit offset ``-||z_j||^2 / 2 + log(w_j / max w)``; never positive."""
    return (log_sw - xp.max(log_sw)) - 0.5 * xp.sum(Z * Z, axis=1)


def attention_logits(Q, Z, bias, *, xp, query_norms=False, out=None):
    """Logits ``q_i . z_j + bias_j`` (and ``- ||q_i||^2 / 2``) from one product.

    The bias and, with ``query_norms``, the query norms ride along as extra
    columns (``[Q, 1, -|q|^2/2] @ [Z, bias, 1]^T``), which saves passes over
    the (m, n) block. With ``query_norms`` the logits are the full scores
    ``-||q_i - z_j||^2 / 2 + log(w_j / max w) <= 0``.
    """
    ones = xp.ones((Q.shape[0], 1), dtype=Q.dtype, device=device(Q))
    q_cols, k_cols = [Q, ones], [Z, bias[:, None]]
    if query_norms:
        q_cols.append(-0.5 * xp.sum(Q * Q, axis=1, keepdims=True))
        k_cols.append(xp.ones((Z.shape[0], 1), dtype=Z.dtype, device=device(Z)))
    return matmul_into(
        xp.concat(q_cols, axis=1), xp.concat(k_cols, axis=1).T, out, xp=xp
    )


def attend(Q, Z, bias, R, *, xp, leave_one_out=False, workspace=None):
    """Unnormalised attention ``E`` of queries on keys, and ``E @ R``.

    ``R``'s last column must be ones, so the last column of ``E @ R`` holds the
    row sums. With ``leave_one_out`` (``Q is Z``), ``E[i, i] = 0``.

    Fast path: the full scores are never positive, so ``exp`` cannot overflow
    and needs no row-maximum pass. If a row's attention underflows (a query far
    from every key, relative to the bandwidth), the block is recomputed with the
    row maximum subtracted first, which cannot underflow.

    ``workspace`` (a dict kept by the caller across calls) holds the (m, n)
    block between calls where the namespace can write into it.
    """
    out = workspace_buffer(workspace, (Q.shape[0], Z.shape[0]), Q, xp=xp)
    kw = dict(xp=xp, leave_one_out=leave_one_out, out=out)
    E = _exp_logits(Q, Z, bias, stable=False, **kw)
    M = E @ R
    floor = float(xp.finfo(E.dtype).smallest_normal) ** 0.5
    if float(xp.min(M[:, -1])) < floor:
        E = _exp_logits(Q, Z, bias, stable=True, **kw)
        M = E @ R
    return E, M


def _exp_logits(Q, Z, bias, *, xp, leave_one_out, stable, out):
    A = attention_logits(Q, Z, bias, xp=xp, query_norms=not stable, out=out)
    if leave_one_out and stable:
        A = _set_diagonal(A, -math.inf, xp=xp)
    if stable:
        A -= xp.max(A, axis=1, keepdims=True)
    # Negligible weights are made exactly zero. Left as they are, exp returns
    # subnormals (or tiny normals whose products in the next matrix products
    # are subnormal), and arithmetic on subnormals runs several times slower
    # on x86: a leave-one-out evaluation at n=3600 took 100-240 ms instead of
    # 60 ms once the learned bandwidth was small. Clamping the logits at
    # ``floor`` and subtracting ``exp(floor)`` zeroes weights below ~1e-292
    # (float64; ~1e-31 in float32), at most 1e-138 (1e-12) of their row's sum
    # on the fast path.
    floor = _logit_floor(A.dtype, xp=xp)
    A = maximum_inplace(A, floor, xp=xp)
    E = exp_inplace(A, xp=xp)
    E -= math.exp(floor)
    if leave_one_out:
        E = _set_diagonal(E, 0.0, xp=xp)
    return E


def _logit_floor(dtype, *, xp):
    """Logit whose exp times any mantissa-resolution value is still normal."""
    info = xp.finfo(dtype)
    return math.log(float(info.smallest_normal)) - math.log(float(info.eps))


def loo_loss_and_grad(W, X, Y, sw, *, xp, return_grad=True, workspace=None):
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
    workspace : dict or None
        Kept by the caller across evaluations to reuse the (n, n) buffer.

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
    ``(t + 1)(d + 1)``, one exp, one (n, n) array (reused across calls through
    ``workspace`` where the namespace allows).
    """
    n, t = Y.shape
    d = W.shape[1]
    Z = X @ W
    bias = key_bias(Z, _log_weights(sw, xp=xp), xp=xp)
    ones = xp.ones((n, 1), dtype=X.dtype, device=device(X))
    if not return_grad:
        _, num = attend(
            Z,
            Z,
            bias,
            xp.concat([Y, ones], axis=1),
            xp=xp,
            leave_one_out=True,
            workspace=workspace,
        )
        Y_hat = num[:, :t] / num[:, t:]
        R = Y_hat - Y
        return float(xp.sum(sw * xp.sum(R * R, axis=1))), None

    # One pass over E for the forward values and everything G @ Z needs.
    YZ = xp.concat([Y[:, k : k + 1] * Z for k in range(t)] + [Z, Y, ones], axis=1)
    E, M = attend(Z, Z, bias, YZ, xp=xp, leave_one_out=True, workspace=workspace)
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
    # (V^T E)^T, not E^T V: the same product, 1.6x faster through OpenBLAS.
    N = (V.T @ E).T
    del E
    GtZ = -N[:, t * d : t * d + d]
    colsum = -N[:, -1:]
    for k in range(t):
        GtZ += Y[:, k : k + 1] * N[:, k * d : (k + 1) * d]
        colsum += Y[:, k : k + 1] * N[:, t * d + d + k : t * d + d + k + 1]

    LZ = colsum * Z - GZ - GtZ
    grad = -(X.T @ LZ)
    return loss, grad


def predict_block(Q, Z, Y_aug, bias, *, xp, workspace=None):
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
    workspace : dict or None
        Reuses one (m, n) buffer across blocks.

    Returns
    -------
    Y_hat : array of shape (m, t)
    """
    _, num = attend(Q, Z, bias, Y_aug, xp=xp, workspace=workspace)
    return num[:, :-1] / num[:, -1:]


def nw_predict(Q, Z, Y, log_sw, *, xp):
    """NW estimates for projected queries ``Q`` from keys ``Z`` with targets ``Y``.

    Queries go in blocks sized to scikit-learn's ``working_memory``, all written
    into one reused buffer, so memory stays O(block x n) whatever ``len(Q)``.
    """
    bias = key_bias(Z, log_sw, xp=xp)
    ones = xp.ones((Y.shape[0], 1), dtype=Y.dtype, device=device(Y))
    Y_aug = xp.concat([Y, ones], axis=1)
    m = Q.shape[0]
    chunk = _chunk_rows(m, Z.shape[0], Q.dtype, xp=xp)
    workspace = {}
    blocks = [
        predict_block(
            Q[start : start + chunk, :], Z, Y_aug, bias, xp=xp, workspace=workspace
        )
        for start in range(0, m, chunk)
    ]
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def _chunk_rows(n_queries, n_train, dtype, *, xp):
    """Rows per prediction block so that two (rows, n_train) blocks fit in
    scikit-learn's ``working_memory``."""
    itemsize = 4 if dtype == xp.float32 else 8
    budget = get_config()["working_memory"] * 2**20
    rows = int(budget // (2 * itemsize * max(n_train, 1)))
    return int(min(max(rows, 1), max(n_queries, 1)))


def heldout_loss(W, Xq, Yq, swq, Xk, Yk, swk, *, xp):
    """Weighted MSE of queries ``Xq`` predicted from keys ``Xk`` (no overlap).

    Used for early stopping: held-out rows are queries only, never keys.
    """
    Y_hat = nw_predict(Xq @ W, Xk @ W, Yk, _log_weights(swk, xp=xp), xp=xp)
    R = Y_hat - Yq
    return float(xp.sum(swq * xp.sum(R * R, axis=1)))


def _log_weights(sw, *, xp):
    positive = sw > 0
    safe = xp.where(positive, sw, xp.ones_like(sw))
    return xp.where(positive, xp.log(safe), xp.full_like(sw, -math.inf))
