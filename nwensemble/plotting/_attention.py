"""AttentionDisplay: which training rows each head attends to for a query."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import check_is_fitted

from nwensemble._docstrings import fill_doc
from nwensemble._shared.backend import to_numpy
from nwensemble.plotting._common import axes_or_new, import_pyplot, one_row


@fill_doc
class AttentionDisplay:
    """Heat map of one query's attention: heads by training rows.

    Rows are the heads (and the ensemble, last); columns are the training rows
    with the most weight, labelled by their index in the training set.

    Parameters
    ----------
    weights : array-like of shape (n_rows, n_columns)
        Attention weights, one row per head (the ensemble last).
    columns : array-like of shape (n_columns,)
        Training-row index of each column.
    row_labels : list of str
        One per row of ``weights``.

    Attributes
    ----------
    %(display_axes)s
    im_ : matplotlib AxesImage
    colorbar_ : matplotlib Colorbar

    Examples
    --------
    >>> from nwensemble.plotting import AttentionDisplay
    %(display_example_fit)s
    >>> disp = AttentionDisplay.from_estimator(reg, X[:1], top_k=5)
    >>> disp.ax_.get_ylabel()
    'head'
    """

    def __init__(self, weights, *, columns, row_labels):
        self.weights = weights
        self.columns = columns
        self.row_labels = row_labels

    def plot(self, ax=None, *, cmap="magma_r"):
        """Draw the heat map.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
        cmap : str or Colormap, default='magma_r'

        Returns
        -------
        display : AttentionDisplay
        """
        plt = import_pyplot("AttentionDisplay")
        W = np.asarray(to_numpy(self.weights), dtype=float)
        columns = np.asarray(self.columns)
        if W.ndim != 2 or W.shape[1] != columns.shape[0]:
            raise ValueError(
                f"weights must be (n_rows, n_columns) with one column per entry of "
                f"columns; got {W.shape} and {columns.shape[0]} columns."
            )
        if len(self.row_labels) != W.shape[0]:
            raise ValueError(
                f"row_labels has {len(self.row_labels)} entries for {W.shape[0]} rows."
            )
        self.figure_, self.ax_ = axes_or_new(ax, plt, figsize=(8, 3))
        self.im_ = self.ax_.imshow(W, cmap=cmap, aspect="auto", vmin=0.0)
        self.ax_.set_xticks(np.arange(columns.shape[0]), [str(c) for c in columns])
        self.ax_.tick_params(axis="x", labelrotation=90)
        self.ax_.set_yticks(np.arange(W.shape[0]), list(self.row_labels))
        self.ax_.set_xlabel("training row")
        self.ax_.set_ylabel("head")
        self.ax_.set_title("Attention of one query on the training rows")
        self.colorbar_ = self.figure_.colorbar(self.im_, ax=self.ax_)
        self.colorbar_.set_label("weight")
        return self

    @classmethod
    @fill_doc
    def from_estimator(cls, estimator, x, *, top_k=10, ax=None, **kwargs):
        """Plot where a fitted model's heads attend for the query ``x``.

        Columns are the union of every head's ``top_k`` rows, ordered by the
        ensemble's weight.

        Parameters
        ----------
        estimator : fitted NW regressor
        x : array-like of shape (1, n_features) or (n_features,)
            One query: a row of a table, a 1-d array, or a pandas Series
            (``X.iloc[i]``).
        top_k : int, default=10
            Rows kept per head.
        %(display_from_estimator)s

        Returns
        -------
        display : AttentionDisplay
        """
        check_is_fitted(estimator)
        x = one_row(x)
        if getattr(x, "ndim", np.ndim(x)) != 2 or np.shape(x)[0] != 1:
            raise ValueError(
                "x must be one query of shape (1, n_features); got shape "
                f"{getattr(x, 'shape', np.shape(x))}."
            )
        H = estimator.predictor_.n_heads
        per_head = [
            to_numpy(estimator.attention_weights(x, head=h))[0] for h in range(H)
        ]
        ensemble = to_numpy(estimator.attention_weights(x))[0]
        k = min(int(top_k), ensemble.shape[0])
        if k < 1:
            raise ValueError(f"top_k must be at least 1; got {top_k}.")
        chosen = set()
        for w in per_head + [ensemble]:
            chosen.update(np.argsort(-w, kind="stable")[:k].tolist())
        columns = np.array(sorted(chosen, key=lambda i: -ensemble[i]))
        rows = np.stack([w[columns] for w in per_head] + [ensemble[columns]])
        labels = [f"head {h}" for h in range(H)] + ["ensemble"]
        if H == 1:
            rows, labels = rows[:1], ["head 0"]
        return cls(rows, columns=columns, row_labels=labels).plot(ax=ax, **kwargs)
