"""TF1's string ops (tensorflow/python/ops/string_ops.py and parsing_ops.py, r1.15):
``string_split`` and ``string_to_number``.

Strings are numpy object arrays of Python ``bytes`` (psrt's ``tf.string``; str input is
encoded as UTF-8). Neither op has a gradient (TF's have none).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.sparse_tensor import SparseTensor
from psrt.ops.parsing_ops import _in, as_bytes

__all__ = ["string_split", "string_to_number"]


def _split_one(s: bytes, delim: bytes, skip_empty: bool) -> list[bytes]:
    if not delim:
        return [s[i:i + 1] for i in range(len(s))]
    tokens: list[bytes] = []
    start = 0
    for i, c in enumerate(s):
        if c in delim:
            tokens.append(s[start:i])
            start = i + 1
    tokens.append(s[start:])
    return [t for t in tokens if t] if skip_empty else tokens


def _string_split(source: Any, delimiter: Any, *, skip_empty: bool) -> list[np.ndarray]:
    src = np.asarray(source, dtype=object)
    if src.ndim != 1:
        raise _errors.InvalidArgumentError(
            None, None, f"input must be a vector, got shape: {list(src.shape)}")
    delim = as_bytes(np.asarray(delimiter, dtype=object).item())
    rows = [_split_one(as_bytes(s), delim, skip_empty) for s in src]
    idx = [(i, j) for i, r in enumerate(rows) for j in range(len(r))]
    values = np.empty(len(idx), dtype=object)
    values[:] = [t for r in rows for t in r]
    shape = np.asarray([len(rows), max((len(r) for r in rows), default=0)], np.int64)
    return [np.asarray(idx, np.int64).reshape(-1, 2), values, shape]


def string_split(source: Any, sep: Any = None, skip_empty: bool = True,
                 delimiter: Any = None, result_type: str = "SparseTensor",
                 name: str | None = None) -> SparseTensor:
    """Splits each string of a 1-D ``source`` into tokens, as TF1's ``tf.string_split``
    (``StringSplit``: every character of the delimiter splits; an empty delimiter splits
    into single bytes).

    Args:
      source: a 1-D string tensor (or list of strings), N elements.
      sep: the delimiter characters (default " "); ``delimiter`` is TF's deprecated name.
      skip_empty: drop empty tokens (default True).
      result_type: "SparseTensor" (psrt has no RaggedTensor).
      name: the op name (default ``"StringSplit"``).

    Returns:
      A :class:`psrt.SparseTensor`: indices int64 ``[T, 2]`` (row, position), values the
      T string tokens, dense_shape ``[N, longest row]``.

    Raises:
      ValueError: both ``sep`` and ``delimiter`` given, or a ``result_type`` other than
        "SparseTensor". InvalidArgumentError (at run): ``source`` not 1-D.
    """
    if sep is not None and delimiter is not None:
        raise ValueError("Cannot specify both 'sep' and 'delimiter'")
    if result_type != "SparseTensor":
        raise ValueError(f"result_type {result_type!r} is not supported; psrt has only "
                         f"'SparseTensor' (no RaggedTensor)")
    d = sep if sep is not None else delimiter if delimiter is not None else " "
    src = _in(source)
    dl = _in(d)
    outs = _lib.apply_op_outputs("StringSplit", name, [src, dl], _string_split,
                                 [np.int64, object, np.int64], [[None, 2], [None], [2]],
                                 skip_empty=bool(skip_empty))
    return SparseTensor(outs[0], outs[1], outs[2])


_NUMBER_TYPES = ("float32", "float64", "int32", "int64")


def _to_number(needs: Any, x: Any, out_type: np.dtype) -> Any:
    arr = np.asarray(x, dtype=object)
    out = np.empty(arr.shape, out_type)
    for idx, v in np.ndenumerate(arr):
        text = as_bytes(v).decode("utf-8", "replace")
        try:
            if out_type.kind == "i":
                n = int(text.strip(), 10)
                info = np.iinfo(out_type)
                if not info.min <= n <= info.max:
                    raise ValueError(text)
                out[idx] = n
            else:
                out[idx] = float(text)
        except ValueError:
            raise _errors.InvalidArgumentError(
                None, None, f"StringToNumberOp could not correctly convert string: {text}"
            ) from None
    return out, lambda dy: (None,)


def string_to_number(string_tensor: Any, out_type: Any = np.float32,
                     name: str | None = None) -> Any:
    """Each string as a number of ``out_type``, as ``tf.string_to_number``
    (``StringToNumber``; floats as ``strtod`` reads them, "inf"/"nan" included).

    Args:
      string_tensor: a string tensor of any shape.
      out_type: float32 (default), float64, int32 or int64.
      name: the op name (default ``"StringToNumber"``).

    Returns:
      A Tensor of ``out_type`` and the input's shape.

    Raises:
      TypeError: an unsupported ``out_type``. InvalidArgumentError (at run): a string that
        is not a number of that type, or out of its range (TF's message).
    """
    dt = _lib.np_dtype(out_type)
    if dt.name not in _NUMBER_TYPES:
        raise TypeError(f"Value passed to parameter 'out_type' has DataType {dt.name} not in "
                        f"list of allowed values: float32, float64, int32, int64")
    x = _in(string_tensor)
    return _lib.apply_op("StringToNumber", name, [x], _to_number, dt, _lib.static_shape(x),
                         out_type=dt)
