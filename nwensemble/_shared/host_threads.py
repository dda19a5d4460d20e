"""Work on the host's cores: tasks mapped onto a thread pool, BLAS
threads held while they run, and products in a fixed order whatever the
threads."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import contextvars
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import array_api_compat
import numpy as np
from sklearn import config_context, get_config
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
from threadpoolctl import ThreadpoolController

from nwensemble._shared.backend import matmul_into, takes_out

# Scores (queries x keys x heads) from which a pass runs on threads: below,
# the threads cost more than they save (the performance notes measure the
# break-even).
THREADED_SCORES = 1 << 21


def map_on_host_threads(fn, tasks, *, xp, threads=True):
    """``[fn(task) for task in tasks]``, on one thread per core for NumPy.

    NumPy releases the GIL in its ufuncs and products, so independent tiles
    run in parallel; BLAS is held to one thread meanwhile (restored after), as
    the threads already use every core. The calling thread takes tasks
    beside one fewer of the pool's threads (a map of small tasks then waits
    for one wake-up, not every thread's), and the pool's threads take
    theirs in the caller's context and scikit-learn configuration, so that
    a task computes the same whichever thread takes it. With
    ``threads=False``, and for other namespaces (a GPU queues the work
    anyway), the tasks run in order.
    """
    tasks = list(tasks)
    n_threads = 1
    if threads and array_api_compat.is_numpy_namespace(xp):
        n_threads = min(_openmp_effective_n_threads(), len(tasks))
    if n_threads <= 1 or threading.current_thread().name.startswith(_POOL_NAME):
        # A task of the pool that maps again runs its tasks itself: waiting
        # on the pool from inside it could leave no thread to run them.
        return [fn(task) for task in tasks]
    results = [None] * len(tasks)
    order = iter(range(len(tasks)))
    lock = threading.Lock()

    def take_tasks():
        while True:
            with lock:
                i = next(order, None)
            if i is None:
                return
            results[i] = fn(tasks[i])

    context, config = contextvars.copy_context(), get_config()

    def help_take_tasks():
        with config_context(**config):
            take_tasks()

    with blas_single_threaded():
        helpers = [
            _host_pool().submit(context.copy().run, help_take_tasks)
            for _ in range(n_threads - 1)
        ]
        try:
            take_tasks()
        finally:
            for helper in helpers:
                # A helper not yet started finds no task left.
                if not helper.cancel():
                    helper.result()
    return results


# Least rows (or columns) per block of ``fixed_order_matmul``: smaller
# blocks cost more calls than the threads save.
_PRODUCT_BLOCK = 512

# Within ``products_on_threads``: whether the blocked products may run on
# the host's threads (None outside: products as BLAS is set).
_PRODUCT_THREADS = contextvars.ContextVar("nwensemble_product_threads", default=None)


@contextlib.contextmanager
def products_on_threads(threads):
    """Within, BLAS runs on one thread and ``fixed_order_matmul`` takes its
    products in fixed blocks, on the host's threads when ``threads``: the
    products' rounding is then the same on one thread as on several
    (OpenBLAS's is not: it splits a product differently on one thread and on
    two), so that an evaluation gives the same value whichever it runs on."""
    token = _PRODUCT_THREADS.set(bool(threads))
    try:
        with blas_single_threaded():
            yield
    finally:
        _PRODUCT_THREADS.reset(token)


def blas_single_threaded():
    """Context holding NumPy's BLAS to one thread: products then round the
    same whatever BLAS was set to. Nothing to do where every library already
    runs on one (within a fit, ``fit_threads``): asking costs a small
    fraction of setting and restoring the limit, which a small evaluation
    would otherwise pay several times."""
    libraries = blas_libraries()
    if all(lib.get_num_threads() == 1 for lib in libraries.lib_controllers):
        return contextlib.nullcontext()
    return libraries.limit(limits=1)


def fixed_order_matmul(A, B, *, xp, blocks_of="A", out=None):
    """``A @ B`` (into ``out`` where given and allowed, see ``matmul_into``).

    Within ``products_on_threads`` and for NumPy, in equal blocks of the
    rows of ``A`` (``blocks_of="A"``) or the columns of ``B`` (``"B"``): a
    power of two of them, of at least ``_PRODUCT_BLOCK`` each (so that two or
    four threads share them evenly), fixed by the shapes alone, each on one
    BLAS thread. Elsewhere at once.
    """
    threads = _PRODUCT_THREADS.get()
    if threads is None or not array_api_compat.is_numpy_namespace(xp):
        return matmul_into(A, B, out, xp=xp)
    axis = 0 if blocks_of == "A" else 1
    size = (A if axis == 0 else B).shape[axis]
    n_blocks = 1 << max(0, (size // _PRODUCT_BLOCK).bit_length() - 1)
    if n_blocks == 1:
        return matmul_into(A, B, out, xp=xp)
    bounds = [size * k // n_blocks for k in range(n_blocks + 1)]
    if out is None or not takes_out(xp):
        out = xp.empty((A.shape[0], B.shape[1]), dtype=xp.result_type(A, B))

    def block(k):
        start, stop = bounds[k], bounds[k + 1]
        if axis == 0:
            np.matmul(A[start:stop], B, out=out[start:stop])
        else:
            np.matmul(A, B[:, start:stop], out=out[:, start:stop])

    map_on_host_threads(block, range(n_blocks), xp=xp, threads=threads)
    return out


_POOL_NAME = "nwensemble-host"
_pool = None
_pool_lock = threading.Lock()


def _host_pool():
    """The threads of ``map_on_host_threads``, one per core, started once
    (starting them per call costs more than a small pass saves) and again
    in a forked child."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                _openmp_effective_n_threads(), thread_name_prefix=_POOL_NAME
            )
        return _pool


def _forget_pool():
    """In a forked child the parent's threads are gone: start new ones."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_forget_pool)


@functools.cache
def blas_libraries():
    """The BLAS libraries loaded at the first call, NumPy's among them (the
    tiles' products are NumPy's): found once, as searching the loaded
    libraries at every call costs more than a small pass."""
    return ThreadpoolController().select(user_api="blas")


@functools.cache
def other_blas_libraries():
    """The BLAS libraries other than NumPy's loaded at the first call (SciPy's
    wheels bring their own OpenBLAS), or None where there are none or
    NumPy's cannot be told apart (one shared BLAS, as in conda
    environments)."""
    controller = ThreadpoolController()
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    own = [lib for lib in blas if _is_numpy_lib(lib.filepath, numpy_dir)]
    others = [lib.filepath for lib in blas if lib not in own]
    if not own or not others:
        return None
    return controller.select(filepath=others)


def _is_numpy_lib(filepath, site_dir):
    """Whether a shared library ships inside NumPy's wheel (``numpy.libs``)."""
    rel = os.path.relpath(os.path.realpath(filepath), os.path.realpath(site_dir))
    return rel.split(os.sep)[0] in ("numpy", "numpy.libs")
