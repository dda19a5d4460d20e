"""Classification on real tables: the NW attention classifiers against
HistGradientBoosting, CatBoost, logistic regression, tuned k-NN and NCA + k-NN.

Tables (``--tables`` picks some by name):

* scikit-learn's bundled ``breast_cancer``, ``wine`` and ``digits``;
* the six CSVs of ``../shared/data/classification`` (``adult``,
  ``german_credit``, ``pima_diabetes``, ``car_evaluation``,
  ``letter_recognition``, ``titanic``), read with
  ``pandas.read_csv(path, keep_default_na=False, na_values=[''])``;
* four tables of ``../shared/data/mixed`` with a string column as the
  class: ``penguins`` (``species``), ``auto_mpg_mixed`` (``origin``),
  ``wage`` (``education``), ``taxis_fare`` (``payment``; rows without one
  dropped). Their numeric target stays as a feature (``target_value``): it
  is a measurement of the row, not a copy of the class.

Tables above ``--max-rows`` (3000) use ``np.random.default_rng(0).choice``
of that many rows, as the classification MANIFEST's sanity check did.
String columns are ``category`` dtype for every model that reads a frame.
Shuffled, stratified 5-fold CV (``StratifiedKFold(5, shuffle=True,
random_state=0)``, the same folds for every model) of:

* ``HeadAllocator(MultiHeadNWClassifier())`` (the recommended
  classifier), ``NWAttentionClassifier()`` and ``MultiHeadNWClassifier()``
  on the frame as it comes, ``random_state=0`` (``--models`` also takes
  ``'HeadAllocator (1 member)'``, the allocator with ``n_members=1``);
* ``HistGradientBoostingClassifier(categorical_features='from_dtype')``;
* ``CatBoostClassifier(cat_features=..., random_seed=0, verbose=0)``,
  defaults otherwise (missing strings as the level ``'nan'``), when
  ``catboost`` is installed (``pip install nwensemble[benchmark]``);
* ``LogisticRegression(max_iter=1000)``, tuned k-NN
  (``GridSearchCV`` over ``n_neighbors`` in 1..50 and both ``weights``, by
  log-loss, 5 inner folds) and NCA + k-NN (``NeighborhoodComponentsAnalysis``
  then the same tuned k-NN), each behind ``SimpleImputer(add_indicator=True)``
  and ``StandardScaler`` on the numeric columns and
  ``OneHotEncoder(handle_unknown='ignore')`` on the string ones.

Every model is fitted once, untimed, before the tables (the first fit in a
process loads the compiled kernels). Prints per table each model's log-loss
and accuracy (means over the folds) and median fit time; the log-loss's
ratio to HistGradientBoosting's with its geometric mean over the tables;
how many tables each model is ahead of CatBoost on; the largest fit-time
ratio to HistGradientBoosting; and, for the NW classifiers, the coverage and
mean size of ``predict_set``'s sets at ``confidence_level=0.9`` on the test
folds.

Run: ``python benchmarks/bench_classification.py [--tables ...] [--models ...]
[--folds 5] [--max-rows 3000]``
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier, NeighborhoodComponentsAnalysis
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import catboost_frame, cpu_line  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWClassifier,
    NWAttentionClassifier,
)

SHARED = os.path.join(HERE, "..", "..", "shared", "data")
BUNDLED = {
    "breast_cancer": load_breast_cancer,
    "wine": load_wine,
    "digits": load_digits,
}
CLASSIFICATION = (
    "adult",
    "german_credit",
    "pima_diabetes",
    "car_evaluation",
    "letter_recognition",
    "titanic",
)
MIXED = {
    "penguins": "species",
    "auto_mpg_mixed": "origin",
    "wage": "education",
    "taxis_fare": "payment",
}
REFERENCE = "HGB"
NW_MODELS = ("HeadAllocator", "HeadAllocator (1 member)", "NWAttention", "MultiHeadNW")


def load_table(name, max_rows):
    """Features (a DataFrame, strings as ``category``) and labels of a table."""
    if name in BUNDLED:
        data = BUNDLED[name](as_frame=True)
        X, y = data.data, data.target.to_numpy()
    else:
        folder = "mixed" if name in MIXED else "classification"
        path = os.path.join(SHARED, folder, f"{name}.csv")
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
        if name in MIXED:
            frame = frame.rename(columns={"target": "target_value"})
            frame = frame[frame[MIXED[name]].notna()].reset_index(drop=True)
            y = frame.pop(MIXED[name]).astype(str).to_numpy()
        else:
            y = frame.pop("target").astype(str).to_numpy()
        X = frame
    if X.shape[0] > max_rows:
        rows = np.random.default_rng(0).choice(X.shape[0], size=max_rows, replace=False)
        X, y = X.iloc[rows].reset_index(drop=True), y[rows]
    X = X.copy()
    for c in X.columns:
        if not pd.api.types.is_numeric_dtype(X[c]):
            X[c] = X[c].astype("category")
    return X, y


def one_hot(estimator):
    """Imputed, scaled numbers and one-hot strings in front of ``estimator``."""
    encode = ColumnTransformer(
        [
            (
                "num",
                make_pipeline(SimpleImputer(add_indicator=True), StandardScaler()),
                make_column_selector(dtype_include="number"),
            ),
            (
                "cat",
                make_pipeline(
                    SimpleImputer(strategy="constant", fill_value="missing"),
                    OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                ),
                make_column_selector(dtype_exclude="number"),
            ),
        ]
    )
    return make_pipeline(encode, estimator)


def tuned_knn():
    """k-NN with its neighbours and weighting chosen by inner log-loss."""
    return GridSearchCV(
        KNeighborsClassifier(),
        {
            "n_neighbors": [1, 2, 3, 5, 8, 12, 18, 25, 35, 50],
            "weights": ["uniform", "distance"],
        },
        cv=5,
        scoring="neg_log_loss",
    )


class CatBoostOnFrame:
    """CatBoost with the frame's categorical columns as its categorical
    features."""

    def __init__(self, seed=0):
        from catboost import CatBoostClassifier

        self.model = CatBoostClassifier(
            random_seed=seed, verbose=0, allow_writing_files=False
        )

    def fit(self, X, y):
        X, cats = catboost_frame(X)
        self.model.fit(X, y, cat_features=cats)
        self.classes_ = self.model.classes_
        return self

    def predict_proba(self, X):
        return self.model.predict_proba(catboost_frame(X)[0])


def make_models(names, seed=0):
    builders = {
        "HeadAllocator": lambda: HeadAllocator(
            MultiHeadNWClassifier(), random_state=seed
        ),
        "HeadAllocator (1 member)": lambda: HeadAllocator(
            MultiHeadNWClassifier(), n_members=1, random_state=seed
        ),
        "NWAttention": lambda: NWAttentionClassifier(random_state=seed),
        "MultiHeadNW": lambda: MultiHeadNWClassifier(random_state=seed),
        "HGB": lambda: HistGradientBoostingClassifier(
            categorical_features="from_dtype", random_state=seed
        ),
        "CatBoost": lambda: CatBoostOnFrame(seed),
        "LogReg one-hot": lambda: one_hot(LogisticRegression(max_iter=1000)),
        "kNN tuned": lambda: one_hot(tuned_knn()),
        "NCA+kNN": lambda: one_hot(
            make_pipeline(
                NeighborhoodComponentsAnalysis(random_state=seed), tuned_knn()
            )
        ),
    }
    return {name: builders[name]() for name in names}


def warm_up(models):
    """Fit every model once on a small table, untimed: the first fit in a
    process loads the compiled kernels (numba's cache), which would
    otherwise count against the first table."""
    X, y = load_table("breast_cancer", 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model in make_models(models).values():
            model.fit(X, y)


def run(name, models, folds, max_rows):
    """Per model: log-loss, accuracy, fit time per fold; set coverage and
    size for the NW classifiers."""
    X, y = load_table(name, max_rows)
    classes = np.unique(y)
    splits = StratifiedKFold(folds, shuffle=True, random_state=0).split(X, y)
    out = {m: {"ll": [], "acc": [], "fit": [], "cover": [], "size": []} for m in models}
    for train, test in splits:
        for m, model in make_models(models).items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X.iloc[train], y[train])
            out[m]["fit"].append(time.perf_counter() - start)
            P = np.asarray(model.predict_proba(X.iloc[test]), dtype=np.float64)
            # A class missing from a training fold gets no column: zero there.
            full = np.zeros((len(test), classes.size))
            full[
                :, np.searchsorted(classes, np.asarray(model.classes_).astype(str))
            ] = P
            out[m]["ll"].append(log_loss(y[test], full, labels=classes))
            out[m]["acc"].append(accuracy_score(y[test], classes[full.argmax(1)]))
            if m in NW_MODELS:
                _, sets = model.predict_set(X.iloc[test], confidence_level=0.9)
                own = np.searchsorted(model.classes_.astype(str), y[test])
                out[m]["cover"].append(sets[np.arange(len(test)), own].mean())
                out[m]["size"].append(sets.sum(axis=1).mean())
    return X.shape, classes.size, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tables = [*BUNDLED, *CLASSIFICATION, *MIXED]
    parser.add_argument("--tables", nargs="*", default=tables)
    default = [
        "HeadAllocator",
        "NWAttention",
        "MultiHeadNW",
        "HGB",
        "LogReg one-hot",
        "kNN tuned",
        "NCA+kNN",
    ]
    try:
        import catboost  # noqa: F401

        default.insert(3, "CatBoost")
    except ImportError:
        pass
    parser.add_argument("--models", nargs="*", default=default)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--max-rows", type=int, default=3000)
    args = parser.parse_args(argv)
    print(cpu_line())
    print(f"stratified {args.folds}-fold, at most {args.max_rows} rows per table\n")
    warm_up(args.models)
    results = {}
    for name in args.tables:
        shape, n_classes, out = run(name, args.models, args.folds, args.max_rows)
        results[name] = out
        print(f"{name}: {shape[0]} rows, {shape[1]} features, {n_classes} classes")
        ref = np.mean(out[REFERENCE]["ll"]) if REFERENCE in out else np.nan
        ref_fit = np.median(out[REFERENCE]["fit"]) if REFERENCE in out else np.nan
        for m, r in out.items():
            ll, fit = np.mean(r["ll"]), np.median(r["fit"])
            line = (
                f"  {m:<16} log-loss {ll:.4f} ({ll / ref:.3f}x HGB)  "
                f"accuracy {np.mean(r['acc']):.4f}  fit {fit:7.2f} s "
                f"({fit / ref_fit:5.1f}x HGB)"
            )
            if r["cover"]:
                line += (
                    f"  0.9 sets: coverage {np.mean(r['cover']):.3f}, "
                    f"size {np.mean(r['size']):.2f}"
                )
            print(line, flush=True)
        print()
    print("summary over", len(results), "tables")
    for m in args.models:
        ratios = [
            np.mean(results[t][m]["ll"]) / np.mean(results[t][REFERENCE]["ll"])
            for t in results
        ]
        fits = [
            np.median(results[t][m]["fit"]) / np.median(results[t][REFERENCE]["fit"])
            for t in results
        ]
        mean = np.exp(np.mean(np.log(ratios)))
        line = (
            f"  {m:<16} geometric-mean log-loss {mean:.3f}x HGB; fit ratio to "
            f"HGB median {np.median(fits):.1f}x, largest {max(fits):.1f}x"
        )
        if "CatBoost" in args.models and m != "CatBoost":
            ahead = sum(
                np.mean(results[t][m]["ll"]) < np.mean(results[t]["CatBoost"]["ll"])
                for t in results
            )
            line += f"; ahead of CatBoost (log-loss) on {ahead} of {len(results)}"
        print(line)


if __name__ == "__main__":
    main()
