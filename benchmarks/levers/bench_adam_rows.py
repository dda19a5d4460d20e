"""A lever for issue 66, measured: where one head's fit turns to Adam.

``solver='auto'`` fits one head that learns feature slopes (as the
recommended start's stages do) by Adam on minibatches above
``solvers.AUTO_ADAM_ROWS_HEADS`` training rows (4096, the switch of
several heads), by full-batch L-BFGS below, whose continuation of the
slopes tries the finer slopes map; Adam's steps learn only the coarse one.
``Adam above 2048`` moves that switch down to ``AUTO_ADAM_ROWS`` (2048,
the switch of one head without slopes), so that a table of 2048 to 4096
training rows is fitted by Adam and never tries the finer map; ``Adam
above 8192`` moves it up (a patch on the module's constant either way);
``default`` is the recommended start as the library fits it.

Sections as ``_variant_table`` prints them: ``synthetic`` (the problems
of ``bench_interactions.py``; ``--rows 3000`` puts their training rows
between 2048 and 4096) and ``numeric`` (the shared numeric tables on the
folds of ``bench_accuracy.py``). This is a measurement script: it patches
a private module.

Run: ``python benchmarks/levers/bench_adam_rows.py [--sections synthetic
numeric] [--rows 3000] [--seeds 2] [--sets abalone ...]``
"""

import contextlib
from unittest import mock

import _variant_table as table

from nwensemble._fit import solvers

ROWS = {"Adam above 2048": 2048, "Adam above 8192": 8192}


def patched(name):
    """The context a variant's fit runs under."""
    if name not in ROWS:
        return contextlib.nullcontext()
    return mock.patch.object(solvers, "AUTO_ADAM_ROWS_HEADS", ROWS[name])


if __name__ == "__main__":
    table.main_patched(__doc__, list(ROWS), patched)
