"""Multi-head attention as an ensemble of Nadaraya-Watson estimators."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from nwensemble._docstrings import fill_doc
from nwensemble._fit.config import progress
from nwensemble._fit.diversity import check_diversity
from nwensemble._regressor_base import BaseNWRegressor
from nwensemble._shared.backend import device, namespace_of, to_numpy
from nwensemble._shared.scaling import power_of_two_scale
from nwensemble.diagnostics import (
    head_diversity_index,
    principal_angles,
    subspace_similarity,
)

# The decomposition in fit resamples at most this many training rows: its
# cost grows with the square of the rows, and its averages settle long before.
_BVC_MAX_ROWS = 2000


# The parameters of several heads, shared by the regressor and the classifier.
MULTI_HEAD_CONSTRAINTS = {
    "n_heads": [Interval(Integral, 1, None, closed="left")],
    "n_members": [Interval(Integral, 1, None, closed="left")],
    "diversity": [Interval(Real, -1, None, closed="left"), StrOptions({"auto"})],
    "head_weights": [StrOptions({"uniform", "optimal"})],
    "bvc_resamples": [Interval(Integral, 0, None, closed="left")],
    "n_jobs": [Integral, None],
}


class MultiHeadMixin:
    """How many heads a multi-head estimator fits, how it weighs them and
    the diagnostics of their diversity (``hdi_``, the decomposition), for
    the regressor and the classifier alike."""

    def _fit_n_heads(self):
        return self.n_heads

    def _fit_n_members(self):
        return self.n_members

    def _fit_diversity(self):
        check_diversity(self.diversity, self.n_heads)
        return self.diversity

    def _head_weights(self, fitted):
        if self.head_weights == "optimal":
            return _optimal_head_weights(fitted.loo.residuals, fitted.loo.sw).tolist()
        n_heads = self.n_heads * self.n_members
        return np.full(n_heads, 1.0 / n_heads).tolist()

    def _set_diagnostics(self, fitted):
        keys, W_std = self.predictor_.keys, fitted.W_std
        xp, dev = namespace_of(keys.Y)
        dtype = keys.Y.dtype
        alpha = self.predictor_.combination.head_weights
        self.head_weights_ = xp.asarray(alpha, dtype=dtype, device=dev)
        self.subspace_similarity_ = xp.asarray(
            subspace_similarity(W_std), dtype=dtype, device=dev
        )
        self.principal_angles_ = xp.asarray(
            principal_angles(W_std), dtype=dtype, device=dev
        )
        self.hdi_ = head_diversity_index(W_std)
        self.diversity_ = fitted.solver.diversity
        self.head_correlation_ = _mean_residual_correlation(
            fitted.loo.residuals, fitted.loo.sw
        )
        self.bvc_decomposition_ = None
        if self.bvc_resamples > 0:
            start = time.perf_counter()
            rng = check_random_state(self.random_state)
            self.bvc_decomposition_ = self._training_bvc(keys, rng=rng)
            progress(
                type(self).__name__,
                self.verbose,
                "bias-variance-covariance decomposition",
                start,
            )

    def _training_bvc(self, keys, *, rng):
        """The decomposition on (at most ``_BVC_MAX_ROWS``) training rows."""
        xp, Z = keys.xp, keys.Z
        sw = to_numpy(xp.exp(keys.log_sw)).astype(np.float64)
        positive = np.flatnonzero(sw > 0)
        rows = positive
        if positive.shape[0] > _BVC_MAX_ROWS:
            rows = np.sort(rng.choice(positive, size=_BVC_MAX_ROWS, replace=False))
        idx = xp.asarray(rows, device=device(Z))
        weights = xp.asarray(sw[rows] / sw[rows].sum(), dtype=Z.dtype, device=device(Z))
        return self.predictor_.bvc(
            xp.take(Z, idx, axis=0),
            xp.take(keys.Y, idx, axis=0),
            weights,
            n_resamples=self.bvc_resamples,
            rng=rng,
            n_jobs=self.n_jobs,
        )


@fill_doc
class MultiHeadNWRegressor(MultiHeadMixin, BaseNWRegressor):
    """Multi-head attention regression: an ensemble of Nadaraya-Watson heads.

    Each head ``h`` is a Nadaraya-Watson estimator (single-head softmax
    attention) in its own learned subspace, ``f_h(x) = sum_i softmax_i(
    -||W_h^T (x - x_i)||^2 / 2) y_i``, and the prediction is their weighted
    average ``f(x) = sum_h alpha_h f_h(x)``. The projections ``W_h`` are learned
    jointly by minimising the exact leave-one-out MSE of the uniform ensemble
    less ``diversity`` times the heads' ambiguity (their spread around the
    ensemble's prediction):

    ``loss = sum_i sw_i [(f_{-i}(x_i) - y_i)^2
    - diversity / H sum_h (f_{h,-i}(x_i) - f_{-i}(x_i))^2] / var(y)``.

    Averaging heads whose errors are decorrelated lowers the ensemble's
    variance; ``hdi_``, ``head_correlation_`` and ``bvc_decomposition_``
    measure how diverse a fit's heads are and what that bought.

    Read more in the :ref:`User Guide <multi_head>`.

    Parameters
    ----------
    n_heads : int, default=4
        Number of heads. ``n_heads=1`` is :class:`NWAttentionRegressor` (the
        same predictions for the same ``random_state``).

    head_dim : int, default=None
        Dimension of each head's subspace. ``None`` follows the allocation rule
        of :class:`HeadAllocator`: ``floor(log(n_samples / 10))`` within 1 and
        ``n_features`` (all features for ``n_heads=1``).

    %(kernel)s

    %(categorical_features)s

    %(multi_head_ensemble)s

    %(multi_head_init)s

    %(optimisation)s

    %(input)s

    %(local_fit)s

    %(feature_slopes)s

    %(run)s

    random_state : int, RandomState instance or None, default=None
        Seed of the initial directions, the subsamples and the resamples.

    %(verbose)s

    Attributes
    ----------
    %(multi_head_attributes)s

    %(table_attributes)s

    %(regression_attributes)s

    %(fit_attributes)s

    See Also
    --------
    NWAttentionRegressor : The single-head estimator.
    nwensemble.diagnostics.bvc_decomposition : The decomposition on any data.

    Notes
    -----
    One loss evaluation costs ``n_heads`` times that of one head and holds
    ``n_heads`` (n, n) arrays (the backward pass needs every head's
    attention). Prediction is chunked over query rows.

    References
    ----------
    .. [1] E. Fokoue, "Multi-Head Attention as Ensemble Nadaraya-Watson
       Estimation: Variance Reduction, Decorrelation, and Optimal Head
       Diversity", arXiv:2605.20271.
    .. [2] N. Ueda and R. Nakano, "Generalization error of ensemble
       estimators", ICNN 1996.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import MultiHeadNWRegressor
    >>> X, y = make_friedman1(n_samples=300, noise=0.5, random_state=0)
    >>> reg = MultiHeadNWRegressor(n_heads=3, head_dim=2, random_state=0).fit(X, y)
    >>> reg.components_.shape
    (3, 2, 10)
    >>> bool(0 <= reg.hdi_ <= 1)
    True
    >>> y_pred, y_std = reg.predict(X[:2], return_std=True)
    >>> y_std.shape
    (2,)
    """

    _parameter_constraints: dict = {
        **BaseNWRegressor._parameter_constraints,
        **MULTI_HEAD_CONSTRAINTS,
    }

    def __init__(
        self,
        n_heads=4,
        *,
        head_dim=None,
        kernel="softmax",
        categorical_features="from_dtype",
        n_members=1,
        diversity=0.0,
        head_weights="uniform",
        bvc_resamples=10,
        n_jobs=None,
        init="auto",
        max_iter=200,
        tol=1e-5,
        solver="auto",
        batch_size="auto",
        early_stopping="auto",
        validation_fraction="auto",
        n_iter_no_change=10,
        standardize="power",
        duplicate_weight="auto",
        local_fit="auto",
        feature_slopes=False,
        warm_start=False,
        callback=None,
        device="auto",
        random_state=None,
        verbose=0,
    ):
        super().__init__(
            head_dim=head_dim,
            kernel=kernel,
            categorical_features=categorical_features,
            init=init,
            max_iter=max_iter,
            tol=tol,
            solver=solver,
            batch_size=batch_size,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            standardize=standardize,
            duplicate_weight=duplicate_weight,
            local_fit=local_fit,
            feature_slopes=feature_slopes,
            warm_start=warm_start,
            callback=callback,
            device=device,
            random_state=random_state,
            verbose=verbose,
        )
        self.n_heads = n_heads
        self.n_members = n_members
        self.diversity = diversity
        self.head_weights = head_weights
        self.bvc_resamples = bvc_resamples
        self.n_jobs = n_jobs


def _optimal_head_weights(residuals, sw):
    """Simplex projection of ``C^{-1} 1 / (1^T C^{-1} 1)``, ``C`` the weighted
    second moments of the heads' residuals (n_heads, n, t)."""
    H = residuals.shape[0]
    R = residuals.reshape(H, -1) / power_of_two_scale(residuals)
    w = np.repeat(sw, residuals.shape[2])
    C = (R * w) @ R.T
    # The pseudo-inverse gives identical heads equal weights instead of failing.
    raw = np.linalg.pinv(C, rcond=1e-10, hermitian=True) @ np.ones(H)
    if not np.all(np.isfinite(raw)) or raw.sum() <= 0:
        return np.full(H, 1.0 / H)
    return _project_to_simplex(raw / raw.sum())


def _project_to_simplex(v):
    """Euclidean projection of ``v`` onto ``{a : a >= 0, sum(a) = 1}``."""
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    k = np.arange(1, v.shape[0] + 1)
    rho = np.flatnonzero(u - cumulative / k > 0)[-1]
    return np.maximum(v - cumulative[rho] / (rho + 1), 0.0)


def _mean_residual_correlation(residuals, sw):
    """Mean over pairs of heads of the weighted correlation of their residuals."""
    H = residuals.shape[0]
    if H < 2:
        return float("nan")
    R = residuals.reshape(H, -1) / power_of_two_scale(residuals)
    w = np.repeat(sw, residuals.shape[2])
    w = w / w.sum()
    Rc = R - (R @ w)[:, None]
    C = (Rc * w) @ Rc.T
    std = np.sqrt(np.diag(C))
    if np.any(std == 0):
        return float("nan")
    corr = C / np.outer(std, std)
    return float(np.mean(corr[np.triu_indices(H, k=1)]))
