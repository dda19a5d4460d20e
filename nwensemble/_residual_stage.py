"""ResidualStageRegressor: a second attention stage fitted to the first
stage's leave-one-out residuals, the two predictions added."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import time
from dataclasses import dataclass
from numbers import Integral

import array_api_compat
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import (
    _num_features,
    _num_samples,
    check_is_fitted,
    has_fit_parameter,
)

from nwensemble._atomic import atomic_fit
from nwensemble._fit.allocation import first_stage_members
from nwensemble._fit.column_types import categorical_mask
from nwensemble._fit.config import progress
from nwensemble._fit.early_stopping import EARLY_STOPPING_MIN_ROWS
from nwensemble._fit.null_key import fit_null_key_heads
from nwensemble._fit.paired_rule import paired_gain_is_clear
from nwensemble._fit.series_lines import SeriesLines
from nwensemble._fit.target_maps import TargetMaps, cross_fitted_maps, maps_promise
from nwensemble._linear_members import LinearMembers, ridge_of
from nwensemble._multi_head import MultiHeadNWRegressor
from nwensemble._predict.intervals import absolute_residual_bounds, interval_alpha
from nwensemble._shared.backend import (
    device,
    floating_like,
    get_namespace,
    host_targets,
    host_weights,
    to_host,
    to_numpy,
)
from nwensemble._shared.table import columns, is_dataframe, numeric_column
from nwensemble._single_head import NWAttentionRegressor
from nwensemble._wrapper import WrapperMixin, inner_estimator

# Residuals beyond this many robust standard deviations weigh less in the
# second stage (the three-sigma rule for outliers).
OUTLYING = 3.0
# What one fit sets besides ``fits_``; several fits take the first's.
_ONE_FIT_ATTRIBUTES = (
    "linear_base_",
    "estimator_",
    "residual_estimator_",
    "third_stage_",
    "series_lines_",
    "target_maps_",
    "_map_columns",
    "residual_rows_",
    "interval_residuals_",
    "_interval_positions",
)


class ResidualStageRegressor(WrapperMixin, RegressorMixin, BaseEstimator):
    """Two attention stages: the second predicts what the first's
    neighbourhoods miss.

    The first stage (``estimator``) is fitted to ``y``; its exact
    leave-one-out predictions (``loo_prediction_``: each row predicted from
    the others, as a new row would be) leave residuals ``r_i = y_i -
    loo_i``, and the second stage (``residual_estimator``), in a learned
    subspace of its own, is fitted to them. The prediction is the sum of
    the two. A first stage that averages over a feature it must smooth
    across (the orientation of a building, say) leaves that feature's
    effect in its residuals, the same in every neighbourhood; the second
    stage attends along that feature and adds the effect back, as boosting
    adds trees (twicing, Tukey 1977; boosting with smoothers, Buhlmann and
    Yu 2003). Where the first stage leaves only noise, the second should
    add nothing: by default it stops early on rows its projection was not
    fitted to and reads weighted means of the residuals. Rows whose
    residuals lie beyond three robust standard deviations weigh less in the
    second stage (Huber's weights, ``3 / d`` at ``d`` of them), so that a
    few outlying targets do not carry their residuals to the rows near
    them. Where training rows repeat one setting of the features at
    several values of one numeric feature (a series), a query of the series
    also reads the line between its nearest rows along that feature, as
    much as the training rows' leave-one-out residuals say it should
    (``series_lines``).

    Read more in the :ref:`User Guide <residual_stage>`.

    Parameters
    ----------
    estimator : estimator with ``loo_prediction_``, default=None
        The first stage; ``None`` means one head with members on small
        tables: ``MultiHeadNWRegressor(n_heads=1, n_members=k,
        bvc_resamples=0, early_stopping=True, feature_slopes=True)`` (the
        slopes as ``feature_slopes`` says, the heads as
        ``first_stage_heads`` says), ``k = 8192 // n_samples`` within 1 and
        4 (:class:`HeadAllocator`'s ``n_members='auto'`` on twice the rows:
        4 up to 2048 rows, 2 or 3 up to 4096, 1 above; a fit of
        :class:`NWAttentionRegressor` when ``k`` is 1). It holds rows out of
        its projection's fit from 50 rows on, also where
        ``early_stopping='auto'`` would not (many rows per learned
        parameter), so that the intervals calibrate on rows no
        projection learned; with fewer rows ``'auto'`` (none held out).
        With several members, half of them learn the target less a ridge
        (see ``linear_members``). Any of the library's estimators,
        :class:`HeadAllocator` included.

    residual_estimator : estimator, default=None
        The second stage, fitted to the first's leave-one-out residuals;
        ``None`` means ``NWAttentionRegressor(early_stopping=True,
        local_fit='constant', duplicate_weight=0.0, feature_slopes=True)``
        (the slopes as ``feature_slopes`` says): it holds rows out to
        stop on (from 50 rows on; ``'auto'`` below), reads weighted means
        (which stay within the residuals' range) and reads no copies of a
        row (the first stage already predicts a row's copy by it).

    target_maps : 'auto' or bool, default=False
        Whether both stages see, beside each numeric feature, its map: the
        mean target of the feature's bin (16 quantile bins, a bin for
        missing values), so that a head's projection can weigh where along
        the feature the target jumps and rows on the two sides of a jump
        lie far apart (a kernel of fixed width would average across it).
        The training rows' maps are cross-fitted (each from the other four
        fifths of the rows). ``'auto'``: where they pay, in two steps.
        First, one head's start on the features and their maps must
        predict rows it was not fitted to clearly better than its start on
        the features alone (4-fold cross-fitting on at most 512 rows);
        then both stages are fitted both ways, and the maps are kept where
        the sum fitted with them predicts the rows that calibrate both
        sums' intervals (held out of the projections' fits) clearly better.
        Clearly: by more than two standard errors of the rows' paired
        differences in squared error. The check adds to the fit's time, and
        where its first step passes the fit takes about twice as long (both
        stages fitted twice); on targets that jump at thresholds of their
        features it pays (see :ref:`residual_stage`). One output only: with
        several, ``'auto'`` takes none and ``True`` maps every output.

    feature_slopes : bool or 'fine', default=True
        The default stages' ``feature_slopes`` (see
        :class:`NWAttentionRegressor`): in each, every numeric feature
        through a monotone piecewise-linear map learned with the stage's
        (first member's) projection, which its members then share, so that
        a kernel of fixed width can set apart the rows on either side of a
        jump of the target (see :ref:`feature_slopes`). With ``'fine'``
        a stage fitted by Adam (the first, above 4096 rows) learns the
        finer map in its steps. A stage given as
        ``estimator`` or ``residual_estimator`` keeps its own.

    first_stage_heads : int, default=1
        Heads of the default first stage, each as wide as the input. With
        several it is ``MultiHeadNWRegressor(n_heads=first_stage_heads,
        head_dim=n_features, init='identity')`` with the members, early
        stopping and slopes of the one head's: the heads start from that
        head's start (the features' fitted scales), nudged apart (see
        :class:`MultiHeadNWRegressor`'s ``init``), and are fitted together,
        at the cost of a longer fit. Two gained where the target is a
        noisy, smooth sum of interactions and lost where it steps (see
        :ref:`residual_stage`). A stage given as ``estimator`` keeps its
        own.

    linear_members : bool, default=True
        Whether the default first stage, where it has several members
        (``k`` of them, up to 4096 rows), fits ``ceil(k / 2)`` to ``y`` and
        the other ``floor(k / 2)`` to ``y - l(x)``, ``l`` a ridge on the
        features (power-transformed, each warped feature also as it is
        within its training range, with missing-value indicators and a
        column per level of a categorical feature; its penalty by exact
        leave-one-out error), through the first group's feature slopes; the
        stage predicts the members' mean, ``l`` added to the second group's
        (``LinearMembers``). The two groups err differently where the
        target has a global trend that local averages bend, and their mean
        errs less. Where one group alone predicts the training rows (left
        out) clearly better than the mean, by two standard errors of the
        rows' paired differences, it alone predicts. False: every member
        on ``y``. A stage given as ``estimator`` keeps its own.

    linear_base : bool, default=False
        Whether every stage learns what a ridge ``l`` leaves, ``y -
        l(x)`` (``l`` as the linear members' ridge, fitted to ``y`` on all
        rows), and the prediction adds ``l(x)``: a global trend that a
        local average bends at the edges of the rows (a fare that grows
        with the distance, out to the longest trips) is then the ridge's,
        and the stages attend to what departs from it. It gained on
        larger tables whose new rows are like the training rows and lost
        where they come from new groups (patients the training rows do not
        hold), where a global trend carries over less than neighbours do
        (see :ref:`residual_stage`).

    n_fits : int, default=1
        How many whole fits (every stage, each fit with its own random
        state) to average, at ``n_fits`` times the time of one. A fit's
        members share what its first member learned (the feature slopes),
        its readout's choice and its second stage; whole fits draw these
        anew, and their mean errs less than one fit does, most on small
        tables (see :ref:`residual_stage`).

    third_stage : bool, default=False
        Whether a third stage adds to the sum heads that attend over its
        leave-one-out residuals with a null key: one more key, of value
        zero, that every query sees at a learned logit, so that a query
        without close training rows adds nothing while one with close rows
        gets their residuals' mean (see :ref:`residual_stage`). Its four
        members each fit a projection of the first stage's first head's
        coordinates (from half that head's kernel width) and the logit, by
        the leave-one-out loss on a random 512 of the rows that do not
        calibrate the intervals, stopped on a fifth of them held out; a
        member that predicts its held-out rows no better than zero adds
        nothing, and the stage is kept only where the members as kept beat
        zero there by more than the standard error of the rows' paired
        differences. It gains where the residuals of nearly repeated rows
        agree, at the cost of a longer fit.

    series_lines : bool, default=True
        Whether the prediction reads the table's series too: training rows
        equal on every feature but one numeric feature (a designed
        experiment's setting at several values of one factor). A query of a
        series takes the line between the series' nearest rows on either
        side of it along that feature (through its power transform; the
        rows at its own value, where there are some), the mean of such
        lines where it has several, and the prediction moves towards it by
        a weight within [0, 1], the least-squares slope of the training
        rows' leave-one-out residuals of the stages' sum on their
        leave-one-out lines' gaps from it (each row's line drawn without
        it). A table without series, or whose series the stages already
        read, is predicted as without (see :ref:`residual_stage`).

    random_state : int, RandomState instance or None, default=None
        Given to both stages as their ``random_state`` (an estimator's own
        is kept when this is None); it also draws the maps' folds and the
        rows of their check.

    verbose : int, default=0
        Progress on stdout when positive: a line as each stage starts (what
        it fits, on how many rows) and as it ends (its time), and the
        stages' own progress (given to both as their ``verbose`` where they
        have one and their own is 0).

    Attributes
    ----------
    fits_ : list of ResidualStageRegressor or None
        With several fits (``n_fits``), each fitted with ``n_fits=1`` and
        its own ``random_state``; the prediction is their mean, and the
        attributes below are the first fit's. None with one fit.

    estimator_ : estimator
        The first stage, fitted on all rows: with ``linear_members``, a
        ``LinearMembers`` whose ``estimators_`` are the two groups' fits
        and ``linear_term_`` the ridge.

    residual_estimator_ : estimator
        The second stage, fitted to the residuals of ``residual_rows_``,
        each row weighted by its sample weight times its residual's weight
        (1 within three robust standard deviations of the residuals'
        median, less beyond).

    third_stage_ : object or None
        The third stage's fitted heads (each kept member's projection and
        null-key logit, over the second stage's rows as keys and the sum's
        leave-one-out residuals as values); None where ``third_stage`` is
        False or the stage was not kept.

    target_maps_ : object or None
        The fitted maps (their bins' edges and mean targets per numeric
        feature), whose columns both stages see after the features; None
        where the stages see the features alone.

    linear_base_ : object or None
        The fitted ridge ``l`` whose leavings the stages learned (its
        design and coefficients), added to their prediction; None where the
        stages learned ``y`` (``linear_base``).

    residual_rows_ : array of int
        The training rows with a leave-one-out prediction of the first
        stage, whose residuals the second stage learned (every row up to
        2048 rows of positive weight, else a random 2048 of those; see
        ``loo_prediction_``), in the fitted arrays' namespace.

    interval_residuals_ : array of shape (n_calibration,) or (n_calibration, n_outputs)
        The sum's leave-one-out residuals, which calibrate
        :meth:`predict_interval`: on each row of the first stage's
        ``calibration_rows_`` that the second stage learned and held out of
        its projection's fit (its own ``calibration_rows_``), the first
        stage's residual there (``calibration_residuals_``: with members,
        from the members that held the row out) less the second stage's
        left-out estimate (and the third stage's, where it was kept: no
        member's projection learned these rows). None for stages without
        those attributes. With ``series_lines_``, the residuals of the
        prediction moved towards the rows' left-out lines.

    series_lines_ : object or None
        The fitted series lines (each numeric feature's series, their
        knots, and the weight of the lines in the prediction); None where
        ``series_lines`` is False, the table has no series, or the weight
        came out zero.

    n_features_in_ : int
        Number of features seen during fit.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column
        names.

    See Also
    --------
    NWAttentionRegressor : One head; the model of both default stages.
    HeadAllocator : A first stage that chooses its heads.

    Notes
    -----
    Each stage keeps its own diagnostics (``estimator_.hdi_``,
    ``estimator_.bvc_decomposition_``; with ``linear_members``, each
    group's in ``estimator_.estimators_``); they describe that stage, not
    the sum. The default first stage takes no decomposition
    (``bvc_resamples=0``); give ``estimator`` to have one.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nwensemble import ResidualStageRegressor
    >>> X, y = make_friedman1(n_samples=300, noise=0.5, random_state=0)
    >>> reg = ResidualStageRegressor(random_state=0).fit(X, y)
    >>> reg.predict(X[:2]).shape
    (2,)
    >>> len(reg.residual_rows_)
    300
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict", "get_params"]), None],
        "residual_estimator": [HasMethods(["fit", "predict", "get_params"]), None],
        "target_maps": [StrOptions({"auto"}), "boolean"],
        "feature_slopes": ["boolean", StrOptions({"fine"})],
        "first_stage_heads": [Interval(Integral, 1, None, closed="left")],
        "linear_members": ["boolean"],
        "linear_base": ["boolean"],
        "n_fits": [Interval(Integral, 1, None, closed="left")],
        "third_stage": ["boolean"],
        "series_lines": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        residual_estimator=None,
        target_maps=False,
        feature_slopes=True,
        first_stage_heads=1,
        linear_members=True,
        linear_base=False,
        n_fits=1,
        third_stage=False,
        series_lines=True,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.residual_estimator = residual_estimator
        self.target_maps = target_maps
        self.feature_slopes = feature_slopes
        self.first_stage_heads = first_stage_heads
        self.linear_members = linear_members
        self.linear_base = linear_base
        self.n_fits = n_fits
        self.third_stage = third_stage
        self.series_lines = series_lines
        self.random_state = random_state
        self.verbose = verbose

    def _stage(self, estimator, default):
        return inner_estimator(
            default if estimator is None else estimator,
            random_state=self.random_state,
            verbose=self.verbose,
        )

    def _fit_stage(self, name, stage, X, y, fit_params):
        """``stage.fit(X, y, **fit_params)``, announced and timed with
        ``verbose``."""
        if self.verbose:
            described = " ".join(repr(stage).split())
            print(
                f"[ResidualStageRegressor] {name} stage: {described} on "
                f"{_num_samples(X)} rows",
                flush=True,
            )
        start = time.perf_counter()
        stage.fit(X, y, **fit_params)
        progress("ResidualStageRegressor", self.verbose, f"{name} stage", start)
        return stage

    @_fit_context(prefer_skip_nested_validation=False)
    @atomic_fit
    def fit(self, X, y, sample_weight=None):
        """Fit the first stage to ``y`` and the second to its leave-one-out
        residuals.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training rows, as the first stage takes them.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to both stages (the second's restricted to its rows and
            multiplied by the residuals' weights).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        # The default first stage skips the bias-variance-covariance
        # decomposition: a diagnostic of that stage, not of the sum, which
        # costs resampled passes over its rows.
        first = self._stage(
            self.estimator, MultiHeadNWRegressor(n_heads=1, bvc_resamples=0)
        )
        second = self._stage(
            self.residual_estimator,
            NWAttentionRegressor(local_fit="constant", duplicate_weight=0.0),
        )
        categorical_features = getattr(first, "categorical_features", None)
        given = X, y, sample_weight  # each of several fits validates them
        X, y, fit_params = self._fit_rows(
            X, y, sample_weight, categorical_features=categorical_features
        )
        if self.n_fits > 1:
            return self._fit_repeats(*given)
        n_rows = _num_samples(X)
        stops_early = _stops_early(n_rows, sample_weight)
        if self.estimator is None:
            # One head with members on small tables, whose error a fit's
            # random draws move most (the members average the draws out),
            # and up to twice as many rows a second member through the
            # first one's slopes.
            first.set_params(
                n_members=first_stage_members(n_rows),
                early_stopping=stops_early,
                feature_slopes=self.feature_slopes,
            )
        if self.residual_estimator is None:
            second.set_params(
                early_stopping=stops_early, feature_slopes=self.feature_slopes
            )
        base, base_gap = None, None
        if self.linear_base:
            base, y, base_gap = self._linear_base(first, X, y, sample_weight)
        map_columns = _numeric_columns(X, self._table, categorical_features)
        maps, X_mapped = self._target_maps_candidate(X, y, sample_weight, map_columns)
        if maps is None or self.target_maps == "auto":
            stages = self._fit_stages(first, second, X, y, sample_weight, fit_params)
        if maps is not None:
            n_maps = _num_features(X_mapped) - _num_features(X)
            mapped = self._fit_stages(
                _with_map_columns(first, n_maps),
                _with_map_columns(second, n_maps),
                X_mapped,
                y,
                sample_weight,
                fit_params,
                label=" (with target maps)",
            )
            if self.target_maps is True or _predicts_better(
                mapped, stages, sample_weight
            ):
                stages = mapped
            else:
                maps = None
            if self.verbose:
                taken = "taken" if maps is not None else "not taken"
                print(f"[ResidualStageRegressor] target maps {taken}", flush=True)
        third, interval_residuals = None, stages.interval_residuals
        if self.third_stage:
            third, interval_residuals = self._fit_third_stage(
                stages, X if maps is None else X_mapped, y, sample_weight
            )
        series = None
        if self.series_lines:
            series, interval_residuals = self._fit_series_lines(
                stages, X, y, sample_weight, interval_residuals, categorical_features
            )
        if base_gap is not None and interval_residuals is not None:
            # Each calibrating row's residual as from the ridge fitted
            # without it (its exact left-out fit), as its stages' are.
            calibrating = to_host(stages.first.calibration_rows_)[
                to_host(stages.interval_positions)
            ]
            interval_residuals = interval_residuals + _host_back(
                base_gap[calibrating], interval_residuals
            )
        self.fits_ = None
        self.linear_base_ = base
        self.estimator_ = stages.first
        self.residual_estimator_ = stages.second
        self.third_stage_ = third
        self.series_lines_ = series
        self.target_maps_ = maps
        self._map_columns = map_columns
        self.residual_rows_ = stages.rows
        self.interval_residuals_ = interval_residuals
        self._interval_positions = stages.interval_positions
        return self

    def _fit_repeats(self, X, y, sample_weight):
        """``n_fits`` whole fits on the rows as given, each with its own
        random state (drawn from ``random_state``, so that a given stage's
        own cannot make them alike)."""
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=self.n_fits)
        fits = []
        for i, seed in enumerate(seeds):
            if self.verbose:
                print(
                    f"[ResidualStageRegressor] fit {i + 1} of {self.n_fits}",
                    flush=True,
                )
            one = clone(self).set_params(n_fits=1, random_state=int(seed))
            fits.append(one.fit(X, y, sample_weight=sample_weight))
        for name in _ONE_FIT_ATTRIBUTES:
            setattr(self, name, getattr(fits[0], name))
        self.fits_ = fits
        return self

    def _linear_base(self, first, X, y, sample_weight):
        """The ridge on the validated training rows ``X`` (categorical
        features as ``first`` names them), what it leaves of ``y`` (in
        ``y``'s namespace and shape), and each row's in-sample fit less its
        left-out one (host, (n, t)); None, ``y`` and None where no row has
        weight (the first stage says what is wrong)."""
        Y, sw = host_targets(y, sample_weight)
        if not np.any(sw > 0):
            return None, y, None
        rng = check_random_state(self.random_state)
        term, in_sample, left_out = ridge_of(first, X, Y, sw, rng=rng)
        return term, floating_like(Y - in_sample, y), in_sample - left_out

    def _parts(self):
        """The fitted wholes whose predictions are averaged."""
        return [self] if self.fits_ is None else self.fits_

    def _fit_stages(self, first, second, X, y, sample_weight, fit_params, label=""):
        """Both stages fitted on rows ``X`` (as the stages see them), and the
        sum's leave-one-out residuals."""
        if self.estimator is None and self.first_stage_heads > 1:
            # Heads as wide as the rows the stage sees (target maps included).
            first.set_params(
                n_heads=self.first_stage_heads,
                head_dim=_num_features(X),
                init="identity",
            )
        if (
            self.estimator is None
            and self.linear_members
            and first.get_params()["n_members"] >= 2
        ):
            first = LinearMembers(first)
        self._fit_stage("first" + label, first, X, y, fit_params)
        loo = getattr(first, "loo_prediction_", None)
        if loo is None:
            raise TypeError(
                f"ResidualStageRegressor needs a first stage that sets "
                f"loo_prediction_ (one of this library's estimators); "
                f"{type(first).__name__} does not."
            )
        xp, _ = get_namespace(loo)
        Y = xp.asarray(y, dtype=loo.dtype, device=device(loo))
        Y = xp.reshape(Y, loo.shape)
        residuals = Y - loo
        rows = _finite_rows(residuals, xp=xp)
        host_rows = to_host(rows)
        target = xp.take(residuals, rows, axis=0)
        second_params = {}
        # A second stage without weights (a pipeline) learns every row alike.
        if sample_weight is not None or has_fit_parameter(second, "sample_weight"):
            weights = np.ones(host_rows.shape[0])
            if sample_weight is not None:
                weights = host_weights(sample_weight)[host_rows]
            weights = weights * residual_weights(to_numpy(target), weights > 0)
            second_params["sample_weight"] = xp.asarray(
                weights, dtype=target.dtype, device=device(target)
            )
        self._fit_stage(
            "second" + label, second, _rows(X, host_rows), target, second_params
        )
        return _Stages(first, second, rows, *_sum_residuals(first, second, host_rows))

    def _fit_third_stage(self, stages, X, y, sample_weight):
        """The null-key heads fitted to the sum's leave-one-out residuals on
        the second stage's rows, in the first stage's first head's
        coordinates (None where no member adds anything, or for stages
        without those attributes), and the sum's interval residuals with
        the heads' left-out estimates taken off."""
        start = time.perf_counter()
        first, second = stages.first, stages.second
        loo = getattr(second, "loo_prediction_", None)
        rows = to_host(stages.rows)
        coordinates = None
        if loo is not None:
            coordinates = _head_coordinates(first, _rows(X, rows))
        if coordinates is None:
            return None, stages.interval_residuals
        xp, _ = get_namespace(loo)
        dev = device(loo)
        index = xp.asarray(rows, device=dev)
        first_loo = first.loo_prediction_
        Y = xp.reshape(xp.asarray(y, dtype=loo.dtype, device=dev), first_loo.shape)
        R = xp.take(Y - first_loo, index, axis=0) - loo
        R = xp.reshape(R, (R.shape[0], -1))
        R_host = to_numpy(R).astype(np.float64)
        finite = np.all(np.isfinite(R_host), axis=1)
        weights = np.ones(rows.shape[0])
        if sample_weight is not None:
            weights = host_weights(sample_weight)[rows]
        weights = np.where(finite, weights, 0.0)
        R_host[~finite] = 0.0
        weights = weights * residual_weights(R_host, weights > 0)
        # The rows that calibrate the sum's intervals stay unlearned.
        calibrating = np.zeros(0, dtype=np.intp)
        if stages.interval_positions is not None:
            calibrated = to_host(first.calibration_rows_)[
                to_host(stages.interval_positions)
            ]
            calibrating = np.searchsorted(rows, calibrated)
        learnable = np.setdiff1d(np.flatnonzero(weights > 0), calibrating)
        heads = fit_null_key_heads(
            xp.asarray(coordinates, dtype=loo.dtype, device=dev),
            xp.asarray(R_host, dtype=loo.dtype, device=dev),
            xp.asarray(weights, dtype=loo.dtype, device=dev),
            learnable,
            rng=check_random_state(self.random_state),
            xp=xp,
        )
        if self.verbose:
            kept = 0 if heads is None else len(heads.projections)
            print(
                f"[ResidualStageRegressor] third stage: {kept} of its members "
                f"add to the sum ({time.perf_counter() - start:.2f} s)",
                flush=True,
            )
        residuals = stages.interval_residuals
        if heads is None or residuals is None:
            return heads, residuals
        left_out = heads.left_out(calibrating, xp=xp)
        return heads, residuals - xp.reshape(left_out, residuals.shape)

    def _fit_series_lines(
        self, stages, X, y, sample_weight, interval_residuals, categorical_features
    ):
        """The series lines of the training rows ``X`` (as given, without
        maps), weighted against the first two stages' leave-one-out sum on
        the second stage's rows, and the interval residuals of the
        prediction they move (None, and the residuals as they are, where
        the lines take no weight)."""
        first, second = stages.first, stages.second
        loo = getattr(second, "loo_prediction_", None)
        if loo is None:
            return None, interval_residuals
        Y, sw = host_targets(y, sample_weight)
        rows = to_host(stages.rows)
        fitted = np.full(Y.shape, np.nan)
        fitted[rows] = to_numpy(first.loo_prediction_).reshape(Y.shape)[
            rows
        ] + to_numpy(loo).reshape(rows.shape[0], -1)
        series, left_out = SeriesLines.fit(
            X,
            Y,
            sw,
            fitted,
            categorical_features=categorical_features,
            table=self._table,
            rng=check_random_state(self.random_state),
        )
        if series is None or interval_residuals is None:
            return series, interval_residuals
        calibrating = to_host(first.calibration_rows_)[
            to_host(stages.interval_positions)
        ]
        R = to_numpy(interval_residuals).astype(np.float64)
        R = R.reshape(calibrating.shape[0], -1)
        moved = series.moved(left_out[calibrating], Y[calibrating] - R)
        return series, _host_back(Y[calibrating] - moved, interval_residuals)

    def _target_maps_candidate(self, X, y, sample_weight, map_columns):
        """The fitted maps of the columns ``map_columns`` and the training
        rows with their cross-fitted maps, where the stages may see them;
        else ``(None, None)``."""
        if self.target_maps is False or not map_columns:
            return None, None
        Y, sw = host_targets(y, sample_weight)
        if self.target_maps == "auto" and Y.shape[1] > 1:
            return None, None
        if not np.any(sw > 0):
            return None, None  # the first stage says what is wrong
        features = self._numeric(X, map_columns)
        rng = check_random_state(self.random_state)
        M = cross_fitted_maps(features, Y, sw, rng=rng)
        if self.target_maps == "auto" and not maps_promise(features, M, Y, sw, rng=rng):
            return None, None
        return TargetMaps.fit(features, Y, sw), _with_maps(X, M)

    def _numeric(self, X, map_columns):
        """Columns ``map_columns`` of rows ``X`` as float64 NumPy, NaN
        missing."""
        if not self._table:
            return to_numpy(X).astype(np.float64)[:, map_columns]
        values = columns(X)
        return np.stack(
            [numeric_column(values[j], f"{j}") for j in map_columns], axis=1
        )

    def _stage_rows(self, X):
        """Validated query rows as the stages see them: with their maps
        where the stages were fitted with maps."""
        if self.target_maps_ is None:
            return X
        features = self._numeric(X, self._map_columns)
        return _with_maps(X, self.target_maps_.transform(features))

    def predict(self, X):
        """The first stage's prediction plus the second's (with several
        fits, the mean of their sums).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Query rows.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            Predicted values, in the namespace of the first stage's.
        """
        X = self._validated_query(X, "predict")
        return _mean(
            [part._prediction(X, part._stage_rows(X)) for part in self._parts()]
        )

    def _prediction(self, X, rows):
        """One fit's prediction of validated query rows ``X`` (``rows``: as
        the stages see them, ``_stage_rows``): the stages' sum, moved
        towards the rows' series lines where it has some, the linear base
        added where there is one."""
        total = self._sum(rows)
        if self.series_lines_ is not None:
            host = to_numpy(total).astype(np.float64).reshape(total.shape[0], -1)
            total = _host_back(self.series_lines_.adjust(X, host), total)
        if self.linear_base_ is None:
            return total
        return total + _host_back(self.linear_base_.predict(X), total)

    def _sum(self, X):
        """The stages' predictions added, for validated query rows."""
        first = self.estimator_.predict(X)
        xp, _ = get_namespace(first)
        second = xp.asarray(self.residual_estimator_.predict(X), dtype=first.dtype)
        total = first + xp.reshape(second, first.shape)
        if self.third_stage_ is None:
            return total
        Q = _head_coordinates(self.estimator_, X)
        Q = xp.asarray(Q, dtype=self.third_stage_.keys.dtype)
        third = self.third_stage_.predict(Q, xp=xp)
        return total + xp.reshape(xp.asarray(third, dtype=first.dtype), first.shape)

    def predict_interval(self, X, *, confidence_level=0.9, method="jackknife+"):
        """Predict with conformal intervals for the sum of the stages.

        The bounds are the prediction minus and plus a quantile of
        ``interval_residuals_``, the sum's leave-one-out residuals on the
        rows that calibrate both stages' own intervals (the jackknife,
        Barber et al. 2021), from both stages' left-out estimates, on rows
        that neither stage's projections were fitted to where they held
        rows out (see :ref:`residual_stage`). With several fits
        (``n_fits``), the quantile is of every fit's residuals together,
        around the fits' mean.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Query rows.
        confidence_level : float, default=0.9
            Target probability that the interval holds a new target, in
            (0, 1).
        method : {'jackknife+', 'adaptive'}, default='jackknife+'
            ``'jackknife+'``: one width for every query (the jackknife: the
            sum has no leave-one-out models whose spread would vary it).
            ``'adaptive'``: each residual is first divided by the first
            stage's local error scale at its row and the quantile multiplied
            by that at ``X`` (the scale of the first stage's own adaptive
            intervals), so that intervals widen where the data are noisy.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_outputs)
            The predictions of :meth:`predict`.
        y_pis : array of shape (n_samples, 2) or (n_samples, n_outputs, 2)
            Lower and upper bounds (infinite, with a warning, when too few
            rows calibrate for ``confidence_level``).
        """
        alpha = interval_alpha(confidence_level, method)
        check_is_fitted(self)
        if self.interval_residuals_ is None:
            stage, needs = self.residual_estimator_, "loo_prediction_"
            if not hasattr(self.estimator_, "calibration_residuals_"):
                stage, needs = self.estimator_, "calibration_residuals_"
            raise AttributeError(
                f"predict_interval needs stages of this library's estimators: "
                f"{type(stage).__name__} does not set {needs}."
            )
        X = self._validated_query(X, "predict_interval")
        parts = self._parts()
        rows = [part._stage_rows(X) for part in parts]
        Y_hat = _mean([part._prediction(X, R) for part, R in zip(parts, rows)])
        xp, _ = get_namespace(Y_hat)
        # With several fits, every fit's residuals calibrate their mean,
        # whose squared error is at most theirs on average: the intervals
        # lean wide.
        if method == "jackknife+":
            residuals = _pooled([part.interval_residuals_ for part in parts], xp)
            return Y_hat, absolute_residual_bounds(Y_hat, residuals, alpha)
        scaled, at_queries = [], []
        for part, R in zip(parts, rows):
            at_query, at_rows = part.estimator_.local_error_scale(R)
            at_residuals = xp.take(at_rows, part._interval_positions, axis=0)
            scaled.append(part.interval_residuals_ / at_residuals)
            at_queries.append(at_query)
        units = absolute_residual_bounds(
            xp.zeros_like(Y_hat), _pooled(scaled, xp), alpha
        )
        return Y_hat, Y_hat[..., None] + units * _mean(at_queries)[..., None]


@dataclass(frozen=True)
class _Stages:
    """Both stages fitted on one view of the rows: the first, the second,
    the rows it learned, and the sum's leave-one-out residuals with their
    positions in the first stage's ``calibration_rows_`` (see
    ``_sum_residuals``)."""

    first: object
    second: object
    rows: object
    interval_residuals: object
    interval_positions: object


def _predicts_better(mapped, plain, sample_weight):
    """Whether the stages fitted with maps (``mapped``) predict the rows
    that both sums' intervals calibrate on (rows held out of the
    projections' fits where the stages held any) clearly better than the
    stages fitted without (``plain``): their paired squared residuals by
    ``paired_gain_is_clear``. False for stages without those residuals."""
    errors, rows = [], []
    for stages in (plain, mapped):
        residuals = stages.interval_residuals
        if residuals is None:
            return False
        R = to_numpy(residuals).astype(np.float64).reshape(residuals.shape[0], -1)
        errors.append(np.sum(R * R, axis=1))
        calibrating = to_host(stages.first.calibration_rows_)
        rows.append(calibrating[to_host(stages.interval_positions)])
    both, in_plain, in_mapped = np.intersect1d(*rows, return_indices=True)
    w = np.ones(both.size)
    if sample_weight is not None:
        w = host_weights(sample_weight)[both]
    return paired_gain_is_clear(errors[0][in_plain], errors[1][in_mapped], w)


def _with_map_columns(stage, n_maps):
    """A clone of ``stage`` for rows with ``n_maps`` map columns after the
    features: a boolean mask of its categorical columns extended by them
    (indices and names still point at the features)."""
    stage = clone(stage)
    mask = stage.get_params(deep=False).get("categorical_features")
    if mask is not None and not isinstance(mask, str):
        mask = np.asarray(mask)
        if mask.dtype == bool:
            extended = np.concatenate([mask, np.zeros(n_maps, dtype=bool)])
            stage.set_params(categorical_features=extended)
    return stage


def _numeric_columns(X, table, categorical_features):
    """Indices (a list) of the numeric columns of the validated training
    rows ``X``: every column of an array, a table's columns that are not
    categorical."""
    n_features = X.shape[1]
    if not table:
        return list(range(n_features))
    mask = categorical_mask(X, categorical_features, n_features)
    return [int(j) for j in np.flatnonzero(~mask)]


def _with_maps(X, M):
    """Rows ``X`` (a validated array, a DataFrame or an ``object`` table) with
    the maps ``M`` (float64 NumPy) as further columns: a DataFrame's named
    ``target_map_0``, ``target_map_1``, ... where its names are strings
    (with underscores in front of a name a feature has), numbered on from
    its columns where they are not."""
    if is_dataframe(X):
        import pandas as pd

        names = [str(c) for c in X.columns]
        if all(isinstance(c, str) for c in X.columns):
            extra = [f"target_map_{k}" for k in range(M.shape[1])]
            extra = [_unique(name, names) for name in extra]
            return pd.concat([X, pd.DataFrame(M, columns=extra, index=X.index)], axis=1)
        p = X.shape[1]
        return pd.concat(
            [
                X.set_axis(range(p), axis=1),
                pd.DataFrame(M, columns=range(p, p + M.shape[1]), index=X.index),
            ],
            axis=1,
        )
    if isinstance(X, np.ndarray) and X.dtype == object:
        return np.concatenate([X, M.astype(object)], axis=1)
    xp, _ = get_namespace(X)
    maps = xp.asarray(M, dtype=X.dtype, device=device(X))
    return xp.concat([X, maps], axis=1)


def _host_back(values, like):
    """Host ``values`` as an array of ``like``'s namespace, shape, dtype and
    device."""
    xp, _ = get_namespace(like)
    return xp.asarray(
        np.reshape(values, like.shape), dtype=like.dtype, device=device(like)
    )


def _unique(name, taken):
    """``name``, with underscores added until it is not in ``taken``."""
    while name in taken:
        name = f"_{name}"
    return name


def residual_weights(residuals, rows):
    """The second stage's weight of each row: 1 within ``OUTLYING``
    robust standard deviations of the residuals' median, ``OUTLYING / d``
    at ``d`` of them (Huber's weights; per output, the smallest).

    The median and the robust deviation, ``1.4826`` times the median
    absolute deviation, are over ``rows`` (a boolean mask: the rows of
    positive sample weight). A few residuals far out (an outlying target)
    would otherwise carry their size to every row near them; a weight, not
    a clip, keeps the value of a large residual that its neighbours share,
    since their weighted mean is then theirs. An output whose residuals
    have no spread gets no weights.
    """
    R = residuals.reshape(residuals.shape[0], -1).astype(np.float64)
    center = np.median(R[rows], axis=0)
    spread = 1.4826 * np.median(np.abs(R[rows] - center), axis=0)
    deviation = np.abs(R - center) / np.where(spread > 0, spread, np.inf)
    return np.minimum(1.0, OUTLYING / np.maximum(deviation.max(axis=1), 1e-300))


def _stops_early(n_rows, sample_weight):
    """A default stage's ``early_stopping``: True (rows held out of its
    projection's fit, which calibrate the intervals honestly) from
    ``EARLY_STOPPING_MIN_ROWS`` rows of positive weight on, ``'auto'``
    (none held out) below."""
    if sample_weight is not None:
        n_rows = int(np.count_nonzero(host_weights(sample_weight) > 0))
    return True if n_rows >= EARLY_STOPPING_MIN_ROWS else "auto"


def _sum_residuals(first, second, rows):
    """The sum's leave-one-out residuals on the rows that calibrate the
    first stage's intervals and the second's (``rows``, host ints: the
    training rows of the second stage, in its order; of those, its own
    ``calibration_rows_`` where it has them: the rows held out of its
    projection's fit where it held any): the first stage's residual there
    (from the members that held the row out) less the second stage's
    left-out estimate; and the rows' positions in the first stage's
    ``calibration_rows_``, in the second stage's namespace. None, None for
    stages without those attributes."""
    calibrating = getattr(first, "calibration_rows_", None)
    first_residuals = getattr(first, "calibration_residuals_", None)
    loo = getattr(second, "loo_prediction_", None)
    if calibrating is None or first_residuals is None or loo is None:
        return None, None
    xp, _ = get_namespace(loo)
    calibrating = to_host(calibrating)
    # A row whose residual the second stage's projection learned gets a
    # left-out estimate that flatters the sum, as the first stage's would.
    second_calibrating = getattr(second, "calibration_rows_", None)
    unlearned = rows
    if second_calibrating is not None:
        unlearned = rows[to_host(second_calibrating)]
    # Positions among the first stage's calibration rows and the second's.
    in_first = np.flatnonzero(np.isin(calibrating, unlearned))
    in_second = np.searchsorted(rows, calibrating[in_first])
    dev = device(loo)
    residuals = xp.take(
        xp.asarray(first_residuals, dtype=loo.dtype, device=dev),
        xp.asarray(in_first, device=dev),
        axis=0,
    ) - xp.take(loo, xp.asarray(in_second, device=dev), axis=0)
    finite = _finite_rows(residuals, xp=xp)
    kept = xp.asarray(in_first[to_host(finite)], device=dev)
    return xp.take(residuals, finite, axis=0), kept


def _head_coordinates(stage, X):
    """The rows ``X`` in the coordinates of ``stage``'s first head (its
    ``transform``'s first ``head_dim`` columns), or None for a stage
    without ``transform``."""
    transform = getattr(stage, "transform", None)
    components = getattr(stage, "components_", None)
    if transform is None or components is None:
        return None
    Z = transform(X)
    n_heads = components.shape[0] if components.ndim == 3 else 1
    return Z[:, : Z.shape[1] // n_heads]


def _finite_rows(residuals, *, xp):
    """Indices of the rows of ``residuals`` (n,) or (n, t) that are finite in
    every output (a row without a leave-one-out prediction is NaN)."""
    finite = xp.isfinite(residuals)
    if residuals.ndim == 2:
        finite = xp.all(finite, axis=1)
    return xp.nonzero(finite)[0]


def _mean(arrays):
    """The mean of same-shaped arrays (the one array itself where one)."""
    if len(arrays) == 1:
        return arrays[0]
    return sum(arrays[1:], arrays[0]) / len(arrays)


def _pooled(residuals, xp):
    """Residual arrays stacked along their rows."""
    if len(residuals) == 1:
        return residuals[0]
    return xp.concat(residuals, axis=0)


def _rows(X, rows):
    """Rows ``rows`` (host ints) of a DataFrame, an array or a list."""
    if hasattr(X, "iloc"):
        return X.iloc[rows]
    if not array_api_compat.is_array_api_obj(X):
        X = np.asarray(X)
    xp, _ = get_namespace(X)
    index = xp.asarray(rows, device=device(X))
    return xp.take(X, index, axis=0)
