"""What the estimators that wrap the library's estimators share (the
allocator, the residual stages): queries checked against what ``fit`` saw,
tags, and pickling on the host."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.utils.validation import check_is_fitted, validate_data

from nwensemble._shared.backend import get_namespace, same_namespace_or_raise, to_host
from nwensemble._shared.table import is_dataframe
from nwensemble._validation import as_table_rows, reject_dates


def kept_as_table(mask):
    """``_table`` for the ``mask`` of ``validate_fit_data``: whether it
    returned the rows as given, to be encoded (categorical columns), rather
    than as a validated array (numbers, with or without missing values),
    which is what the inner estimators were fitted on and what the queries
    must become."""
    return mask is not None and bool(mask.any())


def _named(X, names):
    """Rows of a table without column names (checked against ``names``,
    the training frame's, which warned once) as a frame with them, so that
    the inner estimators, fitted on the frame, do not warn again."""
    if names is None or is_dataframe(X):
        return X
    import pandas as pd

    return pd.DataFrame(X, columns=names)


class WrapperMixin:
    """For an estimator whose ``fit`` validates with ``validate_fit_data``
    and sets ``_fit_where`` (``backend.where`` of the training rows) and
    ``_table`` (whether they were a table to encode)."""

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
