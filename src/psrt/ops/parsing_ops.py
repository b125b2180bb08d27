"""TF1's parsing ops (tensorflow/python/ops/parsing_ops.py, r1.15): ``tf.train.Example``
protos to tensors (``parse_example``, ``parse_single_example``,
``parse_single_sequence_example`` with ``FixedLenFeature``, ``VarLenFeature``,
``FixedLenSequenceFeature``), ``decode_raw`` and ``decode_csv``.

Strings are numpy object arrays of Python ``bytes`` (a ``str`` given as input is encoded as
UTF-8), psrt's ``tf.string``. Each op is one graph node computed once per run; a
``VarLenFeature`` comes back as a :class:`psrt.SparseTensor` of three of its outputs. The
kernels' behaviour and error messages follow TF's (tensorflow/core/util/example_proto_fast_
parsing.cc, core/kernels/decode_raw_op.cc, decode_csv_op.cc). None of these ops has a
gradient (TF's have none).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.example_protos import Example, SequenceExample
from psrt.framework.sparse_tensor import SparseTensor
from psrt.framework.tensor import Tensor

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "decode_csv",
           "decode_raw", "parse_example", "parse_single_example",
           "parse_single_sequence_example"]


def _in(x: Any) -> Any:
    if _lib.is_graph_value(x):
        return x
    return constant(_as_strings(x))


def as_bytes(v: Any) -> bytes:
    """A string element as bytes (``str`` as UTF-8, numpy bytes/str as their value)."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (np.bytes_, np.str_)):
        return as_bytes(v.item())
    raise TypeError(f"expected a string (bytes or str); got {type(v).__name__} {v!r}")


def _as_strings(x: Any) -> np.ndarray:
    """``x`` (a string, a nested list of them, a numpy array) as an object array of bytes."""
    arr = np.asarray(x, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        out[idx] = as_bytes(v)
    return out


# ---- feature specifications ------------------------------------------------------------------


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values, parsed to a :class:`psrt.SparseTensor`, as
    ``tf.VarLenFeature``. ``dtype``: ``tf.float32``, ``tf.int64`` or ``tf.string``."""

    __slots__ = ()


class FixedLenFeature(collections.namedtuple(
        "FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature of a fixed number of values, parsed to a dense tensor of ``shape``, as
    ``tf.FixedLenFeature``. ``default_value`` (None: the feature is required) is used for
    an example without the feature; it must reshape to ``shape``."""

    __slots__ = ()

    def __new__(cls, shape: Any, dtype: Any, default_value: Any = None) -> FixedLenFeature:
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A feature whose values are a sequence of items of ``shape``, parsed to a dense
    tensor ``[length] + shape``, as ``tf.FixedLenSequenceFeature``. In ``parse_example``
    (``allow_missing=True`` required there) batches are padded with ``default_value``
    (a scalar; None: 0 or b"")."""

    __slots__ = ()

    def __new__(cls, shape: Any, dtype: Any, allow_missing: bool = False,
                default_value: Any = None) -> FixedLenSequenceFeature:
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


_KINDS = {np.dtype(np.float32): "float_list", np.dtype(np.int64): "int64_list",
          np.dtype(object): "bytes_list"}
_TYPE_NAMES = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}


def _kind(dtype: Any, key: str) -> tuple[np.dtype, str]:
    dt = _lib.np_dtype(dtype)
    if dt.kind in "SU":
        dt = np.dtype(object)
    if dt not in _KINDS:
        raise ValueError(f"Unsupported dtype {dt.name} for feature '{key}'; expected "
                         f"float32, int64 or string")
    return dt, _KINDS[dt]


def _shape(shape: Any, key: str) -> list[int | None]:
    if shape is None:
        raise ValueError(f"Missing shape for feature {key}.")
    return [None if d is None else int(d) for d in np.asarray(shape, dtype=object).reshape(-1)
            ] if not isinstance(shape, (list, tuple)) else \
        [None if d is None else int(d) for d in shape]


class _Dense:
    """One dense output: a FixedLenFeature or a FixedLenSequenceFeature."""

    def __init__(self, key: str, spec: Any, batch: bool) -> None:
        self.key = key
        self.dtype, self.kind = _kind(spec.dtype, key)
        self.sequence = isinstance(spec, FixedLenSequenceFeature)
        shape = _shape(spec.shape, key)
        if any(d is None or d < 0 for d in shape):
            raise ValueError(f"All dimensions of shape for feature {key} need to be known "
                             f"but received {shape}.")
        self.shape = [int(d) for d in shape]
        self.size = int(np.prod(self.shape, dtype=np.int64))
        if self.sequence:
            if batch and not spec.allow_missing:
                raise ValueError(f"Unsupported: FixedLenSequenceFeature requires "
                                 f"allow_missing to be True (feature {key}).")
            self.allow_missing = bool(spec.allow_missing)
            pad = spec.default_value
            self.default = (np.asarray(b"" if self.kind == "bytes_list" else 0, self.dtype)
                            if pad is None else _np_value(pad, self.dtype, [], key))
        else:
            self.default = (None if spec.default_value is None
                            else _np_value(spec.default_value, self.dtype, self.shape, key))

    def static(self, batch: int | None, is_batch: bool) -> list[int | None]:
        """The output's static shape: [batch] for parse_example, [None] for a sequence
        feature's steps, then the feature's shape."""
        lead: list[int | None] = [None] if self.sequence else []
        return ([batch] if is_batch else []) + lead + self.shape


def _np_value(v: Any, dtype: np.dtype, shape: list[int], key: str) -> np.ndarray:
    arr = _as_strings(v) if dtype == object else np.asarray(v, dtype)
    try:
        return arr.reshape(shape)
    except ValueError:
        raise ValueError(f"default_value of feature {key} has {arr.size} values; it must "
                         f"reshape to shape {shape}") from None


def _values(feature: Any, kind: str) -> Any:
    """The feature's repeated values (protobuf's container: ``len`` and ``np.array`` read it
    without a Python list)."""
    return getattr(feature, kind).value


def _check_kind(feature: Any, kind: str, key: str, name: str, index: int) -> bool:
    """False for a feature with no kind set (TF treats it as empty); raises for a kind
    other than the expected one."""
    have = feature.WhichOneof("kind")
    if have is None:
        return False
    if have != kind:
        raise _errors.InvalidArgumentError(
            None, None, f"Name: {name}, Key: {key}, Index: {index}.  Data types don't match. "
            f"Data type: {_TYPE_NAMES[have]} but expected type: {_TYPE_NAMES[kind]}")
    return True


def _array(vals: Any, dtype: np.dtype) -> np.ndarray:
    if dtype == object:
        out = np.empty(len(vals), dtype=object)
        out[:] = list(vals)
        return out
    return np.array(vals, dtype)


def _parse_proto(cls: Any, s: Any, name: str) -> Any:
    data = as_bytes(s)
    try:
        return cls.FromString(data)
    except Exception:  # noqa: BLE001 (protobuf's DecodeError and its relatives)
        raise _errors.InvalidArgumentError(
            None, None, f"Could not parse example input, value: '{data[:64]!r}' "
            f"(name: {name})") from None


def _dense_values(feature_map: Any, d: _Dense, name: str, index: int) -> np.ndarray:
    """The value of one dense feature in one example (a sequence: [length] + shape)."""
    feat = feature_map.get(d.key) if d.key in feature_map else None
    present = feat is not None and _check_kind(feat, d.kind, d.key, name, index)
    if d.sequence:
        vals = _values(feat, d.kind) if present else []
        if feat is None and not d.allow_missing:
            raise _errors.InvalidArgumentError(
                None, None, f"Name: {name}, Feature list '{d.key}' is required but could "
                f"not be found.  Did you mean to include it in feature_list_dense_missing_"
                f"assumed_empty or feature_list_dense_defaults?")
        if d.size == 0 or len(vals) % d.size:
            if vals or d.size == 0:
                raise _errors.InvalidArgumentError(
                    None, None, f"Name: {name}, Key: {d.key}, Index: {index}.  Number of "
                    f"{_TYPE_NAMES[d.kind]} values is not a multiple of stride length. "
                    f"Saw {len(vals)} values but output shape is: "
                    f"[?,{','.join(str(k) for k in d.shape)}]")
        n = len(vals) // d.size if d.size else 0
        return _array(vals, d.dtype).reshape([n] + d.shape)
    if not present:
        if d.default is None:
            raise _errors.InvalidArgumentError(
                None, None, f"Name: {name}, Feature: {d.key} (data type: "
                f"{_TYPE_NAMES[d.kind]}) is required but could not be found.")
        return d.default
    vals = _values(feat, d.kind)
    if len(vals) != d.size:
        raise _errors.InvalidArgumentError(
            None, None, f"Name: {name}, Key: {d.key}, Index: {index}.  Number of "
            f"{_TYPE_NAMES[d.kind]} values != expected.  Values size: {len(vals)} but output "
            f"shape: {d.shape}")
    return _array(vals, d.dtype).reshape(d.shape)


def _sparse_values(feature_map: Any, key: str, kind: str, name: str, index: int) -> Any:
    if key not in feature_map:
        return []
    feat = feature_map[key]
    return _values(feat, kind) if _check_kind(feat, kind, key, name, index) else []


def _stack_dense(d: _Dense, per_example: list[np.ndarray]) -> np.ndarray:
    if not d.sequence:
        if not per_example:
            return np.zeros([0] + d.shape, d.dtype) if d.dtype != object else \
                np.empty([0] + d.shape, object)
        return np.stack(per_example).astype(d.dtype)
    longest = max((len(v) for v in per_example), default=0)
    out = np.empty([len(per_example), longest] + d.shape, d.dtype)
    out[...] = d.default
    for i, v in enumerate(per_example):
        out[i, :len(v)] = v
    return out


def _sparse_batch(lists: list[list[Any]], dtype: np.dtype) -> list[np.ndarray]:
    """indices [N, 2], values [N], dense_shape [2] of per-example value lists."""
    counts = np.array([len(v) for v in lists], np.int64)
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    indices = np.stack([rows, np.arange(len(rows), dtype=np.int64) - starts], axis=1)
    if dtype == object:
        flat = _array([v for vals in lists for v in vals], dtype)
    else:
        flat = (np.concatenate([_array(v, dtype) for v in lists]) if len(rows)
                else np.zeros(0, dtype))
    shape = np.asarray([len(lists), counts.max() if len(lists) else 0], np.int64)
    return [indices.reshape(-1, 2), flat, shape]


class _Spec:
    """A features dict split as TF's ``_features_to_raw_params``: sparse keys, dense keys,
    in sorted order."""

    def __init__(self, features: Any, batch: bool, what: str = "features") -> None:
        if not features and what == "features":
            raise ValueError("Missing: features was empty.")
        self.sparse: list[tuple[str, np.dtype, str]] = []
        self.dense: list[_Dense] = []
        for key in sorted(features or {}):
            spec = features[key]
            if isinstance(spec, VarLenFeature):
                dt, kind = _kind(spec.dtype, key)
                self.sparse.append((key, dt, kind))
            elif isinstance(spec, (FixedLenFeature, FixedLenSequenceFeature)):
                self.dense.append(_Dense(key, spec, batch))
            else:
                raise ValueError(f"Invalid feature {key}:{spec!r}; expected VarLenFeature, "
                                 f"FixedLenFeature or FixedLenSequenceFeature")

    def dtypes(self) -> list[np.dtype]:
        """The op's output dtypes: (int64 indices, values, int64 dense_shape) per sparse
        feature, then one per dense feature."""
        out: list[np.dtype] = []
        for _, dt, _ in self.sparse:
            out += [np.dtype(np.int64), dt, np.dtype(np.int64)]
        return out + [d.dtype for d in self.dense]

    def shapes(self, batch: int | None, is_batch: bool, rank: int) -> list[Any]:
        """The static shapes of :meth:`dtypes`' outputs (``rank``: a sparse feature's
        dense rank)."""
        out: list[Any] = []
        for _ in self.sparse:
            out += [[None, rank], [None], [rank]]
        return out + [d.static(batch, is_batch) for d in self.dense]

    def wrap(self, outs: list[Tensor]) -> dict[str, Any]:
        """The parse op's flat outputs as TF's result dict: a SparseTensor per VarLenFeature
        (indices, values, dense_shape), a Tensor per FixedLenFeature, by feature key."""
        result: dict[str, Any] = {}
        k = 0
        for key, _, _ in self.sparse:
            result[key] = SparseTensor(outs[k], outs[k + 1], outs[k + 2])
            k += 3
        for d in self.dense:
            result[d.key] = outs[k]
            k += 1
        return result


def _parse_batch(serialized: Any, names: Any, spec: _Spec) -> list[np.ndarray]:
    ser = np.asarray(serialized, dtype=object)
    if ser.ndim != 1:
        raise _errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a vector, got shape: {list(ser.shape)}")
    nm = None if names is None else np.asarray(names, dtype=object).reshape(-1)
    examples = [_parse_proto(Example, s, "<unknown>" if nm is None else str(nm[i]))
                for i, s in enumerate(ser)]
    label = ["<unknown>" if nm is None else as_bytes(nm[i]).decode("utf-8", "replace")
             for i in range(len(examples))]
    out: list[np.ndarray] = []
    for key, dt, kind in spec.sparse:
        lists = [_sparse_values(ex.features.feature, key, kind, label[i], i)
                 for i, ex in enumerate(examples)]
        out += _sparse_batch(lists, dt)
    for d in spec.dense:
        if not d.sequence and d.dtype != object:
            out.append(_dense_batch(examples, d, label))
            continue
        out.append(_stack_dense(d, [_dense_values(ex.features.feature, d, label[i], i)
                                    for i, ex in enumerate(examples)]))
    return out


def _dense_batch(examples: list[Any], d: _Dense, label: list[str]) -> np.ndarray:
    """A numeric FixedLenFeature of every example, written row by row into one array (the
    batch's fast path: no per-example array; one value read as a scalar), with
    :func:`_dense_values`' checks and errors."""
    out = np.empty((len(examples), d.size), d.dtype)
    for i, ex in enumerate(examples):
        fm = ex.features.feature
        feat = fm[d.key] if d.key in fm else None
        if feat is None or not _check_kind(feat, d.kind, d.key, label[i], i):
            out[i] = _dense_values(fm, d, label[i], i).reshape(-1)  # default, or its error
            continue
        vals = _values(feat, d.kind)
        if len(vals) != d.size:
            _dense_values(fm, d, label[i], i)  # raises TF's error
        if d.size == 1:
            out[i, 0] = vals[0]
        else:
            out[i] = vals
    return out.reshape([len(examples)] + d.shape)


def _parse_example_kernel(serialized: Any, *names: Any, spec: _Spec) -> list[np.ndarray]:
    return _parse_batch(serialized, names[0] if names else None, spec)


def parse_example(serialized: Any, features: Any, name: str | None = None,
                  example_names: Any = None) -> dict[str, Any]:
    """Parses a batch of serialized ``tf.train.Example`` protos, as ``tf.parse_example``.

    Args:
      serialized: a 1-D string tensor (object array of bytes, or a list of bytes): B
        serialized Examples.
      features: dict of feature key to ``FixedLenFeature``, ``VarLenFeature`` or
        ``FixedLenSequenceFeature`` (``allow_missing=True``).
      name: the op name (default ``"ParseExample"``).
      example_names: optional 1-D strings naming the examples in error messages.

    Returns:
      dict of key to a dense Tensor (``[B] + shape``; a sequence feature ``[B, longest] +
      shape``, padded with its default) or a :class:`psrt.SparseTensor` (``VarLenFeature``:
      indices int64 ``[N, 2]`` of (example, position), values ``[N]``, dense_shape
      ``[B, longest]``). float32 / int64 / string (object) as declared.

    Raises:
      ValueError: empty ``features``, an unsupported dtype or spec, a default that does not
        reshape to its shape (at build time).
      InvalidArgumentError (at run): an input that is not an Example, a required feature
        missing, a count of values other than the shape's, a type other than declared
        (TF's messages, naming the example and the key).
    """
    spec = _Spec(features, batch=True)
    ser = _in(serialized)
    inputs = [ser] if example_names is None else [ser, _in(example_names)]
    s = _lib.static_shape(ser)
    b = s[0].value if s.ndims == 1 else None
    outs = _lib.apply_op_outputs("ParseExample", name, inputs, _parse_example_kernel,
                                 spec.dtypes(), spec.shapes(b, True, 2), spec=spec)
    return spec.wrap(outs)


def _parse_single_kernel(serialized: Any, *names: Any, spec: _Spec) -> list[np.ndarray]:
    ser = np.asarray(serialized, dtype=object)
    if ser.ndim != 0:
        raise _errors.InvalidArgumentError(
            None, None, f"Expected serialized to be a scalar, got shape: {list(ser.shape)}")
    batch = _parse_batch(ser.reshape(1), names[0] if names else None, spec)
    out: list[np.ndarray] = []
    k = 0
    for _ in spec.sparse:
        ind, val, shp = batch[k:k + 3]
        out += [ind[:, 1:], val, shp[1:]]
        k += 3
    for v in batch[k:]:
        out.append(v[0])
    return out


def parse_single_example(serialized: Any, features: Any, name: str | None = None,
                         example_names: Any = None) -> dict[str, Any]:
    """Parses one serialized ``tf.train.Example``, as ``tf.parse_single_example``.

    Args:
      serialized: a scalar string (bytes, or a scalar string tensor: e.g. a reader's value).
      features: dict of key to ``FixedLenFeature``, ``VarLenFeature`` or
        ``FixedLenSequenceFeature``.
      name: the op name (default ``"ParseSingleExample"``).
      example_names: optional scalar string naming the example in error messages.

    Returns:
      dict of key to a dense Tensor of the feature's shape (a sequence feature:
      ``[length] + shape``) or a :class:`psrt.SparseTensor` with indices int64 ``[N, 1]``,
      values ``[N]`` and dense_shape ``[N]``.

    Raises:
      As :func:`parse_example`.
    """
    spec = _Spec(features, batch=False)
    ser = _in(serialized)
    inputs = [ser] if example_names is None else [ser, _in(example_names)]
    outs = _lib.apply_op_outputs("ParseSingleExample", name, inputs, _parse_single_kernel,
                                 spec.dtypes(), spec.shapes(None, False, 1), spec=spec)
    return spec.wrap(outs)


def _parse_sequence_kernel(serialized: Any, *names: Any, context: _Spec,
                           sequence: _Spec) -> list[np.ndarray]:
    label = "<unknown>" if not names else as_bytes(np.asarray(names[0], object).item()
                                                   ).decode("utf-8", "replace")
    ex = _parse_proto(SequenceExample, np.asarray(serialized, object).item(), label)
    out: list[np.ndarray] = []
    ctx = ex.context.feature
    for key, dt, kind in context.sparse:
        vals = _sparse_values(ctx, key, kind, label, 0)
        out += [np.arange(len(vals), dtype=np.int64).reshape(-1, 1), _array(vals, dt),
                np.asarray([len(vals)], np.int64)]
    for d in context.dense:
        out.append(_dense_values(ctx, d, label, 0))
    lists = ex.feature_lists.feature_list
    for key, dt, kind in sequence.sparse:
        steps = [] if key not in lists else [
            _values(f, kind) if _check_kind(f, kind, key, label, t) else []
            for t, f in enumerate(lists[key].feature)]
        out += _sparse_batch(steps, dt)
    for d in sequence.dense:
        if key_missing := d.key not in lists:
            if not d.allow_missing:
                raise _errors.InvalidArgumentError(
                    None, None, f"Name: {label}, Feature list '{d.key}' is required but "
                    f"could not be found.  Did you mean to include it in "
                    f"feature_list_dense_missing_assumed_empty or "
                    f"feature_list_dense_defaults?")
        steps = [] if key_missing else list(lists[d.key].feature)
        rows = []
        for t, f in enumerate(steps):
            vals = _values(f, d.kind) if _check_kind(f, d.kind, d.key, label, t) else []
            if len(vals) != d.size:
                raise _errors.InvalidArgumentError(
                    None, None, f"Name: {label}, Key: {d.key}, Index: {t}.  Number of "
                    f"{_TYPE_NAMES[d.kind]} values != expected.  values size: {len(vals)} "
                    f"but output shape: {d.shape}")
            rows.append(_array(vals, d.dtype).reshape(d.shape))
        out.append(np.stack(rows).astype(d.dtype) if rows else
                   np.empty([0] + d.shape, d.dtype))
    return out


def parse_single_sequence_example(serialized: Any, context_features: Any = None,
                                  sequence_features: Any = None, example_name: Any = None,
                                  name: str | None = None) -> tuple[dict[str, Any],
                                                                    dict[str, Any]]:
    """Parses one serialized ``tf.train.SequenceExample``, as
    ``tf.parse_single_sequence_example``.

    Args:
      serialized: a scalar string.
      context_features: dict of key to ``FixedLenFeature`` / ``VarLenFeature`` for the
        context.
      sequence_features: dict of key to ``FixedLenSequenceFeature`` (dense ``[T] + shape``)
        or ``VarLenFeature`` (a SparseTensor ``[T, longest]``) for the feature lists.
      example_name: optional scalar string naming the example in error messages.
      name: the op name (default ``"ParseSingleSequenceExample"``).

    Returns:
      ``(context dict, feature_list dict)``.

    Raises:
      ValueError: neither features dict given. InvalidArgumentError (at run) as
      :func:`parse_example`.
    """
    if not context_features and not sequence_features:
        raise ValueError("Missing features.")
    context = _Spec(context_features, batch=False, what="context")
    sequence = _Spec(sequence_features, batch=False, what="sequence")
    for d in sequence.dense:
        if not d.sequence:
            raise ValueError(f"sequence feature {d.key} must be a FixedLenSequenceFeature or "
                             f"VarLenFeature; got FixedLenFeature")
    ser = _in(serialized)
    inputs = [ser] if example_name is None else [ser, _in(example_name)]
    outs = _lib.apply_op_outputs(
        "ParseSingleSequenceExample", name, inputs, _parse_sequence_kernel,
        context.dtypes() + sequence.dtypes(),
        context.shapes(None, False, 1) + sequence.shapes(None, False, 2),
        context=context, sequence=sequence)
    n = len(context.dtypes())
    return context.wrap(outs[:n]), sequence.wrap(outs[n:])


# ---- decode_raw ------------------------------------------------------------------------------

_RAW_TYPES = ("float16", "float32", "float64", "int32", "uint16", "uint8", "int16", "int8",
              "int64")


def _decode_raw(needs: Any, data: Any, out_type: np.dtype, little_endian: bool) -> Any:
    arr = np.asarray(data, dtype=object)
    size = out_type.itemsize
    flat = [as_bytes(v) for v in arr.reshape(-1)]
    if not flat:
        return np.zeros(arr.shape + (0,), out_type), lambda dy: (None,)
    n = len(flat[0])
    if n % size:
        raise _errors.InvalidArgumentError(
            None, None, f"Input to DecodeRaw has length {n} that is not a multiple of "
            f"{size}, the size of {out_type.name}")
    for i, v in enumerate(flat):
        if len(v) != n:
            raise _errors.InvalidArgumentError(
                None, None, f"DecodeRaw requires input strings to all be the same size, but "
                f"element {i} has size {n} != {len(v)}")
    dt = out_type.newbyteorder("<" if little_endian else ">")
    out = np.frombuffer(b"".join(flat), dt).astype(out_type).reshape(arr.shape + (n // size,))
    return out, lambda dy: (None,)


def decode_raw(input_bytes: Any = None, out_type: Any = None, little_endian: bool = True,
               name: str | None = None, bytes: Any = None) -> Tensor:
    """Reinterprets the bytes of each string as numbers of ``out_type``, as
    ``tf.decode_raw`` (r1.15; ``bytes`` is its deprecated name for ``input_bytes``).

    Args:
      input_bytes: a string tensor of any shape; all strings the same length.
      out_type: float16, float32, float64, int32, uint16, uint8, int16, int8 or int64.
      little_endian: the byte order of the input (default True).
      name: the op name (default ``"DecodeRaw"``).

    Returns:
      A Tensor of ``out_type``, of shape ``input_bytes.shape + [length / itemsize]``.

    Raises:
      ValueError: both or neither of ``input_bytes`` and ``bytes``.
      TypeError: an unsupported ``out_type``.
      InvalidArgumentError (at run): strings of different lengths, or a length not a
        multiple of the item size (TF's messages).
    """
    if (input_bytes is None) == (bytes is None):
        raise ValueError("decode_raw takes exactly one of input_bytes and bytes (its "
                         "deprecated name)")
    data = _in(input_bytes if input_bytes is not None else bytes)
    dt = _lib.np_dtype(out_type)
    if dt.name not in _RAW_TYPES:
        raise TypeError(f"Value passed to parameter 'out_type' has DataType {dt.name} not in "
                        f"list of allowed values: {', '.join(_RAW_TYPES)}")
    s = _lib.static_shape(data)
    shape = None if s.ndims is None else s.as_list() + [None]
    return _lib.apply_op("DecodeRaw", name, [data], _decode_raw, dt, shape, out_type=dt,
                         little_endian=bool(little_endian))


# ---- decode_csv ------------------------------------------------------------------------------

_CSV_TYPES = ("float32", "float64", "int32", "int64", "object")


def _split_csv(rec: str, delim: str, quote: bool, index: int) -> list[str]:
    """The fields of one record, as TF's DecodeCSVOp::ExtractFields (quotes: a field that
    starts with '"' runs to the matching '"', with '""' an escaped quote)."""
    fields: list[str] = []
    i, n = 0, len(rec)
    while True:
        if quote and i < n and rec[i] == '"':
            buf = []
            i += 1
            while True:
                if i >= n:
                    raise _errors.InvalidArgumentError(
                        None, None, f"Quoted field has to end with quote followed by delim "
                        f"or end: record {index}")
                if rec[i] == '"':
                    if i + 1 < n and rec[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(rec[i])
                i += 1
            if i < n and rec[i] != delim:
                raise _errors.InvalidArgumentError(
                    None, None, f"Quote inside a string has to be escaped by another quote: "
                    f"record {index}")
            fields.append("".join(buf))
        else:
            j = rec.find(delim, i)
            end = n if j < 0 else j
            field = rec[i:end]
            if quote and ('"' in field or "\n" in field or "\r" in field):
                raise _errors.InvalidArgumentError(
                    None, None, f"Unquoted fields cannot have quotes/CRLFs inside: record "
                    f"{index}")
            fields.append(field)
            i = end
        if i >= n:
            return fields
        i += 1  # the delimiter
        if i == n:
            fields.append("")
            return fields


_CSV_NAMES = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64"}


def _convert_field(text: str, dt: np.dtype, col: int, rec: int) -> Any:
    try:
        if dt.kind == "i":
            v = int(text.strip(), 10)
            info = np.iinfo(dt)
            if not info.min <= v <= info.max:
                raise ValueError(text)
            return v
        return float(text)
    except ValueError:
        raise _errors.InvalidArgumentError(
            None, None, f"Field {col} in record {rec} is not a valid {_CSV_NAMES[dt.name]}: "
            f"{text}"
        ) from None


def _decode_csv(records: Any, *defaults: Any, dtypes: list[np.dtype], field_delim: str,
                use_quote_delim: bool, na_value: str, select_cols: list[int] | None
                ) -> list[np.ndarray]:
    recs = np.asarray(records, dtype=object)
    outs = [np.empty(recs.shape, dt) for dt in dtypes]
    wanted = select_cols if select_cols is not None else list(range(len(dtypes)))
    for r, (idx, v) in enumerate(np.ndenumerate(recs)):
        text = as_bytes(v).decode("utf-8")
        fields = _split_csv(text, field_delim, use_quote_delim, r)
        if select_cols is None and len(fields) != len(dtypes):
            raise _errors.InvalidArgumentError(
                None, None, f"Expect {len(dtypes)} fields but have {len(fields)} in record {r}")
        if select_cols is not None and len(fields) <= wanted[-1]:
            raise _errors.InvalidArgumentError(
                None, None, f"Expect {len(wanted)} fields but have "
                f"{sum(1 for c in wanted if c < len(fields))} in record {r}")
        for k, col in enumerate(wanted):
            field = fields[col]
            if field == "" or field == na_value:
                d = np.asarray(defaults[k], dtype=object).reshape(-1)
                if d.size == 0:
                    raise _errors.InvalidArgumentError(
                        None, None, f"Field {k} is required but missing in record {r}!")
                outs[k][idx] = as_bytes(d[0]) if dtypes[k] == object else d[0]
            elif dtypes[k] == object:
                outs[k][idx] = field.encode("utf-8")
            else:
                outs[k][idx] = _convert_field(field, dtypes[k], k, r)
    return outs


def decode_csv(records: Any, record_defaults: Any, field_delim: str = ",",
               use_quote_delim: bool = True, name: str | None = None, na_value: str = "",
               select_cols: Any = None) -> list[Tensor]:
    """Converts CSV records to tensors, one per column, as ``tf.decode_csv`` (RFC 4180
    quoting; TF's ``DecodeCSV`` kernel).

    Args:
      records: a string tensor of any shape; each element one CSV line.
      record_defaults: one entry per column: ``[value]`` (its dtype gives the column's:
        float -> float32, int -> int32, str/bytes -> string; a typed numpy value or a
        constant Tensor keeps its dtype) used for an empty field, or ``[]`` for a required
        float32 column (an empty Python list is float32, as TF's ``convert_to_tensor``).
        Types: float32, float64, int32, int64, string.
      field_delim: the one-character delimiter (default ",").
      use_quote_delim: treat double quotes as RFC 4180 quoting (default True); False: quotes
        are ordinary characters.
      name: the op name (default ``"DecodeCSV"``).
      na_value: a field equal to it is treated as missing (its default is used).
      select_cols: optional sorted column indices to keep; ``record_defaults`` then has one
        entry per selected column.

    Returns:
      A list of Tensors, each of ``records``' shape, one per column.

    Raises:
      ValueError: a ``field_delim`` not of one character, a bad ``select_cols`` or a
        record_defaults entry of more than one value (at build).
      TypeError: an unsupported column type.
      InvalidArgumentError (at run): a record with another number of fields, an empty
        required field, a field that does not convert (TF's messages, naming field and
        record).
    """
    if not isinstance(field_delim, str) or len(field_delim) != 1:
        raise ValueError(f"field_delim should be only 1 char; got {field_delim!r}")
    cols = None
    if select_cols is not None:
        cols = [int(c) for c in select_cols]
        if any(b <= a for a, b in zip(cols, cols[1:])):
            raise ValueError(f"select_cols is not strictly increasing: {cols}")
        if any(c < 0 for c in cols):
            raise ValueError(f"select_cols contains negative values: {cols}")
        if len(cols) != len(record_defaults):
            raise ValueError(f"Length of select_cols and record_defaults do not match: "
                             f"{len(cols)} and {len(record_defaults)}")
    dtypes: list[np.dtype] = []
    defaults: list[Any] = []
    for i, d in enumerate(record_defaults):
        if _lib.is_graph_value(d):
            dt = _lib.static_dtype(d)
            const = _lib.constant_value(d)
            if const is None:
                raise ValueError(f"record_defaults[{i}] must be a constant; got {d!r}")
            d = const
        else:
            dt = _lib.python_value_dtype(d if not (isinstance(d, (list, tuple)) and not d)
                                         else np.zeros(0, np.float32))
        dt = np.dtype(object) if dt is None or dt.kind in "SUO" else np.dtype(dt)
        if dt.name not in _CSV_TYPES:
            raise TypeError(f"record_defaults[{i}] has DataType {dt.name} not in list of "
                            f"allowed values: float32, float64, int32, int64, string")
        arr = np.asarray(d, dtype=object)
        if arr.ndim > 1:
            raise ValueError(f"Shape must be at most rank 1 but is rank {arr.ndim} "
                             f"(record_defaults[{i}])")
        arr = arr.reshape(-1)
        if arr.size > 1:
            raise ValueError(f"record_defaults[{i}] must have at most one element; got "
                             f"{arr.size}")
        dtypes.append(dt)
        defaults.append(arr)
    recs = _in(records)
    shape = _lib.static_shape(recs)
    return _lib.apply_op_outputs(
        "DecodeCSV", name, [recs] + defaults, _decode_csv, dtypes, [shape] * len(dtypes),
        dtypes=dtypes, field_delim=field_delim, use_quote_delim=bool(use_quote_delim),
        na_value=na_value, select_cols=cols)


