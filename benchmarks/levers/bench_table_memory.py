"""Memory of categorical features: a 100 000-row table with 5 numeric columns
and categorical columns of 1 000 and 10 000 levels, against the same table
without them.

Each fit runs in a fresh interpreter; its peak resident memory (``VmHWM``,
reset just before the fit, after the table is built) is reported, with the
ratio of the two. Then the model with categories predicts rows whose levels
it never saw. ``MultiHeadNWRegressor(max_iter=...)`` (Adam above 4096 rows):
the peak is reached in the first epoch, so a few epochs measure it.

Run: ``python benchmarks/levers/bench_table_memory.py [--rows 100000] [--max-iter 2]``
"""

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import benchmark_parser, cpu_line, in_child  # noqa: E402
from bench_scale import peak_mib, start_peak  # noqa: E402

LEVELS = (1000, 10_000)


def table(n, with_categories, seed=0):
    """The synthetic table: 5 numeric columns, and two string columns whose
    levels shift the target."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(n)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(5)])
    if with_categories:
        for k, levels in enumerate(LEVELS):
            codes = rng.integers(0, levels, n)
            effect = rng.standard_normal(levels)
            y = y + 0.5 * effect[codes]
            frame[f"c{k}"] = np.array([f"L{c}" for c in range(levels)])[codes]
    return frame, y


def child_fit(n, with_categories, max_iter):
    """Peak memory (MiB) of one fit, its time, and (with categories) the
    predictions of rows with unseen levels."""
    import warnings

    from nwensemble import MultiHeadNWRegressor

    X, y = table(n, with_categories)
    model = MultiHeadNWRegressor(max_iter=max_iter, random_state=0, bvc_resamples=0)
    base = start_peak()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    result = {"peak": peak_mib() - base, "time": time.perf_counter() - start}
    if with_categories:
        query = X.iloc[:5].copy()
        query["c0"] = "never seen"
        query["c1"] = ["never", "seen", "either", "level", "here"]
        pred = model.predict(query)
        result["unseen_finite"] = bool(np.all(np.isfinite(pred)))
        result["embedding_rows"] = [int(e.shape[1]) for e in model.embeddings_]
    return result


def main():
    args = benchmark_parser(__doc__, rows=100_000, max_iter=2).parse_args()
    print(cpu_line())
    print(
        f"{args.rows} rows, 5 numeric columns; MultiHeadNWRegressor(max_iter="
        f"{args.max_iter}); peak resident memory of the fit (VmHWM after reset)"
    )
    plain = in_child("bench_table_memory", "child_fit", args.rows, False, args.max_iter)
    mixed = in_child("bench_table_memory", "child_fit", args.rows, True, args.max_iter)
    print(
        f"  numeric only:             {plain['peak']:8.1f} MiB  {plain['time']:7.1f} s"
    )
    print(
        f"  + categorical {LEVELS[0]} and {LEVELS[1]} levels: {mixed['peak']:8.1f} MiB"
        f"  {mixed['time']:7.1f} s"
    )
    print(f"  ratio: {mixed['peak'] / plain['peak']:.2f}")
    print(
        f"  embedding rows per feature: {mixed['embedding_rows']}; predictions "
        f"of unseen levels finite: {mixed['unseen_finite']}"
    )


if __name__ == "__main__":
    main()
