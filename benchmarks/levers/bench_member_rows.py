"""A lever for issue 66, measured: the default first stage's members on
twice the rows.

``ResidualStageRegressor()`` (``default``: ``k = 8192 // n`` members
within 1 and 4 in its first stage, so four up to 2048 rows and two up to
4096, where the member on what the ridge leaves starts from the first
member's projection) against, side by side on each split:

* ``members 4096``: ``k = 4096 // n`` within 1 and 4 (the rule before:
  four up to 1024 rows, two up to 2048, one above);
* ``cold second``: the default's members, the lone member on what the
  ridge leaves searching a start of its own.

Ratios are the variant's over the default's: below 1 where the variant
(the rule before, or the costlier second member) is the better. This is a
measurement script: it patches the private ``_fit.allocation`` and
``_linear_members`` modules.

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

from nwensemble import _linear_members  # noqa: E402
from nwensemble._fit import allocation  # noqa: E402

VARIANTS = ["members 4096", "cold second"]


def patches(name):
    """The context a variant's fit runs under."""
    if name == "members 4096":
        return mock.patch.object(
            allocation, "FIRST_STAGE_MEMBER_ROWS", allocation.MEMBER_ROWS
        )
    if name == "cold second":
        return mock.patch.object(
            _linear_members, "_LONE_SECOND_STARTS_FROM_FIRST", False
        )
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, patches)
