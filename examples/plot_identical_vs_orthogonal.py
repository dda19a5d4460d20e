"""
=============================================================
Identical heads against orthogonal heads: where variance goes
=============================================================

Ueda and Nakano's decomposition of an ensemble's error,

``mse = bias2 + variance / H + (1 - 1/H) * covariance``,

says averaging ``H`` heads removes variance only as far as the heads' errors
are decorrelated. Heads that share one subspace make the same predictions, so
their covariance equals their variance and the average removes nothing;
heads in orthogonal subspaces make errors of their own.

This example holds the projections fixed (``max_iter=0`` with an ``init``
array) and compares three sets of four two-dimensional heads on a problem
with a known ``f*``, where every feature is a noisy view of one of two latent
variables: identical heads, random subspaces, and pairwise orthogonal
subspaces. :func:`~nwensemble.diagnostics.bvc_decomposition` measures the
parts on bootstrap resamples.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from nwensemble import MultiHeadNWRegressor
from nwensemble.diagnostics import bvc_decomposition

rng = np.random.default_rng(0)
n, n_test = 400, 2000


def make_views(n_rows):
    """Eight features: four noisy copies of each of two latent variables."""
    latent = rng.uniform(-2, 2, (n_rows, 2))
    X = np.repeat(latent, 4, axis=1) + 0.5 * rng.standard_normal((n_rows, 8))
    f = np.sin(1.5 * latent[:, 0]) + latent[:, 1]
    return X, f


X, f = make_views(n)
y = f + 0.5 * rng.standard_normal(n)
X_test, f_test = make_views(n_test)

# Features 0-3 are the copies of latent 0, features 4-7 those of latent 1.
# Head h of the orthogonal set reads copy h of each: features (h, 4 + h).
pairs = [(0, 4), (1, 5), (2, 6), (3, 7)]
scale = 1.5  # inverse bandwidth, in feature units


def heads_from_pairs(chosen):
    C = np.zeros((4, 2, 8))
    for h, (a, b) in enumerate(chosen):
        C[h, 0, a] = C[h, 1, b] = scale
    return C


random_heads = np.stack(
    [np.linalg.qr(rng.standard_normal((8, 2)))[0].T * scale for _ in range(4)]
)
configs = {
    "identical": heads_from_pairs([pairs[0]] * 4),
    "random": random_heads,
    "orthogonal": heads_from_pairs(pairs),
}

rows = {}
for name, init in configs.items():
    model = MultiHeadNWRegressor(
        n_heads=4, head_dim=2, init=init, max_iter=0, standardize=False
    ).fit(X, y)
    parts = bvc_decomposition(model, X, y, n_resamples=30, f_true=f, random_state=0)
    test_mse = np.mean((model.predict(X_test) - f_test) ** 2)
    rows[name] = (model.hdi_, parts, test_mse)
    print(
        f"{name:<11} HDI {model.hdi_:.3f}  variance {parts.variance:.4f}  "
        f"covariance {parts.covariance:.4f}  cov/var "
        f"{parts.covariance / parts.variance:.3f}  bias2 {parts.bias2:.4f}  "
        f"test MSE vs f* {test_mse:.4f}"
    )

# %%
# Covariance against variance, and the error that remains.
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
names = list(rows)
x = np.arange(len(names))
axes[0].bar(x - 0.2, [rows[k][1].variance for k in names], 0.4, label="variance")
axes[0].bar(x + 0.2, [rows[k][1].covariance for k in names], 0.4, label="covariance")
axes[0].set_xticks(x, [f"{k}\nHDI {rows[k][0]:.2f}" for k in names])
axes[0].set_ylabel("mean over heads / pairs")
axes[0].set_title("Head variance and covariance over resamples")
axes[0].legend()
axes[1].bar(x, [rows[k][2] for k in names], color="tab:gray")
axes[1].set_xticks(x, names)
axes[1].set_ylabel("test MSE against f*")
axes[1].set_title("Error of the four-head average")
fig.tight_layout()
plt.show()

# %%
# Identical heads: the covariance equals the variance to rounding, as the
# decomposition requires, so four of them are no better than one. Orthogonal
# heads, each reading its own noisy copy of the latent variables, have a
# covariance less than half their variance, and their average has the lowest
# test error of the three (0.29 against 0.40 for identical heads in this
# run). Random subspaces decorrelate about as much, but each of their
# directions mixes the two latent variables, which costs bias: their test
# error is the highest here. Diversity lowers the variance term only; the
# subspaces still have to carry the signal.
