"""Scale: fit and predict time and peak memory against n, up to a million rows.

Three parts, each measurement in a fresh child process. The memory a step
added is the process's peak resident memory (``VmHWM``, reset just before
the step) less its resident memory then, once the data (and for
prediction the fitted model) exist:

1. Fit: ``MultiHeadNWRegressor(n_heads=4, head_dim=4, solver='adam',
   max_iter=3, early_stopping=False)`` (early stopping cannot end it, so
   every n runs the same epochs) on float32 Friedman #1 with 16 features
   (5 informative, noise 1) at each ``--sizes``; fit time, its ratio per
   decade of n, the peak memory and the test RMSE on 2000 held-out rows.
2. Compact-kernel prediction: the same fit with ``kernel='epanechnikov'`` at
   ``--compact-n`` rows predicts ``--compact-n`` queries; predict time and
   peak memory.
3. Softmax throughput: a model (random projections, ``max_iter=0``) on
   ``--softmax-n`` float32 rows predicts as many queries; kernel
   evaluations per second (queries x rows x heads / time) against NumPy's
   float32 ``exp`` over a large array on every core (one thread per core,
   NumPy releases the GIL), measured in the same process, median of
   ``--repeats``, alternating.

Prints the CPU (``lscpu``) first: AVX-512 machines run exp about 5x
faster than AVX2 ones.

``--mode avx2`` runs it with NumPy's AVX-512 paths disabled and OpenBLAS
as Haswell (an AVX2 machine, on an AVX-512 one).

Run: ``python benchmarks/bench_scale.py [--mode native|avx2]
[--sizes 10000 100000 1000000] [--compact-n 1000000] [--softmax-n 50000]``
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from _common import add_mode, apply_mode, benchmark_parser, cpu_line, in_child

FEATURES = 16
TEST_ROWS = 2000


def status_mib(field):
    """A memory figure of this process from /proc/self/status (Linux), MiB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def start_peak():
    """Reset the process's peak resident memory to its current size (Linux
    since 4.0): what follows is measured alone, not the fit before it."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return status_mib("VmRSS")


def peak_mib():
    return status_mib("VmHWM")


def friedman(n):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(
        n_samples=n + TEST_ROWS, n_features=FEATURES, noise=1.0, random_state=0
    )
    return X.astype(np.float32), y.astype(np.float32)


def scale_model(kernel="softmax"):
    from nwensemble import MultiHeadNWRegressor

    return MultiHeadNWRegressor(
        n_heads=4,
        head_dim=4,
        solver="adam",
        max_iter=3,
        early_stopping=False,
        kernel=kernel,
        random_state=0,
    )


def child_fit(n):
    X, y = friedman(n)
    base = start_peak()
    start = time.perf_counter()
    model = scale_model().fit(X[:n], y[:n])
    fit = time.perf_counter() - start
    rmse = float(np.sqrt(np.mean((model.predict(X[n:]) - y[n:]) ** 2)))
    return {"fit": fit, "rmse": rmse, "memory": peak_mib() - base}


def child_compact(n):
    X, y = friedman(n)
    model = scale_model("epanechnikov").fit(X[:n], y[:n])
    queries = friedman(2 * n)[0][n : 2 * n]  # fresh rows of the same law
    base = start_peak()
    start = time.perf_counter()
    model.predict(queries)
    return {"predict": time.perf_counter() - start, "memory": peak_mib() - base}


def exp_rate(a, threads):
    """float32 exp evaluations per second over ``a``, split over threads."""
    parts = np.array_split(a, threads)
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(lambda x: np.exp(x, out=x), parts))
        return a.size / (time.perf_counter() - start)


def child_softmax(n, repeats):
    from nwensemble import MultiHeadNWRegressor

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, FEATURES)).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    Xq = rng.standard_normal((n, FEATURES)).astype(np.float32)
    model = MultiHeadNWRegressor(
        n_heads=4, head_dim=4, init="random", max_iter=0, bvc_resamples=0
    ).fit(X, y)
    # Exponents in the range that softmax logits take (at most 0).
    a = -rng.random(1 << 26, dtype=np.float32) * 20
    cores = os.cpu_count()
    exp_rates, rates = [], []
    for _ in range(repeats):
        exp_rates.append(exp_rate(a.copy(), cores))
        start = time.perf_counter()
        model.predict(Xq)
        rates.append(n * n * 4 / (time.perf_counter() - start))
    ratio = float(np.median(np.asarray(rates) / np.asarray(exp_rates)))
    return {
        "rate": float(np.median(rates)),
        "exp": float(np.median(exp_rates)),
        "ratio": ratio,
    }


def main():
    parser = benchmark_parser(
        __doc__,
        sizes=[10000, 100000, 1000000],
        compact_n=1000000,
        softmax_n=50000,
        repeats=3,
    )
    args = add_mode(parser).parse_args()
    print(cpu_line())
    apply_mode(args)
    print(
        f"fit: 4 heads x 4 dims, solver='adam', 3 epochs, float32, {FEATURES} features"
    )
    print(f"{'n':>9}{'fit s':>9}{'x/decade':>10}{'peak MiB':>10}{'test RMSE':>11}")
    previous = None
    for n in args.sizes:
        r = in_child("bench_scale", "child_fit", n)
        growth = "" if previous is None else f"{r['fit'] / previous:.1f}"
        previous = r["fit"]
        print(
            f"{n:>9}{r['fit']:>9.1f}{growth:>10}{r['memory']:>10.0f}{r['rmse']:>11.4f}",
            flush=True,
        )
    if args.compact_n:
        n = args.compact_n
        r = in_child("bench_scale", "child_compact", n)
        print(
            f"epanechnikov predict, {n} queries x {n} rows: "
            f"{r['predict']:.1f} s, peak {r['memory']:.0f} MiB beyond the inputs",
            flush=True,
        )
    if args.softmax_n:
        n = args.softmax_n
        r = in_child("bench_scale", "child_softmax", n, args.repeats)
        print(
            f"softmax predict, {n} x {n} x 4 heads (float32): "
            f"{r['rate'] / 1e9:.2f} G kernel evaluations/s; NumPy float32 exp on "
            f"{os.cpu_count()} cores: {r['exp'] / 1e9:.2f} G/s; ratio "
            f"{r['ratio']:.2f} (median of {args.repeats})"
        )


if __name__ == "__main__":
    main()
