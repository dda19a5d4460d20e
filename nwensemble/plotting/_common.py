"""Helpers shared by the displays."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


def import_pyplot(caller):
    """matplotlib.pyplot, or an ImportError that says how to get it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            f"{caller} needs matplotlib: pip install 'nwensemble[plot]'."
        ) from exc
    return plt


def axes_or_new(ax, plt, figsize=None):
    """``(figure, ax)``, creating them when ``ax`` is None; a new figure's
    layout keeps tick labels, colour bars and legends inside it (also when
    saved to a file)."""
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax.figure, ax


def one_row(x):
    """One query as a table of one row: a 1-d array or a pandas Series (a
    row picked with ``X.iloc[i]``) becomes shape (1, n_features)."""
    if hasattr(x, "to_frame") and x.ndim == 1:  # a Series
        return x.to_frame().T
    a = x if hasattr(x, "ndim") else np.asarray(x)
    return a[None, :] if a.ndim == 1 else a
