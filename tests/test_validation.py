"""Bad input gets a clear error saying what is wrong."""

import numpy as np
import pytest
from helpers import shrunk_correlation
from numpy.testing import assert_allclose

from nwensemble import (
    MultiHeadNWRegressor,
    NWAttentionRegressor,
    ResidualStageRegressor,
)

rng = np.random.default_rng(0)
X = rng.standard_normal((30, 4))
y = rng.standard_normal(30)


def _with(a, index, value):
    a = a.astype(object) if isinstance(value, str) else a.copy()
    a[index] = value
    return a


@pytest.mark.parametrize(
    "X_bad, y_bad, error, match",
    [
        (_with(X, (0, 1), np.inf), y, ValueError, "Input X contains infinity"),
        (X, _with(y, 3, np.nan), ValueError, "Input y contains NaN"),
        (X, _with(y, 3, -np.inf), ValueError, "Input y contains infinity"),
        (X, _with(y, 0, "a"), ValueError, "could not convert string to float"),
        (np.empty((0, 4)), np.empty(0), ValueError, "0 sample"),
        (X[:1], y[:1], ValueError, "1 sample"),
        (X[:, :, None], y, ValueError, "Found array with dim 3"),
        (X, y[:-1], ValueError, "inconsistent numbers of samples"),
    ],
)
def test_fit_rejects_bad_input(X_bad, y_bad, error, match):
    """inf, NaN in y, strings in y, empty, one sample, 3-D, length mismatch:
    clear errors (NaN and strings in X are missing values and levels, see
    test_table.py)."""
    with pytest.raises(error, match=match):
        NWAttentionRegressor(max_iter=2).fit(X_bad, y_bad)


@pytest.mark.parametrize(
    "Estimator", [NWAttentionRegressor, MultiHeadNWRegressor, ResidualStageRegressor]
)
@pytest.mark.parametrize("with_strings", [False, True])
def test_dates_and_durations_are_refused_by_name(Estimator, with_strings):
    """A date or duration column gets a clear error at fit and at predict,
    on a table of numbers (where NumPy's own error named no column) and on
    one with categorical columns (which converted dates to nanoseconds)."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": X[:, 0], "when": pd.date_range("2020", periods=30)})
    if with_strings:
        frame["level"] = np.where(X[:, 1] > 0, "u", "v")
    with pytest.raises(ValueError, match=r"'when' \(datetime64.*dates, times"):
        Estimator().fit(frame, y)
    lasted = frame.assign(when=pd.to_timedelta(np.arange(30), unit="h"))
    with pytest.raises(ValueError, match=r"'when' \(timedelta64"):
        Estimator().fit(lasted, y)
    model = Estimator(random_state=0).fit(frame.drop(columns="when"), y)
    dated = frame.drop(columns="when").assign(a=frame["when"])
    with pytest.raises(ValueError, match=r"'a' \(datetime64"):
        model.predict(dated)
    with pytest.raises(ValueError, match=r"X \(datetime64\[D\]\) holds dates"):
        Estimator().fit(np.full((30, 2), np.datetime64("2020-01-01")), y)
    months = frame.assign(when=pd.period_range("2020-01", periods=30, freq="M"))
    with pytest.raises(ValueError, match=r"'when' \(period\[M\]\) hold dates"):
        Estimator().fit(months, y)
    # Date objects in an object column would otherwise be categories, one
    # level per date; the first present value names the column.
    days = frame.assign(when=[None] + [d.date() for d in frame["when"][1:]])
    with pytest.raises(ValueError, match=r"'when' \(object\) hold dates"):
        Estimator().fit(days, y)
    rows = np.column_stack([X[:, 0], days["when"].to_numpy()]).astype(object)
    with pytest.raises(ValueError, match=r"Columns 1 of X \(object\) hold dates"):
        Estimator().fit(rows, y)


def test_predict_rejects_wrong_feature_count():
    """predict with another number of features says how many it expects."""
    reg = NWAttentionRegressor(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="expecting 4 features"):
        reg.predict(X[:, :3])


def test_predict_puts_an_unseen_missing_value_at_its_conditional_mean():
    """A NaN at predict time in a feature that had none in training sits at
    its conditional mean given the row's other features (the Gaussian one,
    from the standardised training correlations, shrunk): finite, and the
    prediction of that row with the feature there."""
    Xc = X.copy()
    Xc[:, 2] = X[:, 0] + 0.5 * X[:, 1] + 0.2 * X[:, 2]
    reg = NWAttentionRegressor(max_iter=2, standardize=True).fit(Xc, y)
    query = _with(Xc[:3], (2, 2), np.nan)
    S = (Xc - Xc.mean(0)) / Xc.std(0)
    C, _ = shrunk_correlation(S)
    o = [0, 1, 3]
    fill = C[2, o] @ np.linalg.solve(C[np.ix_(o, o)], S[2, o])
    there = Xc[:3].copy()
    there[2, 2] = Xc[:, 2].mean() + fill * Xc[:, 2].std()
    np.testing.assert_allclose(reg.predict(query), reg.predict(there), rtol=1e-9)
    with pytest.raises(ValueError, match="Input X contains infinity"):
        reg.predict(_with(X, (2, 2), np.inf))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"head_dim": 0}, "'head_dim' parameter"),
        ({"max_iter": -1}, "'max_iter' parameter"),
        ({"init": "nope"}, "'init' parameter"),
        ({"validation_fraction": 1.0}, "'validation_fraction' parameter"),
        ({"head_dim": 9}, "head_dim=9 is larger than n_features = 4"),
        ({"init": np.eye(3)}, r"init must have shape \(head_dim, n_features\)"),
    ],
)
def test_bad_parameters(params, match):
    """Out-of-range parameters raise with the parameter named."""
    with pytest.raises(ValueError, match=match):
        NWAttentionRegressor(**params).fit(X, y)


def test_sample_weight_checks():
    """Negative weights, or fewer than two positive ones, are refused."""
    with pytest.raises(ValueError, match="non-negative"):
        NWAttentionRegressor().fit(X, y, sample_weight=np.r_[-1.0, np.ones(29)])
    with pytest.raises(ValueError, match="At least 2 samples with positive"):
        NWAttentionRegressor().fit(X, y, sample_weight=np.r_[1.0, np.zeros(29)])


def test_early_stopping_needs_rows():
    """Forcing early stopping on too few rows explains what is missing."""
    with pytest.raises(ValueError, match="early_stopping=True"):
        NWAttentionRegressor(early_stopping=True).fit(X[:2], y[:2])


def test_warm_start_needs_same_features():
    """warm_start with another number of features explains the clash."""
    reg = NWAttentionRegressor(max_iter=0, warm_start=True).fit(X, y)
    with pytest.raises(ValueError, match="warm_start=True needs the 4 features"):
        reg.fit(X[:, :3], y)


def test_a_table_model_gives_scikit_learns_errors_for_one_dimensional_queries():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "b": rng.choice(["u", "v"], 60)})
    model = NWAttentionRegressor(max_iter=3, random_state=0).fit(
        frame, frame["a"].to_numpy()
    )
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
        model.predict([0.1, "u"])
    with pytest.raises(ValueError, match="Expected 2D array, got scalar array"):
        model.predict("u")
    # A list of rows is a table like the frame's rows.
    with pytest.warns(UserWarning, match="feature names"):
        from_list = model.predict([[0.1, "u"], [0.3, "v"]])
    expected = model.predict(pd.DataFrame({"a": [0.1, 0.3], "b": ["u", "v"]}))
    assert_allclose(from_list, expected)


def test_a_number_and_the_same_number_as_text_in_one_column_are_refused():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "b": [10, "10", "x"] * 20})
    with pytest.raises(ValueError, match="'10' both as a number and as text"):
        NWAttentionRegressor(max_iter=2).fit(frame, rng.normal(size=60))
    # Numbers and other text are levels of their own.
    frame["b"] = [10, "ten", "x"] * 20
    model = NWAttentionRegressor(max_iter=2).fit(frame, rng.normal(size=60))
    assert len(model.categories_[0]) == 3
