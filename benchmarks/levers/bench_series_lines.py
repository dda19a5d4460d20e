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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

if __name__ == "__main__":
    table.main_with_params(__doc__, {"no series": {"series_lines": False}})
