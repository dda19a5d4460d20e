"""An interrupted or failed fit leaves the estimator unfitted or exactly as
it was before."""

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.exceptions import NotFittedError

import nwensemble._base
import nwensemble._fit.engine
import nwensemble._fit.start
from nwensemble import HeadAllocator, MultiHeadNWRegressor, NWAttentionRegressor

X_old, y_old = make_friedman1(n_samples=80, n_features=5, noise=0.5, random_state=0)
X_new, y_new = make_friedman1(n_samples=90, n_features=7, noise=0.5, random_state=1)


class Interrupt(KeyboardInterrupt):
    """Raised at the point under test (a KeyboardInterrupt, as from Ctrl-C)."""


def _interrupt(*args, **kwargs):
    raise Interrupt


def _interrupt_at_iteration(n):
    def callback(components, n_iter):
        if n_iter >= n:
            raise Interrupt

    return callback


# Points inside fit: (module, name) patched to raise, or None for a callback.
POINTS = {
    "callback": None,
    "start stage": (nwensemble._fit.start, "_best_scale"),
    "leave-one-out statistics": (nwensemble._fit.engine, "_leave_one_out"),
    "head combination": (nwensemble._base, "combine_heads"),
}

ESTIMATORS = {
    "NWAttention": lambda **kw: NWAttentionRegressor(max_iter=5, **kw),
    "MultiHeadNW": lambda **kw: MultiHeadNWRegressor(
        n_heads=2, head_dim=2, max_iter=5, **kw
    ),
}


def _interrupted_fit(make, point, monkeypatch, model=None):
    """Fit ``model`` (or a new one) on the 7-feature data, interrupted at
    ``point``; return the model."""
    if point == "callback":
        model = model or make()
        model.set_params(callback=_interrupt_at_iteration(2))
    else:
        model = model or make()
        monkeypatch.setattr(*POINTS[point], _interrupt)
    with pytest.raises(Interrupt):
        model.fit(X_new, y_new)
    return model


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_interrupted_first_fit_leaves_estimator_unfitted(name, point, monkeypatch):
    model = _interrupted_fit(ESTIMATORS[name], point, monkeypatch)
    assert not hasattr(model, "n_features_in_")
    with pytest.raises(NotFittedError):
        model.predict(X_new)


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_interrupted_refit_keeps_previous_model(name, point, monkeypatch):
    model = ESTIMATORS[name](random_state=0).fit(X_old, y_old)
    before = dict(vars(model))
    pred = model.predict(X_old)
    _interrupted_fit(ESTIMATORS[name], point, monkeypatch, model=model)
    model.set_params(callback=None)
    assert model.n_features_in_ == 5
    assert set(vars(model)) == set(before)
    for key, value in before.items():
        if key != "callback":
            assert vars(model)[key] is value, key
    np.testing.assert_array_equal(model.predict(X_old), pred)


def test_failed_fit_keeps_previous_model():
    """An error (not only an interrupt) restores the previous state too."""
    model = NWAttentionRegressor(max_iter=3, warm_start=True).fit(X_old, y_old)
    components = model.components_
    with pytest.raises(ValueError, match="warm_start=True needs the 5 features"):
        model.fit(X_new, y_new)
    assert model.components_ is components
    assert model.n_features_in_ == 5
    model.predict(X_old)


@pytest.mark.parametrize("strategy, cv", [("cv", None), ("cv", 2), ("theory", None)])
def test_interrupted_allocator_keeps_previous_state(strategy, cv):
    calls = {"n": 0}

    def callback(components, n_iter):
        calls["n"] += 1
        if calls["n"] > 1:
            raise Interrupt

    est = MultiHeadNWRegressor(max_iter=3, random_state=0)
    alloc = HeadAllocator(est, budget=4, cv=cv, strategy=strategy)
    with pytest.raises(Interrupt):
        alloc.set_params(estimator__callback=callback).fit(X_new, y_new)
    with pytest.raises(NotFittedError):
        alloc.predict(X_new)

    alloc.set_params(estimator__callback=None).fit(X_old, y_old)
    before = dict(vars(alloc))
    pred = alloc.predict(X_old)
    calls["n"] = 0
    with pytest.raises(Interrupt):
        alloc.set_params(estimator__callback=callback).fit(X_new, y_new)
    assert alloc.n_features_in_ == 5
    assert alloc.best_estimator_ is before["best_estimator_"]
    np.testing.assert_array_equal(alloc.predict(X_old), pred)
