"""Shared machinery of the Nadaraya-Watson attention regressors."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from numbers import Integral, Real

from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from nwensemble._backend import (
    get_namespace,
    move_to,
    same_namespace_or_raise,
)
from nwensemble._nw_math import nw_predict


class BaseNWRegressor(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, BaseEstimator
):
    """Base class for NW attention regressors; not for direct use.

    Holds the parameters every estimator shares, input validation, feature
    standardisation, chunked prediction and ``transform``. Subclasses implement
    ``fit`` and set ``components_`` plus the private fitted state that
    ``_predict_projected`` reads.
    """

    _parameter_constraints: dict = {
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "init": [StrOptions({"auto", "pca", "identity", "random"}), "array-like"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "standardize": ["boolean"],
        "warm_start": ["boolean"],
        "callback": [callable, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.array_api_support = True
        return tags

    @property
    def _n_features_out(self):
        """Width of ``transform``'s output (for ``get_feature_names_out``)."""
        C = self.components_
        return C.shape[0] if C.ndim == 2 else C.shape[0] * C.shape[1]

    # ------------------------------------------------------------------ fit helpers
    def _validate_training_data(self, X, y, sample_weight):
        """Validate ``fit`` input; return namespace, device and arrays on it.

        Returns ``xp, device, X, Y, sw`` with ``Y`` of shape (n, t) in the dtype of
        ``X`` and ``sw`` non-negative weights that sum to one.
        """
        xp, _ = get_namespace(X)
        X, y = validate_data(
            self,
            X,
            y,
            dtype=(xp.float64, xp.float32),
            multi_output=True,
            y_numeric=True,
            ensure_min_samples=2,
        )
        xp, dev = get_namespace(X)
        X = _as_float(X, xp=xp)
        y = move_to(y, xp=xp, device=dev)
        Y = xp.astype(y, X.dtype)
        self._y_ndim = Y.ndim
        if Y.ndim == 1:
            Y = xp.reshape(Y, (-1, 1))
        sample_weight = move_to(sample_weight, xp=xp, device=dev)
        sw = _check_sample_weight(sample_weight, X, dtype=X.dtype)
        sw = move_to(sw, xp=xp, device=dev)
        if not bool(xp.all(sw >= 0)):
            raise ValueError("sample_weight must be non-negative.")
        n_positive = int(xp.sum(xp.astype(sw > 0, xp.int64)))
        if n_positive < 2:
            raise ValueError(
                "At least 2 samples with positive sample_weight are needed: a "
                f"leave-one-out fit attends to the other samples; got {n_positive}."
            )
        return xp, dev, X, Y, sw / xp.sum(sw)

    def _fit_standardization(self, X, sw, *, xp):
        """Weighted centre and per-feature scale of ``X``.

        The scale is the weighted standard deviation when ``standardize`` is true,
        else one. It is computed after dividing by the column's largest magnitude,
        so features near 1e150 or 1e-150 neither overflow nor underflow; constant
        features (and subnormal spreads) get scale one.
        """
        center = xp.sum(sw[:, None] * X, axis=0)
        Xc = X - center
        if not self.standardize:
            return center, xp.ones_like(center)
        # A feature counts as constant when its spread is rounding noise of its
        # magnitude, or subnormal (not invertible into finite components_).
        max_abs = xp.max(xp.abs(Xc), axis=0)
        magnitude = xp.max(xp.abs(X), axis=0)
        eps = float(xp.finfo(X.dtype).eps)
        tiny = float(xp.finfo(X.dtype).smallest_normal)
        varies = (max_abs >= tiny) & (max_abs > 100 * eps * magnitude)
        max_abs = xp.where(varies, max_abs, xp.ones_like(max_abs))
        Xn = Xc / max_abs
        std = xp.sqrt(xp.sum(sw[:, None] * Xn * Xn, axis=0))
        std = xp.where(varies & (std > 0), std, xp.ones_like(std))
        return center, std * max_abs

    # ------------------------------------------------------------------ predict side
    def _check_predict_input(self, X, method):
        check_is_fitted(self)
        same_namespace_or_raise(X, self.components_, estimator=self, method=method)
        xp, _ = get_namespace(X)
        X = validate_data(self, X, dtype=(xp.float64, xp.float32), reset=False)
        return _as_float(X, xp=xp), xp

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
        X, xp = self._check_predict_input(X, "transform")
        return self._project(X, xp=xp)

    def predict(self, X):
        """Predict with the fitted attention over the training rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            Convex combinations of training targets.
        """
        X, xp = self._check_predict_input(X, "predict")
        Y_hat = self._predict_projected(self._project(X, xp=xp), xp=xp)
        if self._y_ndim == 1:
            Y_hat = Y_hat[:, 0]
        return Y_hat

    def _project(self, X, *, xp):
        C = self.components_
        C = xp.reshape(C, (-1, C.shape[-1]))
        return (X - self._x_center) @ C.T

    def _predict_projected(self, Q, *, xp):
        """Chunked NW prediction for projected queries ``Q``."""
        return nw_predict(Q, self._z_fit, self._y_fit, self._log_sw, xp=xp)


def _as_float(X, *, xp):
    """Return ``X`` as float32 if it already is, else float64."""
    if X.dtype == xp.float32 or X.dtype == xp.float64:
        return X
    return xp.astype(X, xp.float64)
