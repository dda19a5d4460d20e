"""Helpers shared by the displays."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause


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
    """``(figure, ax)``, creating them when ``ax`` is None."""
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
    return ax.figure, ax
