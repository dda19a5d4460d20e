"""Softmax attention as Nadaraya-Watson kernel regression, for scikit-learn."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from importlib.metadata import PackageNotFoundError, version

from nwensemble._classifiers import MultiHeadNWClassifier, NWAttentionClassifier
from nwensemble._head_allocator import HeadAllocator
from nwensemble._multi_head import MultiHeadNWRegressor
from nwensemble._residual_stage import ResidualStageRegressor
from nwensemble._single_head import NWAttentionRegressor

try:
    __version__ = version("nwensemble")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "HeadAllocator",
    "MultiHeadNWClassifier",
    "MultiHeadNWRegressor",
    "NWAttentionClassifier",
    "NWAttentionRegressor",
    "ResidualStageRegressor",
    "__version__",
]
