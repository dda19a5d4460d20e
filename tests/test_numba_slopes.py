"""The feature slopes' compiled map and gradient against the array-API path."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from nwensemble._fit.feature_slopes import FeatureSlopes, identity_slopes
from nwensemble._shared import numba_kernels, numba_slopes

pytestmark = pytest.mark.skipif(
    not numba_kernels.available(), reason="the compiled kernels are off"
)


def _slopes(N, bins, rng, *, repeat_knot=False):
    """Slopes at the quantile knots of ``N``, with one knot repeated (a bin
    of width zero, as a discrete feature gives) when asked."""
    sw = np.full(N.shape[0], 1.0 / N.shape[0])
    identity = identity_slopes(N, sw, xp=np)
    low, width = identity.low, identity.width
    if bins != low.shape[1]:
        knots = np.quantile(N, np.linspace(0, 1, bins + 1), axis=0).T
        low, width = knots[:, :-1], np.diff(knots, axis=1)
    if repeat_knot:
        low = low.copy()
        width = width.copy()
        low[0, 2] = low[0, 1]
        width[0, 1] = 0.0
        width[0, 2] = low[0, 3] - low[0, 2]
    slope = np.exp(rng.uniform(-1, 1, low.shape))
    return FeatureSlopes(*(a.astype(N.dtype) for a in (low, width, slope)))


def _values(N, slopes, rng):
    """Rows of ``N``, values beyond the knots both ways, values on every
    knot, and a missing value."""
    p = N.shape[1]
    knots = slopes.low.T  # (bins, p): each bin's first knot, a row per bin
    wide = 5 * rng.standard_normal((20, p))
    Q = np.vstack([N, wide, knots]).astype(N.dtype)
    Q[3, 1] = np.nan
    return Q


def _generic(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(numba_kernels, "ENABLED", False)
        assert not numba_slopes.compiled(np, np.zeros(1))
        return fn()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "bins, repeat_knot", [(8, False), (8, True), (2, False), (64, False)]
)
def test_the_map_and_its_gradient_match_the_array_path(
    monkeypatch, dtype, bins, repeat_knot
):
    rng = np.random.default_rng(bins)
    N = rng.standard_normal((300, 4)).astype(dtype)
    slopes = _slopes(N, bins, rng, repeat_knot=repeat_knot)
    Q = _values(N, slopes, rng)
    dN = rng.standard_normal(Q.shape).astype(dtype)
    dN[3, 1] = 0.0  # the missing value's row carries no gradient
    Qf = np.where(np.isnan(Q), 0.0, Q).astype(dtype)
    assert numba_slopes.compiled(np, Q, slopes.low, slopes.width, slopes.slope)
    mapped, sums = slopes.apply(Q), slopes.ramp_sums(Qf, dN)
    expected = _generic(monkeypatch, lambda: slopes.apply(Q))
    expected_sums = _generic(monkeypatch, lambda: slopes.ramp_sums(Qf, dN))
    assert mapped.dtype == sums.dtype == dtype
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    assert np.isnan(mapped[3, 1]) and np.isnan(expected[3, 1])
    scale = np.nanmax(np.abs(expected))
    assert_allclose(mapped, expected, rtol=rtol, atol=rtol * scale)
    assert_allclose(sums, expected_sums, rtol=rtol, atol=rtol * np.abs(sums).max())


def test_the_ramp_sums_are_the_maps_derivative_in_its_slopes():
    """The map is linear in its slopes: ``sum(dN * apply(N))`` moves by the
    ramp sums' entry when one slope moves by one."""
    rng = np.random.default_rng(3)
    N = rng.standard_normal((200, 3))
    slopes = _slopes(N, 8, rng)
    Q = _values(N, slopes, rng)[5:]  # no missing value
    dN = rng.standard_normal(Q.shape)
    sums = slopes.ramp_sums(Q, dN)
    for j, b in [(0, 0), (1, 3), (2, 7)]:
        step = np.zeros_like(slopes.slope)
        step[j, b] = 1.0
        moved = slopes.with_slope(slopes.slope + step)
        change = np.sum(dN * (moved.apply(Q) - slopes.apply(Q)))
        assert_allclose(change, sums[j, b], rtol=1e-10)


def test_mixed_dtypes_and_other_namespaces_take_the_array_path():
    x32, x64 = np.zeros((2, 2), np.float32), np.zeros((2, 2))
    assert numba_slopes.compiled(np, x64, x64)
    assert not numba_slopes.compiled(np, x32, x64)
    xp = pytest.importorskip("array_api_strict")
    assert not numba_slopes.compiled(xp, xp.asarray(x64))
