"""The head-allocation rule: how many heads of which size under a budget.

The library's derivation (user guide, "Allocating heads"): a head of
dimension ``d`` whose kernel may be as wide as ``h`` (a fraction of the
projected spread) before its bias is too large averages about ``n h^d``
training rows, so its variance ``sigma^2 / (n h^d)`` stays bounded only while
``d <= log(n / k) / log(1 / h)``. With ``h = exp(-1 / smoothness)`` that is
``head_dim* = smoothness * log(n / k)``; the rest of the budget buys heads,
whose averaging divides the variance again as far as they decorrelate.
"""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import math

# Rows a head's kernel should average at the least (the k of the rule).
MIN_NEIGHBOURS = 10
# Never more heads than this: each holds an (n, n) block while training.
MAX_HEADS = 32


def theory_head_dim(n_samples, smoothness, max_dim):
    """``floor(smoothness * log(n_samples / MIN_NEIGHBOURS))`` in [1, max_dim]."""
    raw = smoothness * math.log(max(n_samples, 1) / MIN_NEIGHBOURS)
    return int(min(max(math.floor(raw + 1e-9), 1), max(max_dim, 1)))


# MultiHeadNWRegressor's default number of heads.
DEFAULT_HEADS = 4


def default_budget(n_samples, n_features, smoothness=1.0):
    """``budget=None``: the wider of the input and ``DEFAULT_HEADS`` heads of
    the rule's dimension (``MultiHeadNWRegressor()``'s allocation)."""
    d_star = theory_head_dim(n_samples, smoothness, n_features)
    return max(int(n_features), DEFAULT_HEADS * d_star, 1)


def check_budget(budget):
    """Raise if no allocation of heads fits in ``budget`` dimensions."""
    if budget < 1:
        raise ValueError(
            f"budget={budget} fits no allocation: every head needs at least one "
            "dimension, so the budget (n_heads * head_dim) must be at least 1."
        )


def theory_allocation(n_samples, n_features, budget, smoothness):
    """``(n_heads, head_dim)`` of the rule: head_dim from n, heads from the rest."""
    check_budget(budget)
    d = theory_head_dim(n_samples, smoothness, min(n_features, budget))
    return min(budget // d, MAX_HEADS), d


def candidate_allocations(n_samples, n_features, budget, smoothness):
    """The shortlist scored around the theory point.

    Head dimensions ``d*`` and ``2 d*`` (within 1 and ``min(n_features,
    budget)``), each with as many heads as the budget holds (at most
    ``MAX_HEADS``), and one head as wide as that limit allows. Every
    candidate has ``n_heads * head_dim <= budget``.

    Larger heads and one wide head, because that is where the rule misses
    (a target that grows steeply along one feature wants one wide head);
    the user guide's "Strategies" weighs the other candidates.
    """
    check_budget(budget)
    max_dim = max(min(n_features, budget), 1)
    d_star = theory_head_dim(n_samples, smoothness, max_dim)
    dims = sorted({d for d in (d_star, 2 * d_star) if 1 <= d <= max_dim})
    candidates = [(min(budget // d, MAX_HEADS), d) for d in dims]
    if (1, max_dim) not in candidates:
        candidates.append((1, max_dim))
    return candidates


# n_members='auto' of HeadAllocator: at most this many members ...
MAX_MEMBERS = 4
# ... and no more than keep their rows together within this many: the fits
# of k members on n rows cost about k n^2 per pass, at most what one fit on
# this many rows costs.
MEMBER_ROWS = 4096
# The recommended start's first stage keeps them within twice as many, so
# that tables of up to 4096 rows fit a second member through the feature
# slopes the first one learned: members fitted once a learned map is in
# place find the interactions that a target turns on more often than the
# map's learner does.
FIRST_STAGE_MEMBER_ROWS = 2 * MEMBER_ROWS


def default_members(n_samples, *, member_rows=MEMBER_ROWS):
    """``n_members='auto'``: ``member_rows // n_samples`` within 1 and
    ``MAX_MEMBERS``."""
    return int(min(MAX_MEMBERS, max(1, member_rows // max(n_samples, 1))))


def first_stage_members(n_samples):
    """The recommended start's first stage: ``FIRST_STAGE_MEMBER_ROWS //
    n_samples`` within 1 and ``MAX_MEMBERS``."""
    return default_members(n_samples, member_rows=FIRST_STAGE_MEMBER_ROWS)
