"""Class labels as targets: encoding, class weights, the prior and its
smoothing weight."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from nwensemble._fit.class_targets import (
    choose_prior_weight,
    class_prior,
    class_sample_weight,
    encode_labels,
    one_hot,
)


def test_encode_labels_sorts_and_indexes():
    labels, classes, codes = encode_labels(["b", "a", "c", "a"])
    assert_array_equal(classes, ["a", "b", "c"])
    assert_array_equal(codes, [1, 0, 2, 0])
    assert_array_equal(labels, ["b", "a", "c", "a"])


def test_encode_labels_refuses_what_is_not_a_class_label():
    with pytest.raises(ValueError, match="at least 2 classes"):
        encode_labels([1, 1, 1])
    with pytest.raises(ValueError, match="Unknown label type"):
        encode_labels([0.5, 1.5, 2.25])
    with pytest.raises(ValueError, match="0 sample"):
        encode_labels(np.array([], dtype=int))


def test_one_hot_rows():
    assert_array_equal(one_hot(np.array([2, 0]), 3), [[0, 0, 1], [1, 0, 0]])


def test_class_weights_multiply_sample_weights():
    labels = np.array(["a", "a", "a", "b"])
    assert class_sample_weight(None, labels, None) is None
    balanced = class_sample_weight("balanced", labels, None)
    assert_allclose(balanced, [2 / 3, 2 / 3, 2 / 3, 2])
    by_dict = class_sample_weight({"a": 1, "b": 5}, labels, [1, 2, 1, 1])
    assert_allclose(by_dict, [1, 2, 1, 5])


def test_class_prior_is_the_weighted_share():
    assert_allclose(
        class_prior(np.array([0, 0, 1]), np.array([1, 1, 2.0]), 3), [0.5, 0.5, 0]
    )


def test_prior_weight_minimises_the_leave_one_out_log_loss():
    rng = np.random.default_rng(0)
    n = 200
    codes = rng.integers(0, 3, n)
    prior = np.bincount(codes, minlength=3) / n
    # Overconfident: right 80 % of the time with probability 1.
    guess = np.where(rng.random(n) < 0.8, codes, (codes + 1) % 3)
    P = np.eye(3)[guess]
    a = choose_prior_weight(P, codes, np.ones(n), prior)

    def loss(w):
        return -np.mean(np.log((1 - w) * P[np.arange(n), codes] + w * prior[codes]))

    grid = np.linspace(1 / (n + 1), 1, 2001)
    assert loss(a) <= min(loss(w) for w in grid) + 1e-6
    # Perfect probabilities keep the floor, so none is exactly zero.
    perfect = choose_prior_weight(np.eye(3)[codes], codes, np.ones(n), prior)
    assert perfect == pytest.approx(1 / (n + 1), abs=1e-4)


def test_prior_weight_skips_rows_without_a_leave_one_out_estimate():
    codes = np.array([0, 1, 0, 1])
    P = np.array([[1.0, 0.0], [np.nan, np.nan], [0.9, 0.1], [0.2, 0.8]])
    sw = np.array([1.0, 1.0, 1.0, 0.0])
    a = choose_prior_weight(P, codes, sw, np.array([0.5, 0.5]))
    assert a == pytest.approx(1 / 5, abs=1e-4)  # two perfect-ish rows: the floor
