"""Issue 66's lever in the readout, measured: the local quadratics among
``local_fit='auto'``'s candidates (each coordinate of a head and its square
beside it, for heads of at most 16 dimensions), taken over the lines only
where their held-out error is lower by more than the paired standard
error.

``ResidualStageRegressor()`` (``default``) against the same start without
the quadratics among the candidates (``no quadratics``: the choice as it
was, the lines and the mean) and with them but without the
one-standard-error rule (``least error``: the least error of every kind
and width chooses), side by side on each split. The sections, folds and
lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_local_quadratic.py [--sections numeric]
[--sets ...] [--variants "no quadratics"] [--model-seed 0]``.
"""

import contextlib
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble._fit import local_fit  # noqa: E402

VARIANTS = ["no quadratics", "least error"]


def _without_quadratics(*args, **kwargs):
    """``local_fit.candidates`` without the quadratics (where it offers
    others)."""
    options = _CANDIDATES(*args, **kwargs)
    return [r for r in options if not r.squares] or options


def _least_error(picks, scoring):
    """``local_fit._decide`` without the standard-error rule: the least
    error of every kind and width, the first on a tie."""
    return min(picks, key=local_fit._error_key)


_CANDIDATES = local_fit.candidates


def _patches(name):
    """The variant's patches, as one context."""
    stack = contextlib.ExitStack()
    if name == "no quadratics":
        stack.enter_context(
            mock.patch.object(local_fit, "candidates", _without_quadratics)
        )
    if name == "least error":
        stack.enter_context(mock.patch.object(local_fit, "_decide", _least_error))
    return stack


def main():
    table.main_patched(__doc__, VARIANTS, _patches)


if __name__ == "__main__":
    main()
