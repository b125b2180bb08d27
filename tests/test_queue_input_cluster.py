"""An end-to-end TF1 queue-input job across real processes: 2 ps + 2 workers, each worker
training from string_input_producer(num_epochs=N) + TFRecordReader + parse_single_example +
shuffle_batch over TFRecord files this test writes, until its MonitoredTrainingSession's
should_stop() after the last epoch (tensorflow/python/training/input.py,
monitored_session.py). The workers are tests/_queue_task.py, the ps tasks
tests/_mts_cluster.py's; all are reaped by PID."""

from __future__ import annotations

import os

import numpy as np

import psrt as tf
from _mts_cluster import cluster_of, tasks  # noqa: F401 - the fixture

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.join(HERE, "_queue_task.py")


def _write(path, rows):
    with tf.python_io.TFRecordWriter(path) as w:
        for x, y in rows:
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x.tolist())),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=[float(y)])),
            })).SerializeToString())


def test_two_workers_train_from_queues_until_the_epochs_end(tasks, tmp_path):  # noqa: F811
    rng = np.random.default_rng(0)
    true_w = np.array([1.0, -2.0, 0.5])
    files, counts = [], []
    for i in range(4):
        n = 30 + 5 * i
        x = rng.normal(size=(n, 3))
        rows = list(zip(x, x @ true_w + 0.25))
        path = str(tmp_path / f"part-{i}.tfrecord")
        _write(path, rows)
        files.append(path)
        counts.append(n)
    num_epochs, batch_size = 3, 8
    ps = tasks.ps(2, workers=2, exit_when_workers_done=[True, True])
    cluster = cluster_of(ps, 2)
    workers = [tasks.start(f"worker{i}", "queue_worker",
                           {"cluster": cluster, "task_index": i, "files": files[i::2],
                            "num_epochs": num_epochs, "batch_size": batch_size},
                           script=TASK) for i in range(2)]
    done = [w.expect("done", timeout=120) for w in workers]
    for w in workers:
        w.expect_exit(0, timeout=60)
    for p in ps:
        p.expect_exit(0, timeout=60)
    for i, d in enumerate(done):
        mine = sum(counts[i::2])
        # Every example of the worker's files once per epoch, none more.
        assert d["examples"] == num_epochs * mine, d
        assert d["steps"] >= -(-num_epochs * mine // batch_size), d
    # Both workers pushed to the same global step on the ps.
    assert max(d["last"] for d in done) >= max(d["steps"] for d in done)
    assert max(d["last"] for d in done) <= sum(d["steps"] for d in done)
