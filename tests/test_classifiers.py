"""NWAttentionClassifier and MultiHeadNWClassifier: probabilities, labels,
tables, prediction sets and the heads' diagnostics."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, make_classification
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, train_test_split

from nwensemble import MultiHeadNWClassifier, NWAttentionClassifier


@pytest.fixture(scope="module")
def three_classes():
    X, y = make_classification(
        n_samples=240,
        n_features=5,
        n_informative=3,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        random_state=0,
    )
    return X, y


def _fit(model, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y, **kwargs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("Model", [NWAttentionClassifier, MultiHeadNWClassifier])
def test_probabilities_positive_and_summing_to_one(three_classes, Model, dtype):
    X, y = three_classes
    X = X.astype(dtype)
    clf = _fit(Model(random_state=0, max_iter=20), X, y)
    # Far queries too: every head's attention there collapses onto one row.
    Xq = np.vstack([X[:20], 1e3 * X[:5]]).astype(dtype)
    P = clf.predict_proba(Xq)
    assert P.dtype == dtype
    assert np.all(P > 0) and np.all(P < 1)
    assert_allclose(P.sum(axis=1), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert np.all(np.isfinite(clf.predict_log_proba(Xq)))
    assert_array_equal(clf.predict(Xq), clf.classes_[np.argmax(P, axis=1)])


def test_probabilities_under_the_array_api(three_classes, ns):
    X, y = three_classes
    Xn = ns.asarray(X.astype(np.float32))
    yn = ns.asarray(y)
    with ns.context():
        clf = _fit(NWAttentionClassifier(random_state=0, max_iter=10), Xn, yn)
        P = ns.check_output(clf.predict_proba(Xn))
        labels = ns.check_output(clf.predict(Xn))
    assert np.all(P > 0) and np.all(P < 1)
    assert_allclose(P.sum(axis=1), 1.0, rtol=1e-5)
    assert_array_equal(labels, np.unique(y)[np.argmax(P, axis=1)])


def test_string_labels_and_a_class_with_one_member(three_classes):
    X, y = three_classes
    names = np.array(["setosa", "versicolor", "virginica"], dtype=object)[y]
    names[0] = "lonely"  # one row only: left out, it has no other member
    clf = _fit(NWAttentionClassifier(random_state=0, max_iter=20), X, names)
    assert list(clf.classes_) == ["lonely", "setosa", "versicolor", "virginica"]
    P = clf.predict_proba(X)
    assert P.shape == (X.shape[0], 4) and np.all(P > 0)
    assert set(clf.predict(X)) <= set(clf.classes_)
    # Its own row still predicts it: the row attends to itself at predict.
    assert P[0, 0] == P[:, 0].max()


def test_one_class_is_refused():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match="at least 2 classes"):
        NWAttentionClassifier().fit(X, np.zeros(10))


def test_continuous_target_is_refused():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match="Unknown label type"):
        NWAttentionClassifier().fit(X, np.linspace(0, 1, 10))


def test_table_with_strings_unseen_levels_and_missing_values():
    rng = np.random.default_rng(0)
    n = 300
    colour = rng.choice(["red", "green", "blue"], size=n)
    x = rng.normal(size=n)
    y = np.where((colour == "red") ^ (x > 0), "yes", "no")
    x[rng.random(n) < 0.1] = np.nan
    X = pd.DataFrame({"colour": pd.Categorical(colour), "x": x})
    clf = _fit(MultiHeadNWClassifier(n_heads=2, random_state=0), X, y)
    assert clf.score(X, y) > 0.8
    Xq = pd.DataFrame(
        {
            "colour": pd.Categorical(["purple", "red", None]),
            "x": [0.5, np.nan, -1.0],
        }
    )
    P = clf.predict_proba(Xq)
    assert np.all(P > 0) and np.all(np.isfinite(P))
    assert_allclose(P.sum(axis=1), 1.0)


def test_prior_weight_is_chosen_by_leave_one_out_log_loss(three_classes):
    X, y = three_classes
    clf = _fit(NWAttentionClassifier(random_state=0, max_iter=20), X, y)
    n = X.shape[0]
    assert 1 / (n + 1) <= clf.prior_weight_ <= 1
    P = clf.loo_proba_
    known = np.all(np.isfinite(P), axis=1)
    chosen = log_loss(y[known], P[known])
    raw = (P[known] - clf.prior_weight_ * clf.class_prior_) / (1 - clf.prior_weight_)
    for a in (1 / (n + 1), 0.5):
        other = (1 - a) * raw + a * clf.class_prior_
        assert chosen <= log_loss(y[known], np.clip(other, 1e-300, 1)) + 1e-9


def test_class_weight_shifts_probabilities(three_classes):
    X, y = three_classes
    keep = (y != 2) | (np.arange(y.size) % 4 == 0)  # class 2 rare
    X, y = X[keep], y[keep]
    plain = _fit(NWAttentionClassifier(random_state=0, max_iter=20), X, y)
    balanced = _fit(
        NWAttentionClassifier(class_weight="balanced", random_state=0, max_iter=20),
        X,
        y,
    )
    assert balanced.class_prior_[2] > plain.class_prior_[2]
    assert balanced.predict_proba(X)[:, 2].mean() > plain.predict_proba(X)[:, 2].mean()
    by_dict = _fit(
        NWAttentionClassifier(
            class_weight={0: 1.0, 1: 1.0, 2: 3.0}, random_state=0, max_iter=20
        ),
        X,
        y,
    )
    assert by_dict.class_prior_[2] > plain.class_prior_[2]


def test_prediction_sets_cover_at_the_confidence_level():
    X, y = load_iris(return_X_y=True)
    coverages = []
    for seed in range(3):
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.5, stratify=y, random_state=seed
        )
        clf = _fit(
            MultiHeadNWClassifier(n_heads=2, random_state=seed), X_train, y_train
        )
        y_pred, sets = clf.predict_set(X_test, confidence_level=0.9)
        assert sets.shape == (X_test.shape[0], 3) and sets.dtype == bool
        assert_array_equal(y_pred, clf.predict(X_test))
        coverages.append(sets[np.arange(y_test.size), y_test].mean())
    assert 0.8 <= np.mean(coverages) <= 1.0
    # A lower level gives sets no larger.
    _, small = clf.predict_set(X_test, confidence_level=0.5)
    assert np.all(small <= sets)


def test_prediction_sets_too_few_rows_hold_every_class():
    X, y = load_iris(return_X_y=True)
    clf = _fit(NWAttentionClassifier(random_state=0, max_iter=5), X[::10], y[::10])
    with pytest.warns(UserWarning, match="cannot calibrate"):
        _, sets = clf.predict_set(X[:3], confidence_level=0.99)
    assert sets.all()


def test_multi_head_diagnostics_describe_probability_vectors(three_classes):
    X, y = three_classes
    clf = _fit(MultiHeadNWClassifier(n_heads=3, head_dim=1, random_state=0), X, y)
    assert 0 <= clf.hdi_ <= 1
    b = clf.bvc_decomposition_
    assert b.n_heads == 3
    one_hot = (y[:, None] == clf.classes_[None, :]).astype(float)
    # Mean squared error of probability vectors (per output): at most 1.
    assert 0 <= b.mse <= 1 and b.mse == pytest.approx(
        b.bias2 + b.variance / 3 + (1 - 1 / 3) * b.covariance
    )
    assert one_hot.shape == clf.loo_proba_.shape


@settings(max_examples=15, deadline=None)
@given(
    st.integers(12, 40),
    st.integers(2, 4),
    st.integers(0, 2**16),
)
def test_brier_decomposition_adds_up(n, n_classes, seed):
    """The BVC parts of the heads' probability vectors add up to their MSE."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.arange(n) % n_classes
    rng.shuffle(y)
    clf = _fit(
        MultiHeadNWClassifier(
            n_heads=2, head_dim=1, max_iter=3, bvc_resamples=3, random_state=0
        ),
        X,
        y,
    )
    b = clf.bvc_decomposition_
    H = b.n_heads
    assert b.mse == pytest.approx(
        b.bias2 + b.variance / H + (1 - 1 / H) * b.covariance, rel=1e-9, abs=1e-12
    )
    assert 0 <= clf.hdi_ <= 1


def test_grid_search_over_heads(three_classes):
    X, y = three_classes
    search = GridSearchCV(
        MultiHeadNWClassifier(max_iter=10, bvc_resamples=0, random_state=0),
        {"n_heads": [1, 2]},
        cv=3,
        scoring="neg_log_loss",
    )
    _fit(search, X, y)
    assert search.best_estimator_.n_heads in (1, 2)
    assert search.predict_proba(X).shape == (X.shape[0], 3)


def test_device_cuda_computes_there_and_answers_in_numpy(three_classes, gpu_stand_in):
    """With device='cuda' (here array_api_strict's second device in CuPy's
    place) the model computes on the device; NumPy in, NumPy out, string
    labels included."""
    _, dev = gpu_stand_in
    X, y = three_classes
    names = np.array(["a", "b", "c"])[y]
    clf = _fit(
        MultiHeadNWClassifier(n_heads=2, device="cuda", max_iter=10, random_state=0),
        X,
        names,
    )
    assert clf.components_.device == dev
    P = clf.predict_proba(X[:7])
    assert isinstance(P, np.ndarray) and np.allclose(P.sum(axis=1), 1)
    labels, sets = clf.predict_set(X[:7])
    assert isinstance(sets, np.ndarray) and sets.shape == (7, 3)
    assert_array_equal(clf.predict(X[:7]), labels)
    assert set(labels) <= {"a", "b", "c"}
