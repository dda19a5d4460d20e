"""The L-BFGS driver and its thread handling."""

import time

import numpy as np
from numpy.testing import assert_array_equal
from sklearn.datasets import make_friedman1
from threadpoolctl import threadpool_info

from nwensemble import NWAttentionRegressor
from nwensemble._fit.lbfgs_run import (
    BlasThreads,
    LBFGSRun,
    _other_blas_single_threaded,
    fit_threads,
)
from nwensemble._shared.host_threads import _PRODUCT_THREADS


def _threads():
    return {
        info["filepath"]: info["num_threads"]
        for info in threadpool_info()
        if info["user_api"] == "blas"
    }


def test_other_blas_held_to_one_thread_and_restored():
    """Inside the context only NumPy's BLAS keeps its threads; after, all do."""
    before = _threads()
    with _other_blas_single_threaded():
        inside = _threads()
    assert _threads() == before
    changed = {path for path in before if inside[path] != before[path]}
    assert all(inside[path] == 1 for path in changed)
    assert any("numpy" in path and inside[path] == before[path] for path in before)


def test_lbfgs_run_minimises_a_quadratic():
    """The driver reaches the minimum and records one loss per iteration."""
    target = np.arange(4.0)
    run = LBFGSRun(
        lambda t: (float(np.sum((t - target) ** 2)), 2 * (t - target)), name="T"
    )
    result = run.run(np.zeros(4), max_iter=50, tol=1e-10)
    np.testing.assert_allclose(result.x, target, atol=1e-6)
    assert len(run.loss_curve) == result.nit


def _numpy_blas_threads():
    return max(
        n for path, n in _threads().items() if "numpy" in path or "openblas" in path
    )


def test_fit_threads_holds_blas_to_one_and_restores():
    """Inside a fit BLAS runs on one thread; the setting is restored after."""
    before = _threads()
    with fit_threads():
        assert set(_threads().values()) == {1}
    assert _threads() == before


def test_blas_threads_takes_the_faster_setting_and_probes_again():
    """The chooser times one evaluation on each setting, then keeps the
    faster, and tries the other again every ``probe_every`` evaluations;
    BLAS runs on one thread either way (the products take the threads)."""
    outside = _numpy_blas_threads()
    if outside < 2:
        return  # one thread outside: nothing to choose
    seen = []

    def evaluation():
        assert _numpy_blas_threads() == 1
        threaded = _PRODUCT_THREADS.get()
        seen.append(threaded)
        time.sleep(0.02 if threaded else 0.001)  # one thread is faster

    with fit_threads():
        chooser = BlasThreads(probe_every=4)
        for _ in range(12):
            chooser.run(evaluation)
    assert seen[:3] == [True, True, False]
    assert chooser.choice == 1
    # after the probes, mostly one thread, with the other tried now and then
    assert seen[3:].count(False) > seen[3:].count(True) > 0


def test_a_fit_repeats_itself_whichever_setting_its_evaluations_take(monkeypatch):
    """The timed choice between one thread and several moves an
    evaluation's time, not its value: a fit whose evaluations all take the
    products on threads equals one whose evaluations all take one thread,
    to the last bit (OpenBLAS alone rounds differently on one and two)."""
    X, y = make_friedman1(n_samples=1100, noise=1.0, random_state=0)
    fits = {}
    for threaded in (True, False):
        monkeypatch.setattr(BlasThreads, "_next", lambda self, t=threaded: 1 + t)
        monkeypatch.setattr(
            BlasThreads, "choice", property(lambda self, t=threaded: 1 + t)
        )
        model = NWAttentionRegressor(max_iter=8, early_stopping=False, random_state=0)
        fits[threaded] = model.fit(X, y).predict(X[:50])
    assert_array_equal(fits[True], fits[False])
