"""Conformal prediction sets' threshold."""

import numpy as np
import pytest

from nwensemble._predict.prediction_sets import least_probability, nonconformity


def test_nonconformity_is_one_less_the_own_class_probability():
    np.testing.assert_allclose(nonconformity(np.array([1.0, 0.25, 1.2])), [0, 0.75, 0])


def test_least_probability_is_the_conformal_quantile():
    scores = np.arange(1, 20) / 20  # 19 rows: 0.05 .. 0.95
    # ceil(20 * 0.9) = 18th smallest score, 0.9: classes need 0.1.
    assert least_probability(scores, 0.1) == pytest.approx(0.1)
    # ceil(20 * 0.5) = 10th smallest, 0.5.
    assert least_probability(scores, 0.5) == pytest.approx(0.5)


def test_too_few_rows_admit_every_class():
    with pytest.warns(UserWarning, match="cannot calibrate"):
        assert least_probability(np.array([0.1, 0.2]), 0.1) == 0.0


def test_exchangeable_scores_cover_at_the_level():
    rng = np.random.default_rng(0)
    hits = []
    for _ in range(2000):
        s = rng.random(51)
        least = least_probability(s[:50], 0.1)
        hits.append(1 - s[50] >= least)
    assert 0.88 <= np.mean(hits) <= 0.93
