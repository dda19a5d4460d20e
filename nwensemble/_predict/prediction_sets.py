"""Conformal prediction sets of classes from the fit's leave-one-out
probabilities: a class is in a query's set when its probability is at
least one less the calibration rows' conformal quantile of ``1 -
probability of their own class``."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np

from nwensemble._predict.intervals import conformal_rank


def nonconformity(P_true):
    """The calibration rows' scores: one less the (leave-one-out)
    probability of each row's own class."""
    return 1.0 - np.clip(P_true, 0.0, 1.0)


def least_probability(scores, alpha):
    """The least probability a class needs to enter a ``1 - alpha`` set:
    one less the ``ceil((m + 1)(1 - alpha))``-th smallest of the ``m``
    calibration ``scores``; 0 (every class), with a warning, when too few
    rows calibrate."""
    m = scores.shape[0]
    k = conformal_rank(m, alpha)
    if k < 1:
        warnings.warn(
            f"{m} calibration rows cannot calibrate a {1 - alpha:g} prediction "
            f"set (that needs at least {int(np.ceil(1 / alpha)) - 1}); every "
            "set holds every class.",
            UserWarning,
        )
        return 0.0
    return float(1.0 - np.sort(scores)[m - k])
