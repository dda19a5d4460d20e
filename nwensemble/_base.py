"""Shared machinery of the Nadaraya-Watson attention estimators: their
parameters, validation, the fit of their heads and the predict-side
methods every estimator has."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    check_is_fitted,
    validate_data,
)

from nwensemble._fit.config import FitConfig
from nwensemble._fit.engine import fit_heads
from nwensemble._fitted_attributes import fitted_attributes
from nwensemble._predict.combination import combine_heads
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


class BaseNW(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class for NW attention estimators; not for direct use.

    Holds the parameters every estimator shares (declared once, here: the
    subclasses' signatures give their defaults and pass them on), input
    validation, the fit of the heads to numeric targets (``_fit_heads``: the
    fitting engine, then the prediction object in one statement) and the
    predict-side methods every estimator has, which validate their input
    and ask ``predictor_``. Subclasses say how many heads to fit
    (``_fit_n_heads``), how to weigh them (``_head_weights``) and what to
    derive from the fit (``_set_diagnostics``); the regressors' and the
    classifiers' bases say what the targets are.
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
    def _fit_heads(self, X, y, sample_weight):
        """Fit the heads to the numeric targets ``y``; set ``predictor_`` and
        the subclass's diagnostics, and return the fitted attributes every
        estimator derives from its fit (``fitted_attributes``'s dict) for
        the caller to set or to derive its own from."""
        warm = self.warm_start and hasattr(self, "predictor_")
        previous = self.predictor_.W if warm else None
        n_heads = self._fit_n_heads() * self._fit_n_members()
        if warm and self.predictor_.n_heads != n_heads:
            raise ValueError(
                f"warm_start=True needs the {self.predictor_.n_heads} heads of "
                f"the previous fit; got {n_heads}. Set warm_start=False to start "
                "afresh."
            )
        # LinearMembers hands its second fit the first fit's encoding of the
        # levels (the first's projection has a row per code).
        given_encoder = vars(self).pop("_given_encoder", None)
        xp, table, encoder, Y, sw, single_output = training_arrays(
            self, X, y, sample_weight, encoder=given_encoder
        )
        # HeadAllocator hands its refit the candidate it chose, for one fit.
        first_member = vars(self).pop("_given_first_member", None)
        # LinearMembers hands its second fit the first fit's feature slopes.
        given_slopes = vars(self).pop("_given_slopes", None)
        # ... and may hand it the first fit's projection to start from.
        given_start = vars(self).pop("_given_start", None)
        if previous is None:
            previous = given_start
        fitted = fit_heads(
            self._fit_config(),
            table,
            encoder,
            Y,
            sw,
            previous=previous,
            rng=check_random_state(self.random_state),
            xp=xp,
            first_member=first_member,
            given_slopes=given_slopes,
        )
        # For a refit with more members on the same rows (HeadAllocator).
        self._first_member = fitted.first_member
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
        self._set_diagnostics(fitted)
        return fitted_attributes(
            fitted, self.predictor_, loo, single_head=self._single_head
        )

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
            self._fit_params(),
            kernel=resolve_kernel(self.kernel),
            n_heads=self._fit_n_heads(),
            n_members=self._fit_n_members(),
            diversity=self._fit_diversity(),
            callback=self.callback,
            single_head=self._single_head,
            name=type(self).__name__,
        )

    def _fit_params(self):
        """The parameters the fitting engine reads (``FitConfig.PARAMETERS``)."""
        return self.get_params(deep=False)

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
