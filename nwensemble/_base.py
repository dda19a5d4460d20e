"""Shared machinery of the Nadaraya-Watson attention regressors: their
parameters, validation, ``fit`` and the predict-side methods."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    check_is_fitted,
    validate_data,
)

from nwensemble._atomic import atomic_fit
from nwensemble._docstrings import fill_doc
from nwensemble._fit.config import FitConfig
from nwensemble._fit.engine import fit_heads
from nwensemble._fit.lbfgs_run import fit_threads
from nwensemble._fitted_attributes import fitted_attributes
from nwensemble._predict.combination import combine_heads
from nwensemble._predict.intervals import interval_alpha
from nwensemble._predict.predictor import NWPredictor
from nwensemble._shared.backend import (
    get_namespace,
    like_input,
    same_namespace_or_raise,
    to_host,
    where,
)
from nwensemble._shared.kernels import KERNELS, resolve_kernel
from nwensemble._validation import (
    as_float,
    as_table_rows,
    reject_dates,
    training_arrays,
)


class BaseNWRegressor(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, BaseEstimator
):
    """Base class for NW attention regressors; not for direct use.

    Holds the parameters every estimator shares (declared once, here: the
    subclasses' signatures give their defaults and pass them on), input
    validation, ``fit`` (the fitting engine, then the prediction object in
    one statement) and the predict-side methods, which validate their input
    and ask ``predictor_``. Subclasses say how many heads to fit
    (``_fit_n_heads``), how to weigh them (``_head_weights``) and what to
    derive from the fit (``_set_diagnostics``).
    """

    # Whether components_ is (head_dim, n_features) rather than 3-D.
    _single_head = False

    _parameter_constraints: dict = {
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(KERNELS))],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "init": [StrOptions({"auto", "pca", "identity", "random"}), "array-like"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"auto", "lbfgs", "adam"})],
        "batch_size": [
            Interval(Integral, 2, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [
            Interval(Real, 0, 1, closed="neither"),
            StrOptions({"auto"}),
        ],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "standardize": ["boolean", StrOptions({"power"})],
        "duplicate_weight": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="both")],
        "local_fit": [StrOptions({"auto", "linear", "constant"})],
        "warm_start": ["boolean"],
        "callback": [callable, None],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        head_dim,
        kernel,
        categorical_features,
        init,
        max_iter,
        tol,
        solver,
        batch_size,
        early_stopping,
        validation_fraction,
        n_iter_no_change,
        standardize,
        duplicate_weight,
        local_fit,
        warm_start,
        callback,
        device,
        random_state,
        verbose,
    ):
        self.head_dim = head_dim
        self.kernel = kernel
        self.categorical_features = categorical_features
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
        self.local_fit = local_fit
        self.warm_start = warm_start
        self.callback = callback
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def __getstate__(self):
        """Pickle with every fitted array on the host, as NumPy.

        A model fitted on a GPU (or on any array-API device) then loads where
        CuPy or that device is absent, and predicts NumPy input as it
        predicted on the device, to rounding (to predict on the GPU again,
        fit there).
        """
        return to_host(super().__getstate__())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.input_tags.allow_nan = True
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
        warm = self.warm_start and hasattr(self, "predictor_")
        previous = self.predictor_.W if warm else None
        n_heads = self._fit_n_heads() * self._fit_n_members()
        if warm and self.predictor_.n_heads != n_heads:
            raise ValueError(
                f"warm_start=True needs the {self.predictor_.n_heads} heads of "
                f"the previous fit; got {n_heads}. Set warm_start=False to start "
                "afresh."
            )
        xp, table, encoder, Y, sw, single_output = training_arrays(
            self, X, y, sample_weight
        )
        fitted = fit_heads(
            self._fit_config(),
            table,
            encoder,
            Y,
            sw,
            previous=previous,
            rng=check_random_state(self.random_state),
            xp=xp,
        )
        combination, loo = combine_heads(
            fitted.keys,
            fitted.loo,
            self._head_weights(fitted),
            duplicates=fitted.duplicates,
            duplicate_weight=self.duplicate_weight,
            heldout=fitted.heldout,
        )
        self.predictor_ = NWPredictor(
            features=fitted.features,
            W=fitted.W,
            keys=fitted.keys.searchable(),
            combination=combination,
            single_output=single_output,
        )
        self._device = self.device
        for name, value in fitted_attributes(
            fitted, self.predictor_, loo, single_head=self._single_head
        ).items():
            setattr(self, name, value)
        self._set_diagnostics(fitted)
        return self

    def _fit_n_heads(self):
        """Number of heads to fit."""
        raise NotImplementedError

    def _fit_n_members(self):
        """Number of independently fitted groups of heads (see
        ``MultiHeadNWRegressor``'s ``n_members``)."""
        return 1

    def _fit_diversity(self):
        """Weight of the heads' ambiguity in the training objective, or
        ``'auto'`` (see ``_fit.diversity``)."""
        return 0.0

    def _head_weights(self, fitted):
        """The weights that combine the heads, from ``fitted``
        (``FittedHeads``)."""
        raise NotImplementedError

    def _set_diagnostics(self, fitted):
        """Set what the subclass reports beyond the shared attributes."""

    def _fit_config(self):
        """The fitting engine's configuration: the parameters, with the
        kernel resolved into its object."""
        return FitConfig.from_params(
            self.get_params(deep=False),
            kernel=resolve_kernel(self.kernel),
            n_heads=self._fit_n_heads(),
            n_members=self._fit_n_members(),
            diversity=self._fit_diversity(),
            callback=self.callback,
            single_head=self._single_head,
            name=type(self).__name__,
        )

    # ------------------------------------------------------------------ predict side
    def _check_predict_input(self, X, method):
        """Validated ``X`` in the fitted arrays' namespace.

        With ``device='auto'`` at fit, ``X`` must already be there; with
        ``'cpu'`` or ``'cuda'`` it is moved there (see ``_like_input`` for
        the way back).
        """
        check_is_fitted(self)
        reject_dates(X)
        if getattr(self, "_device", "auto") == "auto":
            same_namespace_or_raise(X, self.components_, estimator=self, method=method)
        if self.predictor_.features.takes_tables:
            X = as_table_rows(X)
            validate_data(self, X, skip_check_array=True, reset=False)
            return X
        xp, _ = get_namespace(X)
        X = validate_data(
            self,
            X,
            dtype=(xp.float64, xp.float32),
            ensure_all_finite="allow-nan",
            reset=False,
        )
        X = as_float(X, xp=xp)
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
            models' predictions at ``X`` minus and plus the absolute residuals:
            one width for all queries (up to the leave-one-out models'
            spread), so that ``confidence_level`` holds over all queries but
            not where the noise is large (less) or small (more).
            ``'adaptive'``: the residuals are first divided by the model's
            local error scale at their row and multiplied by that at ``X``,
            so that intervals widen where the data are noisy; use it when the
            noise varies across the input (see :ref:`prediction_intervals`).

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

    def local_error_scale(self, X):
        """The local error scale of the adaptive prediction intervals.

        ``predict_interval(method='adaptive')`` divides each calibration
        row's residual by the scale at that row and multiplies the
        residuals' quantile by the scale at ``X``; a model that calibrates
        on the same rows (``ResidualStageRegressor``) reads both from here.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        at_queries : array of shape (n_samples,) or (n_samples, n_outputs)
            The scale at ``X``.
        at_calibration_rows : array of shape (n_calibration,) or \
                (n_calibration, n_outputs)
            The scale at ``calibration_rows_``, each row left out of its own.
        """
        back = self._like_input(X)
        X = self._check_predict_input(X, "predict_interval")
        at_queries, at_rows = self.predictor_.local_error_scale(X)
        return back(at_queries), back(at_rows)

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
        return result if self.predictor_.sparse_weights else back(result)
