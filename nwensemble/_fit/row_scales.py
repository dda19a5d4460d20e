"""L-BFGS's parameters: each row of the projection as a scale times a
direction, ``W = diag(a) V``.

The model is the same; what changes is the path the solver takes to it. A
step on ``(a, V)`` moves row ``j`` of ``W`` by ``a_j^2 g_j + V_j (V_j . g_j)``
to first order (``g_j`` its gradient): rows the heads use move more than
rows they ignore, and along their own direction a row grows or shrinks in
proportion to its size. On ``W`` itself L-BFGS needs many iterations
where a table asks for some features' bandwidths to narrow many-fold. A
start that fitted a scale per feature (one head's identity start where it
kept the features' own scales, ``start.Start.feature_scales``) has done
that already and keeps ``W``'s entries (the user guide's schedule of a fit
says why).
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


def parameters(W0, row_scales):
    """L-BFGS's parameters from the start ``W0``: ``RowScales`` when
    ``row_scales``, else ``W``'s entries themselves."""
    return RowScales(W0) if row_scales else Entries(W0)


class Entries:
    """``W``'s entries as the parameter vector (``RowScales``'s interface)."""

    def __init__(self, W0):
        self.shape = W0.shape
        self.start = W0.ravel()

    def projection(self, theta):
        return theta.reshape(self.shape)

    def gradient(self, theta, grad_W):
        return grad_W.ravel()


class RowScales:
    """The map between L-BFGS's flat parameter vector and ``W``.

    The vector holds ``V`` (p, k) flattened, then ``a`` (p,), so that
    ``W = a[:, None] * V``. The start splits ``W0`` balanced,
    ``|a_j| = ||V_j||`` (gradient flow keeps ``a_j^2 - ||V_j||^2`` constant,
    so neither part starts out the faster); a zero row starts at scale 1.

    Parameters
    ----------
    W0 : ndarray of shape (p, k)
        The starting projection, float64.
    """

    def __init__(self, W0):
        self.shape = W0.shape
        norms = np.linalg.norm(W0, axis=1)
        scales = np.where(norms > 0, np.sqrt(norms), 1.0)
        self.start = np.concatenate([(W0 / scales[:, None]).ravel(), scales])

    def _split(self, theta):
        p, k = self.shape
        return theta[: p * k].reshape(p, k), theta[p * k :]

    def projection(self, theta):
        """``W`` (p, k) at the parameters ``theta``."""
        V, scales = self._split(theta)
        return scales[:, None] * V

    def gradient(self, theta, grad_W):
        """The gradient in ``theta`` from the gradient ``grad_W`` in ``W``."""
        V, scales = self._split(theta)
        return np.concatenate(
            [(scales[:, None] * grad_W).ravel(), np.sum(V * grad_W, axis=1)]
        )
