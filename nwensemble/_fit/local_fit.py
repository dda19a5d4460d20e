"""The heads' readout, chosen after the fit by the leave-one-out error of
the training rows: the weighted mean, or a local-linear fit with a ridge
from a grid of decades (see ``readout``), and where rows held out of the
projections' fit score the choice, a kernel wider than the fitted one for
the line."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._fit.precision import statistics_keys
from nwensemble._shared.backend import device, to_numpy
from nwensemble._shared.readout import CONSTANT, Readout, target_range
from nwensemble._shared.scaling import power_of_two_scale

# The local-linear ridges tried, relative to the neighbourhood's spread:
# from a nearly free line to one held nearly flat.
RIDGES = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
# 'auto' keeps the weighted mean for wider heads: a line's sums take
# d (d + 1) / 2 columns per key, which grow past the rows' own size.
MAX_LINE_DIM = 32
# The wider kernels a line is also read with where held-out rows score the
# readouts: the fitted projection divided by each (powers of two, exact).
# The projection is fitted for the weighted mean; a line follows the
# slope, and its noise falls as the neighbourhood widens.
WIDER = (2, 4, 8)


@dataclass(frozen=True, eq=False)
class ReadoutChoice:
    """What ``choose_readout`` returns.

    Attributes
    ----------
    keys : Keys
        The keys the heads read with: divided by ``width``, with the chosen
        readout (``readout``: one, or one per head for members with
        different ridges).
    heads : array of shape (n_heads, m, t)
        Every head's leave-one-out estimates of the rows ``rows`` under it.
    fallback : array of bool, shape (n_heads, m)
        The estimates whose compact support was empty.
    sums : HeadSums or None
        The attention's sums on those rows under a line (None for the mean).
    width : int
        The divisor of the fitted projection the heads read with (1: the
        fitted kernel).
    error : float
        The choice's error: summed over members, each member's weighted
        squared error relative to the target variance.
    """

    keys: Any
    heads: Any
    fallback: Any
    sums: Any
    width: int
    error: float

    @property
    def readout(self):
        """The chosen readout (see ``keys``)."""
        return self.keys.readout


def candidates(local_fit, keys, *, embeddings=False, held_out=False):
    """The readouts ``local_fit`` chooses among for ``keys`` (a ``Keys``).

    ``'auto'`` keeps the weighted mean for compact kernels (their radius
    search serves only its sums), heads wider than ``MAX_LINE_DIM`` and
    tables with ``embeddings`` (categorical levels, missing cells) unless
    rows ``held_out`` of the projections' fit score the choice: rows of one
    level share its position exactly, as copies share theirs, and
    leave-one-out of the rows the projections were fitted to flatters a
    line through such ties.
    """
    keeps_mean = (
        keys.kernel.compact
        or keys.head_dim > MAX_LINE_DIM
        or (embeddings and not held_out)
    )
    if local_fit == "constant" or (local_fit == "auto" and keeps_mean):
        return [CONSTANT]
    xp = keys.xp
    low, high = target_range(keys.Y, xp.exp(keys.log_sw), xp=xp)
    lines = [Readout(ridge, low, high) for ridge in RIDGES]
    return lines + [CONSTANT] if local_fit == "auto" else lines


def choose_readout(
    keys,
    rows,
    sw_rows,
    local_fit,
    *,
    scored=None,
    embeddings=False,
    held_out=False,
    widens=True,
):
    """The readout of ``local_fit`` for ``keys`` and the kernel width it
    reads with, as a ``ReadoutChoice``: every head's leave-one-out
    estimates (n_heads, m, t) of the training ``rows`` (an integer array of
    the namespace) under it, the boolean (n_heads, m) array of those whose
    compact support was empty, and the attention's sums on those rows
    (``passes.HeadSums``) when the readout is a local line (None
    otherwise), for the statistics that read them again.

    With ``held_out`` (``scored`` are rows held out of the projections'
    fit, for every member), the lines are also read with the kernels
    ``WIDER`` times wider than the fitted one, and the width is chosen with
    the readout by the same error; the leave-one-out error of the rows the
    projections were fitted to favours their own width, so without held-out
    rows the fitted width stays; so it does with ``widens`` False (a solver
    that chose the width on those rows itself).

    Every candidate reads the same attention sums, taken in one pass: the
    choice costs one leave-one-out pass over ``rows`` whatever the number
    of candidates. The uniform mean of the heads is scored by its weighted
    squared error (weights ``sw_rows``, a NumPy array, each output relative
    to its variance), on the positions ``scored`` of ``rows`` (all when
    None); the least error chooses. ``scored`` may also be a list, one
    entry (positions or None) per member of a fit with members (the heads
    split into that many equal consecutive groups): each member's mean is
    then scored on its own positions (the rows it held out) and chooses
    its own ridge, returned as a tuple of readouts, one per head (see
    ``_per_group_choice``). ``embeddings``: the table has
    categorical or missing-value embeddings (see ``candidates``).
    """
    options = candidates(local_fit, keys, embeddings=embeddings, held_out=held_out)
    if len(options) == 1:
        heads, fallback = keys.passes().head_estimates(
            None, loo_rows=rows, fallback=True
        )
        chosen = dataclasses.replace(keys, readout=options[0])
        return ReadoutChoice(chosen, heads, fallback, None, 1, math.nan)
    best = _choose_among(options, keys, rows, sw_rows, scored)
    if not (held_out and widens):
        return best
    # The wider kernels are read on the scored rows alone (their errors are
    # those of a pass over every row), and the chosen one again on every row.
    sub_rows, sub_sw, sub_scored = _only_scored(rows, sw_rows, scored, xp=keys.xp)
    width, error, chosen = 1, best.error, None
    for wider in WIDER:
        wide = dataclasses.replace(keys, Z=keys.Z / wider)
        choice = _choose_among(options, wide, sub_rows, sub_sw, sub_scored)
        if choice.error < error:
            width, error, chosen = wider, choice.error, choice
    if chosen is None:
        return best
    readout = chosen.readout
    kept = list(dict.fromkeys(readout if isinstance(readout, tuple) else [readout]))
    return _choose_among(kept, chosen.keys, rows, sw_rows, scored, width=width)


def _only_scored(rows, sw_rows, scored, *, xp):
    """``rows``, their weights and the positions ``scored`` (see
    ``choose_readout``) narrowed to the scored rows (unchanged when some
    member scores every row)."""
    groups = scored if isinstance(scored, list) else [scored]
    if any(positions is None for positions in groups):
        return rows, sw_rows, scored
    union = np.unique(np.concatenate(groups))
    narrowed = [np.searchsorted(union, positions) for positions in groups]
    sub_rows = xp.take(rows, xp.asarray(union, device=device(rows)), axis=0)
    sub_scored = narrowed if isinstance(scored, list) else narrowed[0]
    return sub_rows, np.asarray(sw_rows)[union], sub_scored


def _choose_among(options, keys, rows, sw_rows, scored, *, width=1):
    """``choose_readout``'s choice among ``options`` for ``keys`` (already
    divided by ``width``)."""
    xp = keys.xp
    sums = _loo_sums(dataclasses.replace(keys, readout=options[0]), rows)
    nums, queries = sums.nums, sums.queries
    Y_rows = xp.take(keys.Y, rows, axis=0)
    t = Y_rows.shape[1]
    # Errors in units of a power of two of the targets: exact, and their
    # squares stay finite at any scale.
    Y_np = to_numpy(Y_rows).astype(np.float64)
    scale = power_of_two_scale(Y_np)
    Y_np = Y_np / scale
    groups = scored if isinstance(scored, list) else [scored]
    group_heads = keys.n_heads // len(groups)
    weights = []
    for positions in groups:
        sw = _scoring_weights(sw_rows, positions)
        var = sw @ (Y_np - sw @ Y_np) ** 2
        weights.append((sw, np.where(var > 0, var, 1.0)))
    # errors[o, g]: option o's error on group g's rows, of group g's mean.
    errors, estimates = [], []
    for readout in options:
        heads = xp.stack(
            [_estimate(readout, num, Qh, t, xp=xp) for num, Qh in zip(nums, queries)]
        )
        row = []
        for g, (sw, var) in enumerate(weights):
            group = heads[g * group_heads : (g + 1) * group_heads, ...]
            mean = to_numpy(xp.mean(group, axis=0)).astype(np.float64) / scale
            row.append(float(sw @ (((mean - Y_np) ** 2) / var).sum(axis=1)))
        errors.append(row)
        estimates.append(heads)
    errors = np.asarray(errors)
    chosen = _per_group_choice(errors, [r.is_constant for r in options])
    if len(set(chosen)) == 1:
        readout, heads = options[chosen[0]], estimates[chosen[0]]
    else:
        readout = tuple(options[o] for o in chosen for _ in range(group_heads))
        heads = xp.concat(
            [
                estimates[o][g * group_heads : (g + 1) * group_heads, ...]
                for g, o in enumerate(chosen)
            ],
            axis=0,
        )
    line = not options[chosen[0]].is_constant
    error = float(errors[chosen, np.arange(errors.shape[1])].sum())
    return ReadoutChoice(
        dataclasses.replace(keys, readout=readout),
        heads,
        sums.fallback,
        sums if line else None,
        width,
        error,
    )


def _loo_sums(keys, rows):
    """The attention's sums of ``keys``' readout columns for the training
    ``rows`` left out one at a time (``passes.HeadSums``), taken in the
    statistics' precision (``precision.statistics_keys``) and returned in
    the keys' dtype, with the keys' own coordinates as the queries."""
    taken = statistics_keys(keys)
    sums = taken.passes().head_sums(None, loo_rows=rows)
    if taken is keys:
        return sums
    xp, d = keys.xp, keys.head_dim
    Q = xp.take(keys.Z, rows, axis=0)
    return dataclasses.replace(
        sums,
        nums=[xp.astype(num, keys.Z.dtype) for num in sums.nums],
        queries=[Q[:, h * d : (h + 1) * d] for h in range(keys.n_heads)],
    )


def local_ridges(readout):
    """The ridge of ``readout`` (a float), or of each head's for a tuple
    of readouts (a float64 array)."""
    if isinstance(readout, tuple):
        return np.array([r.ridge for r in readout], dtype=np.float64)
    return readout.ridge


def _per_group_choice(errors, constant):
    """Per group, the index of its option: for one group the least error;
    for several (members), the weighted mean for all of them where it does
    no worse in total than each group's best line, else each group's best
    line (the passes need every head to read a line or every head the
    mean). ``errors`` (options, groups); ``constant`` per option."""
    constant = np.asarray(constant)
    if errors.shape[1] == 1:
        return [int(np.argmin(errors[:, 0]))]
    lines = np.flatnonzero(~constant)
    means = np.flatnonzero(constant)
    best_lines = lines[np.argmin(errors[lines, :], axis=0)] if lines.size else None
    if best_lines is None or (
        means.size
        and errors[means[0], :].sum()
        <= errors[best_lines, np.arange(errors.shape[1])].sum()
    ):
        return [int(means[0])] * errors.shape[1]
    return [int(o) for o in best_lines]


def _scoring_weights(sw_rows, positions):
    """The weights (summing to one) that score a readout on the positions
    ``positions`` of the rows: all rows when None, or when none of those
    positions has weight."""
    sw = np.asarray(sw_rows, dtype=np.float64)
    if positions is not None:
        inside = np.isin(np.arange(sw.shape[0]), positions)
        if (sw[inside] > 0).any():
            sw = np.where(inside, sw, 0.0)
    return sw / sw.sum()


def _estimate(readout, num, Qh, t, *, xp):
    """``readout``'s estimates from the local-linear layout's sums ``num``."""
    if readout.is_constant:
        return num[:, :t] / num[:, -1:]
    return readout.estimate(num, Qh, xp=xp)
