"""End to end: a TF1 softmax model written only with psrt's TF1 graph ops (tf.reshape,
tf.cast, tf.equal, tf.argmax, tf.truncated_normal, tf.zeros, tf.reduce_mean, tf.log,
tf.clip_by_value, tf.one_hot) trains on two ps tasks in other processes over TCP
(tests/_cluster.py), as TF1's mnist_softmax.py, and its accuracy tensor rises."""

from __future__ import annotations

import numpy as np

import psrt as tf
from _cluster import fresh_graph, ps2, ps_tasks, softmax_problem, worker  # noqa: F401


def test_tf1_ops_model_trains_on_two_ps_tasks(ps2, worker):  # noqa: F811
    server = worker(ps2)
    images, labels = softmax_problem(seed=3)[:2]
    d = images.shape[1]
    k = int(labels.max()) + 1 if labels.ndim == 1 else labels.shape[1]
    with tf.device(tf.train.replica_device_setter(cluster=ps2.cluster(1))):
        x = tf.placeholder(tf.float32, [None, d], name="x")
        y_ = tf.placeholder(tf.int64, [None], name="y_")
        xr = tf.reshape(x, [-1, d])
        W = tf.Variable(tf.truncated_normal([d, k], stddev=0.1, seed=1), name="W")
        b = tf.Variable(tf.zeros([k]), name="b")
        y = tf.nn.softmax(tf.matmul(xr, W) + b)
        onehot = tf.one_hot(y_, k)
        cross_entropy = tf.reduce_mean(
            -tf.reduce_sum(onehot * tf.log(tf.clip_by_value(y, 1e-10, 1.0)), axis=1))
        correct = tf.equal(tf.argmax(y, 1), y_)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        gs = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy,
                                                                   global_step=gs)
    assert {W.device, b.device} == {"/job:ps/task:0", "/job:ps/task:1"}
    assert accuracy.shape == () and accuracy.dtype == np.float32
    ids = labels if labels.ndim == 1 else labels.argmax(1)
    feed = {x: images.astype(np.float32), y_: ids.astype(np.int64)}
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        first_loss, first_acc = sess.run([cross_entropy, accuracy], feed)
        for _ in range(60):
            sess.run(train_op, feed)
        loss, acc = sess.run([cross_entropy, accuracy], feed)
        assert sess.run(gs) == 60
    assert loss < first_loss / 2 and acc > max(first_acc, 0.8)
