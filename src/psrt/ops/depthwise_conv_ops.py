"""TF1's depthwise and separable convolutions (tensorflow/python/ops/nn_impl.py, r1.15) as
graph ops: ``depthwise_conv2d`` (each input channel convolved with its own filters; the
patches of psrt/ops/_conv_kernels.pyx's im2col times the filter, one batched GEMM per channel)
and ``separable_conv2d`` (a depthwise convolution, then a 1x1 :func:`conv2d`). Window sizes,
padding and layouts as psrt/ops/conv_ops.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.ops import _conv_kernels as _k
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

__all__ = ["depthwise_conv2d", "separable_conv2d"]


def _depthwise(needs: Any, x: Any, f: Any, fmt: str, strides: tuple[int, int],
               rate: tuple[int, int], padding: str, dtype: np.dtype) -> Any:
    op = "DepthwiseConv2dNative"
    cd = _compute(dtype)
    xn, w = _nhwc(x, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _rank4(xn, "input", op)
    _rank4(w, "filter", op)
    n, c, m = xn.shape[0], xn.shape[3], w.shape[3]
    if c != w.shape[2]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: input depth {c} does not match the filter's in_channels "
            f"{w.shape[2]} (filter shape {list(w.shape)})")
    g = _Geometry(op, xn.shape[1:3], w.shape[:2], strides, rate, padding, None)
    taps = g.kh * g.kw
    w3 = w.reshape(taps, c, m)
    rows = g.oh * g.ow
    y = np.empty((n * rows, c, m), cd)
    # the depthwise GEMMs are batched over channels: their chunks keep their former size
    # (1 MB chunks were measured for conv2d only)
    for n0, nb in g.chunks(n, taps * c * max(m, 1), _BIG_CHUNK_ELEMENTS):
        p = _patches(xn, g, n0, nb, None).reshape(-1, taps, c)
        r0 = n0 * rows
        # out[r, c, m] = sum_k patch[r, k, c] * filter[k, c, m]: one GEMM per channel
        y[r0:r0 + p.shape[0]] = np.matmul(p.transpose(2, 0, 1), w3.transpose(1, 0, 2)
                                          ).transpose(1, 0, 2)
    out = _back(y.reshape(n, g.oh, g.ow, c * m), fmt, dtype)

    def grad(dy: Any) -> tuple[Any, Any]:
        d = _nhwc(dy, fmt, cd).reshape(n * rows, c, m)
        dx = np.zeros(xn.shape, cd) if 0 in needs else None
        dw = np.zeros((c, taps, m), cd) if 1 in needs else None
        for n0, nb in g.chunks(n, taps * c * max(m, 1), _BIG_CHUNK_ELEMENTS):
            r0, r1 = n0 * rows, (n0 + nb) * rows
            dc = d[r0:r1].transpose(1, 0, 2)          # [c, r, m]
            if dw is not None:
                p = _patches(xn, g, n0, nb, None).reshape(-1, taps, c)
                dw += np.matmul(p.transpose(2, 1, 0), dc)       # [c, k, m]
            if dx is not None:
                dp = np.matmul(dc, w3.transpose(1, 2, 0))      # [c, r, k]
                cols = np.ascontiguousarray(dp.transpose(1, 2, 0)).reshape(r1 - r0, taps * c)
                _k.col2im(cols, dx, n0, *g.args())
        return (None if dx is None else _back(dx, fmt, dtype),
                None if dw is None else dw.transpose(1, 0, 2).reshape(w.shape).astype(dtype))
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
