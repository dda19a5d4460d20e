"""Array namespace and device handling: one code path for NumPy, CuPy and others."""

# Authors: The nwensemble developers
# SPDX-License-Identifier: BSD-3-Clause

import copy

import array_api_compat
import numpy as np
import scipy.sparse
from array_api_compat import numpy as np_compat
from sklearn import get_config
from sklearn.utils.validation import _check_sample_weight


def get_namespace(X):
    """Return the array namespace and device that serve the input ``X``.

    As in scikit-learn, a non-NumPy array (CuPy, ``array_api_strict``) is
    served in its own namespace and on its own device when scikit-learn's
    ``array_api_dispatch`` is on; otherwise the array-API-compatible NumPy
    namespace is used, and scikit-learn's validation converts the input to
    NumPy. CuPy refuses that conversion, so CuPy input with the dispatch off
    raises an error that says what to do instead.

    Parameters
    ----------
    X : array
        The reference input; every other array of a call follows it.

    Returns
    -------
    xp : module
        Array-API-compatible namespace.
    device : object
        Device of ``X`` (``"cpu"`` for NumPy).
    """
    dispatch = get_config()["array_api_dispatch"]
    if array_api_compat.is_cupy_array(X) and not dispatch:
        raise ValueError(
            "CuPy input needs scikit-learn's array API dispatch: set "
            "SCIPY_ARRAY_API=1 in the environment before importing scipy and "
            "scikit-learn, and fit and predict inside "
            "sklearn.config_context(array_api_dispatch=True). Or pass NumPy "
            "arrays with device='cuda', which needs neither."
        )
    if (
        dispatch
        and array_api_compat.is_array_api_obj(X)
        and not array_api_compat.is_numpy_array(X)
    ):
        return namespace_of(X)
    return np_compat, "cpu"


def namespace_of(a):
    """Namespace and device of an array the library made (a fitted array):
    its own, whatever scikit-learn's dispatch flag (NumPy's
    array-API-compatible namespace for NumPy)."""
    if isinstance(a, np.ndarray) or array_api_compat.is_numpy_array(a):
        return np_compat, "cpu"
    return array_api_compat.array_namespace(a), array_api_compat.device(a)


def compute_namespace(where_to, X):
    """Namespace and device that a computation runs in for input ``X``.

    ``where_to`` is an estimator's ``device``: ``'auto'`` follows ``X`` (see
    ``get_namespace``), ``'cpu'`` is NumPy on the host, ``'cuda'`` CuPy on the
    current GPU (an error that says what is missing where there is none).
    """
    if where_to == "auto":
        return get_namespace(X)
    if where_to == "cpu":
        return np_compat, "cpu"
    return gpu_namespace()


def gpu_namespace():
    """CuPy's namespace and the current GPU, for ``device='cuda'``."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, or CUDA's error without a GPU
        raise ValueError(
            "device='cuda' needs CuPy and a CUDA GPU (pip install "
            f"nwensemble[gpu]); here: {type(exc).__name__}: {exc}. Use "
            "device='cpu' or 'auto'."
        ) from exc
    return namespace_of(cupy.empty(0))


def like_input(X):
    """A function that moves results to the namespace and device of ``X``
    (NumPy for lists and frames); the identity where they already are."""
    xp, dev = get_namespace(X)
    target = where(xp.empty(0, device=dev))

    def move(a):
        if a is None or where(a) == target:
            return a
        return move_to(a, xp=xp, device=dev)

    return move


def device(a):
    """Device of an array (``"cpu"`` for NumPy)."""
    return array_api_compat.device(a)


def takes_out(xp):
    """Whether the namespace's ``exp`` and ``matmul`` accept ``out=``.

    NumPy and CuPy do; reusing an (n, n) buffer saves a fresh allocation per
    call, which costs as much as the exp itself at n = 4000.
    """
    return array_api_compat.is_numpy_namespace(
        xp
    ) or array_api_compat.is_cupy_namespace(xp)


def row_major(a, *, xp):
    """``a`` with its rows contiguous (a copy if needed) where the namespace
    lays out memory (NumPy, CuPy); ``a`` itself elsewhere. A product reads
    its operands fastest that way."""
    if takes_out(xp):
        return xp.ascontiguousarray(a)
    return a


def eager_host(xp):
    """Whether ``xp`` computes eagerly on the host (NumPy).

    There a check such as ``bool(xp.any(empty))`` that picks the cheaper path
    costs nothing, and small tiles that stay in a core's cache pay off. A GPU
    queues its work: every value read back waits until the queue has
    drained, and every small operation costs a kernel launch. Elsewhere the
    numerics therefore take the paths that need no check, in large blocks.
    array_api_strict counts as a device here: it stands in for a GPU in the
    tests, so those paths are tested on machines without one.
    """
    return array_api_compat.is_numpy_namespace(xp)


def exp_inplace(A, *, xp):
    """``exp(A)``, overwriting ``A`` where the namespace allows it."""
    return xp.exp(A, out=A) if takes_out(xp) else xp.exp(A)


def maximum_inplace(A, value, *, xp):
    """``maximum(A, value)`` for a Python float, overwriting ``A`` where allowed."""
    if takes_out(xp):
        return xp.maximum(A, value, out=A)
    return xp.where(A >= value, A, xp.full_like(A, value))


def matmul_into(a, b, out, *, xp):
    """``a @ b``, written into ``out`` when given and the namespace allows it."""
    if out is not None and takes_out(xp):
        return xp.matmul(a, b, out=out)
    return a @ b


def itemsize(dtype, *, xp):
    """Bytes per element of a floating ``dtype`` of ``xp`` (the array API's
    dtypes have no ``itemsize``)."""
    return 4 if dtype == xp.float32 else 8


def kth_smallest(a, k, *, xp):
    """``sort(a, axis=1)[:, k]``: by a partition where the namespace has one
    (NumPy, CuPy; linear in the axis, where a sort is n log n; the array
    API standard has none), else by sorting."""
    partition = getattr(xp, "partition", None)
    if partition is not None:
        return partition(a, k, axis=1)[:, k, ...]
    return xp.sort(a, axis=1)[:, k, ...]


def fill_masked(mask, values, other, *, xp):
    """``other`` (n, ...) with its rows where ``mask`` (n,) is true replaced,
    in order, by the rows of ``values`` (one per true entry).

    The array API has no assignment through an integer array; each row
    takes its value through the running count of true entries instead.
    """
    rank = xp.clip(xp.cumulative_sum(xp.astype(mask, xp.int64)) - 1, 0, None)
    taken = xp.take(values, rank, axis=0)
    mask = xp.reshape(mask, mask.shape + (1,) * (taken.ndim - 1))
    return xp.where(mask, taken, other)


def workspace_buffer(workspace, shape, like, *, xp):
    """A reusable buffer of ``shape`` from the ``workspace`` dict, or None.

    None where the namespace cannot write into buffers (then every product
    allocates), or when no workspace is kept.
    """
    if workspace is None or not takes_out(xp):
        return None
    buf = workspace.get("block")
    fits = (
        buf is not None
        and buf.dtype == like.dtype
        and buf.shape[1] == shape[1]
        and buf.shape[0] >= shape[0]
    )
    if not fits:
        buf = xp.empty(shape, dtype=like.dtype, device=device(like))
        workspace["block"] = buf
    return buf[: shape[0], :]


def to_numpy(a):
    """Copy an array of any namespace or device to a NumPy array on the host
    (a scipy.sparse array, as compact kernels' attention weights are, to a
    dense one)."""
    if a is None or isinstance(a, np.ndarray):
        return a
    if scipy.sparse.issparse(a):
        return a.toarray()
    try:
        return np.from_dlpack(a, device="cpu")
    except (TypeError, BufferError, RuntimeError, ValueError):
        return np.asarray(array_api_compat.to_device(a, "cpu"))


def host_weights(sample_weight):
    """Sample weights of any namespace, list or Series as float64 NumPy."""
    if array_api_compat.is_array_api_obj(sample_weight):
        return to_numpy(sample_weight).astype(np.float64)
    return np.asarray(sample_weight, dtype=np.float64)


def host_targets(y, sample_weight):
    """Targets ``y`` of any namespace as float64 NumPy of shape (n, t), and
    their sample weights as float64 NumPy of shape (n,), ones where
    ``sample_weight`` is None (checked by scikit-learn)."""
    Y = to_numpy(y).astype(np.float64)
    Y = Y.reshape(Y.shape[0], -1)
    if sample_weight is None:
        return Y, np.ones(Y.shape[0])
    return Y, _check_sample_weight(host_weights(sample_weight), Y)


def floating_like(values, like):
    """Host ``values`` as an array of ``like``'s namespace, device and
    shape, in its floating dtype (float64 where ``like`` is not floating,
    as an integer target's residuals need)."""
    xp, _ = get_namespace(like)
    dtype = like.dtype if xp.isdtype(like.dtype, "real floating") else xp.float64
    return xp.asarray(np.reshape(values, like.shape), dtype=dtype, device=device(like))


def to_host(value):
    """``value`` with every array in it copied to NumPy on the host.

    Walks lists, tuples, dicts (``Bunch`` included) and the library's own
    helper objects (their attributes), so that a fitted model pickles into
    NumPy arrays only.
    """
    if isinstance(value, np.ndarray) or value is None:
        return value
    if array_api_compat.is_array_api_obj(value):
        return to_numpy(value)
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(v) for v in value)
    if isinstance(value, dict):
        out = copy.copy(value)
        for key, v in value.items():
            out[key] = to_host(v)
        return out
    if type(value).__module__.startswith("nwensemble.") and hasattr(value, "__dict__"):
        out = copy.copy(value)
        # Updated in place: frozen dataclasses refuse attribute assignment.
        vars(out).update(to_host(dict(vars(value))))
        return out
    return value


def move_to(a, *, xp, device):
    """Return ``a`` as an array of namespace ``xp`` on ``device``.

    Used for ``y`` and ``sample_weight`` given in another namespace than ``X``.
    """
    if a is None:
        return None
    if array_api_compat.is_array_api_obj(a) and not isinstance(a, np.ndarray):
        same = array_api_compat.array_namespace(a) is xp
        if same and array_api_compat.device(a) == device:
            return a
        if not same:
            a = to_numpy(a)
        else:
            return array_api_compat.to_device(a, device)
    return xp.asarray(a, device=device)


def same_namespace_or_raise(X, fitted, *, estimator, method):
    """Raise if ``X`` is not in the namespace and device of a fitted array.

    ``fitted`` is a fitted array, or the ``where(array)`` of one. Mixing, for
    example, NumPy queries with a model fitted on GPU arrays would otherwise
    fail deep inside the numerics, or silently copy.
    """
    fit_where = fitted if isinstance(fitted, tuple) else where(fitted)
    x_where = where(X)
    if fit_where == x_where:
        return
    raise ValueError(
        f"Inputs passed to {type(estimator).__name__}.{method}() must use the same "
        "namespace and the same device as those passed to fit(). Fitted on "
        f"{fit_where[0]} ({fit_where[1]}), got {x_where[0]} ({x_where[1]}). Move X "
        "to the namespace and device of fit first."
    )


def where(a):
    """(namespace name, device) of an array; anything NumPy-like is host NumPy."""
    if isinstance(a, np.ndarray) or not array_api_compat.is_array_api_obj(a):
        return "numpy", "cpu"
    if array_api_compat.is_numpy_array(a):
        return "numpy", "cpu"
    return array_api_compat.array_namespace(a).__name__, str(array_api_compat.device(a))
