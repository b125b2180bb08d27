"""TF1's pooling ops (tensorflow/python/ops/nn_ops.py, r1.15) as graph ops: ``max_pool``,
``avg_pool`` and ``pool`` (1-D and 2-D), with TF's gradients (MaxPoolGrad: each output's
gradient goes to the first maximum of its window, in row-major window order; AvgPoolGrad:
spread evenly over the window's in-bounds elements). The loops are in
psrt/ops/_conv_kernels.pyx; window sizes and SAME/VALID padding as psrt/ops/conv_ops.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.ops import _conv_kernels as _k
from psrt.ops.array_ops import expand_dims as _expand_dims
from psrt.ops.array_ops import squeeze as _squeeze
from psrt.ops.conv_ops import (
    _back,
    _compute,
    _data_format,
    _dims,
    _Geometry,
    _in,
    _nhwc,
    _out_shape,
    _padding,
    _rank4,
    _sequence,
    _spatial,
    _work_dtype,
)

__all__ = ["avg_pool", "max_pool", "pool"]


def _max_pool(needs: Any, x: Any, fmt: str, ksize: tuple[int, int], strides: tuple[int, int],
              padding: str, dtype: np.dtype) -> Any:
    cd = _compute(dtype)
    xn = _nhwc(x, fmt, cd)
    _rank4(xn, "input", "MaxPool")
    g = _Geometry("MaxPool", xn.shape[1:3], ksize, strides, (1, 1), padding, None)
    shape = (xn.shape[0], g.oh, g.ow, xn.shape[3])
    y = np.empty(shape, cd)
    arg = np.empty(shape, np.int32)          # the window tap of each maximum
    _k.max_pool(xn, y, arg, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)

    def grad(dy: Any) -> tuple[Any]:
        dx = np.zeros(xn.shape, cd)
        _k.max_pool_grad(_nhwc(dy, fmt, cd), arg, dx, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
        return (_back(dx, fmt, dtype),)
    return _back(y, fmt, dtype), grad


def _avg_pool(needs: Any, x: Any, fmt: str, ksize: tuple[int, int], strides: tuple[int, int],
              padding: str, dtype: np.dtype) -> Any:
    cd = _compute(dtype)
    xn = _nhwc(x, fmt, cd)
    _rank4(xn, "input", "AvgPool")
    g = _Geometry("AvgPool", xn.shape[1:3], ksize, strides, (1, 1), padding, None)
    y = np.empty((xn.shape[0], g.oh, g.ow, xn.shape[3]), cd)
    _k.avg_pool(xn, y, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)

    def grad(dy: Any) -> tuple[Any]:
        dx = np.zeros(xn.shape, cd)
        _k.avg_pool_grad(_nhwc(dy, fmt, cd), dx, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
        return (_back(dx, fmt, dtype),)
    return _back(y, fmt, dtype), grad


def _pool(kind: str, value: Any, ksize: Any, strides: Any, padding: Any, data_format: Any,
          name: str | None, op: str) -> Tensor:
    fmt = _data_format(data_format, op)
    mode, _ = _padding(padding, op)
    ci = 3 if fmt == "NHWC" else 1
    ks = _spatial(_sequence(ksize, ci, "ksize", op), fmt, "ksize", op)
    st = _spatial(_sequence(strides, ci, "strides", op), fmt, "strides", op)
    x = _in(value)
    dt = _work_dtype(x, op)
    xd = _dims(x)
    shape = _out_shape(xd, fmt, ks, st, (1, 1), mode, None,
                       None if xd is None or len(xd) != 4 else xd[ci], op)
    kernel = _max_pool if kind == "MAX" else _avg_pool
    return _lib.apply_op("MaxPool" if kind == "MAX" else "AvgPool", name, [x], kernel, dt,
                         shape, fmt=fmt, ksize=ks, strides=st, padding=mode, dtype=dt)


def max_pool(value: Any = None, ksize: Any = None, strides: Any = None, padding: Any = None,
             data_format: str = "NHWC", name: str | None = None, input: Any = None
             ) -> Tensor:
    """Max pooling over height and width, as TF1's ``tf.nn.max_pool``: each output is the
    maximum of its window's in-bounds elements (SAME's padding never wins).

    Args:
        value: float16/32/64 ``[batch, height, width, channels]`` (NHWC) or NCHW
            (``input`` is its TF2 name).
        ksize: the window: an int or 1, 2 or 4 ints (4: in ``data_format``'s order, 1 in
            the batch and channel dimensions).
        strides: as ``ksize``.
        padding: ``"SAME"`` or ``"VALID"``.
        data_format: ``"NHWC"`` (default) or ``"NCHW"``.
        name: The op name (default ``"MaxPool"``).

    Returns:
        A Tensor of the input's dtype, ``[batch, out_height, out_width, channels]`` (NHWC;
        NCHW likewise). Its gradient goes to the first maximum of each window in row-major
        window order (TF's MaxPoolGrad); windows sharing it add up.

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``ksize`` or ``strides`` (naming
            the value and the choices), pooling over the batch or channel dimension.
        TypeError: a non-float input.
    """
    return _pool("MAX", input if value is None else value, ksize, strides, padding,
                 data_format, name, "max_pool")


def avg_pool(value: Any = None, ksize: Any = None, strides: Any = None, padding: Any = None,
             data_format: str = "NHWC", name: str | None = None, input: Any = None
             ) -> Tensor:
    """Average pooling over height and width, as TF1's ``tf.nn.avg_pool``: each output is
    the mean of its window's in-bounds elements (with SAME padding, a window at the border
    divides by the number of input elements it covers, not by the window size).

    Arguments, shapes and errors as :func:`max_pool`'s; the gradient spreads each output's
    gradient evenly over the elements it averaged (TF's AvgPoolGrad).
    """
    return _pool("AVG", input if value is None else value, ksize, strides, padding,
                 data_format, name, "avg_pool")


def pool(input: Any, window_shape: Any, pooling_type: str, padding: Any,
         dilation_rate: Any = None, strides: Any = None, name: str | None = None,
         data_format: str | None = None, dilations: Any = None) -> Tensor:
    """N-D pooling for N = 1 or 2 spatial dimensions, as TF1's ``tf.nn.pool``:
    :func:`max_pool` or :func:`avg_pool` over the spatial dimensions.

    Args:
        input: float ``[batch, *spatial, channels]`` (channels-last, default) or
            ``[batch, channels, *spatial]`` (a ``data_format`` starting with ``"NC"``).
        window_shape: N ints.
        pooling_type: ``"MAX"`` or ``"AVG"``.
        padding: ``"SAME"`` or ``"VALID"``.
        dilation_rate: N ints, only 1 (psrt's pool has no dilation).
        strides: N ints (default 1).
        name: The op name.
        data_format: ``"NWC"``/``"NCW"`` (1-D), ``"NHWC"``/``"NCHW"`` (2-D), or None.

    Returns:
        The pooled Tensor, the input's dtype and layout.

    Raises:
        ValueError: a bad ``pooling_type`` (naming it and the choices), a rank other than 3
            or 4, window shape or strides of the wrong length, a dilation rate above 1, and
            :func:`max_pool`'s errors.
    """
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"Invalid pooling_type: {pooling_type!r}; expected 'MAX' or 'AVG'")
    x = _in(input)
    xd = _dims(x)
    if xd is None or len(xd) not in (3, 4):
        raise ValueError(f"pool: psrt supports inputs of rank 3 (1-D) or 4 (2-D) with a known "
                         f"rank; got shape {xd}")
    nd = len(xd) - 2
    win = [int(v) for v in np.reshape(window_shape, -1)]
    st = [1] * nd if strides is None else [int(v) for v in np.reshape(strides, -1)]
    rate = dilation_rate if dilation_rate is not None else dilations
    rt = [1] * nd if rate is None else [int(v) for v in np.reshape(rate, -1)]
    for what, vals in (("window_shape", win), ("strides", st), ("dilation_rate", rt)):
        if len(vals) != nd:
            raise ValueError(f"pool: {what} must have {nd} entries for {nd}-D pooling; got "
                             f"{vals}")
    if max(rt) > 1:
        raise ValueError(f"pool: psrt supports dilation_rate 1 only; got {rt}")
    channels_first = data_format is not None and str(data_format).startswith("NC")
    if nd == 1:
        if data_format not in (None, "NWC", "NCW"):
            raise ValueError(f"pool: data_format must be one of 'NWC', 'NCW' for 1-D pooling; "
                             f"got {data_format!r}")
        axis = 2 if channels_first else 1
        y = _pool(pooling_type, _expand_dims(x, axis), [1, win[0]], [1, st[0]], padding,
                  "NCHW" if channels_first else "NHWC", name, "pool")
        return _squeeze(y, [axis])
    return _pool(pooling_type, x, win, st, padding,
                 "NHWC" if data_format is None else data_format, name, "pool")
