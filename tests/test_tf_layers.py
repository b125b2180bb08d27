"""tf.layers (psrt/ops/layers_*.py): the cases of TF r1.15's own tests
(tensorflow/python/layers/core_test.py: DenseTest, DropoutTest, FlattenTest;
tensorflow/python/layers/normalization_test.py: BNTest), variable names and collections as
TF's, batch normalization's values, moving averages and UPDATE_OPS against numpy, and
gradients against central finite differences in float64."""

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


# ---- Dense (core_test.py DenseTest) ------------------------------------------------------------

def test_dense_properties_and_call(sess):
    dense = layers.Dense(2, activation=tf.nn.relu, name="my_dense")
    assert dense.units == 2 and dense.activation is tf.nn.relu and dense.use_bias
    inputs = tf.random_uniform((5, 4), seed=1)
    out = dense(inputs)
    assert out.shape.as_list() == [5, 2]
    assert _names(dense.trainable_variables) == ["my_dense/kernel", "my_dense/bias"]
    assert dense.kernel.name == "my_dense/kernel" and dense.kernel.shape == (4, 2)
    assert _names(tf.trainable_variables()) == ["my_dense/kernel", "my_dense/bias"]
    assert dense.non_trainable_variables == []
    sess.run(tf.global_variables_initializer())
    k, b = sess.run([dense.kernel, dense.bias])
    assert np.all(b == 0)                        # bias_initializer: zeros
    limit = np.sqrt(6.0 / (4 + 2))              # kernel: glorot uniform
    assert np.all(np.abs(k) <= limit) and k.std() > 0


def test_dense_names_twice_reuse_and_scope(sess):
    x = tf.placeholder(tf.float32, [None, 3])
    tf.layers.dense(x, 2)
    tf.layers.dense(x, 2)
    assert _names(tf.trainable_variables()) == ["dense/kernel", "dense/bias",
                                                "dense_1/kernel", "dense_1/bias"]
    y1 = tf.layers.dense(x, 2, name="my_dense")
    n = len(tf.trainable_variables())
    y2 = tf.layers.dense(x, 2, name="my_dense", reuse=True)
    assert len(tf.trainable_variables()) == n      # testFunctionalDenseTwiceReuse
    with tf.variable_scope("test", reuse=tf.AUTO_REUSE):
        tf.layers.dense(x, 2, name="fc")
        tf.layers.dense(x, 2, name="fc")
    assert _names(tf.trainable_variables())[n:] == ["test/fc/kernel", "test/fc/bias"]
    with pytest.raises(ValueError, match="Variable my_dense/kernel already exists"):
        tf.layers.dense(x, 2, name="my_dense")        # a name without reuse: TF's error
    a1, a2 = layers.Dense(2, name="cls"), layers.Dense(2, name="cls")
    a1(x), a2(x), a1(x)                               # classes: unique scopes, reused on calls
    assert (a1.scope_name, a2.scope_name) == ("cls", "cls_1") and a2.name == "cls"
    assert a1.kernel.name == "cls/kernel"
    assert a2.kernel.name == "cls_1/kernel"
    with tf.variable_scope("scope", initializer=tf.ones_initializer()):  # ...FromScope
        y3 = tf.layers.dense(x, 3)
    assert "scope/dense/kernel" in _names(tf.global_variables())
    sess.run(tf.global_variables_initializer())
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b, c = sess.run([y1, y2, y3], {x: xv})
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(c, np.tile(xv.sum(1, keepdims=True), (1, 3)))
    assert sess.run(tf.get_default_graph().get_variable_by_name("scope/dense/kernel")).tolist() \
        == np.ones((3, 3)).tolist()


def test_dense_values_rank3_no_bias_and_not_trainable(sess):
    x = tf.placeholder(tf.float32, [None, 2, 3])
    k = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    y = tf.layers.dense(x, 4, kernel_initializer=tf.constant_initializer(k),
                        bias_initializer=tf.constant_initializer(0.5))
    z = tf.layers.dense(x, 4, use_bias=False, trainable=False, name="frozen")
    assert y.shape.as_list() == [None, 2, 4]
    assert "frozen/kernel" not in _names(tf.trainable_variables())
    assert "frozen/kernel" in _names(tf.global_variables())
    assert "frozen/bias" not in _names(tf.global_variables())
    sess.run(tf.global_variables_initializer())
    xv = np.random.default_rng(0).normal(size=(5, 2, 3)).astype(np.float32)
    np.testing.assert_allclose(sess.run(y, {x: xv}), xv @ k + 0.5, rtol=1e-5, atol=1e-6)
    assert sess.run(z, {x: xv}).shape == (5, 2, 4)
    with pytest.raises(ValueError, match="last dimension of the inputs to `Dense`"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, None]), 2)


def test_dense_kernel_regularizer(sess):
    # core_test.py testKernelRegularizer / testKernelRegularizerWithReuse
    regularizer = lambda x: tf.reduce_sum(x) * 1e-3  # noqa: E731
    dense = layers.Dense(2, name="my_dense", kernel_regularizer=regularizer,
                         kernel_initializer=tf.ones_initializer())
    dense(tf.random_uniform((5, 3), seed=1))
    keys = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(keys) == 1
    assert dense.losses == keys
    assert tf.losses.get_regularization_losses() == keys
    sess.run(tf.global_variables_initializer())
    assert sess.run(tf.losses.get_regularization_loss()) == pytest.approx(6e-3)
    tf.layers.dense(tf.random_uniform((5, 3), seed=1), 2, name="my_dense", reuse=True,
                    kernel_regularizer=regularizer)
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1


def test_dense_gradients_against_finite_differences(sess):
    x = tf.placeholder(tf.float64, [None, 3])
    y = tf.layers.dense(x, 2, activation=tf.tanh)
    k, b = tf.trainable_variables()
    sess.run(tf.global_variables_initializer())
    xv = np.random.default_rng(2).normal(size=(4, 3))
    gx, gk = sess.run(tf.gradients(tf.reduce_sum(y * y), [x, k]), {x: xv})
    kv, bv = sess.run([k, b])

    def f(xx, kk):
        return np.sum(np.tanh(xx @ kk + bv) ** 2)
    eps = 1e-6
    for g, arr, fn in ((gx, xv, lambda a: f(a, kv)), (gk, kv, lambda a: f(xv, a))):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += eps
            m[i] -= eps
            num[i] = (fn(p) - fn(m)) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)
    assert np.asarray(kv).dtype == np.float64


# ---- Dropout (core_test.py DropoutTest) --------------------------------------------------------

def test_dropout_boolean_and_dynamic_learning_phase(sess):
    dp = layers.Dropout(0.5, seed=1)
    assert dp.rate == 0.5 and dp.noise_shape is None
    inputs = tf.ones((5, 3))
    dropped = dp.apply(inputs, training=True)
    out = sess.run(dropped)
    assert set(np.unique(out)) <= {0.0, 2.0} and 0 < np.count_nonzero(out) < 15
    assert np.all(sess.run(tf.layers.dropout(inputs, 0.5)) == 1.0)   # training=False: TF's default
    training = tf.placeholder(tf.bool, [])
    d = tf.layers.dropout(inputs, 0.5, training=training, seed=1)
    assert set(np.unique(sess.run(d, {training: True}))) <= {0.0, 2.0}
    assert np.all(sess.run(d, {training: False}) == 1.0)
    big = sess.run(tf.layers.dropout(tf.ones((200, 100)), 0.3, training=True))
    assert abs(np.mean(big == 0) - 0.3) < 0.02 and np.allclose(big[big != 0], 1 / 0.7)
    with pytest.raises(ValueError, match="rate must be"):
        tf.layers.dropout(inputs, 1.0)


def test_dropout_noise_shapes_and_gradient(sess):
    x = tf.placeholder(tf.float32, (None, 5, 2))        # testDynamicNoiseShape
    d = tf.layers.dropout(x, 0.5, noise_shape=[None, 1, None], training=True)
    out = sess.run(d, {x: np.ones((3, 5, 2))})
    assert out.shape == (3, 5, 2)
    for j in range(1, 5):
        np.testing.assert_array_equal(out[:, 0, :], out[:, j, :])
    c = sess.run(tf.layers.dropout(tf.ones((5, 3, 2)), 0.5, noise_shape=[5, 1, 2],
                                   training=True))          # testCustomNoiseShape
    np.testing.assert_array_equal(c[:, 0, :], c[:, 1, :])
    y = tf.placeholder(tf.float32, [None, 4])
    dy = tf.layers.dropout(y, 0.25, training=True, seed=3)
    tf.set_random_seed(0)
    v = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    out, (g,) = sess.run([dy, tf.gradients(dy, [y])], {y: v})
    # The gradient is the mask scaled by 1 / (1 - rate) (here in the same run's draw).
    assert set(np.unique(g)) <= {0.0, np.float32(1 / 0.75)}


# ---- Flatten (core_test.py FlattenTest) --------------------------------------------------------

def test_flatten(sess):
    x = tf.placeholder(tf.float32, (None, 2, 3))
    y = tf.layers.flatten(x)
    assert y.shape.as_list() == [None, 6]
    assert sess.run(y, {x: np.ones((3, 2, 3))}).shape == (3, 6)
    u = tf.placeholder(tf.float32, (5, None, None))     # testFlattenUnknownAxes
    assert sess.run(tf.layers.flatten(u), {u: np.ones((5, 2, 3))}).shape == (5, 6)
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    first = tf.layers.flatten(tf.constant(v), data_format="channels_first")
    np.testing.assert_array_equal(sess.run(first), v.transpose(0, 2, 1).reshape(2, -1))
    np.testing.assert_array_equal(sess.run(tf.layers.flatten(tf.constant(v))), v.reshape(2, -1))


# ---- BatchNormalization (normalization_test.py BNTest) ----------------------------------------

def test_bn_variables_names_collections():
    tf.reset_default_graph()
    bn = layers.BatchNormalization(axis=1)
    inputs = tf.random_uniform((5, 4, 3), seed=1)
    training = tf.placeholder(tf.bool)
    bn.apply(inputs, training=training)
    assert _names(bn.variables) == ["batch_normalization/gamma", "batch_normalization/beta",
                                    "batch_normalization/moving_mean",
                                    "batch_normalization/moving_variance"]
    assert _names(bn.trainable_variables) == ["batch_normalization/gamma",
                                              "batch_normalization/beta"]
    assert _names(tf.trainable_variables()) == _names(bn.trainable_variables)
    assert _names(tf.global_variables()) == _names(bn.variables)
    assert len(bn.updates) == 2
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == bn.updates
    assert bn.gamma.shape == (4,)
    tf.layers.batch_normalization(inputs, training=False)
    assert "batch_normalization_1/gamma" in _names(tf.global_variables())
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2   # training=False: no updates
    tf.layers.batch_normalization(inputs, center=False, scale=False, name="plain")
    assert not {"plain/gamma", "plain/beta"} & set(_names(tf.global_variables()))


@pytest.mark.parametrize("shape,axis,reduce", [((5, 4, 3), 1, (0, 2)),
                                               ((5, 4, 3), -1, (0, 1)),
                                               ((5, 4, 3, 2), 3, (0, 1, 2))])
def test_bn_training_and_inference_tf_cases(sess, shape, axis, reduce):
    # normalization_test.py test3DInputAxis1 / test3DInputAxis2 / test4DInputAxis3.
    epsilon = 1e-3
    bn = layers.BatchNormalization(axis=axis, epsilon=epsilon, momentum=0.9)
    inputs = tf.Variable(np.random.default_rng(0).random(shape) + 100, dtype=tf.float32)
    training = tf.placeholder(tf.bool)
    outputs = bn.apply(inputs, training=training)
    sess.run(tf.global_variables_initializer())
    for _ in range(100):
        np_output, _, _ = sess.run([outputs] + bn.updates, feed_dict={training: True})
        assert np.mean(np_output) == pytest.approx(0.0, abs=0.05)
        assert np.std(np_output) == pytest.approx(1.0, abs=0.05)
    moving_mean, moving_var = sess.run([bn.moving_mean, bn.moving_variance])
    np_inputs = sess.run(inputs)
    np.testing.assert_allclose(moving_mean, np.mean(np_inputs, axis=reduce), atol=1e-2)
    np.testing.assert_allclose(moving_var, np.square(np.std(np_inputs, axis=reduce)),
                               atol=1e-2)
    np_output = sess.run(outputs, feed_dict={training: False})
    assert np.mean(np_output) == pytest.approx(0.0, abs=0.05)
    assert np.std(np_output) == pytest.approx(1.0, abs=0.05)


def test_bn_exact_step_values_and_update_ops(sess):
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.layers.batch_normalization(x, momentum=0.8, training=True,
                                      gamma_initializer=tf.constant_initializer(2.0),
                                      beta_initializer=tf.constant_initializer(0.5))
    z = tf.layers.batch_normalization(x, momentum=0.8, training=True, name="bn4d_off")
    sess.run(tf.global_variables_initializer())
    xv = np.random.default_rng(1).normal(3.0, 2.0, (6, 3)).astype(np.float32)
    mean, var = xv.mean(0), xv.var(0)
    out = sess.run(y, {x: xv})                      # the output alone runs no update
    np.testing.assert_allclose(out, 2.0 * (xv - mean) / np.sqrt(var + 1e-3) + 0.5,
                               rtol=1e-4, atol=1e-4)
    mm, mv = sess.run(["batch_normalization/moving_mean",
                       "batch_normalization/moving_variance"])
    assert np.all(mm == 0) and np.all(mv == 1)
    sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), {x: xv})
    mm, mv = sess.run(["batch_normalization/moving_mean",
                       "batch_normalization/moving_variance"])
    np.testing.assert_allclose(mm, 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(mv, 0.8 + 0.2 * var, rtol=1e-5)   # biased (non-fused, 2-D)
    assert z is not None


def test_bn_4d_moving_variance_is_bessel_corrected_as_tf_fused(sess):
    x = tf.placeholder(tf.float32, [2, 2, 2, 3])
    tf.layers.batch_normalization(x, momentum=0.0, training=True)
    tf.layers.batch_normalization(x, momentum=0.0, training=True, fused=False)
    sess.run(tf.global_variables_initializer())
    xv = np.random.default_rng(4).normal(size=(2, 2, 2, 3)).astype(np.float32)
    sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), {x: xv})
    fused, plain = sess.run(["batch_normalization/moving_variance",
                             "batch_normalization_1/moving_variance"])
    np.testing.assert_allclose(fused, xv.reshape(-1, 3).var(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(plain, xv.reshape(-1, 3).var(0), rtol=1e-5)


def test_bn_train_op_after_update_ops(sess):
    x = tf.placeholder(tf.float32, [None, 2])
    is_training = tf.placeholder_with_default(True, [])
    h = tf.layers.dense(x, 3, kernel_initializer=tf.ones_initializer())
    y = tf.layers.batch_normalization(h, training=is_training, momentum=0.5)
    loss = tf.reduce_mean(tf.square(y - 1.0))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    sess.run(tf.global_variables_initializer())
    xv = np.array([[1., 2.], [3., 5.], [0., 1.]], np.float32)
    sess.run(train_op, {x: xv})
    hv = xv @ np.ones((2, 3))
    mm = sess.run("batch_normalization/moving_mean")
    np.testing.assert_allclose(mm, 0.5 * hv.mean(0), rtol=1e-5)
    sess.run(train_op, {x: xv, is_training: False})   # inference: momentum 1, no change
    np.testing.assert_allclose(sess.run("batch_normalization/moving_mean"), mm)


def test_bn_updates_through_a_loss_made_under_control_dependencies(sess):
    # TF's other idiom: the loss (not the train op) waits for the UPDATE_OPS.
    x = tf.placeholder(tf.float32, [None, 2])
    y = tf.layers.batch_normalization(x, training=True, momentum=0.0)
    loss = tf.reduce_mean(y * y)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        loss = tf.identity(loss)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    sess.run(tf.global_variables_initializer())
    xv = np.array([[1., 2.], [3., 5.]], np.float32)
    sess.run(train_op, {x: xv})
    np.testing.assert_allclose(sess.run("batch_normalization/moving_mean"), xv.mean(0))
    np.testing.assert_allclose(sess.run("batch_normalization/moving_variance"), xv.var(0))


def test_bn_gradients_against_finite_differences(sess):
    x = tf.placeholder(tf.float64, [None, 3])
    y = tf.layers.batch_normalization(x, training=True,
                                      gamma_initializer=tf.constant_initializer([1., 2., 3.]))
    gamma, beta = tf.trainable_variables()
    w = np.random.default_rng(5).normal(size=(4, 3))
    f_t = tf.reduce_sum(y * w)
    sess.run(tf.global_variables_initializer())
    xv = np.random.default_rng(6).normal(size=(4, 3))
    gx, gg, gb = sess.run(tf.gradients(f_t, [x, gamma, beta]), {x: xv})

    def f(xx, g):
        m, v = xx.mean(0), xx.var(0)
        return np.sum(((xx - m) / np.sqrt(v + 1e-3) * g) * w)
    eps = 1e-6
    g0 = np.array([1., 2., 3.])
    for got, arr, fn in ((gx, xv, lambda a: f(a, g0)), (gg, g0, lambda a: f(xv, a))):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += eps
            m[i] -= eps
            num[i] = (fn(p) - fn(m)) / (2 * eps)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gb, w.sum(0), rtol=1e-10)


def test_bn_bad_arguments():
    tf.reset_default_graph()
    with pytest.raises(ValueError, match="undefined rank"):
        tf.layers.batch_normalization(tf.placeholder(tf.float32))
    with pytest.raises(ValueError, match="Invalid axis"):
        tf.layers.batch_normalization(tf.placeholder(tf.float32, [None, 3]), axis=4)
    with pytest.raises(NotImplementedError, match="adjustment"):
        tf.layers.batch_normalization(tf.placeholder(tf.float32, [None, 3]),
                                      adjustment=lambda shape: (1.0, 0.0))
    # (renorm and virtual_batch_size: tests/test_tf_layers_bn_renorm.py)


def test_conv_and_pool_layers_are_faced():
    # (their cases: tests/test_tf_layers_conv.py)
    assert tf.layers.conv2d is layers.conv2d and tf.layers.Conv2D.__name__ == "Conv2D"
    for name in ("max_pooling2d", "MaxPooling2D", "average_pooling2d", "AveragePooling2D"):
        assert callable(getattr(tf.layers, name))


# ---- tf.contrib's names (contrib/layers/python/layers/layers.py, regularizers.py,
# initializers.py; contrib/nn) ---------------------------------------------------------------------

def test_contrib_fully_connected(sess):
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.contrib.layers.fully_connected(x, 2, weights_initializer=tf.ones_initializer(),
                                          biases_initializer=tf.constant_initializer(-4.0))
    z = tf.contrib.layers.fully_connected(x, 2, activation_fn=None, biases_initializer=None,
                                          scope="lin", variables_collections=["mine"])
    assert _names(tf.global_variables()) == ["fully_connected/weights",
                                             "fully_connected/biases", "lin/weights"]
    assert _names(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)) == _names(
        tf.global_variables())
    assert _names(tf.get_collection("mine")) == ["lin/weights"]
    again = tf.contrib.layers.fully_connected(x, 2, scope="lin", reuse=True, activation_fn=None,
                                              biases_initializer=None)
    assert len(tf.global_variables()) == 3
    sess.run(tf.global_variables_initializer())
    xv = np.array([[1., 2., 3.], [0., 1., 0.]], np.float32)
    np.testing.assert_allclose(sess.run(y, {x: xv}), [[2., 2.], [0., 0.]])   # relu(6 - 4)
    a, b = sess.run([z, again], {x: xv})
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="num_outputs type should be one of"):
        tf.contrib.layers.fully_connected(x, 2.0)


def test_contrib_l2_regularizer(sess):
    reg = tf.contrib.layers.l2_regularizer(0.1)
    with tf.variable_scope("r"):
        w = tf.get_variable("w", initializer=np.array([1.0, 2.0, 2.0], np.float32),
                            regularizer=reg)
    sess.run(tf.global_variables_initializer())
    assert sess.run(tf.losses.get_regularization_loss()) == pytest.approx(0.1 * 9 / 2)
    assert tf.contrib.layers.l2_regularizer(0.0)(w) is None
    with pytest.raises(ValueError, match="scale cannot be an integer: 1"):
        tf.contrib.layers.l2_regularizer(1)
    with pytest.raises(ValueError, match="less than 0"):
        tf.contrib.layers.l2_regularizer(-0.5)


def test_contrib_initializers(sess):
    with tf.variable_scope("init"):
        xa = tf.get_variable("xa", [400, 200], initializer=tf.contrib.layers.xavier_initializer())
        he = tf.get_variable("he", [1000, 100],
                             initializer=tf.contrib.layers.variance_scaling_initializer())
        hu = tf.get_variable("hu", [500, 50], initializer=tf.contrib.layers.
                             variance_scaling_initializer(factor=1.0, mode="FAN_OUT",
                                                          uniform=True))
    sess.run(tf.global_variables_initializer())
    a, h, u = sess.run([xa, he, hu])
    limit = np.sqrt(6.0 / 600)
    assert np.abs(a).max() <= limit and np.abs(a).max() > 0.95 * limit
    # contrib's truncated normal: stddev sqrt(1.3 * 2 / fan_in) before truncation at 2.
    sd = np.sqrt(1.3 * 2.0 / 1000)
    assert np.abs(h).max() <= 2 * sd * 1.0001
    assert h.std() == pytest.approx(sd * 0.87962566103423978, rel=0.02)
    lim = np.sqrt(3.0 / 50)
    assert np.abs(u).max() <= lim and np.abs(u).max() > 0.95 * lim
    with pytest.raises(TypeError, match="Unknown mode fan_in"):
        tf.contrib.layers.variance_scaling_initializer(mode="fan_in")


def test_contrib_nn_and_framework(sess):
    logits = tf.constant([[1.0, 2.0, 0.5]])
    labels = tf.constant([[0.0, 1.0, 0.0]])
    flipped = tf.contrib.nn.deprecated_flipped_softmax_cross_entropy_with_logits(logits, labels)
    ref = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    sp = tf.contrib.nn.deprecated_flipped_sparse_softmax_cross_entropy_with_logits(
        logits, tf.constant([1]))
    a, b, c = sess.run([flipped, ref, sp])
    np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(c, b)
    assert tf.contrib.framework.get_or_create_global_step is \
        tf.train.get_or_create_global_step
    with pytest.raises(AttributeError, match="tf.contrib.learn in TensorFlow 1.x"):
        tf.contrib.learn  # noqa: B018
