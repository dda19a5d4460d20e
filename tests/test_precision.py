"""The precision the solvers evaluate their losses in."""

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

import nwensemble._fit.adam as adam
import nwensemble._fit.lbfgs as lbfgs
from nwensemble import MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit.precision import FLOAT32_LOSS_ROWS, loss_rows, statistics_keys
from nwensemble._shared.design import numbers_design
from nwensemble._shared.kernels import resolve_kernel
from nwensemble._shared.keys import Keys
from nwensemble._shared.readout import Readout, target_range

# Rows and their dtype, and the dtype the rule takes them in: from
# FLOAT32_LOSS_ROWS float64 rows on float32, fewer stay float64, float32 stays.
ROWS_DTYPE_EXPECTED = [
    (FLOAT32_LOSS_ROWS, np.float64, np.float32),
    (FLOAT32_LOSS_ROWS - 1, np.float64, np.float64),
    (FLOAT32_LOSS_ROWS, np.float32, np.float32),
]


@pytest.mark.parametrize("n, dtype, expected", ROWS_DTYPE_EXPECTED)
def test_many_float64_rows_take_float32_losses(ns, n, dtype, expected):
    xp = ns.xp
    X = ns.asarray(np.ones((n, 2)), dtype=dtype)
    Y = ns.asarray(np.ones((n, 1)), dtype=dtype)
    sw = ns.asarray(np.full(n, 1.0 / n), dtype=dtype)
    rows, Y, sw = loss_rows(numbers_design(X), Y, sw, xp=xp)
    for a in (rows.numeric, Y, sw):
        assert a.dtype == xp.asarray(np.zeros(1, dtype=expected)).dtype
        ns.check_output(a)


def test_the_row_count_decides_when_given(ns):
    """Adam decides by its training rows, then casts its held-out rows alike."""
    xp = ns.xp
    X, Y, sw = (ns.asarray(np.ones(s)) for s in ((10, 2), (10, 1), (10,)))
    X = numbers_design(X)
    assert loss_rows(X, Y, sw, xp=xp, n_rows=FLOAT32_LOSS_ROWS)[0].dtype == xp.float32


def test_adam_evaluates_float32_and_keeps_float64(monkeypatch):
    """A float64 Adam fit on many rows takes its minibatch losses and its
    held-out losses in float32; the model it fits stays float64."""
    seen = {"loss": set(), "heldout": set()}

    def spy(name, fn):
        def wrapped(W, X, *args, **kwargs):
            seen[name].add((str(W.dtype), str(X.dtype)))
            return fn(W, X, *args, **kwargs)

        monkeypatch.setattr(adam, fn.__name__, wrapped)

    spy("loss", adam.loo_loss_and_grad)
    spy("heldout", adam.heldout_loss)
    X, y = make_friedman1(n_samples=2600, n_features=5, noise=0.5, random_state=0)
    model = MultiHeadNWRegressor(n_heads=2, solver="adam", max_iter=2, random_state=0)
    with pytest.warns(ConvergenceWarning):
        model.fit(X, y)
    assert seen["loss"] == {("float32", "float32")}
    assert {x for _, x in seen["heldout"]} == {"float32"}
    assert model.components_.dtype == np.float64
    assert model.predict(X[:5]).dtype == np.float64


def test_lbfgs_coarse_stage_evaluates_float32(monkeypatch):
    """One head's coarse L-BFGS stage (a subsample of ``COARSE_SIZE`` rows)
    is large enough for float32 losses, as the stage on all rows is."""
    seen = []
    original = lbfgs.loo_loss_and_grad

    def spy(W, X, *args, **kwargs):
        seen.append((X.shape[0], str(X.dtype)))
        return original(W, X, *args, **kwargs)

    monkeypatch.setattr(lbfgs, "loo_loss_and_grad", spy)
    X, y = make_friedman1(n_samples=2200, n_features=5, noise=0.5, random_state=0)
    with pytest.warns(ConvergenceWarning):
        NWAttentionRegressor(solver="lbfgs", max_iter=3, random_state=0).fit(X, y)
    assert lbfgs.COARSE_SIZE in {rows for rows, _ in seen}
    assert {dtype for _, dtype in seen} == {"float32"}


@pytest.mark.parametrize("n, dtype, expected", ROWS_DTYPE_EXPECTED)
def test_many_float64_keys_take_float32_statistics(ns, n, dtype, expected):
    """The leave-one-out statistics' keys: rows, targets, weights and the
    readout's range in float32 from as many float64 keys as the losses."""
    xp = ns.xp
    rng = np.random.default_rng(0)
    Y = ns.asarray(rng.normal(size=(n, 1)), dtype=dtype)
    keys = Keys.of(
        ns.asarray(rng.normal(size=(n, 2)), dtype=dtype),
        Y,
        ns.asarray(np.full(n, 1.0 / n), dtype=dtype),
        kernel=resolve_kernel("softmax"),
        n_heads=1,
        readout=Readout(1.0, *target_range(Y, ns.asarray(np.ones(n)), xp=xp)),
    )
    taken = statistics_keys(keys)
    want = xp.asarray(np.zeros(1, dtype=expected)).dtype
    for a in (taken.Z, taken.Y, taken.log_sw, taken.readout.low, taken.readout.high):
        assert a.dtype == want
        ns.check_output(a)
    if expected == dtype:
        assert taken is keys
    else:
        got, was = ns.check_output(taken.Z), ns.check_output(keys.Z)
        np.testing.assert_allclose(got, was, rtol=1e-7)


def test_statistics_keys_cast_every_heads_readout():
    """Members with different ridges read one readout per head: each
    readout's range is cast with the keys."""
    rng = np.random.default_rng(1)
    n = FLOAT32_LOSS_ROWS
    Y = rng.normal(size=(n, 1))
    low, high = target_range(Y, np.ones(n), xp=np)
    keys = Keys.of(
        rng.normal(size=(n, 4)),
        Y,
        np.full(n, 1.0 / n),
        kernel=resolve_kernel("softmax"),
        n_heads=2,
        readout=(Readout(0.1, low, high), Readout(1.0, low, high)),
    )
    taken = statistics_keys(keys)
    assert [r.ridge for r in taken.readout] == [0.1, 1.0]
    for r in taken.readout:
        assert r.low.dtype == r.high.dtype == np.float32
    assert taken.Z.dtype == taken.Y.dtype == taken.log_sw.dtype == np.float32
