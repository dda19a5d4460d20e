"""Compact kernels against softmax: predict time, sparsity and accuracy.

Friedman #1 with ``--features`` features (5 informative) and noise 1,
``n_train = n_test = --n`` rows, ``MultiHeadNWRegressor`` with ``--heads``
heads of ``--head-dim`` dimensions, each kernel fitted with the stochastic
solver for ``--epochs`` epochs (so that every kernel has its own learned
bandwidth or radius). Prints the median predict time of ``--repeats`` runs,
its ratio to softmax in the same run, the non-zero weights per query and
head, and the test RMSE.

Run: ``python benchmarks/levers/bench_kernels.py [--n 50000] [--repeats 3]``
"""

import os
import sys
import time

import numpy as np
from sklearn.datasets import make_friedman1
from threadpoolctl import threadpool_info

from nwensemble import MultiHeadNWRegressor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import benchmark_parser  # noqa: E402

KERNELS = ("softmax", "epanechnikov", "biweight", "triweight")


def main():
    parser = benchmark_parser(
        __doc__, n=50000, features=16, heads=4, head_dim=4, epochs=5, repeats=3
    )
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS))
    args = parser.parse_args()
    blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
    print(f"BLAS: {blas}")
    n = args.n
    X, y = make_friedman1(
        n_samples=2 * n, n_features=args.features, noise=1.0, random_state=0
    )
    X, y = X.astype(args.dtype), y.astype(args.dtype)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    print(
        f"Friedman #1, n_train = n_test = {n}, {args.features} features, "
        f"{args.heads} heads x {args.head_dim} dims, {args.dtype}, "
        f"Adam {args.epochs} epochs"
    )
    header = (
        f"{'kernel':<14}{'fit s':>8}{'predict s':>11}{'vs softmax':>12}"
        f"{'nnz/query/head':>16}{'RMSE':>9}"
    )
    print(header)
    base = None
    for kernel in args.kernels:
        model = MultiHeadNWRegressor(
            n_heads=args.heads,
            head_dim=args.head_dim,
            kernel=kernel,
            solver="adam",
            max_iter=args.epochs,
            bvc_resamples=0,
            random_state=0,
        )
        start = time.perf_counter()
        model.fit(Xtr, ytr)
        fit_s = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            pred = model.predict(Xte)
            times.append(time.perf_counter() - start)
        t = float(np.median(times))
        base = t if kernel == "softmax" else base
        ratio = f"{t / base:.3f}" if base else "-"
        if kernel == "softmax":
            nnz = float(n)
        else:
            rows = Xte[:2000]
            nnz = np.mean(
                [
                    model.attention_weights(rows, head=h).nnz / rows.shape[0]
                    for h in range(args.heads)
                ]
            )
        rmse = float(np.sqrt(np.mean((pred - yte) ** 2)))
        print(
            f"{kernel:<14}{fit_s:>8.1f}{t:>11.3f}{ratio:>12}{nnz:>16.1f}{rmse:>9.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
