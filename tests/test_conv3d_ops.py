"""psrt.nn's 3-D convolutions (psrt/ops/conv3d_ops.py, the vol2col/col2vol loops of
_conv_kernels.pyx): conv3d and conv3d_transpose against TF's own kernel tests, random cases
against naive loops written here (NDHWC and NCDHW, strides, dilations, SAME/VALID),
gradients against float64 central differences with a None batch dimension, convolution's
3-D form, static shapes, dtypes and argument errors.

TF sources (r1.15) of the expected values, cited per test:
tensorflow/python/kernel_tests/conv_ops_3d_test.py and conv3d_transpose_test.py."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import psrt as tf


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _ncdhw(a):
    return np.ascontiguousarray(np.transpose(a, (0, 4, 1, 2, 3)))


def _ndhwc(a):
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 4, 1)))


def _geometry(size, k, stride, dilation, padding):
    """(out, pad_before) of one axis, TF's rule (kernel_shape_util.cc) written directly."""
    k_eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return math.ceil((size - k_eff + 1) / stride), 0
    out = math.ceil(size / stride)
    return out, max(0, (out - 1) * stride + k_eff - size) // 2


def ref_conv3d(x, f, strides, padding, dilations=(1, 1, 1)):
    """Plain loops: each output position sums its in-bounds taps times the filter."""
    n, *sp, c = x.shape
    geo = [_geometry(sp[i], f.shape[i], strides[i], dilations[i], padding) for i in range(3)]
    y = np.zeros((n, *[g[0] for g in geo], f.shape[4]))
    for out in itertools.product(*[range(g[0]) for g in geo]):
        for tap in itertools.product(*[range(k) for k in f.shape[:3]]):
            pos = [out[i] * strides[i] - geo[i][1] + tap[i] * dilations[i] for i in range(3)]
            if all(0 <= pos[i] < sp[i] for i in range(3)):
                y[(slice(None), *out)] += x[(slice(None), *pos)] @ f[tap]
    return y


def ref_conv3d_transpose(v, f, out_shape, strides, padding, dilations=(1, 1, 1)):
    """Scatter each value through the filter into the output: conv3d's input gradient."""
    sp = out_shape[1:4]
    geo = [_geometry(sp[i], f.shape[i], strides[i], dilations[i], padding) for i in range(3)]
    assert tuple(g[0] for g in geo) == v.shape[1:4]
    y = np.zeros(out_shape)
    for out in itertools.product(*[range(g[0]) for g in geo]):
        for tap in itertools.product(*[range(k) for k in f.shape[:3]]):
            pos = [out[i] * strides[i] - geo[i][1] + tap[i] * dilations[i] for i in range(3)]
            if all(0 <= pos[i] < sp[i] for i in range(3)):
                y[(slice(None), *pos)] += v[(slice(None), *out)] @ f[tap].T
    return y


# ---- TF's own kernel test values ---------------------------------------------------------------

# conv_ops_3d_test.py, Conv3DTest: input and filter f / total for f = 1, 2, ...;
# (name, input, filter, stride, padding, expected)
_EXPECTED_1x1x1 = [0.18518519, 0.22222222, 0.25925926, 0.40740741, 0.5, 0.59259259,
                   0.62962963, 0.77777778, 0.92592593, 0.85185185, 1.05555556, 1.25925926,
                   1.07407407, 1.33333333, 1.59259259, 1.2962963, 1.61111111, 1.92592593]
TF_CONV3D = [
    ("testConv3D1x1x1Filter/1", [1, 2, 3, 1, 3], [1, 1, 1, 3, 3], 1, "VALID", _EXPECTED_1x1x1),
    ("testConv3D1x1x1Filter/2", [1, 2, 1, 3, 3], [1, 1, 1, 3, 3], 1, "VALID", _EXPECTED_1x1x1),
    ("testConv3D1x1x1Filter/3", [1, 1, 2, 3, 3], [1, 1, 1, 3, 3], 1, "VALID", _EXPECTED_1x1x1),
    ("testConv3D2x2x2Filter", [1, 4, 2, 3, 3], [2, 2, 2, 3, 3], 1, "VALID",
     [3.77199074, 3.85069444, 3.92939815, 4.2650463, 4.35763889, 4.45023148, 6.73032407,
      6.89236111, 7.05439815, 7.22337963, 7.39930556, 7.57523148, 9.68865741, 9.93402778,
      10.17939815, 10.18171296, 10.44097222, 10.70023148]),
    ("testConv3DStrides", [1, 5, 8, 7, 1], [1, 2, 3, 1, 1], [2, 3, 1], "SAME",
     [0.06071429, 0.08988095, 0.10238095, 0.11488095, 0.12738095, 0.13988095, 0.08452381,
      0.26071429, 0.35238095, 0.36488095, 0.37738095, 0.38988095, 0.40238095, 0.23452381,
      0.46071429, 0.61488095, 0.62738095, 0.63988095, 0.65238095, 0.66488095, 0.38452381,
      1.12738095, 1.48988095, 1.50238095, 1.51488095, 1.52738095, 1.53988095, 0.88452381,
      1.32738095, 1.75238095, 1.76488095, 1.77738095, 1.78988095, 1.80238095, 1.03452381,
      1.52738095, 2.01488095, 2.02738095, 2.03988095, 2.05238095, 2.06488095, 1.18452381,
      2.19404762, 2.88988095, 2.90238095, 2.91488095, 2.92738095, 2.93988095, 1.68452381,
      2.39404762, 3.15238095, 3.16488095, 3.17738095, 3.18988095, 3.20238095, 1.83452381,
      2.59404762, 3.41488095, 3.42738095, 3.43988095, 3.45238095, 3.46488095, 1.98452381]),
    ("testConv3D2x2x2FilterStride2", [1, 4, 2, 3, 3], [2, 2, 2, 3, 3], 2, "VALID",
     [3.77199074, 3.85069444, 3.92939815, 9.68865741, 9.93402778, 10.17939815]),
    ("testConv3DStride3", [1, 6, 7, 8, 2], [3, 2, 1, 2, 3], 3, "VALID",
     [1.51140873, 1.57167659, 1.63194444, 1.56349206, 1.62673611, 1.68998016, 1.6155754,
      1.68179563, 1.74801587, 1.9280754, 2.01215278, 2.09623016, 1.98015873, 2.0672123,
      2.15426587, 2.03224206, 2.12227183, 2.21230159, 4.4280754, 4.65500992, 4.88194444,
      4.48015873, 4.71006944, 4.93998016, 4.53224206, 4.76512897, 4.99801587, 4.84474206,
      5.09548611, 5.34623016, 4.8968254, 5.15054563, 5.40426587, 4.94890873, 5.20560516,
      5.46230159]),
    ("testConv3D2x2x2FilterStride2Same", [1, 4, 2, 3, 3], [2, 2, 2, 3, 3], 2, "SAME",
     [3.77199074, 3.85069444, 3.92939815, 2.0162037, 2.06597222, 2.11574074, 9.68865741,
      9.93402778, 10.17939815, 4.59953704, 4.73263889, 4.86574074]),
    ("testKernelSmallerThanStride/1", [1, 3, 3, 3, 1], [1, 1, 1, 1, 1], 2, "SAME",
     [0.03703704, 0.11111111, 0.25925926, 0.33333333, 0.7037037, 0.77777778, 0.92592593, 1.]),
    ("testKernelSmallerThanStride/2", [1, 3, 3, 3, 1], [1, 1, 1, 1, 1], 2, "VALID",
     [0.03703704, 0.11111111, 0.25925926, 0.33333333, 0.7037037, 0.77777778, 0.92592593, 1.]),
    ("testKernelSmallerThanStride/3", [1, 7, 7, 7, 1], [2, 2, 2, 1, 1], 3, "SAME",
     [0.54081633, 0.58017493, 0.28061224, 0.81632653, 0.85568513, 0.40306122, 0.41873178,
      0.4340379, 0.19642857, 2.46938776, 2.50874636, 1.1377551, 2.74489796, 2.78425656,
      1.26020408, 1.16873178, 1.1840379, 0.51785714, 1.09511662, 1.10604956, 0.44642857,
      1.17164723, 1.18258017, 0.47704082, 0.3691691, 0.37244898, 0.125]),
    ("testKernelSmallerThanStride/4", [1, 7, 7, 7, 1], [2, 2, 2, 1, 1], 3, "VALID",
     [0.540816, 0.580175, 0.816327, 0.855685, 2.469388, 2.508746, 2.744898, 2.784257]),
    ("testKernelSizeMatchesInputSize", [1, 2, 1, 2, 1], [2, 1, 2, 1, 2], 1, "VALID",
     [1.5625, 1.875]),
]


def _scaled(shape, dtype=np.float32):
    total = int(np.prod(shape))
    return (np.arange(1, total + 1, dtype=np.float64) / total).astype(dtype).reshape(shape)


@pytest.mark.parametrize("data_format", ["NDHWC", "NCDHW"])
@pytest.mark.parametrize("case", TF_CONV3D, ids=[c[0] for c in TF_CONV3D])
def test_conv3d_matches_tf_kernel_tests(sess, case, data_format):
    _, in_sizes, f_sizes, stride, padding, expected = case
    st = [stride] * 3 if isinstance(stride, int) else stride
    x, f = _scaled(in_sizes), _scaled(f_sizes)
    if data_format == "NDHWC":
        y = tf.nn.conv3d(x, f, [1, *st, 1], padding)
        got = sess.run(y)
    else:
        y = tf.nn.conv3d(_ncdhw(x), f, [1, 1, *st], padding, data_format="NCDHW")
        got = _ndhwc(sess.run(y))
    assert got.dtype == np.float32
    assert y.shape.as_list() == list(sess.run(y).shape)
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6, atol=1e-6)


def test_conv3d_float16_and_float64(sess):
    # conv_ops_3d_test.py _VerifyValues runs float16 (tolerance 1e-3) and float64 too
    _, in_sizes, f_sizes, stride, padding, expected = TF_CONV3D[3]
    for dt, tol in ((np.float16, 1e-3), (np.float64, 1e-8)):
        y = tf.nn.conv3d(_scaled(in_sizes, dt), _scaled(f_sizes, dt), [1, 1, 1, 1, 1], padding)
        got = sess.run(y)
        assert y.dtype == tf.as_dtype(dt) and got.dtype == dt
        np.testing.assert_allclose(got.ravel(), expected, rtol=tol, atol=tol)


def _ones_transpose(sess, x_shape, y_shape, strides, padding):
    x = np.ones(x_shape, np.float32)
    f = np.ones([3, 3, 3, 2, 3], np.float32)
    return sess.run(tf.nn.conv3d_transpose(x, f, y_shape, strides=strides, padding=padding))


def test_conv3d_transpose_matches_tf_counting_tests(sess):
    # conv3d_transpose_test.py testConv3DTransposeSingleStride / Same / Valid: all-ones value
    # [2, 5, 6, 4, 3] and filter [3, 3, 3, 2, 3]; each output counts the value cells reaching
    # it, times the 3 input channels.
    value = _ones_transpose(sess, [2, 5, 6, 4, 3], [2, 5, 6, 4, 2], [1, 1, 1, 1, 1], "SAME")
    for d, h, w in np.ndindex(5, 6, 4):
        inner = (0 < d < 4) + (0 < h < 5) + (0 < w < 3)
        np.testing.assert_allclose(value[:, d, h, w, :], {3: 27, 2: 18, 1: 12, 0: 8}[inner] * 3)
    for padding, y_shape, pad in (("SAME", [2, 10, 12, 8, 2], 0),
                                  ("VALID", [2, 11, 13, 9, 2], 1)):
        value = _ones_transpose(sess, [2, 5, 6, 4, 3], y_shape, [1, 2, 2, 2, 1], padding)
        want = np.zeros(y_shape[1:4])
        for d, h, w in np.ndindex(*want.shape):
            ins = [c % 2 == 0 and pad < c < size - 1 - pad
                   for c, size in zip((d, h, w), y_shape[1:4])]
            want[d, h, w] = {3: 8, 2: 4, 1: 2, 0: 1}[sum(ins)] * 3.0
        if pad:  # the border copies its neighbour (testConv3DTransposeValid)
            for axis in range(3):
                first, second = [slice(None)] * 3, [slice(None)] * 3
                first[axis], second[axis] = 0, 1
                want[tuple(first)] = want[tuple(second)]
                first[axis], second[axis] = -1, -2
                want[tuple(first)] = want[tuple(second)]
        for n, k in np.ndindex(2, 2):
            np.testing.assert_allclose(value[n, ..., k], want)


def test_conv3d_transpose_tf_shape_cases(sess):
    # testConv3DTransposeShapeMismatch (GitHub issue 18460): NCDHW builds and runs;
    # testConv3DTransposeOutputShapeType (issue 18887): an int64 output_shape tensor.
    rng = np.random.default_rng(1)
    x, f = rng.random((2, 2, 3, 4, 3)), rng.random((3, 3, 3, 2, 2))
    y = tf.nn.conv3d_transpose(x, f, [2, 2, 6, 8, 6], [1, 1, 2, 2, 2], data_format="NCDHW")
    want = ref_conv3d_transpose(_ndhwc(x), f, (2, 6, 8, 6, 2), (2, 2, 2), "SAME")
    np.testing.assert_allclose(_ndhwc(sess.run(y)), want, rtol=1e-10)
    for dt in (tf.int32, tf.int64):
        out = tf.nn.conv3d_transpose(np.ones([2, 5, 6, 4, 3], np.float32),
                                     np.ones([3, 3, 3, 2, 3], np.float32),
                                     tf.constant([2, 5, 6, 4, 2], dtype=dt), [1, 1, 1, 1, 1])
        assert sess.run(out).shape == (2, 5, 6, 4, 2)


# ---- random cases against the naive loops ------------------------------------------------------

CONV_CASES = [((2, 5, 6, 4, 3), (3, 2, 3, 3, 2), (1, 1, 1), (1, 1, 1), "SAME"),
              ((1, 6, 5, 7, 2), (2, 3, 2, 2, 3), (2, 1, 3), (1, 1, 1), "VALID"),
              ((2, 7, 6, 5, 1), (2, 2, 3, 1, 2), (2, 2, 2), (1, 1, 1), "SAME"),
              ((1, 7, 7, 6, 2), (2, 3, 2, 2, 2), (1, 1, 1), (3, 2, 2), "SAME"),
              ((2, 8, 6, 7, 2), (3, 2, 2, 2, 1), (1, 2, 1), (2, 1, 3), "VALID")]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv3d_random_against_naive_loops(sess, case):
    xs, fs, st, dl, padding = case
    rng = np.random.default_rng(2)
    x, f = rng.normal(size=xs), rng.normal(size=fs)
    want = ref_conv3d(x, f, st, padding, dl)
    y = tf.nn.conv3d(x, f, [1, *st, 1], padding, dilations=[1, *dl, 1])
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10, atol=1e-12)
    y2 = tf.nn.conv3d(_ncdhw(x), f, [1, 1, *st], padding, data_format="NCDHW",
                      dilations=[1, 1, *dl])
    np.testing.assert_allclose(_ndhwc(sess.run(y2)), want, rtol=1e-10, atol=1e-12)
    if max(st) == 1 or max(dl) == 1:  # convolution refuses strides and dilations both > 1
        y3 = tf.nn.convolution(x, f, padding, strides=st, dilation_rate=dl)
        np.testing.assert_allclose(sess.run(y3), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [
    ((2, 7, 6, 5, 3), (3, 3, 2, 3, 4), (2, 2, 1), (1, 1, 1), "SAME"),
    ((1, 8, 7, 6, 2), (2, 3, 2, 2, 3), (2, 3, 2), (1, 1, 1), "VALID"),
    ((2, 7, 7, 5, 2), (2, 2, 2, 2, 3), (1, 1, 1), (2, 3, 1), "SAME")])
def test_conv3d_transpose_random_against_naive_scatter(sess, case):
    out_shape, fs, st, dl, padding = case
    rng = np.random.default_rng(4)
    osz = [_geometry(out_shape[i + 1], fs[i], st[i], dl[i], padding)[0] for i in range(3)]
    v, f = rng.normal(size=(out_shape[0], *osz, fs[4])), rng.normal(size=fs)
    want = ref_conv3d_transpose(v, f, out_shape, st, padding, dl)
    y = tf.nn.conv3d_transpose(v, f, list(out_shape), [1, *st, 1], padding,
                               dilations=[1, *dl, 1])
    assert y.shape.as_list() == list(out_shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-10, atol=1e-12)
    nc = [out_shape[0], out_shape[4], *out_shape[1:4]]
    y2 = tf.nn.conv3d_transpose(_ncdhw(v), f, nc, [1, 1, *st], padding, data_format="NCDHW",
                                dilations=[1, 1, *dl])
    np.testing.assert_allclose(_ndhwc(sess.run(y2)), want, rtol=1e-10, atol=1e-12)


# ---- gradients: central finite differences in float64, None batch ---------------------------


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(sess, build, *shapes, seed=0):
    """psrt.gradients of sum(w * build(*phs)) vs central differences: float64 placeholders,
    the first with a None batch dimension, a random weighting w."""
    rng = np.random.default_rng(seed)
    vals = [rng.normal(size=s) for s in shapes]
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


# conv_ops_3d_test.py's gradient configurations, smaller: (input, filter, strides,
# dilations, padding)
GRAD_CASES = [((2, 3, 4, 3, 2), (3, 3, 2, 2, 2), (1, 1, 1), (1, 1, 1), "VALID"),
              ((1, 5, 4, 4, 2), (2, 2, 2, 2, 2), (2, 2, 2), (1, 1, 1), "SAME"),
              ((1, 5, 6, 4, 1), (1, 2, 3, 1, 2), (2, 3, 1), (1, 1, 1), "SAME"),
              ((1, 5, 5, 4, 1), (2, 2, 2, 1, 2), (1, 1, 1), (2, 2, 1), "SAME")]


@pytest.mark.parametrize("data_format", ["NDHWC", "NCDHW"])
@pytest.mark.parametrize("case", GRAD_CASES)
def test_conv3d_gradients(sess, case, data_format):
    xs, fs, st, dl, padding = case
    if data_format == "NCDHW":
        xs = (xs[0], xs[4], *xs[1:4])
        check_grad(sess, lambda x, f: tf.nn.conv3d(x, f, [1, 1, *st], padding,
                                                   data_format="NCDHW",
                                                   dilations=[1, 1, *dl]), xs, fs)
    else:
        check_grad(sess, lambda x, f: tf.nn.conv3d(x, f, [1, *st, 1], padding,
                                                   dilations=[1, *dl, 1]), xs, fs)


@pytest.mark.parametrize("case", [((2, 5, 6, 4, 2), (3, 3, 2, 2, 2), (2, 2, 2), "SAME"),
                                  ((1, 6, 5, 5, 2), (2, 2, 3, 1, 2), (2, 1, 2), "VALID")])
def test_conv3d_transpose_gradients(sess, case):
    # conv3d_transpose_test.py testGradient, smaller: both inputs, output_shape from tf.shape
    out_shape, fs, st, padding = case
    osz = [_geometry(out_shape[i + 1], fs[i], st[i], 1, padding)[0] for i in range(3)]

    def build(v, f):
        shape = tf.stack([tf.shape(v)[0], *out_shape[1:4], fs[3]])
        return tf.nn.conv3d_transpose(v, f, shape, [1, *st, 1], padding)
    check_grad(sess, build, (out_shape[0], *osz, fs[4]), fs)


# ---- shapes, dtypes, errors --------------------------------------------------------------------


def test_static_shapes_float32_and_minimize(sess):
    x = tf.placeholder(tf.float32, [None, 8, None, 6, 3])
    y = tf.nn.conv3d(x, np.ones((3, 3, 3, 3, 4), np.float32), [1, 2, 2, 2, 1], "SAME")
    assert y.shape.as_list() == [None, 4, None, 3, 4]
    xc = tf.placeholder(tf.float32, [None, 3, 8, 8, 6])
    yc = tf.nn.conv3d(xc, np.ones((2, 2, 2, 3, 5), np.float32), [1, 1, 1, 1, 1], "VALID",
                      data_format="NCDHW")
    assert yc.shape.as_list() == [None, 5, 7, 7, 5]
    t = tf.nn.conv3d_transpose(y, np.ones((3, 3, 3, 2, 4), np.float32),
                               tf.stack([tf.shape(y)[0], 8, 8, 6, 2]), [1, 2, 2, 2, 1])
    assert t.shape.as_list() == [None, None, None, None, 2]
    assert y.dtype == t.dtype == tf.float32
    w = tf.get_variable("w", [2, 2, 2, 3, 2], initializer=tf.ones_initializer())
    loss = tf.reduce_sum(tf.nn.conv3d(x, w, [1, 1, 1, 1, 1], "VALID"))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    sess.run(tf.global_variables_initializer())
    (dx,) = tf.gradients(loss, [x])
    xv = np.ones((2, 8, 5, 6, 3), np.float32)
    g = sess.run(dx, {x: xv})
    assert g.dtype == np.float32 and g.shape == xv.shape
    sess.run(train, {x: xv})
    # every tap saw 2 * 7 * 4 * 5 ones: the step moved each weight by 0.01 * 280
    np.testing.assert_allclose(sess.run(w), 1 - 0.01 * 280, rtol=1e-6)


def test_argument_errors():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4, 4, 4, 3])
    f = np.ones((2, 2, 2, 3, 2), np.float32)
    with pytest.raises(ValueError, match=r"padding must be \"SAME\" or \"VALID\".*'FULL'"):
        tf.nn.conv3d(x, f, [1, 1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match="data_format must be one of 'NDHWC', 'NCDHW'; got "
                                         "'NHWC'"):
        tf.nn.conv3d(x, f, [1, 1, 1, 1, 1], "SAME", data_format="NHWC")
    with pytest.raises(ValueError, match="strides .* must be 1 in the batch and depth"):
        tf.nn.conv3d(x, f, [2, 1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="strides should be of length 1, 3 or 5 but was 4"):
        tf.nn.conv3d(x, f, [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="input depth 3 does not match the filter's input "
                                         "depth 2"):
        tf.nn.conv3d(x, np.ones((2, 2, 2, 2, 2), np.float32), 1, "SAME")
    with pytest.raises(ValueError, match="filter must be 5-dimensional"):
        tf.nn.conv3d(x, np.ones((2, 2, 3, 2), np.float32), 1, "SAME")
    with pytest.raises(TypeError, match="float64 does not match type float32"):
        tf.nn.conv3d(x, tf.placeholder(tf.float64, [2, 2, 2, 3, 2]), 1, "SAME")
    with pytest.raises(ValueError, match="input channels does not match filter's input "
                                         "channels, 3 != 2"):
        tf.nn.conv3d_transpose(x, f, [1, 8, 8, 8, 3], 2)
    with pytest.raises(ValueError, match="output_shape does not match filter's output "
                                         "channels, 4 != 2"):
        tf.nn.conv3d_transpose(x, np.ones((2, 2, 2, 2, 3), np.float32), [1, 8, 8, 8, 4], 2)
    with pytest.raises(ValueError, match=r"output_shape must have shape \(5,\)"):
        tf.nn.conv3d_transpose(x, np.ones((2, 2, 2, 2, 3), np.float32), [1, 8, 8, 2], 2)
    with pytest.raises(ValueError, match="strides > 1 not supported in conjunction with "
                                         "dilation_rate > 1"):
        tf.nn.convolution(x, f, "SAME", strides=[2, 2, 2], dilation_rate=[2, 1, 1])
    with pytest.raises(ValueError, match="rank 3 .* 4 .* or 5"):
        tf.nn.convolution(tf.placeholder(tf.float32, [1, 2, 2, 2, 2, 2]), f, "SAME")


def test_run_time_errors(sess):
    x = tf.placeholder(tf.float32, None)
    y = tf.nn.conv3d(x, np.ones((2, 2, 2, 3, 2), np.float32), 1, "SAME")
    with pytest.raises(tf.errors.InvalidArgumentError, match="input depth 4 does not match"):
        sess.run(y, {x: np.ones((1, 3, 3, 3, 4), np.float32)})
    v = tf.placeholder(tf.float32, [None, 3, 3, 3, 2])
    t = tf.nn.conv3d_transpose(v, np.ones((3, 3, 3, 1, 2), np.float32), [1, 8, 8, 8, 1], 2)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"size of out_backprop doesn't match computed: actual = "
                             r"\[3, 3, 3\], computed = \[4, 4, 4\]"):
        sess.run(t, {v: np.ones((1, 3, 3, 3, 2), np.float32)})


def test_empty_batch(sess):
    # conv_ops_3d_test.py _TestConv3DEmptyTensorOutputShape, smaller: a batch of 0
    y = tf.nn.conv3d(np.zeros((0, 4, 4, 4, 2), np.float32), np.ones((3, 3, 3, 2, 5),
                                                                     np.float32),
                     [1, 1, 1, 1, 1], "SAME")
    assert sess.run(y).shape == (0, 4, 4, 4, 5)
