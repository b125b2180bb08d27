"""TF1's depthwise and separable convolutions (tensorflow/python/ops/nn_impl.py, r1.15) as
graph ops: ``depthwise_conv2d`` (each input channel convolved with its own filters; the
patches of psrt/ops/_conv_kernels.pyx's im2col times the filter, one batched GEMM per channel)
and ``separable_conv2d`` (a depthwise convolution, then a 1x1 :func:`conv2d`); and the op
under them, ``depthwise_conv2d_native``, with its two gradients as ops of their own
(``depthwise_conv2d_native_backprop_input`` / ``_filter``, differentiable as TF's nn_grad.py
makes them). Window sizes, padding and layouts as psrt/ops/conv_ops.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.ops import _conv_kernels as _k
from psrt.ops.conv_backprop_ops import _sizes
from psrt.ops.conv_ops import (
    _BIG_CHUNK_ELEMENTS,
    _back,
    _compute,
    _data_format,
    _dims,
    _filter_dims,
    _Geometry,
    _in,
    _nhwc,
    _out_shape,
    _padding,
    _patches,
    _rank4,
    _same_dtype,
    _sequence,
    _spatial,
    _work_dtype,
    conv2d,
)

__all__ = ["depthwise_conv2d", "depthwise_conv2d_native",
           "depthwise_conv2d_native_backprop_filter", "depthwise_conv2d_native_backprop_input",
           "separable_conv2d"]


def _dw_check(xn: np.ndarray, w: np.ndarray, op: str) -> None:
    _rank4(xn, "input", op)
    _rank4(w, "filter", op)
    if xn.shape[3] != w.shape[2]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: input depth {xn.shape[3]} does not match the filter's "
            f"in_channels {w.shape[2]} (filter shape {list(w.shape)})")


def _dw_forward(xn: np.ndarray, w: np.ndarray, g: _Geometry) -> np.ndarray:
    """The depthwise convolution of NHWC ``xn`` with ``w`` ``[kh, kw, C, M]``:
    ``[N, oh, ow, C * M]``, one batched GEMM per channel over the im2col patches."""
    n, c, m = xn.shape[0], xn.shape[3], w.shape[3]
    taps, rows = g.kh * g.kw, g.oh * g.ow
    w3 = w.reshape(taps, c, m)
    y = np.empty((n * rows, c, m), xn.dtype)
    for n0, nb in g.chunks(n, taps * c * max(m, 1), _BIG_CHUNK_ELEMENTS):
        p = _patches(xn, g, n0, nb, None).reshape(-1, taps, c)
        r0 = n0 * rows
        # out[r, c, m] = sum_k patch[r, k, c] * filter[k, c, m]: one GEMM per channel
        y[r0:r0 + p.shape[0]] = np.matmul(p.transpose(2, 0, 1), w3.transpose(1, 0, 2)
                                          ).transpose(1, 0, 2)
    return y.reshape(n, g.oh, g.ow, c * m)


def _dw_filter_grad(xn: np.ndarray, d: np.ndarray, g: _Geometry, m: int) -> np.ndarray:
    """d(depthwise)/d(filter) for NHWC input ``xn`` and output gradient ``d``
    ``[N, oh, ow, C * M]``: ``[kh, kw, C, M]``."""
    n, c = xn.shape[0], xn.shape[3]
    taps, rows = g.kh * g.kw, g.oh * g.ow
    d3 = d.reshape(n * rows, c, m)
    dw = np.zeros((c, taps, m), xn.dtype)
    for n0, nb in g.chunks(n, taps * c * max(m, 1), _BIG_CHUNK_ELEMENTS):
        r0, r1 = n0 * rows, (n0 + nb) * rows
        p = _patches(xn, g, n0, nb, None).reshape(-1, taps, c)
        dw += np.matmul(p.transpose(2, 1, 0), d3[r0:r1].transpose(1, 0, 2))   # [c, k, m]
    return dw.transpose(1, 0, 2).reshape(g.kh, g.kw, c, m)


def _dw_input_grad(d: np.ndarray, w: np.ndarray, g: _Geometry,
                   x_shape: tuple[int, ...]) -> np.ndarray:
    """d(depthwise)/d(input): the output gradient ``d`` ``[N, oh, ow, C * M]`` through the
    filter ``[kh, kw, C, M]``, scattered back (col2im) into ``x_shape``."""
    n, c, m = x_shape[0], x_shape[3], w.shape[3]
    taps, rows = g.kh * g.kw, g.oh * g.ow
    w3 = w.reshape(taps, c, m)
    d3 = d.reshape(n * rows, c, m)
    dx = np.zeros(x_shape, d.dtype)
    for n0, nb in g.chunks(n, taps * c * max(m, 1), _BIG_CHUNK_ELEMENTS):
        r0, r1 = n0 * rows, (n0 + nb) * rows
        dp = np.matmul(d3[r0:r1].transpose(1, 0, 2), w3.transpose(1, 2, 0))   # [c, r, k]
        cols = np.ascontiguousarray(dp.transpose(1, 2, 0)).reshape(r1 - r0, taps * c)
        _k.col2im(cols, dx, n0, *g.args())
    return dx


def _depthwise(needs: Any, x: Any, f: Any, fmt: str, strides: tuple[int, int],
               rate: tuple[int, int], padding: str, dtype: np.dtype) -> Any:
    op = "DepthwiseConv2dNative"
    cd = _compute(dtype)
    xn, w = _nhwc(x, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _dw_check(xn, w, op)
    g = _Geometry(op, xn.shape[1:3], w.shape[:2], strides, rate, padding, None)
    out = _back(_dw_forward(xn, w, g), fmt, dtype)

    def grad(dy: Any) -> tuple[Any, Any]:
        d = _nhwc(dy, fmt, cd)
        dx = _back(_dw_input_grad(d, w, g, xn.shape), fmt, dtype) if 0 in needs else None
        dw = _dw_filter_grad(xn, d, g, w.shape[3]).astype(dtype) if 1 in needs else None
        return dx, dw
    return out, grad


def depthwise_conv2d(input: Any, filter: Any, strides: Any, padding: str, rate: Any = None,
                     name: str | None = None, data_format: str | None = None,
                     dilations: Any = None) -> Tensor:
    """A depthwise 2-D convolution, as TF1's ``tf.nn.depthwise_conv2d``: each input channel
    is convolved with its own ``channel_multiplier`` filters,
    ``output[b, i, j, k * channel_multiplier + q] = sum_{di, dj} input[b, s_h * i + rate_h * di
    - pad_top, s_w * j + rate_w * dj - pad_left, k] * filter[di, dj, k, q]``.

    Args:
        input: float ``[batch, height, width, in_channels]`` (NHWC) or NCHW.
        filter: ``[height, width, in_channels, channel_multiplier]``, the input's dtype.
        strides: 4 ints (or an int, 1 or 2 ints), 1 in the batch and channel dimensions.
        padding: ``"SAME"`` or ``"VALID"``.
        rate: 2 ints (default 1): the dilation of atrous convolution; above 1, the strides
            must be 1 (``dilations`` is its TF2 name).
        name: The op name (default ``"depthwise"``).
        data_format: ``"NHWC"`` (default) or ``"NCHW"``.

    Returns:
        A Tensor of the input's dtype, ``[batch, out_height, out_width, in_channels *
        channel_multiplier]`` (NHWC; NCHW likewise), with TF's SAME/VALID sizes for the
        dilated window. Gradients flow to input and filter.

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``strides`` or ``rate``, strides
            above 1 with a rate above 1, or input and filter depths that differ.
        TypeError: a non-float input, or a filter of another dtype.
    """
    op = "depthwise_conv2d"
    fmt = _data_format(data_format, op)
    mode, _ = _padding(padding, op)
    ci = 3 if fmt == "NHWC" else 1
    st = _spatial(_sequence(strides, ci, "strides", op), fmt, "strides", op)
    r = rate if rate is not None else dilations
    rt = (1, 1) if r is None else tuple(int(v) for v in (
        [r, r] if isinstance(r, (int, np.integer)) else r))
    if len(rt) != 2 or min(rt) < 1:
        raise ValueError(f"{op}: rate must be 2 positive ints; got {r!r}")
    if max(rt) > 1 and max(st) > 1:
        raise ValueError(f"{op}: strides > 1 not supported in conjunction with rate > 1; got "
                         f"strides {list(st)} and rate {list(rt)}")
    x = _in(input)
    dt = _work_dtype(x, op)
    f = _same_dtype(filter, dt)
    fd = _filter_dims(f, op)
    xd = _dims(x)
    if xd is not None and len(xd) == 4 and xd[ci] is not None and fd[2] is not None \
            and xd[ci] != fd[2]:
        raise ValueError(f"{op}: input depth {xd[ci]} does not match the filter's "
                         f"in_channels {fd[2]} (filter shape {fd})")
    out_c = None if fd[2] is None or fd[3] is None else fd[2] * fd[3]
    shape = _out_shape(xd, fmt, (fd[0], fd[1]), st, (rt[0], rt[1]), mode, None, out_c, op)
    return _lib.apply_op("depthwise", name, [x, f], _depthwise, dt, shape, fmt=fmt,
                         strides=st, rate=(rt[0], rt[1]), padding=mode, dtype=dt)


def separable_conv2d(input: Any, depthwise_filter: Any, pointwise_filter: Any, strides: Any,
                     padding: str, rate: Any = None, name: str | None = None,
                     data_format: str | None = None, dilations: Any = None) -> Tensor:
    """A depthwise convolution followed by a pointwise (1x1) one, as TF1's
    ``tf.nn.separable_conv2d``: ``conv2d(depthwise_conv2d(input, depthwise_filter, strides,
    padding, rate), pointwise_filter, [1, 1, 1, 1], "VALID")``.

    Args:
        input: float ``[batch, height, width, in_channels]`` (NHWC) or NCHW.
        depthwise_filter: ``[height, width, in_channels, channel_multiplier]``.
        pointwise_filter: ``[1, 1, in_channels * channel_multiplier, out_channels]``.
        strides, padding, rate, data_format: as :func:`depthwise_conv2d`'s
            (``dilations`` is ``rate``'s TF2 name).
        name: The op name (default ``"separable_conv2d"``).

    Returns:
        ``[batch, out_height, out_width, out_channels]`` (NHWC; NCHW likewise), the input's
        dtype; gradients flow to the input and both filters.

    Raises:
        ValueError: a pointwise filter that is not 1x1, and :func:`depthwise_conv2d`'s and
            :func:`conv2d`'s errors.
    """
    pd = _filter_dims(pointwise_filter, "separable_conv2d")
    if pd[0] not in (None, 1) or pd[1] not in (None, 1):
        raise ValueError(f"separable_conv2d: pointwise_filter must be [1, 1, in_channels * "
                         f"channel_multiplier, out_channels]; got shape {pd}")
    depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding,
                                 rate=rate if rate is not None else dilations,
                                 data_format=data_format)
    return conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], "VALID",
                  data_format="NHWC" if data_format is None else data_format,
                  name=name or "separable_conv2d")


# ---- depthwise_conv2d_native and its backprops (TF's gen_nn_ops) ------------------------------


def _native_args(op: str, strides: Any, padding: Any, data_format: Any, dilations: Any
                 ) -> tuple[str, str, tuple[int, int], tuple[int, int]]:
    fmt = _data_format(data_format, op)
    mode, _ = _padding(padding, op)
    ci = 3 if fmt == "NHWC" else 1
    st = _spatial(_sequence(strides, ci, "strides", op), fmt, "strides", op)
    dl = _spatial(_sequence(dilations, ci, "dilations", op), fmt, "dilations", op)
    return fmt, mode, st, dl


def depthwise_conv2d_native(input: Any, filter: Any, strides: Any, padding: Any,
                            data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1),
                            name: str | None = None) -> Tensor:
    """TF's DepthwiseConv2dNative op, as ``tf.nn.depthwise_conv2d_native``: the depthwise
    convolution of :func:`depthwise_conv2d` with the op's own attributes
    (``output[b, i, j, k * channel_multiplier + q] = sum_{di, dj} input[b, s_h * i + d_h * di
    - pad_top, s_w * j + d_w * dj - pad_left, k] * filter[di, dj, k, q]``).

    Args:
        input: float ``[batch, height, width, in_channels]`` (NHWC) or NCHW.
        filter: ``[height, width, in_channels, channel_multiplier]``, the input's dtype.
        strides: 4 ints in ``data_format``'s order, 1 in the batch and channel dimensions
            (or an int, or 2 ints).
        padding: ``"SAME"`` or ``"VALID"``.
        data_format: ``"NHWC"`` (default) or ``"NCHW"``.
        dilations: as ``strides`` (default 1).
        name: The op name (default ``"DepthwiseConv2dNative"``).

    Returns:
        ``[batch, out_height, out_width, in_channels * channel_multiplier]`` (NHWC; NCHW
        likewise), the input's dtype; gradients flow to input and filter (TF's
        DepthwiseConv2dNativeBackpropInput / BackpropFilter).

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``strides`` or ``dilations``, input
            and filter depths that differ.
        TypeError: a non-float input, or a filter of another dtype.
        InvalidArgumentError (at run): the same found at run time.
    """
    op = "depthwise_conv2d_native"
    fmt, mode, st, dl = _native_args(op, strides, padding, data_format, dilations)
    x = _in(input)
    dt = _work_dtype(x, op)
    f = _same_dtype(filter, dt)
    fd = _filter_dims(f, op)
    xd = _dims(x)
    ci = 3 if fmt == "NHWC" else 1
    if xd is not None and len(xd) == 4 and xd[ci] is not None and fd[2] is not None \
            and xd[ci] != fd[2]:
        raise ValueError(f"{op}: input depth {xd[ci]} does not match the filter's "
                         f"in_channels {fd[2]} (filter shape {fd})")
    out_c = None if fd[2] is None or fd[3] is None else fd[2] * fd[3]
    shape = _out_shape(xd, fmt, (fd[0], fd[1]), st, dl, mode, None, out_c, op)
    return _lib.apply_op("DepthwiseConv2dNative", name, [x, f], _depthwise, dt, shape,
                         fmt=fmt, strides=st, rate=dl, padding=mode, dtype=dt)


def _native_geometry(op: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                     d: np.ndarray, strides: tuple[int, int], dilations: tuple[int, int],
                     padding: str) -> _Geometry:
    """The geometry of a backprop, checked against the output gradient ``d`` (NHWC)."""
    if len(x_shape) != 4 or len(w_shape) != 4 or x_shape[3] != w_shape[2] \
            or d.shape[3] != w_shape[2] * w_shape[3] or d.shape[0] != x_shape[0]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: input shape {list(x_shape)} (NHWC), filter shape "
            f"{list(w_shape)} and out_backprop shape {list(d.shape)} (NHWC) do not agree")
    g = _Geometry(op, x_shape[1:3], w_shape[:2], strides, dilations, padding, None)
    if (g.oh, g.ow) != d.shape[1:3]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: size of out_backprop doesn't match computed: actual = "
            f"{list(d.shape[1:3])}, computed = {[g.oh, g.ow]}")
    return g


def _native_input(needs: Any, sizes: Any, f: Any, dy: Any, fmt: str,
                  strides: tuple[int, int], dilations: tuple[int, int], padding: str,
                  dtype: np.dtype) -> Any:
    op = "DepthwiseConv2dNativeBackpropInput"
    cd = _compute(dtype)
    d, w = _nhwc(dy, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _rank4(d, "out_backprop", op)
    _rank4(w, "filter", op)
    s = [int(v) for v in np.asarray(sizes).reshape(-1)]
    x_shape = tuple(s) if fmt == "NHWC" or len(s) != 4 else (s[0], s[2], s[3], s[1])
    g = _native_geometry(op, x_shape, w.shape, d, strides, dilations, padding)
    dx = _back(_dw_input_grad(d, w, g, x_shape), fmt, dtype)

    def grad(dz: Any) -> tuple[None, Any, Any]:
        z = _nhwc(dz, fmt, cd)
        dw = _dw_filter_grad(z, d, g, w.shape[3]).astype(dtype) if 1 in needs else None
        dd = _back(_dw_forward(z, w, g), fmt, dtype) if 2 in needs else None
        return None, dw, dd
    return dx, grad


def depthwise_conv2d_native_backprop_input(input_sizes: Any, filter: Any, out_backprop: Any,
                                           strides: Any, padding: Any,
                                           data_format: str = "NHWC",
                                           dilations: Any = (1, 1, 1, 1),
                                           name: str | None = None) -> Tensor:
    """The gradient of :func:`depthwise_conv2d_native` with respect to its input, for an
    input of shape ``input_sizes``, as TF1's ``tf.nn.depthwise_conv2d_native_backprop_input``.

    Args:
        input_sizes: 4 ints (a list or a 1-D int Tensor): the input's shape, in
            ``data_format``'s order.
        filter: ``[height, width, in_channels, channel_multiplier]``.
        out_backprop: the output's gradient, the forward op's output shape.
        strides, padding, data_format, dilations: as :func:`depthwise_conv2d_native`'s.
        name: The op name (default ``"DepthwiseConv2dNativeBackpropInput"``).

    Returns:
        A Tensor of ``out_backprop``'s dtype and shape ``input_sizes``; differentiable in
        ``filter`` and ``out_backprop`` (TF's nn_grad.py gradients of this op).

    Raises:
        ValueError: the forward op's argument errors; ``input_sizes`` not of 4 entries.
        InvalidArgumentError (at run): shapes that do not agree.
    """
    op = "depthwise_conv2d_native_backprop_input"
    fmt, mode, st, dl = _native_args(op, strides, padding, data_format, dilations)
    dy = _in(out_backprop)
    dt = _work_dtype(dy, op)
    f = _same_dtype(filter, dt)
    sizes, known = _sizes(input_sizes, "input_sizes")
    return _lib.apply_op("DepthwiseConv2dNativeBackpropInput", name, [sizes, f, dy],
                         _native_input, dt, known, fmt=fmt, strides=st, dilations=dl,
                         padding=mode, dtype=dt)


def _native_filter(needs: Any, x: Any, sizes: Any, dy: Any, fmt: str,
                   strides: tuple[int, int], dilations: tuple[int, int], padding: str,
                   dtype: np.dtype) -> Any:
    op = "DepthwiseConv2dNativeBackpropFilter"
    cd = _compute(dtype)
    xn, d = _nhwc(x, fmt, cd), _nhwc(dy, fmt, cd)
    _rank4(xn, "input", op)
    _rank4(d, "out_backprop", op)
    fs = tuple(int(v) for v in np.asarray(sizes).reshape(-1))
    g = _native_geometry(op, xn.shape, fs, d, strides, dilations, padding)
    dw = _dw_filter_grad(xn, d, g, fs[3]).astype(dtype)

    def grad(dz: Any) -> tuple[Any, None, Any]:
        w = np.ascontiguousarray(dz, dtype=cd).reshape(fs)
        dx = _back(_dw_input_grad(d, w, g, xn.shape), fmt, dtype) if 0 in needs else None
        dd = _back(_dw_forward(xn, w, g), fmt, dtype) if 2 in needs else None
        return dx, None, dd
    return dw, grad


def depthwise_conv2d_native_backprop_filter(input: Any, filter_sizes: Any,
                                            out_backprop: Any, strides: Any, padding: Any,
                                            data_format: str = "NHWC",
                                            dilations: Any = (1, 1, 1, 1),
                                            name: str | None = None) -> Tensor:
    """The gradient of :func:`depthwise_conv2d_native` with respect to a filter of shape
    ``filter_sizes``, as TF1's ``tf.nn.depthwise_conv2d_native_backprop_filter``.

    Args:
        input: float ``[batch, height, width, in_channels]`` (NHWC) or NCHW.
        filter_sizes: 4 ints (a list or a 1-D int Tensor):
            ``[height, width, in_channels, channel_multiplier]``.
        out_backprop: the output's gradient, the forward op's output shape.
        strides, padding, data_format, dilations: as :func:`depthwise_conv2d_native`'s.
        name: The op name (default ``"DepthwiseConv2dNativeBackpropFilter"``).

    Returns:
        A Tensor of the input's dtype and shape ``filter_sizes``; differentiable in
        ``input`` and ``out_backprop``.

    Raises:
        ValueError: the forward op's argument errors; ``filter_sizes`` not of 4 entries.
        TypeError: ``out_backprop`` of another dtype than ``input``.
        InvalidArgumentError (at run): shapes that do not agree.
    """
    op = "depthwise_conv2d_native_backprop_filter"
    fmt, mode, st, dl = _native_args(op, strides, padding, data_format, dilations)
    x = _in(input)
    dt = _work_dtype(x, op)
    dy = _same_dtype(out_backprop, dt)
    sizes, known = _sizes(filter_sizes, "filter_sizes")
    xd = _dims(x)
    if known[2] is None and xd is not None and len(xd) == 4:
        known[2] = xd[3 if fmt == "NHWC" else 1]
    return _lib.apply_op("DepthwiseConv2dNativeBackpropFilter", name, [x, sizes, dy],
                         _native_filter, dt, known, fmt=fmt, strides=st, dilations=dl,
                         padding=mode, dtype=dt)
