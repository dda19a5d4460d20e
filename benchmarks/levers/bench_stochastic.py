"""Fit time of the minibatch Adam solver against n, at an equal number of epochs.

Friedman #1 with 16 features (5 informative), noise 1; ``solver='adam'``,
``batch_size='auto'`` (1024), exactly ``--epochs`` epochs (early stopping
never triggers: ``n_iter_no_change`` equals the epochs). Prints the median
fit time at each n, the ratio to the smallest n (linear time gives the ratio
of the sizes), and the test RMSE on 2000 held-out rows.

Run: ``python benchmarks/levers/bench_stochastic.py [--sizes 10000 100000]
[--epochs 5]``
"""

import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.exceptions import ConvergenceWarning

from nwensemble import MultiHeadNWRegressor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import benchmark_parser  # noqa: E402


def main():
    parser = benchmark_parser(
        __doc__, sizes=[10000, 100000], epochs=5, repeats=3, heads=4, head_dim=4
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    print(
        f"solver='adam', {args.epochs} epochs, 16 features, {args.heads} heads x "
        f"{args.head_dim} dims"
    )
    print(f"{'n':>8}{'fit s':>9}{'ratio':>8}{'test RMSE':>11}")
    base = None
    for n in args.sizes:
        X, y = make_friedman1(
            n_samples=n + 2000, n_features=16, noise=1.0, random_state=0
        )
        times = []
        for _ in range(args.repeats):
            model = MultiHeadNWRegressor(
                n_heads=args.heads,
                head_dim=args.head_dim,
                solver="adam",
                max_iter=args.epochs,
                n_iter_no_change=args.epochs,
                bvc_resamples=0,
                random_state=0,
            )
            start = time.perf_counter()
            model.fit(X[:n], y[:n])
            times.append(time.perf_counter() - start)
        t = float(np.median(times))
        base = t if base is None else base
        rmse = float(np.sqrt(np.mean((model.predict(X[n:]) - y[n:]) ** 2)))
        print(f"{n:>8}{t:>9.2f}{t / base:>8.2f}{rmse:>11.4f}")


if __name__ == "__main__":
    main()
