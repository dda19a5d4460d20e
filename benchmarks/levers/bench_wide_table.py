"""A wide table with many string columns, as house-price tables are: the
native estimators against HistGradientBoosting and CatBoost, and what the
embeddings' gradient costs.

The table is synthetic, shaped like the Ames house prices (1460 rows): a
latent quality drives the price and five ordinal quality columns (levels
``Po`` to ``Ex``); a 25-level neighbourhood, 37 further string columns of 2
to 9 levels (one level on 85 % of the rows) with small effects, a skewed
living area and 29 other numeric columns (six with small effects, some
zero-inflated, two with 15 % missing). The price is the exponential of
the sum plus noise, so its errors are heavy-tailed. ``--seeds`` draws that
many tables; on each, shuffled 5-fold CV (``KFold(5, shuffle=True,
random_state=seed)``) of ``ResidualStageRegressor()``,
``NWAttentionRegressor()`` and ``MultiHeadNWRegressor()`` on the frame as
it comes, ``HistGradientBoostingRegressor(categorical_features=
'from_dtype')`` on it with the strings cast to ``category``, and
``CatBoostRegressor(cat_features=..., random_seed=0, verbose=0)`` where
``catboost`` is installed. Prints the mean RMSE, its ratio to
HistGradientBoosting's and the median fit time.

``--sorted-sums`` also fits our estimators with the embeddings' gradient
summed as on a device (the codes sorted, a running sum; see
``_shared/design.py``) instead of the host's sparse one-hot product, in
turn on each fold: it patches a private module.

Run: ``python benchmarks/levers/bench_wide_table.py [--seeds 1] [--folds 5]
[--sorted-sums]``
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line  # noqa: E402

import nwensemble._shared.design as design  # noqa: E402
from nwensemble import (  # noqa: E402
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

QUALITY = np.array(["Po", "Fa", "TA", "Gd", "Ex"])


def wide_table(seed, n=1460):
    """The synthetic table (a DataFrame) and its prices."""
    rng = np.random.default_rng(seed)
    quality = rng.standard_normal(n)
    hood = rng.integers(0, 25, n)
    log_price = 11.5 + 0.25 * quality + 0.25 * rng.standard_normal(25)[hood]
    columns = {}
    area = np.exp(7.3 + 0.35 * rng.standard_normal(n) + 0.1 * quality)
    columns["living_area"] = area.round()
    log_price += 0.5 * (np.log(area) - 7.3)
    for j in range(29):
        spread, size = rng.uniform(0.2, 1.0), rng.uniform(10, 1000)
        value = np.exp(rng.standard_normal(n) * spread) * size
        if j < 6:
            log_value = np.log(value)
            log_price += 0.05 * (log_value - log_value.mean()) / log_value.std()
        if j % 5 == 0:
            value = np.where(rng.random(n) < 0.3, 0.0, value)
        columns[f"number_{j}"] = value.round(1)
    for j in range(5):
        score = quality + 0.6 * rng.standard_normal(n)
        columns[f"quality_{j}"] = QUALITY[np.digitize(score, [-1.8, -0.8, 0.6, 1.6])]
    columns["neighbourhood"] = np.array([f"N{h}" for h in hood])
    for j in range(37):
        size = int(rng.integers(2, 10))
        share = np.r_[0.85, rng.dirichlet(np.ones(size - 1)) * 0.15]
        level = rng.choice(size, n, p=share)
        log_price += 0.03 * rng.standard_normal(size)[level]
        columns[f"string_{j}"] = np.array([f"v{v}" for v in level])
    log_price += 0.12 * rng.standard_normal(n)
    frame = pd.DataFrame(columns)
    for name in ("number_3", "number_7"):
        frame.loc[rng.random(n) < 0.15, name] = np.nan
    return frame, np.exp(log_price)


def models(frame):
    """Name -> (a function making the model, the frame it is fitted on)."""
    strings = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    as_category = frame.astype({c: "category" for c in strings})
    out = {
        "ResidualStage": (lambda: ResidualStageRegressor(random_state=0), frame),
        "NWAttention": (lambda: NWAttentionRegressor(random_state=0), frame),
        "MultiHeadNW": (lambda: MultiHeadNWRegressor(random_state=0), frame),
        "HGB": (
            lambda: HistGradientBoostingRegressor(
                categorical_features="from_dtype", random_state=0
            ),
            as_category,
        ),
    }
    try:
        from catboost import CatBoostRegressor
    except ImportError:
        return out
    out["CatBoost"] = (
        lambda: CatBoostRegressor(cat_features=strings, random_seed=0, verbose=0),
        frame,
    )
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--sorted-sums", action="store_true")
    args = parser.parse_args(argv)
    print(cpu_line())
    host = design.eager_host
    results = {}
    for seed in range(args.seeds):
        frame, y = wide_table(seed)
        made = models(frame)
        if args.sorted_sums:
            for name in ("ResidualStage", "NWAttention", "MultiHeadNW"):
                made[f"{name} (sorted sums)"] = made[name]
        split = KFold(5, shuffle=True, random_state=seed).split(frame)
        for train, test in list(split)[: args.folds]:
            for name, (make, X) in made.items():
                sorted_sums = name.endswith("(sorted sums)")
                design.eager_host = (lambda xp: False) if sorted_sums else host
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        start = time.perf_counter()
                        model = make().fit(X.iloc[train], y[train])
                        fit_s = time.perf_counter() - start
                    error = model.predict(X.iloc[test]) - y[test]
                finally:
                    design.eager_host = host
                rmse = float(np.sqrt(np.mean(error**2)))
                results.setdefault(name, []).append((rmse, fit_s))
    base = np.mean([r for r, _ in results["HGB"]])
    print(f"{'model':34s} {'RMSE':>9s} {'/ HGB':>7s} {'fit s':>7s}")
    for name, rows in results.items():
        rmse = float(np.mean([r for r, _ in rows]))
        fit_s = float(np.median([t for _, t in rows]))
        print(f"{name:34s} {rmse:9.0f} {rmse / base:7.3f} {fit_s:7.2f}")


if __name__ == "__main__":
    main()
