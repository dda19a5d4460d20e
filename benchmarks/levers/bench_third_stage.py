"""Issue 66's third stage, measured: heads that attend over the sum's
leave-one-out residuals with a null key (a key of value zero at a learned
logit, so that a query far from every training row adds nothing).

``ResidualStageRegressor()`` (``default``: the two stages) against the
same start with the third stage (``third stage``:
``ResidualStageRegressor(third_stage=True)``), side by side on each split;
the first two stages are the same fits in both. The sections, folds and lines are
``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_third_stage.py [--sections numeric]
[--sets ...] [--model-seed 0]``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

if __name__ == "__main__":
    table.main_with_params(__doc__, {"third stage": {"third_stage": True}})
