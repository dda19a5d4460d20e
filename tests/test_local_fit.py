"""The readout chosen after the fit: candidates and the leave-one-out choice."""

import math

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit import local_fit
from nwensemble._fit.local_fit import (
    MAX_LINE_DIM,
    RIDGES,
    WIDER,
    _decide,
    _picks,
    _Scoring,
    candidates,
    choose_readout,
    local_ridges,
)
from nwensemble._fit.precision import FLOAT32_LOSS_ROWS
from nwensemble._shared.kernels import resolve_kernel
from nwensemble._shared.keys import Keys


def _keys(Z, y, kernel="softmax"):
    return Keys.of(
        Z,
        y[:, None],
        np.full(len(y), 1.0 / len(y)),
        kernel=resolve_kernel(kernel),
        n_heads=1,
    )


def test_candidates_follow_local_fit_and_kernel():
    rng = np.random.default_rng(0)
    keys = _keys(rng.normal(size=(20, 2)), rng.normal(size=20))
    assert [c.ridge for c in candidates("constant", keys)] == [math.inf]
    assert [c.ridge for c in candidates("linear", keys)] == list(RIDGES)
    auto = candidates("auto", keys)
    assert [c.ridge for c in auto] == [*RIDGES, *RIDGES, math.inf]
    # Local quadratics first (their sums hold every other option's).
    assert [c.squares for c in auto] == [True] * len(RIDGES) + [False] * (
        len(RIDGES) + 1
    )
    assert not any(c.squares for c in candidates("linear", keys))
    quadratic = candidates("quadratic", keys)
    assert [c.ridge for c in quadratic] == list(RIDGES)
    assert all(c.squares for c in quadratic)
    compact = _keys(keys.Z, rng.normal(size=20), kernel="epanechnikov")
    assert [c.ridge for c in candidates("auto", compact)] == [math.inf]
    assert [c.ridge for c in candidates("linear", compact)] == list(RIDGES)


def test_auto_keeps_the_mean_for_wide_heads():
    rng = np.random.default_rng(0)
    y = rng.normal(size=20)
    at_limit = _keys(rng.normal(size=(20, MAX_LINE_DIM)), y)
    wide = _keys(rng.normal(size=(20, MAX_LINE_DIM + 1)), y)
    assert len(candidates("auto", at_limit)) == len(RIDGES) + 1
    # A quadratic's design is twice the head's width.
    half = _keys(rng.normal(size=(20, MAX_LINE_DIM // 2)), y)
    over_half = _keys(rng.normal(size=(20, MAX_LINE_DIM // 2 + 1)), y)
    assert sum(c.squares for c in candidates("auto", half)) == len(RIDGES)
    assert not any(c.squares for c in candidates("auto", over_half))
    assert [c.ridge for c in candidates("auto", wide)] == [math.inf]
    assert [c.ridge for c in candidates("linear", wide)] == list(RIDGES)


def test_a_plane_chooses_a_free_line_and_noise_a_stiff_one():
    rng = np.random.default_rng(1)
    Z = rng.uniform(-3, 3, size=(300, 2))
    rows = np.arange(300)
    sw = np.full(300, 1.0 / 300)
    plane = 2.0 * Z[:, 0] - Z[:, 1]
    choice = choose_readout(_keys(Z, plane), rows, sw, "auto")
    assert choice.readout.ridge == RIDGES[0] and choice.width == 1
    assert choice.heads.shape == (1, 300, 1) and not choice.fallback.any()
    # A line keeps the attention's sums for the statistics after it.
    assert choice.sums.nums[0].shape[0] == 300
    # Leave-one-out residuals of the chosen line are those of a near-exact fit.
    assert np.abs(choice.heads[0, :, 0] - plane).max() < 0.05 * np.ptp(plane)
    noise = rng.normal(size=300)
    assert choose_readout(_keys(Z, noise), rows, sw, "auto").readout.ridge >= 1.0


def test_many_rows_take_the_sums_in_float32_and_choose_alike(monkeypatch):
    """From as many float64 rows as the losses take in float32, so do the
    statistics' sums; they come back in float64, with the keys' own rows as
    the queries, and choose the readout the float64 sums choose."""
    rng = np.random.default_rng(3)
    n = FLOAT32_LOSS_ROWS
    Z = rng.uniform(-3, 3, size=(n, 2))
    y = 2.0 * Z[:, 0] - Z[:, 1] + 0.3 * rng.normal(size=n)
    rows, sw = np.arange(n), np.full(n, 1.0 / n)
    choice = choose_readout(_keys(Z, y), rows, sw, "auto")
    monkeypatch.setattr(local_fit, "statistics_keys", lambda keys: keys)
    exact = choose_readout(_keys(Z, y), rows, sw, "auto")
    assert choice.readout.ridge == exact.readout.ridge
    num, num64 = choice.sums.nums[0], exact.sums.nums[0]
    assert num.dtype == np.float64 and choice.sums.queries[0].dtype == np.float64
    np.testing.assert_array_equal(choice.sums.queries[0], Z)
    assert not np.array_equal(num, num64)  # float32's rounding
    np.testing.assert_allclose(num, num64, rtol=1e-4, atol=1e-6 * np.abs(num64).max())
    np.testing.assert_allclose(choice.heads, exact.heads, rtol=0, atol=1e-4 * np.ptp(y))


def test_only_the_scored_rows_count():
    """A line where the target is a line, a stiff one (or the mean) where it
    is noise: scoring either region alone decides."""
    rng = np.random.default_rng(2)
    Z = np.sort(rng.uniform(-6, 6, size=(400, 1)), axis=0)
    left = Z[:, 0] < 0
    y = np.where(left, 3.0 * Z[:, 0], rng.normal(size=400))
    rows, sw = np.arange(400), np.full(400, 1.0 / 400)
    keys = _keys(Z, y)
    on_line = choose_readout(keys, rows, sw, "auto", scored=np.flatnonzero(left))
    on_noise = choose_readout(keys, rows, sw, "auto", scored=np.flatnonzero(~left))
    assert on_line.readout.ridge < on_noise.readout.ridge


@pytest.mark.parametrize("share", [0.5, 0.8])
def test_most_rows_scoring_take_one_pass(monkeypatch, share):
    """Where at least half of the rows score, one pass over every row gives
    the choice and the estimates that a pass over the scoring rows and one
    over every row give."""
    rng = np.random.default_rng(3)
    Z = rng.uniform(-3, 3, size=(300, 2))
    y = Z[:, 0] * Z[:, 1] + 0.3 * rng.normal(size=300)
    rows, sw = np.arange(300), np.full(300, 1.0 / 300)
    scored = np.sort(rng.permutation(300)[: int(share * 300)])
    keys = _keys(Z, y)
    passes = []
    loo_sums = local_fit._loo_sums

    def counted(*args, **kwargs):
        passes.append(args[1].shape[0])
        return loo_sums(*args, **kwargs)

    monkeypatch.setattr(local_fit, "_loo_sums", counted)
    one = choose_readout(keys, rows, sw, "auto", scored=scored)
    assert passes == [300]
    passes.clear()
    monkeypatch.setattr(local_fit, "_one_pass", lambda scoring, n_rows: False)
    two = choose_readout(keys, rows, sw, "auto", scored=scored)
    assert passes == [scored.shape[0], 300]
    a, b = one.keys.readout, two.keys.readout
    assert (a.ridge, a.squares) == (b.ridge, b.squares)
    np.testing.assert_array_equal(a.low, b.low)
    np.testing.assert_array_equal(a.high, b.high)
    assert one.width == two.width
    np.testing.assert_allclose(one.error, two.error, rtol=1e-12)
    np.testing.assert_allclose(one.heads, two.heads, rtol=1e-12, atol=1e-12)


def test_members_are_scored_each_on_its_own_rows():
    """With members (``scored`` a list), each group of heads is scored on
    its own rows: two identical members scored on the line's rows choose
    as one head does; scored on the noise's, they choose as it does there."""
    rng = np.random.default_rng(2)
    Z = np.sort(rng.uniform(-6, 6, size=(400, 1)), axis=0)
    left = np.flatnonzero(Z[:, 0] < 0)
    right = np.flatnonzero(Z[:, 0] >= 0)
    y = np.where(Z[:, 0] < 0, 3.0 * Z[:, 0], rng.normal(size=400))
    rows, sw = np.arange(400), np.full(400, 1.0 / 400)
    one = _keys(Z, y)
    two = Keys.of(
        np.hstack([Z, Z]), y[:, None], sw, kernel=resolve_kernel("softmax"), n_heads=2
    )
    for scored in (left, right):
        alone = choose_readout(one, rows, sw, "linear", scored=scored)
        members = choose_readout(two, rows, sw, "linear", scored=[scored, scored])
        assert members.readout.ridge == alone.readout.ridge
        np.testing.assert_allclose(members.heads[1], alone.heads[0], rtol=1e-12)
    # Scored on different rows, each member keeps its own ridge (one per
    # head), and each head reads its estimates with its member's.
    on_line = choose_readout(one, rows, sw, "linear", scored=left)
    on_noise = choose_readout(one, rows, sw, "linear", scored=right)
    both = choose_readout(two, rows, sw, "linear", scored=[left, right])
    ridges = [on_line.readout.ridge, on_noise.readout.ridge]
    assert [r.ridge for r in both.readout] == ridges
    assert ridges[0] < ridges[1] and both.sums is not None
    np.testing.assert_allclose(both.heads[0], on_line.heads[0], rtol=1e-12)
    np.testing.assert_allclose(both.heads[1], on_noise.heads[0], rtol=1e-12)
    assert np.all(local_ridges(both.readout) == ridges)


def _scoring(n, n_groups):
    """A ``_Scoring`` of ``n`` rows of equal weight, each scoring every one
    of ``n_groups`` groups of one head."""
    rng = np.random.default_rng(0)
    keys = Keys.of(
        rng.normal(size=(n, n_groups)),
        rng.normal(size=(n, 1)),
        np.full(n, 1.0 / n),
        kernel=resolve_kernel("softmax"),
        n_heads=n_groups,
    )
    return _Scoring(keys, np.arange(n), np.full(n, 1.0 / n), [None] * n_groups)


def _choice(errors, kinds):
    """The options chosen where every row of a group has its option's
    error (no spread between rows, so any gain is beyond the noise)."""
    scoring = _scoring(4, errors.shape[1])
    squares = [[np.full(4, e) for e in row] for row in errors]
    return _decide(_picks(kinds, scoring, squares, 1), scoring).options


def test_members_read_one_kind_together():
    """Several members read the weighted mean all together, where it does
    no worse in total than each member's best line, or lines each; a
    quadratic each where the members' best quadratics do better in total
    than their best lines (the passes read one layout of sums)."""
    kinds = [1, 1, 0]  # two lines and the mean
    assert _choice(np.array([[1.0, 2.0], [2.0, 1.0], [2.5, 2.5]]), kinds) == [0, 1]
    assert _choice(np.array([[1.0, 3.0], [2.0, 2.5], [1.5, 2.0]]), kinds) == [2, 2]
    assert _choice(np.array([[3.0], [2.0], [1.0]]), kinds) == [2]
    kinds = [2, 2, 1, 1, 0]  # two quadratics, two lines, the mean
    errors = np.array([[0.5, 3.0], [3.0, 2.9], [1.0, 2.0], [2.0, 1.0], [2.5, 2.5]])
    # The members' best quadratics total 3.4, their best lines 2.0.
    assert _choice(errors, kinds) == [2, 3]
    errors[1, 1] = 1.2  # now 1.7
    assert _choice(errors, kinds) == [0, 1]
    # One member alone takes its best option of any kind.
    assert _choice(errors[:, :1], kinds) == [0]


def test_a_quadratic_must_beat_the_lines_by_a_standard_error():
    """The quadratic is taken over the line only where its paired difference
    over the scoring rows is more than one standard error below zero; a
    gain within the rows' noise keeps the line."""
    rng = np.random.default_rng(11)
    n = 200
    scoring = _scoring(n, 1)
    line = rng.exponential(size=n)
    kinds = [2, 1, 0]
    noise = rng.normal(scale=0.5, size=n)  # a standard error of about 0.035
    for shift, kind in [(-0.2, 2), (-0.02, 1)]:
        quadratic = line + shift + noise - noise.mean()
        squares = [[quadratic], [line], [line + 1.0]]
        errors = scoring.errors(squares)
        assert errors[0, 0] < errors[1, 0]  # the quadratic's error is lower
        difference, error = scoring.paired_difference([quadratic], [line])
        assert difference == pytest.approx(errors[0, 0] - errors[1, 0])
        assert error == pytest.approx(np.std(quadratic - line) / np.sqrt(n), rel=1e-9)
        pick = _decide(_picks(kinds, scoring, squares, 1), scoring)
        assert kinds[pick.options[0]] == kind


def test_a_quadratic_at_a_wider_kernel_must_beat_the_best_line_of_any_width():
    """The rule holds across widths: a quadratic read through a wider kernel
    is compared with the best line or mean of every width."""
    rng = np.random.default_rng(12)
    n = 200
    scoring = _scoring(n, 1)
    line = rng.exponential(size=n)
    noise = rng.normal(scale=0.5, size=n)
    quadratic = line - 0.01 + noise - noise.mean()  # within the noise
    kinds = [2, 1, 0]
    fitted = _picks(kinds, scoring, [[line + 0.3], [line], [line + 1.0]], 1)
    wider = _picks(kinds, scoring, [[quadratic], [line + 0.2], [line + 1.0]], 2)
    pick = _decide(fitted + wider, scoring)
    assert (pick.width, pick.family) == (1, 1)
    # Where it gains beyond the noise, the quadratic at the wider kernel.
    wider = _picks(kinds, scoring, [[line - 0.3], [line + 0.2], [line + 1.0]], 2)
    pick = _decide(fitted + wider, scoring)
    assert (pick.width, pick.family) == (2, 2)


@pytest.mark.parametrize("Estimator", [NWAttentionRegressor, MultiHeadNWRegressor])
def test_local_ridge_reports_the_readout(Estimator):
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(150, 3))
    y = 4.0 * X[:, 0] + np.sin(3 * X[:, 1])
    kw = dict(max_iter=5, random_state=0)
    if Estimator is MultiHeadNWRegressor:
        kw.update(n_heads=2, bvc_resamples=0)
    constant = Estimator(local_fit="constant", **kw).fit(X, y)
    linear = Estimator(local_fit="linear", **kw).fit(X, y)
    assert constant.local_ridge_ == math.inf
    assert linear.local_ridge_ in RIDGES
    # A steep feature: the line removes the weighted mean's bias at the edges.
    Xq = rng.uniform(-1, 1, size=(300, 3))
    yq = 4.0 * Xq[:, 0] + np.sin(3 * Xq[:, 1])
    errors = [np.mean((m.predict(Xq) - yq) ** 2) for m in (constant, linear)]
    assert errors[1] < 0.8 * errors[0]
    assert (constant.local_fit_, linear.local_fit_) == ("constant", "linear")


@pytest.mark.parametrize("Estimator", [NWAttentionRegressor, MultiHeadNWRegressor])
def test_auto_takes_a_quadratic_where_the_target_curves(Estimator):
    """A target that curves across the neighbourhood (a parabola along each
    feature, little noise): scored on held-out rows, ``'auto'`` reads
    quadratics, which predict it far better than the lines; on a noisy
    plane it keeps a line or the mean."""
    rng = np.random.default_rng(13)
    X = rng.uniform(-1, 1, size=(600, 2))
    Xq = rng.uniform(-0.9, 0.9, size=(400, 2))

    def f(P):
        return 3.0 * P[:, 0] ** 2 - 2.0 * P[:, 1] ** 2

    kw = dict(max_iter=20, early_stopping=True, random_state=0)
    if Estimator is MultiHeadNWRegressor:
        # Members, each scored on its own held-out rows.
        kw.update(n_heads=1, n_members=2, bvc_resamples=0)
    y = f(X) + rng.normal(scale=0.05, size=600)
    auto = Estimator(**kw).fit(X, y)
    linear = Estimator(local_fit="linear", **kw).fit(X, y)
    quadratic = Estimator(local_fit="quadratic", **kw).fit(X, y)
    assert (auto.local_fit_, quadratic.local_fit_) == ("quadratic", "quadratic")
    assert np.all(np.isin(np.atleast_1d(auto.local_ridge_), RIDGES))
    errors = [np.mean((m.predict(Xq) - f(Xq)) ** 2) for m in (linear, auto)]
    assert errors[1] < 0.5 * errors[0]
    plane = X @ np.array([1.0, -1.0]) + rng.normal(scale=1.0, size=600)
    assert Estimator(**kw).fit(X, plane).local_fit_ in ("constant", "linear")


@pytest.mark.parametrize("table", ["categorical", "missing"])
def test_auto_keeps_the_mean_on_tables_with_embeddings(table):
    """Without held-out rows to score them, ``'auto'`` reads the weighted
    mean on a table with embeddings, though the target is a line."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, size=150)
    y = 4.0 * x + rng.normal(scale=0.1, size=150)
    frame = pd.DataFrame({"x": x, "z": rng.uniform(-1, 1, size=150)})
    if table == "categorical":
        frame["level"] = rng.choice(["a", "b", "c"], size=150)
    else:
        frame.loc[::7, "z"] = np.nan
    kw = dict(max_iter=5, random_state=0, early_stopping=False)
    auto = NWAttentionRegressor(**kw).fit(frame, y)
    linear = NWAttentionRegressor(local_fit="linear", **kw).fit(frame, y)
    assert auto.local_ridge_ == math.inf
    assert linear.local_ridge_ in RIDGES
    # The same rows without embeddings: a line through a linear target.
    numeric = NWAttentionRegressor(**kw).fit(np.c_[x, rng.uniform(-1, 1, 150)], y)
    assert numeric.local_ridge_ in RIDGES
    # Rows held out of the fit score the line with embeddings too.
    scored = NWAttentionRegressor(**{**kw, "early_stopping": True}).fit(frame, y)
    assert scored.local_ridge_ in RIDGES


def _line_keys(n, rng, scale):
    """A noisy line in one dimension under a kernel ``scale`` times too
    narrow for it."""
    z = rng.uniform(-1, 1, size=n)
    y = 2.0 * z + rng.normal(scale=0.5, size=n)
    return _keys(scale * z[:, None], y), y


def test_held_out_rows_choose_a_wider_kernel_for_the_line():
    """Scored on held-out rows, a noisy line read through a kernel far too
    narrow gets a wider one (a divisor of the projection from ``WIDER``);
    the rows the projection was fitted to keep the fitted width."""
    rng = np.random.default_rng(6)
    keys, _ = _line_keys(400, rng, 40.0)
    rows, sw = np.arange(400), np.full(400, 1.0 / 400)
    held = np.arange(0, 400, 3)
    wide = choose_readout(keys, rows, sw, "auto", scored=[held], held_out=True)
    fitted = choose_readout(keys, rows, sw, "auto", scored=[held])
    assert wide.width in WIDER and fitted.width == 1
    assert not wide.readout.is_constant and wide.error < fitted.error
    # The estimates are those of the keys divided by the width.
    narrow = Keys.of(keys.Z / wide.width, keys.Y, sw, kernel=keys.kernel, n_heads=1)
    again = choose_readout(narrow, rows, sw, "auto", scored=[held])
    assert again.readout.ridge == wide.readout.ridge
    np.testing.assert_allclose(again.heads, wide.heads, rtol=1e-10)
    # A kernel already as wide as the line wants keeps its width (the
    # lines alone: a quadratic's extra terms would take a wider one).
    keys, _ = _line_keys(400, rng, 1.0)
    same = choose_readout(keys, rows, sw, "linear", scored=[held], held_out=True)
    assert same.width == 1


def test_widening_stops_at_the_first_width_that_does_worse(monkeypatch):
    """The wider kernels are read in order while each does better than the
    narrower one: a kernel as wide as the line wants reads the next width
    only; one far too narrow reads on until the error rises."""
    read = []
    scored_squares = local_fit._scored_squares

    def counting(options, keys, rows, scoring):
        read.append(keys.Z)
        return scored_squares(options, keys, rows, scoring)

    monkeypatch.setattr(local_fit, "_scored_squares", counting)
    rng = np.random.default_rng(6)
    rows, sw = np.arange(400), np.full(400, 1.0 / 400)
    held = np.arange(0, 400, 3)
    keys, _ = _line_keys(400, rng, 1.0)
    same = choose_readout(keys, rows, sw, "linear", scored=[held], held_out=True)
    # The fitted width, then twice it, which does worse: no further width.
    assert same.width == 1 and len(read) == 2
    read.clear()
    keys, _ = _line_keys(400, rng, 40.0)
    wide = choose_readout(keys, rows, sw, "linear", scored=[held], held_out=True)
    # Every width up to the chosen one, and one more where that is not the
    # widest.
    widths = (1, *WIDER)
    assert len(read) == min(widths.index(wide.width) + 2, len(widths))


def test_the_chosen_width_divides_the_projection(monkeypatch):
    """With the same draws, a fit that may widen its kernel reports the
    projection of the fit that may not, divided by the chosen width, and
    predicts through it."""
    import nwensemble._fit.local_fit as local_fit

    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, size=(200, 3))
    y = 3.0 * X[:, 0] + X[:, 1] + rng.normal(scale=0.5, size=200)
    kw = dict(random_state=0, early_stopping=True)
    widened = NWAttentionRegressor(**kw).fit(X, y)
    monkeypatch.setattr(local_fit, "WIDER", ())
    fitted = NWAttentionRegressor(**kw).fit(X, y)
    ratio = fitted.components_ / widened.components_
    assert ratio.flat[0] in (1, *WIDER)
    np.testing.assert_allclose(ratio, ratio.flat[0], rtol=1e-6)
    assert ratio.flat[0] > 1  # this line wants a wider kernel
    # The model's attention reads the widened projection.
    Xq = rng.uniform(-1, 1, size=(5, 3))
    weights = widened.attention_weights(Xq)
    assert weights.shape == (5, 200)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(weights, fitted.attention_weights(Xq))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_adam_keeps_the_width_it_chose(monkeypatch):
    """Adam chooses the heads' overall width on its held-out rows itself
    (its final factor): the readout keeps that width."""
    import nwensemble._fit.local_fit as local_fit

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 3))
    y = 3.0 * X[:, 0] + X[:, 1] + rng.normal(scale=0.5, size=300)
    kw = dict(solver="adam", max_iter=5, random_state=0)
    default = NWAttentionRegressor(**kw).fit(X, y)
    monkeypatch.setattr(local_fit, "WIDER", ())
    fitted = NWAttentionRegressor(**kw).fit(X, y)
    np.testing.assert_array_equal(default.components_, fitted.components_)


def test_unknown_local_fit_is_refused():
    X, y = np.random.default_rng(4).normal(size=(20, 2)), np.arange(20.0)
    with pytest.raises(InvalidParameterError, match="local_fit"):
        NWAttentionRegressor(local_fit="cubic").fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("local_fit", ["linear", "quadratic"])
def test_local_lines_in_every_namespace(ns, local_fit):
    """Fit, predict, standard errors, intervals and weights of the lines
    and the quadratics run in the input's namespace and on its device, and
    agree with NumPy."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(120, 3))
    y = 4.0 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.1 * rng.normal(size=120)
    Xq = X[:9] + 0.03
    kw = dict(n_heads=2, head_dim=2, max_iter=3, local_fit=local_fit, random_state=0)

    def run(space):
        with space.context():
            model = MultiHeadNWRegressor(**kw).fit(space.asarray(X), space.asarray(y))
            Q = space.asarray(Xq)
            pred, std = model.predict(Q, return_std=True)
            _, bounds = model.predict_interval(Q)
            weights = model.attention_weights(Q)
        outs = [pred, std, bounds, weights]
        return model.local_ridge_, [space.check_output(o) for o in outs]

    ridge, got = run(ns)
    from conftest import Namespace

    ridge_np, expected = run(Namespace("numpy"))
    assert ridge == ridge_np
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_wider_kernel_in_every_namespace(ns):
    """A kernel widened after the fit divides the projections in the input's
    namespace and on its device, and agrees with NumPy."""
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, size=(200, 3))
    y = 3.0 * X[:, 0] + X[:, 1] + rng.normal(scale=0.5, size=200)
    Xq = X[:9] + 0.03
    kw = dict(n_heads=2, head_dim=2, max_iter=3, early_stopping=True, random_state=0)

    def run(space):
        with space.context():
            model = MultiHeadNWRegressor(**kw).fit(space.asarray(X), space.asarray(y))
            pred = model.predict(space.asarray(Xq))
            weights = model.attention_weights(space.asarray(Xq))
        return model, [space.check_output(o) for o in (pred, weights)]

    model, got = run(ns)
    from conftest import Namespace

    numpy_model, expected = run(Namespace("numpy"))
    # The weighted mean keeps the fitted width.
    fitted = MultiHeadNWRegressor(**kw).set_params(local_fit="constant").fit(X, y)
    ratio = fitted.components_ / np.asarray(numpy_model.components_)
    assert ratio.flat[0] in WIDER  # this fit read a wider kernel
    np.testing.assert_allclose(ratio, ratio.flat[0], rtol=1e-6)
    assert model.local_ridge_ == numpy_model.local_ridge_
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
