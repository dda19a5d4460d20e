"""``diversity='auto'``: the choice on held-out rows and its plumbing."""

import types
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from nwensemble import MultiHeadNWRegressor
from nwensemble._fit.config import SolverResult
from nwensemble._fit.diversity import AUTO_CANDIDATES, _heldout_losses
from nwensemble._fit.early_stopping import heldout_loss
from nwensemble._fit.feature_slopes import FeatureSlopes
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import KERNELS
from nwensemble._shared.rows import take_rows


def test_auto_is_the_fit_of_the_chosen_value(friedman):
    """'auto' ends with exactly the model that the chosen value fits with
    early stopping on the same held-out rows."""
    X, y = friedman
    kw = dict(n_heads=3, head_dim=2, random_state=0)
    auto = MultiHeadNWRegressor(diversity="auto", **kw).fit(X, y)
    assert auto.diversity_ in AUTO_CANDIDATES
    fixed = MultiHeadNWRegressor(
        diversity=auto.diversity_, early_stopping=True, **kw
    ).fit(X, y)
    assert_array_equal(auto.components_, fixed.components_)
    assert_array_equal(auto.predict(X[:20]), fixed.predict(X[:20]))
    assert auto.bvc_decomposition_ == fixed.bvc_decomposition_


def test_auto_with_slopes_learned_by_adam(friedman):
    """With the slopes learned in Adam's steps, each candidate is scored
    through its own slopes, and 'auto' ends with the chosen value's model,
    its slopes included."""
    X, y = friedman
    kw = dict(
        n_heads=2,
        head_dim=2,
        solver="adam",
        batch_size=64,
        max_iter=6,
        feature_slopes=True,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        auto = MultiHeadNWRegressor(diversity="auto", **kw).fit(X, y)
        fixed = MultiHeadNWRegressor(
            diversity=auto.diversity_, early_stopping=True, **kw
        ).fit(X, y)
    slopes = auto.predictor_.features.slopes
    assert slopes is not None
    assert_array_equal(slopes.slope, fixed.predictor_.features.slopes.slope)
    assert_array_equal(auto.predict(X[:20]), fixed.predict(X[:20]))


@pytest.mark.parametrize(
    "params",
    [dict(n_heads=3, head_dim=2, early_stopping=False), dict(n_heads=1, head_dim=2)],
)
def test_auto_without_heldout_rows_or_heads_is_zero(friedman, params):
    """Without held-out rows, or with one head, 'auto' is diversity=0."""
    X, y = friedman
    auto = MultiHeadNWRegressor(diversity="auto", random_state=0, **params).fit(X, y)
    zero = MultiHeadNWRegressor(diversity=0.0, random_state=0, **params).fit(X, y)
    assert auto.diversity_ == 0.0
    assert_array_equal(auto.components_, zero.components_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_auto_says_what_it_chose(friedman, capsys):
    X, y = friedman
    MultiHeadNWRegressor(
        n_heads=2, head_dim=2, diversity="auto", max_iter=5, random_state=0, verbose=1
    ).fit(X, y)
    lines = [s for s in capsys.readouterr().out.splitlines() if "diversity='auto'" in s]
    # One line before each candidate's fit, then the held-out losses.
    assert [s.split("candidate ")[1] for s in lines[:-1]] == [
        f"{i + 1}/{len(AUTO_CANDIDATES)}, diversity={value:g}"
        for i, value in enumerate(AUTO_CANDIDATES)
    ]
    line = lines[-1]
    losses = {
        float(k): float(v)
        for k, v in (
            part.split(": ")
            for part in line.split("loss ")[1].split("; ")[0].split(", ")
        )
    }
    assert sorted(losses) == sorted(AUTO_CANDIDATES)
    assert float(line.split("chose ")[1]) == min(losses, key=losses.get)


@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
def test_auto_in_every_namespace(ns, friedman, solver):
    """'auto' chooses as under NumPy, with its arrays on the input's device."""
    X, y = friedman
    kw = dict(
        n_heads=2,
        head_dim=2,
        diversity="auto",
        solver=solver,
        batch_size=64,
        max_iter=8,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = MultiHeadNWRegressor(**kw).fit(X, y)
        with ns.context():
            model = MultiHeadNWRegressor(**kw).fit(ns.asarray(X), ns.asarray(y))
            pred = ns.check_output(model.predict(ns.asarray(X[:5])))
    assert model.diversity_ == ref.diversity_
    assert_allclose(pred, ref.predict(X[:5]), rtol=1e-6)


def test_candidates_are_scored_through_their_own_slopes():
    """A candidate that learned feature slopes is scored on the held-out
    rows mapped by them; one without, on the rows as they are."""
    rng = np.random.default_rng(0)
    n, p = 60, 2
    Xs = numbers_design(rng.standard_normal((n, p)))
    Ys = rng.standard_normal((n, 1))
    sw = np.full(n, 1.0 / n)
    heldout = np.arange(0, n, 3)
    W = rng.standard_normal((p, 2))
    low = np.array([[-1.0, 0.0], [-1.0, 0.0]])
    slopes = FeatureSlopes(low, np.ones((p, 2)), np.array([[3.0, 0.5], [1.0, 2.0]]))
    fits = [
        SolverResult(W, 1, 1, [], False),
        SolverResult(W, 1, 1, [], False, slopes=slopes),
    ]
    config = types.SimpleNamespace(kernel=KERNELS["softmax"], n_heads=1)
    losses = _heldout_losses(fits, Xs, Ys, sw, heldout, config, np)
    rest = np.setdiff1d(np.arange(n), heldout)
    scored, keys = (take_rows(Xs, Ys, sw, rows, xp=np) for rows in (heldout, rest))
    for loss, mapping in zip(losses, (lambda X: X, slopes.design)):
        expected = heldout_loss(
            W,
            mapping(scored[0]),
            *scored[1:],
            mapping(keys[0]),
            *keys[1:],
            kernel=config.kernel,
            n_heads=1,
        )
        assert_allclose(loss, expected, rtol=1e-12)
    assert losses[0] != losses[1]
