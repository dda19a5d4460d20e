"""Single-head Nadaraya-Watson attention regressor with a learned projection."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time
import warnings

import numpy as np
from sklearn.base import _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from nwensemble._backend import device, to_numpy
from nwensemble._base import BaseNWRegressor
from nwensemble._nw_math import _log_weights, heldout_loss, loo_loss_and_grad
from nwensemble._optim import EarlyStopping, LBFGSRun

# Coarse-to-fine fitting: above this many rows, L-BFGS first runs on a random
# subsample of this size, then refines on all rows from there.
_COARSE_SIZE = 1024
# Rows used to pick the starting bandwidth.
_SCALE_SEARCH_SIZE = 512
# Candidate inverse bandwidths, in units of 1 / (typical projected spread).
_SCALE_GRID = 2.0 ** np.arange(-2.0, 6.5, 0.5)
# early_stopping="auto" holds out rows from this many positive-weight samples on.
_EARLY_STOPPING_MIN_ROWS = 50
# ... and below this many rows per learned parameter. Measured with 5-fold CV,
# early stopping on against off, full rank (rows per parameter in brackets):
# it lowers RMSE on diabetes (4), auto-mpg (8, 6 %), yacht (9, 0.4 %), energy
# (12, 1.7 %), wine (13, 7 %) and Friedman #1 n=1000 (10, 0.8 %); it costs on
# concrete (16, 0.5 %), Friedman #1 n=2000 (20, 1 %), abalone (42, -0.2 %, a
# gain) and airfoil (60, 5 %).
_EARLY_STOPPING_ROWS_PER_PARAMETER = 20


class NWAttentionRegressor(BaseNWRegressor):
    """Nadaraya-Watson regression as single-head softmax attention.

    The prediction for a query ``x`` is an attention-weighted average of the
    training targets,

    ``f(x) = sum_i softmax_i(-||W^T (x - x_i)||^2 / 2) y_i``,

    which is softmax attention with the query and the keys projected by one
    learned matrix ``W`` (a Gaussian kernel in the learned space; the scale of
    ``W`` is the inverse bandwidth). ``W`` is learned by minimising the exact
    leave-one-out mean squared error (no training row attends to itself) with
    analytic gradients and L-BFGS, as metric learning for kernel regression
    (MLKR) does, but with fewer passes over the n x n scores and a
    coarse-to-fine schedule.

    Parameters
    ----------
    head_dim : int, default=None
        Dimension of the learned space. ``None`` uses ``n_features`` (a
        full-rank metric, as :class:`~sklearn.neighbors.NeighborhoodComponentsAnalysis`
        does with ``n_components=None``).

    init : {'auto', 'pca', 'identity', 'random'} or array-like of shape \
            (head_dim, n_features), default='auto'
        Starting projection. ``'auto'`` is ``'pca'`` when ``head_dim`` is smaller
        than ``n_features`` and ``'identity'`` otherwise. ``'pca'``: the leading
        principal axes of the standardised features; ``'identity'``: the first
        ``head_dim`` standardised features; ``'random'``: Gaussian directions.
        For these, the overall scale (the bandwidth) is then picked from a grid
        by leave-one-out error on a subsample. An array is used as given, in the
        units of ``components_``.

    max_iter : int, default=200
        Maximum number of L-BFGS iterations per stage. ``0`` keeps the initial
        projection: a plain NW estimator with the starting bandwidth.

    tol : float, default=1e-5
        Convergence tolerance on the relative loss decrease and on the projected
        gradient (scipy's ``ftol`` and ``gtol``). The loss is the leave-one-out
        MSE divided by the target variance.

    early_stopping : 'auto' or bool, default='auto'
        Hold out ``validation_fraction`` of the rows as queries that never serve
        as keys during training, and keep the projection with the lowest
        held-out error; stop after ``n_iter_no_change`` iterations without
        improvement. The exact leave-one-out error can still be driven down by
        fitting noise when ``n_features * head_dim`` is large against
        ``n_samples``; the held-out rows catch that. ``'auto'`` enables it when
        there are at least 50 samples with positive weight but fewer than 20
        per learned parameter (``20 * n_features * head_dim``); with more, the
        held-out rows are worth more as training data. The held-out rows are
        keys again in the fitted model.

    validation_fraction : float, default=0.1
        Fraction of the rows held out for early stopping.

    n_iter_no_change : int, default=10
        Patience of early stopping, in iterations.

    standardize : bool, default=True
        Scale every feature to unit (weighted) variance before learning the
        projection. ``components_`` is always reported in the original units.

    warm_start : bool, default=False
        If True and ``fit`` was called before, start from the previous
        ``components_`` (``head_dim`` and ``init`` are then ignored).

    callback : callable, default=None
        Called after every iteration as ``callback(components, n_iter)`` with the
        current projection of shape (head_dim, n_features), in standardised
        units, as a NumPy array.

    random_state : int, RandomState instance or None, default=None
        Seed of the subsamples and of ``init='random'``.

    verbose : int, default=0
        Print the loss and elapsed time at every iteration when positive.

    Attributes
    ----------
    components_ : array of shape (head_dim, n_features)
        The learned projection ``W^T``, in the units of the input features.

    n_iter_ : int
        L-BFGS iterations over all stages.

    n_fev_ : int
        Loss and gradient evaluations over all stages.

    loss_curve_ : list of float
        Loss after every iteration (subsample stage first, then all rows).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X` has
        feature names that are all strings.

    See Also
    --------
    sklearn.neighbors.KNeighborsRegressor : Nearest-neighbour regression.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : Learned metric for classes.

    Notes
    -----
    Cost per loss evaluation: O(n^2 d + n p d) time and two n x n arrays, with
    ``n`` samples, ``p`` features and ``d = head_dim``. Prediction is chunked over
    query rows, so its memory is bounded by scikit-learn's ``working_memory``.

    Fitting with more than 1024 samples first optimises on a random subsample of
    1024 rows, then refines on all rows; ``n_iter_`` counts both stages.

    With ``sample_weight``, a sample's weight scales both its term in the loss and
    its weight as a key in the attention. The leave-one-out objective means
    that a sample repeated twice is not the same as a sample of weight two (the
    copy would be its own neighbour).

    References
    ----------
    .. [1] K. Q. Weinberger and G. Tesauro, "Metric Learning for Kernel
       Regression", AISTATS 2007.
    .. [2] E. Fokoue, "Multi-Head Attention as Ensemble Nadaraya-Watson
       Estimation", arXiv:2605.20271.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import NWAttentionRegressor
    >>> X, y = make_friedman1(n_samples=200, n_features=5, noise=0.1, random_state=0)
    >>> reg = NWAttentionRegressor(head_dim=2, random_state=0).fit(X, y)
    >>> reg.components_.shape
    (2, 5)
    >>> round(reg.score(X, y), 2) > 0.8
    True
    """

    _parameter_constraints: dict = {**BaseNWRegressor._parameter_constraints}

    def __init__(
        self,
        head_dim=None,
        *,
        init="auto",
        max_iter=200,
        tol=1e-5,
        early_stopping="auto",
        validation_fraction=0.1,
        n_iter_no_change=10,
        standardize=True,
        warm_start=False,
        callback=None,
        random_state=None,
        verbose=0,
    ):
        self.head_dim = head_dim
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.standardize = standardize
        self.warm_start = warm_start
        self.callback = callback
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Learn the projection by minimising the leave-one-out MSE.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; at least two must be positive.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        previous = getattr(self, "components_", None) if self.warm_start else None
        xp, dev, X, Y, sw = self._validate_training_data(X, y, sample_weight)
        rng = check_random_state(self.random_state)
        center, scale = self._fit_standardization(X, sw, xp=xp)
        Xs = (X - center) / scale
        Ys = _scaled_targets(Y, sw, xp=xp)
        scale_np = to_numpy(scale).astype(np.float64)

        W0 = _initial_projection(self, previous, Xs, Ys, sw, scale_np, rng=rng, xp=xp)
        start = time.perf_counter()
        W, n_iter, n_fev, curve, result = _fit_projection(
            self, W0, Xs, Ys, sw, rng=rng, xp=xp
        )
        if result is not None and result.status == 1:
            warnings.warn(
                f"{type(self).__name__} stopped after max_iter={self.max_iter} "
                "iterations before the loss converged; increase max_iter or tol.",
                ConvergenceWarning,
            )
        if self.verbose:
            print(
                f"[{type(self).__name__}] fitted in {time.perf_counter() - start:.2f}s"
                f", {n_iter} iterations, {n_fev} evaluations",
                flush=True,
            )

        W_x = xp.asarray(W, dtype=X.dtype, device=dev)
        self.components_ = (W_x / scale[:, None]).T
        self._x_center = center
        self._z_fit = Xs @ W_x
        self._y_fit = Y
        self._log_sw = _log_weights(sw, xp=xp)
        self.n_iter_ = n_iter
        self.n_fev_ = n_fev
        self.loss_curve_ = curve
        return self


def _scaled_targets(Y, sw, *, xp):
    """Centre ``Y`` and divide by its total weighted standard deviation, so the
    loss reads as a fraction of the target variance."""
    Yc = Y - xp.sum(sw[:, None] * Y, axis=0)
    total = float(xp.sum(sw[:, None] * Yc * Yc))
    return Yc / math.sqrt(total) if total > 0 else Yc


def _initial_projection(est, previous, Xs, Ys, sw, scale_np, *, rng, xp):
    """Starting ``W`` (p, d) as a float64 NumPy array, in standardised units."""
    n, p = Xs.shape
    if previous is not None:
        if previous.shape[1] != p:
            raise ValueError(
                f"warm_start=True needs the {previous.shape[1]} features of the "
                f"previous fit; got {p}. Set warm_start=False to start afresh."
            )
        return scale_np[:, None] * to_numpy(previous).astype(np.float64).T
    init = est.init
    if not isinstance(init, str):
        init = np.asarray(to_numpy(init) if hasattr(init, "shape") else init)
        init = init.astype(np.float64)
        d = est.head_dim if est.head_dim is not None else init.shape[0]
        if init.ndim != 2 or init.shape != (d, p):
            raise ValueError(
                f"init must have shape (head_dim, n_features) = ({d}, {p}); "
                f"got {init.shape}."
            )
        return scale_np[:, None] * init.T
    d = p if est.head_dim is None else est.head_dim
    if d > p:
        raise ValueError(
            f"head_dim={d} is larger than n_features = {p}; use head_dim <= n_features."
        )
    if init == "auto":
        init = "pca" if d < p else "identity"
    if init == "identity":
        W = np.eye(p, d)
    elif init == "random":
        W = rng.standard_normal((p, d))
        W /= np.linalg.norm(W, axis=0, keepdims=True)
    else:  # pca
        sw_np = to_numpy(sw).astype(np.float64)
        Xs_np = to_numpy(Xs).astype(np.float64)
        cov = (Xs_np * sw_np[:, None]).T @ Xs_np
        _, vecs = np.linalg.eigh(cov)
        W = vecs[:, ::-1][:, :d].copy()
    return W * _search_scale(W, Xs, Ys, sw, rng=rng, xp=xp)


def _search_scale(W, Xs, Ys, sw, *, rng, xp):
    """Inverse bandwidth for directions ``W`` with the lowest leave-one-out loss.

    Scales are tried on a grid relative to the typical spread of the projected
    rows, on a subsample of at most ``_SCALE_SEARCH_SIZE`` rows.
    """
    Xs, Ys, sw = _subsample(Xs, Ys, sw, _SCALE_SEARCH_SIZE, rng=rng, xp=xp)
    Wx = xp.asarray(W, dtype=Xs.dtype, device=device(Xs))
    Z = Xs @ Wx
    Zc = Z - xp.sum(sw[:, None] * Z, axis=0)
    spread = float(xp.sum(sw[:, None] * Zc * Zc)) / W.shape[1]
    base = 1.0 / math.sqrt(spread) if spread > 0 else 1.0
    return base * _best_scale(Wx * base, Xs, Ys, sw, _SCALE_GRID, xp=xp)


def _best_scale(W, Xs, Ys, sw, grid, *, xp):
    """The factor of ``grid`` that gives ``W`` the lowest leave-one-out loss."""
    workspace = {}
    losses = [
        loo_loss_and_grad(
            W * float(g), Xs, Ys, sw, xp=xp, return_grad=False, workspace=workspace
        )[0]
        for g in grid
    ]
    losses = np.nan_to_num(np.asarray(losses), nan=np.inf)
    return float(grid[int(np.argmin(losses))])


def _subsample(Xs, Ys, sw, size, *, rng, xp):
    """At most ``size`` rows with positive weight, weights renormalised."""
    positive = np.flatnonzero(to_numpy(sw) > 0)
    if positive.shape[0] <= size and positive.shape[0] == Xs.shape[0]:
        return Xs, Ys, sw
    rows = np.sort(
        rng.choice(positive, size=min(size, positive.shape[0]), replace=False)
    )
    idx = xp.asarray(rows, device=device(Xs))
    sw_sub = xp.take(sw, idx, axis=0)
    return xp.take(Xs, idx, axis=0), xp.take(Ys, idx, axis=0), sw_sub / xp.sum(sw_sub)


def _split_validation(est, Xs, Ys, sw, n_params, *, rng, xp):
    """Split off the early-stopping rows; return ``(train, val)`` or ``(all, None)``.

    Each part is ``(X, Y, sw)`` with weights renormalised to sum to one.
    """
    positive = np.flatnonzero(to_numpy(sw) > 0)
    use = est.early_stopping
    if use == "auto":
        n_pos = positive.shape[0]
        use = (
            _EARLY_STOPPING_MIN_ROWS
            <= n_pos
            < _EARLY_STOPPING_ROWS_PER_PARAMETER * n_params
        )
    if not use:
        return (Xs, Ys, sw), None
    n_val = int(math.ceil(est.validation_fraction * positive.shape[0]))
    if n_val < 1 or positive.shape[0] - n_val < 2:
        raise ValueError(
            f"early_stopping=True with validation_fraction={est.validation_fraction}"
            f" leaves {positive.shape[0] - n_val} training and {n_val} validation "
            "rows; need at least 2 and 1. Use more samples or early_stopping=False."
        )
    val_rows = rng.choice(positive, size=n_val, replace=False)
    mask = np.ones(Xs.shape[0], dtype=bool)
    mask[val_rows] = False
    parts = []
    for rows in (np.flatnonzero(mask), np.sort(val_rows)):
        idx = xp.asarray(rows, device=device(Xs))
        w = xp.take(sw, idx, axis=0)
        parts.append(
            (xp.take(Xs, idx, axis=0), xp.take(Ys, idx, axis=0), w / xp.sum(w))
        )
    return parts[0], parts[1]


def _fit_projection(est, W0, Xs, Ys, sw, *, rng, xp):
    """Coarse-to-fine L-BFGS from ``W0``, early-stopped on held-out rows.

    Returns ``W, n_iter, n_fev, loss_curve, last_result`` (``last_result`` is
    None when ``max_iter == 0``).
    """
    p, d = W0.shape
    if est.max_iter == 0:
        return W0, 0, 0, [], None

    def as_W(theta, like):
        return xp.asarray(theta.reshape(p, d), dtype=like.dtype, device=device(like))

    def callback(theta, n_iter):
        est.callback(theta.reshape(p, d).T, n_iter)

    train, val = _split_validation(est, Xs, Ys, sw, p * d, rng=rng, xp=xp)
    # One monitor for all stages: the held-out rows judge every iterate, and
    # each stage starts from the best one so far.
    monitor = None
    if val is not None:
        monitor = EarlyStopping(
            lambda theta: heldout_loss(as_W(theta, Xs), *val, *train, xp=xp),
            patience=est.n_iter_no_change,
            tol=est.tol,
        )
        monitor.start(W0.ravel())

    stages = []
    if train[0].shape[0] > 2 * _COARSE_SIZE:
        stages.append(("subsample ", _subsample(*train, _COARSE_SIZE, rng=rng, xp=xp)))
    stages.append(("", train))

    W, n_iter, n_fev, curve, result = W0, 0, 0, [], None
    for label, (Xst, Yst, swt) in stages:
        workspace = {}

        def fun(theta, Xst=Xst, Yst=Yst, swt=swt, workspace=workspace):
            loss, grad = loo_loss_and_grad(
                as_W(theta, Xst), Xst, Yst, swt, xp=xp, workspace=workspace
            )
            return loss, to_numpy(grad)

        run = LBFGSRun(
            fun,
            name=type(est).__name__,
            verbose=est.verbose,
            callback=None if est.callback is None else callback,
            monitor=monitor,
            offset=n_iter,
            stage=label,
        )
        if monitor is not None:
            monitor.reset_patience()
        result = run.run(W, max_iter=est.max_iter, tol=est.tol, n_rows=Xst.shape[0])
        W = result.x if monitor is None else monitor.best_theta
        W = W.reshape(p, d)
        n_iter += result.nit
        n_fev += result.nfev
        curve += run.loss_curve
    return W, n_iter, n_fev, curve, result
