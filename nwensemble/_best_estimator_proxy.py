"""The allocator as its chosen model: prediction and the fitted diagnostics
go through ``best_estimator_``."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.base import TransformerMixin
from sklearn.utils._available_if import available_if
from sklearn.utils.validation import check_is_fitted

from nwensemble._shared.backend import same_namespace_or_raise
from nwensemble._wrapper import WrapperMixin

# The chosen model's fitted attributes the allocator reads as its own, as
# HeadAllocator's docstring lists them; every other fitted attribute of the
# chosen model is in NOT_FORWARDED (tests/test_best_estimator_proxy.py checks both
# against a fitted model).
FORWARDED_ATTRIBUTES = (
    "components_ hdi_ bvc_decomposition_ head_weights_ head_correlation_ "
    "subspace_similarity_ principal_angles_ diversity_ loo_prediction_ "
    "calibration_rows_ calibration_residuals_ n_support_fallback_ "
    "duplicate_weight_ local_fit_ local_ridge_ is_categorical_ categories_ "
    "infrequent_categories_ embeddings_ missing_embeddings_ n_iter_ n_fev_ "
    "loss_curve_ classes_ class_prior_ prior_weight_ loo_proba_ "
    "calibration_scores_"
).split()
# The allocator's own input description, and the prediction object (not a
# user's attribute).
NOT_FORWARDED = ("n_features_in_", "feature_names_in_", "predictor_")


def _estimator_has(method):
    """Whether the estimator given (a classifier's methods) has ``method``,
    for ``available_if``: the chosen model will have it too."""

    def check(self):
        return hasattr(self._given_estimator(), method)

    return check


class ChosenModelMixin(WrapperMixin, TransformerMixin):
    """Prediction methods and fitted attributes of ``best_estimator_``, for
    an estimator that sets ``best_estimator_`` (with ``refit``),
    ``_fit_where`` and ``_table`` in ``fit`` and names its kind of model in
    ``_given_estimator()``."""

    def predict(self, X, **predict_params):
        """Predict with the chosen model (``best_estimator_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        **predict_params : dict
            Passed on, for example ``return_std=True``.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            The chosen model's predictions (and what ``predict_params`` ask for).
        """
        X = self._check_query(X, "predict")
        return self.best_estimator_.predict(X, **predict_params)

    def predict_interval(self, X, *, confidence_level=0.9, method="jackknife+"):
        """Predict with conformal intervals from the chosen model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        confidence_level : float, default=0.9
        method : {'jackknife+', 'adaptive'}, default='jackknife+'
            See :meth:`MultiHeadNWRegressor.predict_interval`.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
        y_pis : array of shape (n_samples, 2) or (n_samples, n_outputs, 2)
        """
        X = self._check_query(X, "predict_interval")
        return self._chosen("predict_interval")(
            X, confidence_level=confidence_level, method=method
        )

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities from the chosen classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        proba : array of shape (n_samples, n_classes)
            See :meth:`MultiHeadNWClassifier.predict_proba`.
        """
        return self.best_estimator_.predict_proba(self._check_query(X, "predict_proba"))

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Logarithms of the chosen classifier's class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        log_proba : array of shape (n_samples, n_classes)
            See :meth:`MultiHeadNWClassifier.predict_log_proba`.
        """
        X = self._check_query(X, "predict_log_proba")
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_estimator_has("predict_set"))
    def predict_set(self, X, *, confidence_level=0.9):
        """Predict with conformal prediction sets from the chosen classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        confidence_level : float, default=0.9
            See :meth:`MultiHeadNWClassifier.predict_set`.

        Returns
        -------
        y_pred : array of shape (n_samples,)
        y_sets : array of bool of shape (n_samples, n_classes)
        """
        X = self._check_query(X, "predict_set")
        return self.best_estimator_.predict_set(X, confidence_level=confidence_level)

    def score(self, X, y, sample_weight=None):
        """The chosen model's ``score``: R² for a regressor, accuracy for a
        classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test samples.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            True targets or labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
        """
        X = self._check_query(X, "score")
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)

    def local_error_scale(self, X):
        """The chosen model's local error scale at ``X`` and at its
        calibration rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        at_queries, at_calibration_rows : arrays
            See :meth:`MultiHeadNWRegressor.local_error_scale`.
        """
        X = self._check_query(X, "predict_interval")
        return self.best_estimator_.local_error_scale(X)

    def _check_query(self, X, method):
        """``X`` for the refitted best estimator, which validates it: it was
        fitted on the rows as the allocator received them (see
        ``_fit_rows``), so its checks are the allocator's, made once."""
        self._check_refitted()
        # Only where the rows are (scikit-learn's checks want the allocator
        # named); their contents are the chosen model's to check.
        same_namespace_or_raise(X, self._fit_where, estimator=self, method=method)
        return X

    def _check_refitted(self):
        """An error unless fitted with ``refit`` (a chosen model to ask)."""
        check_is_fitted(self)
        if not self.refit:
            raise AttributeError(
                "HeadAllocator was fitted with refit=False: it holds the scores "
                "only. Refit with refit=True to predict."
            )

    def transform(self, X):
        """Project ``X`` into the chosen model's learned space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            See :meth:`MultiHeadNWRegressor.transform`.
        """
        return self._chosen("transform")(self._check_query(X, "transform"))

    def get_feature_names_out(self, input_features=None):
        """Names of the chosen model's ``transform`` outputs.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Not used beyond scikit-learn's check against
            ``feature_names_in_``.

        Returns
        -------
        feature_names_out : ndarray of str objects
            See :meth:`MultiHeadNWRegressor.get_feature_names_out`.
        """
        self._check_refitted()
        return self._chosen("get_feature_names_out")(input_features)

    def attention_weights(self, X, head=None, top_k=None):
        """The chosen model's attention: which training rows each prediction
        drew on, with their weights.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query samples.
        head : int, default=None
        top_k : int, default=None
            See :meth:`MultiHeadNWRegressor.attention_weights`.

        Returns
        -------
        weights : array or sparse array
        indices : array
            Only with ``top_k``.
        """
        X = self._check_query(X, "attention_weights")
        return self._chosen("attention_weights")(X, head=head, top_k=top_k)

    def _chosen(self, method):
        """The chosen model's ``method``, or an error that says it has none."""
        if not hasattr(self.best_estimator_, method):
            raise AttributeError(
                f"The chosen {type(self.best_estimator_).__name__} has no {method}."
            )
        return getattr(self.best_estimator_, method)

    def __getattr__(self, name):
        # Only called for names the allocator does not hold itself.
        if name in FORWARDED_ATTRIBUTES and "best_estimator_" in self.__dict__:
            return getattr(self.__dict__["best_estimator_"], name)
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
        )
