"""A lever for issue 66, measured: the series lines (rows equal on every
feature but one numeric feature, and a query's value on the line between
its series' nearest rows, weighted in by the training rows' leave-one-out
residuals).

``ResidualStageRegressor()`` (``default``: with ``series_lines=True``)
against ``no series`` (``series_lines=False``), side by side on each
split; the stages are the same fits in both (the lines come after them and
draw nothing from the random state the stages use). Ratios are the
variant's over the default's: above 1 where the lines help.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_series_lines.py [--sections numeric]
[--sets ...] [--model-seed 0]``.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble import ResidualStageRegressor  # noqa: E402

VARIANTS = ["no series"]


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and the variant."""
    models = {
        "default": ResidualStageRegressor(random_state=seed),
        "no series": ResidualStageRegressor(series_lines=False, random_state=seed),
    }
    out = {}
    for name in ["default", *args.variants]:
        start = time.perf_counter()
        model = table.fit_quietly(models[name], X, y)
        out[name] = (model.predict(X_test), time.perf_counter() - start)
    return out


def main():
    table.main(table.parser(__doc__, VARIANTS), predictions)


if __name__ == "__main__":
    main()
