"""Multi-head attention as an ensemble of Nadaraya-Watson estimators."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from nwensemble._atomic import atomic_fit
from nwensemble._backend import device, namespace_of, to_numpy
from nwensemble._base import BaseNWRegressor
from nwensemble._optim import fit_threads
from nwensemble._scaling import power_of_two_scale
from nwensemble.diagnostics._bvc import bvc_parts
from nwensemble.diagnostics._subspaces import (
    head_diversity_index,
    principal_angles,
    subspace_similarity,
)

# The decomposition in fit resamples at most this many training rows: its
# cost grows with the square of the rows, and its averages settle long before.
_BVC_MAX_ROWS = 2000


class MultiHeadNWRegressor(BaseNWRegressor):
    """Multi-head attention regression: an ensemble of Nadaraya-Watson heads.

    Each head ``h`` is a Nadaraya-Watson estimator (single-head softmax
    attention) in its own learned subspace, ``f_h(x) = sum_i softmax_i(
    -||W_h^T (x - x_i)||^2 / 2) y_i``, and the prediction is their weighted
    average ``f(x) = sum_h alpha_h f_h(x)``. The projections ``W_h`` are learned
    jointly by minimising the exact leave-one-out MSE of the uniform ensemble
    plus a diversity term that pushes the heads' subspaces apart:

    ``loss = sum_i sw_i (f_{-i}(x_i) - y_i)^2 / var(y)
    + diversity * sum_{h<g} ||U_h^T U_g||_F^2``

    with ``U_h`` an orthonormal basis of ``range(W_h)``. Averaging heads whose
    errors are decorrelated lowers the ensemble's variance; ``hdi_`` and
    ``bvc_decomposition_`` measure how much of that a fit achieved.

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

    kernel : {'softmax', 'epanechnikov', 'biweight', 'triweight'}, \
            default='softmax'
        ``'softmax'``: Gaussian weights ``exp(s)`` with the score
        ``s = -||W^T (x - x_i)||^2 / 2``, all positive. The compact kernels
        give ``(1 + s / k)_+^k`` with ``k`` = 1, 2, 3: exactly zero beyond the
        radius ``sqrt(2 k)`` in the learned space (sparse attention; softmax
        is the limit ``k -> infinity``). A query with no training row within
        the radius predicts its nearest row's target. Compact kernels predict
        NumPy input through a radius search (cost grows with the rows in the
        support, not with ``n_samples``) and ``attention_weights`` returns a
        ``scipy.sparse`` array. See the user guide's "Kernels" page.

    diversity : float, default=0.0
        Weight ``lambda`` of the diversity penalty, relative to the leave-one-out
        loss (which is a fraction of the target variance). ``0`` trains the
        heads on the ensemble error alone, which already spreads them apart as
        far as that lowers the error. The penalty depends only on the heads'
        subspaces, not on their scales (bandwidths). Measured on Friedman #1
        (see the example "Test error against head diversity"), values above
        about 0.003 raise the HDI but also the test error: the heads gain more
        bias than the ensemble saves in variance.

    head_weights : {'uniform', 'optimal'}, default='uniform'
        How predictions combine the heads. ``'uniform'``: the plain average.
        ``'optimal'``: ``alpha`` proportional to ``C^{-1} 1`` projected onto the
        simplex, with ``C`` the second-moment matrix of the heads'
        leave-one-out residuals on the training rows (the weights of least
        leave-one-out error). The projections are learned with uniform
        weights either way.

    bvc_resamples : int, default=10
        Bootstrap resamples for ``bvc_decomposition_``, computed at the end of
        ``fit`` on at most 2000 training rows. ``0`` skips it.

    n_jobs : int, default=None
        Threads for the resamples of the decomposition (the numerical kernels
        release the GIL). ``None`` means 1 unless in a
        :obj:`joblib.parallel_backend` context; ``-1`` means all processors.

    init : {'auto', 'pca', 'identity', 'random'} or array-like of shape \
            (n_heads, head_dim, n_features), default='auto'
        Starting projections. Each string option gives the heads blocks of
        directions, disjoint while ``n_heads * head_dim <= n_features`` and
        overlapping beyond: ``'random'``, blocks of random orthogonal
        matrices; ``'pca'``, of the principal axes; ``'identity'``, of the
        standardised features (beyond ``n_features``, head ``h`` takes
        ``head_dim`` consecutive ones, cyclically, from
        ``h * n_features // n_heads``, so no two heads repeat a block unless
        ``head_dim = n_features``). ``'auto'`` is
        ``'random'`` for several heads and as in :class:`NWAttentionRegressor`
        for one. Each head's bandwidth is then picked from a grid by its
        leave-one-out error (with ``'identity'``, each feature's scale too).
        ``'identity'`` did better on low-dimensional tables whose features
        all matter, worse where many features are noise (see the user
        guide's multi-head page). An array is used as given, in the
        units of ``components_``.

    max_iter : int, default=200
        Maximum number of L-BFGS iterations per stage. ``0`` keeps the initial
        projections.

    tol : float, default=1e-5
        Convergence tolerance on the relative loss decrease and on the
        projected gradient.

    solver : {'auto', 'lbfgs', 'adam'}, default='auto'
        ``'lbfgs'``: full-batch leave-one-out loss with L-BFGS (O(n^2) per
        evaluation; coarse-to-fine for one head, on all rows for several).
        ``'adam'``: Adam on minibatches of ``batch_size`` rows that attend to
        each other (time linear in n per epoch; ``max_iter`` counts epochs),
        early-stopped on held-out rows, whose error against all training rows
        also sets a final factor on the bandwidth. ``'auto'``: ``'adam'``
        above 4096 rows for several heads (beyond that it matches L-BFGS's
        time at a lower error), above 10 000 for one.

    batch_size : int or 'auto', default='auto'
        Rows per minibatch of ``solver='adam'``; ``'auto'`` is
        ``min(1024, n_samples)``.

    early_stopping : 'auto' or bool, default='auto'
        Hold out ``validation_fraction`` of the rows and keep the projections
        with the lowest held-out error of the ensemble; see
        :class:`NWAttentionRegressor`. ``'auto'`` counts
        ``n_features * n_heads * head_dim`` learned parameters.

    validation_fraction : float, default=0.1
        Fraction of the rows held out for early stopping.

    n_iter_no_change : int, default=10
        Patience of early stopping, in iterations.

    standardize : 'power' or bool, default='power'
        The feature map the heads' projection works in. ``True``: every feature centred
        and scaled to unit (weighted) variance; ``components_`` is then
        reported in the input's units. ``'power'``: scaled, then warped by a
        per-feature Yeo-Johnson power transform whose exponent is chosen by
        likelihood, then scaled again, so that skewed features (ages,
        frequencies, counts) do not squeeze most rows into a corner of the
        kernel; ``components_`` is then in the units of the warped,
        standardised features. ``False``: centred only. Measured with 5-fold
        CV on six real sets, ``'power'`` lowered the RMSE of one head by 20 %
        on average against ``True`` (``benchmarks/tabular.py``).

    duplicate_weight : 'auto' or float in [0, 1], default='auto'
        How much a query that repeats training rows exactly (all features
        equal) draws on their mean target: its prediction is ``(1 - rho) *
        f(x) + rho * mean(y of the copies)``, with ``f`` the NW estimate and
        ``rho`` this weight; other queries are not affected. ``'auto'`` learns
        ``rho`` from the training rows that have copies, by the leave-one-out
        error of that blend (0 when no training rows repeat); copies with
        equal targets (duplicated records) push it to 1, noisy replicates
        lower. ``0`` turns the blend off. The heads, ``hdi_`` and
        ``bvc_decomposition_`` describe the NW estimate without the blend.
        With the blend on, the projection is learned on the rows with their
        copies merged (leave-one-out leaves a record out with its copies).
        Measured with 5-fold CV, 0 against 'auto': red wine (29 % of rows
        repeated) 0.631 -> 0.583, concrete (5 %, noisy replicates) 6.755 ->
        6.476.

    warm_start : bool, default=False
        If True and ``fit`` was called before, start from the previous
        ``components_``.

    callback : callable, default=None
        Called after every iteration as ``callback(components, n_iter)`` with the
        current projections of shape (n_heads, head_dim, n_features), in
        standardised units, as a NumPy array.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where ``fit`` and ``predict`` compute. ``'auto'`` follows the input:
        NumPy on the host, CuPy arrays on their GPU, other array-API arrays in
        their namespace (with scikit-learn's array-API dispatch on), and the
        fitted arrays live there too. ``'cpu'``: NumPy on the host whatever
        the input. ``'cuda'``: CuPy on the current GPU (an error says so where
        CuPy or a GPU is missing); NumPy input is copied to the GPU. With
        ``'cpu'`` or ``'cuda'``, results (``predict``, ``transform``,
        ``attention_weights``) come back in the input's namespace and device:
        NumPy input gets NumPy predictions.

    random_state : int, RandomState instance or None, default=None
        Seed of the initial directions, the subsamples and the resamples.

    verbose : int, default=0
        Print the loss and elapsed time at every iteration when positive.

    Attributes
    ----------
    components_ : array of shape (n_heads, head_dim, n_features)
        The learned projections ``W_h^T``, applied to the feature map of
        ``standardize`` (in the input's units unless it is ``'power'``).

    head_weights_ : array of shape (n_heads,)
        The weights ``alpha`` that combine the heads' predictions.

    hdi_ : float
        Head Diversity Index of the learned subspaces (see
        :func:`~nwensemble.diagnostics.head_diversity_index`), in [0, 1]; NaN
        for one head. Like the diversity penalty, it is measured in the
        standardised feature space where the heads are learned (with
        ``standardize=False`` it equals ``head_diversity_index(components_)``).

    subspace_similarity_ : array of shape (n_heads, n_heads)
        ``||U_h^T U_g||_F^2 / head_dim`` for every pair of heads, in the same
        space.

    principal_angles_ : array of shape (n_heads, n_heads, head_dim)
        Principal angles (radians) between every pair of head subspaces.

    head_correlation_ : float
        Mean pairwise correlation of the heads' leave-one-out residuals on the
        training rows (an output-side diversity measure); NaN for one head.

    bvc_decomposition_ : :class:`~sklearn.utils.Bunch` or None
        ``mse``, ``bias2``, ``variance``, ``covariance``, ``n_heads`` (and
        ``n_resamples``, ``n_points``) of
        :func:`~nwensemble.diagnostics.bvc_decomposition` on the training rows
        with the learned projections held fixed, so that
        ``mse = bias2 + variance / n_heads + (1 - 1 / n_heads) * covariance``.
        None when ``bvc_resamples=0``.

    duplicate_weight_ : float
        The blend's weight ``rho`` (see ``duplicate_weight``): learned with
        ``'auto'``, else the parameter.

    n_support_fallback_ : array of int, shape (n_heads,)
        Training rows (of those used for the leave-one-out statistics: all
        up to 2048, else a random 2048) whose leave-one-out estimate had no
        other row inside the compact kernel's support and fell back to the
        nearest row, per head. Always 0 for ``kernel='softmax'``.

    n_iter_ : int
        L-BFGS iterations over all stages.

    n_fev_ : int
        Loss and gradient evaluations over all stages.

    loss_curve_ : list of float
        Objective (leave-one-out loss plus diversity term) after every
        iteration.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X` has
        feature names that are all strings.

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
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "diversity": [Interval(Real, 0, None, closed="left")],
        "head_weights": [StrOptions({"uniform", "optimal"})],
        "bvc_resamples": [Interval(Integral, 0, None, closed="left")],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        n_heads=4,
        *,
        head_dim=None,
        kernel="softmax",
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
        validation_fraction=0.1,
        n_iter_no_change=10,
        standardize="power",
        duplicate_weight="auto",
        warm_start=False,
        callback=None,
        device="auto",
        random_state=None,
        verbose=0,
    ):
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.kernel = kernel
        self.diversity = diversity
        self.head_weights = head_weights
        self.bvc_resamples = bvc_resamples
        self.n_jobs = n_jobs
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.standardize = standardize
        self.duplicate_weight = duplicate_weight
        self.warm_start = warm_start
        self.callback = callback
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    @fit_threads()
    def fit(self, X, y, sample_weight=None):
        """Learn the heads' projections jointly on the ensemble's leave-one-out MSE.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; at least two must be positive. A row of
            weight zero takes no part in the fit, as if removed (up to the
            rounding of sums that include it).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        H = self.n_heads
        residuals, sw, W_std = self._fit_heads(
            X, y, sample_weight, n_heads=H, diversity=self.diversity
        )
        xp, dev = namespace_of(self._y_fit)
        dtype = self._y_fit.dtype
        if self.head_weights == "optimal":
            alpha = _optimal_head_weights(residuals, sw)
        else:
            alpha = np.full(H, 1.0 / H)
        self._set_head_combination(residuals, sw, alpha.tolist())
        self.head_weights_ = xp.asarray(alpha, dtype=dtype, device=dev)
        self.subspace_similarity_ = xp.asarray(
            subspace_similarity(W_std), dtype=dtype, device=dev
        )
        self.principal_angles_ = xp.asarray(
            principal_angles(W_std), dtype=dtype, device=dev
        )
        self.hdi_ = head_diversity_index(W_std)
        self.head_correlation_ = _mean_residual_correlation(residuals, sw)
        self.bvc_decomposition_ = None
        if self.bvc_resamples > 0:
            start = time.perf_counter()
            rng = check_random_state(self.random_state)
            weights = to_numpy(xp.exp(self._log_sw)).astype(np.float64)
            self.bvc_decomposition_ = self._training_bvc(weights, rng=rng, xp=xp)
            self._progress("bias-variance-covariance decomposition", start)
        return self

    def _training_bvc(self, sw, *, rng, xp):
        """The decomposition on (at most ``_BVC_MAX_ROWS``) training rows."""
        positive = np.flatnonzero(sw > 0)
        rows = positive
        if positive.shape[0] > _BVC_MAX_ROWS:
            rows = np.sort(rng.choice(positive, size=_BVC_MAX_ROWS, replace=False))
        idx = xp.asarray(rows, device=device(self._z_fit))
        weights = xp.asarray(
            sw[rows] / sw[rows].sum(),
            dtype=self._z_fit.dtype,
            device=device(self._z_fit),
        )
        return bvc_parts(
            xp.take(self._z_fit, idx, axis=0),
            xp.take(self._y_fit, idx, axis=0),
            weights,
            n_heads=self.n_heads,
            n_resamples=self.bvc_resamples,
            rng=rng,
            n_jobs=self.n_jobs,
            kernel=self._kernel,
            xp=xp,
        )


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
