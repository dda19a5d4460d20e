"""The fitted prediction state of an NW attention model, and every
computation on the predict side."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from scipy import sparse

from nwensemble._attention import log_weights
from nwensemble._backend import (
    fill_masked,
    move_to,
    namespace_of,
    to_numpy,
)
from nwensemble._duplicates import blend
from nwensemble._intervals import predict_interval
from nwensemble._kernels import get_kernel
from nwensemble._nw_predict import (
    iter_head_attention,
    loo_head_predictions,
    loo_spread,
    nw_predict,
    nw_predict_with_spread,
)
from nwensemble._radius_search import (
    build_support_index,
    sparse_attention,
    sparse_head_weights,
    sparse_predict,
)

# Compact kernels predict NumPy queries through the radius search from this
# many training rows on (below, the dense blocks are as fast).
SEARCH_MIN_ROWS = 4096


class NWPredictor:
    """What a fitted NW attention model predicts with.

    ``fit`` makes one; the estimators hold it as ``predictor_``. Its methods
    take query rows ``X`` that the estimator has validated and placed in the
    model's namespace and on its device (``to_model`` places other arrays
    there), and return arrays there, shaped for one output when the model
    was fitted on a 1-d target.

    Parameters
    ----------
    features : FeatureMap
        The fitted feature map (standardisation, power warp).
    W : array of shape (n_features, n_heads * head_dim)
        The heads' projections side by side, in the feature map's units.
    X : array of shape (n_samples, n_features)
        The mapped training rows.
    Y : array of shape (n_samples, n_outputs)
        The training targets.
    sample_weight : array of shape (n_samples,)
        Non-negative weights summing to one.
    kernel : str or Kernel
    n_heads : int
    single_output : bool
        Whether the target was 1-d.

    Attributes
    ----------
    kernel : Kernel
    n_heads : int
    head_weights : list of float
        The weights that combine the heads (uniform until ``fit`` sets them).
    noise_std : array of shape (n_outputs,) or None
        The noise level ``predict(return_std=True)`` scales by.
    duplicates : DuplicateIndex or None
        The training rows' copies, when their blend is on.
    duplicate_weight : float
        The blend's weight.
    support_index : list of SupportIndex or None
        A radius-search index per head, for a compact kernel.
    calibration : Calibration or None
        The leave-one-out residuals ``predict_interval`` calibrates on.
    """

    def __init__(
        self, *, features, W, X, Y, sample_weight, kernel, n_heads, single_output
    ):
        self.features = features
        self.W = W
        self.Z = X @ W
        self.Y = Y
        self.log_sw = log_weights(sample_weight, xp=namespace_of(Y)[0])
        self.kernel = get_kernel(kernel)
        self.n_heads = n_heads
        self.single_output = single_output
        self.head_weights = [1.0 / n_heads] * n_heads
        self.noise_std = None
        self.duplicates = None
        self.duplicate_weight = 0.0
        self.support_index = None
        self.calibration = None
        if self.kernel.compact:
            self.support_index = build_support_index(
                self.Z, self.log_sw, n_heads=n_heads, kernel=self.kernel
            )

    @property
    def n_samples_fit(self):
        """Number of training rows (the keys)."""
        return self.Z.shape[0]

    def to_model(self, a):
        """``a`` in the model's namespace and on its device."""
        xp, dev = namespace_of(self.Z)
        return move_to(a, xp=xp, device=dev)

    def output(self, Y):
        """``Y`` (m, t) as the fitted target's shape: (m,) for a 1-d target."""
        return Y[:, 0] if self.single_output else Y

    def project(self, X):
        """The rows ``X`` mapped and projected: (m, n_heads * head_dim)."""
        xp, _ = namespace_of(self.Z)
        return self.features.transform(X, xp=xp) @ self.W

    # ------------------------------------------------------------- prediction
    def predict(self, X, return_std=False):
        """The ensemble's estimates (and, with ``return_std``, their standard
        errors), with the copies' blend for queries that repeat training rows."""
        Q = self.project(X)
        copies = self._copies(X)
        if not return_std:
            return self.output(self._blend_copies(self._predict_projected(Q), copies))
        Y_hat, spread = nw_predict_with_spread(
            Q, *self._keys(), head_weights=self.head_weights, **self._how()
        )
        if copies is not None:
            Y_hat = self._blend_copies(Y_hat, copies)
            spread = self._blended_spread(Q, spread, copies)
        Y_std = spread[:, None] * self.noise_std[None, :]
        return self.output(Y_hat), self.output(Y_std)

    def predict_interval(self, X, *, alpha, method):
        """The predictions and their ``1 - alpha`` conformal intervals, of
        shape (m, 2) or, for several outputs, (m, t, 2); see ``_intervals``."""
        mu, offsets = predict_interval(
            self, self.project(X), alpha=alpha, method=method
        )
        # The copies' blend moves the prediction and both bounds with it.
        Y_hat = self._blend_copies(mu, self._copies(X))
        return self.output(Y_hat), self.output(Y_hat[..., None] + offsets)

    def _predict_projected(self, Q):
        """NW prediction for projected queries ``Q``. Compact kernels with
        NumPy input (the tree lives on the host) attend only to the rows the
        radius search finds."""
        use_search = (
            self.support_index is not None
            and self.n_samples_fit >= SEARCH_MIN_ROWS
            and isinstance(Q, np.ndarray)
        )
        if use_search:
            Y_hat = sparse_predict(
                Q,
                self.support_index,
                self.Y,
                n_heads=self.n_heads,
                head_weights=self.head_weights,
            )
            return Y_hat.astype(Q.dtype, copy=False)
        return nw_predict(
            Q, *self._keys(), head_weights=self.head_weights, **self._how()
        )

    def _copies(self, X):
        """``(group, found)`` of the queries' copies among the training rows,
        or None when the model does not blend them in."""
        if self.duplicates is None:
            return None
        return self.duplicates.lookup(X, xp=namespace_of(self.Z)[0])

    def _blend_copies(self, Y_hat, copies):
        """The heads' estimate with ``duplicate_weight`` of the copies' mean
        target blended in, for queries that have copies."""
        if copies is None:
            return Y_hat
        xp, _ = namespace_of(self.Z)
        group, found = copies
        M = self.duplicates.means(group, Y_hat.dtype, xp=xp)
        return blend(Y_hat, M, found, self.duplicate_weight, xp=xp)

    def _blended_spread(self, Q, spread, copies):
        """``||v(x)||`` for the blended weights of the queries with copies.

        Those queries' weights are formed explicitly, in blocks of bounded
        memory; the others keep ``spread``.
        """
        xp, _ = namespace_of(self.Z)
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
        xp, _ = namespace_of(self.Z)
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
        Q = self.project(X)
        # The copies' blend belongs to the ensemble's weights, not a head's.
        copies = self._copies(X) if head is None else None
        if self.support_index is not None and top_k is None:
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
        xp, _ = namespace_of(self.Z)
        weights = sparse_attention(
            Q,
            self.support_index,
            n_heads=self.n_heads,
            head_weights=self.head_weights,
            head=head,
            dtype=to_numpy(Q[:1, :1]).dtype,
        )
        if copies is None:
            return weights
        group, found = (to_numpy(a) for a in copies)
        copy_weights = self.duplicates.sparse_copy_weights(
            group, found, to_numpy(xp.exp(self.log_sw))
        )
        rho = self.duplicate_weight
        keep = sparse.diags_array(1.0 - rho * found.astype(np.float64))
        return sparse.csr_array(
            keep @ weights + rho * copy_weights, dtype=weights.dtype
        )

    def _ensemble_weights(self, Q, *, head=None, copies=None):
        """Dense attention of consecutive blocks of ``Q`` on the training rows:
        head ``head``'s, or the ensemble's (``head=None``) with the copies'
        blend for the queries in ``copies`` (``(group, found)`` of all ``Q``).
        Yields one (block, n_samples_fit) array per block."""
        xp, _ = namespace_of(self.Z)
        H = self.n_heads
        acc = None
        if copies is not None:
            sw = xp.exp(self.log_sw)
        for rows, h, E, num, _ in iter_head_attention(Q, *self._keys(), **self._how()):
            if head is not None and h != head:
                continue
            part = E / num[:, -1:]
            if head is None and H > 1:
                part = self.head_weights[h] * part
            acc = part if (head is not None or h == 0) else acc + part
            if head is not None or h == H - 1:
                if copies is not None:
                    group, found = (a[rows] for a in copies)
                    C = self.duplicates.copy_weights(group, found, sw, xp=xp)
                    acc = blend(acc, C, found, self.duplicate_weight, xp=xp)
                yield acc

    def support_fallback(self, Q):
        """Boolean (m, n_heads) array on the host: where each head's compact
        support held no training row for the projected queries ``Q``."""
        if self.support_index is None:
            return np.zeros((Q.shape[0], self.n_heads), dtype=bool)
        _, mask = sparse_head_weights(Q, self.support_index, n_heads=self.n_heads)
        return mask.T

    # ------------------------------------------------------------ leave-one-out
    def loo_head_predictions(self, rows):
        """Every head's leave-one-out estimates of training rows ``rows`` (an
        integer array) and the compact kernels' fallback mask: arrays of
        shape (n_heads, len(rows), t) and (n_heads, len(rows))."""
        return loo_head_predictions(*self._keys(), rows, fallback=True, **self._how())

    def loo_spread(self, rows):
        """``sum_j v_ij^2`` of the ensemble's leave-one-out weights of ``rows``."""
        return loo_spread(
            *self._keys(), rows, head_weights=self.head_weights, **self._how()
        )

    def _keys(self):
        """The training rows as the attention's keys: ``(Z, Y, log_sw)``."""
        return self.Z, self.Y, self.log_sw

    def _how(self):
        """The keywords every attention pass over the keys takes."""
        return dict(
            xp=namespace_of(self.Z)[0], n_heads=self.n_heads, kernel=self.kernel
        )


def _top_k(W, k, *, xp):
    """``W`` itself, or its ``k`` largest entries per row with their columns."""
    if k is None:
        return W
    order = xp.argsort(W, axis=1, descending=True, stable=True)[:, :k]
    return xp.take_along_axis(W, order, axis=1), order
