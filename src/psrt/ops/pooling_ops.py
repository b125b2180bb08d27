"""TF1's pooling ops (tensorflow/python/ops/nn_ops.py, r1.15) as graph ops: ``max_pool``,
``avg_pool``, ``max_pool_with_argmax`` and ``pool`` (1-D, 2-D and 3-D, with dilations), with
TF's gradients (MaxPoolGrad: each output's gradient goes to the first maximum of its window,
in row-major window order; AvgPoolGrad: spread evenly over the window's in-bounds elements;
MaxPoolGradWithArgmax: to the position the argmax names). The loops are in
psrt/ops/_conv_kernels.pyx; window sizes and SAME/VALID padding as psrt/ops/conv_ops.py's;
3-D pooling and the dilated windows of ``pool`` in psrt/ops/pooling3d_ops.py.
"""

from __future__ import annotations

import collections
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
from psrt.ops.pooling3d_ops import _pool3d, _pool_nd

__all__ = ["MaxPoolWithArgmax", "avg_pool", "max_pool", "max_pool_with_argmax", "pool"]


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


# ---- max_pool_with_argmax ----------------------------------------------------------------------

MaxPoolWithArgmax = collections.namedtuple("MaxPoolWithArgmax", ["output", "argmax"])
MaxPoolWithArgmax.__doc__ = ("The outputs of :func:`max_pool_with_argmax`: the pooled "
                             "``output`` and the flattened ``argmax`` of each window.")


def _argmax(needs: Any, x: Any, ksize: tuple[int, int], strides: tuple[int, int],
            padding: str, include_batch: bool, out_dtype: np.dtype) -> Any:
    xn = _nhwc(x, "NHWC", _compute(np.asarray(x).dtype))
    _rank4(xn, "input", "MaxPoolWithArgmax")
    n, h, w, c = xn.shape
    g = _Geometry("MaxPoolWithArgmax", (h, w), ksize, strides, (1, 1), padding, None)
    shape = (n, g.oh, g.ow, c)
    y = np.empty(shape, xn.dtype)
    tap = np.empty(shape, np.int32)          # the window tap ky * kw + kx of each maximum
    _k.max_pool(xn, y, tap, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
    ky, kx = np.divmod(tap.astype(np.int64), g.kw)
    iy = ky + (np.arange(g.oh, dtype=np.int64) * g.sh - g.pt).reshape(1, -1, 1, 1)
    ix = kx + (np.arange(g.ow, dtype=np.int64) * g.sw - g.pl).reshape(1, 1, -1, 1)
    # TF's flattened index of [b, y, x, c]: (y * width + x) * channels + c, plus
    # b * height * width * channels with include_batch_in_index
    idx = (iy * w + ix) * c + np.arange(c, dtype=np.int64)
    if include_batch:
        idx += (np.arange(n, dtype=np.int64) * (h * w * c)).reshape(n, 1, 1, 1)
    return idx.astype(out_dtype), lambda dy: (None,)


def _argmax_values(needs: Any, x: Any, idx: Any, include_batch: bool) -> Any:
    x = np.asarray(x)
    n = x.shape[0]
    per = int(np.prod(x.shape[1:]))
    local = np.asarray(idx, np.int64).reshape(n, -1)
    if include_batch:
        local = local - (np.arange(n, dtype=np.int64) * per)[:, None]
    values = np.take_along_axis(x.reshape(n, per), local, axis=1).reshape(np.shape(idx))

    def grad(dy: Any) -> tuple[Any, None]:
        # TF's MaxPoolGradWithArgmax: each gradient added at the position its argmax names
        cd = _compute(x.dtype)
        c = x.shape[3]
        dx = np.zeros(x.shape, cd)
        _k.scatter_argmax(np.ascontiguousarray(dy, cd).reshape(n, -1, c),
                          np.ascontiguousarray(local // c).reshape(n, -1, c),
                          dx.reshape(n, -1, c))
        return dx.astype(x.dtype, copy=False), None
    return values, grad


def max_pool_with_argmax(input: Any, ksize: Any, strides: Any, padding: Any,
                         data_format: str = "NHWC", Targmax: Any = None,
                         name: str | None = None, output_dtype: Any = None,
                         include_batch_in_index: bool = False) -> MaxPoolWithArgmax:
    """Max pooling that also returns where each maximum is, as TF1's
    ``tf.nn.max_pool_with_argmax`` (TF's MaxPoolWithArgmax).

    The indices in ``argmax`` are flattened: a maximum at ``[b, y, x, c]`` becomes
    ``(y * width + x) * channels + c``, or ``((b * height + y) * width + x) * channels + c``
    with ``include_batch_in_index``; a window's first maximum in row-major order (as TF's
    CPU kernel, whose pooling_ops_test.py testMaxPoolingWithArgmax values
    tests/test_pool_argmax_ops.py checks). Padding never wins, so the indices always lie
    inside ``[0, height) x [0, width)``.

    Args:
        input: float16/32/64 ``[batch, height, width, channels]`` (NHWC only, as TF's).
        ksize, strides: as :func:`max_pool`'s (an int or 1, 2 or 4 ints, 1 in the batch and
            channel dimensions).
        padding: ``"SAME"`` or ``"VALID"``.
        data_format: only ``"NHWC"``.
        Targmax: the index dtype, ``tf.int64`` (default) or ``tf.int32`` (``output_dtype``
            is its TF2 name; give one of the two).
        name: The op name (default ``"MaxPoolWithArgmax"``).
        include_batch_in_index: whether the flattened index counts the batch (default
            False).

    Returns:
        ``MaxPoolWithArgmax(output, argmax)``: ``[batch, out_height, out_width, channels]``
        of the input's dtype, and the same shape of ``Targmax``. The gradient flows through
        ``output`` to the positions ``argmax`` names (TF's MaxPoolGradWithArgmax); ``argmax``
        has none.

    Raises:
        ValueError: ``data_format`` other than NHWC, both ``Targmax`` and ``output_dtype``,
            an index dtype other than int32/int64, and :func:`max_pool`'s errors.
    """
    op = "max_pool_with_argmax"
    if data_format != "NHWC":
        raise ValueError(f"{op}: data formats other than 'NHWC' are not yet supported; got "
                         f"{data_format!r}")
    if Targmax is not None and output_dtype is not None:
        raise ValueError("Cannot specify both 'output_dtype' and 'Targmax'")
    dtype = output_dtype if output_dtype is not None else Targmax
    out_dt = np.dtype(np.int64) if dtype is None else _lib.np_dtype(dtype)
    if out_dt not in (np.int32, np.int64):
        raise ValueError(f"{op}: Targmax must be int32 or int64; got {out_dt.name}")
    mode, _ = _padding(padding, op)
    ks = _spatial(_sequence(ksize, 3, "ksize", op), "NHWC", "ksize", op)
    st = _spatial(_sequence(strides, 3, "strides", op), "NHWC", "strides", op)
    x = _in(input)
    dt = _work_dtype(x, op)
    xd = _dims(x)
    shape = _out_shape(xd, "NHWC", ks, st, (1, 1), mode, None,
                       None if xd is None or len(xd) != 4 else xd[3], op)
    name = name or "MaxPoolWithArgmax"
    include = bool(include_batch_in_index)
    idx = _lib.apply_op("MaxPoolWithArgmax", name + "_argmax", [x], _argmax, out_dt, shape,
                        ksize=ks, strides=st, padding=mode, include_batch=include,
                        out_dtype=out_dt)
    values = _lib.apply_op("MaxPoolWithArgmax", name, [x, idx], _argmax_values, dt, shape,
                           include_batch=include)
    return MaxPoolWithArgmax(values, idx)


# ---- pool --------------------------------------------------------------------------------------


def _ints(value: Any, n: int, what: str) -> list[int]:
    vals = [1] * n if value is None else [int(v) for v in np.reshape(value, -1)]
    if len(vals) != n:
        raise ValueError(f"pool: {what} must have {n} entries for {n}-D pooling; got {vals}")
    if min(vals) < 1:
        raise ValueError(f"pool: {what} must be positive; got {vals}")
    return vals


def pool(input: Any, window_shape: Any, pooling_type: str, padding: Any,
         dilation_rate: Any = None, strides: Any = None, name: str | None = None,
         data_format: str | None = None, dilations: Any = None) -> Tensor:
    """N-D pooling for N = 1, 2 or 3 spatial dimensions, as TF1's ``tf.nn.pool``:
    ``output[b, x, c] = REDUCE_z input[b, x * strides - pad_before + dilation_rate * z, c]``
    over the in-bounds window positions ``z`` (MAX or AVG).

    With ``dilation_rate`` above 1 (``padding`` VALID, ``strides`` 1, as TF requires), the
    window samples every ``dilation_rate``-th element; TF computes it as pooling over
    space_to_batch, which gives the same values, and the same gradients (2-D: to the first
    maximum; 3-D: TF's MaxPool3DGrad rule, psrt/ops/pooling3d_ops.py).

    Args:
        input: float ``[batch, *spatial, channels]`` (channels-last, default) or
            ``[batch, channels, *spatial]`` (a ``data_format`` starting with ``"NC"``).
        window_shape: N ints >= 1.
        pooling_type: ``"MAX"`` or ``"AVG"``.
        padding: ``"SAME"`` or ``"VALID"``.
        dilation_rate: N ints >= 1 (default 1; ``dilations`` is its TF2 name).
        strides: N ints >= 1 (default 1), none above its window size.
        name: The op name.
        data_format: ``"NWC"``/``"NCW"`` (1-D), ``"NHWC"``/``"NCHW"`` (2-D),
            ``"NDHWC"``/``"NCDHW"`` (3-D), or None (channels last).

    Returns:
        The pooled Tensor, the input's dtype and layout: SAME ``ceil(in / stride)``,
        VALID ``ceil((in - (window - 1) * dilation_rate) / stride)`` per axis.

    Raises:
        ValueError: a bad ``pooling_type`` (naming it and the choices), N not 1-3, a rank
            other than N + 2, entries of the wrong length or not positive, TF's "strides > 1
            not supported in conjunction with dilation_rate > 1", "pooling with SAME padding
            is not implemented for dilation_rate > 1", "strides > window_shape not
            supported", and :func:`max_pool`'s errors.
    """
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"Invalid pooling_type: {pooling_type!r}; expected 'MAX' or 'AVG'")
    win = [int(v) for v in np.reshape(window_shape, -1)]
    nd = len(win)
    if nd < 1 or nd > 3:
        raise ValueError(f"It is required that 1 <= num_spatial_dims <= 3; got window_shape "
                         f"{win}")
    x = _in(input)
    xd = _dims(x)
    if xd is not None and len(xd) != nd + 2:
        raise ValueError(f"pool: a {nd}-D window_shape needs an input of rank {nd + 2}; got "
                         f"shape {xd}")
    _ints(win, nd, "window_shape")
    st = _ints(strides, nd, "strides")
    rt = _ints(dilation_rate if dilation_rate is not None else dilations, nd,
               "dilation_rate")
    if max(st) > 1 and max(rt) > 1:
        raise ValueError(f"strides > 1 not supported in conjunction with dilation_rate > 1; "
                         f"got strides {st} and dilation_rate {rt}")
    mode, _ = _padding(padding, "pool")
    if mode == "SAME" and max(rt) > 1:
        raise ValueError(f"pooling with SAME padding is not implemented for dilation_rate > "
                         f"1; got dilation_rate {rt}")
    if any(s > w for s, w in zip(st, win)):
        raise ValueError(f"strides > window_shape not supported due to inconsistency between "
                         f"CPU and GPU implementations; got strides {st} and window_shape "
                         f"{win}")
    first = data_format is not None and str(data_format).startswith("NC")
    formats = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[nd]
    fmt = formats[0] if data_format is None else str(data_format)
    if fmt not in formats:
        raise ValueError(f"pool: data_format must be one of {formats[0]!r}, {formats[1]!r} "
                         f"for {nd}-D pooling; got {data_format!r}")
    if nd == 1:
        axis = 2 if first else 1
        y = pool(_expand_dims(x, axis), [1, win[0]], pooling_type, padding, [1, rt[0]],
                 [1, st[0]], name, "NCHW" if first else "NHWC")
        return _squeeze(y, [axis])
    op_type = "MaxPool" if pooling_type == "MAX" else "AvgPool"
    if nd == 3:
        if max(rt) == 1:
            return _pool3d(pooling_type, x, win, st, mode, fmt, name, "pool")
        return _pool_nd(pooling_type, x, fmt, tuple(win), tuple(st), tuple(rt), mode, name,
                        op_type + "3D")
    if max(rt) == 1:
        return _pool(pooling_type, x, win, st, padding, fmt, name, "pool")
    return _pool_nd(pooling_type, x, fmt, (1, *win), (1, *st), (1, *rt), mode, name, op_type)
