"""The kernel family: softmax (Gaussian) and the compact Epanechnikov kernels.

Library definition. With the score ``s = -||W^T (x - x_i)||^2 / 2`` of the
softmax head, the compact kernel of degree ``k`` gives the weight

    K_k(s) = (1 + s / k)_+^k = (1 - u)_+^k,   u = ||W^T (x - x_i)||^2 / (2 k),

so its support is the ball of radius ``sqrt(2 k)`` in the learned space (the
scale of ``W`` sets the radius in input units, as it sets the softmax
bandwidth), and ``K_k(s) -> exp(s)`` as ``k -> infinity``: softmax is the
limit of the family. Degrees 1, 2, 3 are the Epanechnikov, biweight and
triweight kernels, the alpha-entmax attentions with ``alpha = 1 + 1/k`` of the
sparse-attention seed document.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble._backend import maximum_inplace, takes_out

# Degrees 1 to 3 only: the weights and derivatives below are written for them.
KERNEL_DEGREES = {"softmax": None, "epanechnikov": 1, "biweight": 2, "triweight": 3}


def kernel_degree(kernel):
    """Degree ``k`` of a compact kernel; None for softmax."""
    try:
        return KERNEL_DEGREES[kernel]
    except KeyError:
        raise ValueError(
            f"kernel must be one of {sorted(KERNEL_DEGREES)}; got {kernel!r}."
        ) from None


def support_radius(degree):
    """Radius of the support in the learned space: ``sqrt(2 k)``."""
    return (2.0 * degree) ** 0.5


def compact_weights_inplace(A, degree, key_weight, *, xp):
    """``w_j (1 + A_ij / k)_+^k`` from full scores ``A`` (m, n), in place where
    the namespace allows it. ``key_weight`` (n,) or None (all ones)."""
    A *= 1.0 / degree
    A += 1.0
    A = maximum_inplace(A, 0.0, xp=xp)
    # Products, not pow: pow was 4.5x slower than A *= A * A (NumPy, 2 cores).
    if degree == 2:
        A *= A
    elif degree == 3:
        A *= A * A
    if key_weight is not None:
        A *= key_weight[None, :]
    return A


def compact_derivative_inplace(E, degree, key_weight, *, xp):
    """``dE / ds = w_j (1 + s / k)_+^(k - 1)`` from ``E = w_j (1 + s / k)_+^k``.

    Overwrites ``E`` where the namespace allows it. For the Epanechnikov kernel
    this is ``w_j`` inside the support and 0 outside (a subgradient at the
    boundary, where the weight itself is continuous).
    """
    if degree == 1:
        E = xp.sign(E, out=E) if takes_out(xp) else xp.sign(E)
    elif degree == 2:
        E = xp.sqrt(E, out=E) if takes_out(xp) else xp.sqrt(E)
    elif hasattr(xp, "cbrt"):  # degree 3: E^(2/3); cbrt and a square beat pow 2x
        E = xp.cbrt(E, out=E) if takes_out(xp) else xp.cbrt(E)
        E *= E
    else:
        E = _power(E, 2.0 / 3.0, xp=xp)
    if key_weight is not None:
        E *= (key_weight ** (1.0 / degree))[None, :]
    return E


def _power(A, exponent, *, xp):
    return xp.pow(A, exponent, out=A) if takes_out(xp) else xp.pow(A, exponent)
