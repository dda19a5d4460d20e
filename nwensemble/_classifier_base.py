"""The NW attention classifiers' shared machinery: class labels in, the
heads fitted to their one-hot rows, class probabilities, labels and
conformal prediction sets out."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import array_api_compat
import numpy as np
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils._param_validation import StrOptions

from nwensemble._atomic import atomic_fit
from nwensemble._base import BaseNW
from nwensemble._fit.class_targets import (
    choose_prior_weight,
    class_prior,
    class_sample_weight,
    encode_labels,
    one_hot,
    row_weights,
)
from nwensemble._fit.lbfgs_run import fit_threads
from nwensemble._predict.intervals import interval_alpha
from nwensemble._predict.prediction_sets import least_probability, nonconformity
from nwensemble._shared.backend import device, namespace_of, to_numpy

# What the regressors report that has no meaning over class labels: the
# readout is always the weighted mean, and the leave-one-out estimates and
# their residuals are reported as probabilities and scores instead.
_REGRESSION_ONLY = (
    "local_fit_",
    "local_ridge_",
    "loo_prediction_",
    "calibration_residuals_",
)


class BaseNWClassifier(ClassifierMixin, BaseNW):
    """Base class for NW attention classifiers; not for direct use.

    The heads learn, by the engine of the regressors, to predict each row's
    one-hot class indicators from the other rows: the objective is the
    exact leave-one-out Brier score, and a head's estimate, the attention-
    weighted mean of the training rows' indicators, is a probability
    vector. The probabilities are then smoothed toward the class prior by
    the weight of least leave-one-out log-loss.
    """

    _parameter_constraints: dict = {
        **BaseNW._parameter_constraints,
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }

    def __init__(self, *, class_weight, **params):
        super().__init__(**params)
        self.class_weight = class_weight

    def _fit_params(self):
        # Only the weighted mean of indicators is a probability vector; the
        # classifiers have no feature slopes (a regressors' parameter).
        return {
            **self.get_params(deep=False),
            "local_fit": "constant",
            "feature_slopes": False,
        }

    @_fit_context(prefer_skip_nested_validation=True)
    @atomic_fit
    @fit_threads()
    def fit(self, X, y, sample_weight=None):
        """Learn the heads' projections on the leave-one-out Brier score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels (numbers or strings), at least two distinct ones.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, multiplied by ``class_weight``'s; at least
            two must be positive. A row of weight zero takes no part in the
            fit, as if removed.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        labels, classes, codes = encode_labels(y)
        sw = class_sample_weight(self.class_weight, labels, sample_weight)
        attributes = self._fit_heads(X, one_hot(codes, classes.shape[0]), sw)
        loo = attributes["loo_prediction_"]
        calibration = attributes["calibration_rows_"]
        residuals = attributes["calibration_residuals_"]
        for name in _REGRESSION_ONLY:
            del attributes[name]
        for name, value in attributes.items():
            setattr(self, name, value)

        xp, dev = namespace_of(self.components_)
        weights = row_weights(sw, codes.shape[0])
        prior = class_prior(codes, weights, classes.shape[0])
        P = to_numpy(loo).astype(np.float64)
        a = choose_prior_weight(P, codes, weights, prior)
        # A calibration row's residual of its own class is 1 less its
        # leave-one-out probability.
        own = codes[to_numpy(calibration)]
        R = to_numpy(residuals).astype(np.float64)
        P_own = 1.0 - R[np.arange(own.size), own]
        dtype = loo.dtype
        self.classes_ = _like_labels(classes, y)
        self.class_prior_ = xp.asarray(prior, dtype=dtype, device=dev)
        self.prior_weight_ = a
        self.loo_proba_ = xp.asarray((1 - a) * P + a * prior, dtype=dtype, device=dev)
        self.calibration_rows_ = calibration
        self.calibration_scores_ = xp.asarray(
            nonconformity((1 - a) * P_own + a * prior[own]),
            dtype=dtype,
            device=dev,
        )
        return self

    # ------------------------------------------------------------------ predict side
    def _proba(self, X):
        """Class probabilities of validated ``X``, in the model's namespace."""
        xp, _ = namespace_of(self.components_)
        P = self.predictor_.predict(X)
        # Below the dtype's resolution an estimate is rounding in the heads'
        # convex sums, not attention: zeroed, the prior orders such classes
        # (and their logarithms keep that order).
        P = xp.where(P < xp.finfo(P.dtype).eps, 0.0, P)
        P = P / xp.sum(P, axis=1, keepdims=True)
        a = self.prior_weight_
        return (1 - a) * P + a * self.class_prior_

    def _labels(self, P):
        """The class of greatest probability in each row of ``P``."""
        xp, _ = namespace_of(P)
        codes = to_numpy(xp.argmax(P, axis=1))
        if isinstance(self.classes_, np.ndarray):
            return self.classes_[codes]
        xpc, devc = namespace_of(self.classes_)
        return xpc.take(self.classes_, xpc.asarray(codes, device=devc), axis=0)

    def predict_proba(self, X):
        """Class probabilities: the heads' attention over the training rows'
        classes, smoothed toward the class prior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        proba : array of shape (n_samples, n_classes)
            ``(1 - prior_weight_) * sum_h alpha_h sum_i w_{h,i}(x) 1[y_i = c]
            + prior_weight_ * class_prior_[c]`` for the classes ``c`` in the
            order of ``classes_``: positive, each row summing to one.
        """
        back = self._like_input(X)
        X = self._check_predict_input(X, "predict_proba")
        return back(self._proba(X))

    def predict_log_proba(self, X):
        """Logarithms of :meth:`predict_proba`'s probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        log_proba : array of shape (n_samples, n_classes)
            Finite, as the probabilities are positive.
        """
        back = self._like_input(X)
        X = self._check_predict_input(X, "predict_log_proba")
        P = self._proba(X)
        xp, _ = namespace_of(P)
        return back(xp.log(P))

    def predict(self, X):
        """The class of greatest probability for each query.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        y_pred : array of shape (n_samples,)
            Labels from ``classes_``.
        """
        X = self._check_predict_input(X, "predict")
        return self._labels(self._proba(X))

    def predict_set(self, X, *, confidence_level=0.9):
        """Predict with conformal prediction sets of classes.

        A class enters a query's set when its probability is at least one
        less the conformal quantile of the calibration rows' scores, ``1 -``
        the leave-one-out probability of each row's own class
        (``calibration_scores_``): no refit, and a new row's class lies in
        its set with probability at least ``confidence_level``, as for the
        regressors' intervals (see :ref:`prediction_intervals`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        confidence_level : float, default=0.9
            Target probability that the set holds a new row's class, in
            (0, 1).

        Returns
        -------
        y_pred : array of shape (n_samples,)
            The predictions: those of :meth:`predict`.
        y_sets : array of bool of shape (n_samples, n_classes)
            Whether each class of ``classes_`` is in each query's set (every
            class, with a warning, when too few rows calibrate). A set may be
            empty where no class reaches the threshold.
        """
        alpha = interval_alpha(confidence_level)
        back = self._like_input(X)
        X = self._check_predict_input(X, "predict_set")
        P = self._proba(X)
        least = least_probability(to_numpy(self.calibration_scores_), alpha)
        return self._labels(P), back(P >= least)


def _like_labels(classes, y):
    """``classes`` (NumPy) in ``y``'s namespace and device when ``y`` is a
    numeric array of another namespace (the array API), else as they are."""
    if (
        isinstance(y, np.ndarray)
        or not array_api_compat.is_array_api_obj(y)
        or classes.dtype.kind not in "biuf"
    ):
        return classes
    xp = array_api_compat.array_namespace(y)
    return xp.asarray(classes, device=device(y))
