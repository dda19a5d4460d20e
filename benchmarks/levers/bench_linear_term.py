"""A lever for issues 32 and 33, measured and not built: a global linear
term before the attention.

On each fold a ridge (``RidgeCV`` over 15 decades of penalties, on the
features power-transformed, ``--scaler power``, or standardised,
``--scaler standard``; a table's numeric columns median-imputed with
missing-value indicators and its string columns one-hot encoded, levels in
fewer than five rows pooled) is fitted to the training rows, and
``ResidualStageRegressor()`` to its residuals; the prediction adds the two.
Against ``ResidualStageRegressor()`` alone, on the same folds and seeds:

* ``linear + RS``: always the sum;
* ``chosen by LOO``: the sum or the model alone, whichever has the smaller
  root-mean-square leave-one-out residual (``interval_residuals_``, the
  sum of the stages' left-out errors; the ridge's own fit is not left out,
  a small optimism for ``p << n``), at twice the fit;
* ``chosen by start``: the same choice from one head's start alone
  (``MultiHeadNWRegressor(n_heads=1, max_iter=0)`` fitted to the target
  and to the residuals, their ``loo_prediction_``), a cheaper proxy;
* ``linear``: the ridge alone.

The numeric tables of ``../shared/data`` with the folds of
``bench_accuracy.py`` (by patient, by time block, shuffled elsewhere) and
the tables of ``../shared/data/mixed`` with ``KFold(5, shuffle=True,
random_state=0)``, the first ``--folds`` of them, once per ``--seeds``.
Prints per table the mean test RMSE of ``ResidualStageRegressor()`` and
each variant's ratio to it (the choices' count of folds that took the
sum), then the geometric means.

Run: ``python benchmarks/levers/bench_linear_term.py [--sets ...] [--folds 5]
[--seeds 0] [--scaler power]``
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np
from sklearn.compose import make_column_selector, make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, PowerTransformer, StandardScaler

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line  # noqa: E402
from bench_accuracy import geo  # noqa: E402
from bench_members import tables  # noqa: E402

from nwensemble import MultiHeadNWRegressor, ResidualStageRegressor  # noqa: E402

PENALTIES = np.logspace(-3, 4, 15)
VARIANTS = ("linear + RS", "chosen by LOO", "chosen by start", "linear")


def ridge(scaler, table):
    """The linear term: a ridge on scaled features (with ``table``, for a
    DataFrame: its string columns one-hot encoded, its numbers imputed)."""
    scale = PowerTransformer() if scaler == "power" else StandardScaler()
    if not table:
        return make_pipeline(scale, RidgeCV(alphas=PENALTIES))
    numbers = make_pipeline(SimpleImputer(strategy="median", add_indicator=True), scale)
    levels = OneHotEncoder(
        handle_unknown="infrequent_if_exist", min_frequency=5, sparse_output=False
    )
    encode = make_column_transformer(
        (numbers, make_column_selector(dtype_include="number")),
        (levels, make_column_selector(dtype_exclude="number")),
    )
    return make_pipeline(encode, RidgeCV(alphas=PENALTIES))


def rms(a):
    return float(np.sqrt(np.nanmean(np.asarray(a, dtype=float) ** 2)))


def one_fold(X, y, train, test, seed, scaler, table):
    """Test RMSE of the model alone and of each variant on one fold, and
    whether each choice took the sum."""
    rows = (lambda r: X.iloc[r]) if table else (lambda r: X[r])
    Xtr, Xte, ytr, yte = rows(train), rows(test), y[train], y[test]
    alone = ResidualStageRegressor(random_state=seed).fit(Xtr, ytr)
    linear = ridge(scaler, table).fit(Xtr, ytr)
    residual = ytr - linear.predict(Xtr)
    summed = ResidualStageRegressor(random_state=seed).fit(Xtr, residual)
    start = [
        MultiHeadNWRegressor(n_heads=1, max_iter=0, random_state=seed).fit(Xtr, t)
        for t in (ytr, residual)
    ]
    by_start = rms(np.ravel(start[1].loo_prediction_) - residual) < rms(
        np.ravel(start[0].loo_prediction_) - ytr
    )
    by_loo = rms(summed.interval_residuals_) < rms(alone.interval_residuals_)
    errors = {
        "RS": rms(alone.predict(Xte) - yte),
        "linear + RS": rms(linear.predict(Xte) + summed.predict(Xte) - yte),
        "linear": rms(linear.predict(Xte) - yte),
    }
    errors["chosen by LOO"] = errors["linear + RS" if by_loo else "RS"]
    errors["chosen by start"] = errors["linear + RS" if by_start else "RS"]
    return errors, {"chosen by LOO": by_loo, "chosen by start": by_start}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--sets", nargs="*", default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--scaler", choices=["power", "standard"], default="power")
    args = parser.parse_args(argv)
    print(cpu_line())
    print(f"ridge on {args.scaler} features; folds {args.folds}, seeds {args.seeds}")
    ratios = {v: [] for v in VARIANTS}
    for name, X, y, folds in tables(args.data, math.inf, mixed=True):
        if args.sets is not None and name not in args.sets:
            continue
        table = hasattr(X, "iloc")
        errors, took = {}, {}
        start = time.perf_counter()
        for train, test in folds[: args.folds]:
            for seed in args.seeds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    e, t = one_fold(X, y, train, test, seed, args.scaler, table)
                for k, v in e.items():
                    errors.setdefault(k, []).append(v)
                for k, v in t.items():
                    took.setdefault(k, []).append(v)
        base = float(np.mean(errors["RS"]))
        line = f"{name:26s} RS {base:.5g}"
        for v in VARIANTS:
            ratio = float(np.mean(errors[v])) / base
            ratios[v].append(ratio)
            count = f" ({sum(took[v])}/{len(took[v])})" if v in took else ""
            line += f" | {v} {ratio:.4f}{count}"
        print(line + f"  [{time.perf_counter() - start:.0f} s]", flush=True)
    print(
        "geometric means: " + ", ".join(f"{v} {geo(r):.4f}" for v, r in ratios.items())
    )


if __name__ == "__main__":
    main()
