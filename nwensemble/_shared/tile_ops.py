"""One softmax tile on the host: the logits of a block of queries on a
block of keys as one product of augmented operands, exponentiated in place,
times the keys' readout columns."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared.attention import key_bias, largest_safe_entry, logit_floor
from nwensemble._shared.backend import (
    device,
    exp_inplace,
    matmul_into,
    maximum_inplace,
    row_major,
)


def logit_operands(keys, Q):
    """Per head of ``keys``, the key biases and the operands whose product is the
    softmax logit: queries ``[q, 1, -|q|^2 / 2]`` and transposed keys
    ``[z, bias, 1]``. Returns ``(queries, keys, biases)``, with
    ``queries`` and ``keys`` None when some query is so far out that its
    squared norm could overflow (those take the stable paths). ``Q`` has
    at least a row."""
    xp, n_heads = keys.xp, keys.n_heads
    m, n = Q.shape[0], keys.n_samples
    d = keys.head_dim
    dev = device(keys.Z)
    far = float(xp.max(xp.abs(Q))) > largest_safe_entry(Q[:, :d], xp=xp)
    queries, operands, biases = [], [], []
    for h in range(n_heads):
        Qh, Zh = Q[:, h * d : (h + 1) * d], keys.head(h)
        bias = key_bias(Zh, keys.log_sw, xp=xp)
        biases.append(bias)
        if far:
            continue
        norms = -0.5 * xp.sum(Qh * Qh, axis=1, keepdims=True)
        ones = xp.ones((m, 1), dtype=Q.dtype, device=dev)
        queries.append(xp.concat([Qh, ones, norms], axis=1))
        k_ones = xp.ones((n, 1), dtype=Zh.dtype, device=dev)
        operands.append(
            row_major(xp.concat([Zh, bias[:, None], k_ones], axis=1).T, xp=xp)
        )
    return (None, None, biases) if far else (queries, operands, biases)


def tile_exp(dtype, left_out, *, xp):
    """A function ``exp(A, c0)``: the tile of logits ``A``, which starts
    at key ``c0``, exponentiated in place, with the weight of query ``r``
    on key ``left_out[r]`` (a NumPy array, or None) set to zero."""
    clamp = _clamp(dtype, xp=xp)

    def exp(A, c0):
        if clamp is not None:
            A = maximum_inplace(A, clamp, xp=xp)
        A = exp_inplace(A, xp=xp)
        if left_out is not None:
            c1 = c0 + A.shape[1]
            inside = (left_out >= c0) & (left_out < c1)
            if inside.any():
                dev = device(A)
                cols = xp.arange(c0, c1, device=dev)
                own = xp.asarray(np.where(inside, left_out, -1), device=dev)
                zero = xp.asarray(0.0, dtype=A.dtype, device=dev)
                A = xp.where(cols[None, :] == own[:, None], zero, A)
        return A

    return exp


def _clamp(dtype, *, xp):
    """Where float64 logits are clamped before the exp (see
    ``attention._exp_logits``: subnormals); None for float32."""
    return logit_floor(dtype, xp=xp) if dtype == xp.float64 else None


def tile(q, operands, R, c0, c1, num, *, exp, xp, out=None):
    """One tile: ``A``, the exponentiated logits of queries ``q`` on keys
    ``c0:c1`` (operands of ``logit_operands``; ``exp`` from
    ``tile_exp``), and ``num`` (None at the first tile) plus
    ``A @ R``, ``R`` the columns of those keys."""
    A = exp(matmul_into(q, operands[:, c0:c1], out, xp=xp), c0)
    part = A @ R
    return A, part if num is None else num + part
