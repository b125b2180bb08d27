"""tf.layers.batch_normalization's renorm, renorm_clipping, renorm_momentum and
virtual_batch_size (psrt/ops/layers_normalization.py), as TF r1.15's Keras layer
(keras/layers/normalization.py: _renorm_correction_and_moments, the ghost-batch reshape):
TF's own cases (tensorflow/python/layers/normalization_test.py: testRenorm,
testGhostBN2Dims, testGhostBN4DimsAxis3, testGhostBNVirtualBatchFull,
testGhostBNInputOutputShapesMatch, testGhostBNUnknownBatchSize,
testGhostBNNegativeVirtualBatch), the variables' names and shapes, a training step that uses
the corrections of the averages before its own updates (TF computes each tensor once per
run), and the gradients against float64 central differences."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _names(vs):
    return [v.name for v in vs]


RENORM = dict(rmax=1.1, rmin=0.9, dmax=0.1)


def test_renorm_variables_and_updates():
    tf.reset_default_graph()
    bn = tf.layers.BatchNormalization(axis=1, renorm=True)
    bn.apply(tf.placeholder(tf.float32, [4, 3]), training=tf.placeholder(tf.bool))
    assert _names(bn.variables) == [f"batch_normalization/{n}" for n in (
        "gamma", "beta", "moving_mean", "moving_variance", "renorm_mean",
        "renorm_mean_weight", "renorm_stddev", "renorm_stddev_weight")]
    assert _names(bn.trainable_variables) == ["batch_normalization/gamma",
                                              "batch_normalization/beta"]
    assert [tuple(v.shape) for v in bn.variables[4:]] == [(3,), (), (3,), ()]
    assert all(v in tf.global_variables() for v in bn.variables)   # on the ps, saved
    assert len(bn.updates) == 2 and tf.get_collection(tf.GraphKeys.UPDATE_OPS) == bn.updates
    with pytest.raises(ValueError, match=r"renorm_clipping \{'rmaxx': 1\} contains keys not in"):
        tf.layers.BatchNormalization(renorm=True, renorm_clipping={"rmaxx": 1})


def test_renorm_tf_case(sess):
    # normalization_test.testRenorm (TF r1.15: zero-initialized renorm averages debiased by
    # their weights; the moving averages fed the debiased renorm mean and stddev**2 - eps)
    shape, momentum, renorm_momentum = (4, 3), 0.99, 0.8
    gamma, beta, epsilon = 2., 3., 0.001
    xt = tf.placeholder(tf.float32, shape)
    training = tf.placeholder(tf.bool)
    bn = tf.layers.BatchNormalization(
        axis=1, gamma_initializer=tf.constant_initializer(gamma),
        beta_initializer=tf.constant_initializer(beta), epsilon=epsilon, momentum=momentum,
        renorm=True, renorm_clipping=RENORM, renorm_momentum=renorm_momentum)
    yt = bn.apply(xt, training=training)
    moving_mean, moving_variance = 0., 1.
    renorm_mean = renorm_stddev = renorm_weight = 0.
    sess.run(tf.global_variables_initializer())
    rng = np.random.default_rng(1)
    for _ in range(5):
        x = rng.random(shape).astype(np.float32)
        mean, stddev = x.mean(0), np.sqrt(x.var(0) + epsilon)
        adj_mean = renorm_mean + (1. - renorm_weight) * mean
        adj_stddev = renorm_stddev + (1. - renorm_weight) * stddev
        r = (stddev / adj_stddev).clip(RENORM["rmin"], RENORM["rmax"])
        d = ((mean - adj_mean) / adj_stddev).clip(-RENORM["dmax"], RENORM["dmax"])
        y_train = ((x - mean) / stddev * r + d) * gamma + beta
        renorm_mean += (mean - renorm_mean) * (1. - renorm_momentum)
        renorm_stddev += (stddev - renorm_stddev) * (1. - renorm_momentum)
        renorm_weight += (1. - renorm_weight) * (1. - renorm_momentum)
        moving_mean += (renorm_mean / renorm_weight - moving_mean) * (1. - momentum)
        moving_variance += ((renorm_stddev / renorm_weight) ** 2 - epsilon -
                            moving_variance) * (1. - momentum)
        y_test = (x - moving_mean) / (moving_variance + epsilon) ** 0.5 * gamma + beta
        got_train = sess.run([yt] + bn.updates, {xt: x, training: True})[0]
        got_test = sess.run([yt] + bn.updates, {xt: x, training: False})[0]
        np.testing.assert_allclose(got_train, y_train, atol=1e-5)
        np.testing.assert_allclose(got_test, y_test, atol=1e-5)
    np.testing.assert_allclose(sess.run("batch_normalization/renorm_mean_weight"),
                               renorm_weight, rtol=1e-6)


def _bn_reference(x, gamma, beta, r, d, eps):
    m, v = x.mean(0), x.var(0)
    return ((x - m) / np.sqrt(v + eps) * r + d) * gamma + beta


def test_renorm_step_uses_corrections_before_its_updates_and_gradients(sess):
    # One sess.run of a train op made under control_dependencies(UPDATE_OPS): TF computes r
    # and d once, on the renorm averages before the run's updates, for the output and its
    # gradient alike. Gradients: float64 central differences with r and d held (they are
    # stop_gradient, as TF's).
    eps, lr = 1e-3, 0.5
    x = tf.placeholder(tf.float64, [5, 3])
    y = tf.layers.batch_normalization(x, training=True, renorm=True, renorm_momentum=0.5,
                                      epsilon=eps, renorm_clipping={"rmax": 1.3, "dmax": 0.4},
                                      gamma_initializer=tf.constant_initializer([1., 2., 3.]))
    gamma, beta = tf.trainable_variables()
    w = np.random.default_rng(5).normal(size=(5, 3))
    loss = tf.reduce_sum(y * w)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        step_loss = tf.identity(loss)
    train = tf.train.GradientDescentOptimizer(lr).minimize(step_loss, var_list=[gamma])
    rng = np.random.default_rng(6)
    sess.run(tf.global_variables_initializer())
    for _ in range(2):                     # non-zero renorm averages
        sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), {x: rng.normal(size=(5, 3))})
    rm, rmw, rs, rsw = sess.run([f"batch_normalization/{n}" for n in (
        "renorm_mean", "renorm_mean_weight", "renorm_stddev", "renorm_stddev_weight")])
    xv = rng.normal(size=(5, 3)) * 2 + 1
    mean, stddev = xv.mean(0), np.sqrt(xv.var(0) + eps)
    mixed_mean, mixed_stddev = rm + (1 - rmw) * mean, rs + (1 - rsw) * stddev
    r = np.minimum(stddev / mixed_stddev, 1.3)
    d = np.clip((mean - mixed_mean) / mixed_stddev, -0.4, 0.4)
    g0 = np.array([1., 2., 3.])
    gx, gg, gb = sess.run(tf.gradients(loss, [x, gamma, beta]), {x: xv})

    def f(xx, g):
        return np.sum(_bn_reference(xx, g, 0.0, r, d, eps) * w)
    h = 1e-6
    for got, arr, fn in ((gx, xv, lambda a: f(a, g0)), (gg, g0, lambda a: f(xv, a))):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += h
            m[i] -= h
            num[i] = (fn(p) - fn(m)) / (2 * h)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gb, w.sum(0), rtol=1e-10)
    sess.run(train, {x: xv})
    np.testing.assert_allclose(sess.run(gamma), g0 - lr * gg, rtol=1e-10)
    assert sess.run("batch_normalization/renorm_mean_weight") == pytest.approx(
        rmw + (1 - rmw) * 0.5)


def test_ghost_bn_2dims_tf_case(sess):
    # normalization_test.testGhostBN2Dims: sub-batch j holds rows j, j + 2, j + 4 (TF's
    # reshape to [virtual_batch_size, -1, ...]); the moving averages get the mean of the
    # sub-batches' moments; the variables are [1, 1, 2]
    shape, vbs, beta, gamma, momentum, epsilon = [6, 2], 3, 2., 3., 0.8, 1e-3
    moving_means = np.zeros([1, 1, 2], np.float32)
    moving_vars = np.ones([1, 1, 2], np.float32)
    inp = tf.placeholder(tf.float32, shape)
    is_training = tf.placeholder(tf.bool)
    bn = tf.layers.BatchNormalization(
        momentum=momentum, epsilon=epsilon, beta_initializer=tf.constant_initializer(beta),
        gamma_initializer=tf.constant_initializer(gamma), virtual_batch_size=vbs)
    out = bn.apply(inp, training=is_training)
    assert [tuple(v.shape) for v in bn.variables] == [(1, 1, 2)] * 4
    assert out.shape.as_list() == shape
    ghost_shape = [vbs, shape[0] // vbs, shape[1]]
    sess.run(tf.global_variables_initializer())
    rng = np.random.default_rng(2)
    for _ in range(5):
        x = rng.random(shape).astype(np.float32)
        sub = np.reshape(x, ghost_shape)
        means = np.mean(sub, axis=0, keepdims=True)
        variances = np.var(sub, axis=0, keepdims=True)
        moving_means = moving_means * momentum + np.mean(means, 1, keepdims=True) * (
            1. - momentum)
        moving_vars = moving_vars * momentum + np.mean(variances, 1, keepdims=True) * (
            1. - momentum)
        y_train = np.reshape((sub - means) / (variances + epsilon) ** 0.5 * gamma + beta,
                             shape)
        y_test = np.reshape((sub - moving_means) / (moving_vars + epsilon) ** 0.5 * gamma +
                            beta, shape)
        got_train = sess.run([out] + bn.updates, {inp: x, is_training: True})[0]
        got_test = sess.run(out, {inp: x, is_training: False})
        np.testing.assert_allclose(got_train, y_train, atol=1e-5)
        np.testing.assert_allclose(got_test, y_test, atol=1e-5)


def test_ghost_bn_4dims_axis3_tf_case(sess):
    # normalization_test.testGhostBN4DimsAxis3 ([6, 10, 10, 3], virtual batches of 2; the
    # variables [1, 1, 1, 1, 3]); the default fused=None does not Bessel-correct here
    shape, vbs, momentum, epsilon = [6, 10, 10, 3], 2, 0.8, 1e-3
    inp = tf.placeholder(tf.float32, shape)
    bn = tf.layers.BatchNormalization(axis=3, momentum=momentum, epsilon=epsilon,
                                      beta_initializer=tf.constant_initializer(2.),
                                      gamma_initializer=tf.constant_initializer(3.),
                                      virtual_batch_size=vbs)
    out = bn.apply(inp, training=True)
    assert tuple(bn.moving_mean.shape) == (1, 1, 1, 1, 3)
    sess.run(tf.global_variables_initializer())
    x = np.random.default_rng(3).random(shape).astype(np.float32)
    sub = np.reshape(x, [vbs, shape[0] // vbs] + shape[1:])
    means = np.mean(sub, axis=(0, 2, 3), keepdims=True)
    variances = np.var(sub, axis=(0, 2, 3), keepdims=True)
    y_train = np.reshape((sub - means) / (variances + epsilon) ** 0.5 * 3. + 2., shape)
    np.testing.assert_allclose(sess.run([out] + bn.updates, {inp: x})[0], y_train,
                               atol=1e-4)
    np.testing.assert_allclose(sess.run(bn.moving_variance),
                               0.8 + np.mean(variances, 1, keepdims=True) * 0.2, rtol=1e-5)


def test_ghost_bn_full_batch_unknown_batch_and_errors(sess):
    # normalization_test: testGhostBNVirtualBatchFull (one virtual batch: plain BN),
    # testGhostBNInputOutputShapesMatch, testGhostBNUnknownBatchSize,
    # testGhostBNNegativeVirtualBatch
    x = np.random.default_rng(4).random([6, 5, 4, 3]).astype(np.float32)
    inp = tf.constant(x)
    out1 = tf.layers.batch_normalization(inp, training=True)
    out2 = tf.layers.batch_normalization(inp, training=True, virtual_batch_size=6)
    assert out1.shape.as_list() == out2.shape.as_list() == [6, 5, 4, 3]
    ph = tf.placeholder(tf.float32, [None, 5, 4])
    out3 = tf.layers.batch_normalization(ph, virtual_batch_size=2, training=True)
    assert tf.layers.batch_normalization(tf.ones([6, 4, 3]), virtual_batch_size=3
                                         ).shape.as_list() == [6, 4, 3]
    sess.run(tf.global_variables_initializer())
    y1, y2 = sess.run([out1, out2])
    np.testing.assert_allclose(y1, y2, atol=1e-5)
    assert sess.run(out3, {ph: np.ones([10, 5, 4], np.float32)}).shape == (10, 5, 4)
    with pytest.raises(tf.errors.InvalidArgumentError):
        sess.run(out3, {ph: np.ones([7, 5, 4], np.float32)})      # 2 does not divide 7
    with pytest.raises(ValueError, match="virtual_batch_size must be a positive integer"):
        tf.layers.batch_normalization(inp, virtual_batch_size=-1)
    with pytest.raises(ValueError, match="axis cannot include 0"):
        tf.layers.batch_normalization(inp, axis=0, virtual_batch_size=2)
    with pytest.raises(ValueError, match="does not divide the batch size 6"):
        tf.layers.batch_normalization(inp, virtual_batch_size=4)


def test_ghost_bn_gradients_against_finite_differences(sess):
    # float64: the gradient through each virtual batch's own moments
    x = tf.placeholder(tf.float64, [6, 2])
    y = tf.layers.batch_normalization(x, training=True, virtual_batch_size=3,
                                      gamma_initializer=tf.constant_initializer([1.5, -2.]))
    gamma, beta = tf.trainable_variables()
    w = np.random.default_rng(7).normal(size=(6, 2))
    sess.run(tf.global_variables_initializer())
    xv = np.random.default_rng(8).normal(size=(6, 2))
    gx, gg = sess.run(tf.gradients(tf.reduce_sum(y * w), [x, gamma]), {x: xv})

    def f(xx, g):
        sub = xx.reshape(3, 2, 2)
        m, v = sub.mean(0, keepdims=True), sub.var(0, keepdims=True)
        return np.sum(((sub - m) / np.sqrt(v + 1e-3) * g).reshape(6, 2) * w)
    h = 1e-6
    g0 = np.array([1.5, -2.]).reshape(1, 1, 2)
    for got, arr, fn in ((gx, xv, lambda a: f(a, g0)), (gg, g0, lambda a: f(xv, a))):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += h
            m[i] -= h
            num[i] = (fn(p) - fn(m)) / (2 * h)
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7)
