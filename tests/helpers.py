"""Small helpers that several test modules share."""

import numpy as np
from sklearn.datasets import make_friedman1


def friedman_split(n_train, n_test, n_features, noise=1.0):
    """Friedman #1 as ``(X_train, y_train, X_test, y_test)``, seed 0."""
    X, y = make_friedman1(
        n_samples=n_train + n_test, n_features=n_features, noise=noise, random_state=0
    )
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def rmse(model, X, y):
    """Test RMSE of a fitted model, as a float."""
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def make_keys(Z, Y, sw, *, kernel="softmax", n_heads=1):
    """``Keys`` of projected rows ``Z`` with targets ``Y`` and weights ``sw``,
    the kernel given by its name."""
    from nwensemble._shared.kernels import KERNELS
    from nwensemble._shared.keys import Keys

    return Keys.of(Z, Y, sw, kernel=KERNELS[kernel], n_heads=n_heads)
