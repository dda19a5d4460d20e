"""Accuracy against CatBoost and HistGradientBoosting, with every model at
its defaults: the numeric tables of the shared data and their standard UCI
splits.

``--part cv`` (default): 5-fold CV on every numeric CSV in ``--data``
(default ``../shared/data``), at full size: shuffled folds
(``KFold(5, shuffle=True, random_state=0)``), except that
``parkinsons_telemonitoring`` is split by patient (``GroupKFold(5)``; the
patients' first rows are listed in the data's MANIFEST) and
``appliances_energy`` into five contiguous time blocks (``KFold(5)``
unshuffled), since shuffled folds there reward recognising the patient or
the hour rather than predicting. Every model sees the same folds.

``--part uci``: the fixed 90/10 splits in ``<data>/uci_splits`` (first
``--splits`` of each set, default 10), against the published results in
that folder's README.

Models (``--models`` picks; the first six run by default):
``ResidualStage`` (``ResidualStageRegressor()``, the README's recommended
start: one head, with members on small tables, and a second stage on its
residuals), ``HeadAllocator`` (``HeadAllocator()``), ``MultiHeadNW``
(``MultiHeadNWRegressor()``), ``NWAttention`` (``NWAttentionRegressor()``),
``HistGradientBoosting``, ``CatBoost``
(``CatBoostRegressor(random_seed=0, verbose=0)``; the benchmark extra
installs it), and the levers' candidates ``ResidualStage (third stage)``
(``ResidualStageRegressor(third_stage=True)``), ``ResidualStage (fine
slopes)`` (``ResidualStageRegressor(feature_slopes='fine')``), ``ResidualStage
(two fits)`` (``ResidualStageRegressor(n_fits=2)``),
``MultiHeadNW (local constant)`` and ``NWAttention (local constant)``
(``local_fit='constant'``),
``HeadAllocator (20% holdout)`` and ``HeadAllocator (3-fold)`` (candidates
scored on one shuffled 20 % holdout or by 3-fold CV instead of
leave-one-out), and ``HeadAllocator (5-fold as the split)``: candidates
scored by 5-fold CV on the training rows with folds drawn as the outer
split's (by patient on parkinsons, passing the patients as ``groups``;
contiguous blocks on appliances; shuffled elsewhere), the advice of the
allocation guide for grouped rows.

Prints per set the mean RMSE over folds and the median fit time of every
model, then every model's geometric-mean RMSE ratio to HistGradientBoosting
and to CatBoost, and the median and largest ratio of each of our models'
fit time to HistGradientBoosting's. State the CPU (``lscpu``) beside the
times.

``--variant NAME=VALUE[, NAME=VALUE] ...`` adds
``MultiHeadNWRegressor(random_state=0, NAME=VALUE, ...)`` for each
(``VALUE`` a Python literal), the levers' table's
candidates: ``--models MultiHeadNW --variant "init='identity'"
"head_weights='optimal'"``. ``--friedman`` adds Friedman #1 with 16
features (5 informative, 2000 rows, noise 1) to the cv part.

``--seeds N`` fits every model with seeds 0 to N-1 on each fold (the
RMSE is then the mean over folds and seeds): one seed's figure on a small
table is a draw (see the levers log on the seeds' spread).

Run: ``python benchmarks/bench_accuracy.py [--part cv|uci] [--sets ...]
[--models ...] [--variant ...] [--friedman] [--seeds 1] [--markdown
results.md]``
"""

import argparse
import glob
import itertools
import os
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GroupKFold, KFold, ShuffleSplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import variant_params  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

RECOMMENDED = "ResidualStage"
THIRD_STAGE = "ResidualStage (third stage)"
FINE_SLOPES = "ResidualStage (fine slopes)"
TWO_FITS = "ResidualStage (two fits)"
ALLOCATOR = "HeadAllocator"
HGB = "HistGradientBoosting"
CATBOOST = "CatBoost"
DEFAULT_MODELS = [
    RECOMMENDED,
    ALLOCATOR,
    "MultiHeadNW",
    "NWAttention",
    HGB,
    CATBOOST,
]
# The allocator's candidates scored on held-out rows instead of leave-one-out.
ALLOCATOR_CV = {
    "HeadAllocator (20% holdout)": ShuffleSplit(1, test_size=0.2, random_state=0),
    "HeadAllocator (3-fold)": KFold(3, shuffle=True, random_state=0),
}

# Candidates scored by 5-fold CV drawn as the outer split's folds.
AS_THE_SPLIT = "HeadAllocator (5-fold as the split)"

# First data row (0-based) of each of the 42 patients, from the MANIFEST.
PARKINSONS_PATIENTS = [
    0, 149, 294, 438, 575, 731, 887, 1048, 1198, 1350, 1498, 1636, 1743, 1855,
    1991, 2134, 2272, 2416, 2542, 2671, 2805, 2928, 3040, 3178, 3334, 3478,
    3608, 3737, 3871, 4039, 4165, 4295, 4396, 4531, 4692, 4857, 4986, 5126,
    5275, 5418, 5560, 5725,
]  # fmt: skip

# Published test RMSE on the UCI splits (the folder's README): the best of
# each set over PBP, MC dropout, NGBoost, tuned GBR, random forest and
# deep ensembles, with its source.
PUBLISHED_BEST = {
    "concrete": (4.46, "sklearn GBR, tuned (NGBoost paper)"),
    "energy": (0.39, "sklearn GBR, tuned (NGBoost paper)"),
    "wine-quality-red": (0.50, "random forest (NGBoost paper)"),
    "yacht": (0.42, "sklearn GBR, tuned (NGBoost paper)"),
}


def make_model(name, set_name="", seed=0):
    """A fresh, unfitted model by name with seed ``seed`` (``set_name``
    chooses the inner folds of ``AS_THE_SPLIT``)."""
    params = variant_params(name)
    if params is not None:
        return MultiHeadNWRegressor(random_state=seed, **params)
    if name == "MultiHeadNW":
        return MultiHeadNWRegressor(random_state=seed)
    if name == "NWAttention":
        return NWAttentionRegressor(random_state=seed)
    if name == RECOMMENDED:
        return ResidualStageRegressor(random_state=seed)
    if name == THIRD_STAGE:
        return ResidualStageRegressor(third_stage=True, random_state=seed)
    if name == FINE_SLOPES:
        return ResidualStageRegressor(feature_slopes="fine", random_state=seed)
    if name == TWO_FITS:
        return ResidualStageRegressor(n_fits=2, random_state=seed)
    if name == ALLOCATOR:
        return HeadAllocator(MultiHeadNWRegressor(random_state=seed))
    if name in ALLOCATOR_CV:
        cv = ALLOCATOR_CV[name]
        return HeadAllocator(MultiHeadNWRegressor(random_state=seed), cv=cv)
    if name == AS_THE_SPLIT:
        cv = inner_folds(set_name)
        return HeadAllocator(MultiHeadNWRegressor(random_state=seed), cv=cv)
    if name == "MultiHeadNW (local constant)":
        return MultiHeadNWRegressor(random_state=seed, local_fit="constant")
    if name == "NWAttention (local constant)":
        return NWAttentionRegressor(random_state=seed, local_fit="constant")
    if name == HGB:
        return HistGradientBoostingRegressor(random_state=seed)
    if name == CATBOOST:
        try:
            from catboost import CatBoostRegressor
        except ImportError:
            raise SystemExit(
                "CatBoost is not installed: pip install -e '.[benchmark]', or "
                "leave it out with --models."
            ) from None
        return CatBoostRegressor(random_seed=seed, verbose=0, thread_count=-1)
    raise SystemExit(f"unknown model {name!r}")


MODELS = [
    *DEFAULT_MODELS,
    THIRD_STAGE,
    FINE_SLOPES,
    TWO_FITS,
    "MultiHeadNW (local constant)",
    "NWAttention (local constant)",
    *ALLOCATOR_CV,
    AS_THE_SPLIT,
]


def friedman_set():
    """Friedman #1 with 11 noise features, as ``numeric_sets`` yields it."""
    X, y = make_friedman1(2000, 16, noise=1.0, random_state=0)
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    how = "KFold(5, shuffle=True, random_state=0)"
    return "friedman1_16_features", X, y, folds, how


def row_groups(name, n):
    """The rows' groups (parkinsons' patients) of set ``name``, else None."""
    if name != "parkinsons_telemonitoring":
        return None
    return np.searchsorted(PARKINSONS_PATIENTS, np.arange(n), side="right")


def inner_folds(name):
    """A splitter for the training rows drawn as set ``name``'s outer folds."""
    if name == "parkinsons_telemonitoring":
        return GroupKFold(5)
    if name == "appliances_energy":
        return KFold(5)
    return KFold(5, shuffle=True, random_state=0)


def numeric_sets(folder):
    """``(name, X, y, folds, how)`` of every numeric CSV in ``folder``."""
    paths = sorted(glob.glob(os.path.join(folder, "*.csv")))
    if not paths:
        raise FileNotFoundError(
            f"no tables (*.csv) in {folder}: give the shared data folder (--data)"
        )
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        data = np.loadtxt(path, delimiter=",", skiprows=1)
        X, y = data[:, :-1], data[:, -1]
        n = X.shape[0]
        if name == "parkinsons_telemonitoring":
            groups = row_groups(name, n)
            folds = list(GroupKFold(5).split(X, y, groups))
            how = "GroupKFold(5) by patient"
        elif name == "appliances_energy":
            folds = list(KFold(5).split(X))
            how = "KFold(5), contiguous time blocks"
        else:
            folds = list(KFold(5, shuffle=True, random_state=0).split(X))
            how = "KFold(5, shuffle=True, random_state=0)"
        yield name, X, y, folds, how


def uci_sets(folder, n_splits):
    """``(name, X, y, folds, how)`` of the standard UCI splits."""
    root = os.path.join(folder, "uci_splits")
    for name in sorted(PUBLISHED_BEST):
        d = os.path.join(root, name)
        data = np.loadtxt(os.path.join(d, "data.txt"))
        features = np.loadtxt(os.path.join(d, "index_features.txt"), dtype=int)
        target = int(np.loadtxt(os.path.join(d, "index_target.txt")))
        folds = [
            tuple(
                np.loadtxt(os.path.join(d, f"index_{part}_{i}.txt"), dtype=int)
                for part in ("train", "test")
            )
            for i in range(n_splits)
        ]
        yield name, data[:, features], data[:, target], folds, f"{n_splits} splits"


def evaluate(name, X, y, folds, set_name="", seeds=1):
    """RMSE per fold (and seed, ``0 .. seeds - 1``) and the median fit time
    of model ``name``."""
    rmse, fit_t = [], []
    groups = row_groups(set_name, X.shape[0])
    for (train, test), seed in itertools.product(folds, range(seeds)):
        model = make_model(name, set_name, seed)
        fit_params = {}
        if name == AS_THE_SPLIT and groups is not None:
            fit_params["groups"] = groups[train]
        start = time.perf_counter()
        model.fit(X[train], y[train], **fit_params)
        fit_t.append(time.perf_counter() - start)
        pred = np.asarray(model.predict(X[test])).reshape(-1)
        rmse.append(float(np.sqrt(np.mean((pred - y[test]) ** 2))))
    return np.array(rmse), float(np.median(fit_t))


def geo(ratios):
    return float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=os.path.join(HERE, "..", "..", "shared", "data")
    )
    parser.add_argument("--part", choices=["cv", "uci"], default="cv")
    parser.add_argument("--models", nargs="*", choices=MODELS, default=DEFAULT_MODELS)
    parser.add_argument("--sets", nargs="*", help="subset of set names")
    parser.add_argument("--splits", type=int, default=10, help="UCI splits to run")
    parser.add_argument(
        "--variant", nargs="*", default=[], help="MultiHeadNW with NAME=VALUE"
    )
    parser.add_argument("--friedman", action="store_true", help="add Friedman #1")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="fit every model with seeds 0 .. N-1 on each fold (RMSE: the mean)",
    )
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    names = list(args.models) + [f"MultiHeadNW ({v})" for v in args.variant]
    if args.part == "cv":
        sets = numeric_sets(args.data)
        if args.friedman:
            sets = itertools.chain(sets, [friedman_set()])
    else:
        sets = uci_sets(args.data, args.splits)
    start_all = time.perf_counter()
    results = {}
    lines = [
        "| set | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for set_name, X, y, folds, how in sets:
        if args.sets and set_name not in args.sets:
            continue
        print(f"{set_name}: {X.shape[0]} rows x {X.shape[1]} features, {how}")
        results[set_name] = {}
        for name in names:
            rmse, fit = evaluate(name, X, y, folds, set_name, args.seeds)
            results[set_name][name] = (rmse, fit)
            se = rmse.std() / np.sqrt(len(rmse))
            print(
                f"  {name:<40}RMSE {rmse.mean():>10.5g} ± {se:<8.2g}fit {fit:>8.2f} s",
                flush=True,
            )
        cells = [f"{r.mean():.4g} ({t:.1f} s)" for r, t in results[set_name].values()]
        lines.append(f"| {set_name} | " + " | ".join(cells) + " |")

    summary = ["", "| model | geo-mean RMSE / HGB | / CatBoost |", "|---|---|---|"]
    print("\ngeometric-mean RMSE ratios (sets run):")
    for name in names:
        row = [name]
        for ref in (HGB, CATBOOST):
            ratios = [
                r[name][0].mean() / r[ref][0].mean()
                for r in results.values()
                if ref in r
            ]
            row.append(f"{geo(ratios):.4f}" if ratios else "-")
        print(f"  {row[0]:<40}/HGB {row[1]:>7}   /CatBoost {row[2]:>7}")
        summary.append("| " + " | ".join(row) + " |")
    lines += summary
    timed = [n for n in names if n not in (HGB, CATBOOST)]
    for name in timed if HGB in names and results else []:
        ratio = {s: r[name][1] / r[HGB][1] for s, r in results.items()}
        worst = max(ratio, key=ratio.get)
        median = float(np.median(list(ratio.values())))
        text = (
            f"fit time of {name} / {HGB}: median {median:.1f}x, "
            f"largest {ratio[worst]:.1f}x ({worst})"
        )
        print(text)
        lines += ["", text]
    if args.part == "uci":
        lines += ["", "| set | best published RMSE | source |", "|---|---|---|"]
        print("\nbest published RMSE on these splits (20 splits):")
        for s in results:
            value, source = PUBLISHED_BEST[s]
            print(f"  {s:<20}{value:>6}  {source}")
            lines.append(f"| {s} | {value} | {source} |")
    elapsed = time.perf_counter() - start_all
    print(f"total time {elapsed / 60:.1f} min")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
