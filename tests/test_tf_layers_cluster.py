"""End to end across processes: a TF1 model written with tf.layers (dense,
batch_normalization, dropout), tf.losses and tf.metrics trains with a
MonitoredTrainingSession on a worker of a cluster whose ps task is another process
(tests/_cluster.py). The layers' variables, batch normalization's moving averages included,
live on the ps task (replica_device_setter), the UPDATE_OPS run before each step and move the
moving averages there, and the metrics' accumulators are local: held by the worker's own
server, not the ps."""

from __future__ import annotations

import numpy as np

import psrt as tf
from _cluster import fresh_graph, ps1, ps_tasks, softmax_problem, worker  # noqa: F401


def _names_held_by(server):
    """The variable names a server of this process holds, over a raw client."""
    from psrt import _core

    client = _core.Client("worker", 98)
    try:
        client.connect(0, server.target.replace("psrt://", ""), 10.0)
        return {v["name"] for v in client.list_variables(0)}
    finally:
        client.close()


def test_layers_losses_metrics_model_on_a_ps_task(ps1, worker):  # noqa: F811
    server = worker(ps1)
    images, onehot = softmax_problem(seed=5, n=128)
    labels = onehot.argmax(1).astype(np.int64)
    d, k = images.shape[1], onehot.shape[1]
    with tf.device(tf.train.replica_device_setter(cluster=ps1.cluster(1))):
        x = tf.placeholder(tf.float32, [None, d], name="x")
        y_ = tf.placeholder(tf.int64, [None], name="y_")
        training = tf.placeholder_with_default(True, [], name="training")
        h = tf.layers.dense(x, 16, activation=tf.nn.relu,
                            kernel_regularizer=tf.contrib.layers.l2_regularizer(1e-4))
        h = tf.layers.batch_normalization(h, training=training, momentum=0.9)
        h = tf.layers.dropout(h, 0.1, training=training, seed=2)
        logits = tf.layers.dense(h, k)
        tf.losses.sparse_softmax_cross_entropy(y_, logits)
        loss = tf.losses.get_total_loss()
        acc, acc_update = tf.metrics.accuracy(y_, tf.argmax(logits, 1))
        gs = tf.train.get_or_create_global_step()
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = tf.train.AdamOptimizer(0.02).minimize(loss, global_step=gs)
    model_vars = ["dense/kernel", "dense/bias", "batch_normalization/gamma",
                  "batch_normalization/beta", "batch_normalization/moving_mean",
                  "batch_normalization/moving_variance", "dense_1/kernel", "dense_1/bias"]
    assert [v.name for v in tf.global_variables()][:8] == model_vars
    assert {v.device for v in tf.global_variables()} == {"/job:ps/task:0"}
    assert [v.name for v in tf.local_variables()] == ["accuracy/total", "accuracy/count"]
    assert all(not v.device.startswith("/job:ps") for v in tf.local_variables())
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2
    feed = {x: images, y_: labels}
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
        first = sess.run(loss, feed)
        mm0 = sess.run("batch_normalization/moving_mean")
        assert np.all(mm0 == 0)
        for _ in range(80):
            sess.run(train_op, feed)
        mm, mv = sess.run(["batch_normalization/moving_mean",
                           "batch_normalization/moving_variance"])
        eval_feed = {x: images, y_: labels, training: False}
        final = sess.run(loss, eval_feed)
        for k0 in range(0, 128, 32):
            sess.run(acc_update, {x: images[k0:k0 + 32], y_: labels[k0:k0 + 32],
                                  training: False})
        accuracy = sess.run(acc)
        count = sess.run("accuracy/count")
        assert sess.run(gs) == 80
    held = ps1.names_on(0)
    assert set(model_vars) <= held                 # the layers' variables live on the ps
    assert not {"accuracy/total", "accuracy/count"} & held   # the metric's are the worker's
    assert {"accuracy/total", "accuracy/count"} <= _names_held_by(server)
    assert count == 128.0
    # The update ops ran before each step: the moving mean approaches the batch mean of the
    # first layer's (trained) activations, and the moving variance left its initial ones.
    assert np.abs(mm).sum() > 0 and not np.allclose(mv, 1.0)
    assert final < first / 2 and accuracy > 0.85


def test_each_worker_keeps_its_own_metric_accumulators(ps1, worker):  # noqa: F811
    # replica_device_setter's default worker_device is "/job:worker" (no task): a local
    # variable there is the session's own task's, so two workers do not share counts.
    s0 = worker(ps1, task_index=0, workers=2)
    s1 = worker(ps1, task_index=1, workers=2)
    with tf.device(tf.train.replica_device_setter(cluster=ps1.cluster(2))):
        values = tf.placeholder(tf.float32, [None])
        mean, update = tf.metrics.mean(values)
        w = tf.get_variable("w", [1])
    assert mean is not None and tf.local_variables()[0].device == "/job:worker"
    with tf.Session(s0.target) as a, tf.Session(s1.target) as b:
        a.run(tf.global_variables_initializer())
        a.run(tf.local_variables_initializer())
        b.run(tf.local_variables_initializer())
        a.run(update, {values: [1.0, 3.0]})
        b.run(update, {values: [10.0]})
        assert (a.run(mean), b.run(mean)) == (2.0, 10.0)
        assert a.run(w).shape == b.run(w).shape == (1,)
    assert {"mean/total", "mean/count"} <= _names_held_by(s0)
    assert {"mean/total", "mean/count"} <= _names_held_by(s1)
    assert not {"mean/total", "mean/count"} & ps1.names_on(0)
