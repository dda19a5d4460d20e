"""Tables as they come: categorical columns and missing values, natively."""

import pickle
import warnings

import numpy as np
import pytest
from helpers import shrunk_correlation
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from nwensemble import HeadAllocator, MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._fit import column_types
from nwensemble._fit.column_types import MIN_LEVEL_ROWS
from nwensemble._shared import table as table_module

pd = pytest.importorskip("pandas")

LEVELS = ["red", "green", "blue", "teal"]
EFFECT = {"red": 0.0, "green": 2.0, "blue": -1.5, "teal": 1.0}


def mixed_frame(n=240, seed=0, missing=0.0):
    """A numeric feature, a string feature whose level shifts the target, a
    second numeric feature with ``missing`` of its cells NaN."""
    rng = np.random.default_rng(seed)
    color = rng.choice(LEVELS, n)
    x = rng.uniform(-2, 2, n)
    z = rng.standard_normal(n)
    y = np.sin(x) + np.array([EFFECT[c] for c in color]) + 0.3 * z
    y = y + 0.1 * rng.standard_normal(n)
    z = np.where(rng.random(n) < missing, np.nan, z)
    frame = pd.DataFrame({"x": x, "color": color, "z": z})
    return frame, y


def _quiet(model, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y, **kw)


ESTIMATORS = [
    lambda **kw: NWAttentionRegressor(random_state=0, max_iter=30, **kw),
    lambda **kw: MultiHeadNWRegressor(
        n_heads=2, random_state=0, max_iter=30, bvc_resamples=2, **kw
    ),
]


@pytest.mark.parametrize("make", ESTIMATORS)
def test_strings_are_categorical_and_the_level_matters(make):
    X, y = mixed_frame()
    model = _quiet(make(), X, y)
    assert_array_equal(model.is_categorical_, [False, True, False])
    assert_array_equal(model.categories_[0], sorted(LEVELS))
    # Same x and z, another colour: the prediction moves with the effect.
    rows = X.iloc[:20].copy()
    shifted = rows.assign(color="green")
    base = rows.assign(color="blue")
    gap = np.mean(model.predict(shifted) - model.predict(base))
    assert 2.0 < gap < 5.0  # the true gap is 3.5
    assert model.score(X, y) > 0.8


@pytest.mark.parametrize("make", ESTIMATORS)
def test_relabelled_or_reordered_levels_give_the_same_predictions(make):
    X, y = mixed_frame(seed=1)
    ref = _quiet(make(), X, y).predict(X)
    relabelled = X.assign(color=X["color"].map(dict(zip(LEVELS, "QWER"))))
    assert_array_equal(_quiet(make(), relabelled, y).predict(relabelled), ref)
    order = pd.CategoricalDtype(LEVELS[::-1])
    reordered = X.assign(color=X["color"].astype(order))
    assert_array_equal(_quiet(make(), reordered, y).predict(reordered), ref)


@settings(max_examples=20, deadline=None)
@given(
    n_levels=st.integers(2, 6),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow
def test_strings_category_and_codes_are_one_model(n_levels, seed):
    """A column given as strings, as ``category`` or as integer codes named
    in ``categorical_features`` gives the same model."""
    rng = np.random.default_rng(seed)
    n = 60
    codes = rng.integers(0, n_levels, n)
    x = rng.standard_normal(n)
    y = x + codes % 2 + 0.1 * rng.standard_normal(n)
    names = np.array([f"level {k}" for k in range(n_levels)], dtype=object)
    strings = pd.DataFrame({"x": x, "c": names[codes]})
    as_category = strings.assign(c=strings["c"].astype("category"))
    as_codes = np.column_stack([x, codes.astype(float)])
    kw = dict(max_iter=5, random_state=0)
    preds = [
        _quiet(NWAttentionRegressor(**kw), strings, y).predict(strings),
        _quiet(NWAttentionRegressor(**kw), as_category, y).predict(as_category),
        _quiet(
            NWAttentionRegressor(categorical_features=[1], **kw), as_codes, y
        ).predict(as_codes),
    ]
    assert_allclose(preds[1], preds[0], rtol=1e-12)
    assert_allclose(preds[2], preds[0], rtol=1e-12)


def test_unseen_missing_and_infrequent_levels():
    X, _ = mixed_frame(n=300, seed=2)
    # The colour leaves the target alone, so levels of under
    # MIN_LEVEL_ROWS rows share one code (see rows_for_own_code).
    y = np.sin(X["x"].to_numpy()) + 0.1 * np.random.default_rng(2).standard_normal(300)
    X = X.copy()
    X.loc[X.index[:3], "color"] = ["rare a", "rare b", "rare a"]
    X.loc[X.index[3:6], "color"] = np.nan
    model = _quiet(NWAttentionRegressor(random_state=0, max_iter=20), X, y)
    assert sorted(model.infrequent_categories_[0]) == ["rare a", "rare b"]
    assert len(model.categories_[0]) == len(LEVELS)
    assert model.embeddings_[0].shape == (len(LEVELS) + 2, model.components_.shape[0])
    query = X.iloc[[10, 10, 10, 10]].copy()
    query["color"] = ["rare a", "rare b", "never seen", np.nan]
    pred = model.predict(query)
    # Infrequent and unseen levels share one embedding: one prediction.
    assert pred[0] == pred[1] == pred[2]
    assert np.all(np.isfinite(pred)) and np.all((pred >= y.min()) & (pred <= y.max()))


def test_levels_below_the_threshold_are_infrequent():
    rng = np.random.default_rng(3)
    counts = [MIN_LEVEL_ROWS - 1, MIN_LEVEL_ROWS, 40]
    color = np.repeat(["few", "enough", "many"], counts)
    X = pd.DataFrame({"x": rng.standard_normal(color.size), "c": color})
    y = rng.standard_normal(color.size)
    model = _quiet(NWAttentionRegressor(max_iter=3, random_state=0), X, y)
    assert list(model.infrequent_categories_[0]) == ["few"]
    assert sorted(model.categories_[0]) == ["enough", "many"]


def test_levels_that_differ_strongly_need_fewer_rows():
    # Twenty levels of two rows each: where the levels' means are what the
    # target is, each level has a code of its own; where the target is
    # noise, all twenty share the infrequent one.
    rng = np.random.default_rng(7)
    color = np.repeat([f"level {k}" for k in range(20)], 2)
    color = np.concatenate([color, np.repeat(["big a", "big b"], 30)])
    effect = {level: rng.standard_normal() for level in np.unique(color)}
    X = pd.DataFrame({"x": rng.standard_normal(color.size), "c": color})
    strong = np.array([effect[c] for c in color]) + 0.05 * rng.standard_normal(
        color.size
    )
    model = _quiet(NWAttentionRegressor(max_iter=3, random_state=0), X, strong)
    assert len(model.categories_[0]) == 22
    assert len(model.infrequent_categories_[0]) == 0
    noise = rng.standard_normal(color.size)
    model = _quiet(NWAttentionRegressor(max_iter=3, random_state=0), X, noise)
    assert sorted(model.categories_[0]) == ["big a", "big b"]
    assert len(model.infrequent_categories_[0]) == 20


def test_levels_judged_by_what_the_numbers_leave():
    # Each place's rows share one distance, and the target is the distance:
    # the places' means differ as strongly as in the test above, but only
    # as their distances do, so the two-row places share the infrequent code.
    rng = np.random.default_rng(8)
    place = np.concatenate([np.repeat(np.arange(20), 2), np.repeat([20, 21], 30)])
    distance = rng.uniform(1, 10, 22)[place] + 0.01 * rng.standard_normal(place.size)
    X = pd.DataFrame({"distance": distance, "place": [f"p{k}" for k in place]})
    y = 3 * distance + 0.05 * rng.standard_normal(place.size)
    model = _quiet(NWAttentionRegressor(max_iter=3, random_state=0), X, y)
    assert sorted(model.categories_[0]) == ["p20", "p21"]
    assert len(model.infrequent_categories_[0]) == 20


def test_left_by_numbers_is_each_rows_left_out_least_squares_residual():
    rng = np.random.default_rng(1)
    n = 40
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    b[[3, 7]] = np.nan
    cols = [a, np.array(["u"] * n, dtype=object), b]
    y = 2 * a - b + rng.standard_normal(n)
    y[[3, 7]] = 0.0
    rows = np.ones(n, dtype=bool)
    rows[5] = False
    got = column_types.left_by_numbers(
        cols, np.array([False, True, False]), ["a", "c", "b"], y, rows
    )
    filled = np.where(np.isnan(b), np.nanmean(b[rows]), b)
    A = np.column_stack([np.ones(n), a, filled])[rows]
    expected = []
    for i in range(int(rows.sum())):
        keep = np.arange(int(rows.sum())) != i
        coef = np.linalg.lstsq(A[keep], y[rows][keep], rcond=None)[0]
        expected.append(y[rows][i] - A[i] @ coef)
    assert got.shape == (n - 1, 1)
    assert_allclose(got[:, 0], expected, rtol=1e-9, atol=1e-12)


def test_rows_for_own_code_is_where_a_level_mean_is_half_signal():
    rng = np.random.default_rng(0)
    levels = np.repeat(np.arange(50), 8)
    means = rng.standard_normal(50)
    y = means[levels] + 2.0 * rng.standard_normal(levels.size)
    # The one-way random-effects moments, by hand.
    n, L = levels.size, 50
    level_means = np.array([y[levels == k].mean() for k in range(L)])
    sigma2 = ((y - level_means[levels]) ** 2).sum() / (n - L)
    between = (8 * (level_means - y.mean()) ** 2).sum()
    tau2 = (between - (L - 1) * sigma2) / (n - 8 * 8 * L / n)
    assert 1 < sigma2 / tau2 < MIN_LEVEL_ROWS
    assert_allclose(column_types.rows_for_own_code(levels, y), sigma2 / tau2)
    # Missing rows (-1) are left out; outputs add up.
    with_missing = np.concatenate([levels, [-1, -1]])
    y_missing = np.concatenate([y, [100.0, -100.0]])
    assert_allclose(
        column_types.rows_for_own_code(with_missing, y_missing), sigma2 / tau2
    )
    two = np.column_stack([y, y])
    assert_allclose(column_types.rows_for_own_code(levels, two), sigma2 / tau2)
    # Levels that differ far more than their rows: one row is enough.
    assert column_types.rows_for_own_code(levels, means[levels]) == 1.0
    # Means no further apart than noise, or one level: MIN_LEVEL_ROWS.
    flat = np.where(np.arange(levels.size) % 2 == 0, 1.0, -1.0)
    assert column_types.rows_for_own_code(levels, flat) == MIN_LEVEL_ROWS
    assert column_types.rows_for_own_code(np.zeros(10, dtype=int), y[:10]) == (
        MIN_LEVEL_ROWS
    )
    assert column_types.rows_for_own_code(np.full(5, -1), y[:5]) == MIN_LEVEL_ROWS


@pytest.mark.parametrize("make", ESTIMATORS)
def test_numeric_missing_values_have_a_learned_position(make):
    X, y = mixed_frame(n=300, seed=4, missing=0.2)
    model = _quiet(make(), X, y)
    M = model.missing_embeddings_
    single = M.ndim == 2
    column = M[:, 2] if single else M[:, :, 2]
    assert np.any(column != 0)
    assert np.all((M[:, :2] if single else M[:, :, :2]) == 0)
    pred = model.predict(X)
    assert np.all(np.isfinite(pred))


def test_a_missing_value_never_seen_in_training_sits_at_its_conditional_mean():
    # "x" never missing in training; "z" moves with it, so a missing x is
    # placed where the row's z puts it, and where z says nothing, at its mean.
    X, y = mixed_frame(n=200, seed=5)
    noise = np.random.default_rng(5).standard_normal(200)
    X = X.assign(z=X["x"] + noise)
    model = _quiet(NWAttentionRegressor(standardize=True, max_iter=10), X, y)
    query = X.iloc[:5].copy()
    missing = query.assign(x=np.nan)
    numbers = X[["x", "z"]]
    standardised = (numbers - numbers.mean()) / numbers.std(ddof=0)
    # The correlation shrunk as Schaefer and Strimmer shrink it (one pair).
    C, lam = shrunk_correlation(standardised.to_numpy())
    assert 0 < lam < 1
    fill = X["x"].mean() + C[0, 1] * standardised["z"].iloc[:5] * X["x"].std(ddof=0)
    assert_allclose(
        model.predict(missing), model.predict(query.assign(x=fill)), rtol=1e-9
    )
    alone = X.drop(columns="z")
    model = _quiet(NWAttentionRegressor(standardize=True, max_iter=10), alone, y)
    query = alone.iloc[:5]
    assert_allclose(
        model.predict(query.assign(x=np.nan)),
        model.predict(query.assign(x=alone["x"].mean())),
        rtol=1e-12,
    )


def test_bad_tables_get_clear_errors():
    X, y = mixed_frame(n=60)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        NWAttentionRegressor().fit(X, np.where(np.arange(60) == 3, np.nan, y))
    with pytest.raises(ValueError, match="Column 'x' holds an infinite value"):
        NWAttentionRegressor().fit(X.assign(x=np.where(X.index == 7, np.inf, X.x)), y)
    with pytest.raises(ValueError, match="are not numeric"):
        NWAttentionRegressor(categorical_features=None).fit(X, y)
    with pytest.raises(ValueError, match="not a column of X"):
        NWAttentionRegressor(categorical_features=["colour"]).fit(X, y)
    with pytest.raises(ValueError, match="must lie in"):
        NWAttentionRegressor(categorical_features=[5]).fit(X, y)
    with pytest.raises(ValueError, match="not a number: 'seven'"):
        numbers = X.assign(x=X["x"].astype(object))
        numbers.loc[4, "x"] = "seven"
        NWAttentionRegressor(categorical_features=[1]).fit(numbers, y)


def test_all_missing_and_single_level_columns_carry_nothing():
    """A numeric column never observed in training and a categorical column
    with one level are accepted; values they take at prediction change
    nothing."""
    X, y = mixed_frame(n=120, seed=6)
    X = X.assign(empty=np.nan, region="Mid-Atlantic")
    model = _quiet(NWAttentionRegressor(max_iter=10, random_state=0), X, y)
    query = X.iloc[:5]
    other = query.assign(empty=123.0, region="elsewhere")
    assert_allclose(model.predict(other), model.predict(query), rtol=1e-12)


def test_numbers_read_as_text_are_named_in_a_warning():
    """A CSV column of numbers with a marker such as '?' for missing values
    is read as text, hence taken as categorical by its dtype: the fit says
    so and how to convert it; genuine levels, a ``category`` dtype and an
    explicit ``categorical_features`` are not warned about."""
    X, y = mixed_frame(n=120, seed=3)
    horsepower = X["x"].round(1).astype(str).where(np.arange(120) % 20 > 0, "?")
    read = X.assign(x=horsepower.astype(object))
    model = NWAttentionRegressor(max_iter=2, random_state=0)
    with pytest.warns(
        UserWarning, match=r"Column 'x' is categorical.*'\?'.*to_numeric"
    ):
        model.fit(read, y)
    quiet = [
        (X, "from_dtype"),
        (read, [0, 1]),
        (X.assign(x=pd.Categorical(X["x"].round(1))), "from_dtype"),
    ]
    for table, categorical in quiet:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            _quiet(model.set_params(categorical_features=categorical), table, y)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_a_polars_frame_is_its_pandas_frame(make):
    """A polars DataFrame (string, categorical and boolean columns, nulls in
    numbers and in levels) fits the model of the same pandas frame, and
    either kind of frame predicts with either model."""
    pl = pytest.importorskip("polars")
    pytest.importorskip("pyarrow")  # polars' conversion to pandas
    X, y = mixed_frame(n=200, seed=8, missing=0.2)
    rng = np.random.default_rng(8)
    colors = [c if keep else None for c, keep in zip(X["color"], rng.random(200) > 0.1)]
    X = X.assign(color=pd.Series(colors, dtype=object), flag=rng.random(200) < 0.5)
    y = y + X["flag"].to_numpy()
    frame = pl.DataFrame(
        {
            "x": X["x"].to_numpy(),
            "color": pl.Series(colors, dtype=pl.String),
            "z": pl.Series(X["z"].to_numpy()).fill_nan(None),
            "flag": X["flag"].to_numpy(),
        }
    )
    assert frame["z"].null_count() > 0 and frame["color"].null_count() > 0
    from_pandas = _quiet(make(), X, y)
    from_polars = _quiet(make(), frame, y)
    assert_array_equal(from_polars.is_categorical_, [False, True, False, True])
    assert_array_equal(from_polars.feature_names_in_, ["x", "color", "z", "flag"])
    ref = from_pandas.predict(X)
    assert_array_equal(from_polars.predict(frame), ref)
    assert_array_equal(from_pandas.predict(frame), ref)
    as_category = frame.with_columns(pl.col("color").cast(pl.Categorical))
    assert_array_equal(_quiet(make(), as_category, y).predict(as_category), ref)


def test_levels_by_pandas_hash_tables_are_those_of_the_loop(monkeypatch):
    """pandas' hash tables (where pandas is installed) number the levels and
    find them at prediction as the loop over the rows does without pandas:
    3, 3.0 and np.int64(3) one level, True and 1 one level, '3' and b'a'
    levels of their own, missing values none."""
    values = np.array(
        [3, 3.0, np.int64(3), "3", None, np.float64(2.0), 2, True, 1, np.nan,
         "a", np.str_("a"), b"a", -0.0, 0.0, 0, pd.NA],
        dtype=object,
    )  # fmt: skip
    missing = table_module.missing_mask(values)
    weighted = np.arange(values.shape[0]) % 3 > 0
    queries = np.array([3.0, "a", 7, None, 0, 1.0, b"a", "3"], dtype=object)
    levels, counts, rows = column_types._first_appearance(values, missing, weighted)
    ids = table_module._level_ids(queries, levels)
    monkeypatch.setattr(table_module, "optional_pandas", lambda: None)
    monkeypatch.setattr(column_types, "optional_pandas", lambda: None)
    loop_levels, loop_counts, loop_rows = column_types._first_appearance(
        values, missing, weighted
    )
    assert [table_module.level_key(v) for v in levels] == [
        table_module.level_key(v) for v in loop_levels
    ]
    assert_array_equal(counts, loop_counts)
    assert_array_equal(rows, loop_rows)
    assert_array_equal(rows[missing], -1)
    assert_array_equal(
        rows[~missing], table_module._level_ids(values[~missing], levels)
    )
    assert_array_equal(ids, table_module._level_ids(queries, loop_levels))
    assert ids.tolist() == [0, 4, -1, -2, 6, 3, 5, 1]


def test_an_all_missing_column_among_numbers_carries_nothing():
    """A numeric column never observed in a table without categorical
    columns or other missing values (no code column at all) is accepted as
    above, as a DataFrame or as an array."""
    X, y = mixed_frame(n=120, seed=6)
    numbers = X.drop(columns="color").assign(empty=np.nan)
    for table in (numbers, numbers.to_numpy()):
        model = _quiet(NWAttentionRegressor(max_iter=10, random_state=0), table, y)
        query = table[:5].copy()
        other = query.copy()
        if isinstance(other, np.ndarray):
            other[:, -1] = 123.0
        else:
            other["empty"] = 123.0
        assert_allclose(model.predict(other), model.predict(query), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["softmax", "epanechnikov"])
@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
def test_every_method_works_on_a_table(kernel, solver):
    X, y = mixed_frame(n=200, seed=7, missing=0.1)
    Y = np.column_stack([y, 2 * y])
    sw = np.r_[np.ones(100), 2 * np.ones(100)]
    model = MultiHeadNWRegressor(
        n_heads=2, kernel=kernel, solver=solver, max_iter=10, random_state=0
    )
    _quiet(model, X, Y, sample_weight=sw)
    pred, bounds = model.predict_interval(X.iloc[:4])
    assert pred.shape == (4, 2) and bounds.shape == (4, 2, 2)
    weights = model.attention_weights(X.iloc[:4])
    dense = weights.toarray() if hasattr(weights, "toarray") else weights
    assert_allclose(dense.sum(axis=1), 1.0)
    assert model.transform(X.iloc[:4]).shape == (4, model.components_.shape[0] * 2)
    assert 0 <= model.hdi_ <= 1
    parts = model.bvc_decomposition_
    H = parts.n_heads
    total = parts.bias2 + parts.variance / H + (1 - 1 / H) * parts.covariance
    assert abs(total - parts.mse) <= 1e-9 * parts.mse
    loaded = pickle.loads(pickle.dumps(model))
    assert_array_equal(loaded.predict(X.iloc[:4]), model.predict(X.iloc[:4]))


def test_allocator_in_a_grid_search_and_a_pipeline():
    X, y = mixed_frame(n=150, seed=8, missing=0.1)
    search = GridSearchCV(
        HeadAllocator(MultiHeadNWRegressor(max_iter=5, bvc_resamples=0)),
        {"budget": [2, 4]},
        cv=2,
    )
    _quiet(search, X, y)
    assert search.best_estimator_.categories_[0].size == len(LEVELS)
    pipe = make_pipeline(
        FunctionTransformer(lambda frame: frame),
        HeadAllocator(MultiHeadNWRegressor(max_iter=5), random_state=0),
    )
    assert _quiet(pipe, X, y).predict(X.iloc[:3]).shape == (3,)


def test_table_on_a_device(ns):
    """Codes and embeddings live beside the input: integer codes with
    categorical_features, and NaN, in every namespace."""
    X, y = mixed_frame(n=150, seed=9, missing=0.1)
    codes = X["color"].map({c: k for k, c in enumerate(LEVELS)}).to_numpy(float)
    A = np.column_stack([X["x"], codes, X["z"]])
    kw = dict(categorical_features=[1], n_heads=2, max_iter=5, random_state=0)
    ref = _quiet(MultiHeadNWRegressor(**kw), A, y)
    with ns.context():
        model = _quiet(MultiHeadNWRegressor(**kw), ns.asarray(A), ns.asarray(y))
        pred = ns.check_output(model.predict(ns.asarray(A[:7])))
        ns.check_output(model.embeddings_[0])
    assert_allclose(pred, ref.predict(A[:7]), rtol=1e-8)
