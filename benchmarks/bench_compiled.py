"""Compiled host kernels against NumPy: exp, prediction, one training
evaluation, and the kernels' compile and load time.

Every figure is measured side by side in one run: the compiled kernels and
NumPy's path alternate (``nwensemble._shared.numba_kernels.ENABLED``), repeat by
repeat, and the medians are printed with their ratio.

Sections:

* ``exp``: float32 ``exp``, NumPy's against the compiled ``fast_exp``, G/s,
  on one thread and on every core (one thread per core), two ways: over
  2^26 values in memory (each thread its own contiguous part: the rate a
  pass through memory gets), and in cache (each thread exponentiating its
  own block of one prediction tile's size, 256 x 512, again and again: the
  rate a tile's exp gets, the roofline of prediction).
* ``predict``: ``MultiHeadNWRegressor(n_heads=4, head_dim=4, init='random',
  max_iter=0)`` on ``n`` float32 rows of 16 features predicts ``n`` queries,
  for each ``--sizes`` (20 000 and 50 000), with the local-constant and the
  local-linear readout (``local_fit``), on one thread and on every core; G
  kernel evaluations per second (queries x rows x heads / time), the
  NumPy path's and the compiled path's, and the compiled path's as a
  fraction of the compiled exp's rate at the same thread count: in cache
  (as many values exponentiated in tile-sized blocks, timed alongside the
  predictions, repeat by repeat) and in memory (from the ``exp``
  section).
* ``train``: one leave-one-out loss and gradient of one softmax head
  (``loo_loss_and_grad``, float32, ``n = --train-n`` rows, head_dim 8 and
  16): NumPy's path through (n, n) blocks, the compiled sweep over blocks
  of rows (``loo_sweep.PAIRS = False``) and the compiled sweep over each
  pair of rows once (``loo_pairs``, the default), each on one thread (BLAS
  and the host's threads held to one) and on the host's threads as a
  fit's evaluations may run (BLAS on one thread each,
  ``products_on_threads``). Nanoseconds per n x n entry.
* ``slopes``: the feature slopes' map (``FeatureSlopes.apply``) and its
  derivative in the slopes (``ramp_sums``), float32, 25 features in 8
  bins (the coarse map) and in 64 (the finer one), on a minibatch (1024
  rows) and on ``--train-n`` x 4 rows (an epoch's held-out score maps
  every training row): NumPy's path (a ramp array per bin) against the
  compiled pass (``numba_slopes``), one thread; microseconds per call and
  their ratio.
* ``compile``: the kernels' first use in a fresh process, with an empty
  cache (cold: compiled) and with the cache that run left (warm: loaded);
  the first fit of a small model less its second fit.

``--mode avx2`` runs it all in a child process with NumPy's AVX-512 paths
disabled (``NPY_DISABLE_CPU_FEATURES``), OpenBLAS told it runs on Haswell
(``OPENBLAS_CORETYPE``) and numba compiling for Haswell and its features
only (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``):
an AVX2 machine, on an AVX-512 one. The CPU line
says what the machine has.

Run: ``python benchmarks/bench_compiled.py [--mode native|avx2]
[--sections exp predict train slopes compile] [--sizes 20000 50000]``
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
    """``fn(part, out_part)`` over one contiguous part of ``a`` per core, in
    threads (the bounds computed, not an index array: building one over
    2^26 values would be timed with the exp)."""
    bounds = np.linspace(0, a.shape[0], _cores() + 1).astype(int)
    with ThreadPoolExecutor(_cores()) as pool:
        list(
            pool.map(
                lambda i: fn(
                    a[bounds[i] : bounds[i + 1]], out[bounds[i] : bounds[i + 1]]
                ),
                range(_cores()),
            )
        )


# One prediction tile's logits (``tiles._QUERY_TILE x tiles._KEY_TILE``).
TILE_VALUES = 256 * 512


def _tile_blocks(rng, count):
    """``count`` pairs of tile-sized float32 arrays: never-positive logits
    and the exp's output, one pair per thread."""
    return [
        (
            -rng.uniform(0, 80, TILE_VALUES).astype(np.float32),
            np.empty(TILE_VALUES, np.float32),
        )
        for _ in range(count)
    ]


def _in_cache(fn, blocks, repeats):
    """``fn(block, out)`` ``repeats`` times on each of ``blocks`` (pairs of
    one thread's tile-sized arrays), one thread per block."""

    def run(i):
        x, out = blocks[i]
        for _ in range(repeats):
            fn(x, out)

    if len(blocks) == 1:
        return run(0)
    with ThreadPoolExecutor(len(blocks)) as pool:
        list(pool.map(run, range(len(blocks))))


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
    """The exp rates, G/s: ``{(where, threads): {"numpy": rate, "compiled":
    rate}}``, ``where`` "memory" or "cache", ``threads`` 1 or the cores."""
    from nwensemble._shared import numba_kernels as compiled

    rng = np.random.default_rng(0)
    a = -rng.uniform(0, 80, 1 << 26).astype(np.float32)
    out = np.empty_like(a)
    compiled.exp_array(a[:10], out[:10])
    blocks = _tile_blocks(rng, _cores())
    passes = a.size // TILE_VALUES  # as many values per thread as in memory
    numpy_exp = lambda x, o: np.exp(x, out=o)  # noqa: E731
    runs = {
        ("memory", 1, "numpy"): lambda: numpy_exp(a, out),
        ("memory", 1, "compiled"): lambda: compiled.exp_array(a, out),
        ("memory", _cores(), "numpy"): lambda: _on_cores(numpy_exp, a, out),
        ("memory", _cores(), "compiled"): lambda: _on_cores(compiled.exp_array, a, out),
        ("cache", 1, "numpy"): lambda: _in_cache(numpy_exp, blocks[:1], passes),
        ("cache", 1, "compiled"): lambda: _in_cache(
            compiled.exp_array, blocks[:1], passes
        ),
        ("cache", _cores(), "numpy"): lambda: _in_cache(numpy_exp, blocks, passes),
        ("cache", _cores(), "compiled"): lambda: _in_cache(
            compiled.exp_array, blocks, passes
        ),
    }
    times = alternate(runs, args.repeats)
    rates = {}
    for (where, threads, path), t in times.items():
        values = a.size if where == "memory" or threads == 1 else a.size * threads
        rates.setdefault((where, threads), {})[path] = values / t / 1e9
    print("\n== exp, float32, G/s")
    for (where, threads), r in rates.items():
        label = "one thread" if threads == 1 else f"{threads} threads"
        print(
            f"  {where}, {label}: NumPy {r['numpy']:.2f}, compiled "
            f"{r['compiled']:.2f} ({r['compiled'] / r['numpy']:.1f}x)",
            flush=True,
        )
    return rates


def predict_problem(n, local_fit):
    """The prediction timed here: ``(model, queries, rng)``, a
    ``MultiHeadNWRegressor`` of 4 random heads of 4 dimensions on ``n``
    float32 rows of 16 features, ``n`` queries."""
    from nwensemble import MultiHeadNWRegressor

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
    return model, rng.standard_normal((n, 16)).astype(np.float32), rng


def section_predict(args, exp_rates=None):
    from threadpoolctl import threadpool_limits

    from nwensemble._shared import numba_kernels as compiled

    print("\n== predict, softmax, 4 heads x 4 dims, float32: G evaluations/s")
    cases = itertools.product(args.sizes, ("constant", "linear"), (1, _cores()))
    for n, local_fit, threads in cases:
        model, Xq, rng = predict_problem(n, local_fit)

        def run(flag):
            def go():
                compiled.ENABLED = flag
                model.predict(Xq)

            return go

        # The compiled exp on as many values, each thread its own tile-sized
        # block in cache, timed alongside (the roofline at this moment).
        blocks = _tile_blocks(rng, threads)
        passes = max(1, n * n * 4 // (TILE_VALUES * threads))

        def exp_in_cache():
            _in_cache(compiled.exp_array, blocks, passes)

        # One thread: OpenMP's limit holds the host's threads too.
        with threadpool_limits(threads):
            run(True)()  # compiled once, outside the timing
            times = alternate(
                {"numpy": run(False), "compiled": run(True), "exp": exp_in_cache},
                args.repeats,
            )
        compiled.ENABLED = True
        rate = {k: n * n * 4 / t / 1e9 for k, t in times.items() if k != "exp"}
        exp_rate = passes * TILE_VALUES * threads / times["exp"] / 1e9
        fast = rate["compiled"]
        where = "one thread" if threads == 1 else f"{threads} threads"
        line = (
            f"  {n} x {n}, local {local_fit}, {where}: NumPy path {rate['numpy']:.2f}, "
            f"compiled {fast:.2f} ({fast / rate['numpy']:.2f}x); of the compiled "
            f"exp's rate in cache ({exp_rate:.2f}, timed alongside): "
            f"{fast / exp_rate:.2f}"
        )
        if exp_rates:
            memory = exp_rates["memory", threads]["compiled"]
            line += f", in memory (the exp section's): {fast / memory:.2f}"
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


def section_slopes(args):
    from nwensemble._fit.feature_slopes import FINE_BINS, N_BINS, identity_slopes
    from nwensemble._shared import numba_kernels as compiled

    print("\n== the feature slopes' map and gradient, float32: microseconds")
    rng = np.random.default_rng(0)
    p = 25
    for bins, n in itertools.product((N_BINS, FINE_BINS), (1024, 4 * args.train_n)):
        N = rng.standard_normal((n, p)).astype(np.float32)
        dN = rng.standard_normal((n, p)).astype(np.float32)
        sw = np.full(n, 1.0 / n, np.float32)
        identity = identity_slopes(N, sw, xp=np, n_bins=bins)
        slope = np.exp(rng.uniform(-1, 1, identity.low.shape)).astype(np.float32)
        slopes = identity.with_slope(slope)
        for label, fn in (
            ("map", lambda: slopes.apply(N)),
            ("gradient", lambda: slopes.ramp_sums(N, dN)),
        ):

            def run(flag, fn=fn):
                def go():
                    compiled.ENABLED = flag
                    fn()

                return go

            runs = {"numpy": run(False), "compiled": run(True)}
            for go in runs.values():
                go()
            times = alternate(runs, 20 * args.repeats)
            compiled.ENABLED = True
            us = {k: 1e6 * t for k, t in times.items()}
            print(
                f"  {label:<8} {bins:>2} bins, {n:>6} rows: "
                f"NumPy path {us['numpy']:.0f}, "
                f"compiled {us['compiled']:.0f} "
                f"({us['numpy'] / us['compiled']:.1f}x)",
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
        "--sections",
        nargs="*",
        default=["exp", "predict", "train", "slopes", "compile"],
    )
    parser.add_argument("--sizes", nargs="*", type=int, default=[20_000, 50_000])
    parser.add_argument("--train-n", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = add_mode(parser).parse_args()
    warnings.filterwarnings("ignore")
    print(cpu_line())
    apply_mode(args)
    exp_rates = section_exp(args) if "exp" in args.sections else None
    if "predict" in args.sections:
        section_predict(args, exp_rates)
    if "train" in args.sections:
        section_train(args)
    if "slopes" in args.sections:
        section_slopes(args)
    if "compile" in args.sections:
        section_compile(args)


if __name__ == "__main__":
    main()
