"""Nadaraya-Watson attention classifiers: one head, and an ensemble of
heads, over class labels."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble._classifier_base import BaseNWClassifier
from nwensemble._docstrings import fill_doc
from nwensemble._multi_head import MULTI_HEAD_CONSTRAINTS, MultiHeadMixin
from nwensemble._single_head import SingleHeadMixin


@fill_doc
class NWAttentionClassifier(SingleHeadMixin, BaseNWClassifier):
    """Nadaraya-Watson classification as single-head softmax attention.

    The probability of class ``c`` at a query ``x`` is the attention paid to
    the training rows of that class,

    ``p_c(x) = sum_i softmax_i(-||W^T (x - x_i)||^2 / 2) 1[y_i = c]``,

    softmax attention over the one-hot class indicators: the probabilistic,
    kernel-regression form of neighbourhood components analysis (NCA). ``W``
    is learned by minimising the exact leave-one-out Brier score (the
    squared error of the probability vectors, every row predicted from the
    others) with analytic gradients, by the regressors' engine. The
    probabilities are then smoothed toward the class prior, ``(1 - a) p(x) +
    a prior``, with the weight ``a`` of least leave-one-out log-loss (at
    least ``1 / (n_samples + 1)``), so that none is exactly zero. Binary and
    multiclass problems are one model (no one-vs-rest).

    Read more in the :ref:`User Guide <classification>`.

    Parameters
    ----------
    head_dim : int, default=None
        Dimension of the learned space. ``None`` uses ``n_features``.

    %(kernel)s

    %(categorical_features)s

    class_weight : dict, 'balanced' or None, default=None
        Weights of the classes, multiplying ``sample_weight``: a dict keyed
        by label, or ``'balanced'`` for weights inversely proportional to the
        classes' frequencies (as in scikit-learn's classifiers). They weigh
        the rows in the loss and as keys of the attention, and so shift the
        probabilities toward the weighted classes.

    %(single_head_init)s

    %(optimisation)s

    %(input)s

    %(run)s

    random_state : int, RandomState instance or None, default=None
        Seed of the subsamples and of ``init='random'``.

    %(verbose)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.

    class_prior_ : array of shape (n_classes,)
        The classes' shares of the (weighted) training rows.

    prior_weight_ : float
        The weight ``a`` of ``class_prior_`` in the probabilities.

    loo_proba_ : array of shape (n_samples, n_classes)
        The exact leave-one-out probabilities of the training rows (each
        predicted from the others), smoothed as predictions are. Above 2048
        rows with positive weight only a random 2048 are computed; the others
        are NaN.

    calibration_rows_ : array of int
        The training rows that calibrate :meth:`predict_set`: those held out
        of the projections' fit (early stopping) when there were any, else
        every row with a leave-one-out probability and positive weight.

    calibration_scores_ : array of shape (n_calibration,)
        Their scores, one less the leave-one-out probability of their own
        class.

    %(single_head_attributes)s

    %(table_attributes)s

    %(fit_attributes)s

    See Also
    --------
    MultiHeadNWClassifier : Several heads, each in its own subspace.
    NWAttentionRegressor : The same model over numeric targets.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : A learned metric for k-NN.

    Notes
    -----
    The Brier score trains the projection because it is the regressors'
    objective on indicator targets, so every part of their engine (the
    compiled kernels, the solvers, categorical embeddings) serves it
    unchanged, and because it is bounded: a row whose class has no nearby
    rows costs at most 2, where its log-loss pulls the metric toward it
    without bound, which overfits small tables. The log-loss, by which the
    probabilities are scored, chooses their smoothing. The user guide
    compares the two objectives.

    References
    ----------
    .. [1] J. Goldberger, S. Roweis, G. Hinton and R. Salakhutdinov,
       "Neighbourhood Components Analysis", NIPS 2004.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from nwensemble import NWAttentionClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = NWAttentionClassifier(random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:1]).shape
    (1, 3)
    >>> float(clf.score(X, y)) > 0.9
    True
    """

    _parameter_constraints: dict = {**BaseNWClassifier._parameter_constraints}

    def __init__(
        self,
        head_dim=None,
        *,
        kernel="softmax",
        categorical_features="from_dtype",
        class_weight=None,
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
            class_weight=class_weight,
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
            warm_start=warm_start,
            callback=callback,
            device=device,
            random_state=random_state,
            verbose=verbose,
        )


@fill_doc
class MultiHeadNWClassifier(MultiHeadMixin, BaseNWClassifier):
    """Multi-head attention classification: an ensemble of Nadaraya-Watson
    heads over class labels.

    Each head ``h`` gives class probabilities by its attention over the
    training rows' one-hot classes in its own learned subspace, ``p_{h,c}(x)
    = sum_i softmax_i(-||W_h^T (x - x_i)||^2 / 2) 1[y_i = c]``, and the
    prediction is their weighted average, smoothed toward the class prior as
    in :class:`NWAttentionClassifier`. The projections are learned jointly on
    the ensemble's exact leave-one-out Brier score less ``diversity`` times
    the heads' ambiguity, as :class:`MultiHeadNWRegressor` learns them on
    numeric targets; for the Brier score the paper's quantities carry over
    exactly, so ``hdi_``, ``head_correlation_`` and ``bvc_decomposition_``
    describe the heads' probability vectors.

    Read more in the :ref:`User Guide <classification>`.

    Parameters
    ----------
    n_heads : int, default=4
        Number of heads.

    head_dim : int, default=None
        Dimension of each head's subspace. ``None`` follows the allocation rule
        of :class:`HeadAllocator`: ``floor(log(n_samples / 10))`` within 1 and
        ``n_features`` (all features for ``n_heads=1``).

    %(kernel)s

    %(categorical_features)s

    class_weight : dict, 'balanced' or None, default=None
        Weights of the classes, multiplying ``sample_weight`` (see
        :class:`NWAttentionClassifier`).

    %(multi_head_ensemble)s

    %(multi_head_init)s

    %(optimisation)s

    %(input)s

    %(run)s

    random_state : int, RandomState instance or None, default=None
        Seed of the initial directions, the subsamples and the resamples.

    %(verbose)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.

    class_prior_ : array of shape (n_classes,)
        The classes' shares of the (weighted) training rows.

    prior_weight_ : float
        The weight of ``class_prior_`` in the probabilities.

    loo_proba_ : array of shape (n_samples, n_classes)
        The exact leave-one-out probabilities of the training rows, smoothed
        as predictions are (NaN for rows not computed, above 2048).

    calibration_rows_ : array of int
        The training rows that calibrate :meth:`predict_set` (see
        :class:`NWAttentionClassifier`).

    calibration_scores_ : array of shape (n_calibration,)
        Their scores, one less the leave-one-out probability of their own
        class.

    %(multi_head_attributes)s

    %(table_attributes)s

    %(fit_attributes)s

    See Also
    --------
    NWAttentionClassifier : The single-head classifier.
    MultiHeadNWRegressor : The same model over numeric targets.

    Examples
    --------
    >>> from sklearn.datasets import load_wine
    >>> from nwensemble import MultiHeadNWClassifier
    >>> X, y = load_wine(return_X_y=True)
    >>> clf = MultiHeadNWClassifier(n_heads=3, random_state=0).fit(X, y)
    >>> clf.components_.shape[0]
    3
    >>> bool(0 <= clf.hdi_ <= 1)
    True
    >>> y_pred, y_sets = clf.predict_set(X[:2], confidence_level=0.9)
    >>> y_sets.shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseNWClassifier._parameter_constraints,
        **MULTI_HEAD_CONSTRAINTS,
    }

    def __init__(
        self,
        n_heads=4,
        *,
        head_dim=None,
        kernel="softmax",
        categorical_features="from_dtype",
        class_weight=None,
        n_members=1,
        diversity=0.0,
        head_weights="uniform",
        bvc_resamples=10,
        n_jobs=None,
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
            class_weight=class_weight,
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
            warm_start=warm_start,
            callback=callback,
            device=device,
            random_state=random_state,
            verbose=verbose,
        )
        self.n_heads = n_heads
        self.n_members = n_members
        self.diversity = diversity
        self.head_weights = head_weights
        self.bvc_resamples = bvc_resamples
        self.n_jobs = n_jobs
