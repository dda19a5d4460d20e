"""Where a compact kernel's support is empty: the nearest-neighbour fallback."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from sklearn.utils.validation import check_is_fitted

from nwensemble._shared.backend import like_input


def support_fallback(estimator, X):
    """Which queries have no training row inside a compact head's support.

    A compact kernel (``kernel='epanechnikov'``, ``'biweight'`` or
    ``'triweight'``) gives zero weight to every training row farther than its
    radius from the query in the head's learned space. When no row is that
    close, the head predicts the target of the query's nearest training row
    (in the same space) instead: a finite answer, never NaN. This function
    says where that happened, for instance to spot queries far from the
    training data.

    Parameters
    ----------
    estimator : NWAttentionRegressor or MultiHeadNWRegressor
        Fitted with a compact kernel. For ``kernel='softmax'`` every training
        row has a positive weight and the result is all False.
    X : array-like of shape (n_queries, n_features)
        Query samples.

    Returns
    -------
    fallback : array of bool, shape (n_queries,) or (n_queries, n_heads)
        True where the head fell back to the nearest training row; one column
        per head for :class:`~nwensemble.MultiHeadNWRegressor`. In the
        namespace and on the device of ``X``.

    See Also
    --------
    NWAttentionRegressor : its ``n_support_fallback_`` counts the training
        rows whose leave-one-out estimate fell back.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import NWAttentionRegressor
    >>> from nwensemble.diagnostics import support_fallback
    >>> X, y = make_friedman1(n_samples=300, noise=1.0, random_state=0)
    >>> reg = NWAttentionRegressor(kernel="epanechnikov", random_state=0).fit(X, y)
    >>> far = np.full((1, X.shape[1]), 1e6)
    >>> support_fallback(reg, np.vstack([X[:2], far])).tolist()
    [False, False, True]
    """
    check_is_fitted(estimator)
    fell = estimator.predictor_.support_fallback(estimator.transform(X))
    fell = fell[:, 0] if estimator.components_.ndim == 2 else fell
    return like_input(X)(fell)
