"""What the host's two leave-one-out sweeps share (``loo_sweep`` over blocks
of rows, ``loo_pairs`` over each pair of rows once): the ensemble's loss and
its derivative in every head's estimates, the rows' chunks, the rows of a
cache-sized block, and the chunks' parts added in order."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

# Rows per chunk of a sweep: chunks are what runs on threads, each with its
# own sums, added in a fixed order, so that the threads move the time of an
# evaluation, never its value.
_CHUNK_ROWS = 256
_MAX_CHUNKS = 8


def chunk_count(n):
    """Chunks of ``n`` rows: a power of two, of at least ``_CHUNK_ROWS`` rows
    each, at most ``_MAX_CHUNKS``."""
    return min(_MAX_CHUNKS, 1 << max(0, (n // _CHUNK_ROWS).bit_length() - 1))


def rows_within(budget, row_bytes):
    """Rows of ``row_bytes`` each in a block of at most ``budget`` bytes: a
    power of two from 8 to 256 (8 even when they take more)."""
    fit = budget // max(1, row_bytes)
    return int(min(256, max(8, 1 << max(0, fit.bit_length() - 1))))


def add_in_order(parts):
    """The chunks' arrays added in the chunks' order."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def ensemble_loss(Y_heads, Y, sw, diversity):
    """The objective of ``loo_loss.loo_loss_and_grad_z`` from every head's
    leave-one-out estimates ``Y_heads`` (heads, n, t): the weighted squared
    error of their mean less ``diversity / heads`` times their ambiguity."""
    n_heads = Y_heads.shape[0]
    Y_hat = np.mean(Y_heads, axis=0) if n_heads > 1 else Y_heads[0]
    R = Y_hat - Y
    loss = np.sum(sw * np.sum(R * R, axis=1))
    if diversity and n_heads > 1:
        S = Y_heads - Y_hat
        ambiguity = np.sum(sw * np.sum(S * S, axis=2))
        loss = loss - (diversity / n_heads) * ambiguity
    return loss


def ensemble_upstream(Y_heads, Y, sw, diversity):
    """``dloss / dY_heads`` (heads, n, t) of ``ensemble_loss``: ``2 sw (R -
    diversity (Y_hat_h - Y_hat)) / heads`` (see ``loo_loss``)."""
    n_heads = Y_heads.shape[0]
    Y_hat = np.mean(Y_heads, axis=0) if n_heads > 1 else Y_heads[0]
    scale = (2.0 / n_heads) * sw[:, None]
    R = Y_hat - Y
    if not diversity or n_heads == 1:
        # The same for every head: one array read by each (one head's by
        # indexing, which costs less than ``broadcast_to`` on a small block).
        upstream = scale * R
        if n_heads == 1:
            return upstream[None]
        return np.broadcast_to(upstream, Y_heads.shape)
    return scale * (R - diversity * (Y_heads - Y_hat))
