"""Docstring fragments the estimators share, so that their copies
cannot drift: a line ``%(name)s`` in a docstring becomes fragment ``name``,
indented as the line was."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import re

_FRAGMENTS = {
    "fit_parameters": """\
X : array-like of shape (n_samples, n_features)
    Training data.
y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    Target values.
sample_weight : array-like of shape (n_samples,), default=None
    Non-negative weights; at least two must be positive. A row of
    weight zero takes no part in the fit, as if removed (up to the
    rounding of sums that include it).""",
    "kernel": """\
kernel : {'softmax', 'epanechnikov', 'biweight', 'triweight'}, \
        default='softmax'
    ``'softmax'``: Gaussian weights ``exp(s)`` with the score
    ``s = -||W^T (x - x_i)||^2 / 2``, all positive. The compact kernels
    give ``(1 + s / k)_+^k`` with ``k`` = 1, 2, 3: exactly zero beyond the
    radius ``sqrt(2 k)`` in the learned space (sparse attention; softmax
    is the limit ``k -> infinity``). A query with no training row within
    the radius predicts its nearest row's target. Compact kernels predict
    NumPy input through a radius search (cost grows with the rows in the
    support, not with ``n_samples``) and ``attention_weights`` returns a
    ``scipy.sparse`` array. See the user guide's "Kernels" page.""",
    "categorical_features": """\
categorical_features : 'from_dtype', array-like of int, str or bool, or None, \
        default='from_dtype'
    Which features are categorical. ``'from_dtype'``: a DataFrame's
    ``category``, string, ``object`` and boolean columns (polars frames
    are read through pandas), and the columns of a NumPy ``object`` array
    that hold strings; string columns need no conversion first. Else
    integer indices, column names or a boolean mask, as in
    :class:`~sklearn.ensemble.HistGradientBoostingRegressor`; None for none.
    Each head places each level of a categorical feature at a learned
    position in its subspace (an embedding: what a one-hot column times the
    projection would give, looked up instead of multiplied, so memory grows
    with the levels, not with rows times levels), starting from the level's
    mean target. Levels seen in fewer than 5 training rows share one
    "infrequent" embedding, which levels never seen in training also take,
    unless the column's levels differ so strongly that fewer rows tell a
    level's mean (from the rows at which its mean is at least half signal,
    by a one-way random-effects estimate on what a least-squares line
    through the numeric features leaves of the fit's targets); a missing
    value has an embedding of its own. A missing (NaN) value of a
    numeric feature is filled with its conditional mean given the row's
    observed numeric features, and gets a learned position too, added to
    the filled value's projection; a feature with no missing values in
    training fills one met at prediction the same way. See the user guide's
    "Real tables".""",
    "optimisation": """\
max_iter : int, default=200
    Maximum number of L-BFGS iterations per stage (epochs for
    ``solver='adam'``). ``0`` keeps the initial projections: a plain NW
    estimator with the starting bandwidths.

tol : float, default=1e-5
    Convergence tolerance on the loss decrease and on the projected
    gradient (scipy's ``ftol`` and ``gtol``). The loss is the leave-one-out
    MSE divided by the target variance, and scipy divides the decrease by
    the larger of the loss and 1: below 1 (any model that explains some of
    the variance) L-BFGS stops when an iteration gains less than ``tol``
    of the target variance.

solver : {'auto', 'lbfgs', 'adam'}, default='auto'
    ``'lbfgs'``: full-batch leave-one-out loss with L-BFGS (O(n^2) per
    evaluation; coarse-to-fine for one head, on all rows for several).
    ``'adam'``: Adam on minibatches of ``batch_size`` rows that attend to
    each other (time linear in n per epoch; ``max_iter`` counts epochs),
    early-stopped on held-out rows, whose error against all training rows
    also sets a final factor on the bandwidth (with
    ``early_stopping=False`` the rows are still held out for that factor,
    but the epochs are not scored on them: the fit stops when the training
    loss stops improving and keeps the last epoch). ``'auto'``: ``'adam'``
    above 2048 rows for one head (above 4096 with ``feature_slopes``, whose
    continuation after L-BFGS tries the finer map; above 10 000 where some
    features are embeddings: categorical features or missing values),
    above 4096 for several (where it reaches L-BFGS's accuracy, mostly
    sooner).

batch_size : int or 'auto', default='auto'
    Rows per minibatch of ``solver='adam'``; ``'auto'`` is
    ``min(1024, n_samples)``.

early_stopping : 'auto' or bool, default='auto'
    Hold out ``validation_fraction`` of the rows as queries that never serve
    as keys during training, and keep the projections with the lowest
    held-out error of the ensemble; stop after ``n_iter_no_change``
    iterations without improvement (for ``solver='adam'``, whose epochs'
    held-out errors fluctuate, also once they are flat: when the best of the
    last ``n_iter_no_change`` improves on the best before them by less than
    their standard deviation). The exact leave-one-out error can still
    be driven down by fitting noise when the learned parameters
    (``n_features * n_heads * head_dim``) are many against ``n_samples``;
    the held-out rows catch that. ``'auto'`` enables it when there are at
    least 50 samples with positive weight but fewer than 20 per learned
    parameter; with more, the held-out rows are worth more as training
    data. The held-out rows are keys again in the fitted model, and their
    leave-one-out residuals, which owe nothing to the projections, calibrate
    :meth:`predict_interval`.

validation_fraction : float or 'auto', default='auto'
    Fraction of the rows held out for early stopping (and for
    ``solver='adam'``'s bandwidth factor). ``'auto'``: 0.3 for L-BFGS
    (whose early stopping, under ``'auto'`` on tables with few rows per
    learned parameter, holds out rows that judge the stop, the readout and
    its kernel width, and so need to be many), 0.1 for ``solver='adam'``.

n_iter_no_change : int, default=10
    Patience of early stopping, in iterations.""",
    "input": """\
standardize : 'power' or bool, default='power'
    The feature map the projections work in. ``True``: every feature
    centred and scaled to unit (weighted) variance; ``components_`` is then
    reported in the input's units. ``'power'``: scaled, then warped by a
    per-feature Yeo-Johnson power transform whose exponent is chosen by
    likelihood, then scaled again, so that skewed features (ages,
    frequencies, counts) do not squeeze most rows into a corner of the
    kernel; ``components_`` is then in the units of the warped,
    standardised features. ``False``: centred only. See the user guide for
    what ``'power'`` gained on real tables.

duplicate_weight : 'auto' or float in [0, 1], default='auto'
    How much a query that repeats training rows exactly (all features
    equal) draws on their mean target: its prediction is ``(1 - rho) *
    f(x) + rho * mean(y of the copies)``, with ``f`` the NW estimate and
    ``rho`` this weight; other queries are not affected. ``'auto'`` learns
    ``rho`` from the training rows that have copies, by the leave-one-out
    error of that blend (0 when no training rows repeat); copies with
    equal targets (duplicated records) push it to 1, noisy replicates
    lower. ``0`` turns the blend off. The heads, ``hdi_`` and
    ``bvc_decomposition_`` describe the NW estimate without the blend.
    With the blend on, the projections are learned on the rows with their
    copies merged (leave-one-out leaves a record out with its copies).""",
    "local_fit": """\
local_fit : {'auto', 'linear', 'quadratic', 'constant'}, default='auto'
    How each head reads its estimate out of its attention weights.
    ``'constant'``: their weighted mean of the training targets (the
    Nadaraya-Watson estimate, softmax attention's output). ``'linear'``:
    the value at the query of a weighted least-squares line through the
    targets in the head's subspace, under the same weights (local-linear
    regression), which removes the weighted mean's bias where the target
    slopes across the neighbourhood (at the edges of the data, along steep
    directions); its ridge, relative to the neighbourhood's spread, is
    chosen from a grid of decades by the leave-one-out error of the
    training rows after the fit, and every head's estimate is clipped to
    the training targets' range. ``'quadratic'``: the same fit with each
    coordinate's square beside it (a parabola along every direction of the
    subspace, no cross terms), which also follows the target's curvature
    across the neighbourhood. ``'auto'``: the quadratics, the lines and
    the weighted mean are the candidates of that choice; a compact kernel
    keeps the weighted mean (its radius search serves only that), and so
    do heads of more than 32 dimensions (a line's sums grow as ``head_dim
    ** 2`` per training row; the quadratics are tried up to 16) and, unless
    rows held out of the fit score the choice, tables with categorical
    features or missing values (rows of one level share its embedding
    exactly; see the user guide). Where held-out rows score it (early
    stopping, L-BFGS), the fits are also tried through kernels 2, 4 and 8
    times wider than the fitted one (until one does worse than the
    narrower), and the chosen factor divides the projections
    (``components_``); Adam keeps the width its own final factor chose on
    those rows. The projections are learned for the
    weighted mean either way; ``local_ridge_`` is the ridge chosen and
    ``local_fit_`` the kind.""",
    "feature_slopes": """\
feature_slopes : bool or 'fine', default=False
    Whether each numeric feature (after ``standardize``'s map) also goes
    through a learned monotone piecewise-linear map: a slope per quantile
    bin (8 bins), within ``exp(+-1)`` (where a slope ends at that bound,
    64 bins within ``exp(+-3)`` are tried too and kept where the held-out
    rows clearly gain), learned together with the first
    member's projection (from slopes 1): by L-BFGS, as a continuation of
    its fit (on at most 4096 of its training rows, stopped on the rows it
    held out or, where it held none out, on a fifth of those rows; from
    the subsample's fit where one head's fit runs coarse to fine, in
    place of its refinement on all rows); by Adam, within its minibatch
    steps (``solver``). ``'fine'`` has Adam's steps learn the 64 bins
    within ``exp(+-3)`` in place of the 8 (for large tables whose target
    jumps at thresholds and whose new rows come from the training rows'
    population; see the user guide's "Feature slopes"); with L-BFGS it is
    True. The map is then applied for every member, at fit and at
    prediction. A slope steep where the target jumps sets the rows on
    either side apart, as a tree's split does, so that a kernel of fixed
    width no longer averages across the jump. ``components_`` are then in
    the mapped features' units. The continuation adds to the fit's time;
    the user guide's "Feature slopes" has what it costs and buys.""",
    "run": """\
warm_start : bool, default=False
    If True and ``fit`` was called before, start from the previous
    ``components_`` (``head_dim`` and ``init`` are then ignored).

callback : callable, default=None
    Called after every iteration as ``callback(components, n_iter)`` with
    the current projections, shaped like ``components_``, in standardised
    units, as a NumPy array.

device : {'auto', 'cpu', 'cuda'}, default='auto'
    Where ``fit`` and ``predict`` compute. ``'auto'`` follows the input:
    NumPy on the host, CuPy arrays on their GPU, other array-API arrays in
    their namespace (with scikit-learn's array-API dispatch on), and the
    fitted arrays live there too. ``'cpu'``: NumPy on the host whatever
    the input. ``'cuda'``: CuPy on the current GPU (an error says so where
    CuPy or a GPU is missing); NumPy input is copied to the GPU. With
    ``'cpu'`` or ``'cuda'``, results (``predict``, ``transform``,
    ``attention_weights``) come back in the input's namespace and device:
    NumPy input gets NumPy predictions.""",
    "verbose": """\
verbose : int, default=0
    Print the loss and elapsed time at every iteration, and the time of
    each stage of ``fit``, when positive.""",
    "table_attributes": """\
is_categorical_ : ndarray of bool of shape (`n_features_in_`,) or None
    Which features were treated as categorical; None when the input was a
    table of numbers without missing values.

categories_ : list of ndarray
    For each categorical feature (in column order), the levels with an
    embedding of their own, sorted where they can be ordered (as
    :class:`~sklearn.preprocessing.OneHotEncoder`'s ``categories_``).

infrequent_categories_ : list of ndarray
    For each categorical feature, the levels seen in too few training rows
    for an embedding of their own (fewer than 5, or fewer where the levels
    differ strongly: see ``categorical_features``), which share the
    "infrequent" embedding.

embeddings_ : list of arrays
    For each categorical feature, its levels' positions in the heads'
    subspaces, of shape (n_heads, len(categories_[i]) + 2, head_dim)
    ((len(categories_[i]) + 2, head_dim) for one head): the rows of
    ``categories_[i]``, then the infrequent-or-unseen level, then a missing
    value. They add to the projection of the numeric features.

missing_embeddings_ : array of shape (n_heads, head_dim, `n_features_in_`) or None
    ((head_dim, `n_features_in_`) for one head) Where a missing value of a
    numeric feature sits in each head, relative to a value at its
    conditional mean given the row's observed numeric features (where the
    value is first filled): zero for features without missing values in
    training and for categorical ones. None without a table.""",
    "regression_attributes": """\
local_fit_ : {'constant', 'linear', 'quadratic'}
    The heads' readout chosen (see ``local_fit``): the weighted mean, local
    lines or local quadratics, one kind for every head.

local_ridge_ : float or ndarray of shape (n_members * n_heads,)
    The ridge of the heads' local-linear or local-quadratic fits (see
    ``local_fit``), ``inf`` when they read the weighted mean; one per head
    when a fit's members (``n_members``) chose different ones.

loo_prediction_ : array of shape (n_samples,) or (n_samples, n_outputs)
    The exact leave-one-out predictions of the training rows (each row
    predicted from the others, with the copies' blend), in the fitted
    arrays' namespace. Above 2048 rows with positive weight only a random
    2048 of them are computed (each still attending to all rows); the
    others are NaN. Like random forests' ``oob_prediction_``, they score a
    fit without refits.

calibration_rows_ : array of int
    The training rows whose leave-one-out residuals calibrate
    :meth:`predict_interval`: the rows held out of the projections' fit
    (early stopping; with members, the rows some member held out, each
    calibrating on the heads of the members that held it out) when there
    were any, else every row with a leave-one-out prediction and positive
    weight.

calibration_residuals_ : array of shape (n_calibration,) or (n_calibration, n_outputs)
    The residuals ``y - leave-one-out estimate`` of ``calibration_rows_``
    (in their order) that calibrate :meth:`predict_interval`: with
    members, each row's estimate from the members that held it out alone.""",
    "fit_attributes": """\
duplicate_weight_ : float
    The blend's weight ``rho`` (see ``duplicate_weight``): learned with
    ``'auto'``, else the parameter.

predictor_ : NWPredictor
    The fitted state that prediction reads (projected training rows,
    targets, weights, head weights, noise level, the radius-search index
    of a compact kernel), with the computations on it; the diagnostics and
    plots use its public methods.

n_iter_ : int
    L-BFGS iterations over all stages (epochs for ``solver='adam'``).

n_fev_ : int
    Loss and gradient evaluations over all stages (minibatch steps for
    ``solver='adam'``).

loss_curve_ : list of float
    Training objective after every iteration.

n_features_in_ : int
    Number of features seen during ``fit``.

feature_names_in_ : ndarray of shape (`n_features_in_`,)
    Names of features seen during ``fit``. Defined only when `X` has
    feature names that are all strings.""",
    "multi_head_ensemble": """\
diversity : float or 'auto', default=0.0
    Weight ``delta`` of the heads' ambiguity, subtracted from the
    ensemble's leave-one-out loss (both fractions of the target
    variance). The objective is then the heads' mean own loss less
    ``1 + delta`` times their ambiguity, so ``-1`` trains every head on
    its own error (independent heads), ``0`` trains the ensemble, and
    values in ``(0, 1 / (n_heads - 1))`` reward disagreement beyond that
    (negative correlation learning). ``'auto'`` fits 0, -0.5 and -1 with
    the same rows held out (as early stopping holds them out, also where
    ``early_stopping='auto'`` would train on every row) and keeps the one
    with the least held-out loss: about three fits' time, and 0 when no
    rows can be held out (``early_stopping=False``, fewer than 50 rows).
    The user guide's regime map says where which values paid.

n_members : int, default=1
    Number of groups of ``n_heads`` heads fitted one after another from
    the one random state, each from its own start (its random directions
    and subsamples) and, where the fit holds rows out, with its own
    held-out rows; their heads are then combined as one ensemble. The
    fitted model has ``n_members * n_heads`` heads, and every attribute
    below that counts heads (``components_``, ``head_weights_``,
    ``hdi_``, the decomposition) counts them all; the first member's
    heads are those of the fit with one member. Averaging fits that
    differ only in their random draws removes part of the variance those
    draws leave in one fit, for ``n_members`` fits' time. With
    ``n_heads=1`` the members are fits of the single-head model. An
    ``init`` array starts every member; ``diversity_`` is the first
    member's. Intervals and prediction sets calibrate each row some
    member held out on the heads of the members that held it out. The user guide's
    multi-head page says what members bought; :class:`HeadAllocator`
    refits its choice with members.

head_weights : {'uniform', 'optimal'}, default='uniform'
    How predictions combine the heads. ``'uniform'``: the plain average.
    ``'optimal'``: ``alpha`` proportional to ``C^{-1} 1`` projected onto the
    simplex, with ``C`` the second-moment matrix of the heads'
    leave-one-out residuals on the training rows (the weights of least
    leave-one-out error). The projections are learned with uniform
    weights either way.

bvc_resamples : int, default=10
    Bootstrap resamples for ``bvc_decomposition_``, computed at the end of
    ``fit`` on at most 2000 training rows. ``0`` skips it.

n_jobs : int, default=None
    Threads for the resamples of the decomposition (the numerical kernels
    release the GIL). ``None`` means 1 unless in a
    :obj:`joblib.parallel_backend` context; ``-1`` means all processors.""",
    "multi_head_init": """\
init : {'auto', 'pca', 'identity', 'random'} or array-like of shape \
        (n_heads, head_dim, n_features), default='auto'
    Starting projections. Each string option gives the heads blocks of
    directions, disjoint while ``n_heads * head_dim <= n_features`` and
    overlapping beyond: ``'random'``, blocks of random orthogonal
    matrices; ``'pca'``, of the principal axes; ``'identity'``, of the
    standardised features (beyond ``n_features``, head ``h`` takes
    ``head_dim`` consecutive ones, cyclically, from
    ``h * n_features // n_heads``, so no two heads repeat a block unless
    ``head_dim = n_features``). ``'auto'`` is
    ``'random'`` for several heads and as for the single-head estimators
    for one. Each head's bandwidth is then picked from a grid by its
    leave-one-out error (with ``'identity'``, each feature's scale too;
    the user guide's multi-head page compares the starts). Heads that
    would start with the same metric (any string option with ``head_dim =
    n_features``) are then nudged apart by a small random linear map: the
    loss, symmetric in the heads, would keep them identical. An array is
    used as given, in the units of ``components_``.""",
    "multi_head_attributes": """\
components_ : array of shape (n_members * n_heads, head_dim, n_features)
    The learned projections ``W_h^T``, applied to the feature map of
    ``standardize`` (in the input's units unless it is ``'power'``).

head_weights_ : array of shape (n_heads,)
    The weights ``alpha`` that combine the heads' predictions.

hdi_ : float
    Head Diversity Index of the learned subspaces (see
    :func:`~nwensemble.diagnostics.head_diversity_index`), in [0, 1]; NaN
    for one head. It is measured in the standardised feature space where
    the heads are learned (with ``standardize=False`` it equals
    ``head_diversity_index(components_)``).

subspace_similarity_ : array of shape (n_heads, n_heads)
    ``||U_h^T U_g||_F^2 / head_dim`` for every pair of heads, in the same
    space.

principal_angles_ : array of shape (n_heads, n_heads, head_dim)
    Principal angles (radians) between every pair of head subspaces.

head_correlation_ : float
    Mean pairwise correlation of the heads' leave-one-out residuals on the
    training rows (an output-side diversity measure); NaN for one head.

diversity_ : float
    The weight of the heads' ambiguity the projections were fitted with:
    ``diversity``, or the value ``'auto'`` chose.

bvc_decomposition_ : :class:`~sklearn.utils.Bunch` or None
    ``mse``, ``bias2``, ``variance``, ``covariance``, ``n_heads`` (and
    ``n_resamples``, ``n_points``) of
    :func:`~nwensemble.diagnostics.bvc_decomposition` on the training rows
    with the learned projections held fixed, so that
    ``mse = bias2 + variance / n_heads + (1 - 1 / n_heads) * covariance``.
    None when ``bvc_resamples=0``.

n_support_fallback_ : array of int, shape (n_heads,)
    Training rows (of those used for the leave-one-out statistics: all
    up to 2048, else a random 2048) whose leave-one-out estimate had no
    other row inside the compact kernel's support and fell back to the
    nearest row, per head. Always 0 for ``kernel='softmax'``.""",
    "single_head_init": """\
init : {'auto', 'pca', 'identity', 'random'} or array-like of shape \
        (head_dim, n_features), default='auto'
    Starting projection. ``'auto'`` is ``'pca'`` when ``head_dim`` is smaller
    than ``n_features`` and ``'identity'`` otherwise. ``'pca'``: the leading
    principal axes of the standardised features; ``'identity'``: the first
    ``head_dim`` standardised features; ``'random'``: Gaussian directions.
    For these, the overall scale (the bandwidth) is then picked from a grid
    by leave-one-out error on a subsample; with ``'identity'`` each
    feature's scale is then fitted on its own, by the same error. An
    array is used as given, in the units of ``components_``.""",
    "single_head_attributes": """\
components_ : array of shape (head_dim, n_features)
    The learned projection ``W^T``, applied to the feature map of
    ``standardize`` (in the input's units unless it is ``'power'``).

n_support_fallback_ : int
    Training rows (of those used for the leave-one-out statistics: all
    up to 2048, else a random 2048) whose leave-one-out estimate had no
    other row inside the compact kernel's support and fell back to the
    nearest row. Always 0 for ``kernel='softmax'``.""",
    "display_axes": """\
ax_ : matplotlib Axes
figure_ : matplotlib Figure""",
    "display_example_setup": """\
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from sklearn.datasets import make_friedman1""",
    "display_example_fit": """\
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from sklearn.datasets import make_friedman1
>>> from nwensemble import MultiHeadNWRegressor
>>> X, y = make_friedman1(n_samples=200, random_state=0)
>>> reg = MultiHeadNWRegressor(n_heads=3, random_state=0).fit(X, y)""",
    "display_from_estimator": """\
ax : matplotlib Axes, default=None
    Where to draw; a new figure when None.
**kwargs
    Passed to :meth:`plot`.""",
}

_PLACEHOLDER = re.compile(r"^( *)%\((\w+)\)s$", re.MULTILINE)


def fill_doc(obj):
    """Replace every placeholder line of ``obj``'s docstring by its fragment."""

    def expand(match):
        indent, name = match.groups()
        return "\n".join(
            indent + line if line else line for line in _FRAGMENTS[name].splitlines()
        )

    obj.__doc__ = _PLACEHOLDER.sub(expand, obj.__doc__)
    return obj
