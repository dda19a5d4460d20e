"""The minibatch Adam solver: it learns, stops early, runs in every namespace."""

import dataclasses
import re

import numpy as np
import pytest
from helpers import friedman_split, rmse
from numpy.testing import assert_allclose
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor


@pytest.fixture(scope="module")
def data():
    return friedman_split(2000, 500, n_features=6)


@pytest.mark.slow
def test_adam_learns_about_as_well_as_lbfgs(data):
    """On 2000 rows, Adam's test RMSE (default batches) is within 10 % of
    L-BFGS's (measured 1.270 against 1.256), and both beat the starting
    projection. (With batch_size=256 early stopping cut it short at 1.46.)"""
    X, y, Xt, yt = data
    kw = dict(random_state=0, local_fit="constant")  # the solvers' own work
    adam = NWAttentionRegressor(solver="adam", **kw)
    adam.fit(X, y)
    lbfgs = NWAttentionRegressor(solver="lbfgs", **kw).fit(X, y)
    start = NWAttentionRegressor(max_iter=0, **kw).fit(X, y)
    assert rmse(adam, Xt, yt) < 1.10 * rmse(lbfgs, Xt, yt)
    assert rmse(adam, Xt, yt) < 0.9 * rmse(start, Xt, yt)
    assert adam.n_fev_ == 2 * adam.n_iter_  # 1800 training rows: 1024 + 776
    assert len(adam.loss_curve_) == adam.n_iter_


def test_adam_stops_early_or_warns(data):
    X, y, _, _ = data
    model = NWAttentionRegressor(
        solver="adam", batch_size=256, n_iter_no_change=2, random_state=0
    ).fit(X, y)
    assert model.n_iter_ < 200
    with pytest.warns(ConvergenceWarning, match="epochs"):
        NWAttentionRegressor(solver="adam", max_iter=2, random_state=0).fit(X, y)


def test_adam_multi_head_with_diversity(data):
    X, y, Xt, yt = data
    model = MultiHeadNWRegressor(
        n_heads=3, head_dim=2, solver="adam", diversity=-0.5, max_iter=5
    )
    with pytest.warns(ConvergenceWarning):
        model.fit(X, y)
    assert model.components_.shape == (3, 2, 6)
    assert np.isfinite(rmse(model, Xt, yt))


@pytest.mark.parametrize("feature_slopes", [False, True])
def test_adam_same_under_namespaces(ns, feature_slopes):
    """array_api_strict (on its second device too) follows NumPy to rounding,
    with the feature slopes learned in the same steps too."""
    X, y = make_friedman1(n_samples=300, n_features=5, noise=0.5, random_state=1)
    kw = dict(
        solver="adam",
        batch_size=64,
        max_iter=5,
        random_state=0,
        feature_slopes=feature_slopes,
    )
    with pytest.warns(ConvergenceWarning):
        ref = NWAttentionRegressor(**kw).fit(X, y)
    with ns.context(), pytest.warns(ConvergenceWarning):
        model = NWAttentionRegressor(**kw).fit(ns.asarray(X), ns.asarray(y))
        pred = ns.check_output(model.predict(ns.asarray(X[:10])))
    assert_allclose(pred, ref.predict(X[:10]), rtol=1e-8)


def test_batch_size_is_validated():
    X, y = make_friedman1(n_samples=60, random_state=0)
    with pytest.raises(ValueError, match="batch_size"):
        NWAttentionRegressor(solver="adam", batch_size=1).fit(X, y)


@pytest.mark.parametrize("kernel", ["softmax", "epanechnikov"])
@pytest.mark.parametrize(
    "Estimator, params",
    [
        (NWAttentionRegressor, {}),
        (NWAttentionRegressor, {"feature_slopes": True}),
        (MultiHeadNWRegressor, {"n_heads": 3, "head_dim": 2, "diversity": -0.5}),
    ],
)
def test_adam_steps_read_nothing_back(count_read_backs, kernel, Estimator, params):
    """On a device (array_api_strict's second one here) a step reads nothing
    back: the same epochs with four times as many steps read back exactly as
    often (once per epoch for the losses, plus the set-up)."""
    from sklearn import config_context

    xps, counts = count_read_backs
    X, y = make_friedman1(n_samples=600, n_features=5, noise=0.5, random_state=0)
    dev = xps.Device("device1")
    read_backs = {}
    for batch_size in (200, 50):
        counts["n"] = 0
        reg = Estimator(
            solver="adam",
            batch_size=batch_size,
            max_iter=3,
            n_iter_no_change=10,
            kernel=kernel,
            random_state=0,
            **params,
        )
        with config_context(array_api_dispatch=True), pytest.warns(ConvergenceWarning):
            reg.fit(xps.asarray(X, device=dev), xps.asarray(y, device=dev))
        assert reg.n_iter_ == 3
        read_backs[batch_size] = (counts["n"], reg.n_fev_)
    (few, few_steps), (many, many_steps) = read_backs[200], read_backs[50]
    assert many_steps >= 3 * few_steps  # the steps differ ...
    assert many == few  # ... the read-backs do not


def test_verbose_reports_epochs_with_time_left(data, capsys):
    X, y, _, _ = data
    with pytest.warns(ConvergenceWarning):
        NWAttentionRegressor(solver="adam", max_iter=4, verbose=1).fit(X, y)
    epochs = [
        line for line in capsys.readouterr().out.splitlines() if "] epoch " in line
    ]
    assert [line.split()[2] for line in epochs] == ["1/4", "2/4", "3/4", "4/4"]
    # A forecast from the third epoch on, and always the bound.
    assert all(re.search(r"\(left<=\d+s\)$", line) for line in epochs)
    assert ["left~" in line for line in epochs] == [False, False, True, True]
    assert epochs[-1].endswith("left~0s (left<=0s)")


def test_forecast_of_the_epochs_left():
    """The forecast follows a geometric approach to the plateau: more epochs
    while the loss still falls fast, the patience left once it is flat,
    never beyond the limit."""
    from nwensemble._fit.early_stopping import EarlyStopping

    losses = iter(1.0 + 0.5**e for e in range(60))
    monitor = EarlyStopping(
        lambda theta: next(losses), patience=5, tol=1e-6, noisy=True
    )
    forecasts = []
    for e in range(20):
        monitor.update(None)
        forecasts.append(monitor.epochs_left(100))
    assert forecasts[:2] == [None, None]
    # Halving gaps: about log2(gap / threshold) epochs more, plus patience.
    expected = np.log2(0.5**3 / (1e-6 / 5)) + 5
    assert abs(forecasts[3] - expected) <= 2
    assert all(f <= 100 for f in forecasts[2:])
    assert monitor.epochs_left(3) <= 3
    # Once flat, it counts down the patience left since the last improvement
    # (the whole patience each epoch would overstate the end tenfold).
    flat = EarlyStopping(lambda theta: 1.0, patience=5, tol=1e-6)
    left = []
    for _ in range(5):
        stop = flat.update(None)
        left.append(flat.epochs_left(100))
    assert left == [None, None, 3, 2, 1] and not stop
    assert flat.update(None)


def test_flat_noisy_losses_stop_the_fit():
    """Losses that only fluctuate stop a noisy monitor once the best of the
    last ``patience`` is no better than their spread, even though each
    fluctuation sets a new best by more than ``tol``."""
    from nwensemble._fit.early_stopping import EarlyStopping

    rng = np.random.default_rng(0)
    values = list(1.0 - 1e-3 * np.arange(12)) + list(0.989 + 0.002 * rng.random(200))
    losses = iter(values)
    noisy = EarlyStopping(lambda t: next(losses), patience=10, tol=1e-5, noisy=True)
    stops = [noisy.update(None) for _ in range(60)]
    assert 12 < stops.index(True) < 40


def test_scale_search_finds_the_grid_minimum(monkeypatch):
    """The halving search over the factor on W's scale picks the quarter
    power of two with the least held-out loss, here set to a known one."""
    from nwensemble._fit import adam

    for best in (-1.0, -0.75, 0.25, 1.5, 2.75, 3.0):
        seen = []

        def loss(W, *args, best=best, seen=seen, **kwargs):
            e = float(np.log2(W[0, 0]))
            seen.append(e)
            return (e - best) ** 2

        monkeypatch.setattr(adam, "heldout_loss", loss)
        W = adam._calibrate_scale(np.ones((2, 2)), (), (), n_heads=1, kernel=None)
        assert W[0, 0] == 2.0**best
        assert len(set(seen)) <= 9


def test_adam_scores_epochs_on_a_subset_of_the_scale_rows(monkeypatch):
    """Each epoch is scored on the same ``_MONITOR_ROWS`` held-out rows,
    drawn from the rows that choose the factor on the scale when they are
    more."""
    from nwensemble._fit import adam

    monkeypatch.setattr(adam, "_MONITOR_ROWS", 500)
    queries = []
    original = adam.heldout_loss

    def spy(W, Xq, *args, **kwargs):
        queries.append(np.asarray(Xq.numeric))
        return original(W, Xq, *args, **kwargs)

    monkeypatch.setattr(adam, "heldout_loss", spy)
    X, y = make_friedman1(n_samples=1400, n_features=5, noise=0.5, random_state=0)
    model = NWAttentionRegressor(
        solver="adam", validation_fraction=0.5, max_iter=3, random_state=0
    )
    with pytest.warns(ConvergenceWarning):
        model.fit(X, y)
    sizes = [q.shape[0] for q in queries]
    # three epochs on the monitor's rows, then the scale's search on all 700
    assert sizes[:3] == [adam._MONITOR_ROWS] * 3 and set(sizes[3:]) == {700}
    assert all(np.array_equal(q, queries[0]) for q in queries[1:3])
    scale_rows = {tuple(row) for row in queries[3]}
    assert all(tuple(row) in scale_rows for row in queries[0])


def test_adam_without_early_stopping_runs_every_epoch(data):
    """early_stopping=False: the epochs are not scored on held-out rows and
    the fit keeps the last epoch's projection (up to the final factor on its
    scale), not the best scored one."""
    X, y, _, _ = data
    kept = []
    with pytest.warns(ConvergenceWarning):
        model = NWAttentionRegressor(
            solver="adam",
            early_stopping=False,
            max_iter=4,
            n_iter_no_change=4,
            callback=lambda components, epoch: kept.append(components),
            random_state=0,
        ).fit(X, y)
    assert model.n_iter_ == 4
    # The fitted components are the last epoch's, up to the scale factor.
    last = kept[-1] / np.linalg.norm(kept[-1])
    fitted = model.components_ / np.linalg.norm(model.components_)
    assert_allclose(np.abs(np.sum(last * fitted)), 1.0, rtol=1e-6)


@pytest.mark.parametrize(
    "Estimator, params",
    [
        (MultiHeadNWRegressor, dict(n_heads=2, head_dim=2)),  # auto: random
        (MultiHeadNWRegressor, dict(n_heads=2, head_dim=2, init="pca")),
        (NWAttentionRegressor, dict(head_dim=2, init="random")),
        (NWAttentionRegressor, dict(head_dim=2)),  # auto: pca
    ],
)
def test_adam_step_is_relative_to_the_start(Estimator, params):
    """Adam's first step moves every entry by its learning rate (``m / sqrt(v)``
    is the gradient's sign): 0.04 of the start's root-mean-square entry,
    from random directions and from the searched starts alike."""
    import array_api_compat.numpy as xnp

    from nwensemble._fit.adam import fit_adam
    from nwensemble._fit.early_stopping import SOLVER_FRACTION, HoldOut
    from nwensemble._shared.design import numbers_design

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 5))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2
    seen = []
    config = Estimator(
        solver="adam", max_iter=1, batch_size=1000, early_stopping=False, **params
    )._fit_config()

    class Recorder:
        watching = True

        def report(self, W, n_iter):
            seen.append(W)

    config = dataclasses.replace(
        config, observer=Recorder(), hold_out=HoldOut(SOLVER_FRACTION, scored=False)
    )
    W0 = rng.standard_normal((5, config.n_heads * 2))
    fit_adam(
        config,
        W0,
        numbers_design(xnp.asarray(X)),
        xnp.asarray(y[:, None]),
        xnp.full(300, 1.0 / 300),
        rng=np.random.default_rng(0),
        xp=xnp,
    )
    step = np.abs(seen[0] - W0) / np.sqrt(np.mean(W0**2))
    assert_allclose(np.median(step), 0.04, rtol=1e-3)
