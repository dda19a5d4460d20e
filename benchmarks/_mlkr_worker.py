"""Fit metric-learn's MLKR on given folds; run in metric-learn's own environment.

metric-learn 0.7.0 fails on scikit-learn >= 1.8, so bench_single_head.py starts
this script with another interpreter. Input: an .npz with X, y and the folds;
output: JSON on stdout with per-fold fit times and test RMSE. Prediction is the
NW estimate in MLKR's learned space with MLKR's own kernel exp(-d^2).
"""

import json
import sys
import time
import warnings

import numpy as np
from metric_learn import MLKR
from scipy.special import logsumexp
from sklearn.preprocessing import StandardScaler


def nw_predict(Z_train, y_train, Z_test, chunk=2048):
    out = np.empty(Z_test.shape[0])
    sq_train = np.sum(Z_train**2, axis=1)
    for s in range(0, Z_test.shape[0], chunk):
        q = Z_test[s : s + chunk]
        d2 = np.sum(q**2, axis=1)[:, None] + sq_train[None, :] - 2 * q @ Z_train.T
        logits = -d2
        w = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
        out[s : s + chunk] = w @ y_train
    return out


def main(path):
    warnings.simplefilter("ignore")
    data = np.load(path)
    X, y = data["X"], data["y"]
    result = {"fit_time": [], "rmse": [], "n_iter": []}
    for k in range(int(data["n_folds"])):
        train, test = data[f"train_{k}"], data[f"test_{k}"]
        scaler = StandardScaler().fit(X[train])
        Xtr, Xte = scaler.transform(X[train]), scaler.transform(X[test])
        start = time.perf_counter()
        mlkr = MLKR(random_state=0).fit(Xtr, y[train])
        result["fit_time"].append(time.perf_counter() - start)
        pred = nw_predict(mlkr.transform(Xtr), y[train], mlkr.transform(Xte))
        result["rmse"].append(float(np.sqrt(np.mean((pred - y[test]) ** 2))))
        result["n_iter"].append(int(mlkr.n_iter_))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
