"""Prediction time against a roofline for dense softmax attention.

Same shapes, same run: ``n_train`` keys, ``n_test`` queries, ``n_features``
features, ``n_heads`` heads of ``head_dim`` dimensions, float32 and float64.
The roofline is the time of the steps no implementation can skip, per head
and block of queries: the score product ``Q K^T``, one ``exp`` over the
scores (in place) and the weighted sum of the targets ``E @ [y, 1]``; it is
timed at several block sizes and the fastest is kept. ``predict`` is timed on
a fitted ``MultiHeadNWRegressor`` (``max_iter=0``: the projections do not
matter for the cost). The two alternate, repeat by repeat, so that a change
in a shared machine's load hits both; prints the median times of
``--repeats`` runs and the median of the per-repeat ratios.

Also prints the peak memory ``predict`` allocates beyond its inputs at
``--memory-n`` (tracemalloc, which sees NumPy's allocations).

Run: ``python benchmarks/bench_predict.py [--n 20000] [--repeats 5]``
"""

import time
import tracemalloc

import numpy as np
from _common import benchmark_parser
from threadpoolctl import threadpool_info

from nwensemble import MultiHeadNWRegressor


def roofline(Q, K, Y1, n_heads, block):
    """Scores, exp and weighted sum per head and block; returns seconds."""
    d = Q.shape[1] // n_heads
    m = Q.shape[0]
    buf = np.empty((block, K.shape[0]), dtype=Q.dtype)
    start = time.perf_counter()
    for h in range(n_heads):
        Kh = np.ascontiguousarray(K[:, h * d : (h + 1) * d])
        for s in range(0, m, block):
            q = Q[s : s + block, h * d : (h + 1) * d]
            S = np.matmul(q, Kh.T, out=buf[: q.shape[0]])
            np.exp(S, out=S)
            S @ Y1
    return time.perf_counter() - start


def fitted_model(X, y, n_heads, head_dim):
    return MultiHeadNWRegressor(
        n_heads=n_heads,
        head_dim=head_dim,
        init="random",
        max_iter=0,
        bvc_resamples=0,
        random_state=0,
    ).fit(X, y)


def main():
    parser = benchmark_parser(
        __doc__, n=20000, features=16, heads=4, head_dim=4, repeats=5, memory_n=50000
    )
    args = parser.parse_args()
    blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
    print(f"BLAS: {blas}")
    rng = np.random.default_rng(0)
    n, p = args.n, args.features
    print(
        f"n_train = n_test = {n}, {p} features, {args.heads} heads x "
        f"{args.head_dim} dims"
    )
    print(f"{'dtype':<9}{'predict s':>11}{'roofline s':>12}{'block':>8}{'ratio':>8}")
    for dtype in (np.float32, np.float64):
        X = rng.standard_normal((n, p)).astype(dtype)
        y = rng.standard_normal(n).astype(dtype)
        Xq = rng.standard_normal((n, p)).astype(dtype)
        model = fitted_model(X, y, args.heads, args.head_dim)
        Q = model.transform(Xq)
        K = model.transform(X)
        Y1 = np.column_stack([y, np.ones_like(y)])
        best_roof, best_block = np.inf, None
        for block in (256, 512, 1024, 2048, 4096):
            t = np.median([roofline(Q, K, Y1, args.heads, block) for _ in range(3)])
            if t < best_roof:
                best_roof, best_block = t, block
        # Alternate the two, so that a change in the machine's load between
        # repeats hits both; the ratio is the median of the per-repeat ratios.
        roofs, times = [], []
        for _ in range(args.repeats):
            roofs.append(roofline(Q, K, Y1, args.heads, best_block))
            start = time.perf_counter()
            model.predict(Xq)
            times.append(time.perf_counter() - start)
        pred, roof = float(np.median(times)), float(np.median(roofs))
        ratio = float(np.median(np.asarray(times) / np.asarray(roofs)))
        print(
            f"{np.dtype(dtype).name:<9}{pred:>11.3f}{roof:>12.3f}{best_block:>8d}"
            f"{ratio:>8.2f}"
        )

    m = args.memory_n
    X = rng.standard_normal((m, p))
    y = rng.standard_normal(m)
    model = fitted_model(X, y, args.heads, args.head_dim)
    Xq = rng.standard_normal((m, p))
    tracemalloc.start()
    model.predict(Xq)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dense = m * m * 8 / 2**30
    print(
        f"predict at n_train = n_test = {m} (float64): peak {peak / 2**20:.0f} MiB "
        f"allocated beyond the inputs (a dense {m} x {m} matrix: {dense:.0f} GiB)"
    )


if __name__ == "__main__":
    main()
