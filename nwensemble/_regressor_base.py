"""The NW attention regressors' shared machinery: numeric targets in,
predictions, standard errors and conformal intervals out."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions

from nwensemble._atomic import atomic_fit
from nwensemble._base import BaseNW
from nwensemble._docstrings import fill_doc
from nwensemble._fit.lbfgs_run import fit_threads
from nwensemble._predict.intervals import interval_alpha


class BaseNWRegressor(RegressorMixin, BaseNW):
    """Base class for NW attention regressors; not for direct use.

    Fits the heads to the targets as given (one or several outputs) and
    predicts them, with standard errors and conformal intervals.
    """

    _parameter_constraints: dict = {
        **BaseNW._parameter_constraints,
        "local_fit": [StrOptions({"auto", "linear", "quadratic", "constant"})],
        "feature_slopes": ["boolean", StrOptions({"fine"})],
    }

    def __init__(self, *, local_fit, feature_slopes, **params):
        super().__init__(**params)
        self.local_fit = local_fit
        self.feature_slopes = feature_slopes

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

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
        for name, value in self._fit_heads(X, y, sample_weight).items():
            setattr(self, name, value)
        return self

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
