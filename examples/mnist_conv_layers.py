"""A TF1 convolutional network for MNIST, trained with parameter servers, on psrt.

The model code is what a TF1 user writes with ``tf.layers`` (TensorFlow's "Build a
Convolutional Neural Network using Estimators" tutorial's ``cnn_model_fn`` and the Kubeflow
TFJob MNIST examples, with narrower layers so it trains in seconds on a laptop's CPU): two
``tf.layers.conv2d`` + ``tf.layers.max_pooling2d`` blocks, ``tf.layers.dense`` with
``tf.layers.dropout(..., training=is_training)``, the logits, ``tf.losses.
sparse_softmax_cross_entropy``, Adam, and ``tf.metrics.accuracy`` for the test accuracy;
the variables are placed on the ps tasks by ``tf.train.replica_device_setter``, and each
worker trains asynchronously in a ``MonitoredTrainingSession`` until the ``StopAtStepHook``'s
global step. Only the import differs from TensorFlow: ``import psrt as tf``.

Data: the real MNIST test-set digits (``t10k-images-idx3-ubyte.gz``,
``t10k-labels-idx1-ubyte.gz``, from ``--data_dir``; default ``$PSRT_DATA_DIR/mnist``, else
``shared/data/mnist`` in a directory above the repository): the first 8,000 train, the last 2,000 are
held out, and the chief prints their accuracy when training ends (``Test accuracy: 0.98..``).

Start a local cluster of 2 ps + 2 workers on free ports::

    OPENBLAS_NUM_THREADS=1 psrt-launch --ps 2 --workers 2 examples/mnist_conv_layers.py

(one BLAS thread per process: four processes share the machine's cores), or one process per
task, as in TF1::

    python mnist_conv_layers.py --ps_hosts=h0:2222,h1:2222 \\
        --worker_hosts=h2:2222,h3:2222 --job_name=worker --task_index=0
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import psrt as tf
from psrt.datasets import mnist as mnist_io

IMAGES = "t10k-images-idx3-ubyte.gz"
LABELS = "t10k-labels-idx1-ubyte.gz"
NUM_TRAIN = 8000


def default_data_dir() -> str:
    """``$PSRT_DATA_DIR/mnist`` when set, else the first ``shared/data/mnist`` holding the
    two files in a directory above this script (``../shared/data/mnist`` beside the repo)."""
    if os.environ.get("PSRT_DATA_DIR"):
        return os.path.join(os.environ["PSRT_DATA_DIR"], "mnist")
    for parent in Path(__file__).resolve().parents[1:]:
        candidate = parent / "shared" / "data" / "mnist"
        if (candidate / IMAGES).is_file() and (candidate / LABELS).is_file():
            return str(candidate)
    return str(Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps_hosts", default=None, help="Comma-separated host:port pairs")
    parser.add_argument("--worker_hosts", default=None,
                        help="Comma-separated host:port pairs")
    parser.add_argument("--job_name", default=None, choices=["ps", "worker"],
                        help="'ps' or 'worker' (default: from TF_CONFIG)")
    parser.add_argument("--task_index", type=int, default=None,
                        help="Index of the task within its job")
    parser.add_argument("--data_dir", default=default_data_dir(),
                        help=f"Directory holding {IMAGES} and {LABELS}")
    parser.add_argument("--train_steps", type=int, default=600,
                        help="Global training steps (all workers together)")
    parser.add_argument("--batch_size", type=int, default=100, help="Training batch size")
    parser.add_argument("--learning_rate", type=float, default=1e-3, help="Adam's rate")
    parser.add_argument("--seed", type=int, default=0,
                        help="Graph seed; worker i shuffles with seed + i")
    args = parser.parse_args(argv)
    if args.train_steps < 1 or args.batch_size < 1:
        parser.error("--train_steps and --batch_size must be >= 1")
    if args.job_name is None:
        role = tf.train.task_role_from_tf_config().chief_as_first_worker()
        if not role.cluster:
            parser.error("no --job_name and no TF_CONFIG: pass --ps_hosts, --worker_hosts, "
                         "--job_name and --task_index, or start the job with psrt-launch")
        args.cluster, args.job_name, args.task_index = (role.cluster, role.job_name,
                                                        role.task_index)
    else:
        if args.ps_hosts is None or args.worker_hosts is None or args.task_index is None:
            parser.error("--job_name needs --ps_hosts, --worker_hosts and --task_index")
        args.cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","),
                                             "worker": args.worker_hosts.split(",")})
    return args


def load_mnist(data_dir):
    """``(train_images, train_labels, test_images, test_labels)``: float32 ``[n, 28, 28, 1]``
    in ``[0, 1]`` and int64 ``[n]``; the first 8,000 digits train, the last 2,000 test."""
    images = mnist_io.extract_images(os.path.join(data_dir, IMAGES))
    labels = mnist_io.extract_labels(os.path.join(data_dir, LABELS))
    images = images.reshape(-1, 28, 28, 1).astype(np.float32) / 255.0
    labels = labels.astype(np.int64)
    return images[:NUM_TRAIN], labels[:NUM_TRAIN], images[NUM_TRAIN:], labels[NUM_TRAIN:]


def cnn_model(images, is_training):
    """The logits ``[batch, 10]`` of the conv net on ``images`` ``[batch, 28, 28, 1]``."""
    conv1 = tf.layers.conv2d(images, filters=16, kernel_size=[5, 5], padding="same",
                             activation=tf.nn.relu)
    pool1 = tf.layers.max_pooling2d(conv1, pool_size=[2, 2], strides=2)
    conv2 = tf.layers.conv2d(pool1, filters=32, kernel_size=[5, 5], padding="same",
                             activation=tf.nn.relu)
    pool2 = tf.layers.max_pooling2d(conv2, pool_size=[2, 2], strides=2)
    pool2_flat = tf.reshape(pool2, [-1, 7 * 7 * 32])
    dense = tf.layers.dense(pool2_flat, units=128, activation=tf.nn.relu)
    dropout = tf.layers.dropout(dense, rate=0.4, training=is_training)
    return tf.layers.dense(dropout, units=10)


def main(argv=None):
    args = parse_args(argv)
    cluster = args.cluster
    server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return 0

    is_chief = args.task_index == 0
    train_x, train_y, test_x, test_y = load_mnist(args.data_dir)
    tf.set_random_seed(args.seed)

    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, 28, 28, 1], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        is_training = tf.placeholder_with_default(False, shape=[], name="is_training")
        logits = cnn_model(images, is_training)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)
        accuracy, accuracy_update = tf.metrics.accuracy(
            labels=labels, predictions=tf.argmax(logits, axis=1))

    # The chief measures the held-out accuracy when its session ends.
    final_accuracy = tf.train.FinalOpsHook(
        accuracy_update, final_ops_feed_dict={images: test_x, labels: test_y})
    hooks = [tf.train.StopAtStepHook(last_step=args.train_steps)]

    rng = np.random.RandomState(args.seed + args.task_index)
    local_step, step, start = 0, 0, None
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           hooks=hooks,
                                           chief_only_hooks=[final_accuracy]) as sess:
        while not sess.should_stop():
            idx = rng.randint(0, len(train_x), args.batch_size)
            _, loss_value, step = sess.run(
                [train_op, loss, global_step],
                feed_dict={images: train_x[idx], labels: train_y[idx], is_training: True})
            local_step += 1
            if start is None:
                start = time.time()
            if local_step % 100 == 0:
                print("Worker %d: step %d (global step %d), loss %.4f"
                      % (args.task_index, local_step, step, loss_value), flush=True)
    elapsed = time.time() - (start or time.time())
    print("Worker %d: %d local steps, last global step %d, %.1f local steps/sec"
          % (args.task_index, local_step, step,
             (local_step - 1) / elapsed if elapsed > 0 else 0.0), flush=True)
    if is_chief:
        print("Test accuracy: %.4f" % final_accuracy.final_ops_values, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
