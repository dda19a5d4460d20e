"""The fitting engine's frozen configuration and the contract every solver
fulfils."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class FitConfig:
    """What a fit of the heads' projections needs to know, as plain values.

    The fields named in ``PARAMETERS`` are the estimators' parameters of
    those names (their docstrings say what they do; ``from_params`` copies
    them, so no default is restated here). The others are resolved by the
    estimator: ``kernel`` the ``Kernel`` object of its ``kernel``
    parameter, ``n_heads`` (per member), ``n_members`` (groups of
    ``n_heads`` fitted one after another, each from its own start and
    held-out rows, whose heads the model then averages together),
    ``diversity`` (a float or ``'auto'``),
    ``callback`` (None, or called as ``callback(W, n_iter)`` with the
    (p, n_heads * d) float64 projection in the standardised units it is
    learned in) and ``name``, which prefixes verbose lines. ``row_scales``
    is set by the engine for the solver: whether L-BFGS takes each row of
    ``W`` as a scale times a direction (see ``row_scales``).
    """

    kernel: Any
    n_heads: int
    head_dim: Optional[int]
    init: Any
    max_iter: int
    tol: float
    solver: str
    batch_size: Any
    early_stopping: Any
    validation_fraction: Any
    n_iter_no_change: int
    standardize: Any
    duplicate_weight: Any
    local_fit: str
    diversity: Any
    callback: Optional[Callable]
    verbose: int
    name: str
    n_members: int = 1
    row_scales: bool = True

    PARAMETERS = (
        "head_dim",
        "init",
        "max_iter",
        "tol",
        "solver",
        "batch_size",
        "early_stopping",
        "validation_fraction",
        "n_iter_no_change",
        "standardize",
        "duplicate_weight",
        "local_fit",
        "verbose",
    )

    @classmethod
    def from_params(cls, params, **resolved):
        """A configuration from an estimator's ``get_params()`` and the
        fields the estimator resolves itself."""
        return cls(**{name: params[name] for name in cls.PARAMETERS}, **resolved)

    def replace(self, **changes):
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def progress(self, stage, start):
        """With ``verbose``, say that ``stage`` (begun at ``start``) is done."""
        progress(self.name, self.verbose, stage, start)


def progress(name, verbose, stage, start):
    """With ``verbose``, print that ``stage`` (begun at ``start``, a
    ``time.perf_counter()``) is done, and how long it took."""
    if verbose:
        print(f"[{name}] {stage}: {time.perf_counter() - start:.2f}s", flush=True)


@dataclass(frozen=True)
class SolverResult:
    """What every solver returns.

    A solver is ``solve(config, W0, X, Y, sw, *, rng, xp) -> SolverResult``:
    it minimises the training objective from ``W0`` (a (p, n_heads * d)
    float64 NumPy array) over standardised rows ``X``, scaled targets ``Y``
    and weights ``sw`` summing to one.

    Attributes
    ----------
    W : ndarray of shape (p, n_heads * d)
        The projection found, float64 NumPy.
    n_iter : int
        Iterations (L-BFGS) or epochs (Adam).
    n_fev : int
        Loss and gradient evaluations (L-BFGS) or minibatch steps (Adam).
    loss_curve : list of float
        The training loss after every iteration or epoch.
    at_max_iter : bool
        Whether ``config.max_iter`` ran out before the solver's own criterion
        stopped it (the engine then warns).
    heldout : ndarray of int or None
        The rows of ``X`` held out of the objective (early stopping), or None
        when the solver fitted on every row.
    diversity : float
        The weight of the heads' ambiguity in the objective (the one chosen,
        for ``diversity='auto'``; see ``diversity``).
    width_chosen : bool
        Whether the solver chose the heads' overall kernel width on the
        held-out rows itself (Adam's final factor), so that the readout
        keeps it.
    """

    W: Any
    n_iter: int
    n_fev: int
    loss_curve: list
    at_max_iter: bool
    heldout: Any = None
    diversity: float = 0.0
    width_chosen: bool = False
