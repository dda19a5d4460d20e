"""The bias-variance-covariance moments of a head ensemble over bootstrap
resamples of its keys (the public entry is
``nwensemble.diagnostics.bvc_decomposition``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import Bunch

from nwensemble._shared.attention import log_weights
from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.scaling import power_of_two_scale


def bvc_parts(rows, weights, *, n_resamples, rng, n_jobs=None, F=None):
    """The decomposition for the projected rows and targets of ``rows`` (a
    ``Keys``, whose kernel and heads predict), as a ``Bunch`` (see
    ``bvc_decomposition``).

    ``weights`` (n,) are the rows' sampling weights (zero: never drawn, never
    evaluated). The bootstrap draws ``n_positive`` keys with these weights;
    their multiplicities become key weights of the attention. The heads'
    predictions run in the array's namespace; the small running moments are
    kept on the host.
    """
    if int(n_resamples) < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}.")
    xp, Z, Y, n_heads = rows.xp, rows.Z, rows.Y, rows.n_heads
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
        resample_keys = rows.take(key_idx, log_sw=log_kw)
        preds = resample_keys.passes().head_estimates(
            xp.take(Z, xp.asarray(out, device=device(Z)), axis=0)
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
    S2 = np.zeros((H, n, t))  # sums of their squares
    # Sums of the squared sum over heads: with S2, the sums of the products
    # of different heads, which are all the covariance needs (not each pair).
    SS = np.zeros((n, t))
    SE = np.zeros((n, t))  # sums of squared ensemble errors
    for out, preds in results:
        if preds is None:
            continue
        D = (preds - T[out][None]) / s
        count[out] += 1
        S1[:, out] += D
        S2[:, out] += D * D
        SS[out] += D.sum(axis=0) ** 2
        SE[out] += D.mean(axis=0) ** 2
    seen = count > 0
    if not np.any(seen):
        raise ValueError("No row was left out of any resample; increase n_resamples.")
    c = count[seen][:, None]
    mean = S1[:, seen] / c  # (H, m, t)
    own = S2[:, seen] / c  # each head's mean square
    variance = float(np.mean(own - mean**2))
    if H > 1:
        # Summed over the pairs of different heads: the mean products less
        # the products of the means.
        cross = SS[seen] / c - own.sum(axis=0)
        cross -= mean.sum(axis=0) ** 2 - (mean**2).sum(axis=0)
        covariance = float(np.mean(cross)) / (H * (H - 1))
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
