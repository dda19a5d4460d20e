"""HeadAllocator: the number and size of heads under a budget, chosen by the
scaling rule or by cross-validation."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time
from numbers import Integral, Real

from sklearn.base import (
    BaseEstimator,
    RegressorMixin,
    _fit_context,
    clone,
    is_classifier,
)
from sklearn.metrics import get_scorer_names
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils._tags import ClassifierTags

from nwensemble._allocation_search import search_by_folds, search_by_loo
from nwensemble._atomic import atomic_fit
from nwensemble._best_estimator_proxy import ChosenModelMixin
from nwensemble._fit.allocation import (
    candidate_allocations,
    check_budget,
    default_budget,
    default_members,
    theory_allocation,
)
from nwensemble._fit.config import progress
from nwensemble._multi_head import MultiHeadNWRegressor
from nwensemble._wrapper import inner_estimator


class HeadAllocator(ChosenModelMixin, RegressorMixin, BaseEstimator):
    """Choose the number of heads and their dimension under a budget.

    The budget ``D`` bounds the total dimension of all heads,
    ``n_heads * head_dim <= D``. ``strategy='theory'`` applies the library's
    scaling rule, ``head_dim* = floor(smoothness * log(n_samples / 10))`` (at
    least 1, at most ``min(n_features, D)``) and ``n_heads* = D // head_dim*``;
    ``strategy='cv'`` (default) scores a shortlist of three allocations, the
    rule's, heads twice as large, and one head as wide as the budget allows,
    and keeps the best, by default by the exact leave-one-out error that
    every fit computes anyway. The chosen model, fitted on all rows,
    predicts.

    Read more in the :ref:`User Guide <allocation>`.

    Parameters
    ----------
    estimator : estimator with ``n_heads`` and ``head_dim`` parameters, default=None
        The model whose heads are allocated; ``None`` means
        ``MultiHeadNWRegressor()``. Its other parameters are kept. With a
        classifier (:class:`MultiHeadNWClassifier`) the allocator is a
        classifier.

    budget : int, default=None
        Largest total dimension ``n_heads * head_dim``. ``None`` uses
        ``max(n_features, 4 * head_dim*)``: the heads together as wide as the
        input, or as :class:`MultiHeadNWRegressor`'s default four heads of
        the rule's dimension, whichever is wider, so that the shortlist holds
        both that model's allocation and one head as wide as the input.

    strategy : {'cv', 'theory'}, default='cv'
        ``'theory'``: fit the rule's allocation only. ``'cv'``: score the
        shortlist of head dimensions ``d*`` and ``2 d*`` (within ``[1,
        min(n_features, budget)]``), each with ``budget // head_dim`` heads
        (at most 32), plus one head of dimension ``min(n_features, budget)``,
        by ``cv``.

    smoothness : float, default=1.0
        Constant ``c`` of the rule ``head_dim* = c log(n / 10)``: how wide a
        kernel the target's smoothness allows (``exp(-1 / c)`` of the
        projected spread). Larger values give larger heads.

    cv : int, cross-validation generator, iterable or None, default=None
        ``None`` fits each candidate once on all rows and scores its exact
        leave-one-out predictions (no refits per fold, as
        :class:`~sklearn.linear_model.RidgeCV` does); the best fit is the
        model. That error is the one the fit minimises, so it is optimistic,
        and somewhat more so for larger allocations (the User Guide compares
        it with fold scores). Otherwise the folds of a
        :class:`~sklearn.model_selection.GridSearchCV` over the shortlist
        (an integer gives unshuffled ``KFold``, as there), whose best
        allocation is then refitted on all rows.

    scoring : str, callable or None, default=None
        Scorer, as in :class:`~sklearn.model_selection.GridSearchCV`; ``None``
        uses a regressor's ``score`` (R^2) and a classifier's log-loss
        (``'neg_log_loss'``). With ``cv=None`` a classifier is scored on the
        leave-one-out probabilities (``loo_proba_``) of its calibration rows
        (``calibration_rows_``): the rows held out of the projections' fit
        where there are any, which make the score less optimistic for larger
        allocations, else all rows.

    n_jobs : int, default=None
        Parallel jobs over candidates and folds, through joblib: under
        ``joblib.parallel_config(backend="dask")`` they run on a dask cluster.
        ``None`` means 1 unless in a joblib context; ``-1`` means all
        processors.

    refit : bool, default=True
        Keep the best allocation fitted on all rows (``best_estimator_``),
        so that the allocator predicts. With ``cv=None`` or
        ``strategy='theory'`` the candidates are already fitted on all rows
        and nothing is refitted unless ``n_members`` asks for more members.

    n_members : int or 'auto', default='auto'
        Members of ``best_estimator_`` (see
        :class:`MultiHeadNWRegressor`'s ``n_members``): the candidates are
        scored as the estimator is given, then the best allocation is
        refitted on all rows with this many members when it differs from
        the estimator's own. ``'auto'`` keeps the estimator's own when it is
        not 1 (or when it has no ``n_members``), else takes ``4096 //
        n_samples`` members within 1 and 4 (4 up to 1024 rows, 1 above
        2048): on small tables a fit's random draws move its error by
        several per cent and the members average them out, at about the
        cost of one fit on 4096 rows (the user guide's allocation page has
        the figures). Needs an estimator with an ``n_members`` parameter
        unless it resolves to 1.

    random_state : int, RandomState instance or None, default=None
        Given to every candidate as its ``random_state`` (the estimator's
        own is kept when None), so that two fits on the same data choose
        the same allocation and predict alike.

    verbose : int, default=0
        Progress on stdout: with ``cv=None``, one line per fitted candidate
        with its score, the time elapsed and an estimate of the time left;
        with folds, GridSearchCV's own lines (its ``verbose=3``).

    Attributes
    ----------
    n_heads_ : int
        Chosen number of heads.

    head_dim_ : int
        Chosen dimension of each head.

    best_params_ : dict
        ``{'n_heads': n_heads_, 'head_dim': head_dim_}``.

    n_members_ : int
        Members of the chosen model (of ``best_estimator_`` with
        ``refit=True``); 1 for an estimator without ``n_members``.

    best_score_ : float
        Mean cross-validated score of the chosen allocation (its leave-one-out
        score with ``cv=None`` or ``strategy='theory'``).

    best_estimator_ : estimator
        The chosen model fitted on all rows; only with ``refit=True``. The
        allocator predicts through it (``predict``, ``predict_interval``,
        ``transform``, ``attention_weights``) and reads its fitted
        diagnostics as its own attributes: ``components_``, ``hdi_``,
        ``bvc_decomposition_``, ``head_weights_``, ``head_correlation_``,
        ``subspace_similarity_``, ``principal_angles_``, ``diversity_``,
        ``loo_prediction_``, ``calibration_rows_``,
        ``calibration_residuals_``, ``n_support_fallback_``,
        ``duplicate_weight_``, ``local_fit_``, ``local_ridge_``,
        ``is_categorical_``, ``categories_``, ``infrequent_categories_``,
        ``embeddings_``, ``missing_embeddings_``, ``n_iter_``, ``n_fev_``
        and ``loss_curve_``; for a classifier (which also gives
        ``predict_proba``, ``predict_log_proba`` and ``predict_set``)
        ``classes_``, ``class_prior_``, ``prior_weight_``, ``loo_proba_``
        and ``calibration_scores_`` in place of the leave-one-out
        predictions, their residuals, ``local_fit_`` and
        ``local_ridge_``.

    best_index_ : int
        Row of the chosen allocation in ``cv_results_``.

    cv_results_ : dict of ndarrays
        One entry per candidate, with the keys of
        :class:`~sklearn.model_selection.GridSearchCV`: ``params``,
        ``param_n_heads``, ``param_head_dim``, ``split<k>_test_score``,
        ``mean_test_score``, ``std_test_score``, ``rank_test_score``,
        ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``,
        ``std_score_time`` (one split, ``split0``, with ``cv=None``).

    theory_allocation_ : dict
        The rule's ``{'n_heads': ..., 'head_dim': ...}`` for this data.

    budget_ : int
        The budget used (``budget`` or its default).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X` has
        feature names that are all strings.

    See Also
    --------
    MultiHeadNWRegressor : The default estimator.
    MultiHeadNWClassifier : The classifier whose heads it allocates alike.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import HeadAllocator
    >>> X, y = make_friedman1(n_samples=200, noise=0.5, random_state=0)
    >>> alloc = HeadAllocator(budget=6, cv=3).fit(X, y)
    >>> alloc.n_heads_ * alloc.head_dim_ <= 6
    True
    >>> alloc.theory_allocation_
    {'n_heads': 3, 'head_dim': 2}
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict", "get_params"]), None],
        "budget": [Integral, None],
        "strategy": [StrOptions({"cv", "theory"})],
        "smoothness": [Interval(Real, 0, None, closed="neither")],
        "cv": ["cv_object", None],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "n_jobs": [Integral, None],
        "refit": ["boolean"],
        "n_members": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        budget=None,
        strategy="cv",
        smoothness=1.0,
        cv=None,
        scoring=None,
        n_jobs=None,
        refit=True,
        n_members="auto",
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.budget = budget
        self.strategy = strategy
        self.smoothness = smoothness
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.refit = refit
        self.n_members = n_members
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if is_classifier(self._given_estimator()):
            # An allocator of a classifier's heads is a classifier.
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
            tags.regressor_tags = None
            tags.target_tags.multi_output = False
        return tags

    def _scoring(self, base):
        """``scoring``, or the log-loss for a classifier when None."""
        if self.scoring is None and is_classifier(base):
            return "neg_log_loss"
        return self.scoring

    def _given_estimator(self):
        """The estimator whose heads are allocated, as given (unfitted)."""
        return MultiHeadNWRegressor() if self.estimator is None else self.estimator

    def _base_estimator(self):
        base = self._given_estimator()
        params = base.get_params(deep=False)
        missing = {"n_heads", "head_dim"} - set(params)
        if missing:
            raise ValueError(
                f"HeadAllocator needs an estimator with n_heads and head_dim "
                f"parameters (such as MultiHeadNWRegressor); "
                f"{type(base).__name__} lacks {sorted(missing)}."
            )
        return inner_estimator(base, random_state=self.random_state)

    def _members(self, base, n_samples):
        """The members of the estimator ``base`` (1 when it has no
        ``n_members``) and of the chosen model: ``n_members`` resolved for
        ``n_samples`` rows."""
        params = base.get_params(deep=False)
        has = "n_members" in params
        own = params["n_members"] if has else 1
        if self.n_members == "auto":
            return own, own if own != 1 or not has else default_members(n_samples)
        if self.n_members != own and not has:
            raise ValueError(
                f"n_members={self.n_members} needs an estimator with an n_members "
                f"parameter (such as MultiHeadNWRegressor); "
                f"{type(base).__name__} has none."
            )
        return own, self.n_members

    def _budget(self, n_samples, n_features):
        budget = (
            default_budget(n_samples, n_features, self.smoothness)
            if self.budget is None
            else self.budget
        )
        check_budget(budget)
        return int(budget)

    def param_grid(self, n_samples, n_features=None):
        """The candidate allocations as a grid for ``GridSearchCV``.

        Parameters
        ----------
        n_samples : int
            Training rows the candidates are meant for (they set ``head_dim*``).
        n_features : int, default=None
            Number of features; needed when ``budget`` is None and the
            allocator is not fitted (otherwise ``n_features_in_`` is used).

        Returns
        -------
        grid : list of dict
            ``[{'n_heads': [H], 'head_dim': [d]}, ...]``, usable as
            ``GridSearchCV(MultiHeadNWRegressor(), allocator.param_grid(n))``.
            With ``strategy='theory'``, the rule's allocation only.
        """
        if n_features is None:
            n_features = getattr(self, "n_features_in_", None)
        if n_features is None:
            if self.budget is None:
                raise ValueError(
                    "param_grid needs n_features when budget is None and the "
                    "allocator is not fitted."
                )
            n_features = self.budget
        return [
            {"n_heads": [H], "head_dim": [d]}
            for H, d in self._candidates(int(n_samples), int(n_features))
        ]

    def _candidates(self, n_samples, n_features):
        budget = self._budget(n_samples, n_features)
        if self.strategy == "theory":
            return [theory_allocation(n_samples, n_features, budget, self.smoothness)]
        return candidate_allocations(n_samples, n_features, budget, self.smoothness)

    @_fit_context(prefer_skip_nested_validation=False)
    @atomic_fit
    def fit(self, X, y, sample_weight=None, groups=None):
        """Score the candidate allocations and fit the best one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the estimator's ``fit`` (not used in scoring).
        groups : array-like of shape (n_samples,), default=None
            Group labels of the rows, for a ``cv`` splitter that keeps each
            group in one fold (such as
            :class:`~sklearn.model_selection.GroupKFold`), as
            :class:`~sklearn.model_selection.GridSearchCV` takes them: where
            new rows will not share a group with the training rows (another
            patient, a later day), a score that keeps a row's group mates
            among the keys favours the candidate that recognises the group.
            Leave-one-out scoring (``cv=None``) cannot keep groups together,
            so ``groups`` then needs a splitter; not used with
            ``strategy='theory'``.

        Returns
        -------
        self : object
            Fitted allocator.
        """
        if groups is not None and self.strategy == "cv" and self.cv is None:
            raise ValueError(
                "groups needs a cv splitter that keeps each group in one fold, "
                "for example cv=GroupKFold(5): with cv=None the candidates are "
                "scored by leave-one-out, which leaves out one row, not its group."
            )
        base = self._base_estimator()
        X, y, fit_params = self._fit_rows(
            X,
            y,
            sample_weight,
            categorical_features=getattr(base, "categorical_features", None),
            as_given=True,
            labels=is_classifier(base),
        )
        n, p = X.shape
        self.budget_ = self._budget(n, p)
        H, d = theory_allocation(n, p, self.budget_, self.smoothness)
        self.theory_allocation_ = {"n_heads": H, "head_dim": d}
        candidates = self._candidates(n, p)
        search = dict(
            scoring=self._scoring(base), n_jobs=self.n_jobs, verbose=self.verbose
        )
        own_members, members = self._members(base, n)
        if self.strategy == "cv" and self.cv is not None:
            found = search_by_folds(
                base,
                candidates,
                X,
                y,
                fit_params,
                cv=self.cv,
                groups=groups,
                refit=self.refit and members == own_members,
                **search,
            )
        else:
            scored = base
            if self.refit and members != own_members:
                # The refit with members computes the chosen model's
                # decomposition; the candidates' own would be discarded.
                scored = _without_decomposition(base)
            # The rule's allocation alone needs no score to be chosen.
            found = search_by_loo(
                scored,
                candidates,
                X,
                y,
                fit_params,
                required=self.strategy == "cv",
                **search,
            )
        cv_results, best_index, best_score, best = found
        best_params = dict(cv_results["params"][best_index])
        if self.refit and members != own_members:
            chosen = best
            best = clone(base).set_params(**best_params, n_members=members)
            if chosen is not None and isinstance(best.random_state, Integral):
                # Fitted on the same rows with the same seed, the chosen
                # candidate is the refit's first member.
                best._given_first_member = chosen._first_member
            start = time.perf_counter()
            if self.verbose:
                print(
                    f"[HeadAllocator] refitting n_heads={best_params['n_heads']}, "
                    f"head_dim={best_params['head_dim']} with {members} members "
                    "on all rows ...",
                    flush=True,
                )
            best.fit(X, y, **fit_params)
            progress("HeadAllocator", self.verbose, "refit with members", start)
        self.cv_results_, self.best_index_, self.best_score_ = (
            cv_results,
            best_index,
            best_score,
        )
        self.best_params_ = best_params
        if self.refit:
            self.best_estimator_ = best
        self.n_members_ = int(members)
        self.n_heads_ = self.best_params_["n_heads"]
        self.head_dim_ = self.best_params_["head_dim"]
        return self


def _without_decomposition(estimator):
    """``estimator`` with ``bvc_resamples=0`` where it has that parameter."""
    if "bvc_resamples" not in estimator.get_params(deep=False):
        return estimator
    return clone(estimator).set_params(bvc_resamples=0)
