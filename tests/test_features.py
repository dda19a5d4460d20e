"""The feature map's per-feature power transform on tables with missing
values: each feature fitted on the rows where it is observed."""

import numpy as np
from numpy.testing import assert_allclose

from nwensemble._shared.features import _fit_power_observed
from nwensemble._shared.power_map import POWER_FIT_ROWS, fit_power


def _one_by_one(N, valid, sw, rng):
    """Each feature alone on its observed rows, in column order."""
    params = [np.zeros(N.shape[1], dtype=bool), *np.ones((3, N.shape[1]))]
    params[2][:] = 0.0
    for j in range(N.shape[1]):
        rows = valid[:, j] & (sw > 0)
        if rows.sum() < 2:
            continue
        for out, value in zip(params, fit_power(N[rows, j : j + 1], sw[rows], rng=rng)):
            out[j] = value[0]
    return params


def test_features_observed_on_the_same_rows_are_fitted_as_one_by_one():
    rng = np.random.default_rng(0)
    n = POWER_FIT_ROWS + 400
    N = np.column_stack(
        [
            rng.lognormal(size=n),  # observed everywhere
            rng.exponential(size=n),  # observed everywhere
            rng.lognormal(sigma=1.5, size=n),  # missing on a few rows
            rng.gamma(2.0, size=n) - 1.0,  # missing on the same rows
            rng.lognormal(size=n),  # missing on most rows
            rng.standard_normal(n),  # one observed row only
        ]
    )
    valid = np.ones_like(N, dtype=bool)
    valid[:600, 2:4] = False
    valid[n // 3 :, 4] = False
    valid[1:, 5] = False
    sw = rng.uniform(0.5, 1.5, size=n)
    sw[rng.choice(n, 50, replace=False)] = 0.0
    got = _fit_power_observed(N, valid, sw, np.random.default_rng(1))
    expected = _one_by_one(N, valid, sw, np.random.default_rng(1))
    for a, b in zip(got, expected):
        assert_allclose(a, b, rtol=1e-12)
    # The subsampled features were warped, the lone row's kept linear.
    assert got[3][0] != 1.0 and got[3][5] == 1.0
