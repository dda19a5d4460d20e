"""
=======================================================
Classification: attention over classes, prediction sets
=======================================================

The wine data (178 wines, 13 measurements, 3 cultivars) split in half.
:class:`~nwensemble.HeadAllocator` chooses the heads of a
:class:`~nwensemble.MultiHeadNWClassifier` by the log-loss of its
leave-one-out probabilities, and the chosen model's class probabilities
are the attention each head pays to the training rows of each class,
averaged over the heads. Left: the test wines along the first two learned
directions, coloured by cultivar. Right: the conformal prediction sets of
:meth:`~nwensemble.MultiHeadNWClassifier.predict_set` at several confidence
levels, their coverage of the test wines' cultivars against the level
asked for, each point labelled with the sets' mean size (a set is empty
where no class is probable enough). They come from the leave-one-out
probabilities the fit already has (no refit); with about 25 calibration
rows, the coverage of one fitted model varies by several per cent around
its level.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

from nwensemble import HeadAllocator, MultiHeadNWClassifier

X, y = load_wine(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.5, stratify=y, random_state=0
)
clf = HeadAllocator(MultiHeadNWClassifier(), random_state=0).fit(X_train, y_train)
hgb = HistGradientBoostingClassifier(random_state=0).fit(X_train, y_train)
print(f"chosen: {clf.best_params_}, {clf.n_members_} members")
print(f"HDI of the heads: {clf.hdi_:.3f}")
for name, model in (("attention", clf), ("gradient boosting", hgb)):
    P = model.predict_proba(X_test)
    accuracy = np.mean(model.predict(X_test) == y_test)
    print(f"{name}: test log-loss {log_loss(y_test, P):.3f}, accuracy {accuracy:.3f}")

# %%
levels = np.array([0.8, 0.85, 0.9, 0.95, 0.99])
coverage, size = [], []
for level in levels:
    _, sets = clf.predict_set(X_test, confidence_level=level)
    coverage.append(sets[np.arange(y_test.size), y_test].mean())
    size.append(sets.sum(axis=1).mean())

# transform concatenates the heads' spaces: the first two learned directions.
Z = clf.transform(X_test)[:, :2]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4.2))
for c in np.unique(y_test):
    ax0.scatter(*Z[y_test == c].T, s=18, label=f"cultivar {c}")
ax0.set_xlabel("first learned direction")
ax0.set_ylabel("second learned direction")
ax0.set_title("Test wines in the learned space")
ax0.legend()
ax1.plot(levels, coverage, "o-", label="coverage of the test wines")
ax1.plot([0.8, 1], [0.8, 1], "k:", label="level asked for")
for level, c, k in zip(levels, coverage, size):
    ax1.annotate(f"{k:.2f}", (level, c), textcoords="offset points", xytext=(-8, 8))
ax1.set_xlabel("confidence_level")
ax1.set_ylabel("coverage (labels: mean classes per set)")
ax1.legend(loc="lower right")
ax1.set_title("Conformal prediction sets")
fig.tight_layout()
plt.show()
