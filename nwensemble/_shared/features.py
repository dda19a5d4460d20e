"""The feature map: the one way in from input rows to the rows the heads
act on. It encodes the input (``table``), maps the numeric columns
(centring, scaling and an optional power transform per feature,
``standardize='power'``), fills missing values, and places the embedding
codes of categorical features and missing-value indicators (``design``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from nwensemble._shared.backend import device, namespace_of, to_numpy
from nwensemble._shared.conditional_fill import fill_missing, fit_correlation
from nwensemble._shared.design import Design
from nwensemble._shared.power_map import POWER_FIT_ROWS, fit_power, power_transform


def fit_scaling(X, w, *, standardize, xp):
    """Weighted centre and per-feature scale of ``X``, with weights ``w`` of
    shape (n, 1) or, one set per feature, (n, p), summing to one.

    The scale is the weighted standard deviation when ``standardize``, else
    one. It is computed after dividing by the column's largest magnitude, so
    features near 1e150 or 1e-150 neither overflow nor underflow; constant
    features (and subnormal spreads) get scale one.
    """
    center = xp.sum(w * X, axis=0)
    Xc = X - center
    if not standardize:
        return center, xp.ones_like(center)
    # A feature counts as constant when its spread is rounding noise of its
    # magnitude, or subnormal (not invertible into finite components_).
    max_abs = xp.max(xp.abs(Xc), axis=0)
    magnitude = xp.max(xp.abs(X), axis=0)
    eps = float(xp.finfo(X.dtype).eps)
    tiny = float(xp.finfo(X.dtype).smallest_normal)
    varies = (max_abs >= tiny) & (max_abs > 100 * eps * magnitude)
    max_abs = xp.where(varies, max_abs, xp.ones_like(max_abs))
    Xn = Xc / max_abs
    std = xp.sqrt(xp.sum(w * Xn * Xn, axis=0))
    std = xp.where(varies & (std > 0), std, xp.ones_like(std))
    return center, std * max_abs


@dataclass(frozen=True, eq=False)
class CodeLayout:
    """Where a table's code columns sit in the embedding block.

    Attributes
    ----------
    offsets : ndarray of int
        First embedding row of each code column: the categorical columns
        (in input order), then one column per numeric feature in
        ``missing`` (codes 0 observed, 1 missing).
    n_codes : ndarray of int
        Embedding rows of each code column.
    missing : ndarray of int
        Numeric features (positions in the numeric block) that had missing
        values in training: their "missing" has an embedding.
    observed : ndarray of bool
        Numeric features with at least one training value; the others are
        always at 0 (their values carry nothing the fit saw).
    is_categorical : ndarray of bool
        Which input features are categorical (the others are the numeric
        block, in order).
    """

    offsets: np.ndarray
    n_codes: np.ndarray
    missing: np.ndarray
    observed: np.ndarray
    is_categorical: np.ndarray

    @property
    def total(self):
        """Rows of the embedding block."""
        return int(self.n_codes.sum())


@dataclass(frozen=True, eq=False)
class FeatureMap:
    """Fitted map from input rows to the rows the heads act on: the one way
    in for every kind of input, at fit and at prediction.

    ``encoder`` reads the validated input as a ``Table`` (a ``TableEncoder``
    for a table with categorical features or missing values at fit, else
    ``NumberColumns``). The numeric columns are then mapped:
    ``standardize=False`` centres them, ``True`` also scales them to unit
    weighted variance, ``'power'`` applies a per-feature power transform
    first (Box-Cox for positive features, Yeo-Johnson for the others, see
    ``power_map.fit_power``); every map is independent of the features'
    units. A missing value sits at its conditional mean given the row's
    observed features (``correlation``, see ``conditional_fill``), and
    ``codes`` (a ``CodeLayout``, None for numbers only) places the
    categorical codes and the missing-value indicators in the embedding
    block. Last, ``slopes`` (a ``feature_slopes.FeatureSlopes``, None for
    none) maps each filled numeric feature through its learned monotone
    piecewise-linear map. ``rows`` returns a ``Design``.
    """

    encoder: Any
    power: Optional[tuple]
    center: Any
    scale: Any
    codes: Optional[CodeLayout] = None
    correlation: Any = None
    slopes: Any = None

    @property
    def is_linear(self):
        return self.power is None and self.slopes is None

    @property
    def takes_tables(self):
        """Whether queries are tables to encode (as given) rather than
        floating arrays."""
        return self.encoder.takes_tables

    def components(self, W, n_heads):
        """``components_``: the numeric rows of ``W`` (p + codes, n_heads *
        d) per head and transposed, in the input's units when the map is
        linear, with zero columns for categorical features: (n_heads, d,
        n_features)."""
        xp, _ = namespace_of(W)
        p = self.center.shape[0]
        Wn = W[:p, :] / self.scale[:, None] if self.is_linear else W[:p, :]
        if self.codes is not None:
            Wn = _spread_rows(Wn, self.codes.is_categorical, xp=xp)
        return xp.reshape(Wn.T, (n_heads, -1, Wn.shape[0]))

    def embeddings(self, W, n_heads):
        """Per code column, its embedding rows of ``W`` as (n_heads, codes,
        d): the categorical columns, then the numeric features in
        ``codes.missing``."""
        xp, _ = namespace_of(W)
        p = self.center.shape[0]
        out = []
        for start, size in zip(self.codes.offsets, self.codes.n_codes):
            rows = W[p + int(start) : p + int(start) + int(size), :]
            out.append(
                xp.permute_dims(xp.reshape(rows, (size, n_heads, -1)), (1, 0, 2))
            )
        return out

    def rows(self, X):
        """Validated input rows ``X`` (a floating array in the map's
        namespace and on its device, or a table as given when
        ``takes_tables``) as the ``Design`` the heads act on."""
        xp, dev = namespace_of(self.center)
        table = self.encoder.encode(X, xp=xp, device=dev, dtype=self.center.dtype)
        return self.design(table)

    def design(self, table):
        """An encoded ``Table`` as a ``Design``: numeric columns mapped and
        filled (``numeric_block``), codes placed in the embedding block."""
        xp, dev = namespace_of(self.center)
        N, valid = self.numeric_block(table.numeric)
        layout = self.codes
        if layout is None:
            return Design(N, table.codes, 0, source=table)
        codes = [table.codes[:, j] for j in range(table.codes.shape[1])]
        for j in layout.missing.tolist():
            codes.append(xp.astype(~valid[:, j], table.codes.dtype))
        if not codes:  # numbers only, the missing ones in never-observed columns
            return Design(N, table.codes, layout.total, source=table)
        offsets = xp.asarray(layout.offsets, dtype=table.codes.dtype, device=dev)
        C = xp.stack(codes, axis=1) + offsets[None, :]
        return Design(N, C, layout.total, source=table)

    def numeric_block(self, N):
        """The numeric columns ``N`` (NaN where missing) mapped, each missing
        value (or value of a feature never observed in training) at its
        conditional mean given the row's observed ones; and where the
        values were used (``valid``). The one place missing values are
        filled."""
        xp, dev = namespace_of(self.center)
        valid = ~xp.isnan(N)
        if self.codes is not None:
            valid = valid & xp.asarray(self.codes.observed, device=dev)
        # Filled with the normaliser: finite, and harmless to either warp.
        fill = self.power[1] if self.power is not None else self.center
        mapped = self.transform(xp.where(valid, N, fill))
        filled = fill_missing(mapped, valid, self.correlation, xp=xp)
        if self.slopes is not None:
            filled = self.slopes.apply(filled)
        return filled, valid

    def transform(self, N):
        """The map of complete numeric columns ``N``."""
        xp, _ = namespace_of(self.center)
        if self.power is not None:
            N = power_transform(N, self.power, xp=xp)
        return (N - self.center) / self.scale


def _spread_rows(rows, is_categorical, *, xp):
    """``rows`` (one per numeric feature) among all features' rows, zeros
    for the categorical ones."""
    zero = xp.zeros((1, rows.shape[1]), dtype=rows.dtype, device=device(rows))
    numeric = iter(range(rows.shape[0]))
    parts = [zero if cat else rows[next(numeric), :][None, :] for cat in is_categorical]
    return xp.concat(parts, axis=0)


def fit_feature_map(table, encoder, sw, *, standardize, rng, xp):
    """The ``FeatureMap`` of training rows ``table`` (``encoder.encode``'s
    output) with weights ``sw``, and the rows as its ``Design``."""
    if encoder.takes_tables:
        return _fit_table_map(table, encoder, sw, standardize, rng, xp)
    X = table.numeric
    power = None
    if standardize == "power":
        power = _device_power(fit_power(X, sw, rng=rng), X, xp)
        X = power_transform(X, power, xp=xp)
    center, scale = fit_scaling(X, sw[:, None], standardize=bool(standardize), xp=xp)
    mapped = (X - center) / scale
    # Only rows at prediction can have missing values here.
    correlation = fit_correlation(mapped, None, sw, xp=xp)
    features = FeatureMap(encoder, power, center, scale, None, correlation)
    return features, Design(mapped, table.codes, 0, source=table)


def _device_power(params, X, xp):
    """Power-transform parameters (NumPy) on ``X``'s device and dtype."""
    boxcox, norm, lower, lam = params
    dev = device(X)
    return (
        xp.asarray(boxcox, device=dev),
        xp.asarray(norm, dtype=X.dtype, device=dev),
        xp.asarray(lower, dtype=X.dtype, device=dev),
        xp.asarray(lam, dtype=X.dtype, device=dev),
    )


def _fit_table_map(table, encoder, sw, standardize, rng, xp):
    N = table.numeric
    dev = device(N)
    valid = ~xp.isnan(N)
    valid_np = to_numpy(valid)
    observed = np.any(valid_np & (to_numpy(sw)[:, None] > 0), axis=0)
    missing = np.flatnonzero(~np.all(valid_np, axis=0) & observed)
    valid = valid & xp.asarray(observed, device=dev)
    # Each feature's weights over the rows where it is observed.
    w = sw[:, None] * xp.astype(valid, N.dtype)
    total = xp.sum(w, axis=0)
    w = w / xp.where(total > 0, total, xp.ones_like(total))
    filled = xp.where(valid, N, xp.zeros_like(N))
    power = None
    if standardize == "power":
        power = _device_power(_fit_power_observed(N, valid_np, sw, rng), N, xp)
        filled = power_transform(xp.where(valid, N, power[1]), power, xp=xp)
    mean = xp.sum(w * xp.where(valid, filled, xp.zeros_like(N)), axis=0)
    filled = xp.where(valid, filled, mean)
    center, scale = fit_scaling(filled, w, standardize=bool(standardize), xp=xp)
    n_codes = list(table.n_codes) + [2] * missing.shape[0]
    is_categorical = np.asarray(table.is_categorical, dtype=bool)
    sizes = np.asarray(n_codes, dtype=np.int64)
    layout = CodeLayout(
        np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
        sizes,
        missing,
        observed,
        is_categorical,
    )
    standardised = xp.where(valid, (filled - center) / scale, xp.zeros_like(N))
    correlation = fit_correlation(standardised, valid, sw, xp=xp)
    features = FeatureMap(encoder, power, center, scale, layout, correlation)
    return features, features.design(table)


def _fit_power_observed(N, valid, sw, rng):
    """``fit_power`` on each feature's observed rows (NumPy parameters)."""
    N = to_numpy(N).astype(np.float64)
    sw = to_numpy(sw).astype(np.float64)
    p = N.shape[1]
    boxcox, norm, lower, lam = (
        np.zeros(p, dtype=bool),
        np.ones(p),
        np.zeros(p),
        np.ones(p),
    )
    observed = valid & (sw > 0)[:, None]
    # Features observed on the same rows share one call (its grid search
    # runs on them side by side); one that ``fit_power`` subsamples keeps a
    # call, and its draw, of its own.
    groups = {}
    for j in range(p):
        n_rows = int(observed[:, j].sum())
        if n_rows < 2:
            continue
        key = observed[:, j].tobytes() if n_rows <= POWER_FIT_ROWS else j
        groups.setdefault(key, []).append(j)
    for columns in groups.values():
        rows = observed[:, columns[0]]
        b, g, lo, la = fit_power(N[np.ix_(rows, columns)], sw[rows], rng=rng)
        boxcox[columns], norm[columns], lower[columns], lam[columns] = b, g, lo, la
    return boxcox, norm, lower, lam
