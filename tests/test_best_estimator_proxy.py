"""The allocator as its chosen model: what it forwards, from one list."""

import numpy as np
import pandas as pd
import pytest

from nwensemble import HeadAllocator, MultiHeadNWClassifier, MultiHeadNWRegressor
from nwensemble._best_estimator_proxy import FORWARDED_ATTRIBUTES, NOT_FORWARDED


def _numbers():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    return X, X[:, 0] + 0.1 * rng.standard_normal(60)


def _table():
    X, y = _numbers()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["kind"] = np.where(X[:, 1] > 0, "up", "down")
    frame.loc[::7, "a"] = np.nan
    return frame, y


def _fitted_attributes(estimator):
    return {
        name
        for name in vars(estimator)
        if name.endswith("_") and not name.startswith("_")
    }


@pytest.mark.parametrize("data", [_numbers, _table], ids=["numbers", "table"])
def test_the_list_covers_every_fitted_attribute_of_the_chosen_model(data):
    """Each fitted attribute of the chosen regressor or classifier is
    forwarded (the same object) or named as not forwarded; each forwarded
    one is documented, and the list holds no name neither model has."""
    X, y = data()
    labels = np.where(y > 0, "high", "low")
    seen = set()
    for model, target in (
        (MultiHeadNWRegressor(max_iter=3, random_state=0), y),
        (MultiHeadNWClassifier(max_iter=3, random_state=0), labels),
    ):
        allocator = HeadAllocator(model, budget=2).fit(X, target)
        chosen = allocator.best_estimator_
        fitted = _fitted_attributes(chosen) - set(NOT_FORWARDED)
        assert fitted <= set(FORWARDED_ATTRIBUTES), fitted - set(FORWARDED_ATTRIBUTES)
        for name in fitted:
            assert getattr(allocator, name) is getattr(chosen, name), name
        seen |= fitted
    assert seen == set(FORWARDED_ATTRIBUTES)
    for name in FORWARDED_ATTRIBUTES:
        assert f"``{name}``" in HeadAllocator.__doc__, name


def test_an_attribute_outside_the_list_is_not_read_through():
    X, y = _numbers()
    allocator = HeadAllocator(
        MultiHeadNWRegressor(max_iter=3, random_state=0), budget=2
    ).fit(X, y)
    with pytest.raises(AttributeError, match="predictor_"):
        allocator.predictor_


@pytest.mark.parametrize("data", [_numbers, _table], ids=["numbers", "table"])
def test_a_query_is_validated_once_by_the_chosen_model(data, monkeypatch):
    """The allocator hands a query to the chosen model, which was fitted on
    the rows as the allocator got them: one validation, with the column
    names of a frame checked there."""
    import nwensemble._base as base
    import nwensemble._wrapper as wrapper

    X, y = data()
    allocator = HeadAllocator(
        MultiHeadNWRegressor(max_iter=3, random_state=0), budget=2
    ).fit(X, y)
    calls = []

    def counting(module):
        original = module.validate_data

        def validate_data(estimator, *args, **kwargs):
            calls.append(type(estimator).__name__)
            return original(estimator, *args, **kwargs)

        monkeypatch.setattr(module, "validate_data", validate_data)

    counting(base)
    counting(wrapper)
    allocator.predict(X[:5])
    assert calls == ["MultiHeadNWRegressor"]
    if hasattr(X, "columns"):
        renamed = X.rename(columns={"a": "z"})
        with pytest.raises(ValueError, match="feature names should match"):
            allocator.predict(renamed)
