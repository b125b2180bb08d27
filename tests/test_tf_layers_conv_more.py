"""tf.layers' 3-D, transposed and separable convolution layers and 3-D pooling layers
(psrt/ops/layers_convolutional_more.py): the cases of TF r1.15's own tests
(tensorflow/python/layers/convolutional_test.py: testCreateConv3D, SeparableConv2DTest,
Conv2DTransposeTest, Conv3DTransposeTest; pooling_test.py: the 3-D cases), variable names,
shapes and collections as TF's, outputs equal to the tf.nn op with the layer's own weights,
both data formats, an unknown batch dimension, and a kernel gradient against float64
central differences."""

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


# ---- Conv3D ----------------------------------------------------------------------------------


def test_create_conv3d(sess):
    # convolutional_test.py testCreateConv3D
    depth, height, width = 6, 7, 9
    volumes = tf.random_uniform((5, depth, height, width, 4))
    layer = layers.Conv3D(32, [3, 3, 3], activation=tf.nn.relu)
    output = layer.apply(volumes)
    assert output.shape.as_list() == [5, depth - 2, height - 2, width - 2, 32]
    assert list(layer.kernel.shape) == [3, 3, 3, 4, 32] and list(layer.bias.shape) == [32]
    assert _names(tf.trainable_variables()) == ["conv3d/kernel", "conv3d/bias"]
    out = layers.conv3d(volumes, 8, 2, strides=2, padding="same", name="c2")
    assert out.shape.as_list() == [5, 3, 4, 5, 8]
    with pytest.raises(ValueError, match="The channel dimension of the inputs should be "
                                         "defined"):
        layers.conv3d(tf.placeholder(tf.float32, [5, 6, 7, 9, None]), 4, 3)
    with pytest.raises(ValueError, match="expected ndim=5, found ndim=4"):
        layers.conv3d(tf.placeholder(tf.float32, [5, 6, 7, 9]), 4, 3)
    with pytest.raises(ValueError, match="`kernel_size` argument must be a tuple of 3"):
        layers.Conv3D(4, (1, 2))


@pytest.mark.parametrize("channels_first", [False, True])
def test_conv3d_values_are_tf_nn_conv3d_with_the_layers_weights(sess, channels_first):
    x = np.random.default_rng(0).normal(size=(2, 5, 6, 4, 3)).astype(np.float32)
    fmt = "NCDHW" if channels_first else "NDHWC"
    xin = np.ascontiguousarray(x.transpose(0, 4, 1, 2, 3)) if channels_first else x
    ph = tf.placeholder(tf.float32, [None, *xin.shape[1:]])
    layer = layers.Conv3D(4, (2, 3, 2), strides=(1, 2, 1), padding="same",
                          data_format="channels_first" if channels_first else "channels_last",
                          bias_initializer=tf.constant_initializer(0.5))
    y = layer(ph)
    assert y.shape.as_list() == ([None, 4, 5, 3, 4] if channels_first else [None, 5, 3, 4, 4])
    sess.run(tf.global_variables_initializer())
    got, k = sess.run([y, layer.kernel], {ph: xin})
    want = sess.run(tf.nn.conv3d(xin, k, (1, 2, 1), "SAME", data_format=fmt)) + 0.5
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- Conv2DTranspose / Conv3DTranspose --------------------------------------------------------


def test_create_conv2d_transpose(sess):
    # Conv2DTransposeTest testCreateConv2DTranspose, ...IntegerKernelSize, ...ChannelsFirst,
    # testConv2DTransposePaddingSame, testCreateConv2DTransposeWithStrides, ...NoBias
    height, width = 7, 9
    images = tf.random_uniform((5, height, width, 4))
    layer = layers.Conv2DTranspose(32, [3, 3], activation=tf.nn.relu)
    assert layer.apply(images).shape.as_list() == [5, height + 2, width + 2, 32]
    assert list(layer.kernel.shape) == [3, 3, 32, 4] and list(layer.bias.shape) == [32]
    assert _names(tf.trainable_variables()) == ["conv2d_transpose/kernel",
                                                "conv2d_transpose/bias"]
    layer = layers.Conv2DTranspose(32, 3)
    assert layer.apply(images).shape.as_list() == [5, height + 2, width + 2, 32]
    first = layers.Conv2DTranspose(32, [3, 3], data_format="channels_first")
    assert first.apply(tf.random_uniform((5, 4, height, width))).shape.as_list() == \
        [5, 32, height + 2, width + 2]
    assert list(first.kernel.shape) == [3, 3, 32, 4]
    images32 = tf.random_uniform((5, height, width, 32), seed=1)
    same = layers.Conv2DTranspose(64, images32.shape[1:3], padding="same")
    assert same.apply(images32).shape.as_list() == [5, height, width, 64]
    images3 = tf.random_uniform((5, 6, 8, 3), seed=1)
    for strides, want in (((2, 2), [5, 12, 16, 32]), (2, [5, 12, 16, 32]),
                          ((2, 1), [5, 12, 8, 32])):
        lay = layers.Conv2DTranspose(32, [3, 3], strides=strides, padding="same")
        assert lay.apply(images3).shape.as_list() == want
    nobias = layers.Conv2DTranspose(32, [3, 3], activation=tf.nn.relu, use_bias=False)
    assert nobias.apply(images).shape.as_list() == [5, 9, 11, 32] and nobias.bias is None
    with pytest.raises(ValueError, match="data_format"):
        layers.conv2d_transpose(images, 32, 3, data_format="invalid")
    with pytest.raises(ValueError, match="strides"):
        layers.conv2d_transpose(images, 32, 3, strides=(1, 2, 3))
    with pytest.raises(ValueError, match="kernel_size"):
        layers.conv2d_transpose(images, 32, None)


def test_conv2d_transpose_functional_reuse_and_scope_initializer(sess):
    # testFunctionalConv2DTransposeReuse, ...ReuseFromScope, ...InitializerFromScope,
    # testConv2DTransposeKernelRegularizer
    images = tf.random_uniform((5, 7, 9, 3), seed=1)
    layers.conv2d_transpose(images, 32, [3, 3], name="deconv1")
    layers.conv2d_transpose(images, 32, [3, 3], name="deconv1", reuse=True)
    assert len(tf.trainable_variables()) == 2
    with tf.variable_scope("scope", initializer=tf.ones_initializer()):
        layers.conv2d_transpose(images, 32, [3, 3], name="deconv1")
    weights = tf.trainable_variables()[2:]
    assert _names(weights) == ["scope/deconv1/kernel", "scope/deconv1/bias"]
    sess.run(tf.global_variables_initializer())
    k, b = sess.run(weights)
    np.testing.assert_array_equal(k, np.ones((3, 3, 32, 3)))
    np.testing.assert_array_equal(b, np.zeros(32))
    layer = layers.Conv2DTranspose(32, [3, 3], kernel_regularizer=lambda w: 0.1 *
                                   tf.reduce_sum(w))
    layer.apply(tf.random_uniform((5, 7, 9, 4)))
    assert layer.losses == tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(layer.losses) == 1


@pytest.mark.parametrize("padding,strides", [("valid", (2, 2)), ("same", (2, 3)),
                                             ("valid", (1, 3))])
def test_conv2d_transpose_values_unknown_batch_and_gradient(sess, padding, strides):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4, 5, 2))
    ph = tf.placeholder(tf.float64, [None, None, 5, 2])
    layer = layers.Conv2DTranspose(3, (3, 2), strides=strides, padding=padding,
                                   bias_initializer=tf.constant_initializer(0.25))
    y = layer(ph)
    h = 4 * strides[0] + (max(3 - strides[0], 0) if padding == "valid" else 0)
    w = 5 * strides[1] + (max(2 - strides[1], 0) if padding == "valid" else 0)
    assert y.shape.as_list() == [None, None, w, 3]   # the height of ph is unknown
    sess.run(tf.global_variables_initializer())
    got, k = sess.run([y, layer.kernel], {ph: x})
    assert got.shape == (3, h, w, 3)
    want = sess.run(tf.nn.conv2d_transpose(x, k, [3, h, w, 3], [1, *strides, 1],
                                           padding.upper())) + 0.25
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the kernel's gradient against central differences (the layer's own variable)
    wgt = rng.normal(size=got.shape)
    loss = tf.reduce_sum(y * wgt)
    (dk,) = sess.run(tf.gradients(loss, [layer.kernel]), {ph: x})
    kp = tf.placeholder(tf.float64, k.shape)
    lk = tf.reduce_sum((tf.nn.conv2d_transpose(x, kp, [3, h, w, 3], [1, *strides, 1],
                                               padding.upper()) + 0.25) * wgt)
    num = np.zeros_like(k)
    for i in np.ndindex(k.shape):
        kp_, km_ = k.copy(), k.copy()
        kp_[i] += 1e-6
        km_[i] -= 1e-6
        num[i] = (sess.run(lk, {kp: kp_}) - sess.run(lk, {kp: km_})) / 2e-6
    np.testing.assert_allclose(dk, num, rtol=1e-6, atol=1e-7)


def test_create_conv3d_transpose(sess):
    # Conv3DTransposeTest testCreateConv3DTranspose, ...ChannelsFirst, ...PaddingSame,
    # ...WithStrides
    depth, height, width = 5, 7, 9
    volumes = tf.random_uniform((5, depth, height, width, 32))
    layer = layers.Conv3DTranspose(4, [3, 3, 3], activation=tf.nn.relu)
    assert layer.apply(volumes).shape.as_list() == [5, depth + 2, height + 2, width + 2, 4]
    assert list(layer.kernel.shape) == [3, 3, 3, 4, 32] and list(layer.bias.shape) == [4]
    first = layers.Conv3DTranspose(4, [3, 3, 3], data_format="channels_first")
    assert first.apply(tf.random_uniform((5, 32, depth, height, width))).shape.as_list() \
        == [5, 4, depth + 2, height + 2, width + 2]
    v64 = tf.random_uniform((5, depth, height, width, 64), seed=1)
    assert layers.Conv3DTranspose(32, v64.shape[1:4], padding="same").apply(v64) \
        .shape.as_list() == [5, depth, height, width, 32]
    v = tf.random_uniform((2, 4, 6, 8, 3), seed=1)
    lay = layers.Conv3DTranspose(4, [3, 2, 3], strides=(2, 1, 1), padding="same")
    out = lay.apply(v)
    assert out.shape.as_list() == [2, 8, 6, 8, 4]
    sess.run(tf.global_variables_initializer())
    vv, got, k = sess.run([v, out, lay.kernel])
    want = sess.run(tf.nn.conv3d_transpose(vv, k, [2, 8, 6, 8, 4], (2, 1, 1), "SAME"))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="strides"):
        layers.conv3d_transpose(v, 4, 3, strides=(1, 2))


# ---- SeparableConv2D --------------------------------------------------------------------------


def test_create_separable_conv2d(sess):
    # SeparableConv2DTest testCreateSeparableConv2D, ...DepthMultiplier, ...ChannelsFirst,
    # testSeparableConv2DPaddingSame, testCreateSeparableConvWithStrides, ...NoBias
    height, width = 7, 9
    images = tf.random_uniform((5, height, width, 4))
    layer = layers.SeparableConv2D(32, [3, 3], activation=tf.nn.relu)
    assert layer.apply(images).shape.as_list() == [5, height - 2, width - 2, 32]
    assert list(layer.depthwise_kernel.shape) == [3, 3, 4, 1]
    assert list(layer.pointwise_kernel.shape) == [1, 1, 4, 32]
    assert _names(tf.trainable_variables()) == ["separable_conv2d/depthwise_kernel",
                                                "separable_conv2d/pointwise_kernel",
                                                "separable_conv2d/bias"]
    dm = layers.SeparableConv2D(32, [3, 3], depth_multiplier=2)
    assert dm.apply(images).shape.as_list() == [5, 5, 7, 32]
    assert list(dm.depthwise_kernel.shape) == [3, 3, 4, 2]
    assert list(dm.pointwise_kernel.shape) == [1, 1, 8, 32]
    first = layers.SeparableConv2D(32, [3, 3], data_format="channels_first")
    assert first.apply(tf.random_uniform((5, 4, height, width))).shape.as_list() == \
        [5, 32, 5, 7]
    im32 = tf.random_uniform((5, height, width, 32), seed=1)
    assert layers.SeparableConv2D(64, im32.shape[1:3], padding="same").apply(im32) \
        .shape.as_list() == [5, height, width, 64]
    im3 = tf.random_uniform((5, 6, 8, 3), seed=1)
    for strides, want in (((2, 2), [5, 3, 4, 32]), (2, [5, 3, 4, 32]),
                          ((2, 1), [5, 3, 8, 32])):
        lay = layers.SeparableConv2D(32, [3, 3], strides=strides, padding="same")
        assert lay.apply(im3).shape.as_list() == want
    nb = layers.SeparableConv2D(32, [3, 3], use_bias=False)
    nb.apply(images)
    assert nb.bias is None


def test_separable_conv2d_functional_scope_regularizers_and_values(sess):
    # testFunctionalConv2DReuse / InitializerFromScope / Depthwise and Pointwise regularizers
    images = tf.random_uniform((5, 7, 9, 3), seed=1)
    layers.separable_conv2d(images, 32, [3, 3], name="sepconv1")
    layers.separable_conv2d(images, 32, [3, 3], name="sepconv1", reuse=True)
    assert len(tf.trainable_variables()) == 3
    with tf.variable_scope("scope", initializer=tf.ones_initializer()):
        layers.separable_conv2d(images, 32, [3, 3], name="sepconv1")
    weights = tf.trainable_variables()[3:]
    assert _names(weights) == ["scope/sepconv1/depthwise_kernel",
                               "scope/sepconv1/pointwise_kernel", "scope/sepconv1/bias"]
    reg = layers.SeparableConv2D(4, 3, depthwise_regularizer=lambda w: tf.reduce_sum(w),
                                 pointwise_regularizer=lambda w: tf.reduce_sum(w))
    x = np.random.default_rng(2).normal(size=(2, 7, 8, 3)).astype(np.float32)
    ph = tf.placeholder(tf.float32, [None, 7, 8, 3])
    lay = layers.SeparableConv2D(5, (3, 2), depth_multiplier=2, dilation_rate=2,
                                 padding="same", activation=tf.nn.relu)
    y = lay(ph)
    reg.apply(ph)
    assert len(reg.losses) == 2
    sess.run(tf.global_variables_initializer())
    d, p = sess.run(weights[:2])
    np.testing.assert_array_equal(d, np.ones((3, 3, 3, 1)))
    np.testing.assert_array_equal(p, np.ones((1, 1, 3, 32)))
    got, dk, pk = sess.run([y, lay.depthwise_kernel, lay.pointwise_kernel], {ph: x})
    want = np.maximum(sess.run(tf.nn.separable_conv2d(x, dk, pk, [1, 1, 1, 1], "SAME",
                                                      rate=[2, 2])), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- MaxPooling3D / AveragePooling3D ----------------------------------------------------------


def test_pooling3d_layers(sess):
    # pooling_test.py testCreateMaxPooling3D, testCreateAveragePooling3D,
    # testMaxPooling3DChannelsFirst, testAveragePooling3DChannelsFirst
    images = tf.random_uniform((5, 6, 7, 9, 4))
    assert layers.MaxPooling3D([2, 2, 2], strides=2).apply(images).shape.as_list() == \
        [5, 3, 3, 4, 4]
    assert layers.AveragePooling3D([2, 2, 2], strides=2).apply(images).shape.as_list() == \
        [5, 3, 3, 4, 4]
    first = tf.random_uniform((5, 2, 6, 7, 9))
    for cls in (layers.MaxPooling3D, layers.AveragePooling3D):
        assert cls([2, 2, 2], strides=2, data_format="channels_first").apply(first) \
            .shape.as_list() == [5, 2, 3, 3, 4]
    x = np.random.default_rng(3).normal(size=(2, 5, 4, 6, 3)).astype(np.float32)
    ph = tf.placeholder(tf.float32, [None, 5, 4, 6, 3])
    mp = layers.max_pooling3d(ph, (2, 2, 3), (2, 1, 3), padding="same")
    ap = layers.average_pooling3d(ph, 2, 2)
    assert mp.shape.as_list() == [None, 3, 4, 2, 3] and ap.shape.as_list() == [None, 2, 2, 3, 3]
    got = sess.run([mp, ap], {ph: x})
    want = sess.run([tf.nn.max_pool3d(x, (2, 2, 3), (2, 1, 3), "SAME"),
                     tf.nn.avg_pool3d(x, 2, 2, "VALID")])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    with pytest.raises(ValueError, match="`pool_size` argument must be a tuple of 3"):
        layers.MaxPooling3D((2, 2), 2)
    with pytest.raises(ValueError, match="expected ndim=5"):
        layers.max_pooling3d(tf.placeholder(tf.float32, [1, 4, 4, 4]), 2, 2)
    assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES) == []
