"""``diversity='auto'``: the weight of the heads' ambiguity, chosen on the rows
that a fit holds out to stop early."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math

import numpy as np

from nwensemble._fit.early_stopping import heldout_loss
from nwensemble._shared.backend import device
from nwensemble._shared.rows import take_rows

# The values 'auto' compares: the ensemble's own objective first, then
# halfway to and at independent heads. Positive values (negative correlation
# beyond the ensemble's) are left out: see the user guide's regime map.
AUTO_CANDIDATES = (0.0, -0.5, -1.0)
# Held-out rows that score each candidate, at most (spread over the rows).
_SCORED_ROWS = 4096


def check_diversity(diversity, n_heads):
    """Raise unless ``diversity`` is below ``1 / (n_heads - 1)``.

    At that bound the objective stops charging a head for its own error
    (its mean own loss enters with weight ``(1 - delta (H - 1)) / H``).
    """
    if diversity == "auto" or n_heads < 2:
        return
    bound = 1.0 / (n_heads - 1)
    if diversity >= bound:
        raise ValueError(
            f"diversity={diversity} with n_heads={n_heads} must be below "
            f"1 / (n_heads - 1) = {bound:.4g}: at that weight the objective "
            "no longer charges a head for its own error. Use a value in "
            f"[-1, {bound:.4g}) or 'auto'."
        )


def solve_with_diversity(solve, config, W0, Xs, Ys, sw, *, rng, xp):
    """Run the solver ``solve`` with ``config.diversity``, choosing it first
    when it is ``'auto'``.

    Returns the solver's ``SolverResult`` with ``diversity`` set to the value
    used. With ``'auto'`` each of ``AUTO_CANDIDATES`` is fitted from ``W0``
    with the same random state, hence the same held-out rows (held out
    whenever ``early_stopping='auto'`` could hold any out, whatever the
    number of parameters; see ``early_stopping.hold_out_plan``); the candidate
    with the least held-out loss is kept (the first, ``0``, on a tie). A fit
    that holds no rows out (``early_stopping=False`` or too few rows) has
    nothing to choose on and uses ``0``, as does one head.
    """
    n_heads = config.n_heads
    if config.diversity != "auto" or n_heads == 1:
        value = 0.0 if config.diversity == "auto" else float(config.diversity)
        result = solve(config.replace(diversity=value), W0, Xs, Ys, sw, rng=rng, xp=xp)
        return dataclasses.replace(result, diversity=value)
    start = rng.get_state()
    fits = []
    for i, value in enumerate(AUTO_CANDIDATES):
        rng.set_state(start)
        if config.verbose:
            print(
                f"[{config.name}] diversity='auto': candidate {i + 1}/"
                f"{len(AUTO_CANDIDATES)}, diversity={value:g}",
                flush=True,
            )
        fit = solve(config.replace(diversity=value), W0, Xs, Ys, sw, rng=rng, xp=xp)
        fits.append((dataclasses.replace(fit, diversity=value), rng.get_state()))
        if fit.heldout is None:
            break
    if len(fits) == 1:
        return fits[0][0]
    losses = _heldout_losses(
        [fit for fit, _ in fits], Xs, Ys, sw, fits[0][0].heldout, config, xp
    )
    chosen = int(np.argmin(losses))
    if config.verbose:
        scores = ", ".join(
            f"{fit.diversity:g}: {loss:.6e}" for (fit, _), loss in zip(fits, losses)
        )
        print(
            f"[{config.name}] diversity='auto': held-out loss {scores}; "
            f"chose {fits[chosen][0].diversity:g}",
            flush=True,
        )
    result, state = fits[chosen]
    rng.set_state(state)
    return result


def _heldout_losses(fits, Xs, Ys, sw, heldout, config, xp):
    """Every fit's loss on (at most ``_SCORED_ROWS`` of) the held-out rows,
    predicted from the other rows (through the fit's own feature slopes
    where it learned some)."""
    held = np.zeros(Xs.shape[0], dtype=bool)
    held[heldout] = True
    step = math.ceil(heldout.shape[0] / _SCORED_ROWS)
    scored = take_rows(Xs, Ys, sw, heldout[::step], xp=xp)
    keys = take_rows(Xs, Ys, sw, np.flatnonzero(~held), xp=xp)
    losses = []
    for fit in fits:
        Xq, Xk = scored[0], keys[0]
        if fit.slopes is not None:
            Xq, Xk = fit.slopes.design(Xq), fit.slopes.design(Xk)
        losses.append(
            heldout_loss(
                xp.asarray(fit.W, dtype=Xs.dtype, device=device(Ys)),
                Xq,
                *scored[1:],
                Xk,
                *keys[1:],
                kernel=config.kernel,
                n_heads=config.n_heads,
            )
        )
    return losses
