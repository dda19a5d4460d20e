"""Stochastic training for large n: Adam on minibatches that attend to each other.

Each step draws ``batch_size`` training rows; every row of the batch queries
the others (leave-one-out), so the batch is both the queries and the sampled
candidate keys, and a step costs O(batch_size^2 d). An epoch has
``n / batch_size`` steps, so it costs time linear in n. All n-sized work and
the Adam state stay in the array's namespace and on its device. A step reads
nothing back from the device (off the host the attention takes the paths
that need no check, see ``_backend.eager_host``): the shuffled order goes to
the device once per epoch, and the epoch's loss, its
held-out loss (for early stopping) and, with a ``callback``, the components
come back once per epoch.

A kernel fitted on batches of b rows sees b / n of the neighbours it will see
at prediction, so its bandwidth is tuned for sparser data. After training,
one factor on the scale of all heads is chosen on held-out rows that attend
to all training rows.

With ``feature_slopes`` the log-slopes of the numeric features' map
(``feature_slopes.JointSlopes``: the coarse map, or with ``'fine'`` the
finer one) are one more parameter of the same steps:
each batch's rows are mapped through them, and the held-out rows are
scored and the final factor chosen on the mapped rows.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math
import time

import numpy as np

# The module, not its names: feature_slopes reads the solvers' row limits.
from nwensemble._fit import feature_slopes
from nwensemble._fit.config import SolverResult
from nwensemble._fit.early_stopping import EarlyStopping, heldout_loss, split_validation
from nwensemble._fit.loo_loss import loo_loss_and_grad
from nwensemble._fit.precision import loss_rows
from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.rows import take_rows

# batch_size="auto": rows per minibatch.
AUTO_BATCH = 1024
# Adam's step, relative to the root-mean-square entry of the initial W, the
# same from every start (the performance notes weigh the time it saves
# against its accuracy).
_LEARNING_RATE = 0.04
_BETAS = (0.9, 0.999)
_EPS = 1e-8
# Held-out rows that choose the final factor on the scale (against all
# training rows) ...
_VALIDATION_ROWS = 1000
# ... and those of them scored after each epoch, the same rows every epoch:
# all of them (the benchmarks page's levers weigh fewer).
_MONITOR_ROWS = 1000
# Exponents of the factors 2^e on W's scale tried first after training.
_SCALE_EXPONENTS = (-1.0, 0.0, 1.0, 2.0, 3.0)


def fit_adam(config, W0, Xs, Ys, sw, *, rng, xp):
    """Adam over minibatch epochs from ``W0``, early-stopped on held-out rows.

    A solver (see ``config.SolverResult``): ``n_iter`` counts epochs and
    ``n_fev`` minibatch steps.
    """
    dev = device(Ys)
    n_heads = config.n_heads
    train, val, val_rows = split_validation(config.hold_out, Xs, Ys, sw, rng=rng, xp=xp)
    Xt, Yt, swt = train
    positive = np.flatnonzero(to_numpy(swt) > 0)
    n = positive.shape[0]
    batch = min(AUTO_BATCH if config.batch_size == "auto" else config.batch_size, n)
    # With feature slopes, the slopes' knots on the training rows as they are.
    slopes = None
    if config.feature_slopes:
        slopes = feature_slopes.JointSlopes.on(
            Xt, swt, xp=xp, feature_slopes=config.feature_slopes
        )
    # Many float64 rows: the losses in float32, W and Adam's state as they are.
    train = Xt, Yt, swt = loss_rows(Xt, Yt, swt, xp=xp, n_rows=n)
    val = loss_rows(*_subset(val, _VALIDATION_ROWS, rng=rng, xp=xp), xp=xp, n_rows=n)
    monitored = _subset(val, _MONITOR_ROWS, rng=rng, xp=xp)
    W = xp.asarray(W0, dtype=Xs.dtype, device=dev)
    if config.max_iter == 0:
        return SolverResult(W0, 0, 0, [], False)

    # The parameters: W, then with slopes their logarithms. Each takes
    # steps of _LEARNING_RATE relative to its scale: W's root-mean-square
    # entry; a log-slope's step is a relative change of the slope.
    params = [W] if slopes is None else [W, slopes.start()]
    rates = [_LEARNING_RATE * math.sqrt(float(np.mean(W0**2))), _LEARNING_RATE]
    m = [xp.zeros_like(a) for a in params]
    v = [xp.zeros_like(a) for a in params]
    b1, b2 = _BETAS

    def mapped(params, X):
        return X if slopes is None else slopes.design(params[1], X)

    # early_stopping=False: no epoch is scored on the held-out rows (they
    # only set the scale below); the fit stops when the training loss stops
    # improving, as scikit-learn's MLP does, and keeps the last epoch.
    scored = config.hold_out.scored
    Xm, Ym, swm = monitored
    monitor = EarlyStopping(
        lambda params: (
            heldout_loss(
                params[0],
                mapped(params, Xm),
                Ym,
                swm,
                mapped(params, Xt),
                Yt,
                swt,
                kernel=config.kernel,
                n_heads=n_heads,
            )
            if scored
            else curve[-1]
        ),
        patience=config.n_iter_no_change,
        tol=config.tol,
        noisy=True,
    )
    monitor.start(list(params), score=False)
    curve, n_steps, start = [], 0, time.perf_counter()
    # The loss's settings and its buffers, the same for every step.
    options = dict(
        kernel=config.kernel,
        n_heads=n_heads,
        diversity=config.diversity,
        workspace={},
    )
    at_max_iter = True
    epochs = 0
    for epoch in range(config.max_iter):
        order = xp.asarray(positive[rng.permutation(n)], device=dev)
        epoch_loss = None
        n_batches = 0
        for s in range(0, n - 1, batch):
            idx = order[s : min(s + batch, n)]
            if idx.shape[0] < 2:
                continue
            swb = xp.take(swt, idx, axis=0)
            rows = (Xt.take(idx), xp.take(Yt, idx, axis=0), swb / xp.sum(swb))
            if slopes is None:
                loss, grad = loo_loss_and_grad(
                    xp.astype(W, Xt.dtype), *rows, xp=xp, loss_as_array=True, **options
                )
                grads = [grad]
            else:
                loss, *grads = slopes.loss_and_grads(params, *rows, **options)
            n_steps += 1
            for k, grad in enumerate(grads):
                grad = xp.astype(grad, params[k].dtype)
                m[k] = b1 * m[k] + (1.0 - b1) * grad
                v[k] = b2 * v[k] + (1.0 - b2) * grad * grad
                m_hat = m[k] / (1.0 - b1**n_steps)
                v_hat = v[k] / (1.0 - b2**n_steps)
                params[k] = params[k] - rates[k] * m_hat / (xp.sqrt(v_hat) + _EPS)
            if slopes is not None:
                params[1] = slopes.bounded(params[1])
            W = params[0]
            epoch_loss = loss if epoch_loss is None else epoch_loss + loss
            n_batches += 1
        epochs = epoch + 1
        curve.append(float(epoch_loss) / max(n_batches, 1))
        stop = monitor.update(list(params))
        if config.verbose:
            elapsed = time.perf_counter() - start
            per_epoch = elapsed / epochs
            # At most max_iter epochs; early stopping, forecast, sooner.
            forecast = monitor.epochs_left(config.max_iter - epochs)
            guess = "" if forecast is None else f"left~{per_epoch * forecast:.0f}s "
            held = f"val={monitor.last:.6e}  " if scored else ""
            print(
                f"[{config.name}] epoch {epochs:4d}/{config.max_iter}  "
                f"loss={curve[-1]:.6e}  {held}elapsed={elapsed:.2f}s  {guess}"
                f"(left<={per_epoch * (config.max_iter - epochs):.0f}s)",
                flush=True,
            )
        if config.observer.watching:
            config.observer.report(to_numpy(W).astype(np.float64), epochs)
        if stop:
            at_max_iter = False
            break
    best = monitor.best_theta if scored else params
    W = _calibrate_scale(
        best[0],
        (mapped(best, val[0]), *val[1:]),
        (mapped(best, Xt), Yt, swt),
        n_heads=n_heads,
        kernel=config.kernel,
    )
    W = to_numpy(W).astype(np.float64)
    return SolverResult(
        W,
        epochs,
        n_steps,
        curve,
        at_max_iter,
        val_rows,
        width_chosen=True,
        slopes=None if slopes is None else slopes.fitted(best[1]),
    )


def _subset(val, size, *, rng, xp):
    """At most ``size`` of the held-out rows ``val``, drawn at random,
    weights renormalised."""
    Xv, Yv, swv = val
    if Xv.shape[0] <= size:
        return Xv, Yv, swv
    rows = np.sort(rng.choice(Xv.shape[0], size, replace=False))
    return take_rows(Xv, Yv, swv, rows, xp=xp)


def _calibrate_scale(W, val, train, *, n_heads, kernel):
    """``W`` times the factor ``2^e`` (``e`` in [-1, 3], a multiple of 1/4)
    with the least held-out loss when the held-out rows attend to all
    training rows.

    Each loss is a pass over all training rows, so ``e`` is searched from
    whole powers of two in halving steps around the best: 9 passes instead
    of the whole grid's 17, which finds the grid's best when the loss has a
    single minimum in the scale.
    """
    losses = {}

    def loss(e):
        if e not in losses:
            value = heldout_loss(
                W * 2.0**e, *val, *train, kernel=kernel, n_heads=n_heads
            )
            losses[e] = value if np.isfinite(value) else np.inf
        return losses[e]

    best = min(_SCALE_EXPONENTS, key=loss)
    for step in (0.5, 0.25):
        candidates = [best + step * s for s in (-1, 0, 1)]
        best = min((e for e in candidates if -1 <= e <= 3), key=loss)
    return W * 2.0**best
