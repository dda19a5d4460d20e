"""Missing values, natively: against the complete table and against imputation.

On every numeric table of ``../shared/data`` up to ``--max-rows`` rows,
shuffled 5-fold CV (``KFold(5, shuffle=True, random_state=0)``) of
``NWAttentionRegressor(random_state=0)``:

* **completely at random**: 20 % of the numeric cells (training and test
  rows alike) set missing independently. Compared: the fit on the complete
  table, the native fit on the table with its missing values, and
  ``SimpleImputer(strategy='median')`` before the estimator;
* **missing with signal**: each feature's value is missing with probability
  0.4 where the row's target is above its median and 0.05 below (so that
  being missing says something about the target). Compared: the native fit
  and median imputation without an indicator (the indicator is what lets a
  model use the signal; the native model learns where "missing" sits).

For scale, ``HistGradientBoostingRegressor()`` (which takes missing values
natively too) on the complete table and at random: how much of the loss
is the missing cells' and not the model's.

Prints per table the RMSE (mean over folds) of each, and the geometric
means of the ratios.

Run: ``python benchmarks/bench_missing_values.py [--data ../shared/data]``
"""

import argparse
import glob
import os
import sys

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line, cv_rmse  # noqa: E402

from nwensemble import NWAttentionRegressor  # noqa: E402


def with_missing(X, y, scenario, rng):
    """``X`` with missing cells as ``scenario`` says."""
    if scenario == "random":
        p = np.full(X.shape, 0.2)
    else:
        high = (y > np.median(y))[:, None]
        p = np.where(high, 0.4, 0.05) * np.ones(X.shape)
    return np.where(rng.random(X.shape) < p, np.nan, X)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--max-rows", type=int, default=5000)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.data, "*.csv")))
    if not paths:
        raise SystemExit(f"No CSV files in {args.data}: give --data the shared data.")
    native = lambda: NWAttentionRegressor(random_state=0)  # noqa: E731
    median = lambda: make_pipeline(  # noqa: E731
        SimpleImputer(strategy="median"), NWAttentionRegressor(random_state=0)
    )
    hgb = lambda: HistGradientBoostingRegressor(random_state=0)  # noqa: E731
    print(cpu_line())
    print(f"{args.folds}-fold CV, NWAttentionRegressor(random_state=0); RMSE")
    ratios = {
        "random vs complete": [],
        "random vs median": [],
        "signal vs median": [],
        "random vs complete (HGB)": [],
    }
    header = (
        f"{'table':<22}{'complete':>10}{'random':>10}{'median':>10}"
        f"{'signal':>10}{'median':>10}{'HGB':>10}{'HGB rand':>10}"
    )
    print(header)
    for path in paths:
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        if data.shape[0] > args.max_rows:
            continue
        X, y = data[:, :-1], data[:, -1]
        rng = np.random.default_rng(0)
        Xr = with_missing(X, y, "random", rng)
        Xs = with_missing(X, y, "signal", rng)
        complete = cv_rmse(native, X, y, args.folds)
        random = cv_rmse(native, Xr, y, args.folds)
        random_median = cv_rmse(median, Xr, y, args.folds)
        signal = cv_rmse(native, Xs, y, args.folds)
        signal_median = cv_rmse(median, Xs, y, args.folds)
        hgb_complete = cv_rmse(hgb, X, y, args.folds)
        hgb_random = cv_rmse(hgb, Xr, y, args.folds)
        ratios["random vs complete"].append(random / complete)
        ratios["random vs median"].append(random / random_median)
        ratios["signal vs median"].append(signal / signal_median)
        ratios["random vs complete (HGB)"].append(hgb_random / hgb_complete)
        name = os.path.basename(path)[:-4]
        print(
            f"{name:<22}{complete:>10.4f}{random:>10.4f}{random_median:>10.4f}"
            f"{signal:>10.4f}{signal_median:>10.4f}"
            f"{hgb_complete:>10.4f}{hgb_random:>10.4f}",
            flush=True,
        )
    print("\ngeometric means of the ratios (below 1: the native fit is better):")
    for key, values in ratios.items():
        model = "" if "HGB" in key else "native "
        print(f"  {model}{key:<30}{np.exp(np.mean(np.log(values))):>8.3f}")


if __name__ == "__main__":
    main()
