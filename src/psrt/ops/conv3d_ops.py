"""TF1's 3-D convolutions (tensorflow/python/ops/nn_ops.py, r1.15) as graph ops over numpy:
``conv3d`` (NDHWC and NCDHW, strides, dilations, SAME/VALID), ``conv3d_transpose``, and
``convolution`` for 1, 2 and 3 spatial dimensions; the 3-D window geometry the 3-D pooling
ops (psrt/ops/pooling3d_ops.py) share.

As the 2-D ops (psrt/ops/conv_ops.py), through BLAS: the patches of a chunk of volumes are
the rows of one matrix (vol2col, psrt/ops/_conv_kernels.pyx) multiplied by the filter
reshaped to ``[kd * kh * kw * in_channels, out_channels]`` with ``np.matmul``; the input
gradient is the product with the filter's transpose scattered back (col2vol), the filter
gradient the patches' transpose times the output gradient (TF's Conv3DBackpropInputV2 /
Conv3DBackpropFilterV2). NCDHW values are transposed to NDHWC around the same kernels.
Output sizes and padding per spatial axis are conv_ops's (TF's
GetWindowedOutputSizeVerboseV2): SAME pads the smaller half before.

TF r1.15's CPU kernels refuse dilations above 1 and NCDHW (its tests run those on GPUs
only); psrt computes both, with the same arithmetic.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.ops import _conv_kernels as _k
from psrt.ops.conv_ops import (
    _CHUNK_ELEMENTS,
    _compute,
    _dims,
    _in,
    _output_shape_arg,
    _padding,
    _same_dtype,
    _window,
    _work_dtype,
    conv1d,
    conv2d,
)

__all__ = ["conv3d", "conv3d_transpose", "convolution"]

_FORMATS3 = ("NDHWC", "NCDHW")


# ---- arguments -------------------------------------------------------------------------------


def _data_format3(data_format: Any, op: str) -> str:
    fmt = "NDHWC" if data_format is None else data_format
    if fmt not in _FORMATS3:
        raise ValueError(f"{op}: data_format must be one of "
                         f"{', '.join(map(repr, _FORMATS3))}; got {data_format!r}")
    return str(fmt)


def _sequence3(value: Any, fmt: str, name: str, op: str) -> tuple[int, int, int]:
    """The (depth, height, width) entries of a 5-entry NDHWC/NCDHW attribute given as an int
    or 1, 3 or 5 ints (TF's ``_get_sequence``); the batch and channel entries must be 1 (TF:
    "does not yet support strides in the batch and depth dimensions").

    Raises:
        ValueError: another length, entries not 1 in the batch and channel dimensions, or
            spatial entries below 1 (naming the attribute and the value)."""
    if value is None:
        return 1, 1, 1
    vals = [int(value)] if isinstance(value, (int, np.integer)) else [int(v) for v in value]
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) == 3:
        spatial = vals
    elif len(vals) == 5:
        n, c = (vals[0], vals[4]) if fmt == "NDHWC" else (vals[0], vals[1])
        if n != 1 or c != 1:
            raise ValueError(f"{op}: {name} {vals} must be 1 in the batch and depth "
                             f"dimensions (data_format {fmt})")
        spatial = vals[1:4] if fmt == "NDHWC" else vals[2:5]
    else:
        raise ValueError(f"{op}: {name} should be of length 1, 3 or 5 but was {len(vals)}: "
                         f"{value!r}")
    if min(spatial) < 1:
        raise ValueError(f"{op}: {name} {vals} must be positive")
    return spatial[0], spatial[1], spatial[2]


def _filter_dims5(f: Any, op: str) -> list[int | None]:
    d = _dims(f)
    if d is None:
        return [None] * 5
    if len(d) != 5:
        raise ValueError(f"{op}: filter must be 5-dimensional; got shape {d}")
    return d


def _ndhwc(x: Any, fmt: str, dt: np.dtype) -> np.ndarray:
    a = np.asarray(x)
    if fmt == "NCDHW":
        if a.ndim != 5:
            raise _errors.InvalidArgumentError(None, None, f"input must be 5-dimensional; "
                                               f"got shape {list(a.shape)}")
        a = a.transpose(0, 2, 3, 4, 1)
    return np.ascontiguousarray(a, dtype=dt)


def _back3(y: np.ndarray, fmt: str, dt: np.dtype) -> np.ndarray:
    if fmt == "NCDHW":
        y = y.transpose(0, 4, 1, 2, 3)
    return np.ascontiguousarray(y, dtype=dt)


def _rank5(a: np.ndarray, what: str, op: str) -> None:
    if a.ndim != 5:
        raise _errors.InvalidArgumentError(None, None, f"{op}: {what} must be 5-dimensional; "
                                           f"got shape {list(a.shape)}")


class _Geometry3:
    """Where the windows of one 3-D convolution or pooling lie over a NDHWC input of spatial
    size (D, H, W): window, strides, dilations, output size and padding before, per axis."""

    def __init__(self, op: str, dhw: tuple[int, ...], k: tuple[int, ...],
                 strides: tuple[int, ...], dilations: tuple[int, ...], padding: str) -> None:
        self.k = tuple(int(v) for v in k)
        self.s = tuple(int(v) for v in strides)
        self.d = tuple(int(v) for v in dilations)
        outs, pads = [], []
        for i in range(3):
            o, p = _window(int(dhw[i]), self.k[i], self.s[i], self.d[i], padding, None, op)
            assert o is not None
            outs.append(o)
            pads.append(p)
        self.out = (outs[0], outs[1], outs[2])
        self.pad = (pads[0], pads[1], pads[2])
        self.dhw = (int(dhw[0]), int(dhw[1]), int(dhw[2]))

    def window(self) -> tuple[int, ...]:
        """(kernel d, h, w, stride d, h, w, dilation d, h, w, pad front, top, left): the
        geometry the compiled 3-D pooling kernels take."""
        return (*self.k, *self.s, *self.d, *self.pad)

    def args(self) -> tuple[int, ...]:
        """:meth:`window` and the output size: what vol2col/col2vol take."""
        return (*self.window(), *self.out)

    def per_volume(self) -> int:
        """Output positions of one volume (od * oh * ow): the patch-matrix rows per image."""
        return self.out[0] * self.out[1] * self.out[2]

    def pointwise(self) -> bool:
        """A 1x1x1 window at stride 1 without padding: the patches are the input itself."""
        return (self.k == (1, 1, 1) and self.s == (1, 1, 1) and self.pad == (0, 0, 0)
                and self.out == self.dhw)

    def chunks(self, n: int, k: int) -> Iterator[tuple[int, int]]:
        """(first volume, volume count) chunks of ``n`` volumes, ``k`` patch columns."""
        per = max(1, self.per_volume() * max(k, 1))
        step = max(1, _CHUNK_ELEMENTS // per)
        for n0 in range(0, n, step):
            yield n0, min(step, n - n0)


def _out_shape3(x_dims: list[int | None] | None, fmt: str, k: tuple[Any, ...],
                strides: tuple[int, ...], dilations: tuple[int, ...], padding: str,
                channels: Any, op: str) -> Any:
    """The static output shape of a 3-D window op over an input of ``x_dims``."""
    if x_dims is None:
        return None
    if len(x_dims) != 5:
        raise ValueError(f"{op}: input must be 5-dimensional; got shape {x_dims}")
    n, sp = (x_dims[0], x_dims[1:4]) if fmt == "NDHWC" else (x_dims[0], x_dims[2:5])
    out = [_window(sp[i], k[i], strides[i], dilations[i], padding, None, op)[0]
           for i in range(3)]
    return [n, *out, channels] if fmt == "NDHWC" else [n, channels, *out]


# ---- the numpy side --------------------------------------------------------------------------


def _patches3(x: np.ndarray, g: _Geometry3, n0: int, nb: int, buf: np.ndarray | None
              ) -> np.ndarray:
    """The vol2col matrix ``[nb * od * oh * ow, kd * kh * kw * C]`` of volumes n0 .. n0+nb."""
    if g.pointwise():
        return x[n0:n0 + nb].reshape(-1, x.shape[4])
    rows, cols = nb * g.per_volume(), g.k[0] * g.k[1] * g.k[2] * x.shape[4]
    out = (np.empty((rows, cols), x.dtype) if buf is None or buf.shape[0] < rows
           else buf[:rows])
    _k.vol2col(x, out, n0, *g.args())
    return out


def _conv3_forward(x: np.ndarray, wm: np.ndarray, g: _Geometry3) -> np.ndarray:
    """conv3d of NDHWC ``x`` with the filter matrix ``wm`` ``[kd * kh * kw * C, O]``."""
    y = np.empty((x.shape[0], *g.out, wm.shape[1]), x.dtype)
    y2 = y.reshape(-1, wm.shape[1])
    buf = None
    per = g.per_volume()
    for n0, nb in g.chunks(x.shape[0], wm.shape[0]):
        cols = _patches3(x, g, n0, nb, buf)
        buf = cols if not g.pointwise() else None
        np.matmul(cols, wm, out=y2[n0 * per:(n0 + nb) * per])
    return y


def _conv3_filter_grad(x: np.ndarray, dy: np.ndarray, g: _Geometry3) -> np.ndarray:
    """d(conv3d)/d(filter matrix): the patches' transpose times ``dy``, ``[K, O]``."""
    o = dy.shape[4]
    k = g.k[0] * g.k[1] * g.k[2] * x.shape[4]
    dw = np.zeros((k, o), x.dtype)
    dy2 = dy.reshape(-1, o)
    buf = None
    per = g.per_volume()
    for n0, nb in g.chunks(x.shape[0], k):
        cols = _patches3(x, g, n0, nb, buf)
        buf = cols if not g.pointwise() else None
        dw += cols.T @ dy2[n0 * per:(n0 + nb) * per]
    return dw


def _conv3_input_grad(dy: np.ndarray, wm: np.ndarray, g: _Geometry3,
                      x_shape: tuple[int, ...]) -> np.ndarray:
    """d(conv3d)/d(input): ``dy`` times the filter's transpose, scattered back (col2vol)."""
    dy2 = dy.reshape(-1, dy.shape[4])
    if g.pointwise():
        return (dy2 @ wm.T).reshape(x_shape)
    dx = np.zeros(x_shape, dy.dtype)
    buf = None
    per = g.per_volume()
    for n0, nb in g.chunks(x_shape[0], wm.shape[0]):
        r0, r1 = n0 * per, (n0 + nb) * per
        if buf is None or buf.shape[0] < r1 - r0:
            buf = np.empty((r1 - r0, wm.shape[0]), dy.dtype)
        dcols = buf[:r1 - r0]
        np.matmul(dy2[r0:r1], wm.T, out=dcols)
        _k.col2vol(dcols, dx, n0, *g.args())
    return dx


# ---- conv3d ----------------------------------------------------------------------------------


def _conv3d(needs: Any, x: Any, f: Any, fmt: str, strides: tuple[int, ...],
            dilations: tuple[int, ...], padding: str, dtype: np.dtype) -> Any:
    op = "Conv3D"
    cd = _compute(dtype)
    xn, w = _ndhwc(x, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _rank5(xn, "input", op)
    _rank5(w, "filter", op)
    if xn.shape[4] != w.shape[3]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: input depth {xn.shape[4]} does not match the filter's input "
            f"depth {w.shape[3]} (filter shape {list(w.shape)})")
    g = _Geometry3(op, xn.shape[1:4], w.shape[:3], strides, dilations, padding)
    wm = w.reshape(-1, w.shape[4])
    y = _back3(_conv3_forward(xn, wm, g), fmt, dtype)

    def grad(dy: Any) -> tuple[Any, Any]:
        d = _ndhwc(dy, fmt, cd)
        dx = (_back3(_conv3_input_grad(d, wm, g, xn.shape), fmt, dtype) if 0 in needs
              else None)
        dw = (_conv3_filter_grad(xn, d, g).reshape(w.shape).astype(dtype) if 1 in needs
              else None)
        return dx, dw
    return y, grad


def conv3d(input: Any, filter: Any = None, strides: Any = None, padding: Any = None,
           data_format: str = "NDHWC", dilations: Any = (1, 1, 1, 1, 1),
           name: str | None = None, filters: Any = None) -> Tensor:
    """A 3-D convolution (cross-correlation, the filter not flipped), as TF1's
    ``tf.nn.conv3d``.

    ``output[b, i, j, l, k] = sum_{di, dj, dl, q} input[b, i * s_d + di * d_d - pad_front,
    j * s_h + dj * d_h - pad_top, l * s_w + dl * d_w - pad_left, q] *
    filter[di, dj, dl, q, k]`` (zero outside the input).

    Args:
        input: float16/32/64 ``[batch, in_depth, in_height, in_width, in_channels]``
            (NDHWC) or ``[batch, in_channels, in_depth, in_height, in_width]`` (NCDHW).
        filter: ``[filter_depth, filter_height, filter_width, in_channels, out_channels]``,
            the input's dtype (``filters`` is its TF2 name).
        strides: 5 ints in ``data_format``'s order, 1 in the batch and channel dimensions
            (or an int, or 3 ints for depth, height, width).
        padding: ``"SAME"`` or ``"VALID"``.
        data_format: ``"NDHWC"`` (default) or ``"NCDHW"``.
        dilations: as ``strides`` (default 1): the spacing of the filter taps.
        name: The op name (default ``"Conv3D"``).

    Returns:
        A Tensor of the input's dtype: NDHWC ``[batch, out_depth, out_height, out_width,
        out_channels]`` (or NCDHW) with TF's SAME/VALID sizes per axis; its gradients are
        TF's Conv3DBackpropInputV2 / Conv3DBackpropFilterV2 (vol2col + GEMM, float64
        central differences in tests/test_conv3d_ops.py).

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``strides`` or ``dilations`` (the
            message names the value and the choices), a non-5-D input or filter, input and
            filter depths that differ when both are known.
        TypeError: a non-float input, or a filter of another dtype.
        InvalidArgumentError (at run): the same shape errors found at run time.
    """
    op = "conv3d"
    filter = filters if filter is None else filter
    if filter is None:
        raise ValueError("conv3d: filter must be given")
    fmt = _data_format3(data_format, op)
    mode, _ = _padding(padding, op)
    st = _sequence3(strides, fmt, "strides", op)
    dl = _sequence3(dilations, fmt, "dilations", op)
    x = _in(input)
    dt = _work_dtype(x, op)
    f = _same_dtype(filter, dt)
    fd = _filter_dims5(f, op)
    xd = _dims(x)
    ci = 4 if fmt == "NDHWC" else 1
    if xd is not None and len(xd) == 5 and xd[ci] is not None and fd[3] is not None \
            and xd[ci] != fd[3]:
        raise ValueError(f"conv3d: input depth {xd[ci]} does not match the filter's input "
                         f"depth {fd[3]} (filter shape {fd})")
    shape = _out_shape3(xd, fmt, tuple(fd[:3]), st, dl, mode, fd[4], op)
    return _lib.apply_op("Conv3D", name, [x, f], _conv3d, dt, shape, fmt=fmt, strides=st,
                         dilations=dl, padding=mode, dtype=dt)


# ---- conv3d_transpose ------------------------------------------------------------------------


def _conv3d_transpose(needs: Any, v: Any, f: Any, output_shape: Any, fmt: str,
                      strides: tuple[int, ...], dilations: tuple[int, ...], padding: str,
                      dtype: np.dtype) -> Any:
    op = "Conv3DBackpropInputV2"
    cd = _compute(dtype)
    dy, w = _ndhwc(v, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _rank5(dy, "value", op)
    _rank5(w, "filter", op)
    out = [int(d) for d in np.asarray(output_shape).reshape(-1)]
    if len(out) != 5:
        raise _errors.InvalidArgumentError(None, None, f"{op}: output_shape must have 5 "
                                           f"entries; got {out}")
    x_shape = tuple(out) if fmt == "NDHWC" else (out[0], out[2], out[3], out[4], out[1])
    if x_shape[4] != w.shape[3] or dy.shape[4] != w.shape[4] or x_shape[0] != dy.shape[0]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: output_shape {out}, value shape {list(np.shape(v))} and "
            f"filter shape {list(w.shape)} do not agree (filter is [depth, height, width, "
            f"output_channels, input_channels])")
    g = _Geometry3(op, x_shape[1:4], w.shape[:3], strides, dilations, padding)
    if g.out != dy.shape[1:4]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: size of out_backprop doesn't match computed: actual = "
            f"{list(dy.shape[1:4])}, computed = {list(g.out)} for output "
            f"{list(x_shape[1:4])}, filter {list(w.shape[:3])}, strides {list(strides)}, "
            f"padding {padding}")
    wm = w.reshape(-1, w.shape[4])
    y = _back3(_conv3_input_grad(dy, wm, g, x_shape), fmt, dtype)

    def grad(dz: Any) -> tuple[Any, Any, None]:
        d = _ndhwc(dz, fmt, cd)
        dv = _back3(_conv3_forward(d, wm, g), fmt, dtype) if 0 in needs else None
        dw = (_conv3_filter_grad(d, dy, g).reshape(w.shape).astype(dtype) if 1 in needs
              else None)
        return dv, dw, None
    return y, grad


def conv3d_transpose(value: Any = None, filter: Any = None, output_shape: Any = None,
                     strides: Any = None, padding: str = "SAME", data_format: str = "NDHWC",
                     name: str | None = None, input: Any = None, filters: Any = None,
                     dilations: Any = None) -> Tensor:
    """The transpose (input gradient) of :func:`conv3d`, as TF1's ``tf.nn.conv3d_transpose``.

    Args:
        value: float ``[batch, depth, height, width, in_channels]`` (NDHWC) or NCDHW
            (``input`` is its TF2 name).
        filter: ``[depth, height, width, output_channels, in_channels]``; ``in_channels``
            must be ``value``'s channel count (``filters`` is its TF2 name).
        output_shape: the output's 5 dimensions in ``data_format``'s order: a list of ints,
            a 1-D int Tensor, or a list mixing ints and scalar Tensors.
        strides: an int or 1, 3 or 5 ints, as :func:`conv3d`'s.
        padding: ``"SAME"`` (default) or ``"VALID"``: the padding of the convolution this
            op transposes.
        data_format: ``"NDHWC"`` (default) or ``"NCDHW"``.
        name: The op name (default ``"conv3d_transpose"``).
        dilations: as ``strides`` (default 1).

    Returns:
        A Tensor of ``value``'s dtype and shape ``output_shape``: the conv3d of
        ``output_shape`` with ``filter``, ``strides`` and ``padding`` must have ``value``'s
        spatial shape (TF's Conv3DBackpropInputV2 check). Gradients flow to ``value`` (a
        conv3d of the output gradient) and ``filter``.

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``strides`` or ``dilations``,
            ``output_shape`` not of 5 entries, channels of ``value``, ``filter`` and
            ``output_shape`` that disagree (TF's messages).
        InvalidArgumentError (at run): the same found at run time, or an output size whose
            convolution does not give ``value``'s size.
    """
    op = "conv3d_transpose"
    value = input if value is None else value
    filter = filters if filter is None else filter
    if value is None or filter is None or output_shape is None:
        raise ValueError("conv3d_transpose: value, filter and output_shape must be given")
    fmt = _data_format3(data_format, op)
    mode, _ = _padding(padding, op)
    st = _sequence3(strides, fmt, "strides", op)
    dl = _sequence3(dilations, fmt, "dilations", op)
    ci = 4 if fmt == "NDHWC" else 1
    x = _in(value)
    dt = _work_dtype(x, op)
    f = _same_dtype(filter, dt)
    fd = _filter_dims5(f, op)
    xd = _dims(x)
    if xd is not None and len(xd) == 5 and xd[ci] is not None and fd[4] is not None \
            and xd[ci] != fd[4]:
        raise ValueError(f"input channels does not match filter's input channels, "
                         f"{xd[ci]} != {fd[4]}")
    output_shape, known = _output_shape_arg(output_shape, 5, ci, fd[3])
    return _lib.apply_op(op, name, [x, f, output_shape], _conv3d_transpose, dt, known,
                         fmt=fmt, strides=st, dilations=dl, padding=mode, dtype=dt)


# ---- convolution -----------------------------------------------------------------------------


def convolution(input: Any, filter: Any = None, padding: Any = None, strides: Any = None,
                dilation_rate: Any = None, name: str | None = None,
                data_format: str | None = None, filters: Any = None,
                dilations: Any = None) -> Tensor:
    """An N-D convolution for N = 1, 2 or 3 spatial dimensions, as TF1's
    ``tf.nn.convolution``: :func:`psrt.nn.conv1d` for a rank-3 input,
    :func:`psrt.nn.conv2d` for rank 4, :func:`conv3d` for rank 5.

    Args:
        input: float ``[batch, *spatial, channels]`` (channels-last, default) or
            ``[batch, channels, *spatial]`` (a ``data_format`` starting with ``"NC"``).
        filter: ``[*spatial, in_channels, out_channels]`` (``filters`` is its TF2 name).
        padding: ``"SAME"`` or ``"VALID"``.
        strides: N ints (default 1).
        dilation_rate: N ints (default 1); above 1, the strides must be 1
            (``dilations`` is its TF2 name).
        data_format: ``"NWC"``/``"NCW"`` (1-D), ``"NHWC"``/``"NCHW"`` (2-D),
            ``"NDHWC"``/``"NCDHW"`` (3-D), or None (channels last).
        name: The op name (default ``"convolution"``).

    Returns:
        The convolution, the input's dtype, in ``data_format``'s layout.

    Raises:
        ValueError: a rank other than 3, 4 or 5 (or unknown), strides or dilation rates of
            the wrong length or not positive, strides above 1 with a dilation rate above 1
            (TF's message), and the N-D op's errors.
    """
    filter = filters if filter is None else filter
    rate = dilation_rate if dilation_rate is not None else dilations
    x = _in(input)
    xd = _dims(x)
    if xd is None or len(xd) not in (3, 4, 5):
        raise ValueError(f"convolution: psrt supports inputs of rank 3 (1-D), 4 (2-D) or 5 "
                         f"(3-D) with a known rank; got shape {xd}")
    nd = len(xd) - 2
    st = [1] * nd if strides is None else [int(v) for v in np.reshape(strides, -1)]
    rt = [1] * nd if rate is None else [int(v) for v in np.reshape(rate, -1)]
    for what, vals in (("strides", st), ("dilation_rate", rt)):
        if len(vals) != nd:
            raise ValueError(f"convolution: {what} must have {nd} entries for a {nd}-D "
                             f"convolution; got {vals}")
        if min(vals) < 1:
            raise ValueError(f"convolution: {what} must be positive; got {vals}")
    if max(st) > 1 and max(rt) > 1:
        raise ValueError(f"strides > 1 not supported in conjunction with dilation_rate > 1; "
                         f"got strides {st} and dilation_rate {rt}")
    first = data_format is not None and str(data_format).startswith("NC")
    formats = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[nd]
    fmt = formats[1] if first else (formats[0] if data_format is None else data_format)
    name = name or "convolution"
    if nd == 1:
        return conv1d(x, filter, st[0], padding, data_format=fmt, dilations=rt[0], name=name)
    if nd == 2:
        return conv2d(x, filter, st, padding, data_format=fmt, dilations=rt, name=name)
    return conv3d(x, filter, st, padding, data_format=fmt, dilations=rt, name=name)
