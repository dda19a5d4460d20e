"""Where the projections start: the identity start's per-feature scales, and
when they are kept."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

import nwensemble._fit.start as start
from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit.engine import scaled_targets
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import KERNELS


def _friedman_fold():
    # A fold on which the scales, unbounded, jumped to the grid's narrowest
    # on x1 and x2 and the full fit stalled at 2.8 test RMSE.
    X, y = make_friedman1(2000, 16, noise=1.0, random_state=0)
    train, test = next(KFold(5, shuffle=True, random_state=0).split(X))
    return X[train], y[train], X[test], y[test]


def _fit(X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return NWAttentionRegressor(random_state=0).fit(X, y)


def test_direction_scales_stay_near_the_common_scale(monkeypatch):
    seen = {}
    best_scale, fit_scales = start._best_scale, start._fit_direction_scales

    # The first calls are on the whole subsample (the cross-fit's follow).
    def record_common(*args, **kwargs):
        scale, loss = best_scale(*args, **kwargs)
        seen.setdefault("common", scale)
        return scale, loss

    def record_own(*args, **kwargs):
        scales, loss = fit_scales(*args, **kwargs)
        seen.setdefault("own", scales)
        return scales, loss

    monkeypatch.setattr(start, "_best_scale", record_common)
    monkeypatch.setattr(start, "_fit_direction_scales", record_own)
    X, y, _, _ = _friedman_fold()
    _fit(X, y)
    limit = seen["common"] * start._DIRECTION_NARROWEST
    assert np.max(seen["own"]) <= limit * (1 + 1e-9)
    # The relevant features (x1 to x5) start narrower than the noise ones.
    assert np.min(seen["own"][:5]) > np.max(seen["own"][5:])


def test_the_identity_start_does_not_stall():
    X, y, Xt, yt = _friedman_fold()
    model = _fit(X, y)
    assert model.n_iter_ > 5
    assert model.loss_curve_[-1] < 0.15
    assert np.sqrt(np.mean((model.predict(Xt) - yt) ** 2)) < 1.6


def _scaled_problem(target, seed, n=120, p=8):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, p))
    noise = 0.3 * rng.standard_normal(n)
    y = np.sin(2 * X[:, 0]) if target == "one" else np.sin(X.sum(1) / np.sqrt(p))
    Xs = (X - X.mean(0)) / X.std(0)
    sw = np.full(n, 1.0 / n)
    Ys = scaled_targets((y + noise)[:, None], sw, xp=np)
    return numbers_design(Xs), Ys, sw


def _generalise(Xs, Ys, sw, seed, ns=None):
    xp = np if ns is None else ns.xp
    if ns is not None:
        Xs = numbers_design(ns.asarray(Xs.numeric))
        Ys, sw = ns.asarray(Ys), ns.asarray(sw)
    return start._own_scales_generalise(
        np.eye(Xs.shape[1]),
        Xs,
        Ys,
        sw,
        kernel=KERNELS["softmax"],
        rng=np.random.RandomState(seed),
        xp=xp,
    )


def test_own_scales_are_kept_where_the_target_follows_one_feature(ns):
    for seed in range(3):
        Xs, Ys, sw = _scaled_problem("one", seed)
        assert _generalise(Xs, Ys, sw, seed, ns)


def test_one_scale_is_kept_where_every_feature_counts_alike():
    # The target depends on the features' sum: one common scale is right.
    # The per-feature scales still lower the leave-one-out loss of the rows
    # they were fitted to, and would be kept by that alone.
    for seed in range(3):
        Xs, Ys, sw = _scaled_problem("sum", seed)
        softmax = KERNELS["softmax"]
        scale, common = start._best_scale(
            np.eye(8), Xs, Ys, sw, start._SCALE_GRID, kernel=softmax, xp=np
        )
        _, own = start._fit_direction_scales(
            np.eye(8), Xs, Ys, sw, kernel=softmax, xp=np, narrowest=8 * scale
        )
        assert own < common
        assert not _generalise(Xs, Ys, sw, seed)


def _counting(monkeypatch, name):
    """A list that gains an entry at every call of ``start.<name>``."""
    calls = []
    function = getattr(start, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return function(*args, **kwargs)

    monkeypatch.setattr(start, name, counted)
    return calls


def test_descent_lands_on_the_grids_best_in_fewer_losses(monkeypatch):
    softmax = KERNELS["softmax"]
    grid = start._SCALE_GRID
    calls = _counting(monkeypatch, "_loo_value")
    for target in ("one", "sum"):
        Xs, Ys, sw = _scaled_problem(target, 0)
        W = np.eye(8)
        best = start._best_scale(W, Xs, Ys, sw, grid, kernel=softmax, xp=np)
        assert len(calls) == grid.size
        # Near the best: a narrow grid's end can be a plateau of its own
        # (each row attends to its nearest neighbour), hence the check
        # descends from the whole subsample's best.
        i = int(np.flatnonzero(grid == best[0])[0])
        for near in grid[max(0, i - 2) : i + 3]:
            calls.clear()
            found = start._best_scale(
                W, Xs, Ys, sw, grid, kernel=softmax, xp=np, near=near
            )
            assert found == best
            assert len(calls) < grid.size
        calls.clear()
        # From the best itself: its two neighbours and itself.
        start._best_scale(W, Xs, Ys, sw, grid, kernel=softmax, xp=np, near=best[0])
        assert len(calls) == 3
        calls.clear()


def test_two_agreeing_folds_decide_as_the_four_do_in_half_the_scores(monkeypatch):
    """The check stops after two folds that agree, with the four folds'
    verdict on problems where the folds agree (one feature counts, every
    feature counts alike), after half of the held-out scores; the switch
    off takes all four."""
    scores = _counting(monkeypatch, "heldout_loss")
    assert start._TWO_AGREEING_FOLDS_DECIDE
    for target, kept in (("one", True), ("sum", False)):
        Xs, Ys, sw = _scaled_problem(target, 0)
        scores.clear()
        assert _generalise(Xs, Ys, sw, 0) is kept
        assert len(scores) == 4
        monkeypatch.setattr(start, "_TWO_AGREEING_FOLDS_DECIDE", False)
        scores.clear()
        assert _generalise(Xs, Ys, sw, 0) is kept
        assert len(scores) == 2 * start._CROSS_FIT_FOLDS
        monkeypatch.setattr(start, "_TWO_AGREEING_FOLDS_DECIDE", True)


@pytest.mark.parametrize(
    "fold_losses, kept",
    [
        # (common, own) per fold: the first two disagree, the sums decide.
        ([(1.0, 2.0), (2.0, 1.5), (1.0, 0.5), (1.0, 0.5)], True),
        ([(2.0, 1.0), (1.0, 1.5), (1.0, 1.4), (1.0, 1.4)], False),
    ],
)
def test_first_two_folds_that_disagree_leave_the_verdict_to_all(
    monkeypatch, fold_losses, kept
):
    """Where the first two folds disagree, every fold is scored and the
    summed losses decide, whatever the first fold said."""
    scripted = iter(loss for pair in fold_losses for loss in pair)
    scores = []

    def scripted_loss(*args, **kwargs):
        scores.append(1)
        return next(scripted)

    monkeypatch.setattr(start, "heldout_loss", scripted_loss)
    Xs, Ys, sw = _scaled_problem("one", 0)
    assert _generalise(Xs, Ys, sw, 0) is kept
    assert len(scores) == 2 * start._CROSS_FIT_FOLDS


@pytest.mark.parametrize("n", [120, start._SCALE_SEARCH_SIZE + 40])
def test_later_members_on_the_same_rows_repeat_the_searches_not_the_check(
    monkeypatch, n
):
    """A start on the rows of an earlier one takes that start's searches
    from ``ScaleSearches`` (the same numbers), and still runs its own
    cross-fitted check; where a subsample is drawn, every start searches
    its own rows."""
    searched = _counting(monkeypatch, "_searched")
    Xs, Ys, sw = _scaled_problem("one", 0, n=n)
    softmax = KERNELS["softmax"]

    def search(searches, seed):
        return start._search_scales(
            np.eye(8),
            1,
            Xs.numeric,
            Ys,
            sw,
            kernel=softmax,
            per_direction=True,
            rng=np.random.RandomState(seed),
            xp=np,
            searches=searches,
        )

    searches = start.ScaleSearches()
    first, again = search(searches, 0), search(searches, 1)
    assert len(searched) == (1 if n <= start._SCALE_SEARCH_SIZE else 2)
    for got, seed in ((first, 0), (again, 1)):
        alone = search(None, seed)
        assert_array_equal(got[0], alone[0])
        assert got[1] == alone[1]
    # Other rows: a search of their own.
    searched.clear()
    search(searches, 0)
    Xs, Ys, sw = _scaled_problem("one", 1, n=n)
    search(searches, 0)
    assert len(searched) == (1 if n <= start._SCALE_SEARCH_SIZE else 2)


def test_too_few_rows_to_cross_fit_keep_one_scale():
    Xs, Ys, sw = _scaled_problem("one", 0, n=2 * start._CROSS_FIT_FOLDS - 1)
    assert not _generalise(Xs, Ys, sw, 0)


def _metrics(model):
    return [c.T @ c for c in np.asarray(model.components_)]


@pytest.mark.parametrize("init", ["identity", "random", "pca"])
def test_heads_as_wide_as_the_input_start_apart(init):
    # With head_dim = n_features every string init gives the heads one
    # metric, which the symmetric loss would keep: the nudge sets them apart.
    X, y = make_friedman1(300, 5, noise=1.0, random_state=0)
    model = MultiHeadNWRegressor(
        n_heads=3, head_dim=5, init=init, max_iter=0, bvc_resamples=0, random_state=0
    ).fit(X, y)
    metrics = _metrics(model)
    for a in range(3):
        for b in range(a):
            difference = np.abs(metrics[a] - metrics[b]).max()
            assert difference > 0.05 * np.abs(metrics[b]).max()


def test_heads_of_their_own_blocks_are_not_nudged(monkeypatch):
    # Heads whose blocks differ start as the blocks and scales say: a nudge
    # of any size leaves them as they were.
    X, y = make_friedman1(300, 6, noise=1.0, random_state=0)
    params = dict(n_heads=2, head_dim=3, init="identity", max_iter=0, bvc_resamples=0)
    before = MultiHeadNWRegressor(**params, random_state=0).fit(X, y)
    monkeypatch.setattr(start, "_REPEAT_NUDGE", 10.0)
    after = MultiHeadNWRegressor(**params, random_state=0).fit(X, y)
    np.testing.assert_array_equal(before.components_, after.components_)


def test_the_nudge_is_small_and_seeded():
    rng = np.random.default_rng(0)
    head = np.diag(np.exp(rng.standard_normal(4)))
    W = np.hstack([head, head])  # two equal heads
    nudged = start._nudged_repeats(W, 2, rng=np.random.RandomState(0))
    np.testing.assert_array_equal(nudged[:, :4], W[:, :4])
    change = np.linalg.norm(nudged[:, 4:] - W[:, 4:], 2) / np.linalg.norm(W[:, 4:], 2)
    assert 0.05 < change < 3 * start._REPEAT_NUDGE
    again = start._nudged_repeats(W, 2, rng=np.random.RandomState(0))
    np.testing.assert_array_equal(nudged, again)
