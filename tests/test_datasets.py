"""fetch_regression_benchmark: local folder first, clear errors otherwise."""

import os

import numpy as np
import pytest

from nwensemble.datasets import BENCHMARK_NAMES, fetch_regression_benchmark

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
needs_shared = pytest.mark.skipif(
    not os.path.isdir(SHARED), reason="../shared/data not present"
)

EXPECTED_SHAPES = {
    "abalone": (4177, 10),
    "airfoil_self_noise": (1503, 5),
    "auto_mpg": (392, 7),
    "concrete": (1030, 8),
    "energy_heating": (768, 8),
    "wine_quality_red": (1599, 11),
    "yacht_hydrodynamics": (308, 6),
}


@needs_shared
@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_loads_every_set_from_the_shared_folder(name):
    bunch = fetch_regression_benchmark(name, data_home=SHARED)
    assert bunch.data.shape == EXPECTED_SHAPES[name]
    assert bunch.target.shape == (EXPECTED_SHAPES[name][0],)
    assert len(bunch.feature_names) == bunch.data.shape[1]
    assert bunch.source.endswith(f"{name}.csv")
    assert np.all(np.isfinite(bunch.data))


@needs_shared
def test_environment_variable_and_frame(monkeypatch):
    monkeypatch.setenv("NWENSEMBLE_DATA", SHARED)
    X, y = fetch_regression_benchmark("concrete", as_frame=True, return_X_y=True)
    assert list(X.columns)[0] == "cement" and X.shape == (1030, 8)
    assert y.name == "target"


def test_unknown_name():
    with pytest.raises(ValueError, match="Unknown benchmark set 'iris'"):
        fetch_regression_benchmark("iris")


def test_offline_without_local_copy_says_how(tmp_path, monkeypatch):
    """No file and no network: the error names the folder and the fix."""
    import sklearn.datasets

    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(sklearn.datasets, "fetch_openml", offline)
    with pytest.raises(OSError, match="NWENSEMBLE_DATA") as info:
        fetch_regression_benchmark("concrete", data_home=tmp_path)
    assert str(tmp_path) in str(info.value)


def test_malformed_csv_is_refused(tmp_path):
    (tmp_path / "yacht_hydrodynamics.csv").write_text("a,b,target\n1,x,3\n")
    with pytest.raises(ValueError, match="not a numeric CSV"):
        fetch_regression_benchmark("yacht_hydrodynamics", data_home=tmp_path)
