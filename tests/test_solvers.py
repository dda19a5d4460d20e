"""solver='auto': the solver chosen by the number of rows and heads."""

import numpy as np
import pandas as pd
import pytest

import nwensemble._fit.engine as engine
from nwensemble import NWAttentionRegressor
from nwensemble._fit.adam import fit_adam
from nwensemble._fit.lbfgs import fit_lbfgs
from nwensemble._fit.solvers import (
    AUTO_ADAM_ROWS,
    AUTO_ADAM_ROWS_EMBEDDINGS,
    AUTO_ADAM_ROWS_HEADS,
    choose_solver,
)


def test_auto_solver_switches_on_size():
    assert choose_solver("auto", AUTO_ADAM_ROWS, 1).solve is fit_lbfgs
    assert choose_solver("auto", AUTO_ADAM_ROWS + 1, 1).solve is fit_adam
    assert choose_solver("auto", AUTO_ADAM_ROWS_HEADS, 4).name == "lbfgs"
    assert choose_solver("auto", AUTO_ADAM_ROWS_HEADS + 1, 4).name == "adam"
    assert choose_solver("lbfgs", AUTO_ADAM_ROWS + 1, 4).name == "lbfgs"
    assert choose_solver("adam", 10, 1).name == "adam"


def test_one_head_with_feature_slopes_takes_adam_with_several():
    """One head that learns feature slopes keeps L-BFGS (whose continuation
    tries the finer map) up to ``AUTO_ADAM_ROWS_HEADS`` rows, as several
    heads do; without slopes it takes Adam above ``AUTO_ADAM_ROWS``."""
    assert AUTO_ADAM_ROWS < AUTO_ADAM_ROWS_HEADS
    rows = AUTO_ADAM_ROWS_HEADS
    assert choose_solver("auto", rows, 1, slopes=True).name == "lbfgs"
    assert choose_solver("auto", rows + 1, 1, slopes=True).name == "adam"
    assert choose_solver("auto", AUTO_ADAM_ROWS + 1, 1).name == "adam"
    # embeddings keep their own, later switch
    rows = AUTO_ADAM_ROWS_EMBEDDINGS
    assert choose_solver("auto", rows, 1, embeddings=True, slopes=True).name == "lbfgs"
    assert choose_solver("auto", rows, 4, slopes=True).name == "adam"


def test_one_head_with_embeddings_takes_adam_later():
    """Embeddings (categorical features, missing values) keep one head on
    L-BFGS up to ``AUTO_ADAM_ROWS_EMBEDDINGS`` rows."""
    assert AUTO_ADAM_ROWS < AUTO_ADAM_ROWS_EMBEDDINGS
    rows = AUTO_ADAM_ROWS_EMBEDDINGS
    assert choose_solver("auto", rows, 1, embeddings=True).name == "lbfgs"
    assert choose_solver("auto", rows + 1, 1, embeddings=True).name == "adam"
    assert choose_solver("auto", rows, 1).name == "adam"
    # several heads switch by their own count either way
    assert choose_solver("auto", rows, 4, embeddings=True).name == "adam"


def test_solvers_count_in_their_own_units():
    lbfgs, adam = choose_solver("lbfgs", 10, 1), choose_solver("adam", 10, 1)
    assert (lbfgs.iterations, lbfgs.evaluations) == ("iterations", "evaluations")
    assert (adam.iterations, adam.evaluations) == ("epochs", "steps")


def _what_fits_tell_the_rule(monkeypatch, keyword):
    """The list that a spy on the engine's ``choose_solver`` fills with the
    value of ``keyword`` of each call (the fit then takes L-BFGS)."""
    seen = []

    def spy(solver, n_positive, n_heads, **kwargs):
        seen.append(kwargs.get(keyword, False))
        return choose_solver("lbfgs", n_positive, n_heads)

    monkeypatch.setattr(engine, "choose_solver", spy)
    return seen


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("with_codes", [False, True])
def test_fit_tells_the_rule_about_embeddings(monkeypatch, with_codes):
    """A fit on a table with a categorical column asks for the embeddings'
    switch; one on numbers does not."""
    seen = _what_fits_tell_the_rule(monkeypatch, "embeddings")
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.standard_normal(60)})
    if with_codes:
        X["level"] = rng.choice(["a", "b", "c"], 60)
    NWAttentionRegressor(max_iter=1, random_state=0).fit(X, X["x"].to_numpy())
    assert seen == [with_codes]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("feature_slopes", [False, True])
def test_fit_tells_the_rule_about_slopes(monkeypatch, feature_slopes):
    """A fit that learns slopes of numeric features asks for the later
    switch; one without slopes, or with no numeric feature to map, does
    not."""
    seen = _what_fits_tell_the_rule(monkeypatch, "slopes")
    rng = np.random.default_rng(0)
    y = rng.standard_normal(60)
    model = NWAttentionRegressor(
        feature_slopes=feature_slopes, max_iter=1, random_state=0
    )
    model.fit(pd.DataFrame({"x": y}), y)
    model.fit(pd.DataFrame({"level": rng.choice(["a", "b", "c"], 60)}), y)
    assert seen == [feature_slopes, False]
