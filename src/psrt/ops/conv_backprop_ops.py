"""TF1's ``tf.nn.conv2d_backprop_input`` and ``tf.nn.conv2d_backprop_filter``
(tensorflow/python/ops/nn_ops.py, r1.15): the two gradients of :func:`conv2d` as ops of
their own, with conv2d's attributes (strides, dilations, SAME/VALID/explicit padding,
NHWC/NCHW). Both are differentiable, as TF's (nn_grad.py ``_Conv2DBackpropInputGrad``,
``_Conv2DBackpropFilterGrad``); the arithmetic is psrt/ops/conv_ops.py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor
from psrt.ops.conv_ops import (
    _back,
    _compute,
    _conv2d_transpose,
    _conv_args,
    _conv_filter_grad,
    _conv_forward,
    _conv_input_grad,
    _dims,
    _Geometry,
    _in,
    _nhwc,
    _rank4,
    _same_dtype,
    _work_dtype,
)

__all__ = ["conv2d_backprop_filter", "conv2d_backprop_input"]


def _sizes(sizes: Any, what: str) -> tuple[Any, list[int | None]]:
    """(graph input, known dims) of a 4-entry int shape argument."""
    c = _lib.constant_value(sizes)
    if c is not None:
        known = [int(d) for d in np.asarray(c).reshape(-1)]
        if len(known) != 4:
            raise ValueError(f"{what} must have 4 entries; got {known}")
        return constant(np.asarray(known, np.int32)), list(known)
    return sizes, [None] * 4


def conv2d_backprop_input(input_sizes: Any, filter: Any = None, out_backprop: Any = None,
                          strides: Any = None, padding: Any = None,
                          use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                          dilations: Any = (1, 1, 1, 1), name: str | None = None,
                          filters: Any = None) -> Tensor:
    """The gradient of ``conv2d(input, filter, strides, padding, ...)`` with respect to its
    input, for an input of shape ``input_sizes``, as TF1's ``tf.nn.conv2d_backprop_input``.

    Args:
        input_sizes: 4 ints (a list or a 1-D int Tensor): the input's shape, in
            ``data_format``'s order.
        filter: ``[height, width, in_channels, out_channels]`` (``filters``: TF2's name).
        out_backprop: the output's gradient, conv2d's output shape.
        strides, padding, data_format, dilations: as :func:`psrt.nn.conv2d`'s.
        use_cudnn_on_gpu: Accepted and ignored.
        name: The op name (default ``"Conv2DBackpropInput"``).

    Returns:
        A Tensor of ``out_backprop``'s dtype and shape ``input_sizes``.

    Raises:
        ValueError: conv2d's argument errors; ``input_sizes`` not of 4 entries.
        InvalidArgumentError (at run): shapes that do not agree (TF's "size of out_backprop
            doesn't match computed").
    """
    op = "conv2d_backprop_input"
    filter = filters if filter is None else filter
    fmt, mode, st, dl, pads = _conv_args(op, strides, padding, data_format, dilations)
    dy = _in(out_backprop)
    dt = _work_dtype(dy, op)
    f = _same_dtype(filter, dt)
    sizes, known = _sizes(input_sizes, "input_sizes")
    return _lib.apply_op("Conv2DBackpropInput", name, [dy, f, sizes], _conv2d_transpose, dt,
                         known, fmt=fmt, strides=st, padding=mode, dtype=dt, dilations=dl,
                         pads=pads)


def _backprop_filter(needs: Any, x: Any, sizes: Any, dy: Any, fmt: str,
                     strides: tuple[int, int], dilations: tuple[int, int], padding: str,
                     pads: Any, dtype: np.dtype) -> Any:
    op = "Conv2DBackpropFilter"
    cd = _compute(dtype)
    xn, d = _nhwc(x, fmt, cd), _nhwc(dy, fmt, cd)
    _rank4(xn, "input", op)
    _rank4(d, "out_backprop", op)
    fs = tuple(int(v) for v in np.asarray(sizes).reshape(-1))
    if len(fs) != 4 or fs[2] != xn.shape[3] or fs[3] != d.shape[3] or xn.shape[0] != d.shape[0]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: filter_sizes {list(fs)}, input shape {list(np.shape(x))} and "
            f"out_backprop shape {list(np.shape(dy))} do not agree")
    g = _Geometry(op, xn.shape[1:3], fs[:2], strides, dilations, padding, pads)
    if (g.oh, g.ow) != d.shape[1:3]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: size of out_backprop doesn't match computed: actual = "
            f"{list(d.shape[1:3])}, computed = {[g.oh, g.ow]}")
    dw = _conv_filter_grad(xn, d, g).reshape(fs).astype(dtype)

    def grad(dz: Any) -> tuple[Any, None, Any]:
        gm = np.ascontiguousarray(dz, dtype=cd).reshape(-1, fs[3])
        dx = (_back(_conv_input_grad(d, gm, g, xn.shape), fmt, dtype) if 0 in needs
              else None)
        ddy = _back(_conv_forward(xn, gm, g), fmt, dtype) if 2 in needs else None
        return dx, None, ddy
    return dw, grad


def conv2d_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any, strides: Any,
                           padding: Any, use_cudnn_on_gpu: bool = True,
                           data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1),
                           name: str | None = None) -> Tensor:
    """The gradient of ``conv2d(input, filter, strides, padding, ...)`` with respect to a
    filter of shape ``filter_sizes``, as TF1's ``tf.nn.conv2d_backprop_filter``.

    Args:
        input: float ``[batch, height, width, in_channels]`` (NHWC) or NCHW.
        filter_sizes: 4 ints (a list or a 1-D int Tensor):
            ``[height, width, in_channels, out_channels]``.
        out_backprop: the output's gradient, conv2d's output shape.
        strides, padding, data_format, dilations: as :func:`psrt.nn.conv2d`'s.
        use_cudnn_on_gpu: Accepted and ignored.
        name: The op name (default ``"Conv2DBackpropFilter"``).

    Returns:
        A Tensor of the input's dtype and shape ``filter_sizes``.

    Raises:
        ValueError: conv2d's argument errors; ``filter_sizes`` not of 4 entries.
        TypeError: ``out_backprop`` of another dtype than ``input``.
        InvalidArgumentError (at run): shapes that do not agree.
    """
    op = "conv2d_backprop_filter"
    fmt, mode, st, dl, pads = _conv_args(op, strides, padding, data_format, dilations)
    x = _in(input)
    dt = _work_dtype(x, op)
    dy = _same_dtype(out_backprop, dt)
    sizes, known = _sizes(filter_sizes, "filter_sizes")
    xd = _dims(x)
    ci = 3 if fmt == "NHWC" else 1
    if known[2] is None and xd is not None and len(xd) == 4:
        known[2] = xd[ci]
    return _lib.apply_op("Conv2DBackpropFilter", name, [x, sizes, dy], _backprop_filter, dt,
                         known, fmt=fmt, strides=st, dilations=dl, padding=mode, pads=pads,
                         dtype=dt)
