"""HeadDiversityDisplay: the heads' subspace similarity, with the HDI."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import check_is_fitted

from nwensemble._docstrings import fill_doc
from nwensemble._shared.backend import to_numpy
from nwensemble.plotting._common import axes_or_new, import_pyplot


@fill_doc
class HeadDiversityDisplay:
    """Heat map of the heads' subspace similarity, the HDI in the title.

    Cell ``(h, g)`` is ``||U_h^T U_g||_F^2 / head_dim``: 1 for heads spanning
    the same subspace, 0 for orthogonal ones. Build it with
    :meth:`from_estimator` or from arrays, then call :meth:`plot`.

    Parameters
    ----------
    similarity : array-like of shape (n_heads, n_heads)
        For example ``subspace_similarity_`` of a fitted
        :class:`~nwensemble.MultiHeadNWRegressor`.
    hdi : float
        The Head Diversity Index shown in the title.

    Attributes
    ----------
    %(display_axes)s
    im_ : matplotlib AxesImage
    text_ : ndarray of matplotlib Text or None
        The cell annotations.
    colorbar_ : matplotlib Colorbar or None

    Examples
    --------
    >>> from nwensemble.plotting import HeadDiversityDisplay
    %(display_example_fit)s
    >>> disp = HeadDiversityDisplay.from_estimator(reg)
    >>> disp.ax_.get_title().startswith("HDI")
    True
    """

    def __init__(self, similarity, *, hdi):
        self.similarity = similarity
        self.hdi = hdi

    def plot(self, ax=None, *, cmap="viridis", annotate=True, colorbar=True):
        """Draw the heat map.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw; a new figure when None.
        cmap : str or Colormap, default='viridis'
        annotate : bool, default=True
            Write each value in its cell.
        colorbar : bool, default=True

        Returns
        -------
        display : HeadDiversityDisplay
        """
        plt = import_pyplot("HeadDiversityDisplay")
        S = np.asarray(to_numpy(self.similarity), dtype=float)
        if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] < 1:
            raise ValueError(
                f"similarity must be a square (n_heads, n_heads) matrix; got shape "
                f"{S.shape}."
            )
        self.figure_, self.ax_ = axes_or_new(ax, plt)
        self.im_ = self.ax_.imshow(S, cmap=cmap, vmin=0.0, vmax=1.0)
        H = S.shape[0]
        ticks = np.arange(H)
        self.ax_.set_xticks(ticks, [str(h) for h in ticks])
        self.ax_.set_yticks(ticks, [str(h) for h in ticks])
        self.ax_.set_xlabel("head")
        self.ax_.set_ylabel("head")
        self.text_ = None
        if annotate:
            self.text_ = np.empty((H, H), dtype=object)
            for i in range(H):
                for j in range(H):
                    color = "black" if S[i, j] > 0.6 else "white"
                    self.text_[i, j] = self.ax_.text(
                        j, i, f"{S[i, j]:.2f}", ha="center", va="center", color=color
                    )
        hdi = float(self.hdi)
        label = "undefined for one head" if np.isnan(hdi) else f"{hdi:.3f}"
        self.ax_.set_title(f"HDI = {label}")
        self.colorbar_ = None
        if colorbar:
            self.colorbar_ = self.figure_.colorbar(self.im_, ax=self.ax_)
            self.colorbar_.set_label("subspace similarity")
        return self

    @classmethod
    @fill_doc
    def from_estimator(cls, estimator, *, ax=None, **kwargs):
        """Plot a fitted multi-head model's ``subspace_similarity_`` and ``hdi_``.

        Parameters
        ----------
        estimator : fitted MultiHeadNWRegressor
        %(display_from_estimator)s

        Returns
        -------
        display : HeadDiversityDisplay
        """
        check_is_fitted(estimator)
        if not hasattr(estimator, "subspace_similarity_"):
            raise ValueError(
                f"{type(estimator).__name__} has no subspace_similarity_: use a "
                "fitted MultiHeadNWRegressor (or the best_estimator_ of a "
                "HeadAllocator)."
            )
        display = cls(estimator.subspace_similarity_, hdi=estimator.hdi_)
        return display.plot(ax=ax, **kwargs)
