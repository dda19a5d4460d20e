"""Compiled host kernels for the softmax kernel's exp-bound passes (numba).

NumPy's ``exp`` runs at a fraction of a G/s per core on CPUs without
AVX-512, and the softmax passes are bound by it. ``fast_exp`` is a
vectorisable exp (``2^n exp(r)``, the power of two assembled in the exponent
bits, see the performance notes for its error and rate); ``exp_tile``
exponentiates a tile or block of logits in place with each row's own key
set to zero in the same pass. The score products and, in prediction, the
sums with the readout's columns stay BLAS's (faster than sums in the exp's
loop, see the performance notes). Training's sweep over blocks of rows
(``_fit/loo_sweep.py``) takes ``softmax_block`` (the exp and a row's two
readout sums, each a pass over the row in L1) and ``gradient_block`` (the
loss's derivative in the logits, in place, with its column sums); its
first path over each pair of rows once (``_fit/loo_pairs.py``) takes
``pair_weights`` (a strip's kernel values and both rows' sums) and
``pair_gradient`` (the derivative in both directions, in place).
Prediction's sums of a block of queries over a chunk of keys take
``tile_sums``: every tile's score product, exp and product with the
readout's columns in one call (the products BLAS's, called from the
compiled loop), so that the threads' tiles wait on no interpreter. The
kernels release the GIL (``map_on_host_threads`` spreads tasks over
threads).

They serve NumPy arrays on the host only (the array-API path stays as it
is); ``kernels.Softmax.host_kernels`` is the one place that chooses them,
and ``available()`` says whether numba imported (and ``ENABLED``). They are
compiled on first use and cached on disk (``cache=True``), so later
processes load them.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import os

import numpy as np

try:
    import numba
    from numba import types
    from numba.extending import intrinsic, overload
except ImportError:  # pragma: no cover - numba is a dependency
    numba = None

# Keys per tile: the tile's scores, exps and targets stay in L1/L2.
TILE = 512

# NWENSEMBLE_COMPILED=0 in the environment (or ENABLED = False) keeps every
# pass on NumPy, for comparisons in one run.
ENABLED = os.environ.get("NWENSEMBLE_COMPILED", "1") != "0"


def available():
    """Whether the compiled kernels run: numba imported and not disabled."""
    return numba is not None and ENABLED


if numba is not None:
    # Fast-math without reassociation for the exp: reassociating its
    # argument reduction (x - n ln2_hi - n ln2_lo) would fold the two parts
    # of ln 2 back into one and cost up to 100 float64 ulps near -708.
    _EXACT = {"nnan", "ninf", "nsz", "arcp", "contract", "afn"}
    _jit_exact = numba.njit(
        nogil=True, cache=True, fastmath=_EXACT, error_model="numpy"
    )
    # Sums over a row may be reassociated (partial sums in vector lanes, as
    # BLAS takes them); the exp never runs under these flags.
    _jit_sums = numba.njit(nogil=True, cache=True, fastmath=True, error_model="numpy")

    def _bitcast(to, frm):
        """An intrinsic that reinterprets the bits of a ``frm`` as a ``to``."""

        @intrinsic
        def cast(typingctx, bits):
            def codegen(context, builder, signature, args):
                return builder.bitcast(args[0], context.get_value_type(to))

            return to(frm), codegen

        return cast

    _bits_as_float32 = _bitcast(types.float32, types.int32)
    _bits_as_float64 = _bitcast(types.float64, types.int64)

    def fast_exp(x):  # replaced in compiled code by the overload below
        return math.exp(x)

    @overload(fast_exp, inline="always", fastmath=_EXACT)
    def _fast_exp(x):
        if isinstance(x, types.Float) and x.bitwidth == 32:
            return _exp32
        return _exp64

    # exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in
    # [-ln 2 / 2, ln 2 / 2] (ln 2 split in two so that n ln2_hi is exact),
    # exp(r) by its Taylor polynomial: degree 7 in float32 (truncation below
    # 5e-9 of the value), 13 in float64 (below 5e-18).
    _C32 = tuple(1.0 / math.factorial(k) for k in range(8))
    _C64 = tuple(1.0 / math.factorial(k) for k in range(14))

    def _exp32(x):
        # Below this exp is subnormal in float32: zero here (the weights it
        # would give are below 1e-38 of a row's largest).
        if x < np.float32(-87.0):
            return np.float32(0.0)
        n = np.floor(x * np.float32(1.4426950408889634) + np.float32(0.5))
        r = x - n * np.float32(0.693145751953125)
        r = r - n * np.float32(1.428606765330187e-06)
        p = np.float32(_C32[7])
        for k in range(6, -1, -1):
            p = p * r + np.float32(_C32[k])
        scale = _bits_as_float32(np.int32((np.int32(n) + np.int32(127)) << 23))
        return p * scale

    def _exp64(x):
        if x < -708.0:
            return 0.0
        n = np.floor(x * 1.4426950408889634 + 0.5)
        r = x - n * 0.6931471803691238
        r = r - n * 1.9082149292705877e-10
        p = _C64[13]
        for k in range(12, -1, -1):
            p = p * r + _C64[k]
        scale = _bits_as_float64(np.int64((np.int64(n) + np.int64(1023)) << 52))
        return p * scale

    def flushed(x):  # replaced in compiled code by the overload below
        return x if abs(x) >= np.finfo(np.asarray(x).dtype).tiny else 0.0

    @overload(flushed, inline="always")
    def _flushed(x):
        # A subnormal entry slows every product BLAS takes of its array many
        # times over (a microcode assist per operation on x86): a derivative
        # below the smallest normal number, a product of weights themselves
        # near it, adds nothing a sum of normal terms would keep.
        tiny = np.finfo(np.float32 if x.bitwidth == 32 else np.float64).tiny

        def flush(x):
            return x if abs(x) >= tiny else x * 0.0

        return flush

    @_jit_exact
    def exp_array(x, out):
        """``out[i] = fast_exp(x[i])`` (for tests and the exp rate)."""
        for i in range(x.shape[0]):
            out[i] = fast_exp(x[i])
        return out

    @_jit_exact
    def _exp_row(a, own):
        """``a = exp(a)`` in place, ``a[own]`` zero if ``0 <= own < len(a)``."""
        w = a.shape[0]
        for j in range(w):
            a[j] = fast_exp(a[j])
        if 0 <= own < w:
            a[own] = 0.0

    @_jit_exact
    def exp_tile(A, left_out, c0):
        """``exp`` of a tile of logits ``A`` (rows, keys) in place; row
        ``r``'s weight on key ``left_out[r]`` (a key index of the whole set,
        -1 for none) is set to zero if that key lies in the tile, which
        starts at key ``c0``."""
        for r in range(A.shape[0]):
            _exp_row(A[r], left_out[r] - c0)
        return A

    @_jit_sums
    def _readout_sums(row, YT, out):
        """``out = [row @ YT.T, sum row]``: one query's readout sums."""
        t = YT.shape[0]
        total = row.dtype.type(0.0)
        for j in range(row.shape[0]):
            total += row[j]
        out[t] = total
        for k in range(t):
            y = YT[k]
            acc = row.dtype.type(0.0)
            for j in range(row.shape[0]):
                acc += row[j] * y[j]
            out[k] = acc

    @_jit_exact
    def softmax_block(E, first, YT, sums):
        """Leave-one-out softmax weights of a block of query rows, every
        head's: ``E`` (heads, rows, keys) holds never-positive scores and is
        exponentiated in place, row ``r``'s own key ``first + r`` set to
        zero; ``sums[h, r] = [E[h, r] @ YT.T, sum E[h, r]]`` (``YT``: the
        targets, (t, keys))."""
        for h in range(E.shape[0]):
            for r in range(E.shape[1]):
                _exp_row(E[h, r], first + r)
                _readout_sums(E[h, r], YT, sums[h, r])
        return sums

    @_jit_sums
    def gradient_block(E, A, c, YT, colsum):
        """``E`` (heads, rows, keys) overwritten by the loss's derivative in
        the logits, ``G[h, r, j] = E[h, r, j] (A[h, r] . YT[:, j] - c[h, r])``,
        and ``G``'s column sums added to ``colsum`` (heads, keys)."""
        t = YT.shape[0]
        n = E.shape[2]
        w = np.empty(n, dtype=E.dtype)
        for h in range(E.shape[0]):
            total = colsum[h]
            for r in range(E.shape[1]):
                row = E[h, r]
                for j in range(n):
                    w[j] = A[h, r, 0] * YT[0, j] - c[h, r]
                for k in range(1, t):
                    a = A[h, r, k]
                    y = YT[k]
                    for j in range(n):
                        w[j] += a * y[j]
                for j in range(n):
                    g = flushed(row[j] * w[j])
                    row[j] = g
                    total[j] += g
        return E

    @_jit_exact
    def _exp_all(a):
        """``a = exp(a)`` in place."""
        for j in range(a.shape[0]):
            a[j] = fast_exp(a[j])

    @_jit_sums
    def _pair_sums_k(row, v, own, out):
        """``out += row * own``; returns ``row . v`` (one column of the
        values)."""
        acc = row.dtype.type(0.0)
        for j in range(row.shape[0]):
            e = row[j]
            acc += e * v[j]
            out[j] += e * own
        return acc

    @_jit_exact
    def pair_weights(K, r0, c0, V, sums):
        """Every head's kernel values on a strip of pairs, read both ways.

        ``K`` (heads, rows, keys) holds the never-positive scores ``-|z_i -
        z_j|^2 / 2`` of rows ``r0 + r`` against keys ``c0 + j`` (``c0 <=
        r0``) and is exponentiated in place where ``c0 + j > r0 + r``: each
        pair of rows once. Both rows' sums gain the pair's weight on the
        other's values: ``sums[h, :, i] += K[h, i, j] V[:, j]`` and
        ``sums[h, :, j] += K[h, i, j] V[:, i]`` (``V``: (columns, n),
        ``sums``: (heads, columns, n)).
        """
        for h in range(K.shape[0]):
            for r in range(K.shape[1]):
                i = r0 + r
                row = K[h, r, i + 1 - c0 :]
                _exp_all(row)
                for k in range(V.shape[0]):
                    acc = _pair_sums_k(row, V[k, i + 1 :], V[k, i], sums[h, k, i + 1 :])
                    sums[h, k, i] += acc
        return sums

    @_jit_sums
    def _pair_factor(f, Lk, Rk, a, b):
        """``f += a Rk + b Lk``."""
        for j in range(f.shape[0]):
            f[j] += a * Rk[j] + b * Lk[j]

    @_jit_sums
    def _times(row, f):
        """``row *= f``, subnormal products zero (see ``flushed``)."""
        for j in range(row.shape[0]):
            row[j] = flushed(row[j] * f[j])

    @_jit_exact
    def pair_gradient(K, r0, c0, L, R, weighed):
        """The loss's derivative in the scores of a strip of pairs, both
        ways, in place: ``K`` as in ``pair_weights`` becomes ``C[h, i, j] =
        G[h, i, j] + G[h, j, i]`` where ``c0 + j > r0 + r`` and zero
        elsewhere, with ``G[h, i, j] = exp(K[h, i, j]) L[h, :, i] . R[:,
        j]`` (``L``: (heads, columns, n), ``R``: (columns, n)); with
        ``weighed``, ``K`` already holds the kernel values there (as
        ``pair_weights`` leaves them) and ``exp`` is not taken again."""
        buf = np.empty(K.shape[2], dtype=K.dtype)
        for h in range(K.shape[0]):
            for r in range(K.shape[1]):
                i = r0 + r
                first = i + 1 - c0
                K[h, r, :first] = 0.0
                row = K[h, r, first:]
                if not weighed:
                    _exp_all(row)
                f = buf[: row.shape[0]]
                f[:] = 0.0
                for k in range(R.shape[0]):
                    a, b = L[h, k, i], R[k, i]
                    _pair_factor(f, L[h, k, i + 1 :], R[k, i + 1 :], a, b)
                _times(row, f)
        return K

    @_jit_exact
    def tile_sums(q, K, R, own, k0, width, num, A):
        """``num += E @ R`` over a chunk of keys, tile by tile: ``E`` the
        exponentiated logits of the queries' operands ``q`` (rows, p) on the
        keys' ``K`` (tiles, p, tile), with query ``r``'s weight on key
        ``own[r]`` (an index of the whole set, -1 for none) zero; ``R``
        (tiles, tile, columns) the keys' readout columns. The chunk starts
        at key ``k0`` and holds ``width`` keys (the last tile's rest is
        padding, zeros in ``R``); ``A`` (rows, tile) is the tile's
        workspace."""
        tile = K.shape[2]
        for t in range(K.shape[0]):
            np.dot(q, K[t], A)
            c0 = k0 + t * tile
            w = min(tile, width - t * tile)
            for r in range(q.shape[0]):
                _exp_all(A[r, :w])
                A[r, w:] = 0.0
                if c0 <= own[r] < c0 + w:
                    A[r, own[r] - c0] = 0.0
            num += np.dot(A, R[t])
        return num
