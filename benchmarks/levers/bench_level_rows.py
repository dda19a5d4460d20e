"""A lever for issue 66, measured: how many training rows a string
column's level needs for an embedding of its own.

The default, ``ResidualStageRegressor()``: a level has its own code from
``MIN_LEVEL_ROWS`` (5) rows, or from fewer where the fit's targets say the
column's levels differ strongly (``column_types.rows_for_own_code``: from
the rows at which a level's mean is at least half signal). Side by side on
each split:

* ``five rows``: every level needs ``MIN_LEVEL_ROWS`` rows (the rule
  before);
* ``one row``: every level seen in training has its own code.

This is a measurement script: the variants patch the private
``_fit.column_types`` module. Tables whose levels all have five rows or
more are the same under every variant.

The sections, folds and lines are ``_variant_table.py``'s (the
``string_levels`` section is ``bench_string_levels.py``'s problems). Run:
``python benchmarks/levers/bench_level_rows.py [--sections string_levels
mixed] [--sets taxis_fare] [--model-seed 0] [--variants ...]``.
"""

import contextlib
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble._fit import column_types  # noqa: E402

VARIANTS = ["five rows", "one row"]

_RULES = {
    "five rows": lambda row_levels, targets: column_types.MIN_LEVEL_ROWS,
    "one row": lambda row_levels, targets: 1,
}


def _context(name):
    """What a variant's fit runs under."""
    if name in _RULES:
        return mock.patch.object(column_types, "rows_for_own_code", _RULES[name])
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, _context)
