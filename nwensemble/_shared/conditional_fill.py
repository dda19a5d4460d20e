"""Where a missing numeric value sits before its "missing" embedding is
added: its conditional mean given the row's observed numeric features.

The standardised numeric features are treated as jointly Gaussian with the
correlation matrix estimated on the training rows (each pair of features on
the rows where both are observed). A row's missing entries ``m`` then sit at
``S_mo S_oo^-1 x_o``, its observed entries ``o`` as they are; a row with
every feature missing stays at the training mean (0). Features that are
unrelated to the others are filled at their mean; features that
move together (sizes, areas, counts of one thing) are filled where the
others place them, which the learned "missing" embedding then only needs to
correct.

An estimated correlation is never exactly zero: between unrelated features
its noise (about ``1 / sqrt(n)``) would scatter their missing values along
the feature's axis, which a head that resolves that axis finely reads as
signal. So the estimate is shrunk towards the identity as Schaefer and
Strimmer (2005) shrink a correlation matrix: every correlation times ``1 -
lambda``, with ``lambda`` the sum of the correlations' estimated variances
over the sum of their squares (at most 1), which needs no constant.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared.backend import device, to_numpy

# Eigenvalues of the estimated correlation are kept at least this fraction
# of the largest: pairwise estimates need not form a positive definite
# matrix, and the fill must not amplify noise along near-collinear axes.
_MIN_EIGEN_RATIO = 1e-3
# Rows per batched solve.
_BLOCK_ROWS = 4096


def fit_correlation(Xs, valid, sw, *, xp):
    """Correlation of the standardised features ``Xs`` (n, p), zero where
    missing, each pair weighted by ``sw`` (summing to one) over the rows
    where both are ``valid`` (every row when ``valid`` is None); shrunk
    towards the identity by ``shrinkage_intensity`` and made positive
    definite. A (p, p) array in ``Xs``'s namespace, device and dtype."""
    num = to_numpy((Xs * sw[:, None]).T @ Xs).astype(np.float64)
    V = None if valid is None else xp.astype(valid, Xs.dtype)
    den = _pair_sums(V, sw, like=num)
    C = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    # Standardised on each feature's observed rows: unit variance, except
    # for features never observed, which stay uncorrelated with the others.
    np.fill_diagonal(C, 1.0)
    C = C * (1.0 - shrinkage_intensity(C, Xs, V, sw, den))
    np.fill_diagonal(C, 1.0)
    if C.shape[0] > 0:
        vals, vecs = np.linalg.eigh((C + C.T) / 2)
        vals = np.maximum(vals, _MIN_EIGEN_RATIO * vals[-1])
        C = (vecs * vals) @ vecs.T
    return xp.asarray(C, dtype=Xs.dtype, device=device(Xs))


def _pair_sums(V, w, *, like):
    """Per pair of features, the sum of the weights ``w`` over the rows
    where both are observed (``V`` 1; every row when ``V`` is None), float64
    NumPy shaped ``like``."""
    if V is None:  # every pair on every row: no product over the rows
        return np.full_like(like, float(np.sum(to_numpy(w), dtype=np.float64)))
    return to_numpy((V * w[:, None]).T @ V).astype(np.float64)


def shrinkage_intensity(C, Xs, V, sw, den):
    """Schaefer and Strimmer's ``lambda`` for the correlations ``C`` of
    ``Xs`` (zero where missing) on the rows where ``V`` is 1 (every row
    when ``V`` is None), weights ``sw`` summing to one, ``den`` the weight
    of each pair's rows (``_pair_sums``): the sum over pairs of features of
    ``Var(r_jk)``, the variance of the weighted mean that ``r_jk`` is, over
    the sum of ``r_jk^2``; at most 1, and 0 for fewer than two features or
    none correlated."""
    w2 = sw * sw
    squares = Xs * Xs
    # sum_i w_i^2 m_ijk (x_ij x_ik - r_jk)^2, m_ijk = 1 where both are
    # observed (x is zero elsewhere), as three sums over the rows.
    fourth = to_numpy((squares * w2[:, None]).T @ squares).astype(np.float64)
    second = to_numpy((Xs * w2[:, None]).T @ Xs).astype(np.float64)
    count = _pair_sums(V, w2, like=C)
    spread = fourth - 2.0 * C * second + C * C * count
    variance = np.divide(spread, den * den, out=np.zeros_like(C), where=den > 0)
    off = ~np.eye(C.shape[0], dtype=bool)
    total = float(np.sum(C[off] ** 2))
    if total == 0.0:
        return 0.0
    return min(1.0, float(np.sum(variance[off])) / total)


def fill_missing(N, valid, correlation, *, xp):
    """``N`` (n, p; standardised) with each row's entries that are not
    ``valid`` at their conditional mean given its valid ones (at 0, the
    training mean, without a ``correlation``: a model fitted by a version
    that kept none)."""
    if not bool(xp.any(~valid)):
        return N
    N = xp.where(valid, N, xp.zeros_like(N))
    if correlation is None:
        return N
    blocks = []
    for start in range(0, N.shape[0], _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, N.shape[0])
        blocks.append(
            _fill_block(N[start:stop, :], valid[start:stop, :], correlation, xp)
        )
    return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)


def _fill_block(N, valid, C, xp):
    # With v the row's mask, A = diag(v) C diag(v) + diag(1 - v) is C_oo on
    # the observed entries and the identity on the missing ones, so A a = N
    # gives a_o = C_oo^-1 x_o and a_m = 0; then C a holds C_mo C_oo^-1 x_o
    # on the missing entries.
    v = xp.astype(valid, N.dtype)
    eye = xp.eye(N.shape[1], dtype=N.dtype, device=device(N))
    A = v[:, :, None] * C[None, :, :] * v[:, None, :] + (1 - v)[:, :, None] * eye
    a = xp.linalg.solve(A, N[:, :, None])[:, :, 0]
    return xp.where(valid, N, a @ C)
