"""A lever for issue 66, measured: what the recommended start's second
stage sees.

``ResidualStageRegressor()`` is fitted once per split; then its default
second stage (``NWAttentionRegressor(local_fit='constant',
duplicate_weight=0.0, early_stopping=True)``, the same residuals and
residual weights) is fitted again to the first stage's leave-one-out
residuals, on the features and beside them:

* ``residual maps``: each feature's binned mean residual (16 quantile
  bins, cross-fitted as ``target_maps`` cross-fits the target's), so that
  the second stage can weigh where along a feature the first stage errs;
* ``target maps``: each feature's binned mean target, in the second stage
  only (``target_maps=True`` gives them to both stages);
* ``first stage``: the first stage's prediction as one more column (its
  leave-one-out prediction for the training rows, as a new row's), so that
  the second stage can attend along what the first predicted;
* ``every row``: the whole fit again with the first stage's leave-one-out
  residuals on every training row instead of at most 2048
  (``engine.LOO_STATS_ROWS`` patched), the second stage fitted on them all.

Sections:

* ``synthetic``: ``bench_interactions.py``'s problems (``--rows`` training
  rows, noise 0.3, ``--seeds`` seeds), test RMSE against the noiseless
  target, with HistGradientBoosting's;
* ``numeric``: the numeric tables of ``../shared/data`` (``--sets``; the
  folds of ``bench_accuracy.py``, at most ``--folds`` of them).

Prints each set's mean test RMSE per variant with the median fit seconds
(the second stage's refit added to the whole fit's), and per section the
geometric mean of each variant's RMSE over the default's.

Run: ``python benchmarks/levers/bench_second_stage_inputs.py [--sections
synthetic numeric] [--sets concrete ...] [--variants ...]``
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import bench_interactions  # noqa: E402
from _common import cpu_line  # noqa: E402
from bench_accuracy import geo, numeric_sets  # noqa: E402

import nwensemble._fit.engine as engine  # noqa: E402
from nwensemble import NWAttentionRegressor, ResidualStageRegressor  # noqa: E402
from nwensemble._fit.target_maps import TargetMaps, cross_fitted_maps  # noqa: E402
from nwensemble._residual_stage import residual_weights  # noqa: E402

VARIANTS = ["residual maps", "target maps", "first stage", "every row"]


def _fit_quietly(model, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(*args, **kwargs)


def _second_stage(seed):
    return NWAttentionRegressor(
        local_fit="constant",
        duplicate_weight=0.0,
        early_stopping=True,
        random_state=seed,
    )


def _maps(X_rows, values, X_test, seed):
    """Cross-fitted maps of ``values`` for the rows ``X_rows`` and the fitted
    maps of the queries ``X_test``."""
    T = values.reshape(-1, 1)
    ones = np.ones(T.shape[0])
    M = cross_fitted_maps(X_rows, T, ones, rng=np.random.RandomState(seed))
    return M, TargetMaps.fit(X_rows, T, ones).transform(X_test)


def predictions(X, y, X_test, seed, variants):
    """Test predictions and fit seconds of the default and each variant."""
    start = time.perf_counter()
    model = _fit_quietly(ResidualStageRegressor(random_state=seed), X, y)
    seconds = time.perf_counter() - start
    out = {"default": (model.predict(X_test), seconds)}
    first = model.estimator_
    rows = np.asarray(model.residual_rows_)
    loo = np.asarray(first.loo_prediction_)[rows]
    residuals = y[rows] - loo
    weights = residual_weights(residuals, np.ones(rows.size, dtype=bool))
    first_test = np.asarray(first.predict(X_test))
    for variant in variants:
        start = time.perf_counter()
        if variant == "every row":
            saved = engine.LOO_STATS_ROWS
            engine.LOO_STATS_ROWS = np.iinfo(np.int64).max
            try:
                every = _fit_quietly(ResidualStageRegressor(random_state=seed), X, y)
            finally:
                engine.LOO_STATS_ROWS = saved
            out[variant] = (every.predict(X_test), time.perf_counter() - start)
            continue
        if variant == "first stage":
            train, test = loo[:, None], first_test[:, None]
        else:
            values = residuals if variant == "residual maps" else y[rows]
            train, test = _maps(X[rows], values, X_test, seed)
        second = _fit_quietly(
            _second_stage(seed),
            np.hstack([X[rows], train]),
            residuals,
            sample_weight=weights,
        )
        correction = second.predict(np.hstack([X_test, test]))
        out[variant] = (first_test + correction, seconds + time.perf_counter() - start)
    return out


def _rmse(prediction, target):
    return float(np.sqrt(np.mean((np.asarray(prediction).ravel() - target) ** 2)))


def report(name, runs, ratios):
    """One line: mean RMSE and median seconds per variant."""
    names = list(runs[0])
    rmse = {m: np.mean([r[m][0] for r in runs]) for m in names}
    seconds = {m: np.median([r[m][1] for r in runs]) for m in names}
    for m in names:
        ratios.setdefault(m, []).append(rmse[m] / rmse["default"])
    print(
        f"{name:<22}"
        + "".join(f"{rmse[m]:>14.5g}" for m in names)
        + "".join(f"{seconds[m]:>12.2f}" for m in names),
        flush=True,
    )


def header(names):
    print(
        f"{'set':<22}"
        + "".join(f"{m:>14}" for m in names)
        + "".join(f"{m.split()[0] + ' s':>12}" for m in names)
    )


def summary(section, ratios):
    print(
        f"{section}: RMSE / the default's, geometric mean: "
        + ", ".join(f"{m} {geo(r):.4f}" for m, r in ratios.items())
        + "\n",
        flush=True,
    )


def _scored(out, target):
    return {m: (_rmse(p, target), s) for m, (p, s) in out.items()}


def synthetic(args):
    print(f"== synthetic: {args.rows} rows, noise 0.3, {args.seeds} seeds")
    header(["default", *args.variants, "HistGB"])
    ratios = {}
    for problem in bench_interactions.PROBLEMS:
        runs = []
        for seed in range(args.seeds):
            X, y, X_test, f_test = bench_interactions.draw(
                problem, args.rows, 5000, 0.3, seed
            )
            out = predictions(X, y, X_test, seed, args.variants)
            start = time.perf_counter()
            hgb = HistGradientBoostingRegressor(random_state=seed).fit(X, y)
            out["HistGB"] = (hgb.predict(X_test), time.perf_counter() - start)
            runs.append(_scored(out, f_test))
        report(problem, runs, ratios)
    summary("synthetic", ratios)


def numeric(args):
    print("== numeric tables (folds of bench_accuracy.py)")
    header(["default", *args.variants])
    ratios = {}
    for name, X, y, folds, _ in numeric_sets(os.path.join(args.data, "data")):
        if args.sets and name not in args.sets:
            continue
        runs = [
            _scored(predictions(X[train], y[train], X[test], 0, args.variants), y[test])
            for train, test in folds[: args.folds]
        ]
        report(name, runs, ratios)
    summary("numeric", ratios)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["synthetic", "numeric"],
        choices=["synthetic", "numeric"],
    )
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    parser.add_argument("--sets", nargs="*", default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    args = parser.parse_args()
    if "numeric" in args.sections and not os.path.isdir(args.data):
        parser.error(f"no shared data at {args.data}; give --data")
    print(cpu_line())
    sections = {"synthetic": synthetic, "numeric": numeric}
    for section in args.sections:
        sections[section](args)


if __name__ == "__main__":
    main()
