"""A lever for issue 66, measured: the cross-fitted check of per-feature
scales decided by its first two folds where they agree.

Each start with a scale per feature (``_fit/start.py``) asks whether those
scales predict rows they were not fitted to better than one common scale,
on four cross-fitted folds of its subsample; on the small tables that check
is about half of the recommended start's fit. The check takes the folds
in turn and stops after the first two when both say the same (the fold's
held-out loss lower with the per-feature scales, or not); otherwise it goes
on to all four. That is the default since it was kept; the variant ``all
four folds`` scores all four always, as before. The folds are drawn the
same way, so wherever the verdict is the same the fit is the same to the
bit.

Sections as ``_variant_table`` prints them: ``synthetic``, ``numeric`` and
``mixed``. This is a measurement script: it patches the private start
module.

Run: ``python benchmarks/levers/bench_check_folds.py [--sections synthetic
numeric mixed] [--model-seed 1] [--sets concrete ...]``
"""

import contextlib
from unittest import mock

import _variant_table as table

from nwensemble._fit import start

VARIANTS = {
    "two agreeing folds decide": True,
    "all four folds": False,
}


@contextlib.contextmanager
def patched(name):
    """The recommended start's fit with the check as variant ``name`` has
    it (the library's own for ``'default'``)."""
    if name == "default":
        yield
        return
    with mock.patch.object(start, "_TWO_AGREEING_FOLDS_DECIDE", VARIANTS[name]):
        yield


if __name__ == "__main__":
    table.main_patched(__doc__, list(VARIANTS), patched)
