"""The worker role of tests/test_queue_input_cluster.py: a TF1 queue-input trainer as a real
process. Run as ``python tests/_queue_task.py queue_worker CONFIG_JSON`` (the ps tasks are
tests/_mts_cluster.py's ``ps`` role).

Config: cluster, task_index, files (this worker's TFRecord files), num_epochs, batch_size.
Events (tests/_mts_cluster.py's ``EVENT`` lines): ``done`` with the examples and steps this
worker ran and the global step it saw last; ``error`` for an OpError (exit status 1).
"""

from __future__ import annotations

import json
import sys

from _mts_cluster import _exit_with_parent, emit


def queue_worker_main(cfg: dict) -> None:
    import autograd.numpy as anp  # noqa: PLC0415

    import psrt as tf  # noqa: PLC0415

    index = int(cfg["task_index"])
    cluster = tf.train.ClusterSpec(cfg["cluster"])
    server = tf.train.Server(cluster, job_name="worker", task_index=index)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        filename_queue = tf.train.string_input_producer(
            cfg["files"], num_epochs=int(cfg["num_epochs"]), shuffle=True, seed=index)
        _, serialized = tf.TFRecordReader().read(filename_queue)
        features = tf.parse_single_example(serialized, {
            "x": tf.FixedLenFeature([3], tf.float32),
            "y": tf.FixedLenFeature([1], tf.float32),
        })
        batch = tf.train.shuffle_batch(features, int(cfg["batch_size"]), capacity=50,
                                       min_after_dequeue=10, seed=index,
                                       allow_smaller_final_batch=True)
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
        gs = tf.train.get_or_create_global_step()

    @tf.function
    def mse(w, b, x, y):
        return anp.mean((x @ w + b - y) ** 2)
    loss = mse(w, b, batch["x"], batch["y"])
    train_op = tf.train.AdagradOptimizer(0.5).minimize(loss, global_step=gs)
    examples = steps = 0
    step = None
    try:
        with tf.train.MonitoredTrainingSession(master=server.target,
                                               is_chief=index == 0) as sess:
            while not sess.should_stop():
                _, step, n = sess.run([train_op, gs, tf.shape(batch["y"])])
                examples += int(n[0])
                steps += 1
    except tf.errors.OpError as e:
        emit("error", type=type(e).__name__, message=e.message)
        server.stop()
        sys.exit(1)
    # TF's MonitoredSession: the OutOfRangeError of the last epoch left the with block
    # quietly, and the closed session reports should_stop().
    emit("done", examples=examples, steps=steps, last=step, should_stop=sess.should_stop())
    server.stop()


if __name__ == "__main__":
    _exit_with_parent()
    _role, _config = sys.argv[1], json.loads(sys.argv[2])
    {"queue_worker": queue_worker_main}[_role](_config)

