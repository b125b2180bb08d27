# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The loops of psrt's convolution and pooling ops (psrt/ops/conv_ops.py) that numpy cannot
do in one pass: im2col (the patches of a strided, dilated, padded convolution as the rows of
one GEMM operand), col2im (its adjoint, a scatter-add), max pooling with its argmax and the
argmax's gradient scatter, average pooling over in-bounds elements and its gradient.

Every array is NHWC and C-contiguous, float32 or float64 (one fused type per call); outputs
are allocated by the caller (numpy) and passed in, so this module needs no numpy headers.
Window geometry follows TF's (tensorflow/core/framework/kernel_shape_util.cc): output row
``oy`` reads input rows ``oy * stride - pad_before + k * dilation`` for ``k < ksize``; rows
outside ``[0, H)`` are padding (zeros for convolutions, skipped by pooling).

A worker-side kernel module of the ops layer: it imports nothing of psrt (docs/architecture.md).
The loops release the GIL.
"""

from libc.string cimport memcpy, memset

ctypedef fused real:
    float
    double


def im2col(const real[:, :, :, ::1] x, real[:, ::1] cols, Py_ssize_t n0,
           int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl,
           int oh, int ow):
    """Fill ``cols`` ``[nb * oh * ow, kh * kw * C]`` with the patches of images
    ``n0 .. n0 + nb`` of ``x`` ``[N, H, W, C]``; a row's columns are ordered (ky, kx, c),
    as a ``[kh, kw, C, O]`` filter reshaped to ``[kh * kw * C, O]``."""
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef Py_ssize_t nb = cols.shape[0] // (oh * ow) if oh * ow else 0
    cdef Py_ssize_t n, oy, ox, ky, kx, iy, ix, row, col
    cdef real* dst
    with nogil:
        row = 0
        for n in range(n0, n0 + nb):
            for oy in range(oh):
                for ox in range(ow):
                    dst = &cols[row, 0]
                    col = 0
                    for ky in range(kh):
                        iy = oy * sh - pt + ky * dh
                        for kx in range(kw):
                            ix = ox * sw - pl + kx * dw
                            if 0 <= iy < H and 0 <= ix < W:
                                memcpy(dst + col, &x[n, iy, ix, 0], C * sizeof(real))
                            else:
                                memset(dst + col, 0, C * sizeof(real))
                            col += C
                    row += 1


def col2im(const real[:, ::1] cols, real[:, :, :, ::1] dx, Py_ssize_t n0,
           int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl,
           int oh, int ow):
    """The adjoint of :func:`im2col`: add each row of ``cols`` back into the input
    positions its patch read (padding positions dropped). ``dx`` ``[N, H, W, C]`` must hold
    zeros (or the sum so far) for images ``n0 .. n0 + nb``."""
    cdef Py_ssize_t H = dx.shape[1], W = dx.shape[2], C = dx.shape[3]
    cdef Py_ssize_t nb = cols.shape[0] // (oh * ow) if oh * ow else 0
    cdef Py_ssize_t n, oy, ox, ky, kx, iy, ix, row, col, c
    cdef const real* src
    cdef real* out
    with nogil:
        row = 0
        for n in range(n0, n0 + nb):
            for oy in range(oh):
                for ox in range(ow):
                    src = &cols[row, 0]
                    col = 0
                    for ky in range(kh):
                        iy = oy * sh - pt + ky * dh
                        for kx in range(kw):
                            ix = ox * sw - pl + kx * dw
                            if 0 <= iy < H and 0 <= ix < W:
                                out = &dx[n, iy, ix, 0]
                                for c in range(C):
                                    out[c] += src[col + c]
                            col += C
                    row += 1


def max_pool(const real[:, :, :, ::1] x, real[:, :, :, ::1] y, long long[:, :, :, ::1] arg,
             int kh, int kw, int sh, int sw, int pt, int pl):
    """``y[n, oy, ox, c]``: the maximum of ``x`` over the in-bounds part of the window;
    ``arg`` the position ``iy * W + ix`` of the first maximum in row-major window order
    (TF's MaxPoolGrad routes the gradient there): a later element replaces the maximum
    only when greater (``>``)."""
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef Py_ssize_t N = y.shape[0], oh = y.shape[1], ow = y.shape[2]
    cdef Py_ssize_t n, oy, ox, iy, ix, c, hs, he, ws, we
    cdef const real* src
    cdef real* best
    cdef long long* where
    with nogil:
        for n in range(N):
            for oy in range(oh):
                hs = oy * sh - pt
                he = min(hs + kh, H)
                hs = max(hs, 0)
                for ox in range(ow):
                    ws = ox * sw - pl
                    we = min(ws + kw, W)
                    ws = max(ws, 0)
                    best = &y[n, oy, ox, 0]
                    where = &arg[n, oy, ox, 0]
                    src = &x[n, hs, ws, 0]
                    for c in range(C):
                        best[c] = src[c]
                        where[c] = hs * W + ws
                    for iy in range(hs, he):
                        for ix in range(ws, we):
                            src = &x[n, iy, ix, 0]
                            for c in range(C):
                                if src[c] > best[c]:
                                    best[c] = src[c]
                                    where[c] = iy * W + ix


def max_pool_grad(const real[:, :, :, ::1] dy, const long long[:, :, :, ::1] arg,
                  real[:, :, :, ::1] dx):
    """Add ``dy[n, oy, ox, c]`` into ``dx`` at its window's argmax (``dx`` zeroed by the
    caller); overlapping windows that share a maximum add up."""
    cdef Py_ssize_t W = dx.shape[2], C = dx.shape[3]
    cdef Py_ssize_t N = dy.shape[0], oh = dy.shape[1], ow = dy.shape[2]
    cdef Py_ssize_t n, oy, ox, c
    cdef long long a
    with nogil:
        for n in range(N):
            for oy in range(oh):
                for ox in range(ow):
                    for c in range(C):
                        a = arg[n, oy, ox, c]
                        dx[n, a // W, a % W, c] += dy[n, oy, ox, c]


def avg_pool(const real[:, :, :, ::1] x, real[:, :, :, ::1] y, int kh, int kw, int sh, int sw,
             int pt, int pl):
    """``y[n, oy, ox, c]``: the mean of ``x`` over the in-bounds part of the window (TF's
    AvgPool divides by the number of in-bounds elements, padding is not counted)."""
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef Py_ssize_t N = y.shape[0], oh = y.shape[1], ow = y.shape[2]
    cdef Py_ssize_t n, oy, ox, iy, ix, c, hs, he, ws, we
    cdef const real* src
    cdef real* acc
    cdef real inv
    with nogil:
        for n in range(N):
            for oy in range(oh):
                hs = oy * sh - pt
                he = min(hs + kh, H)
                hs = max(hs, 0)
                for ox in range(ow):
                    ws = ox * sw - pl
                    we = min(ws + kw, W)
                    ws = max(ws, 0)
                    acc = &y[n, oy, ox, 0]
                    for c in range(C):
                        acc[c] = 0
                    for iy in range(hs, he):
                        for ix in range(ws, we):
                            src = &x[n, iy, ix, 0]
                            for c in range(C):
                                acc[c] += src[c]
                    inv = 1
                    inv = inv / ((he - hs) * (we - ws))
                    for c in range(C):
                        acc[c] *= inv


def avg_pool_grad(const real[:, :, :, ::1] dy, real[:, :, :, ::1] dx, int kh, int kw, int sh,
                  int sw, int pt, int pl):
    """The gradient of :func:`avg_pool`: each ``dy`` spread evenly over its window's
    in-bounds elements, added into ``dx`` (zeroed by the caller)."""
    cdef Py_ssize_t H = dx.shape[1], W = dx.shape[2], C = dx.shape[3]
    cdef Py_ssize_t N = dy.shape[0], oh = dy.shape[1], ow = dy.shape[2]
    cdef Py_ssize_t n, oy, ox, iy, ix, c, hs, he, ws, we
    cdef const real* src
    cdef real* out
    cdef real inv
    with nogil:
        for n in range(N):
            for oy in range(oh):
                hs = oy * sh - pt
                he = min(hs + kh, H)
                hs = max(hs, 0)
                for ox in range(ow):
                    ws = ox * sw - pl
                    we = min(ws + kw, W)
                    ws = max(ws, 0)
                    inv = 1
                    inv = inv / ((he - hs) * (we - ws))
                    src = &dy[n, oy, ox, 0]
                    for iy in range(hs, he):
                        for ix in range(ws, we):
                            out = &dx[n, iy, ix, 0]
                            for c in range(C):
                                out[c] += src[c] * inv
