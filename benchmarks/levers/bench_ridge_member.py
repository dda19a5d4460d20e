"""A lever for issue 66, measured: the recommended start's first stage,
where it has one member, fitted to the target less a global ridge.

``ResidualStageRegressor()`` (``default``: tables of more than 2048 rows
get one member in the first stage, fitted to ``y``; below, the members
split between ``y`` and ``y - l(x)``, ``LinearMembers``) against, side by
side on each split:

* ``ridge member``: where the first stage has one member, that member is
  fitted to ``y - l(x)`` (``l`` the ridge of ``LinearMembers``: the
  features' power transform, missing-value indicators and a column per
  level, its penalty by exact leave-one-out error) and predicts with
  ``l`` added; its left-out predictions are the member's plus the ridge's
  exact left-out ones.

Tables of at most 2048 rows fit the same either way. This is a
measurement script: its variant patches the private ``_residual_stage``
module.

The sections, folds and lines are ``_variant_table.py``'s. Run:
``python benchmarks/levers/bench_ridge_member.py [--sections numeric]
[--sets ...] [--model-seed 0]``.
"""

import contextlib
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _variant_table as table  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.utils import check_random_state  # noqa: E402

from nwensemble import _residual_stage  # noqa: E402
from nwensemble._linear_members import ridge_of  # noqa: E402
from nwensemble._shared.backend import to_host, to_numpy  # noqa: E402

VARIANTS = ["ridge member"]


class _OnRidgeResidual:
    """One member fitted to ``y - l(x)``, ``l`` added back: what
    ``ResidualStageRegressor`` reads of a first stage."""

    def __init__(self, estimator):
        self.estimator = estimator

    def get_params(self, deep=True):
        return self.estimator.get_params(deep)

    def set_params(self, **params):
        self.estimator.set_params(**params)
        return self

    def fit(self, X, y, sample_weight=None):
        Y = to_numpy(y).astype(np.float64).reshape(y.shape[0], -1)
        sw = np.ones(Y.shape[0]) if sample_weight is None else to_numpy(sample_weight)
        rng = check_random_state(self.estimator.get_params()["random_state"])
        term, in_sample, left_out = ridge_of(self.estimator, X, Y, sw, rng=rng)
        residual = np.reshape(Y - in_sample, y.shape).astype(y.dtype)
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.estimator.fit(X, residual, **kwargs)
        est = self.estimator
        self.term_ = term
        loo = to_numpy(est.loo_prediction_).reshape(Y.shape) + left_out
        self.loo_prediction_ = loo.reshape(np.shape(est.loo_prediction_))
        rows = to_host(est.calibration_rows_)
        gap = (in_sample - left_out)[rows]
        residuals = to_numpy(est.calibration_residuals_).reshape(rows.shape[0], -1)
        self.calibration_rows_ = rows
        self.calibration_residuals_ = (residuals + gap).reshape(
            np.shape(est.calibration_residuals_)
        )
        self.components_ = est.components_
        self.n_features_in_ = est.n_features_in_
        return self

    def predict(self, X):
        out = to_numpy(self.estimator.predict(X))
        return out + self.term_.predict(X).reshape(out.shape)

    def transform(self, X):
        return self.estimator.transform(X)


def _fit_stages(self, first, second, X, y, sample_weight, fit_params, label=""):
    if (
        self.estimator is None
        and self.linear_members
        and first.get_params()["n_members"] == 1
    ):
        first = _OnRidgeResidual(first)
    return _ORIGINAL_FIT_STAGES(
        self, first, second, X, y, sample_weight, fit_params, label
    )


_ORIGINAL_FIT_STAGES = _residual_stage.ResidualStageRegressor._fit_stages


def _patched(name):
    if name == "ridge member":
        return mock.patch.object(
            _residual_stage.ResidualStageRegressor, "_fit_stages", _fit_stages
        )
    return contextlib.nullcontext()


if __name__ == "__main__":
    table.main_patched(__doc__, VARIANTS, _patched)
