"""Which leave-one-out objective trains the classifiers' projection better:
the Brier score or the log-loss.

A NumPy prototype fits one full-rank head (float64, dense softmax, scipy's
L-BFGS, at most 200 iterations) on each objective from the same start: the
standardised features times the bandwidth of least leave-one-out loss on a
grid, each objective choosing its own. The log-loss is that of the
probabilities smoothed toward the class prior with weight ``1 / (n + 1)``
(bounded, as the classifiers' floor keeps it). Both fits are then
smoothed by the classifiers' rule (``choose_prior_weight``) and scored on
the test fold: log-loss and accuracy, stratified 5-fold
(``StratifiedKFold(5, shuffle=True, random_state=0)``), with the paired
ratio of the log-losses (log-loss-trained over Brier-trained) and its
standard error over the folds. Numeric tables only (the prototype has no
categorical embeddings): scikit-learn's iris, wine, breast_cancer, digits,
and pima_diabetes and a 1500-row sample of letter_recognition from
``../shared/data/classification``.

Run: ``python benchmarks/levers/bench_classifier_objective.py``
"""

import os
import sys
import time

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from _common import cpu_line  # noqa: E402

from nwensemble._fit.class_targets import choose_prior_weight  # noqa: E402

SHARED = os.path.join(HERE, "..", "..", "shared", "data", "classification")


def tables():
    for name, load in (
        ("iris", load_iris),
        ("wine", load_wine),
        ("breast_cancer", load_breast_cancer),
        ("digits", load_digits),
    ):
        X, y = load(return_X_y=True)
        yield name, X, y
    pima = pd.read_csv(os.path.join(SHARED, "pima_diabetes.csv"))
    yield (
        "pima_diabetes",
        pima.drop(columns="target").to_numpy(float),
        pima.target.to_numpy(),
    )
    letters = pd.read_csv(os.path.join(SHARED, "letter_recognition.csv"))
    rows = np.random.default_rng(0).choice(len(letters), size=1500, replace=False)
    letters = letters.iloc[rows]
    yield (
        "letter_recognition (1500)",
        letters.drop(columns="target").to_numpy(float),
        letters.target.to_numpy(),
    )


def loss_and_grad(w, X, Y, prior, objective, d):
    """Leave-one-out loss of the projection ``w`` (flattened d x p) and its
    gradient."""
    n, p = X.shape
    W = w.reshape(d, p)
    Z = X @ W.T
    sq = np.sum(Z * Z, axis=1)
    logits = -(sq[:, None] + sq[None, :] - 2 * Z @ Z.T) / 2
    np.fill_diagonal(logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    S = np.exp(logits)
    S /= S.sum(axis=1, keepdims=True)
    P = S @ Y
    if objective == "brier":
        R = P - Y
        loss = np.sum(R * R) / n
        G_S = (2 * R / n) @ Y.T
    else:
        a = 1.0 / (n + 1)
        own = np.sum(P * Y, axis=1)
        smoothed = (1 - a) * own + a * (Y @ prior)
        loss = -np.mean(np.log(smoothed))
        G_S = -((1 - a) / (n * smoothed))[:, None] * (Y @ Y.T)
    G_L = S * (G_S - np.sum(S * G_S, axis=1, keepdims=True))
    M = G_L + G_L.T
    dZ = -(M.sum(axis=1)[:, None] * Z - M @ Z)
    return loss, (dZ.T @ X).ravel()


def fit(X, Y, prior, objective):
    p = X.shape[1]
    grid = np.array([0.25, 0.5, 1, 2, 4, 8]) / np.sqrt(p)
    losses = [
        loss_and_grad((s * np.eye(p)).ravel(), X, Y, prior, objective, p)[0]
        for s in grid
    ]
    start = (grid[int(np.argmin(losses))] * np.eye(p)).ravel()
    found = minimize(
        loss_and_grad,
        start,
        args=(X, Y, prior, objective, p),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 200},
    )
    return found.x.reshape(p, p)


def probabilities(W, X_keys, Y, X_query, leave_one_out):
    Zk, Zq = X_keys @ W.T, X_query @ W.T
    logits = (
        -(
            np.sum(Zq * Zq, axis=1)[:, None]
            + np.sum(Zk * Zk, axis=1)[None, :]
            - 2 * Zq @ Zk.T
        )
        / 2
    )
    if leave_one_out:
        np.fill_diagonal(logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    S = np.exp(logits)
    return (S / S.sum(axis=1, keepdims=True)) @ Y


def main():
    print(cpu_line())
    print("test log-loss (accuracy) of one full-rank head, stratified 5-fold\n")
    header = f"{'table':<28}{'Brier-trained':>22}{'log-loss-trained':>22}"
    print(f"{header}{'paired ratio':>20}")
    all_ratios = []
    for name, X, y in tables():
        classes, codes = np.unique(y, return_inverse=True)
        res = {"brier": [], "log": []}
        for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(
            X, codes
        ):
            scaler = StandardScaler().fit(X[train])
            Xtr, Xte = scaler.transform(X[train]), scaler.transform(X[test])
            Y = np.eye(classes.size)[codes[train]]
            prior = Y.mean(axis=0)
            for objective in res:
                W = fit(Xtr, Y, prior, objective)
                loo = probabilities(W, Xtr, Y, Xtr, True)
                a = choose_prior_weight(loo, codes[train], np.ones(len(train)), prior)
                P = (1 - a) * probabilities(W, Xtr, Y, Xte, False) + a * prior
                res[objective].append(
                    (
                        log_loss(codes[test], P, labels=np.arange(classes.size)),
                        accuracy_score(codes[test], P.argmax(axis=1)),
                    )
                )
        b, g = np.array(res["brier"]), np.array(res["log"])
        r = np.log(g[:, 0] / b[:, 0])
        all_ratios.append(np.exp(r.mean()))
        print(
            f"{name:<28}{b[:, 0].mean():>12.4f} ({b[:, 1].mean():.3f})"
            f"{g[:, 0].mean():>12.4f} ({g[:, 1].mean():.3f})"
            f"{np.exp(r.mean()):>12.3f} ± {r.std(ddof=1) / np.sqrt(len(r)):.3f}",
            flush=True,
        )
    print(
        f"\ngeometric mean over the tables of the paired ratio (log-loss-trained "
        f"over Brier-trained): {np.exp(np.mean(np.log(all_ratios))):.3f}"
    )


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s)")
