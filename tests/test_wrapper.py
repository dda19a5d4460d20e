"""What the wrappers of the estimators share: queries checked and shaped
as the inner estimators were fitted."""

import warnings

import numpy as np
import pytest

from nwensemble import HeadAllocator, ResidualStageRegressor


@pytest.mark.parametrize("Wrapper", [ResidualStageRegressor, HeadAllocator])
def test_a_frame_of_numbers_with_missing_values_predicts_without_warnings(Wrapper):
    """Numbers with missing values reach the inner estimators as an array;
    the queries must too (a DataFrame query warned that the inner estimator
    was fitted without feature names), in float and nullable dtypes."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    n = 150
    size = rng.normal(size=n)
    frame = pd.DataFrame(
        {"size": np.where(np.arange(n) % 7 == 0, np.nan, size), "x": rng.normal(size=n)}
    )
    y = size + frame["x"].to_numpy()
    nullable = frame.astype("Float64")
    for table in (frame, nullable):
        model = Wrapper(random_state=0).fit(table, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pred = model.predict(table.iloc[:5])
        assert np.isfinite(pred).all()
        assert list(model.feature_names_in_) == ["size", "x"]
