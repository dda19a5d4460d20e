"""Fits whose outputs were recorded before the restructure of issue 16.

``python tests/reference_fits.py [case ...]`` writes the cases named (all
without names) to ``tests/data/reference_fits.npz`` from the code as it
stands; ``test_reference_fits.py`` refits every case and compares. Rewrite
a case only for a change that is meant to alter its results. The
local-linear cases were recorded when that readout came (issue 33); the
others pin ``local_fit='constant'``, the readout they were recorded with
(and the allocator ``n_members=1``, the refit it was recorded with);
``multi_head_members`` was recorded when members came. The cases whose
start fits no scale per feature (several heads, a head narrower than the
features) were recorded again when their L-BFGS took each row of ``W`` as
a scale times a direction (``_fit/row_scales.py``, issue 34). The cases
that hold rows out for early stopping or read lines were recorded again when
``validation_fraction='auto'`` held out 30 % of the rows and the lines'
kernel width came to be chosen on them (issue 32). ``nwa_softmax_f32`` was
recorded again when the starting scales came to be searched in float64
(issue 69: its float32 search ended elsewhere under an AVX2 BLAS kernel).
``mh_early_stopping`` was recorded again when ``local_fit='auto'`` came to
offer local quadratics (issue 66: it reads them).
All fits run on one BLAS thread: two threads may sum in another order.
"""

import os
import sys

import numpy as np
from scipy import sparse
from sklearn.datasets import make_friedman1
from threadpoolctl import threadpool_limits

from nwensemble import HeadAllocator, MultiHeadNWRegressor, NWAttentionRegressor

PATH = os.path.join(os.path.dirname(__file__), "data", "reference_fits.npz")

CASES = {
    "nwa_softmax": (
        NWAttentionRegressor,
        dict(random_state=0, local_fit="constant"),
        "float64",
    ),
    "nwa_softmax_f32": (
        NWAttentionRegressor,
        dict(random_state=0, local_fit="constant"),
        "float32",
    ),
    "nwa_epanechnikov": (
        NWAttentionRegressor,
        dict(kernel="epanechnikov", head_dim=3, random_state=0),
        "float64",
    ),
    "nwa_adam": (
        NWAttentionRegressor,
        dict(
            solver="adam",
            batch_size=64,
            max_iter=5,
            random_state=0,
            local_fit="constant",
        ),
        "float64",
    ),
    "mh_softmax": (
        MultiHeadNWRegressor,
        dict(
            n_heads=3,
            head_dim=2,
            bvc_resamples=3,
            random_state=0,
            local_fit="constant",
        ),
        "float64",
    ),
    "mh_softmax_f32": (
        MultiHeadNWRegressor,
        dict(
            n_heads=3,
            head_dim=2,
            bvc_resamples=3,
            random_state=0,
            local_fit="constant",
        ),
        "float32",
    ),
    "mh_biweight_optimal": (
        MultiHeadNWRegressor,
        dict(
            n_heads=2,
            head_dim=2,
            kernel="biweight",
            head_weights="optimal",
            diversity=-0.5,
            bvc_resamples=3,
            random_state=0,
        ),
        "float64",
    ),
    "mh_early_stopping": (
        MultiHeadNWRegressor,
        dict(
            n_heads=2, head_dim=3, early_stopping=True, bvc_resamples=0, random_state=1
        ),
        "float64",
    ),
    "mh_local_linear": (
        MultiHeadNWRegressor,
        dict(
            n_heads=3, head_dim=2, local_fit="linear", bvc_resamples=3, random_state=0
        ),
        "float64",
    ),
    "nwa_local_linear_f32": (
        NWAttentionRegressor,
        dict(head_dim=3, local_fit="linear", random_state=0),
        "float32",
    ),
    "allocator_loo": (
        HeadAllocator,
        dict(
            estimator=MultiHeadNWRegressor(random_state=0, local_fit="constant"),
            budget=6,
            n_members=1,
        ),
        "float64",
    ),
    "multi_head_members": (
        MultiHeadNWRegressor,
        dict(n_heads=2, head_dim=2, n_members=2, random_state=0),
        "float64",
    ),
}


def data(dtype):
    """Training rows (some repeated, so the copies' blend is on) and queries
    (some equal to training rows)."""
    X, y = make_friedman1(n_samples=190, n_features=6, noise=0.3, random_state=0)
    X_train = np.vstack([X[:150], X[:20]])
    y_train = np.concatenate([y[:150], y[:20] + 0.1])
    X_test = np.vstack([X[150:], X[:5]])
    return X_train.astype(dtype), y_train, X_test.astype(dtype)


def outputs(name):
    """Fit case ``name`` and return its recorded quantities as arrays."""
    cls, params, dtype = CASES[name]
    X, y, Q = data(dtype)
    with threadpool_limits(1):
        est = cls(**params).fit(X, y)
        model = est.best_estimator_ if cls is HeadAllocator else est
        pred, std = model.predict(Q, return_std=True)
        weights = model.attention_weights(Q[:7])
        if sparse.issparse(weights):
            weights = weights.toarray()
        out = {
            "predict": est.predict(Q),
            "std": std,
            "components": model.components_,
            "transform": model.transform(Q),
            "weights": weights,
            "loo": loo_prediction(model),
            "pred_again": pred,
        }
    if isinstance(model, MultiHeadNWRegressor):
        out["hdi"] = np.asarray(model.hdi_)
        if model.bvc_decomposition_ is not None:
            bvc = model.bvc_decomposition_
            out["bvc"] = np.array([bvc.mse, bvc.bias2, bvc.variance, bvc.covariance])
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def loo_prediction(model):
    """The model's leave-one-out predictions of its training rows, (n, t)
    as recorded."""
    loo = np.asarray(model.loo_prediction_)
    return loo.reshape(loo.shape[0], -1)


def main(names):
    """Record the cases ``names`` (all when empty), keeping the others'
    recordings."""
    arrays = {}
    if names and os.path.exists(PATH):
        arrays = dict(np.load(PATH))
    for name in names or CASES:
        arrays = {k: v for k, v in arrays.items() if not k.startswith(name + "/")}
        for key, value in outputs(name).items():
            arrays[f"{name}/{key}"] = value
    os.makedirs(os.path.dirname(PATH), exist_ok=True)
    np.savez(PATH, **arrays)
    print(f"wrote {len(arrays)} arrays to {PATH}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
