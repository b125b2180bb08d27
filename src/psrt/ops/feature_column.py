"""Feature hashing, crosses and feature columns, as TF1's ``tf.string_to_hash_bucket_fast``,
``tf.string_to_hash_bucket_strong``, ``tf.sparse.cross_hashed``, ``tf.feature_column`` and
``tf.feature_column.input_layer`` / ``linear_model``: enough to write TF's census wide & deep
model without a vocabulary file.

**The hashes.** psrt's bucket of a string is a stable, documented 64-bit hash modulo the
bucket count, the same on every platform, process and run (no per-process salt, unlike
Python's ``hash``):

* fast: `xxHash <https://xxhash.com>`_'s XXH64 (seed 0) of the UTF-8 bytes, from the
  ``xxhash`` package. TF uses FarmHash's Fingerprint64 here, which no light, well-kept
  Python package reproduces, so **psrt's buckets differ from TF's**: a model trained by TF
  cannot be served with psrt's buckets, and vice versa.
* strong: keyed BLAKE2b (Python's ``hashlib``) with a 64-bit digest; the two 64-bit key
  halves are the 16-byte key, little-endian. TF uses SipHash-2-4; both are keyed PRFs, so a
  client cannot choose values that collide without the key.
* crosses: ``h = hash_key`` (default ``0xDECAFCAFFE``, TF's), then for each crossed value in
  key order ``h = mix(h, value_hash)``, where ``mix`` is CityHash's 128-to-64-bit
  ``Hash128to64`` (what TF's ``FingerprintCat64`` is), ``value_hash`` the fast hash of a
  string or the int64 itself (the id of a bucketized column, say); the bucket is
  ``h % num_buckets``. The arithmetic is TF's; only the string hash differs.

**Columns.** A column turns raw features into ids (categorical columns) or floats (numeric
ones). In a graph, :func:`input_layer` and :func:`linear_model` read the features (a dict of
:class:`psrt.Tensor` placeholders, or arrays) and create the weights under the current
variable scope, device and partitioner, as TF's. Each categorical column is looked up with
``safe_embedding_lookup_sparse`` (TF's choice), so only the rows the batch touches cross the
wire and their gradients are row-sparse. Outside a graph, ``column.ids(features)`` gives a
column's ids of a batch of numpy features (a :class:`psrt.SparseTensorValue`).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import tensor as _graph
from psrt.framework.sparse_tensor import SparseTensor, SparseTensorValue
from psrt.ops import embedding_ops as _emb
from psrt.ops import init_ops as _init_ops
from psrt.ops import variable_scope as _vs
from psrt.ops import variables as _variables

_DEFAULT_HASH_KEY = 0xDECAFCAFFE
_K_MUL = np.uint64(0x9DDFEA08EB382D69)
_MASK64 = (1 << 64) - 1


def _xxh64() -> Any:
    try:
        import xxhash  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ImportError("psrt's feature hashing needs the 'xxhash' package: pip install "
                          "xxhash") from e
    return xxhash.xxh64_intdigest


def _as_strings(values: Any) -> np.ndarray:
    """An array of Python str (bytes decoded as UTF-8; other values through ``str``)."""
    arr = np.asarray(values)
    if arr.dtype.kind == "U":
        return arr
    flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in arr.reshape(-1)]
    return np.array(flat, dtype=object).reshape(arr.shape) if flat else arr.astype(str)


def _fingerprints(values: Any) -> np.ndarray:
    """XXH64 (seed 0) of each value's UTF-8 bytes, as uint64, hashing each distinct value
    once."""
    arr = _as_strings(values)
    if arr.size == 0:
        return np.zeros(arr.shape, np.uint64)
    distinct, inverse = np.unique(arr.reshape(-1), return_inverse=True)
    h = _xxh64()
    hashes = np.fromiter((h(str(v).encode("utf-8")) for v in distinct.tolist()), np.uint64,
                         len(distinct))
    return hashes[inverse].reshape(arr.shape)


def _check_buckets(num_buckets: Any, who: str) -> int:
    if not isinstance(num_buckets, (int, np.integer)) or isinstance(num_buckets, bool) or \
            num_buckets < 1:
        raise ValueError(f"{who}: num_buckets must be a positive integer; got {num_buckets!r}")
    return int(num_buckets)


def _graph_or_now(fn: Callable[..., Any], inputs: Sequence[Any], name: str | None,
                  default: str) -> Any:
    """``fn(*inputs)`` now, or a :class:`psrt.Tensor` computing it at each run when an
    input is a Tensor."""
    if any(isinstance(x, _graph.Tensor) for x in inputs):
        out = _graph.py_func(fn, list(inputs), np.int64, name=name or default)
        return out
    return fn(*inputs)


def string_to_hash_bucket_fast(input: Any, num_buckets: int, name: str | None = None) -> Any:
    """Buckets of strings by a fast stable hash, as ``tf.string_to_hash_bucket_fast``:
    ``XXH64(utf8(s)) % num_buckets`` (TF: FarmHash Fingerprint64; see the module docstring).

    Args:
        input: Strings (str, bytes or an array of them, any shape), or a string
            :class:`psrt.Tensor`.
        num_buckets: The number of buckets (int >= 1).
        name: The op name (with a Tensor input).

    Returns:
        int64 array of ``input``'s shape with values in ``[0, num_buckets)``, or a Tensor.

    Raises:
        ValueError: ``num_buckets`` is not a positive integer.
    """
    n = _check_buckets(num_buckets, "string_to_hash_bucket_fast")

    def fn(x: Any) -> np.ndarray:
        return (_fingerprints(x) % np.uint64(n)).astype(np.int64)
    return _graph_or_now(fn, [input], name, "StringToHashBucketFast")


def string_to_hash_bucket_strong(input: Any, num_buckets: int, key: Sequence[int],
                                 name: str | None = None) -> Any:
    """Buckets of strings by a keyed hash, as ``tf.string_to_hash_bucket_strong``:
    ``BLAKE2b-64(utf8(s), key) % num_buckets``, the 16-byte key being ``key[0]`` and
    ``key[1]`` as little-endian uint64 (TF: SipHash-2-4; see the module docstring). Slower
    than :func:`string_to_hash_bucket_fast`; use it when inputs may be chosen to collide.

    Args:
        input: Strings (any shape) or a string :class:`psrt.Tensor`.
        num_buckets: The number of buckets (int >= 1).
        key: Two non-negative ints < 2**64.
        name: The op name (with a Tensor input).

    Returns:
        int64 array of ``input``'s shape with values in ``[0, num_buckets)``, or a Tensor.

    Raises:
        ValueError: ``num_buckets`` is not a positive integer, or ``key`` is not two
            uint64 values ("Key must have 2 elements", as TF).
    """
    n = _check_buckets(num_buckets, "string_to_hash_bucket_strong")
    key = list(key)
    if len(key) != 2 or any(not isinstance(k, (int, np.integer)) or not 0 <= k <= _MASK64
                            for k in key):
        raise ValueError(f"Key must have 2 elements, each an integer in [0, 2**64); got {key}")
    raw_key = int(key[0]).to_bytes(8, "little") + int(key[1]).to_bytes(8, "little")

    def fn(x: Any) -> np.ndarray:
        arr = _as_strings(x)
        flat = arr.reshape(-1)
        out = np.fromiter(
            (int.from_bytes(hashlib.blake2b(str(v).encode("utf-8"), digest_size=8,
                                            key=raw_key).digest(), "little") % n
             for v in flat.tolist()), np.int64, len(flat))
        return out.reshape(arr.shape)
    return _graph_or_now(fn, [input], name, "StringToHashBucketStrong")


def _mix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """CityHash's Hash128to64(low=a, high=b) on uint64 arrays (TF's FingerprintCat64):
    ``x = (a ^ b) * k; x ^= x >> 47; y = (b ^ x) * k; y ^= y >> 47; y *= k``, arithmetic
    modulo 2**64."""
    with np.errstate(over="ignore"):
        x = (a ^ b) * _K_MUL
        x ^= x >> np.uint64(47)
        y = (b ^ x) * _K_MUL
        y ^= y >> np.uint64(47)
        return y * _K_MUL


def _value_hashes(values: np.ndarray) -> np.ndarray:
    """What a cross combines for each value: the fast hash of a string, the int64 itself
    (as uint64) of an integer."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64).view(np.uint64) if values.dtype.kind == "i" else \
            values.astype(np.uint64)
    return _fingerprints(values)


def _rows_of(x: Any) -> list[np.ndarray]:
    """The values of each row: a dense [batch] or [batch, k] array (one list per row), or a
    SparseTensorValue (its values grouped by indices[:, 0])."""
    if isinstance(x, SparseTensor):
        x = SparseTensorValue(*x._components())
    if isinstance(x, SparseTensorValue):
        ind = np.asarray(x.indices, np.int64)
        vals = np.asarray(x.values)
        rows = int(np.asarray(x.dense_shape)[0])
        seg = ind[:, 0] if len(ind) else np.zeros(0, np.int64)
        bounds = np.searchsorted(seg, np.arange(rows + 1))
        return [vals[bounds[i]:bounds[i + 1]] for i in range(rows)]
    arr = np.asarray(x)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return list(arr.reshape(arr.shape[0], -1))


def sparse_cross_hashed(inputs: Sequence[Any], num_buckets: int = 0,
                        hash_key: int | None = None, name: str | None = None
                        ) -> SparseTensorValue:
    """Hashed crosses of features, row by row, as ``tf.sparse.cross_hashed``
    (``tf.sparse_cross_hashed``): for each row, every combination of one value from each
    input (the Cartesian product, in input order), hashed with the cross hash of the module
    docstring, modulo ``num_buckets`` (0: the full int64 hash, as TF).

    Args:
        inputs: Per feature, a dense array [batch] or [batch, k] (strings or ints) or a
            :class:`psrt.SparseTensorValue` / :class:`psrt.SparseTensor` of constants with
            ``dense_shape[0] == batch``.
        num_buckets: Bucket count (int >= 0; 0: no modulo).
        hash_key: The initial hash (int < 2**64), default TF's ``0xDECAFCAFFE``.
        name: Unused (TF compatibility).

    Returns:
        A :class:`psrt.SparseTensorValue` [batch, max crosses per row] of int64 buckets.

    Raises:
        ValueError: inputs disagree on the batch size, or ``num_buckets`` < 0.
    """
    if not isinstance(num_buckets, (int, np.integer)) or num_buckets < 0:
        raise ValueError(f"sparse_cross_hashed: num_buckets must be an integer >= 0; got "
                         f"{num_buckets!r}")
    columns = [_rows_of(x) for x in inputs]
    if not columns:
        raise ValueError("sparse_cross_hashed: needs at least one input")
    batch = len(columns[0])
    if any(len(c) != batch for c in columns):
        raise ValueError(f"sparse_cross_hashed: inputs have batch sizes "
                         f"{[len(c) for c in columns]}; they must agree")
    return _cross(columns, int(num_buckets), _DEFAULT_HASH_KEY if hash_key is None
                  else int(hash_key))


def _cross(columns: list[list[np.ndarray]], num_buckets: int, hash_key: int
           ) -> SparseTensorValue:
    batch = len(columns[0]) if columns else 0
    hashed = [[_value_hashes(np.asarray(r)) if len(r) else np.zeros(0, np.uint64)
               for r in col] for col in columns]
    if all(len(r) == 1 for col in hashed for r in col):
        # One value per feature and row (the usual case): vectorized.
        h = np.full(batch, np.uint64(hash_key & _MASK64))
        for col in hashed:
            h = _mix(h, np.concatenate(col) if batch else np.zeros(0, np.uint64))
        # Without buckets the full hash, as int64 (TF's output type), else its bucket.
        ids = h.view(np.int64) if num_buckets == 0 else \
            (h % np.uint64(num_buckets)).astype(np.int64)
        indices = np.stack([np.arange(batch), np.zeros(batch, np.int64)], axis=1)
        return SparseTensorValue(indices.astype(np.int64), ids, np.array([batch, 1 if batch
                                                                          else 0], np.int64))
    ind: list[tuple[int, int]] = []
    out: list[int] = []
    width = 0
    for i in range(batch):
        n = 0
        for combo in itertools.product(*[col[i].tolist() for col in hashed]):
            h = np.array([hash_key & _MASK64], np.uint64)
            for v in combo:
                h = _mix(h, np.array([v], np.uint64))
            value = int(h[0])
            out.append(value % num_buckets if num_buckets else
                       value - (1 << 64) if value >= 1 << 63 else value)
            ind.append((i, n))
            n += 1
        width = max(width, n)
    indices = np.array(ind, np.int64).reshape(-1, 2)
    return SparseTensorValue(indices, np.array(out, np.int64), np.array([batch, width],
                                                                        np.int64))


def bucketize(input: Any, boundaries: Sequence[float], name: str | None = None) -> Any:
    """The bucket of each value given sorted ``boundaries``, as TF's ``Bucketize`` op
    (``bucketized_column``): 0 below ``boundaries[0]``, ``i`` for ``boundaries[i-1] <= x <
    boundaries[i]``, ``len(boundaries)`` from the last boundary on.

    Args:
        input: Numbers (any shape), or a :class:`psrt.Tensor`.
        boundaries: Sorted list of floats.
        name: The op name (with a Tensor input).

    Returns:
        int64 array of ``input``'s shape (int32 in TF), or a Tensor.

    Raises:
        ValueError: ``boundaries`` not sorted ascending.
    """
    b = _check_boundaries(boundaries)
    return _graph_or_now(lambda x: np.searchsorted(b, np.asarray(x, np.float64),
                                                   side="right").astype(np.int64),
                         [input], name, "Bucketize")


def _check_boundaries(boundaries: Sequence[float]) -> np.ndarray:
    b = np.asarray(list(boundaries), np.float64)
    if b.ndim != 1 or np.any(np.diff(b) <= 0):
        raise ValueError(f"boundaries must be a sorted list of distinct numbers; got "
                         f"{list(boundaries)}")
    return b


# ---- feature columns ------------------------------------------------------------------------

class _Column:
    """Base of the feature columns: ``name`` and the raw feature ``keys`` it reads."""

    name: str
    keys: tuple[str, ...]

    def _inputs(self, features: dict[str, Any]) -> list[Any]:
        missing = [k for k in self.keys if k not in features]
        if missing:
            raise ValueError(f"feature column '{self.name}' needs feature(s) {missing}; the "
                             f"features are {sorted(features)}")
        return [features[k] for k in self.keys]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class NumericColumn(_Column):
    """Real-valued features ``[batch, *shape]`` (see :func:`numeric_column`)."""

    def __init__(self, key: str, shape: tuple[int, ...], default_value: Any, dtype: Any,
                 normalizer_fn: Callable[[Any], Any] | None) -> None:
        self.key = key
        self.name = key
        self.keys = (key,)
        self.shape = shape
        self.default_value = default_value
        self.dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
        self.normalizer_fn = normalizer_fn

    @property
    def variable_shape(self) -> tuple[int, ...]:
        """The shape of one example's value."""
        return self.shape

    def dense(self, values: Any) -> np.ndarray:
        """float ``[batch, prod(shape)]`` of a batch of raw values."""
        arr = np.asarray(values)
        if arr.dtype.kind in "OSU":
            arr = np.where(arr == "", np.nan if self.default_value is None
                           else self.default_value, arr).astype(np.float64)
        x = arr.astype(self.dtype).reshape(arr.shape[0] if arr.ndim else 1, -1)
        if x.shape[1] != math.prod(self.shape):
            raise ValueError(f"numeric column '{self.name}': expected {math.prod(self.shape)} "
                             f"value(s) per example (shape {self.shape}); got {x.shape[1]}")
        if self.normalizer_fn is not None:
            x = np.asarray(self.normalizer_fn(x), self.dtype)
        return x


class _CategoricalColumn(_Column):
    """A column of ids in ``[0, num_buckets)``."""

    num_buckets: int

    def _sparse(self, *values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def ids(self, features: dict[str, Any]) -> SparseTensorValue:
        """The column's ids of a batch of numpy features, as a SparseTensorValue
        [batch, max ids per example]."""
        return SparseTensorValue(*self._sparse(*self._inputs(features)))

    def _sparse_tensor(self, features: dict[str, Any]) -> SparseTensor:
        """The ids as a SparseTensor of the graph (computed at each run from the features'
        tensors), or of constants when no feature is a Tensor."""
        inputs = self._inputs(features)
        if not any(isinstance(x, _graph.Tensor) for x in inputs):
            return SparseTensor(*self._sparse(*inputs))
        ind, ids, shape = _graph.py_func(self._sparse, inputs, [np.int64] * 3,
                                         name=f"{self.name}/ids")
        return SparseTensor(ind, ids, shape)


def _dense_to_sparse(ids: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """[batch, k] ids where ``keep`` as a SparseTensor's arrays (row-major)."""
    batch, k = ids.shape
    rows, cols = np.nonzero(keep)
    return (np.stack([rows, cols], axis=1).astype(np.int64), ids[rows, cols].astype(np.int64),
            np.array([batch, k], np.int64))


class BucketizedColumn(_CategoricalColumn):
    """Buckets of a numeric column (see :func:`bucketized_column`)."""

    def __init__(self, source_column: NumericColumn, boundaries: Sequence[float]) -> None:
        self.source_column = source_column
        self.boundaries = tuple(float(b) for b in _check_boundaries(boundaries))
        self.name = f"{source_column.name}_bucketized"
        self.keys = source_column.keys
        self.num_buckets = (len(self.boundaries) + 1) * math.prod(source_column.shape)

    def dense(self, values: Any) -> np.ndarray:
        """int64 ``[batch, prod(shape)]`` buckets, element ``i`` offset by ``i *
        (len(boundaries) + 1)``, as TF's bucketized column ids."""
        x = self.source_column.dense(values)
        b = np.searchsorted(np.asarray(self.boundaries), x, side="right").astype(np.int64)
        return b + np.arange(x.shape[1], dtype=np.int64) * (len(self.boundaries) + 1)

    def _sparse(self, values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = self.dense(values)
        return _dense_to_sparse(ids, np.ones(ids.shape, bool))


class HashedCategoricalColumn(_CategoricalColumn):
    """Hash buckets of strings or ints (see :func:`categorical_column_with_hash_bucket`)."""

    def __init__(self, key: str, hash_bucket_size: int, dtype: Any) -> None:
        self.key = key
        self.name = key
        self.keys = (key,)
        self.hash_bucket_size = _check_buckets(hash_bucket_size,
                                               "categorical_column_with_hash_bucket")
        self.num_buckets = self.hash_bucket_size
        self.dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))

    def _sparse(self, values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if isinstance(values, (SparseTensorValue, tuple)) and len(values) == 3 and \
                np.ndim(values[0]) == 2:
            ind, vals, shape = (np.asarray(v) for v in values)
            keep = _present(vals)
            ids = (_fingerprints(vals[keep]) % np.uint64(self.num_buckets)).astype(np.int64)
            return ind[keep].astype(np.int64), ids, shape.astype(np.int64)
        arr = np.asarray(values)
        arr = arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, 1)
        ids = (_fingerprints(arr) % np.uint64(self.num_buckets)).astype(np.int64)
        return _dense_to_sparse(ids, _present(arr))


def _present(values: np.ndarray) -> np.ndarray:
    """TF's missing values of a categorical feature: '' for strings, -1 for ints."""
    if values.dtype.kind in "iu":
        return values != -1
    return _as_strings(values) != ""


class CrossedColumn(_CategoricalColumn):
    """Hashed crosses of features (see :func:`crossed_column`)."""

    def __init__(self, keys: Sequence[Any], hash_bucket_size: int,
                 hash_key: int | None) -> None:
        if len(keys) < 2:
            raise ValueError(f"keys must be a list with length > 1; got {list(keys)}")
        self.sources: list[Any] = []
        names = []
        for k in keys:
            if isinstance(k, str):
                self.sources.append(k)
                names.append(k)
            elif isinstance(k, (BucketizedColumn, CrossedColumn)):
                self.sources.append(k)
                names.append(k.name)
            elif isinstance(k, HashedCategoricalColumn):
                raise ValueError(f"crossed_column does not support HashedCategoricalColumn "
                                 f"'{k.name}': give its key '{k.key}' instead (as TF)")
            else:
                raise ValueError(f"Unsupported key type for crossed_column: {k!r}; expected "
                                 f"a feature key (str), a bucketized_column or a "
                                 f"crossed_column")
        self.name = "_X_".join(sorted(names))
        self.keys = tuple(dict.fromkeys(
            key for s in self.sources for key in ((s,) if isinstance(s, str) else s.keys)))
        self.hash_bucket_size = _check_buckets(hash_bucket_size, "crossed_column")
        self.num_buckets = self.hash_bucket_size
        self.hash_key = _DEFAULT_HASH_KEY if hash_key is None else int(hash_key)

    def _sparse(self, *values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        by_key = dict(zip(self.keys, values))
        columns = []
        for s in self.sources:
            if isinstance(s, str):
                raw = by_key[s]
                if isinstance(raw, tuple) and len(raw) == 3:
                    raw = SparseTensorValue(*raw)
                # Missing values ('' or -1) are dropped before crossing, as TF's.
                columns.append([r[_present(r)] for r in _rows_of(raw)])
            else:
                sp = SparseTensorValue(*s._sparse(*[by_key[k] for k in s.keys]))
                columns.append(_rows_of(sp))
        return tuple(_cross(columns, self.num_buckets, self.hash_key))  # type: ignore[return-value]


class EmbeddingColumn(_Column):
    """Dense embeddings of a categorical column (see :func:`embedding_column`)."""

    def __init__(self, categorical_column: _CategoricalColumn, dimension: int, combiner: str,
                 initializer: Any, max_norm: Any, trainable: bool) -> None:
        if not isinstance(categorical_column, _CategoricalColumn):
            raise ValueError(f"embedding_column needs a categorical column; got "
                             f"{categorical_column!r}")
        if not isinstance(dimension, int) or dimension < 1:
            raise ValueError(f"Invalid dimension {dimension!r}.")
        if combiner not in ("mean", "sqrtn", "sum"):
            raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum'; got "
                             f"{combiner!r}")
        self.categorical_column = categorical_column
        self.dimension = dimension
        self.combiner = combiner
        self.initializer = initializer or _init_ops.truncated_normal_initializer(
            mean=0.0, stddev=1.0 / math.sqrt(dimension))
        self.max_norm = max_norm
        self.trainable = trainable
        self.name = f"{categorical_column.name}_embedding"
        self.keys = categorical_column.keys


def numeric_column(key: str, shape: Sequence[int] = (1,), default_value: Any = None,
                   dtype: Any = np.float32, normalizer_fn: Callable[[Any], Any] | None = None
                   ) -> NumericColumn:
    """Real-valued features, as ``tf.feature_column.numeric_column``.

    Args:
        key: The feature's name in the features dict.
        shape: One example's shape (default ``(1,)``).
        default_value: The value of an empty string feature (None: NaN).
        dtype: float32 (default) or float64.
        normalizer_fn: Applied to the ``[batch, prod(shape)]`` values, e.g. ``lambda x:
            (x - mean) / std``.

    Raises:
        ValueError: ``key`` is not a non-empty string or ``shape`` has a dimension < 1.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string; got {key!r}")
    shp = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if any(d < 1 for d in shp):
        raise ValueError(f"shape dimensions must be greater than 0; got {shp}")
    return NumericColumn(key, shp, default_value, dtype, normalizer_fn)


def bucketized_column(source_column: NumericColumn, boundaries: Sequence[float]
                      ) -> BucketizedColumn:
    """Buckets of a numeric column, as ``tf.feature_column.bucketized_column``: value ``x``
    goes to bucket ``i`` with ``boundaries[i-1] <= x < boundaries[i]`` (0 below the first
    boundary, ``len(boundaries)`` from the last on); ``num_buckets`` is ``(len(boundaries) +
    1) * prod(shape)``.

    Raises:
        ValueError: ``source_column`` is not a numeric column, or ``boundaries`` is not
            sorted.
    """
    if not isinstance(source_column, NumericColumn):
        raise ValueError(f"source_column must be a column generated with numeric_column(); "
                         f"got {source_column!r}")
    return BucketizedColumn(source_column, boundaries)


def categorical_column_with_hash_bucket(key: str, hash_bucket_size: int,
                                        dtype: Any = np.str_) -> HashedCategoricalColumn:
    """Ids of string (or int) features by hashing, as
    ``tf.feature_column.categorical_column_with_hash_bucket``: ``id = fast_hash(str(value))
    % hash_bucket_size`` (ints are hashed as their decimal strings, as TF). Missing values
    (``""``, or -1 for ints) give no id.

    Raises:
        ValueError: ``hash_bucket_size`` is not a positive integer.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string; got {key!r}")
    return HashedCategoricalColumn(key, hash_bucket_size, dtype)


def crossed_column(keys: Sequence[Any], hash_bucket_size: int, hash_key: int | None = None
                   ) -> CrossedColumn:
    """Hashed crosses of features, as ``tf.feature_column.crossed_column``: for each
    example, every combination of its values of ``keys`` (raw features by name, or the ids
    of bucketized or crossed columns), hashed as :func:`sparse_cross_hashed` modulo
    ``hash_bucket_size``. Its name is the keys' names sorted and joined by ``"_X_"``.

    Raises:
        ValueError: fewer than 2 keys, a hashed categorical column among them (TF asks for
            its key instead), or ``hash_bucket_size`` is not a positive integer.
    """
    return CrossedColumn(list(keys), hash_bucket_size, hash_key)


def embedding_column(categorical_column: _CategoricalColumn, dimension: int,
                     combiner: str = "mean", initializer: Any = None, ckpt_to_load_from: Any = None,
                     tensor_name_in_ckpt: Any = None, max_norm: Any = None,
                     trainable: bool = True) -> EmbeddingColumn:
    """Dense ``[batch, dimension]`` embeddings of a categorical column, as
    ``tf.feature_column.embedding_column``: the rows of the example's ids in a
    ``[num_buckets, dimension]`` variable created by :func:`input_layer` (named
    ``<scope>/<column>_embedding/embedding_weights``), combined by ``combiner`` (TF's
    default "mean"); initialized by truncated normal with stddev ``1/sqrt(dimension)`` as
    TF's default.

    Raises:
        ValueError: not a categorical column, ``dimension`` < 1, an unknown combiner, or
            ``ckpt_to_load_from``/``tensor_name_in_ckpt`` (not supported: restore with a
            Saver).
    """
    if ckpt_to_load_from is not None or tensor_name_in_ckpt is not None:
        raise ValueError("embedding_column: ckpt_to_load_from is not supported by psrt; "
                         "restore the variable with psrt.train.Saver")
    return EmbeddingColumn(categorical_column, dimension, combiner, initializer, max_norm,
                           trainable)


def _dense_tensor(column: NumericColumn, features: dict[str, Any]) -> Any:
    (x,) = column._inputs(features)
    if isinstance(x, _graph.Tensor):
        t = _graph.py_func(column.dense, [x], column.dtype, name=f"{column.name}/dense")
        t.shape = (None, math.prod(column.shape))
        return t
    return column.dense(x)


def _sorted(columns: Sequence[Any]) -> list[Any]:
    cols = list(columns)
    if not cols:
        raise ValueError("feature_columns must not be empty")
    return sorted(cols, key=lambda c: c.name)   # TF orders columns by name


def _concat(*parts: Any) -> Any:
    import autograd.numpy as anp  # noqa: PLC0415

    return anp.concatenate([anp.reshape(p, (np.shape(p)[0], -1)) for p in parts], axis=1)


def input_layer(features: dict[str, Any], feature_columns: Sequence[Any],
                weight_collections: Any = None, trainable: bool = True,
                cols_to_vars: dict[Any, Any] | None = None) -> _graph.Tensor:
    """The dense input of a network, as ``tf.feature_column.input_layer``: each column's
    ``[batch, n]`` values (numeric columns as they are, embedding columns looked up),
    concatenated in column-name order.

    Variables are created under ``variable_scope("input_layer")`` with ``get_variable``, so
    the current device (e.g. ``replica_device_setter``) and scope partitioner apply. An
    embedding column's rows are looked up by ``safe_embedding_lookup_sparse`` ("div"): only
    the batch's rows are pulled, and trained row-sparse.

    Args:
        features: Feature name -> :class:`psrt.Tensor` (a placeholder fed per run) or array.
        feature_columns: NumericColumn and EmbeddingColumn objects.
        weight_collections, trainable: As TF (``trainable=False`` makes embeddings
            untrainable).
        cols_to_vars: If a dict, filled with column -> list of its variables.

    Returns:
        A float32 :class:`psrt.Tensor` [batch, total width].

    Raises:
        ValueError: no columns, a column of another kind (a categorical column needs an
            embedding_column around it), or a feature a column needs is missing.
    """
    parts = []
    with _vs.variable_scope(None, default_name="input_layer"):
        for col in _sorted(feature_columns):
            if isinstance(col, NumericColumn):
                parts.append(_dense_tensor(col, features))
            elif isinstance(col, EmbeddingColumn):
                with _vs.variable_scope(None, default_name=col.name):
                    weights = _vs.get_variable(
                        "embedding_weights", [col.categorical_column.num_buckets,
                                              col.dimension], np.float32,
                        initializer=col.initializer, trainable=trainable and col.trainable,
                        collections=weight_collections)
                if cols_to_vars is not None:
                    cols_to_vars[col] = list(weights) if isinstance(
                        weights, _variables.PartitionedVariable) else [weights]
                sp = col.categorical_column._sparse_tensor(features)
                parts.append(_emb.safe_embedding_lookup_sparse(
                    weights, sp, None, combiner=col.combiner, max_norm=col.max_norm,
                    name=f"{col.name}/lookup"))
            else:
                raise ValueError(f"input_layer takes numeric and embedding columns; got "
                                 f"{col!r} (wrap a categorical column in embedding_column)")
    out = _graph.py_func(_concat, parts, np.float32, name="input_layer/concat")
    return out


def linear_model(features: dict[str, Any], feature_columns: Sequence[Any], units: int = 1,
                 sparse_combiner: str = "sum", weight_collections: Any = None,
                 trainable: bool = True, cols_to_vars: dict[Any, Any] | None = None
                 ) -> _graph.Tensor:
    """A linear prediction, as ``tf.feature_column.linear_model``: the sum over columns of
    ``x @ weights`` (numeric columns) and of the weights' rows at the example's ids
    (categorical columns: ``safe_embedding_lookup_sparse`` with ``sparse_combiner``,
    default "sum"), plus a bias.

    Variables, under ``variable_scope("linear_model")``: ``<column>/weights``
    ([num_buckets or width, units], zeros) and ``bias_weights`` ([units], zeros), as TF.
    Train the wide part with ``psrt.train.FtrlOptimizer`` as TF's census model does: only the
    rows of the batch's ids are pulled and pushed.

    Args:
        features: Feature name -> :class:`psrt.Tensor` or array.
        feature_columns: Numeric, bucketized, hashed and crossed columns.
        units: Output width (int >= 1).
        sparse_combiner: "sum" (default), "mean" or "sqrtn".
        weight_collections, trainable, cols_to_vars: As TF (``cols_to_vars["bias"]`` holds
            the bias).

    Returns:
        A float32 :class:`psrt.Tensor` [batch, units].

    Raises:
        ValueError: no columns, an embedding column, ``units`` < 1 or an unknown combiner.
    """
    if not isinstance(units, int) or units < 1:
        raise ValueError(f"units must be a positive integer; got {units!r}")
    if sparse_combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"sparse_combiner must be one of 'mean', 'sqrtn' or 'sum'; got "
                         f"{sparse_combiner!r}")
    terms = []
    zeros = _init_ops.zeros_initializer()
    with _vs.variable_scope(None, default_name="linear_model"):
        for col in _sorted(feature_columns):
            if isinstance(col, NumericColumn):
                rows = math.prod(col.shape)
            elif isinstance(col, _CategoricalColumn):
                rows = col.num_buckets
            else:
                raise ValueError(f"linear_model takes numeric and categorical columns; got "
                                 f"{col!r}")
            with _vs.variable_scope(None, default_name=col.name):
                weights = _vs.get_variable(
                    "weights", [rows, units], np.float32, initializer=zeros,
                    trainable=trainable, collections=weight_collections)
            if cols_to_vars is not None:
                cols_to_vars[col] = list(weights) if isinstance(
                    weights, _variables.PartitionedVariable) else [weights]
            if isinstance(col, NumericColumn):
                x = _dense_tensor(col, features)
                terms.append(_graph.py_func(_matmul, [x, weights], np.float32,
                                            name=f"{col.name}/weighted_sum"))
            else:
                terms.append(_emb.safe_embedding_lookup_sparse(
                    weights, col._sparse_tensor(features), None, combiner=sparse_combiner,
                    name=f"{col.name}/weighted_sum"))
        bias = _vs.get_variable("bias_weights", [units], np.float32, initializer=zeros,
                                       trainable=trainable, collections=weight_collections)
        if cols_to_vars is not None:
            cols_to_vars["bias"] = [bias]
    return _graph.py_func(_sum_terms, [bias] + terms, np.float32, name="linear_model/sum")


def _matmul(x: Any, w: Any) -> Any:
    return x @ w


def _sum_terms(bias: Any, *terms: Any) -> Any:
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total + bias
