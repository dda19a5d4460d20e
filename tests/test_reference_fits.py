"""Behaviour kept through refactoring: every case of ``reference_fits.py``
refitted and compared with the outputs recorded before issue 16's restructure.

Tolerances, relative to each array's largest entry: 1e-5 in float32; 1e-9
in float64, where the recording was made with NumPy's exp and the fits now
run the compiled one (``_shared/numba_kernels.py``), which differs from it by up
to an ulp per weight: through the optimiser's iterations that moved the
outputs by at most 5e-12. A change of algorithm moves them by far more.

The same tolerances hold on every x86 CPU: the float32 cases' starting
scales are searched in float64 (``_fit/start.py``), so that the BLAS
kernel a CPU selects (AVX-512, AVX2, AVX) and the vector width numba
compiles for change their outputs by rounding only, not by another start.
``test_a_float32_ulp_in_the_start_fails_the_comparison`` keeps the
comparison sharp enough to see a change of that size."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import reference_fits  # noqa: E402

RECORDED = np.load(reference_fits.PATH)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", sorted(reference_fits.CASES))
def test_outputs_match_the_recording(name):
    mismatches = _mismatches(name)
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", ["nwa_softmax", "nwa_softmax_f32"])
def test_a_float32_ulp_in_the_start_fails_the_comparison(name, monkeypatch):
    # Every starting scale one float32 ulp larger: a change at the scale of
    # the rounding that the tolerances allow across CPUs must still show.
    from nwensemble._fit import start

    monkeypatch.setattr(start, "_SCALE_GRID", start._SCALE_GRID * (1 + 2.0**-23))
    assert _mismatches(name)


def _mismatches(name):
    """The outputs of case ``name`` that differ from the recording by more
    than its tolerance, as messages."""
    rtol = _tolerance(*reference_fits.CASES[name][1:])
    outputs = reference_fits.outputs(name)
    recorded = {
        key.split("/", 1)[1]: RECORDED[key]
        for key in RECORDED.files
        if key.startswith(name + "/")
    }
    assert sorted(outputs) == sorted(recorded)
    mismatches = []
    for key, value in outputs.items():
        expected = recorded[key]
        # Relative to the array's largest entry: entries near zero (weights
        # of far rows) carry the rounding of their larger neighbours.
        scale = max(float(np.max(np.abs(expected), initial=0.0)), 1e-300)
        try:
            np.testing.assert_allclose(
                value, expected, rtol=0, atol=rtol * scale, err_msg=f"{name}: {key}"
            )
        except AssertionError as error:
            mismatches.append(str(error))
    return mismatches


def _tolerance(params, dtype):
    """Relative tolerance of a case's outputs across CPUs, whose exp paths
    round differently: float64 keeps all but its last digits; float32 fits
    agree to a few ulps, and a local-linear readout, whose slope divides
    float32 sums of the keys' second moments by their local covariance,
    amplifies that by up to about 20."""
    if dtype == "float64":
        return 1e-9
    return 1e-4 if params.get("local_fit") == "linear" else 1e-5
