"""The prediction object, the leave-one-out predictions it publishes, and
the fitting engine used alone."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import make_friedman1
from sklearn.model_selection import LeaveOneOut, cross_val_predict

from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit.adam import fit_adam
from nwensemble._fit.config import FitConfig, IterateObserver, SolverResult
from nwensemble._fit.early_stopping import HoldOut
from nwensemble._fit.engine import scaled_targets
from nwensemble._fit.lbfgs import fit_lbfgs
from nwensemble._fit.start import initial_projection
from nwensemble._predict.predictor import NWPredictor
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import resolve_kernel


def test_loo_prediction_is_leave_one_out_with_fixed_projection():
    """``loo_prediction_`` predicts each row from the others with the fitted
    projection: the model refitted without the row, with the same components
    and no iterations, predicts it the same."""
    X, y = make_friedman1(n_samples=40, n_features=5, noise=0.3, random_state=0)
    params = dict(standardize=False, duplicate_weight=0, local_fit="constant")
    reg = NWAttentionRegressor(random_state=0, **params).fit(X, y)
    assert reg.loo_prediction_.shape == y.shape
    fixed = NWAttentionRegressor(init=reg.components_, max_iter=0, **params)
    loo = cross_val_predict(fixed, X, y, cv=LeaveOneOut())
    assert_allclose(reg.loo_prediction_, loo, rtol=1e-10)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_loo_prediction_is_nan_outside_the_sampled_rows(monkeypatch):
    monkeypatch.setattr("nwensemble._fit.engine.LOO_STATS_ROWS", 50)
    X, y = make_friedman1(n_samples=120, n_features=5, random_state=0)
    Y = np.column_stack([y, -y])
    reg = MultiHeadNWRegressor(n_heads=2, max_iter=3, bvc_resamples=0).fit(X, Y)
    computed = np.all(np.isfinite(reg.loo_prediction_), axis=1)
    assert reg.loo_prediction_.shape == (120, 2)
    assert computed.sum() == 50
    assert np.all(np.isnan(reg.loo_prediction_[~computed]))


def test_predictor_is_built_once_and_frozen():
    """The fitted model is a value: neither the predictor nor its parts take
    new attributes after fit."""
    import dataclasses

    X, y = make_friedman1(n_samples=60, n_features=5, random_state=1)
    predictor = NWAttentionRegressor(max_iter=3).fit(X, y).predictor_
    for value in (predictor, predictor.keys, predictor.combination):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.n_heads = 3


def test_predictor_surface_matches_the_estimator():
    X, y = make_friedman1(n_samples=80, n_features=5, random_state=1)
    reg = MultiHeadNWRegressor(n_heads=2, head_dim=2, bvc_resamples=0).fit(X, y)
    predictor = reg.predictor_
    assert isinstance(predictor, NWPredictor)
    assert predictor.n_heads == 2 and predictor.keys.kernel.name == "softmax"
    assert predictor.n_samples_fit == 80
    assert_allclose(predictor.project(X[:5]), reg.transform(X[:5]))
    assert_allclose(predictor.predict(X[:5]), reg.predict(X[:5]))
    assert predictor.support_fallback(reg.transform(X[:5])).shape == (5, 2)


@pytest.mark.parametrize("solve", [fit_lbfgs, fit_adam])
def test_the_fitting_engine_runs_without_an_estimator(solve):
    """A frozen configuration and arrays in, a ``SolverResult`` out."""
    X, y = make_friedman1(n_samples=120, n_features=5, random_state=2)
    Xs = (X - X.mean(0)) / X.std(0)
    sw = np.full(len(y), 1.0 / len(y))
    Ys = scaled_targets(y[:, None], sw, xp=np)
    params = MultiHeadNWRegressor(head_dim=2, max_iter=5, batch_size=32).get_params()
    config = FitConfig.from_params(
        params,
        kernel=resolve_kernel("softmax"),
        n_heads=2,
        diversity=0.0,
        callback=None,
        name="engine",
    )
    rng = np.random.default_rng(0)
    W0 = initial_projection(config, None, Xs, Ys, sw, np.ones(5), rng=rng, xp=np).W
    config = config.replace(
        hold_out=HoldOut(0.2, True), observer=IterateObserver(None, 2, False)
    )
    result = solve(config, W0, numbers_design(Xs), Ys, sw, rng=rng, xp=np)
    assert isinstance(result, SolverResult)
    assert result.W.shape == W0.shape == (5, 4)
    assert 0 < result.n_iter <= 5 and len(result.loss_curve) == result.n_iter
    with pytest.raises(AttributeError):
        config.max_iter = 10  # frozen


def test_shared_docstrings_have_no_placeholder_left():
    from nwensemble import HeadAllocator, plotting

    objects = [NWAttentionRegressor, MultiHeadNWRegressor, HeadAllocator]
    objects += [getattr(plotting, name) for name in plotting.__all__]
    objects += [NWAttentionRegressor.fit, MultiHeadNWRegressor.fit]
    for obj in objects:
        assert "%(" not in obj.__doc__, obj
    assert "loo_prediction_ :" in MultiHeadNWRegressor.__doc__
    assert "loo_prediction_ :" in NWAttentionRegressor.__doc__
