"""The rows the projections act on, when some features are categorical or
missing: a numeric block and embedding codes, never a one-hot matrix.

A head projects a row to ``Z = N W_N + sum_j E[c_j]``: the numeric block
``N`` (missing entries at their conditional mean) times the numeric rows of
the parameters, plus, per code column ``j``, the embedding row of the row's
code. That is the one-hot matrix ``[N, onehot(c_1), ...]`` times the
parameters ``W = [W_N; E]`` stacked, computed by gathers; its gradient
``[N^T G; segment sums of G by code]``, on the host by the one-hot matrix
held sparse (one entry per row and code column), elsewhere by one sort of
the codes. Memory grows with the rows and the levels, not with their
product.

A table of numbers only is a ``Design`` without code columns, so that the
fitting engine and the predictor have one path for every input.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse import csr_array

from nwensemble._shared.backend import device, eager_host, namespace_of


@dataclass(frozen=True, eq=False)
class Design:
    """Rows as a numeric block and global embedding codes.

    Attributes
    ----------
    numeric : array of shape (n, p)
        Mapped numeric features (0 where missing).
    codes : array of int of shape (n, q)
        Per code column, each row's row of the embedding block (codes of
        column ``j`` are offset past the rows of the columns before it).
    n_codes : int
        Rows of the embedding block, over all code columns.
    source : Table or None
        The encoded rows this was made from (their ``copy_key`` finds a
        row's exact copies); None for a subset of rows.
    """

    numeric: Any
    codes: Any
    n_codes: int
    source: Any = field(default=None, repr=False)
    # What turns a gradient's rows into sums by code, made once per set of
    # rows, on the first backprojection (see ``_code_sums``).
    _summing: Any = field(default=None, repr=False)

    @property
    def shape(self):
        """(rows, parameter rows): the one-hot matrix's shape."""
        return (self.numeric.shape[0], self.numeric.shape[1] + self.n_codes)

    @property
    def dtype(self):
        return self.numeric.dtype

    def project(self, W):
        """``[N, onehot] @ W`` for parameters ``W`` (p + n_codes, k)."""
        xp = namespace_of(self.numeric)[0]
        p = self.numeric.shape[1]
        Z = self.numeric @ W[:p, :]
        E = W[p:, :]
        for j in range(self.codes.shape[1]):
            Z = Z + xp.take(E, self.codes[:, j], axis=0)
        return Z

    def backproject(self, G):
        """``[N, onehot]^T @ G`` for ``G`` (n, k): the parameters' gradient
        from the projected rows' gradient ``G``."""
        if self.n_codes == 0:
            return self.numeric.T @ G
        xp = namespace_of(self.numeric)[0]
        sums = self._code_sums(G, xp=xp)
        return xp.concat([self.numeric.T @ G, xp.astype(sums, G.dtype)], axis=0)

    def _code_sums(self, G, *, xp):
        """Per embedding row, the float64 sum of the rows of ``G`` that
        carry its code.

        On the host the transposed one-hot matrix, held sparse, times ``G``:
        one pass over the rows' codes. Elsewhere (no sparse product in the
        array API) the rows of ``G`` in the order of their codes, whose
        running sum is read at each code's bounds: a gather and a running
        sum over ``n * q`` rows of ``k`` (the benchmarks page compares the
        two).
        """
        n, q = self.codes.shape
        if eager_host(xp):
            if self._summing is None:
                one_hot = csr_array(
                    (
                        np.ones(n * q),
                        np.reshape(self.codes, (-1,)),
                        np.arange(n + 1) * q,
                    ),
                    shape=(n, self.n_codes),
                )
                object.__setattr__(self, "_summing", one_hot.T)
            return self._summing @ np.asarray(G, dtype=np.float64)
        if self._summing is None:
            flat = xp.reshape(xp.permute_dims(self.codes, (1, 0)), (n * q,))
            order = xp.argsort(flat, stable=True)
            ranks = xp.arange(self.n_codes + 1, dtype=flat.dtype, device=device(flat))
            bounds = xp.searchsorted(xp.take(flat, order), ranks)
            object.__setattr__(self, "_summing", (order % n if n else order, bounds))
        order, bounds = self._summing
        rows = xp.astype(xp.take(G, order, axis=0), xp.float64)
        zero = xp.zeros((1, G.shape[1]), dtype=xp.float64, device=device(G))
        cum = xp.concat([zero, xp.cumulative_sum(rows, axis=0)], axis=0)
        return xp.take(cum, bounds[1:], axis=0) - xp.take(cum, bounds[:-1], axis=0)

    def copy_key(self):
        """What the rows are compared by to find a row's exact copies (see
        ``Table.copy_key``)."""
        return self.source.copy_key()

    def take(self, rows):
        """The rows ``rows`` (an integer array of the namespace)."""
        xp = namespace_of(self.numeric)[0]
        return Design(
            xp.take(self.numeric, rows, axis=0),
            xp.take(self.codes, rows, axis=0),
            self.n_codes,
        )

    def astype(self, dtype):
        xp = namespace_of(self.numeric)[0]
        return Design(xp.astype(self.numeric, dtype), self.codes, self.n_codes)


def numbers_design(X):
    """A floating array ``X`` (n, p) as a ``Design`` without code columns."""
    xp, dev = namespace_of(X)
    return Design(X, xp.zeros((X.shape[0], 0), dtype=xp.int64, device=dev), 0)
