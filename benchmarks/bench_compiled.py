"""Compiled host kernels against NumPy: exp, prediction, one training
evaluation, and the kernels' compile and load time.

Every figure is measured side by side in one run: the compiled kernels and
NumPy's path alternate (``nwensemble._shared.numba_kernels.ENABLED``), repeat by
repeat, and the medians are printed with their ratio.

Sections:

* ``exp``: float32 ``exp`` over 2^26 values on one thread and on every
  core (one thread per core): NumPy's against the compiled ``fast_exp``,
  G/s.
* ``predict``: ``MultiHeadNWRegressor(n_heads=4, head_dim=4, init='random',
  max_iter=0)`` on ``n`` float32 rows of 16 features predicts ``n`` queries,
  for each ``--sizes`` (20 000 and 50 000), with the local-constant and the
  local-linear readout (``local_fit``); G kernel evaluations per second
  (queries x rows x heads / time), against the NumPy exp rate of the
  ``exp`` section.
* ``train``: one leave-one-out loss and gradient of one softmax head
  (``loo_loss_and_grad``, float32, ``n = --train-n`` rows, head_dim 8 and
  16): NumPy's path through (n, n) blocks, the compiled sweep over blocks
  of rows (``loo_sweep.PAIRS = False``) and the compiled sweep over each
  pair of rows once (``loo_pairs``, the default), each on one thread (BLAS
  and the host's threads held to one) and on the host's threads as a
  fit's evaluations may run (BLAS on one thread each,
  ``products_on_threads``). Nanoseconds per n x n entry.
* ``compile``: the kernels' first use in a fresh process, with an empty
  cache (cold: compiled) and with the cache that run left (warm: loaded);
  the first fit of a small model less its second fit.

``--mode avx2`` runs it all in a child process with NumPy's AVX-512 paths
disabled (``NPY_DISABLE_CPU_FEATURES``), OpenBLAS told it runs on Haswell
(``OPENBLAS_CORETYPE``) and numba compiling for Haswell (``NUMBA_CPU_NAME``):
an AVX2 machine, on an AVX-512 one. The CPU line
says what the machine has.

Run: ``python benchmarks/bench_compiled.py [--mode native|avx2]
[--sections exp predict train compile] [--sizes 20000 50000]``
"""

import argparse
import itertools
import os
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import add_mode, apply_mode, cpu_line, in_child  # noqa: E402


def _cores():
    return os.cpu_count() or 1


def _on_cores(fn, a, out):
    """``fn(part, out_part)`` over one part of ``a`` per core, in threads."""
    parts = np.array_split(np.arange(a.shape[0]), _cores())
    with ThreadPoolExecutor(len(parts)) as pool:
        list(pool.map(lambda p: fn(a[p[0] : p[-1] + 1], out[p[0] : p[-1] + 1]), parts))


def alternate(runs, repeats):
    """Median seconds of each of ``runs`` (name -> callable), run in turn."""
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def section_exp(args):
    from nwensemble._shared import numba_kernels as compiled

    a = -np.random.default_rng(0).uniform(0, 80, 1 << 26).astype(np.float32)
    out = np.empty_like(a)
    compiled.exp_array(a[:10], out[:10])
    times = alternate(
        {
            "numpy 1": lambda: np.exp(a, out=out),
            "compiled 1": lambda: compiled.exp_array(a, out),
            "numpy": lambda: _on_cores(lambda x, o: np.exp(x, out=o), a, out),
            "compiled": lambda: _on_cores(compiled.exp_array, a, out),
        },
        args.repeats,
    )
    rates = {k: a.size / t / 1e9 for k, t in times.items()}
    print("\n== exp, float32, G/s")
    for label, suffix in (("one thread", " 1"), (f"{_cores()} threads", "")):
        numpy, fast = rates["numpy" + suffix], rates["compiled" + suffix]
        print(
            f"  {label}: NumPy {numpy:.2f}, compiled {fast:.2f} ({fast / numpy:.1f}x)",
            flush=True,
        )
    return rates["numpy"]


def section_predict(args, numpy_exp=None):
    from nwensemble import MultiHeadNWRegressor
    from nwensemble._shared import numba_kernels as compiled

    print("\n== predict, softmax, 4 heads x 4 dims, float32: G evaluations/s")
    for n, local_fit in itertools.product(args.sizes, ("constant", "linear")):
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, 16)).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        model = MultiHeadNWRegressor(
            n_heads=4,
            head_dim=4,
            init="random",
            max_iter=0,
            bvc_resamples=0,
            local_fit=local_fit,
            random_state=0,
        ).fit(X, y)
        Xq = rng.standard_normal((n, 16)).astype(np.float32)

        def run(flag):
            def go():
                compiled.ENABLED = flag
                model.predict(Xq)

            return go

        run(True)()  # compiled once, outside the timing
        times = alternate({"numpy": run(False), "compiled": run(True)}, args.repeats)
        compiled.ENABLED = True
        rate = {k: n * n * 4 / t / 1e9 for k, t in times.items()}
        line = (
            f"  {n} x {n}, local {local_fit}: NumPy path {rate['numpy']:.2f}, compiled "
            f"{rate['compiled']:.2f} ({rate['compiled'] / rate['numpy']:.2f}x)"
        )
        if numpy_exp:
            line += f"; NumPy exp alone {numpy_exp:.2f} G/s"
        print(line, flush=True)


def section_train(args):
    from threadpoolctl import threadpool_limits

    from nwensemble._fit import loo_sweep
    from nwensemble._fit.loo_loss import loo_loss_and_grad
    from nwensemble._shared import numba_kernels as compiled
    from nwensemble._shared.design import numbers_design
    from nwensemble._shared.host_threads import products_on_threads
    from nwensemble._shared.kernels import KERNELS

    n = args.train_n
    print(f"\n== one training evaluation, one head, n = {n}, float32: ns per entry")
    rng = np.random.default_rng(0)
    for d, threads in itertools.product((8, 16), (False, True)):
        X = rng.standard_normal((n, d)).astype(np.float32)
        W = (0.5 * rng.standard_normal((d, d))).astype(np.float32)
        Y = rng.standard_normal((n, 1)).astype(np.float32)
        sw = np.full(n, 1.0 / n, dtype=np.float32)
        spaces = {"numpy": {}, "rows": {}, "pairs": {}}

        def run(path):
            def go():
                compiled.ENABLED = path != "numpy"
                loo_sweep.PAIRS = path == "pairs"
                with products_on_threads(threads):
                    loo_loss_and_grad(
                        W,
                        numbers_design(X),
                        Y,
                        sw,
                        xp=np,
                        kernel=KERNELS["softmax"],
                        workspace=spaces[path],
                    )

            return go

        # One thread: OpenMP's limit holds the host's threads too.
        with threadpool_limits(1, user_api=None if not threads else "blas"):
            for path in spaces:
                run(path)()
            times = alternate({path: run(path) for path in spaces}, args.repeats)
        compiled.ENABLED = True
        loo_sweep.PAIRS = True
        ns = {k: t / (n * n) * 1e9 for k, t in times.items()}
        where = f"{_cores()} threads" if threads else "one thread"
        print(
            f"  head_dim {d}, {where}: NumPy path {ns['numpy']:.2f}, compiled "
            f"rows {ns['rows']:.2f}, compiled pairs {ns['pairs']:.2f} "
            f"({ns['numpy'] / ns['pairs']:.2f}x NumPy's, "
            f"{ns['rows'] / ns['pairs']:.2f}x the rows')",
            flush=True,
        )


def child_compile():
    """Seconds of a small model's first fit and predict less its second's."""
    from sklearn.datasets import make_friedman1

    from nwensemble import MultiHeadNWRegressor

    X, y = make_friedman1(n_samples=300, random_state=0)
    times = []
    for dtype in (np.float64, np.float64):
        start = time.perf_counter()
        model = MultiHeadNWRegressor(n_heads=2, max_iter=5, random_state=0)
        model.fit(X.astype(dtype), y.astype(dtype)).predict(X[:10].astype(dtype))
        times.append(time.perf_counter() - start)
    return times[0] - times[1]


def section_compile(args):
    print("\n== compile and load: first use in a fresh process, seconds")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("cold (compiled, cache empty)", "warm (loaded from the cache)"):
            extra = in_child("bench_compiled", "child_compile", env=env)
            print(f"  {label}: {extra:.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections", nargs="*", default=["exp", "predict", "train", "compile"]
    )
    parser.add_argument("--sizes", nargs="*", type=int, default=[20_000, 50_000])
    parser.add_argument("--train-n", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = add_mode(parser).parse_args()
    warnings.filterwarnings("ignore")
    print(cpu_line())
    apply_mode(args)
    numpy_exp = section_exp(args) if "exp" in args.sections else None
    if "predict" in args.sections:
        section_predict(args, numpy_exp)
    if "train" in args.sections:
        section_train(args)
    if "compile" in args.sections:
        section_compile(args)


if __name__ == "__main__":
    main()
