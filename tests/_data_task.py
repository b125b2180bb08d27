"""Helpers of tests/test_data.py's job: a worker fed by tf.data as a real subprocess.

Run as the child process (the ps tasks are tests/_mts_cluster.py's ``ps`` role)::

    python tests/_data_task.py data_worker CONFIG_JSON

The worker reads TFRecord files of Examples (``x``: D floats, ``y``: a float target, ``id``:
the record's number) through ``TFRecordDataset(files).map(parse).shard(num_workers,
task_index).batch(batch).repeat(epochs)`` and trains a least-squares model under
``replica_device_setter`` over the ps tasks with MonitoredTrainingSession until the data
ends (OutOfRangeError), then reports (an ``EVENT`` line, as tests/_mts_cluster.py's
children): its runs, the ids it trained on, its batch sizes, the element dtype, the last
global step it saw and ``should_stop()`` after the loop.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(__file__)
D = 5


def write_records(directory: str, n: int, files: int = 2) -> list[str]:
    """``n`` Examples (ids 0..n-1) spread over ``files`` TFRecord files; their paths."""
    import psrt as tf  # noqa: PLC0415

    rng = np.random.default_rng(0)
    paths = [os.path.join(directory, f"train-{k}.tfrecord") for k in range(files)]
    writers = [tf.io.TFRecordWriter(p) for p in paths]
    for i in range(n):
        x = rng.normal(size=D).astype(np.float32)
        ex = tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
            "y": tf.train.Feature(float_list=tf.train.FloatList(value=[float(x.sum())])),
            "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        }))
        writers[i * files // n].write(ex.SerializeToString())
    for w in writers:
        w.close()
    return paths


def data_worker_main(cfg: dict[str, Any]) -> None:
    import psrt as tf  # noqa: PLC0415
    from _mts_cluster import emit  # noqa: PLC0415

    index = int(cfg["task_index"])
    cluster = tf.train.ClusterSpec(cfg["cluster"])
    num_workers = cluster.num_tasks("worker")
    server = tf.train.Server(cluster, job_name="worker", task_index=index)
    features = {"x": tf.io.FixedLenFeature([D], tf.float32),
                "y": tf.io.FixedLenFeature([1], tf.float32),
                "id": tf.io.FixedLenFeature([], tf.int64)}
    dataset = (tf.data.TFRecordDataset(cfg["files"])
               .map(lambda r: tf.io.parse_single_example(r, features))
               .shard(num_workers, index)
               .batch(int(cfg["batch"]))
               .repeat(int(cfg["epochs"])))
    batch = dataset.make_one_shot_iterator().get_next()
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        gs = tf.train.get_or_create_global_step()
        W = tf.get_variable("W", [D, 1], tf.float32, tf.zeros_initializer())
        b = tf.get_variable("b", [1], tf.float32, tf.zeros_initializer())
    err = tf.matmul(batch["x"], W) + b - batch["y"]
    loss = tf.reduce_mean(err * err)
    train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=gs)
    ids: list[int] = []
    sizes: list[int] = []
    runs, last, dtype = 0, None, None
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0) as sess:
        while not sess.should_stop():
            _, got, step = sess.run([train, batch, gs])
            runs += 1
            last = int(step)
            ids.extend(int(i) for i in got["id"])
            sizes.append(len(got["id"]))
            dtype = str(got["x"].dtype)
    emit("done", runs=runs, ids=ids, batch_sizes=sizes, dtype=dtype, last_step=last,
         should_stop=bool(sess.should_stop()))
    server.stop()


if __name__ == "__main__":
    import faulthandler  # noqa: PLC0415
    import json  # noqa: PLC0415

    from _mts_cluster import _exit_with_parent  # noqa: PLC0415

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks to stderr, for a hang
    _exit_with_parent()
    _role, _config = sys.argv[1], json.loads(sys.argv[2])
    {"data_worker": data_worker_main}[_role](_config)
