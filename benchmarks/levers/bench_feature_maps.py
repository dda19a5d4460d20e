"""A lever for issue 66, measured: what the recommended start sees of each
feature.

``ResidualStageRegressor()`` fitted on the features as given (``default``)
and on maps of them, side by side on each split:

* ``point masses``: beside the features, an indicator of each feature's
  smallest value where at least a sixteenth of the training rows hold it
  and the feature has at least four values (a zero-inflated amount, a
  censored reading), so that a head can set the rows at the mass apart
  from those just above it, as a tree's split does;
* ``warped``: each feature through a monotone piecewise-linear map (8
  quantile bins of the standardised feature, a positive slope per bin,
  within ``exp(+-max_log_slope)`` where given), learned jointly with one
  head's full projection on the leave-one-out loss the library's fits
  minimise (L-BFGS on at most ``--warp-rows`` training rows, a fifth of
  them held out to stop on), then frozen: the recommended start fits on
  the mapped features. A map steep where the target jumps narrows a fixed
  kernel there (the levers log's "sharp interactions");
* ``warped beside``: the features and their maps side by side;
* ``continued head``: one head fitted as ``NWAttentionRegressor()`` fits
  it, then its projection and a slope per quantile bin of each of its
  mapped features (its own coordinates after the power transform and
  standardisation) fitted together from there (the slopes from 1, on at
  most ``--continue-rows`` rows, a fifth held out to stop on), the mapped
  rows read by the library's readout (``NWAttentionRegressor(init=W,
  max_iter=0, standardize=False)``); ``one head`` is the head before;
* ``continued stages``: the continued head as the first stage of
  ``ResidualStageRegressor`` (its default second stage on the mapped
  rows); ``one head stages`` is the same with the head before;
* ``slopes first stage`` and ``slopes both stages``: the library's own
  ``feature_slopes=True`` (the continuation inside the fit) in the
  recommended start's first stage only, and in both (since it became the
  start's default, ``slopes both stages`` is the default);
  ``without slopes``: the start with ``feature_slopes=False``, the start
  as it was when the levers log's earlier rows were measured.

Sections:

* ``synthetic``: ``bench_interactions.py``'s problems (``--rows`` training
  rows, noise 0.3, ``--seeds`` seeds), test RMSE against the noiseless
  target, with HistGradientBoosting's;
* ``numeric``: the numeric tables of ``../shared/data`` (``--sets``; the
  folds of ``bench_accuracy.py``, at most ``--folds`` of them; the models'
  ``random_state`` ``--model-seed``).

Prints each set's mean test RMSE per variant with the median fit seconds
(the maps' own fits included), and per section the geometric mean of each
variant's RMSE over the default's (the recommended start's).

Run: ``python benchmarks/levers/bench_feature_maps.py [--sections synthetic
numeric] [--sets concrete ...] [--variants ...] [--warp-rows 1024]
[--max-log-slope 1] [--refine-rows 100000] [--continue-rows 2048]``
"""

import os
import sys
import time

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402

from nwensemble import (  # noqa: E402
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)
from nwensemble._fit.allocation import first_stage_members  # noqa: E402
from nwensemble._fit.loo_loss import loo_loss_and_grad_z  # noqa: E402
from nwensemble._shared.kernels import KERNELS  # noqa: E402
from nwensemble._shared.keys import Keys  # noqa: E402

VARIANTS = [
    "point masses",
    "warped",
    "warped beside",
    "one head",
    "continued head",
    "one head stages",
    "continued stages",
    "slopes first stage",
    "slopes both stages",
    "without slopes",
]
SOFTMAX = KERNELS["softmax"]


def point_masses(X):
    """``(feature, value)`` of each feature whose smallest value at least a
    sixteenth of the rows ``X`` hold, among features of four values or
    more."""
    masses = []
    for j in range(X.shape[1]):
        values, counts = np.unique(X[:, j], return_counts=True)
        if values.size >= 4 and counts[0] >= X.shape[0] / 16:
            masses.append((j, values[0]))
    return masses


def with_indicators(X, masses):
    return np.hstack([X] + [(X[:, [j]] == v).astype(X.dtype) for j, v in masses])


class MonotoneWarp:
    """Per feature, a monotone piecewise-linear map of the standardised
    feature: slope ``exp(u_jk)`` in quantile bin ``k`` (the identity at
    ``u = 0``), fitted with a projection ``W`` on one head's leave-one-out
    loss."""

    def __init__(
        self,
        n_bins=8,
        max_rows=1024,
        patience=10,
        max_iter=300,
        max_log_slope=None,
        refine_rows=0,
        refine_iter=10,
    ):
        self.n_bins = n_bins
        self.refine_rows = refine_rows
        self.refine_iter = refine_iter
        self.max_log_slope = max_log_slope
        self.max_rows = max_rows
        self.patience = patience
        self.max_iter = max_iter

    def _ramps(self, X):
        """(n, p, bins): the part of each bin below the standardised value."""
        Xs = (X - self.mean_) / self.scale_
        low = self.knots_[:, :-1][None]
        width = np.diff(self.knots_, axis=1)[None]
        return np.clip(Xs[:, :, None] - low, 0.0, width)

    def _mapped(self, ramps, u):
        return np.einsum("npk,pk->np", ramps, np.exp(u))

    @staticmethod
    def _rows(X, y, rng, used):
        """``used`` random rows of ``X`` with their standardised targets
        (n, 1), the held-out fifth of them (a slice) and the others."""
        order = rng.permutation(X.shape[0])[:used]
        X, y = X[order], y[order]
        Y = ((y - y.mean()) / y.std())[:, None]
        n_val = X.shape[0] // 5
        return X, Y, slice(0, n_val), np.arange(n_val, X.shape[0])

    def _fit_knots(self, X, rows):
        """Quantile knots of the standardised columns over ``rows``; the
        ramps of every row of ``X``."""
        Xs = (X - self.mean_) / self.scale_
        self.knots_ = np.quantile(
            Xs[rows], np.linspace(0, 1, self.n_bins + 1), axis=0
        ).T
        return self._ramps(X)

    def fit(self, X, y, rng):
        # Of the rows used, a fifth held out to stop on; the fit on at most
        # max_rows of the others, then at most refine_iter iterations on all
        # of them (the coarse-to-fine schedule of one head).
        used = min(X.shape[0], max(self.max_rows, self.refine_rows))
        X, Y, val, rest = self._rows(X, y, rng, used)
        self.mean_ = X.mean(axis=0)
        self.scale_ = np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
        coarse = rest[: self.max_rows]
        ramps = self._fit_knots(X, coarse)
        p, k = ramps.shape[1:]
        zero = np.zeros((p, k))
        # The start: the identity map and projection at the best common scale.
        R, Yf = ramps[coarse], Y[coarse]
        sw = np.full(R.shape[0], 1.0 / R.shape[0])
        scales = 2.0 ** np.arange(-3.0, 5.0, 0.5)
        losses = [
            loo_loss_and_grad_z(
                self._mapped(R, zero) * c, Yf, sw, xp=np, kernel=SOFTMAX
            )[0]
            for c in scales
        ]
        self.d_ = p
        theta = np.concatenate(
            [(np.eye(p) * scales[np.argmin(losses)]).ravel(), zero.ravel()]
        )
        theta = self._lbfgs(theta, R, Yf, ramps[val], Y[val], self.max_iter)
        refine = rest[: self.refine_rows]
        if refine.size > coarse.size and self.refine_iter > 0:
            theta = self._lbfgs(
                theta, ramps[refine], Y[refine], ramps[val], Y[val], self.refine_iter
            )
        self.W_, self.u_ = self._unpack(theta, p, k)
        return self

    def _unpack(self, theta, p, k):
        d = self.d_
        return theta[: p * d].reshape(p, d), theta[p * d :].reshape(p, k)

    def _lbfgs(self, theta, R, Yf, Rv, Yv, max_iter):
        """L-BFGS from ``theta`` on the rows ``R`` (their ramps), stopped on
        the held-out rows ``Rv``; the best iterate on those."""
        n, p, k = R.shape
        sw = np.full(n, 1.0 / n)

        def loss_and_grad(theta):
            W, u = self._unpack(theta, p, k)
            F = self._mapped(R, u)
            loss, G = loo_loss_and_grad_z(F @ W, Yf, sw, xp=np, kernel=SOFTMAX)
            G = np.asarray(G)
            grad_u = np.einsum("np,npk->pk", G @ W.T, R) * np.exp(u)
            return float(loss), np.concatenate([(F.T @ G).ravel(), grad_u.ravel()])

        def heldout(theta):
            W, u = self._unpack(theta, p, k)
            keys = Keys.of(self._mapped(R, u) @ W, Yf, sw, kernel=SOFTMAX, n_heads=1)
            E = keys.passes().estimates(self._mapped(Rv, u) @ W) - Yv
            return float(np.mean(E * E))

        best = [heldout(theta), theta, 0]

        class Stop(Exception):
            pass

        def monitor(theta):
            loss = heldout(theta)
            if loss < best[0]:
                best[:] = [loss, theta.copy(), 0]
            else:
                best[2] += 1
                if best[2] >= self.patience:
                    raise Stop

        bounds = None
        if self.max_log_slope is not None:
            c = self.max_log_slope
            bounds = [(None, None)] * (p * self.d_) + [(-c, c)] * (p * k)
        try:
            minimize(
                loss_and_grad,
                theta,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                callback=monitor,
                options={"maxiter": max_iter},
            )
        except Stop:
            pass
        return best[1]

    def transform(self, X):
        return self._mapped(self._ramps(X), self.u_)

    def fit_from(self, N, y, W0, rng):
        """The slopes from 1 (``u = 0``) and the projection from ``W0`` (p,
        d), fitted together on rows ``N`` already mapped (a fitted head's
        numeric block: its projection's own coordinates, so no
        standardisation)."""
        N, Y, val, rest = self._rows(N, y, rng, min(N.shape[0], self.max_rows))
        self.mean_, self.scale_ = np.zeros(N.shape[1]), np.ones(N.shape[1])
        ramps = self._fit_knots(N, rest)
        p, k = ramps.shape[1:]
        self.d_ = W0.shape[1]
        theta = np.concatenate([W0.ravel(), np.zeros(p * k)])
        theta = self._lbfgs(
            theta, ramps[rest], Y[rest], ramps[val], Y[val], self.max_iter
        )
        self.W_, self.u_ = self._unpack(theta, p, k)
        return self


def _continued(X, y, X_test, seed, args):
    """One head's fit (``NWAttentionRegressor()``), then its projection and
    a slope per quantile bin of each of its mapped features fitted together
    from there: the mapped rows, the mapped queries and the head that reads
    them (unfitted)."""
    head = table.fit_quietly(NWAttentionRegressor(random_state=seed), X, y)
    features = head.predictor_.features
    N = np.asarray(features.rows(X).numeric)
    N_test = np.asarray(features.rows(X_test).numeric)
    slopes = MonotoneWarp(
        max_rows=args.continue_rows, max_log_slope=args.max_log_slope
    ).fit_from(N, y, np.asarray(head.predictor_.W), np.random.default_rng(seed))
    reader = NWAttentionRegressor(
        init=slopes.W_.T,
        head_dim=slopes.d_,
        max_iter=0,
        standardize=False,
        random_state=seed,
    )
    return slopes.transform(N), slopes.transform(N_test), reader


def _with_slopes(seed, n_rows, *, both):
    """The recommended start with feature slopes: in both default stages
    (``feature_slopes=True``) where ``both``, else in its first stage only
    (its default first stage, for ``n_rows`` of at least 50)."""
    if both:
        return ResidualStageRegressor(feature_slopes=True, random_state=seed)
    first = MultiHeadNWRegressor(
        n_heads=1,
        bvc_resamples=0,
        n_members=first_stage_members(n_rows),
        early_stopping=True,
        feature_slopes=True,
    )
    return ResidualStageRegressor(first, random_state=seed)


def predictions(X, y, X_test, seed, args):
    """Test predictions and fit seconds of the default and each variant."""
    variants, out = args.variants, {}
    for variant in ["default", *variants]:
        start = time.perf_counter()
        train, test = X, X_test
        model = ResidualStageRegressor(random_state=seed)
        if variant == "point masses":
            masses = point_masses(X)
            train, test = with_indicators(X, masses), with_indicators(X_test, masses)
        elif variant.startswith("warped"):
            warp = MonotoneWarp(
                max_rows=args.warp_rows,
                max_log_slope=args.max_log_slope,
                refine_rows=args.refine_rows,
            ).fit(X, y, np.random.default_rng(seed))
            train, test = warp.transform(X), warp.transform(X_test)
            if variant == "warped beside":
                train, test = np.hstack([X, train]), np.hstack([X_test, test])
        elif variant == "one head":
            model = NWAttentionRegressor(random_state=seed)
        elif variant == "one head stages":
            model = ResidualStageRegressor(
                NWAttentionRegressor(random_state=seed), random_state=seed
            )
        elif variant == "without slopes":
            model = ResidualStageRegressor(feature_slopes=False, random_state=seed)
        elif variant.startswith("slopes"):
            model = _with_slopes(seed, X.shape[0], both=variant.endswith("both stages"))
        elif variant.startswith("continued"):
            train, test, model = _continued(X, y, X_test, seed, args)
            if variant == "continued stages":
                model = ResidualStageRegressor(model, random_state=seed)
        model = table.fit_quietly(model, train, y)
        out[variant] = (model.predict(test), time.perf_counter() - start)
    return out


def main():
    parser = table.parser(__doc__, VARIANTS)
    parser.add_argument("--warp-rows", type=int, default=1024)
    parser.add_argument("--max-log-slope", type=float, default=None)
    parser.add_argument("--refine-rows", type=int, default=0)
    parser.add_argument("--continue-rows", type=int, default=2048)
    table.main(parser, predictions)


if __name__ == "__main__":
    main()
