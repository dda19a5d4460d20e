"""Early stopping: the 'auto' rule, the held-out rows, their loss and the
monitor."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from test_loo_loss import _problem

from nwensemble._fit.early_stopping import (
    EARLY_STOPPING_FRACTION,
    EARLY_STOPPING_MIN_ROWS,
    SOLVER_FRACTION,
    EarlyStopping,
    HoldOut,
    heldout_loss,
    hold_out_plan,
    holds_out,
    split_validation,
)
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import KERNELS


def test_auto_rule_holds_out_between_its_bounds():
    """'auto' holds rows out from EARLY_STOPPING_MIN_ROWS rows and below 20
    rows per parameter; booleans are obeyed; no parameter count, no upper
    bound."""
    n = EARLY_STOPPING_MIN_ROWS
    assert not holds_out("auto", n - 1, 1000)
    assert holds_out("auto", n, 1000)
    assert holds_out("auto", 1999, 100) and not holds_out("auto", 2000, 100)
    assert holds_out("auto", 10**6) and not holds_out("auto", n - 1)
    assert holds_out(True, 3, 1) and not holds_out(False, 10**6, 10**6)


def test_the_plan_reads_both_parameters_once():
    """L-BFGS holds out as ``holds_out`` says (no parameter bound while
    choosing diversity), the stochastic solver always, each with its own
    'auto' share; Adam scores its epochs unless early_stopping=False."""
    n = EARLY_STOPPING_MIN_ROWS

    def plan(early_stopping, n_positive, n_params=10, **kw):
        kw = {"stochastic": False, "choosing": False, **kw}
        return hold_out_plan(
            early_stopping, "auto", n_positive=n_positive, n_params=n_params, **kw
        )

    assert plan("auto", n, 10) == HoldOut(EARLY_STOPPING_FRACTION, True)
    assert plan("auto", 1999, 100) == HoldOut(EARLY_STOPPING_FRACTION, True)
    assert plan("auto", 2000, 100) == HoldOut(0.0, False)
    assert plan("auto", 2000, 100, choosing=True).fraction > 0
    assert plan("auto", n - 1, choosing=True) == HoldOut(0.0, False)
    assert plan(False, 10, stochastic=True) == HoldOut(SOLVER_FRACTION, False)
    assert plan("auto", 10, stochastic=True) == HoldOut(SOLVER_FRACTION, True)
    given = hold_out_plan(
        True, 0.25, n_positive=3, n_params=1, stochastic=False, choosing=False
    )
    assert given == HoldOut(0.25, True)


def test_split_validation_renormalises_and_refuses_too_few_rows():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    sw = np.full(20, 1 / 20)
    (Xt, _, swt), (Xv, _, swv), rows = split_validation(
        HoldOut(0.25, True),
        numbers_design(X),
        Y,
        sw,
        rng=np.random.RandomState(0),
        xp=np,
    )
    assert Xt.shape[0] == 15 and Xv.shape[0] == 5 and rows.shape == (5,)
    assert_allclose([swt.sum(), swv.sum()], [1.0, 1.0])
    with pytest.raises(ValueError, match="need at least 2 and 1"):
        split_validation(
            HoldOut(0.99, True),
            numbers_design(X),
            Y,
            sw,
            rng=np.random.RandomState(0),
            xp=np,
        )


def test_early_stopping_keeps_best_and_stops():
    """The monitor keeps the best parameters and stops after its patience."""
    losses = iter([1.0, 0.5, 0.6, 0.7, 0.8])
    monitor = EarlyStopping(lambda theta: next(losses), patience=3, tol=0.0)
    monitor.start(np.array([0.0]))
    assert not monitor.update(np.array([1.0]))
    assert not monitor.update(np.array([2.0]))
    assert not monitor.update(np.array([3.0]))
    assert monitor.update(np.array([4.0]))
    np.testing.assert_array_equal(monitor.best_theta, [1.0])


def test_heldout_loss_uses_only_keys():
    """The held-out loss predicts queries from the key rows alone."""
    W, X, Y, sw = _problem(30, 4, 2, 1, weighted=False)
    q, k = slice(0, 10), slice(10, None)
    got = heldout_loss(
        W,
        numbers_design(X[q]),
        Y[q],
        sw[q] / sw[q].sum(),
        numbers_design(X[k]),
        Y[k],
        sw[k],
        kernel=KERNELS["softmax"],
        n_heads=1,
    )
    Zq, Zk = X[q] @ W, X[k] @ W
    d2 = ((Zq[:, None] - Zk[None]) ** 2).sum(-1)
    w = np.exp(-0.5 * (d2 - d2.min(1, keepdims=True)))
    pred = (w / w.sum(1, keepdims=True)) @ Y[k]
    assert_allclose(got, np.mean(np.sum((pred - Y[q]) ** 2, axis=1)), rtol=1e-12)
