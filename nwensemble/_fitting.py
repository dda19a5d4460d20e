"""Learning the heads' projections: start, bandwidth search, coarse-to-fine
L-BFGS with early stopping. Shared by every estimator (one head is n_heads=1)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np
from scipy.optimize import minimize

from nwensemble._allocation import theory_head_dim
from nwensemble._backend import device, to_numpy
from nwensemble._nw_math import heldout_loss, loo_loss_and_grad, loo_loss_and_grad_z
from nwensemble._optim import EarlyStopping, LBFGSRun
from nwensemble._scaling import power_of_two_scale
from nwensemble.diagnostics._subspaces import diversity_penalty_and_grad

# Coarse-to-fine fitting of one head: above twice this many rows, L-BFGS
# first runs on a random subsample of this size, then refines on all rows
# from there. Several heads fit on all rows from the start: from a subsample
# they ended in worse optima, at no saving of time (see the user guide).
_COARSE_SIZE = 1024
# After a subsample stage, the all-rows stage runs at most this many
# iterations. 5-fold CV on abalone (3340 training rows), 30 against 10:
# NWAttentionRegressor RMSE 2.1475 / 2.1423 in 2.26 / 1.54 s,
# MultiHeadNWRegressor 2.2110 / 2.2227 in 9.8 / 5.2 s; Friedman #1 at
# n = 4000: 1.2049 / 1.2040 in 1.02 / 0.80 s.
_REFINE_MAX_ITER = 10
# L-BFGS stages on at least this many float64 rows evaluate the loss in
# float32 (the parameters and the fitted model stay float64). At n = 4000 an
# evaluation took 22 ms instead of 61 ms, with the same iterations and the
# same test RMSE on Friedman #1 (benchmarks/bench_single_head.py); its
# rounding (~1e-7 of the loss) is far below ``tol``.
_FLOAT32_LOSS_ROWS = 2048
# The subsample stage stops at this many times ``tol``.
_COARSE_TOL_FACTOR = 10.0
# Rows used to pick the starting bandwidth.
_SCALE_SEARCH_SIZE = 512
# Candidate inverse bandwidths, in units of 1 / (typical projected spread).
_SCALE_GRID = 2.0 ** np.arange(-2.0, 6.5, 0.5)
# init='identity' (one head as wide as the input) then fits each feature's
# scale on its own, by L-BFGS on the log-scales: one scale for all features
# lands where the steepest feature wants it, and every other feature then
# starts so narrow that each row attends to one neighbour and the
# projection's gradient vanishes. A coarse start (few iterations), which the
# full fit refines; scales may go _DIRECTION_RANGE (in log units) below the
# grid's widest, enough to all but drop a feature. Random directions and
# principal axes keep one scale per head (their own scales did worse; see
# the user guide).
_DIRECTION_MAX_ITER = 10
_DIRECTION_RANGE = 3.0
# early_stopping="auto" holds out rows from this many positive-weight samples on.
_EARLY_STOPPING_MIN_ROWS = 50
# ... and below this many rows per learned parameter. Measured with 5-fold CV,
# early stopping on against off, one full-rank head (rows per parameter in
# brackets): it lowers RMSE on diabetes (4), auto-mpg (8, 6 %), yacht (9,
# 0.4 %), energy (12, 1.7 %), wine (13, 7 %) and Friedman #1 n=1000 (10,
# 0.8 %); it costs on concrete (16, 0.5 %), Friedman #1 n=2000 (20, 1 %),
# abalone (42, -0.2 %, a gain) and airfoil (60, 5 %).
_EARLY_STOPPING_ROWS_PER_PARAMETER = 20


def default_head_dim(n_samples, n_features, n_heads):
    """``head_dim=None``: all features for one head; for several, the
    allocation rule's ``floor(log(n / 10))`` (smoothness 1), within [1, p].

    Sharing the features out instead (``p // H``) left heads of one or two
    dimensions on the low-dimensional tabular sets. 5-fold CV RMSE of four
    heads (``init='auto'``, random directions), geometric mean over
    ``benchmarks/tabular.py``'s seven sets and folds relative to
    HistGradientBoosting: 1.218 with ``p // H``, 1.048 with the rule.
    """
    if n_heads == 1:
        return n_features
    return theory_head_dim(n_samples, 1.0, n_features)


def scaled_targets(Y, sw, *, xp):
    """Centre ``Y`` and divide by its total weighted standard deviation, so the
    loss reads as a fraction of the target variance."""
    Yc = Y - xp.sum(sw[:, None] * Y, axis=0)
    Yc = Yc / power_of_two_scale(Yc)  # exact; keeps the squares finite
    total = float(xp.sum(sw[:, None] * Yc * Yc))
    return Yc / math.sqrt(total) if total > 0 else Yc


def initial_projection(est, previous, Xs, Ys, sw, scale_np, *, n_heads, rng, xp):
    """Starting ``W`` (p, n_heads * d) as a float64 NumPy array, in model units.

    ``previous`` is the last fit's ``W`` (warm start); ``scale_np`` turns an
    ``init`` array given in the units of ``components_`` into model units.

    String inits give every head its own block of directions: disjoint while
    ``n_heads * head_dim <= n_features``, overlapping after that (see
    ``_head_blocks``). Each head's bandwidth is then searched on its own.
    """
    n, p = Xs.shape
    if previous is not None:
        prev = to_numpy(previous).astype(np.float64)
        if prev.shape[0] != p:
            raise ValueError(
                f"warm_start=True needs the {prev.shape[0]} features of the "
                f"previous fit; got {p}. Set warm_start=False to start afresh."
            )
        return prev
    init = est.init
    if not isinstance(init, str):
        return scale_np[:, None] * _init_array(est, init, n_heads, p).T
    d = default_head_dim(n, p, n_heads) if est.head_dim is None else est.head_dim
    if d > p:
        raise ValueError(
            f"head_dim={d} is larger than n_features = {p}; use head_dim <= n_features."
        )
    if init == "auto":
        if n_heads > 1:
            init = "random"
        else:
            init = "pca" if d < p else "identity"
    per_direction = init == "identity"
    k = n_heads * d
    if init == "identity":
        W = np.eye(p)[:, _head_blocks(p, n_heads, d)]
    elif init == "random":
        n_blocks = -(-k // p)  # sets of p orthonormal directions needed
        W = np.concatenate(
            [_random_orthogonal(p, rng) for _ in range(n_blocks)], axis=1
        )[:, :k]
    else:  # pca
        sw_np = to_numpy(sw).astype(np.float64)
        Xs_np = to_numpy(Xs).astype(np.float64)
        cov = (Xs_np * sw_np[:, None]).T @ Xs_np
        _, vecs = np.linalg.eigh(cov)
        W = vecs[:, ::-1][:, _head_blocks(p, n_heads, d)]
    return _search_scales(
        W,
        n_heads,
        Xs,
        Ys,
        sw,
        kernel=est.kernel,
        per_direction=per_direction,
        rng=rng,
        xp=xp,
    )


def _head_blocks(p, n_heads, d):
    """Column indices of a fixed basis for each head, side by side.

    While ``H d <= p`` head ``h`` takes columns ``h d`` to ``h d + d - 1``
    (the leading principal axes for ``'pca'``). Beyond that head ``h`` takes
    ``d`` consecutive columns, cyclically, from ``floor(h p / H)``: each
    column serves about ``H d / p`` heads and no two heads share a block
    unless ``d = p``. Blocks continued from the last one would repeat: with
    p = 8, four heads of 4 dimensions would be two pairs of identical heads,
    which the symmetric loss keeps identical.
    """
    if n_heads * d <= p:
        return list(range(n_heads * d))
    return [(h * p // n_heads + j) % p for h in range(n_heads) for j in range(d)]


def _init_array(est, init, n_heads, p):
    """A user's ``init`` array as ``(n_heads * d, p)``, after checking its shape."""
    init = np.asarray(to_numpy(init) if hasattr(init, "shape") else init)
    init = init.astype(np.float64)
    expected_ndim = 2 if n_heads == 1 and init.ndim == 2 else 3
    d = est.head_dim if est.head_dim is not None else init.shape[-2]
    shape = (d, p) if expected_ndim == 2 else (n_heads, d, p)
    if init.shape != shape:
        names = (
            "(head_dim, n_features)"
            if expected_ndim == 2
            else ("(n_heads, head_dim, n_features)")
        )
        raise ValueError(f"init must have shape {names} = {shape}; got {init.shape}.")
    if not np.all(np.isfinite(init)):
        raise ValueError("init contains NaN or infinity.")
    return init.reshape(-1, p)


def _random_orthogonal(p, rng):
    """A random p x p orthogonal matrix (Haar distributed)."""
    Q, R = np.linalg.qr(rng.standard_normal((p, p)))
    return Q * np.sign(np.diag(R))


def _search_scales(W, n_heads, Xs, Ys, sw, *, kernel, per_direction, rng, xp):
    """Scale each head's directions to its lowest leave-one-out loss.

    Scales are tried on a grid relative to the typical spread of the head's
    projected rows, on one subsample of at most ``_SCALE_SEARCH_SIZE`` rows.
    With ``per_direction``, each direction's scale is then fitted on its
    own (``_fit_direction_scales``), so that directions along which the
    target varies fast start narrow and the others wide; the fitted scales
    replace the common one where they lower the loss.
    """
    Xs, Ys, sw = subsample(Xs, Ys, sw, _SCALE_SEARCH_SIZE, rng=rng, xp=xp)
    d = W.shape[1] // n_heads
    W = W.copy()
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        Wx = xp.asarray(W[:, cols], dtype=Xs.dtype, device=device(Xs))
        Z = Xs @ Wx
        Zc = Z - xp.sum(sw[:, None] * Z, axis=0)
        spread = float(xp.sum(sw[:, None] * Zc * Zc)) / d
        unit = W[:, cols] * (1.0 / math.sqrt(spread) if spread > 0 else 1.0)
        unit_x = xp.asarray(unit, dtype=Xs.dtype, device=device(Xs))
        scale, loss = _best_scale(unit_x, Xs, Ys, sw, _SCALE_GRID, kernel=kernel, xp=xp)
        W[:, cols] = unit * scale
        if per_direction and d > 1:
            scales, fitted_loss = _fit_direction_scales(
                unit, Xs, Ys, sw, kernel=kernel, xp=xp
            )
            if fitted_loss < loss:
                W[:, cols] = unit * scales[None, :]
    return W


def _fit_direction_scales(W, Xs, Ys, sw, *, kernel, xp):
    """Scales for the columns of one head's ``W`` (p, d), fitted by L-BFGS on
    their logarithms; returns them and their leave-one-out loss.

    They start at the widest scale of ``_SCALE_GRID``, where every row
    attends to many others and the gradient says which directions to
    narrow (from a narrow start it vanishes), and stay between
    ``_DIRECTION_RANGE`` below that and the grid's narrowest.

    The directions stay fixed, so one evaluation is a leave-one-out pass over
    ``Z0 * c`` with ``Z0 = Xs @ W`` and its gradient ``dloss / dlog c_j =
    sum_i Z_ij (dloss / dZ)_ij``: its cost does not grow with the number of
    features beyond the one product ``Xs @ W``.
    """
    Wx = xp.asarray(W, dtype=Xs.dtype, device=device(Xs))
    Z0 = Xs @ Wx
    workspace = {}
    d = W.shape[1]

    def fun(log_scale):
        c = xp.asarray(np.exp(log_scale), dtype=Xs.dtype, device=device(Xs))
        Z = Z0 * c[None, :]
        loss, grad_Z = loo_loss_and_grad_z(
            Z, Ys, sw, xp=xp, workspace=workspace, kernel=kernel
        )
        grad = to_numpy(xp.sum(Z * grad_Z, axis=0)).astype(np.float64)
        if not (math.isfinite(loss) and np.all(np.isfinite(grad))):
            return math.inf, np.zeros(d)
        return loss, grad

    widest, narrowest = math.log(_SCALE_GRID[0]), math.log(_SCALE_GRID[-1])
    result = minimize(
        fun,
        np.full(d, widest),
        jac=True,
        method="L-BFGS-B",
        bounds=[(widest - _DIRECTION_RANGE, narrowest)] * d,
        options={"maxiter": _DIRECTION_MAX_ITER},
    )
    loss = float(result.fun) if math.isfinite(result.fun) else math.inf
    return np.exp(result.x), loss


def _best_scale(W, Xs, Ys, sw, grid, *, kernel, xp):
    """The factor of ``grid`` that gives ``W`` the lowest leave-one-out loss,
    and that loss."""
    workspace = {}
    losses = [
        _loo_value(W * float(g), Xs, Ys, sw, kernel=kernel, workspace=workspace, xp=xp)
        for g in grid
    ]
    best = int(np.argmin(losses))
    return float(grid[best]), losses[best]


def _loo_value(W, Xs, Ys, sw, *, kernel, workspace, xp):
    """The leave-one-out loss at ``W`` (an array of ``Xs``'s namespace); inf
    where it is not finite."""
    value = loo_loss_and_grad(
        W, Xs, Ys, sw, xp=xp, return_grad=False, workspace=workspace, kernel=kernel
    )[0]
    return value if math.isfinite(value) else math.inf


def subsample(Xs, Ys, sw, size, *, rng, xp):
    """At most ``size`` rows with positive weight, weights renormalised."""
    positive = np.flatnonzero(to_numpy(sw) > 0)
    if positive.shape[0] <= size and positive.shape[0] == Xs.shape[0]:
        return Xs, Ys, sw
    rows = np.sort(
        rng.choice(positive, size=min(size, positive.shape[0]), replace=False)
    )
    idx = xp.asarray(rows, device=device(Xs))
    sw_sub = xp.take(sw, idx, axis=0)
    return xp.take(Xs, idx, axis=0), xp.take(Ys, idx, axis=0), sw_sub / xp.sum(sw_sub)


def _split_validation(est, Xs, Ys, sw, n_params, *, rng, xp, force=False):
    """Split off the early-stopping rows; return ``(train, val)`` or ``(all, None)``.

    Each part is ``(X, Y, sw)`` with weights renormalised to sum to one.
    ``force`` holds rows out whatever ``early_stopping`` says (the stochastic
    solver needs them).
    """
    positive = np.flatnonzero(to_numpy(sw) > 0)
    use = True if force else est.early_stopping
    if use == "auto":
        n_pos = positive.shape[0]
        use = (
            _EARLY_STOPPING_MIN_ROWS
            <= n_pos
            < _EARLY_STOPPING_ROWS_PER_PARAMETER * n_params
        )
    if not use:
        return (Xs, Ys, sw), None
    n_val = int(math.ceil(est.validation_fraction * positive.shape[0]))
    if n_val < 1 or positive.shape[0] - n_val < 2:
        raise ValueError(
            f"early_stopping=True with validation_fraction={est.validation_fraction}"
            f" leaves {positive.shape[0] - n_val} training and {n_val} validation "
            "rows; need at least 2 and 1. Use more samples or early_stopping=False."
        )
    val_rows = rng.choice(positive, size=n_val, replace=False)
    mask = np.ones(Xs.shape[0], dtype=bool)
    mask[val_rows] = False
    parts = []
    for rows in (np.flatnonzero(mask), np.sort(val_rows)):
        idx = xp.asarray(rows, device=device(Xs))
        w = xp.take(sw, idx, axis=0)
        parts.append(
            (xp.take(Xs, idx, axis=0), xp.take(Ys, idx, axis=0), w / xp.sum(w))
        )
    return parts[0], parts[1]


def objective(W, X, Y, sw, *, n_heads, diversity, xp, workspace=None, kernel="softmax"):
    """Training objective at ``W`` (a (p, n_heads * d) float64 NumPy array).

    The ensemble's leave-one-out loss (computed in the namespace and dtype of
    ``X``) plus ``diversity * sum_{h<g} ||U_h^T U_g||_F^2`` (computed on the
    host: it involves only the p x (n_heads * d) parameters). Returns the
    value and its gradient as float64 NumPy.
    """
    Wx = xp.asarray(W, dtype=X.dtype, device=device(X))
    loss, grad = loo_loss_and_grad(
        Wx, X, Y, sw, xp=xp, n_heads=n_heads, workspace=workspace, kernel=kernel
    )
    grad = to_numpy(grad).astype(np.float64)
    if diversity > 0 and n_heads > 1:
        penalty, penalty_grad = diversity_penalty_and_grad(W, n_heads)
        loss += diversity * float(penalty)
        grad = grad + diversity * penalty_grad
    return loss, grad


def fit_projection(est, W0, Xs, Ys, sw, *, n_heads, diversity, as_components, rng, xp):
    """Coarse-to-fine L-BFGS from ``W0``, early-stopped on held-out rows.

    The objective is the ensemble's leave-one-out loss plus
    ``diversity * sum_{h<g} ||U_h^T U_g||_F^2``. ``as_components`` turns a
    (p, n_heads * d) NumPy ``W`` into what ``est.callback`` receives.

    Returns ``W, n_iter, n_fev, loss_curve, last_result`` (``last_result`` is
    None when ``max_iter == 0``).
    """
    p, k = W0.shape
    if est.max_iter == 0:
        return W0, 0, 0, [], None

    def as_W(theta, like):
        return xp.asarray(theta.reshape(p, k), dtype=like.dtype, device=device(like))

    def callback(theta, n_iter):
        est.callback(as_components(theta.reshape(p, k)), n_iter)

    train, val = _split_validation(est, Xs, Ys, sw, p * k, rng=rng, xp=xp)
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
                kernel=est.kernel,
            ),
            patience=est.n_iter_no_change,
            tol=est.tol,
        )
        monitor.start(W0.ravel())

    stages = []
    if n_heads == 1 and train[0].shape[0] > 2 * _COARSE_SIZE:
        stages.append(("subsample ", subsample(*train, _COARSE_SIZE, rng=rng, xp=xp)))
    stages.append(("", train))

    W, n_iter, n_fev, curve, result = W0, 0, 0, [], None
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
                kernel=est.kernel,
            )

        run = LBFGSRun(
            fun,
            name=type(est).__name__,
            verbose=est.verbose,
            callback=None if est.callback is None else callback,
            monitor=monitor,
            offset=n_iter,
            stage=label,
        )
        if monitor is not None:
            monitor.reset_patience()
        max_iter, tol = est.max_iter, est.tol
        if len(stages) > 1:
            if label:  # the subsample only has to bring W near the optimum
                tol = tol * _COARSE_TOL_FACTOR
            else:
                max_iter = min(max_iter, _REFINE_MAX_ITER)
        result = run.run(W, max_iter=max_iter, tol=tol)
        if result.status == 1 and max_iter < est.max_iter:
            # The refinement's own cap, not the user's max_iter: nothing to
            # warn about (a ConvergenceWarning would say "increase max_iter").
            result.status = 0
        W = result.x if monitor is None else monitor.best_theta
        W = W.reshape(p, k)
        n_iter += result.nit
        n_fev += result.nfev
        curve += run.loss_curve
    return W, n_iter, n_fev, curve, result
