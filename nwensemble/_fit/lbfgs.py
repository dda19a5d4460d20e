"""The coarse-to-fine L-BFGS solver (see ``config.SolverResult``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._fit.config import SolverResult
from nwensemble._fit.early_stopping import EarlyStopping, heldout_loss, split_validation
from nwensemble._fit.lbfgs_run import LBFGSRun
from nwensemble._fit.loo_loss import loo_loss_and_grad
from nwensemble._fit.precision import loss_rows
from nwensemble._fit.row_scales import parameters
from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.rows import subsample

# Coarse-to-fine fitting of one head: above twice this many rows, L-BFGS
# first runs on a random subsample of this size, then refines on all rows
# from there. Several heads fit on all rows from the start: a subsample's
# optimum is a worse start for them (the user guide has the measurement).
COARSE_SIZE = 1024
# After a subsample stage, the all-rows stage runs at most this many
# iterations: more cost time and gained little (performance notes).
_REFINE_MAX_ITER = 10
# The subsample stage stops at this many times ``tol``.
_COARSE_TOL_FACTOR = 10.0


def objective(W, X, Y, sw, *, config, xp, workspace=None):
    """Training objective at ``W`` (a (p, n_heads * d) float64 NumPy array).

    The ensemble's leave-one-out loss less ``config.diversity`` times the
    heads' ambiguity (see ``loo_loss_and_grad``), computed in the namespace
    and dtype of ``X``. Returns the value and its gradient as float64 NumPy.
    """
    Wx = xp.asarray(W, dtype=X.dtype, device=device(Y))
    loss, grad = loo_loss_and_grad(
        Wx,
        X,
        Y,
        sw,
        xp=xp,
        kernel=config.kernel,
        n_heads=config.n_heads,
        workspace=workspace,
        diversity=config.diversity,
    )
    return loss, to_numpy(grad).astype(np.float64)


def fit_lbfgs(config, W0, Xs, Ys, sw, *, rng, xp):
    """Coarse-to-fine L-BFGS from ``W0``, early-stopped on held-out rows.

    A solver (see ``SolverResult``). The objective is ``objective`` with
    ``config.diversity``, minimised over each row of ``W`` as a scale times
    a direction (``row_scales.RowScales``) when ``config.row_scales``. One
    head on more than ``2 * COARSE_SIZE`` rows is fitted on a subsample
    first, then refined on all rows, except where ``config.feature_slopes``
    continues it (``feature_slopes.continue_with_slopes``) on the rows
    ``Xs`` (a ``Design``) with numeric features: that continuation is then
    the refinement.
    """
    if config.max_iter == 0:
        return SolverResult(W0, 0, 0, [], False)
    params = parameters(W0, config.row_scales)

    def as_W(theta):
        return xp.asarray(params.projection(theta), dtype=Xs.dtype, device=device(Ys))

    train, val, val_rows = split_validation(config.hold_out, Xs, Ys, sw, rng=rng, xp=xp)
    # One monitor for all stages: the held-out rows judge every iterate, and
    # each stage starts from the best one so far.
    monitor = None
    if val is not None:
        monitor = EarlyStopping(
            lambda theta: heldout_loss(
                as_W(theta),
                *val,
                *train,
                kernel=config.kernel,
                n_heads=config.n_heads,
            ),
            patience=config.n_iter_no_change,
            tol=config.tol,
        )
        monitor.start(params.start)

    stages = []
    coarse = config.n_heads == 1 and train[0].shape[0] > 2 * COARSE_SIZE
    if coarse:
        stages.append(("subsample ", subsample(*train, COARSE_SIZE, rng=rng, xp=xp)))
    # A member that learns feature slopes (of numeric features) refines on
    # all rows in their continuation, the projection and the slopes fitted
    # together from the subsample's fit: a refinement without the slopes
    # first would be a phase the continuation repeats.
    if not (coarse and config.feature_slopes and Xs.numeric.shape[1] > 0):
        stages.append(("", train))

    theta, n_iter, n_fev, curve, at_max_iter = params.start, 0, 0, [], False
    for label, (Xst, Yst, swt) in stages:
        workspace = {}
        Xst, Yst, swt = loss_rows(Xst, Yst, swt, xp=xp)

        def fun(theta, Xst=Xst, Yst=Yst, swt=swt, workspace=workspace):
            loss, grad = objective(
                params.projection(theta),
                Xst,
                Yst,
                swt,
                config=config,
                xp=xp,
                workspace=workspace,
            )
            return loss, params.gradient(theta, grad)

        run = LBFGSRun(
            fun,
            name=config.name,
            verbose=config.verbose,
            observer=config.observer,
            projection=params.projection,
            monitor=monitor,
            offset=n_iter,
            stage=label,
        )
        if monitor is not None:
            monitor.reset_patience()
        max_iter, tol = config.max_iter, config.tol
        if label:  # the subsample only has to bring W near the optimum
            tol = tol * _COARSE_TOL_FACTOR
        elif len(stages) > 1:
            max_iter = min(max_iter, _REFINE_MAX_ITER)
        result = run.run(theta, max_iter=max_iter, tol=tol)
        # The refinement's own cap is not the user's max_iter: nothing to warn
        # about (a ConvergenceWarning would say "increase max_iter").
        at_max_iter = result.status == 1 and max_iter == config.max_iter
        theta = result.x if monitor is None else monitor.best_theta
        n_iter += result.nit
        n_fev += result.nfev
        curve += run.loss_curve
    W = params.projection(theta)
    return SolverResult(W, n_iter, n_fev, curve, at_max_iter, val_rows)
