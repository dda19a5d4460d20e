"""Displays: artists stored, axes labelled, bad arguments refused (Agg)."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import make_friedman1  # noqa: E402
from sklearn.utils import Bunch  # noqa: E402

from nwensemble import (  # noqa: E402
    HeadAllocator,
    MultiHeadNWRegressor,
    NWAttentionRegressor,
)
from nwensemble.plotting import (  # noqa: E402
    AllocationDisplay,
    AttentionDisplay,
    BVCDisplay,
    HeadDiversityDisplay,
)


@pytest.fixture(scope="module")
def fitted():
    X, y = make_friedman1(n_samples=150, n_features=6, noise=0.5, random_state=0)
    model = MultiHeadNWRegressor(n_heads=3, head_dim=2, random_state=0).fit(X, y)
    return model, X, y


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_head_diversity_display(fitted):
    model, _, _ = fitted
    disp = HeadDiversityDisplay.from_estimator(model)
    assert disp.im_.get_array().shape == (3, 3)
    assert disp.text_.shape == (3, 3)
    assert disp.ax_.get_xlabel() == "head" and disp.ax_.get_ylabel() == "head"
    assert f"{model.hdi_:.3f}" in disp.ax_.get_title()
    assert disp.colorbar_ is not None
    _, ax = plt.subplots()
    disp = HeadDiversityDisplay(np.eye(2), hdi=1.0).plot(
        ax=ax, annotate=False, colorbar=False
    )
    assert disp.ax_ is ax and disp.text_ is None and disp.colorbar_ is None


def test_head_diversity_display_rejects_bad_input(fitted):
    with pytest.raises(ValueError, match="square"):
        HeadDiversityDisplay(np.ones((2, 3)), hdi=0.5).plot()
    X, y = fitted[1], fitted[2]
    single = NWAttentionRegressor(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="subspace_similarity_"):
        HeadDiversityDisplay.from_estimator(single)


def test_bvc_display_one_and_many(fitted):
    model, X, y = fitted
    disp = BVCDisplay.from_estimator(model)
    assert set(disp.bars_) == {"bias$^2$", "variance / H", "(1 - 1/H) covariance"}
    top = sum(bar.patches[0].get_height() for bar in disp.bars_.values())
    assert top == pytest.approx(model.bvc_decomposition_.mse, rel=1e-9)
    assert disp.ax_.get_ylabel() == "squared error"
    one = MultiHeadNWRegressor(n_heads=1, head_dim=2, random_state=0).fit(X, y)
    disp = BVCDisplay.from_estimators([one, model], X, y, n_resamples=3, f_true=y)
    assert "noise" in disp.bars_
    assert [t.get_text() for t in disp.ax_.get_xticklabels()] == ["H=1", "H=3"]


def test_bvc_display_rejects_bad_input(fitted):
    model, X, y = fitted
    with pytest.raises(ValueError, match="empty"):
        BVCDisplay([]).plot()
    with pytest.raises(ValueError, match="lacks"):
        BVCDisplay(Bunch(mse=1.0)).plot()
    with pytest.raises(ValueError, match="labels"):
        BVCDisplay(model.bvc_decomposition_, labels=["a", "b"]).plot()
    with pytest.raises(ValueError, match="both X and y"):
        BVCDisplay.from_estimator(model, X)
    bare = MultiHeadNWRegressor(n_heads=2, bvc_resamples=0, max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="bvc_resamples"):
        BVCDisplay.from_estimator(bare)


def test_allocation_display(fitted):
    _, X, y = fitted
    alloc = HeadAllocator(
        MultiHeadNWRegressor(max_iter=10, random_state=0), budget=6, cv=3
    ).fit(X, y)
    disp = AllocationDisplay.from_estimator(alloc)
    n = len(alloc.cv_results_["params"])
    assert len(disp.ax_.get_xticklabels()) == n
    assert disp.ax_.get_xlabel() == "n_heads x head_dim"
    assert disp.ax_.get_ylabel() == "mean test score"
    assert "budget 6" in disp.ax_.get_title()
    assert disp.best_ is not None


def test_allocation_display_rejects_bad_input(fitted):
    with pytest.raises(ValueError, match="lacks 'params'"):
        AllocationDisplay({"mean_test_score": [1.0]}).plot()
    with pytest.raises(ValueError, match="n_heads"):
        AllocationDisplay(
            {"params": [{"alpha": 1}], "mean_test_score": [1], "std_test_score": [0]}
        ).plot()
    with pytest.raises(ValueError, match="not a HeadAllocator"):
        AllocationDisplay.from_estimator(fitted[0])


def test_attention_display(fitted):
    model, X, _ = fitted
    disp = AttentionDisplay.from_estimator(model, X[:1], top_k=4)
    W = disp.im_.get_array()
    assert W.shape[0] == 4  # three heads and the ensemble
    labels = [t.get_text() for t in disp.ax_.get_yticklabels()]
    assert labels == ["head 0", "head 1", "head 2", "ensemble"]
    assert disp.ax_.get_xlabel() == "training row"
    # the first column is the ensemble's heaviest row
    full = model.attention_weights(X[:1])[0]
    assert int(disp.ax_.get_xticklabels()[0].get_text()) == int(np.argmax(full))


def test_attention_display_rejects_bad_input(fitted):
    model, X, _ = fitted
    with pytest.raises(ValueError, match="one query"):
        AttentionDisplay.from_estimator(model, X[:2])
    with pytest.raises(ValueError, match="top_k"):
        AttentionDisplay.from_estimator(model, X[:1], top_k=0)
    with pytest.raises(ValueError, match="row_labels"):
        AttentionDisplay(np.ones((2, 3)), columns=[0, 1, 2], row_labels=["a"]).plot()


def _overlap(a, b):
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


@pytest.mark.parametrize("n_models", [1, 3])
def test_bvc_legend_covers_no_bar(fitted, n_models):
    model = fitted[0]
    disp = BVCDisplay.from_estimators([model] * n_models)
    disp.figure_.canvas.draw()
    legend = disp.ax_.get_legend().get_window_extent()
    for bars in disp.bars_.values():
        for patch in bars.patches:
            assert not _overlap(legend, patch.get_window_extent())


def test_saved_attention_figure_keeps_its_tick_labels(fitted, tmp_path):
    """The rotated row labels lie inside the figure written to a file."""
    model, X, _ = fitted
    disp = AttentionDisplay.from_estimator(model, X[:1], top_k=8)
    disp.figure_.savefig(tmp_path / "attention.png")
    figure = disp.figure_.bbox
    for label in disp.ax_.get_xticklabels():
        box = label.get_window_extent()
        assert box.y0 >= figure.y0 and box.x0 >= figure.x0 and box.x1 <= figure.x1


def test_attention_display_takes_one_row_as_an_array_or_a_series(fitted):
    pd = pytest.importorskip("pandas")
    model, X, _ = fitted
    ref = AttentionDisplay.from_estimator(model, X[:1]).weights
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    named = MultiHeadNWRegressor(n_heads=3, head_dim=2, random_state=0).fit(
        frame, fitted[2]
    )
    np.testing.assert_allclose(
        AttentionDisplay.from_estimator(model, X[0]).weights, ref
    )
    np.testing.assert_allclose(
        AttentionDisplay.from_estimator(named, frame.iloc[0]).weights, ref
    )
    with pytest.raises(ValueError, match="one query"):
        AttentionDisplay.from_estimator(model, X[:2])
