"""Where the projections start: the identity start's per-feature scales."""

import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

import nwensemble._fit.start as start
from nwensemble import NWAttentionRegressor


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

    def record_common(*args, **kwargs):
        seen["common"], loss = best_scale(*args, **kwargs)
        return seen["common"], loss

    def record_own(*args, **kwargs):
        seen["own"], loss = fit_scales(*args, **kwargs)
        return seen["own"], loss

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
