# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The loops of psrt's convolution and pooling ops (psrt/ops/conv_ops.py) that numpy cannot
do in one pass: im2col (the patches of a strided, dilated, padded convolution as the rows of
one GEMM operand), col2im (its adjoint, a scatter-add), max pooling with its argmax and the
argmax's gradient scatter, average pooling over in-bounds elements and its gradient; and the
same for 3-D volumes (vol2col/col2vol, dilated 3-D max and average pooling, TF's MaxPool3DGrad
rule) used by psrt/ops/conv3d_ops.py, pooling3d_ops.py and the dilated tf.nn.pool.

Every 2-D array is NHWC (3-D: NDHWC) and C-contiguous, float32 or float64 (one fused type per
call; 2-D max pooling's argmax int32 window taps); outputs are allocated by the caller (numpy)
and passed in, so this module needs no numpy headers.
Window geometry follows TF's (tensorflow/core/framework/kernel_shape_util.cc): output row
``oy`` reads input rows ``oy * stride - pad_before + k * dilation`` for ``k < ksize``; rows
outside ``[0, H)`` are padding (zeros for convolutions, skipped by pooling).

Speed: at dilation 1 the ``kw`` taps of one filter row read ``kw * C`` consecutive input
values, so im2col and col2im move whole runs (one per filter row, clipped at the borders)
instead of ``kw`` pieces of ``C``; the pooling loops keep the channel loop innermost and
branch-free so that gcc vectorizes it.

A worker-side kernel module of the ops layer: it imports nothing of psrt (docs/architecture.md).
The loops release the GIL.
"""

from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

ctypedef fused real:
    float
    double


# The innermost loops as C++ templates (instantiated for float and double): a short run is
# copied by a plain loop (a call to memcpy costs more than copying 5 floats, MNIST's first
# layer's run), a long one by memcpy; __restrict__ tells gcc that the runs do not overlap,
# so it vectorizes without run-time alias checks. psrt_max_tap is one tap of a max-pooling
# window over C channels, branch-free: where[c] takes the tap exactly when the value is
# greater (as ``if v > best[c]``), by a mask, the form gcc vectorizes for float32.
cdef extern from *:
    """
    #include <cstring>
    template <typename T>
    static inline void psrt_copy(T* __restrict__ d, const T* __restrict__ s, Py_ssize_t m) {
        if (m > 32) { std::memcpy(d, s, (size_t)m * sizeof(T)); return; }
        for (Py_ssize_t i = 0; i < m; ++i) d[i] = s[i];
    }
    template <typename T>
    static inline void psrt_zero(T* __restrict__ d, Py_ssize_t m) {
        for (Py_ssize_t i = 0; i < m; ++i) d[i] = T(0);
    }
    template <typename T>
    static inline void psrt_add(T* __restrict__ d, const T* __restrict__ s, Py_ssize_t m) {
        for (Py_ssize_t i = 0; i < m; ++i) d[i] += s[i];
    }
    template <typename T>
    static inline void psrt_max_tap(const T* __restrict__ s, T* __restrict__ best,
                                    int* __restrict__ where, Py_ssize_t m, int tap) {
        for (Py_ssize_t i = 0; i < m; ++i) {
            const T v = s[i], b = best[i];
            const int take = -(int)(v > b);   /* all ones where v > b */
            where[i] = (where[i] & ~take) | (tap & take);
            best[i] = v > b ? v : b;
        }
    }
    """
    void psrt_copy[T](T* d, const T* s, Py_ssize_t m) noexcept nogil
    void psrt_zero[T](T* d, Py_ssize_t m) noexcept nogil
    void psrt_add[T](T* d, const T* s, Py_ssize_t m) noexcept nogil
    void psrt_max_tap[T](const T* s, T* best, int* where, Py_ssize_t m, int tap) noexcept nogil


cdef inline void _copy(real* dst, const real* src, Py_ssize_t m) noexcept nogil:
    psrt_copy(dst, src, m)


cdef inline void _zero(real* dst, Py_ssize_t m) noexcept nogil:
    psrt_zero(dst, m)


cdef inline void _add(real* dst, const real* src, Py_ssize_t m) noexcept nogil:
    psrt_add(dst, src, m)


cdef inline Py_ssize_t _clip(Py_ssize_t v, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    return lo if v < lo else (hi if v > hi else v)


cdef list _dims(Py_ssize_t* shape, int ndim):
    return [shape[i] for i in range(ndim)]


cdef int _check_cols(Py_ssize_t n_images, Py_ssize_t rows, Py_ssize_t width, Py_ssize_t n0,
                     int kh, int kw, Py_ssize_t C, int oh, int ow, str what) except -1:
    """Raise ValueError unless a ``[rows, width]`` patch matrix fits images ``n0 ..`` of
    an input of ``n_images`` (the loops index without bounds checks)."""
    cdef Py_ssize_t per = <Py_ssize_t>oh * ow
    if width != kh * kw * C or (per == 0 and rows != 0) or (per and rows % per) \
            or n0 < 0 or (per and n0 + rows // per > n_images):
        raise ValueError(f"{what}: a [{rows}, {width}] patch matrix does not fit images "
                         f"{n0}.. of {n_images} with {oh}x{ow} outputs of {kh}x{kw}x{C} "
                         f"patches")
    return 0


def im2col(const real[:, :, :, ::1] x, real[:, ::1] cols, Py_ssize_t n0,
           int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl,
           int oh, int ow):
    """Fill ``cols`` ``[nb * oh * ow, kh * kw * C]`` with the patches of images
    ``n0 .. n0 + nb`` of ``x`` ``[N, H, W, C]``; a row's columns are ordered (ky, kx, c),
    as a ``[kh, kw, C, O]`` filter reshaped to ``[kh * kw * C, O]``.

    Raises ValueError when ``cols``'s shape does not fit ``x`` and the geometry."""
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], C = x.shape[3]
    _check_cols(x.shape[0], cols.shape[0], cols.shape[1], n0, kh, kw, C, oh, ow, "im2col")
    cdef Py_ssize_t nb = cols.shape[0] // (<Py_ssize_t>oh * ow) if oh * ow else 0
    cdef Py_ssize_t K = cols.shape[1], run = kw * C
    cdef Py_ssize_t n, oy, ox, ky, kx, iy, ix, x0, lo, hi
    cdef real* dst
    cdef real* seg
    cdef const real* img
    if nb == 0 or K == 0:
        return
    with nogil:
        dst = &cols[0, 0]
        for n in range(n0, n0 + nb):
            img = &x[n, 0, 0, 0]
            for oy in range(oh):
                for ox in range(ow):
                    x0 = ox * sw - pl
                    # taps kx in [lo, hi) read columns inside [0, W) (dilation 1)
                    lo = _clip(-x0, 0, kw)
                    hi = _clip(W - x0, lo, kw)
                    for ky in range(kh):
                        iy = oy * sh - pt + ky * dh
                        seg = dst + ky * run
                        if iy < 0 or iy >= H:
                            _zero(seg, run)
                        elif dw == 1:
                            _zero(seg, lo * C)
                            _copy(seg + lo * C, img + (iy * W + x0 + lo) * C, (hi - lo) * C)
                            _zero(seg + hi * C, (kw - hi) * C)
                        else:
                            for kx in range(kw):
                                ix = x0 + kx * dw
                                if 0 <= ix < W:
                                    _copy(seg + kx * C, img + (iy * W + ix) * C, C)
                                else:
                                    _zero(seg + kx * C, C)
                    dst += K


def col2im(const real[:, ::1] cols, real[:, :, :, ::1] dx, Py_ssize_t n0,
           int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl,
           int oh, int ow):
    """The adjoint of :func:`im2col`: add each row of ``cols`` back into the input
    positions its patch read (padding positions dropped). ``dx`` ``[N, H, W, C]`` must hold
    zeros (or the sum so far) for images ``n0 .. n0 + nb``. The rows are added in order,
    so the sums are the same as one patch at a time.

    Raises ValueError when ``cols``'s shape does not fit ``dx`` and the geometry."""
    cdef Py_ssize_t H = dx.shape[1], W = dx.shape[2], C = dx.shape[3]
    _check_cols(dx.shape[0], cols.shape[0], cols.shape[1], n0, kh, kw, C, oh, ow, "col2im")
    cdef Py_ssize_t nb = cols.shape[0] // (<Py_ssize_t>oh * ow) if oh * ow else 0
    cdef Py_ssize_t K = cols.shape[1], run = kw * C
    cdef Py_ssize_t n, oy, ox, ky, kx, iy, ix, x0, lo, hi
    cdef const real* src
    cdef const real* seg
    cdef real* img
    if nb == 0 or K == 0:
        return
    with nogil:
        src = &cols[0, 0]
        for n in range(n0, n0 + nb):
            img = &dx[n, 0, 0, 0]
            for oy in range(oh):
                for ox in range(ow):
                    x0 = ox * sw - pl
                    lo = _clip(-x0, 0, kw)
                    hi = _clip(W - x0, lo, kw)
                    for ky in range(kh):
                        iy = oy * sh - pt + ky * dh
                        if iy < 0 or iy >= H:
                            continue
                        seg = src + ky * run
                        if dw == 1:
                            _add(img + (iy * W + x0 + lo) * C, seg + lo * C, (hi - lo) * C)
                        else:
                            for kx in range(kw):
                                ix = x0 + kx * dw
                                if 0 <= ix < W:
                                    _add(img + (iy * W + ix) * C, seg + kx * C, C)
                    src += K


def max_pool(const real[:, :, :, ::1] x, real[:, :, :, ::1] y, int[:, :, :, ::1] arg,
             int kh, int kw, int sh, int sw, int pt, int pl):
    """``y[n, oy, ox, c]``: the maximum of ``x`` over the in-bounds part of the window;
    ``arg`` (int32) the tap ``ky * kw + kx`` of the first maximum in row-major window order
    (TF's MaxPoolGrad routes the gradient there; ``ky``, ``kx`` count from the window's
    unclipped corner ``(oy * sh - pt, ox * sw - pl)``): a later element replaces the
    maximum only when greater (``>``), so a NaN never replaces and a first NaN stays."""
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef Py_ssize_t N = y.shape[0], oh = y.shape[1], ow = y.shape[2]
    cdef Py_ssize_t n, oy, ox, iy, ix, c, hs, he, ws, we, y0, x0
    cdef const real* src
    cdef const real* img
    cdef real* best
    cdef int* where
    cdef real v
    cdef int tap
    if y.shape[3] != C or arg.shape[0] != N or arg.shape[1] != oh or arg.shape[2] != ow \
            or arg.shape[3] != C or N > x.shape[0]:
        raise ValueError(f"max_pool: output {_dims(y.shape, 4)} and argmax "
                         f"{_dims(arg.shape, 4)} do not fit input {_dims(x.shape, 4)}")
    if N == 0 or oh == 0 or ow == 0 or C == 0:
        return
    with nogil:
        for n in range(N):
            img = &x[n, 0, 0, 0]
            for oy in range(oh):
                y0 = oy * sh - pt
                hs = max(y0, 0)
                he = min(y0 + kh, H)
                for ox in range(ow):
                    x0 = ox * sw - pl
                    ws = max(x0, 0)
                    we = min(x0 + kw, W)
                    best = &y[n, oy, ox, 0]
                    where = &arg[n, oy, ox, 0]
                    src = img + (hs * W + ws) * C
                    tap = (hs - y0) * kw + (ws - x0)
                    for c in range(C):
                        best[c] = src[c]
                        where[c] = tap
                    # the first tap compares with itself (never greater)
                    for iy in range(hs, he):
                        for ix in range(ws, we):
                            src = img + (iy * W + ix) * C
                            tap = (iy - y0) * kw + (ix - x0)
                            psrt_max_tap(src, best, where, C, tap)


def max_pool_grad(const real[:, :, :, ::1] dy, const int[:, :, :, ::1] arg,
                  real[:, :, :, ::1] dx, int kh, int kw, int sh, int sw, int pt, int pl):
    """Add ``dy[n, oy, ox, c]`` into ``dx`` at its window's argmax tap ``arg`` (from
    :func:`max_pool` with the same geometry; ``dx`` zeroed by the caller); overlapping
    windows that share a maximum add up, in output order."""
    cdef Py_ssize_t H = dx.shape[1], W = dx.shape[2], C = dx.shape[3]
    cdef Py_ssize_t N = dy.shape[0], oh = dy.shape[1], ow = dy.shape[2]
    cdef Py_ssize_t n, oy, ox, c, k, taps = <Py_ssize_t>kh * kw, corner
    cdef const real* g
    cdef const int* a
    cdef real* img
    cdef Py_ssize_t* offset
    if dy.shape[3] != C or arg.shape[0] != N or arg.shape[1] != oh or arg.shape[2] != ow \
            or arg.shape[3] != C or N > dx.shape[0]:
        raise ValueError(f"max_pool_grad: gradient {_dims(dy.shape, 4)}, argmax "
                         f"{_dims(arg.shape, 4)} and input gradient {_dims(dx.shape, 4)} do "
                         f"not fit")
    if N == 0 or oh == 0 or ow == 0 or C == 0:
        return
    # offset[k]: where tap k lies from its window's corner, in elements of one image
    offset = <Py_ssize_t*>malloc(max(taps, 1) * sizeof(Py_ssize_t))
    if offset == NULL:
        raise MemoryError()
    for k in range(taps):
        offset[k] = ((k // kw) * W + k % kw) * C
    with nogil:
        for n in range(N):
            img = &dx[n, 0, 0, 0]
            for oy in range(oh):
                for ox in range(ow):
                    corner = ((oy * sh - pt) * W + ox * sw - pl) * C
                    g = &dy[n, oy, ox, 0]
                    a = &arg[n, oy, ox, 0]
                    for c in range(C):
                        img[corner + offset[a[c]] + c] += g[c]
    free(offset)


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


# ---- 3-D: vol2col/col2vol and pooling over [N, D, H, W, C] with dilations ------------------
# Window geometry per spatial axis as above, plus a dilation: output plane ``oz`` reads input
# planes ``oz * sd - pf + k * dd`` for ``k < kd``. The 2-D ops with a dilation (tf.nn.pool)
# and max_pool_with_argmax run these with D = 1.


def vol2col(const real[:, :, :, :, ::1] x, real[:, ::1] cols, Py_ssize_t n0,
            int kd, int kh, int kw, int sd, int sh, int sw, int dd, int dh, int dw,
            int pf, int pt, int pl, int od, int oh, int ow):
    """Fill ``cols`` ``[nb * od * oh * ow, kd * kh * kw * C]`` with the patches of volumes
    ``n0 .. n0 + nb`` of ``x`` ``[N, D, H, W, C]``; a row's columns are ordered
    (kz, ky, kx, c), as a ``[kd, kh, kw, C, O]`` filter reshaped to ``[kd * kh * kw * C, O]``."""
    cdef Py_ssize_t D = x.shape[1], H = x.shape[2], W = x.shape[3], C = x.shape[4]
    cdef Py_ssize_t per = od * oh * ow
    cdef Py_ssize_t nb = cols.shape[0] // per if per else 0
    cdef Py_ssize_t n, oz, oy, ox, kz, ky, kx, iz, iy, ix, row, col
    cdef bint zin, yin
    cdef real* dst
    with nogil:
        row = 0
        for n in range(n0, n0 + nb):
            for oz in range(od):
                for oy in range(oh):
                    for ox in range(ow):
                        dst = &cols[row, 0]
                        col = 0
                        for kz in range(kd):
                            iz = oz * sd - pf + kz * dd
                            zin = 0 <= iz < D
                            for ky in range(kh):
                                iy = oy * sh - pt + ky * dh
                                yin = zin and 0 <= iy < H
                                for kx in range(kw):
                                    ix = ox * sw - pl + kx * dw
                                    if yin and 0 <= ix < W:
                                        memcpy(dst + col, &x[n, iz, iy, ix, 0], C * sizeof(real))
                                    else:
                                        memset(dst + col, 0, C * sizeof(real))
                                    col += C
                        row += 1


def col2vol(const real[:, ::1] cols, real[:, :, :, :, ::1] dx, Py_ssize_t n0,
            int kd, int kh, int kw, int sd, int sh, int sw, int dd, int dh, int dw,
            int pf, int pt, int pl, int od, int oh, int ow):
    """The adjoint of :func:`vol2col`: add each row of ``cols`` back into the input positions
    its patch read (padding dropped). ``dx`` ``[N, D, H, W, C]`` holds zeros (or the sum so
    far) for volumes ``n0 .. n0 + nb``."""
    cdef Py_ssize_t D = dx.shape[1], H = dx.shape[2], W = dx.shape[3], C = dx.shape[4]
    cdef Py_ssize_t per = od * oh * ow
    cdef Py_ssize_t nb = cols.shape[0] // per if per else 0
    cdef Py_ssize_t n, oz, oy, ox, kz, ky, kx, iz, iy, ix, row, col, c
    cdef bint zin, yin
    cdef const real* src
    cdef real* out
    with nogil:
        row = 0
        for n in range(n0, n0 + nb):
            for oz in range(od):
                for oy in range(oh):
                    for ox in range(ow):
                        src = &cols[row, 0]
                        col = 0
                        for kz in range(kd):
                            iz = oz * sd - pf + kz * dd
                            zin = 0 <= iz < D
                            for ky in range(kh):
                                iy = oy * sh - pt + ky * dh
                                yin = zin and 0 <= iy < H
                                for kx in range(kw):
                                    ix = ox * sw - pl + kx * dw
                                    if yin and 0 <= ix < W:
                                        out = &dx[n, iz, iy, ix, 0]
                                        for c in range(C):
                                            out[c] += src[col + c]
                                    col += C
                        row += 1


def max_pool3d(const real[:, :, :, :, ::1] x, real[:, :, :, :, ::1] y,
               long long[:, :, :, :, ::1] arg, int kd, int kh, int kw, int sd, int sh, int sw,
               int dd, int dh, int dw, int pf, int pt, int pl):
    """``y[n, oz, oy, ox, c]``: the maximum of ``x`` over the in-bounds taps of the (dilated)
    window; ``arg`` the position ``(iz * H + iy) * W + ix`` of the first maximum in the
    window's row-major tap order (a later tap replaces it only when greater). A window
    without an in-bounds tap gives 0 and ``arg`` -1."""
    cdef Py_ssize_t D = x.shape[1], H = x.shape[2], W = x.shape[3], C = x.shape[4]
    cdef Py_ssize_t N = y.shape[0], od = y.shape[1], oh = y.shape[2], ow = y.shape[3]
    cdef Py_ssize_t n, oz, oy, ox, kz, ky, kx, iz, iy, ix, c
    cdef bint first
    cdef const real* src
    cdef real* best
    cdef long long* where
    with nogil:
        for n in range(N):
            for oz in range(od):
                for oy in range(oh):
                    for ox in range(ow):
                        best = &y[n, oz, oy, ox, 0]
                        where = &arg[n, oz, oy, ox, 0]
                        first = True
                        for kz in range(kd):
                            iz = oz * sd - pf + kz * dd
                            if iz < 0 or iz >= D:
                                continue
                            for ky in range(kh):
                                iy = oy * sh - pt + ky * dh
                                if iy < 0 or iy >= H:
                                    continue
                                for kx in range(kw):
                                    ix = ox * sw - pl + kx * dw
                                    if ix < 0 or ix >= W:
                                        continue
                                    src = &x[n, iz, iy, ix, 0]
                                    if first:
                                        first = False
                                        for c in range(C):
                                            best[c] = src[c]
                                            where[c] = (iz * H + iy) * W + ix
                                    else:
                                        for c in range(C):
                                            if src[c] > best[c]:
                                                best[c] = src[c]
                                                where[c] = (iz * H + iy) * W + ix
                        if first:
                            for c in range(C):
                                best[c] = 0
                                where[c] = -1


def scatter_argmax(const real[:, :, ::1] dy, const long long[:, :, ::1] arg,
                   real[:, :, ::1] dx):
    """Add ``dy[n, o, c]`` into ``dx[n, arg[n, o, c], c]`` (``dx`` ``[N, S, C]``, zeroed by
    the caller; ``arg`` -1 is skipped): the gradient of a max pooling through its argmax, any
    number of spatial dimensions flattened into ``o`` and ``S``."""
    cdef Py_ssize_t N = dy.shape[0], O = dy.shape[1], C = dy.shape[2]
    cdef Py_ssize_t n, o, c
    cdef long long a
    with nogil:
        for n in range(N):
            for o in range(O):
                for c in range(C):
                    a = arg[n, o, c]
                    if a >= 0:
                        dx[n, a, c] += dy[n, o, c]


def max_pool3d_grad_near(const real[:, :, :, :, ::1] x, const real[:, :, :, :, ::1] y,
                         const real[:, :, :, :, ::1] dy, real[:, :, :, :, ::1] dx,
                         int kd, int kh, int kw, int sd, int sh, int sw, int dd, int dh,
                         int dw, int pf, int pt, int pl):
    """TF's CPU MaxPool3DGrad (tensorflow/core/kernels/pooling_ops_3d.cc): each ``dy`` is
    added to every in-bounds tap of its window whose input is within 1e-5 of the window's
    maximum ``y`` (ties all receive it). ``dx`` zeroed by the caller."""
    cdef Py_ssize_t D = x.shape[1], H = x.shape[2], W = x.shape[3], C = x.shape[4]
    cdef Py_ssize_t N = y.shape[0], od = y.shape[1], oh = y.shape[2], ow = y.shape[3]
    cdef Py_ssize_t n, oz, oy, ox, kz, ky, kx, iz, iy, ix, c
    cdef const real* src
    cdef const real* best
    cdef const real* g
    cdef real* out
    cdef real diff
    with nogil:
        for n in range(N):
            for oz in range(od):
                for oy in range(oh):
                    for ox in range(ow):
                        best = &y[n, oz, oy, ox, 0]
                        g = &dy[n, oz, oy, ox, 0]
                        for kz in range(kd):
                            iz = oz * sd - pf + kz * dd
                            if iz < 0 or iz >= D:
                                continue
                            for ky in range(kh):
                                iy = oy * sh - pt + ky * dh
                                if iy < 0 or iy >= H:
                                    continue
                                for kx in range(kw):
                                    ix = ox * sw - pl + kx * dw
                                    if ix < 0 or ix >= W:
                                        continue
                                    src = &x[n, iz, iy, ix, 0]
                                    out = &dx[n, iz, iy, ix, 0]
                                    for c in range(C):
                                        diff = src[c] - best[c]
                                        if -1e-5 < diff < 1e-5:
                                            out[c] += g[c]


cdef inline Py_ssize_t _taps(Py_ssize_t o, int s, int p, int k, int d, Py_ssize_t size,
                             Py_ssize_t* lo) noexcept nogil:
    """The in-bounds taps ``lo .. lo + count`` (tap indices) of output ``o`` on one axis."""
    cdef Py_ssize_t start = o * s - p, first = 0, last = k
    while first < k and start + first * d < 0:
        first += 1
    while last > first and start + (last - 1) * d >= size:
        last -= 1
    lo[0] = first
    return last - first


def avg_pool3d(const real[:, :, :, :, ::1] x, real[:, :, :, :, ::1] y, int kd, int kh, int kw,
               int sd, int sh, int sw, int dd, int dh, int dw, int pf, int pt, int pl):
    """``y[n, oz, oy, ox, c]``: the mean of ``x`` over the in-bounds taps of the (dilated)
    window (TF's AvgPool3D divides by the number of in-bounds elements; 0 for none)."""
    cdef Py_ssize_t D = x.shape[1], H = x.shape[2], W = x.shape[3], C = x.shape[4]
    cdef Py_ssize_t N = y.shape[0], od = y.shape[1], oh = y.shape[2], ow = y.shape[3]
    cdef Py_ssize_t n, oz, oy, ox, kz, ky, kx, c, z0, y0, x0, nz, ny, nx
    cdef const real* src
    cdef real* acc
    cdef real inv
    with nogil:
        for n in range(N):
            for oz in range(od):
                nz = _taps(oz, sd, pf, kd, dd, D, &z0)
                for oy in range(oh):
                    ny = _taps(oy, sh, pt, kh, dh, H, &y0)
                    for ox in range(ow):
                        nx = _taps(ox, sw, pl, kw, dw, W, &x0)
                        acc = &y[n, oz, oy, ox, 0]
                        for c in range(C):
                            acc[c] = 0
                        for kz in range(z0, z0 + nz):
                            for ky in range(y0, y0 + ny):
                                for kx in range(x0, x0 + nx):
                                    src = &x[n, oz * sd - pf + kz * dd, oy * sh - pt + ky * dh,
                                             ox * sw - pl + kx * dw, 0]
                                    for c in range(C):
                                        acc[c] += src[c]
                        if nz * ny * nx:
                            inv = 1
                            inv = inv / (nz * ny * nx)
                            for c in range(C):
                                acc[c] *= inv


def avg_pool3d_grad(const real[:, :, :, :, ::1] dy, real[:, :, :, :, ::1] dx, int kd, int kh,
                    int kw, int sd, int sh, int sw, int dd, int dh, int dw, int pf, int pt,
                    int pl):
    """The gradient of :func:`avg_pool3d`: each ``dy`` spread evenly over its window's
    in-bounds taps, added into ``dx`` (zeroed by the caller)."""
    cdef Py_ssize_t D = dx.shape[1], H = dx.shape[2], W = dx.shape[3], C = dx.shape[4]
    cdef Py_ssize_t N = dy.shape[0], od = dy.shape[1], oh = dy.shape[2], ow = dy.shape[3]
    cdef Py_ssize_t n, oz, oy, ox, kz, ky, kx, c, z0, y0, x0, nz, ny, nx
    cdef const real* src
    cdef real* out
    cdef real inv
    with nogil:
        for n in range(N):
            for oz in range(od):
                nz = _taps(oz, sd, pf, kd, dd, D, &z0)
                for oy in range(oh):
                    ny = _taps(oy, sh, pt, kh, dh, H, &y0)
                    for ox in range(ow):
                        nx = _taps(ox, sw, pl, kw, dw, W, &x0)
                        if nz * ny * nx == 0:
                            continue
                        inv = 1
                        inv = inv / (nz * ny * nx)
                        src = &dy[n, oz, oy, ox, 0]
                        for kz in range(z0, z0 + nz):
                            for ky in range(y0, y0 + ny):
                                for kx in range(x0, x0 + nx):
                                    out = &dx[n, oz * sd - pf + kz * dd, oy * sh - pt + ky * dh,
                                              ox * sw - pl + kx * dw, 0]
                                    for c in range(C):
                                        out[c] += src[c] * inv
