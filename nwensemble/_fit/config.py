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
    ``diversity`` (a float or ``'auto'``), ``callback`` (the estimator's
    parameter) with ``single_head`` (whether it receives ``components_``
    of one head, 2-d) and ``name``, which prefixes verbose lines. The
    engine sets the rest for each solver run: ``row_scales`` (whether
    L-BFGS takes each row of ``W`` as a scale times a direction, see
    ``row_scales``), ``hold_out`` (the ``early_stopping.HoldOut`` plan,
    the one reading of ``early_stopping`` and ``validation_fraction``) and
    ``observer`` (the ``IterateObserver`` that solvers report their
    iterates to).
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
    feature_slopes: Any
    diversity: Any
    callback: Optional[Callable]
    verbose: int
    name: str
    single_head: bool = False
    n_members: int = 1
    row_scales: bool = True
    hold_out: Any = None
    observer: Any = None

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
        "feature_slopes",
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


@dataclass(frozen=True)
class IterateObserver:
    """Where the solvers report their iterates: the user's ``callback``,
    called as ``callback(C, n_iter)`` with the projection shaped like
    ``components_`` (in the standardised units it is learned in)."""

    callback: Optional[Callable]
    n_heads: int
    single_head: bool

    @property
    def watching(self):
        """Whether anyone receives the iterates."""
        return self.callback is not None

    def report(self, W, n_iter):
        """Report the (p, n_heads * d) float64 projection after ``n_iter``
        iterations or epochs."""
        if self.callback is None:
            return
        C = W.T if self.single_head else W.T.reshape(self.n_heads, -1, W.shape[0])
        self.callback(C, n_iter)


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
    slopes : FeatureSlopes or None
        The feature slopes the solver learned together with ``W`` (Adam
        with ``feature_slopes``), ``W`` then acting on the rows they map;
        None where it learned none.
    """

    W: Any
    n_iter: int
    n_fev: int
    loss_curve: list
    at_max_iter: bool
    heldout: Any = None
    diversity: float = 0.0
    width_chosen: bool = False
    slopes: Any = None
