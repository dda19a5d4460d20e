"""Plots in scikit-learn's Display style (matplotlib is optional)."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble.plotting._allocation import AllocationDisplay
from nwensemble.plotting._attention import AttentionDisplay
from nwensemble.plotting._bvc import BVCDisplay
from nwensemble.plotting._diversity import HeadDiversityDisplay

__all__ = [
    "AllocationDisplay",
    "AttentionDisplay",
    "BVCDisplay",
    "HeadDiversityDisplay",
]
