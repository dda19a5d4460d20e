"""
================================================
A table as it comes: strings and missing values
================================================

A table of the kind tabular users have: two numeric columns, a string column
with five levels, a string column with 200 levels (a "store"), and numeric
cells left empty. :class:`~nwensemble.NWAttentionRegressor` takes the frame
as it is (``categorical_features='from_dtype'``, the default): each head
places every level at a learned position in its subspace (an embedding),
and a missing value at a learned position of its own.

We compare it with the pipeline a user had to write before (impute, one-hot
encode, then the same estimator) and with
:class:`~sklearn.ensemble.HistGradientBoostingRegressor`, then look at where
the model put the five levels of ``region``: their order along the first
direction follows their (known) effect on the target.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from nwensemble import NWAttentionRegressor

rng = np.random.default_rng(0)
n = 1500
region_effect = {"north": -2.0, "south": 1.5, "east": 0.5, "west": -0.5, "centre": 2.5}
regions = np.array(list(region_effect))
region = rng.choice(regions, n)
store = rng.integers(0, 200, n)
store_effect = rng.normal(0, 1.0, 200)
price = rng.uniform(1, 10, n)
size = rng.lognormal(1.0, 0.5, n)
y = (
    np.array([region_effect[r] for r in region])
    + store_effect[store]
    + 2 * np.sin(price)
    + 0.5 * np.log(size)
    + 0.3 * rng.standard_normal(n)
)
frame = pd.DataFrame(
    {
        "price": price,
        "size": np.where(rng.random(n) < 0.15, np.nan, size),  # 15 % missing
        "region": region,
        "store": np.array([f"store {s:03d}" for s in store]),
    }
)
frame.head()

# %%
# The native model, the one-hot pipeline and gradient boosting, 5-fold CV.
one_hot = make_pipeline(
    ColumnTransformer(
        [
            (
                "num",
                SimpleImputer(add_indicator=True),
                make_column_selector(dtype_include="number"),
            ),
            (
                "cat",
                OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                make_column_selector(dtype_exclude="number"),
            ),
        ]
    ),
    NWAttentionRegressor(random_state=0),
)
hgb = HistGradientBoostingRegressor(random_state=0)
models = {
    "NWAttention, native": NWAttentionRegressor(random_state=0),
    "NWAttention, one-hot pipeline": one_hot,
    "HistGradientBoosting": hgb,
}
for name, model in models.items():
    X = (
        frame
        if name != "HistGradientBoosting"
        else frame.astype({"region": "category", "store": "category"})
    )
    rmse = -cross_val_score(model, X, y, cv=5, scoring="neg_root_mean_squared_error")
    print(f"{name:<32} RMSE {rmse.mean():.3f}")

# %%
# Fitted on all rows, the model says which levels it saw and where it put
# them: ``embeddings_[i]`` has a row per level of ``categories_[i]``, then the
# "infrequent or unseen" row and the "missing" row.
model = NWAttentionRegressor(random_state=0).fit(frame, y)
print(model.categories_[0])
print("levels of store with their own embedding:", len(model.categories_[1]))
E = model.embeddings_[0][: len(model.categories_[0])]
# The direction along which the regions spread most.
centred = E - E.mean(axis=0)
_, _, vt = np.linalg.svd(centred, full_matrices=False)
position = centred @ vt[0]
position *= np.sign(
    np.corrcoef(position, [region_effect[r] for r in model.categories_[0]])[0, 1]
)

fig, ax = plt.subplots(figsize=(6, 3.5))
effects = [region_effect[r] for r in model.categories_[0]]
ax.scatter(effects, position)
for r, e, p in zip(model.categories_[0], effects, position):
    ax.annotate(r, (e, p), textcoords="offset points", xytext=(4, 4))
ax.set_xlabel("true effect of the region on the target")
ax.set_ylabel("learned position (first direction)")
ax.set_title("Where the head put the levels of 'region'")
fig.tight_layout()

# %%
# A level never seen in training (and a missing one) still predicts: it takes
# the shared "infrequent or unseen" embedding (and the "missing" one).
query = frame.iloc[:3].copy()
query["store"] = ["store 999", np.nan, "store 000"]
query["size"] = [np.nan, 2.0, 3.0]
print(model.predict(query))
