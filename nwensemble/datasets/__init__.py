"""Loaders for real regression benchmark data sets."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

from nwensemble.datasets._benchmark import (
    BENCHMARK_NAMES,
    fetch_regression_benchmark,
)

__all__ = ["BENCHMARK_NAMES", "fetch_regression_benchmark"]
