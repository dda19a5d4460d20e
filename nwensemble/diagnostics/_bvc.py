"""Bias-variance-covariance decomposition of a head ensemble over resamples."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted

from nwensemble._attention import log_weights
from nwensemble._backend import device, move_to, namespace_of, to_numpy
from nwensemble._nw_predict import nw_head_predictions
from nwensemble._scaling import power_of_two_scale


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
    return bvc_parts(
        Z,
        Y,
        weights,
        n_heads=predictor.n_heads,
        n_resamples=n_resamples,
        rng=check_random_state(random_state),
        n_jobs=n_jobs,
        F=F,
        kernel=predictor.kernel,
        xp=xp,
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


def bvc_parts(
    Z,
    Y,
    weights,
    *,
    n_heads,
    n_resamples,
    rng,
    xp,
    n_jobs=None,
    F=None,
    kernel="softmax",
):
    """The decomposition for projected rows ``Z`` (n, H d) and targets ``Y``.

    ``weights`` (n,) are the rows' sampling weights (zero: never drawn, never
    evaluated). The bootstrap draws ``n_positive`` keys with these weights;
    their multiplicities become key weights of the attention. The heads'
    predictions run in the array's namespace; the small running moments are
    kept on the host.
    """
    if int(n_resamples) < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}.")
    w = to_numpy(weights).astype(np.float64)
    positive = np.flatnonzero(w > 0)
    if positive.shape[0] < 2:
        raise ValueError("The decomposition needs at least 2 rows.")
    prob = w[positive] / w[positive].sum()
    n = Z.shape[0]
    # All draws first, so that the result does not depend on n_jobs.
    draws = np.zeros((int(n_resamples), n))
    for r in range(int(n_resamples)):
        draws[r, positive] = rng.multinomial(positive.shape[0], prob)

    def resample(counts):
        keys = np.flatnonzero(counts > 0)
        out = np.setdiff1d(positive, keys)
        if out.shape[0] == 0:
            return out, None
        key_idx = xp.asarray(keys, device=device(Z))
        log_kw = log_weights(
            xp.asarray(counts[keys], dtype=Z.dtype, device=device(Z)), xp=xp
        )
        preds = nw_head_predictions(
            xp.take(Z, xp.asarray(out, device=device(Z)), axis=0),
            xp.take(Z, key_idx, axis=0),
            xp.take(Y, key_idx, axis=0),
            log_kw,
            xp=xp,
            n_heads=n_heads,
            kernel=kernel,
        )
        return out, to_numpy(preds).astype(np.float64)

    results = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(resample)(counts) for counts in draws
    )
    target = Y if F is None else F
    T = to_numpy(target).astype(np.float64)
    # Moments of errors / s, scaled back at the end: exact, and free of
    # overflow and underflow at any scale of the target.
    s = power_of_two_scale(T)
    t = T.shape[1]
    H = n_heads
    count = np.zeros(n)
    S1 = np.zeros((H, n, t))  # sums of f_h - target
    S2 = np.zeros((H, H, n, t))  # sums of products of those
    SE = np.zeros((n, t))  # sums of squared ensemble errors
    for out, preds in results:
        if preds is None:
            continue
        D = (preds - T[out][None]) / s
        count[out] += 1
        S1[:, out] += D
        S2[:, :, out] += D[:, None] * D[None, :]
        SE[out] += D.mean(axis=0) ** 2
    seen = count > 0
    if not np.any(seen):
        raise ValueError("No row was left out of any resample; increase n_resamples.")
    c = count[seen][:, None]
    mean = S1[:, seen] / c  # (H, m, t)
    cov = S2[:, :, seen] / c - mean[:, None] * mean[None, :]
    variance = float(np.mean(np.einsum("hhmt->hmt", cov)))
    if H > 1:
        covariance = float(np.mean(cov[~np.eye(H, dtype=bool)]))
    else:
        covariance = 0.0
    parts = {
        "mse": float(np.mean(SE[seen] / c)),
        "bias2": float(np.mean(mean.mean(axis=0) ** 2)),
        "variance": variance,
        "covariance": covariance,
    }
    if F is not None:
        R = (to_numpy(Y).astype(np.float64)[seen] - T[seen]) / s
        parts["noise"] = float(np.mean(R**2))
        parts["mse"] += parts["noise"]
    _warn_if_unrepresentable(parts, s)
    result = Bunch(
        **{key: value * s * s for key, value in parts.items()},
        n_heads=H,
        n_resamples=int(n_resamples),
        n_points=int(seen.sum()),
    )
    return result


def _warn_if_unrepresentable(parts, s):
    """Warn when parts (computed in units of ``s``) overflow or underflow
    float64 in squared target units."""
    scaled = [abs(v) * s * s for v in parts.values() if v != 0]
    if any(math.isinf(v) or v == 0 for v in scaled):
        warnings.warn(
            "The bias-variance-covariance parts are in squared target units, "
            f"which float64 cannot hold at this target scale (|y| near {s:.3g}): "
            "some are infinite or zero. Rescale y to read them.",
            RuntimeWarning,
            stacklevel=3,
        )
