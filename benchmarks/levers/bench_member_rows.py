"""A lever for issue 66, measured: the default first stage's members on
twice the rows.

Against ``ResidualStageRegressor()`` (``default``, ``k = 4096 // n``
members within 1 and 4), side by side on each split:

* ``members 8192``: ``k = 8192 // n`` within 1 and 4 (four up to 2048
  rows, two up to 4096, one above), so that tables of 2049-4096 rows fit
  a second member, on what the ridge leaves and through the first
  member's feature slopes.

This is a measurement script: it patches the private ``_residual_stage``
module's member count.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_member_rows.py [--sections numeric]
[--sets ...] [--model-seed 0] [--variants ...]``.
"""

import contextlib
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble import _residual_stage  # noqa: E402
from nwensemble._fit.allocation import MAX_MEMBERS  # noqa: E402

VARIANTS = ["members 8192"]


def _members(n_samples):
    return int(min(MAX_MEMBERS, max(1, 8192 // max(n_samples, 1))))


def patches(name):
    """The context a variant's fit runs under."""
    if name == "members 8192":
        return mock.patch.object(_residual_stage, "default_members", _members)
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, patches)
