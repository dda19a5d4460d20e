"""Which solver fits the heads: the solvers by name, and ``solver='auto'``'s
rule."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Callable

from nwensemble._fit.adam import fit_adam
from nwensemble._fit.lbfgs import fit_lbfgs

# solver="auto" trains one head with Adam on minibatches above this many
# rows (twice Adam's batch, where L-BFGS would start on a subsample of a
# batch's size): full leave-one-out L-BFGS costs O(n^2) per evaluation
# (the benchmarks page's levers weigh the two solvers on real and synthetic
# tables).
AUTO_ADAM_ROWS = 2048
# ... and above this many where some features are embeddings (categorical
# features, missing values): a minibatch step moves a level's embedding
# only when rows of that level are drawn (the benchmarks page's levers
# weigh the two switches).
AUTO_ADAM_ROWS_EMBEDDINGS = 10_000
# Several heads take Adam from here on: full-batch L-BFGS over all rows
# (their only schedule) then takes longer than Adam and ends less accurate.
# So does one head that learns feature slopes: below, its fit continues
# them on all its rows and chooses the finer map where the held-out rows
# ask for it, which Adam's steps cannot (they learn one map, the coarse
# one unless feature_slopes='fine').
AUTO_ADAM_ROWS_HEADS = 4096


@dataclass(frozen=True)
class Solver:
    """A solver (``solve``, see ``config.SolverResult``) and the words its
    verbose lines and warnings count in."""

    name: str
    solve: Callable
    iterations: str
    evaluations: str


SOLVERS = {
    "lbfgs": Solver("lbfgs", fit_lbfgs, "iterations", "evaluations"),
    "adam": Solver("adam", fit_adam, "epochs", "steps"),
}


def choose_solver(solver, n_positive, n_heads, *, embeddings=False, slopes=False):
    """The ``Solver`` for the parameter ``solver`` on ``n_positive`` rows of
    positive weight: ``'auto'`` takes Adam above ``AUTO_ADAM_ROWS`` rows for
    one head (above ``AUTO_ADAM_ROWS_EMBEDDINGS`` when some features are
    ``embeddings``, above ``AUTO_ADAM_ROWS_HEADS`` when it learns feature
    ``slopes``), above ``AUTO_ADAM_ROWS_HEADS`` for several, else L-BFGS."""
    if solver == "auto":
        limit = AUTO_ADAM_ROWS_HEADS
        if n_heads == 1:
            limit = AUTO_ADAM_ROWS_HEADS if slopes else AUTO_ADAM_ROWS
            if embeddings:
                limit = AUTO_ADAM_ROWS_EMBEDDINGS
        solver = "adam" if n_positive > limit else "lbfgs"
    return SOLVERS[solver]
