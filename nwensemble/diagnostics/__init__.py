"""Diagnostics of multi-head NW ensembles: head diversity, the
bias-variance-covariance decomposition and the compact kernels' fallback."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble.diagnostics._bvc import bvc_decomposition
from nwensemble.diagnostics._subspaces import (
    head_diversity_index,
    principal_angles,
    subspace_similarity,
)
from nwensemble.diagnostics._support import support_fallback

__all__ = [
    "bvc_decomposition",
    "head_diversity_index",
    "principal_angles",
    "subspace_similarity",
    "support_fallback",
]
