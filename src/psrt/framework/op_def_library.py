"""How psrt's TF graph ops are built (TF's op_def_library.py applies an op definition): one
graph node per op, with its static dtype and shape computed at build time, a forward numpy
function and its hand-written gradient.

An op's kernel is ``fwd(needs, *arrays, **attrs) -> (value, grad_fn)``: ``grad_fn(dy)``
returns one gradient (or None) per array, and ``needs`` says which are wanted (as psrt.nn's
fused ops, docs/graph.md). :func:`apply_op` makes the node; ``minimize`` and
``tf.gradients`` differentiate it with ``grad_fn``, never by tracing.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import tensor as _tensor
from psrt.framework.ops import VariableBase
from psrt.framework.tensor_shape import TensorShape, broadcast_static

__all__ = ["ALL", "apply_op", "apply_op_outputs", "broadcast_static", "constant_value", "is_graph_value",
           "np_dtype", "python_value_dtype", "static_dtype", "static_shape"]


class _Everything:
    """The ``needs`` of a forward-only call: every gradient may be asked."""

    def __contains__(self, i: object) -> bool:
        return True


ALL = _Everything()


def _forward(fwd: Callable[..., Any], attrs: dict[str, Any], *args: Any) -> Any:
    return fwd(ALL, *args, **attrs)[0]


def apply_op(op_type: str, name: str | None, inputs: Sequence[Any],
             fwd: Callable[..., Any], dtype: Any, shape: Any, /, **attrs: Any) -> Any:
    """A :class:`psrt.Tensor` computed by ``fwd`` from ``inputs`` (Tensors, Variables or
    numpy values), of static ``dtype`` (its value is converted to it, so a kernel that
    promotes float32 to float64 is caught here) and static ``shape`` (a TensorShape, list or
    None). ``name`` (default ``op_type``) is made unique in the default graph."""
    t = _tensor.py_func(functools.partial(_forward, fwd, attrs), list(inputs), dtype,
                        name=name or op_type)
    t.op.vjp = functools.partial(fwd, **attrs) if attrs else fwd
    t.shape = shape
    return t


def _forward_outputs(fwd: Callable[..., Any], attrs: dict[str, Any], *args: Any) -> Any:
    return list(fwd(*args, **attrs))


def apply_op_outputs(op_type: str, name: str | None, inputs: Sequence[Any],
                     fwd: Callable[..., Any], dtypes: Sequence[Any], shapes: Sequence[Any],
                     /, **attrs: Any) -> list[Any]:
    """The outputs of one op with several (TF's ``ParseExample``, ``DecodeCSV``,
    ``SampleDistortedBoundingBox``): ``fwd(*arrays, **attrs)`` returns one value per entry
    of ``dtypes``, computed once per run (so random outputs agree with each other). The op
    has no gradient (none of TF's multi-output decoding ops has one). ``shapes`` are the
    outputs' static shapes (TensorShape, list or None)."""
    outs = _tensor.py_func(functools.partial(_forward_outputs, fwd, attrs), list(inputs),
                           list(dtypes), name=name or op_type)
    for t, s in zip(outs, shapes):
        t.shape = s
    return list(outs)


def is_graph_value(x: Any) -> bool:
    """True for a Tensor or a Variable (a value known only in a run)."""
    return isinstance(x, (_tensor.Tensor, VariableBase))


def static_shape(x: Any) -> TensorShape:
    """The static shape of a Tensor, a Variable (its shape) or a constant."""
    if isinstance(x, _tensor.Tensor):
        return x.shape
    if isinstance(x, VariableBase):
        return TensorShape(tuple(x.shape))
    return TensorShape(np.shape(x))


def static_dtype(x: Any) -> np.dtype | None:
    """The numpy dtype of a Tensor or Variable (None: not declared), or of a constant as
    TF converts a Python value: float -> float32, int -> int32, bool -> bool."""
    if isinstance(x, (_tensor.Tensor, VariableBase)):
        return x.dtype
    return python_value_dtype(x)


def python_value_dtype(x: Any) -> np.dtype:
    """The dtype TF gives a Python or numpy value: numpy values keep theirs; Python floats
    are float32, ints int32 (int64 when too large), bools bool, str/bytes string."""
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind == "f":
        return np.dtype(np.float32)
    if kind in "iu":
        if arr.size and (arr.max() > np.iinfo(np.int32).max or arr.min() < np.iinfo(np.int32).min):
            return np.dtype(np.int64)
        return np.dtype(np.int32)
    if kind in "SUO":
        return np.dtype(object)
    return arr.dtype


def constant_value(x: Any) -> Any:
    """The numpy value of ``x`` when it is known at build time (a Python or numpy value,
    or a ``constant`` Tensor), else None, as TF's ``tensor_util.constant_value``."""
    if isinstance(x, _tensor.Tensor):
        # A Const op's kernel holds its value (psrt/framework/constant_op.py).
        return getattr(x.op.vjp, "value", None) if not x.op.inputs else None
    if isinstance(x, VariableBase):
        return None
    return np.asarray(x)


def np_dtype(dtype: Any) -> np.dtype:
    """``dtype`` (a psrt DType, numpy dtype or name) as a numpy dtype.

    Raises:
        TypeError: not a dtype.
    """
    dt = _dtypes.as_numpy_dtype(dtype)
    if dt is None:
        raise TypeError(f"dtype must be given; got {dtype!r}")
    return dt
