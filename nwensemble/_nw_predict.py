"""Nadaraya-Watson prediction of the head ensemble: estimates, their
spread, every head's estimates and the leave-one-out estimates of training
rows, in blocks or cache-sized tiles of bounded memory."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._attention import (
    attend,
    chunk_rows,
    key_bias,
    largest_safe_entry,
    log_weights,
    logit_floor,
    underflow_row_sum,
)
from nwensemble._backend import (
    device,
    eager_host,
    exp_inplace,
    map_on_host_threads,
    matmul_into,
    maximum_inplace,
    row_major,
    workspace_buffer,
)
from nwensemble._kernels import get_kernel


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
    kernel = get_kernel(kernel)
    d = Z.shape[1] // n_heads
    ones = xp.ones((Y.shape[0], 1), dtype=Y.dtype, device=device(Y))
    Y_aug = xp.concat([Y, ones], axis=1)
    keys = [
        kernel.keys(Z[:, h * d : (h + 1) * d], log_sw, xp=xp) for h in range(n_heads)
    ]
    m = Q.shape[0] if loo_rows is None else loo_rows.shape[0]
    chunk = chunk_rows(m, Z.shape[0], Z.dtype, n_blocks=n_blocks, xp=xp)
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
            E, num, fallback = kernel.attend(
                Qb[:, cols],
                Z[:, cols],
                keys[h],
                Y_aug,
                xp=xp,
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
    would each cost several kernel launches and every row of tiles a
    read-back, while the blocks, sized by ``working_memory`` (see
    ``chunk_rows``), are few.
    """
    alpha = _head_weights_or_uniform(head_weights, n_heads)
    if get_kernel(kernel).tiles_on_host and eager_host(xp):
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
# more passes through memory (tile shapes compared in the performance notes).
_QUERY_TILE = 256
_KEY_TILE = 512
# Scores (queries x keys x heads) from which the tiles run on threads.
_THREADED_SCORES = 1 << 22


def _tile_operands(Q, Z, log_sw, *, xp, n_heads):
    """Per head, the key biases and the operands whose product is the
    softmax logit: queries ``[q, 1, -|q|^2 / 2]`` and transposed keys
    ``[z, bias, 1]``. Returns ``(queries, keys, biases)``, with ``queries``
    and ``keys`` None when some query is so far out that its squared norm
    could overflow (those take the stable paths). ``Q`` has at least a row."""
    m, n = Q.shape[0], Z.shape[0]
    d = Z.shape[1] // n_heads
    dev = device(Z)
    far = float(xp.max(xp.abs(Q))) > largest_safe_entry(Q[:, :d], xp=xp)
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
        keys.append(row_major(xp.concat([Zh, bias[:, None], k_ones], axis=1).T, xp=xp))
    return (None, None, biases) if far else (queries, keys, biases)


def _exp_tile(q, keys, c0, c1, *, left_out, clamp, xp, out=None):
    """``exp`` of the logits of queries ``q`` on keys ``c0:c1`` (operands of
    ``_tile_operands``), with the weight of query ``r`` on key
    ``left_out[r]`` (a NumPy array, or None) set to zero."""
    A = matmul_into(q, keys[:, c0:c1], out, xp=xp)
    if clamp is not None:  # see _exp_logits: float64 exp and subnormals
        A = maximum_inplace(A, clamp, xp=xp)
    A = exp_inplace(A, xp=xp)
    if left_out is not None:
        inside = (left_out >= c0) & (left_out < c1)
        if inside.any():
            dev = device(A)
            cols = xp.arange(c0, c1, device=dev)
            own = xp.asarray(np.where(inside, left_out, -1), device=dev)
            zero = xp.asarray(0.0, dtype=A.dtype, device=dev)
            A = xp.where(cols[None, :] == own[:, None], zero, A)
    return A


def _loo_queries(Q, Z, loo_rows, *, xp):
    """``(Q, exclude)``: with ``loo_rows``, the training rows themselves as
    queries, each excluding its own key (a NumPy index array)."""
    if loo_rows is None:
        return Q, None
    return xp.take(Z, loo_rows, axis=0), np.asarray(loo_rows)


def _tiled_softmax_estimates(Q, Z, Y, log_sw, *, xp, alpha):
    """The softmax ensemble's estimates, tile by tile (see ``_tiled_softmax_heads``)."""
    heads = _tiled_softmax_heads(Q, Z, Y, log_sw, xp=xp, n_heads=len(alpha))
    est = float(alpha[0]) * heads[0]
    for a, head in zip(alpha[1:], heads[1:]):
        est = est + float(a) * head
    return est


def _tiled_softmax_heads(Q, Z, Y, log_sw, *, xp, n_heads, exclude=None):
    """Every softmax head's estimates (a list of (m, t) arrays), tile by tile,
    heads and query blocks spread over threads where the arrays live on the
    host. With ``exclude`` (a NumPy integer array, one key index per query),
    query ``r`` gives key ``exclude[r]`` no weight (leave-one-out)."""
    m, n, t = Q.shape[0], Z.shape[0], Y.shape[1]
    d = Z.shape[1] // n_heads
    dev = device(Z)
    if m == 0:
        return [xp.zeros((0, t), dtype=Y.dtype, device=dev)] * n_heads
    Y_aug = xp.concat([Y, xp.ones((n, 1), dtype=Y.dtype, device=dev)], axis=1)
    queries, keys, biases = _tile_operands(Q, Z, log_sw, xp=xp, n_heads=n_heads)
    floor_sum = underflow_row_sum(Q.dtype, xp=xp)
    clamp = logit_floor(Q.dtype, xp=xp) if Q.dtype == xp.float64 else None

    def head_block(task):
        h, r0 = task
        r1 = min(r0 + _QUERY_TILE, m)
        left_out = None if exclude is None else exclude[r0:r1]
        num = None
        if queries is not None:
            q = queries[h][r0:r1, :]
            buf = workspace_buffer({}, (r1 - r0, _KEY_TILE), q, xp=xp)
            for c0 in range(0, n, _KEY_TILE):
                c1 = min(c0 + _KEY_TILE, n)
                out = None if buf is None else buf[:, : c1 - c0]
                A = _exp_tile(
                    q, keys[h], c0, c1, left_out=left_out, clamp=clamp, xp=xp, out=out
                )
                part = A @ Y_aug[c0:c1, :]
                num = part if num is None else num + part
        if num is None or float(xp.min(num[:, -1])) < floor_sum:
            # Some query is far from every key: attend's stable path.
            cols = slice(h * d, (h + 1) * d)
            skip = None if left_out is None else xp.asarray(left_out, device=dev)
            _, num = attend(
                Q[r0:r1, cols],
                Z[:, cols],
                biases[h],
                Y_aug,
                xp=xp,
                exclude=skip,
                exact_zeros=False,
            )
        return num[:, :t] / num[:, t:]

    tasks = [(h, r0) for r0 in range(0, m, _QUERY_TILE) for h in range(n_heads)]
    # Threads (and the BLAS limit around them) cost about a millisecond to
    # set up: worth it only for large products.
    big = m * n * n_heads >= _THREADED_SCORES
    parts = map_on_host_threads(head_block, tasks, xp=xp, threads=big)
    return [_concat(parts[h::n_heads], xp=xp) for h in range(n_heads)]


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
    if get_kernel(kernel).tiles_on_host and eager_host(xp):
        Q, exclude = _loo_queries(Q, Z, loo_rows, xp=xp)
        return _tiled_softmax_spread(
            Q, Z, Y, log_sw, xp=xp, alpha=alpha, exclude=exclude
        )
    return _blocked_squared_spread(
        Q, Z, Y, log_sw, xp=xp, alpha=alpha, loo_rows=loo_rows, kernel=kernel
    )


def _blocked_squared_spread(Q, Z, Y, log_sw, *, xp, alpha, loo_rows, kernel):
    """``_predict_and_squared_spread`` in blocks of ``iter_head_attention``."""
    n_heads = len(alpha)
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


def _tiled_softmax_spread(Q, Z, Y, log_sw, *, xp, alpha, exclude=None):
    """``_predict_and_squared_spread`` for softmax heads on the host, tile by
    tile on threads (see ``_tiled_softmax_heads``).

    ``sum_i v_i^2`` with ``v = sum_h alpha_h E_h / s_h`` is
    ``sum_hg alpha_h alpha_g (E_h . E_g) / (s_h s_g)``: the products of the
    heads' unnormalised attention rows accumulate tile by tile beside their
    sums ``s_h``, so one pass suffices. A block whose sums are too small for
    those products to stay normal (a query far from its keys) is computed by
    ``_blocked_squared_spread``, which normalises first.
    """
    n_heads = len(alpha)
    m, n, t = Q.shape[0], Z.shape[0], Y.shape[1]
    dev = device(Z)
    loo = None if exclude is None else xp.asarray(exclude, device=dev)

    def blocked(rows):
        """The rows ``rows`` of the result, by ``_blocked_squared_spread``."""
        return _blocked_squared_spread(
            Q[rows, :] if loo is None else None,
            Z,
            Y,
            log_sw,
            xp=xp,
            alpha=alpha,
            loo_rows=None if loo is None else loo[rows],
            kernel="softmax",
        )

    if m == 0:
        return blocked(slice(0, 0))
    queries, keys, _ = _tile_operands(Q, Z, log_sw, xp=xp, n_heads=n_heads)
    if queries is None:  # a query far out: the blocks' stable path
        return blocked(slice(0, m))
    Y_aug = xp.concat([Y, xp.ones((n, 1), dtype=Y.dtype, device=dev)], axis=1)
    # Sums above this keep the products of attention rows normal.
    floor_sum = float(xp.finfo(Q.dtype).smallest_normal) ** 0.25
    clamp = logit_floor(Q.dtype, xp=xp) if Q.dtype == xp.float64 else None

    def query_block(r0):
        r1 = min(r0 + _QUERY_TILE, m)
        left_out = None if exclude is None else exclude[r0:r1]
        nums = [None] * n_heads
        G = {}
        for c0 in range(0, n, _KEY_TILE):
            c1 = min(c0 + _KEY_TILE, n)
            tiles = []
            for h in range(n_heads):
                A = _exp_tile(
                    queries[h][r0:r1, :],
                    keys[h],
                    c0,
                    c1,
                    left_out=left_out,
                    clamp=clamp,
                    xp=xp,
                )
                part = A @ Y_aug[c0:c1, :]
                nums[h] = part if nums[h] is None else nums[h] + part
                tiles.append(A)
                for g, B in enumerate(tiles):  # g <= h: each pair once
                    G[g, h] = G.get((g, h), 0.0) + xp.sum(A * B, axis=1)
        sums = [num[:, t] for num in nums]
        if min(float(xp.min(s)) for s in sums) < floor_sum:
            return blocked(slice(r0, r1))
        c = [float(a) / s for a, s in zip(alpha, sums)]
        est = c[0][:, None] * nums[0][:, :t]
        for h in range(1, n_heads):
            est = est + c[h][:, None] * nums[h][:, :t]
        sq = 0.0
        for (g, h), gram in G.items():
            sq = sq + (1.0 if g == h else 2.0) * c[g] * c[h] * gram
        return est, sq

    big = m * n * n_heads >= _THREADED_SCORES
    blocks = map_on_host_threads(
        query_block, range(0, m, _QUERY_TILE), xp=xp, threads=big
    )
    return (
        _concat([b[0] for b in blocks], xp=xp),
        _concat([b[1] for b in blocks], xp=xp),
    )


def nw_head_predictions(
    Q, Z, Y, log_sw, *, xp, n_heads, loo_rows=None, kernel="softmax", fallback=False
):
    """Every head's NW estimates, stacked: an array of shape (n_heads, m, t).

    With ``loo_rows``, the leave-one-out estimates of those training rows.
    With ``fallback``, also return the boolean (n_heads, m) array of queries
    whose compact support was empty (see ``attend_compact``).
    """
    if get_kernel(kernel).tiles_on_host and eager_host(xp):
        Q, exclude = _loo_queries(Q, Z, loo_rows, xp=xp)
        preds = xp.stack(
            _tiled_softmax_heads(
                Q, Z, Y, log_sw, xp=xp, n_heads=n_heads, exclude=exclude
            ),
            axis=0,
        )
        if not fallback:
            return preds
        return preds, xp.zeros(preds.shape[:2], dtype=xp.bool, device=device(preds))
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
    return loo_predict_with_squared_spread(
        Z,
        Y,
        log_sw,
        rows,
        xp=xp,
        n_heads=n_heads,
        head_weights=head_weights,
        kernel=kernel,
    )[1]


def loo_predict_with_squared_spread(
    Z, Y, log_sw, rows, *, xp, n_heads, head_weights, kernel="softmax"
):
    """The ensemble's leave-one-out estimates for training rows ``rows`` and
    ``sum_j v_ij^2`` of their weights, in one pass: ``(Y_hat (m, t), (m,))``."""
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
    )


def _head_weights_or_uniform(head_weights, n_heads):
    if head_weights is None:
        return [1.0 / n_heads] * n_heads
    return [float(a) for a in head_weights]


def heldout_loss(W, Xq, Yq, swq, Xk, Yk, swk, *, xp, n_heads=1, kernel="softmax"):
    """Weighted MSE of queries ``Xq`` predicted from keys ``Xk`` (no overlap).

    Used for early stopping: held-out rows are queries only, never keys.
    """
    Y_hat = nw_predict(
        Xq @ W,
        Xk @ W,
        Yk,
        log_weights(swk, xp=xp),
        xp=xp,
        n_heads=n_heads,
        kernel=kernel,
    )
    R = Y_hat - Yq
    return float(xp.sum(swq * xp.sum(R * R, axis=1)))
