"""Single-head Nadaraya-Watson attention regressor with a learned projection."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble._docstrings import fill_doc
from nwensemble._regressor_base import BaseNWRegressor


class SingleHeadMixin:
    """One head of full weight, for the regressor and the classifier."""

    # components_ is (head_dim, n_features) rather than 3-D.
    _single_head = True

    def _fit_n_heads(self):
        return 1

    def _head_weights(self, fitted):
        return [1.0]


@fill_doc
class NWAttentionRegressor(SingleHeadMixin, BaseNWRegressor):
    """Nadaraya-Watson regression as single-head softmax attention.

    The prediction for a query ``x`` is an attention-weighted average of the
    training targets,

    ``f(x) = sum_i softmax_i(-||W^T (x - x_i)||^2 / 2) y_i``,

    which is softmax attention with the query and the keys projected by one
    learned matrix ``W`` (a Gaussian kernel in the learned space; the scale of
    ``W`` is the inverse bandwidth). ``W`` is learned by minimising the exact
    leave-one-out mean squared error (no training row attends to itself) with
    analytic gradients and L-BFGS, as metric learning for kernel regression
    (MLKR) does, but with fewer passes over the n x n scores and a
    coarse-to-fine schedule.

    Parameters
    ----------
    head_dim : int, default=None
        Dimension of the learned space. ``None`` uses ``n_features`` (a
        full-rank metric, as :class:`~sklearn.neighbors.NeighborhoodComponentsAnalysis`
        does with ``n_components=None``).

    %(kernel)s

    %(categorical_features)s

    %(single_head_init)s

    %(optimisation)s

    %(input)s

    %(local_fit)s

    %(feature_slopes)s

    %(run)s

    random_state : int, RandomState instance or None, default=None
        Seed of the subsamples and of ``init='random'``.

    %(verbose)s

    Attributes
    ----------
    %(single_head_attributes)s

    %(table_attributes)s

    %(regression_attributes)s

    %(fit_attributes)s

    See Also
    --------
    sklearn.neighbors.KNeighborsRegressor : Nearest-neighbour regression.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : Learned metric for classes.

    Notes
    -----
    Cost per loss evaluation: O(n^2 d + n p d) time and two n x n arrays, with
    ``n`` samples, ``p`` features and ``d = head_dim``. Prediction is chunked over
    query rows, so its memory is bounded by scikit-learn's ``working_memory``.

    Fitting with L-BFGS on more than 2048 samples first optimises on a random
    subsample of 1024 rows, then refines on all rows; ``n_iter_`` counts both
    stages.

    With ``sample_weight``, a sample's weight scales both its term in the loss and
    its weight as a key in the attention. The leave-one-out objective means
    that a sample repeated twice is not the same as a sample of weight two (the
    copy would be its own neighbour).

    References
    ----------
    .. [1] K. Q. Weinberger and G. Tesauro, "Metric Learning for Kernel
       Regression", AISTATS 2007.
    .. [2] E. Fokoue, "Multi-Head Attention as Ensemble Nadaraya-Watson
       Estimation", arXiv:2605.20271.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import NWAttentionRegressor
    >>> X, y = make_friedman1(n_samples=200, n_features=5, noise=0.1, random_state=0)
    >>> reg = NWAttentionRegressor(head_dim=2, random_state=0).fit(X, y)
    >>> reg.components_.shape
    (2, 5)
    >>> round(reg.score(X, y), 2) > 0.8
    True
    """

    _parameter_constraints: dict = {**BaseNWRegressor._parameter_constraints}

    def __init__(
        self,
        head_dim=None,
        *,
        kernel="softmax",
        categorical_features="from_dtype",
        init="auto",
        max_iter=200,
        tol=1e-5,
        solver="auto",
        batch_size="auto",
        early_stopping="auto",
        validation_fraction="auto",
        n_iter_no_change=10,
        standardize="power",
        duplicate_weight="auto",
        local_fit="auto",
        feature_slopes=False,
        warm_start=False,
        callback=None,
        device="auto",
        random_state=None,
        verbose=0,
    ):
        super().__init__(
            head_dim=head_dim,
            kernel=kernel,
            categorical_features=categorical_features,
            init=init,
            max_iter=max_iter,
            tol=tol,
            solver=solver,
            batch_size=batch_size,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            standardize=standardize,
            duplicate_weight=duplicate_weight,
            local_fit=local_fit,
            feature_slopes=feature_slopes,
            warm_start=warm_start,
            callback=callback,
            device=device,
            random_state=random_state,
            verbose=verbose,
        )
