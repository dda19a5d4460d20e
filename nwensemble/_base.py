"""Shared machinery of the Nadaraya-Watson attention regressors."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from nwensemble._backend import (
    compute_namespace,
    device,
    fill_masked,
    get_namespace,
    like_input,
    move_to,
    namespace_of,
    same_namespace_or_raise,
    to_host,
    to_numpy,
    where,
)
from nwensemble._duplicates import DuplicateIndex, blend, fit_duplicate_weight
from nwensemble._features import FeatureMap
from nwensemble._fitting import (
    fit_projection,
    initial_projection,
    scaled_targets,
)
from nwensemble._kernels import KERNEL_DEGREES, kernel_degree
from nwensemble._nw_math import (
    _log_weights,
    iter_head_attention,
    loo_head_predictions,
    loo_spread,
    nw_predict,
    nw_predict_with_spread,
)
from nwensemble._radius_search import (
    build_support_index,
    sparse_attention,
    sparse_predict,
)
from nwensemble._scaling import power_of_two_scale
from nwensemble._stochastic import fit_projection_adam

# solver="auto" trains with Adam on minibatches above this many rows: full
# leave-one-out L-BFGS costs O(n^2) per evaluation, and beyond this one head
# reaches the same accuracy sooner with Adam (benchmarks/bench_fit_time.py,
# section solver).
AUTO_ADAM_ROWS = 10_000
# Several heads take Adam from here on: full-batch L-BFGS over all rows
# (their only schedule) then takes longer than Adam and ends less accurate
# (same benchmark).
AUTO_ADAM_ROWS_HEADS = 4096
# Leave-one-out statistics after fit use at most this many query rows.
LOO_STATS_ROWS = 2048
# Compact kernels predict NumPy queries through the radius search from this
# many training rows on (below, the dense blocks are as fast).
SEARCH_MIN_ROWS = 4096


class BaseNWRegressor(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, BaseEstimator
):
    """Base class for NW attention regressors; not for direct use.

    Holds the parameters every estimator shares, input validation, feature
    standardisation, chunked prediction and ``transform``. Subclasses implement
    ``fit`` and set ``components_`` plus the private fitted state that
    ``_predict_projected`` reads.
    """

    # Whether components_ is (head_dim, n_features) rather than 3-D.
    _single_head = False

    _parameter_constraints: dict = {
        "head_dim": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(KERNEL_DEGREES))],
        "init": [StrOptions({"auto", "pca", "identity", "random"}), "array-like"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"auto", "lbfgs", "adam"})],
        "batch_size": [
            Interval(Integral, 2, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "standardize": ["boolean", StrOptions({"power"})],
        "duplicate_weight": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="both")],
        "warm_start": ["boolean"],
        "callback": [callable, None],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __getstate__(self):
        """Pickle with every fitted array on the host, as NumPy.

        A model fitted on a GPU (or on any array-API device) then loads where
        CuPy or that device is absent, and predicts NumPy input exactly as it
        predicted on the device (to predict on the GPU again, fit there).
        """
        return to_host(super().__getstate__())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # With device='cpu' or 'cuda' the fitted arrays live on that device,
        # not beside the input, which scikit-learn's array-API checks expect.
        tags.array_api_support = getattr(self, "device", "auto") == "auto"
        return tags

    @property
    def _n_features_out(self):
        """Width of ``transform``'s output (for ``get_feature_names_out``)."""
        C = self.components_
        return C.shape[0] if C.ndim == 2 else C.shape[0] * C.shape[1]

    # ------------------------------------------------------------------ fit helpers
    def _validate_training_data(self, X, y, sample_weight):
        """Validate ``fit`` input; return namespace, device and arrays on it.

        Returns ``xp, device, X, Y, sw`` with ``Y`` of shape (n, t) in the dtype of
        ``X`` and ``sw`` non-negative weights that sum to one.
        """
        xp, _ = get_namespace(X)
        X, y = validate_data(
            self,
            X,
            y,
            dtype=(xp.float64, xp.float32),
            multi_output=True,
            y_numeric=True,
            ensure_min_samples=2,
        )
        xp, dev = get_namespace(X)
        X = _as_float(X, xp=xp)
        # scikit-learn's checks see the input's arrays only: with the dispatch
        # off they would turn arrays of another device into NumPy (which CuPy
        # refuses).
        sample_weight = move_to(sample_weight, xp=xp, device=dev)
        sw = _check_sample_weight(sample_weight, X, dtype=X.dtype)
        if self.device != "auto":
            xp, dev = compute_namespace(self.device, X)
            X = move_to(X, xp=xp, device=dev)
        y = move_to(y, xp=xp, device=dev)
        sw = move_to(sw, xp=xp, device=dev)
        Y = xp.astype(y, X.dtype)
        self._y_ndim = Y.ndim
        if Y.ndim == 1:
            Y = xp.reshape(Y, (-1, 1))
        if not bool(xp.all(sw >= 0)):
            raise ValueError("sample_weight must be non-negative.")
        n_positive = int(xp.sum(xp.astype(sw > 0, xp.int64)))
        if n_positive < 2:
            raise ValueError(
                "At least 2 samples with positive sample_weight are needed: a "
                f"leave-one-out fit attends to the other samples; got {n_positive}."
            )
        return xp, dev, X, Y, sw / xp.sum(sw)

    def _fit_heads(self, X, y, sample_weight, *, n_heads, diversity):
        """Validate, standardise, learn the heads and store the fitted state.

        Sets ``components_`` ((head_dim, p) for the single-head estimator, else
        (n_heads, head_dim, p)), the private state prediction needs,
        ``n_iter_``, ``n_fev_`` and ``loss_curve_``. Returns the heads'
        leave-one-out residuals on the training rows of ``_loo_rows`` (all rows
        when None), shape (n_heads, m, t), those rows' sample weights and the
        heads' projections in standardised units (the space they are learned
        in), all float64 NumPy, for the diagnostics.
        """
        previous = getattr(self, "_W_model", None) if self.warm_start else None
        xp, dev, X, Y, sw = self._validate_training_data(X, y, sample_weight)
        rng = check_random_state(self.random_state)
        features = FeatureMap(self.standardize)
        Xs = features.fit_transform(X, sw, rng=rng, xp=xp)
        Ys = scaled_targets(Y, sw, xp=xp)
        # components_ (and init arrays) are in input units when the map is
        # linear, else in the units of the warped, standardised features.
        if features.is_linear:
            scale_np = to_numpy(features.scale).astype(np.float64)
        else:
            scale_np = np.ones(X.shape[1])
        p = X.shape[1]
        # With the copies' blend on, the heads learn from the rows with their
        # copies merged: leave-one-out then leaves a record out with all its
        # copies, so that the heads learn to predict from other records (the
        # blend serves the copies). Red wine (29 % of rows repeated), one
        # head, 5-fold CV, blend on, copies kept against merged: 0.594 ->
        # 0.584 RMSE (test rows without copies in fold 0: 0.671 -> 0.636).
        self._duplicates = (
            None if self.duplicate_weight == 0 else DuplicateIndex(X, Y, sw, xp=xp)
        )
        Xt, Yt, swt = Xs, Ys, sw
        if self._duplicates is not None:
            Xt, Yt, swt = self._duplicates.collapse(Xs, Ys, sw, xp=xp)

        start = time.perf_counter()
        W0 = initial_projection(
            self, previous, Xt, Yt, swt, scale_np, n_heads=n_heads, rng=rng, xp=xp
        )
        self._progress("start (bandwidths on a subsample)", start)
        d = W0.shape[1] // n_heads
        shape = (d, p) if n_heads == 1 and self._single_head else (n_heads, d, p)

        def as_components(W):
            return W.T.reshape(shape)

        start = time.perf_counter()
        self._solver = self._choose_solver(swt, n_heads)
        fit = fit_projection_adam if self._solver == "adam" else fit_projection
        W, n_iter, n_fev, curve, result = fit(
            self,
            W0,
            Xt,
            Yt,
            swt,
            n_heads=n_heads,
            diversity=diversity,
            as_components=as_components,
            rng=rng,
            xp=xp,
        )
        if result is not None and result.status == 1:
            unit = "epochs" if self._solver == "adam" else "iterations"
            warnings.warn(
                f"{type(self).__name__} stopped after max_iter={self.max_iter} "
                f"{unit} before the loss converged; increase max_iter or tol.",
                ConvergenceWarning,
            )
        if self.verbose:
            steps = (
                "epochs, {} steps"
                if self._solver == "adam"
                else ("iterations, {} evaluations")
            )
            print(
                f"[{type(self).__name__}] fitted in {time.perf_counter() - start:.2f}s"
                f", {n_iter} " + steps.format(n_fev),
                flush=True,
            )

        W_x = xp.asarray(W, dtype=X.dtype, device=dev)
        scale = xp.asarray(scale_np, dtype=X.dtype, device=dev)
        self.components_ = xp.reshape((W_x / scale[:, None]).T, shape)
        self._features = features
        self._kernel = self.kernel
        self._device = self.device
        self._W_model = W_x
        self._z_fit = Xs @ W_x
        self._y_fit = Y
        self._log_sw = _log_weights(sw, xp=xp)
        self._support_index = None
        degree = kernel_degree(self._kernel)
        if degree is not None:
            self._support_index = build_support_index(
                self._z_fit, self._log_sw, n_heads=n_heads, degree=degree
            )
        self.n_iter_ = n_iter
        self.n_fev_ = n_fev
        self.loss_curve_ = curve
        # Leave-one-out statistics (noise level, head weights, correlations):
        # every row up to LOO_STATS_ROWS, else a random subset of queries,
        # each attending to all rows, so that their cost stays linear in n.
        sw_np = to_numpy(sw).astype(np.float64)
        positive = np.flatnonzero(sw_np > 0)
        self._loo_rows = None
        rows_np = np.arange(X.shape[0])
        if positive.shape[0] > LOO_STATS_ROWS:
            rows_np = np.sort(rng.choice(positive, LOO_STATS_ROWS, replace=False))
            self._loo_rows = xp.asarray(rows_np, device=dev)
        rows = xp.asarray(rows_np, device=dev)
        start = time.perf_counter()
        heads, fallback = loo_head_predictions(
            self._z_fit,
            Y,
            self._log_sw,
            rows,
            xp=xp,
            n_heads=n_heads,
            kernel=self._kernel,
            fallback=True,
        )
        counts = xp.sum(xp.astype(fallback, xp.int64), axis=1)
        self.n_support_fallback_ = int(counts[0]) if self._single_head else counts
        Y_rows = xp.take(Y, rows, axis=0)
        residuals = to_numpy(heads - Y_rows[None, ...]).astype(np.float64)
        self._progress(f"leave-one-out statistics on {rows_np.shape[0]} rows", start)
        return residuals, sw_np[rows_np], as_components(W)

    def _progress(self, stage, start):
        """With ``verbose``, say that ``stage`` (begun at ``start``) is done."""
        if self.verbose:
            print(
                f"[{type(self).__name__}] {stage}: {time.perf_counter() - start:.2f}s",
                flush=True,
            )

    def _choose_solver(self, sw, n_heads=1):
        """'lbfgs' or 'adam': 'auto' takes Adam above ``AUTO_ADAM_ROWS`` rows
        for one head, above ``AUTO_ADAM_ROWS_HEADS`` for several."""
        if self.solver != "auto":
            return self.solver
        n_positive = int(np.count_nonzero(to_numpy(sw) > 0))
        limit = AUTO_ADAM_ROWS if n_heads == 1 else AUTO_ADAM_ROWS_HEADS
        return "adam" if n_positive > limit else "lbfgs"

    def _set_head_combination(self, residuals, sw, head_weights):
        """Set the head weights, the leave-one-out predictions and the noise
        standard deviation per output, from the heads' leave-one-out residuals.

        The ensemble's leave-one-out residual at row ``i`` has variance
        ``sigma^2 (1 + sum_j v_ij^2)`` under homoscedastic noise (the row's own
        noise plus that of the estimate, ``v_i`` its weights on the other rows),
        so ``sigma^2 = sum_i sw_i r_i^2 / sum_i sw_i (1 + sum_j v_ij^2)``.
        """
        xp, _ = namespace_of(self._y_fit)
        dev = device(self._y_fit)
        self._head_weights = head_weights
        rows = self._loo_rows
        if rows is None:
            rows = xp.arange(self._y_fit.shape[0], device=dev)
        # The statistics of the residuals are taken on residuals / s, exact
        # and free of overflow and underflow whatever the target's scale.
        s = power_of_two_scale(residuals)
        R = np.tensordot(np.asarray(head_weights), residuals / s, axes=1)  # (m, t)
        # The ensemble's leave-one-out predictions (of the rows in _loo_rows,
        # all when None), for scoring without refits.
        Y_rows = xp.take(self._y_fit, rows, axis=0)
        self._loo_prediction = Y_rows + xp.asarray(
            R * s, dtype=self._y_fit.dtype, device=dev
        )
        self._fit_duplicate_weight(rows, Y_rows, sw, xp=xp)
        spread = to_numpy(
            loo_spread(
                self._z_fit,
                self._y_fit,
                self._log_sw,
                rows,
                xp=xp,
                n_heads=self._n_heads,
                head_weights=head_weights,
                kernel=self._kernel,
            )
        ).astype(np.float64)
        sigma2 = (sw @ (R * R)) / (sw @ (1.0 + spread))
        self._noise_std = xp.asarray(
            np.sqrt(sigma2) * s, dtype=self._y_fit.dtype, device=device(self._y_fit)
        )

    def _fit_duplicate_weight(self, rows, Y_rows, sw, *, xp):
        """Set ``duplicate_weight_`` from the leave-one-out predictions of the
        rows that have copies, and blend those predictions accordingly."""
        rho = 0.0
        if self._duplicates is not None:
            w = xp.asarray(sw, dtype=self._y_fit.dtype, device=device(self._y_fit))
            M, found = self._duplicates.left_out_means(rows, self._y_fit, w, xp=xp)
            if self.duplicate_weight == "auto":
                rho = fit_duplicate_weight(Y_rows, self._loo_prediction, M, found, sw)
            else:
                rho = float(self.duplicate_weight)
            self._loo_prediction = blend(self._loo_prediction, M, found, rho, xp=xp)
        if rho == 0.0:
            self._duplicates = None  # nothing to look up at predict time
        self.duplicate_weight_ = rho

    def _copies(self, X, *, xp):
        """``(group, found)`` of the queries' copies among the training rows,
        or None when the model does not blend them in."""
        if self._duplicates is None:
            return None
        return self._duplicates.lookup(X, xp=xp)

    @property
    def _n_heads(self):
        C = self.components_
        return 1 if C.ndim == 2 else C.shape[0]

    # ------------------------------------------------------------------ predict side
    def _check_predict_input(self, X, method):
        """Validated ``X`` in the fitted arrays' namespace, and that namespace.

        With ``device='auto'`` at fit, ``X`` must already be there; with
        ``'cpu'`` or ``'cuda'`` it is moved there (see ``_like_input`` for
        the way back).
        """
        check_is_fitted(self)
        if getattr(self, "_device", "auto") == "auto":
            same_namespace_or_raise(X, self.components_, estimator=self, method=method)
        xp, _ = get_namespace(X)
        X = _as_float(
            validate_data(self, X, dtype=(xp.float64, xp.float32), reset=False), xp=xp
        )
        fit_xp, fit_dev = namespace_of(self.components_)
        if where(X) != where(self.components_):
            X = move_to(X, xp=fit_xp, device=fit_dev)
        return X, fit_xp

    def _like_input(self, X):
        """Moves results back to ``X``'s namespace and device when the model
        computes elsewhere (``device='cpu'`` or ``'cuda'``)."""
        if getattr(self, "_device", "auto") == "auto":
            return lambda a: a
        return like_input(X)

    def transform(self, X):
        """Project ``X`` into the learned space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Input samples.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            ``(X - mean) @ components_.T`` with the weighted training mean
            (a translation, which leaves all distances unchanged); for several
            heads the head spaces are concatenated.
        """
        back = self._like_input(X)
        X, xp = self._check_predict_input(X, "transform")
        return back(self._project(X, xp=xp))

    def predict(self, X, return_std=False):
        """Predict with the fitted attention over the training rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query samples.
        return_std : bool, default=False
            Also return the standard error of each prediction.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            Convex combinations of training targets: the heads' NW estimate,
            with ``duplicate_weight_`` of the mean target of the training rows
            a query repeats exactly blended in (see ``duplicate_weight``).
        y_std : array of the shape of ``y_pred``
            Only with ``return_std``: the NW standard error
            ``sigma * sqrt(sum_i v_i(x)^2)``, with ``v(x)`` the (ensemble's)
            weights on the training rows and ``sigma`` the noise level
            estimated from the leave-one-out residuals. It accounts for the
            noise in the training targets that the prediction averages, and
            for the heads' shared use of the same rows; it does not include the
            smoothing bias.
        """
        back = self._like_input(X)
        X, xp = self._check_predict_input(X, "predict")
        Q = self._project(X, xp=xp)
        copies = self._copies(X, xp=xp)
        if not return_std:
            Y_hat = self._blend_copies(self._predict_projected(Q, xp=xp), copies, xp=xp)
            return back(Y_hat[:, 0] if self._y_ndim == 1 else Y_hat)
        Y_hat, spread = nw_predict_with_spread(
            Q,
            self._z_fit,
            self._y_fit,
            self._log_sw,
            xp=xp,
            n_heads=self._n_heads,
            head_weights=self._head_weights,
            kernel=self._kernel,
        )
        if copies is not None:
            Y_hat = self._blend_copies(Y_hat, copies, xp=xp)
            spread = self._blended_spread(Q, spread, copies, xp=xp)
        Y_std = spread[:, None] * self._noise_std[None, :]
        if self._y_ndim == 1:
            return back(Y_hat[:, 0]), back(Y_std[:, 0])
        return back(Y_hat), back(Y_std)

    def _blend_copies(self, Y_hat, copies, *, xp):
        """The heads' estimate with ``duplicate_weight_`` of the copies' mean
        target blended in, for queries that have copies."""
        if copies is None:
            return Y_hat
        group, found = copies
        M = self._duplicates.means(group, Y_hat.dtype, xp=xp)
        return blend(Y_hat, M, found, self.duplicate_weight_, xp=xp)

    def _blended_spread(self, Q, spread, copies, *, xp):
        """``||v(x)||`` for the blended weights of the queries with copies.

        Those queries' weights are formed explicitly, in blocks of bounded
        memory; the others keep ``spread``.
        """
        group, found = copies
        rows = xp.nonzero(found)[0]
        if rows.shape[0] == 0:
            return spread
        parts = [
            xp.sqrt(xp.sum(weights * weights, axis=1))
            for weights in self._ensemble_weights(
                xp.take(Q, rows, axis=0),
                xp=xp,
                copies=(xp.take(group, rows), xp.take(found, rows)),
            )
        ]
        return fill_masked(
            found, xp.astype(xp.concat(parts), spread.dtype), spread, xp=xp
        )

    def attention_weights(self, X, head=None, top_k=None):
        """Which training rows each prediction drew on, with their weights.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query samples.
        head : int, default=None
            The head whose attention to return; None gives the ensemble's
            weights ``sum_h head_weight_h * w_h(x)`` (with the blend of a
            query's exact copies, see ``duplicate_weight``), with which the
            prediction is ``weights @ y_train``.
        top_k : int, default=None
            Return only the ``top_k`` largest weights of each query, with the
            rows they belong to. None returns all weights: for softmax an
            array of shape (n_queries, n_samples_fit) (mind the memory for
            large sets); for a compact kernel a ``scipy.sparse.csr_array`` of
            that shape on the host, holding only the non-zero weights (found
            by a radius search in each head's space, without forming the
            dense array).

        Returns
        -------
        weights : array or sparse array of shape (n_queries, n_samples_fit), \
                or array of shape (n_queries, top_k)
            Non-negative; each row of the full array sums to one. With
            ``top_k``, sorted in decreasing order. A compact kernel's query
            whose support holds no training row has weight one on its nearest
            training row.
        indices : array of shape (n_queries, top_k)
            Only with ``top_k``: the training rows (in the order given to
            ``fit``) that the weights belong to.
        """
        back = self._like_input(X)
        X, xp = self._check_predict_input(X, "attention_weights")
        H = self._n_heads
        n_fit = self._z_fit.shape[0]
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
        Q = self._project(X, xp=xp)
        # The copies' blend belongs to the ensemble's weights, not a head's.
        copies = self._copies(X, xp=xp) if head is None else None
        if self._support_index is not None and top_k is None:
            weights = sparse_attention(
                Q,
                self._support_index,
                n_heads=H,
                head_weights=self._head_weights,
                head=head,
                dtype=to_numpy(Q[:1, :1]).dtype,
            )
            if copies is not None:
                group, found = (to_numpy(a) for a in copies)
                copy_weights = self._duplicates.sparse_copy_weights(
                    group, found, to_numpy(xp.exp(self._log_sw))
                )
                rho = self.duplicate_weight_
                keep = sparse.diags_array(1.0 - rho * found.astype(np.float64))
                weights = sparse.csr_array(
                    keep @ weights + rho * copy_weights, dtype=weights.dtype
                )
            return weights
        blocks = [
            _top_k(weights, top_k, xp=xp)
            for weights in self._ensemble_weights(Q, xp=xp, head=head, copies=copies)
        ]
        if top_k is None:
            return back(blocks[0] if len(blocks) == 1 else xp.concat(blocks, axis=0))
        weights = xp.concat([b[0] for b in blocks], axis=0)
        indices = xp.concat([b[1] for b in blocks], axis=0)
        return back(weights), back(indices)

    def _ensemble_weights(self, Q, *, xp, head=None, copies=None):
        """Dense attention of consecutive blocks of ``Q`` on the training rows:
        head ``head``'s, or the ensemble's (``head=None``) with the copies'
        blend for the queries in ``copies`` (``(group, found)`` of all ``Q``).
        Yields one (block, n_samples_fit) array per block."""
        H = self._n_heads
        acc = None
        if copies is not None:
            sw = xp.exp(self._log_sw)
        for rows, h, E, num, _ in iter_head_attention(
            Q,
            self._z_fit,
            self._y_fit,
            self._log_sw,
            xp=xp,
            n_heads=H,
            kernel=self._kernel,
        ):
            if head is not None and h != head:
                continue
            part = E / num[:, -1:]
            if head is None and H > 1:
                part = self._head_weights[h] * part
            acc = part if (head is not None or h == 0) else acc + part
            if head is not None or h == H - 1:
                if copies is not None:
                    group, found = (a[rows] for a in copies)
                    C = self._duplicates.copy_weights(group, found, sw, xp=xp)
                    acc = blend(acc, C, found, self.duplicate_weight_, xp=xp)
                yield acc

    def _project(self, X, *, xp):
        return self._features.transform(X, xp=xp) @ self._W_model

    def _predict_projected(self, Q, *, xp):
        """NW prediction for projected queries ``Q``, in tiles of bounded
        memory. Compact kernels with NumPy input (the tree lives on the host)
        attend only to the rows the radius search finds."""
        use_search = (
            self._support_index is not None
            and self._z_fit.shape[0] >= SEARCH_MIN_ROWS
            and isinstance(Q, np.ndarray)
        )
        if use_search:
            Y_hat = sparse_predict(
                Q,
                self._support_index,
                self._y_fit,
                n_heads=self._n_heads,
                head_weights=self._head_weights,
            )
            return Y_hat.astype(Q.dtype, copy=False)
        return nw_predict(
            Q,
            self._z_fit,
            self._y_fit,
            self._log_sw,
            xp=xp,
            n_heads=self._n_heads,
            head_weights=self._head_weights,
            kernel=self._kernel,
        )


def _as_float(X, *, xp):
    """Return ``X`` as float32 if it already is, else float64."""
    if X.dtype == xp.float32 or X.dtype == xp.float64:
        return X
    return xp.astype(X, xp.float64)


def _top_k(W, k, *, xp):
    """``W`` itself, or its ``k`` largest entries per row with their columns."""
    if k is None:
        return W
    order = xp.argsort(W, axis=1, descending=True, stable=True)[:, :k]
    return xp.take_along_axis(W, order, axis=1), order
