"""TF1's 3-D pooling ops (tensorflow/python/ops/nn_ops.py, r1.15) as graph ops:
``max_pool3d`` and ``avg_pool3d`` (NDHWC and NCDHW), and the dilated pooling ``tf.nn.pool``
runs for ``dilation_rate`` above 1 (psrt/ops/pooling_ops.py).

The loops are psrt/ops/_conv_kernels.pyx's 3-D pooling kernels, window geometry
psrt/ops/conv3d_ops.py's. Gradients as TF's CPU kernels (tensorflow/core/kernels/
pooling_ops_3d.cc): AvgPool3DGrad spreads each output's gradient evenly over the in-bounds
elements of its window; MaxPool3DGrad adds it to EVERY in-bounds element of the window within
1e-5 of the window's maximum (so tied maxima all receive it, unlike 2-D MaxPoolGrad's first
maximum). A dilated 2-D max pooling (TF: MaxPool over space_to_batch) routes it to the first
maximum in window order, as MaxPoolGrad does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.ops import _conv_kernels as _k
from psrt.ops.conv3d_ops import (
    _back3,
    _data_format3,
    _Geometry3,
    _ndhwc,
    _out_shape3,
    _rank5,
    _sequence3,
)
from psrt.ops.conv_ops import _compute, _dims, _in, _padding, _work_dtype

__all__ = ["avg_pool3d", "max_pool3d"]


def _to5(x: Any, fmt: str, dt: np.dtype) -> np.ndarray:
    """NDHWC of a 5-D (NDHWC/NCDHW) value, or of a 4-D (NHWC/NCHW) one with a depth of 1."""
    if fmt in ("NDHWC", "NCDHW"):
        return _ndhwc(x, fmt, dt)
    a = np.asarray(x)
    if a.ndim != 4:
        raise _errors.InvalidArgumentError(None, None, f"input must be 4-dimensional; got "
                                           f"shape {list(a.shape)}")
    if fmt == "NCHW":
        a = a.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(a[:, None], dtype=dt)


def _from5(y: np.ndarray, fmt: str, dt: np.dtype) -> np.ndarray:
    if fmt in ("NDHWC", "NCDHW"):
        return _back3(y, fmt, dt)
    y = y[:, 0]
    if fmt == "NCHW":
        y = y.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(y, dtype=dt)


def _geometry(xn: np.ndarray, op: str, ksize: tuple[int, ...], strides: tuple[int, ...],
              dilations: tuple[int, ...], padding: str) -> _Geometry3:
    _rank5(xn, "input", op)
    return _Geometry3(op, xn.shape[1:4], ksize, strides, dilations, padding)


def _max_pool3(needs: Any, x: Any, fmt: str, ksize: tuple[int, ...],
               strides: tuple[int, ...], dilations: tuple[int, ...], padding: str,
               dtype: np.dtype) -> Any:
    cd = _compute(dtype)
    xn = _to5(x, fmt, cd)
    g = _geometry(xn, "MaxPool3D", ksize, strides, dilations, padding)
    shape = (xn.shape[0], *g.out, xn.shape[4])
    y = np.empty(shape, cd)
    arg = np.empty(shape, np.int64)
    _k.max_pool3d(xn, y, arg, *g.window())

    def grad(dy: Any) -> tuple[Any]:
        d = _to5(dy, fmt, cd)
        dx = np.zeros(xn.shape, cd)
        if fmt in ("NDHWC", "NCDHW"):       # TF's MaxPool3DGrad: every near-maximum
            _k.max_pool3d_grad_near(xn, y, d, dx, *g.window())
        else:                               # a dilated 2-D pool: MaxPoolGrad's first maximum
            n, c = xn.shape[0], xn.shape[4]
            _k.scatter_argmax(d.reshape(n, -1, c), arg.reshape(n, -1, c),
                              dx.reshape(n, -1, c))
        return (_from5(dx, fmt, dtype),)
    return _from5(y, fmt, dtype), grad


def _avg_pool3(needs: Any, x: Any, fmt: str, ksize: tuple[int, ...],
               strides: tuple[int, ...], dilations: tuple[int, ...], padding: str,
               dtype: np.dtype) -> Any:
    cd = _compute(dtype)
    xn = _to5(x, fmt, cd)
    g = _geometry(xn, "AvgPool3D", ksize, strides, dilations, padding)
    y = np.empty((xn.shape[0], *g.out, xn.shape[4]), cd)
    _k.avg_pool3d(xn, y, *g.window())

    def grad(dy: Any) -> tuple[Any]:
        dx = np.zeros(xn.shape, cd)
        _k.avg_pool3d_grad(_to5(dy, fmt, cd), dx, *g.window())
        return (_from5(dx, fmt, dtype),)
    return _from5(y, fmt, dtype), grad


def _pool_nd(kind: str, x: Any, fmt: str, ksize: tuple[int, ...], strides: tuple[int, ...],
             dilations: tuple[int, ...], padding: str, name: str | None, op_type: str
             ) -> Tensor:
    """A MAX/AVG pooling op over 3 spatial dimensions (NDHWC/NCDHW), or over 2 (NHWC/NCHW)
    with a depth of 1 prepended to ``ksize``/``strides``/``dilations`` by the caller."""
    x = _in(x)
    dt = _work_dtype(x, op_type)
    xd = _dims(x)
    if fmt in ("NHWC", "NCHW"):
        shape = None
        if xd is not None:
            if len(xd) != 4:
                raise ValueError(f"{op_type}: input must be 4-dimensional; got shape {xd}")
            n, c, sp = (xd[0], xd[3], xd[1:3]) if fmt == "NHWC" else (xd[0], xd[1], xd[2:4])
            o = _out_shape3([n, 1, *sp, c], "NDHWC", ksize, strides, dilations, padding, c,
                            op_type)
            shape = [n, o[2], o[3], c] if fmt == "NHWC" else [n, c, o[2], o[3]]
    else:
        c = None if xd is None or len(xd) != 5 else xd[4 if fmt == "NDHWC" else 1]
        shape = _out_shape3(xd, fmt, ksize, strides, dilations, padding, c, op_type)
    kernel = _max_pool3 if kind == "MAX" else _avg_pool3
    return _lib.apply_op(op_type, name, [x], kernel, dt, shape, fmt=fmt, ksize=ksize,
                         strides=strides, dilations=dilations, padding=padding, dtype=dt)


def _pool3d(kind: str, input: Any, ksize: Any, strides: Any, padding: Any, data_format: Any,
            name: str | None, op: str) -> Tensor:
    fmt = _data_format3(data_format, op)
    mode, _ = _padding(padding, op)
    ks = _sequence3(ksize, fmt, "ksize", op)
    st = _sequence3(strides, fmt, "strides", op)
    return _pool_nd(kind, input, fmt, ks, st, (1, 1, 1), mode, name,
                    "MaxPool3D" if kind == "MAX" else "AvgPool3D")


def max_pool3d(input: Any, ksize: Any, strides: Any, padding: Any,
               data_format: str = "NDHWC", name: str | None = None) -> Tensor:
    """3-D max pooling, as TF1's ``tf.nn.max_pool3d``: each output is the maximum of the
    in-bounds elements of its ``ksize`` window (SAME's padding never wins).

    Args:
        input: float16/32/64 ``[batch, depth, height, width, channels]`` (NDHWC) or
            ``[batch, channels, depth, height, width]`` (NCDHW).
        ksize: the window: 5 ints in ``data_format``'s order with 1 in the batch and
            channel dimensions (or an int, or 3 ints).
        strides: as ``ksize``.
        padding: ``"SAME"`` or ``"VALID"``.
        data_format: ``"NDHWC"`` (default) or ``"NCDHW"``.
        name: The op name (default ``"MaxPool3D"``).

    Returns:
        A Tensor of the input's dtype, ``[batch, out_depth, out_height, out_width,
        channels]`` (NDHWC; NCDHW likewise), TF's SAME/VALID sizes per axis. Its gradient
        is TF's CPU MaxPool3DGrad: each output's gradient goes to every element of its
        window within 1e-5 of the maximum (module docstring).

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``ksize`` or ``strides`` (naming
            the value and the choices), pooling over the batch or channel dimension, an
            input known not to be 5-D.
        TypeError: a non-float input.
        InvalidArgumentError (at run): an input that is not 5-D.
    """
    return _pool3d("MAX", input, ksize, strides, padding, data_format, name, "max_pool3d")


def avg_pool3d(input: Any, ksize: Any, strides: Any, padding: Any,
               data_format: str = "NDHWC", name: str | None = None) -> Tensor:
    """3-D average pooling, as TF1's ``tf.nn.avg_pool3d``: each output is the mean of the
    in-bounds elements of its window (with SAME, a border window divides by the number of
    input elements it covers, TF's AvgPool3D).

    Arguments, shapes and errors as :func:`max_pool3d`'s; the gradient spreads each output's
    gradient evenly over the elements it averaged (TF's AvgPool3DGrad).
    """
    return _pool3d("AVG", input, ksize, strides, padding, data_format, name, "avg_pool3d")
