"""Fit and predict on the CPU against the GPU, at several n.

Friedman #1 with 16 features, ``MultiHeadNWRegressor`` with 4 heads x 4 dims,
the stochastic solver for exactly ``--epochs`` epochs (``n_iter_no_change``
equals the epochs, so early stopping never ends a run early), float32.
The same NumPy data goes to ``device='cpu'`` and to ``device='cuda'`` (which
copies it to the GPU and returns NumPy predictions, so the copies are part of
the GPU's time). Prints the median fit and predict times of ``--repeats``
runs at each n (``n_train = n``, ``n_test = min(n, --max-test)``) and the
GPU's speed-up; the GPU is synchronised before each clock stops.

CuPy compiles each of its kernels on first use in a process (and caches
them on disk), so one fit and prediction on 2000 rows runs first on each
device; its time is printed apart, as the first call's cost.

Without CuPy or a GPU it says so and exits with status 0.

Run: ``python benchmarks/bench_gpu.py [--sizes 10000 100000] [--repeats 3]``
"""

import sys
import time
import warnings

import numpy as np
from _common import benchmark_parser
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

from nwensemble import MultiHeadNWRegressor


def gpu_available():
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception as exc:  # ImportError, or CUDA's error without a GPU
        print(f"no GPU here ({type(exc).__name__}: {exc}); nothing to compare.")
        return None


def timed(fn, sync):
    start = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - start, out


def main():
    parser = benchmark_parser(
        __doc__, sizes=[10000, 100000], max_test=20000, epochs=5, repeats=3
    )
    args = parser.parse_args()
    cupy = gpu_available()
    if cupy is None:
        return 0
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"GPU: {name}; Friedman #1, 16 features, 4 heads x 4 dims, float32")

    def sync():
        cupy.cuda.Device().synchronize()

    def model(device):
        return MultiHeadNWRegressor(
            n_heads=4,
            head_dim=4,
            solver="adam",
            max_iter=args.epochs,
            n_iter_no_change=args.epochs,
            bvc_resamples=0,
            device=device,
            random_state=0,
        )

    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = make_friedman1(n_samples=2000, n_features=16, random_state=1)
    X, y = X.astype(np.float32), y.astype(np.float32)
    for device in ("cpu", "cuda"):
        first, _ = timed(lambda: model(device).fit(X, y).predict(X), sync)
        print(f"first fit and prediction on {device} (2000 rows): {first:.2f} s")
    print(
        f"{'n':>8}{'n_test':>8}{'fit cpu s':>11}{'fit gpu s':>11}{'speed-up':>10}"
        f"{'pred cpu s':>12}{'pred gpu s':>12}{'speed-up':>10}{'max |diff|':>12}"
    )

    for n in args.sizes:
        m = min(n, args.max_test)
        X, y = make_friedman1(n_samples=n + m, n_features=16, noise=1.0, random_state=0)
        X, y = X.astype(np.float32), y.astype(np.float32)
        Xtr, ytr, Xte = X[:n], y[:n], X[n:]
        times = {}
        preds = {}
        for device in ("cpu", "cuda"):
            fits, predicts = [], []
            for _ in range(args.repeats):
                reg = model(device)
                t_fit, _ = timed(lambda: reg.fit(Xtr, ytr), sync)
                t_pred, pred = timed(lambda: reg.predict(Xte), sync)
                fits.append(t_fit)
                predicts.append(t_pred)
            times[device] = (float(np.median(fits)), float(np.median(predicts)))
            preds[device] = pred
        (fc, pc), (fg, pg) = times["cpu"], times["cuda"]
        diff = float(np.max(np.abs(preds["cpu"] - preds["cuda"])))
        print(
            f"{n:>8}{m:>8}{fc:>11.2f}{fg:>11.2f}{fc / fg:>9.1f}x"
            f"{pc:>12.3f}{pg:>12.3f}{pc / pg:>9.1f}x{diff:>12.2e}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
