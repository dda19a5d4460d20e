"""Where the heads' projections start: directions (principal axes, features
or random), then each head's bandwidth searched by leave-one-out loss."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import hashlib
import math
from dataclasses import dataclass

import array_api_compat
import numpy as np
from scipy.optimize import minimize

from nwensemble._fit.allocation import theory_head_dim
from nwensemble._fit.early_stopping import heldout_loss
from nwensemble._fit.loo_loss import loo_loss_and_grad, loo_loss_and_grad_z
from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.design import numbers_design
from nwensemble._shared.rows import subsample, take_rows

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
# grid's widest, enough to all but drop a feature, and at most
# _DIRECTION_NARROWEST times narrower than the head's best common scale:
# L-BFGS-B's first steps can land a direction at the grid's narrowest, where
# each row attends to its nearest neighbour alone, the gradient vanishes and
# the full fit stalls (narrowing further, where it pays, is the full fit's
# job). Random directions and principal axes keep one scale per head (why:
# the user guide).
_DIRECTION_MAX_ITER = 10
_DIRECTION_RANGE = 3.0
_DIRECTION_NARROWEST = 8.0
# The per-direction scales are kept only where they also predict rows they
# were not fitted to better than the common scale, by cross-fitting on the
# subsample in this many folds (each start then fitted on three quarters of
# it; why not halves: the benchmarks page's levers).
_CROSS_FIT_FOLDS = 4
# Whether the check stops after its first two folds when they agree on which
# start predicted their rows better (the verdict of all four in nearly every
# check, at half the scores); False takes all four always, for comparisons
# (the levers' bench_check_folds.py).
_TWO_AGREEING_FOLDS_DECIDE = True
# Heads that start with the same metric are nudged apart by about this much
# (``_nudged_repeats``).
_REPEAT_NUDGE = 0.3
# A spread below this share of the rows' second moment is rounding noise.
_CONSTANT_SPREAD = 1e-20


def default_head_dim(n_samples, n_features, n_heads):
    """``head_dim=None``: all features for one head; for several, the
    allocation rule's ``floor(log(n / 10))`` (smoothness 1), within [1, p].

    Sharing the features out instead (``p // H``) would leave heads of one
    or two dimensions on low-dimensional tables (the user guide's
    performance notes weigh it).
    """
    if n_heads == 1:
        return n_features
    return theory_head_dim(n_samples, 1.0, n_features)


@dataclass(frozen=True)
class Start:
    """Where the heads' projections start.

    Attributes
    ----------
    W : ndarray of shape (p, n_heads * d)
        The starting projection, float64, in model units.
    feature_scales : bool
        Whether every head starts with a scale fitted per feature: its
        directions are features (``'identity'``) and their own scales were
        kept (``_search_scales``). Such a start has done what L-BFGS's row
        scales do; any other (one common scale, principal axes, random
        directions, a warm start, an ``init`` array) takes them.
    """

    W: np.ndarray
    feature_scales: bool


def initial_projection(
    config, previous, Xs, Ys, sw, scale_np, *, rng, xp, searches=None
):
    """The heads' ``Start``: ``W`` (p, n_heads * d), float64 NumPy, in model
    units, and whether it fitted a scale per feature.

    ``previous`` is the last fit's ``W`` (warm start); ``scale_np`` turns an
    ``init`` array given in the units of ``components_`` into model units;
    ``searches`` (a ``ScaleSearches`` or None) keeps the scale searches for
    the fit's next member.

    String inits give every head its own block of directions: disjoint while
    ``n_heads * head_dim <= n_features``, overlapping after that (see
    ``_head_blocks``). Each head's bandwidth is then searched on its own.
    """
    n, p = Xs.shape
    n_heads = config.n_heads
    if previous is not None:
        prev = to_numpy(previous).astype(np.float64)
        if prev.shape[0] != p:
            raise ValueError(
                f"warm_start=True needs the {prev.shape[0]} features of the "
                f"previous fit; got {p}. Set warm_start=False to start afresh."
            )
        return Start(prev, feature_scales=False)
    if not isinstance(config.init, str):
        init_W = _init_array(config.head_dim, config.init, n_heads, p).T
        return Start(scale_np[:, None] * init_W, feature_scales=False)
    d = default_head_dim(n, p, n_heads) if config.head_dim is None else config.head_dim
    if d > p:
        raise ValueError(
            f"head_dim={d} is larger than n_features = {p}; use head_dim <= n_features."
        )
    init = config.init
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
    W, feature_scales = _search_scales(
        W,
        n_heads,
        Xs,
        Ys,
        sw,
        kernel=config.kernel,
        per_direction=per_direction,
        rng=rng,
        xp=xp,
        searches=searches,
    )
    return Start(_nudged_repeats(W, n_heads, rng=rng), feature_scales)


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


def _nudged_repeats(W, n_heads, *, rng):
    """``W`` (p, n_heads * d) with each head whose metric ``W_h W_h^T``
    repeats an earlier head's multiplied by ``I + _REPEAT_NUDGE * G / (2
    sqrt(p))`` (``G`` standard normal, p x p): turned and stretched by
    about ``_REPEAT_NUDGE`` (the size of ``G``'s largest singular value is
    about ``2 sqrt(p)``).

    Heads as wide as the input (``d = p``) start with the same metric
    whatever their directions (for ``'random'``, an isotropic one), and the
    loss, symmetric in the heads, keeps identical heads identical: one
    head at several heads' cost. A rotation alone leaves an isotropic
    metric as it is; a nudge moves any metric a little, so each head keeps
    most of the start's fitted scales and the fit can move them apart.
    """
    p = W.shape[0]
    d = W.shape[1] // n_heads
    metrics = []
    W = W.copy()
    for h in range(n_heads):
        block = W[:, h * d : (h + 1) * d]
        metric = block @ block.T
        size = np.max(np.abs(metric))
        if any(np.max(np.abs(metric - m)) <= 1e-9 * size for m in metrics):
            G = rng.standard_normal((p, p))
            nudge = np.eye(p) + _REPEAT_NUDGE * G / (2.0 * math.sqrt(p))
            W[:, h * d : (h + 1) * d] = nudge @ block
        metrics.append(metric)
    return W


def _init_array(head_dim, init, n_heads, p):
    """A user's ``init`` array as ``(n_heads * d, p)``, after checking its shape."""
    init = np.asarray(to_numpy(init) if hasattr(init, "shape") else init)
    init = init.astype(np.float64)
    expected_ndim = 2 if n_heads == 1 and init.ndim == 2 else 3
    d = head_dim if head_dim is not None else init.shape[-2]
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


class ScaleSearches:
    """The scale searches of a fit's starts, kept for its later members.

    The members after the first start on the same rows, and on at most
    ``_SCALE_SEARCH_SIZE`` rows no subsample is drawn: their common scale
    and per-direction scales are then the same searches on the same
    numbers, to the bit, and only the cross-fitted check (its folds drawn
    afresh) differs. Searches are found by the digest of everything they
    read (rows, targets, weights, directions, kernel), on the host only.
    """

    def __init__(self):
        self._found = {}

    def on(self, Xs, Ys, sw, W, *, kernel, per_direction, xp):
        """The dict ``{head: (scale, loss, scales, fitted loss)}`` of the
        searches on these operands (empty the first time), or None for
        arrays off the host."""
        if not array_api_compat.is_numpy_namespace(xp):
            return None
        digest = hashlib.blake2b(digest_size=16)
        for a in (Xs.numeric, Ys, sw, W):
            a = np.ascontiguousarray(a)
            digest.update(repr((a.shape, a.dtype.str)).encode())
            digest.update(a.data)
        digest.update(repr((kernel.name, per_direction)).encode())
        return self._found.setdefault(digest.digest(), {})


def _search_scales(
    W, n_heads, Xs, Ys, sw, *, kernel, per_direction, rng, xp, searches=None
):
    """Scale each head's directions to its lowest leave-one-out loss; returns
    the scaled ``W`` and whether every head kept a scale per direction (a
    head of one direction has one by construction).

    Scales are tried on a grid relative to the typical spread of the head's
    projected rows, on one subsample of at most ``_SCALE_SEARCH_SIZE`` rows.
    With ``per_direction``, each direction's scale is then fitted on its
    own (``_fit_direction_scales``), so that directions along which the
    target varies fast start narrow and the others wide; the fitted scales
    replace the common one where they lower the loss, on the subsample and
    on rows they were not fitted to (``_own_scales_generalise``). With
    ``searches``, searches on every row are kept there and taken from there.
    """
    design = numbers_design(Xs)
    Xs, Ys, sw = subsample(design, Ys, sw, _SCALE_SEARCH_SIZE, rng=rng, xp=xp)
    every_row = Xs is design  # no subsample drawn
    # In float64 whatever the fit's dtype: a float32 search's rounding
    # differs between BLAS kernels, and its ten L-BFGS-B steps amplify that
    # into another start (on a few hundred rows the extra width costs little).
    Xs = Xs.astype(xp.float64)
    Ys, sw = xp.astype(Ys, xp.float64), xp.astype(sw, xp.float64)
    found = None
    if searches is not None and every_row:
        found = searches.on(
            Xs, Ys, sw, W, kernel=kernel, per_direction=per_direction, xp=xp
        )
    found = {} if found is None else found
    d = W.shape[1] // n_heads
    W = W.copy()
    own_scales = per_direction
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        unit = at_unit_spread(W[:, cols], Xs, sw, xp=xp)
        if h not in found:
            found[h] = _searched(unit, Xs, Ys, sw, kernel, per_direction and d > 1, xp)
        scale, loss, scales, fitted_loss = found[h]
        W[:, cols] = unit * scale
        if per_direction and d > 1:
            if fitted_loss < loss and _own_scales_generalise(
                unit, Xs, Ys, sw, kernel=kernel, rng=rng, xp=xp, near=scale
            ):
                W[:, cols] = unit * scales[None, :]
            else:
                own_scales = False
    return W, own_scales


def at_unit_spread(W, Xs, sw, *, xp):
    """The directions ``W`` (p, d; NumPy) scaled so that the rows ``Xs``
    (weights ``sw``) projected on them spread by one on average per
    direction; as they are where the rows do not vary."""
    d = W.shape[1]
    Z = Xs.project(xp.asarray(W, dtype=Xs.dtype, device=device(sw)))
    Zc = Z - xp.sum(sw[:, None] * Z, axis=0)
    spread = float(xp.sum(sw[:, None] * Zc * Zc)) / d
    # Rows that differ only by rounding (constant features) have no spread
    # to scale to: dividing by it would blow them up to ~1e15.
    second_moment = float(xp.sum(sw[:, None] * Z * Z)) / d
    varies = spread > _CONSTANT_SPREAD * second_moment
    return W * (1.0 / math.sqrt(spread) if varies else 1.0)


def _searched(unit, Xs, Ys, sw, kernel, per_direction, xp):
    """One head's searches on ``Xs`` from its directions ``unit`` (p, d;
    NumPy, at unit spread): the grid's best common scale and its loss, and
    with ``per_direction`` the per-direction scales and theirs (else None
    and None)."""
    unit_x = xp.asarray(unit, dtype=Xs.dtype, device=device(Ys))
    scale, loss = _best_scale(unit_x, Xs, Ys, sw, _SCALE_GRID, kernel=kernel, xp=xp)
    if not per_direction:
        return scale, loss, None, None
    scales, fitted_loss = _fit_direction_scales(
        unit, Xs, Ys, sw, kernel=kernel, xp=xp, narrowest=scale * _DIRECTION_NARROWEST
    )
    return scale, loss, scales, fitted_loss


def _own_scales_generalise(W, Xs, Ys, sw, *, kernel, rng, xp, near=None):
    """Whether per-direction scales of the columns of ``W`` (p, d; NumPy)
    predict rows they were not fitted to better than one common scale does.

    Cross-fitting on the subsample in ``_CROSS_FIT_FOLDS`` folds: on each
    fold's complement both starts are fitted as ``_search_scales`` fits
    them, and the fold's rows are predicted from the complement's; the
    common scale of each complement is the local minimum of the grid's
    losses that a descent from ``near`` (the whole subsample's best scale)
    reaches (with None, the whole grid's best). With few rows per feature
    the per-direction scales can lower the leave-one-out loss of the rows
    they were fitted to and still predict new rows worse than one scale;
    the full fit then starts from them and early stopping keeps it near
    them. The folds are taken in turn, and where the first two agree on
    which start predicts their rows better, theirs is the verdict (see
    ``_TWO_AGREEING_FOLDS_DECIDE``); else all folds' losses summed decide.
    With fewer than two rows per fold: one scale.
    """
    n = Xs.shape[0]
    if n < 2 * _CROSS_FIT_FOLDS:
        return False
    folds = np.array_split(rng.permutation(n), _CROSS_FIT_FOLDS)
    Wx = xp.asarray(W, dtype=Xs.dtype, device=device(Ys))
    losses = np.zeros(2)
    own_better = []
    for k, fold in enumerate(folds):
        rest = np.sort(np.concatenate(folds[:k] + folds[k + 1 :]))
        train = take_rows(Xs, Ys, sw, rest, xp=xp)
        test = take_rows(Xs, Ys, sw, np.sort(fold), xp=xp)
        scale, _, own, _ = fold_scales(W, Wx, train, kernel=kernel, xp=xp, near=near)
        fold_losses = np.zeros(2)
        for i, scales in enumerate((np.full(W.shape[1], scale), own)):
            Ws = xp.asarray(W * scales[None, :], dtype=Xs.dtype, device=device(Ys))
            fold_losses[i] = heldout_loss(Ws, *test, *train, kernel=kernel, n_heads=1)
        losses += fold_losses
        own_better.append(bool(fold_losses[1] < fold_losses[0]))
        if _TWO_AGREEING_FOLDS_DECIDE and k == 1 and own_better[0] == own_better[1]:
            return own_better[0]
    return bool(losses[1] < losses[0])


def fold_scales(W, Wx, train, *, kernel, xp, near):
    """Both starts of one head's directions ``W`` (p, d; NumPy, ``Wx`` the
    same in the rows' namespace) on the rows ``train`` (``(Xs, Ys, sw)``),
    as ``_search_scales`` fits them: the common scale (descending from
    ``near``, see ``_best_scale``) and its loss, the per-direction scales
    (at most ``_DIRECTION_NARROWEST`` times narrower) and theirs."""
    scale, common = _best_scale(
        Wx, *train, _SCALE_GRID, kernel=kernel, xp=xp, near=near
    )
    own, own_loss = _fit_direction_scales(
        W, *train, kernel=kernel, xp=xp, narrowest=scale * _DIRECTION_NARROWEST
    )
    return scale, common, own, own_loss


def _fit_direction_scales(W, Xs, Ys, sw, *, kernel, xp, narrowest):
    """Scales for the columns of one head's ``W`` (p, d), fitted by L-BFGS on
    their logarithms; returns them and their leave-one-out loss.

    They start at the widest scale of ``_SCALE_GRID``, where every row
    attends to many others and the gradient says which directions to
    narrow (from a narrow start it vanishes), and stay between
    ``_DIRECTION_RANGE`` below that and ``narrowest`` (at most the grid's
    narrowest).

    The directions stay fixed, so one evaluation is a leave-one-out pass over
    ``Z0 * c`` with ``Z0 = Xs @ W`` and its gradient ``dloss / dlog c_j =
    sum_i Z_ij (dloss / dZ)_ij``: its cost does not grow with the number of
    features beyond the one product ``Xs @ W``.
    """
    Wx = xp.asarray(W, dtype=Xs.dtype, device=device(Ys))
    Z0 = Xs.project(Wx)
    workspace = {}
    d = W.shape[1]

    def fun(log_scale):
        c = xp.asarray(np.exp(log_scale), dtype=Xs.dtype, device=device(Ys))
        Z = Z0 * c[None, :]
        loss, grad_Z = loo_loss_and_grad_z(
            Z, Ys, sw, xp=xp, workspace=workspace, kernel=kernel
        )
        grad = to_numpy(xp.sum(Z * grad_Z, axis=0)).astype(np.float64)
        if not (math.isfinite(loss) and np.all(np.isfinite(grad))):
            return math.inf, np.zeros(d)
        return loss, grad

    widest = math.log(_SCALE_GRID[0])
    narrowest = math.log(min(narrowest, _SCALE_GRID[-1]))
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


def _best_scale(W, Xs, Ys, sw, grid, *, kernel, xp, near=None):
    """The factor of ``grid`` that gives ``W`` the lowest leave-one-out loss,
    and that loss.

    With ``near`` (a factor of ``grid``), the local minimum that a descent
    from ``near`` reaches, one step of the grid at a time: the grid's best
    wherever the loss has one minimum over the grid, for a few of its
    losses when ``near`` lies close to it (three where ``near`` is the
    best).
    """
    workspace = {}
    losses = {}

    def loss_at(i):
        if i not in losses:
            losses[i] = _loo_value(
                W * float(grid[i]),
                Xs,
                Ys,
                sw,
                kernel=kernel,
                workspace=workspace,
                xp=xp,
            )
        return losses[i]

    if near is None:
        best = int(np.argmin([loss_at(i) for i in range(len(grid))]))
        return float(grid[best]), losses[best]
    best = int(np.argmin(np.abs(np.asarray(grid) - near)))
    while True:
        steps = [i for i in (best - 1, best + 1) if 0 <= i < len(grid)]
        step = min(steps, key=loss_at, default=best)
        if not loss_at(step) < loss_at(best):
            return float(grid[best]), losses[best]
        best = step


def _loo_value(W, Xs, Ys, sw, *, kernel, workspace, xp):
    """The leave-one-out loss at ``W`` (an array of ``Xs``'s namespace); inf
    where it is not finite."""
    value = loo_loss_and_grad(
        W, Xs, Ys, sw, xp=xp, return_grad=False, workspace=workspace, kernel=kernel
    )[0]
    return value if math.isfinite(value) else math.inf
