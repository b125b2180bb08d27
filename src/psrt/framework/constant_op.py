"""Constants, as tensorflow/python/framework/constant_op.py (r1.15): ``tf.constant`` and
``tf.convert_to_tensor``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.tensor import Tensor
from psrt.framework.ops import VariableBase


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const",
             verify_shape: bool = False) -> Tensor:
    """A tensor of a value fixed when the graph is built, as ``tf.constant``.

    Args:
        value: A Python or numpy value (scalar or nested lists). Python floats become
            float32 and ints int32, as TF's; numpy values keep their dtype.
        dtype: The element type; the value is converted to it.
        shape: The shape: a scalar ``value`` is broadcast to it; a value of as many
            elements is reshaped to it.
        name: The op name (default ``"Const"``).
        verify_shape: True: ``value``'s shape must equal ``shape``.

    Returns:
        A :class:`psrt.Tensor` of static, fully defined shape.

    Raises:
        TypeError: ``value`` cannot be converted to ``dtype``, or ``verify_shape`` and the
            shapes differ (TF's message).
        ValueError: ``value`` has too many elements for ``shape``.
    """
    dt = _lib.python_value_dtype(value) if dtype is None else _lib.np_dtype(dtype)
    try:
        arr = np.array(value, dtype=dt)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Expected {_dtypes.as_dtype(dt).name}, got {value!r} of type "
                        f"'{type(value).__name__}' instead ({e}).") from None
    if dt.kind == "O":   # tf.string: bytes, as TF's
        arr = np.vectorize(lambda v: v.encode() if isinstance(v, str) else v,
                           otypes=[object])(arr) if arr.size else arr
    if dt.kind in "iu" and np.asarray(value).dtype.kind == "f" and \
            not np.array_equal(arr, np.asarray(value)):
        raise TypeError(f"Expected {_dtypes.as_dtype(dt).name}, got {value!r} of type "
                        f"'{type(value).__name__}' instead.")
    if shape is not None:
        shp = tuple(int(d) for d in (shape if isinstance(shape, (list, tuple)) else [shape]))
        if verify_shape and arr.shape != shp:
            raise TypeError(f"Expected Tensor's shape: {shp}, got {arr.shape}.")
        if arr.size == 1:
            arr = np.full(shp, arr.reshape(()), dt)
        elif arr.size == int(np.prod(shp)):
            arr = arr.reshape(shp)
        else:
            raise ValueError(f"Too many elements provided. Needed at most "
                             f"{int(np.prod(shp))}, but received {arr.size}"
                             if arr.size > int(np.prod(shp)) else
                             f"Cannot reshape a value of {arr.size} elements to shape {shp}")
    arr.setflags(write=False)
    return _lib.apply_op("Const", name, [], _ConstKernel(arr), dt, arr.shape)


class _ConstKernel:
    __slots__ = ("value",)

    def __init__(self, value: np.ndarray) -> None:
        self.value = value

    def __call__(self, needs: Any) -> Any:
        return self.value, lambda dy: ()


def convert_to_tensor(value: Any, dtype: Any = None, name: str | None = None,
                      preferred_dtype: Any = None, dtype_hint: Any = None) -> Any:
    """``value`` as a graph value, as ``tf.convert_to_tensor``: a Tensor stays itself, a
    Variable stays itself (it reads as its value wherever a Tensor is taken), an
    :class:`psrt.IndexedSlices` becomes its dense tensor (:func:`indexed_slices_to_tensor`),
    anything else becomes a :func:`constant`.

    Raises:
        ValueError: a Tensor, Variable or IndexedSlices whose dtype is not ``dtype``, or an
            IndexedSlices without ``dense_shape`` (TF's messages).
    """
    want = _dtypes.as_numpy_dtype(dtype)
    if isinstance(value, IndexedSlices):
        return indexed_slices_to_tensor(value, want, name)
    if isinstance(value, (Tensor, VariableBase)):
        if want is not None and value.dtype is not None and value.dtype != want:
            raise ValueError(f"Tensor conversion requested dtype "
                             f"{_dtypes.as_dtype(want).name} for Tensor with dtype "
                             f"{_dtypes.as_dtype(value.dtype).name}: {value!r}")
        return value
    if want is None:
        hint = preferred_dtype if preferred_dtype is not None else dtype_hint
        if hint is not None:
            try:
                return constant(value, hint, name=name or "Const")
            except (TypeError, ValueError):
                pass
    return constant(value, want, name=name or "Const")


# TF warns when it makes an IndexedSlices dense with at least this many elements
# (gradients_util.py, r1.15: _LARGE_SPARSE_NUM_ELEMENTS).
_LARGE_SPARSE_NUM_ELEMENTS = 100000000


def _segment_rows(needs: Any, values: Any, indices: Any, dense_shape: Any) -> Any:
    """``out[indices[j]] += values[j]`` into zeros of ``dense_shape`` (TF's
    ``unsorted_segment_sum(values, indices, dense_shape[0])``); its gradient gathers."""
    vals = np.asarray(values)
    idx = np.asarray(indices).reshape(-1)
    n = int(np.asarray(dense_shape).reshape(-1)[0])
    tail = vals.shape[1:]
    if idx.dtype.kind not in "iu" or vals.shape[:1] != idx.shape:
        raise errors.InvalidArgumentError(
            None, None, f"IndexedSlices to a dense tensor: indices must be integers, one per "
                        f"row of values; got {idx.dtype} {list(idx.shape)} for values "
                        f"{list(vals.shape)}")
    bad = np.flatnonzero(idx >= n)
    if len(bad):
        j = int(bad[0])
        raise errors.InvalidArgumentError(
            None, None, f"segment_ids[{j}] = {int(idx[j])} is out of range [0, {n})")
    keep = idx >= 0          # TF drops the rows of negative ids
    row = int(np.prod(tail, dtype=np.int64))
    out = np.zeros((n,) + tail, vals.dtype)
    if row and keep.any():
        flat = (idx[keep].astype(np.int64)[:, None] * row + np.arange(row)).reshape(-1)
        np.add.at(out.reshape(-1), flat, vals[keep].reshape(-1))

    def grad(dy: Any) -> Any:
        dy = np.asarray(dy)
        g = np.zeros(vals.shape, dy.dtype)
        g[keep] = dy[idx[keep]]
        return g, None, None
    return out, grad


def indexed_slices_to_tensor(value: IndexedSlices, dtype: Any = None,
                             name: str | None = None) -> Tensor:
    """The dense tensor of an :class:`psrt.IndexedSlices`, as TF's ``_IndexedSlicesToTensor``
    (gradients_util.py, r1.15): ``unsorted_segment_sum(values, indices, dense_shape[0])``,
    rows of repeated indices added, rows no index names zero, of ``values``' dtype; a
    ``warnings.warn`` when its shape is unknown or it has at least 1e8 elements (TF's
    messages). Differentiable with respect to ``values``.

    Raises:
        ValueError: ``dtype`` not the values' dtype, or no ``dense_shape`` (TF's messages).
        InvalidArgumentError (at run): an index at or past ``dense_shape[0]``.
    """
    vdt = value.dtype
    if dtype is not None and vdt is not None and np.dtype(dtype) != np.dtype(vdt):
        raise ValueError(f"Tensor conversion requested dtype {_dtypes.as_dtype(dtype).name} "
                         f"for IndexedSlices with dtype {_dtypes.as_dtype(vdt).name}")
    if value.dense_shape is None:
        raise ValueError(f"Tensor conversion requested for IndexedSlices without "
                         f"dense_shape: {value}")
    shape = _lib.constant_value(value.dense_shape)
    if shape is None:
        warnings.warn("Converting sparse IndexedSlices to a dense Tensor of unknown shape. "
                      "This may consume a large amount of memory.", stacklevel=2)
        static: Any = None
    else:
        static = [int(d) for d in np.asarray(shape).reshape(-1)]
        n = int(np.prod(static, dtype=np.int64))
        if n >= _LARGE_SPARSE_NUM_ELEMENTS:
            warnings.warn(f"Converting sparse IndexedSlices to a dense Tensor with {n} "
                          f"elements. This may consume a large amount of memory.",
                          stacklevel=2)
    values = value.values if _lib.is_graph_value(value.values) else np.asarray(value.values)
    return _lib.apply_op("UnsortedSegmentSum", name, [values, value.indices, value.dense_shape],
                         _segment_rows, vdt, static)

