"""L-BFGS driver: parameters on the host, everything n-sized on the array's device."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import contextvars
import time

import numpy as np
from scipy.optimize import minimize

from nwensemble._shared.host_threads import (
    blas_libraries,
    other_blas_libraries,
    products_on_threads,
)


class LBFGSRun:
    """One L-BFGS minimisation with iteration bookkeeping and verbose output.

    Parameters
    ----------
    fun : callable
        ``fun(theta) -> (loss, grad)`` on a flat float64 NumPy vector.
    name : str
        Prefix of verbose lines (the estimator's class name).
    verbose : int
        Print one line per iteration when positive.
    observer : IterateObserver or None
        Told of the projection ``projection(theta)`` after every iteration,
        ``n_iter`` counting across all runs that share ``offset``.
    projection : callable or None
        The projection ``W`` of the parameters ``theta``.
    monitor : EarlyStopping or None
        Asked after every iteration whether to stop.
    offset : int
        Iterations already done by earlier stages of the same fit.
    stage : str
        Label of this stage in verbose output.
    """

    def __init__(
        self,
        fun,
        *,
        name,
        verbose=0,
        observer=None,
        projection=None,
        monitor=None,
        offset=0,
        stage="",
    ):
        self.fun = fun
        self.monitor = monitor
        self.name = name
        self.verbose = verbose
        self.observer = observer
        self.projection = projection
        self.offset = offset
        self.stage = stage
        self.loss_curve = []
        self._last_loss = None
        self._start = None
        self._threads = None

    def _fun(self, theta):
        loss, grad = self._threads.run(self.fun, theta)
        self._last_loss = loss
        return loss, np.asarray(grad, dtype=np.float64).ravel()

    def _on_iteration(self, intermediate_result):
        loss = float(intermediate_result.fun)
        self.loss_curve.append(loss)
        n_iter = self.offset + len(self.loss_curve)
        stop = self.monitor is not None and self._threads.run(
            self.monitor.update, intermediate_result.x, timed=False
        )
        if self.verbose:
            elapsed = time.perf_counter() - self._start
            extra = "" if self.monitor is None else f"  val={self.monitor.last:.6e}"
            print(
                f"[{self.name}] {self.stage}iter {n_iter:4d}  loss={loss:.6e}{extra}  "
                f"elapsed={elapsed:.2f}s",
                flush=True,
            )
        if self.observer is not None and self.observer.watching:
            self.observer.report(self.projection(intermediate_result.x), n_iter)
        if stop:
            # scipy ends the run and reports status 99, not a failure.
            raise StopIteration

    def run(self, theta0, *, max_iter, tol):
        """Minimise from ``theta0``; return scipy's ``OptimizeResult``.

        Evaluations run on as many BLAS threads as ``BlasThreads`` finds
        fastest. Any other BLAS than NumPy's (scipy's wheels bring their own
        OpenBLAS, which L-BFGS-B calls between evaluations) is held to one
        thread: its idle threads spin and take the cores from NumPy's.
        """
        self._start = time.perf_counter()
        self._threads = BlasThreads()
        with _other_blas_single_threaded():
            return minimize(
                self._fun,
                np.asarray(theta0, dtype=np.float64).ravel(),
                jac=True,
                method="L-BFGS-B",
                callback=self._on_iteration,
                options={"maxiter": max_iter, "ftol": tol, "gtol": tol, "maxls": 40},
            )


# BLAS threads outside the running fit (``fit_threads``), which the fit's
# large evaluations may take back.
_THREADS_OUTSIDE = contextvars.ContextVar("blas_threads_outside_fit", default=None)


def _threads_outside(blas):
    """BLAS threads outside the running fit: those recorded by an enclosing
    ``fit_threads`` (a fit inside a fit), else the most any library has."""
    outside = _THREADS_OUTSIDE.get()
    if outside is not None:
        return outside
    return max([lib.num_threads for lib in blas.lib_controllers], default=1)


@contextlib.contextmanager
def fit_threads():
    """Hold BLAS to one thread for the many small products of a fit.

    Two threads can run several times slower than one when another process
    keeps a core busy (each waits for the other at every product), and the
    products of a start stage or of the leave-one-out statistics are too
    small to gain from a second thread anyway. ``BlasThreads`` gives the
    threads outside back to the evaluations that measurably run faster
    with them.
    """
    blas = blas_libraries()
    token = _THREADS_OUTSIDE.set(_threads_outside(blas))
    try:
        with blas.limit(limits=1):
            yield
    finally:
        _THREADS_OUTSIDE.reset(token)


class BlasThreads:
    """Run repeated evaluations on one thread or with their products on the
    host's threads (when the fit had more than one BLAS thread outside,
    ``fit_threads``), whichever their own timings say is faster.

    Whether a second thread pays depends on the size of the products and on
    what else the machine runs, so the choice is measured: after a first
    evaluation that warms the buffers, one of each, then the faster setting
    by the median of its last three times, with the other tried again every
    ``probe_every`` evaluations in case the machine's load changed. Either
    way the products are taken in the same blocks (``products_on_threads``),
    so the choice moves the time of an evaluation, never its value, and a
    fit repeats itself whatever the machine's load.
    """

    def __init__(self, probe_every=16):
        self.probe_every = probe_every
        self._blas = blas_libraries()
        self._many = _threads_outside(self._blas)
        self._times = {self._many: [], 1: []}
        self._count = 0

    @property
    def choice(self):
        """The number of threads that was faster so far."""
        if self._many == 1 or not (self._times[1] and self._times[self._many]):
            return self._many
        median = {k: float(np.median(v[-3:])) for k, v in self._times.items()}
        return 1 if median[1] < median[self._many] else self._many

    def run(self, fun, *args, timed=True):
        """``fun(*args)`` on the threads due; timed unless told otherwise."""
        if self._many == 1:
            with products_on_threads(False):
                return fun(*args)
        threads = self._next() if timed else self.choice
        start = time.perf_counter()
        with products_on_threads(threads > 1):
            result = fun(*args)
        if timed:
            if self._count > 0:  # the first call allocates the workspace
                self._times[threads].append(time.perf_counter() - start)
            self._count += 1
        return result

    def _next(self):
        k = self._count - 1
        if k < 0:
            return self._many
        if k < 2:
            return (self._many, 1)[k]
        choice = self.choice
        if k % self.probe_every == 0:
            return 1 if choice == self._many else self._many
        return choice


def _other_blas_single_threaded():
    """Context holding every BLAS library but NumPy's to one thread.

    A no-op where NumPy's library cannot be told apart (one shared BLAS, as in
    conda environments, has no second pool to compete with).
    """
    others = other_blas_libraries()
    return contextlib.nullcontext() if others is None else others.limit(limits=1)
