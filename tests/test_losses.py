"""tf.losses (psrt/ops/losses_impl.py): values against TF r1.15's own kernel tests
(tensorflow/python/kernel_tests/losses_test.py: AbsoluteDifferenceLossTest,
SoftmaxCrossEntropyLossTest, SparseSoftmaxCrossEntropyLossTest, SigmoidCrossEntropyLossTest,
LogLossTest, MeanSquaredErrorTest, ComputeWeightedLossTest), the reductions of
losses_impl.py's Reduction, the LOSSES collection and get_total_loss, and gradients against
central finite differences.

The losses compute in float32 (TF casts losses and weights to float32 in
compute_weighted_loss), so the finite differences use eps=1e-3 on float32 values and a
float32 tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf
from psrt import losses


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


PRED = np.array([4, 8, 12, 8, 1, 3], np.float32).reshape(2, 3)
LAB = np.array([1, 9, 2, -5, -2, 6], np.float32).reshape(2, 3)
LOGITS = [[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0]]
WRONG = [[0, 0, 1], [1, 0, 0], [0, 1, 0]]


# AbsoluteDifferenceLossTest
@pytest.mark.parametrize("weights,expected", [
    (None, 5.5), (2.3, 5.5 * 2.3), ("t2.3", 5.5 * 2.3),
    (np.array([[1.2], [0.0]], np.float32), 5.6),
    (np.array([3, 6, 5, 0, 4, 2], np.float32).reshape(2, 3), 16.6),
    (np.array([0, 0, 0, 0, 0, 2], np.float32).reshape(2, 3), 6.0),
    (np.zeros((2, 3), np.float32), 0.0)])
def test_absolute_difference_tf_values(sess, weights, expected):
    args = {} if weights is None else {"weights": tf.constant(2.3) if weights == "t2.3"
                                       else weights} if not isinstance(weights, np.ndarray) \
        else {"weights": tf.constant(weights)}
    loss = losses.absolute_difference(tf.constant(LAB), tf.constant(PRED), **args)
    assert loss.dtype == np.float32 and loss.shape == ()
    assert sess.run(loss) == pytest.approx(expected, abs=1e-3)
    assert sess.run(losses.absolute_difference(tf.constant(PRED), tf.constant(PRED))) == 0.0


def test_none_weights_and_args_raise():
    tf.reset_default_graph()
    for fn in (losses.absolute_difference, losses.log_loss, losses.mean_squared_error,
               losses.softmax_cross_entropy, losses.sparse_softmax_cross_entropy):
        with pytest.raises(ValueError):
            fn(tf.constant(PRED), tf.constant(PRED), weights=None)
    with pytest.raises(ValueError, match="labels must not be None"):
        losses.mean_squared_error(None, tf.constant(PRED))
    with pytest.raises(ValueError, match="Invalid Reduction Key bogus"):
        losses.mean_squared_error(LAB, PRED, reduction="bogus")


# SoftmaxCrossEntropyLossTest
def test_softmax_cross_entropy_tf_values(sess):
    logits = tf.constant(LOGITS)
    right = tf.constant([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    wrong = tf.constant(WRONG)
    loss = losses.softmax_cross_entropy(wrong, logits)
    assert loss.op.name == "softmax_cross_entropy_loss/value"
    got = sess.run([losses.softmax_cross_entropy(right, logits), loss,
                    losses.softmax_cross_entropy(wrong, logits, 2.3),
                    losses.softmax_cross_entropy(wrong, logits, tf.constant((1.2, 3.4, 5.6))),
                    losses.softmax_cross_entropy(wrong, logits, tf.constant([0., 0., 0.])),
                    losses.softmax_cross_entropy(wrong, logits, tf.constant([1.2, 0., 0.]))])
    np.testing.assert_allclose(got, [0.0, 10.0, 23.0, (1.2 + 3.4 + 5.6) * 10.0 / 3.0, 0.0,
                                     12.0], atol=1e-3)
    with pytest.raises(ValueError, match="weights can not be broadcast"):
        losses.softmax_cross_entropy(right, logits,
                                     weights=tf.constant([[3, 4, 5], [2, 6, 0], [8, 0, 1]]))


def test_softmax_label_smoothing_tf_value(sess):
    loss = losses.softmax_cross_entropy(tf.constant([[1, 0, 0]]),
                                        tf.constant([[100.0, -100.0, -100.0]]),
                                        label_smoothing=0.1)
    assert sess.run(loss) == pytest.approx(400.0 * 0.1 / 3.0, abs=1e-3)


# SparseSoftmaxCrossEntropyLossTest
def test_sparse_softmax_cross_entropy_tf_values(sess):
    logits = tf.constant(LOGITS)
    col = tf.constant([[2], [0], [1]])
    loss = losses.sparse_softmax_cross_entropy(col, logits)
    assert loss.op.name == "sparse_softmax_cross_entropy_loss/value"
    w = tf.placeholder(tf.float32)
    lw = losses.sparse_softmax_cross_entropy(col, logits, w)
    got = sess.run([losses.sparse_softmax_cross_entropy(tf.constant([[0], [1], [2]],
                                                                    tf.int64), logits),
                    losses.sparse_softmax_cross_entropy(tf.constant([0, 1, 2]), logits),
                    loss, losses.sparse_softmax_cross_entropy(tf.constant([2, 0, 1]), logits),
                    losses.sparse_softmax_cross_entropy(col, logits, 2.3),
                    losses.sparse_softmax_cross_entropy(col, logits, tf.constant((2.3,))),
                    losses.sparse_softmax_cross_entropy(col, logits,
                                                        tf.constant([[1.2], [3.4], [5.6]])),
                    losses.sparse_softmax_cross_entropy(col, logits,
                                                        tf.constant([[1.2], [0.], [0.]])),
                    lw], {w: ((1.2,), (3.4,), (5.6,))})
    np.testing.assert_allclose(got, [0, 0, 10, 10, 23, 23, (1.2 + 3.4 + 5.6) * 10 / 3, 12,
                                     (1.2 + 3.4 + 5.6) * 10 / 3], atol=1e-3)


def test_sparse_softmax_placeholders_of_unknown_batch(sess):
    logits = tf.placeholder(tf.float32, shape=(None, 3))
    labels = tf.placeholder(tf.int32, shape=(None, 1))
    weights = tf.placeholder(tf.float32)
    loss = losses.sparse_softmax_cross_entropy(labels, logits, weights)
    got = sess.run(loss, {logits: LOGITS, labels: [[2], [0], [1]],
                          weights: ((1.2,), (3.4,), (5.6,))})
    assert got == pytest.approx((1.2 + 3.4 + 5.6) * 10.0 / 3.0, abs=1e-3)


def test_sparse_softmax_bad_weight_sizes_raise():
    tf.reset_default_graph()
    logits = tf.constant([[100.0, -100.0, -100.0], [-100.0, 100.0, -100.0],
                          [-100.0, -100.0, 100.0]])
    labels = tf.constant([[0], [1], [2]])
    with pytest.raises(ValueError):
        losses.sparse_softmax_cross_entropy(labels, logits,
                                            weights=tf.constant([1.2, 3.4, 5.6, 7.8]))
    with pytest.raises(ValueError):
        losses.sparse_softmax_cross_entropy(labels, logits,
                                            weights=tf.constant([[3, 4, 5], [2, 6, 0],
                                                                 [8, 0, 1]]))


# SigmoidCrossEntropyLossTest
def test_sigmoid_cross_entropy_tf_values(sess):
    logits = tf.constant([[100.0, -100.0, -100.0], [-100.0, 100.0, -100.0],
                          [-100.0, -100.0, 100.0]])
    loss = losses.sigmoid_cross_entropy(tf.constant(WRONG), logits)
    assert loss.op.name == "sigmoid_cross_entropy_loss/value"
    ph = tf.placeholder(tf.float32, shape=(None, 2))
    lab = tf.placeholder(tf.float32, shape=(None, 2))
    l1 = losses.sigmoid_cross_entropy(lab, ph, tf.ones_like(ph, dtype=tf.float32))
    got = sess.run([
        losses.sigmoid_cross_entropy(tf.constant([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), logits),
        loss,
        losses.sigmoid_cross_entropy(tf.constant(WRONG), logits,
                                     tf.constant([[3, 4, 5], [2, 6, 0], [8, 0, 1]])),
        losses.sigmoid_cross_entropy(tf.constant([[1, 0, 1]]),
                                     tf.constant([[100.0, -100.0, -100.0]]),
                                     label_smoothing=0.1),
        l1], {ph: np.ones((32, 2)), lab: np.ones((32, 2))})
    np.testing.assert_allclose(got, [0.0, 600.0 / 9.0, 1700.0 / 7.0, (100 + 5.0) / 3, 0.313],
                               atol=1e-3)


def test_sigmoid_label_smoothing_equals_softmax_two_label(sess):
    s = losses.sigmoid_cross_entropy(tf.constant([[1, 0, 1]]),
                                     tf.constant([[100.0, -100.0, -100.0]]),
                                     label_smoothing=0.1)
    m = losses.softmax_cross_entropy(tf.constant([[0, 1], [1, 0], [0, 1]]),
                                     tf.constant([[0.0, 100.0], [100.0, 0.0], [100.0, 0.0]]),
                                     label_smoothing=0.1)
    a, b = sess.run([s, m])
    assert a == pytest.approx(b, abs=1e-3)


# LogLossTest
def test_log_loss_tf_values(sess):
    pred = np.asarray([.9, .2, .2, .8, .4, .6]).reshape((2, 3))
    lab = np.asarray([1.0, 0.0, 1.0, 1.0, 0.0, 0.0]).reshape((2, 3))
    exp = lab * np.log(pred + 1e-7) + (1 - lab) * np.log(1 - pred + 1e-7)
    w = np.array([3, 6, 5, 0, 4, 2]).reshape((2, 3))
    ph = tf.placeholder(tf.float32, shape=[None, None])
    got = sess.run([losses.log_loss(tf.constant(lab), tf.constant(lab)),
                    losses.log_loss(tf.constant(lab), tf.constant(pred)),
                    losses.log_loss(tf.constant(lab), ph, tf.constant(2.3)),
                    losses.log_loss(tf.constant(lab), tf.constant(pred),
                                    tf.constant((1.2, 0), shape=(2, 1))),
                    losses.log_loss(tf.constant(lab), tf.constant(pred), tf.constant(w)),
                    losses.log_loss(tf.constant(lab), tf.constant(pred),
                                    tf.constant(np.array([0, 0, 0, 0, 0, 2]).reshape(2, 3)))],
                   {ph: pred})
    np.testing.assert_allclose(got, [
        0.0, -np.sum(exp) / 6.0, 2.3 * -np.sum(exp) / 6.0,
        -np.sum(exp * np.array([1.2, 1.2, 1.2, 0, 0, 0]).reshape(2, 3)) / 3.0,
        -np.sum(exp * w) / 5.0, -np.sum(exp * np.array([0, 0, 0, 0, 0, 2]).reshape(2, 3))],
        atol=1e-3)
    with pytest.raises(ValueError):
        losses.log_loss(tf.constant(lab), tf.constant(pred),
                        tf.constant(np.random.normal(size=(2, 4))))


# MeanSquaredErrorTest (TF's 49.5 for these predictions and labels) and huber_loss
def test_mean_squared_error_and_huber(sess):
    mse = losses.mean_squared_error(tf.constant(LAB), tf.constant(PRED))
    w = tf.constant([[1.2], [3.4]])
    mse_w = losses.mean_squared_error(tf.constant(LAB), tf.constant(PRED), w)
    x = PRED - LAB
    quad = np.minimum(np.abs(x), 2.0)
    ref = 0.5 * quad ** 2 + 2.0 * (np.abs(x) - quad)
    hub = losses.huber_loss(tf.constant(LAB), tf.constant(PRED), delta=2.0)
    got = sess.run([mse, mse_w, hub])
    np.testing.assert_allclose(got, [49.5, np.sum(x ** 2 * np.array([[1.2], [3.4]])) / 6,
                                     ref.mean()], rtol=1e-5)


# HingeLossTest / CosineDistanceLossTest (losses_impl.py's formulas)
def test_hinge_and_cosine_distance(sess):
    logits = np.array([[-0.7], [-1.4], [1.4], [0.6], [0.2]], np.float32)
    labels = np.array([[0.0], [0.0], [1.0], [1.0], [0.0]], np.float32)
    ref = np.maximum(0, 1 - (2 * labels - 1) * logits)
    hinge = losses.hinge_loss(tf.constant(labels), tf.constant(logits))
    assert hinge.op.name == "hinge_loss/value"
    pred = np.array([[1, 0, 0], [0, 0, -1], [1, 0, 0]], np.float32)
    lab = np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]], np.float32)
    cos = losses.cosine_distance(tf.constant(lab), tf.constant(pred), axis=1)
    cos_w = losses.cosine_distance(tf.constant(lab), tf.constant(pred), dim=1,
                                   weights=tf.constant([[1.0], [0.0], [2.0]]))
    got = sess.run([hinge, cos, cos_w])
    np.testing.assert_allclose(got, [ref.mean(), (0 + 2 + 1) / 3.0, (0 * 1 + 1 * 2) / 2.0],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="You must specify 'axis'."):
        losses.cosine_distance(lab, pred)


# The reductions of losses_impl.py's Reduction (ComputeWeightedLossTest's cases)
def test_reductions(sess):
    raw = np.array([[1., 2., 3.], [4., 5., 6.]], np.float32)
    w = np.array([[0.], [2.]], np.float32)
    R = losses.Reduction
    out = {r: losses.compute_weighted_loss(tf.constant(raw), tf.constant(w), reduction=r)
           for r in (R.NONE, R.SUM, R.MEAN, R.SUM_OVER_BATCH_SIZE, R.SUM_BY_NONZERO_WEIGHTS)}
    got = sess.run(out)
    weighted = raw * w
    np.testing.assert_allclose(got[R.NONE], weighted)
    assert got[R.SUM] == pytest.approx(30.0)
    assert got[R.MEAN] == pytest.approx(30.0 / 6.0)      # sum / sum of broadcast weights
    assert got[R.SUM_OVER_BATCH_SIZE] == pytest.approx(30.0 / 6)
    assert got[R.SUM_BY_NONZERO_WEIGHTS] == pytest.approx(30.0 / 3)
    assert R.SUM_OVER_NONZERO_WEIGHTS == R.SUM_BY_NONZERO_WEIGHTS == \
        "weighted_sum_by_nonzero_weights"
    zero = losses.compute_weighted_loss(tf.constant(raw), 0.0)
    assert sess.run(zero) == 0.0     # div_no_nan: 0 / 0 is 0


def test_losses_collection_and_total_loss(sess):
    a = losses.mean_squared_error(LAB, PRED)
    b = losses.absolute_difference(LAB, PRED, loss_collection=None)
    c = losses.log_loss([[1.0]], [[0.5]], loss_collection="mine")
    assert losses.get_losses() == [a] and b not in losses.get_losses()
    assert losses.get_losses(loss_collection="mine") == [c]
    assert sess.run(losses.get_regularization_loss()) == 0.0
    with tf.variable_scope("reg"):
        v = tf.get_variable("v", initializer=np.array([3.0, 4.0], np.float32),
                            regularizer=lambda t: 0.5 * tf.reduce_sum(t * t))
    (reg,) = losses.get_regularization_losses()
    assert reg in tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    sess.run(tf.global_variables_initializer())
    total = losses.get_total_loss()
    assert total.op.name == "total_loss"
    assert sess.run([losses.get_regularization_loss(), total, losses.get_total_loss(False)]) \
        == pytest.approx([12.5, 49.5 + 12.5, 49.5])
    assert v.name == "reg/v"


def _fd_check(sess, loss, x, xv, feed, eps=1e-3):
    (g,) = sess.run(tf.gradients(loss, [x]), {x: xv, **feed})
    num = np.zeros_like(xv)
    for i in np.ndindex(xv.shape):
        xp, xm = xv.copy(), xv.copy()
        xp[i] += eps
        xm[i] -= eps
        num[i] = (sess.run(loss, {x: xp, **feed}) - sess.run(loss, {x: xm, **feed})) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("kind", ["absolute", "mse", "huber", "log", "sigmoid", "softmax",
                                  "sparse", "mean", "hinge"])
def test_gradients_against_finite_differences(sess, kind):
    rng = np.random.default_rng(3)
    x = tf.placeholder(tf.float32, [None, 4])
    w = tf.placeholder(tf.float32, [None, 1])
    wv = np.array([[0.5], [0.0], [2.0]], np.float32)
    if kind == "log":
        xv = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32)
    else:
        xv = rng.normal(size=(3, 4)).astype(np.float32) * 2
    lab = (rng.uniform(size=(3, 4)) > 0.5).astype(np.float32)
    if kind == "huber":   # away from the kinks |x - labels| = delta and 0
        xv = lab + np.sign(xv) * (np.abs(xv) % 0.8 + 0.1) * np.where(rng.uniform(size=(3, 4))
                                                                     > 0.5, 1, 3)
    build = {"absolute": lambda: losses.absolute_difference(lab, x, w),
             "mse": lambda: losses.mean_squared_error(lab, x, w),
             "huber": lambda: losses.huber_loss(lab, x, w, delta=1.0),
             "log": lambda: losses.log_loss(lab, x, w),
             "sigmoid": lambda: losses.sigmoid_cross_entropy(lab, x, w, label_smoothing=0.2),
             "softmax": lambda: losses.softmax_cross_entropy(
                 np.eye(4, dtype=np.float32)[[0, 2, 3]], x, w[:, 0], label_smoothing=0.1),
             "sparse": lambda: losses.sparse_softmax_cross_entropy([0, 2, 3], x, w),
             "hinge": lambda: losses.hinge_loss(lab, x, w),
             "mean": lambda: losses.mean_squared_error(
                 lab, x, w, reduction=losses.Reduction.MEAN)}[kind]
    if kind == "absolute":
        xv = lab + np.where(np.abs(xv - lab) < 0.1, 0.5, xv - lab)
    if kind == "hinge":   # away from the kink 1 - y * x = 0
        s = 2 * lab - 1
        m = s * xv
        xv = np.where(np.abs(1 - m) < 0.1, s * (m + 0.3), xv).astype(np.float32)
    _fd_check(sess, build(), x, xv, {w: wv})
