"""
===============================================
NW attention against tuned k-nearest neighbours
===============================================

On scikit-learn's diabetes data, compare :class:`~nwensemble.NWAttentionRegressor`
with a k-NN regressor whose ``k`` is tuned by grid search, and look at how the
learned projection weighs the features.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nwensemble import NWAttentionRegressor

X, y = load_diabetes(return_X_y=True)
names = load_diabetes().feature_names
cv = KFold(5, shuffle=True, random_state=0)

knn = GridSearchCV(
    make_pipeline(StandardScaler(), KNeighborsRegressor()),
    {"kneighborsregressor__n_neighbors": [5, 10, 20, 40, 80]},
)
models = {
    "k-NN (tuned k)": knn,
    "NW attention, head_dim=2": NWAttentionRegressor(head_dim=2, random_state=0),
    "NW attention, full rank": NWAttentionRegressor(random_state=0),
}
scores = {
    name: -cross_val_score(m, X, y, cv=cv, scoring="neg_root_mean_squared_error")
    for name, m in models.items()
}
for name, s in scores.items():
    print(f"{name:<28} RMSE {s.mean():.2f} ± {s.std():.2f}")

# %%
# The learned projection: how much each standardised feature moves the scores.
reg = NWAttentionRegressor(head_dim=2, random_state=0).fit(X, y)
influence = np.linalg.norm(reg.components_ * X.std(axis=0), axis=0)

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
ax0.boxplot(list(scores.values()), tick_labels=list(scores.keys()))
ax0.set_ylabel("5-fold RMSE")
ax0.tick_params(axis="x", labelrotation=15)
ax1.barh(names, influence)
ax1.set_xlabel("column norm of components_ (standardised units)")
ax1.set_title("What the 2-D projection looks at")
fig.tight_layout()
plt.show()
