"""HeadAllocator: the rule, the budget, cross-validation and meta-estimation."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.datasets import make_friedman1
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nwensemble import HeadAllocator, MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit.allocation import (
    DEFAULT_HEADS,
    candidate_allocations,
    default_budget,
    default_members,
    theory_allocation,
    theory_head_dim,
)

# The fast settings stop short on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def small():
    X, y = make_friedman1(n_samples=120, n_features=6, noise=0.5, random_state=0)
    return X, y


def _fast(**kw):
    return MultiHeadNWRegressor(max_iter=15, bvc_resamples=0, random_state=0, **kw)


@pytest.mark.slow
def test_grid_search_over_budget(small):
    """GridSearchCV(HeadAllocator(budget=4), {'budget': [4, 8]}) fits and
    exposes the chosen allocator."""
    X, y = small
    search = GridSearchCV(
        HeadAllocator(_fast(), budget=4, cv=3), {"budget": [4, 8]}, cv=3
    ).fit(X, y)
    best = search.best_estimator_
    assert best.budget in (4, 8)
    assert best.n_heads_ * best.head_dim_ <= best.budget
    assert search.predict(X[:3]).shape == (3,)


def test_pipeline_after_scaler(small):
    X, y = small
    pipe = make_pipeline(StandardScaler(), HeadAllocator(_fast(), budget=4, cv=3))
    pipe.fit(X, y)
    assert pipe.predict(X[:5]).shape == (5,)
    assert pipe[-1].n_heads_ * pipe[-1].head_dim_ <= 4


def test_clone_and_deep_params_expose_the_estimator():
    alloc = HeadAllocator(MultiHeadNWRegressor(diversity=0.2), budget=6)
    params = alloc.get_params(deep=True)
    assert params["estimator__diversity"] == 0.2
    assert "estimator__n_heads" in params and "estimator__random_state" in params
    twin = clone(alloc).set_params(estimator__diversity=0.5)
    assert twin.estimator.diversity == 0.5 and alloc.estimator.diversity == 0.2


@given(
    st.integers(2, 10**7),
    st.integers(1, 300),
    st.integers(1, 500),
    st.floats(0.05, 20.0),
)
def test_every_allocation_fits_the_budget(n, p, budget, smoothness):
    """Theory point and every candidate: n_heads * head_dim <= budget, with
    1 <= head_dim <= n_features and at least one head."""
    allocations = candidate_allocations(n, p, budget, smoothness)
    allocations.append(theory_allocation(n, p, budget, smoothness))
    for H, d in allocations:
        assert H >= 1 and 1 <= d <= p
        assert H * d <= budget


@pytest.mark.parametrize("budget", [0, -3])
def test_budget_no_allocation_fits(small, budget):
    X, y = small
    with pytest.raises(ValueError, match="fits no allocation"):
        HeadAllocator(budget=budget).fit(X, y)
    with pytest.raises(ValueError, match="at least 1"):
        theory_allocation(100, 5, budget, 1.0)


def test_fitted_allocations_fit_the_budget(small):
    X, y = small
    for budget in (1, 3, 7, 40):
        alloc = HeadAllocator(_fast(), budget=budget, cv=None).fit(X, y)
        assert alloc.n_heads_ * alloc.head_dim_ <= budget
        assert alloc.best_estimator_.components_.shape[:2] == (
            alloc.n_heads_ * alloc.n_members_,
            alloc.head_dim_,
        )


@pytest.mark.parametrize("smoothness", [0.5, 1.0, 2.0])
def test_theory_head_dim_grows_like_log_n(smoothness):
    """head_dim* is non-decreasing in n and head_dim* / log n -> smoothness."""
    ns = np.unique(np.logspace(1, 15, 200).astype(np.int64))
    dims = [theory_head_dim(int(n), smoothness, max_dim=10**6) for n in ns]
    assert np.all(np.diff(dims) >= 0)
    for n, d in zip(ns, dims):
        # floor(c log(n / 10)), at least 1: within one of c log n - c log 10.
        assert abs(d - max(smoothness * math.log(n / 10), 1)) <= 1
    assert dims[-1] / math.log(ns[-1]) == pytest.approx(smoothness, rel=0.2)


def test_strategy_theory_fits_the_rule(small):
    X, y = small
    alloc = HeadAllocator(_fast(), budget=9, strategy="theory").fit(X, y)
    assert alloc.best_params_ == alloc.theory_allocation_
    d = theory_head_dim(X.shape[0], 1.0, 6)
    assert alloc.theory_allocation_ == {"n_heads": 9 // d, "head_dim": d}
    assert len(alloc.cv_results_["params"]) == 1


def test_cv_results_layout(small):
    X, y = small
    for cv in (3, None):
        alloc = HeadAllocator(_fast(), budget=8, cv=cv).fit(X, y)
        res = alloc.cv_results_
        for key in (
            "params",
            "param_n_heads",
            "param_head_dim",
            "split0_test_score",
            "mean_test_score",
            "std_test_score",
            "rank_test_score",
            "mean_fit_time",
            "mean_score_time",
        ):
            assert key in res, key
        best = int(np.argmin(res["rank_test_score"]))
        assert res["params"][best] == alloc.best_params_
        assert alloc.best_score_ == pytest.approx(res["mean_test_score"][best])


def test_param_grid_for_users_own_search(small):
    X, y = small
    alloc = HeadAllocator(budget=8)
    grid = alloc.param_grid(X.shape[0], n_features=X.shape[1])
    search = GridSearchCV(_fast(), grid, cv=3).fit(X, y)
    H, d = search.best_params_["n_heads"], search.best_params_["head_dim"]
    assert H * d <= 8
    assert len(grid) == len(candidate_allocations(X.shape[0], X.shape[1], 8, 1.0))
    with pytest.raises(ValueError, match="n_features"):
        HeadAllocator().param_grid(100)


def test_refit_false_keeps_scores_only(small):
    X, y = small
    alloc = HeadAllocator(_fast(), budget=4, cv=3, refit=False).fit(X, y)
    assert not hasattr(alloc, "best_estimator_")
    with pytest.raises(AttributeError, match="refit=False"):
        alloc.predict(X)


def test_predict_passes_return_std(small):
    X, y = small
    alloc = HeadAllocator(_fast(), budget=4, cv=None).fit(X, y)
    pred, std = alloc.predict(X[:4], return_std=True)
    assert_allclose(pred, alloc.best_estimator_.predict(X[:4]))
    assert std.shape == (4,)


def test_estimator_without_heads_is_refused(small):
    X, y = small
    with pytest.raises(ValueError, match="n_heads and head_dim"):
        HeadAllocator(NWAttentionRegressor()).fit(X, y)


class _HeadsWithoutLOO(RegressorMixin, BaseEstimator):
    """Has n_heads and head_dim but no leave-one-out predictions."""

    def __init__(self, n_heads=1, head_dim=1):
        self.n_heads = n_heads
        self.head_dim = head_dim

    def fit(self, X, y):
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.mean_)


def test_strategies_ask_only_for_what_they_need(small):
    """cv=None needs loo_prediction_ and says so; folds and the rule's
    allocation do not."""
    X, y = small
    with pytest.raises(TypeError, match="loo_prediction_.*cv=5"):
        HeadAllocator(_HeadsWithoutLOO(), budget=4, cv=None).fit(X, y)
    alloc = HeadAllocator(_HeadsWithoutLOO(), budget=4, cv=3).fit(X, y)
    assert np.isfinite(alloc.best_score_)
    alloc = HeadAllocator(_HeadsWithoutLOO(), budget=4, strategy="theory").fit(X, y)
    assert np.isnan(alloc.best_score_)
    assert_allclose(alloc.predict(X[:3]), np.mean(y))


@pytest.mark.slow
def test_leave_one_out_chooses_like_five_fold_cv_and_is_optimistic():
    """cv=None picks a candidate that 5-fold CV scores within 0.01 (R^2) of
    its best on Friedman #1 (600 rows, budget 16), and scores every candidate
    higher than the folds do: the projections were learned on the rows it
    scores. The candidates there are within 0.01 of each other, so the two
    need not pick the same one (benchmarks/levers/bench_allocator.py)."""
    X, y = make_friedman1(n_samples=600, noise=1.0, random_state=1)
    est = MultiHeadNWRegressor(random_state=0, bvc_resamples=0, local_fit="constant")
    loo = HeadAllocator(est, budget=16, cv=None).fit(X, y)
    folds = HeadAllocator(
        est, budget=16, strategy="cv", cv=KFold(5, shuffle=True, random_state=0)
    )
    folds.fit(X, y)
    scores = folds.cv_results_["mean_test_score"]
    chosen = folds.cv_results_["params"].index(loo.best_params_)
    assert scores[chosen] >= scores.max() - 0.01
    assert np.all(
        loo.cv_results_["mean_test_score"] > folds.cv_results_["mean_test_score"]
    )


@pytest.mark.slow
def test_dask_backend_gives_the_same_scores(small):
    """GridSearchCV over HeadAllocator on a 2-worker dask LocalCluster gives
    exactly the scores of joblib's default backend."""
    distributed = pytest.importorskip("dask.distributed")
    from joblib import parallel_config

    X, y = small

    def search():
        return GridSearchCV(
            HeadAllocator(_fast(), budget=4, cv=3),
            {"budget": [4, 8]},
            cv=3,
            n_jobs=2,
        )

    reference = search().fit(X, y)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        with parallel_config(backend="dask"):
            on_dask = search().fit(X, y)
    for key in ("mean_test_score", "split0_test_score", "split2_test_score"):
        assert_array_equal(on_dask.cv_results_[key], reference.cv_results_[key])
    assert on_dask.best_params_ == reference.best_params_


def test_shortlist_holds_one_wide_head():
    """Besides the allocations around the rule, one head as wide as the
    budget and the features allow."""
    for n, p, budget in [(300, 6, 6), (5000, 10, 4), (50, 3, 12)]:
        allocations = candidate_allocations(n, p, budget, 1.0)
        assert (1, min(p, budget)) in allocations
        assert len(set(allocations)) == len(allocations)


def test_shortlist_is_the_rule_twice_the_rule_and_one_wide_head():
    for n, p, budget in [(3000, 10, 20), (300, 6, 12), (2000, 33, 33), (1000, 3, 12)]:
        d_star = theory_head_dim(n, 1.0, min(p, budget))
        dims = [d for d in (d_star, 2 * d_star) if d <= min(p, budget)]
        expected = [(min(budget // d, 32), d) for d in dims]
        expected += [] if (1, min(p, budget)) in expected else [(1, min(p, budget))]
        assert candidate_allocations(n, p, budget, 1.0) == expected


def test_default_scores_by_leave_one_out_and_keeps_the_best_fit(small):
    """cv=None (the default) fits each candidate once on all rows, scores its
    leave-one-out predictions, and keeps the best fit as the model."""
    X, y = small
    alloc = HeadAllocator(_fast(), budget=6, n_members=1).fit(X, y)
    res = alloc.cv_results_
    assert "split1_test_score" not in res
    assert len(res["params"]) == len(candidate_allocations(120, 6, 6, 1.0))
    assert res["rank_test_score"][alloc.best_index_] == 1
    best = alloc.best_estimator_
    assert best.get_params()["n_heads"] == alloc.n_heads_
    loo = best.loo_prediction_
    assert_allclose(alloc.best_score_, 1 - np.mean((loo - y) ** 2) / np.var(y))
    # the kept fit is what a fit on all rows with those heads gives
    same = clone(best).fit(X, y)
    assert_allclose(same.predict(X), alloc.predict(X), rtol=1e-5)


def test_the_best_allocation_is_refitted_with_members(small):
    """n_members='auto' refits the best candidate with the rule's members
    (its first member is the candidate's own fit); an int sets them; an
    estimator's own members are kept; one without the parameter is refused
    more than one."""
    X, y = small
    n = X.shape[0]
    # The weighted mean's readout keeps the fitted width: the members score
    # a wider kernel on other rows than one fit does.
    alloc = HeadAllocator(_fast(local_fit="constant"), budget=6).fit(X, y)
    assert alloc.n_members_ == default_members(n) == min(4, 4096 // n)
    best = alloc.best_estimator_
    assert best.n_members == alloc.n_members_
    H, d = alloc.n_heads_, alloc.head_dim_
    assert best.components_.shape[:2] == (H * alloc.n_members_, d)
    single = clone(best).set_params(n_members=1).fit(X, y)
    assert_allclose(best.components_[:H], single.components_, rtol=1e-12)
    # the score is the candidate's, fitted with the estimator's one member
    assert_allclose(
        alloc.best_score_, 1 - np.mean((single.loo_prediction_ - y) ** 2) / np.var(y)
    )
    two = HeadAllocator(_fast(), budget=6, n_members=2).fit(X, y)
    assert two.n_members_ == 2 and two.best_estimator_.n_members == 2
    own = HeadAllocator(_fast(n_members=3), budget=6).fit(X, y)
    assert own.n_members_ == 3
    assert [default_members(m) for m in (1, 1024, 1025, 2048, 2049, 10**6)] == [
        4,
        4,
        3,
        2,
        1,
        1,
    ]
    with pytest.raises(ValueError, match="n_members=2 needs an estimator"):
        HeadAllocator(_HeadsWithoutLOO(), budget=4, cv=3, n_members=2).fit(X, y)


@pytest.mark.parametrize("n, p", [(300, 6), (3000, 10), (100, 40), (5000, 2)])
def test_default_budget_holds_both_default_models(n, p):
    """budget=None admits MultiHeadNWRegressor()'s four heads of d* and one
    head as wide as the input, and the shortlist holds both."""
    budget = default_budget(n, p)
    d_star = theory_head_dim(n, 1.0, p)
    assert budget == max(p, DEFAULT_HEADS * d_star)
    allocations = candidate_allocations(n, p, budget, 1.0)
    assert (1, p) in allocations
    assert (budget // d_star, d_star) in allocations
    assert budget // d_star >= DEFAULT_HEADS
    assert MultiHeadNWRegressor().n_heads == DEFAULT_HEADS


def test_verbose_reports_each_candidate_with_time_left(small, capsys):
    X, y = small
    est = MultiHeadNWRegressor(max_iter=3, random_state=0)
    alloc = HeadAllocator(est, budget=4, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    scored = [line for line in lines if "leave-one-out R2=" in line]
    assert len(scored) == len(alloc.cv_results_["params"])
    assert all("elapsed=" in line and "left~" in line for line in scored)
    assert all(line.startswith("[HeadAllocator]") for line in lines)
    # The first line, before any fit, names the candidates; each fit is
    # announced as it starts.
    n_candidates = len(alloc.cv_results_["params"])
    assert lines[0].startswith(f"[HeadAllocator] {n_candidates} candidates")
    assert sum("] fitting n_heads=" in line for line in lines) == n_candidates
    HeadAllocator(est, budget=4, verbose=1, cv=2).fit(X, y)
    assert "[CV " in capsys.readouterr().out  # GridSearchCV's own lines
    HeadAllocator(est, budget=4).fit(X, y)
    assert capsys.readouterr().out == ""


def test_random_state_makes_two_fits_alike(small):
    """random_state reaches every candidate: two fits choose and predict
    alike; the estimator's own random_state is kept when it is None."""
    X, y = small
    a = HeadAllocator(random_state=0).fit(X, y)
    b = HeadAllocator(random_state=0).fit(X, y)
    assert a.best_params_ == b.best_params_
    np.testing.assert_array_equal(a.predict(X[:7]), b.predict(X[:7]))
    assert a.best_estimator_.random_state == 0
    own = HeadAllocator(MultiHeadNWRegressor(random_state=3)).fit(X, y)
    assert own.best_estimator_.random_state == 3


def test_the_chosen_model_answers_for_the_allocator(small):
    X, y = small
    alloc = HeadAllocator(random_state=0).fit(X, y)
    best = alloc.best_estimator_
    np.testing.assert_array_equal(alloc.transform(X[:4]), best.transform(X[:4]))
    w, rows = alloc.attention_weights(X[:4], top_k=3)
    np.testing.assert_array_equal(rows, best.attention_weights(X[:4], top_k=3)[1])
    np.testing.assert_array_equal(alloc.components_, best.components_)
    for name in ("hdi_", "bvc_decomposition_", "loo_prediction_", "n_iter_"):
        assert hasattr(alloc, name), name
    with pytest.raises(AttributeError, match="no attribute 'not_a_thing_'"):
        alloc.not_a_thing_
    with pytest.raises(AttributeError):
        HeadAllocator().hdi_  # not fitted


def test_groups_reach_the_splitter_as_in_a_grid_search(small):
    """``groups`` go to ``cv``'s splitter, as GridSearchCV takes them: the
    scores equal those of the same folds given as a list of splits."""
    X, y = small
    groups = np.arange(X.shape[0]) % 6
    kw = dict(estimator=_fast(), budget=4, n_members=1, random_state=0)
    by_groups = HeadAllocator(cv=GroupKFold(3), **kw).fit(X, y, groups=groups)
    splits = list(GroupKFold(3).split(X, y, groups))
    by_splits = HeadAllocator(cv=splits, **kw).fit(X, y)
    assert_allclose(
        by_groups.cv_results_["mean_test_score"],
        by_splits.cv_results_["mean_test_score"],
    )
    with pytest.raises(ValueError, match="'groups' parameter should not be None"):
        HeadAllocator(cv=GroupKFold(3), **kw).fit(X, y)


def test_groups_with_leave_one_out_scoring_are_refused(small):
    """Leave-one-out scoring cannot keep a group together: a clear error,
    not groups silently ignored."""
    X, y = small
    with pytest.raises(ValueError, match="groups needs a cv splitter"):
        HeadAllocator(_fast(), budget=4).fit(X, y, groups=np.arange(X.shape[0]) % 6)
    # The rule alone scores nothing: groups are not used there.
    HeadAllocator(_fast(), budget=4, strategy="theory").fit(
        X, y, groups=np.arange(X.shape[0]) % 6
    )


def test_set_output_gives_a_frame_of_the_chosen_models_components(small):
    pd = pytest.importorskip("pandas")
    X, y = small
    est = MultiHeadNWRegressor(max_iter=3, random_state=0)
    alloc = HeadAllocator(est, budget=4).set_output(transform="pandas").fit(X, y)
    out = alloc.transform(X[:5])
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(alloc.get_feature_names_out())
    assert list(out.columns) == list(alloc.best_estimator_.get_feature_names_out())
    assert_allclose(out.to_numpy(), alloc.best_estimator_.transform(X[:5]))


def test_allocates_a_classifiers_heads_by_leave_one_out_log_loss():
    """With a classifier the allocator is a classifier: the log-loss of the
    leave-one-out probabilities scores the candidates, and it predicts
    probabilities, labels and sets through the chosen model."""
    from sklearn.base import is_classifier
    from sklearn.datasets import load_wine
    from sklearn.metrics import log_loss

    from nwensemble import MultiHeadNWClassifier

    X, y = load_wine(return_X_y=True)
    labels = np.array(["barolo", "grignolino", "barbera"])[y]
    allocator = HeadAllocator(
        MultiHeadNWClassifier(max_iter=20, bvc_resamples=0, random_state=0),
        n_members=1,
    ).fit(X, labels)
    assert is_classifier(allocator)
    chosen = allocator.best_estimator_
    rows = chosen.calibration_rows_  # held out of the fit: 30 % of 178 rows
    assert 0 < rows.size < 0.5 * X.shape[0]
    assert allocator.best_score_ == pytest.approx(
        -log_loss(labels[rows], chosen.loo_proba_[rows], labels=chosen.classes_)
    )
    assert allocator.best_score_ == max(allocator.cv_results_["mean_test_score"])
    P = allocator.predict_proba(X[:5])
    assert P.shape == (5, 3) and np.allclose(P.sum(axis=1), 1)
    assert list(allocator.classes_) == sorted(set(labels))
    assert set(allocator.predict(X[:5])) <= set(labels)
    _, sets = allocator.predict_set(X[:5])
    assert sets.shape == (5, 3)
    assert allocator.score(X, labels) == chosen.score(X, labels)


def test_a_regressors_allocator_has_no_class_probabilities(friedman):
    X, y = friedman
    allocator = HeadAllocator(MultiHeadNWRegressor(max_iter=2), budget=2).fit(X, y)
    assert not hasattr(allocator, "predict_proba")
    assert not hasattr(allocator, "predict_set")


def test_a_classifiers_allocator_stratifies_its_folds():
    from sklearn.datasets import load_iris

    from nwensemble import MultiHeadNWClassifier

    X, y = load_iris(return_X_y=True)
    allocator = HeadAllocator(
        MultiHeadNWClassifier(max_iter=5, bvc_resamples=0, random_state=0),
        cv=3,
        n_members=1,
    ).fit(X, y)  # unshuffled KFold on iris' sorted labels would miss classes
    assert np.all(np.isfinite(allocator.cv_results_["mean_test_score"]))


def test_the_refit_with_members_alone_computes_the_decomposition(monkeypatch):
    """Candidates that a refit with members replaces skip their
    decomposition; the chosen model has its own."""
    from nwensemble import _multi_head

    X, y = make_friedman1(n_samples=120, n_features=5, random_state=0)
    calls = []
    original = _multi_head.MultiHeadMixin._training_bvc

    def counting(self, keys, *, rng):
        calls.append(self.n_members)
        return original(self, keys, rng=rng)

    monkeypatch.setattr(_multi_head.MultiHeadMixin, "_training_bvc", counting)
    alloc = HeadAllocator(
        MultiHeadNWRegressor(max_iter=5, bvc_resamples=2, random_state=0),
        budget=4,
        n_members=2,
    ).fit(X, y)
    assert calls == [2]
    assert alloc.bvc_decomposition_.n_heads == 2 * alloc.n_heads_


def test_the_refit_with_members_starts_from_the_chosen_candidate(monkeypatch):
    """The chosen candidate is the refit's first member: the refit fits the
    other members only, and the model is the one a fresh fit with members
    gives."""
    from nwensemble._fit import engine

    X, y = make_friedman1(n_samples=150, n_features=5, random_state=1)
    calls = []
    original = engine._fit_member

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(engine, "_fit_member", counting)
    alloc = HeadAllocator(
        MultiHeadNWRegressor(max_iter=10, bvc_resamples=0), n_members=3, random_state=0
    ).fit(X, y)
    n_candidates = len(alloc.cv_results_["params"])
    assert len(calls) == n_candidates + 2
    fresh = MultiHeadNWRegressor(
        max_iter=10,
        bvc_resamples=0,
        n_heads=alloc.n_heads_,
        head_dim=alloc.head_dim_,
        n_members=3,
        random_state=0,
    ).fit(X, y)
    assert_array_equal(alloc.components_, fresh.components_)
    assert_array_equal(alloc.predict(X), fresh.predict(X))
