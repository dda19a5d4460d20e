"""What the estimators that wrap the library's estimators share (the
allocator, the residual stages): queries checked against what ``fit`` saw,
tags, and pickling on the host."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted, validate_data

from nwensemble._shared.backend import (
    get_namespace,
    same_namespace_or_raise,
    to_host,
    where,
)
from nwensemble._shared.table import as_pandas, is_dataframe
from nwensemble._validation import as_table_rows, reject_dates, validate_fit_data


def inner_estimator(estimator, *, random_state, verbose=None):
    """A clone of ``estimator`` with the wrapper's ``random_state`` (where
    given and the estimator has one) and, where the estimator's own is 0,
    its ``verbose``."""
    inner = clone(estimator)
    params = inner.get_params(deep=False)
    if random_state is not None and "random_state" in params:
        inner.set_params(random_state=random_state)
    if verbose and params.get("verbose") == 0:
        inner.set_params(verbose=verbose)
    return inner


def _named(X, names):
    """Rows of a table without column names (checked against ``names``,
    the training frame's, which warned once) as a frame with them, so that
    the inner estimators, fitted on the frame, do not warn again."""
    if names is None or is_dataframe(X):
        return X
    import pandas as pd

    return pd.DataFrame(X, columns=names)


class WrapperMixin:
    """For an estimator whose ``fit`` starts with ``_fit_rows``."""

    def _fit_rows(
        self, X, y, sample_weight, *, categorical_features, as_given=False, labels=False
    ):
        """``fit``'s preamble: ``X`` and ``y`` validated for the inner
        estimators (see ``validate_fit_data``; ``categorical_features`` the
        first inner estimator's), the queries' reference set
        (``_fit_where``, the training rows' ``backend.where``; ``_table``,
        whether they are a table to encode rather than a validated array),
        and the inner fits' parameters. Returns ``X, y, fit_params``.

        ``as_given``: a DataFrame goes to the inner estimators as it came,
        so that they hold its column names and validate queries against
        them (a wrapper that hands each query to one inner estimator then
        need not validate it itself). ``labels``: ``y`` holds class labels
        (for an inner classifier), not numbers."""
        given = as_pandas(X) if as_given else None
        X, y, mask = validate_fit_data(
            self, X, y, categorical_features=categorical_features, labels=labels
        )
        if is_dataframe(given):
            X = given
        self._fit_where = where(X)
        self._table = mask is not None and bool(mask.any())
        fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
        return X, y, fit_params

    def _validated_query(self, X, method):
        """Query rows for the fitted inner estimators, in the training
        rows' namespace and with their features."""
        check_is_fitted(self)
        reject_dates(X)
        same_namespace_or_raise(X, self._fit_where, estimator=self, method=method)
        if self._table:
            X = as_table_rows(X)
            validate_data(self, X, skip_check_array=True, reset=False)
            return _named(X, getattr(self, "feature_names_in_", None))
        xp, _ = get_namespace(X)
        return validate_data(
            self,
            X,
            dtype=(xp.float64, xp.float32),
            ensure_all_finite="allow-nan",
            reset=False,
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.input_tags.allow_nan = True
        tags.array_api_support = True
        return tags

    def __getstate__(self):
        """Pickle on the host, like the estimators (see
        :meth:`MultiHeadNWRegressor.__getstate__`): the loaded model
        predicts NumPy input."""
        state = to_host(super().__getstate__())
        if "_fit_where" in state:
            state["_fit_where"] = ("numpy", "cpu")
        return state
