"""Where the embeddings of a table's codes start: each code column as one
numeric feature, its codes at their target means.

A categorical feature (or a numeric feature's "missing") starts as one
direction in each head, its codes placed along it by the mean target of
their rows (the overall mean for a code without rows). So the start is what
the numeric features get (``start.initial_projection``), on a table where
each code column is that target mean, standardised (a "missing" column in
the target's units: see ``code_positions``); a code's embedding is
then its value times the column's starting direction, and the heads' first
projections of the rows are exactly those of the dense start. The means
are not shrunk: codes whose means are equal start at one point, and a
shrinkage that merged codes of weak effect made those codes hard to tell
apart later (the user guide's "Real tables" has the comparison); codes
with too few rows for a code of their own
(``column_types.rows_for_own_code``) already share one.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np

from nwensemble._fit.start import Start, initial_projection
from nwensemble._shared.backend import device, to_numpy


def start_with_codes(
    config, previous, design, layout, Ys, sw, *, rng, xp, searches=None
):
    """The heads' ``start.Start`` for the rows of a ``Design`` whose code
    columns sit as ``layout`` (a ``features.CodeLayout``) says: parameters
    (p + n_codes, n_heads * d), float64 NumPy; ``previous`` (warm start) as
    it is; ``searches`` as ``initial_projection`` takes it."""
    if previous is not None:
        prev = to_numpy(previous).astype(np.float64)
        if prev.shape[0] != design.shape[1]:
            raise ValueError(
                "warm_start=True needs the features and levels of the previous "
                f"fit ({prev.shape[0]} parameter rows); got {design.shape[1]}. "
                "Set warm_start=False to start afresh."
            )
        return Start(prev, feature_scales=False)
    if not isinstance(config.init, str):
        raise ValueError(
            "init as an array gives the numeric features' directions only; with "
            "categorical features or missing values use init='auto', 'pca', "
            "'identity' or 'random'."
        )
    positions = code_positions(design, layout, Ys, sw)
    p = design.numeric.shape[1]
    dev = device(Ys)
    columns = []
    for j, (start, values) in enumerate(zip(layout.offsets, positions)):
        local = design.codes[:, j] - int(start)
        table = xp.asarray(values, dtype=design.dtype, device=dev)
        columns.append(xp.take(table, local, axis=0)[:, None])
    X0 = xp.concat([design.numeric] + columns, axis=1)
    dense = initial_projection(
        config,
        None,
        X0,
        Ys,
        sw,
        np.ones(X0.shape[1]),
        rng=rng,
        xp=xp,
        searches=searches,
    )
    W0 = dense.W
    rows = [W0[:p]] + [v[:, None] * W0[p + j][None, :] for j, v in enumerate(positions)]
    return Start(np.concatenate(rows, axis=0), dense.feature_scales)


def code_positions(design, layout, Ys, sw):
    """Per code column, the position of each of its codes: its target mean,
    centred over the rows (float64 NumPy arrays); a categorical column's
    standardised over the rows, a numeric feature's "missing" in units of
    the target's spread.

    A missing-value column has two codes, and standardising it would put
    the rows of the rarer one about ``1 / sqrt(share)`` apart from the
    others whatever their targets: a few missing values would start far
    from every other row and attend only to each other. In the target's
    units the distance is the missing rows' effect on the target.
    """
    Y = to_numpy(Ys).astype(np.float64)
    w = to_numpy(sw).astype(np.float64)
    w = w / w.sum()
    score = Y[:, 0] if Y.shape[1] == 1 else Y @ _first_axis(Y, w)
    score_spread = np.sqrt(w @ (score - w @ score) ** 2)
    n_categorical = len(layout.offsets) - len(layout.missing)
    codes = to_numpy(design.codes)
    out = []
    for j, (start, size) in enumerate(zip(layout.offsets, layout.n_codes)):
        c = codes[:, j] - int(start)
        if np.unique(c[w > 0]).shape[0] < 2:
            # One code on every row: a translation, nothing to place.
            out.append(np.zeros(int(size)))
            continue
        means = _code_means(c, int(size), score, w)
        column = means[c]
        center = w @ column
        spread = np.sqrt(w @ (column - center) ** 2)
        if j >= n_categorical:
            spread = score_spread
        out.append((means - center) / (spread if spread > 0 else 1.0))
    return out


def _code_means(c, size, score, w):
    """Each code's weighted mean score; the overall mean for codes without
    rows."""
    weight = np.bincount(c, weights=w, minlength=size)
    total = np.bincount(c, weights=w * score, minlength=size)
    means = np.full(size, float(w @ score))
    seen = weight > 0
    means[seen] = total[seen] / weight[seen]
    return means


def _first_axis(Y, w):
    """The unit direction of the targets' largest weighted variance."""
    Yc = Y - w @ Y
    _, vecs = np.linalg.eigh((Yc * w[:, None]).T @ Yc)
    return vecs[:, -1]
