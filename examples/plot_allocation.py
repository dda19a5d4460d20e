"""
==========================================================
Allocating heads under a budget: scores and the log n rule
==========================================================

:class:`~nwensemble.HeadAllocator` spends a budget ``D`` of dimensions on
``n_heads`` heads of ``head_dim`` dimensions each (``n_heads * head_dim <=
D``). The library's rule (see the user guide) keeps each head small enough
that its kernel still averages enough rows, ``head_dim* = floor(smoothness *
log(n / 10))``, and spends the rest of the budget on more heads.

First, the 5-fold score of every allocation of a budget of 12 on Friedman #1,
with the rule's choice marked. Second, the allocation chosen by leave-one-out
scoring (``cv=None``) on growing subsamples, against ``log n``.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.model_selection import GridSearchCV, KFold

from nwensemble import HeadAllocator, MultiHeadNWRegressor
from nwensemble._fit.allocation import theory_head_dim

X, y = make_friedman1(n_samples=2100, n_features=10, noise=1.0, random_state=0)
budget = 12
n = 500
dims = [1, 2, 3, 4, 6, 10]
grid = [{"n_heads": [budget // d], "head_dim": [d]} for d in dims]
search = GridSearchCV(
    MultiHeadNWRegressor(random_state=0, bvc_resamples=0),
    grid,
    cv=KFold(5, shuffle=True, random_state=0),
    scoring="neg_root_mean_squared_error",
).fit(X[:n], y[:n])
rmse = -search.cv_results_["mean_test_score"]
spread = search.cv_results_["std_test_score"]
theory = HeadAllocator(budget=budget, strategy="theory").param_grid(n, n_features=10)
d_star = theory[0]["head_dim"][0]
for d, r, s in zip(dims, rmse, spread):
    mark = "  <- rule" if d == d_star else ""
    print(
        f"{budget // d:2d} x {d:2d} (heads x dims): 5-fold RMSE {r:.3f} ± {s:.3f}{mark}"
    )

# %%
# The chosen head dimension as the training set grows.
sizes = [100, 200, 400, 800, 1600]
chosen = []
for m in sizes:
    alloc = HeadAllocator(
        MultiHeadNWRegressor(random_state=0, bvc_resamples=0),
        budget=8,
        cv=None,
        n_members=1,
    ).fit(X[:m], y[:m])
    chosen.append((alloc.head_dim_, alloc.n_heads_, alloc.theory_allocation_))
    rule = alloc.theory_allocation_
    print(
        f"n={m:5d}: chosen {alloc.n_heads_} x {alloc.head_dim_}, rule "
        f"{rule['n_heads']} x {rule['head_dim']}"
    )

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
labels = [f"{budget // d} x {d}" for d in dims]
axes[0].errorbar(np.arange(len(dims)), rmse, yerr=spread, fmt="o-", capsize=3)
axes[0].axvline(dims.index(d_star), color="gray", linestyle="--", label="rule")
axes[0].set_xticks(np.arange(len(dims)), labels)
axes[0].set_xlabel("n_heads x head_dim (budget 12)")
axes[0].set_ylabel("5-fold RMSE")
axes[0].set_title(f"Friedman #1, {n} rows")
axes[0].legend()

log_n = np.log(sizes)
axes[1].plot(log_n, [c[0] for c in chosen], "o-", label="chosen (cv=None)")
fine = np.linspace(log_n[0], log_n[-1], 100)
axes[1].plot(
    fine,
    [theory_head_dim(int(np.exp(v)), 1.0, 8) for v in fine],
    "--",
    label="rule: floor(log(n / 10))",
)
axes[1].set_xticks(log_n, [str(m) for m in sizes])
axes[1].set_xlabel("training rows n (log scale)")
axes[1].set_ylabel("head_dim")
axes[1].set_title("Chosen head dimension, budget 8")
axes[1].legend()
fig.tight_layout()
plt.show()

# %%
# How to read it. The left panel is the trade-off the budget forces: many
# small heads each see too little of the function, a few large heads each
# average fewer rows in their kernel. On Friedman #1, a smooth function of
# five features, the error falls from the rule's 4 x 3 to a few larger heads
# (2 x 6: 1.95 against 2.20 in this run): the rule with ``smoothness=1`` is
# conservative here, and the shortlist, which holds heads twice the rule's
# size and one head as wide as the budget, corrects it. On the right,
# leave-one-out scoring picks one large head from 200 rows on (2, 8, 6, 8, 8
# dimensions for 100 to 1600 rows here), above the rule's
# ``floor(log(n / 10))`` line; three times it is the widest head, 1 x 8. The
# rule is the start of the shortlist, not a promise about the optimum.
