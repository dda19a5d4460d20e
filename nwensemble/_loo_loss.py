"""The training objective: the ensemble's exact leave-one-out loss, its
gradient, and the diversity penalty on the heads' subspaces."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from typing import NamedTuple

from array_api_compat import numpy as np_compat

from nwensemble._attention import log_weights
from nwensemble._backend import device
from nwensemble._kernels import get_kernel


def loo_loss_and_grad(W, X, Y, sw, *, xp, **options):
    """Leave-one-out MSE of the uniform multi-head NW ensemble and its gradient.

    Parameters
    ----------
    W : array of shape (p, n_heads * d)
        The heads' projections side by side: head ``h`` is columns
        ``h * d : (h + 1) * d``.
    X : array of shape (n, p)
    Y : array of shape (n, t)
        Targets, already scaled so that the loss is relative to their variance.
    sw : array of shape (n,)
        Non-negative sample weights summing to one; at least two positive.
    xp : namespace
    n_heads : int, default=1
    return_grad : bool, default=True
    workspace : dict or None, default=None
        Kept by the caller across evaluations to reuse the (n, n) buffers (one
        per head: the backward pass needs every head's attention).
    loss_as_array : bool, default=False
        Return the loss as a 0-d array on the device instead of a Python float
        (which would wait for the device).
    kernel : str or Kernel, default='softmax'
        ``'softmax'`` or a compact kernel (see ``_kernels``).

    Returns
    -------
    loss : float or 0-d array
        ``sum_i sw_i ||y_hat_i - y_i||^2`` with ``y_hat_i`` the mean of the
        heads' leave-one-out NW estimates.
    grad : array of shape (p, n_heads * d) or None

    Notes
    -----
    With ``G[i, j] = dloss / dlogit_ij`` of one head, that head's gradient is
    ``-X^T L Z`` where ``L = diag(rowsum G + colsum G) - G - G^T``; rows of
    ``G`` sum to zero (a softmax row is shift invariant), so the row sums drop
    out. ``G`` is never formed: with ``E`` the unnormalised attention, ``s`` its
    row sums and ``U = dloss / dY_hat_head`` (``2 sw R / H`` for the ensemble
    residual ``R``),

        G = sum_k diag(U[:, k] / s) E diag(Y[:, k]) - diag(b) E,
        b = rowsum(U * Y_hat_head) / s,

    so ``G Z``, ``G^T Z`` and ``colsum G`` come from one product with ``E`` and one
    with ``E^T``. Cost per head: three (n, n) matrix products of inner size
    about ``(t + 1)(d + 1)``, one exp, one (n, n) array.

    Another kernel has the same ``G`` with ``E`` replaced by its derivative
    ``E' = dE / ds`` (``kernel.derivative_inplace``, computed in place of
    ``E`` after the forward values; softmax's is ``E`` itself), and unless
    the kernel is shift invariant the rows of ``G`` no longer sum to zero, so
    ``L = diag(rowsum G + colsum G) - G - G^T``. Rows that fell back to their
    nearest neighbour are piecewise constant in ``W``: no gradient.
    """
    loss, grad_Z = loo_loss_and_grad_z(X @ W, Y, sw, xp=xp, **options)
    return loss, None if grad_Z is None else X.T @ grad_Z


def loo_loss_and_grad_z(
    Z,
    Y,
    sw,
    *,
    xp,
    n_heads=1,
    return_grad=True,
    workspace=None,
    loss_as_array=False,
    kernel="softmax",
):
    """``loo_loss_and_grad`` (the same keywords) with respect to the
    projected rows ``Z = X @ W``.

    Returns the loss and its gradient ``dloss / dZ`` (n, n_heads * d), which
    costs no product with ``X``: what a search over the scales of fixed
    directions needs (``dloss / dlog c_j = sum_i Z_ij (dloss / dZ)_ij`` when
    column ``j`` of ``W`` is scaled by ``c_j``).
    """
    kernel = get_kernel(kernel)
    d = Z.shape[1] // n_heads
    log_sw = log_weights(sw, xp=xp)
    heads = []
    Y_hat = None
    for h in range(n_heads):
        Zh = Z[:, h * d : (h + 1) * d]
        ws = None if workspace is None else workspace.setdefault(h, {})
        head = _loo_forward(
            Zh, Y, log_sw, kernel=kernel, xp=xp, with_grad=return_grad, workspace=ws
        )
        heads.append(head)
        Y_hat = head.Y_hat if Y_hat is None else Y_hat + head.Y_hat
    if n_heads > 1:
        Y_hat = Y_hat / n_heads
    R = Y_hat - Y
    loss = xp.sum(sw * xp.sum(R * R, axis=1))
    if not loss_as_array:
        loss = float(loss)
    if not return_grad:
        return loss, None
    upstream = (2.0 / n_heads) * sw[:, None] * R
    LZ = [_loo_backward(head, upstream, Y, kernel=kernel, xp=xp) for head in heads]
    del heads
    LZ = LZ[0] if n_heads == 1 else xp.concat(LZ, axis=1)
    return loss, -LZ


class _Head(NamedTuple):
    """One head's leave-one-out forward pass: what the backward pass needs
    (all but ``Y_hat`` None without the gradient). ``M`` is
    ``E @ _gradient_columns(Z, Y)`` when the forward pass could form it
    (a kernel that is its own derivative), else None."""

    Z: object
    E: object
    M: object
    s: object
    keys: object
    fallback: object
    Y_hat: object


def _loo_forward(Z, Y, log_sw, *, kernel, xp, with_grad, workspace):
    """Leave-one-out attention of one head (see ``_Head``)."""
    n, t = Y.shape
    d = Z.shape[1]
    keys = kernel.keys(Z, log_sw, xp=xp)
    kw = dict(xp=xp, leave_one_out=True, workspace=workspace)
    if with_grad and kernel.own_derivative:
        # One pass over E for the forward values and everything G @ Z needs.
        R = _gradient_columns(Z, Y, xp=xp)
        E, M, fallback = kernel.attend(Z, Z, keys, R, **kw)
        s = M[:, -1:]
        return _Head(Z, E, M, s, keys, fallback, M[:, t * d + d : t * d + d + t] / s)
    ones = xp.ones((n, 1), dtype=Z.dtype, device=device(Z))
    E, num, fallback = kernel.attend(Z, Z, keys, xp.concat([Y, ones], axis=1), **kw)
    s = num[:, t:]
    Y_hat = num[:, :t] / s
    if not with_grad:
        return _Head(None, None, None, None, None, None, Y_hat)
    return _Head(Z, E, None, s, keys, fallback, Y_hat)


def _gradient_columns(Z, Y, *, xp):
    """``[Y_k * Z ..., Z, Y, 1]``: what ``E @`` must meet for ``G @ Z``."""
    n, t = Y.shape
    ones = xp.ones((n, 1), dtype=Z.dtype, device=device(Z))
    return xp.concat([Y[:, k : k + 1] * Z for k in range(t)] + [Z, Y, ones], axis=1)


def _loo_backward(head, U, Y, *, kernel, xp):
    """``L @ Z`` of one head (its gradient is ``-X^T L Z``) for upstream
    ``U``; may overwrite the head's ``E``."""
    Z, E, M, s, keys, fallback, Y_hat = head
    if fallback is not None:
        U = xp.where(fallback[:, None], xp.zeros_like(U), U)
    if M is None:
        E = kernel.derivative_inplace(E, keys, xp=xp)
        M = E @ _gradient_columns(Z, Y, xp=xp)
    GZ, rowsum, GtZ, colsum = _g_products(E, M, U, s, Y_hat, Z, Y, xp=xp)
    # Rows of G sum to zero for a shift-invariant kernel.
    diagonal = colsum if kernel.shift_invariant else rowsum + colsum
    return diagonal * Z - GZ - GtZ


def _g_products(E, M, U, s, Y_hat, Z, Y, *, xp):
    """``G @ Z``, ``rowsum G``, ``G^T @ Z`` and ``colsum G`` (see
    ``loo_loss_and_grad``) for ``G = sum_k diag(U_k / s) E diag(Y_k) -
    diag(b) E``, from ``M = E @ _gradient_columns(Z, Y)`` and one pass over
    ``E^T``."""
    t = Y.shape[1]
    d = Z.shape[1]
    aR = U / s  # (n, t)
    b = xp.sum(U * Y_hat, axis=1, keepdims=True) / s
    GZ = -b * M[:, t * d : t * d + d]
    rowsum = -b * M[:, -1:]
    for k in range(t):
        GZ += aR[:, k : k + 1] * M[:, k * d : (k + 1) * d]
        rowsum += aR[:, k : k + 1] * M[:, t * d + d + k : t * d + d + k + 1]
    V = xp.concat([aR[:, k : k + 1] * Z for k in range(t)] + [b * Z, aR, b], axis=1)
    # (V^T E)^T, not E^T V: the same product, faster through OpenBLAS.
    N = (V.T @ E).T
    GtZ = -N[:, t * d : t * d + d]
    colsum = -N[:, -1:]
    for k in range(t):
        GtZ += Y[:, k : k + 1] * N[:, k * d : (k + 1) * d]
        colsum += Y[:, k : k + 1] * N[:, t * d + d + k : t * d + d + k + 1]
    return GZ, rowsum, GtZ, colsum


def diversity_penalty_and_grad(W, n_heads, *, xp=None):
    """``sum_{h<g} ||U_h^T U_g||_F^2`` of side-by-side heads, and its gradient.

    Parameters
    ----------
    W : array of shape (p, n_heads * d)
        Head ``h`` is columns ``h * d : (h + 1) * d``.
    n_heads : int
    xp : namespace, default=None
        Namespace of ``W`` (NumPy when None). The stochastic solver keeps ``W``
        on its device, so the penalty is computed there too: taking it on the
        host would read ``W`` back at every step.

    Returns
    -------
    penalty : 0-d array
    grad : array of shape (p, n_heads * d)

    Notes
    -----
    ``||U_h^T U_g||_F^2 = tr(P_h P_g)`` with ``P_h = W_h (W_h^T W_h)^{-1} W_h^T``
    the orthogonal projector on ``range(W_h)``, smooth in ``W_h`` wherever it
    has full column rank. Its derivative in ``W_h`` is
    ``2 (I - P_h) A_h W_h (W_h^T W_h)^{-1}`` with ``A_h = sum_{g != h} P_g``,
    computed from the thin QR factors ``W_h = Q_h R_h`` as
    ``2 (A_h Q_h - Q_h Q_h^T A_h Q_h) R_h^{-T}`` without forming any p x p
    matrix. The penalty ignores the scale of each head (its bandwidth).
    """
    xp = np_compat if xp is None else xp
    p, Hd = W.shape
    d = Hd // n_heads
    QR = [xp.linalg.qr(W[:, h * d : (h + 1) * d]) for h in range(n_heads)]
    Qs = [f.Q for f in QR]
    penalty = xp.zeros((), dtype=W.dtype, device=device(W))
    grads = []
    for h in range(n_heads):
        # A_h Q_h = sum_{g != h} Q_g (Q_g^T Q_h)
        AQ = xp.zeros((p, d), dtype=W.dtype, device=device(W))
        for g in range(n_heads):
            if g == h:
                continue
            overlap = Qs[g].T @ Qs[h]
            AQ = AQ + Qs[g] @ overlap
            if g > h:
                penalty = penalty + xp.sum(overlap**2)
        inner = AQ - Qs[h] @ (Qs[h].T @ AQ)
        # pinv: equal to the inverse for a full-rank head, finite otherwise.
        grads.append(2.0 * inner @ xp.linalg.pinv(QR[h].R).T)
    return penalty, xp.concat(grads, axis=1)
