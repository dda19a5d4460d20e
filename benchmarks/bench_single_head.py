"""Fit time and CV RMSE: NWAttentionRegressor against metric-learn's MLKR.

Same data, same folds, one run. The data is Friedman #1 with p = 10 features
(5 informative) and noise 1.0; for each n the data has n * k / (k - 1) rows so
that every training fold has exactly n rows. MLKR (metric-learn 0.7.0, default
settings, on standardised features, then NW prediction in its learned space)
runs in its own virtual environment with scikit-learn < 1.8, created here on
first use (``benchmarks/.mlkr-venv``) unless ``--mlkr-python`` names one.

Usage::

    python benchmarks/bench_single_head.py [--sizes 1000 2000 4000] [--folds 3]

Prints per n the median fit time of each, the speed-up (MLKR / ours), the
mean test RMSE of each and their ratio (ours / MLKR; <= 1 is no worse).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.model_selection import KFold

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from nwensemble import NWAttentionRegressor  # noqa: E402


def mlkr_python(path):
    """Interpreter of an environment with metric-learn; build one if needed."""
    if path:
        return path
    venv = os.path.join(HERE, ".mlkr-venv")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        print(f"creating {venv} (metric-learn 0.7.0, scikit-learn<1.8) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "scikit-learn<1.8",
                "metric-learn==0.7.0",
            ],
            check=True,
        )
    return python


def run_nw(X, y, folds):
    times, rmses, iters = [], [], []
    for train, test in folds:
        reg = NWAttentionRegressor(random_state=0)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reg.fit(X[train], y[train])
        times.append(time.perf_counter() - start)
        pred = reg.predict(X[test])
        rmses.append(float(np.sqrt(np.mean((pred - y[test]) ** 2))))
        iters.append(reg.n_iter_)
    return {"fit_time": times, "rmse": rmses, "n_iter": iters}


def run_mlkr(python, X, y, folds):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        arrays = {"X": X, "y": y, "n_folds": len(folds)}
        for k, (train, test) in enumerate(folds):
            arrays[f"train_{k}"], arrays[f"test_{k}"] = train, test
        np.savez(path, **arrays)
        out = subprocess.run(
            [python, os.path.join(HERE, "_mlkr_worker.py"), path],
            check=True,
            capture_output=True,
            text=True,
        )
    return json.loads(out.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--mlkr-python", default=None)
    parser.add_argument("--skip-mlkr", action="store_true")
    args = parser.parse_args(argv)
    python = None if args.skip_mlkr else mlkr_python(args.mlkr_python)

    header = (
        f"{'n_train':>7} {'NW fit s':>9} {'MLKR fit s':>11} {'speed-up':>9} "
        f"{'NW RMSE':>8} {'MLKR RMSE':>10} {'RMSE ratio':>11} {'NW iters':>9} "
        f"{'MLKR iters':>10}"
    )
    print(f"Friedman #1, p=10, noise=1.0; {args.folds}-fold CV, medians of fit time")
    print(header)
    for n in args.sizes:
        n_total = n * args.folds // (args.folds - 1)
        X, y = make_friedman1(
            n_samples=n_total, n_features=10, noise=1.0, random_state=0
        )
        folds = list(KFold(args.folds, shuffle=True, random_state=0).split(X))
        nw = run_nw(X, y, folds)
        ml = run_mlkr(python, X, y, folds) if python else None
        t_nw = np.median(nw["fit_time"])
        row = f"{len(folds[0][0]):>7} {t_nw:>9.2f} "
        if ml:
            t_ml = np.median(ml["fit_time"])
            row += f"{t_ml:>11.2f} {t_ml / t_nw:>8.1f}x "
        else:
            row += f"{'-':>11} {'-':>9} "
        rmse_nw = np.mean(nw["rmse"])
        row += f"{rmse_nw:>8.4f} "
        if ml:
            rmse_ml = np.mean(ml["rmse"])
            row += f"{rmse_ml:>10.4f} {rmse_nw / rmse_ml:>11.4f} "
        else:
            row += f"{'-':>10} {'-':>11} "
        row += f"{np.median(nw['n_iter']):>9.0f} "
        row += f"{np.median(ml['n_iter']):>10.0f}" if ml else f"{'-':>10}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
