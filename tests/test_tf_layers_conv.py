"""tf.layers' convolution and pooling layers (psrt/ops/layers_convolutional.py): the cases of
TF r1.15's own tests (tensorflow/python/layers/convolutional_test.py: ConvTest's 2-D cases;
tensorflow/python/layers/pooling_test.py: PoolingTest's 2-D cases), variable names, shapes
and collections as TF's, output shapes with an unknown batch, values equal to
``tf.nn.conv2d``/``max_pool``/``avg_pool`` with the same kernel (and a numpy reference), in
both data formats, and the kernel's gradient against central finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf
from psrt import layers


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _names(vs):
    return [v.name for v in vs]


def _np_conv_valid(x, k, b=None):
    """VALID stride-1 NHWC cross-correlation in numpy (the reference)."""
    kh, kw = k.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, k.shape[3]), np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cf->nhwf", x[:, i:i + oh, j:j + ow, :], k[i, j])
    return out if b is None else out + b


# ---- Conv2D: convolutional_test.py ConvTest --------------------------------------------------

def test_create_conv2d_names_and_shapes(sess):
    # testCreateConv2D
    height, width = 7, 9
    images = tf.random_uniform((5, height, width, 4))
    layer = layers.Conv2D(32, [3, 3], activation=tf.nn.relu)
    output = layer.apply(images)
    # (TF's op name is conv2d/Relu; psrt's op names ignore name scopes: docs/porting.md)
    assert output.shape.as_list() == [5, height - 2, width - 2, 32]
    assert list(layer.kernel.shape) == [3, 3, 4, 32]
    assert list(layer.bias.shape) == [32]
    assert _names(tf.trainable_variables()) == ["conv2d/kernel", "conv2d/bias"]
    assert _names(layer.trainable_weights) == ["conv2d/kernel", "conv2d/bias"]
    # testCreateConv2DIntegerKernelSize; a second layer is conv2d_1
    layer2 = layers.Conv2D(32, 3)
    assert layer2.apply(images).shape.as_list() == [5, height - 2, width - 2, 32]
    assert layer2.kernel.name == "conv2d_1/kernel" and layer2.kernel.shape == (3, 3, 4, 32)
    sess.run(tf.global_variables_initializer())
    k, b = sess.run([layer.kernel, layer.bias])
    assert np.all(b == 0)                                 # bias: zeros
    limit = np.sqrt(6.0 / (3 * 3 * 4 + 3 * 3 * 32))      # glorot uniform, TF's fans
    assert np.all(np.abs(k) <= limit) and k.std() > limit / 3


def test_conv2d_channels_first_and_none_batch(sess):
    # testCreateConv2DChannelsFirst
    height, width = 7, 9
    images = tf.random_uniform((5, 4, height, width))
    layer = layers.Conv2D(32, [3, 3], data_format="channels_first")
    assert layer.apply(images).shape.as_list() == [5, 32, height - 2, width - 2]
    assert list(layer.kernel.shape) == [3, 3, 4, 32]
    assert list(layer.bias.shape) == [32]
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.layers.conv2d(x, 16, 5, padding="same", activation=tf.nn.relu)
    assert y.shape.as_list() == [None, 28, 28, 16]
    xf = tf.placeholder(tf.float32, [None, 3, 8, 6])
    yf = tf.layers.conv2d(xf, 2, (3, 2), strides=(2, 1), data_format="channels_first")
    assert yf.shape.as_list() == [None, 2, 3, 5]
    sess.run(tf.global_variables_initializer())
    assert sess.run(y, {x: np.zeros((3, 28, 28, 1), np.float32)}).shape == (3, 28, 28, 16)


def test_conv2d_output_shapes_padding_strides_dilation():
    tf.reset_default_graph()
    height, width = 7, 9
    # testConv2DPaddingSame: a kernel of the images' own spatial size (a TensorShape slice)
    images = tf.random_uniform((5, height, width, 32), seed=1)
    out = layers.Conv2D(64, images.get_shape()[1:3], padding="same").apply(images)
    assert out.shape.as_list() == [5, height, width, 64]
    # testCreateConvWithStrides
    height, width = 6, 8
    images = tf.random_uniform((5, height, width, 3), seed=1)
    for strides, expect in [((2, 2), [5, 3, 4, 32]), (2, [5, 3, 4, 32]),
                            ((2, 1), [5, 3, 8, 32])]:
        out = layers.Conv2D(32, [3, 3], strides=strides, padding="same").apply(images)
        assert out.shape.as_list() == expect
    # testDilatedConv2D
    images = tf.random_uniform((5, 7, 9, 4))
    layer = layers.Conv2D(32, [3, 3], dilation_rate=3)
    assert layer.apply(images).shape.as_list() == [5, 1, 3, 32]
    assert list(layer.kernel.shape) == [3, 3, 4, 32]
    out = layers.Conv2D(32, [3, 3], dilation_rate=(1, 3)).apply(images)
    assert out.shape.as_list() == [5, 5, 3, 32]


def test_conv2d_bad_arguments_name_them():
    tf.reset_default_graph()
    images = tf.random_uniform((5, 7, 9, 3), seed=1)
    # testInvalidDataFormat, testInvalidStrides, testInvalidKernelSize
    with pytest.raises(ValueError, match="data_format.*'invalid'"):
        tf.layers.conv2d(images, 32, 3, data_format="invalid")
    with pytest.raises(ValueError, match="strides"):
        tf.layers.conv2d(images, 32, 3, strides=(1, 2, 3))
    with pytest.raises(ValueError, match="strides"):
        tf.layers.conv2d(images, 32, 3, strides=None)
    with pytest.raises(ValueError, match="kernel_size"):
        tf.layers.conv2d(images, 32, (1, 2, 3))
    with pytest.raises(ValueError, match="kernel_size"):
        tf.layers.conv2d(images, 32, None)
    with pytest.raises(ValueError, match="padding.*'full'"):
        tf.layers.conv2d(images, 32, 3, padding="full")
    with pytest.raises(ValueError, match="strides > 1 not supported in conjunction"):
        tf.layers.conv2d(images, 32, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match="filters"):
        tf.layers.conv2d(images, 0, 3)
    # testUnknownInputChannels (both formats)
    x = tf.placeholder(tf.float32, (5, 7, 9, None))
    with pytest.raises(ValueError, match="The channel dimension of the inputs should be "
                                         "defined. Found `None`."):
        layers.Conv2D(32, [3, 3], activation=tf.nn.relu).apply(x)
    x = tf.placeholder(tf.float32, (5, None, 7, 9))
    with pytest.raises(ValueError, match="The channel dimension of the inputs should be "
                                         "defined. Found `None`."):
        layers.Conv2D(32, [3, 3], data_format="channels_first").apply(x)
    with pytest.raises(ValueError, match="expected ndim=4, found ndim=3"):
        tf.layers.conv2d(tf.placeholder(tf.float32, (5, 7, 3)), 2, 3)
    # Padding and data_format are case-insensitive, as Keras's normalize_*.
    assert tf.layers.conv2d(images, 2, 3, padding="SAME").shape.as_list() == [5, 7, 9, 2]


def test_conv2d_regularizers_no_bias_reuse_and_scope_initializer(sess):
    images = tf.random_uniform((5, 7, 9, 4))
    reg = lambda x: 0.1 * tf.reduce_sum(x)   # noqa: E731 -- testConv2DKernelRegularizer
    layer = layers.Conv2D(32, [3, 3], kernel_regularizer=reg)
    layer.apply(images)
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 1 and layer.losses == losses
    layer = layers.Conv2D(32, [3, 3], bias_regularizer=reg)   # testConv2DBiasRegularizer
    layer.apply(images)
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 2
    # testConv2DNoBias
    layer = layers.Conv2D(32, [3, 3], activation=tf.nn.relu, use_bias=False)
    out = layer.apply(images)
    assert layer.bias is None
    assert out.shape.as_list() == [5, 5, 7, 32] and layer.kernel.shape == (3, 3, 4, 32)

    tf.reset_default_graph()
    images = tf.random_uniform((5, 7, 9, 3), seed=1)
    # testFunctionalConv2DReuse / testFunctionalConv2DNoReuse
    tf.layers.conv2d(images, 32, [3, 3], name="conv1")
    assert len(tf.trainable_variables()) == 2
    tf.layers.conv2d(images, 32, [3, 3], name="conv1", reuse=True)
    assert len(tf.trainable_variables()) == 2
    tf.layers.conv2d(images, 32, [3, 3])
    tf.layers.conv2d(images, 32, [3, 3])
    assert len(tf.trainable_variables()) == 6
    with pytest.raises(ValueError, match="conv1/kernel already exists"):
        tf.layers.conv2d(images, 32, [3, 3], name="conv1")
    # testFunctionalConv2DReuseFromScope
    with tf.variable_scope("scope"):
        tf.layers.conv2d(images, 32, [3, 3], name="conv1")
    with tf.variable_scope("scope", reuse=True):
        tf.layers.conv2d(images, 32, [3, 3], name="conv1")
    assert _names(tf.trainable_variables())[-2:] == ["scope/conv1/kernel", "scope/conv1/bias"]
    assert len(tf.trainable_variables()) == 8
    # testFunctionalConv2DInitializerFromScope
    with tf.variable_scope("init", initializer=tf.ones_initializer()):
        tf.layers.conv2d(images, 32, [3, 3], name="conv1")
    weights = tf.trainable_variables()[-2:]
    assert "kernel" in weights[0].name and "bias" in weights[1].name
    with tf.Session("") as s:
        s.run(tf.global_variables_initializer())
        k, b = s.run(weights)
    np.testing.assert_array_equal(k, np.ones((3, 3, 3, 32)))
    np.testing.assert_array_equal(b, np.zeros(32))
    # not trainable: the weights are global but not trainable
    tf.layers.conv2d(images, 4, 3, trainable=False, name="frozen")
    assert "frozen/kernel" not in _names(tf.trainable_variables())
    assert "frozen/kernel" in _names(tf.global_variables())


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
@pytest.mark.parametrize("padding,strides,dilation", [("valid", 1, 1), ("same", 2, 1),
                                                      ("same", 1, 2), ("valid", (1, 2), 1)])
def test_conv2d_values_equal_nn_conv2d(sess, fmt, padding, strides, dilation):
    rng = np.random.RandomState(0)
    x_nhwc = rng.randn(2, 7, 8, 3).astype(np.float32)
    kernel = rng.randn(3, 2, 3, 4).astype(np.float32)
    bias = rng.randn(4).astype(np.float32)
    x_in = x_nhwc if fmt == "channels_last" else x_nhwc.transpose(0, 3, 1, 2)
    shape = [None] + list(x_in.shape[1:])
    x = tf.placeholder(tf.float32, shape)
    y = tf.layers.conv2d(x, 4, (3, 2), strides=strides, padding=padding, data_format=fmt,
                         dilation_rate=dilation, activation=tf.nn.relu,
                         kernel_initializer=tf.constant_initializer(kernel),
                         bias_initializer=tf.constant_initializer(bias))
    nfmt = "NHWC" if fmt == "channels_last" else "NCHW"
    ref = tf.nn.relu(tf.nn.bias_add(
        tf.nn.conv2d(x, kernel, strides=strides, padding=padding.upper(), data_format=nfmt,
                     dilations=dilation), bias, data_format=nfmt))
    assert y.shape.as_list() == ref.shape.as_list() and y.shape.as_list()[0] is None
    assert y.dtype == tf.float32
    sess.run(tf.global_variables_initializer())
    got, want = sess.run([y, ref], {x: x_in})
    np.testing.assert_array_equal(got, want)
    if (padding, strides, dilation) == ("valid", 1, 1):        # and numpy's own value
        ref_np = np.maximum(_np_conv_valid(x_nhwc.astype(np.float64), kernel, bias), 0)
        if fmt == "channels_first":
            ref_np = ref_np.transpose(0, 3, 1, 2)
        np.testing.assert_allclose(got, ref_np, rtol=1e-5, atol=1e-5)


def test_conv2d_kernel_gradient_against_finite_differences(sess):
    rng = np.random.RandomState(1)
    x_val = rng.randn(2, 5, 4, 2)
    x = tf.constant(x_val)
    layer = layers.Conv2D(3, 2, padding="same", dtype=tf.float64,
                          kernel_initializer=tf.constant_initializer(rng.randn(2, 2, 2, 3)))
    y = layer.apply(x)
    loss = tf.reduce_sum(tf.square(y))
    gk, gb = tf.gradients(loss, [layer.kernel, layer.bias])
    feeds = {v: tf.placeholder(tf.float64, v.shape) for v in (layer.kernel, layer.bias)}
    loads = {v: v.assign(p) for v, p in feeds.items()}
    sess.run(tf.global_variables_initializer())
    k0, b0 = sess.run([layer.kernel, layer.bias])
    grads = sess.run([gk, gb])
    eps = 1e-6
    for var, base, g in ((layer.kernel, k0, grads[0]), (layer.bias, b0, grads[1])):
        num = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            for sign in (1, -1):
                v = base.copy()
                v[idx] += sign * eps
                sess.run(loads[var], {feeds[var]: v})
                num[idx] += sign * sess.run(loss) / (2 * eps)
            sess.run(loads[var], {feeds[var]: base})
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-6)


# ---- pooling: pooling_test.py PoolingTest ----------------------------------------------------

def test_pooling_output_shapes():
    tf.reset_default_graph()
    height, width = 7, 9
    images = tf.random_uniform((5, height, width, 4))
    # testCreateMaxPooling2D, testCreateAveragePooling2D, ...IntegerPoolSize
    assert layers.MaxPooling2D([2, 2], strides=2).apply(images).shape.as_list() == [5, 3, 4, 4]
    assert layers.AveragePooling2D([2, 2], strides=2).apply(images).shape.as_list() == \
        [5, 3, 4, 4]
    assert layers.MaxPooling2D(2, strides=2).apply(images).shape.as_list() == [5, 3, 4, 4]
    # testCreateMaxPooling2DChannelsFirst
    images = tf.random_uniform((5, 2, height, width))
    out = layers.MaxPooling2D([2, 2], strides=1, data_format="channels_first").apply(images)
    assert out.shape.as_list() == [5, 2, 6, 8]
    # testCreateAveragePooling2DChannelsFirst (and ...WithNoneBatch)
    images = tf.random_uniform((3, 4, 5, 6))
    out = layers.AveragePooling2D((2, 2), strides=(1, 1), padding="valid",
                                  data_format="channels_first").apply(images)
    assert out.shape.as_list() == [3, 4, 4, 5]
    x = tf.placeholder("float32", (None, 4, 5, 6))
    out = layers.AveragePooling2D((2, 2), strides=(1, 1), padding="valid",
                                  data_format="channels_first").apply(x)
    assert out.shape.as_list() == [None, 4, 4, 5]
    # testMaxPooling2DPaddingSame
    images = tf.random_uniform((5, 7, 9, 4), seed=1)
    out = layers.MaxPooling2D(images.get_shape()[1:3], strides=2, padding="same").apply(images)
    assert out.shape.as_list() == [5, 4, 5, 4]
    # testCreatePooling2DWithStrides
    images = tf.random_uniform((5, 6, 8, 3), seed=1)
    for strides, expect in [((2, 2), [5, 3, 4, 3]), (2, [5, 3, 4, 3]), ((2, 1), [5, 3, 8, 3])]:
        out = layers.MaxPooling2D([2, 2], strides=strides, padding="same").apply(images)
        assert out.shape.as_list() == expect
    assert tf.layers.max_pooling2d(images, 2, 2).op.name.startswith("MaxPool")
    assert tf.layers.average_pooling2d(images, 2, 2).op.name.startswith("AvgPool")


def test_pooling_bad_arguments_name_them():
    tf.reset_default_graph()
    images = tf.random_uniform((5, 7, 9, 3), seed=1)
    # testInvalidDataFormat, testInvalidStrides, testInvalidPoolSize
    with pytest.raises(ValueError, match="data_format"):
        tf.layers.max_pooling2d(images, 3, strides=2, data_format="invalid")
    with pytest.raises(ValueError, match="strides"):
        tf.layers.max_pooling2d(images, 3, strides=(1, 2, 3))
    with pytest.raises(ValueError, match="strides"):
        tf.layers.max_pooling2d(images, 3, strides=None)
    with pytest.raises(ValueError, match="pool_size"):
        tf.layers.max_pooling2d(images, (1, 2, 3), strides=2)
    with pytest.raises(ValueError, match="pool_size"):
        tf.layers.average_pooling2d(images, None, strides=2)
    with pytest.raises(ValueError, match="padding"):
        tf.layers.average_pooling2d(images, 2, 2, padding="causal")
    with pytest.raises(ValueError, match="expected ndim=4"):
        tf.layers.max_pooling2d(tf.placeholder(tf.float32, (5, 7)), 2, 2)


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
@pytest.mark.parametrize("padding", ["valid", "same"])
def test_pooling_values_equal_nn_pools_and_numpy(sess, fmt, padding):
    rng = np.random.RandomState(2)
    x_nhwc = rng.randn(2, 5, 7, 3).astype(np.float32)
    x_in = x_nhwc if fmt == "channels_last" else x_nhwc.transpose(0, 3, 1, 2)
    x = tf.placeholder(tf.float32, [None] + list(x_in.shape[1:]))
    nfmt = "NHWC" if fmt == "channels_last" else "NCHW"
    mx = tf.layers.max_pooling2d(x, 2, 2, padding=padding, data_format=fmt)
    av = tf.layers.average_pooling2d(x, (3, 2), (1, 2), padding=padding, data_format=fmt)
    mx_ref = tf.nn.max_pool(x, 2, 2, padding.upper(), data_format=nfmt)
    av_ref = tf.nn.avg_pool(x, (3, 2), (1, 2), padding.upper(), data_format=nfmt)
    got_mx, got_av, want_mx, want_av = sess.run([mx, av, mx_ref, av_ref], {x: x_in})
    np.testing.assert_array_equal(got_mx, want_mx)
    np.testing.assert_array_equal(got_av, want_av)
    assert mx.shape.as_list()[0] is None and list(got_mx.shape[1:]) == mx.shape.as_list()[1:]
    # numpy: 2x2 max with stride 2 (SAME pads the odd row/column after, never winning)
    h2, w2 = (2, 3) if padding == "valid" else (3, 4)
    pad = np.full((2, 6, 8, 3), -np.inf, np.float32)
    pad[:, :5, :7] = x_nhwc
    ref = pad[:, :2 * h2, :2 * w2].reshape(2, h2, 2, w2, 2, 3).max(axis=(2, 4))
    if fmt == "channels_first":
        ref = ref.transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(got_mx, ref)


def test_conv_pool_net_trains(sess):
    # Two conv+pool blocks and a dense head learn a separable toy problem: the gradients
    # flow through every layer and reach every variable.
    rng = np.random.RandomState(3)
    xs = rng.rand(64, 12, 12, 1).astype(np.float32)
    ys = (xs[:, :6].sum(axis=(1, 2, 3)) > xs[:, 6:].sum(axis=(1, 2, 3))).astype(np.int64)
    x = tf.placeholder(tf.float32, [None, 12, 12, 1])
    y = tf.placeholder(tf.int64, [None])
    tf.set_random_seed(0)
    h = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.conv2d(h, 8, 3, padding="same", activation=tf.nn.relu)
    h = tf.layers.average_pooling2d(h, 2, 2)
    logits = tf.layers.dense(tf.layers.flatten(h), 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    grads = tf.gradients(loss, tf.trainable_variables())
    assert _names(tf.trainable_variables()) == [
        "conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias", "dense/kernel",
        "dense/bias"] and all(g is not None for g in grads)
    train = tf.train.AdamOptimizer(0.02).minimize(loss)
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss, {x: xs, y: ys})
    for _ in range(150):
        sess.run(train, {x: xs, y: ys})
    last = sess.run(loss, {x: xs, y: ys})
    assert last < 0.3 * first, (first, last)
