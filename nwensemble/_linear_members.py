"""LinearMembers: a fit with members, half of them fitted to the target
less a global ridge (the first stage of ``ResidualStageRegressor``)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from nwensemble._fit.linear_term import LinearTerm
from nwensemble._fit.paired_rule import paired_gain_is_clear
from nwensemble._shared.backend import (
    device,
    floating_like,
    get_namespace,
    host_targets,
    to_host,
    to_numpy,
)
from nwensemble._shared.table import is_dataframe

# Whether a fit that alone predicts the rows clearly better than the mix
# takes all the weight (else the members' shares always; a switch for the
# lever script).
_ONE_FIT_WHERE_CLEARLY_BETTER = True
# Whether the second fit acts through the first fit's feature slopes (else
# it learns its own; a switch for the lever script).
_ONE_MAP_PER_STAGE = True
# Whether a lone member on y - l(x) beside a lone member on y starts from
# the first's projection (else it searches its own; a switch for the lever
# script).
_LONE_SECOND_STARTS_FROM_FIRST = True


class LinearMembers(RegressorMixin, BaseEstimator):
    """Members of one fit split between the target and the target less a
    global linear term.

    ``estimator`` (one of the library's estimators with ``n_members`` of at
    least 2) is fitted twice: with ``ceil(n_members / 2)`` members to
    ``y``, and with the other ``floor(n_members / 2)`` to ``y - l(x)``,
    ``l`` a ridge on the features (their power transform, each warped
    feature also as it is, missing-value indicators, and a column per level
    of each categorical feature; its penalty by exact leave-one-out error),
    through the first fit's feature slopes (one map of the features for
    the stage, as members share one); where each fit has one member, the
    second starts from the first one's projection instead of a start of
    its own. The prediction is the members' mean, ``l`` added to the
    second fit's. A local average of ``y`` bends a global trend where the
    rows near a query lie to one side of it; the second fit averages what
    the trend leaves instead, and the two err differently, so that their
    mean errs less than either. Where one fit alone predicts the training
    rows (left out) clearly better than the mean, by the paired rule's two
    standard errors, it alone predicts: the ridge can take the part of an
    effect that the second fit needed to see it (see :ref:`residual_stage`).

    Parameters
    ----------
    estimator : estimator
        The fit whose members are split (its ``n_members`` at least 2).

    Attributes
    ----------
    estimators_ : tuple of two estimators
        The fit to ``y`` and the fit to ``y - l(x)``.

    linear_term_ : object
        The fitted ridge ``l``.

    weights_ : ndarray of shape (2,)
        The two fits' weights in the stage's estimates: their shares of the
        members, or 1 and 0 where one fit alone was clearly better.

    loo_prediction_ : array of shape (n_samples,) or (n_samples, n_outputs)
        The weighted mix of the two fits' ``loo_prediction_``, the ridge's
        exact leave-one-out prediction added to the second's.

    calibration_rows_ : array of int
        The rows that some member of either fit held out of its projection's
        fit (see the estimator's ``calibration_rows_``).

    calibration_residuals_ : array of shape (n_calibration,) or \
            (n_calibration, n_outputs)
        Their residuals, each row's estimate from the fits that held it
        out (by ``weights_``), the ridge's left out.

    components_ : array
        The first fit's ``components_`` (its heads' projections).

    n_features_in_ : int
        Number of features seen during fit.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import MultiHeadNWRegressor
    >>> from nwensemble._linear_members import LinearMembers
    >>> X, y = make_friedman1(n_samples=200, random_state=0)
    >>> first = MultiHeadNWRegressor(n_members=2, random_state=0)
    >>> stage = LinearMembers(first).fit(X, y)
    >>> [fit.n_members for fit in stage.estimators_]
    [1, 1]
    >>> stage.predict(X[:3]).shape
    (3,)
    """

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, y, sample_weight=None):
        """Fit both groups of members and the ridge.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training rows, validated as ``ResidualStageRegressor`` hands
            them to its first stage.
        y : array of shape (n_samples,) or (n_samples, n_outputs)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Given to both fits and to the ridge.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        n_members = self.estimator.get_params()["n_members"]
        if n_members < 2:
            raise ValueError(
                f"LinearMembers splits members; the estimator has n_members="
                f"{n_members}, at least 2 are needed."
            )
        groups = _group_sizes(n_members)
        first = clone(self.estimator).set_params(n_members=groups[0])
        second = clone(self.estimator).set_params(n_members=groups[1])
        # The second group draws its own rows (held out, subsampled), so that
        # the two together calibrate on more rows.
        rng = check_random_state(self.estimator.get_params()["random_state"])
        second.set_params(random_state=rng.randint(np.iinfo(np.int32).max))
        fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
        Y, sw = host_targets(y, sample_weight)
        term, in_sample, left_out = ridge_of(self.estimator, X, Y, sw, rng=rng)
        residual = floating_like(Y - in_sample, y)
        first.fit(X, y, **fit_params)
        # One map of the features for the whole stage, as its members share
        # one within a fit.
        if _ONE_MAP_PER_STAGE:
            second._given_slopes = first._first_member.slopes
        # And one encoding of the levels: which levels have codes of their
        # own depends on the targets (column_types.rows_for_own_code), and
        # the second group may start from the first's projection.
        second._given_encoder = first.predictor_.features.encoder
        if _LONE_SECOND_STARTS_FROM_FIRST and groups == (1, 1):
            # A lone member on y - l(x) starts from the first's projection
            # (through the same slopes) instead of searching its own: the
            # fit's budget on the tables with two members.
            second._given_start = first._first_member.solver.W
        second.fit(X, residual, **fit_params)
        weights = np.array(groups) / sum(groups)
        if _ONE_FIT_WHERE_CLEARLY_BETTER:
            weights = _weights(
                to_numpy(first.loo_prediction_).reshape(Y.shape),
                to_numpy(second.loo_prediction_).reshape(Y.shape) + left_out,
                Y,
                sw,
                weights,
            )
        loo = _mix(
            weights,
            lambda: first.loo_prediction_,
            lambda: second.loo_prediction_,
            lambda: left_out,
        )
        rows, residuals = _calibration(first, second, weights, in_sample - left_out)
        # Set only now: a fit interrupted above leaves no partial model.
        self.estimators_ = (first, second)
        self.linear_term_ = term
        self.weights_ = weights
        self.loo_prediction_ = loo
        self.calibration_rows_ = rows
        self.calibration_residuals_ = residuals
        self.components_ = first.components_
        self.n_features_in_ = first.n_features_in_
        if hasattr(first, "feature_names_in_"):
            self.feature_names_in_ = first.feature_names_in_
        return self

    def predict(self, X):
        """The fits' weighted prediction (the ridge added to the second
        fit's).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Query rows.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            Predicted values, in the namespace of the first fit's.
        """
        check_is_fitted(self)
        first, second = self.estimators_
        return _mix(
            self.weights_,
            lambda: first.predict(X),
            lambda: second.predict(X),
            lambda: self.linear_term_.predict(X),
        )

    def transform(self, X):
        """The rows in the first fit's heads' coordinates (its
        ``transform``)."""
        check_is_fitted(self)
        return self.estimators_[0].transform(X)

    def local_error_scale(self, X):
        """The local error scale of the adaptive intervals at ``X`` and at
        ``calibration_rows_``: the fits' scales, weighted as their
        estimates are (see the estimator's ``local_error_scale``); a fit
        of no weight is not asked."""
        check_is_fitted(self)
        weighted = [
            (share, fit, *fit.local_error_scale(X))
            for share, fit in zip(self.weights_, self.estimators_)
            if share > 0
        ]
        like = weighted[0][3]
        xp, _ = get_namespace(like)
        at_queries = sum(
            float(share) * xp.asarray(q, dtype=weighted[0][2].dtype)
            for share, _, q, _ in weighted
        )
        at_rows = _on_rows(
            to_host(self.calibration_rows_),
            [
                (share, to_host(fit.calibration_rows_), to_numpy(r))
                for share, fit, _, r in weighted
            ],
        )
        at_rows = xp.asarray(
            np.reshape(at_rows, (-1,) + tuple(like.shape[1:])),
            dtype=like.dtype,
            device=device(like),
        )
        return at_queries, at_rows


def ridge_of(estimator, X, Y, sw, *, rng, **design):
    """The ridge ``l`` of the rows ``X`` with targets ``Y`` (host (n, t))
    and weights ``sw``, the categorical features as ``estimator`` names
    them (``design``: ``LinearTerm.fit``'s ``raw``): ``LinearTerm.fit``'s
    ``(term, in-sample fit, left-out fit)``."""
    table = is_dataframe(X) or (isinstance(X, np.ndarray) and X.dtype.kind == "O")
    return LinearTerm.fit(
        X,
        Y,
        sw,
        categorical_features=estimator.get_params().get("categorical_features"),
        table=table,
        rng=rng,
        **design,
    )


def _group_sizes(n_members):
    """The members fitted to ``y`` and to ``y - l(x)``: ``ceil(k / 2)`` and
    ``floor(k / 2)`` of ``k``."""
    return n_members - n_members // 2, n_members // 2


def _mix(weights, first, second, linear):
    """The mix by ``weights`` of the fits' estimates ``first()`` and
    ``second()`` (arrays of one namespace), ``linear()`` (host (n, t))
    added to the second's; a fit of no weight is not asked."""
    a, b = (float(w) for w in weights)
    if b == 0:
        return first()
    with_line = second()
    xp, _ = get_namespace(with_line)
    with_line = with_line + xp.asarray(
        np.reshape(linear(), with_line.shape),
        dtype=with_line.dtype,
        device=device(with_line),
    )
    if a == 0:
        return with_line
    return a * xp.asarray(first(), dtype=with_line.dtype) + b * with_line


def _calibration(first, second, weights, ridge_gap):
    """The stage's ``calibration_rows_`` and ``calibration_residuals_``: the
    rows that a fit of positive weight held out, each row's residual mixed
    from the fits that held it out. The second fit's residuals are of ``y -
    l(x)``; ``ridge_gap`` (host (n, t), the ridge's fit less its left-out
    prediction) makes them residuals of ``y`` with the ridge left out."""
    rows = [to_host(fit.calibration_rows_) for fit in (first, second)]
    residuals = [
        to_numpy(first.calibration_residuals_).reshape(rows[0].shape[0], -1),
        to_numpy(second.calibration_residuals_).reshape(rows[1].shape[0], -1)
        + ridge_gap[rows[1]],
    ]
    # A fit of no weight predicts nothing: its held-out rows calibrate only
    # where the other fit held them out too.
    union = np.union1d(*(r if w > 0 else r[:0] for r, w in zip(rows, weights)))
    combined = _on_rows(union, list(zip(weights, rows, residuals)))
    like = first.calibration_residuals_
    xp, _ = get_namespace(like)
    return xp.asarray(union, device=device(like)), xp.asarray(
        np.reshape(combined, (-1,) + tuple(like.shape[1:])),
        dtype=like.dtype,
        device=device(like),
    )


def _on_rows(union, parts):
    """Per row of ``union`` (host ints), the weighted mean of the ``parts``
    ``(weight, rows, values)`` (values host, on their own ``rows``) that
    have the row."""
    n_outputs = parts[0][2].reshape(parts[0][1].shape[0], -1).shape[1]
    total = np.zeros((union.shape[0], n_outputs))
    weight = np.zeros((union.shape[0], 1))
    for share, rows, value in parts:
        kept = np.isin(rows, union)
        at = np.searchsorted(union, rows[kept])
        total[at] += share * value.reshape(rows.shape[0], -1)[kept]
        weight[at] += share
    return total / weight


def _weights(first, second, Y, sw, members):
    """The fits' weights: their members' shares ``members``, unless one fit
    alone predicts the rows clearly better than that mix (its leave-one-out
    squared errors, each output relative to its variance, lower by the
    paired rule's two standard errors; ``first`` and ``second`` host (n, t),
    the second with the ridge's left-out prediction added), which then
    weighs 1."""
    rows = np.all(np.isfinite(first) & np.isfinite(second), axis=1) & (sw > 0)
    if np.count_nonzero(rows) < 2:
        return members
    w, Y = sw[rows], Y[rows]
    scale = np.average((Y - np.average(Y, axis=0, weights=w)) ** 2, axis=0, weights=w)
    scale = np.where(scale > 0, scale, 1.0)

    def errors(prediction):
        return np.sum((Y - prediction[rows]) ** 2 / scale, axis=1)

    mix = errors(members[0] * first + members[1] * second)
    alone = [errors(first), errors(second)]
    clear = [paired_gain_is_clear(mix, e, w) for e in alone]
    if not any(clear):
        return members
    best = int(np.argmin([float(w @ e) if c else np.inf for e, c in zip(alone, clear)]))
    return np.eye(2)[best]
