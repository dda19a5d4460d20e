"""
========================================================
Test error against head diversity as ``diversity`` grows
========================================================

:class:`~nwensemble.MultiHeadNWRegressor` adds ``diversity * sum_{h<g}
||U_h^T U_g||_F^2`` to its leave-one-out loss. Raising ``diversity`` pushes the
heads' subspaces apart, which raises the Head Diversity Index (``hdi_``). The
theory says decorrelated heads reduce the ensemble's variance; but a head
pushed away from the directions that carry the signal also gains bias. This
example measures both on Friedman #1, where ``f*`` is known, at two noise
levels, and prints what it sees.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_friedman1

from nwensemble import MultiHeadNWRegressor
from nwensemble.diagnostics import bvc_decomposition

diversities = [0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]
seeds = [0, 1, 2]
results = {}
for noise in (1.0, 3.0):
    rows = []
    for lam in diversities:
        per_seed = []
        for seed in seeds:
            X, y = make_friedman1(
                n_samples=1300, n_features=10, noise=noise, random_state=seed
            )
            # The same seed draws the same rows; noise=0 gives the true f.
            _, f = make_friedman1(
                n_samples=1300, n_features=10, noise=0.0, random_state=seed
            )
            Xtr, ytr, Xte, ftr, fte = X[:300], y[:300], X[300:], f[:300], f[300:]
            model = MultiHeadNWRegressor(
                n_heads=4, head_dim=2, diversity=lam, bvc_resamples=0, random_state=seed
            ).fit(Xtr, ytr)
            mse = np.mean((model.predict(Xte) - fte) ** 2)
            parts = bvc_decomposition(
                model, Xtr, ytr, n_resamples=10, f_true=ftr, random_state=0
            )
            per_seed.append(
                [
                    mse,
                    model.hdi_,
                    parts.bias2,
                    parts.variance / 4,
                    0.75 * parts.covariance,
                ]
            )
        rows.append(np.mean(per_seed, axis=0))
    results[noise] = np.array(rows)

print("noise  diversity    HDI   test MSE vs f*   bias2   var/H   (1-1/H)cov")
for noise, table in results.items():
    for lam, (mse, hdi, b2, v, c) in zip(diversities, table):
        print(
            f"{noise:5.1f}  {lam:9.3f}  {hdi:5.3f}  {mse:15.3f}  {b2:6.3f}  {v:6.3f}"
            f"  {c:10.4f}"
        )

# %%
# Test MSE against HDI: each point is one value of ``diversity`` (mean of three
# seeds, 300 training rows, 4 heads of 2 dimensions).
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for noise, table in results.items():
    axes[0].plot(table[:, 1], table[:, 0], "o-", label=f"noise {noise:g}")
    for lam, (mse, hdi) in zip(diversities, table[:, :2]):
        axes[0].annotate(f"{lam:g}", (hdi, mse), fontsize=7)
axes[0].set_xlabel("Head Diversity Index (hdi_)")
axes[0].set_ylabel("test MSE against f*")
axes[0].set_title("Annotated with the diversity weight")
axes[0].legend()

table = results[3.0]
x = np.arange(len(diversities))
axes[1].bar(x, table[:, 2], label="bias$^2$")
axes[1].bar(x, table[:, 3], bottom=table[:, 2], label="variance / H")
axes[1].bar(x, table[:, 4], bottom=table[:, 2] + table[:, 3], label="(1-1/H) cov")
axes[1].set_xticks(x, [f"{lam:g}" for lam in diversities])
axes[1].set_xlabel("diversity")
axes[1].set_ylabel("resampled error on training rows, vs f*")
axes[1].set_title("Decomposition at noise 3")
axes[1].legend()
fig.tight_layout()
plt.show()

# %%
# What the runs show
# ------------------
# The penalty does what it is built for: HDI climbs from about 0.5 towards 1
# as ``diversity`` grows. The test error does not follow the theory's ideal
# "more diverse is better" on this problem. The decomposition says why: the
# error is almost all bias (the heads are kernel smoothers in two dimensions
# of a ten-dimensional problem), the variance term is small and the
# covariance term smaller still, so there is little variance left for
# decorrelation to remove. Pushing the heads apart forces them off the five
# informative features, and their bias grows: from ``diversity`` of 0.01 on
# (0.003 at the higher noise) the test error rises. That is why the default
# is ``diversity=0.0``: the joint leave-one-out objective already spreads the
# heads (HDI about 0.5) as far as it pays. The penalty is the knob for
# studying the trade-off, and for problems where variance dominates.
