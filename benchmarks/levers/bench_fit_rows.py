"""Issue 66's cliff above 4096 training rows, measured: the recommended
start on a random 4096 of its training rows, and with the finer slopes map
tried after Adam, against the start as it is.

Up to ``AUTO_ADAM_ROWS_HEADS`` (4096) training rows the start's first
stage learns its projection and feature slopes by L-BFGS, with two or more
members, and tries the finer map where a coarse slope presses its bound;
above, one member by Adam on minibatches, with the coarse map only. The
variants, side by side on each split:

* ``on 4096 rows``: ``ResidualStageRegressor()`` given a random
  ``AUTO_ADAM_ROWS_HEADS`` of the training rows (drawn from the model
  seed) where there are more, the other rows unused: how much of the
  difference is the fit's and how much the rows';
* ``finer after Adam``: ``bench_finer_after_adam.py``'s continuation of
  the finer map after Adam (where a coarse slope ended at its bound, kept
  where Adam's held-out rows clearly ask for it) at the library's switch,
  on at most ``feature_slopes.MAX_ROWS`` of Adam's training rows, the
  full-batch path's bound;
* ``finer after Adam, 2048 rows``: the same on at most 2048 rows.

Ratios are the variant's over the default's: below 1 where the variant
predicts better. This is a measurement script: it patches
``ResidualStageRegressor.fit`` and the engine's ``_with_slopes``.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_fit_rows.py [--sections synthetic]
[--rows 6000] [--sets ...] [--model-seed 0] [--variants ...]``.
"""

import contextlib
import functools
import os
import sys
from unittest import mock

import numpy as np
from sklearn.utils import _safe_indexing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402
from bench_finer_after_adam import finer_after_adam  # noqa: E402

from nwensemble import ResidualStageRegressor  # noqa: E402
from nwensemble._fit import engine, feature_slopes  # noqa: E402
from nwensemble._fit.solvers import AUTO_ADAM_ROWS_HEADS  # noqa: E402

VARIANTS = ["on 4096 rows", "finer after Adam", "finer after Adam, 2048 rows"]
_FIT = ResidualStageRegressor.fit


def _fit_on_fewer_rows(self, X, y, **fit_params):
    """The start's fit on a random ``AUTO_ADAM_ROWS_HEADS`` of the rows."""
    n = len(y)
    if n <= AUTO_ADAM_ROWS_HEADS:
        return _FIT(self, X, y, **fit_params)
    rows = np.sort(
        np.random.default_rng(self.random_state).permutation(n)[:AUTO_ADAM_ROWS_HEADS]
    )
    return _FIT(self, _safe_indexing(X, rows), np.asarray(y)[rows], **fit_params)


def _finer_on(rows):
    """The finer map after Adam (``bench_finer_after_adam.py``'s), continued
    on at most ``rows`` rows, at the library's switch to Adam."""
    return mock.patch.object(
        engine, "_with_slopes", functools.partial(finer_after_adam, rows=rows)
    )


def patches(name):
    """The context a variant's fit runs under."""
    if name == "on 4096 rows":
        return mock.patch.object(ResidualStageRegressor, "fit", _fit_on_fewer_rows)
    if name == "finer after Adam":
        return _finer_on(feature_slopes.MAX_ROWS)
    if name == "finer after Adam, 2048 rows":
        return _finer_on(2048)
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, patches)
