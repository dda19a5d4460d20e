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
natively too) on the complete table and at random. And how much of the
loss is the missing cells' and not the model's: each model's fit on the
complete training rows predicting the test rows with their cells missing
at random, each missing cell integrated out (the mean of the predictions
over ``DRAWS`` draws of the row's missing values from their Gaussian
conditional law given its observed ones, with the mean and covariance of
the complete training rows). That reference model has all its training
cells and only the test rows' are missing, so the native fit at random
(missing cells in training too) can at best come near it.

Prints per table the RMSE (mean over folds) of each, and the geometric
means of the ratios. ``--seeds N`` repeats everything with N draws of the
missing cells, each with the models' ``random_state`` set to the draw's
number (the folds stay the same), and averages: one draw of a small
table's missing cells moves its RMSE by several per cent.

Run: ``python benchmarks/levers/bench_missing_values.py [--data ../shared/data]
[--sets NAME ...] [--seeds N]``
"""

import argparse
import glob
import os
import sys
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
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


# Draws of a test row's missing cells whose predictions are averaged.
DRAWS = 64


def complete_and_integrated(make, X, Xr, y, folds, rng):
    """Mean test RMSE over the folds of a fresh ``make()`` fitted on the
    complete training rows of ``X``: on the complete test rows, and on the
    test rows of ``Xr`` (``X`` with missing cells) with each missing cell
    integrated out (see the module's docstring)."""
    complete, integrated = [], []
    for train, test in KFold(folds, shuffle=True, random_state=0).split(X):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make().fit(X[train], y[train])
        complete.append(np.sqrt(np.mean((model.predict(X[test]) - y[test]) ** 2)))
        draws = conditional_draws(Xr[test], X[train], DRAWS, rng)
        predicted = model.predict(draws.reshape(-1, X.shape[1]))
        mean = predicted.reshape(DRAWS, -1).mean(axis=0)
        integrated.append(np.sqrt(np.mean((mean - y[test]) ** 2)))
    return float(np.mean(complete)), float(np.mean(integrated))


def conditional_draws(Q, X, draws, rng):
    """``draws`` copies (draws, m, p) of the rows ``Q``, each missing cell
    drawn from its Gaussian law given the row's observed cells, with the
    mean and covariance of the complete rows ``X``."""
    mu, S = X.mean(axis=0), np.cov(X, rowvar=False)
    out = np.repeat(Q[None], draws, axis=0)
    missing = np.isnan(Q)
    patterns, which = np.unique(missing, axis=0, return_inverse=True)
    for k, m in enumerate(patterns):
        if not m.any():
            continue
        rows, o = np.flatnonzero(which.ravel() == k), ~m
        A = np.zeros((int(m.sum()), int(o.sum())))
        if o.any():
            A = np.linalg.lstsq(S[np.ix_(o, o)], S[np.ix_(o, m)], rcond=None)[0].T
        mean = mu[m] + (Q[np.ix_(rows, o)] - mu[o]) @ A.T
        vals, vecs = np.linalg.eigh(S[np.ix_(m, m)] - A @ S[np.ix_(o, m)])
        root = vecs * np.sqrt(np.maximum(vals, 0.0))
        noise = rng.standard_normal((draws, rows.shape[0], int(m.sum()))) @ root.T
        out[:, rows[:, None], np.flatnonzero(m)[None, :]] = mean[None] + noise
    return out


def one_draw(X, y, seed, folds):
    """The nine RMSEs of a table's row (see ``main``) for draw ``seed`` of
    the missing cells, the models seeded with it."""
    native = lambda: NWAttentionRegressor(random_state=seed)  # noqa: E731
    median = lambda: make_pipeline(  # noqa: E731
        SimpleImputer(strategy="median"), NWAttentionRegressor(random_state=seed)
    )
    hgb = lambda: HistGradientBoostingRegressor(random_state=seed)  # noqa: E731
    rng = np.random.default_rng(seed)
    Xr = with_missing(X, y, "random", rng)
    Xs = with_missing(X, y, "signal", rng)
    complete, integrated = complete_and_integrated(native, X, Xr, y, folds, rng)
    hgb_complete, hgb_integrated = complete_and_integrated(hgb, X, Xr, y, folds, rng)
    return [
        complete,
        cv_rmse(native, Xr, y, folds),
        cv_rmse(median, Xr, y, folds),
        cv_rmse(native, Xs, y, folds),
        cv_rmse(median, Xs, y, folds),
        hgb_complete,
        cv_rmse(hgb, Xr, y, folds),
        integrated,
        hgb_integrated,
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--max-rows", type=int, default=5000)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--sets", nargs="*", help="subset of table names")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="draws of the missing cells (and model seeds) 0 .. N-1, averaged",
    )
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.data, "*.csv")))
    if args.sets:
        paths = [p for p in paths if os.path.basename(p)[:-4] in args.sets]
    if not paths:
        raise SystemExit(f"No CSV files in {args.data}: give --data the shared data.")
    print(cpu_line())
    seeds = "random_state=0" if args.seeds == 1 else f"seeds 0-{args.seeds - 1}"
    print(f"{args.folds}-fold CV, NWAttentionRegressor({seeds}); RMSE")
    ratios = {
        "random vs complete": [],
        "random vs median": [],
        "signal vs median": [],
        "random vs complete (HGB)": [],
        "random vs integrated": [],
        "random vs integrated (HGB)": [],
    }
    header = (
        f"{'table':<22}{'complete':>10}{'random':>10}{'median':>10}"
        f"{'signal':>10}{'median':>10}{'HGB':>10}{'HGB rand':>10}"
        f"{'integr.':>10}{'HGB int.':>10}"
    )
    print(header)
    for path in paths:
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        if data.shape[0] > args.max_rows:
            continue
        X, y = data[:, :-1], data[:, -1]
        runs = np.mean(
            [one_draw(X, y, seed, args.folds) for seed in range(args.seeds)], axis=0
        )
        (
            complete,
            random,
            random_median,
            signal,
            signal_median,
            hgb_complete,
            hgb_random,
            integrated,
            hgb_integrated,
        ) = runs
        ratios["random vs complete"].append(random / complete)
        ratios["random vs median"].append(random / random_median)
        ratios["signal vs median"].append(signal / signal_median)
        ratios["random vs complete (HGB)"].append(hgb_random / hgb_complete)
        ratios["random vs integrated"].append(random / integrated)
        ratios["random vs integrated (HGB)"].append(hgb_random / hgb_integrated)
        name = os.path.basename(path)[:-4]
        print(
            f"{name:<22}{complete:>10.4f}{random:>10.4f}{random_median:>10.4f}"
            f"{signal:>10.4f}{signal_median:>10.4f}"
            f"{hgb_complete:>10.4f}{hgb_random:>10.4f}"
            f"{integrated:>10.4f}{hgb_integrated:>10.4f}",
            flush=True,
        )
    print("\ngeometric means of the ratios (below 1: the native fit is better):")
    for key, values in ratios.items():
        model = "" if "HGB" in key else "native "
        print(f"  {model}{key:<30}{np.exp(np.mean(np.log(values))):>8.3f}")


if __name__ == "__main__":
    main()
