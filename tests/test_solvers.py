"""solver='auto': the solver chosen by the number of rows and heads."""

from nwensemble._fit.adam import fit_adam
from nwensemble._fit.lbfgs import fit_lbfgs
from nwensemble._fit.solvers import AUTO_ADAM_ROWS, AUTO_ADAM_ROWS_HEADS, choose_solver


def test_auto_solver_switches_on_size():
    assert choose_solver("auto", AUTO_ADAM_ROWS, 1).solve is fit_lbfgs
    assert choose_solver("auto", AUTO_ADAM_ROWS + 1, 1).solve is fit_adam
    # several heads take Adam sooner
    assert AUTO_ADAM_ROWS_HEADS < AUTO_ADAM_ROWS
    assert choose_solver("auto", AUTO_ADAM_ROWS_HEADS, 4).name == "lbfgs"
    assert choose_solver("auto", AUTO_ADAM_ROWS_HEADS + 1, 4).name == "adam"
    assert choose_solver("lbfgs", AUTO_ADAM_ROWS + 1, 4).name == "lbfgs"
    assert choose_solver("adam", 10, 1).name == "adam"


def test_solvers_count_in_their_own_units():
    lbfgs, adam = choose_solver("lbfgs", 10, 1), choose_solver("adam", 10, 1)
    assert (lbfgs.iterations, lbfgs.evaluations) == ("iterations", "evaluations")
    assert (adam.iterations, adam.evaluations) == ("epochs", "steps")
