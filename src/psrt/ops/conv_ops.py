"""TF1's convolution and pooling ops (tensorflow/python/ops/nn_ops.py, nn_impl.py, r1.15) as
graph ops over numpy: ``conv2d``, ``conv2d_transpose`` (with dilations), ``conv1d``,
``atrous_conv2d``, ``atrous_conv2d_transpose`` (3-D and ``convolution``:
psrt/ops/conv3d_ops.py; depthwise and separable: psrt/ops/depthwise_conv_ops.py; pooling:
psrt/ops/pooling_ops.py).

Convolutions go through BLAS: the patches of a chunk of images are laid out as the rows of
one matrix (im2col, psrt/ops/_conv_kernels.pyx) and multiplied by the filter reshaped to
``[kh * kw * in_channels, out_channels]`` with ``np.matmul``; the input gradient is the
product with the filter's transpose scattered back (col2im), the filter gradient the patches'
transpose times the output gradient (TF's Conv2DBackpropInput / Conv2DBackpropFilter).
Pooling keeps the argmax of each window (TF's MaxPoolGrad routes the gradient to the first
maximum in row-major window order); average pooling divides by the number of in-bounds
elements, as TF's AvgPool. NCHW values are transposed to NHWC around the same kernels.

Output sizes and padding follow TF's GetWindowedOutputSizeVerboseV2
(tensorflow/core/framework/kernel_shape_util.cc): with an effective window
``k_eff = (k - 1) * dilation + 1``, VALID gives ``ceil((in - k_eff + 1) / stride)`` and no
padding; SAME gives ``ceil(in / stride)`` and pads ``max(0, (out - 1) * stride + k_eff - in)``
rows, the smaller half before.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

try:
    import threadpoolctl as _threadpoolctl
except ImportError:  # a dependency; without it the chunks are the many-thread size
    _threadpoolctl = None

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor
from psrt.ops import _conv_kernels as _k
from psrt.ops import conv_threads as _threads
from psrt.ops.array_ops import expand_dims as _expand_dims
from psrt.ops.array_ops import squeeze as _squeeze
from psrt.ops.array_ops import stack

__all__ = ["atrous_conv2d", "atrous_conv2d_transpose", "conv1d", "conv2d", "conv2d_transpose"]

_FORMATS = ("NHWC", "NCHW")
_PADDINGS = ("SAME", "VALID")
# im2col works on chunks of images whose patch matrix holds about _CHUNK_ELEMENTS elements
# (1 MB in float32) when BLAS runs one thread: the chunk is written and at once read back by
# the GEMM while it is in the cache, where a whole batch's patch matrix (31 MB for the
# 5x5x16 -> 32 convolution of a 100-image MNIST batch) goes out to memory and back, and BLAS
# still runs at full speed on a GEMM of a few hundred rows. With several BLAS threads every
# GEMM call splits over them and waits for the slowest; on a host whose cores other
# processes share, each wait can cost a scheduler time slice, so there the chunks are
# _BIG_CHUNK_ELEMENTS (32 MB: one GEMM per pass at MNIST's size), as few calls as possible.
# Measured on a shared 2-core host, the MNIST conv net's five conv passes (two forward, two
# filter gradients, one input gradient): 1 BLAS thread 136 ms in 1 MB chunks, 177 ms in
# 32 MB ones; 2 threads 934 ms in 1 MB chunks, 280 ms in 32 MB ones.
_CHUNK_ELEMENTS = 1 << 18
_BIG_CHUNK_ELEMENTS = 1 << 23
_blas: list[Any] = []   # [threadpoolctl's controllers of the loaded BLAS], found once


def _blas_threads() -> int:
    """The BLAS's current thread count (threadpoolctl reads it from the library; a limit
    set at run time, e.g. by psrt/runtime/threads.py, counts); 0 when unknown."""
    if not _blas:
        try:
            found = _threadpoolctl.ThreadpoolController().select(user_api="blas")
            _blas.append(list(found.lib_controllers))
        except Exception:   # no threadpoolctl, or a BLAS it cannot drive
            _blas.append([])
    return max((int(lib.num_threads) for lib in _blas[0]), default=0)


def _chunk_elements() -> int:
    """The im2col chunk size (elements of the patch matrix) for the BLAS's thread count."""
    return _CHUNK_ELEMENTS if _blas_threads() == 1 else _BIG_CHUNK_ELEMENTS


def _run_pass(work: Any, g: "_Geometry", n: int, k: int) -> list[Any]:
    """``work(chunks)`` over the (first image, count) chunks of a conv2d pass of ``n``
    images and ``k`` patch columns: with T > 1 threads (ConfigProto's
    intra_op_parallelism_threads, else the BLAS's count), in T parts at once, each
    with single-threaded GEMMs on 1 MB chunks (psrt/ops/conv_threads.py); else in one part.
    Returns each part's result, in order."""
    blas_threads = _blas_threads()
    t = _threads.pass_threads(blas_threads)
    if t > 1 and _blas and _blas[0]:
        return _threads.run_parts(work, list(g.chunks(n, k, _CHUNK_ELEMENTS)), t, _blas[0],
                                  blas_threads)
    return [work(list(g.chunks(n, k)))]


# conv2d keeps its forward's patches for the filter gradient below this many input
# channels and patch-matrix elements (32 MB in float32): see _keeps_patches.
_KEEP_CHANNELS = 4
_KEEP_ELEMENTS = 1 << 23


# ---- arguments -------------------------------------------------------------------------------


def _data_format(data_format: Any, op: str) -> str:
    fmt = "NHWC" if data_format is None else data_format
    if fmt not in _FORMATS:
        raise ValueError(f"{op}: data_format must be one of {', '.join(map(repr, _FORMATS))}; "
                         f"got {data_format!r}")
    return str(fmt)


def _padding(padding: Any, op: str, explicit: bool = False) -> tuple[str, Any]:
    """("SAME" | "VALID", None) or, where ``explicit`` (conv2d), ("EXPLICIT", 4 pairs)."""
    if isinstance(padding, str) and padding in _PADDINGS:
        return padding, None
    if explicit and isinstance(padding, (list, tuple)):
        try:
            pairs = [[int(a), int(b)] for a, b in padding]
        except (TypeError, ValueError):
            pairs = []
        if len(pairs) == 4 and all(a >= 0 and b >= 0 for a, b in pairs):
            return "EXPLICIT", pairs
    choices = '"SAME" or "VALID"' + (
        " or 4 explicit [before, after] pairs of non-negative ints" if explicit else "")
    raise ValueError(f"{op}: padding must be {choices}; got {padding!r}")


def _sequence(value: Any, channel_index: int, name: str, op: str) -> list[int]:
    """TF's ``_get_sequence`` for 2 spatial dimensions: an int, or 1, 2 or 4 ints, as the
    4 entries of a NHWC/NCHW attribute (batch and channel 1)."""
    if value is None:
        return [1, 1, 1, 1]
    vals = [int(value)] if isinstance(value, (int, np.integer)) else [int(v) for v in value]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) == 2:
        out = [1, 1, 1, 1]
        spatial = [1, 2] if channel_index == 3 else [2, 3]
        out[spatial[0]], out[spatial[1]] = vals
        return out
    if len(vals) == 4:
        return vals
    raise ValueError(f"{op}: {name} should be of length 1, 2 or 4 but was {len(vals)}: "
                     f"{value!r}")


def _spatial(vals: list[int], fmt: str, name: str, op: str) -> tuple[int, int]:
    """The (rows, cols) entries of a 4-entry attribute; batch and channel entries must be 1
    (TF: "does not yet support strides in the batch and depth dimensions")."""
    n, c, h, w = (vals[0], vals[3], vals[1], vals[2]) if fmt == "NHWC" else tuple(vals)
    if n != 1 or c != 1:
        raise ValueError(f"{op}: {name} {vals} must be 1 in the batch and depth dimensions "
                         f"(data_format {fmt})")
    if h < 1 or w < 1:
        raise ValueError(f"{op}: {name} {vals} must be positive")
    return h, w


def _window(size: int | None, k: int | None, stride: int, dilation: int, padding: str,
            pads: Sequence[int] | None, op: str) -> tuple[int | None, int]:
    """(output size, padding before) of one spatial dimension (TF's
    GetWindowedOutputSizeVerboseV2); None for an unknown size."""
    if size is None or k is None:
        return None, 0
    k_eff = (k - 1) * dilation + 1
    if padding == "VALID":
        # C's integer division (towards zero), as TF's: a window one row too big gives 0
        out, before = int((size - k_eff + stride) / stride), 0
    elif padding == "SAME":
        out = (size + stride - 1) // stride
        before = max(0, (out - 1) * stride + k_eff - size) // 2
    else:
        assert pads is not None
        out, before = int((size + pads[0] + pads[1] - k_eff + stride) / stride), pads[0]
    if out < 0:
        raise ValueError(f"{op}: computed output size would be negative: {out} [input_size: "
                         f"{size}, effective_filter_size: {k_eff}, stride: {stride}]")
    return out, before


def _dims(x: Any) -> list[int | None] | None:
    s = _lib.static_shape(x)
    return None if s.ndims is None else [d.value for d in s]


def _work_dtype(x: Any, op: str) -> np.dtype:
    dt = _lib.static_dtype(x)
    dt = np.dtype(np.float32) if dt is None else np.dtype(dt)
    if dt not in (np.float16, np.float32, np.float64):
        raise TypeError(f"{op}: input must be float16, float32 or float64; got {dt.name}")
    return dt


def _same_dtype(x: Any, dt: np.dtype) -> Any:
    """``x`` as a graph input of dtype ``dt``: constants converted, graph values checked."""
    if not _lib.is_graph_value(x):
        return constant(np.asarray(x, dt))
    got = _lib.static_dtype(x)
    if got is not None and np.dtype(got) != dt:
        raise TypeError(f"filter of type {np.dtype(got).name} does not match type {dt.name} "
                        f"of the input")
    return x


def _in(x: Any) -> Any:
    """A graph input: numpy floats keep their dtype, Python floats (and ints) become
    float32, as TF converts them."""
    if _lib.is_graph_value(x):
        return x
    dt = _lib.python_value_dtype(x)
    return constant(np.asarray(x, dt if np.dtype(dt).kind == "f" else np.float32))


# ---- layouts and the numpy side ----------------------------------------------------------------


def _compute(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def _nhwc(x: Any, fmt: str, dt: np.dtype) -> np.ndarray:
    a = np.asarray(x)
    if fmt == "NCHW":
        a = a.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(a, dtype=dt)


def _back(y: np.ndarray, fmt: str, dt: np.dtype) -> np.ndarray:
    if fmt == "NCHW":
        y = y.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(y, dtype=dt)


def _rank4(a: np.ndarray, what: str, op: str) -> None:
    if a.ndim != 4:
        raise _errors.InvalidArgumentError(None, None, f"{op}: {what} must be 4-dimensional; "
                                           f"got shape {list(a.shape)}")


class _Geometry:
    """Where the windows of one convolution or pooling lie over a NHWC input of
    spatial size (H, W): window (kh, kw), strides, dilations, output size and padding."""

    def __init__(self, op: str, hw: tuple[int, int], k: tuple[int, int],
                 strides: tuple[int, int], dilations: tuple[int, int], padding: str,
                 pads: Any) -> None:
        self.kh, self.kw = k
        self.sh, self.sw = strides
        self.dh, self.dw = dilations
        ph = pw = None
        if pads is not None:
            ph, pw = pads
        oh, self.pt = _window(hw[0], k[0], strides[0], dilations[0], padding, ph, op)
        ow, self.pl = _window(hw[1], k[1], strides[1], dilations[1], padding, pw, op)
        assert oh is not None and ow is not None
        self.oh, self.ow = oh, ow
        self.hw = (int(hw[0]), int(hw[1]))

    def args(self) -> tuple[int, ...]:
        """(kernel h, w, stride h, w, dilation h, w, pad top, left, output h, w): the
        geometry the compiled im2col/col2im kernels take."""
        return (self.kh, self.kw, self.sh, self.sw, self.dh, self.dw, self.pt, self.pl,
                self.oh, self.ow)

    def pointwise(self) -> bool:
        """A 1x1 window at stride 1 without padding: the patches are the input itself."""
        return (self.kh == self.kw == self.sh == self.sw == 1 and self.pt == self.pl == 0
                and (self.oh, self.ow) == self.hw)

    def chunks(self, n: int, k: int, elements: int | None = None
               ) -> Iterator[tuple[int, int]]:
        """(first image, image count) chunks of ``n`` images, ``k`` patch columns, each
        chunk's patch matrix about ``elements`` (default :func:`_chunk_elements`)."""
        per = max(1, self.oh * self.ow * max(k, 1))
        budget = _chunk_elements() if elements is None else elements
        step = max(1, budget // per)
        for n0 in range(0, n, step):
            yield n0, min(step, n - n0)


def _patches(x: np.ndarray, g: _Geometry, n0: int, nb: int, buf: np.ndarray | None
             ) -> np.ndarray:
    """The im2col matrix ``[nb * oh * ow, kh * kw * C]`` of images ``n0 .. n0 + nb``."""
    if g.pointwise():
        return x[n0:n0 + nb].reshape(-1, x.shape[3])
    rows, cols = nb * g.oh * g.ow, g.kh * g.kw * x.shape[3]
    out = (np.empty((rows, cols), x.dtype) if buf is None or buf.shape[0] < rows
           else buf[:rows])
    _k.im2col(x, out, n0, *g.args())
    return out


def _conv_forward(x: np.ndarray, wm: np.ndarray, g: _Geometry,
                  whole: np.ndarray | None = None) -> np.ndarray:
    """conv2d of NHWC ``x`` with the filter matrix ``wm`` ``[kh * kw * C, O]``. With
    ``whole`` (``[N * oh * ow, K]``, see :func:`_keeps_patches`), each chunk's patches are
    written into their rows of it, for the filter gradient to read back."""
    n = x.shape[0]
    y = np.empty((n, g.oh, g.ow, wm.shape[1]), x.dtype)
    y2 = y.reshape(-1, wm.shape[1])

    def work(chunks: list[tuple[int, int]]) -> None:
        buf = None
        for n0, nb in chunks:
            r0, r1 = n0 * g.oh * g.ow, (n0 + nb) * g.oh * g.ow
            if whole is not None:
                cols = whole[r0:r1]
                _k.im2col(x, cols, n0, *g.args())
            else:
                cols = _patches(x, g, n0, nb, buf)
                buf = cols if not g.pointwise() else None
            np.matmul(cols, wm, out=y2[r0:r1])
    _run_pass(work, g, n, wm.shape[0])
    return y


def _keeps_patches(x: np.ndarray, g: _Geometry, needs: Any) -> np.ndarray | None:
    """An empty ``[N * oh * ow, K]`` patch matrix when conv2d's forward should keep its
    patches for the filter gradient (asked in a gradient run, not ``ALL``'s plain
    evaluation), else None. That pays where rebuilding them costs more than reading them
    back: an input of few channels, whose im2col copies runs of only ``kw * C`` values
    (MNIST's first layer, C = 1: 3.3 ms for its filter gradient instead of 7.6 ms at batch
    100), and whose patch matrix stays small; deeper layers' im2col is cheap beside their
    GEMM, and their patch matrix large (31 MB for the second layer: reading it back from
    memory was slower than rebuilding it chunk by chunk in the cache)."""
    k = g.kh * g.kw * x.shape[3]
    rows = x.shape[0] * g.oh * g.ow
    if (needs is _lib.ALL or 1 not in needs or g.pointwise()
            or x.shape[3] >= _KEEP_CHANNELS or rows * k > _KEEP_ELEMENTS):
        return None
    return np.empty((rows, k), x.dtype)


def _conv_filter_grad(x: np.ndarray, dy: np.ndarray, g: _Geometry,
                      whole: np.ndarray | None = None) -> np.ndarray:
    """d(conv)/d(filter matrix): the patches' transpose times ``dy``, ``[K, O]``, summed
    over the chunks of images in order; the patches are ``whole``'s rows when given (the
    forward's), else rebuilt chunk by chunk."""
    o = dy.shape[3]
    k = g.kh * g.kw * x.shape[3]
    dy2 = dy.reshape(-1, o)

    def work(chunks: list[tuple[int, int]]) -> np.ndarray:
        dw = np.zeros((k, o), x.dtype)
        part = np.empty((k, o), x.dtype)
        buf = None
        for i, (n0, nb) in enumerate(chunks):
            r0, r1 = n0 * g.oh * g.ow, (n0 + nb) * g.oh * g.ow
            if whole is not None:
                cols = whole[r0:r1]
            else:
                cols = _patches(x, g, n0, nb, buf)
                buf = cols if not g.pointwise() else None
            if i == 0:
                np.matmul(cols.T, dy2[r0:r1], out=dw)
            else:
                np.matmul(cols.T, dy2[r0:r1], out=part)
                dw += part
        return dw
    parts = _run_pass(work, g, x.shape[0], k)
    dw = parts[0]
    for p in parts[1:]:
        dw += p
    return dw


def _conv_input_grad(dy: np.ndarray, wm: np.ndarray, g: _Geometry,
                     x_shape: tuple[int, ...]) -> np.ndarray:
    """d(conv)/d(input): ``dy`` times the filter's transpose, scattered back (col2im)."""
    o = dy.shape[3]
    dy2 = dy.reshape(-1, o)
    if g.pointwise():
        return (dy2 @ wm.T).reshape(x_shape)
    dx = np.zeros(x_shape, dy.dtype)

    def work(chunks: list[tuple[int, int]]) -> None:
        # each chunk scatters into its own images' rows of dx only
        buf = None
        for n0, nb in chunks:
            r0, r1 = n0 * g.oh * g.ow, (n0 + nb) * g.oh * g.ow
            if buf is None or buf.shape[0] < r1 - r0:
                buf = np.empty((r1 - r0, wm.shape[0]), dy.dtype)
            dcols = buf[:r1 - r0]
            np.matmul(dy2[r0:r1], wm.T, out=dcols)
            _k.col2im(dcols, dx, n0, *g.args())
    _run_pass(work, g, x_shape[0], wm.shape[0])
    return dx


# ---- conv2d ------------------------------------------------------------------------------------


def _conv2d(needs: Any, x: Any, f: Any, fmt: str, strides: tuple[int, int],
            dilations: tuple[int, int], padding: str, pads: Any, dtype: np.dtype) -> Any:
    op = "Conv2D"
    cd = _compute(dtype)
    xn, w = _nhwc(x, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _rank4(xn, "input", op)
    _rank4(w, "filter", op)
    if xn.shape[3] != w.shape[2]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: input depth {xn.shape[3]} does not match the filter's input "
            f"depth {w.shape[2]} (filter shape {list(w.shape)})")
    g = _Geometry(op, xn.shape[1:3], w.shape[:2], strides, dilations, padding, pads)
    wm = w.reshape(-1, w.shape[3])
    whole = _keeps_patches(xn, g, needs)
    y = _back(_conv_forward(xn, wm, g, whole), fmt, dtype)

    def grad(dy: Any) -> tuple[Any, Any]:
        d = _nhwc(dy, fmt, cd)
        dx = (_back(_conv_input_grad(d, wm, g, xn.shape), fmt, dtype) if 0 in needs
              else None)
        dw = (_conv_filter_grad(xn, d, g, whole).reshape(w.shape).astype(dtype, copy=False)
              if 1 in needs else None)
        return dx, dw
    return y, grad


def _out_shape(x_dims: list[int | None] | None, fmt: str, k: tuple[Any, Any],
               strides: tuple[int, int], dilations: tuple[int, int], padding: str, pads: Any,
               channels: Any, op: str) -> Any:
    if x_dims is None:
        return None
    if len(x_dims) != 4:
        raise ValueError(f"{op}: input must be 4-dimensional; got shape {x_dims}")
    n, h, w = (x_dims[0], x_dims[1], x_dims[2]) if fmt == "NHWC" else (
        x_dims[0], x_dims[2], x_dims[3])
    ph = pw = None
    if pads is not None:
        ph, pw = pads
    oh, _ = _window(h, k[0], strides[0], dilations[0], padding, ph, op)
    ow, _ = _window(w, k[1], strides[1], dilations[1], padding, pw, op)
    return [n, oh, ow, channels] if fmt == "NHWC" else [n, channels, oh, ow]


def _conv_args(op: str, strides: Any, padding: Any, data_format: Any, dilations: Any
               ) -> tuple[str, str, tuple[int, int], tuple[int, int], Any]:
    """conv2d's attributes checked: (data_format, padding mode, strides, dilations,
    explicit (rows, cols) padding pairs or None)."""
    fmt = _data_format(data_format, op)
    mode, explicit = _padding(padding, op, explicit=True)
    ci = 3 if fmt == "NHWC" else 1
    st = _spatial(_sequence(strides, ci, "strides", op), fmt, "strides", op)
    dl = _spatial(_sequence(dilations, ci, "dilations", op), fmt, "dilations", op)
    pads = None
    if explicit is not None:
        b, c = (explicit[0], explicit[3]) if fmt == "NHWC" else (explicit[0], explicit[1])
        if b != [0, 0] or c != [0, 0]:
            raise ValueError(f"{op}: explicit padding {explicit} must be [0, 0] in the batch "
                             f"and depth dimensions (data_format {fmt})")
        pads = (explicit[1], explicit[2]) if fmt == "NHWC" else (explicit[2], explicit[3])
    return fmt, mode, st, dl, pads


def _filter_dims(f: Any, op: str) -> list[int | None]:
    d = _dims(f)
    if d is None:
        return [None] * 4
    if len(d) != 4:
        raise ValueError(f"{op}: filter must be 4-dimensional; got shape {d}")
    return d


def conv2d(input: Any, filter: Any = None, strides: Any = None, padding: Any = None,
           use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
           dilations: Any = (1, 1, 1, 1), name: str | None = None, filters: Any = None
           ) -> Tensor:
    """A 2-D convolution (cross-correlation, as TF's: the filter is not flipped), as TF1's
    ``tf.nn.conv2d``.

    ``output[b, i, j, k] = sum_{di, dj, q} input[b, i * s_h + di * d_h - pad_top,
    j * s_w + dj * d_w - pad_left, q] * filter[di, dj, q, k]`` (zero outside the input).

    Args:
        input: float16/32/64 ``[batch, in_height, in_width, in_channels]`` (NHWC) or
            ``[batch, in_channels, in_height, in_width]`` (NCHW); a Tensor, Variable,
            placeholder or array.
        filter: ``[filter_height, filter_width, in_channels, out_channels]``, the input's
            dtype (``filters`` is its TF2 name).
        strides: an int or 1, 2 or 4 ints (4: in ``data_format``'s order, 1 in the batch
            and channel dimensions).
        padding: ``"SAME"``, ``"VALID"``, or explicit ``[[0, 0], [top, bottom],
            [left, right], [0, 0]]`` (NHWC order; NCHW: ``[[0, 0], [0, 0], [top, bottom],
            [left, right]]``).
        use_cudnn_on_gpu: Accepted and ignored (psrt computes on the CPU).
        data_format: ``"NHWC"`` (default) or ``"NCHW"``.
        dilations: as ``strides``: the spacing of the filter taps (atrous convolution).
        name: The op name (default ``"Conv2D"``).

    Returns:
        A Tensor of the input's dtype: NHWC ``[batch, out_height, out_width, out_channels]``
        (or NCHW), with TF's SAME/VALID output sizes (module docstring). Its gradient with
        respect to input and filter is TF's Conv2DBackpropInput / Conv2DBackpropFilter.

    Raises:
        ValueError: a bad ``padding``, ``data_format``, ``strides`` or ``dilations`` (the
            message names the value and the choices), a non-4-D input or filter, or input
            and filter depths that differ when both are known.
        TypeError: a non-float input, or a filter of another dtype.
        InvalidArgumentError (at run): the same shape errors found at run time.
    """
    op = "Conv2D"
    if filter is None:
        filter = filters
    if filter is None:
        raise ValueError("conv2d: filter must be given")
    fmt, mode, st, dl, pads = _conv_args("conv2d", strides, padding, data_format, dilations)
    ci = 3 if fmt == "NHWC" else 1
    x = _in(input)
    dt = _work_dtype(x, "conv2d")
    f = _same_dtype(filter, dt)
    fd = _filter_dims(f, "conv2d")
    xd = _dims(x)
    if xd is not None and len(xd) == 4:
        depth = xd[ci]
        if depth is not None and fd[2] is not None and depth != fd[2]:
            raise ValueError(f"conv2d: input depth {depth} does not match the filter's input "
                             f"depth {fd[2]} (filter shape {fd})")
    shape = _out_shape(xd, fmt, (fd[0], fd[1]), st, dl, mode, pads, fd[3], "conv2d")
    return _lib.apply_op(op, name, [x, f], _conv2d, dt, shape, fmt=fmt, strides=st,
                         dilations=dl, padding=mode, pads=pads, dtype=dt)


# ---- conv2d_transpose --------------------------------------------------------------------------


def _conv2d_transpose(needs: Any, v: Any, f: Any, output_shape: Any, fmt: str,
                      strides: tuple[int, int], padding: str, dtype: np.dtype,
                      dilations: tuple[int, int] = (1, 1), pads: Any = None) -> Any:
    op = "Conv2DBackpropInput"
    cd = _compute(dtype)
    dy, w = _nhwc(v, fmt, cd), np.ascontiguousarray(f, dtype=cd)
    _rank4(dy, "value", op)
    _rank4(w, "filter", op)
    out = [int(d) for d in np.asarray(output_shape).reshape(-1)]
    if len(out) != 4:
        raise _errors.InvalidArgumentError(None, None, f"{op}: output_shape must have 4 "
                                           f"entries; got {out}")
    x_shape = (out[0], out[1], out[2], out[3]) if fmt == "NHWC" else (
        out[0], out[2], out[3], out[1])
    if x_shape[3] != w.shape[2] or dy.shape[3] != w.shape[3] or x_shape[0] != dy.shape[0]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: output_shape {out}, value shape {list(np.shape(v))} and "
            f"filter shape {list(w.shape)} do not agree (filter is [height, width, "
            f"output_channels, input_channels])")
    g = _Geometry(op, x_shape[1:3], w.shape[:2], strides, dilations, padding, pads)
    if (g.oh, g.ow) != dy.shape[1:3]:
        raise _errors.InvalidArgumentError(
            None, None, f"{op}: size of out_backprop doesn't match computed: actual = "
            f"{list(dy.shape[1:3])}, computed = {[g.oh, g.ow]} for output {list(x_shape[1:3])}"
            f", filter {list(w.shape[:2])}, strides {list(strides)}, padding {padding}")
    wm = w.reshape(-1, w.shape[3])
    y = _back(_conv_input_grad(dy, wm, g, x_shape), fmt, dtype)

    def grad(dz: Any) -> tuple[Any, Any, None]:
        d = _nhwc(dz, fmt, cd)
        dv = _back(_conv_forward(d, wm, g), fmt, dtype) if 0 in needs else None
        dw = (_conv_filter_grad(d, dy, g).reshape(w.shape).astype(dtype) if 1 in needs
              else None)
        return dv, dw, None
    return y, grad


def conv2d_transpose(value: Any = None, filter: Any = None, output_shape: Any = None,
                     strides: Any = None, padding: str = "SAME", data_format: str = "NHWC",
                     name: str | None = None, input: Any = None, filters: Any = None,
                     dilations: Any = None) -> Tensor:
    """The transpose (gradient) of :func:`conv2d` with respect to its input, as TF1's
    ``tf.nn.conv2d_transpose`` (sometimes called deconvolution).

    Args:
        value: float ``[batch, height, width, in_channels]`` (NHWC) or NCHW (``input`` is
            its TF2 name).
        filter: ``[height, width, output_channels, in_channels]``; ``in_channels`` must be
            ``value``'s channel count (``filters`` is its TF2 name).
        output_shape: the output's 4 dimensions, in ``data_format``'s order: a list of
            ints, a 1-D int Tensor (e.g. built with ``tf.shape``), or a list mixing ints and
            scalar Tensors.
        strides: an int or 1, 2 or 4 ints, as :func:`conv2d`'s.
        padding: ``"SAME"`` (default) or ``"VALID"``: the padding of the convolution this
            op transposes.
        data_format: ``"NHWC"`` (default) or ``"NCHW"``.
        name: The op name (default ``"conv2d_transpose"``).
        dilations: as ``strides`` (default 1): the dilation of the convolution this op
            transposes (TF r1.15's ``dilations``); strides above 1 with dilations above 1
            are allowed, as TF's Conv2DBackpropInput allows them.

    Returns:
        A Tensor of ``value``'s dtype and shape ``output_shape``: the conv2d of
        ``output_shape`` with ``filter``, ``strides`` and ``padding`` must have ``value``'s
        spatial shape (TF's Conv2DBackpropInput check). Gradients flow to ``value``
        (a conv2d of the output gradient) and ``filter``.

    Raises:
        ValueError: a bad ``padding`` or ``data_format`` (naming the value and the
            choices), ``output_shape`` not of 4 entries, or channels of ``value``,
            ``filter`` and ``output_shape`` that disagree (TF's messages).
        InvalidArgumentError (at run): the same found at run time, or an output size
            whose convolution does not give ``value``'s size.
    """
    op = "conv2d_transpose"
    value = input if value is None else value
    filter = filters if filter is None else filter
    if value is None or filter is None or output_shape is None:
        raise ValueError("conv2d_transpose: value, filter and output_shape must be given")
    fmt = _data_format(data_format, op)
    mode, _ = _padding(padding, op)
    ci = 3 if fmt == "NHWC" else 1
    st = _spatial(_sequence(strides, ci, "strides", op), fmt, "strides", op)
    dl = _spatial(_sequence(dilations, ci, "dilations", op), fmt, "dilations", op)
    x = _in(value)
    dt = _work_dtype(x, op)
    f = _same_dtype(filter, dt)
    fd = _filter_dims(f, op)
    xd = _dims(x)
    if xd is not None and len(xd) == 4 and xd[ci] is not None and fd[3] is not None \
            and xd[ci] != fd[3]:
        raise ValueError(f"input channels does not match filter's input channels, "
                         f"{xd[ci]} != {fd[3]}")
    output_shape, known = _output_shape_arg(output_shape, 4, ci, fd[2])
    return _lib.apply_op(op, name, [x, f, output_shape], _conv2d_transpose, dt, known,
                         fmt=fmt, strides=st, padding=mode, dtype=dt, dilations=dl)


def _output_shape_arg(output_shape: Any, rank: int, ci: int, out_channels: Any
                      ) -> tuple[Any, list[Any]]:
    """(graph input, known dims) of a transposed convolution's ``output_shape``: a list of
    ints, a 1-D int Tensor, or a list mixing ints and scalar Tensors, of ``rank`` entries
    whose channel entry ``ci`` must be the filter's ``out_channels`` (TF's messages)."""
    known: list[Any]
    if isinstance(output_shape, (list, tuple)) and any(map(_lib.is_graph_value, output_shape)):
        known = [None if _lib.is_graph_value(d) else int(d) for d in output_shape]
        output_shape = stack([d if _lib.is_graph_value(d) else np.int32(d)
                              for d in output_shape])
    else:
        c = _lib.constant_value(output_shape)
        known = [None] * rank if c is None else [int(d) for d in np.asarray(c).reshape(-1)]
        if c is not None:
            output_shape = constant(np.asarray(c, np.int32).reshape(-1))
    s = _lib.static_shape(output_shape)
    if len(known) != rank or (s.ndims is not None and (s.ndims != 1
                                                        or s[0].value not in (None, rank))):
        raise ValueError(f"output_shape must have shape ({rank},), got "
                         f"{known if len(known) != rank else s}")
    if known[ci] is not None and out_channels is not None and known[ci] != out_channels:
        raise ValueError(f"output_shape does not match filter's output channels, "
                         f"{known[ci]} != {out_channels}")
    if known[ci] is None:
        known[ci] = out_channels
    return output_shape, known


def atrous_conv2d_transpose(value: Any, filters: Any, output_shape: Any, rate: int,
                            padding: str, name: str | None = None) -> Tensor:
    """The transpose of :func:`atrous_conv2d`, as TF1's ``tf.nn.atrous_conv2d_transpose``:
    :func:`conv2d_transpose` of NHWC ``value`` ``[batch, height, width, in_channels]`` with
    ``filters`` ``[height, width, out_channels, in_channels]`` at stride 1 and dilation
    ``rate`` (TF computes it through space_to_batch; its atrous_conv2d_test.py checks it
    equals conv2d_transpose with the upsampled filter, which this is).

    Raises:
        ValueError: ``rate`` below 1, and :func:`conv2d_transpose`'s errors.
    """
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv2d_transpose(value, filters, output_shape, [1, 1, 1, 1], padding,
                            dilations=[1, int(rate), int(rate), 1],
                            name=name or "atrous_conv2d_transpose")


# ---- conv1d and atrous_conv2d -------------------------------------------------------------------


def conv1d(value: Any = None, filters: Any = None, stride: Any = None, padding: Any = None,
           use_cudnn_on_gpu: Any = None, data_format: str | None = None,
           name: str | None = None, input: Any = None, dilations: Any = None) -> Tensor:
    """A 1-D convolution, as TF1's ``tf.nn.conv1d``: a :func:`conv2d` over a height of 1.

    Args:
        value: float ``[batch, in_width, in_channels]`` (``"NWC"``, default) or
            ``[batch, in_channels, in_width]`` (``"NCW"``); ``input`` is its TF2 name.
        filters: ``[filter_width, in_channels, out_channels]``.
        stride: an int (or 1 or 3 ints): the step along the width.
        padding: ``"SAME"`` or ``"VALID"``.
        data_format: ``"NWC"`` or ``"NCW"``.
        dilations: an int (or 1 or 3 ints), the spacing of the filter taps.
        name: The op name (default ``"conv1d"``).

    Returns:
        ``[batch, out_width, out_channels]`` (NWC) or NCW, the input's dtype.

    Raises:
        ValueError: a bad ``data_format``, ``padding``, ``stride`` or ``dilations``, and
            :func:`conv2d`'s errors.
    """
    value = input if value is None else value
    fmt = "NWC" if data_format is None else data_format
    if fmt not in ("NWC", "NCW"):
        raise ValueError(f"conv1d: data_format must be one of 'NWC', 'NCW'; got "
                         f"{data_format!r}")

    def one(v: Any, what: str) -> int:
        vals = [int(v)] if isinstance(v, (int, np.integer)) else [int(i) for i in v]
        if len(vals) == 3:
            if vals[0] != 1 or vals[2 if fmt == "NWC" else 1] != 1:
                raise ValueError(f"conv1d: {what} {vals} must be 1 in the batch and depth "
                                 f"dimensions")
            return vals[1 if fmt == "NWC" else 2]
        if len(vals) != 1:
            raise ValueError(f"conv1d: {what} should be of length 1 or 3 but was "
                             f"{len(vals)}: {v!r}")
        return vals[0]
    s, d = one(1 if stride is None else stride, "stride"), one(
        1 if dilations is None else dilations, "dilations")
    x = _in(value)
    dt = _work_dtype(x, "conv1d")
    f = _same_dtype(filters, dt)
    if fmt == "NWC":
        x4 = _expand_dims(x, 1)
        f4 = _expand_dims(f, 0)
        y = conv2d(x4, f4, [1, 1, s, 1], padding, data_format="NHWC",
                   dilations=[1, 1, d, 1], name=name or "conv1d")
        return _squeeze(y, [1])
    x4 = _expand_dims(x, 2)
    y = conv2d(x4, _expand_dims(f, 0), [1, 1, 1, s], padding, data_format="NCHW",
               dilations=[1, 1, 1, d], name=name or "conv1d")
    return _squeeze(y, [2])


def atrous_conv2d(value: Any, filters: Any, rate: int, padding: str,
                  name: str | None = None) -> Tensor:
    """Atrous (dilated) 2-D convolution, as TF1's ``tf.nn.atrous_conv2d``: :func:`conv2d`
    of NHWC ``value`` ``[batch, height, width, in_channels]`` with ``filters``
    ``[height, width, in_channels, out_channels]`` at stride 1 and dilation ``rate`` in
    both spatial dimensions.

    Raises:
        ValueError: ``rate`` below 1, a bad ``padding``, and :func:`conv2d`'s errors.
    """
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=[1, int(rate), int(rate), 1],
                  name=name or "atrous_conv2d")
