"""psrt.nn's 3-D pooling and tf.nn.pool's N-D, dilated form (psrt/ops/pooling3d_ops.py,
pooling_ops.py, the 3-D pooling loops of _conv_kernels.pyx): values against TF's own kernel
tests and naive loops (NDHWC and NCDHW, SAME/VALID, dilations), gradients against float64
central differences with a None batch dimension, TF's gradient rules for tied maxima, static
shapes and argument errors.

TF sources (r1.15), cited per test: tensorflow/python/kernel_tests/pooling_ops_3d_test.py,
pool_test.py (its numpy pool_direct reference), tensorflow/core/kernels/pooling_ops_3d.cc
(MaxPool3DGrad), tensorflow/python/ops/nn_ops.py (pool's argument checks)."""

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


def ref_pool(x, window, strides, padding, kind, dilation=None):
    """Naive N-D pooling over the in-bounds window positions (pool_test.py's pool_direct
    rule): x [batch, *spatial, channels]."""
    nd = x.ndim - 2
    dilation = dilation or [1] * nd
    geo = []
    for i in range(nd):
        size, k_eff = x.shape[i + 1], (window[i] - 1) * dilation[i] + 1
        if padding == "VALID":
            out, pad = math.ceil((size - k_eff + 1) / strides[i]), 0
        else:
            out = math.ceil(size / strides[i])
            pad = max(0, (out - 1) * strides[i] + k_eff - size) // 2
        geo.append((out, pad))
    y = np.zeros((x.shape[0], *[g[0] for g in geo], x.shape[-1]))
    for o in itertools.product(*[range(g[0]) for g in geo]):
        taps = []
        for z in itertools.product(*[range(k) for k in window]):
            p = [o[i] * strides[i] - geo[i][1] + z[i] * dilation[i] for i in range(nd)]
            if all(0 <= p[i] < x.shape[i + 1] for i in range(nd)):
                taps.append(x[(slice(None), *p)])
        stack = np.stack(taps)
        y[(slice(None), *o)] = stack.max(0) if kind == "MAX" else stack.mean(0)
    return y


def _iota(shape):
    return np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)


# pooling_ops_3d_test.py: input 1, 2, 3, ...; (name, kind, input, window, strides, padding,
# expected)
TF_POOL3D = [
    ("testAvgPool3dValidPadding", "AVG", [1, 3, 3, 3, 3], (2, 2, 2), (2, 2, 2), "VALID",
     [20.5, 21.5, 22.5]),
    ("testAvgPool3dSamePadding", "AVG", [1, 2, 2, 4, 3], (2, 2, 2), (2, 2, 2), "SAME",
     [20.5, 21.5, 22.5, 26.5, 27.5, 28.5]),
    ("testAvgPool3dSamePaddingDifferentStrides", "AVG", [1, 5, 8, 1, 1], (1, 2, 3), (2, 3, 1),
     "SAME", [1.5, 4.5, 7.5, 17.5, 20.5, 23.5, 33.5, 36.5, 39.5]),
    ("testMaxPool3dValidPadding", "MAX", [1, 3, 3, 3, 3], (2, 2, 2), (2, 2, 2), "VALID",
     [40.0, 41.0, 42.0]),
    ("testMaxPool3dSamePadding", "MAX", [1, 2, 2, 3, 3], (2, 2, 2), (2, 2, 2), "SAME",
     [31., 32., 33., 34., 35., 36.]),
    ("testMaxPool3dSamePaddingDifferentStrides", "MAX", [1, 5, 8, 1, 1], (1, 2, 3), (2, 3, 1),
     "SAME", [2., 5., 8., 18., 21., 24., 34., 37., 40.]),
    ("testKernelSmallerThanStride/1", "MAX", [1, 3, 3, 3, 1], (1, 1, 1), (2, 2, 2), "SAME",
     [1, 3, 7, 9, 19, 21, 25, 27]),
    ("testKernelSmallerThanStride/2", "MAX", [1, 7, 7, 7, 1], (2, 2, 2), (3, 3, 3), "VALID",
     [58, 61, 79, 82, 205, 208, 226, 229]),
    ("testKernelSmallerThanStride/3", "AVG", [1, 3, 3, 3, 1], (1, 1, 1), (2, 2, 2), "SAME",
     [1, 3, 7, 9, 19, 21, 25, 27]),
    ("testKernelSmallerThanStride/4", "AVG", [1, 7, 7, 7, 1], (2, 2, 2), (3, 3, 3), "VALID",
     [29.5, 32.5, 50.5, 53.5, 176.5, 179.5, 197.5, 200.5]),
]


@pytest.mark.parametrize("data_format", ["NDHWC", "NCDHW"])
@pytest.mark.parametrize("case", TF_POOL3D, ids=[c[0] for c in TF_POOL3D])
def test_pool3d_matches_tf_kernel_tests(sess, case, data_format):
    _, kind, sizes, window, strides, padding, expected = case
    fn = tf.nn.max_pool3d if kind == "MAX" else tf.nn.avg_pool3d
    x = _iota(sizes)
    if data_format == "NDHWC":
        y = fn(x, [1, *window, 1], [1, *strides, 1], padding)
        got = sess.run(y)
    else:
        y = fn(_ncdhw(x), [1, 1, *window], [1, 1, *strides], padding, data_format="NCDHW")
        got = _ndhwc(sess.run(y))
    assert got.dtype == np.float32 and y.shape.as_list() == list(sess.run(y).shape)
    np.testing.assert_allclose(got.ravel(), expected, rtol=1e-6)
    if all(s <= w for s, w in zip(strides, window)):  # pool refuses strides > window
        z = tf.nn.pool(x, list(window), kind, padding, strides=list(strides))
        np.testing.assert_allclose(sess.run(z).ravel(), expected, rtol=1e-6)


def test_max_pool3d_matches_tf_larger_numpy_case(sess):
    # testMaxPool3dSamePaddingDifferentStrides's second half: [1, 5, 27, 27, 64], window and
    # stride (1, 2, 2), SAME; TF's expected values simulated in numpy.
    data = np.arange(1, 5 * 27 * 27 * 64 + 1).reshape((5, 27, 27, 64))
    padded = np.pad(data, [[0, 0], [0, 1], [0, 1], [0, 0]], mode="constant")
    want = padded[:, 1::2, 1::2, :]
    want[:, -1, :, :] = padded[:, -2, 1::2, :]
    want[:, :, -1, :] = padded[:, 1::2, -2, :]
    want[:, -1, -1, :] = padded[:, -2, -2, :]
    y = tf.nn.max_pool3d(data.reshape(1, 5, 27, 27, 64).astype(np.float32), (1, 2, 2),
                         (1, 2, 2), "SAME")
    np.testing.assert_array_equal(sess.run(y).ravel(), want.ravel())


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", [((2, 5, 6, 7, 3), (2, 3, 2), (2, 2, 3), "SAME"),
                                  ((1, 6, 5, 7, 2), (3, 2, 3), (1, 2, 2), "VALID"),
                                  ((2, 4, 4, 4, 2), (5, 3, 2), (1, 1, 1), "SAME")])
def test_pool3d_random_against_naive_loops(sess, case, kind):
    xs, ks, st, padding = case
    x = np.random.default_rng(3).normal(size=xs)
    fn = tf.nn.max_pool3d if kind == "MAX" else tf.nn.avg_pool3d
    want = ref_pool(x, ks, st, padding, kind)
    y = fn(x, list(ks), list(st), padding)
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-12)
    y2 = fn(_ncdhw(x), list(ks), list(st), padding, data_format="NCDHW")
    np.testing.assert_allclose(_ndhwc(sess.run(y2)), want, rtol=1e-12)


# pool_test.py testPool2D / testPool3D (VALID with dilations; TF's inputs -1, -2, ... so no
# zero padding can win) and a 1-D case
DILATED = [((2, 9, 10, 2), (2, 3), (2, 1)), ((2, 10, 9, 2), (2, 1), (1, 2)),
           ((2, 9, 10, 2), (2, 3), (2, 3)), ((1, 9, 2), (3,), (2,)),
           ((2, 9, 10, 11, 2), (2, 1, 2), (2, 1, 2)), ((1, 10, 9, 11, 2), (2, 3, 2), (2, 3, 3))]


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", DILATED)
def test_dilated_pool_matches_pool_direct(sess, case, kind):
    xs, win, rate = case
    x = -np.arange(np.prod(xs), dtype=np.float32).reshape(xs) - 1
    want = ref_pool(x, win, [1] * len(win), "VALID", kind, list(rate))
    y = tf.nn.pool(x, list(win), kind, "VALID", dilation_rate=list(rate))
    assert y.dtype == tf.float32 and y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(sess.run(y), want, rtol=1e-6)
    first = {3: (0, 2, 1), 4: (0, 3, 1, 2), 5: (0, 4, 1, 2, 3)}[len(xs)]
    back = np.argsort(first)
    fmt = {3: "NCW", 4: "NCHW", 5: "NCDHW"}[len(xs)]
    yc = tf.nn.pool(np.ascontiguousarray(x.transpose(first)), list(win), kind, "VALID",
                    dilations=list(rate), data_format=fmt)
    np.testing.assert_allclose(sess.run(yc).transpose(back), want, rtol=1e-6)


# ---- gradients ----------------------------------------------------------------------------------


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(sess, build, shape, seed=0):
    """psrt.gradients of sum(w * build(x)) vs central differences: a float64 placeholder
    with a None batch dimension, values 0.01 apart (no ties), a random weighting w."""
    rng = np.random.default_rng(seed)
    v = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) * 0.01
    x = tf.placeholder(tf.float64, [None, *shape[1:]])
    y = build(x)
    out = sess.run(y, {x: v})
    assert out.dtype == np.float64
    loss = tf.reduce_sum(y * rng.normal(size=out.shape))
    (got,) = sess.run(tf.gradients(loss, [x]), {x: v})
    np.testing.assert_allclose(got, _numeric_grad(lambda a: float(sess.run(loss, {x: a})), v),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("data_format", ["NDHWC", "NCDHW"])
@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", [((1, 5, 2, 4, 2), (2, 2, 2), (2, 2, 2), "SAME"),
                                  ((2, 3, 2, 7, 1), (2, 2, 2), (1, 1, 1), "VALID"),
                                  ((1, 3, 4, 2, 1), (3, 3, 3), (1, 1, 1), "SAME")])
def test_pool3d_gradients(sess, case, kind, data_format):
    # pooling_ops_3d_test.py's gradient configurations (testMaxPoolGradSamePadding2_2_3d,
    # ValidPadding2_1_7_3d, SamePadding3_1_3d)
    xs, ks, st, padding = case
    fn = tf.nn.max_pool3d if kind == "MAX" else tf.nn.avg_pool3d
    if data_format == "NCDHW":
        xs = (xs[0], xs[4], *xs[1:4])
    check_grad(sess, lambda x: fn(x, list(ks), list(st), padding, data_format=data_format), xs)


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
@pytest.mark.parametrize("case", [((2, 6, 5, 2), (2, 2), (2, 2)), ((1, 7, 3), (2,), (3,)),
                                  ((1, 5, 4, 5, 1), (2, 1, 2), (2, 1, 2))])
def test_dilated_pool_gradients(sess, case, kind):
    # pool_test.py testGradient2D / testGradient3D (VALID, dilations)
    xs, win, rate = case
    check_grad(sess, lambda x: tf.nn.pool(x, list(win), kind, "VALID",
                                          dilation_rate=list(rate)), xs)


def test_max_pool3d_gradient_goes_to_every_tied_maximum(sess):
    # pooling_ops_3d.cc LaunchMaxPooling3dGradOp<CPUDevice>: every element within 1e-5 of
    # the window's maximum gets the gradient; the 2-D dilated pool (MaxPool over
    # space_to_batch, MaxPoolGrad) gives it to the first maximum only.
    x = tf.placeholder(tf.float32, [None, 2, 2, 2, 1])
    y = tf.nn.max_pool3d(x, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")
    (dx,) = tf.gradients(tf.reduce_sum(y * 3.0), [x])
    v = np.ones((1, 2, 2, 2, 1), np.float32)
    v[0, 1, 1, 1, 0] = 1 - 1e-6             # within 1e-5: counts as a maximum too
    v[0, 0, 1, 0, 0] = 0.5
    want = np.full((1, 2, 2, 2, 1), 3.0, np.float32)
    want[0, 0, 1, 0, 0] = 0
    np.testing.assert_array_equal(sess.run(dx, {x: v}), want)
    x2 = tf.placeholder(tf.float32, [None, 1, 5])
    y2 = tf.nn.pool(x2, [2], "MAX", "VALID", dilation_rate=[2], data_format="NCW")
    (d2,) = tf.gradients(tf.reduce_sum(y2), [x2])
    got = sess.run(d2, {x2: np.ones((1, 1, 5), np.float32)})
    np.testing.assert_array_equal(got.ravel(), [1, 1, 1, 0, 0])  # windows (0,2) (1,3) (2,4)


# ---- shapes and errors ---------------------------------------------------------------------------


def test_static_shapes_and_float32(sess):
    x = tf.placeholder(tf.float32, [None, 9, None, 7, 3])
    y = tf.nn.max_pool3d(x, 3, 2, "SAME")
    assert y.shape.as_list() == [None, 5, None, 4, 3] and y.dtype == tf.float32
    xc = tf.placeholder(tf.float32, [None, 3, 9, 9, 9])
    assert tf.nn.avg_pool3d(xc, [1, 1, 2, 2, 2], [1, 1, 2, 2, 2], "VALID",
                            data_format="NCDHW").shape.as_list() == [None, 3, 4, 4, 4]
    p = tf.nn.pool(tf.placeholder(tf.float32, [None, 9, 10, 2]), [2, 3], "AVG", "VALID",
                   dilation_rate=[2, 3])
    assert p.shape.as_list() == [None, 7, 4, 2]
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    out = sess.run(g, {x: np.ones((2, 9, 4, 7, 3), np.float32)})
    assert out.dtype == np.float32 and out.shape == (2, 9, 4, 7, 3)


def test_argument_errors():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4, 4, 4, 3])
    with pytest.raises(ValueError, match=r"padding must be \"SAME\" or \"VALID\".*'FULL'"):
        tf.nn.max_pool3d(x, 2, 2, "FULL")
    with pytest.raises(ValueError, match="data_format must be one of 'NDHWC', 'NCDHW'"):
        tf.nn.avg_pool3d(x, 2, 2, "SAME", data_format="NHWC")
    with pytest.raises(ValueError, match="ksize .* must be 1 in the batch and depth"):
        tf.nn.max_pool3d(x, [1, 2, 2, 2, 2], 1, "SAME")
    with pytest.raises(ValueError, match="input must be 5-dimensional"):
        tf.nn.max_pool3d(tf.placeholder(tf.float32, [1, 4, 4, 3]), 2, 2, "SAME")
    with pytest.raises(TypeError, match="float16, float32 or float64; got int32"):
        tf.nn.avg_pool3d(tf.placeholder(tf.int32, [1, 4, 4, 4, 1]), 2, 2, "SAME")
    x4 = tf.placeholder(tf.float32, [None, 8, 8, 2])
    # nn_ops.py pool's checks, TF's messages
    with pytest.raises(ValueError, match="pooling with SAME padding is not implemented for "
                                         "dilation_rate > 1"):
        tf.nn.pool(x4, [2, 2], "MAX", "SAME", dilation_rate=[2, 2])
    with pytest.raises(ValueError, match="strides > 1 not supported in conjunction with "
                                         "dilation_rate > 1"):
        tf.nn.pool(x4, [2, 2], "MAX", "VALID", dilation_rate=[2, 1], strides=[2, 2])
    with pytest.raises(ValueError, match="strides > window_shape not supported"):
        tf.nn.pool(x4, [2, 2], "AVG", "VALID", strides=[3, 1])
    with pytest.raises(ValueError, match="1 <= num_spatial_dims <= 3"):
        tf.nn.pool(x4, [2, 2, 2, 2], "AVG", "VALID")
    with pytest.raises(ValueError, match="rank 4"):
        tf.nn.pool(x, [2, 2], "AVG", "VALID")
    with pytest.raises(ValueError, match="dilation_rate must have 2 entries"):
        tf.nn.pool(x4, [2, 2], "AVG", "VALID", dilation_rate=[2])
    with pytest.raises(ValueError, match="data_format must be one of 'NDHWC', 'NCDHW' for "
                                         "3-D pooling"):
        tf.nn.pool(x, [2, 2, 2], "MAX", "VALID", data_format="NHWC")
