"""The fitting engine: from validated arrays to the heads' projections, the
keys they attend to and the heads' leave-one-out residuals."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from nwensemble._fit.config import IterateObserver, SolverResult
from nwensemble._fit.diversity import solve_with_diversity
from nwensemble._fit.early_stopping import hold_out_plan
from nwensemble._fit.embedding_start import start_with_codes
from nwensemble._fit.feature_slopes import continue_with_slopes
from nwensemble._fit.local_fit import choose_readout, local_ridges
from nwensemble._fit.solvers import choose_solver
from nwensemble._fit.start import ScaleSearches, initial_projection
from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.duplicates import DuplicateIndex
from nwensemble._shared.features import fit_feature_map
from nwensemble._shared.keys import Keys
from nwensemble._shared.scaling import power_of_two_scale

# Leave-one-out statistics after fit use at most this many query rows.
LOO_STATS_ROWS = 2048


@dataclass(frozen=True, eq=False)
class LeaveOneOut:
    """The heads' leave-one-out residuals on the rows the statistics use,
    float64 NumPy: ``residuals`` (n_heads, m, t) of training rows ``rows``
    (an index array; None for all rows), their sample weights ``sw`` (m,),
    per head the number of those rows whose compact support was empty
    (``fallback_counts``, an array of the model's namespace), and the
    attention's sums on those rows under a local-linear readout
    (``passes.HeadSums``; None for the weighted mean), which the
    combination's statistics read again."""

    residuals: np.ndarray
    sw: np.ndarray
    rows: Optional[np.ndarray]
    fallback_counts: Any
    sums: Any = None


@dataclass(frozen=True, eq=False)
class FittedHeads:
    """What ``fit_heads`` returns.

    Attributes
    ----------
    features : FeatureMap
        The fitted feature map.
    W : array of shape (n_parameters, n_heads * head_dim)
        The projections in the feature map's units (for a table with codes,
        the numeric features' rows, then the embedding rows; see
        ``design``), in the input's namespace, dtype and device.
    W_std : ndarray of shape (n_heads, head_dim, n_parameters)
        ``W`` per head and transposed, float64 NumPy.
    keys : Keys
        The mapped training rows projected by ``W``, with their targets and
        weights (no search index).
    duplicates : DuplicateIndex or None
        The training rows' copies, when their blend is on.
    solver : SolverResult
        What the solver returned (iterations, loss curve, diversity used).
    heldout : tuple of (ndarray of int or None)
        Per member, the training rows held out of its projections' fit
        (None: none).
    loo : LeaveOneOut
        The heads' leave-one-out residuals for the statistics that follow.
    first_member : FirstMember
        The first member's fit and the random state after it, with which a
        fit of more members on the same rows can start (``fit_heads``'s
        ``first_member``).
    """

    features: Any
    W: Any
    W_std: np.ndarray
    keys: Keys
    duplicates: Any
    solver: SolverResult
    heldout: tuple
    loo: LeaveOneOut
    first_member: Any = None


@dataclass(frozen=True, eq=False)
class FirstMember:
    """A fit's first member (its ``SolverResult``) and the random state that
    followed it. The first member of a fit with more members on the same
    rows, parameters and seed is the same member, drawn from the same
    random state, so such a fit can take it and go on from that state (as
    ``HeadAllocator`` does when it refits its choice with members). With
    ``feature_slopes``, ``slopes`` holds the first member's
    ``FeatureSlopes`` (learned within its fit or continued from it), which
    every member then acts through."""

    solver: SolverResult
    rng_state: tuple
    slopes: Any = None


def scaled_targets(Y, sw, *, xp):
    """Centre ``Y`` and divide by its total weighted standard deviation, so the
    loss reads as a fraction of the target variance."""
    Yc = Y - xp.sum(sw[:, None] * Y, axis=0)
    Yc = Yc / power_of_two_scale(Yc)  # exact; keeps the squares finite
    total = float(xp.sum(sw[:, None] * Yc * Yc))
    return Yc / math.sqrt(total) if total > 0 else Yc


def fit_heads(
    config,
    table,
    encoder,
    Y,
    sw,
    *,
    previous,
    rng,
    xp,
    first_member=None,
    given_slopes=None,
):
    """Map the features, learn the heads' projections and their
    leave-one-out residuals.

    ``table`` holds the training rows as ``encoder`` (a ``TableEncoder`` or
    ``NumberColumns``) encoded them, ``Y`` (n, t) is an array of their
    namespace and device, ``sw`` (n,) non-negative weights summing to one;
    ``previous`` the last fit's ``W`` (warm start) or None;
    ``first_member`` a ``FirstMember`` of a fit on the same rows with the
    same parameters and seed, taken as this fit's first member, or None;
    ``given_slopes`` the ``FeatureSlopes`` of a fit on the same rows (its
    first member's), which every member acts through instead of learning
    its own, or None. Returns ``FittedHeads``.
    """
    features, Xs = fit_feature_map(
        table, encoder, sw, standardize=config.standardize, rng=rng, xp=xp
    )
    Ys = scaled_targets(Y, sw, xp=xp)
    # With the copies' blend on, the heads learn from the rows with their
    # copies merged: leave-one-out then leaves a record out with all its
    # copies, so that the heads learn to predict from other records (the
    # blend serves the copies).
    duplicates = None
    if config.duplicate_weight != 0:
        duplicates = DuplicateIndex(Xs.copy_key(), Y, sw, xp=xp)
    Xt, Yt, swt, merged_group = Xs, Ys, sw, None
    if duplicates is not None:
        Xt, Yt, swt, merged_group = duplicates.collapse(Xs, Ys, sw, xp=xp)

    members = []
    slopes = given_slopes
    if slopes is not None:
        features, Xs, Xt = _through_slopes(slopes, features, Xs, Xt)
    # Later members on the same rows as an earlier one repeat its searches.
    searches = ScaleSearches()
    for m in range(config.n_members):
        if m == 0 and first_member is not None:
            members.append(first_member.solver)
            rng.set_state(first_member.rng_state)
            slopes = first_member.slopes
        else:
            # The first member learns the slopes (the later ones act on
            # the rows they map).
            learns_slopes = m == 0 and given_slopes is None and config.feature_slopes
            members.append(
                _fit_member(
                    config.replace(feature_slopes=learns_slopes),
                    _member_slice(previous, m, config),
                    features,
                    Xt,
                    Yt,
                    swt,
                    rng=rng,
                    xp=xp,
                    searches=searches,
                )
            )
            if learns_slopes:
                members[0], slopes = _with_slopes(
                    config, members[0], Xt, Yt, swt, rng=rng, xp=xp
                )
        if m == 0:
            after_first = FirstMember(members[0], rng.get_state(), slopes)
            if slopes is not None and given_slopes is None:
                features, Xs, Xt = _through_slopes(slopes, features, Xs, Xt)
    fitted = _joined(members)
    n_heads = config.n_heads * config.n_members
    d = fitted.W.shape[1] // n_heads

    W = xp.asarray(fitted.W, dtype=Xs.dtype, device=device(Y))
    keys = Keys.of(Xs.project(W), Y, sw, kernel=config.kernel, n_heads=n_heads)
    heldout = tuple(
        _original_rows(member.heldout, merged_group, duplicates) for member in members
    )
    start = time.perf_counter()
    loo, keys, width = _leave_one_out(
        keys,
        sw,
        heldout,
        config.local_fit,
        duplicates=duplicates,
        embeddings=features.codes is not None,
        widens=not fitted.width_chosen,
        rng=rng,
    )
    config.progress(
        f"leave-one-out statistics on {loo.residuals.shape[1]} rows, "
        f"local ridge {local_ridges(keys.readout)}, kernel width x{width}",
        start,
    )
    # The chosen width divides the projections (exactly: a power of two),
    # so that prediction, attention weights and intervals read with it.
    return FittedHeads(
        features=features,
        W=W / width,
        W_std=fitted.W.T.reshape(n_heads, d, -1) / width,
        keys=keys,
        duplicates=duplicates,
        solver=fitted,
        heldout=heldout,
        loo=loo,
        first_member=after_first,
    )


def _through_slopes(slopes, features, Xs, Xt):
    """The feature map with ``slopes``, and the rows ``Xs`` and the
    training rows ``Xt`` (``Xs`` itself, or its copies merged) mapped by
    them: every member and the keys act on the mapped rows."""
    features = dataclasses.replace(features, slopes=slopes)
    merged = Xt is not Xs
    Xs = slopes.design(Xs)
    return features, Xs, slopes.design(Xt) if merged else Xs


def _fit_member(config, previous, features, Xt, Yt, swt, *, rng, xp, searches=None):
    """One member's heads: their start (its scale searches kept in
    ``searches``, a ``start.ScaleSearches`` or None), then the solver
    (``SolverResult``)."""
    n_heads = config.n_heads
    start = time.perf_counter()
    if features.codes is not None:
        begin = start_with_codes(
            config,
            previous,
            Xt,
            features.codes,
            Yt,
            swt,
            rng=rng,
            xp=xp,
            searches=searches,
        )
    else:
        # Init arrays are in input units when the map is linear, else in
        # the units of the warped, standardised features.
        scale = features.scale if features.is_linear else None
        scale_np = np.ones(Xt.shape[1]) if scale is None else to_numpy(scale)
        begin = initial_projection(
            config,
            previous,
            Xt.numeric,
            Yt,
            swt,
            scale_np.astype(np.float64),
            rng=rng,
            xp=xp,
            searches=searches,
        )
    config.progress("start (bandwidths on a subsample)", start)
    W0 = begin.W
    start = time.perf_counter()
    n_positive = int(np.count_nonzero(to_numpy(swt) > 0))
    solver = choose_solver(
        config.solver,
        n_positive,
        n_heads,
        embeddings=features.codes is not None,
        slopes=config.feature_slopes and Xt.numeric.shape[1] > 0,
    )
    hold_out = hold_out_plan(
        config.early_stopping,
        config.validation_fraction,
        n_positive=n_positive,
        n_params=W0.size,
        stochastic=solver.name == "adam",
        choosing=config.diversity == "auto" and n_heads > 1,
    )
    config = config.replace(
        row_scales=not begin.feature_scales,
        hold_out=hold_out,
        observer=IterateObserver(config.callback, n_heads, config.single_head),
    )
    fitted = solve_with_diversity(solver.solve, config, W0, Xt, Yt, swt, rng=rng, xp=xp)
    if fitted.at_max_iter:
        warnings.warn(
            f"{config.name} stopped after max_iter={config.max_iter} "
            f"{solver.iterations} before the loss converged; increase max_iter "
            "or tol.",
            ConvergenceWarning,
        )
    config.progress(
        f"fitted, {fitted.n_iter} {solver.iterations}, {fitted.n_fev} "
        f"{solver.evaluations}",
        start,
    )
    return fitted


def _with_slopes(config, fitted, Xt, Yt, swt, *, rng, xp):
    """The first member with feature slopes (``feature_slopes``): its
    ``SolverResult`` and the ``FeatureSlopes``, as the solver learned them
    together with its projection (Adam), else continued from its fit (the
    member as it was and None where there are too few rows to fit them)."""
    if fitted.slopes is not None:
        return fitted, fitted.slopes
    start = time.perf_counter()
    continued = continue_with_slopes(config, fitted, Xt, Yt, swt, rng=rng, xp=xp)
    if continued is None:
        return fitted, None
    slopes, W = continued
    config.progress("feature slopes continued from the first member", start)
    return dataclasses.replace(fitted, W=W), slopes


def _member_slice(previous, m, config):
    """Member ``m``'s columns of a warm start's ``W`` (None stays None)."""
    if previous is None or config.n_members == 1:
        return previous
    width = previous.shape[1] // config.n_members
    return previous[:, m * width : (m + 1) * width]


def _joined(members):
    """The members' ``SolverResult``s as one: their projections side by side
    (member after member, each its heads), iterations and evaluations
    summed, loss curves one after another, and no held-out rows (a row one
    member held out another trained on; ``FittedHeads.heldout`` keeps them
    per member)."""
    if len(members) == 1:
        return members[0]
    return dataclasses.replace(
        members[0],
        W=np.concatenate([member.W for member in members], axis=1),
        n_iter=sum(member.n_iter for member in members),
        n_fev=sum(member.n_fev for member in members),
        loss_curve=[loss for member in members for loss in member.loss_curve],
        at_max_iter=any(member.at_max_iter for member in members),
        heldout=None,
    )


def _leave_one_out(
    keys, sw, per_member, local_fit, *, duplicates, embeddings, widens=True, rng
):
    """The heads' leave-one-out residuals (see ``LeaveOneOut``), the keys
    with the readout ``local_fit`` chooses by them (see ``local_fit``) and
    the kernel width it reads with (the divisor of the projections; the
    keys are divided by it), each member scored on the rows held out of its
    projections' fit where there are any (``per_member``: per member,
    those rows or None; only where every member has them, and the solver
    did not choose the width on them itself (``widens``), is a wider kernel
    tried). The residuals are those of every row up to ``LOO_STATS_ROWS``,
    else of a random subset of queries (the held-out rows first), each
    attending to all rows, so that their cost stays linear in n."""
    xp = keys.xp
    sw_np = to_numpy(sw).astype(np.float64)
    positive = np.flatnonzero(sw_np > 0)
    n = keys.n_samples
    given = [held for held in per_member if held is not None]
    first = np.unique(np.concatenate(given)) if given else None
    sampled = None
    rows_np = np.arange(n)
    if positive.shape[0] > LOO_STATS_ROWS:
        rows_np = _sample_loo_rows(positive, first, LOO_STATS_ROWS, rng=rng)
        sampled = rows_np
    rows = xp.asarray(rows_np, device=device(keys.Z))
    scored = [_scored_rows(rows_np, held, duplicates) for held in per_member]
    choice = choose_readout(
        keys,
        rows,
        sw_np[rows_np],
        local_fit,
        scored=scored,
        embeddings=embeddings,
        held_out=all(held is not None for held in per_member),
        widens=widens,
    )
    counts = xp.sum(xp.astype(choice.fallback, xp.int64), axis=1)
    Y_rows = xp.take(keys.Y, rows, axis=0)
    residuals = to_numpy(choice.heads - Y_rows[None, ...]).astype(np.float64)
    loo = LeaveOneOut(residuals, sw_np[rows_np], sampled, counts, choice.sums)
    return loo, choice.keys, choice.width


def _scored_rows(rows, heldout, duplicates):
    """Positions in ``rows`` of those that score the readouts (None: all):
    rows held out of the projections' fit where there are any, and rows
    without copies where there are any (a row's copy stays among the keys
    when the row leaves itself out, and would flatter a line through it)."""
    keep = np.ones(rows.shape[0], dtype=bool)
    if heldout is not None and np.isin(rows, heldout).any():
        keep &= np.isin(rows, heldout)
    if duplicates is not None:
        counts = to_numpy(duplicates.counts)[to_numpy(duplicates.train_group)]
        single = counts[rows] <= 1
        if (keep & single).any():
            keep &= single
    return None if keep.all() else np.flatnonzero(keep)


def _original_rows(rows, merged_group, duplicates):
    """Training rows (sorted NumPy integers) of the fitted rows ``rows``:
    each merged row stands for all the copies of its group."""
    if rows is None or merged_group is None:
        return rows
    groups = to_numpy(merged_group)[rows]
    return np.flatnonzero(np.isin(to_numpy(duplicates.train_group), groups))


def _sample_loo_rows(positive, heldout, size, *, rng):
    """``size`` of the rows ``positive``, sorted: the rows held out
    of the projection's fit first (their residuals are honest), then a random
    fill."""
    if heldout is None:
        return np.sort(rng.choice(positive, size, replace=False))
    first = heldout
    if heldout.shape[0] > size:
        first = rng.choice(heldout, size, replace=False)
    rest = np.setdiff1d(positive, first)
    fill = rng.choice(rest, size - first.shape[0], replace=False)
    return np.sort(np.concatenate([first, fill]))
