"""A lever for issue 68, measured: prediction's sums of a query block over
a chunk of keys in one compiled call.

``CompiledTilePasses`` sums a block of queries over a chunk of keys in one
call of ``numba_kernels.tile_sums`` (each tile's score product and product
with the readout's columns BLAS's, called from the compiled loop, and the
exp between them). Before, the interpreter went through the tiles: a
NumPy product, the compiled ``exp_tile`` and another NumPy product per
tile. This script times both side by side, alternating, the earlier one
put back by a patch: ``MultiHeadNWRegressor(n_heads=4, head_dim=4,
init='random', max_iter=0)`` on ``n`` float32 rows of 16 features
predicts ``n`` queries (``--sizes``; ``bench_compiled.predict_problem``),
local constant and local linear, on one thread and on every core; medians
of ``--repeats``, G kernel evaluations per second (queries x rows x heads
/ time) and the ratio.

This is a measurement script: it patches the private kernels module.

Run: ``python benchmarks/levers/bench_prediction_tiles.py [--sizes 20000]
[--repeats 5] [--mode native|avx2]``
"""

import argparse
import contextlib
import itertools
import os
import sys
import time
import warnings
from unittest import mock

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import add_mode, apply_mode, cpu_line  # noqa: E402
from bench_compiled import predict_problem  # noqa: E402


def tile_by_tile_passes():
    """The passes as they were: the tiles gone through by the interpreter,
    each exponentiated by the compiled ``exp_tile``."""
    from nwensemble._shared import numba_kernels
    from nwensemble._shared.numba_tile_passes import _own
    from nwensemble._shared.tiles import TilePasses

    class TileByTile(TilePasses):
        def _tile_exp(self, dtype, left_out):
            def exp(A, c0):
                return numba_kernels.exp_tile(A, _own(left_out, A.shape[0]), c0)

            return exp

    return TileByTile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[20_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = add_mode(parser).parse_args()
    warnings.filterwarnings("ignore")
    print(cpu_line())
    apply_mode(args)

    from threadpoolctl import threadpool_limits

    import nwensemble._shared.kernels as kernels

    before = tile_by_tile_passes()
    cores = os.cpu_count() or 1
    print("G evaluations/s: tile by tile (before), one call per chunk (now)")
    for n, local_fit in itertools.product(args.sizes, ("constant", "linear")):
        model, Xq, _ = predict_problem(n, local_fit)
        for threads in (1, cores):

            def run(old):
                patch = mock.patch.object(kernels, "CompiledTilePasses", before)
                with (
                    threadpool_limits(threads),
                    patch if old else contextlib.nullcontext(),
                ):
                    start = time.perf_counter()
                    model.predict(Xq)
                    return time.perf_counter() - start

            run(False), run(True)  # compiled once, outside the timing
            times = {"before": [], "now": []}
            for _ in range(args.repeats):
                times["before"].append(run(True))
                times["now"].append(run(False))
            rate = {k: n * n * 4 / np.median(t) / 1e9 for k, t in times.items()}
            where = "one thread" if threads == 1 else f"{threads} threads"
            print(
                f"  {n} x {n}, local {local_fit}, {where}: "
                f"before {rate['before']:.2f}, now {rate['now']:.2f} "
                f"({rate['now'] / rate['before']:.2f}x)",
                flush=True,
            )


if __name__ == "__main__":
    main()
