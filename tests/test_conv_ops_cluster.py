"""End to end: a TF1 convolutional model in the style of TF's "Deep MNIST for experts"
tutorial (conv2d 5x5 SAME -> relu -> max_pool 2x2 -> conv2d -> relu -> max_pool -> dense),
written only with psrt.nn's conv and pooling ops, trains on two ps tasks in other processes
over TCP (tests/_cluster.py): its variables live on the ps tasks, the gradients of conv2d
and max_pool flow through the training step's push, and its accuracy rises."""

from __future__ import annotations

import numpy as np

import psrt as tf
from _cluster import fresh_graph, ps2, ps_tasks, worker  # noqa: F401


def _images(seed: int, n: int = 96) -> tuple[np.ndarray, np.ndarray]:
    """8x8 one-channel images of a bright 3x3 square on noise; the class is the quadrant
    it sits in (a task a conv + pool model learns and a linear model on pixels finds hard
    at this noise level)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    images = rng.normal(0, 0.3, (n, 8, 8, 1)).astype(np.float32)
    for i, c in enumerate(labels):
        r0 = (0 if c < 2 else 4) + rng.integers(0, 2)
        c0 = (0 if c % 2 == 0 else 4) + rng.integers(0, 2)
        images[i, r0:r0 + 3, c0:c0 + 3, 0] += 1.0
    return images, labels.astype(np.int64)


def test_deep_mnist_style_cnn_trains_on_two_ps_tasks(ps2, worker):  # noqa: F811
    server = worker(ps2)
    images, labels = _images(seed=11)

    def weight(shape, name):
        return tf.Variable(tf.truncated_normal(shape, stddev=0.1, seed=len(name)), name=name)

    with tf.device(tf.train.replica_device_setter(cluster=ps2.cluster(1))):
        x = tf.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        y_ = tf.placeholder(tf.int64, [None], name="y_")
        W1, b1 = weight([3, 3, 1, 8], "W_conv1"), tf.Variable(tf.zeros([8]) + 0.1, name="b1")
        h1 = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(x, W1, strides=[1, 1, 1, 1],
                                                    padding="SAME") + b1),
                            ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
        W2, b2 = weight([3, 3, 8, 8], "W_conv2"), tf.Variable(tf.zeros([8]) + 0.1, name="b2")
        h2 = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(h1, W2, strides=[1, 1, 1, 1],
                                                    padding="SAME") + b2),
                            ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
        assert h2.shape.as_list() == [None, 2, 2, 8]
        W3, b3 = weight([2 * 2 * 8, 4], "W_fc"), tf.Variable(tf.zeros([4]), name="b_fc")
        logits = tf.matmul(tf.reshape(h2, [-1, 2 * 2 * 8]), W3) + b3
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_,
                                                                             logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y_), tf.float32))
        gs = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=gs)
    assert {v.device for v in (W1, b1, W2, b2, W3, b3)} == {"/job:ps/task:0", "/job:ps/task:1"}
    feed = {x: images, y_: labels}
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        first_loss, first_acc = sess.run([loss, accuracy], feed)
        w1_before = sess.run(W1)
        for _ in range(80):
            sess.run(train_op, feed)
        final_loss, acc = sess.run([loss, accuracy], feed)
        assert sess.run(gs) == 80
        assert np.abs(sess.run(W1) - w1_before).max() > 1e-3  # conv2d's filter gradient
    assert final_loss < first_loss / 2, (first_loss, final_loss)
    assert acc > max(first_acc, 0.9), (first_acc, acc)
