"""What the benchmark scripts share: command-line options, the CPU line,
cross-validated RMSE and variants of a fit timed side by side."""

import argparse
import ast
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from functools import partial

import numpy as np
from sklearn.model_selection import KFold


def benchmark_parser(doc, **defaults):
    """An ArgumentParser whose description is ``doc``'s first line, with one
    integer option per keyword (``head_dim=4`` gives ``--head-dim 4``); a list
    default makes an option that takes several integers (none skips it)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in defaults.items():
        nargs = "*" if isinstance(default, list) else None
        parser.add_argument(
            "--" + name.replace("_", "-"), type=int, nargs=nargs, default=default
        )
    return parser


def cpu_line():
    """The CPU's model name and its widest vector extension."""
    name = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                name = line.split(":", 1)[1].strip()
        flags = out.split("Flags:", 1)[-1]
        vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    except OSError:
        vector = ""
    return f"CPU: {name}, {os.cpu_count()} cores {vector}".rstrip()


def in_child(module, function, *args, env=None):
    """``module.function(*args)`` (a benchmark script's function returning
    JSON-able data) run in a fresh interpreter, so that its memory and its
    imports are its own; its result."""
    here = os.path.dirname(os.path.abspath(__file__))
    levers = os.path.join(here, "levers")
    code = (
        f"import json, sys; sys.path[:0] = [{here!r}, {levers!r}]; import {module}; "
        f"print(json.dumps({module}.{function}(*{args!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --mode avx2: NumPy's AVX-512 paths off, OpenBLAS told it runs on Haswell
# and numba compiling for Haswell with Haswell's features (its cache keeps
# code per CPU name and features), so that an AVX-512 machine stands in for
# an AVX2 one.
AVX2_ENV = {
    "NPY_DISABLE_CPU_FEATURES": (
        "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX "
        "AVX512_CNL AVX512_ICL AVX512_SPR"
    ),
    "OPENBLAS_CORETYPE": "Haswell",
    "NUMBA_CPU_NAME": "haswell",
    # Empty: the features Haswell has. Unset, numba adds the host's own
    # (AVX-512 among them) to the CPU it is named.
    "NUMBA_CPU_FEATURES": "",
}


def add_mode(parser):
    """``--mode native|avx2`` on a benchmark's parser (see ``AVX2_ENV``)."""
    parser.add_argument(
        "--mode",
        choices=["native", "avx2"],
        default="native",
        help="avx2: NumPy's AVX-512 paths disabled and OpenBLAS as Haswell",
    )
    return parser


def apply_mode(args):
    """With ``--mode avx2``, run this script again in a child process with
    ``AVX2_ENV`` set (the settings must precede NumPy's import) and exit with
    its status; print the mode otherwise."""
    if args.mode == "avx2" and "NPY_DISABLE_CPU_FEATURES" not in os.environ:
        env = dict(os.environ, **AVX2_ENV)
        sys.exit(subprocess.run([sys.executable] + sys.argv, env=env).returncode)
    settings = ", ".join(f"{k}={v}" for k, v in AVX2_ENV.items())
    print(f"mode: {args.mode}" + (f" ({settings})" if args.mode == "avx2" else ""))


def cv_rmse(make, X, y, folds=5, seed=0):
    """Mean test RMSE of a fresh ``make()`` on each fold of ``KFold(folds,
    shuffle=True, random_state=seed)``; ``X`` an array or a DataFrame; the
    fits' warnings silenced."""
    rows = (lambda r: X.iloc[r]) if hasattr(X, "iloc") else (lambda r: X[r])
    out = []
    for train, test in KFold(folds, shuffle=True, random_state=seed).split(X):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make().fit(rows(train), y[train])
        out.append(np.sqrt(np.mean((model.predict(rows(test)) - y[test]) ** 2)))
    return float(np.mean(out))


def fit_variants(make, X, y, folds, variants):
    """Per variant, the test RMSEs and fit seconds of a fresh ``make()`` on
    each ``(train, test)`` of ``folds``: ``variants`` maps a name to a
    function returning the context manager that sets the variant up, and
    the variants are fitted in turn on each fold (side by side, so a busy
    machine slows them alike); the fits' warnings silenced."""
    rmse = {v: [] for v in variants}
    fit_s = {v: [] for v in variants}
    for train, test in folds:
        for variant, setting in variants.items():
            with setting(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make()
                start = time.perf_counter()
                model.fit(X[train], y[train])
                fit_s[variant].append(time.perf_counter() - start)
                err = model.predict(X[test]) - y[test]
            rmse[variant].append(float(np.sqrt(np.mean(err**2))))
    return rmse, fit_s


def lever_runs(sets, models, variants, *, min_rows, n_folds, seeds=(0,)):
    """``fit_variants`` on every set of ``sets`` (``(name, X, y, folds,
    how)``, as ``bench_accuracy.numeric_sets`` yields them) with at least
    ``min_rows`` rows, its first ``n_folds`` folds, for every model of
    ``models`` (name -> estimator class, fitted with ``random_state`` each
    of ``seeds``). Yields ``(set name, model name, mean RMSE, median fit
    seconds)``, the last two dicts by variant, over folds and seeds."""
    for name, X, y, folds, _ in sets:
        if X.shape[0] < min_rows:
            continue
        for model_name, Estimator in models.items():
            rmse = {v: [] for v in variants}
            fit_s = {v: [] for v in variants}
            for seed in seeds:
                seed_rmse, seed_fit_s = fit_variants(
                    partial(Estimator, random_state=seed),
                    X,
                    y,
                    folds[:n_folds],
                    variants,
                )
                for v in variants:
                    rmse[v] += seed_rmse[v]
                    fit_s[v] += seed_fit_s[v]
            yield (
                name,
                model_name,
                {v: float(np.mean(r)) for v, r in rmse.items()},
                {v: float(np.median(t)) for v, t in fit_s.items()},
            )


def variant_params(name, prefix="MultiHeadNW"):
    """The parameters of a model named ``"<prefix> (NAME=VALUE, ...)"``
    (``VALUE`` a Python literal), or None when ``name`` is not of that form."""
    head = f"{prefix} ("
    if not (name.startswith(head) and name.endswith(")") and "=" in name):
        return None
    call = ast.parse(f"f({name[len(head) : -1]})", mode="eval").body
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


def catboost_frame(X):
    """A frame as CatBoost takes it, and its categorical columns: every
    column that is not numeric, as strings, missing values as the level
    ``'nan'`` (CatBoost refuses NaN in categorical columns)."""
    import pandas as pd

    X = X.copy()
    cats = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    for c in cats:
        X[c] = X[c].astype(object).where(X[c].notna(), "nan").astype(str)
    return X, cats


def noiseless_scores(draws, models):
    """Each model's test RMSE against the noiseless target, and its fit
    seconds, over seeds: ``draws`` yields ``(seed, X_train, y_train,
    X_test, f_test)``, ``models(seed)`` the fresh models by name. Returns
    ``(rmse, fit_s)``, each ``{name: [value per seed]}``."""
    rmse, fit_s = {}, {}
    for seed, X, y, X_test, f_test in draws:
        for name, model in models(seed).items():
            start = time.perf_counter()
            model.fit(X, y)
            fit_s.setdefault(name, []).append(time.perf_counter() - start)
            err = np.sqrt(np.mean((model.predict(X_test) - f_test) ** 2))
            rmse.setdefault(name, []).append(err)
    return rmse, fit_s


def score_cells(rmse, fit_s):
    """``noiseless_scores``' figures as one line's cells: per model the
    mean RMSE with its standard error over seeds and the median fit."""
    return "  ".join(
        f"{name} {np.mean(r):.4f} ± {np.std(r) / np.sqrt(len(r)):.4f} "
        f"({np.median(fit_s[name]):.2f} s)"
        for name, r in rmse.items()
    )
