"""Array namespace handling."""

import pickle
import threading
import time

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context, get_config
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_info

from nwensemble import HeadAllocator, MultiHeadNWRegressor, NWAttentionRegressor
from nwensemble._shared.backend import (
    floating_like,
    get_namespace,
    host_targets,
    kth_smallest,
    move_to,
    row_major,
    same_namespace_or_raise,
    to_numpy,
)
from nwensemble._shared.host_threads import (
    _PRODUCT_THREADS,
    blas_single_threaded,
    fixed_order_matmul,
    map_on_host_threads,
    products_on_threads,
)


def test_dispatch_off_serves_numpy():
    """Without array_api_dispatch every non-CuPy input is served by NumPy."""
    xp, device = get_namespace(np.ones(3))
    assert xp.__name__.endswith("numpy") and device == "cpu"
    assert get_namespace([1.0, 2.0])[0] is xp


def test_dispatch_on_serves_the_input_namespace():
    """With dispatch on, array_api_strict input is served in its namespace."""
    xps = pytest.importorskip("array_api_strict")
    with config_context(array_api_dispatch=True):
        xp, device = get_namespace(xps.asarray([1.0]))
    assert xp is xps and device == xps.Device("CPU_DEVICE")


def test_row_major_lays_rows_out_contiguously_where_it_can():
    import array_api_compat.numpy as xp_np

    a = np.arange(12.0).reshape(3, 4).T
    got = row_major(a, xp=xp_np)
    assert got.flags.c_contiguous
    assert_array_equal(got, a)
    xps = pytest.importorskip("array_api_strict")
    b = xps.asarray(a)
    assert row_major(b, xp=xps) is b


@pytest.mark.parametrize("k", [0, 3, 6])
def test_kth_smallest_is_that_of_the_sorted_axis(k):
    """A partition (NumPy) and a sort (array_api_strict) give the k-th
    smallest along axis 1, for every row and output."""
    import array_api_compat.numpy as xp_np

    a = np.random.default_rng(0).normal(size=(4, 7, 2))
    expected = np.sort(a, axis=1)[:, k, :]
    assert_array_equal(kth_smallest(a, k, xp=xp_np), expected)
    xps = pytest.importorskip("array_api_strict")
    assert_array_equal(to_numpy(kth_smallest(xps.asarray(a), k, xp=xps)), expected)


def test_move_to_crosses_namespaces_and_devices():
    """y from another namespace or device is moved to X's."""
    xps = pytest.importorskip("array_api_strict")
    dev = xps.Device("device1")
    a = xps.asarray([1.0, 2.0], device=dev)
    assert_allclose(to_numpy(a), [1.0, 2.0])
    moved = move_to(np.array([3.0]), xp=xps, device=dev)
    assert moved.device == dev
    back = move_to(a, xp=np, device="cpu")
    assert isinstance(back, np.ndarray)


def test_predict_refuses_another_namespace():
    """A model fitted on array_api_strict refuses NumPy queries, and says why."""
    xps = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 3)), rng.standard_normal(20)
    with config_context(array_api_dispatch=True):
        reg = NWAttentionRegressor(max_iter=2).fit(xps.asarray(X), xps.asarray(y))
        with pytest.raises(
            ValueError, match=r"NWAttentionRegressor.predict\(\) must use"
        ):
            reg.predict(X)
    with pytest.raises(ValueError, match="same namespace"):
        same_namespace_or_raise(X, reg.components_, estimator=reg, method="predict")


@pytest.mark.parametrize(
    "make",
    [
        lambda: MultiHeadNWRegressor(n_heads=2, head_dim=2, random_state=0),
        lambda: NWAttentionRegressor(kernel="biweight", random_state=0),
        lambda: HeadAllocator(
            MultiHeadNWRegressor(random_state=0, bvc_resamples=0), cv=None, budget=4
        ),
    ],
)
def test_model_fitted_on_a_device_pickles_to_numpy(make, friedman):
    """A model fitted on array_api_strict's second device (a stand-in for a
    GPU) loads as NumPy and predicts NumPy input as it predicted on the
    device (to the last bit of the host's compiled exp)."""
    xps = pytest.importorskip("array_api_strict")
    dev = xps.Device("device1")
    X, y = friedman
    far = np.vstack([X[:40], np.full((1, X.shape[1]), 1e6)])
    with config_context(array_api_dispatch=True):
        model = make().fit(xps.asarray(X, device=dev), xps.asarray(y, device=dev))
        on_device = model.predict(xps.asarray(far, device=dev))
        assert on_device.device == dev
        blob = pickle.dumps(model)
    loaded = pickle.loads(blob)
    pred = loaded.predict(far)
    assert isinstance(pred, np.ndarray)
    assert_allclose(pred, to_numpy(on_device), rtol=1e-13)
    inner = getattr(loaded, "best_estimator_", loaded)
    assert isinstance(inner.components_, np.ndarray)
    # Pickling leaves the model on the device untouched.
    assert getattr(model, "best_estimator_", model).components_.device == dev


def test_device_cpu_computes_on_the_host_and_answers_in_the_input_namespace(
    friedman,
):
    """device='cpu' with input on array_api_strict's second device: the fit
    runs in NumPy (same model as a NumPy fit), results go back to the input's
    device."""
    xps = pytest.importorskip("array_api_strict")
    dev = xps.Device("device1")
    X, y = friedman
    ref = MultiHeadNWRegressor(n_heads=2, head_dim=2, kernel="biweight", random_state=0)
    ref.fit(X, y)
    reg = MultiHeadNWRegressor(
        n_heads=2, head_dim=2, kernel="biweight", device="cpu", random_state=0
    )
    with config_context(array_api_dispatch=True):
        Xd = xps.asarray(X[:30], device=dev)
        reg.fit(xps.asarray(X, device=dev), xps.asarray(y, device=dev))
        pred, std = reg.predict(Xd, return_std=True)
        Z = reg.transform(Xd)
        weights, rows = reg.attention_weights(Xd, top_k=3)
    assert isinstance(reg.components_, np.ndarray)
    for out in (pred, std, Z, weights, rows):
        assert out.device == dev
    assert_array_equal(to_numpy(pred), ref.predict(X[:30]))
    # NumPy input to the same model stays NumPy.
    assert isinstance(reg.predict(X[:5]), np.ndarray)


def test_device_cuda_without_a_gpu_says_what_is_missing(friedman, no_gpu):
    X, y = friedman
    with pytest.raises(ValueError, match="device='cuda' needs CuPy and a CUDA GPU"):
        NWAttentionRegressor(device="cuda").fit(X, y)


@pytest.mark.gpu
def test_device_cuda_returns_numpy_for_numpy_input(friedman, cupy_gpu):
    cupy = cupy_gpu
    X, y = friedman
    reg = NWAttentionRegressor(device="cuda", random_state=0).fit(X, y)
    assert isinstance(reg.components_, cupy.ndarray)
    pred = reg.predict(X)
    assert isinstance(pred, np.ndarray)
    ref = NWAttentionRegressor(random_state=0).fit(X, y).predict(X)
    assert_allclose(pred, ref, rtol=1e-6)
    loaded = pickle.loads(pickle.dumps(reg))
    assert isinstance(loaded.components_, np.ndarray)
    assert_allclose(loaded.predict(X), pred, rtol=1e-12)


@pytest.mark.gpu
def test_cupy_fit_predict_match_numpy(cupy_gpu):
    """CuPy input (dispatch on) fits and predicts on the GPU, matching NumPy."""
    cupy = cupy_gpu
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((200, 4)), rng.standard_normal(200)
    ref = NWAttentionRegressor(random_state=0, max_iter=20).fit(X, y)
    with config_context(array_api_dispatch=True):
        reg = NWAttentionRegressor(random_state=0, max_iter=20).fit(
            cupy.asarray(X), cupy.asarray(y)
        )
        pred = reg.predict(cupy.asarray(X))
    assert isinstance(pred, cupy.ndarray)
    assert_allclose(cupy.asnumpy(pred), ref.predict(X), rtol=1e-6)


@pytest.mark.parametrize("kernel", ["softmax", "biweight"])
def test_device_cuda_with_numpy_input_and_dispatch_off(gpu_stand_in, kernel):
    """Fit (with sample weights), every output and pickling: fitted arrays on
    the device, NumPy out, and the same numbers as a NumPy fit."""
    from nwensemble.diagnostics import bvc_decomposition, support_fallback

    _, dev = gpu_stand_in
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 4)), rng.standard_normal(120)
    sw = rng.uniform(0.5, 2.0, 120)
    params = dict(n_heads=2, head_dim=2, kernel=kernel, max_iter=5, random_state=0)
    ref = MultiHeadNWRegressor(**params).fit(X, y, sample_weight=sw)
    reg = MultiHeadNWRegressor(device="cuda", **params).fit(X, y, sample_weight=sw)
    assert reg.components_.device == dev
    pred, std = reg.predict(X[:20], return_std=True)
    outputs = [
        pred,
        std,
        reg.transform(X[:20]),
        support_fallback(reg, X[:20]),
    ]
    for out in outputs:
        assert isinstance(out, np.ndarray)
    assert_allclose(pred, ref.predict(X[:20]), rtol=1e-7)
    weights = reg.attention_weights(X[:20])
    dense = weights.toarray() if hasattr(weights, "toarray") else weights
    assert isinstance(dense, np.ndarray)
    assert_allclose(dense @ y, pred, rtol=1e-9)
    assert np.isfinite(reg.score(X, y))
    parts = bvc_decomposition(reg, X, y, n_resamples=3, random_state=0)
    assert np.isfinite(parts.mse)
    loaded = pickle.loads(pickle.dumps(reg))
    assert isinstance(loaded.components_, np.ndarray)
    # The host sums the blocks in another order: the last bits differ.
    assert_allclose(loaded.predict(X[:20]), pred, rtol=1e-12)


def test_device_cuda_adam_with_repeated_rows_and_dispatch_off(gpu_stand_in):
    """The stochastic solver and the repeated rows' blend through the stand-in:
    float32 in, float32 NumPy out, the copies' index on the device, and the
    same predictions as a NumPy fit."""
    _, dev = gpu_stand_in
    rng = np.random.default_rng(2)
    X = rng.standard_normal((150, 3)).astype(np.float32)
    y = (X[:, 0] + 0.3 * rng.standard_normal(150)).astype(np.float32)
    X, y = np.vstack([X, X[:40]]), np.r_[y, y[:40]]  # 40 records repeated
    params = dict(solver="adam", batch_size=64, max_iter=4, random_state=0)
    with pytest.warns(ConvergenceWarning):
        ref = NWAttentionRegressor(**params).fit(X, y)
    with pytest.warns(ConvergenceWarning):
        reg = NWAttentionRegressor(device="cuda", **params).fit(X, y)
    assert reg.duplicate_weight_ > 0
    assert reg.predictor_.combination.duplicates.rows.device == dev
    pred, std = reg.predict(X[:50], return_std=True)
    assert pred.dtype == np.float32 and isinstance(std, np.ndarray)
    assert_allclose(pred, ref.predict(X[:50]), rtol=1e-4, atol=1e-5)
    weights, rows = reg.attention_weights(X[:50], top_k=5)
    assert isinstance(weights, np.ndarray) and isinstance(rows, np.ndarray)
    loaded = pickle.loads(pickle.dumps(reg))
    assert_allclose(loaded.predict(X[:50]), pred, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cv", [3, None])
def test_head_allocator_on_device_cuda_with_dispatch_off(gpu_stand_in, cv, monkeypatch):
    """The allocator's scores (cross-validated, or leave-one-out without
    refits, here on a subset of rows) and its refit run on the device when
    its estimator has device='cuda'; NumPy in, NumPy out."""
    monkeypatch.setattr("nwensemble._fit.engine.LOO_STATS_ROWS", 100)
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((150, 4)), rng.standard_normal(150)
    est = MultiHeadNWRegressor(device="cuda", max_iter=3, random_state=0)
    alloc = HeadAllocator(estimator=est, budget=4, cv=cv).fit(X, y)
    assert isinstance(alloc.predict(X[:5]), np.ndarray)
    assert np.isfinite(alloc.cv_results_["mean_test_score"]).all()


def test_cupy_input_with_dispatch_off_says_what_to_do(monkeypatch):
    """CuPy refuses scikit-learn's conversion to NumPy, so CuPy input needs
    the dispatch on; the error names the two ways (stand-in: strict input
    taken for CuPy)."""
    xps = pytest.importorskip("array_api_strict")
    import array_api_compat

    monkeypatch.setattr(
        array_api_compat,
        "is_cupy_array",
        lambda a: type(a).__module__.startswith("array_api_strict"),
    )
    X = xps.asarray(np.ones((10, 2)))
    with pytest.raises(ValueError, match="CuPy input needs scikit-learn's array API"):
        NWAttentionRegressor().fit(X, xps.asarray(np.arange(10.0)))


def test_host_threads_map_in_order_and_nest():
    """``map_on_host_threads`` keeps the tasks' order, and a task that maps
    again runs its own tasks rather than waiting on the busy threads."""

    def inner(i):
        return map_on_host_threads(lambda j: 10 * i + j, range(3), xp=np)

    assert map_on_host_threads(inner, range(4), xp=np) == [
        [10 * i + j for j in range(3)] for i in range(4)
    ]


def test_host_threads_take_the_caller_too_and_raise_its_errors():
    """The calling thread takes tasks beside the pool's (on one core it
    takes them all), and a task's error reaches the caller."""

    def name(i):
        time.sleep(0.01)
        return threading.current_thread().name

    assert threading.current_thread().name in map_on_host_threads(name, range(8), xp=np)

    def fails_at_three(i):
        if i == 3:
            raise ValueError("task 3")
        return i

    with pytest.raises(ValueError, match="task 3"):
        map_on_host_threads(fails_at_three, range(6), xp=np)


def test_host_threads_see_the_callers_context_and_configuration():
    """Every task sees the caller's context variables (here
    ``products_on_threads``) and scikit-learn configuration, whichever
    thread takes it: a task computes the same on any of them."""

    def seen(i):
        time.sleep(0.005)
        return _PRODUCT_THREADS.get(), get_config()["working_memory"]

    with products_on_threads(True), config_context(working_memory=77):
        assert set(map_on_host_threads(seen, range(8), xp=np)) == {(True, 77)}
    assert set(map_on_host_threads(seen, range(8), xp=np)) == {
        (None, get_config()["working_memory"])
    }


def test_blas_single_threaded_holds_one_thread_and_restores_it():
    """Within ``blas_single_threaded`` every BLAS library runs on one thread,
    also when an enclosing hold (``fit_threads``) already set it; after it,
    the threads are as before, the outer hold's included."""

    def blas_threads():
        return {
            (lib["filepath"], lib["num_threads"])
            for lib in threadpool_info()
            if lib["user_api"] == "blas"
        }

    before = blas_threads()
    with blas_single_threaded():
        held = blas_threads()
        assert {threads for _, threads in held} == {1}
        with blas_single_threaded():
            assert blas_threads() == held
        assert blas_threads() == held
    assert blas_threads() == before


@pytest.mark.parametrize("blocks_of", ["A", "B"])
def test_fixed_order_products_are_the_same_on_one_thread_and_on_several(blocks_of):
    """Within ``products_on_threads`` a product is taken in blocks fixed by
    its shapes, each on one BLAS thread: the same bits whether the blocks
    run on the host's threads or in turn, the product to rounding, and BLAS's
    own threads restored after; outside, a plain product."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((1500, 1300)).astype(np.float32)
    B = rng.standard_normal((1300, 22)).astype(np.float32)
    if blocks_of == "B":
        A, B = B.T, A.T
    before = threadpool_info()
    results = []
    for threads in (True, False):
        with products_on_threads(threads):
            out = np.empty((A.shape[0], B.shape[1]), dtype=np.float32)
            results.append(fixed_order_matmul(A, B, xp=np, blocks_of=blocks_of))
            results.append(
                fixed_order_matmul(A, B, xp=np, blocks_of=blocks_of, out=out)
            )
            assert results[-1] is out
    assert threadpool_info() == before
    for result in results[1:]:
        assert_array_equal(result, results[0])
    assert_allclose(results[0], A.astype(np.float64) @ B, rtol=1e-4, atol=1e-3)
    assert_array_equal(fixed_order_matmul(A, B, xp=np), A @ B)


def test_host_targets_are_columns_with_their_weights():
    Y, sw = host_targets(np.arange(4), None)
    assert Y.shape == (4, 1) and Y.dtype == np.float64
    assert_array_equal(sw, np.ones(4))
    Y, sw = host_targets(np.ones((3, 2), dtype=np.float32), [1, 2, 3])
    assert Y.shape == (3, 2) and Y.dtype == np.float64
    assert_array_equal(sw, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        host_targets(np.ones(3), [1.0, 2.0])


def test_floating_like_takes_the_shape_and_a_floating_dtype(ns):
    with ns.context():
        ints = ns.asarray(np.arange(3))
        out = floating_like(np.array([[0.5], [1.5], [2.5]]), ints)
        assert out.shape == (3,)
        assert ns.check_output(out).dtype == np.float64
        f32 = ns.asarray(np.ones((3, 1), dtype=np.float32))
        assert ns.check_output(floating_like(np.zeros(3), f32)).dtype == np.float32
