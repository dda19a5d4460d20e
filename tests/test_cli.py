"""The command line demo."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from nwensemble._cli import main

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


@pytest.mark.slow
def test_demo_prints_rmse_next_to_knn():
    """`nwensemble demo` prints CV RMSE for the models, the HDI and the BVC."""
    out = io.StringIO()
    assert main(["demo", "--cv", "2"], out=out) == 0
    text = out.getvalue()
    assert "diabetes" in text and "k-NN" in text and "NWAttentionRegressor" in text
    assert "MultiHeadNW (4 heads)" in text and "HeadAllocator()" in text
    assert "ResidualStageRegressor()" in text.split("Which to start with")[0]
    assert "Which to start with on a new table: ResidualStageRegressor()" in text
    # The advice follows the table above it: the lowest RMSE is named.
    assert "Lowest RMSE on this table: " in text
    assert "components_ shape (4, 3, 10)" in text  # floor(log(442 / 10))
    assert "head diversity index (HDI): 0." in text
    assert "= bias2 " in text and "(1-1/H) covariance" in text


def test_the_demo_names_the_lowest_rmse_and_the_start_against_it():
    from nwensemble._cli import _on_this_table

    start = "ResidualStageRegressor()"
    assert _on_this_table({start: 1.0, "k-NN": 2.0}).endswith(f": {start}.")
    text = _on_this_table({start: 56.36, "k-NN (tuned k, weights)": 56.35})
    assert text.startswith("Lowest RMSE on this table: k-NN (tuned k, weights);")
    assert f"{start} is 1.000x its RMSE here" in text
    assert _on_this_table({"k-NN": 2.0, "NW": 1.0}) == (
        "Lowest RMSE on this table: NW."
    )


def test_a_semicolon_separated_csv_gets_a_hint(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("a;b;target\n1,5;x;2\n2,5;y;3\n")
    with pytest.raises(SystemExit, match="separated by ';'"):
        main(["demo", "--csv", str(path)], out=io.StringIO())


def test_demo_on_csv(tmp_path):
    """--csv takes a numeric CSV with the target last."""
    rng = np.random.default_rng(0)
    data = np.column_stack([rng.standard_normal((80, 3)), rng.standard_normal(80)])
    path = tmp_path / "d.csv"
    np.savetxt(path, data, delimiter=",", header="a,b,c,target", comments="")
    out = io.StringIO()
    args = ["demo", "--csv", str(path), "--cv", "2", "--head-dim", "2"]
    main(args + ["--n-heads", "3"], out=out)
    assert "80 samples x 3 features" in out.getvalue()
    assert "shape (3, 2, 3)" in out.getvalue()  # floor(log(80 / 10))


def test_demo_rejects_a_column_of_numbers_and_text(tmp_path):
    """A cell of text in a column of numbers stops with the column's name and
    the line it is on (counting the header as line 1)."""
    path = tmp_path / "bad.csv"
    path.write_text(
        "a,hp,target\n" + "".join(f"{i},{i},1\n" for i in range(9)) + "9,?,1\n"
    )
    with pytest.raises(
        SystemExit, match=r"line 11: column 'hp' holds numbers and also text \('\?'\)"
    ):
        main(["demo", "--csv", str(path)])
    path.write_text("a,target\n1,2\n2,\n")
    with pytest.raises(SystemExit, match="line 3: the target column 'target' is empty"):
        main(["demo", "--csv", str(path)])


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    return X, X[:, 0] + 0.1 * rng.standard_normal(n)


def test_demo_reads_a_file_without_header(tmp_path):
    """A first line of numbers is data: all rows are kept and the user is
    told how the columns are named."""
    X, y = _rows(30)
    path = tmp_path / "noheader.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",")
    out = io.StringIO()
    main(["demo", "--csv", str(path), "--cv", "2"], out=out)
    text = out.getvalue()
    assert "30 samples x 2 features" in text
    assert "no header row" in text and "x0..x1" in text


@pytest.mark.slow
def test_demo_drops_a_saved_index_column(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = _rows(30, seed=1)
    path = tmp_path / "indexed.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "target": y}).to_csv(path)
    out = io.StringIO()
    main(["demo", "--csv", str(path), "--cv", "2"], out=out)
    text = out.getvalue()
    assert "30 samples x 2 features" in text
    assert "a saved index, not a feature" in text


@pytest.mark.slow
def test_demo_reads_text_columns_and_empty_cells(tmp_path):
    rng = np.random.default_rng(2)
    lines = ["hp,origin,target"]
    for i in range(40):
        hp = "" if i % 7 == 3 else f"{rng.uniform(50, 200):.1f}"
        origin = ["usa", "japan", "europe"][i % 3] if i % 11 else ""
        lines.append(f"{hp},{origin},{rng.uniform(10, 40):.1f}")
    path = tmp_path / "mixed.csv"
    path.write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    assert main(["demo", "--csv", str(path), "--cv", "2"], out=out) == 0
    text = out.getvalue()
    assert "categorical features: origin" in text
    assert "empty (or NA) cells are read as missing values" in text
    assert "k-NN (tuned k, weights)" in text


@pytest.mark.parametrize("rows, cv", [(3, 5), (6, 5), (5, 2)])
def test_demo_rejects_too_few_rows_for_the_folds(tmp_path, rows, cv):
    """Too few rows for the folds: a message with the rows needed, not a
    traceback from inside scikit-learn."""
    path = tmp_path / "few.csv"
    path.write_text("a,b,target\n" + "".join(f"{i},{i % 3},{i}\n" for i in range(rows)))
    with pytest.raises(SystemExit, match=f"has {rows} rows; --cv {cv} needs at least"):
        main(["demo", "--csv", str(path), "--cv", str(cv)])


@pytest.mark.slow
def test_demo_runs_on_the_fewest_rows_it_accepts(tmp_path):
    path = tmp_path / "seven.csv"
    path.write_text("a,b,target\n" + "".join(f"{i},{i % 3},{i}\n" for i in range(7)))
    out = io.StringIO()
    assert main(["demo", "--csv", str(path)], out=out) == 0
    assert "7 samples" in out.getvalue()


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(SHARED), reason="../shared/data not present")
def test_module_entry_point_on_real_csv():
    """`python -m nwensemble demo --csv` runs on a real data set."""
    path = os.path.join(SHARED, "yacht_hydrodynamics.csv")
    res = subprocess.run(
        [sys.executable, "-m", "nwensemble", "demo", "--csv", path, "--cv", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "308 samples x 6 features" in res.stdout


@pytest.mark.slow
def test_demo_saves_plots(tmp_path):
    """--plot writes a PNG with the HDI and BVC figures."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "out.png"
    out = io.StringIO()
    main(["demo", "--cv", "2", "--plot", str(path)], out=out)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"saved to {path}" in out.getvalue()


@pytest.mark.slow
def test_demo_on_the_gpu_stand_in(gpu_stand_in):
    """--device cuda runs the NW models through device='cuda' (here on the
    stand-in device) and says so."""
    out = io.StringIO()
    assert main(["demo", "--cv", "2", "--device", "cuda"], out=out) == 0
    text = out.getvalue()
    assert "device='cuda'" in text and "head diversity index (HDI): 0." in text


def test_demo_device_cuda_without_a_gpu_says_so(no_gpu):
    with pytest.raises(SystemExit, match="needs CuPy and a CUDA GPU"):
        main(["demo", "--cv", "2", "--device", "cuda"], out=io.StringIO())


def test_demo_on_a_text_target_fits_classifiers(tmp_path):
    """A target column of text is class labels: the demo says so and
    cross-validates the classifiers by log-loss."""
    rng = np.random.default_rng(3)
    lines = ["size,colour,kind"]
    for i in range(60):
        size = rng.normal()
        colour = ["red", "blue"][i % 2] if i % 9 else ""
        kind = "big" if size + (colour == "red") > 0.5 else "small"
        lines.append(f"{size:.3f},{colour},{kind}")
    path = tmp_path / "kinds.csv"
    path.write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    assert main(["demo", "--csv", str(path), "--cv", "2"], out=out) == 0
    text = out.getvalue()
    assert "The target column 'kind' holds text: its 2 distinct values" in text
    assert "classification: 2 classes in the target column" in text
    assert "NWAttentionClassifier" in text and "log-loss" in text
    assert "Lowest log-loss on this table: " in text
    assert "Which to start with on a new classification table" in text
    assert "Brier score's bias-variance-covariance" in text


def test_demo_refuses_a_class_too_rare_for_the_folds(tmp_path):
    lines = ["a,kind"] + [f"{i},{'x' if i else 'y'}" for i in range(20)]
    path = tmp_path / "rare.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit, match="class 'y' of .* has 1 rows; stratified"):
        main(["demo", "--csv", str(path), "--cv", "3"], out=io.StringIO())


def test_a_missing_label_is_refused(tmp_path):
    path = tmp_path / "na.csv"
    path.write_text("a,kind\n1,x\n2,NA\n")
    with pytest.raises(SystemExit, match="line 3: the target column 'kind' holds 'NA'"):
        main(["demo", "--csv", str(path)], out=io.StringIO())
