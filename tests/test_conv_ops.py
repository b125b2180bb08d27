"""psrt.nn's convolution and pooling ops (psrt/ops/conv_ops.py, pooling_ops.py, the loops of
_conv_kernels.pyx): forward values against TF's own kernel tests, random cases against a
naive numpy loop written here (NHWC and NCHW, strides, dilations, SAME/VALID, odd sizes),
gradients against central finite differences in float64 with a None batch dimension,
static shapes, dtypes and argument errors.

TF sources (r1.15) of the expected values, cited per test:
tensorflow/python/kernel_tests/conv_ops_test.py, pooling_ops_test.py,
conv2d_transpose_test.py, depthwise_conv_op_test.py; padding arithmetic:
tensorflow/core/framework/kernel_shape_util.cc (GetWindowedOutputSizeVerboseV2)."""

from __future__ import annotations

import ast
import inspect
import math
import pathlib

import numpy as np
import pytest

import psrt as tf
from psrt.ops import _conv_kernels
from psrt.ops import conv_ops as _conv_ops


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _iota(shape, dtype=np.float32):
    """TF's kernel tests' inputs: 1, 2, 3, ... in row-major order."""
    return np.arange(1, int(np.prod(shape)) + 1, dtype=dtype).reshape(shape)


def _nchw(a):
    return np.ascontiguousarray(np.transpose(a, (0, 3, 1, 2)))


def _nhwc(a):
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1)))


# ---- the naive reference: plain loops, TF's window rule written out once more -------------


def _ref_geometry(size, k, stride, dilation, padding):
    """(out, pad_before): TF's rule, from kernel_shape_util.cc's comment, written directly."""
    k_eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return math.ceil((size - k_eff + 1) / stride), 0
    out = math.ceil(size / stride)
    total = max(0, (out - 1) * stride + k_eff - size)
    return out, total // 2


def ref_conv2d(x, f, strides, padding, dilations=(1, 1)):
    n, h, w, c = x.shape
    kh, kw, _, o = f.shape
    oh, pt = _ref_geometry(h, kh, strides[0], dilations[0], padding)
    ow, pl = _ref_geometry(w, kw, strides[1], dilations[1], padding)
    y = np.zeros((n, oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            for di in range(kh):
                for dj in range(kw):
                    r = i * strides[0] - pt + di * dilations[0]
                    s = j * strides[1] - pl + dj * dilations[1]
                    if 0 <= r < h and 0 <= s < w:
                        y[:, i, j, :] += x[:, r, s, :] @ f[di, dj]
    return y


def ref_depthwise(x, f, strides, padding, rate=(1, 1)):
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    oh, pt = _ref_geometry(h, kh, strides[0], rate[0], padding)
    ow, pl = _ref_geometry(w, kw, strides[1], rate[1], padding)
    y = np.zeros((n, oh, ow, c * m))
    for i in range(oh):
        for j in range(ow):
            for di in range(kh):
                for dj in range(kw):
                    r = i * strides[0] - pt + di * rate[0]
                    s = j * strides[1] - pl + dj * rate[1]
                    if 0 <= r < h and 0 <= s < w:
                        for k in range(c):
                            for q in range(m):
                                y[:, i, j, k * m + q] += x[:, r, s, k] * f[di, dj, k, q]
    return y


def ref_pool(x, ksize, strides, padding, kind):
    n, h, w, c = x.shape
    oh, pt = _ref_geometry(h, ksize[0], strides[0], 1, padding)
    ow, pl = _ref_geometry(w, ksize[1], strides[1], 1, padding)
    y = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            r0, s0 = i * strides[0] - pt, j * strides[1] - pl
            win = x[:, max(r0, 0):r0 + ksize[0], max(s0, 0):s0 + ksize[1], :]
            y[:, i, j, :] = win.max(axis=(1, 2)) if kind == "MAX" else win.mean(axis=(1, 2))
    return y


def ref_conv2d_transpose(v, f, out_shape, strides, padding):
    """Scatter each value through the filter into the output: conv2d's input gradient."""
    n, h, w, c = out_shape
    kh, kw, _, _ = f.shape
    oh, pt = _ref_geometry(h, kh, strides[0], 1, padding)
    ow, pl = _ref_geometry(w, kw, strides[1], 1, padding)
    assert (oh, ow) == v.shape[1:3]
    y = np.zeros(out_shape)
    for i in range(oh):
        for j in range(ow):
            for di in range(kh):
                for dj in range(kw):
                    r, s = i * strides[0] - pt + di, j * strides[1] - pl + dj
                    if 0 <= r < h and 0 <= s < w:
                        y[:, r, s, :] += v[:, i, j, :] @ f[di, dj].T
    return y


# ---- TF's own kernel test values ---------------------------------------------------------------

# conv_ops_test.py, Conv2DTest: input and filter 1, 2, 3, ...; (input, filter, strides,
# padding, expected)
TF_CONV2D = [
    ("testConv2D1x1Filter", [1, 2, 3, 3], [1, 1, 3, 3], [1, 1], "VALID",
     [30.0, 36.0, 42.0, 66.0, 81.0, 96.0, 102.0, 126.0, 150.0, 138.0, 171.0, 204.0, 174.0,
      216.0, 258.0, 210.0, 261.0, 312.0]),
    ("testConv2D2x2Filter", [1, 2, 3, 3], [2, 2, 3, 3], [1, 1], "VALID",
     [2271.0, 2367.0, 2463.0, 2901.0, 3033.0, 3165.0]),
    ("testConv2D1x2Filter", [1, 2, 3, 3], [1, 2, 3, 3], [1, 1], "VALID",
     [231.0, 252.0, 273.0, 384.0, 423.0, 462.0, 690.0, 765.0, 840.0, 843.0, 936.0, 1029.0]),
    ("testConv2D2x2FilterStride2", [1, 2, 3, 3], [2, 2, 3, 3], [2, 2], "VALID",
     [2271.0, 2367.0, 2463.0]),
    ("testConv2D2x2FilterStride2Same", [1, 2, 3, 3], [2, 2, 3, 3], [2, 2], "SAME",
     [2271.0, 2367.0, 2463.0, 1230.0, 1305.0, 1380.0]),
    ("testConv2D2x2FilterStride1x2", [1, 3, 6, 1], [2, 2, 1, 1], [1, 2], "VALID",
     [58.0, 78.0, 98.0, 118.0, 138.0, 158.0]),
    ("testConv2DKernelSmallerThanStrideValid", [1, 7, 7, 1], [2, 2, 1, 1], [3, 3], "VALID",
     [65, 95, 275, 305]),
    ("testConv2DKernelSmallerThanStrideSame/1", [1, 3, 3, 1], [1, 1, 1, 1], [2, 2], "SAME",
     [1, 3, 7, 9]),
    ("testConv2DKernelSmallerThanStrideSame/2", [1, 4, 4, 1], [1, 1, 1, 1], [2, 2], "SAME",
     [1, 3, 9, 11]),
    ("testConv2DKernelSmallerThanStrideSame/3", [1, 4, 4, 1], [2, 2, 1, 1], [3, 3], "SAME",
     [44, 28, 41, 16]),
]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", TF_CONV2D, ids=[c[0] for c in TF_CONV2D])
def test_conv2d_matches_tf_kernel_tests(sess, case, data_format):
    _, in_sizes, f_sizes, strides, padding, expected = case
    x, f = _iota(in_sizes), _iota(f_sizes)
    if data_format == "NHWC":
        y = tf.nn.conv2d(x, f, [1] + strides + [1], padding)
        got = sess.run(y)
    else:
        y = tf.nn.conv2d(_nchw(x), f, [1, 1] + strides, padding, data_format="NCHW")
        got = _nhwc(sess.run(y))
    assert got.dtype == np.float32
    assert list(y.shape) == list(sess.run(y).shape)
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6)


# conv_ops_test.py, testConv2D*BackpropInput / BackpropFilter: filter (or input) and the
# output gradient 1, 2, 3, ...; (input, filter, output, strides, padding, expected)
TF_BACKPROP_INPUT = [
    ([1, 2, 3, 1], [2, 2, 1, 1], [1, 1, 2, 1], [1, 1], "VALID", [1.0, 4.0, 4.0, 3.0, 10.0, 8.0]),
    ([1, 2, 3, 3], [2, 2, 3, 3], [1, 1, 2, 3], [1, 1], "VALID",
     [14.0, 32.0, 50.0, 100.0, 163.0, 226.0, 167.0, 212.0, 257.0, 122.0, 140.0, 158.0, 478.0,
      541.0, 604.0, 437.0, 482.0, 527.0]),
    ([1, 3, 6, 1], [2, 2, 1, 1], [1, 2, 3, 1], [1, 2], "VALID",
     [1.0, 2.0, 2.0, 4.0, 3.0, 6.0, 7.0, 12.0, 11.0, 18.0, 15.0, 24.0, 12.0, 16.0, 15.0, 20.0,
      18.0, 24.0]),
    ([1, 4, 4, 1], [1, 1, 1, 1], [1, 2, 2, 1], [2, 2], "SAME",
     [1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
]
TF_BACKPROP_FILTER = [
    ([1, 2, 3, 1], [2, 2, 1, 1], [1, 1, 2, 1], [1, 1], "VALID", [5.0, 8.0, 14.0, 17.0]),
    ([1, 2, 3, 3], [2, 2, 3, 3], [1, 1, 2, 3], [1, 1], "VALID",
     [17.0, 22.0, 27.0, 22.0, 29.0, 36.0, 27.0, 36.0, 45.0, 32.0, 43.0, 54.0, 37.0, 50.0, 63.0,
      42.0, 57.0, 72.0, 62.0, 85.0, 108.0, 67.0, 92.0, 117.0, 72.0, 99.0, 126.0, 77.0, 106.0,
      135.0, 82.0, 113.0, 144.0, 87.0, 120.0, 153.0]),
    ([1, 3, 6, 1], [2, 2, 1, 1], [1, 2, 3, 1], [1, 2], "VALID", [161.0, 182.0, 287.0, 308.0]),
    ([1, 4, 4, 1], [1, 1, 1, 1], [1, 2, 2, 1], [2, 2], "SAME", [78.0]),
]


@pytest.mark.parametrize("case", TF_BACKPROP_INPUT)
def test_conv2d_input_gradient_matches_tf_backprop_input_tests(sess, case):
    in_sizes, f_sizes, out_sizes, strides, padding, expected = case
    x = tf.placeholder(tf.float32, [None] + in_sizes[1:])
    y = tf.nn.conv2d(x, _iota(f_sizes), [1] + strides + [1], padding)
    assert y.shape.as_list() == [None] + out_sizes[1:]
    (dx,) = tf.gradients(y, [x], grad_ys=_iota(out_sizes))
    got = sess.run(dx, {x: np.zeros(in_sizes, np.float32)})
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6)


@pytest.mark.parametrize("case", TF_BACKPROP_FILTER)
def test_conv2d_filter_gradient_matches_tf_backprop_filter_tests(sess, case):
    in_sizes, f_sizes, out_sizes, strides, padding, expected = case
    f = tf.placeholder(tf.float32, f_sizes)
    y = tf.nn.conv2d(_iota(in_sizes), f, [1] + strides + [1], padding)
    (df,) = tf.gradients(y, [f], grad_ys=_iota(out_sizes))
    got = sess.run(df, {f: np.zeros(f_sizes, np.float32)})
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", TF_BACKPROP_INPUT)
def test_conv2d_backprop_input_matches_tf(sess, case, data_format):
    # conv_ops_test.py _RunAndVerifyBackpropInput: tf.nn.conv2d_backprop_input itself
    in_sizes, f_sizes, out_sizes, strides, padding, expected = case
    dy = _iota(out_sizes)
    if data_format == "NHWC":
        y = tf.nn.conv2d_backprop_input(in_sizes, _iota(f_sizes), dy, [1, *strides, 1],
                                        padding)
        got = sess.run(y)
    else:
        sizes = [in_sizes[0], in_sizes[3], in_sizes[1], in_sizes[2]]
        y = tf.nn.conv2d_backprop_input(tf.constant(sizes), _iota(f_sizes), _nchw(dy),
                                        [1, 1, *strides], padding, data_format="NCHW")
        got = _nhwc(sess.run(y))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", TF_BACKPROP_FILTER)
def test_conv2d_backprop_filter_matches_tf(sess, case, data_format):
    # conv_ops_test.py _RunAndVerifyBackpropFilter: tf.nn.conv2d_backprop_filter itself
    in_sizes, f_sizes, out_sizes, strides, padding, expected = case
    x, dy = _iota(in_sizes), _iota(out_sizes)
    if data_format == "NHWC":
        y = tf.nn.conv2d_backprop_filter(x, f_sizes, dy, [1, *strides, 1], padding)
    else:
        y = tf.nn.conv2d_backprop_filter(_nchw(x), f_sizes, _nchw(dy), [1, 1, *strides],
                                         padding, data_format="NCHW")
    assert y.shape.as_list() == f_sizes
    np.testing.assert_allclose(sess.run(y).ravel(), expected, rtol=1e-6)


def test_conv2d_backprop_ops_gradients(sess):
    # nn_grad.py _Conv2DBackpropInputGrad / _Conv2DBackpropFilterGrad, checked numerically
    xs, fs, st, dl, pads = (2, 6, 5, 2), (3, 2, 2, 3), [1, 2, 1, 1], [1, 1, 1, 1], "SAME"
    check_grad(sess, lambda x, dy: tf.nn.conv2d_backprop_filter(x, list(fs), dy, st, pads),
               xs, (2, 3, 5, 3))
    check_grad(sess, lambda dy, f: tf.nn.conv2d_backprop_input(
        tf.stack([tf.shape(dy)[0], 6, 5, 2]), f, dy, st, pads), (2, 3, 5, 3), fs)
    dl = [1, 2, 2, 1]
    explicit = [[0, 0], [1, 2], [0, 1], [0, 0]]
    check_grad(sess, lambda x, dy: tf.nn.conv2d_backprop_filter(
        x, list(fs), dy, 1, explicit, dilations=dl), xs, (2, 5, 4, 3))


# pooling_ops_test.py: input 1, 2, 3, ...; (name, func, input, ksize, strides, padding,
# expected)
TF_POOL = [
    ("testAvgPoolValidPadding", "avg", [1, 3, 3, 3], [2, 2], [2, 2], "VALID", [7.0, 8.0, 9.0]),
    ("testAvgPoolSamePadding", "avg", [1, 2, 4, 3], [2, 2], [2, 2], "SAME",
     [8.5, 9.5, 10.5, 14.5, 15.5, 16.5]),
    ("testAvgPoolSamePaddingNonSquareWindow", "avg", [1, 2, 2, 1], [1, 2], [1, 1], "SAME",
     [1.5, 2.0, 3.5, 4.0]),
    ("testAvgPoolValidPaddingUnevenStride", "avg", [1, 3, 3, 3], [2, 2], [1, 2], "VALID",
     [7.0, 8.0, 9.0, 16.0, 17.0, 18.0]),
    ("testAvgPoolSamePadding4", "avg", [1, 4, 4, 4], [2, 2], [2, 2], "SAME",
     [11.0, 12.0, 13.0, 14.0, 19.0, 20.0, 21.0, 22.0, 43.0, 44.0, 45.0, 46.0, 51.0, 52.0, 53.0,
      54.0]),
    ("testAvgPoolSamePaddingPacket4", "avg", [1, 4, 4, 4], [3, 3], [2, 2], "SAME",
     [21.0, 22.0, 23.0, 24.0, 27.0, 28.0, 29.0, 30.0, 45.0, 46.0, 47.0, 48.0, 51.0, 52.0, 53.0,
      54.0]),
    ("testMaxPoolValidPadding", "max", [1, 3, 3, 3], [2, 2], [2, 2], "VALID",
     [13.0, 14.0, 15.0]),
    ("testMaxPoolSamePadding", "max", [1, 2, 3, 3], [2, 2], [2, 2], "SAME",
     [13.0, 14.0, 15.0, 16.0, 17.0, 18.0]),
    ("testMaxPoolSamePaddingNonSquareWindow", "max", [1, 2, 2, 1], [1, 2], [1, 1], "SAME",
     [2.0, 2.0, 4.0, 4.0]),
    ("testMaxPoolValidPaddingUnevenStride", "max", [1, 4, 4, 1], [2, 2], [1, 2], "VALID",
     [6.0, 8.0, 10.0, 12.0, 14.0, 16.0]),
    ("testMaxPoolSamePaddingPacket4", "max", [1, 4, 4, 4], [2, 2], [2, 2], "SAME",
     [21.0, 22.0, 23.0, 24.0, 29.0, 30.0, 31.0, 32.0, 53.0, 54.0, 55.0, 56.0, 61.0, 62.0, 63.0,
      64.0]),
    ("testKernelSmallerThanStrideValid/max", "max", [1, 7, 7, 1], [2, 2], [3, 3], "VALID",
     [9, 12, 30, 33]),
    ("testKernelSmallerThanStrideValid/avg", "avg", [1, 7, 7, 1], [2, 2], [3, 3], "VALID",
     [5, 8, 26, 29]),
    ("testKernelSmallerThanStrideSame/max", "max", [1, 4, 4, 1], [1, 1], [2, 2], "SAME",
     [1, 3, 9, 11]),
    ("testKernelSmallerThanStrideSame/avg", "avg", [1, 3, 3, 1], [1, 1], [2, 2], "SAME",
     [1, 3, 7, 9]),
]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", TF_POOL, ids=[c[0] for c in TF_POOL])
def test_pooling_matches_tf_kernel_tests(sess, case, data_format):
    _, kind, in_sizes, ksize, strides, padding, expected = case
    fn = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool
    x = _iota(in_sizes)
    if data_format == "NHWC":
        got = sess.run(fn(x, [1] + ksize + [1], [1] + strides + [1], padding))
    else:
        got = _nhwc(sess.run(fn(_nchw(x), [1, 1] + ksize, [1, 1] + strides, padding,
                                data_format="NCHW")))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6)


def test_max_pool_gradient_goes_to_the_first_maximum(sess):
    # pooling_ops_test.py testMaxPoolingGradWithArgmax: input [1,1,1,1,0,1,1,1,1] (3x3),
    # 2x2 windows, stride 1, VALID: argmax [0, 1, 3, 5] (the first maximum of each window
    # in row-major order), so the gradient [11, 12, 13, 14] lands there.
    x = tf.placeholder(tf.float32, [None, 3, 3, 1])
    y = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
    (dx,) = tf.gradients(y, [x], grad_ys=np.array([11.0, 12.0, 13.0, 14.0],
                                                  np.float32).reshape(1, 2, 2, 1))
    inp = np.array([1, 1, 1, 1, 0, 1, 1, 1, 1], np.float32).reshape(1, 3, 3, 1)
    out, got = sess.run([y, dx], {x: inp})
    np.testing.assert_array_equal(out.ravel(), [1, 1, 1, 1])
    np.testing.assert_array_equal(got.ravel(), [11, 12, 0, 13, 0, 14, 0, 0, 0])


def test_avg_pool_same_gradient_divides_by_in_bounds_count(sess):
    # AvgPoolGrad: each output's gradient spread over the elements it averaged. A 2x2
    # input, 2x2 windows stride 1 SAME: windows cover 4, 2, 2, 1 elements.
    x = tf.placeholder(tf.float32, [None, 2, 2, 1])
    y = tf.nn.avg_pool(x, 2, 1, "SAME")
    (dx,) = tf.gradients(y, [x])
    got = sess.run(dx, {x: np.zeros((1, 2, 2, 1), np.float32)})
    np.testing.assert_allclose(got.ravel(), [1 / 4, 1 / 4 + 1 / 2, 1 / 4 + 1 / 2,
                                             1 / 4 + 1 / 2 + 1 / 2 + 1], rtol=1e-6)


def test_depthwise_conv2d_matches_tf_hand_values(sess):
    # depthwise_conv_op_test.py testConv2D2x2Filter (_VerifyHandValues): input [1, 2, 3, 2],
    # filter [2, 2, 2, 2], both 1, 2, 3, ...; stride 1, VALID.
    x, f = _iota([1, 2, 3, 2]), _iota([2, 2, 2, 2])
    y = tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID")
    assert y.shape.as_list() == [1, 1, 2, 4]
    expected = [196, 216, 272, 296, 252, 280, 344, 376]
    np.testing.assert_allclose(sess.run(y).ravel(), expected, rtol=1e-6)
    y2 = tf.nn.depthwise_conv2d(_nchw(x), f, [1, 1, 1, 1], "VALID", data_format="NCHW")
    np.testing.assert_allclose(_nhwc(sess.run(y2)).ravel(), expected, rtol=1e-6)


@pytest.mark.parametrize("strides", [1, 2])
def test_conv2d_transpose_matches_tf_counting_tests(sess, strides):
    # conv2d_transpose_test.py testConv2DTransposeSingleStride / testConv2DTransposeSame:
    # all-ones value [2, 6, 4, 3] and filter [3, 3, 2, 3], SAME; each output counts the
    # value cells that reach it (times the 3 input channels).
    y_shape = [2, 6, 4, 2] if strides == 1 else [2, 12, 8, 2]
    x = np.ones([2, 6, 4, 3], np.float32)
    f = np.ones([3, 3, 2, 3], np.float32)
    out = tf.nn.conv2d_transpose(x, f, y_shape, strides=[1, strides, strides, 1],
                                 padding="SAME")
    assert out.shape.as_list() == y_shape
    value = sess.run(out)
    assert value.dtype == np.float32 and list(value.shape) == y_shape
    for h in range(y_shape[1]):
        for w in range(y_shape[2]):
            if strides == 1:
                h_in, w_in = 0 < h < y_shape[1] - 1, 0 < w < y_shape[2] - 1
                target = 4 * 3.0 + (5 * 3.0 if h_in and w_in else 2 * 3.0 if h_in or w_in
                                    else 0)
            else:
                h_in = h % 2 == 0 and 0 < h < y_shape[1] - 1
                w_in = w % 2 == 0 and 0 < w < y_shape[2] - 1
                target = 3.0 + (9.0 if h_in and w_in else 3.0 if h_in or w_in else 0)
            np.testing.assert_allclose(value[:, h, w, :], target)


# ---- random cases against the naive loops ------------------------------------------------------

CONV_CASES = [  # (input NHWC, filter, strides, dilations, padding)
    ((2, 7, 6, 3), (3, 3, 3, 4), (1, 1), (1, 1), "SAME"),
    ((2, 7, 6, 3), (3, 3, 3, 4), (1, 1), (1, 1), "VALID"),
    ((1, 9, 8, 2), (3, 2, 2, 3), (2, 3), (1, 1), "SAME"),
    ((1, 9, 8, 2), (3, 2, 2, 3), (2, 3), (1, 1), "VALID"),
    ((2, 10, 9, 2), (3, 3, 2, 2), (1, 1), (2, 3), "SAME"),
    ((2, 10, 9, 2), (3, 3, 2, 2), (1, 1), (2, 2), "VALID"),
    ((1, 11, 11, 3), (4, 4, 3, 2), (3, 2), (2, 1), "SAME"),
    ((3, 5, 5, 4), (1, 1, 4, 5), (1, 1), (1, 1), "SAME"),
    ((1, 4, 4, 1), (5, 5, 1, 1), (1, 1), (1, 1), "SAME"),
    ((2, 6, 5, 3), (2, 2, 3, 1), (4, 4), (1, 1), "SAME"),
]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_random_against_naive_loops(sess, case, data_format):
    xs, fs, st, dl, padding = case
    rng = np.random.default_rng(1)
    x, f = rng.normal(size=xs), rng.normal(size=fs)
    want = ref_conv2d(x, f, st, padding, dl)
    if data_format == "NHWC":
        y = tf.nn.conv2d(x, f, [1, *st, 1], padding, dilations=[1, *dl, 1])
        got = sess.run(y)
    else:
        y = tf.nn.conv2d(_nchw(x), f, [1, 1, *st], padding, data_format="NCHW",
                         dilations=[1, 1, *dl])
        got = _nhwc(sess.run(y))
    assert got.dtype == np.float64
    assert y.shape.as_list() == list(sess.run(y).shape)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [((2, 7, 6, 3), (3, 3, 3, 2), (1, 1), (1, 1), "SAME"),
                                  ((1, 8, 9, 2), (3, 2, 2, 3), (2, 3), (1, 1), "VALID"),
                                  ((2, 9, 9, 2), (3, 3, 2, 1), (1, 1), (2, 3), "SAME"),
                                  ((1, 5, 6, 3), (2, 2, 3, 2), (3, 3), (1, 1), "SAME")])
def test_depthwise_conv2d_random_against_naive_loops(sess, case):
    xs, fs, st, rate, padding = case
    rng = np.random.default_rng(2)
    x, f = rng.normal(size=xs), rng.normal(size=fs)
    y = tf.nn.depthwise_conv2d(x, f, [1, *st, 1], padding, rate=list(rate))
    np.testing.assert_allclose(sess.run(y), ref_depthwise(x, f, st, padding, rate),
                               rtol=1e-10, atol=1e-10)
    y2 = tf.nn.depthwise_conv2d(_nchw(x), f, [1, 1, *st], padding, rate=list(rate),
                                data_format="NCHW")
    np.testing.assert_allclose(_nhwc(sess.run(y2)), ref_depthwise(x, f, st, padding, rate),
                               rtol=1e-10, atol=1e-10)


POOL_CASES = [((2, 7, 6, 3), (3, 3), (2, 2), "SAME"), ((2, 7, 6, 3), (3, 3), (2, 2), "VALID"),
              ((1, 5, 8, 2), (2, 3), (1, 3), "SAME"), ((1, 9, 9, 1), (3, 2), (3, 1), "VALID"),
              ((2, 4, 4, 2), (5, 5), (1, 1), "SAME")]


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pooling_random_against_naive_loops(sess, case, kind):
    xs, ks, st, padding = case
    x = np.random.default_rng(3).normal(size=xs)
    fn = tf.nn.max_pool if kind == "MAX" else tf.nn.avg_pool
    y = fn(x, [1, *ks, 1], [1, *st, 1], padding)
    want = ref_pool(x, ks, st, padding, kind)
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-12)
    y2 = fn(_nchw(x), list(ks), list(st), padding, data_format="NCHW")
    np.testing.assert_allclose(_nhwc(sess.run(y2)), want, rtol=1e-12)
    y3 = tf.nn.pool(x, ks, kind, padding, strides=st)
    np.testing.assert_allclose(sess.run(y3), want, rtol=1e-12)


@pytest.mark.parametrize("case", [((2, 7, 6, 3), (3, 3, 3, 4), (2, 2), "SAME"),
                                  ((1, 8, 7, 2), (3, 2, 2, 3), (2, 3), "VALID"),
                                  ((2, 5, 5, 2), (2, 2, 2, 2), (1, 1), "SAME")])
def test_conv2d_transpose_random_against_naive_scatter(sess, case):
    out_shape, fs, st, padding = case
    oh, _ = _ref_geometry(out_shape[1], fs[0], st[0], 1, padding)
    ow, _ = _ref_geometry(out_shape[2], fs[1], st[1], 1, padding)
    rng = np.random.default_rng(4)
    v, f = rng.normal(size=(out_shape[0], oh, ow, fs[3])), rng.normal(size=fs)
    y = tf.nn.conv2d_transpose(v, f, list(out_shape), [1, *st, 1], padding)
    want = ref_conv2d_transpose(v, f, out_shape, st, padding)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10, atol=1e-10)
    y2 = tf.nn.conv2d_transpose(_nchw(v), f, [out_shape[0], out_shape[3], *out_shape[1:3]],
                                [1, 1, *st], padding, data_format="NCHW")
    np.testing.assert_allclose(_nhwc(sess.run(y2)), want, rtol=1e-10, atol=1e-10)


def test_conv1d_and_convolution_agree_with_conv2d(sess):
    rng = np.random.default_rng(5)
    x, f = rng.normal(size=(2, 11, 3)), rng.normal(size=(3, 3, 4))
    want = ref_conv2d(x[:, None], f[None], (1, 2), "SAME")[:, 0]
    y = tf.nn.conv1d(x, f, 2, "SAME")
    assert y.shape.as_list() == [2, 6, 4]
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10)
    y_ncw = tf.nn.conv1d(np.transpose(x, (0, 2, 1)), f, 2, "SAME", data_format="NCW")
    np.testing.assert_allclose(np.transpose(sess.run(y_ncw), (0, 2, 1)), want, rtol=1e-10)
    np.testing.assert_allclose(sess.run(tf.nn.convolution(x, f, "SAME", strides=[2])), want,
                               rtol=1e-10)
    x2, f2 = rng.normal(size=(1, 9, 8, 2)), rng.normal(size=(3, 3, 2, 3))
    got = sess.run(tf.nn.convolution(x2, f2, "VALID", dilation_rate=[2, 1]))
    np.testing.assert_allclose(got, ref_conv2d(x2, f2, (1, 1), "VALID", (2, 1)), rtol=1e-10)


@pytest.mark.parametrize("fs", [(3, 3, 2, 2), (1, 1, 2, 3)])
def test_explicit_padding(sess, fs):
    rng = np.random.default_rng(6)
    x, f = rng.normal(size=(1, 5, 6, 2)), rng.normal(size=fs)
    y = tf.nn.conv2d(x, f, [1, 2, 1, 1], [[0, 0], [1, 2], [0, 3], [0, 0]])
    xp = np.pad(x, [(0, 0), (1, 2), (0, 3), (0, 0)])
    want = ref_conv2d(xp, f, (2, 1), "VALID")
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10)
    y1 = tf.nn.conv2d(x, f, 1, [[0, 0], [0, 2], [1, 0], [0, 0]])
    want1 = ref_conv2d(np.pad(x, [(0, 0), (0, 2), (1, 0), (0, 0)]), f, (1, 1), "VALID")
    np.testing.assert_allclose(sess.run(y1), want1, rtol=1e-10)


def test_separable_and_atrous_conv2d(sess):
    # nn_impl.separable_conv2d: depthwise then a 1x1 conv2d (VALID); nn_ops.atrous_conv2d:
    # conv2d at dilation rate
    rng = np.random.default_rng(8)
    x, dw, pw = (rng.normal(size=(2, 7, 6, 3)), rng.normal(size=(3, 3, 3, 2)),
                 rng.normal(size=(1, 1, 6, 4)))
    want = ref_conv2d(ref_depthwise(x, dw, (2, 2), "SAME"), pw, (1, 1), "VALID")
    y = tf.nn.separable_conv2d(x, dw, pw, [1, 2, 2, 1], "SAME")
    assert y.shape.as_list() == [2, 4, 3, 4]
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10)
    y2 = tf.nn.separable_conv2d(_nchw(x), dw, pw, [1, 1, 2, 2], "SAME", data_format="NCHW")
    np.testing.assert_allclose(_nhwc(sess.run(y2)), want, rtol=1e-10)
    check_grad(sess, lambda a, b, c: tf.nn.separable_conv2d(a, b, c, [1, 1, 1, 1], "VALID",
                                                            rate=[2, 1]),
               (1, 6, 5, 2), (2, 2, 2, 2), (1, 1, 4, 2))
    f = rng.normal(size=(3, 3, 3, 2))
    np.testing.assert_allclose(sess.run(tf.nn.atrous_conv2d(x, f, 2, "SAME")),
                               ref_conv2d(x, f, (1, 1), "SAME", (2, 2)), rtol=1e-10)
    with pytest.raises(ValueError, match="pointwise_filter must be \\[1, 1, "):
        tf.nn.separable_conv2d(x, dw, np.ones((2, 1, 6, 4)), 1, "SAME")
    with pytest.raises(ValueError, match="rate 0 cannot be less than one"):
        tf.nn.atrous_conv2d(x, f, 0, "SAME")


@pytest.mark.parametrize("fs,pads", [((1, 1, 2, 3), [[0, 0], [0, 2], [1, 0], [0, 0]]),
                                     ((2, 2, 2, 1), [[0, 0], [3, 0], [0, 4], [0, 0]])])
def test_explicit_padding_gradients(sess, fs, pads):
    # a 1x1 filter with padding after (the output is bigger than the input), and padding
    # wider than the window (rows that only padding reaches)
    check_grad(sess, lambda x, f: tf.nn.conv2d(x, f, 1, pads), (2, 4, 5, 2), fs)
    check_grad(sess, lambda x, f: tf.nn.conv2d(x, f, [1, 2, 2, 1], pads), (1, 5, 4, 2), fs)


# ---- gradients: central finite differences in float64, None batch ---------------------------


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(sess, build, *shapes, seed=0, distinct=False):
    """psrt.gradients of sum(w * build(*phs)) vs central differences: float64 placeholders
    with a None batch dimension (the first input's), a random weighting w."""
    rng = np.random.default_rng(seed)
    vals = []
    for s in shapes:
        v = rng.normal(size=s)
        if distinct:  # values apart by much more than eps: no ties for max_pool to break
            v = rng.permutation(np.arange(np.prod(s), dtype=np.float64)).reshape(s) * 0.01
        vals.append(v)
    phs = [tf.placeholder(tf.float64, [None] + list(s[1:]) if k == 0 else list(s))
           for k, s in enumerate(shapes)]
    y = build(*phs)
    feed = dict(zip(phs, vals))
    out = sess.run(y, feed)
    assert out.dtype == np.float64
    wgt = rng.normal(size=out.shape)
    loss = tf.reduce_sum(y * wgt)
    grads = tf.gradients(loss, phs)
    got = sess.run(grads, feed)
    for k, v in enumerate(vals):
        def f(xk, k=k):
            fd = dict(feed)
            fd[phs[k]] = xk
            return float(sess.run(loss, fd))
        np.testing.assert_allclose(got[k], _numeric_grad(f, v), rtol=1e-6, atol=1e-7)


GRAD_CASES = [((2, 5, 6, 2), (3, 3, 2, 3), (1, 1), (1, 1), "SAME"),
              ((2, 6, 5, 2), (3, 2, 2, 2), (2, 2), (1, 1), "VALID"),
              ((1, 7, 6, 2), (2, 3, 2, 2), (2, 1), (1, 1), "SAME"),
              ((2, 7, 7, 1), (3, 3, 1, 2), (1, 1), (2, 2), "SAME")]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", GRAD_CASES)
def test_conv2d_gradients(sess, case, data_format):
    xs, fs, st, dl, padding = case
    if data_format == "NCHW":
        xs = (xs[0], xs[3], xs[1], xs[2])
        check_grad(sess, lambda x, f: tf.nn.conv2d(x, f, [1, 1, *st], padding,
                                                   data_format="NCHW", dilations=[1, 1, *dl]),
                   xs, fs)
    else:
        check_grad(sess, lambda x, f: tf.nn.conv2d(x, f, [1, *st, 1], padding,
                                                   dilations=[1, *dl, 1]), xs, fs)


@pytest.mark.parametrize("case", [((3, 7, 7, 1), (3, 3, 1, 2), (1, 1), "SAME"),
                                  ((3, 6, 5, 4), (2, 3, 4, 2), (2, 1), "VALID")])
def test_conv2d_over_several_im2col_chunks(sess, monkeypatch, case):
    # conv_ops.py works on chunks of images (one GEMM per chunk, the filter gradient summed
    # over them) and keeps the forward's patches for the filter gradient of an input of few
    # channels (the first case, C = 1; the second, C = 4, rebuilds them): with one image per
    # chunk the values are still the naive loops' and the gradients the finite differences'.
    xs, fs, st, padding = case
    monkeypatch.setattr(_conv_ops, "_CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(_conv_ops, "_BIG_CHUNK_ELEMENTS", 1)
    x, f = np.random.default_rng(4).normal(size=xs), np.random.default_rng(5).normal(size=fs)
    y = tf.nn.conv2d(x, f, [1, *st, 1], padding)
    np.testing.assert_allclose(sess.run(y), ref_conv2d(x, f, st, padding), rtol=1e-10,
                               atol=1e-10)
    check_grad(sess, lambda x, f: tf.nn.conv2d(x, f, [1, *st, 1], padding), xs, fs)


def test_the_kernels_reject_a_patch_matrix_that_does_not_fit():
    # the compiled loops index without bounds checks: a misfit is a ValueError, not a write
    # past the end (geometry: 3x3 window, stride 1, no padding, 2x2 outputs of a 4x4 image)
    x = np.zeros((2, 4, 4, 3), np.float32)
    geometry = (3, 3, 1, 1, 1, 1, 0, 0, 2, 2)
    _conv_kernels.im2col(x, np.zeros((8, 27), np.float32), 0, *geometry)   # both images
    for rows, cols, n0 in ((8, 27, 1), (6, 27, 0), (4, 26, 0), (12, 27, 0)):
        with pytest.raises(ValueError, match="patch matrix"):
            _conv_kernels.im2col(x, np.zeros((rows, cols), np.float32), n0, *geometry)
        with pytest.raises(ValueError, match="patch matrix"):
            _conv_kernels.col2im(np.zeros((rows, cols), np.float32), x, n0, *geometry)
    y, arg = np.zeros((2, 2, 2, 3), np.float32), np.zeros((2, 2, 2, 2), np.int32)
    with pytest.raises(ValueError, match="do not fit"):
        _conv_kernels.max_pool(x, y, arg, 2, 2, 2, 2, 0, 0)


@pytest.mark.parametrize("case", [((2, 5, 6, 2), (3, 3, 2, 2), (1, 1), (1, 1), "SAME"),
                                  ((1, 7, 6, 3), (2, 3, 3, 1), (2, 2), (1, 1), "VALID"),
                                  ((2, 7, 7, 2), (2, 2, 2, 2), (1, 1), (2, 3), "SAME")])
def test_depthwise_conv2d_gradients(sess, case):
    xs, fs, st, rate, padding = case
    check_grad(sess, lambda x, f: tf.nn.depthwise_conv2d(x, f, [1, *st, 1], padding,
                                                         rate=list(rate)), xs, fs)
    xc = (xs[0], xs[3], xs[1], xs[2])
    check_grad(sess, lambda x, f: tf.nn.depthwise_conv2d(x, f, [1, 1, *st], padding,
                                                         rate=list(rate),
                                                         data_format="NCHW"), xc, fs)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", [((2, 7, 6, 2), (3, 3, 2, 2), (2, 2), "SAME"),
                                  ((1, 7, 8, 2), (3, 2, 2, 3), (2, 3), "VALID")])
def test_conv2d_transpose_gradients(sess, case, data_format):
    out_shape, fs, st, padding = case
    oh, _ = _ref_geometry(out_shape[1], fs[0], st[0], 1, padding)
    ow, _ = _ref_geometry(out_shape[2], fs[1], st[1], 1, padding)
    if data_format == "NHWC":
        def build(v, f):
            shape = tf.stack([tf.shape(v)[0], out_shape[1], out_shape[2], out_shape[3]])
            return tf.nn.conv2d_transpose(v, f, shape, [1, *st, 1], padding)
        check_grad(sess, build, (out_shape[0], oh, ow, fs[3]), fs)
    else:
        def build(v, f):
            return tf.nn.conv2d_transpose(v, f, [tf.shape(v)[0], out_shape[3], out_shape[1],
                                                 out_shape[2]], [1, 1, *st], padding,
                                          data_format="NCHW")
        check_grad(sess, build, (out_shape[0], fs[3], oh, ow), fs)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", [((2, 6, 5, 2), (3, 3), (2, 2), "SAME"),
                                  ((2, 7, 7, 2), (3, 2), (2, 3), "VALID"),
                                  ((1, 5, 5, 3), (2, 2), (1, 1), "SAME")])
def test_pooling_gradients(sess, case, kind, data_format):
    xs, ks, st, padding = case
    fn = tf.nn.max_pool if kind == "MAX" else tf.nn.avg_pool
    if data_format == "NCHW":
        xs = (xs[0], xs[3], xs[1], xs[2])
    check_grad(sess, lambda x: fn(x, list(ks), list(st), padding, data_format=data_format),
               xs, distinct=True)


# ---- shapes, dtypes, errors --------------------------------------------------------------------


def test_static_shapes_with_unknown_dimensions():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 32, None, 3])
    assert tf.nn.conv2d(x, np.zeros((3, 3, 3, 8), np.float32), 2, "SAME").shape.as_list() \
        == [None, 16, None, 8]
    assert tf.nn.max_pool(x, 3, 2, "VALID").shape.as_list() == [None, 15, None, 3]
    xc = tf.placeholder(tf.float32, [None, 3, 9, 9])
    assert tf.nn.avg_pool(xc, 2, 2, "SAME", data_format="NCHW").shape.as_list() \
        == [None, 3, 5, 5]
    assert tf.nn.depthwise_conv2d(xc, np.zeros((3, 3, 3, 2), np.float32), [1, 1, 1, 1],
                                  "VALID", data_format="NCHW").shape.as_list() \
        == [None, 6, 7, 7]
    v = tf.placeholder(tf.float32, [None, 4, 4, 8])
    t = tf.nn.conv2d_transpose(v, np.zeros((3, 3, 5, 8), np.float32),
                               tf.stack([tf.shape(v)[0], 8, 8, 5]), [1, 2, 2, 1])
    assert t.shape.as_list() == [None, None, None, 5]


@pytest.mark.parametrize("build", [
    lambda x: tf.nn.conv2d(x, np.ones((2, 2, 3, 2), np.float32), [1, 1, 1, 1], "SAME"),
    lambda x: tf.nn.depthwise_conv2d(x, np.ones((2, 2, 3, 2), np.float32), [1, 1, 1, 1],
                                     "SAME"),
    lambda x: tf.nn.max_pool(x, 2, 2, "SAME"),
    lambda x: tf.nn.avg_pool(x, 2, 2, "VALID"),
    lambda x: tf.nn.conv2d_transpose(x, np.ones((2, 2, 2, 3), np.float32), [2, 8, 8, 2],
                                     [1, 2, 2, 1])])
def test_float32_in_float32_out_and_minimize_runs(sess, build):
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    y = build(x)
    assert y.dtype == tf.float32
    (dx,) = tf.gradients(tf.reduce_sum(y), [x])
    out, g = sess.run([y, dx], {x: np.ones((2, 4, 4, 3), np.float32)})
    assert out.dtype == np.float32 and g.dtype == np.float32 and g.shape == (2, 4, 4, 3)


def test_bad_padding_and_data_format_name_the_value_and_the_choices():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    f = np.ones((2, 2, 3, 2), np.float32)
    for call in (lambda: tf.nn.conv2d(x, f, 1, "same"),
                 lambda: tf.nn.max_pool(x, 2, 2, "FULL"),
                 lambda: tf.nn.avg_pool(x, 2, 2, "FULL"),
                 lambda: tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "FULL"),
                 lambda: tf.nn.conv2d_transpose(x, f, [1, 4, 4, 2], 1, "FULL")):
        with pytest.raises(ValueError, match=r"padding must be \"SAME\" or \"VALID\".*got "
                                             r"'(same|FULL)'"):
            call()
    for call in (lambda: tf.nn.conv2d(x, f, 1, "SAME", data_format="NWHC"),
                 lambda: tf.nn.max_pool(x, 2, 2, "SAME", data_format="NWHC"),
                 lambda: tf.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "SAME",
                                                data_format="NWHC"),
                 lambda: tf.nn.conv2d_transpose(x, f, [1, 4, 4, 2], 1, "SAME",
                                                data_format="NWHC")):
        with pytest.raises(ValueError, match="data_format must be one of 'NHWC', 'NCHW'; "
                                             "got 'NWHC'"):
            call()
    with pytest.raises(ValueError, match="Invalid pooling_type: 'MIN'; expected 'MAX' or 'AVG'"):
        tf.nn.pool(x, [2, 2], "MIN", "SAME")


def test_other_argument_errors():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    f = np.ones((2, 2, 3, 2), np.float32)
    with pytest.raises(ValueError, match="batch and depth"):
        tf.nn.conv2d(x, f, [2, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="strides should be of length 1, 2 or 4 but was 3"):
        tf.nn.conv2d(x, f, [1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="input depth 3 does not match the filter's input "
                                         "depth 2"):
        tf.nn.conv2d(x, np.ones((2, 2, 2, 2), np.float32), 1, "SAME")
    with pytest.raises(TypeError, match="float64 does not match type float32"):
        tf.nn.conv2d(x, tf.placeholder(tf.float64, [2, 2, 3, 2]), 1, "SAME")
    with pytest.raises(TypeError, match="float16, float32 or float64; got int32"):
        tf.nn.max_pool(tf.placeholder(tf.int32, [None, 4, 4, 3]), 2, 2, "SAME")
    with pytest.raises(ValueError, match="strides > 1 not supported in conjunction with rate"):
        tf.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME", rate=[2, 2])
    with pytest.raises(ValueError, match="input channels does not match filter's input "
                                         "channels, 3 != 2"):
        tf.nn.conv2d_transpose(x, f, [1, 8, 8, 3], [1, 2, 2, 1])
    with pytest.raises(ValueError, match="output_shape does not match filter's output "
                                         "channels, 4 != 3"):
        tf.nn.conv2d_transpose(x, np.ones((2, 2, 3, 3), np.float32), [1, 8, 8, 4], 2)
    with pytest.raises(ValueError, match="negative"):
        tf.nn.conv2d(x, np.ones((6, 6, 3, 2), np.float32), 1, "VALID")


def test_run_time_shape_errors(sess):
    x = tf.placeholder(tf.float32, None)
    y = tf.nn.conv2d(x, np.ones((2, 2, 3, 2), np.float32), 1, "SAME")
    with pytest.raises(tf.errors.InvalidArgumentError, match="input depth 4 does not match"):
        sess.run(y, {x: np.ones((1, 4, 4, 4), np.float32)})
    v = tf.placeholder(tf.float32, [None, 3, 3, 2])
    t = tf.nn.conv2d_transpose(v, np.ones((3, 3, 1, 2), np.float32), [1, 8, 8, 1], 2)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"size of out_backprop doesn't match computed: actual = \[3, 3\], "
                             r"computed = \[4, 4\]"):
        sess.run(t, {v: np.ones((1, 3, 3, 2), np.float32)})


def test_empty_batch(sess):
    # conv_ops_test.py testConv2DEmpty: a batch of 0 gives an empty output.
    x = np.zeros((0, 2, 3, 3), np.float32)
    y = tf.nn.conv2d(x, _iota([1, 1, 3, 3]), [1, 1, 1, 1], "VALID")
    assert sess.run(y).shape == (0, 2, 3, 3)
    assert sess.run(tf.nn.max_pool(x, 2, 1, "SAME")).shape == (0, 2, 3, 3)


def test_a_small_cnn_trains_with_minimize(sess):
    # conv2d -> relu -> max_pool -> depthwise_conv2d -> avg_pool -> dense, variables from
    # get_variable, GradientDescentOptimizer.minimize: the loss falls as it does in TF.
    rng = np.random.default_rng(7)
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    labels = tf.placeholder(tf.int64, [None])
    init = tf.truncated_normal_initializer(stddev=0.3, seed=1)
    w1 = tf.get_variable("w1", [3, 3, 1, 4], initializer=init)
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(x, w1, [1, 1, 1, 1], "SAME")), [1, 2, 2, 1],
                       [1, 2, 2, 1], "SAME")
    wd = tf.get_variable("wd", [3, 3, 4, 1], initializer=init)
    h = tf.nn.avg_pool(tf.nn.depthwise_conv2d(h, wd, [1, 1, 1, 1], "SAME"), 2, 2, "VALID")
    w2 = tf.get_variable("w2", [16, 2], initializer=init)
    logits = tf.matmul(tf.reshape(h, [-1, 16]), w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    xs = rng.normal(size=(64, 8, 8, 1)).astype(np.float32)
    ys = (xs[:, :4].sum(axis=(1, 2, 3)) > 0).astype(np.int64)
    sess.run(tf.global_variables_initializer())
    before = sess.run([loss, w1, wd, w2], {x: xs, labels: ys})
    for _ in range(150):
        sess.run(train, {x: xs, labels: ys})
    after = sess.run([loss, w1, wd, w2], {x: xs, labels: ys})
    assert after[0] < 0.5 * before[0], (before[0], after[0])
    for b, a in zip(before[1:], after[1:]):  # every layer's weights moved
        assert np.abs(a - b).max() > 1e-3


def test_python_lists_are_float32_as_tf_converts_them(sess):
    x = [[[[1.0], [2.0]], [[3.0], [4.0]]]]
    y = tf.nn.max_pool(x, 2, 1, "VALID")
    assert y.dtype == tf.float32
    np.testing.assert_array_equal(sess.run(y), np.full((1, 1, 1, 1), 4.0, np.float32))
    z = tf.nn.conv2d(x, [[[[1.0]]]], 1, "VALID")
    assert z.dtype == tf.float32 and sess.run(z).dtype == np.float32


def test_float16_is_computed_in_float32_and_stays_float16(sess):
    x = _iota([1, 2, 3, 3], np.float16)
    y = tf.nn.conv2d(x, _iota([2, 2, 3, 3], np.float16), [1, 2, 2, 1], "SAME")
    p = tf.nn.avg_pool(x, 2, 2, "SAME")
    assert y.dtype == tf.float16 and p.dtype == tf.float16
    got_y, got_p = sess.run([y, p])
    assert got_y.dtype == got_p.dtype == np.float16
    # conv_ops_test.py testConv2D2x2FilterStride2Same (TF's float16 tolerance, 1e-3)
    np.testing.assert_allclose(got_y.ravel(), [2271.0, 2367.0, 2463.0, 1230.0, 1305.0,
                                               1380.0], rtol=1e-3)


def test_the_kernel_stub_lists_the_compiled_functions():
    # src/psrt/ops/_conv_kernels.pyi (what mypy reads) names exactly the compiled module's
    # public functions, with their parameters in order
    stub = pathlib.Path(__file__).resolve().parents[1] / "src/psrt/ops/_conv_kernels.pyi"
    funcs = {n.name: [a.arg for a in n.args.args] for n in ast.parse(stub.read_text()).body
             if isinstance(n, ast.FunctionDef)}
    public = {n for n in dir(_conv_kernels) if not n.startswith("_")
              and callable(getattr(_conv_kernels, n))}
    assert set(funcs) == public
    for name, params in funcs.items():
        sig = inspect.signature(getattr(_conv_kernels, name))
        assert list(sig.parameters) == params, name


def test_conv2d_passes_split_over_threads_agree_with_one_thread():
    """psrt/ops/conv_threads.py: with intra-op threads, a conv2d pass runs its chunks of
    images in parts at once (BLAS single-threaded meanwhile, restored after); the forward
    and the input gradient are the same numbers (each chunk writes its own images), the
    filter gradient the same sum in another order."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from psrt.ops import conv_ops, conv_threads

    if not conv_ops._blas_threads():
        pytest.skip("no BLAS threadpoolctl can drive")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((40, 14, 14, 16)).astype(np.float32)
    w = rng.standard_normal((5, 5, 16, 32)).astype(np.float32)
    dy = rng.standard_normal((40, 14, 14, 32)).astype(np.float32)
    g = conv_ops._Geometry("Conv2D", (14, 14), (5, 5), (1, 1), (1, 1), "SAME", None)
    wm = w.reshape(-1, 32)
    assert len(list(g.chunks(40, wm.shape[0], conv_ops._CHUNK_ELEMENTS))) >= 4
    with threadpool_limits(1, user_api="blas"):
        one = (conv_ops._conv_forward(x, wm, g), conv_ops._conv_filter_grad(x, dy, g),
               conv_ops._conv_input_grad(dy, wm, g, x.shape))
        try:
            conv_threads.set_intra_op_threads(3)
            split = (conv_ops._conv_forward(x, wm, g), conv_ops._conv_filter_grad(x, dy, g),
                     conv_ops._conv_input_grad(dy, wm, g, x.shape))
        finally:
            conv_threads.set_intra_op_threads(0)
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert blas and all(n == 1 for n in blas)   # set back to what it was
    np.testing.assert_array_equal(split[0], one[0])
    np.testing.assert_allclose(split[1], one[1], rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(split[2], one[2])
    assert conv_threads.split(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError, match="intra_op_parallelism_threads must be >= 0"):
        tf.ConfigProto(intra_op_parallelism_threads=-1)
