"""The kernel family as objects: softmax (Gaussian) and the compact kernels.

Library definition. With the score ``s = -||W^T (x - x_i)||^2 / 2`` of the
softmax head, the compact kernel of degree ``k`` gives the weight

    K_k(s) = (1 + s / k)_+^k = (1 - u)_+^k,   u = ||W^T (x - x_i)||^2 / (2 k),

so its support is the ball of radius ``sqrt(2 k)`` in the learned space (the
scale of ``W`` sets the radius in input units, as it sets the softmax
bandwidth), and ``K_k(s) -> exp(s)`` as ``k -> infinity``: softmax is the
limit of the family. Degrees 1, 2, 3 are the Epanechnikov, biweight and
triweight kernels, the alpha-entmax attentions with ``alpha = 1 + 1/k`` of the
sparse-attention seed document.

A kernel answers what the forward pass, the backward pass, the radius search
and prediction ask of it, and chooses how the passes over the keys run
(``passes``): the blocks every namespace can take, or a fast path of its
own on the host (the softmax tiles, the compact kernels' radius search). A
new kernel is one subclass of ``Kernel`` (of ``CompactKernel`` for one that
vanishes beyond a radius), registered in ``KERNELS``; the estimators resolve
their ``kernel`` parameter once (``resolve_kernel``) and everything below
them takes the ``Kernel`` object.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
from functools import partial

import numpy as np

from nwensemble._shared import numba_kernels
from nwensemble._shared.attention import attend, attend_compact, key_bias
from nwensemble._shared.backend import eager_host, maximum_inplace, takes_out
from nwensemble._shared.numba_tile_passes import CompiledTilePasses
from nwensemble._shared.passes import BlockPasses
from nwensemble._shared.radius_search import (
    RadiusSearchPasses,
    build_support_index,
    sparse_head_weights,
)
from nwensemble._shared.tiles import TilePasses

# Compact kernels predict on the host through the radius search from this
# many training rows on (below, the dense blocks are as fast).
SEARCH_MIN_ROWS = 4096


class Kernel:
    """How a head turns scores ``s = -||q - z||^2 / 2`` into weights.

    Attributes
    ----------
    name : str
        The value of the estimators' ``kernel`` parameter.
    compact : bool
        Weights vanish beyond ``radius``: prediction may use a radius search,
        and a query with an empty support falls back to its nearest row.
    shift_invariant : bool
        The normalised weights do not change when a row's scores shift by a
        constant, so the rows of the loss's ``G`` sum to zero (see
        ``_loo_loss``).
    own_derivative : bool
        ``dE / ds = E``: the forward pass's block serves the backward pass.
    """

    name = None
    compact = False
    shift_invariant = False
    own_derivative = False

    def passes(self, keys):
        """How passes over ``keys`` (a ``Keys``) run: an object with the
        methods of ``BlockPasses``. The base class takes the blocks; a
        kernel with a faster path where the keys live returns it here, and
        this is the only place that chooses it."""
        return BlockPasses(keys)

    def searchable(self, keys):
        """``keys`` with what ``passes`` may search them with (the same keys
        when the kernel searches nothing)."""
        return keys

    def host_kernels(self, xp):
        """The compiled kernels (the ``numba_kernels`` module) that the kernel's
        passes and training objective use for arrays of ``xp``, or None: the
        one place that decides whether they run."""
        return None

    def sweep_kernels(self, xp):
        """The compiled kernels on which the training objective runs as one
        sweep on the host (``loo_sweep``), or None for the (n, n) blocks:
        the sweep needs them and a kernel that is its own derivative."""
        return self.host_kernels(xp) if self.own_derivative else None

    def gives_sparse_weights(self, keys):
        """Whether all the attention weights on ``keys`` come as a sparse
        array (found by a search, without the dense array)."""
        return False

    def support_fallback(self, Q, keys):
        """Boolean (m, n_heads) NumPy array: where each head's support held
        no key for the projected queries ``Q`` (never, without a support)."""
        return np.zeros((Q.shape[0], keys.n_heads), dtype=bool)

    def keys(self, Z, log_sw, *, xp):
        """``(bias, weight)`` of one head's keys ``Z`` (n, d) for ``attend``."""
        raise NotImplementedError

    def attend(self, Q, Z, keys, R, *, xp, **options):
        """Unnormalised attention ``E`` (m, n), ``E @ R`` and the fallback mask
        (None when no query fell back); ``R``'s last column must be ones.

        ``options``: ``leave_one_out`` (``Q is Z``: no row attends to
        itself), ``exclude`` (one key index per query that it gives no
        weight), ``workspace`` (a dict that keeps buffers across calls) and
        ``exact_zeros`` (see ``_attention.attend``).
        """
        raise NotImplementedError

    def derivative_inplace(self, E, keys, *, xp):
        """``dE / ds`` from the weights ``E``, overwriting ``E`` where the
        namespace allows it."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class Softmax(Kernel):
    """Gaussian weights ``w_j exp(s)``, normalised per query: softmax attention."""

    name = "softmax"
    shift_invariant = True
    own_derivative = True

    def passes(self, keys):
        # On the host, tiles sized for a core's cache, through the compiled
        # kernels where numba is there. On a GPU each tile would cost
        # several kernel launches and every row of tiles a read-back, while
        # the blocks, sized by working_memory, are few.
        if not eager_host(keys.xp):
            return BlockPasses(keys)
        if self.host_kernels(keys.xp) is not None:
            return CompiledTilePasses(keys)
        return TilePasses(keys)

    def host_kernels(self, xp):
        return numba_kernels if numba_kernels.available() and eager_host(xp) else None

    def keys(self, Z, log_sw, *, xp):
        # The log weights ride in the per-key logit offset.
        return key_bias(Z, log_sw, xp=xp), None

    def attend(self, Q, Z, keys, R, *, xp, **options):
        kernels = self.host_kernels(xp)
        exp = None if kernels is None else partial(kernels.exp_tile, c0=0)
        E, M = attend(Q, Z, keys[0], R, xp=xp, exp=exp, **options)
        return E, M, None

    def derivative_inplace(self, E, keys, *, xp):
        return E


class CompactKernel(Kernel):
    """``w_j (1 + s / k)_+^k``: zero beyond the radius ``sqrt(2 k)``.

    Subclasses set ``name`` and the integer ``degree`` ``k``.
    """

    compact = True
    degree = None

    @property
    def radius(self):
        """Radius of the support in the learned space: ``sqrt(2 k)``."""
        return (2.0 * self.degree) ** 0.5

    def passes(self, keys):
        # The tree lives on the host: arrays of other namespaces keep the
        # dense blocks on their device.
        searchable = (
            keys.support_index is not None
            and keys.n_samples >= SEARCH_MIN_ROWS
            and eager_host(keys.xp)
        )
        return RadiusSearchPasses(keys) if searchable else BlockPasses(keys)

    def searchable(self, keys):
        """``keys`` with a radius-search index per head (see
        ``radius_search``) when they read the weighted mean, whose passes
        the index serves."""
        if not keys.reads_mean:
            return keys
        index = build_support_index(
            keys.Z, keys.log_sw, n_heads=keys.n_heads, kernel=self
        )
        return dataclasses.replace(keys, support_index=index)

    def gives_sparse_weights(self, keys):
        return keys.support_index is not None

    def support_fallback(self, Q, keys):
        if keys.support_index is None:
            return super().support_fallback(Q, keys)
        _, mask = sparse_head_weights(Q, keys.support_index, n_heads=keys.n_heads)
        return mask.T

    def keys(self, Z, log_sw, *, xp):
        # Weights multiply the kernel (None when all are equal, which saves a
        # pass over every block; checked only where reading back is cheap).
        bias = -0.5 * xp.sum(Z * Z, axis=1)
        weight = xp.exp(log_sw - xp.max(log_sw))
        if eager_host(xp) and bool(xp.all(weight == 1.0)):
            return bias, None
        return bias, weight

    def attend(self, Q, Z, keys, R, *, xp, exact_zeros=True, **options):
        # Compact weights are exactly zero outside the support anyway.
        bias, weight = keys
        return attend_compact(Q, Z, bias, weight, R, kernel=self, xp=xp, **options)

    def weights_inplace(self, A, key_weight, *, xp):
        """``w_j (1 + A_ij / k)_+^k`` from full scores ``A`` (m, n), in place
        where the namespace allows it. ``key_weight`` (n,) or None (all ones)."""
        A *= 1.0 / self.degree
        A += 1.0
        A = maximum_inplace(A, 0.0, xp=xp)
        A = self._power_inplace(A, xp=xp)
        if key_weight is not None:
            A *= key_weight[None, :]
        return A

    def derivative_inplace(self, E, keys, *, xp):
        """``dE / ds = w_j (1 + s / k)_+^(k - 1)`` from ``E = w_j (1 + s / k)_+^k``.

        For the Epanechnikov kernel this is ``w_j`` inside the support and 0
        outside (a subgradient at the boundary, where the weight itself is
        continuous).
        """
        E = self._root_inplace(E, xp=xp)
        key_weight = keys[1]
        if key_weight is not None:
            E *= (key_weight ** (1.0 / self.degree))[None, :]
        return E

    def sparse_weights(self, dist):
        """Unnormalised weights (NumPy) of keys at distances ``dist`` in the
        learned space, for the radius search."""
        u = 1.0 - dist * dist / (2.0 * self.degree)
        np.maximum(u, 0.0, out=u)
        return u**self.degree

    def _power_inplace(self, A, *, xp):
        """``A^k`` by products (faster than pow), in place."""
        if self.degree > 1:
            factor = A
            for _ in range(self.degree - 2):
                factor = factor * A
            A *= factor
        return A

    def _root_inplace(self, E, *, xp):
        """``E^((k - 1) / k)``, the derivative's power of the weight: 1 on the
        support for k = 1, then square and cube roots (faster than pow)."""
        out = {"out": E} if takes_out(xp) else {}
        if self.degree == 1:
            return xp.sign(E, **out)
        if self.degree == 2:
            return xp.sqrt(E, **out)
        if self.degree == 3 and hasattr(xp, "cbrt"):
            E = xp.cbrt(E, **out)
            E *= E
            return E
        return xp.pow(E, (self.degree - 1) / self.degree, **out)


class Epanechnikov(CompactKernel):
    """``(1 + s)_+``: degree 1."""

    name, degree = "epanechnikov", 1


class Biweight(CompactKernel):
    """``(1 + s / 2)_+^2``: degree 2."""

    name, degree = "biweight", 2


class Triweight(CompactKernel):
    """``(1 + s / 3)_+^3``: degree 3."""

    name, degree = "triweight", 3


KERNELS = {k.name: k for k in (Softmax(), Epanechnikov(), Biweight(), Triweight())}


def resolve_kernel(kernel):
    """The ``Kernel`` named ``kernel``: called once, where an estimator's
    parameters become the fitting engine's configuration."""
    try:
        return KERNELS[kernel]
    except KeyError:
        raise ValueError(
            f"kernel must be one of {sorted(KERNELS)}; got {kernel!r}."
        ) from None
