"""The recommendation examples on real data, each run as a real local cluster.

``examples/movielens_mf.py`` (matrix factorization, MovieLens 100K) and
``examples/census_wide_deep.py`` (TF's census wide & deep, UCI Adult) each run through
``psrt-launch --ps 2 --workers 2``: four processes talking TCP on ports the OS hands out,
every one of them checked to be gone by PID afterwards. Each must reach issue 14's quality
target (test RMSE <= 0.95; test accuracy >= 0.83) with few epochs, to stay within the CI
budget. The MovieLens job is also held to the same model trained by a single-process numpy
loop in this test (the example's ``train_numpy``: numpy gather, duplicate-id sum and
Adagrad), which is the reference its RMSE must match within an asynchronous job's spread.

The data sets are read from ``../shared/data/`` beside the repository (or
``$PSRT_DATA_DIR``); without them the end-to-end tests skip, naming what they looked for.
The loaders' own tests use small files written here.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import psrt

ROOT = Path(__file__).resolve().parents[1]
MOVIELENS = ROOT / "examples" / "movielens_mf.py"
CENSUS = ROOT / "examples" / "census_wide_deep.py"
TIMEOUT = 150


def _example(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def movielens():
    return _example(MOVIELENS)


@pytest.fixture(scope="module")
def census():
    return _example(CENSUS)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(psrt.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def launch(script: Path, *args: str) -> str:
    """Runs ``psrt-launch --ps 2 --workers 2 script args`` to the end; returns its stdout
    after checking that it succeeded and that every task it started is gone."""
    cmd = [sys.executable, "-m", "psrt.launch", "--ps", "2", "--workers", "2", str(script),
           *args]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the launcher stops every task it started
        try:
            stdout, stderr = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        raise AssertionError(f"psrt-launch still running after {TIMEOUT} s\n{stdout}\n"
                             f"{stderr}") from None
    assert proc.returncode == 0, stdout + stderr
    pids = [int(p) for p in re.findall(r"\w+?\d+ (?:restarted )?\(pid (\d+)\)", stderr)]
    assert len(pids) == 4, stderr
    assert all(_gone(pid) for pid in pids), pids
    return stdout


def _figure(stdout: str, label: str) -> float:
    found = re.findall(rf"^\[worker0\] {label}: ([0-9.]+)$", stdout, re.MULTILINE)
    assert len(found) == 1, stdout
    return float(found[0])


# ---- MovieLens 100K matrix factorization ---------------------------------------------------

def test_movielens_loader_reads_u_data_and_the_csv(movielens, tmp_path):
    (tmp_path / "u.data").write_text("196\t242\t3\t881250949\n186\t302\t3\t891717742\n"
                                     "22\t377\t1\t878887116\n")
    got = movielens.load_ratings(tmp_path)
    np.testing.assert_array_equal(got, [[196, 242, 3], [186, 302, 3], [22, 377, 1]])
    other = tmp_path / "csv"
    other.mkdir()
    with gzip.open(other / "ratings.csv.gz", "wt") as f:
        f.write("user_id,movie_id,rating,timestamp\n196,242,3,881250949\n943,1682,5,1\n")
    np.testing.assert_array_equal(movielens.load_ratings(other), [[196, 242, 3],
                                                                   [943, 1682, 5]])


def test_movielens_loader_names_what_it_looked_for(movielens, tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        movielens.load_ratings(tmp_path)
    message = str(err.value)
    for name in ("u.data", "ratings.csv.gz", "ratings.csv"):
        assert str(tmp_path / name) in message
    assert "https://files.grouplens.org/datasets/movielens/ml-100k.zip" in message
    (tmp_path / "u.data").write_text("944\t1\t3\t0\n")
    with pytest.raises(ValueError, match=r"\[944, 1, 3\] is outside MovieLens 100K's users "
                                         r"1\.\.943"):
        movielens.load_ratings(tmp_path)


def test_movielens_split_is_the_documented_one(movielens):
    ratings = np.arange(30, dtype=np.int64).reshape(10, 3)
    train, test = movielens.split(ratings, seed=0)
    perm = np.random.default_rng(0).permutation(10)
    np.testing.assert_array_equal(test, ratings[perm[:1]])
    np.testing.assert_array_equal(train, ratings[perm[1:]])


def _skip_without_data(what: str, example, files: str) -> None:
    """Skips, saying where the tests look for ``files`` and how to point them elsewhere
    (the example's own error speaks to its users: it names --data_dir)."""
    dirs = [str(d) for d in example._default_data_dirs()]
    subdir = Path(dirs[-1]).name
    pytest.skip(f"{what} not found in {' or '.join(dirs)}: put {files} in "
                f"$PSRT_DATA_DIR/{subdir} (or ../shared/data/{subdir} beside the repository)")


def test_skips_say_where_to_put_the_data(movielens, census, tmp_path, monkeypatch):
    monkeypatch.setenv("PSRT_DATA_DIR", str(tmp_path))
    for what, example, files in (("MovieLens 100K", movielens, "u.data"),
                                 ("UCI Adult", census, "adult.data and adult.test")):
        with pytest.raises(pytest.skip.Exception) as skipped:
            _skip_without_data(what, example, files)
        message = str(skipped.value)
        assert message.startswith(f"{what} not found in {tmp_path}/"), message
        assert "$PSRT_DATA_DIR/" in message and "--data_dir" not in message, message


def _movielens_data(movielens):
    try:
        return movielens.load_ratings()
    except FileNotFoundError:
        _skip_without_data("MovieLens 100K", movielens, "u.data")


@pytest.mark.slow
def test_movielens_mf_2ps_2workers_reaches_rmse_target(movielens):
    train, test = movielens.split(_movielens_data(movielens), seed=0)
    mu = float(train[:, 2].mean())
    epochs = 5
    steps = int(np.ceil(epochs * len(train) / 1024))
    stdout = launch(MOVIELENS, "--train_epochs", str(epochs))
    rmse = _figure(stdout, "Test RMSE")

    # The references: the same model trained in this process by numpy, and the predictor of
    # the mean rating (RMSE 1.11 on this split).
    tables, _ = movielens.train_numpy(train, steps)
    reference = movielens.rmse(tables, test, mu)
    zeros = movielens.init_tables(32, 0.1)
    mean_only = movielens.rmse([np.zeros_like(t) for t in zeros], test, mu)
    assert rmse <= 0.95, (rmse, reference)
    assert reference <= 0.95, reference
    assert abs(rmse - reference) <= 0.03, (rmse, reference)
    assert rmse < mean_only - 0.15, (rmse, mean_only)


# ---- census wide & deep --------------------------------------------------------------------

ADULT_DATA = ("39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, "
              "Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n"
              "52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, "
              "Wife, White, Female, 15024, 0, 40, United-States, >50K\n\n")
ADULT_TEST = ("|1x3 Cross validator\n"
              "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, "
              "Black, Male, 0, 0, 40, United-States, <=50K.\n"
              "35, Self-emp-inc, 182148, Bachelors, 13, Married-civ-spouse, Exec-managerial, "
              "Husband, White, Male, 0, 0, 60, ?, >50K.\n")


def test_census_loader_reads_the_uci_files(census, tmp_path):
    (tmp_path / "adult.data").write_text(ADULT_DATA)
    (tmp_path / "adult.test").write_text(ADULT_TEST)
    train, test = census.load_census(tmp_path)
    assert train["workclass"].tolist() == ["State-gov", "Self-emp-inc"]
    np.testing.assert_array_equal(train["label"], [0, 1])
    np.testing.assert_array_equal(train["capital_gain"], [2174, 15024])
    assert test["native_country"].tolist() == ["United-States", "?"]
    np.testing.assert_array_equal(test["label"], [0, 1])  # adult.test's "." is dropped


def test_census_loader_names_what_it_looked_for(census, tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        census.load_census(tmp_path)
    message = str(err.value)
    for name in ("adult.data", "adult.test", "adult.csv.gz", "adult.csv"):
        assert str(tmp_path / name) in message
    assert "https://archive.ics.uci.edu/ml/machine-learning-databases/adult" in message
    (tmp_path / "adult.csv").write_text("age,workclass\n" + ADULT_DATA)
    with pytest.raises(ValueError, match="2 rows; expected 48842"):
        census.load_census(tmp_path)


def test_census_features_are_psrts_hashes_in_each_columns_slice(census):
    cols = {"age": np.array([17.0, 18.0, 66.0, 18.0]), "education_num": np.zeros(4),
            "capital_gain": np.array([0.0, 10.0, 0.0, 0.0]), "capital_loss": np.zeros(4),
            "hours_per_week": np.array([40.0, 20.0, 60.0, 40.0]),
            "label": np.array([0, 1, 0, 0], np.float32)}
    for c in ("workclass", "education", "marital_status", "occupation", "relationship"):
        cols[c] = np.array(["a", "b", "a", "b"])
    ids = census.categorical_ids(cols, 10)
    # Each column's ids are psrt's own hashes of the whole column (the example hashes the
    # distinct values only): TF's categorical_column_with_hash_bucket and crossed_column.
    np.testing.assert_array_equal(ids["occupation"],
                                  psrt.string_to_hash_bucket_fast(cols["occupation"], 10))
    assert ids["age_buckets"].tolist() == [0, 1, 10, 1]  # TF's boundaries 18, 25, ..., 65
    np.testing.assert_array_equal(
        ids["age_buckets_x_education_x_occupation"],
        psrt.sparse_cross_hashed([np.array([0, 1, 10, 1]), cols["education"],
                                  cols["occupation"]], 10).values)
    np.testing.assert_array_equal(
        ids["education_x_occupation"],
        psrt.sparse_cross_hashed([cols["education"], cols["occupation"]], 10).values)
    f = census.Features(cols, 10)
    assert f.wide_ids.shape == (4, 8) and f.deep_ids.shape == (4, 5)
    for k, name in enumerate(census.WIDE_COLUMNS):
        np.testing.assert_array_equal(f.wide_ids[:, k], 10 * k + ids[name])
    for k, name in enumerate(census.DEEP_COLUMNS):
        np.testing.assert_array_equal(f.deep_ids[:, k], 10 * k + ids[name])
    np.testing.assert_allclose(f.numeric.mean(axis=0), 0, atol=1e-6)
    np.testing.assert_array_equal(f.numeric[:, 3], 0)  # a constant column: centred only


def test_census_gradients_match_finite_differences(census):
    rng = np.random.default_rng(0)
    batch, dim = 4, 3
    args = [rng.standard_normal((batch, 8, 1)), rng.standard_normal(1),
            rng.standard_normal((batch, 5, dim)), rng.standard_normal((batch, 5)),
            np.array([0.0, 1.0, 1.0, 0.0]),
            rng.standard_normal((5 * dim + 5, 4)), rng.standard_normal(4),
            rng.standard_normal((4, 1)), rng.standard_normal(1)]
    _, grads = census.loss_and_grads(*args)
    eps = 1e-6
    for j, (a, g) in enumerate(zip(args, grads)):
        if g is None:
            continue
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() for x in args]
            minus = [x.copy() for x in args]
            plus[j][idx] += eps
            minus[j][idx] -= eps
            numeric[idx] = (census.loss_and_grads(*plus)[0] -
                            census.loss_and_grads(*minus)[0]) / (2 * eps)
        # float32 sigmoid inside: agreement to ~1e-6 relative.
        np.testing.assert_allclose(g, numeric, rtol=1e-4, atol=1e-5, err_msg=f"argument {j}")


@pytest.mark.slow
def test_census_wide_deep_2ps_2workers_reaches_accuracy_target(census):
    try:
        train, test = census.load_census()
    except FileNotFoundError:
        _skip_without_data("UCI Adult", census, "adult.data and adult.test")
    # The standard split: adult.data's 32,561 rows train, adult.test's 16,281 test.
    assert (len(train["label"]), len(test["label"])) == (32561, 16281)
    assert train["fnlwgt"][0] == "77516" and test["fnlwgt"][0] == "226802"
    stdout = launch(CENSUS, "--train_epochs", "1")
    accuracy = _figure(stdout, "Test accuracy")
    # Issue 14's target; predicting "<=50K" for everyone scores 0.764 on this test set.
    assert accuracy >= 0.83, accuracy
