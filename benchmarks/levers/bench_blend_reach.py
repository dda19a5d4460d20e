"""How far below CatBoost's RMSE the mixed tables go at all: issue 66's
mixed line (a geometric mean of at most 0.95 of CatBoost's) measured
against blends that no single model of ours can be.

On ``bench_real_tables.py``'s folds (5 x ``--repeats``, reshuffled) and
with its models (seed 0): ``ResidualStageRegressor()`` (the start), the
start with ``n_fits=2``, ``CatBoostRegressor`` with ``cat_features`` and
``HistGradientBoostingRegressor(categorical_features='from_dtype')``, and
on each split the means of the start's and CatBoost's test predictions
(and of two fits' and CatBoost's): two models that err differently, each
as good as CatBoost on average, averaged. Prints each table's RMSE of
every model as a ratio to CatBoost's, and the geometric means of those
ratios over the tables. A blend's ratio is a reference for how much lower
the tables' errors go with what we know how to fit, not a candidate.

Run (from the repository root, ``catboost`` installed): ``python
benchmarks/levers/bench_blend_reach.py [--repeats 5] [--sets ...]
[--data ../shared/data/mixed]``.
"""

import argparse
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)

from _common import cpu_line  # noqa: E402
from bench_real_tables import (  # noqa: E402
    make_models,
    read_table,
    table_paths,
    table_splits,
)

START, TWO_FITS = "ResidualStage", "ResidualStage (two fits)"
MODELS = [START, TWO_FITS, "CatBoost", "HGB"]
BLENDS = {
    "mean(start, CatBoost)": (START, "CatBoost"),
    "mean(two fits, CatBoost)": (TWO_FITS, "CatBoost"),
}
# The columns' headings.
LABELS = {
    START: "start",
    TWO_FITS: "two fits",
    "CatBoost": "CatBoost",
    "HGB": "HGB",
    "mean(start, CatBoost)": "start+CB",
    "mean(two fits, CatBoost)": "two fits+CB",
}


def table_rmse(path, repeats):
    """Per model and blend, the mean over the splits of the test RMSE."""
    _, X, y = read_table(path)
    rmse = {name: [] for name in [*MODELS, *BLENDS]}
    for train, test in table_splits(X, 5, repeats):
        predictions = {}
        for name, model in make_models(X, MODELS, 0).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X.iloc[train], y[train])
            predictions[name] = np.asarray(model.predict(X.iloc[test]), dtype=float)
        for blend, (a, b) in BLENDS.items():
            predictions[blend] = 0.5 * (predictions[a] + predictions[b])
        for name, prediction in predictions.items():
            rmse[name].append(float(np.sqrt(np.mean((prediction - y[test]) ** 2))))
    return {name: float(np.mean(values)) for name, values in rmse.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data", "mixed")
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sets", nargs="*", default=None)
    args = parser.parse_args()
    try:
        import catboost  # noqa: F401
    except ImportError:
        raise SystemExit(
            "catboost is not installed: pip install 'nwensemble[benchmark]'"
        )
    paths = table_paths(args.data, args.sets)
    print(cpu_line())
    scheme = "5-fold CV, shuffled, seed 0"
    if args.repeats > 1:
        scheme = f"5-fold CV repeated {args.repeats} times (RepeatedKFold)"
    print(f"{scheme}; RMSE over CatBoost's")
    names = [*MODELS, *BLENDS]
    print("start+CB: the mean of the start's and CatBoost's test predictions")
    print(f"{'table':18s}" + "".join(f"{LABELS[name]:>12s}" for name in names))
    logs = {name: [] for name in names}
    for path in paths:
        rmse = table_rmse(path, args.repeats)
        ratios = {name: rmse[name] / rmse["CatBoost"] for name in names}
        for name in names:
            logs[name].append(np.log(ratios[name]))
        label = os.path.basename(path)[:-4]
        row = "".join(f"{ratios[name]:12.3f}" for name in names)
        print(f"{label:18s}{row}", flush=True)
    print(
        f"{'geometric mean':18s}"
        + "".join(f"{np.exp(np.mean(logs[name])):12.3f}" for name in names)
    )


if __name__ == "__main__":
    main()
