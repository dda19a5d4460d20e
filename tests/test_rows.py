"""Row subsets of weighted training data."""

import numpy as np
from numpy.testing import assert_allclose, assert_array_equal

from nwensemble._shared.design import numbers_design
from nwensemble._shared.rows import subsample, take_rows


def test_take_rows_renormalises_the_weights():
    X, Y = np.arange(12.0).reshape(6, 2), np.arange(6.0)[:, None]
    sw = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) / 21
    Xr, Yr, swr = take_rows(numbers_design(X), Y, sw, np.array([1, 4]), xp=np)
    assert_array_equal(Xr.numeric, X[[1, 4]])
    assert_array_equal(Yr, Y[[1, 4]])
    assert_allclose(swr, [2 / 7, 5 / 7])


def test_subsample_keeps_positive_rows_only():
    X, Y = np.arange(20.0).reshape(10, 2), np.arange(10.0)[:, None]
    X = numbers_design(X)
    sw = np.full(10, 0.1)
    assert subsample(X, Y, sw, 10, rng=np.random.RandomState(0), xp=np)[0] is X
    sw[[2, 5]] = 0
    Xs, _, sws = subsample(X, Y, sw / sw.sum(), 10, rng=np.random.RandomState(0), xp=np)
    assert Xs.shape[0] == 8 and not np.isin([4.0, 10.0], Xs.numeric[:, 0]).any()
    assert_allclose(sws.sum(), 1.0)
    Xs, _, _ = subsample(X, Y, sw / sw.sum(), 3, rng=np.random.RandomState(0), xp=np)
    assert Xs.shape[0] == 3 and np.all(np.diff(Xs.numeric[:, 0]) > 0)
