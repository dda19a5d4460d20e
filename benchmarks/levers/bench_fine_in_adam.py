"""A lever for issue 66, measured: a finer slopes map within Adam's steps.

Above 4096 rows the recommended start's first stage is fitted by Adam,
whose steps learn the coarse slopes map (``feature_slopes.JointSlopes``:
``N_BINS`` (8) quantile bins, log-slopes within ``+-MAX_LOG_SLOPE`` (1)).
Each variant gives those steps more bins and a wider bound instead, by a
patch on ``JointSlopes.on``; the continuations (the second stage's, and the
first stage's below 4096 rows) are the library's own:

* ``64 bins within exp(+-3)``: the finer map's bins and bound
  (``FINE_BINS``, ``FINE_MAX_LOG_SLOPE``), the map that
  ``feature_slopes='fine'`` learns in Adam's steps;
* ``32 bins within exp(+-2)``;
* ``16 bins within exp(+-1)``: twice the bins, the coarse bound.

Adam has no second fit to compare against, so each variant's map is
taken whatever its held-out rows say. ``default`` is the recommended
start as the library fits it.

Sections as ``_variant_table`` prints them: ``synthetic`` (the problems of
``bench_interactions.py``; give ``--rows 5000`` for fits by Adam) and
``numeric`` (the shared numeric tables on the folds of
``bench_accuracy.py``; those of more than 4096 training rows are fitted by
Adam). This is a measurement script: it patches private modules.

Run: ``python benchmarks/levers/bench_fine_in_adam.py [--sections
synthetic numeric] [--rows 5000] [--seeds 2] [--sets cpu_act ...]``
"""

import contextlib
from unittest import mock

import _variant_table as table

from nwensemble._fit import feature_slopes

VARIANTS = {
    "64 bins within exp(+-3)": (
        feature_slopes.FINE_BINS,
        feature_slopes.FINE_MAX_LOG_SLOPE,
    ),
    "32 bins within exp(+-2)": (32, 2.0),
    "16 bins within exp(+-1)": (16, 1.0),
}


def joint_slopes_on(n_bins, bound):
    """``JointSlopes.on`` for ``n_bins`` bins within ``exp(+-bound)``."""

    def on(cls, X, sw, *, xp, **_):
        if X.numeric.shape[1] == 0:
            return None
        identity = feature_slopes.identity_slopes(X.numeric, sw, xp=xp, n_bins=n_bins)
        return cls(identity, bound)

    return classmethod(on)


@contextlib.contextmanager
def patched(name):
    """The recommended start's fit with Adam's steps learning variant
    ``name``'s map (the library's own for ``'default'``)."""
    if name == "default":
        yield
        return
    on = joint_slopes_on(*VARIANTS[name])
    with mock.patch.object(feature_slopes.JointSlopes, "on", on):
        yield


if __name__ == "__main__":
    table.main_patched(__doc__, list(VARIANTS), patched)
