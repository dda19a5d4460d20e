"""A lever for issue 66, measured: the feature slopes' finer map.

Where the coarse map (``feature_slopes.N_BINS`` bins within
``exp(+-MAX_LOG_SLOPE)``) presses its bound, the continuation also fits a
finer one and keeps it where the held-out rows clearly gain (see
``feature_slopes``). ``default`` is the recommended start with the finer
map as the library sets it (``FINE_BINS`` bins within
``exp(+-FINE_MAX_LOG_SLOPE)``); each variant is the same start with the
finer map's bins and bound as it names:

* ``64 bins within exp(+-3)``, ``32 bins within exp(+-3)``, ``64 bins
  within exp(+-2)``, ``32 bins within exp(+-2)`` (since the first became
  the library's finer map it is the default again; the last is the map
  before it).

Sections as ``_variant_table`` prints them: ``synthetic`` (the problems of
``bench_interactions.py``, with HistGradientBoosting) and ``numeric`` (the
shared numeric tables on the folds of ``bench_accuracy.py``).

Run: ``python benchmarks/levers/bench_fine_slopes.py [--sections synthetic
numeric] [--sets concrete ...] [--variants ...]``
"""

import contextlib
from unittest import mock

import _variant_table as table

from nwensemble._fit import feature_slopes

VARIANTS = {
    "64 bins within exp(+-3)": (64, 3.0),
    "32 bins within exp(+-3)": (32, 3.0),
    "64 bins within exp(+-2)": (64, 2.0),
    "32 bins within exp(+-2)": (32, 2.0),
}


def finer_map(name):
    """The recommended start's fit with the finer map of variant ``name``
    (the library's own for ``'default'``)."""
    if name not in VARIANTS:
        return contextlib.nullcontext()
    bins, bound = VARIANTS[name]
    return mock.patch.multiple(feature_slopes, FINE_BINS=bins, FINE_MAX_LOG_SLOPE=bound)


if __name__ == "__main__":
    table.main_patched(__doc__, list(VARIANTS), finer_map)
