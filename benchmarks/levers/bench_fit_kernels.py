"""Levers for issue 66's fit-time check, measured: the leave-one-out
statistics' attention sums in float32, and the feature slopes' map and
gradient in compiled passes.

``ResidualStageRegressor()`` (``default``) against the same start with the
statistics' sums taken in float64 (``float64 statistics``:
``precision.statistics_keys`` returns the keys as they are), with the
slopes' map and gradient on the array-API path, one array per bin
(``array-path slopes``: ``numba_slopes.compiled`` says no), and with both
as before (``as before``), side by side on each split. Both levers change
only rounding; the fit time is what they are for. The sections, folds and
lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_fit_kernels.py [--sections numeric]
[--sets ...] [--variants "as before"] [--model-seed 0]``.
"""

import contextlib
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble._fit import local_fit  # noqa: E402
from nwensemble._shared import numba_slopes  # noqa: E402

VARIANTS = ["float64 statistics", "array-path slopes", "as before"]


def _patches(name):
    """The variant's patches, as one context."""
    stack = contextlib.ExitStack()
    if name in ("float64 statistics", "as before"):
        stack.enter_context(
            mock.patch.object(local_fit, "statistics_keys", lambda keys: keys)
        )
    if name in ("array-path slopes", "as before"):
        stack.enter_context(
            mock.patch.object(numba_slopes, "compiled", lambda xp, *arrays: False)
        )
    return stack


def main():
    table.main_patched(__doc__, VARIANTS, _patches)


if __name__ == "__main__":
    main()
