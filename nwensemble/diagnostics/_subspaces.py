"""Subspace geometry of attention heads: principal angles, similarity, HDI,
and the smooth diversity penalty the estimators train with."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._shared.backend import to_numpy


def _as_heads(components):
    """``components`` as a float64 NumPy array of shape (n_heads, head_dim, p).

    The head matrices are tiny (head_dim x n_features), so the geometry is
    computed on the host whatever the array library.
    """
    C = to_numpy(components) if hasattr(components, "shape") else components
    C = np.asarray(C, dtype=np.float64)
    if C.ndim == 2:
        C = C[None]
    if C.ndim != 3 or C.shape[1] == 0 or C.shape[2] == 0:
        raise ValueError(
            "components must have shape (n_heads, head_dim, n_features) or "
            f"(head_dim, n_features); got {C.shape}."
        )
    if not np.all(np.isfinite(C)):
        raise ValueError("components contains NaN or infinity.")
    return C


def _orthonormal_bases(C):
    """An orthonormal basis of the row space of every head (list of (p, r))."""
    bases = []
    for h, head in enumerate(C):
        U, s, _ = np.linalg.svd(head.T, full_matrices=False)
        rank = int(np.sum(s > max(head.shape) * np.finfo(np.float64).eps * s[0]))
        if s[0] == 0 or rank == 0:
            raise ValueError(
                f"Head {h} has all-zero components: it spans no subspace, so its "
                "principal angles are undefined."
            )
        bases.append(U[:, :rank])
    return bases


def principal_angles(components):
    """Principal angles between the subspaces of every pair of heads.

    The subspace of head ``h`` is the span of its projection directions (the
    rows of ``components[h]``, i.e. ``range(W_h)``). The cosines of the
    principal angles between heads ``h`` and ``g`` are the singular values of
    ``U_h^T U_g`` with ``U_h`` an orthonormal basis of that span.

    Parameters
    ----------
    components : array-like of shape (n_heads, head_dim, n_features)
        The heads' projections, for example a fitted ``components_``. A 2-D
        array is one head.

    Returns
    -------
    angles : ndarray of shape (n_heads, n_heads, head_dim)
        ``angles[h, g]`` in radians, ascending; ``angles[h, h]`` is zero. Where
        a head's projection has lower rank ``r`` than ``head_dim``, only the
        first ``min(r_h, r_g)`` angles exist and the rest are NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from nwensemble.diagnostics import principal_angles
    >>> C = np.array([[[1.0, 0.0, 0.0]], [[1.0, 1.0, 0.0]]])
    >>> np.degrees(principal_angles(C)[0, 1]).round(6)
    array([45.])
    """
    C = _as_heads(components)
    bases = _orthonormal_bases(C)
    H, d = C.shape[:2]
    angles = np.full((H, H, d), np.nan)
    for h in range(H):
        for g in range(H):
            cos = np.linalg.svd(bases[h].T @ bases[g], compute_uv=False)
            r = cos.shape[0]
            angles[h, g, :r] = np.sort(np.arccos(np.clip(cos, 0.0, 1.0)))
            if h == g:
                angles[h, g, :r] = 0.0
    return angles


def subspace_similarity(components):
    """Squared overlap ``||U_h^T U_g||_F^2 / min(r_h, r_g)`` of every pair of heads.

    The mean squared cosine of the principal angles: 1 for a head with itself
    or two heads spanning the same subspace (in any basis), 0 for orthogonal
    subspaces.

    Parameters
    ----------
    components : array-like of shape (n_heads, head_dim, n_features)
        The heads' projections. A 2-D array is one head.

    Returns
    -------
    similarity : ndarray of shape (n_heads, n_heads)
        Symmetric, in [0, 1], ones on the diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> from nwensemble.diagnostics import subspace_similarity
    >>> C = np.array([[[1.0, 0.0, 0.0]], [[0.0, 2.0, 0.0]], [[3.0, 0.0, 0.0]]])
    >>> subspace_similarity(C)
    array([[1., 0., 1.],
           [0., 1., 0.],
           [1., 0., 1.]])
    """
    bases = _orthonormal_bases(_as_heads(components))
    H = len(bases)
    S = np.eye(H)
    for h in range(H):
        for g in range(h + 1, H):
            overlap = np.sum((bases[h].T @ bases[g]) ** 2)
            r = min(bases[h].shape[1], bases[g].shape[1])
            S[h, g] = S[g, h] = min(overlap / r, 1.0)
    return S


def head_diversity_index(components):
    """Head Diversity Index (HDI) of a set of heads, in [0, 1].

    This is the library's definition (the source paper's exact formula is not
    available to us):

    ``HDI = 1 - 2 / (H (H - 1)) * sum_{h < g} ||U_h^T U_g||_F^2 / d``

    with ``U_h`` an orthonormal basis of head ``h``'s subspace and ``d`` the
    head dimension (the smaller rank of the pair, should a head be rank
    deficient). It is the mean squared sine of the principal angles over all
    pairs of heads: 1 when the subspaces are pairwise orthogonal, 0 when all
    heads share one subspace, whatever bases the heads use for it.

    Parameters
    ----------
    components : array-like of shape (n_heads, head_dim, n_features)
        The heads' projections, for example a fitted ``components_``.

    Returns
    -------
    hdi : float
        NaN for a single head, for which diversity is undefined.

    See Also
    --------
    subspace_similarity : The pairwise terms of the sum.
    principal_angles : The angles behind them.

    Examples
    --------
    >>> import numpy as np
    >>> from nwensemble.diagnostics import head_diversity_index
    >>> orthogonal = np.eye(4).reshape(2, 2, 4)
    >>> head_diversity_index(orthogonal)
    1.0
    >>> same_span = np.array([[[1.0, 0.0, 0.0]], [[-2.0, 0.0, 0.0]]])
    >>> head_diversity_index(same_span)
    0.0
    """
    S = subspace_similarity(components)
    H = S.shape[0]
    if H < 2:
        return float("nan")
    pairs = S[np.triu_indices(H, k=1)]
    return float(np.clip(1.0 - pairs.mean(), 0.0, 1.0))
