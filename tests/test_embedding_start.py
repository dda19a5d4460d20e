"""Where the embeddings of a table's codes start."""

import numpy as np
import pandas as pd
from numpy.testing import assert_allclose

import nwensemble._fit.embedding_start as embedding_start
from nwensemble import NWAttentionRegressor


def _record_positions(monkeypatch):
    seen = []
    positions = embedding_start.code_positions

    def record(*args, **kwargs):
        seen.append(positions(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(embedding_start, "code_positions", record)
    return seen


def test_a_few_missing_values_start_at_their_effect_on_the_target(monkeypatch):
    # Four missing values among 200 rows: standardised as a column, their
    # code would sit about sqrt(200 / 4) = 7 spreads from the observed one
    # whatever their targets; in the target's units it sits at their mean.
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 2)), columns=["a", "b"])
    y = X["a"].to_numpy() + 0.1 * rng.normal(size=200)
    missing = [3, 50, 120, 177]
    X.loc[missing, "b"] = np.nan
    seen = _record_positions(monkeypatch)
    NWAttentionRegressor(max_iter=0, random_state=0).fit(X, y)
    (observed, absent) = seen[0][-1]
    standard = (y - y.mean()) / y.std()
    assert_allclose(absent, standard[missing].mean(), rtol=1e-10)
    assert_allclose(observed, np.delete(standard, missing).mean(), rtol=1e-10)
    assert abs(absent) < 2


def test_a_categorical_column_starts_standardised(monkeypatch):
    rng = np.random.default_rng(1)
    level = rng.choice(["u", "v", "w"], size=150)
    y = {"u": 0.0, "v": 1.0, "w": 3.0}
    target = np.array([y[v] for v in level]) + 0.1 * rng.normal(size=150)
    X = pd.DataFrame({"x": rng.normal(size=150), "level": level})
    seen = _record_positions(monkeypatch)
    NWAttentionRegressor(max_iter=0, random_state=0).fit(X, target)
    positions = seen[0][0]
    # Levels are numbered in the order they first appear.
    first = {v: i for i, v in enumerate(pd.unique(level))}
    codes = pd.Series(level).map(first).to_numpy()
    column = positions[codes]
    assert_allclose([column.mean(), column.std()], [0.0, 1.0], atol=1e-10)
