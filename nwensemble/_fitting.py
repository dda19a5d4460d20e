"""The fitting engine: a frozen configuration, the solver contract, and the
coarse-to-fine L-BFGS solver. Shared by every estimator (one head is
n_heads=1); the stochastic solver lives in ``_stochastic``."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._backend import device, to_numpy
from nwensemble._loo_loss import loo_loss_and_grad
from nwensemble._nw_predict import heldout_loss
from nwensemble._optim import EarlyStopping, LBFGSRun
from nwensemble._rows import subsample, take_rows
from nwensemble._scaling import power_of_two_scale

# Coarse-to-fine fitting of one head: above twice this many rows, L-BFGS
# first runs on a random subsample of this size, then refines on all rows
# from there. Several heads fit on all rows from the start: from a subsample
# they ended in worse optima, at no saving of time (see the user guide).
_COARSE_SIZE = 1024
# After a subsample stage, the all-rows stage runs at most this many
# iterations: more cost time and gained little (performance notes).
_REFINE_MAX_ITER = 10
# L-BFGS stages on at least this many float64 rows evaluate the loss in
# float32 (the parameters and the fitted model stay float64): faster per
# evaluation, and its rounding is far below ``tol`` (performance notes).
_FLOAT32_LOSS_ROWS = 2048
# The subsample stage stops at this many times ``tol``.
_COARSE_TOL_FACTOR = 10.0
# early_stopping="auto" holds out rows from this many positive-weight samples on
EARLY_STOPPING_MIN_ROWS = 50
# ... and below this many rows per learned parameter: with fewer, fitting
# noise costs more than the held-out rows; with more, they are worth more
# as training data (per-set figures in the performance notes).
_EARLY_STOPPING_ROWS_PER_PARAMETER = 20


@dataclass(frozen=True)
class FitConfig:
    """What a fit of the heads' projections needs to know, as plain values.

    The estimators make one from their parameters (``head_dim``, ``init``,
    ``kernel``, ``max_iter``, ``tol``, ``batch_size``, ``early_stopping``,
    ``validation_fraction``, ``n_iter_no_change``, ``diversity``,
    ``callback``, ``verbose``, see their docstrings); ``name`` prefixes
    verbose lines.
    """

    kernel: Any = "softmax"
    head_dim: Any = None
    init: Any = "auto"
    max_iter: int = 200
    tol: float = 1e-5
    batch_size: Any = "auto"
    early_stopping: Any = "auto"
    validation_fraction: float = 0.1
    n_iter_no_change: int = 10
    diversity: Any = 0.0
    callback: Any = None
    verbose: int = 0
    name: str = "nwensemble"


@dataclass(frozen=True)
class SolverResult:
    """What every solver returns.

    A solver is ``solve(config, W0, X, Y, sw, *, n_heads, as_components,
    rng, xp) -> SolverResult``: it minimises the training objective from
    ``W0`` (a (p, n_heads * d) float64 NumPy array) over standardised rows
    ``X``, scaled targets ``Y`` and weights ``sw`` summing to one.

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
        stopped it (the estimators then warn).
    heldout : ndarray of int or None
        The rows of ``X`` held out of the objective (early stopping), or None
        when the solver fitted on every row.
    diversity : float
        The weight of the heads' ambiguity in the objective (the one chosen,
        for ``diversity='auto'``; see ``_diversity``).
    """

    W: Any
    n_iter: int
    n_fev: int
    loss_curve: list
    at_max_iter: bool
    heldout: Any = None
    diversity: float = 0.0


def scaled_targets(Y, sw, *, xp):
    """Centre ``Y`` and divide by its total weighted standard deviation, so the
    loss reads as a fraction of the target variance."""
    Yc = Y - xp.sum(sw[:, None] * Y, axis=0)
    Yc = Yc / power_of_two_scale(Yc)  # exact; keeps the squares finite
    total = float(xp.sum(sw[:, None] * Yc * Yc))
    return Yc / math.sqrt(total) if total > 0 else Yc


def split_validation(config, Xs, Ys, sw, n_params, *, rng, xp, force=False):
    """Split off the early-stopping rows; return ``(train, val, val_rows)`` or
    ``(all, None, None)``.

    Each part is ``(X, Y, sw)`` with weights renormalised to sum to one;
    ``val_rows`` are the held-out rows' indices (sorted NumPy integers).
    ``force`` holds rows out whatever ``early_stopping`` says (the stochastic
    solver needs them).
    """
    positive = np.flatnonzero(to_numpy(sw) > 0)
    use = True if force else config.early_stopping
    if use == "auto":
        n_pos = positive.shape[0]
        use = (
            EARLY_STOPPING_MIN_ROWS
            <= n_pos
            < _EARLY_STOPPING_ROWS_PER_PARAMETER * n_params
        )
    if not use:
        return (Xs, Ys, sw), None, None
    n_val = int(math.ceil(config.validation_fraction * positive.shape[0]))
    if n_val < 1 or positive.shape[0] - n_val < 2:
        raise ValueError(
            f"early_stopping=True with validation_fraction={config.validation_fraction}"
            f" leaves {positive.shape[0] - n_val} training and {n_val} validation "
            "rows; need at least 2 and 1. Use more samples or early_stopping=False."
        )
    val_rows = np.sort(rng.choice(positive, size=n_val, replace=False))
    mask = np.ones(Xs.shape[0], dtype=bool)
    mask[val_rows] = False
    train = take_rows(Xs, Ys, sw, np.flatnonzero(mask), xp=xp)
    return train, take_rows(Xs, Ys, sw, val_rows, xp=xp), val_rows


def objective(W, X, Y, sw, *, n_heads, diversity, xp, workspace=None, kernel="softmax"):
    """Training objective at ``W`` (a (p, n_heads * d) float64 NumPy array).

    The ensemble's leave-one-out loss less ``diversity`` times the heads'
    ambiguity (see ``loo_loss_and_grad``), computed in the namespace and
    dtype of ``X``. Returns the value and its gradient as float64 NumPy.
    """
    Wx = xp.asarray(W, dtype=X.dtype, device=device(X))
    loss, grad = loo_loss_and_grad(
        Wx,
        X,
        Y,
        sw,
        xp=xp,
        n_heads=n_heads,
        workspace=workspace,
        kernel=kernel,
        diversity=diversity,
    )
    return loss, to_numpy(grad).astype(np.float64)


def fit_lbfgs(config, W0, Xs, Ys, sw, *, n_heads, as_components, rng, xp):
    """Coarse-to-fine L-BFGS from ``W0``, early-stopped on held-out rows.

    A solver (see ``SolverResult``). The objective is ``objective`` with
    ``config.diversity``. ``as_components`` turns a (p, n_heads * d) NumPy
    ``W`` into what ``config.callback`` receives.
    """
    p, k = W0.shape
    if config.max_iter == 0:
        return SolverResult(W0, 0, 0, [], False)
    diversity = config.diversity

    def as_W(theta, like):
        return xp.asarray(theta.reshape(p, k), dtype=like.dtype, device=device(like))

    def callback(theta, n_iter):
        config.callback(as_components(theta.reshape(p, k)), n_iter)

    train, val, val_rows = split_validation(config, Xs, Ys, sw, p * k, rng=rng, xp=xp)
    # One monitor for all stages: the held-out rows judge every iterate, and
    # each stage starts from the best one so far.
    monitor = None
    if val is not None:
        monitor = EarlyStopping(
            lambda theta: heldout_loss(
                as_W(theta, Xs),
                *val,
                *train,
                xp=xp,
                n_heads=n_heads,
                kernel=config.kernel,
            ),
            patience=config.n_iter_no_change,
            tol=config.tol,
        )
        monitor.start(W0.ravel())

    stages = []
    if n_heads == 1 and train[0].shape[0] > 2 * _COARSE_SIZE:
        stages.append(("subsample ", subsample(*train, _COARSE_SIZE, rng=rng, xp=xp)))
    stages.append(("", train))

    W, n_iter, n_fev, curve, at_max_iter = W0, 0, 0, [], False
    for label, (Xst, Yst, swt) in stages:
        workspace = {}
        if Xst.dtype == xp.float64 and Xst.shape[0] >= _FLOAT32_LOSS_ROWS:
            Xst, Yst, swt = (xp.astype(a, xp.float32) for a in (Xst, Yst, swt))

        def fun(theta, Xst=Xst, Yst=Yst, swt=swt, workspace=workspace):
            return objective(
                theta.reshape(p, k),
                Xst,
                Yst,
                swt,
                n_heads=n_heads,
                diversity=diversity,
                xp=xp,
                workspace=workspace,
                kernel=config.kernel,
            )

        run = LBFGSRun(
            fun,
            name=config.name,
            verbose=config.verbose,
            callback=None if config.callback is None else callback,
            monitor=monitor,
            offset=n_iter,
            stage=label,
        )
        if monitor is not None:
            monitor.reset_patience()
        max_iter, tol = config.max_iter, config.tol
        if len(stages) > 1:
            if label:  # the subsample only has to bring W near the optimum
                tol = tol * _COARSE_TOL_FACTOR
            else:
                max_iter = min(max_iter, _REFINE_MAX_ITER)
        result = run.run(W, max_iter=max_iter, tol=tol)
        # The refinement's own cap is not the user's max_iter: nothing to warn
        # about (a ConvergenceWarning would say "increase max_iter").
        at_max_iter = result.status == 1 and max_iter == config.max_iter
        W = result.x if monitor is None else monitor.best_theta
        W = W.reshape(p, k)
        n_iter += result.nit
        n_fev += result.nfev
        curve += run.loss_curve
    return SolverResult(W, n_iter, n_fev, curve, at_max_iter, val_rows)
