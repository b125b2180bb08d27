"""The rest of issue 20's tf.nn ops: ``max_pool_with_argmax`` (psrt/ops/pooling_ops.py),
``depthwise_conv2d_native`` and its backprop ops (psrt/ops/depthwise_conv_ops.py),
``conv2d_transpose`` with dilations and ``atrous_conv2d_transpose`` (psrt/ops/conv_ops.py),
``top_k(sorted=False)``: TF's own test values, naive loops written here, gradients against
float64 central differences with a None batch dimension, dtypes and argument errors.

TF sources (r1.15), cited per test: tensorflow/python/kernel_tests/pooling_ops_test.py
(testMaxPoolingWithArgmax, testMaxPoolingGradWithArgmax), depthwise_conv_op_test.py,
atrous_conv2d_test.py, conv2d_transpose_test.py, topk_op_test.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import psrt as tf


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _nchw(a):
    return np.ascontiguousarray(np.transpose(a, (0, 3, 1, 2)))


def _nhwc(a):
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1)))


def _iota(shape, dtype=np.float32):
    return np.arange(1, int(np.prod(shape)) + 1, dtype=dtype).reshape(shape)


def _geometry(size, k, stride, dilation, padding):
    k_eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return math.ceil((size - k_eff + 1) / stride), 0
    out = math.ceil(size / stride)
    return out, max(0, (out - 1) * stride + k_eff - size) // 2


def _taps(h, w, kh, kw, st, dl, padding):
    """(i, j, r, s, di, dj): output (i, j) reads input (r, s) through tap (di, dj)."""
    oh, pt = _geometry(h, kh, st[0], dl[0], padding)
    ow, pl = _geometry(w, kw, st[1], dl[1], padding)
    for i in range(oh):
        for j in range(ow):
            for di in range(kh):
                for dj in range(kw):
                    r, s = i * st[0] - pt + di * dl[0], j * st[1] - pl + dj * dl[1]
                    if 0 <= r < h and 0 <= s < w:
                        yield i, j, r, s, di, dj


def ref_depthwise(x, f, st, padding, dl=(1, 1)):
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    oh, ow = _geometry(h, kh, st[0], dl[0], padding)[0], _geometry(w, kw, st[1], dl[1],
                                                                    padding)[0]
    y = np.zeros((n, oh, ow, c, m))
    for i, j, r, s, di, dj in _taps(h, w, kh, kw, st, dl, padding):
        y[:, i, j] += x[:, r, s, :, None] * f[di, dj]
    return y.reshape(n, oh, ow, c * m)


def ref_conv2d_transpose(v, f, out_shape, st, padding, dl=(1, 1)):
    y = np.zeros(out_shape)
    for i, j, r, s, di, dj in _taps(out_shape[1], out_shape[2], f.shape[0], f.shape[1], st,
                                    dl, padding):
        y[:, r, s, :] += v[:, i, j, :] @ f[di, dj].T
    return y


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(sess, build, *shapes, seed=0, distinct=False):
    """psrt.gradients of sum(w * build(*phs)) vs central differences: float64 placeholders,
    the first with a None batch dimension, a random weighting w."""
    rng = np.random.default_rng(seed)
    vals = [rng.permutation(np.arange(np.prod(s), dtype=np.float64)).reshape(s) * 0.01
            if distinct else rng.normal(size=s) for s in shapes]
    phs = [tf.placeholder(tf.float64, [None] + list(s[1:]) if k == 0 else list(s))
           for k, s in enumerate(shapes)]
    y = build(*phs)
    feed = dict(zip(phs, vals))
    out = sess.run(y, feed)
    assert out.dtype == np.float64
    loss = tf.reduce_sum(y * rng.normal(size=out.shape))
    got = sess.run(tf.gradients(loss, phs), feed)
    for k, v in enumerate(vals):
        def f(xk, k=k):
            return float(sess.run(loss, {**feed, phs[k]: xk}))
        np.testing.assert_allclose(got[k], _numeric_grad(f, v), rtol=1e-6, atol=1e-7)


# ---- max_pool_with_argmax ----------------------------------------------------------------------

# pooling_ops_test.py testMaxPoolingWithArgmax: [2, 3, 3, 1], 2x2 windows, stride 1, VALID
ARGMAX_INPUT = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0,
                1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("include_batch,want", [(False, [0, 1, 3, 5, 0, 2, 6, 8]),
                                                (True, [0, 1, 3, 5, 9, 11, 15, 17])])
@pytest.mark.parametrize("targmax", [tf.int64, tf.int32])
def test_max_pool_with_argmax_matches_tf(sess, include_batch, want, targmax):
    t = np.asarray(ARGMAX_INPUT, np.float32).reshape(2, 3, 3, 1)
    out, argmax = tf.nn.max_pool_with_argmax(t, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1],
                                             Targmax=targmax, padding="VALID",
                                             include_batch_in_index=include_batch)
    o, a = sess.run([out, argmax])
    assert out.shape.as_list() == argmax.shape.as_list() == [2, 2, 2, 1]
    assert o.dtype == np.float32 and a.dtype == tf.as_dtype(targmax).as_numpy_dtype
    np.testing.assert_array_equal(o.ravel(), [1.0] * 8)
    np.testing.assert_array_equal(a.ravel(), want)


@pytest.mark.parametrize("include_batch", [False, True])
def test_max_pool_with_argmax_gradient_matches_tf(sess, include_batch):
    # pooling_ops_test.py testMaxPoolingGradWithArgmax: gradients 11, 12, 13, 14, 21, ...
    # land at the argmax positions
    x = tf.placeholder(tf.float32, [None, 3, 3, 1])
    out, _ = tf.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID",
                                        include_batch_in_index=include_batch)
    dy = np.asarray([11.0, 12.0, 13.0, 14.0, 21.0, 22.0, 23.0, 24.0],
                    np.float32).reshape(2, 2, 2, 1)
    (dx,) = tf.gradients(out, [x], grad_ys=[dy])
    got = sess.run(dx, {x: np.asarray(ARGMAX_INPUT, np.float32).reshape(2, 3, 3, 1)})
    np.testing.assert_array_equal(got.ravel(), [11.0, 12.0, 0.0, 13.0, 0.0, 14.0, 0.0, 0.0,
                                                0.0, 21.0, 0.0, 22.0, 0.0, 0.0, 0.0, 23.0,
                                                0.0, 24.0])


@pytest.mark.parametrize("case", [((2, 7, 6, 3), (3, 3), (2, 2), "SAME"),
                                  ((1, 6, 7, 2), (2, 3), (2, 3), "VALID")])
def test_max_pool_with_argmax_random_against_naive_loops(sess, case):
    xs, ks, st, padding = case
    x = np.random.default_rng(5).normal(size=xs)
    n, h, w, c = xs
    oh, pt = _geometry(h, ks[0], st[0], 1, padding)
    ow, pl = _geometry(w, ks[1], st[1], 1, padding)
    want_v, want_a = np.zeros((n, oh, ow, c)), np.zeros((n, oh, ow, c), np.int64)
    for b, i, j, k in np.ndindex(n, oh, ow, c):
        best = None
        for r in range(max(0, i * st[0] - pt), min(h, i * st[0] - pt + ks[0])):
            for s in range(max(0, j * st[1] - pl), min(w, j * st[1] - pl + ks[1])):
                if best is None or x[b, r, s, k] > best:
                    best, want_a[b, i, j, k] = x[b, r, s, k], ((b * h + r) * w + s) * c + k
        want_v[b, i, j, k] = best
    out, argmax = tf.nn.max_pool_with_argmax(x, list(ks), list(st), padding,
                                             include_batch_in_index=True)
    o, a = sess.run([out, argmax])
    np.testing.assert_array_equal(o, want_v)
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(sess.run(tf.nn.max_pool(x, list(ks), list(st), padding)), o)
    check_grad(sess, lambda v: tf.nn.max_pool_with_argmax(v, list(ks), list(st), padding)[0],
               xs, distinct=True)


def test_max_pool_with_argmax_errors():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4, 4, 2])
    with pytest.raises(ValueError, match="Cannot specify both 'output_dtype' and 'Targmax'"):
        tf.nn.max_pool_with_argmax(x, 2, 2, "SAME", Targmax=tf.int64, output_dtype=tf.int64)
    with pytest.raises(ValueError, match="other than 'NHWC' are not yet supported"):
        tf.nn.max_pool_with_argmax(x, 2, 2, "SAME", data_format="NCHW")
    with pytest.raises(ValueError, match="Targmax must be int32 or int64; got float32"):
        tf.nn.max_pool_with_argmax(x, 2, 2, "SAME", Targmax=tf.float32)
    with pytest.raises(ValueError, match=r"padding must be \"SAME\" or \"VALID\""):
        tf.nn.max_pool_with_argmax(x, 2, 2, "same")


# ---- depthwise_conv2d_native and its backprops -------------------------------------------------


def test_depthwise_conv2d_native_matches_tf_hand_values(sess):
    # depthwise_conv_op_test.py testConv2D2x2Filter (_VerifyHandValues runs the native op):
    # input [1, 2, 3, 2] and filter [2, 2, 2, 2] both 1, 2, 3, ...; stride 1, VALID
    x, f = _iota([1, 2, 3, 2]), _iota([2, 2, 2, 2])
    expected = [196, 216, 272, 296, 252, 280, 344, 376]
    y = tf.nn.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "VALID")
    assert y.shape.as_list() == [1, 1, 2, 4] and y.dtype == tf.float32
    np.testing.assert_allclose(sess.run(y).ravel(), expected, rtol=1e-6)
    y2 = tf.nn.depthwise_conv2d_native(_nchw(x), f, [1, 1, 1, 1], "VALID", data_format="NCHW")
    np.testing.assert_allclose(_nhwc(sess.run(y2)).ravel(), expected, rtol=1e-6)


NATIVE_CASES = [((2, 7, 6, 3), (3, 3, 3, 2), (2, 2), (1, 1), "SAME"),
                ((1, 8, 7, 2), (2, 3, 2, 3), (1, 2), (2, 1), "VALID"),
                ((2, 7, 7, 2), (2, 2, 2, 1), (1, 1), (2, 3), "SAME")]


@pytest.mark.parametrize("case", NATIVE_CASES)
def test_depthwise_native_and_backprops_against_naive_loops(sess, case):
    # depthwise_conv_op_test.py testDepthwiseConv2DInputGrad / FilterGrad check the backprop
    # ops as the forward op's gradients; here against the loops and tf.gradients
    xs, fs, st, dl, padding = case
    rng = np.random.default_rng(6)
    x, f = rng.normal(size=xs), rng.normal(size=fs)
    want = ref_depthwise(x, f, st, padding, dl)
    y = tf.nn.depthwise_conv2d_native(x, f, [1, *st, 1], padding, dilations=[1, *dl, 1])
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10, atol=1e-12)
    dy = rng.normal(size=want.shape)
    bi = tf.nn.depthwise_conv2d_native_backprop_input(list(xs), f, dy, [1, *st, 1], padding,
                                                      dilations=[1, *dl, 1])
    bf = tf.nn.depthwise_conv2d_native_backprop_filter(x, list(fs), dy, [1, *st, 1], padding,
                                                       dilations=[1, *dl, 1])
    xp, fp = tf.placeholder(tf.float64, xs), tf.placeholder(tf.float64, fs)
    gx, gf = tf.gradients(tf.nn.depthwise_conv2d_native(xp, fp, [1, *st, 1], padding,
                                                        dilations=[1, *dl, 1]),
                          [xp, fp], grad_ys=[dy])
    want_x, want_f = sess.run([gx, gf], {xp: x, fp: f})
    got_x, got_f = sess.run([bi, bf])
    assert bi.shape.as_list() == list(xs) and bf.shape.as_list() == list(fs)
    np.testing.assert_allclose(got_x, want_x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_f, want_f, rtol=1e-10, atol=1e-12)
    # the input gradient as the adjoint: <dy, depthwise(x)> = <backprop_input(dy), x>
    np.testing.assert_allclose(np.sum(dy * want), np.sum(got_x * x), rtol=1e-10)
    nc = [xs[0], xs[3], xs[1], xs[2]]
    bi_c = tf.nn.depthwise_conv2d_native_backprop_input(nc, f, _nchw(dy), [1, 1, *st], padding,
                                                        data_format="NCHW",
                                                        dilations=[1, 1, *dl])
    np.testing.assert_allclose(_nhwc(sess.run(bi_c)), got_x, rtol=1e-10, atol=1e-12)
    bf_c = tf.nn.depthwise_conv2d_native_backprop_filter(_nchw(x), fs, _nchw(dy),
                                                         [1, 1, *st], padding,
                                                         data_format="NCHW",
                                                         dilations=[1, 1, *dl])
    np.testing.assert_allclose(sess.run(bf_c), got_f, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", NATIVE_CASES[:2])
def test_depthwise_native_and_backprop_gradients(sess, case):
    xs, fs, st, dl, padding = case
    oh, ow = (_geometry(xs[1], fs[0], st[0], dl[0], padding)[0],
              _geometry(xs[2], fs[1], st[1], dl[1], padding)[0])
    ys = (xs[0], oh, ow, fs[2] * fs[3])
    kw = dict(strides=[1, *st, 1], padding=padding, dilations=[1, *dl, 1])
    check_grad(sess, lambda x, f: tf.nn.depthwise_conv2d_native(x, f, **kw), xs, fs)
    # the backprop ops are differentiable (TF's nn_grad.py gradients of both)
    check_grad(sess, lambda d, f: tf.nn.depthwise_conv2d_native_backprop_input(
        tf.stack([tf.shape(d)[0], *xs[1:]]), f, d, **kw), ys, fs)
    check_grad(sess, lambda x, d: tf.nn.depthwise_conv2d_native_backprop_filter(
        x, list(fs), d, **kw), xs, ys)


def test_depthwise_native_errors(sess):
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    with pytest.raises(ValueError, match="input depth 3 does not match the filter's "
                                         "in_channels 2"):
        tf.nn.depthwise_conv2d_native(x, np.ones((2, 2, 2, 1), np.float32), [1, 1, 1, 1],
                                      "SAME")
    with pytest.raises(ValueError, match="strides .* must be 1 in the batch and depth"):
        tf.nn.depthwise_conv2d_native(x, np.ones((2, 2, 3, 1), np.float32), [1, 1, 1, 2],
                                      "SAME")
    with pytest.raises(ValueError, match="input_sizes must have 4 entries"):
        tf.nn.depthwise_conv2d_native_backprop_input([1, 4, 4], np.ones((2, 2, 3, 1)),
                                                     np.ones((1, 4, 4, 3)), 1, "SAME")
    bi = tf.nn.depthwise_conv2d_native_backprop_input([1, 8, 8, 3],
                                                      np.ones((2, 2, 3, 1), np.float32),
                                                      np.ones((1, 4, 4, 3), np.float32),
                                                      1, "SAME")
    with pytest.raises(tf.errors.InvalidArgumentError, match="size of out_backprop doesn't "
                                                             "match computed"):
        sess.run(bi)


# ---- conv2d_transpose with dilations -----------------------------------------------------------


def _upsample_filters(f, rate):
    """atrous_conv2d_test.py's _upsample_filters: rate - 1 zeros between the taps."""
    kh, kw = f.shape[:2]
    up = np.zeros(((kh - 1) * rate + 1, (kw - 1) * rate + 1, *f.shape[2:]), f.dtype)
    up[::rate, ::rate] = f
    return up


@pytest.mark.parametrize("width", [9, 10])
def test_atrous_conv2d_transpose_matches_tf(sess, width):
    # atrous_conv2d_test.py testAtrousConv2DTransposeForward: atrous_conv2d_transpose (and
    # conv2d_transpose with dilations) equals conv2d_transpose with the upsampled filter
    x = np.arange(2 * 9 * width * 2, dtype=np.float32).reshape(2, 9, width, 2)
    for kh, kw, rate in [(1, 3, 2), (3, 2, 3), (3, 3, 2), (2, 2, 1)]:
        f = np.arange(kh * kw * 4, dtype=np.float32).reshape(kh, kw, 2, 2)
        for padding in ("SAME", "VALID"):
            khu, kwu = (kh - 1) * rate + 1, (kw - 1) * rate + 1
            y_shape = [2, 9, width, 2] if padding == "SAME" else [2, 9 + khu - 1,
                                                                  width + kwu - 1, 2]
            y1 = tf.nn.atrous_conv2d_transpose(x, f, y_shape, rate, padding)
            y2 = tf.nn.conv2d_transpose(x, _upsample_filters(f, rate), y_shape, [1, 1, 1, 1],
                                        padding)
            y3 = tf.nn.conv2d_transpose(x, f, y_shape, 1, padding, dilations=rate)
            a, b, c = sess.run([y1, y2, y3])
            np.testing.assert_allclose(a, b, rtol=1e-6)
            np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", [((2, 9, 8, 2), (3, 3, 2, 3), (2, 2), (1, 1), "SAME"),
                                  ((1, 9, 10, 3), (2, 3, 3, 2), (1, 1), (2, 3), "VALID"),
                                  ((2, 8, 9, 2), (2, 2, 2, 2), (2, 1), (2, 2), "SAME")])
def test_conv2d_transpose_dilated_against_naive_scatter_and_gradients(sess, case, data_format):
    out_shape, fs, st, dl, padding = case
    oh = _geometry(out_shape[1], fs[0], st[0], dl[0], padding)[0]
    ow = _geometry(out_shape[2], fs[1], st[1], dl[1], padding)[0]
    rng = np.random.default_rng(7)
    v, f = rng.normal(size=(out_shape[0], oh, ow, fs[3])), rng.normal(size=fs)
    want = ref_conv2d_transpose(v, f, out_shape, st, padding, dl)
    if data_format == "NHWC":
        y = tf.nn.conv2d_transpose(v, f, list(out_shape), [1, *st, 1], padding,
                                   dilations=[1, *dl, 1])
        got = sess.run(y)
    else:
        nc = [out_shape[0], out_shape[3], *out_shape[1:3]]
        y = tf.nn.conv2d_transpose(_nchw(v), f, nc, [1, 1, *st], padding, data_format="NCHW",
                                   dilations=[1, 1, *dl])
        got = _nhwc(sess.run(y))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    if data_format == "NHWC":
        check_grad(sess, lambda a, b: tf.nn.conv2d_transpose(
            a, b, tf.stack([tf.shape(a)[0], *out_shape[1:]]), [1, *st, 1], padding,
            dilations=[1, *dl, 1]), v.shape, fs)


# ---- top_k(sorted=False) -----------------------------------------------------------------------


def test_top_k_sorted_false_is_accepted(sess):
    # topk_op_test.py testTop3Unsorted: with sorted=False TF compares the k largest in any
    # order (values [[0.2, 0.3, 0.4], [0.2, 0.3, 0.3]], indices [[2, 1, 3], [3, 1, 2]]);
    # psrt returns them sorted, largest first and ties in index order
    x = np.asarray([[0.1, 0.3, 0.2, 0.4], [0.1, 0.3, 0.3, 0.2]], np.float32)
    values, indices = tf.nn.top_k(x, 3, sorted=False)
    v, i = sess.run([values, indices])
    np.testing.assert_array_equal(np.sort(i, axis=1), np.sort([[2, 1, 3], [3, 1, 2]], axis=1))
    np.testing.assert_allclose(np.sort(v, axis=1), [[0.2, 0.3, 0.4], [0.2, 0.3, 0.3]])
    np.testing.assert_array_equal(i, [[3, 1, 2], [1, 2, 3]])
    np.testing.assert_allclose(np.take_along_axis(x, i, 1), v)
