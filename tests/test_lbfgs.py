"""The coarse-to-fine L-BFGS solver: which stages a fit runs."""

import re

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_friedman1

from nwensemble import NWAttentionRegressor
from nwensemble._fit.lbfgs import COARSE_SIZE


def _stages_run(capsys, X, y, **params):
    """``(subsample, all rows, slopes)``: whether the fit's verbose lines
    show an iteration of the subsample stage, one of the all-rows stage,
    and the slopes' continuation."""
    NWAttentionRegressor(
        solver="lbfgs",
        early_stopping=False,
        max_iter=4,
        random_state=0,
        verbose=1,
        **params,
    ).fit(X, y)
    out = capsys.readouterr().out
    return (
        "subsample iter" in out,
        re.search(r"\] iter ", out) is not None,
        "feature slopes continued" in out,
    )


@pytest.fixture(scope="module")
def rows():
    # More than twice COARSE_SIZE rows: one head's fit runs coarse to fine.
    X, y = make_friedman1(
        n_samples=2 * COARSE_SIZE + 200, n_features=5, noise=0.5, random_state=0
    )
    return X, y


def test_one_head_refines_on_all_rows(capsys, rows):
    assert _stages_run(capsys, *rows) == (True, True, False)


def test_slopes_continuation_replaces_the_refinement(capsys, rows):
    """With feature slopes, their continuation (on all rows) refines the
    subsample's fit; no all-rows stage without them runs first."""
    assert _stages_run(capsys, *rows, feature_slopes=True) == (True, False, True)


def test_slopes_without_numeric_features_keep_the_refinement(capsys):
    """A table of categorical features alone has no slopes to continue:
    its fit still refines on all rows."""
    rng = np.random.default_rng(0)
    n = 2 * COARSE_SIZE + 600
    # Four columns of 12 levels: nearly every row distinct (copies merge).
    frame = pd.DataFrame(
        {c: rng.choice([f"{c}{k}" for k in range(12)], n) for c in "abcd"}
    )
    y = (frame["a"] == "a0") + rng.normal(size=n)
    assert _stages_run(capsys, frame, y, feature_slopes=True) == (True, True, False)
