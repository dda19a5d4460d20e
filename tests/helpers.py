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


def loo_problem(n, d, n_heads, t, dtype, *, seed=0, scale=0.7):
    """``(Z, Y, sw)`` for the leave-one-out objective: ``n`` projected rows of
    ``n_heads`` heads of ``d`` dimensions, ``t`` targets, weights summing to
    one, the first three rows of weight zero (they query but are no one's
    key and carry no loss)."""
    rng = np.random.default_rng(seed)
    Z = (scale * rng.standard_normal((n, n_heads * d))).astype(dtype)
    Y = rng.standard_normal((n, t)).astype(dtype)
    sw = rng.uniform(0.2, 2.0, n)
    sw[:3] = 0.0
    return Z, Y, (sw / sw.sum()).astype(dtype)


def host_and_blocks(monkeypatch, Z, Y, sw, **options):
    """``(host, blocks)``: the objective ``loo_loss_and_grad_z`` through the
    host's compiled sweeps and through the (n, n) blocks of NumPy's path."""
    from nwensemble._fit import loo_loss
    from nwensemble._shared import numba_kernels as compiled
    from nwensemble._shared.kernels import KERNELS

    kw = dict(xp=np, kernel=KERNELS["softmax"], **options)
    host = loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace={}, **kw)
    with monkeypatch.context() as patch:
        patch.setattr(compiled, "ENABLED", False)
        blocks = loo_loss.loo_loss_and_grad_z(Z, Y, sw, workspace={}, **kw)
    return host, blocks


def assert_objective_close(got, expected, rtol):
    """Losses within ``rtol``; gradients (or both None) within ``rtol`` of
    the expected gradient's largest entry, in the same dtype."""
    from numpy.testing import assert_allclose

    assert_allclose(got[0], expected[0], rtol=rtol)
    if expected[1] is None:
        assert got[1] is None
        return
    scale = np.abs(expected[1]).max()
    assert got[1].dtype == expected[1].dtype
    assert_allclose(got[1], expected[1], rtol=0, atol=rtol * scale)


def shrunk_correlation(X):
    """Schaefer and Strimmer's shrinkage of the correlation of the complete,
    standardised rows ``X``, written out for equal weights (what
    ``conditional_fill.fit_correlation`` computes): the matrix and
    ``lambda``."""
    n, p = X.shape
    R = X.T @ X / n
    products = X[:, :, None] * X[:, None, :]
    variance = ((products - R) ** 2).sum(axis=0) / n**2
    off = ~np.eye(p, dtype=bool)
    lam = min(1.0, variance[off].sum() / (R[off] ** 2).sum())
    return np.where(off, (1 - lam) * R, 1.0), lam


def designed_rows(rng, n_settings):
    """A designed experiment's rows: each of ``n_settings`` settings
    measured at each of five ages with probability 0.8, as ``(setting
    index, age)`` arrays in setting order (series along the age)."""
    ages = np.array([1.0, 3.0, 7.0, 28.0, 90.0])
    rows = [(s, age) for s in range(n_settings) for age in ages if rng.uniform() < 0.8]
    setting, age = np.array(rows).T
    return setting.astype(int), age
