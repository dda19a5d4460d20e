"""HeadAllocator: the number and size of heads under a budget, chosen by the
scaling rule or by cross-validation."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context, clone
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import GridSearchCV, check_cv
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from nwensemble._allocation import (
    candidate_allocations,
    check_budget,
    default_budget,
    theory_allocation,
)
from nwensemble._backend import (
    device,
    get_namespace,
    same_namespace_or_raise,
    to_host,
    to_numpy,
    where,
)
from nwensemble._multi_head import MultiHeadNWRegressor

# Successive halving keeps the best 1 / _HALVING_FACTOR of the candidates per
# round and gives them that factor more rows, as HalvingGridSearchCV does by
# default; no round screens on fewer rows than this (or all, when fewer):
# smaller samples rank the allocations meant for all the rows poorly.
_HALVING_FACTOR = 3
_HALVING_MIN_ROWS = 500


class HeadAllocator(RegressorMixin, BaseEstimator):
    """Choose the number of heads and their dimension under a budget.

    The budget ``D`` bounds the total dimension of all heads,
    ``n_heads * head_dim <= D``. ``strategy='theory'`` applies the library's
    scaling rule, ``head_dim* = floor(smoothness * log(n_samples / 10))`` (at
    least 1, at most ``min(n_features, D)``) and ``n_heads* = D // head_dim*``;
    ``strategy='cv'`` scores a shortlist of allocations around that point and
    keeps the best. The chosen model is refitted on all rows and predicts.

    Read more in the :ref:`User Guide <allocation>`.

    Parameters
    ----------
    estimator : estimator with ``n_heads`` and ``head_dim`` parameters, default=None
        The model whose heads are allocated; ``None`` means
        ``MultiHeadNWRegressor()``. Its other parameters are kept.

    budget : int, default=None
        Largest total dimension ``n_heads * head_dim``. ``None`` uses
        ``max(n_features, 4 * head_dim*)``: the heads together as wide as the
        input, or as :class:`MultiHeadNWRegressor`'s default four heads of
        the rule's dimension, whichever is wider, so that the shortlist holds
        both that model's allocation and one head as wide as the input.

    strategy : {'halving', 'cv', 'theory'}, default='halving'
        ``'theory'``: fit the rule's allocation only. ``'cv'``: cross-validate
        the shortlist of head dimensions ``d*/2, d*-1, d*, d*+1, 2 d*`` (within
        ``[1, min(n_features, budget)]``), each with ``budget // head_dim``
        heads (at most 32), plus one head of dimension ``min(n_features,
        budget)``, every candidate on all rows. ``'halving'``: the same
        shortlist by successive halving, as
        :class:`~sklearn.model_selection.HalvingGridSearchCV` does: every
        candidate is cross-validated on a random subsample, the best third
        go on to three times the rows, and so on until one is left, which is
        then fitted on all rows. No round uses fewer than 500 rows; below
        1500 rows it is one round of ``'cv'`` on all rows.

    smoothness : float, default=1.0
        Constant ``c`` of the rule ``head_dim* = c log(n / 10)``: how wide a
        kernel the target's smoothness allows (``exp(-1 / c)`` of the
        projected spread). Larger values give larger heads.

    cv : int, cross-validation generator, iterable or None, default=3
        Folds for ``strategy='cv'`` and ``'halving'`` (an iterable of splits
        only for ``'cv'``: halving splits each round's subsample anew, its
        rows drawn in random order, so that an integer ``cv`` gives shuffled
        folds), as in
        :class:`~sklearn.model_selection.GridSearchCV`. ``None`` scores each
        candidate in one fit on all rows by its exact leave-one-out error (no
        refits per fold, as :class:`~sklearn.linear_model.RidgeCV` does). That
        error is the one the fit minimises, so it favours larger allocations
        somewhat more than fold scores do.

    scoring : str, callable or None, default=None
        Scorer, as in :class:`~sklearn.model_selection.GridSearchCV`; ``None``
        uses the estimator's ``score`` (R^2).

    n_jobs : int, default=None
        Parallel jobs over candidates and folds, through joblib: under
        ``joblib.parallel_config(backend="dask")`` they run on a dask cluster.
        ``None`` means 1 unless in a joblib context; ``-1`` means all
        processors.

    refit : bool, default=True
        Refit the best allocation on all rows (``best_estimator_``), so that
        the allocator predicts. With ``cv=None`` or ``strategy='theory'`` the
        candidates are already fitted on all rows and nothing is refitted.

    random_state : int, RandomState instance or None, default=None
        Draws the subsamples of ``strategy='halving'``.

    Attributes
    ----------
    n_heads_ : int
        Chosen number of heads.

    head_dim_ : int
        Chosen dimension of each head.

    best_params_ : dict
        ``{'n_heads': n_heads_, 'head_dim': head_dim_}``.

    best_score_ : float
        Mean cross-validated score of the chosen allocation (its leave-one-out
        score with ``cv=None`` or ``strategy='theory'``).

    best_estimator_ : estimator
        The chosen model fitted on all rows; only with ``refit=True``.

    best_index_ : int
        Row of the chosen allocation in ``cv_results_``.

    cv_results_ : dict of ndarrays
        One entry per candidate (with ``'halving'``, per candidate and round),
        with the keys of :class:`~sklearn.model_selection.GridSearchCV`:
        ``params``, ``param_n_heads``, ``param_head_dim``,
        ``split<k>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, ``mean_fit_time``, ``std_fit_time``,
        ``mean_score_time``, ``std_score_time``; with ``'halving'`` also
        ``iter`` and ``n_resources`` (rows), as in
        :class:`~sklearn.model_selection.HalvingGridSearchCV`, where a later
        round ranks above every earlier one.

    n_resources_ : list of int
        Rows used in each round (``'halving'`` only).

    n_candidates_ : list of int
        Candidates scored in each round (``'halving'`` only).

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
        "strategy": [StrOptions({"halving", "cv", "theory"})],
        "smoothness": [Interval(Real, 0, None, closed="neither")],
        "cv": ["cv_object", None],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "n_jobs": [Integral, None],
        "refit": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        budget=None,
        strategy="halving",
        smoothness=1.0,
        cv=3,
        scoring=None,
        n_jobs=None,
        refit=True,
        random_state=None,
    ):
        self.estimator = estimator
        self.budget = budget
        self.strategy = strategy
        self.smoothness = smoothness
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.refit = refit
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.array_api_support = True
        return tags

    def __getstate__(self):
        """Pickle on the host, like the estimators (see
        :meth:`MultiHeadNWRegressor.__getstate__`): the loaded allocator
        predicts NumPy input."""
        state = to_host(super().__getstate__())
        if "_fit_where" in state:
            state["_fit_where"] = ("numpy", "cpu")
        return state

    def _base_estimator(self):
        base = MultiHeadNWRegressor() if self.estimator is None else self.estimator
        missing = {"n_heads", "head_dim"} - set(base.get_params(deep=False))
        if missing:
            raise ValueError(
                f"HeadAllocator needs an estimator with n_heads and head_dim "
                f"parameters (such as MultiHeadNWRegressor); "
                f"{type(base).__name__} lacks {sorted(missing)}."
            )
        return base

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
    def fit(self, X, y, sample_weight=None):
        """Score the candidate allocations and fit the best one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the estimator's ``fit`` (not used in scoring).

        Returns
        -------
        self : object
            Fitted allocator.
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
        n, p = X.shape
        self._fit_where = where(X)
        base = self._base_estimator()
        self.budget_ = self._budget(n, p)
        H, d = theory_allocation(n, p, self.budget_, self.smoothness)
        self.theory_allocation_ = {"n_heads": H, "head_dim": d}
        candidates = self._candidates(n, p)
        fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
        if self.strategy == "halving" and self.cv is not None:
            self._fit_halving(base, candidates, X, y, fit_params)
        elif self.strategy == "cv" and self.cv is not None:
            self._fit_cv(base, candidates, X, y, fit_params)
        else:
            self._fit_loo(base, candidates, X, y, fit_params)
        self.best_params_ = dict(self.cv_results_["params"][self.best_index_])
        self.n_heads_ = self.best_params_["n_heads"]
        self.head_dim_ = self.best_params_["head_dim"]
        return self

    def _fit_cv(self, base, candidates, X, y, fit_params):
        search = GridSearchCV(
            base,
            [{"n_heads": [H], "head_dim": [d]} for H, d in candidates],
            scoring=self.scoring,
            cv=self.cv,
            n_jobs=self.n_jobs,
            refit=self.refit,
            error_score="raise",
        ).fit(X, y, **fit_params)
        self.cv_results_ = search.cv_results_
        self.best_index_ = int(search.best_index_)
        self.best_score_ = float(search.best_score_)
        if self.refit:
            self.best_estimator_ = search.best_estimator_

    def _fit_halving(self, base, candidates, X, y, fit_params):
        """Successive halving over ``candidates``; refit the last one left."""
        xp, _ = get_namespace(X)
        rng = check_random_state(self.random_state)
        scorer = check_scoring(base, scoring=self.scoring)
        n = X.shape[0]
        sw = fit_params.get("sample_weight")
        alive = list(range(len(candidates)))
        rounds = max(math.ceil(math.log(len(candidates), _HALVING_FACTOR)), 1)
        tables, n_resources, n_candidates = [], [], []
        for r in range(rounds):
            m = _halving_rows(n, rounds - 1 - r)
            if n_resources and m == n_resources[-1]:
                break  # the rows cannot grow: the last round decides
            # in random order: folds of sorted data would extrapolate
            rows = rng.choice(n, m, replace=False)
            idx = xp.asarray(rows, device=device(X))
            Xr, yr = xp.take(X, idx, axis=0), xp.take(y, idx, axis=0)
            params = {} if sw is None else {"sample_weight": np.asarray(sw)[rows]}
            splits = list(check_cv(self.cv, to_numpy(yr)).split(to_numpy(Xr)))
            jobs = [(c, train, test) for c in alive for train, test in splits]
            out = Parallel(n_jobs=self.n_jobs)(
                delayed(_fit_and_score_split)(
                    clone(base).set_params(
                        n_heads=candidates[c][0], head_dim=candidates[c][1]
                    ),
                    Xr,
                    yr,
                    params,
                    train,
                    test,
                    scorer,
                )
                for c, train, test in jobs
            )
            k = len(splits)
            scores = np.array([o[0] for o in out]).reshape(len(alive), k)
            times = np.array([o[1:] for o in out]).reshape(len(alive), k, 2)
            tables.append(
                _results_table(
                    [candidates[c] for c in alive],
                    scores,
                    times[..., 0],
                    times[..., 1],
                    extra={"iter": r, "n_resources": m},
                )
            )
            n_resources.append(m)
            n_candidates.append(len(alive))
            order = np.argsort(-scores.mean(axis=1), kind="stable")
            keep = max(math.ceil(len(alive) / _HALVING_FACTOR), 1)
            alive = [alive[i] for i in order[:keep]]
            if len(alive) == 1:
                break
        H, d = candidates[alive[0]]  # the last round's best
        if self.refit:
            self.best_estimator_ = (
                clone(base).set_params(n_heads=H, head_dim=d).fit(X, y, **fit_params)
            )
        self.cv_results_ = _stack_rounds(tables)
        self.best_index_ = int(np.argmax(self.cv_results_["rank_test_score"] == 1))
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.n_resources_, self.n_candidates_ = n_resources, n_candidates

    def _fit_loo(self, base, candidates, X, y, fit_params):
        scorer = check_scoring(base, scoring=self.scoring)
        results = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_and_score_loo)(
                clone(base).set_params(n_heads=H, head_dim=d), X, y, fit_params, scorer
            )
            for H, d in candidates
        )
        scores = np.array([r[1] for r in results])
        fit_times = np.array([r[2] for r in results])
        score_times = np.array([r[3] for r in results])
        self.cv_results_ = _results_table(candidates, scores, fit_times, score_times)
        self.best_index_ = int(np.argmax(scores))
        self.best_score_ = float(scores[self.best_index_])
        if self.refit:
            self.best_estimator_ = results[self.best_index_][0]

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
        check_is_fitted(self)
        if not self.refit:
            raise AttributeError(
                "HeadAllocator was fitted with refit=False: it holds the scores "
                "only. Refit with refit=True to predict."
            )
        same_namespace_or_raise(X, self._fit_where, estimator=self, method="predict")
        xp, _ = get_namespace(X)
        X = validate_data(self, X, dtype=(xp.float64, xp.float32), reset=False)
        return self.best_estimator_.predict(X, **predict_params)


class _Predictions(RegressorMixin):
    """Stand-in estimator whose predictions are its input, for scorers."""

    def predict(self, X):
        return X


def _fit_and_score_loo(estimator, X, y, fit_params, scorer):
    """Fit on all rows; score the exact leave-one-out predictions."""
    start = time.perf_counter()
    estimator.fit(X, y, **fit_params)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    # Scored beside y: the model may compute elsewhere (device='cuda').
    back = estimator._like_input(X)
    loo = back(estimator._loo_prediction)
    loo = loo[:, 0] if estimator._y_ndim == 1 else loo
    if estimator._loo_rows is not None:  # large n: a random subset of rows
        xp, _ = get_namespace(y)
        y = xp.take(y, back(estimator._loo_rows), axis=0)
    score = float(scorer(_Predictions(), loo, y))
    return estimator, score, fit_time, time.perf_counter() - start


def _fit_and_score_split(estimator, X, y, fit_params, train, test, scorer):
    """Fit on the rows ``train``, score on ``test``; return score and times."""
    xp, _ = get_namespace(X)
    tr = xp.asarray(train, device=device(X))
    te = xp.asarray(test, device=device(X))
    params = {k: np.asarray(v)[train] for k, v in fit_params.items()}
    start = time.perf_counter()
    estimator.fit(xp.take(X, tr, axis=0), xp.take(y, tr, axis=0), **params)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    score = float(scorer(estimator, xp.take(X, te, axis=0), xp.take(y, te, axis=0)))
    return score, fit_time, time.perf_counter() - start


def _halving_rows(n_samples, rounds_after):
    """Rows of a halving round followed by ``rounds_after`` more: a
    ``_HALVING_FACTOR``-th of the next round's, the last round's a
    ``_HALVING_FACTOR``-th of all, never below ``_HALVING_MIN_ROWS``; all
    rows in every round when even the last would have fewer."""
    if n_samples < _HALVING_FACTOR * _HALVING_MIN_ROWS:
        return n_samples
    rows = math.ceil(n_samples / _HALVING_FACTOR ** (rounds_after + 1))
    return max(rows, _HALVING_MIN_ROWS)


def _results_table(candidates, scores, fit_times, score_times, extra=None):
    """``cv_results_`` in GridSearchCV's layout; ``scores`` and the times are
    (n_candidates,) for one leave-one-out 'split' or (n_candidates, k)."""
    n = len(candidates)
    scores, fit_times, score_times = (
        np.asarray(a, dtype=np.float64).reshape(n, -1)
        for a in (scores, fit_times, score_times)
    )
    params = [{"n_heads": H, "head_dim": d} for H, d in candidates]
    mean = scores.mean(axis=1)
    table = {
        "mean_fit_time": fit_times.mean(axis=1),
        "std_fit_time": fit_times.std(axis=1),
        "mean_score_time": score_times.mean(axis=1),
        "std_score_time": score_times.std(axis=1),
        "param_n_heads": np.array([H for H, _ in candidates]),
        "param_head_dim": np.array([d for _, d in candidates]),
        "params": params,
    }
    for k in range(scores.shape[1]):
        table[f"split{k}_test_score"] = scores[:, k]
    table["mean_test_score"] = mean
    table["std_test_score"] = scores.std(axis=1)
    table["rank_test_score"] = rankdata(-mean, method="min").astype(np.int32)
    for key, value in (extra or {}).items():
        table[key] = np.full(n, value)
    return table


def _stack_rounds(tables):
    """One ``cv_results_`` from the halving rounds' tables: rows in order,
    ranked round by round, later rounds first (as in HalvingGridSearchCV)."""
    results = {
        key: (
            sum((t[key] for t in tables), [])
            if key == "params"
            else np.concatenate([t[key] for t in tables])
        )
        for key in tables[0]
    }
    # rank by (round, mean score), the last round's best first
    order = np.lexsort((-results["mean_test_score"], -results["iter"]))
    rank = np.empty(order.shape[0], dtype=np.int32)
    rank[order] = np.arange(1, order.shape[0] + 1)
    results["rank_test_score"] = rank
    return results
