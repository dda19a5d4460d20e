"""Shared fixtures: array namespaces, data sets."""

import os

# scikit-learn refuses array_api_dispatch without it; `make test` sets it too.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import array_api_compat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from sklearn import config_context  # noqa: E402

from nwensemble._shared.backend import to_numpy  # noqa: E402

# The same examples on every run, so that a CI result can be reproduced;
# HYPOTHESIS_PROFILE=explore searches afresh.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def usable_gpu():
    """CuPy where it can reach a GPU, else None and the reason."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # pragma: no cover - depends on the machine
        return None, f"no usable GPU: {exc}"
    return cupy, None


def skip_without_gpu():
    """CuPy, or skip the test with the reason there is none to use."""
    cupy, reason = usable_gpu()
    if cupy is None:
        pytest.skip(reason)
    return cupy


@pytest.fixture
def cupy_gpu():
    """CuPy on a usable GPU; the test is skipped with a reason elsewhere."""
    return skip_without_gpu()


@pytest.fixture
def no_gpu():
    """Skip the test where a GPU is usable (it checks the error without one)."""
    if usable_gpu()[0] is not None:  # pragma: no cover - depends on the machine
        pytest.skip("a GPU is present")


class Namespace:
    """One array library the suite runs under, with helpers to move data in.

    ``xp`` is the namespace the library itself works with, as
    ``array_api_compat.get_namespace`` gives it: for CuPy its array-API
    wrapper (CuPy's own functions lack ``device=``), so that a test which
    hands ``xp`` to a private function passes what ``fit`` would.
    """

    def __init__(self, name):
        self.name = name
        self.module = name
        if name == "numpy":
            self.xp, self.device = np, None
        elif name == "array_api_strict":
            self.xp = pytest.importorskip("array_api_strict")
            self.device = None
        elif name == "array_api_strict_device1":
            self.xp = pytest.importorskip("array_api_strict")
            self.device = self.xp.Device("device1")
            self.module = "array_api_strict"
        elif name == "cupy":
            cupy = skip_without_gpu()
            self.xp, self.device = array_api_compat.get_namespace(cupy.empty(0)), None

    def asarray(self, a, dtype=None):
        """Move a NumPy array into this namespace."""
        if a is None:
            return None
        a = np.asarray(a, dtype=dtype)
        if self.device is None:
            return self.xp.asarray(a)
        return self.xp.asarray(a, device=self.device)

    def context(self):
        """Array-API dispatch on for every namespace but plain NumPy."""
        return config_context(array_api_dispatch=self.name != "numpy")

    def check_output(self, out):
        """Assert ``out`` is in this namespace (and device); return it as NumPy."""
        if self.name == "numpy":
            assert isinstance(out, np.ndarray)
        else:
            assert type(out).__module__.startswith(self.module), type(out)
            if self.device is not None:
                assert out.device == self.device
        return to_numpy(out)


# array_api_strict's second device catches arrays that silently land on the
# default device (a stand-in for a GPU on machines without one); it checks
# all that the default device does, which therefore runs with the slow tests
# only (``make test``, not ``make test-fast``). CuPy runs the same tests
# where a GPU is present (``pytest -m gpu`` selects them) and skips them with
# a reason elsewhere.
NAMESPACES = [
    "numpy",
    pytest.param("array_api_strict", marks=pytest.mark.slow),
    "array_api_strict_device1",
    pytest.param("cupy", marks=pytest.mark.gpu),
]


@pytest.fixture(params=NAMESPACES)
def ns(request, monkeypatch):
    """Run a test under each array namespace.

    On array_api_strict's second device, arrays refuse ``np.asarray`` as
    CuPy's do, so that a silent conversion to NumPy (a hidden copy to the
    host, an error on a GPU) fails the test; explicit copies (``to_numpy``,
    through DLPack) still work.
    """
    space = Namespace(request.param)
    if request.param == "array_api_strict_device1":
        refuse_numpy_conversion(space.xp, monkeypatch)
    return space


def refuse_numpy_conversion(xps, monkeypatch):
    """Make array_api_strict's arrays refuse ``np.asarray`` as CuPy's do;
    explicit copies (``to_numpy``, through DLPack) still work."""

    def refuse(self, *args, **kwargs):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed (as for CuPy); "
            "copy explicitly."
        )

    monkeypatch.setattr(type(xps.asarray(0.0)), "__array__", refuse)


@pytest.fixture
def friedman():
    """Small Friedman #1 problem: X (200, 6), y."""
    from sklearn.datasets import make_friedman1

    return make_friedman1(n_samples=200, n_features=6, noise=0.5, random_state=0)


@pytest.fixture
def count_read_backs(monkeypatch):
    """Count every value read back from array_api_strict arrays into Python or
    NumPy (``float``, ``bool``, ``int``, DLPack, ``__array__``): on a GPU each
    one waits for the device. Returns the namespace and a dict whose ``"n"``
    holds the count."""
    xps = pytest.importorskip("array_api_strict")
    Array = type(xps.asarray(0.0))
    counts = {"n": 0}

    def counted(method):
        def wrapper(self, *args, **kwargs):
            counts["n"] += 1
            return method(self, *args, **kwargs)

        return wrapper

    names = ("__float__", "__bool__", "__int__", "__index__", "__complex__")
    for name in (*names, "__dlpack__", "__array__"):
        monkeypatch.setattr(Array, name, counted(getattr(Array, name)))
    return xps, counts


@pytest.fixture
def gpu_stand_in(monkeypatch):
    """array_api_strict's second device in CuPy's place for ``device='cuda'``,
    its arrays refusing implicit conversion to NumPy as CuPy's do: what
    ``device='cuda'`` does with NumPy input (scikit-learn's dispatch off) runs
    on machines without a GPU."""
    xps = pytest.importorskip("array_api_strict")
    import nwensemble._shared.backend as backend

    dev = xps.Device("device1")
    monkeypatch.setattr(backend, "gpu_namespace", lambda: (xps, dev))
    refuse_numpy_conversion(xps, monkeypatch)
    return xps, dev
