"""Attention blocks: scores, exp or compact weights, and their products with
the targets, in blocks of bounded memory.

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

from nwensemble._shared.backend import (
    device,
    eager_host,
    exp_inplace,
    fill_masked,
    itemsize,
    maximum_inplace,
    workspace_buffer,
)
from nwensemble._shared.host_threads import fixed_order_matmul


def set_diagonal(A, value, *, xp):
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
    return fixed_order_matmul(
        xp.concat(q_cols, axis=1), xp.concat(k_cols, axis=1).T, xp=xp, out=out
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
    exp=None,
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
    ``exact_zeros=False`` leaves negligible weights at ``exp(floor)`` (about
    1e-292 in float64) instead of zero, which saves a pass over the block;
    prediction uses it, float64 training does not (see ``_exp_logits``).

    Off the host (``eager_host``) every block takes the stable path:
    both checks of the fast path read a value back, which would wait for the
    device's queue once per block; the row maximum costs one pass instead.

    ``exp`` (NumPy arrays only): a function ``exp(A, own)`` that
    exponentiates the logits ``A`` in place and zeroes row ``r``'s weight on
    key ``own[r]`` (-1 for none), as the compiled ``exp_tile`` does; it
    returns exact zeros instead of subnormals, so neither the clamp nor the
    masks are needed then.
    """
    out = workspace_buffer(workspace, (Q.shape[0], Z.shape[0]), Q, xp=xp)
    kw = dict(
        xp=xp,
        leave_one_out=leave_one_out,
        exclude=exclude,
        out=out,
        exact_zeros=exact_zeros,
    )
    if exp is not None:
        own = exclude
        if own is None:
            own = xp.arange(Q.shape[0]) if leave_one_out else xp.full(Q.shape[0], -1)
        kw = dict(kw, exp=lambda A: exp(A, xp.astype(own, xp.int64)))
    # Queries whose squared norms could overflow go straight to the stable
    # path, whose logits q . z + bias do not square q.
    known_stable = not eager_host(xp) or (
        workspace is not None and workspace.get("stable", False)
    )
    if known_stable or float(xp.max(xp.abs(Q))) > largest_safe_entry(Q, xp=xp):
        E = _exp_logits(Q, Z, bias, stable=True, **kw)
        return E, fixed_order_matmul(E, R, xp=xp)
    E = _exp_logits(Q, Z, bias, stable=False, **kw)
    M = fixed_order_matmul(E, R, xp=xp)
    if float(xp.min(M[:, -1])) < underflow_row_sum(Q.dtype, xp=xp):
        if workspace is not None:
            workspace["stable"] = True
        E = _exp_logits(Q, Z, bias, stable=True, **kw)
        M = fixed_order_matmul(E, R, xp=xp)
    return E, M


def _exp_logits(
    Q, Z, bias, *, xp, leave_one_out, exclude, stable, out, exact_zeros, exp=None
):
    A = attention_logits(Q, Z, bias, xp=xp, query_norms=not stable, out=out)
    mask = None
    if exclude is not None and (stable or exp is None):
        # The (m, n) mask of the excluded keys, only where it is read: the
        # compiled exp zeroes them itself.
        keys = xp.arange(Z.shape[0], device=device(Z))
        mask = keys[None, :] == exclude[:, None]
    if leave_one_out and stable:
        A = set_diagonal(A, -math.inf, xp=xp)
    if mask is not None and stable:
        A = xp.where(mask, xp.asarray(-math.inf, dtype=A.dtype, device=device(A)), A)
    if stable:
        A -= xp.max(A, axis=1, keepdims=True)
    if exp is not None:  # a compiled exp: exact zeros, the excluded keys too
        return exp(A)
    # Negligible weights are made exactly zero: arithmetic on subnormals runs
    # several times slower on x86. Clamping the logits at ``floor`` and
    # subtracting ``exp(floor)`` zeroes weights below ~1e-292, at most 1e-138
    # of their row's sum on the fast path. Only float64 needs it: float32
    # exp is not slowed by subnormals, and there the clamp costs more than
    # it saves (measurements in the user guide's performance notes).
    floor = logit_floor(A.dtype, xp=xp)
    f64 = A.dtype == xp.float64
    if f64:
        A = maximum_inplace(A, floor, xp=xp)
    E = exp_inplace(A, xp=xp)
    if exact_zeros and f64:
        E -= math.exp(floor)
    if leave_one_out:
        E = set_diagonal(E, 0.0, xp=xp)
    if mask is not None:
        E = xp.where(mask, xp.zeros_like(E), E)
    return E


def largest_safe_entry(Q, *, xp):
    """Entries of the queries ``Q`` (m, d) above this could overflow their
    squared norm."""
    info = xp.finfo(Q.dtype)
    return math.sqrt(float(info.max)) / (4.0 * math.sqrt(Q.shape[1]))


def underflow_row_sum(dtype, *, xp):
    """Fast-path row sums below this mean the row's attention underflowed."""
    return float(xp.finfo(dtype).smallest_normal) ** 0.5


def logit_floor(dtype, *, xp):
    """Logit whose exp times any mantissa-resolution value is still normal."""
    info = xp.finfo(dtype)
    return math.log(float(info.smallest_normal)) - math.log(float(info.eps))


def attend_compact(
    Q,
    Z,
    bias,
    weight,
    R,
    *,
    kernel,
    xp,
    leave_one_out=False,
    exclude=None,
    workspace=None,
):
    """Compact-kernel attention ``E = w_j K(-||q_i - z_j||^2 / 2)`` and
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
    huge = xp.max(xp.abs(Q), axis=1) > largest_safe_entry(Q, xp=xp)
    # Such queries lie far outside every support; score them as the origin
    # (so nothing overflows) and let the fallback overwrite their rows.
    Qs = xp.where(huge[:, None], xp.zeros_like(Q), Q)
    A = attention_logits(Qs, Z, bias, xp=xp, query_norms=True, out=out)
    E = kernel.weights_inplace(A, weight, xp=xp)
    if leave_one_out:
        E = set_diagonal(E, 0.0, xp=xp)
    mask = None
    if exclude is not None:
        keys = xp.arange(Z.shape[0], device=device(Z))
        mask = keys[None, :] == exclude[:, None]
        E = xp.where(mask, xp.zeros_like(E), E)
    M = fixed_order_matmul(E, R, xp=xp)
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


# Memory for the blocks of one pass of iter_head_attention (return_std,
# attention_weights, leave-one-out statistics, compact kernels), in MiB.
_BLOCK_BUDGET_MIB = 32
# Fewest query rows per block, unless working_memory itself allows fewer.
_MIN_BLOCK_ROWS = 128


def chunk_rows(n_queries, n_train, dtype, *, xp, n_blocks=2):
    """Rows per block so that ``n_blocks`` (rows, n_train) blocks fit in
    scikit-learn's ``working_memory``, preferring ``_BLOCK_BUDGET_MIB``.

    Smaller blocks are faster, not only leaner (they stay nearer the cache),
    but a block keeps at least ``_MIN_BLOCK_ROWS`` rows, within
    ``working_memory``. Off the host (``eager_host``) the blocks fill
    ``working_memory``: a GPU has no small cache to fit, and every block
    costs its own kernel launches.
    """
    per_row = n_blocks * itemsize(dtype, xp=xp) * max(n_train, 1)
    allowed = int(get_config()["working_memory"] * 2**20 // per_row)
    if not eager_host(xp):
        return int(min(max(allowed, 1), max(n_queries, 1)))
    preferred = max(int(_BLOCK_BUDGET_MIB * 2**20 // per_row), _MIN_BLOCK_ROWS)
    rows = min(allowed, preferred)
    return int(min(max(rows, 1), max(n_queries, 1)))


def log_weights(sw, *, xp):
    """``log(sw)``, with ``-inf`` for rows of weight zero."""
    positive = sw > 0
    safe = xp.where(positive, sw, xp.ones_like(sw))
    return xp.where(positive, xp.log(safe), xp.full_like(sw, -math.inf))
