"""A lever for issue 66, measured: the finer slopes map after Adam.

Every variant, the default included, runs with
``solvers.AUTO_ADAM_ROWS_HEADS`` (the switch of one head with slopes,
4096) at ``ROWS`` (2048), so that above 2048 rows the recommended start's
first stage is fitted by Adam,
which learns the coarse slopes map (``feature_slopes.JointSlopes``: 8 bins
within ``exp(+-1)``) within its minibatch steps; the finer map that the
full-batch path tries (``feature_slopes.continue_with_slopes``) is never
tried there. ``finer after Adam`` (a patch on the engine's ``_with_slopes``)
tries it: where some of Adam's coarse log-slopes ended at their upper bound
(a steeper slope wanted, as a jump of the target within a bin asks), the
finer map (``FINE_BINS`` bins within ``exp(+-FINE_MAX_LOG_SLOPE)``) is
continued by L-BFGS on at most ``ROWS`` (2048) of Adam's training rows,
from Adam's projection and, in each fine bin, the coarse log-slope of the
bin that holds its middle, stopped on the rows Adam held out. Its
projection then takes the factor on its scale that Adam's final factor
would (``adam._calibrate_scale``: the held-out rows attending to all
training rows), both maps predict the held-out rows from all training
rows, and the finer one is kept only where their squared errors are lower
by more than two paired standard errors (``paired_rule``). ``short`` is
the same with the continuation stopped after 10 iterations and its scale
left as the continuation ends it (judged, as it is, against all training
rows); ``on 1024 rows`` the full continuation on at most 1024 of Adam's
rows instead of ``ROWS``. ``default`` is the recommended start as the
library fits it but for the switch.

Sections as ``_variant_table`` prints them: ``synthetic`` (the problems of
``bench_interactions.py``; give ``--rows 6000`` for fits by Adam) and
``numeric`` (the shared numeric tables on the folds of
``bench_accuracy.py``; those of more than 2048 training rows are fitted by
Adam). This is a measurement script: it patches private modules.

Run: ``python benchmarks/levers/bench_finer_after_adam.py [--sections
synthetic numeric] [--rows 6000] [--seeds 2] [--sets abalone ...]``
"""

import contextlib
import dataclasses
import functools
from unittest import mock

import _variant_table as table
import numpy as np

from nwensemble._fit import adam, engine, feature_slopes, solvers
from nwensemble._fit.early_stopping import heldout_residuals
from nwensemble._fit.paired_rule import paired_gain_is_clear
from nwensemble._fit.precision import loss_rows
from nwensemble._shared.backend import to_numpy
from nwensemble._shared.rows import take_rows

WITH_SLOPES = engine._with_slopes
# Where Adam takes over one head with slopes, and the most rows the
# continuation after it fits on.
ROWS = 2048


def finer_after_adam(config, fitted, X, Y, sw, *, rng, xp, short=False, rows=ROWS):
    """``engine._with_slopes`` with the finer map tried after Adam (see the
    module's docstring); the library's own for a full-batch member. With
    ``short``, the continuation stops after 10 iterations and its scale is
    not calibrated; ``rows`` is the most rows it continues on."""
    if fitted.slopes is None:
        return WITH_SLOPES(config, fitted, X, Y, sw, rng=rng, xp=xp)
    coarse = fitted.slopes
    log_coarse = np.log(to_numpy(coarse.slope).astype(np.float64))
    upper = feature_slopes.MAX_LOG_SLOPE * (1.0 - 1e-6)
    if fitted.heldout is None or not np.any(log_coarse >= upper):
        return fitted, coarse
    fit_rows, val_rows = feature_slopes._rows(fitted.heldout, sw, rng=rng)
    if fit_rows is None:
        return fitted, coarse
    fit_rows = np.sort(rng.permutation(fit_rows)[:rows])
    Xc, Yc, swc = take_rows(X, Y, sw, fit_rows, xp=xp)
    Xl, Yl, swl = loss_rows(Xc, Yc, swc, xp=xp)
    key_rows = np.setdiff1d(np.flatnonzero(to_numpy(sw) > 0), fitted.heldout)
    n_keys = key_rows.shape[0]
    Xq, Yq, swq = loss_rows(*take_rows(X, Y, sw, val_rows, xp=xp), xp=xp, n_rows=n_keys)
    Xk, Yk, swk = loss_rows(*take_rows(X, Y, sw, key_rows, xp=xp), xp=xp, n_rows=n_keys)
    W0 = np.asarray(fitted.W, dtype=np.float64)
    fine = feature_slopes.identity_slopes(
        Xc.numeric, swc, xp=xp, n_bins=feature_slopes.FINE_BINS
    )
    objective = feature_slopes.SlopesObjective.of(
        fine, (Xl, Yl, swl), W0.shape, config, diversity=fitted.diversity
    )
    start = np.concatenate([W0.ravel(), _coarse_at(coarse, log_coarse, fine).ravel()])
    theta = feature_slopes._minimised(
        objective,
        start,
        (Xq, Yq, swq),
        config.replace(max_iter=min(config.max_iter, 10)) if short else config,
        bound=feature_slopes.FINE_MAX_LOG_SLOPE,
    )
    W, slope = objective.split(theta)
    fine = dataclasses.replace(fine, slope=xp.astype(slope, fine.low.dtype))
    if not short:
        W = adam._calibrate_scale(
            xp.astype(W, Xk.dtype),
            (fine.astype(Xq.dtype).design(Xq), Yq, swq),
            (fine.astype(Xk.dtype).design(Xk), Yk, swk),
            n_heads=config.n_heads,
            kernel=config.kernel,
        )
    errors = []
    for slopes, projection in ((coarse, W0), (fine, W)):
        slopes = slopes.astype(Xk.dtype)
        R = heldout_residuals(
            xp.asarray(projection, dtype=Xk.dtype),
            slopes.design(Xq),
            Yq,
            slopes.design(Xk),
            Yk,
            swk,
            kernel=config.kernel,
            n_heads=config.n_heads,
        )
        errors.append(np.sum(to_numpy(R).astype(np.float64) ** 2, axis=1))
    if not paired_gain_is_clear(*errors, to_numpy(swq).astype(np.float64)):
        return fitted, coarse
    return dataclasses.replace(fitted, W=to_numpy(W).astype(np.float64)), fine


def _coarse_at(coarse, log_coarse, fine):
    """The coarse map's log-slope (p, fine bins) in the bin of each fine
    bin's middle."""
    low = to_numpy(coarse.low).astype(np.float64)
    fine_low = to_numpy(fine.low).astype(np.float64)
    middle = fine_low + 0.5 * to_numpy(fine.width).astype(np.float64)
    out = np.empty_like(middle)
    for j in range(middle.shape[0]):
        b = np.searchsorted(low[j], middle[j], side="right") - 1
        out[j] = log_coarse[j, np.clip(b, 0, low.shape[1] - 1)]
    return out


@contextlib.contextmanager
def patched(name):
    """The recommended start's fit, one head on Adam from ``ROWS`` rows, with
    the finer map after Adam (the library's own continuation for
    ``'default'``)."""
    if name == "finer after Adam":
        engine._with_slopes = finer_after_adam
    elif name == "short":
        engine._with_slopes = functools.partial(finer_after_adam, short=True)
    elif name == "on 1024 rows":
        engine._with_slopes = functools.partial(finer_after_adam, rows=1024)
    try:
        with mock.patch.object(solvers, "AUTO_ADAM_ROWS_HEADS", ROWS):
            yield
    finally:
        engine._with_slopes = WITH_SLOPES


if __name__ == "__main__":
    table.main_patched(__doc__, ["finer after Adam", "short", "on 1024 rows"], patched)
