"""The table that a lever script prints when it compares variants of the
recommended start side by side on the same splits: its sections
(``bench_interactions.py``'s synthetic problems, with HistGradientBoosting;
``bench_string_levels.py``'s problems, one table per model seed;
the numeric tables of ``../shared/data`` on ``bench_accuracy.py``'s folds;
the mixed tables of ``../shared/data/mixed`` as frames, on
``bench_real_tables.py``'s folds, ``--repeats`` times),
its command line and its lines (mean test RMSE and median fit seconds per
variant, and per section the geometric mean of each variant's RMSE over
the default's).

A script builds its command line with ``parser(__doc__, VARIANTS)``,
adds its own options, and hands it to ``main`` with ``predictions(X, y,
X_test, seed, args)``, which returns ``{name: (test predictions, fit
seconds)}`` for ``'default'`` and each of ``args.variants`` (``main_patched``
does all this for variants that patch the recommended start).
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import bench_interactions  # noqa: E402
import bench_string_levels  # noqa: E402
from _common import cpu_line  # noqa: E402
from bench_accuracy import geo, numeric_sets  # noqa: E402
from bench_real_tables import read_table, table_splits  # noqa: E402

from nwensemble import ResidualStageRegressor  # noqa: E402


def fit_quietly(model, *args, **kwargs):
    """``model.fit(*args, **kwargs)`` with warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(*args, **kwargs)


def main_patched(doc, variants, patches):
    """``main`` for a script whose variants patch the recommended start:
    ``patches(name)`` is the context a variant's fit runs under (see
    ``start_under``)."""

    def predictions(X, y, X_test, seed, args):
        names = ["default", *args.variants]
        return start_under(patches, X, y, X_test, seed, names)

    main(parser(doc, variants), predictions)


def main_with_params(doc, params):
    """``main`` for a script whose variants set the recommended start's
    parameters: ``params`` maps each variant's name to its parameters
    (the default's are its own)."""

    def predictions(X, y, X_test, seed, args):
        out = {}
        for name in ["default", *args.variants]:
            model = ResidualStageRegressor(**params.get(name, {}), random_state=seed)
            start = time.perf_counter()
            fit_quietly(model, X, y)
            out[name] = (model.predict(X_test), time.perf_counter() - start)
        return out

    main(parser(doc, list(params)), predictions)


def start_under(patches, X, y, X_test, seed, names):
    """``predictions``' answer for the recommended start fitted once per
    name of ``names``, under the context ``patches(name)``: ``{name: (test
    predictions, fit seconds)}``."""
    out = {}
    for name in names:
        with patches(name):
            start = time.perf_counter()
            model = fit_quietly(ResidualStageRegressor(random_state=seed), X, y)
            out[name] = (model.predict(X_test), time.perf_counter() - start)
    return out


def _rmse(prediction, target):
    return float(np.sqrt(np.mean((np.asarray(prediction).ravel() - target) ** 2)))


def _scored(out, target):
    return {m: (_rmse(p, target), s) for m, (p, s) in out.items()}


def _width(name):
    return max(14, len(name) + 4)


def _report(name, runs, ratios, by_seed=(), per_seed=None):
    """One line: mean RMSE and median seconds per variant. With ``by_seed``
    (a list per model seed of that seed's runs), ``per_seed`` collects each
    seed's ratios: ``{variant: {seed index: [ratio per table]}}``."""
    names = list(runs[0])
    rmse = {m: np.mean([r[m][0] for r in runs]) for m in names}
    seconds = {m: np.median([r[m][1] for r in runs]) for m in names}
    for m in names:
        ratios.setdefault(m, []).append(rmse[m] / rmse["default"])
    for i, seed_runs in enumerate(by_seed):
        seed_rmse = {m: np.mean([r[m][0] for r in seed_runs]) for m in names}
        for m in names:
            per_seed.setdefault(m, {}).setdefault(i, []).append(
                seed_rmse[m] / seed_rmse["default"]
            )
    print(
        f"{name:<22}"
        + "".join(f"{rmse[m]:>{_width(m)}.5g}" for m in names)
        + "".join(f"{seconds[m]:>{_width(m)}.2f}" for m in names),
        flush=True,
    )


def _header(names):
    print(
        f"{'set':<22}"
        + "".join(f"{m:>{_width(m)}}" for m in names)
        + "".join(f"{m + ' s':>{_width(m)}}" for m in names)
    )


def _summary(section, ratios, per_seed=None):
    per_seed = per_seed or {}
    print(
        f"{section}: RMSE / the default's, geometric mean: "
        + ", ".join(f"{m} {geo(r):.4f}" for m, r in ratios.items()),
        flush=True,
    )
    if len(per_seed.get("default", {})) > 1:
        # Each seed's geometric mean over the tables, then their mean and
        # standard error: how far a variant's figure moves with the seed.
        for m, seeds in per_seed.items():
            if m == "default":
                continue
            means = np.array([geo(r) for r in seeds.values()])
            error = means.std(ddof=1) / np.sqrt(len(means))
            print(
                f"  {m}: per seed {', '.join(f'{v:.4f}' for v in means)}; "
                f"mean {means.mean():.4f} +- {error:.4f}",
                flush=True,
            )
    print(flush=True)


def _drawn_problems(section, problems, draw, seeds, fitted):
    """A section of drawn problems: per problem of ``problems`` and seed of
    ``seeds``, ``draw(problem, seed)``'s ``(X, y, X_test, f_test)`` and
    ``fitted(X, y, X_test, seed)``'s predictions, scored against
    ``f_test``."""
    ratios = {}
    for problem in problems:
        runs = [
            _scored(fitted(X, y, X_test, seed), f_test)
            for seed in seeds
            for X, y, X_test, f_test in [draw(problem, seed)]
        ]
        _report(problem, runs, ratios)
    _summary(section, ratios)


def synthetic(args, predictions):
    print(
        f"== synthetic: {args.rows} rows, {args.noise_kind} noise 0.3, "
        f"{args.seeds} seeds"
    )
    _header(["default", *args.variants, "HistGB"])

    def draw(problem, seed):
        return bench_interactions.draw(
            problem, args.rows, 5000, 0.3, seed, args.noise_kind
        )

    def fitted(X, y, X_test, seed):
        out = predictions(X, y, X_test, seed, args)
        start = time.perf_counter()
        hgb = HistGradientBoostingRegressor(random_state=seed).fit(X, y)
        out["HistGB"] = (hgb.predict(X_test), time.perf_counter() - start)
        return out

    _drawn_problems(
        "synthetic", bench_interactions.PROBLEMS, draw, range(args.seeds), fitted
    )


def string_levels(args, predictions):
    print(
        f"== string levels: {args.rows} rows, {args.levels} levels, noise 0.3, "
        "a table per model seed"
    )
    _header(["default", *args.variants])

    def draw(problem, seed):
        return bench_string_levels.draw(
            problem, args.rows, 5000, args.levels, 0.3, seed
        )

    def fitted(X, y, X_test, seed):
        return predictions(X, y, X_test, seed, args)

    _drawn_problems(
        "string levels", bench_string_levels.PROBLEMS, draw, args.model_seed, fitted
    )


def numeric(args, predictions):
    print("== numeric tables (folds of bench_accuracy.py)")
    _header(["default", *args.variants])
    ratios = {}
    per_seed = {}
    for name, X, y, folds, _ in numeric_sets(os.path.join(args.data, "data")):
        if args.sets and name not in args.sets:
            continue
        by_seed = [
            [
                _scored(predictions(X[train], y[train], X[test], seed, args), y[test])
                for train, test in folds[: args.folds]
            ]
            for seed in args.model_seed
        ]
        _report(name, sum(by_seed, []), ratios, by_seed, per_seed)
    _summary("numeric", ratios, per_seed)


def mixed(args, predictions):
    print(f"== mixed tables (5 folds x {args.repeats}, as bench_real_tables.py)")
    _header(["default", *args.variants])
    ratios = {}
    per_seed = {}
    folder = os.path.join(args.data, "data", "mixed")
    for file in sorted(os.listdir(folder)):
        name = file.removesuffix(".csv")
        if not file.endswith(".csv") or (args.sets and name not in args.sets):
            continue
        _, X, y = read_table(os.path.join(folder, file))
        splits = list(table_splits(X, 5, args.repeats))
        by_seed = [
            [
                _scored(
                    predictions(X.iloc[train], y[train], X.iloc[test], seed, args),
                    y[test],
                )
                for train, test in splits
            ]
            for seed in args.model_seed
        ]
        _report(name, sum(by_seed, []), ratios, by_seed, per_seed)
    _summary("mixed", ratios, per_seed)


def parser(doc, variants):
    """The command line every such script shares; a script adds its own
    options before ``main`` parses it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["synthetic", "numeric"],
        choices=["synthetic", "string_levels", "numeric", "mixed"],
    )
    parser.add_argument("--variants", nargs="+", default=variants, choices=variants)
    parser.add_argument("--sets", nargs="*", default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--levels", type=int, default=400, help="string_levels: the place's levels"
    )
    parser.add_argument(
        "--noise-kind",
        default="gaussian",
        choices=list(bench_interactions.NOISE),
        help="synthetic: the training noise's kind (bench_interactions.NOISE)",
    )
    parser.add_argument(
        "--model-seed",
        type=int,
        nargs="+",
        default=[0],
        help="the tables' model seeds; with several, each variant's figure "
        "per seed and their standard error",
    )
    parser.add_argument("--repeats", type=int, default=2, help="mixed: 5-fold repeats")
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared"))
    return parser


def main(parser, predictions):
    args = parser.parse_args()
    if {"numeric", "mixed"} & set(args.sections) and not os.path.isdir(args.data):
        parser.error(f"no shared data at {args.data}; give --data")
    print(cpu_line())
    sections = {
        "synthetic": synthetic,
        "string_levels": string_levels,
        "numeric": numeric,
        "mixed": mixed,
    }
    for section in args.sections:
        sections[section](args, predictions)
