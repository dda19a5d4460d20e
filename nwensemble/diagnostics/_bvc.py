"""Bias-variance-covariance decomposition of a head ensemble over resamples."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from nwensemble._shared.backend import device, move_to, namespace_of


def bvc_decomposition(
    estimator, X, y, *, n_resamples=10, f_true=None, random_state=None, n_jobs=None
):
    """Bias-variance-covariance decomposition of a fitted head ensemble.

    The heads' learned projections are held fixed. Each resample draws a
    bootstrap sample of the rows of ``(X, y)`` as the attention's keys, and
    every head predicts the rows left out of it (out-of-resample points). Per
    point, over the resamples that left it out, the uniform ensemble
    ``f = (1/H) sum_h f_h`` satisfies (Ueda and Nakano, 1996)

    ``mse = bias2 + variance / H + (1 - 1/H) * covariance``

    where ``bias2`` is the squared error of the mean prediction, ``variance``
    the mean over heads of each head's variance across resamples, and
    ``covariance`` the mean over pairs of heads of their covariance across
    resamples. Moments are population moments over the resamples, so the
    identity holds exactly (to rounding) point by point and for the averages
    over points and outputs that are returned.

    Parameters
    ----------
    estimator : fitted NWAttentionRegressor or MultiHeadNWRegressor
        Supplies the heads' projections (and the feature standardisation).
    X : array-like of shape (n_samples, n_features)
        Rows to resample; in the estimator's namespace and device.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Their targets.
    n_resamples : int, default=10
        Number of bootstrap resamples. A point enters the averages if at least
        one resample left it out (a fraction ``1 - 0.632^n_resamples`` of them).
    f_true : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
        The noise-free target ``f*(X)``, when known (synthetic data). The
        decomposition is then taken against ``f*``, and the noise is split
        off: ``noise = mean (y - f*)^2`` and
        ``mse = noise + bias2 + variance / H + (1 - 1/H) * covariance``, every
        part non-negative. ``mse`` is then the expected error against a fresh
        noisy target; the cross term between this sample's noise and the
        ensemble's error, zero in expectation, is left out.
    random_state : int, RandomState instance or None, default=None
        Seed of the resamples.
    n_jobs : int, default=None
        Threads over resamples (the numerical kernels release the GIL).

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        With float entries ``mse``, ``bias2``, ``variance``, ``covariance``
        (0.0 for a single head, whose covariance term has weight zero),
        ``noise`` (only with ``f_true``), and int entries ``n_heads``,
        ``n_resamples`` and ``n_points`` (points left out at least once).

    References
    ----------
    .. [1] N. Ueda and R. Nakano, "Generalization error of ensemble
       estimators", ICNN 1996.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import MultiHeadNWRegressor
    >>> from nwensemble.diagnostics import bvc_decomposition
    >>> X, y = make_friedman1(n_samples=300, noise=1.0, random_state=0)
    >>> reg = MultiHeadNWRegressor(n_heads=3, head_dim=2, random_state=0).fit(X, y)
    >>> parts = bvc_decomposition(reg, X, y, n_resamples=5, random_state=0)
    >>> H = parts.n_heads
    >>> total = parts.bias2 + parts.variance / H + (1 - 1 / H) * parts.covariance
    >>> bool(abs(total - parts.mse) <= 1e-9 * parts.mse)
    True
    """
    check_is_fitted(estimator)
    predictor = estimator.predictor_
    # The rows projected (and validated) by the estimator, computed where
    # the model computes.
    Z = predictor.to_model(estimator.transform(X))
    xp, _ = namespace_of(Z)
    n = Z.shape[0]
    Y = _targets(y, n, Z, "y", xp=xp)
    F = None if f_true is None else _targets(f_true, n, Z, "f_true", xp=xp)
    weights = xp.full((n,), 1.0 / n, dtype=Z.dtype, device=device(Z))
    return predictor.bvc(
        Z,
        Y,
        weights,
        n_resamples=n_resamples,
        rng=check_random_state(random_state),
        n_jobs=n_jobs,
        F=F,
    )


def _targets(y, n, X, name, *, xp):
    y = move_to(y, xp=xp, device=device(X))
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(
            f"{name} must have shape (n_samples,) or (n_samples, n_outputs) with "
            f"n_samples = {n}; got {tuple(y.shape)}."
        )
    y = xp.astype(y, X.dtype)
    if not bool(xp.all(xp.isfinite(y))):
        raise ValueError(f"{name} contains NaN or infinity.")
    return xp.reshape(y, (n, -1))
