"""Constants, as tensorflow/python/framework/constant_op.py (r1.15): ``tf.constant`` and
``tf.convert_to_tensor``."""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import op_def_library as _lib
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
    Variable stays itself (it reads as its value wherever a Tensor is taken), anything else
    becomes a :func:`constant`.

    Raises:
        ValueError: a Tensor or Variable whose dtype is not ``dtype`` (TF's message).
    """
    want = _dtypes.as_numpy_dtype(dtype)
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
