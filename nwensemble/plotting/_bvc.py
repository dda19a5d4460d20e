"""BVCDisplay: the bias-variance-covariance parts as stacked bars."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import check_is_fitted

from nwensemble._docstrings import fill_doc
from nwensemble.diagnostics import bvc_decomposition
from nwensemble.plotting._common import axes_or_new, import_pyplot

_REQUIRED = ("mse", "bias2", "variance", "covariance", "n_heads")


@fill_doc
class BVCDisplay:
    """Stacked bars of ``bias2``, ``variance / H`` and ``(1 - 1/H) covariance``.

    One bar per decomposition, for one model or several (for example across
    numbers of heads). A ``noise`` part, present when the decomposition was
    taken with ``f_true``, is drawn at the bottom. A black tick marks each
    ``mse``, which the parts add up to.

    Parameters
    ----------
    parts : mapping or list of mappings
        Results of :func:`~nwensemble.diagnostics.bvc_decomposition` (or a
        fitted model's ``bvc_decomposition_``).
    labels : list of str, default=None
        One per bar; ``'H=<n_heads>'`` when None.

    Attributes
    ----------
    %(display_axes)s
    bars_ : dict of str to matplotlib BarContainer
        One entry per part drawn.
    mse_markers_ : matplotlib Line2D

    Examples
    --------
    >>> from nwensemble.plotting import BVCDisplay
    %(display_example_fit)s
    >>> disp = BVCDisplay.from_estimator(reg)
    >>> sorted(disp.bars_)
    ['(1 - 1/H) covariance', 'bias$^2$', 'variance / H']
    """

    def __init__(self, parts, *, labels=None):
        self.parts = parts
        self.labels = labels

    def _parts_list(self):
        parts = self.parts
        if hasattr(parts, "keys"):
            parts = [parts]
        parts = list(parts)
        if not parts:
            raise ValueError("parts is empty: give at least one decomposition.")
        for p in parts:
            missing = [k for k in _REQUIRED if k not in p]
            if missing:
                raise ValueError(
                    f"each decomposition needs {list(_REQUIRED)}; one lacks {missing}."
                )
        if self.labels is not None and len(self.labels) != len(parts):
            raise ValueError(
                f"labels has {len(self.labels)} entries for {len(parts)} bars."
            )
        return parts

    def plot(self, ax=None, *, bar_kwargs=None):
        """Draw the bars.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
        bar_kwargs : dict, default=None
            Passed to every ``ax.bar`` call.

        Returns
        -------
        display : BVCDisplay
        """
        plt = import_pyplot("BVCDisplay")
        parts = self._parts_list()
        labels = self.labels or [f"H={int(p['n_heads'])}" for p in parts]
        H = np.array([float(p["n_heads"]) for p in parts])
        layers = []
        if all("noise" in p for p in parts):
            layers.append(("noise", [p["noise"] for p in parts]))
        layers += [
            ("bias$^2$", [p["bias2"] for p in parts]),
            ("variance / H", [p["variance"] / h for p, h in zip(parts, H)]),
            (
                "(1 - 1/H) covariance",
                [(1 - 1 / h) * p["covariance"] for p, h in zip(parts, H)],
            ),
        ]
        self.figure_, self.ax_ = axes_or_new(ax, plt)
        x = np.arange(len(parts))
        bottom = np.zeros(len(parts))
        self.bars_ = {}
        for label, values in layers:
            values = np.asarray(values, dtype=float)
            # One bar: small parts are invisible next to a large bias, so the
            # legend carries the numbers.
            legend = f"{label} = {values[0]:.4g}" if len(parts) == 1 else label
            self.bars_[label] = self.ax_.bar(
                x, values, bottom=bottom, label=legend, **(bar_kwargs or {})
            )
            bottom = bottom + values
        self.ax_.set_xlim(-0.5 - 0.5 / len(parts), len(parts) - 0.5 + 0.5 / len(parts))
        (self.mse_markers_,) = self.ax_.plot(
            x, [p["mse"] for p in parts], "k_", markersize=24, mew=2, label="mse"
        )
        if len(parts) == 1:
            self.mse_markers_.set_label(f"mse = {parts[0]['mse']:.4g}")
        self.ax_.set_xticks(x, labels)
        self.ax_.set_ylabel("squared error")
        self.ax_.set_title("Bias-variance-covariance decomposition")
        # Head room above the tallest bar for the legend, so that it covers
        # no bar: about a twentieth of the height per entry.
        top = max(float(np.max(bottom)), max(float(p["mse"]) for p in parts))
        if top > 0:
            self.ax_.set_ylim(top=top * (1.15 + 0.1 * (len(layers) + 1)))
        self.ax_.legend(fontsize="small", loc="upper right")
        return self

    @classmethod
    def from_estimator(cls, estimator, X=None, y=None, **kwargs):
        """Plot one fitted model's decomposition.

        Without ``X`` and ``y`` it uses the model's ``bvc_decomposition_``
        (training rows); with them, it computes
        :func:`~nwensemble.diagnostics.bvc_decomposition` on them.

        Parameters
        ----------
        estimator : fitted NW regressor
        X, y : array-like, default=None
        **kwargs
            ``n_resamples``, ``f_true``, ``random_state``, ``ax`` and the
            keywords of :meth:`plot`, as in :meth:`from_estimators`.

        Returns
        -------
        display : BVCDisplay
        """
        return cls.from_estimators([estimator], X, y, **kwargs)

    @classmethod
    @fill_doc
    def from_estimators(
        cls,
        estimators,
        X=None,
        y=None,
        *,
        labels=None,
        n_resamples=10,
        f_true=None,
        random_state=None,
        ax=None,
        **kwargs,
    ):
        """Plot several fitted models side by side (e.g. across ``n_heads``).

        Parameters
        ----------
        estimators : list of fitted NW regressors
        X, y : array-like, default=None
            Rows for the decomposition; each model's ``bvc_decomposition_``
            when None.
        labels : list of str, default=None
        n_resamples, f_true, random_state
            As in :func:`~nwensemble.diagnostics.bvc_decomposition`.
        %(display_from_estimator)s

        Returns
        -------
        display : BVCDisplay
        """
        if (X is None) != (y is None):
            raise ValueError("Give both X and y, or neither.")
        parts = []
        for est in estimators:
            check_is_fitted(est)
            if X is None:
                stored = getattr(est, "bvc_decomposition_", None)
                if stored is None:
                    raise ValueError(
                        f"{type(est).__name__} has no bvc_decomposition_ (fit it "
                        "with bvc_resamples > 0), so give X and y."
                    )
                parts.append(stored)
            else:
                parts.append(
                    bvc_decomposition(
                        est,
                        X,
                        y,
                        n_resamples=n_resamples,
                        f_true=f_true,
                        random_state=random_state,
                    )
                )
        return cls(parts, labels=labels).plot(ax=ax, **kwargs)
