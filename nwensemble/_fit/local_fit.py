"""The heads' readout, chosen after the fit by the leave-one-out error of
the training rows: the weighted mean, or a local-linear or local-quadratic
fit with a ridge from a grid of decades (see ``readout``), and where rows
held out of the projections' fit score the choice, a kernel wider than the
fitted one for the fit."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nwensemble._fit.precision import statistics_keys
from nwensemble._shared.backend import device, namespace_of, to_numpy
from nwensemble._shared.readout import CONSTANT, Readout, line_sums, target_range
from nwensemble._shared.scaling import power_of_two_scale

# The local-linear ridges tried, relative to the neighbourhood's spread:
# from a nearly free line to one held nearly flat.
RIDGES = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
# 'auto' keeps the weighted mean for wider heads: a line's sums take
# d (d + 1) / 2 columns per key, which grow past the rows' own size. The
# local quadratic's design, the coordinates and their squares, is held to
# the same width (heads of at most MAX_LINE_DIM / 2 dimensions).
MAX_LINE_DIM = 32
# The wider kernels a fit is also read with where held-out rows score the
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
    line through such ties. Otherwise it offers the local quadratics (for
    heads of at most ``MAX_LINE_DIM / 2`` dimensions), the lines and the
    mean, the quadratics first: their sums hold every other option's.
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
    quadratics = [Readout(ridge, low, high, squares=True) for ridge in RIDGES]
    if local_fit == "linear":
        return lines
    if local_fit == "quadratic":
        return quadratics
    if 2 * keys.head_dim > MAX_LINE_DIM:
        quadratics = []
    return quadratics + lines + [CONSTANT]


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
    fit, for every member), the fits are also read with the kernels
    ``WIDER`` times wider than the fitted one (in order, up to the first
    whose least error is not below the narrower width's), and the width is
    chosen with the readout by the same error; the leave-one-out error of
    the rows the projections were fitted to favours their own width, so
    without held-out rows the fitted width stays; so it does with
    ``widens`` False (a solver that chose the width on those rows itself).

    Every candidate reads the same attention sums, taken in one pass at
    each width (the widest layout's, a local quadratic's where there is
    one). The uniform mean of the heads is scored by its weighted squared
    error (weights ``sw_rows``, a NumPy array, each output relative to its
    variance), on the positions ``scored`` of ``rows`` (all when None); the
    least error chooses (``_decide``: a quadratic only where it gains more
    than a standard error). ``scored`` may also be a list, one entry
    (positions or None) per member of a fit with members (the heads split
    into that many equal consecutive groups): each member's mean is then
    scored on its own positions (the rows it held out) and chooses its own
    ridge, returned as a tuple of readouts, one per head, all of one kind.
    ``embeddings``: the table has categorical or missing-value embeddings
    (see ``candidates``).
    """
    options = candidates(local_fit, keys, embeddings=embeddings, held_out=held_out)
    if len(options) == 1:
        heads, fallback = keys.passes().head_estimates(
            None, loo_rows=rows, fallback=True
        )
        chosen = dataclasses.replace(keys, readout=options[0])
        return ReadoutChoice(chosen, heads, fallback, None, 1, math.nan)
    scoring = _Scoring(keys, rows, sw_rows, scored)
    families = [_family(r) for r in options]
    sums = None
    if _one_pass(scoring, rows.shape[0]):
        # One pass serves the choice and the chosen readout's estimates.
        sums = _loo_sums(dataclasses.replace(keys, readout=options[0]), rows)
        squares = _row_squares(options, keys, sums, scoring)
    else:
        squares = _scored_squares(options, keys, rows, scoring)
    picks = _picks(families, scoring, squares, 1)
    if held_out and widens:
        # The wider kernels are read only for their errors, from the
        # narrowest, while each width's least error falls below the one
        # before: once a wider kernel does worse, a wider one still blurs
        # more of what the narrower ones resolve.
        narrower = min(picks, key=_error_key)
        for wider in WIDER:
            wide = dataclasses.replace(keys, Z=keys.Z / wider)
            squares = _scored_squares(options, wide, rows, scoring)
            at_width = _picks(families, scoring, squares, wider)
            picks += at_width
            best = min(at_width, key=_error_key)
            if _error_key(best) >= _error_key(narrower):
                break
            narrower = best
    pick = _decide(picks, scoring)
    chosen = [options[o] for o in pick.options]
    keys = dataclasses.replace(keys, Z=keys.Z / pick.width)
    if sums is None or pick.width != 1:
        # The chosen readout's own columns, on every row.
        sums = _loo_sums(dataclasses.replace(keys, readout=chosen[0]), rows)
    else:
        layout = [
            _layout(num, options[0], chosen[0], scoring.t, keys) for num in sums.nums
        ]
        sums = dataclasses.replace(sums, nums=layout)
    # Every head's estimates of every row, each group's with its option.
    heads = keys.xp.stack(
        [
            _estimate(chosen[h // scoring.group_heads], num, Qh, scoring.t, xp=keys.xp)
            for h, (num, Qh) in enumerate(zip(sums.nums, sums.queries))
        ]
    )
    readout = scoring.readout(options, pick.options)
    line = not chosen[0].is_constant
    return ReadoutChoice(
        dataclasses.replace(keys, readout=readout),
        heads,
        sums.fallback,
        sums if line else None,
        pick.width,
        pick.error,
    )


def _one_pass(scoring, n_rows):
    """Whether one pass of ``options[0]``'s sums over all ``n_rows`` rows
    serves both the choice and the chosen readout's estimates: where at
    least half of the rows score every group. The chosen readout's pass
    over every row reads the scoring rows again; from half of the rows, a
    pass over them alone before it costs about as much as the one pass
    where the mean is chosen, and is spent twice where a line is (as on
    the large tables)."""
    return all(2 * where.shape[0] >= n_rows for where in scoring.where)


def _row_squares(options, keys, sums, scoring):
    """``squares[o][g]``: option ``o``'s squared errors (``_Scoring.squares``)
    on the rows that score group ``g``, read from ``sums`` (the attention's
    sums of ``options[0]``'s columns on every row, ``_loo_sums``)."""
    xp = keys.xp

    def group_sums(g):
        where = scoring.where_x[g]
        heads = range(g * scoring.group_heads, (g + 1) * scoring.group_heads)
        return [
            (
                xp.take(sums.nums[h], where, axis=0),
                xp.take(sums.queries[h], where, axis=0),
            )
            for h in heads
        ]

    return _squares(options, keys, scoring, group_sums)


def _scored_squares(options, keys, rows, scoring):
    """``_row_squares`` with each group's heads' sums taken on the rows
    that score that group only (a member's held-out rows: a third of the
    rows or less), in ``options[0]``'s columns."""
    xp, d = keys.xp, keys.head_dim

    def group_sums(g):
        cols = slice(g * scoring.group_heads * d, (g + 1) * scoring.group_heads * d)
        group_keys = dataclasses.replace(
            keys, Z=keys.Z[:, cols], n_heads=scoring.group_heads, readout=options[0]
        )
        sums = _loo_sums(group_keys, xp.take(rows, scoring.where_x[g], axis=0))
        return list(zip(sums.nums, sums.queries))

    return _squares(options, keys, scoring, group_sums)


def _squares(options, keys, scoring, group_sums):
    """``squares[o][g]`` from ``group_sums(g)``: group ``g``'s heads' ``(num,
    Qh)`` on the rows that score it, ``num`` in ``options[0]``'s columns."""
    squares = [[None] * scoring.n_groups for _ in options]
    for g in range(scoring.n_groups):
        heads = [
            _option_estimates(options, num, Qh, scoring.t, keys)
            for num, Qh in group_sums(g)
        ]
        for o in range(len(options)):
            squares[o][g] = scoring.squares(g, keys.xp.stack([est[o] for est in heads]))
    return squares


def _option_estimates(options, num, Qh, t, keys):
    """Each option's estimates (m, t) from ``num``, the sums of
    ``options[0]``'s columns at the queries ``Qh``: the ridges of one kind
    in one batched solve (``Readout.ridge_estimates``)."""
    estimates = [None] * len(options)
    for family in sorted({_family(r) for r in options}):
        kind = [o for o, r in enumerate(options) if _family(r) == family]
        first = options[kind[0]]
        own = _layout(num, options[0], first, t, keys)
        if first.is_constant:
            for o in kind:
                estimates[o] = own[:, :t] / own[:, -1:]
            continue
        ridges = [options[o].ridge for o in kind]
        fits = first.ridge_estimates(own, Qh, ridges, xp=keys.xp)
        for k, o in enumerate(kind):
            estimates[o] = fits[k, ...]
    return estimates


@dataclass(frozen=True, eq=False)
class _Pick:
    """One kind of readout's best option for each group at one width: the
    options' indices, their summed error and the rows' squared errors
    (per group) behind it."""

    width: int
    family: int
    options: list
    error: float
    squares: list


def _picks(families, scoring, squares, width):
    """Each kind's ``_Pick`` at ``width`` among options of kinds
    ``families`` (``_family``), from the rows' ``squares`` (``squares[o][g]``),
    the simpler kinds first."""
    errors = scoring.errors(squares)
    families = np.asarray(families)
    groups = np.arange(errors.shape[1])
    picks = []
    for family in np.unique(families):
        members = np.flatnonzero(families == family)
        best = members[np.argmin(errors[members, :], axis=0)]
        picks.append(
            _Pick(
                width,
                int(family),
                [int(o) for o in best],
                float(errors[best, groups].sum()),
                [squares[o][g] for g, o in zip(groups, best)],
            )
        )
    return picks


def _decide(picks, scoring):
    """The ``_Pick`` to read with: of the weighted mean's and the lines',
    the least error, the first on a tie (the fitted width before wider
    ones, the mean before a line); a quadratic's only where its least error
    is below that by more than the standard error of their paired
    difference over the scoring rows (the one-standard-error rule: its
    extra terms lower the error of the rows that choose it by chance as
    well as by fit). The passes need every head to read the same columns,
    so one kind for every group."""
    simple = [p for p in picks if p.family < 2]
    quadratics = [p for p in picks if p.family == 2]
    if not simple:
        return min(quadratics, key=_error_key)
    best = min(simple, key=_error_key)
    if quadratics:
        quadratic = min(quadratics, key=_error_key)
        difference, error = scoring.paired_difference(quadratic.squares, best.squares)
        if difference < -error:
            return quadratic
    return best


def _error_key(pick):
    """Sorts picks by error, a non-finite error last."""
    return (not math.isfinite(pick.error), pick.error)


class _Scoring:
    """How the options' leave-one-out estimates of ``rows`` are scored:
    per group of heads (a member's, see ``choose_readout``), the positions
    of the rows that score it, their weights and the targets' variance
    under them, the targets in units of a power of two of their own (exact,
    and their squares stay finite at any scale)."""

    def __init__(self, keys, rows, sw_rows, scored):
        xp = keys.xp
        Y_rows = xp.take(keys.Y, rows, axis=0)
        self.t = Y_rows.shape[1]
        Y_np = to_numpy(Y_rows).astype(np.float64)
        self.scale = power_of_two_scale(Y_np)
        self.Y_np = Y_np / self.scale
        groups = scored if isinstance(scored, list) else [scored]
        self.n_groups = len(groups)
        self.group_heads = keys.n_heads // self.n_groups
        self.where, self.where_x, self.sw, self.var = [], [], [], []
        for positions in groups:
            sw = _scoring_weights(sw_rows, positions)
            var = sw @ (self.Y_np - sw @ self.Y_np) ** 2
            # Only the rows that score a group need its heads' estimates.
            where = np.flatnonzero(sw > 0)
            self.where.append(where)
            self.where_x.append(xp.asarray(where, device=device(Y_rows)))
            self.sw.append(sw[where])
            self.var.append(np.where(var > 0, var, 1.0))

    def squares(self, g, heads):
        """Group ``g``'s squared errors (m,) on its scoring rows, from its
        heads' estimates (heads, m, t): of their mean, summed over the
        outputs, each relative to its variance."""
        xp = namespace_of(heads)[0]
        mean = to_numpy(xp.mean(heads, axis=0)).astype(np.float64) / self.scale
        squared = (mean - self.Y_np[self.where[g]]) ** 2 / self.var[g]
        return squared.sum(axis=1)

    def errors(self, squares):
        """The errors (options, groups): each option's weighted mean of each
        group's ``squares`` (``squares[o][g]``)."""
        return np.array(
            [[float(self.sw[g] @ sq) for g, sq in enumerate(row)] for row in squares]
        )

    def paired_difference(self, first, second):
        """The error of the rows' squared errors ``first`` (one array per
        group) less that of ``second``, and the standard error of that
        difference from the rows' paired differences."""
        total, variance = 0.0, 0.0
        for g, (a, b) in enumerate(zip(first, second)):
            delta = a - b
            mean = float(self.sw[g] @ delta)
            total += mean
            variance += float(np.sum((self.sw[g] * (delta - mean)) ** 2))
        return total, math.sqrt(variance)

    def readout(self, options, chosen):
        """The readout of the groups' ``chosen`` options: one for all, or
        one per head."""
        if len(set(chosen)) == 1:
            return options[chosen[0]]
        return tuple(options[o] for o in chosen for _ in range(self.group_heads))


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


def local_fit_kind(readout):
    """The kind of ``readout`` (a ``Readout``, or a tuple of one kind):
    ``'constant'``, ``'linear'`` or ``'quadratic'``."""
    first = readout[0] if isinstance(readout, tuple) else readout
    return ("constant", "linear", "quadratic")[_family(first)]


def local_ridges(readout):
    """The ridge of ``readout`` (a float), or of each head's for a tuple
    of readouts (a float64 array)."""
    if isinstance(readout, tuple):
        return np.array([r.ridge for r in readout], dtype=np.float64)
    return readout.ridge


def _family(readout):
    """The readout's kind, as ``_decide`` ranks them: 0 the weighted mean,
    1 a line, 2 a quadratic."""
    if readout.is_constant:
        return 0
    return 2 if readout.squares else 1


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


def _layout(num, source, target, t, keys):
    """``num``, the sums of readout ``source``'s columns, as readout
    ``target`` reads them: a line's within a quadratic's (``line_sums``),
    else as they are (the mean reads the first and last columns of
    any)."""
    if source.squares and not (target.squares or target.is_constant):
        return line_sums(num, t, keys.head_dim, xp=keys.xp)
    return num


def _estimate(readout, num, Qh, t, *, xp):
    """``readout``'s estimates from the local-linear layout's sums ``num``."""
    if readout.is_constant:
        return num[:, :t] / num[:, -1:]
    return readout.estimate(num, Qh, xp=xp)
