"""How ``HeadAllocator`` scores its candidate allocations: by the folds of a
grid search, or without folds (each candidate fitted once and scored by its
exact leave-one-out predictions), with the results in ``GridSearchCV``'s
layout."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import rankdata
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    clone,
    is_classifier,
)
from sklearn.metrics import check_scoring
from sklearn.model_selection import GridSearchCV

from nwensemble._shared.backend import get_namespace, like_input, to_numpy


def search_by_folds(base, candidates, X, y, fit_params, *, cv, groups, refit, **search):
    """A ``GridSearchCV`` over ``candidates`` (``(n_heads, head_dim)``
    pairs), ``groups`` (or None) for its splitter; returns ``(cv_results,
    best_index, best_score, best_estimator)`` (the last None without
    ``refit``)."""
    grid = GridSearchCV(
        base,
        [{"n_heads": [H], "head_dim": [d]} for H, d in candidates],
        scoring=search["scoring"],
        cv=cv,
        n_jobs=search["n_jobs"],
        refit=refit,
        error_score="raise",
        verbose=3 if search["verbose"] else 0,
    ).fit(X, y, groups=groups, **fit_params)
    best = grid.best_estimator_ if refit else None
    return grid.cv_results_, int(grid.best_index_), float(grid.best_score_), best


def search_by_loo(base, candidates, X, y, fit_params, *, required, **search):
    """Fit every candidate on all rows and score its leave-one-out
    predictions (a score is ``required`` unless the first candidate is
    chosen anyway); with ``verbose``, report each as it finishes. Returns
    what ``search_by_folds`` does, the best fit as the estimator."""
    scorer = check_scoring(base, scoring=search["scoring"])
    verbose = search["verbose"]
    tasks = [
        delayed(fit_and_score_loo)(
            clone(base).set_params(n_heads=H, head_dim=d),
            X,
            y,
            fit_params,
            scorer,
            required=required,
            announce=f"n_heads={H}, head_dim={d}" if verbose else None,
        )
        for H, d in candidates
    ]
    label = score_label(search["scoring"])
    if verbose:
        listed = ", ".join(f"({H}, {d})" for H, d in candidates)
        print(
            f"[HeadAllocator] {len(tasks)} candidates (n_heads, head_dim): "
            f"{listed}; each fitted on all {X.shape[0]} rows and scored by "
            f"its leave-one-out {label}",
            flush=True,
        )
    start = time.perf_counter()
    results = []
    parallel = Parallel(n_jobs=search["n_jobs"], return_as="generator")
    for (H, d), result in zip(candidates, parallel(tasks)):
        results.append(result)
        if verbose:
            elapsed = time.perf_counter() - start
            left = elapsed / len(results) * (len(tasks) - len(results))
            print(
                f"[HeadAllocator] n_heads={H}, head_dim={d}: leave-one-out "
                f"{label}={result[1]:.4f}  elapsed={elapsed:.1f}s  left~{left:.0f}s",
                flush=True,
            )
    scores = np.array([r[1] for r in results])
    fit_times = np.array([r[2] for r in results])
    score_times = np.array([r[3] for r in results])
    table = results_table(candidates, scores, fit_times, score_times)
    best = int(np.argmax(scores))
    return table, best, float(scores[best]), results[best][0]


class _Predictions(RegressorMixin):
    """Stand-in estimator whose predictions are its input, for scorers."""

    def predict(self, X):
        return X


class _Probabilities(ClassifierMixin, BaseEstimator):
    """Stand-in classifier whose class probabilities are its input, for
    scorers (``classes_`` set after construction)."""

    def predict_proba(self, X):
        return X

    def predict(self, X):
        return self.classes_[np.argmax(X, axis=1)]


def score_label(scoring):
    """How progress lines name the score: the scorer's name, or the
    regressors' own ``score``, R², for None (a classifier's is resolved to
    the log-loss before)."""
    if scoring is None:
        return "R2"
    return scoring if isinstance(scoring, str) else "score"


def fit_and_score_loo(
    estimator, X, y, fit_params, scorer, *, required=True, announce=None
):
    """Fit on all rows; score the exact leave-one-out predictions (a
    classifier's probabilities at its calibration rows; NaN for an
    estimator without them, unless a score is ``required``). ``announce``:
    a progress line's name of the candidate, printed as its fit starts."""
    if announce is not None:
        print(f"[HeadAllocator] fitting {announce} ...", flush=True)
    start = time.perf_counter()
    estimator.fit(X, y, **fit_params)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    classifier = is_classifier(estimator)
    loo = getattr(estimator, "loo_proba_" if classifier else "loo_prediction_", None)
    if loo is None and not required:
        return estimator, float("nan"), fit_time, time.perf_counter() - start
    if loo is None:
        raise TypeError(
            f"HeadAllocator with cv=None scores the leave-one-out predictions "
            f"of each fit (loo_prediction_), which {type(estimator).__name__} "
            "does not give; pass cv=5 (or another splitter) instead."
        )
    if classifier:
        # Scored on the calibration rows: those held out of the projections'
        # fit where there are any, whose probabilities owe nothing to it (the
        # other rows favour larger allocations), else every computed row.
        # Labels of any type: scored as NumPy.
        rows = to_numpy(estimator.calibration_rows_)
        y, loo = to_numpy(y)[rows], to_numpy(loo)[rows]
        stand_in = _Probabilities()
        stand_in.classes_ = to_numpy(estimator.classes_)
        score = float(scorer(stand_in, loo, y))
        return estimator, score, fit_time, time.perf_counter() - start
    # Scored beside y: the model may compute elsewhere (device='cuda').
    loo = like_input(y)(loo)
    xp, _ = get_namespace(y)
    # Above 2048 rows only a random subset has leave-one-out predictions.
    computed = xp.isfinite(loo) if loo.ndim == 1 else xp.all(xp.isfinite(loo), axis=1)
    if not bool(xp.all(computed)):
        rows = xp.nonzero(computed)[0]
        loo, y = xp.take(loo, rows, axis=0), xp.take(y, rows, axis=0)
    score = float(scorer(_Predictions(), loo, y))
    return estimator, score, fit_time, time.perf_counter() - start


def results_table(candidates, scores, fit_times, score_times):
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
    # A score that could not be taken (NaN) ranks last.
    order = np.where(np.isnan(mean), np.inf, -mean)
    table["rank_test_score"] = rankdata(order, method="min").astype(np.int32)
    return table
