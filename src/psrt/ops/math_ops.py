"""TF1's math ops (tensorflow/python/ops/math_ops.py, r1.15) as graph ops over numpy:
elementwise arithmetic, comparisons and logic, casts, reductions, ``argmax``, ``add_n``,
``matmul``, ``cumsum``, segment sums, ``range``.

Each builds a :class:`psrt.Tensor` with its static dtype and shape (TF's shape inference:
numpy broadcasting, None for sizes known only at run time) and carries a hand-written
gradient (TF's, tensorflow/python/ops/math_grad.py). Inputs of one op share one dtype, as
TF's: a Python number takes the other input's dtype, and float32 stays float32.
"""

from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import errors as _errors
from psrt.framework.constant_op import constant
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor, unbroadcast
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import nn_ops as _nn

# ---- inputs ----------------------------------------------------------------------------------


def _dtype_name(dt: Any) -> str:
    return _dtypes.as_dtype(dt).name if dt is not None else "unknown"


def _binary_inputs(op: str, x: Any, y: Any) -> tuple[Any, Any, np.dtype]:
    """``(x, y, dtype)``: a constant converted to the other input's dtype; two graph
    values must share theirs (TF's "Input 'y' of 'Add' Op has type ..." TypeError)."""
    gx, gy = _lib.is_graph_value(x), _lib.is_graph_value(y)
    dx, dy = _lib.static_dtype(x), _lib.static_dtype(y)
    if gx and not gy:
        dt = dx if dx is not None else dy
        y = np.asarray(y, dt)
    elif gy and not gx:
        dt = dy if dy is not None else dx
        x = np.asarray(x, dt)
    elif not gx and not gy:
        dt = dx if np.asarray(x).ndim or not isinstance(y, np.ndarray) else dy
        x, y = np.asarray(x, dt), np.asarray(y, dt)
    else:
        if dx is not None and dy is not None and dx != dy:
            raise TypeError(f"Input 'y' of '{op}' Op has type {_dtype_name(dy)} that does not "
                            f"match type {_dtype_name(dx)} of argument 'x'.")
        dt = dx if dx is not None else dy
    return x, y, dt


def _unary_input(x: Any) -> tuple[Any, np.dtype]:
    if _lib.is_graph_value(x):
        return x, x.dtype
    arr = np.asarray(x, _lib.python_value_dtype(x))
    return arr, arr.dtype


def _check_kind(op: str, dt: Any, kinds: str, names: str) -> None:
    if dt is not None and np.dtype(dt).kind not in kinds:
        raise TypeError(f"Value passed to parameter 'x' of op '{op}' has DataType "
                        f"{_dtype_name(dt)} not in list of allowed values: {names}")


_FLOATS = "float16, float32, float64"

# ---- elementwise unary -----------------------------------------------------------------------


def _unary(op: str, fn: Callable[[Any], Any], grad: Callable[[Any, Any, Any], Any] | None,
           kinds: str = "fiub", allowed: str = "numeric") -> Callable[..., Tensor]:
    def kernel(needs: Any, x: Any) -> Any:
        y = fn(x)
        if grad is None:
            return y, lambda dy: (None,)
        return y, lambda dy: (grad(x, y, dy),)

    def build(x: Any, name: str | None = None) -> Tensor:
        x, dt = _unary_input(x)
        _check_kind(op, dt, kinds, allowed)
        return _lib.apply_op(op, name, [x], kernel, dt, _lib.static_shape(x))
    return build


negative = _unary("Neg", np.negative, lambda x, y, dy: -dy, "fi")
abs = _unary("Abs", np.abs, lambda x, y, dy: dy * np.sign(x), "fi")  # noqa: A001
sign = _unary("Sign", np.sign, lambda x, y, dy: np.zeros_like(dy), "fi")
square = _unary("Square", np.square, lambda x, y, dy: dy * (x + x), "fi")
sqrt = _unary("Sqrt", np.sqrt, lambda x, y, dy: dy * 0.5 / y, "f", _FLOATS)
rsqrt = _unary("Rsqrt", lambda x: 1 / np.sqrt(x), lambda x, y, dy: dy * -0.5 * y * y * y, "f",
               _FLOATS)
exp = _unary("Exp", np.exp, lambda x, y, dy: dy * y, "f", _FLOATS)
expm1 = _unary("Expm1", np.expm1, lambda x, y, dy: dy * (y + 1), "f", _FLOATS)
log = _unary("Log", np.log, lambda x, y, dy: dy / x, "f", _FLOATS)
log1p = _unary("Log1p", np.log1p, lambda x, y, dy: dy / (1 + x), "f", _FLOATS)
reciprocal = _unary("Reciprocal", lambda x: 1 / x, lambda x, y, dy: -dy * y * y, "f", _FLOATS)
sin = _unary("Sin", np.sin, lambda x, y, dy: dy * np.cos(x), "f", _FLOATS)
cos = _unary("Cos", np.cos, lambda x, y, dy: -dy * np.sin(x), "f", _FLOATS)
floor = _unary("Floor", np.floor, None, "f", _FLOATS)
ceil = _unary("Ceil", np.ceil, None, "f", _FLOATS)
round = _unary("Round", np.round, None, "fi")  # noqa: A001  (half to even, as TF's)
logical_not = _unary("LogicalNot", np.logical_not, None, "b", "bool")
sigmoid = _nn.sigmoid
tanh = _nn.tanh

# ---- elementwise binary ----------------------------------------------------------------------


def _binary(op: str, fn: Callable[[Any, Any], Any],
            grad: Callable[[Any, Any, Any, Any, Any], tuple[Any, Any]] | None,
            kinds: str = "fiub", out_dtype: Callable[[np.dtype], np.dtype] | None = None
            ) -> Callable[..., Tensor]:
    def kernel(needs: Any, x: Any, y: Any) -> Any:
        z = fn(x, y)
        if grad is None:
            return z, lambda dz: (None, None)

        def g(dz: Any) -> Any:
            gx, gy = grad(x, y, z, dz, needs)
            return (unbroadcast(gx, np.shape(x)) if gx is not None and 0 in needs else None,
                    unbroadcast(gy, np.shape(y)) if gy is not None and 1 in needs else None)
        return z, g

    def build(x: Any, y: Any, name: str | None = None) -> Tensor:
        x, y, dt = _binary_inputs(op, x, y)
        _check_kind(op, dt, kinds, "numeric" if "b" not in kinds else "bool")
        shape = _lib.broadcast_static(_lib.static_shape(x), _lib.static_shape(y))
        odt = out_dtype(dt) if out_dtype is not None and dt is not None else dt
        return _lib.apply_op(op, name, [x, y], kernel, odt, shape)
    build.__name__ = op
    return build


def _bool(dt: np.dtype) -> np.dtype:
    return np.dtype(np.bool_)


add = _binary("Add", np.add, lambda x, y, z, d, n: (d, d))
subtract = _binary("Sub", np.subtract, lambda x, y, z, d, n: (d, -d))
multiply = _binary("Mul", np.multiply, lambda x, y, z, d, n: (
    d * y if 0 in n else None, d * x if 1 in n else None))
realdiv = _binary("RealDiv", np.true_divide, lambda x, y, z, d, n: (
    d / y if 0 in n else None, -d * z / y if 1 in n else None), "f")
maximum = _binary("Maximum", np.maximum, lambda x, y, z, d, n: (d * (x >= y), d * (x < y)),
                  "fi")
minimum = _binary("Minimum", np.minimum, lambda x, y, z, d, n: (d * (x <= y), d * (x > y)),
                  "fi")
squared_difference = _binary("SquaredDifference", lambda x, y: np.square(x - y),
                             lambda x, y, z, d, n: (d * 2 * (x - y), d * -2 * (x - y)), "fi")


def _pow_grad(x: Any, y: Any, z: Any, d: Any, n: Any) -> tuple[Any, Any]:
    gx = d * y * np.power(x, y - 1) if 0 in n else None
    gy = None
    if 1 in n:
        safe = np.where(x > 0, x, np.ones_like(x))
        gy = d * z * np.where(x > 0, np.log(safe), np.zeros_like(x))
    return gx, gy


pow = _binary("Pow", np.power, _pow_grad, "fi")  # noqa: A001


def _floordiv(x: Any, y: Any) -> Any:
    return np.floor_divide(x, y) if x.dtype.kind in "iu" else np.floor(x / y)


floordiv = _binary("FloorDiv", _floordiv, None, "fi")
floor_div = floordiv
floormod = _binary("FloorMod", np.mod, lambda x, y, z, d, n: (
    d, -d * _floordiv(np.asarray(x), np.asarray(y))), "fi")
mod = floormod
equal = _binary("Equal", np.equal, None, out_dtype=_bool)
not_equal = _binary("NotEqual", np.not_equal, None, out_dtype=_bool)
less = _binary("Less", np.less, None, "fi", _bool)
less_equal = _binary("LessEqual", np.less_equal, None, "fi", _bool)
greater = _binary("Greater", np.greater, None, "fi", _bool)
greater_equal = _binary("GreaterEqual", np.greater_equal, None, "fi", _bool)
logical_and = _binary("LogicalAnd", np.logical_and, None, "b")
logical_or = _binary("LogicalOr", np.logical_or, None, "b")
logical_xor = _binary("LogicalXor", np.logical_xor, None, "b")


def truediv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` in floating point, as ``tf.truediv`` (Python 3's division): integer
    inputs are cast first, int8/int16/uint8 to float32 and int32/int64 to float64 (TF's
    ``_TRUEDIV_TABLE``); float inputs keep their dtype. Gradient as TF's RealDiv.

    Raises:
        TypeError: inputs of different dtypes.
    """
    x, y, dt = _binary_inputs("truediv", x, y)
    if dt is not None and np.dtype(dt).kind in "iu":
        to = np.float32 if np.dtype(dt).itemsize <= 2 else np.float64
        x, y = cast(x, to), cast(y, to)
    return realdiv(x, y, name=name or "truediv")


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y``, as ``tf.divide`` (:func:`truediv`)."""
    return truediv(x, y, name=name or "truediv")


def div(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Python 2's ``x / y``, as TF1's ``tf.div``: floor division of integers, true
    division of floats."""
    x, y, dt = _binary_inputs("div", x, y)
    if dt is not None and np.dtype(dt).kind in "iu":
        return floordiv(x, y, name=name or "div")
    return realdiv(x, y, name=name or "div")


def scalar_mul(scalar: Any, x: Any, name: str | None = None) -> Tensor:
    """``scalar * x``, as ``tf.scalar_mul``."""
    return multiply(scalar, x, name=name or "mul")


# ---- casts -----------------------------------------------------------------------------------


def _cast_kernel(needs: Any, x: Any, dtype: np.dtype) -> Any:
    src = np.asarray(x).dtype
    y = np.asarray(x).astype(dtype, copy=False)
    if src.kind == "f" and dtype.kind == "f":
        return y, lambda dy: (np.asarray(dy).astype(src, copy=False),)
    return y, lambda dy: (None,)


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """``x`` converted to ``dtype``, as ``tf.cast`` (float to int truncates toward zero;
    to bool: nonzero is True). The gradient passes through between float dtypes (cast back
    to ``x``'s dtype), none otherwise, as TF's.

    Raises:
        TypeError: ``dtype`` is not a dtype.
    """
    dt = _lib.np_dtype(dtype)
    x, _ = _unary_input(x)
    return _lib.apply_op("Cast", name, [x], _cast_kernel, dt, _lib.static_shape(x), dtype=dt)


def to_float(x: Any, name: str = "ToFloat") -> Tensor:
    """``cast(x, float32)``, as TF1's ``tf.to_float``."""
    return cast(x, np.float32, name=name)


def to_double(x: Any, name: str = "ToDouble") -> Tensor:
    """``cast(x, float64)``, as TF1's ``tf.to_double``."""
    return cast(x, np.float64, name=name)


def to_int32(x: Any, name: str = "ToInt32") -> Tensor:
    """``cast(x, int32)``, as TF1's ``tf.to_int32``."""
    return cast(x, np.int32, name=name)


def to_int64(x: Any, name: str = "ToInt64") -> Tensor:
    """``cast(x, int64)``, as TF1's ``tf.to_int64``."""
    return cast(x, np.int64, name=name)


# ---- reductions ------------------------------------------------------------------------------


def reduced_shape(shape: TensorShape, axis: Any, keepdims: bool) -> TensorShape:
    """The static shape of a reduction of ``shape`` over ``axis`` (None: every axis).

    Raises:
        ValueError: an axis out of range for a known rank (TF's message).
    """
    if shape.ndims is None:
        return TensorShape(None)
    dims = shape.as_list()
    n = len(dims)
    if axis is None:
        axes = set(builtins.range(n))
    else:
        axes = set()
        for a in (axis if isinstance(axis, tuple) else (axis,)):
            if not -n <= a < builtins.max(n, 1):
                raise ValueError(f"Invalid reduction dimension {a} for input with {n} "
                                 f"dimensions.")
            axes.add(a % n if n else 0)
    if keepdims:
        return TensorShape([1 if i in axes else d for i, d in enumerate(dims)])
    return TensorShape([d for i, d in enumerate(dims) if i not in axes])


def _reduction_args(input_tensor: Any, axis: Any, keepdims: Any, reduction_indices: Any,
                    keep_dims: Any) -> tuple[Any, Any, bool]:
    x = input_tensor if _lib.is_graph_value(input_tensor) else constant(input_tensor)
    return x, _nn._reduce_axis(axis, reduction_indices), _nn._keepdims(keepdims, keep_dims)


def _with_shape(t: Tensor, x: Any, axis: Any, keep: bool, dtype: Any) -> Tensor:
    t.shape = reduced_shape(_lib.static_shape(x), axis, keep)
    t.dtype = dtype
    t.op._dtypes = [dtype]
    return t


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """Sum over ``axis`` (int, list, or None: every axis), as ``tf.reduce_sum``;
    ``reduction_indices``/``keep_dims`` are TF1's older spellings. Keeps the dtype.

    Raises:
        ValueError: both spellings of one argument; an axis out of range.
    """
    if not _lib.is_graph_value(input_tensor):   # arrays (inside @psrt.function): a value
        return _nn.reduce_sum(input_tensor, axis, keepdims, name, reduction_indices,
                              keep_dims)
    x, a, keep = _reduction_args(input_tensor, axis, keepdims, reduction_indices, keep_dims)
    return _with_shape(_nn.reduce_sum(x, a, keep, name), x, a, keep, _lib.static_dtype(x))


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
                name: str | None = None, reduction_indices: Any = None,
                keep_dims: bool | None = None) -> Tensor:
    """Mean over ``axis``, as ``tf.reduce_mean``: float32 stays float32; an integer mean
    truncates toward zero and keeps the integer dtype, as TF's. Arguments as
    :func:`reduce_sum`."""
    if not _lib.is_graph_value(input_tensor):   # arrays (inside @psrt.function): a value
        return _nn.reduce_mean(input_tensor, axis, keepdims, name, reduction_indices,
                               keep_dims)
    x, a, keep = _reduction_args(input_tensor, axis, keepdims, reduction_indices, keep_dims)
    dt = _lib.static_dtype(x)
    if dt is not None and np.dtype(dt).kind in "iu":
        t = _lib.apply_op("Mean", name, [x], _int_mean, dt,
                          reduced_shape(_lib.static_shape(x), a, keep), axis=a, keepdims=keep)
        return t
    return _with_shape(_nn.reduce_mean(x, a, keep, name), x, a, keep, dt)


def _int_mean(needs: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    x = np.asarray(x)
    total = np.sum(x, axis=axis, keepdims=keepdims)
    count = builtins.max(x.size // builtins.max(np.size(total), 1), 1)
    return (np.trunc(total / count)).astype(x.dtype), lambda dy: (None,)


def _extreme(needs: Any, x: Any, axis: Any, keepdims: bool, fn: Any) -> Any:
    x = np.asarray(x)
    y = fn(x, axis=axis, keepdims=keepdims)

    def grad(dy: Any) -> Any:
        yk = _nn._expand_back(y, x.shape, axis, keepdims)
        hit = (x == yk).astype(x.dtype)
        count = _nn._expand_back(np.sum(hit, axis=axis, keepdims=keepdims), x.shape, axis,
                                 keepdims)
        return (_nn._expand_back(dy, x.shape, axis, keepdims) * hit / count,)
    return y, grad


def _prod(needs: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    x = np.asarray(x)
    y = np.prod(x, axis=axis, keepdims=keepdims)

    def grad(dy: Any) -> Any:
        axes = tuple(builtins.range(x.ndim)) if axis is None else \
            tuple(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,)))
        rest = tuple(i for i in builtins.range(x.ndim) if i not in axes)
        perm = rest + axes
        xt = np.transpose(x, perm)
        flat = xt.reshape(xt.shape[:len(rest)] + (-1,))
        ones = np.ones(flat.shape[:-1] + (1,), x.dtype)
        left = np.cumprod(np.concatenate([ones, flat[..., :-1]], -1), -1)
        right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], -1), -1)[..., ::-1]
        others = (left * right).reshape(xt.shape)
        g = np.transpose(others, np.argsort(perm))
        return (_nn._expand_back(dy, x.shape, axis, keepdims) * g,)
    return y, grad


def _logsumexp(needs: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, np.zeros_like(m))
    s = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    yk = np.log(s) + m
    y = yk if keepdims else (np.squeeze(yk, axis) if axis is not None else yk.reshape(()))
    return y, lambda dy: (_nn._expand_back(dy, x.shape, axis, keepdims) * np.exp(x - yk),)


def _plain(fn: Any) -> Any:
    def kernel(needs: Any, x: Any, axis: Any, keepdims: bool) -> Any:
        return fn(np.asarray(x), axis=axis, keepdims=keepdims), lambda dy: (None,)
    return kernel


def _reducer(op: str, kernel: Any, kinds: str, out: Any = None, **extra: Any) -> Any:
    def build(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
              name: str | None = None, reduction_indices: Any = None,
              keep_dims: bool | None = None) -> Tensor:
        x, a, keep = _reduction_args(input_tensor, axis, keepdims, reduction_indices,
                                     keep_dims)
        dt = _lib.static_dtype(x)
        _check_kind(op, dt, kinds, "bool" if kinds == "b" else "numeric")
        return _lib.apply_op(op, name, [x], kernel, out if out is not None else dt,
                             reduced_shape(_lib.static_shape(x), a, keep), axis=a,
                             keepdims=keep, **extra)
    build.__doc__ = (f"``{op}`` over ``axis`` (int, list, or None: every axis), as "
                     f"TF1's; ``reduction_indices``/``keep_dims`` are the older spellings.")
    return build


reduce_max = _reducer("Max", lambda n, x, axis, keepdims: _extreme(n, x, axis, keepdims,
                                                                   np.max), "fiu")
reduce_min = _reducer("Min", lambda n, x, axis, keepdims: _extreme(n, x, axis, keepdims,
                                                                   np.min), "fiu")
reduce_prod = _reducer("Prod", _prod, "fiu")
reduce_logsumexp = _reducer("ReduceLogSumExp", _logsumexp, "f")
reduce_any = _reducer("Any", _plain(np.any), "b", np.dtype(np.bool_))
reduce_all = _reducer("All", _plain(np.all), "b", np.dtype(np.bool_))


def count_nonzero(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
                  dtype: Any = np.int64, name: str | None = None,
                  reduction_indices: Any = None, keep_dims: bool | None = None) -> Tensor:
    """The number of nonzero entries over ``axis``, as ``tf.count_nonzero`` (int64 by
    default)."""
    x, a, keep = _reduction_args(input_tensor, axis, keepdims, reduction_indices, keep_dims)
    dt = _lib.np_dtype(dtype)
    return _lib.apply_op("count_nonzero", name, [x], _count_nonzero, dt,
                         reduced_shape(_lib.static_shape(x), a, keep), axis=a,
                         keepdims=keep, dtype=dt)


def _count_nonzero(needs: Any, x: Any, axis: Any, keepdims: bool, dtype: np.dtype) -> Any:
    y = np.sum(np.asarray(x) != 0, axis=axis, keepdims=keepdims).astype(dtype)
    return y, lambda dy: (None,)


def _arg(op: str, fn: Any) -> Any:
    def kernel(needs: Any, x: Any, axis: int, dtype: np.dtype) -> Any:
        return fn(np.asarray(x), axis=axis).astype(dtype), lambda dy: (None,)

    def build(input: Any, axis: Any = None, name: str | None = None, dimension: Any = None,
              output_type: Any = np.int64) -> Tensor:
        if axis is not None and dimension is not None:
            raise ValueError("Cannot specify both 'axis' and 'dimension'")
        a = axis if axis is not None else dimension
        a = 0 if a is None else int(a)
        x, _ = _unary_input(input)
        shape = _lib.static_shape(x)
        if shape.ndims is not None and not -shape.ndims <= a < shape.ndims:
            raise ValueError(f"Expected dimension in the range [{-shape.ndims}, "
                             f"{shape.ndims}), but got {a}")
        dt = _lib.np_dtype(output_type)
        if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeError(f"output_type must be int32 or int64; got {output_type!r}")
        return _lib.apply_op(op, name, [x], kernel, dt, reduced_shape(shape, a, False),
                             axis=a, dtype=dt)
    build.__doc__ = (f"The index of the {'largest' if op == 'ArgMax' else 'smallest'} "
                     f"entry along ``axis`` (TF1's default 0; ``dimension`` its old "
                     f"name), as ``tf.{op.lower()}``; ``output_type`` int64 (default) or "
                     f"int32; the first index on ties. No gradient.")
    return build


argmax = _arg("ArgMax", np.argmax)
argmin = _arg("ArgMin", np.argmin)


def _add_n(needs: Any, *xs: Any) -> Any:
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total, lambda dy: tuple(dy for _ in xs)


def add_n(inputs: Any, name: str | None = None) -> Tensor:
    """The elementwise sum of a list of tensors of one shape and dtype, as ``tf.add_n``.

    Raises:
        ValueError: ``inputs`` is empty or not a list (TF's message).
    """
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("inputs must be a list of at least one Tensor/IndexedSlices with "
                         "the same dtype and shape")
    shape = _lib.static_shape(inputs[0])
    for x in inputs[1:]:
        shape = shape.merge_with(_lib.static_shape(x))
    return _lib.apply_op("AddN", name, list(inputs), _add_n, _lib.static_dtype(inputs[0]),
                         shape)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """The matrix product of the last two dimensions, as ``tf.matmul``, with psrt.nn's
    fused gradient (``psrt/ops/nn_ops.py``); static shape ``[..., m, n]``. Given arrays
    only (inside a ``@psrt.function``) it returns the product itself, as
    :func:`reduce_sum` and :func:`reduce_mean` do.

    Raises:
        ValueError: known inner dimensions that differ (TF's message).
    """
    if not (_lib.is_graph_value(a) or _lib.is_graph_value(b)):
        # Arrays (inside @psrt.function, traced by autograd): the product, as before.
        return _nn.matmul(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b, a_is_sparse,
                          b_is_sparse, name)
    t = _nn.matmul(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b, a_is_sparse,
                   b_is_sparse, name)
    sa, sb = _lib.static_shape(a), _lib.static_shape(b)
    if sa.ndims is not None and sb.ndims is not None and sa.ndims >= 2 and sb.ndims >= 2:
        la, lb = sa.as_list(), sb.as_list()
        m, k = (la[-1], la[-2]) if (transpose_a or adjoint_a) else (la[-2], la[-1])
        k2, n = (lb[-1], lb[-2]) if (transpose_b or adjoint_b) else (lb[-2], lb[-1])
        if k is not None and k2 is not None and k != k2:
            raise ValueError(f"Dimensions must be equal, but are {k} and {k2} for 'MatMul' "
                             f"(op: 'MatMul') with input shapes: {sa.as_list()}, "
                             f"{sb.as_list()}.")
        lead = _lib.broadcast_static(TensorShape(la[:-2]), TensorShape(lb[:-2]))
        t.shape = lead.concatenate([m, n])
    t.dtype = _lib.static_dtype(a)
    return t


# ---- scans, segments, ranges -----------------------------------------------------------------


def _cumsum(needs: Any, x: Any, axis: int, exclusive: bool, reverse: bool) -> Any:
    def scan(v: Any) -> Any:
        v = np.flip(v, axis) if reverse else v
        y = np.cumsum(v, axis=axis, dtype=v.dtype)
        if exclusive:
            y = y - v
        return np.flip(y, axis) if reverse else y

    x = np.asarray(x)
    return scan(x), lambda dy: (_cumsum(needs, dy, axis, exclusive, not reverse)[0],)


def cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False,
           name: str | None = None) -> Tensor:
    """Cumulative sum along ``axis``, as ``tf.cumsum``: ``exclusive`` starts at 0,
    ``reverse`` sums from the end (tensorflow/python/kernel_tests/scan_ops_test.py)."""
    x, dt = _unary_input(x)
    return _lib.apply_op("Cumsum", name, [x], _cumsum, dt, _lib.static_shape(x),
                         axis=int(axis), exclusive=bool(exclusive), reverse=bool(reverse))


def _segment_sum(needs: Any, data: Any, ids: Any, num: Any) -> Any:
    data, ids = np.asarray(data), np.asarray(ids)
    n = int(ids.max()) + 1 if num is None and ids.size else (0 if num is None else int(num))
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise _errors.InvalidArgumentError(
            None, None, f"segment_ids {ids.tolist()} out of range [0, {n})")
    out = np.zeros((n,) + data.shape[ids.ndim:], data.dtype)
    np.add.at(out, ids, data)
    return out, lambda dy: (np.asarray(dy)[ids], None, None)


def segment_sum(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
    """Sums of ``data``'s rows by sorted ``segment_ids``, as ``tf.segment_sum``: output row
    ``i`` is the sum of rows with id ``i`` (``max(id) + 1`` rows; missing ids give 0)."""
    data, dt = _unary_input(data)
    shape = TensorShape([None]).concatenate(_lib.static_shape(data)[1:])
    return _lib.apply_op("SegmentSum", name, [data, segment_ids, None], _segment_sum, dt,
                         shape)


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any,
                         name: str | None = None) -> Tensor:
    """Sums of ``data``'s slices by ``segment_ids`` (any order, shape a prefix of
    ``data``'s) into ``num_segments`` rows, as ``tf.unsorted_segment_sum``.

    Raises:
        InvalidArgumentError (at run): an id outside ``[0, num_segments)``.
    """
    data, dt = _unary_input(data)
    ids_rank = _lib.static_shape(segment_ids).ndims or 1
    n = _lib.constant_value(num_segments)
    shape = TensorShape([None if n is None else int(n)]).concatenate(
        _lib.static_shape(data)[ids_rank:])
    return _lib.apply_op("UnsortedSegmentSum", name, [data, segment_ids, num_segments],
                         _segment_sum, dt, shape)


def _range(needs: Any, start: Any, limit: Any, delta: Any, dtype: np.dtype) -> Any:
    return np.arange(start, limit, delta).astype(dtype), lambda dy: (None, None, None)


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,  # noqa: A001
          name: str = "range") -> Tensor:
    """``[start, start + delta, ...]`` below ``limit``, as ``tf.range`` (``range(n)``
    counts from 0); the dtype is the widest of the arguments' (int32 for Python ints,
    float32 for Python floats) unless ``dtype`` is given.

    Raises:
        ValueError: ``delta`` is 0.
    """
    if limit is None:
        start, limit = 0, start
    vals = [_lib.constant_value(v) for v in (start, limit, delta)]
    if dtype is not None:
        dt = _lib.np_dtype(dtype)
    else:
        kinds = [_lib.static_dtype(v) for v in (start, limit, delta)]
        dt = builtins.max((np.dtype(k) for k in kinds if k is not None),
                          key=lambda d: (d.kind == "f", d.itemsize))
    if vals[2] is not None and vals[2] == 0:
        raise ValueError("Requires delta != 0")
    size = None
    if all(v is not None for v in vals):
        size = builtins.max(int(np.ceil((float(vals[1]) - float(vals[0])) / float(vals[2]))),
                            0)
    return _lib.apply_op("Range", name, [start, limit, delta], _range, dt, [size], dtype=dt)


def _linspace(needs: Any, start: Any, stop: Any, num: Any) -> Any:
    y = np.linspace(start, stop, int(num)).astype(np.asarray(start).dtype)
    return y, lambda dy: (None, None, None)


def linspace(start: Any, stop: Any, num: Any, name: str | None = None) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive, as
    ``tf.linspace`` (``tf.lin_space``); the dtype of ``start`` (float32 for a Python
    float)."""
    start, dt = _unary_input(start)
    if dt.kind != "f":
        raise TypeError(f"linspace: start must be float32 or float64; got {_dtype_name(dt)}")
    n = _lib.constant_value(num)
    return _lib.apply_op("LinSpace", name, [start, np.asarray(stop, dt), num], _linspace, dt,
                         [None if n is None else int(n)])


lin_space = linspace
