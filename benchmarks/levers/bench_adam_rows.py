"""A lever for issue 66, measured: where one head's fit turns to Adam.

``solver='auto'`` fits one head by Adam on minibatches above
``solvers.AUTO_ADAM_ROWS`` training rows (2048), by full-batch L-BFGS
below. Only the L-BFGS path tries the finer slopes map: this asks
whether a table just above the switch, fitted by L-BFGS, finds the sharp
steps that a table just below it finds. ``L-BFGS to 4096`` and ``L-BFGS
to 8192`` move the switch (a patch on the module's constant); ``finer map
to 4096`` moves it and lets the slopes' continuation try the finer map on
up to 4096 rows (``feature_slopes.FINE_MAX_ROWS``, 2048: above it only the
coarse map is continued); ``default`` is the recommended start as the
library fits it.

Sections as ``_variant_table`` prints them: ``synthetic`` (the problems
of ``bench_interactions.py``; ``--rows 3000`` puts their training rows
between the switches) and ``numeric`` (the shared numeric tables on the
folds of ``bench_accuracy.py``). This is a measurement script: it patches
a private module.

Run: ``python benchmarks/levers/bench_adam_rows.py [--sections synthetic
numeric] [--rows 3000] [--seeds 2] [--sets abalone ...]``
"""

import contextlib

import _variant_table as table

from nwensemble._fit import feature_slopes, solvers

# Each variant's (Adam's switch, the finer map's most continuation rows).
ROWS = {
    "L-BFGS to 4096": (4096, feature_slopes.FINE_MAX_ROWS),
    "L-BFGS to 8192": (8192, feature_slopes.FINE_MAX_ROWS),
    "finer map to 4096": (4096, 4096),
}


def patched(name):
    """The context a variant's fit runs under."""
    if name not in ROWS:
        return contextlib.nullcontext()
    return _switch_at(*ROWS[name])


@contextlib.contextmanager
def _switch_at(adam_rows, fine_rows):
    old = solvers.AUTO_ADAM_ROWS, feature_slopes.FINE_MAX_ROWS
    solvers.AUTO_ADAM_ROWS, feature_slopes.FINE_MAX_ROWS = adam_rows, fine_rows
    try:
        yield
    finally:
        solvers.AUTO_ADAM_ROWS, feature_slopes.FINE_MAX_ROWS = old


if __name__ == "__main__":
    table.main_patched(__doc__, list(ROWS), patched)
