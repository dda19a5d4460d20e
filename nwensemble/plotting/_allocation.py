"""AllocationDisplay: scores over (n_heads, head_dim) at a budget."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
from sklearn.utils.validation import check_is_fitted

from nwensemble._docstrings import fill_doc
from nwensemble.plotting._common import axes_or_new, import_pyplot


@fill_doc
class AllocationDisplay:
    """Score of every candidate allocation, with the chosen and the rule's.

    Parameters
    ----------
    cv_results : dict
        ``cv_results_`` of a fitted :class:`~nwensemble.HeadAllocator` (or of a
        ``GridSearchCV`` over ``n_heads`` and ``head_dim``).
    budget : int, default=None
        Shown in the title.
    theory : dict, default=None
        ``{'n_heads': ..., 'head_dim': ...}`` of the rule, marked if present.

    Attributes
    ----------
    %(display_axes)s
    line_ : matplotlib ErrorbarContainer
    best_ : matplotlib Line2D
    theory_ : matplotlib Line2D or None

    Examples
    --------
    %(display_example_setup)s
    >>> from nwensemble import HeadAllocator
    >>> from nwensemble.plotting import AllocationDisplay
    >>> X, y = make_friedman1(n_samples=150, random_state=0)
    >>> alloc = HeadAllocator(budget=6, cv=3).fit(X, y)
    >>> disp = AllocationDisplay.from_estimator(alloc)
    >>> disp.ax_.get_xlabel()
    'n_heads x head_dim'
    """

    def __init__(self, cv_results, *, budget=None, theory=None):
        self.cv_results = cv_results
        self.budget = budget
        self.theory = theory

    def plot(self, ax=None):
        """Draw mean scores (with one standard deviation) per candidate.

        Parameters
        ----------
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : AllocationDisplay
        """
        plt = import_pyplot("AllocationDisplay")
        res = self.cv_results
        for key in ("params", "mean_test_score", "std_test_score"):
            if key not in res:
                raise ValueError(f"cv_results lacks {key!r}: pass a cv_results_.")
        params = list(res["params"])
        if not params or any("n_heads" not in p or "head_dim" not in p for p in params):
            raise ValueError("every candidate needs 'n_heads' and 'head_dim'.")
        order = np.argsort([p["head_dim"] for p in params], kind="stable")
        mean = np.asarray(res["mean_test_score"], dtype=float)[order]
        std = np.asarray(res["std_test_score"], dtype=float)[order]
        labels = [f"{params[i]['n_heads']} x {params[i]['head_dim']}" for i in order]
        x = np.arange(len(order))
        self.figure_, self.ax_ = axes_or_new(ax, plt)
        self.line_ = self.ax_.errorbar(x, mean, yerr=std, fmt="o-", capsize=3)
        best = int(np.argmax(mean))
        (self.best_,) = self.ax_.plot(
            x[best], mean[best], "*", markersize=16, color="tab:red", label="best"
        )
        self.theory_ = None
        if self.theory is not None:
            key = f"{self.theory['n_heads']} x {self.theory['head_dim']}"
            if key in labels:
                i = labels.index(key)
                (self.theory_,) = self.ax_.plot(
                    x[i],
                    mean[i],
                    "s",
                    mfc="none",
                    markersize=14,
                    color="black",
                    label="rule",
                )
        self.ax_.set_xticks(x, labels)
        self.ax_.set_xlabel("n_heads x head_dim")
        self.ax_.set_ylabel("mean test score")
        title = "Allocation scores"
        if self.budget is not None:
            title += f" at budget {self.budget}"
        self.ax_.set_title(title)
        self.ax_.legend(fontsize="small")
        return self

    @classmethod
    def from_estimator(cls, allocator, *, ax=None):
        """Plot a fitted :class:`~nwensemble.HeadAllocator`'s ``cv_results_``.

        Parameters
        ----------
        allocator : fitted HeadAllocator
            Its ``cv_results_``, ``budget_`` and ``theory_allocation_`` are drawn.
        ax : matplotlib Axes, default=None
            Where to draw; a new figure when None.

        Returns
        -------
        display : AllocationDisplay
        """
        check_is_fitted(allocator)
        if not hasattr(allocator, "theory_allocation_"):
            raise ValueError(
                f"{type(allocator).__name__} is not a HeadAllocator; use "
                "AllocationDisplay(search.cv_results_) for a search."
            )
        return cls(
            allocator.cv_results_,
            budget=allocator.budget_,
            theory=allocator.theory_allocation_,
        ).plot(ax=ax)
