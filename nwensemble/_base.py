"""Shared machinery of the Nadaraya-Watson attention regressors."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time
import warnings
from numbers import Integral, Real
from typing import NamedTuple, Optional

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from nwensemble._atomic import atomic_fit
from nwensemble._backend import (
    compute_namespace,
    get_namespace,
    like_input,
    move_to,
    same_namespace_or_raise,
    to_host,
    to_numpy,
    where,
)
from nwensemble._diversity import solve_with_diversity
from nwensemble._docstrings import fill_doc
from nwensemble._duplicates import DuplicateIndex
from nwensemble._features import FeatureMap
from nwensemble._fitting import FitConfig, fit_lbfgs, scaled_targets
from nwensemble._init_projection import initial_projection
from nwensemble._intervals import interval_alpha
from nwensemble._kernels import KERNELS, get_kernel
from nwensemble._loo_statistics import combine_heads, original_rows, sample_loo_rows
from nwensemble._optim import fit_threads
from nwensemble._predictor import NWPredictor
from nwensemble._stochastic import fit_adam
from nwensemble._validation import as_float, validate_fit_data

# solver="auto" trains with Adam on minibatches above this many rows: full
# leave-one-out L-BFGS costs O(n^2) per evaluation, and beyond this one head
# reaches the same accuracy sooner with Adam (benchmarks/bench_fit_time.py,
# section solver).
AUTO_ADAM_ROWS = 10_000
# Several heads take Adam from here on: full-batch L-BFGS over all rows
# (their only schedule) then takes longer than Adam and ends less accurate
# (same benchmark).
AUTO_ADAM_ROWS_HEADS = 4096
# Leave-one-out statistics after fit use at most this many query rows.
LOO_STATS_ROWS = 2048


class FittedHeads(NamedTuple):
    """What ``_fit_heads`` leaves for the statistics and diagnostics, all
    float64 NumPy: the heads' leave-one-out residuals (n_heads, m, t) on
    training rows ``rows`` (an index array; None for all rows), those rows'
    sample weights ``sw`` (m,), the heads' projections ``W_std`` in the
    standardised units they are learned in, the training rows held out
    of the projection's fit (None when it used every row), and the weight of
    the heads' ambiguity they were fitted with."""

    residuals: np.ndarray
    sw: np.ndarray
    rows: Optional[np.ndarray]
    W_std: np.ndarray
    heldout: Optional[np.ndarray]
    diversity: float = 0.0


class BaseNWRegressor(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, BaseEstimator
):
    """Base class for NW attention regressors; not for direct use.

    Holds the parameters every estimator shares, input validation, ``fit``
    (feature map, heads, leave-one-out statistics) and the predict-side
    methods, which validate their input and ask ``predictor_``. Subclasses
    say how many heads to fit (``_fit_n_heads``) and what to derive from the
    heads' leave-one-out residuals (``_combine_heads``).
    """

    # Whether components_ is (head_dim, n_features) rather than 3-D.
    _single_head = False

    _parameter_constraints: dict = {
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(KERNELS))],
        "init": [StrOptions({"auto", "pca", "identity", "random"}), "array-like"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"auto", "lbfgs", "adam"})],
        "batch_size": [
            Interval(Integral, 2, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "standardize": ["boolean", StrOptions({"power"})],
        "duplicate_weight": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="both")],
        "warm_start": ["boolean"],
        "callback": [callable, None],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __getstate__(self):
        """Pickle with every fitted array on the host, as NumPy.

        A model fitted on a GPU (or on any array-API device) then loads where
        CuPy or that device is absent, and predicts NumPy input exactly as it
        predicted on the device (to predict on the GPU again, fit there).
        """
        return to_host(super().__getstate__())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # With device='cpu' or 'cuda' the fitted arrays live on that device,
        # not beside the input, which scikit-learn's array-API checks expect.
        tags.array_api_support = getattr(self, "device", "auto") == "auto"
        return tags

    @property
    def _n_features_out(self):
        """Width of ``transform``'s output (for ``get_feature_names_out``)."""
        C = self.components_
        return C.shape[0] if C.ndim == 2 else C.shape[0] * C.shape[1]

    # ------------------------------------------------------------------ fit
    @fill_doc
    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    @fit_threads()
    def fit(self, X, y, sample_weight=None):
        """Learn the heads' projections on the ensemble's leave-one-out MSE.

        Parameters
        ----------
        %(fit_parameters)s

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._combine_heads(self._fit_heads(X, y, sample_weight))
        return self

    def _fit_n_heads(self):
        """Number of heads to fit."""
        raise NotImplementedError

    def _fit_diversity(self):
        """Weight of the heads' ambiguity in the training objective, or
        ``'auto'`` (see ``_diversity``)."""
        return 0.0

    def _combine_heads(self, heads):
        """Set the head weights and what follows from the heads' leave-one-out
        residuals (see ``_fit_heads``)."""
        raise NotImplementedError

    def _fit_config(self):
        """The fitting engine's configuration from the parameters."""
        return FitConfig(
            kernel=get_kernel(self.kernel),
            head_dim=self.head_dim,
            init=self.init,
            max_iter=self.max_iter,
            tol=self.tol,
            batch_size=self.batch_size,
            early_stopping=self.early_stopping,
            validation_fraction=self.validation_fraction,
            n_iter_no_change=self.n_iter_no_change,
            diversity=self._fit_diversity(),
            callback=self.callback,
            verbose=self.verbose,
            name=type(self).__name__,
        )

    def _validate_training_data(self, X, y, sample_weight):
        """Validate ``fit`` input; return namespace, device and arrays on it.

        Returns ``xp, device, X, Y, sw, single_output`` with ``Y`` of shape
        (n, t) in the dtype of ``X``, ``sw`` non-negative weights that sum to
        one, and whether ``y`` was 1-d.
        """
        X, y = validate_fit_data(self, X, y)
        xp, dev = get_namespace(X)
        X = as_float(X, xp=xp)
        # scikit-learn's checks see the input's arrays only: with the dispatch
        # off they would turn arrays of another device into NumPy (which CuPy
        # refuses).
        sample_weight = move_to(sample_weight, xp=xp, device=dev)
        sw = _check_sample_weight(sample_weight, X, dtype=X.dtype)
        if self.device != "auto":
            xp, dev = compute_namespace(self.device, X)
            X = move_to(X, xp=xp, device=dev)
        y = move_to(y, xp=xp, device=dev)
        sw = move_to(sw, xp=xp, device=dev)
        Y = xp.astype(y, X.dtype)
        single_output = Y.ndim == 1
        if single_output:
            Y = xp.reshape(Y, (-1, 1))
        if not bool(xp.all(sw >= 0)):
            raise ValueError("sample_weight must be non-negative.")
        n_positive = int(xp.sum(xp.astype(sw > 0, xp.int64)))
        if n_positive < 2:
            raise ValueError(
                "At least 2 samples with positive sample_weight are needed: a "
                f"leave-one-out fit attends to the other samples; got {n_positive}."
            )
        return xp, dev, X, Y, sw / xp.sum(sw), single_output

    def _fit_heads(self, X, y, sample_weight):
        """Validate, standardise, learn the heads and make ``predictor_``.

        Sets ``components_`` ((head_dim, p) for the single-head estimator, else
        (n_heads, head_dim, p)), ``predictor_``, ``n_iter_``, ``n_fev_``,
        ``loss_curve_`` and ``n_support_fallback_``; returns ``FittedHeads``
        for the statistics and diagnostics that follow.
        """
        previous = None
        if self.warm_start and hasattr(self, "predictor_"):
            previous = self.predictor_.W
        n_heads = self._fit_n_heads()
        xp, dev, X, Y, sw, single_output = self._validate_training_data(
            X, y, sample_weight
        )
        config = self._fit_config()
        rng = check_random_state(self.random_state)
        features = FeatureMap(self.standardize)
        Xs = features.fit_transform(X, sw, rng=rng, xp=xp)
        Ys = scaled_targets(Y, sw, xp=xp)
        # components_ (and init arrays) are in input units when the map is
        # linear, else in the units of the warped, standardised features.
        if features.is_linear:
            scale_np = to_numpy(features.scale).astype(np.float64)
        else:
            scale_np = np.ones(X.shape[1])
        p = X.shape[1]
        # With the copies' blend on, the heads learn from the rows with their
        # copies merged: leave-one-out then leaves a record out with all its
        # copies, so that the heads learn to predict from other records (the
        # blend serves the copies).
        duplicates = (
            None if self.duplicate_weight == 0 else DuplicateIndex(X, Y, sw, xp=xp)
        )
        Xt, Yt, swt, merged_group = Xs, Ys, sw, None
        if duplicates is not None:
            Xt, Yt, swt, merged_group = duplicates.collapse(Xs, Ys, sw, xp=xp)

        start = time.perf_counter()
        W0 = initial_projection(
            config, previous, Xt, Yt, swt, scale_np, n_heads=n_heads, rng=rng, xp=xp
        )
        self._progress("start (bandwidths on a subsample)", start)
        d = W0.shape[1] // n_heads
        shape = (d, p) if n_heads == 1 and self._single_head else (n_heads, d, p)

        def as_components(W):
            return W.T.reshape(shape)

        start = time.perf_counter()
        solver = self._choose_solver(swt, n_heads)
        solve = fit_adam if solver == "adam" else fit_lbfgs
        fitted = solve_with_diversity(
            solve,
            config,
            W0,
            Xt,
            Yt,
            swt,
            n_heads=n_heads,
            as_components=as_components,
            rng=rng,
            xp=xp,
        )
        unit = "epochs" if solver == "adam" else "iterations"
        if fitted.at_max_iter:
            warnings.warn(
                f"{type(self).__name__} stopped after max_iter={self.max_iter} "
                f"{unit} before the loss converged; increase max_iter or tol.",
                ConvergenceWarning,
            )
        steps = "steps" if solver == "adam" else "evaluations"
        self._progress(f"fitted, {fitted.n_iter} {unit}, {fitted.n_fev} {steps}", start)

        W_x = xp.asarray(fitted.W, dtype=X.dtype, device=dev)
        scale = xp.asarray(scale_np, dtype=X.dtype, device=dev)
        self.components_ = xp.reshape((W_x / scale[:, None]).T, shape)
        self.predictor_ = NWPredictor(
            features=features,
            W=W_x,
            X=Xs,
            Y=Y,
            sample_weight=sw,
            kernel=config.kernel,
            n_heads=n_heads,
            single_output=single_output,
        )
        self.predictor_.duplicates = duplicates
        self._device = self.device
        self.n_iter_ = fitted.n_iter
        self.n_fev_ = fitted.n_fev
        self.loss_curve_ = fitted.loss_curve
        # Leave-one-out statistics (noise level, head weights, correlations):
        # every row up to LOO_STATS_ROWS, else a random subset of queries,
        # each attending to all rows, so that their cost stays linear in n.
        sw_np = to_numpy(sw).astype(np.float64)
        positive = np.flatnonzero(sw_np > 0)
        heldout = original_rows(fitted.heldout, merged_group, duplicates)
        sampled = None
        rows_np = np.arange(X.shape[0])
        if positive.shape[0] > LOO_STATS_ROWS:
            rows_np = sample_loo_rows(positive, heldout, LOO_STATS_ROWS, rng=rng)
            sampled = rows_np
        rows = xp.asarray(rows_np, device=dev)
        start = time.perf_counter()
        heads, fallback = self.predictor_.loo_head_predictions(rows)
        counts = xp.sum(xp.astype(fallback, xp.int64), axis=1)
        self.n_support_fallback_ = int(counts[0]) if self._single_head else counts
        Y_rows = xp.take(Y, rows, axis=0)
        residuals = to_numpy(heads - Y_rows[None, ...]).astype(np.float64)
        self._progress(f"leave-one-out statistics on {rows_np.shape[0]} rows", start)
        return FittedHeads(
            residuals,
            sw_np[rows_np],
            sampled,
            as_components(fitted.W),
            heldout,
            fitted.diversity,
        )

    def _progress(self, stage, start):
        """With ``verbose``, say that ``stage`` (begun at ``start``) is done."""
        if self.verbose:
            print(
                f"[{type(self).__name__}] {stage}: {time.perf_counter() - start:.2f}s",
                flush=True,
            )

    def _choose_solver(self, sw, n_heads=1):
        """'lbfgs' or 'adam': 'auto' takes Adam above ``AUTO_ADAM_ROWS`` rows
        for one head, above ``AUTO_ADAM_ROWS_HEADS`` for several."""
        if self.solver != "auto":
            return self.solver
        n_positive = int(np.count_nonzero(to_numpy(sw) > 0))
        limit = AUTO_ADAM_ROWS if n_heads == 1 else AUTO_ADAM_ROWS_HEADS
        return "adam" if n_positive > limit else "lbfgs"

    def _set_head_combination(self, heads, head_weights):
        """Combine the heads with ``head_weights``; set ``loo_prediction_``,
        ``duplicate_weight_`` and the predictor's noise level from the heads'
        leave-one-out residuals (see ``_loo_statistics``)."""
        loo, self.duplicate_weight_ = combine_heads(
            self.predictor_,
            heads.residuals,
            heads.sw,
            head_weights,
            rows=heads.rows,
            duplicate_weight=self.duplicate_weight,
            heldout=heads.heldout,
        )
        self.loo_prediction_ = self.predictor_.output(loo)
        calibration = self.predictor_.calibration
        self.calibration_rows_ = self.predictor_.to_model(
            calibration.rows[calibration.calibration]
        )

    # ------------------------------------------------------------------ predict side
    def _check_predict_input(self, X, method):
        """Validated ``X`` in the fitted arrays' namespace.

        With ``device='auto'`` at fit, ``X`` must already be there; with
        ``'cpu'`` or ``'cuda'`` it is moved there (see ``_like_input`` for
        the way back).
        """
        check_is_fitted(self)
        if getattr(self, "_device", "auto") == "auto":
            same_namespace_or_raise(X, self.components_, estimator=self, method=method)
        xp, _ = get_namespace(X)
        X = as_float(
            validate_data(self, X, dtype=(xp.float64, xp.float32), reset=False), xp=xp
        )
        if where(X) != where(self.components_):
            X = self.predictor_.to_model(X)
        return X

    def _like_input(self, X):
        """Moves results back to ``X``'s namespace and device when the model
        computes elsewhere (``device='cpu'`` or ``'cuda'``)."""
        if getattr(self, "_device", "auto") == "auto":
            return lambda a: a
        return like_input(X)

    def transform(self, X):
        """Project ``X`` into the learned space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            ``(X - mean) @ components_.T`` with the weighted training mean
            (a translation, which leaves all distances unchanged); for several
            heads the head spaces are concatenated.
        """
        back = self._like_input(X)
        X = self._check_predict_input(X, "transform")
        return back(self.predictor_.project(X))

    def predict(self, X, return_std=False):
        """Predict with the fitted attention over the training rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        return_std : bool, default=False
            Also return the standard error of each prediction.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            Convex combinations of training targets: the heads' NW estimate,
            with ``duplicate_weight_`` of the mean target of the training rows
            a query repeats exactly blended in (see ``duplicate_weight``).
        y_std : array of the shape of ``y_pred``
            Only with ``return_std``: the NW standard error
            ``sigma * sqrt(sum_i v_i(x)^2)``, with ``v(x)`` the (ensemble's)
            weights on the training rows and ``sigma`` the noise level
            estimated from the leave-one-out residuals. It accounts for the
            noise in the training targets that the prediction averages, and
            for the heads' shared use of the same rows; it does not include the
            smoothing bias.
        """
        back = self._like_input(X)
        X = self._check_predict_input(X, "predict")
        if not return_std:
            return back(self.predictor_.predict(X))
        Y_hat, Y_std = self.predictor_.predict(X, return_std=True)
        return back(Y_hat), back(Y_std)

    def predict_interval(self, X, *, confidence_level=0.9, method="jackknife+"):
        """Predict with conformal prediction intervals.

        The intervals come from the leave-one-out residuals of the training
        rows that ``fit`` already computed (no refit), with the projections
        held at the fitted ones; see :ref:`prediction_intervals`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        confidence_level : float, default=0.9
            Target probability that the interval holds a new target, in (0, 1).
        method : {'jackknife+', 'adaptive'}, default='jackknife+'
            ``'jackknife+'``: the bounds are quantiles of the leave-one-out
            models' predictions at ``X`` minus and plus the absolute residuals.
            ``'adaptive'``: the residuals are first divided by the model's
            local error scale at their row and multiplied by that at ``X``,
            so that intervals widen where the data are noisy.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            The predictions: those of :meth:`predict`, up to rounding.
        y_pis : array of shape (n_samples, 2) or (n_samples, n_outputs, 2)
            Lower and upper bounds (infinite, with a warning, when too few
            rows calibrate for ``confidence_level``).
        """
        alpha = interval_alpha(confidence_level, method)
        back = self._like_input(X)
        X = self._check_predict_input(X, "predict_interval")
        Y_hat, bounds = self.predictor_.predict_interval(X, alpha=alpha, method=method)
        return back(Y_hat), back(bounds)

    def attention_weights(self, X, head=None, top_k=None):
        """Which training rows each prediction drew on, with their weights.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query samples.
        head : int, default=None
            The head whose attention to return; None gives the ensemble's
            weights ``sum_h head_weight_h * w_h(x)`` (with the blend of a
            query's exact copies, see ``duplicate_weight``), with which the
            prediction is ``weights @ y_train``.
        top_k : int, default=None
            Return only the ``top_k`` largest weights of each query, with the
            rows they belong to. None returns all weights: for softmax an
            array of shape (n_queries, n_samples_fit) (mind the memory for
            large sets); for a compact kernel a ``scipy.sparse.csr_array`` of
            that shape on the host, holding only the non-zero weights (found
            by a radius search in each head's space, without forming the
            dense array).

        Returns
        -------
        weights : array or sparse array of shape (n_queries, n_samples_fit), \
                or array of shape (n_queries, top_k)
            Non-negative; each row of the full array sums to one. With
            ``top_k``, sorted in decreasing order. A compact kernel's query
            whose support holds no training row has weight one on its nearest
            training row.
        indices : array of shape (n_queries, top_k)
            Only with ``top_k``: the training rows (in the order given to
            ``fit``) that the weights belong to.
        """
        back = self._like_input(X)
        X = self._check_predict_input(X, "attention_weights")
        result = self.predictor_.attention_weights(X, head=head, top_k=top_k)
        if top_k is not None:
            return back(result[0]), back(result[1])
        return result if self.predictor_.support_index is not None else back(result)
