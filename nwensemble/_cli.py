"""Command line: ``nwensemble demo`` (also ``python -m nwensemble demo``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import math
import sys
import time

import numpy as np


def _load_csv(path, out):
    """A CSV table, the target in the last column (see ``read_table``); what
    the reader decided is printed."""
    from nwensemble.datasets._csv_table import read_table

    try:
        table = read_table(path)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    except OSError as exc:
        raise SystemExit(f"error: cannot read {path}: {exc}") from exc
    for note in table.notes:
        print(f"note: {note}", file=out)
    return table


_WHICH_MODEL = """\
Which to start with on a new table: ResidualStageRegressor(). One head
(with up to four members, fits from other random draws, on tables up to
4096 rows) and a second attention stage fitted to its leave-one-out
residuals, the two added as boosting adds trees: it shares an effect along
one feature across neighbourhoods, which one head's local average cannot.
The documentation's benchmarks page compares these models with gradient
boosting table by table; no model wins on every table: cross-validate on
yours, as above.
HeadAllocator() chooses between one head, four heads and larger heads by
their leave-one-out error; for the fastest fit, NWAttentionRegressor().
Several heads win where features act jointly and lose badly where the
target grows steeply along one feature."""


_WHICH_CLASSIFIER = """\
Which to start with on a new classification table:
HeadAllocator(MultiHeadNWClassifier()). It fits four small heads, fewer
larger ones and one head as wide as the input, and keeps the allocation of
least leave-one-out log-loss: one wide head wins on tables with many rows
and features (digits, letters), several small heads on small tables. For
the fastest fit, NWAttentionClassifier(). The documentation's benchmarks
page compares them with gradient boosting table by table."""


def _on_this_table(scores, start="ResidualStageRegressor()", metric="RMSE"):
    """What the folds above say: the model with the lowest mean ``metric``,
    and how far the recommended ``start`` is from it (``scores``: label ->
    mean)."""
    best = min(scores, key=scores.get)
    if start not in scores:
        return f"Lowest {metric} on this table: {best}."
    if best == start:
        return f"Lowest {metric} on this table: {start}."
    return (
        f"Lowest {metric} on this table: {best}; {start} is "
        f"{scores[start] / scores[best]:.3f}x its {metric} here."
    )


# Folds of the tuned k-NN's inner search (GridSearchCV's default).
_INNER_FOLDS = 5


def _rows_needed(cv):
    """Fewest rows for which every one of ``cv`` training splits holds
    ``_INNER_FOLDS`` rows."""
    n = cv
    while n - math.ceil(n / cv) < _INNER_FOLDS:
        n += 1
    return n


def _neighbour_counts(n_rows, cv):
    """The tuned k-NN's candidate ``k``: none above the rows of the smallest
    inner (``_INNER_FOLDS``-fold) training split of ``cv`` outer folds."""
    inner_rows = (n_rows * (cv - 1) // cv) * (_INNER_FOLDS - 1) // _INNER_FOLDS
    return [k for k in (1, 3, 5, 10, 20, 40) if k <= inner_rows]


def _demo(args, out):
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import GridSearchCV, KFold, cross_validate
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline

    from nwensemble import (
        HeadAllocator,
        MultiHeadNWRegressor,
        NWAttentionRegressor,
        ResidualStageRegressor,
    )

    if args.device == "cuda":
        from nwensemble._shared.backend import gpu_namespace

        try:
            gpu_namespace()  # say at once, not in the middle of the folds
        except ValueError as exc:
            raise SystemExit(f"error: {exc}") from None
    text = []
    if args.csv is None:
        X, y = load_diabetes(return_X_y=True)
        name = "diabetes (scikit-learn's load_diabetes)"
    else:
        table = _load_csv(args.csv, out)
        X, y, text, name = table.X, table.y, table.text_columns, args.csv
        needed = _rows_needed(args.cv)
        if X.shape[0] < needed:
            raise SystemExit(
                f"error: {args.csv} has {X.shape[0]} rows; --cv {args.cv} needs at "
                f"least {needed}, so that every training split holds "
                f"{_INNER_FOLDS} rows for the inner {_INNER_FOLDS}-fold search of "
                "k-NN. Give more rows or a smaller --cv."
            )
        if table.labels:
            return _classification_demo(args, X, y, text, name, out)
    cv = KFold(n_splits=args.cv, shuffle=True, random_state=args.random_state)
    ks = _neighbour_counts(X.shape[0], args.cv)
    knn = GridSearchCV(
        make_pipeline(_knn_encoding(X), KNeighborsRegressor()),
        {
            "kneighborsregressor__n_neighbors": ks,
            "kneighborsregressor__weights": ["uniform", "distance"],
        },
        scoring="neg_root_mean_squared_error",
    )
    nw = dict(device=args.device, random_state=args.random_state)
    models = {}
    if args.device == "auto":
        # Its default stages compute where the data are.
        models["ResidualStageRegressor()"] = ResidualStageRegressor(
            random_state=args.random_state
        )
    models.update(
        {
            "NWAttentionRegressor": NWAttentionRegressor(head_dim=args.head_dim, **nw),
            f"MultiHeadNW ({args.n_heads} heads)": MultiHeadNWRegressor(
                n_heads=args.n_heads, **nw
            ),
            "HeadAllocator()": HeadAllocator(MultiHeadNWRegressor(**nw)),
            "k-NN (tuned k, weights)": knn,
        }
    )
    print(f"data: {name}, {X.shape[0]} samples x {X.shape[1]} features", file=out)
    if text:
        print(f"categorical features: {', '.join(text)}", file=out)
    if args.device != "auto":
        print(
            f"NW models compute on device={args.device!r} (ResidualStageRegressor(), "
            "whose stages compute where the data are, runs with --device auto)",
            file=out,
        )
    print(
        f"{args.cv}-fold cross-validated RMSE (shuffled, seed {args.random_state})",
        file=out,
    )
    print(f"{'model':<26}{'RMSE':>16}{'fit time (s)':>15}", file=out)
    means = {}
    for label, model in models.items():
        res = cross_validate(model, X, y, cv=cv, scoring="neg_root_mean_squared_error")
        rmse = -res["test_score"]
        means[label] = rmse.mean()
        print(
            f"{label:<26}{rmse.mean():>9.4f} ± {rmse.std():<6.4f}"
            f"{np.median(res['fit_time']):>13.3f}",
            file=out,
        )
    print(_on_this_table(means), file=out)
    print(_WHICH_MODEL, file=out)
    start = time.perf_counter()
    full = MultiHeadNWRegressor(n_heads=args.n_heads, **nw)
    full.fit(X, y)
    H = full.n_heads
    parts = full.bvc_decomposition_
    print(
        f"MultiHeadNW on all rows: {time.perf_counter() - start:.3f}s, "
        f"{full.n_iter_} L-BFGS iterations, components_ shape "
        f"{full.components_.shape}",
        file=out,
    )
    print(
        f"head diversity index (HDI): {full.hdi_:.3f}; mean correlation of the "
        f"heads' leave-one-out residuals: {full.head_correlation_:.3f}",
        file=out,
    )
    print(
        f"bias-variance-covariance ({parts.n_resamples} bootstrap resamples, "
        f"projections fixed): mse {parts.mse:.1f} = bias2 {parts.bias2:.1f} + "
        f"variance/H {parts.variance / H:.1f} + (1-1/H) covariance "
        f"{(1 - 1 / H) * parts.covariance:.1f}",
        file=out,
    )
    if args.plot:
        _save_plots(full, args.plot)
        print(f"HDI and BVC figures saved to {args.plot}", file=out)
    return 0


def _classification_demo(args, X, y, text, name, out):
    """The demo on a table whose target holds class labels: the NW
    attention classifiers against logistic regression and tuned k-NN."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    from nwensemble import HeadAllocator, MultiHeadNWClassifier, NWAttentionClassifier

    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < args.cv:
        rare = classes[np.argmin(counts)]
        raise SystemExit(
            f"error: class {rare!r} of {name} has {counts.min()} rows; stratified "
            f"--cv {args.cv} needs at least {args.cv} of each class. Give a "
            "smaller --cv or merge the rare classes."
        )
    nw = dict(device=args.device, random_state=args.random_state)
    knn = GridSearchCV(
        make_pipeline(_knn_encoding(X), KNeighborsClassifier()),
        {
            "kneighborsclassifier__n_neighbors": _neighbour_counts(X.shape[0], args.cv),
            "kneighborsclassifier__weights": ["uniform", "distance"],
        },
        scoring="neg_log_loss",
    )
    models = {
        "HeadAllocator(MultiHeadNWClassifier())": HeadAllocator(
            MultiHeadNWClassifier(**nw)
        ),
        "NWAttentionClassifier": NWAttentionClassifier(head_dim=args.head_dim, **nw),
        f"MultiHeadNWClassifier ({args.n_heads} heads)": MultiHeadNWClassifier(
            n_heads=args.n_heads, **nw
        ),
        "logistic regression": make_pipeline(
            _knn_encoding(X), LogisticRegression(max_iter=1000)
        ),
        "k-NN (tuned k, weights)": knn,
    }
    print(f"data: {name}, {X.shape[0]} samples x {X.shape[1]} features", file=out)
    if text:
        print(f"categorical features: {', '.join(text)}", file=out)
    print(
        f"classification: {classes.size} classes in the target column, so the "
        "demo fits classifiers",
        file=out,
    )
    cv = StratifiedKFold(args.cv, shuffle=True, random_state=args.random_state)
    print(
        f"{args.cv}-fold stratified cross-validation (shuffled, seed "
        f"{args.random_state})",
        file=out,
    )
    width = max(len(label) for label in models) + 2
    print(f"{'model':<{width}}{'log-loss':>10}{'accuracy':>10}{'fit (s)':>9}", file=out)
    means = {}
    for label, model in models.items():
        res = cross_validate(model, X, y, cv=cv, scoring=["neg_log_loss", "accuracy"])
        means[label] = -res["test_neg_log_loss"].mean()
        print(
            f"{label:<{width}}{means[label]:>10.4f}"
            f"{res['test_accuracy'].mean():>10.4f}"
            f"{np.median(res['fit_time']):>9.3f}",
            file=out,
        )
    start = "HeadAllocator(MultiHeadNWClassifier())"
    print(_on_this_table(means, start=start, metric="log-loss"), file=out)
    print(_WHICH_CLASSIFIER, file=out)
    full = MultiHeadNWClassifier(n_heads=args.n_heads, **nw).fit(X, y)
    H, parts = full.n_heads, full.bvc_decomposition_
    print(
        f"MultiHeadNWClassifier on all rows: HDI {full.hdi_:.3f}; Brier score's "
        f"bias-variance-covariance: mse {parts.mse:.4f} = bias2 {parts.bias2:.4f} "
        f"+ variance/H {parts.variance / H:.4f} + (1-1/H) covariance "
        f"{(1 - 1 / H) * parts.covariance:.4f}",
        file=out,
    )
    return 0


def _knn_encoding(X):
    """k-NN's input: standardised numbers, and for a table with text columns
    or missing values, imputed numbers and one-hot text."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    if X.dtype != object:
        if not np.isnan(X).any():
            return StandardScaler()
        return make_pipeline(SimpleImputer(add_indicator=True), StandardScaler())
    text = [j for j in range(X.shape[1]) if any(isinstance(v, str) for v in X[:, j])]
    numeric = [j for j in range(X.shape[1]) if j not in text]
    return ColumnTransformer(
        [
            (
                "num",
                make_pipeline(SimpleImputer(add_indicator=True), StandardScaler()),
                numeric,
            ),
            (
                "text",
                make_pipeline(
                    SimpleImputer(strategy="constant", fill_value="(missing)"),
                    OneHotEncoder(handle_unknown="ignore"),
                ),
                text,
            ),
        ]
    )


def _save_plots(model, path):
    """The subspace-similarity map and the BVC bars, side by side, to ``path``."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "error: --plot needs matplotlib: pip install 'nwensemble[plot]'."
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nwensemble.plotting import BVCDisplay, HeadDiversityDisplay

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.5))
    HeadDiversityDisplay.from_estimator(model, ax=ax0)
    BVCDisplay.from_estimator(model, ax=ax1)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise SystemExit(f"error: cannot write {path}: {exc}") from exc
    finally:
        plt.close(fig)


def main(argv=None, out=None):
    """Entry point of the ``nwensemble`` command."""
    out = sys.stdout if out is None else out
    parser = argparse.ArgumentParser(
        prog="nwensemble",
        description="Nadaraya-Watson attention regression and classification for "
        "scikit-learn.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="cross-validate the NW attention regressors (or, for a text "
        "target, classifiers) against tuned k-NN on a data set",
    )
    demo.add_argument(
        "--csv",
        help="CSV table with the target in the last column (numbers: "
        "regression; text: class labels, classification): numeric and text "
        "(categorical) feature columns, empty cells missing (default: "
        "scikit-learn's diabetes data)",
    )
    demo.add_argument("--cv", type=int, default=5, help="number of folds (default 5)")
    demo.add_argument(
        "--head-dim",
        type=int,
        default=None,
        help="NWAttentionRegressor's (or NWAttentionClassifier's) projection "
        "dimension (default: all)",
    )
    demo.add_argument(
        "--n-heads", type=int, default=4, help="heads of MultiHeadNW (default 4)"
    )
    demo.add_argument("--random-state", type=int, default=0, help="seed (default 0)")
    demo.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where the NW models compute: 'cuda' on the GPU with CuPy "
        "(default 'auto': NumPy for the CSV's NumPy arrays)",
    )
    demo.add_argument(
        "--plot",
        metavar="PNG",
        help="save the HDI and BVC figures of the multi-head model to this file",
    )
    args = parser.parse_args(argv)
    if args.cv < 2:
        parser.error("--cv must be at least 2")
    if args.n_heads < 1:
        parser.error("--n-heads must be at least 1")
    return _demo(args, out)
