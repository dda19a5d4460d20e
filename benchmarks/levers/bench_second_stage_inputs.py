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

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

import nwensemble._fit.engine as engine  # noqa: E402
from nwensemble import NWAttentionRegressor, ResidualStageRegressor  # noqa: E402
from nwensemble._fit.target_maps import TargetMaps, cross_fitted_maps  # noqa: E402
from nwensemble._residual_stage import residual_weights  # noqa: E402

VARIANTS = ["residual maps", "target maps", "first stage", "every row"]


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


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and each variant."""
    start = time.perf_counter()
    model = table.fit_quietly(ResidualStageRegressor(random_state=seed), X, y)
    seconds = time.perf_counter() - start
    out = {"default": (model.predict(X_test), seconds)}
    first = model.estimator_
    rows = np.asarray(model.residual_rows_)
    loo = np.asarray(first.loo_prediction_)[rows]
    residuals = y[rows] - loo
    weights = residual_weights(residuals, np.ones(rows.size, dtype=bool))
    first_test = np.asarray(first.predict(X_test))
    for variant in args.variants:
        start = time.perf_counter()
        if variant == "every row":
            saved = engine.LOO_STATS_ROWS
            engine.LOO_STATS_ROWS = np.iinfo(np.int64).max
            try:
                every = table.fit_quietly(
                    ResidualStageRegressor(random_state=seed), X, y
                )
            finally:
                engine.LOO_STATS_ROWS = saved
            out[variant] = (every.predict(X_test), time.perf_counter() - start)
            continue
        if variant == "first stage":
            train, test = loo[:, None], first_test[:, None]
        else:
            values = residuals if variant == "residual maps" else y[rows]
            train, test = _maps(X[rows], values, X_test, seed)
        second = table.fit_quietly(
            _second_stage(seed),
            np.hstack([X[rows], train]),
            residuals,
            sample_weight=weights,
        )
        correction = second.predict(np.hstack([X_test, test]))
        out[variant] = (first_test + correction, seconds + time.perf_counter() - start)
    return out


if __name__ == "__main__":
    table.main(table.parser(__doc__, VARIANTS), predictions)
