"""Multi-head against single-head NW attention on Friedman #1.

The issue's problem: 1000 training rows, 500 test rows, noise 1.0, 10
features, five seeds (data and model). Prints test RMSE (mean and std over
seeds), the Head Diversity Index, the BVC parts on the training rows and the
median fit time, for one head x 2 dims, four heads x 2 dims with
``diversity`` 0 and ``'auto'``, and one full-rank head.

Run: ``python benchmarks/levers/bench_multi_head.py [--seeds 5]``
"""

import argparse
import time

import numpy as np
from sklearn.datasets import make_friedman1

from nwensemble import MultiHeadNWRegressor

CONFIGS = {
    "1 head x 2 dims": dict(n_heads=1, head_dim=2),
    "4 heads x 2 dims": dict(n_heads=4, head_dim=2),
    "4 heads x 2 dims, diversity='auto'": dict(n_heads=4, head_dim=2, diversity="auto"),
    "1 head x 10 dims (full rank)": dict(n_heads=1, head_dim=10),
}


def _mean_or_nan(values):
    """Mean HDI; NaN for one head, where it is undefined."""
    return float("nan") if np.all(np.isnan(values)) else float(np.nanmean(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    rows = {name: [] for name in CONFIGS}
    for seed in range(args.seeds):
        X, y = make_friedman1(
            n_samples=1500, n_features=10, noise=1.0, random_state=seed
        )
        Xtr, ytr, Xte, yte = X[:1000], y[:1000], X[1000:], y[1000:]
        for name, params in CONFIGS.items():
            start = time.perf_counter()
            model = MultiHeadNWRegressor(random_state=seed, **params).fit(Xtr, ytr)
            elapsed = time.perf_counter() - start
            rmse = np.sqrt(np.mean((model.predict(Xte) - yte) ** 2))
            parts = model.bvc_decomposition_
            H = parts.n_heads
            rows[name].append(
                (
                    rmse,
                    model.hdi_,
                    parts.bias2,
                    parts.variance / H,
                    (1 - 1 / H) * parts.covariance,
                    elapsed,
                )
            )
    print(
        f"Friedman #1, 1000 train / 500 test, noise 1, 10 features, {args.seeds} seeds"
    )
    print(
        f"{'model':<34}{'test RMSE':>17}{'HDI':>7}{'bias2':>8}{'var/H':>7}"
        f"{'(1-1/H)cov':>11}{'fit s':>7}"
    )
    for name, values in rows.items():
        v = np.array(values)
        print(
            f"{name:<34}{v[:, 0].mean():>9.4f} ± {v[:, 0].std():<6.4f}"
            f"{_mean_or_nan(v[:, 1]):>7.3f}"
            f"{v[:, 2].mean():>8.3f}{v[:, 3].mean():>7.3f}{v[:, 4].mean():>11.4f}"
            f"{np.median(v[:, 5]):>7.2f}"
        )


if __name__ == "__main__":
    main()
