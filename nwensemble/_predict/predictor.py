"""The fitted model as a value: what an NW attention model predicts with,
and every computation on the predict side."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from nwensemble._predict.bvc import bvc_parts
from nwensemble._predict.intervals import local_scale, predict_interval
from nwensemble._shared.backend import fill_masked, move_to, namespace_of, to_numpy
from nwensemble._shared.duplicates import blend
from nwensemble._shared.keys import Keys
from nwensemble._shared.passes import over_heads
from nwensemble._shared.radius_search import sparse_attention


@dataclass(frozen=True, eq=False)
class NWPredictor:
    """What a fitted NW attention model predicts with.

    ``fit`` builds one in a single statement at its end, and nothing changes
    it afterwards; the estimators hold it as ``predictor_``. Its methods take
    query rows ``X`` that the estimator has validated (a floating array in
    the model's namespace and on its device, or a table as given when
    ``features.takes_tables``; ``to_model`` places other arrays there) and
    return arrays there, shaped for one output when the model was fitted
    on a 1-d target.

    Attributes
    ----------
    features : FeatureMap
        The fitted feature map: the encoding of a table's columns, the
        standardisation and power warp, the missing values' fill.
    W : array of shape (n_features, n_heads * head_dim)
        The heads' projections side by side, in the feature map's units.
    keys : Keys
        The training rows as the attention's keys (projected by ``W``), with
        the kernel's search index.
    combination : HeadCombination
        How the heads combine: head weights, noise level, the intervals'
        calibration and the copies' blend.
    single_output : bool
        Whether the target was 1-d.
    """

    features: Any
    W: Any
    keys: Keys
    combination: Any
    single_output: bool

    @property
    def n_heads(self):
        """Number of heads."""
        return self.keys.n_heads

    @property
    def n_samples_fit(self):
        """Number of training rows (the keys)."""
        return self.keys.n_samples

    @property
    def sparse_weights(self):
        """Whether ``attention_weights`` returns all the weights as a sparse
        array on the host (see ``Kernel.gives_sparse_weights``)."""
        return self.keys.kernel.gives_sparse_weights(self.keys)

    def to_model(self, a):
        """``a`` in the model's namespace and on its device."""
        xp, dev = namespace_of(self.keys.Z)
        return move_to(a, xp=xp, device=dev)

    def output(self, Y):
        """``Y`` (m, t, ...) as the fitted target's shape: (m, ...) for a 1-d
        target."""
        return Y[:, 0, ...] if self.single_output else Y

    def project(self, X):
        """The rows ``X`` through the feature map and projected: (m,
        n_heads * head_dim)."""
        return self.features.rows(X).project(self.W)

    def _queries(self, X, *, copies=True):
        """``X`` projected, and (with ``copies``) its copies among the
        training rows (see ``_copies``)."""
        rows = self.features.rows(X)
        return rows.project(self.W), self._copies(rows) if copies else None

    # ------------------------------------------------------------- prediction
    def predict(self, X, return_std=False):
        """The ensemble's estimates (and, with ``return_std``, their standard
        errors), with the copies' blend for queries that repeat training rows."""
        Q, copies = self._queries(X)
        passes = self.keys.passes()
        alpha = self.combination.head_weights
        if not return_std:
            return self.output(self._blend_copies(passes.estimates(Q, alpha), copies))
        Y_hat, sq = passes.estimates_and_squared_spread(Q, alpha)
        spread = self.keys.xp.sqrt(sq)
        if copies is not None:
            Y_hat = self._blend_copies(Y_hat, copies)
            spread = self._blended_spread(Q, spread, copies)
        Y_std = spread[:, None] * self.combination.noise_std[None, :]
        return self.output(Y_hat), self.output(Y_std)

    def predict_interval(self, X, *, alpha, method):
        """The predictions and their ``1 - alpha`` conformal intervals, of
        shape (m, 2) or, for several outputs, (m, t, 2); see ``intervals``."""
        Q, copies = self._queries(X)
        mu, offsets = predict_interval(
            self.keys, self.combination, Q, alpha=alpha, method=method
        )
        # The copies' blend moves the prediction and both bounds with it.
        Y_hat = self._blend_copies(mu, copies)
        return self.output(Y_hat), self.output(Y_hat[..., None] + offsets)

    def local_error_scale(self, X):
        """The local error scale of the adaptive intervals (see
        ``intervals.local_scale``) at the queries ``X`` and at the
        calibration rows (each left out of its own), shaped as the fitted
        target."""
        at_queries, at_rows = local_scale(
            self.keys,
            self.combination,
            self.project(X),
            self.combination.calibration.positions(),
        )
        return self.output(at_queries), self.output(at_rows)

    def bvc(self, Z, Y, weights, *, n_resamples, rng, n_jobs=None, F=None):
        """The bias-variance-covariance parts of the heads on projected rows
        ``Z`` (n, n_heads * head_dim) with targets ``Y`` (n, t), resampled
        with ``weights`` (see ``bvc.bvc_parts``)."""
        rows = Keys.of(
            Z,
            Y,
            weights,
            kernel=self.keys.kernel,
            n_heads=self.n_heads,
            readout=self.keys.readout,
        )
        return bvc_parts(
            rows, weights, n_resamples=n_resamples, rng=rng, n_jobs=n_jobs, F=F
        )

    def _copies(self, rows):
        """``(group, found)`` of the copies of the query ``rows`` (a
        ``Design``) among the training rows, or None when the model does not
        blend them in."""
        if self.combination.duplicates is None:
            return None
        return self.combination.duplicates.lookup(rows.copy_key(), xp=self.keys.xp)

    def _blend_copies(self, Y_hat, copies):
        """The heads' estimate with ``duplicate_weight`` of the copies' mean
        target blended in, for queries that have copies."""
        if copies is None:
            return Y_hat
        xp = self.keys.xp
        group, found = copies
        M = self.combination.duplicates.means(group, Y_hat.dtype, xp=xp)
        return blend(Y_hat, M, found, self.combination.duplicate_weight, xp=xp)

    def _blended_spread(self, Q, spread, copies):
        """``||v(x)||`` for the blended weights of the queries with copies.

        Those queries' weights are formed explicitly, in blocks of bounded
        memory; the others keep ``spread``.
        """
        xp = self.keys.xp
        group, found = copies
        rows = xp.nonzero(found)[0]
        if rows.shape[0] == 0:
            return spread
        parts = [
            xp.sqrt(xp.sum(weights * weights, axis=1))
            for weights in self._ensemble_weights(
                xp.take(Q, rows, axis=0),
                copies=(xp.take(group, rows), xp.take(found, rows)),
            )
        ]
        return fill_masked(
            found, xp.astype(xp.concat(parts), spread.dtype), spread, xp=xp
        )

    # ------------------------------------------------------------- attention
    def attention_weights(self, X, head=None, top_k=None):
        """The weights of the queries on the training rows: dense, sparse
        (compact kernels, all weights) or the ``top_k`` largest with their
        rows; see the estimators' ``attention_weights``."""
        xp = self.keys.xp
        H = self.n_heads
        n_fit = self.n_samples_fit
        if head is not None and not (
            isinstance(head, (int, np.integer)) and 0 <= head < H
        ):
            raise ValueError(
                f"head must be None or an int in [0, {H - 1}]; got {head!r}."
            )
        if top_k is not None and not (
            isinstance(top_k, (int, np.integer)) and 1 <= top_k <= n_fit
        ):
            raise ValueError(
                f"top_k must be None or an int in [1, {n_fit}] (the training rows); "
                f"got {top_k!r}."
            )
        # The copies' blend belongs to the ensemble's weights, not a head's.
        Q, copies = self._queries(X, copies=head is None)
        if top_k is None and self.sparse_weights:
            return self._sparse_attention(Q, head, copies)
        blocks = [
            _top_k(weights, top_k, xp=xp)
            for weights in self._ensemble_weights(Q, head=head, copies=copies)
        ]
        if top_k is None:
            return blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0)
        weights = xp.concat([b[0] for b in blocks], axis=0)
        indices = xp.concat([b[1] for b in blocks], axis=0)
        return weights, indices

    def _sparse_attention(self, Q, head, copies):
        """A compact kernel's weights as a CSR array on the host."""
        xp = self.keys.xp
        weights = sparse_attention(
            Q,
            self.keys.support_index,
            n_heads=self.n_heads,
            head_weights=self.combination.head_weights,
            head=head,
            dtype=to_numpy(Q[:1, :1]).dtype,
        )
        if copies is None:
            return weights
        group, found = (to_numpy(a) for a in copies)
        copy_weights = self.combination.duplicates.sparse_copy_weights(
            group, found, to_numpy(xp.exp(self.keys.log_sw))
        )
        rho = self.combination.duplicate_weight
        keep = sparse.diags_array(1.0 - rho * found.astype(np.float64))
        return sparse.csr_array(
            keep @ weights + rho * copy_weights, dtype=weights.dtype
        )

    def _ensemble_weights(self, Q, *, head=None, copies=None):
        """Dense attention of consecutive blocks of ``Q`` on the training rows:
        head ``head``'s, or the ensemble's (``head=None``) with the copies'
        blend for the queries in ``copies`` (``(group, found)`` of all ``Q``).
        Yields one (block, n_samples_fit) array per block."""
        xp = self.keys.xp
        alpha = self.combination.head_weights
        several = head is None and self.n_heads > 1
        if copies is not None:
            sw = xp.exp(self.keys.log_sw)

        def weights(block):
            if head is not None and block.h != head:
                return None
            part = block.weights()
            return alpha[block.h] * part if several else part

        for rows, acc in over_heads(Q, self.keys, weights):
            if copies is not None:
                group, found = (a[rows] for a in copies)
                C = self.combination.duplicates.copy_weights(group, found, sw, xp=xp)
                acc = blend(acc, C, found, self.combination.duplicate_weight, xp=xp)
            yield acc

    def support_fallback(self, Q):
        """Boolean (m, n_heads) array on the host: where each head's compact
        support held no training row for the projected queries ``Q``."""
        return self.keys.kernel.support_fallback(Q, self.keys)


def _top_k(W, k, *, xp):
    """``W`` itself, or its ``k`` largest entries per row with their columns."""
    if k is None:
        return W
    order = xp.argsort(W, axis=1, descending=True, stable=True)[:, :k]
    return xp.take_along_axis(W, order, axis=1), order
