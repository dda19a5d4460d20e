"""
======================================================
Prediction intervals where the noise grows: jackknife+
======================================================

A one-dimensional problem whose noise grows tenfold from left to right. A
single-head model predicts it, and :meth:`~nwensemble.NWAttentionRegressor.
predict_interval` draws 90 % intervals from the leave-one-out residuals the
fit already has: ``'jackknife+'`` (one width for all queries, up to the
leave-one-out models' spread) and ``'adaptive'`` (residuals rescaled by the
model's local error, so the intervals follow the noise). Both are drawn
against the true function and the band that holds 90 % of the noise, and
their coverage of fresh targets is counted along the axis.

The intervals calibrate on the rows held out of the projection's fit
(``early_stopping=True``); ``validation_fraction=0.2`` holds out 120 of the
600 rows. With ``c`` calibration rows the coverage of one fitted model
varies around its target by about ``sqrt(0.09 / c)`` (0.03 here), so more
held-out rows make a single model's coverage more predictable.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from nwensemble import NWAttentionRegressor


def true_f(x):
    return np.sin(2 * np.pi * x) + x


def noise_sd(x):
    return 0.05 + 0.45 * x


rng = np.random.default_rng(0)
x_train = rng.uniform(0, 1, 600)
y_train = true_f(x_train) + noise_sd(x_train) * rng.standard_normal(600)
model = NWAttentionRegressor(
    early_stopping=True, validation_fraction=0.2, random_state=0
)
model.fit(x_train[:, None], y_train)
print(
    f"calibration rows (held out of the projection's fit): "
    f"{model.calibration_rows_.shape[0]}"
)

grid = np.linspace(0, 1, 400)
x_test = rng.uniform(0, 1, 20000)
y_test = true_f(x_test) + noise_sd(x_test) * rng.standard_normal(20000)

fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, method in zip(axes, ["jackknife+", "adaptive"]):
    y_pred, bounds = model.predict_interval(grid[:, None], method=method)
    _, test_bounds = model.predict_interval(x_test[:, None], method=method)
    inside = (y_test >= test_bounds[:, 0]) & (y_test <= test_bounds[:, 1])
    thirds = [
        inside[(x_test >= a) & (x_test < a + 1 / 3)].mean() for a in (0, 1 / 3, 2 / 3)
    ]
    ax.scatter(x_train, y_train, s=4, color="0.7", label="training rows")
    ax.fill_between(grid, bounds[:, 0], bounds[:, 1], alpha=0.3, label="90% interval")
    ax.plot(grid, y_pred, color="tab:blue", label="prediction")
    ax.plot(grid, true_f(grid), "k--", lw=1, label="true f")
    half = 1.645 * noise_sd(grid)
    ax.plot(grid, true_f(grid) - half, "k:", lw=1, label="f ± 90% of the noise")
    ax.plot(grid, true_f(grid) + half, "k:", lw=1)
    ax.set_title(
        f"{method}: coverage {inside.mean():.3f}\n(by thirds of x: "
        + ", ".join(f"{c:.2f}" for c in thirds)
        + ")"
    )
    ax.set_xlabel("x")
    print(
        f"{method:10s} coverage {inside.mean():.3f}, by thirds {np.round(thirds, 3)}, "
        f"mean width {np.mean(test_bounds[:, 1] - test_bounds[:, 0]):.3f}"
    )
axes[0].set_ylabel("y")
axes[0].legend(fontsize="small", loc="upper right")
fig.tight_layout()
plt.show()

# %%
# What it shows
# -------------
# Both methods cover about 90 % of fresh targets overall (0.90 and 0.92 in
# this run): that is the conformal guarantee, and it is marginal, over all
# queries. Jackknife+ gets there with intervals of almost one width, too
# wide on the quiet left and too narrow on the noisy right (its coverage by
# thirds of the axis ran from 1.00 to 0.78). The adaptive intervals scale
# with the local error the model estimates from its own leave-one-out
# residuals, so they follow the dotted band of the noise, cover each third
# of the axis about evenly (0.94 to 0.91) and are narrower on average.
