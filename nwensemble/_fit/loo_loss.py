"""The training objective: the ensemble's exact leave-one-out loss, less a
multiple of the heads' ambiguity (their spread around the ensemble), and
its gradient."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from typing import NamedTuple

from nwensemble._fit.loo_sweep import loo_sweep
from nwensemble._shared.attention import log_weights
from nwensemble._shared.backend import device
from nwensemble._shared.host_threads import fixed_order_matmul, map_on_host_threads
from nwensemble._shared.passes import head_sum

# Scores (rows x rows x heads) from which the heads' passes run on threads:
# below, the threads cost more than they save (the break-even measured in
# the performance notes).
THREADED_SCORES = 1 << 19


def loo_loss_and_grad(W, X, Y, sw, *, xp, kernel, **options):
    """Leave-one-out MSE of the uniform multi-head NW ensemble, less ``diversity``
    times the heads' ambiguity, and its gradient.

    Parameters
    ----------
    W : array of shape (p, n_heads * d)
        The heads' projections side by side: head ``h`` is columns
        ``h * d : (h + 1) * d``.
    X : array of shape (n, p), or Design
        The rows ``W`` projects (see ``design``).
    Y : array of shape (n, t)
        Targets, already scaled so that the loss is relative to their variance.
    sw : array of shape (n,)
        Non-negative sample weights summing to one; at least two positive.
    xp : namespace
    kernel : Kernel
        Softmax or a compact kernel (see ``kernels``).
    n_heads : int, default=1
    return_grad : bool, default=True
    workspace : dict or None, default=None
        Kept by the caller across evaluations to reuse the (n, n) buffers (one
        per head: the backward pass needs every head's attention), or on the
        host the sweep's block buffers (``loo_sweep``).
    loss_as_array : bool, default=False
        Return the loss as a 0-d array on the device instead of a Python float
        (which would wait for the device).
    diversity : float, default=0.0
        Weight ``delta`` of the heads' ambiguity, subtracted from the loss.

    Returns
    -------
    loss : float or 0-d array
        ``sum_i sw_i (||y_hat_i - y_i||^2 - delta / H sum_h ||y_hat_hi -
        y_hat_i||^2)`` with ``y_hat_hi`` head ``h``'s leave-one-out NW
        estimate of row ``i`` and ``y_hat_i`` the mean over the ``H`` heads.
        By the ambiguity decomposition this is the heads' mean own loss less
        ``1 + delta`` times their ambiguity: ``delta = -1`` trains every head
        on its own error (independent heads), ``delta = 0`` the ensemble, and
        ``delta > 0`` rewards disagreement beyond that (negative correlation
        learning with ``lambda = 1 + delta``).
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
    about ``(t + 1)(d + 1)``, one exp, one (n, n) array. With ``diversity``
    only the upstream changes, to ``2 sw (R - delta (Y_hat_head - Y_hat)) /
    H``.

    Another kernel has the same ``G`` with ``E`` replaced by its derivative
    ``E' = dE / ds`` (``kernel.derivative_inplace``, computed in place of
    ``E`` after the forward values; softmax's is ``E`` itself), and unless
    the kernel is shift invariant the rows of ``G`` no longer sum to zero, so
    ``L = diag(rowsum G + colsum G) - G - G^T``. Rows that fell back to their
    nearest neighbour are piecewise constant in ``W``: no gradient.
    """
    loss, grad_Z = loo_loss_and_grad_z(
        X.project(W), Y, sw, xp=xp, kernel=kernel, **options
    )
    return loss, None if grad_Z is None else X.backproject(grad_Z)


def loo_loss_and_grad_z(
    Z,
    Y,
    sw,
    *,
    xp,
    kernel,
    n_heads=1,
    return_grad=True,
    workspace=None,
    loss_as_array=False,
    diversity=0.0,
):
    """``loo_loss_and_grad`` (the same keywords) with respect to the
    projected rows ``Z = X @ W``.

    Returns the loss and its gradient ``dloss / dZ`` (n, n_heads * d), which
    costs no product with ``X``: what a search over the scales of fixed
    directions needs (``dloss / dlog c_j = sum_i Z_ij (dloss / dZ)_ij`` when
    column ``j`` of ``W`` is scaled by ``c_j``).
    """
    kernels = kernel.sweep_kernels(xp)
    if kernels is not None:
        # The host's fast path: each pair of rows once, else one sweep over
        # blocks of rows; no (n, n) block (see ``loo_sweep``).
        loss, grad_Z = loo_sweep(
            Z,
            Y,
            sw,
            kernels=kernels,
            n_heads=n_heads,
            return_grad=return_grad,
            workspace=workspace,
            diversity=diversity,
            threaded_scores=THREADED_SCORES,
        )
        return (loss if loss_as_array else float(loss)), grad_Z
    n = Z.shape[0]
    d = Z.shape[1] // n_heads
    log_sw = log_weights(sw, xp=xp)
    spaces = [
        None if workspace is None else workspace.setdefault(h, {})
        for h in range(n_heads)
    ]
    # The heads' passes are independent: on the host, on threads when the
    # blocks are large enough to pay for them.
    threads = n_heads > 1 and n * n * n_heads >= THREADED_SCORES

    def forward(h):
        return _loo_forward(
            Z[:, h * d : (h + 1) * d],
            Y,
            log_sw,
            kernel=kernel,
            xp=xp,
            with_grad=return_grad,
            workspace=spaces[h],
        )

    heads = map_on_host_threads(forward, range(n_heads), xp=xp, threads=threads)
    Y_hat = head_sum([head.Y_hat for head in heads])
    if n_heads > 1:
        Y_hat = Y_hat / n_heads
    R = Y_hat - Y
    loss = xp.sum(sw * xp.sum(R * R, axis=1))
    spread = [None] * n_heads
    if diversity and n_heads > 1:
        spread = [head.Y_hat - Y_hat for head in heads]
        ambiguity = sum(xp.sum(sw * xp.sum(S * S, axis=1)) for S in spread)
        loss = loss - (diversity / n_heads) * ambiguity
    if not loss_as_array:
        loss = float(loss)
    if not return_grad:
        return loss, None
    # d ambiguity / d Y_hat_h = 2 sw S_h / H: the spreads sum to zero over
    # the heads, so the ensemble mean's own dependence drops out.
    scale = (2.0 / n_heads) * sw[:, None]

    def backward(task):
        head, S = task
        U = scale * (R if S is None else R - diversity * S)
        return _loo_backward(head, U, Y, kernel=kernel, xp=xp)

    tasks = list(zip(heads, spread))
    del heads
    LZ = map_on_host_threads(backward, tasks, xp=xp, threads=threads)
    del tasks
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
        M = fixed_order_matmul(E, _gradient_columns(Z, Y, xp=xp), xp=xp)
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
    N = fixed_order_matmul(V.T, E, xp=xp, blocks_of="B").T
    GtZ = -N[:, t * d : t * d + d]
    colsum = -N[:, -1:]
    for k in range(t):
        GtZ += Y[:, k : k + 1] * N[:, k * d : (k + 1) * d]
        colsum += Y[:, k : k + 1] * N[:, t * d + d + k : t * d + d + k + 1]
    return GZ, rowsum, GtZ, colsum
