"""The fitted attributes every NW estimator sets from its fit: the
projections, the solver's record, the leave-one-out predictions and the
intervals' calibration, and those that describe a table's categorical
features and missing values (the levels seen, where the heads put them)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble._fit.local_fit import local_fit_kind, local_ridges
from nwensemble._shared.backend import device, namespace_of


def fitted_attributes(fitted, predictor, loo, *, single_head):
    """The fitted attributes shared by the estimators (see their
    docstrings), as a dict, from ``fitted`` (``engine.FittedHeads``), the
    ``predictor`` built from it and the combined leave-one-out predictions
    ``loo``; ``single_head``: ``components_`` of one head, 2-d."""
    n_heads = fitted.keys.n_heads
    C = fitted.features.components(fitted.W, n_heads)
    counts = fitted.loo.fallback_counts
    combination = predictor.combination
    calibration = combination.calibration
    return dict(
        components_=C[0, ...] if single_head else C,
        **table_attributes(
            fitted.features, fitted.W, n_heads=n_heads, single_head=single_head
        ),
        n_support_fallback_=int(counts[0]) if single_head else counts,
        n_iter_=fitted.solver.n_iter,
        n_fev_=fitted.solver.n_fev,
        loss_curve_=fitted.solver.loss_curve,
        duplicate_weight_=combination.duplicate_weight,
        local_fit_=local_fit_kind(fitted.keys.readout),
        local_ridge_=local_ridges(fitted.keys.readout),
        loo_prediction_=predictor.output(loo),
        calibration_rows_=predictor.to_model(calibration.rows[calibration.calibration]),
        calibration_residuals_=predictor.output(calibration.held_out_residuals()),
    )


def table_attributes(features, W, *, n_heads, single_head):
    """``is_categorical_``, ``categories_``, ``infrequent_categories_``,
    ``embeddings_`` and ``missing_embeddings_`` of a fit (see the
    estimators' docstrings) as a dict; the empty values without a table."""
    encoder = features.encoder
    if not features.takes_tables:
        return dict(
            is_categorical_=None,
            categories_=[],
            infrequent_categories_=[],
            embeddings_=[],
            missing_embeddings_=None,
        )
    xp, _ = namespace_of(W)
    blocks = features.embeddings(W, n_heads)
    n_cat = len(encoder.levels)
    embeddings = []
    for block, order in zip(blocks[:n_cat], encoder.code_order()):
        L = order.shape[0]
        rows = list(order.tolist()) + [L, L + 1]
        index = xp.asarray(rows, device=device(W))
        block = xp.take(block, index, axis=1)
        embeddings.append(block[0, ...] if single_head else block)
    categories = encoder.categories()
    return dict(
        is_categorical_=encoder.is_categorical,
        categories_=[frequent for frequent, _ in categories],
        infrequent_categories_=[infrequent for _, infrequent in categories],
        embeddings_=embeddings,
        missing_embeddings_=_missing_embeddings(
            features, blocks[n_cat:], encoder.is_categorical, W, n_heads, single_head
        ),
    )


def _missing_embeddings(features, blocks, is_categorical, W, n_heads, single_head):
    """(n_heads, d, n_features): each numeric feature's "missing" embedding
    less its "observed" one (where a missing value sits relative to a value
    at its conditional mean); zeros for the other features."""
    xp, _ = namespace_of(W)
    d = W.shape[1] // n_heads
    zero = xp.zeros((n_heads, d), dtype=W.dtype, device=device(W))
    by_feature = {}
    numeric = [j for j, cat in enumerate(is_categorical) if not cat]
    for position, block in zip(features.codes.missing.tolist(), blocks):
        by_feature[numeric[position]] = block[:, 1, :] - block[:, 0, :]
    columns = [by_feature.get(j, zero) for j in range(len(is_categorical))]
    out = xp.stack(columns, axis=2)
    return out[0, ...] if single_head else out
