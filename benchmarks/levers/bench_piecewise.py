"""A candidate lever for issue 33, measured: learned piecewise-linear
encodings of the numeric features before the projection.

Each feature (after the estimator's own power warp and standardisation) is
encoded by ``T`` piecewise-linear components on its training quantiles
(Gorishniy et al., NeurIPS 2022: component ``t`` of ``x`` is ``x``'s
progress through bin ``t``, times the bin's width, the outer bins extended
linearly), so that a head's projection of the encoding is a learned
piecewise-linear function of each feature: the distance can bend along a
feature and separate a sharp threshold. The fit starts where the default fit
ended: the default ``NWAttentionRegressor()`` is fitted, its projection row
of each feature copied to every one of that feature's components (which
reproduces its distances exactly, since the components sum to the feature),
and the fit goes on over the encoding (``standardize=False``, the same
head dimension, the default readout).

Compared on every numeric table of ``../shared/data`` up to ``--max-rows``
rows (and Friedman #1 with 16 features, 2000 rows), shuffled 5-fold
(``KFold(5, shuffle=True, random_state=0)``): the default's RMSE, the
encoded continuation's for each ``--bins``, their ratios and geometric
means, and the median fit times (the continuation's includes the default fit
it starts from).

This is a measurement script, not a feature of the library: it reaches into
the fitted model (``predictor_``) for the feature map and the projection.

Run: ``python benchmarks/levers/bench_piecewise.py [--bins 4 8 16] [--max-rows 5000]``
"""

import argparse
import glob
import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.model_selection import KFold

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line  # noqa: E402

from nwensemble import NWAttentionRegressor  # noqa: E402


def quantile_edges(Z, bins):
    """Per column of ``Z``, the distinct training quantiles at ``bins`` + 1
    evenly spaced levels."""
    return [np.unique(np.quantile(z, np.linspace(0, 1, bins + 1))) for z in Z.T]


def encode(Z, edges):
    """The piecewise-linear components of every column of ``Z`` (their sum
    is the column less its smallest training value); their count per
    column."""
    parts = []
    for z, b in zip(Z.T, edges):
        if b.size < 2:
            parts.append(np.zeros((z.size, 1)))
            continue
        width = np.diff(b)
        c = np.clip((z[:, None] - b[:-1]) / width, 0.0, 1.0) * width
        c[:, 0] = np.minimum(z, b[1]) - b[0]
        c[:, -1] = np.maximum(z, b[-2]) - b[-2]
        if b.size == 2:
            c[:, 0] = z - b[0]
        parts.append(c)
    return np.hstack(parts), [p.shape[1] for p in parts]


class PiecewiseContinuation:
    """The default fit, continued over piecewise-linear encodings."""

    def __init__(self, bins):
        self.bins = bins

    def fit(self, X, y):
        base = NWAttentionRegressor(random_state=0).fit(X, y)
        self.features_ = base.predictor_.features
        Z = np.asarray(self.features_.transform(X))
        self.edges_ = quantile_edges(Z, self.bins)
        P, counts = encode(Z, self.edges_)
        W = np.asarray(base.predictor_.W)
        start = np.vstack([np.repeat(W[[j]], k, axis=0) for j, k in enumerate(counts)])
        self.model_ = NWAttentionRegressor(
            random_state=0, standardize=False, init=start.T, head_dim=W.shape[1]
        ).fit(P, y)
        return self

    def predict(self, X):
        Z = np.asarray(self.features_.transform(X))
        return self.model_.predict(encode(Z, self.edges_)[0])


def tables(folder, max_rows):
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        if data.shape[0] <= max_rows:
            yield os.path.basename(path)[:-4], data[:, :-1], data[:, -1]
    X, y = make_friedman1(2000, 16, noise=1.0, random_state=0)
    yield "friedman1_16_features", X, y


def cv(make, X, y):
    rmse, fit_t = [], []
    for train, test in KFold(5, shuffle=True, random_state=0).split(X):
        model = make()
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X[train], y[train])
        fit_t.append(time.perf_counter() - start)
        rmse.append(np.sqrt(np.mean((model.predict(X[test]) - y[test]) ** 2)))
    return float(np.mean(rmse)), float(np.median(fit_t))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--bins", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--max-rows", type=int, default=5000)
    args = parser.parse_args()
    print(cpu_line())
    print("5-fold CV; RMSE (ratio to the default), median fit s")
    ratios = {b: [] for b in args.bins}
    for name, X, y in tables(args.data, args.max_rows):
        base, base_t = cv(lambda: NWAttentionRegressor(random_state=0), X, y)
        line = f"{name:<24}default {base:9.4f} ({base_t:5.1f} s)"
        for b in args.bins:
            r, t = cv(lambda: PiecewiseContinuation(b), X, y)
            ratios[b].append(r / base)
            line += f"  T={b}: {r:9.4f} ({r / base:5.3f}, {t:5.1f} s)"
        print(line, flush=True)
    print("\ngeometric mean of RMSE / default's:")
    for b in args.bins:
        print(f"  T={b:<3}{np.exp(np.mean(np.log(ratios[b]))):8.3f}")


if __name__ == "__main__":
    main()
