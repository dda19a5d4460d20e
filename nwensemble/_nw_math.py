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
    eager_host,
    exp_inplace,
    fill_masked,
    map_on_host_threads,
    matmul_into,
    maximum_inplace,
    workspace_buffer,
)
from nwensemble._kernels import (
    compact_derivative_inplace,
    compact_weights_inplace,
    kernel_degree,
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


def attend(
    Q,
    Z,
    bias,
    R,
    *,
    xp,
    leave_one_out=False,
    exclude=None,
    workspace=None,
    exact_zeros=True,
):
    """Unnormalised attention ``E`` of queries on keys, and ``E @ R``.

    ``R``'s last column must be ones, so the last column of ``E @ R`` holds the
    row sums. With ``leave_one_out`` (``Q is Z``), ``E[i, i] = 0``; with
    ``exclude`` (an integer array, one key index per query), query ``r`` gives
    key ``exclude[r]`` no weight (leave-one-out for a block of training rows).

    Fast path: the full scores are never positive, so ``exp`` cannot overflow
    and needs no row-maximum pass. If a row's attention underflows (a query far
    from every key, relative to the bandwidth), the block is recomputed with the
    row maximum subtracted first, which cannot underflow.

    ``workspace`` (a dict kept by the caller across calls) holds the (m, n)
    block between calls where the namespace can write into it, and remembers
    that a block needed the stable path: the next call with that workspace
    (the next optimiser step, with nearly the same projection) takes it at
    once, paying one row-maximum pass instead of a second full evaluation.
    On abalone (2670 rows, 5 heads x 2 dims) 304 of 525 evaluations of a
    head had been recomputed that way.
    ``exact_zeros=False`` leaves negligible weights at ``exp(floor)`` (about
    1e-292 in float64) instead of zero, which saves a pass over the block;
    prediction uses it, float64 training does not (see ``_exp_logits``).

    Off the host (``eager_host``) every block takes the stable path:
    both checks of the fast path read a value back, which would wait for the
    device's queue once per block; the row maximum costs one pass instead.
    """
    out = workspace_buffer(workspace, (Q.shape[0], Z.shape[0]), Q, xp=xp)
    mask = None
    if exclude is not None:
        keys = xp.arange(Z.shape[0], device=device(Z))
        mask = keys[None, :] == exclude[:, None]
    kw = dict(
        xp=xp, leave_one_out=leave_one_out, mask=mask, out=out, exact_zeros=exact_zeros
    )
    # Queries whose squared norms could overflow go straight to the stable
    # path, whose logits q . z + bias do not square q.
    known_stable = not eager_host(xp) or (
        workspace is not None and workspace.get("stable", False)
    )
    if known_stable or float(xp.max(xp.abs(Q))) > _largest_safe_entry(Q, xp=xp):
        E = _exp_logits(Q, Z, bias, stable=True, **kw)
        return E, E @ R
    E = _exp_logits(Q, Z, bias, stable=False, **kw)
    M = E @ R
    if float(xp.min(M[:, -1])) < _underflow_row_sum(Q.dtype, xp=xp):
        if workspace is not None:
            workspace["stable"] = True
        E = _exp_logits(Q, Z, bias, stable=True, **kw)
        M = E @ R
    return E, M


def _exp_logits(Q, Z, bias, *, xp, leave_one_out, mask, stable, out, exact_zeros):
    A = attention_logits(Q, Z, bias, xp=xp, query_norms=not stable, out=out)
    if leave_one_out and stable:
        A = _set_diagonal(A, -math.inf, xp=xp)
    if mask is not None and stable:
        A = xp.where(mask, xp.asarray(-math.inf, dtype=A.dtype, device=device(A)), A)
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
    # Only float64 needs the clamp: float64 exp was 7x slower with half its
    # outputs subnormal, float32 exp was not, and the products that follow
    # took the same time either way (NumPy/OpenBLAS, 2 cores). In float32 the
    # clamp was a quarter of the time of a prediction block, and a float32
    # leave-one-out evaluation at n = 4000 took 33-36 ms without the clamp
    # and the subtraction against 45 ms with them (80 against 98 ms at a
    # bandwidth so small that most weights were subnormal).
    f64 = A.dtype == xp.float64
    if f64:
        A = maximum_inplace(A, floor, xp=xp)
    E = exp_inplace(A, xp=xp)
    if exact_zeros and f64:
        E -= math.exp(floor)
    if leave_one_out:
        E = _set_diagonal(E, 0.0, xp=xp)
    if mask is not None:
        E = xp.where(mask, xp.zeros_like(E), E)
    return E


def _largest_safe_entry(Q, *, xp):
    """Entries of the queries ``Q`` (m, d) above this could overflow their
    squared norm."""
    info = xp.finfo(Q.dtype)
    return math.sqrt(float(info.max)) / (4.0 * math.sqrt(Q.shape[1]))


def _underflow_row_sum(dtype, *, xp):
    """Fast-path row sums below this mean the row's attention underflowed."""
    return float(xp.finfo(dtype).smallest_normal) ** 0.5


def _logit_floor(dtype, *, xp):
    """Logit whose exp times any mantissa-resolution value is still normal."""
    info = xp.finfo(dtype)
    return math.log(float(info.smallest_normal)) - math.log(float(info.eps))


def head_keys(Z, log_sw, *, xp, degree=None):
    """What ``attend_head`` needs of one head's keys ``Z`` (n, d).

    Softmax folds the log weights into a per-key logit offset; a compact
    kernel multiplies its weights by ``w_j / max w`` instead (None when all
    weights are equal, which saves a pass over every block; checked only
    where ``eager_host``).
    """
    if degree is None:
        return key_bias(Z, log_sw, xp=xp), None
    bias = -0.5 * xp.sum(Z * Z, axis=1)
    weight = xp.exp(log_sw - xp.max(log_sw))
    if eager_host(xp) and bool(xp.all(weight == 1.0)):
        return bias, None
    return bias, weight


def attend_head(Q, Z, keys, R, *, xp, degree=None, exact_zeros=True, **kw):
    """``attend`` (softmax) or ``attend_compact``: returns ``(E, E @ R, fallback)``
    with ``fallback`` None for softmax. ``exact_zeros`` concerns softmax only
    (compact weights are exactly zero outside the support anyway)."""
    bias, weight = keys
    if degree is None:
        return (*attend(Q, Z, bias, R, xp=xp, exact_zeros=exact_zeros, **kw), None)
    return attend_compact(Q, Z, bias, weight, R, degree=degree, xp=xp, **kw)


def attend_compact(
    Q,
    Z,
    bias,
    weight,
    R,
    *,
    degree,
    xp,
    leave_one_out=False,
    exclude=None,
    workspace=None,
):
    """Compact-kernel attention ``E = w_j (1 - ||q_i - z_j||^2 / (2k))_+^k`` and
    ``E @ R``, with the nearest-neighbour fallback.

    ``bias`` is ``-||z_j||^2 / 2``; ``weight`` the key weights (None: all one).
    ``R``'s last column must be ones. A query whose support holds no key with
    positive weight (its row of ``E`` sums to less than ``EMPTY_ROW_SUMS``, or
    its squared norm could overflow) gets all its weight on its nearest such
    key instead, so its estimate is that key's target: never NaN, never a
    division by zero. Returns ``(E, M, fallback)`` with ``fallback`` a boolean
    (m,) array, or None when no row fell back.

    Off the host (``eager_host``) the fallback runs for every block
    (``fallback`` is then never None), as asking whether any row needs it
    would wait for the device's queue.
    """
    out = workspace_buffer(workspace, (Q.shape[0], Z.shape[0]), Q, xp=xp)
    huge = xp.max(xp.abs(Q), axis=1) > _largest_safe_entry(Q, xp=xp)
    # Such queries lie far outside every support; score them as the origin
    # (so nothing overflows) and let the fallback overwrite their rows.
    Qs = xp.where(huge[:, None], xp.zeros_like(Q), Q)
    A = attention_logits(Qs, Z, bias, xp=xp, query_norms=True, out=out)
    E = compact_weights_inplace(A, degree, weight, xp=xp)
    if leave_one_out:
        E = _set_diagonal(E, 0.0, xp=xp)
    mask = None
    if exclude is not None:
        keys = xp.arange(Z.shape[0], device=device(Z))
        mask = keys[None, :] == exclude[:, None]
        E = xp.where(mask, xp.zeros_like(E), E)
    M = E @ R
    empty = (M[:, -1] < EMPTY_ROW_SUMS[E.dtype == xp.float32]) | huge
    if eager_host(xp) and not bool(xp.any(empty)):
        return E, M, None
    self_index = None
    if leave_one_out:
        self_index = xp.arange(Q.shape[0], device=device(Q))
    elif exclude is not None:
        self_index = exclude
    E, M = _nearest_key_fallback(
        Q, Z, bias, weight, R, E, M, empty, self_index=self_index, xp=xp
    )
    return E, M, empty


# Row sums of compact weights below these (float64, float32) count as an
# empty support: ratios of subnormal sums lose their precision.
EMPTY_ROW_SUMS = (2.0**-960, 2.0**-100)


def _nearest_key_fallback(Q, Z, bias, weight, R, E, M, empty, *, self_index, xp):
    """Put all the weight of the ``empty`` rows on their nearest positive-weight
    key (not the query's own row, ``self_index``), in ``E`` and ``M = E @ R``.

    On the host only the empty rows are searched; elsewhere every row is, as
    selecting the rows (``nonzero``) would wait for the device to count them.
    """
    dev = device(Q)
    if eager_host(xp):
        (rows,) = xp.nonzero(empty)
        nearest = _nearest_keys(
            xp.take(Q, rows, axis=0),
            Z,
            bias,
            weight,
            xp=xp,
            self_index=(
                None if self_index is None else xp.take(self_index, rows, axis=0)
            ),
        )
        # The few rows' choices spread over all rows (-1 elsewhere).
        minus_one = xp.full(empty.shape, -1, dtype=nearest.dtype, device=dev)
        chosen = fill_masked(empty, nearest, minus_one, xp=xp)
    else:
        nearest = _nearest_keys(Q, Z, bias, weight, xp=xp, self_index=self_index)
        chosen = xp.where(empty, nearest, xp.full_like(nearest, -1))
    keys = xp.arange(Z.shape[0], device=dev)
    onehot = xp.astype(keys[None, :] == chosen[:, None], E.dtype)
    E = xp.where(empty[:, None], onehot, E)
    safe = xp.where(empty, chosen, xp.zeros_like(chosen))
    M = xp.where(empty[:, None], xp.take(R, safe, axis=0), M)
    return E, M


def _nearest_keys(Q, Z, bias, weight, *, xp, self_index=None):
    """Index of the nearest key of positive weight for each query (not the
    query's own key ``self_index``), from logits ``q . z - ||z||^2 / 2``
    (which do not square ``q``, so they stay finite far from the data)."""
    minus_inf = xp.asarray(-math.inf, dtype=bias.dtype, device=device(bias))
    if weight is not None:
        # -inf in the bias column rules the key out inside the product itself,
        # which saves a pass over the (m, n) logits.
        bias = xp.where(weight > 0, bias, minus_inf)
    A = attention_logits(Q, Z, bias, xp=xp)
    if self_index is not None:
        keys = xp.arange(Z.shape[0], device=device(Z))
        A = xp.where(keys[None, :] == self_index[:, None], minus_inf, A)
    return xp.argmax(A, axis=1)


def loo_loss_and_grad(
    W,
    X,
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
    n_heads : int
    return_grad : bool
    workspace : dict or None
        Kept by the caller across evaluations to reuse the (n, n) buffers (one
        per head: the backward pass needs every head's attention).
    loss_as_array : bool
        Return the loss as a 0-d array on the device instead of a Python float
        (which would wait for the device).
    kernel : str
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

    A compact kernel has the same ``G`` with ``E`` replaced by its derivative
    ``E' = dE / ds`` (``w_j (1 + s / k)_+^(k-1)``, computed in place of ``E``
    after the forward values), and rows of ``G`` no longer sum to zero, so
    ``L = diag(rowsum G + colsum G) - G - G^T``. Rows that fell back to their
    nearest neighbour are piecewise constant in ``W``: no gradient.
    """
    loss, grad_Z = loo_loss_and_grad_z(
        X @ W,
        Y,
        sw,
        xp=xp,
        n_heads=n_heads,
        return_grad=return_grad,
        workspace=workspace,
        loss_as_array=loss_as_array,
        kernel=kernel,
    )
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
    """``loo_loss_and_grad`` with respect to the projected rows ``Z = X @ W``.

    Returns the loss and its gradient ``dloss / dZ`` (n, n_heads * d), which
    costs no product with ``X``: what a search over the scales of fixed
    directions needs (``dloss / dlog c_j = sum_i Z_ij (dloss / dZ)_ij`` when
    column ``j`` of ``W`` is scaled by ``c_j``).
    """
    degree = kernel_degree(kernel)
    d = Z.shape[1] // n_heads
    log_sw = _log_weights(sw, xp=xp)
    heads = []
    Y_hat = None
    for h in range(n_heads):
        Zh = Z[:, h * d : (h + 1) * d]
        ws = None if workspace is None else workspace.setdefault(h, {})
        head = _loo_forward(
            Zh, Y, log_sw, xp=xp, with_grad=return_grad, workspace=ws, degree=degree
        )
        heads.append(head)
        Y_hat = head[-1] if Y_hat is None else Y_hat + head[-1]
    if n_heads > 1:
        Y_hat = Y_hat / n_heads
    R = Y_hat - Y
    loss = xp.sum(sw * xp.sum(R * R, axis=1))
    if not loss_as_array:
        loss = float(loss)
    if not return_grad:
        return loss, None
    upstream = (2.0 / n_heads) * sw[:, None] * R
    if degree is None:
        LZ = [_loo_backward(*head, upstream, Y, xp=xp) for head in heads]
    else:
        LZ = [_loo_backward_compact(*head, upstream, Y, xp=xp) for head in heads]
    del heads
    LZ = LZ[0] if n_heads == 1 else xp.concat(LZ, axis=1)
    return loss, -LZ


def _loo_forward(Z, Y, log_sw, *, xp, with_grad, workspace, degree=None):
    """Leave-one-out attention of one head.

    Softmax: returns ``(Z, E, M, s, Y_hat)`` with ``M = E @ [Y_k * Z ..., Z, Y,
    1]`` (what the backward pass needs) when ``with_grad``; else only ``Y_hat``
    is set. Compact kernels return ``(Z, E, s, keys, degree, fallback, Y_hat)``
    (their backward pass multiplies ``E'``, not ``E``).
    """
    n, t = Y.shape
    d = Z.shape[1]
    keys = head_keys(Z, log_sw, xp=xp, degree=degree)
    ones = xp.ones((n, 1), dtype=Z.dtype, device=device(Z))
    if not with_grad or degree is not None:
        kw = dict(xp=xp, leave_one_out=True, workspace=workspace, degree=degree)
        E, num, fallback = attend_head(Z, Z, keys, xp.concat([Y, ones], axis=1), **kw)
        s = num[:, t:]
        Y_hat = num[:, :t] / s
        if degree is None or not with_grad:
            return None, None, None, None, Y_hat
        return Z, E, s, keys, degree, fallback, Y_hat
    # One pass over E for the forward values and everything G @ Z needs.
    YZ = _gradient_columns(Z, Y, xp=xp)
    E, M = attend(Z, Z, keys[0], YZ, xp=xp, leave_one_out=True, workspace=workspace)
    s = M[:, -1:]
    return Z, E, M, s, M[:, t * d + d : t * d + d + t] / s


def _gradient_columns(Z, Y, *, xp):
    """``[Y_k * Z ..., Z, Y, 1]``: what ``E @`` must meet for ``G @ Z``."""
    n, t = Y.shape
    ones = xp.ones((n, 1), dtype=Z.dtype, device=device(Z))
    return xp.concat([Y[:, k : k + 1] * Z for k in range(t)] + [Z, Y, ones], axis=1)


def _loo_backward(Z, E, M, s, Y_hat, U, Y, *, xp):
    """``L @ Z`` of one head (its gradient is ``-X^T L Z``) for upstream ``U``.

    ``M = E @ _gradient_columns(Z, Y)`` comes from the forward pass; softmax
    rows of ``G`` sum to zero, so ``L``'s diagonal is the column sums alone.
    """
    GZ, _, GtZ, colsum = _g_products(E, M, U, s, Y_hat, Z, Y, xp=xp)
    return colsum * Z - GZ - GtZ


def _loo_backward_compact(Z, E, s, keys, degree, fallback, Y_hat, U, Y, *, xp):
    """``L @ Z`` of one compact-kernel head for upstream ``U``; overwrites ``E``."""
    if fallback is not None:
        U = xp.where(fallback[:, None], xp.zeros_like(U), U)
    Ep = compact_derivative_inplace(E, degree, keys[1], xp=xp)
    M = Ep @ _gradient_columns(Z, Y, xp=xp)
    GZ, rowsum, GtZ, colsum = _g_products(Ep, M, U, s, Y_hat, Z, Y, xp=xp)
    return (rowsum + colsum) * Z - GZ - GtZ


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
    # (V^T E)^T, not E^T V: the same product, 1.6x faster through OpenBLAS.
    N = (V.T @ E).T
    GtZ = -N[:, t * d : t * d + d]
    colsum = -N[:, -1:]
    for k in range(t):
        GtZ += Y[:, k : k + 1] * N[:, k * d : (k + 1) * d]
        colsum += Y[:, k : k + 1] * N[:, t * d + d + k : t * d + d + k + 1]
    return GZ, rowsum, GtZ, colsum


def iter_head_attention(
    Q,
    Z,
    Y,
    log_sw,
    *,
    xp,
    n_heads=1,
    n_blocks=2,
    loo_rows=None,
    kernel="softmax",
):
    """Unnormalised attention of query blocks on the training rows, head by head.

    Yields ``(rows, h, E, num, fallback)`` for each block of query rows and
    each head: ``E`` (m, n) is head ``h``'s unnormalised attention (its buffer
    is reused by the next head and block, so consume it before advancing),
    ``num = E @ [Y, 1]`` (m, t + 1), whose last column holds the row sums, and
    ``fallback`` the boolean (m,) mask of queries whose compact support was
    empty (they attend to their nearest row only), or None when there were none.

    With ``loo_rows`` (an integer array) the queries are those training rows
    of ``Z`` (``Q`` is ignored), each leaving itself out.

    Blocks are sized so that ``n_blocks`` arrays of (block, n) fit in
    scikit-learn's ``working_memory``: memory stays O(block x n) whatever the
    number of queries.
    """
    degree = kernel_degree(kernel)
    d = Z.shape[1] // n_heads
    ones = xp.ones((Y.shape[0], 1), dtype=Y.dtype, device=device(Y))
    Y_aug = xp.concat([Y, ones], axis=1)
    keys = [
        head_keys(Z[:, h * d : (h + 1) * d], log_sw, xp=xp, degree=degree)
        for h in range(n_heads)
    ]
    m = Q.shape[0] if loo_rows is None else loo_rows.shape[0]
    chunk = _chunk_rows(m, Z.shape[0], Z.dtype, n_blocks=n_blocks, xp=xp)
    workspace = {}
    for start in range(0, m, chunk):
        rows = slice(start, min(start + chunk, m))
        if loo_rows is None:
            Qb, exclude = Q[rows, :], None
        else:
            exclude = loo_rows[rows]
            Qb = xp.take(Z, exclude, axis=0)
        for h in range(n_heads):
            cols = slice(h * d, (h + 1) * d)
            E, num, fallback = attend_head(
                Qb[:, cols],
                Z[:, cols],
                keys[h],
                Y_aug,
                xp=xp,
                degree=degree,
                exclude=exclude,
                workspace=workspace,
                exact_zeros=False,
            )
            yield rows, h, E, num, fallback


def nw_predict(Q, Z, Y, log_sw, *, xp, n_heads=1, head_weights=None, kernel="softmax"):
    """NW estimates of the head ensemble for projected queries ``Q``.

    ``head_weights`` (a sequence of ``n_heads`` floats; uniform when None)
    combines the heads. Returns an array of shape (m, t). Softmax heads on
    the host run through ``_tiled_softmax_estimates``; compact kernels, and
    every kernel off the host (``eager_host``), through the blocks of
    ``iter_head_attention``. On a GPU the tiles, sized for a core's cache,
    would each cost several kernel launches, and every row of tiles a
    read-back (at 20 000 queries on 100 000 rows, about 15 000 tiles per
    head), while the blocks, sized by ``working_memory`` (see
    ``_chunk_rows``), number about 15 per head in float32.
    """
    alpha = _head_weights_or_uniform(head_weights, n_heads)
    if kernel_degree(kernel) is None and eager_host(xp):
        return _tiled_softmax_estimates(Q, Z, Y, log_sw, xp=xp, alpha=alpha)
    blocks = []
    for rows, h, _, num, _ in iter_head_attention(
        Q, Z, Y, log_sw, xp=xp, n_heads=n_heads, kernel=kernel
    ):
        est = num[:, :-1] / num[:, -1:]
        if n_heads > 1:
            est = alpha[h] * est
        if h == 0:
            blocks.append(est)
        else:
            blocks[-1] = blocks[-1] + est
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


# Tiles of the softmax prediction: (_QUERY_TILE, _KEY_TILE) logits (1 MiB in
# float64) stay in a core's L2 cache through the clamp, the exp and the
# product with [y, 1] that follow the score product, instead of making three
# more passes through memory. At n_train = n_test = 20 000 (4 heads x 4 dims,
# float64, 2 cores) 256 x 512 tiles on 2 threads took 1.8-2.0 s, against
# 2.2-2.6 s for 128 x 1024, 64 x 2048 or 256 x 2048, and 5.2-6.3 s for
# (128, 20 000) blocks.
_QUERY_TILE = 256
_KEY_TILE = 512
# Scores (queries x keys x heads) from which the tiles run on threads.
_THREADED_SCORES = 1 << 22


def _tiled_softmax_estimates(Q, Z, Y, log_sw, *, xp, alpha):
    """The softmax ensemble's estimates, tile by tile, heads and query blocks
    spread over threads where the arrays live on the host."""
    n_heads = len(alpha)
    m, n, t = Q.shape[0], Z.shape[0], Y.shape[1]
    d = Z.shape[1] // n_heads
    dev = device(Z)
    Y_aug = xp.concat([Y, xp.ones((n, 1), dtype=Y.dtype, device=dev)], axis=1)
    # Queries whose squared norm could overflow take attend's stable path.
    far = m > 0 and float(xp.max(xp.abs(Q))) > _largest_safe_entry(Q[:, :d], xp=xp)
    queries, keys, biases = [], [], []
    for h in range(n_heads):
        Qh, Zh = Q[:, h * d : (h + 1) * d], Z[:, h * d : (h + 1) * d]
        bias = key_bias(Zh, log_sw, xp=xp)
        biases.append(bias)
        if far:
            continue
        norms = -0.5 * xp.sum(Qh * Qh, axis=1, keepdims=True)
        ones = xp.ones((m, 1), dtype=Q.dtype, device=dev)
        queries.append(xp.concat([Qh, ones, norms], axis=1))
        k_ones = xp.ones((n, 1), dtype=Z.dtype, device=dev)
        keys.append(xp.concat([Zh, bias[:, None], k_ones], axis=1).T)
    floor_sum = _underflow_row_sum(Q.dtype, xp=xp)
    clamp = _logit_floor(Q.dtype, xp=xp) if Q.dtype == xp.float64 else None

    def head_block(task):
        h, r0 = task
        r1 = min(r0 + _QUERY_TILE, m)
        num = None
        if not far:
            q = queries[h][r0:r1, :]
            buf = workspace_buffer({}, (r1 - r0, _KEY_TILE), q, xp=xp)
            for c0 in range(0, n, _KEY_TILE):
                c1 = min(c0 + _KEY_TILE, n)
                out = None if buf is None else buf[:, : c1 - c0]
                A = matmul_into(q, keys[h][:, c0:c1], out, xp=xp)
                if clamp is not None:  # see _exp_logits: float64 exp and subnormals
                    A = maximum_inplace(A, clamp, xp=xp)
                A = exp_inplace(A, xp=xp)
                part = A @ Y_aug[c0:c1, :]
                num = part if num is None else num + part
        if num is None or float(xp.min(num[:, -1])) < floor_sum:
            # Some query is far from every key: attend's stable path.
            cols = slice(h * d, (h + 1) * d)
            _, num = attend(
                Q[r0:r1, cols], Z[:, cols], biases[h], Y_aug, xp=xp, exact_zeros=False
            )
        return float(alpha[h]) * (num[:, :t] / num[:, t:])

    tasks = [(h, r0) for r0 in range(0, m, _QUERY_TILE) for h in range(n_heads)]
    # Threads (and the BLAS limit around them) cost about a millisecond to
    # set up: worth it only for large products.
    big = m * n * n_heads >= _THREADED_SCORES
    parts = map_on_host_threads(head_block, tasks, xp=xp, threads=big)
    blocks = []
    for i in range(0, len(parts), n_heads):
        est = parts[i]
        for extra in parts[i + 1 : i + n_heads]:
            est = est + extra
        blocks.append(est)
    if not blocks:
        return xp.zeros((0, t), dtype=Y.dtype, device=dev)
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def nw_predict_with_spread(
    Q, Z, Y, log_sw, *, xp, n_heads=1, head_weights=None, kernel="softmax"
):
    """Ensemble estimates and ``sqrt(sum_i v_i(x)^2)`` of the combined weights.

    ``v(x) = sum_h alpha_h w_h(x)`` is the ensemble's weight on each training
    row, so ``sigma * sqrt(sum_i v_i^2)`` is the standard error of the
    prediction under noise of variance ``sigma^2`` on the training targets.
    Returns ``(Y_hat (m, t), spread (m,))``.
    """
    Y_hat, sq = _predict_and_squared_spread(
        Q,
        Z,
        Y,
        log_sw,
        xp=xp,
        n_heads=n_heads,
        head_weights=head_weights,
        kernel=kernel,
    )
    return Y_hat, xp.sqrt(sq)


def _predict_and_squared_spread(
    Q, Z, Y, log_sw, *, xp, n_heads, head_weights, loo_rows=None, kernel="softmax"
):
    """Ensemble estimates and ``sum_i v_i^2``, in one pass over the blocks."""
    alpha = _head_weights_or_uniform(head_weights, n_heads)
    preds, sq = [], []
    V = None
    for _, h, E, num, _ in iter_head_attention(
        Q,
        Z,
        Y,
        log_sw,
        xp=xp,
        n_heads=n_heads,
        n_blocks=3,
        loo_rows=loo_rows,
        kernel=kernel,
    ):
        s = num[:, -1:]
        est = alpha[h] * (num[:, :-1] / s)
        part = (alpha[h] / s) * E
        if h == 0:
            preds.append(est)
            V = part
        else:
            preds[-1] = preds[-1] + est
            V = V + part
        if h == n_heads - 1:
            sq.append(xp.sum(V * V, axis=1))
    if len(preds) == 1:
        return preds[0], sq[0]
    return xp.concat(preds, axis=0), xp.concat(sq, axis=0)


def nw_head_predictions(
    Q, Z, Y, log_sw, *, xp, n_heads, loo_rows=None, kernel="softmax", fallback=False
):
    """Every head's NW estimates, stacked: an array of shape (n_heads, m, t).

    With ``loo_rows``, the leave-one-out estimates of those training rows.
    With ``fallback``, also return the boolean (n_heads, m) array of queries
    whose compact support was empty (see ``attend_compact``).
    """
    heads = [[] for _ in range(n_heads)]
    empty = [[] for _ in range(n_heads)]
    for _, h, _, num, fell in iter_head_attention(
        Q, Z, Y, log_sw, xp=xp, n_heads=n_heads, loo_rows=loo_rows, kernel=kernel
    ):
        heads[h].append(num[:, :-1] / num[:, -1:])
        if fallback:
            if fell is None:
                fell = xp.zeros(num.shape[0], dtype=xp.bool, device=device(num))
            empty[h].append(fell)
    preds = xp.stack([_concat(b, xp=xp) for b in heads], axis=0)
    if not fallback:
        return preds
    return preds, xp.stack([_concat(b, xp=xp) for b in empty], axis=0)


def _concat(blocks, *, xp):
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def loo_head_predictions(
    Z, Y, log_sw, rows, *, xp, n_heads, kernel="softmax", fallback=False
):
    """Every head's leave-one-out estimates for training rows ``rows`` (an
    integer array): an array of shape (n_heads, len(rows), t) (and the
    fallback mask, see ``nw_head_predictions``)."""
    return nw_head_predictions(
        None,
        Z,
        Y,
        log_sw,
        xp=xp,
        n_heads=n_heads,
        loo_rows=rows,
        kernel=kernel,
        fallback=fallback,
    )


def loo_spread(Z, Y, log_sw, rows, *, xp, n_heads, head_weights, kernel="softmax"):
    """``sum_j v_ij^2`` of the ensemble's leave-one-out weights for ``rows``."""
    return _predict_and_squared_spread(
        None,
        Z,
        Y,
        log_sw,
        xp=xp,
        n_heads=n_heads,
        head_weights=head_weights,
        loo_rows=rows,
        kernel=kernel,
    )[1]


def _head_weights_or_uniform(head_weights, n_heads):
    if head_weights is None:
        return [1.0 / n_heads] * n_heads
    return [float(a) for a in head_weights]


# Memory for the blocks of one pass of iter_head_attention (return_std,
# attention_weights, leave-one-out statistics, compact kernels), in MiB.
_BLOCK_BUDGET_MIB = 32
# Fewest query rows per block, unless working_memory itself allows fewer.
_MIN_BLOCK_ROWS = 128


def _chunk_rows(n_queries, n_train, dtype, *, xp, n_blocks=2):
    """Rows per block so that ``n_blocks`` (rows, n_train) blocks fit in
    scikit-learn's ``working_memory``, preferring ``_BLOCK_BUDGET_MIB``.

    Smaller blocks are faster, not only leaner: at n_train = n_test = 20 000
    (4 heads x 4 dims) predict took 3.65 s with 32 MiB for the blocks against
    4.58 s with scikit-learn's default 1 GiB (float64; 1.96 s against 2.50 s
    in float32), before plain prediction moved to the tiles of
    ``_tiled_softmax_estimates``. But a block keeps at least
    ``_MIN_BLOCK_ROWS`` rows (at n_train = 90 000, 32 MiB would leave 23),
    within ``working_memory``. Off the host (``eager_host``) the blocks fill
    ``working_memory``: a GPU has no small cache to fit, and every block
    costs its own kernel launches.
    """
    itemsize = 4 if dtype == xp.float32 else 8
    per_row = n_blocks * itemsize * max(n_train, 1)
    allowed = int(get_config()["working_memory"] * 2**20 // per_row)
    if not eager_host(xp):
        return int(min(max(allowed, 1), max(n_queries, 1)))
    preferred = max(int(_BLOCK_BUDGET_MIB * 2**20 // per_row), _MIN_BLOCK_ROWS)
    rows = min(allowed, preferred)
    return int(min(max(rows, 1), max(n_queries, 1)))


def heldout_loss(W, Xq, Yq, swq, Xk, Yk, swk, *, xp, n_heads=1, kernel="softmax"):
    """Weighted MSE of queries ``Xq`` predicted from keys ``Xk`` (no overlap).

    Used for early stopping: held-out rows are queries only, never keys.
    """
    Y_hat = nw_predict(
        Xq @ W,
        Xk @ W,
        Yk,
        _log_weights(swk, xp=xp),
        xp=xp,
        n_heads=n_heads,
        kernel=kernel,
    )
    R = Y_hat - Yq
    return float(xp.sum(swq * xp.sum(R * R, axis=1)))


def _log_weights(sw, *, xp):
    positive = sw > 0
    safe = xp.where(positive, sw, xp.ones_like(sw))
    return xp.where(positive, xp.log(safe), xp.full_like(sw, -math.inf))
