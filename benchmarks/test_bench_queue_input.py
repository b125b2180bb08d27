"""Throughput of TF1's queue-based input on psrt: MNIST-sized TFRecord Examples (784 raw
bytes + an int64 label) through string_input_producer + TFRecordReader +
parse_single_example + decode_raw + shuffle_batch(batch 100), read by the training loop's
``sess.run``, against a plain Python loop over the same file (tf_record_iterator + one
parse_example of each batch of 100). Run with ``pytest benchmarks/ --benchmark-only``.

Nothing is asserted on speed (a shared 2-vCPU machine varies run to run); the figures go to
the closing table. For scale: MNIST training (examples/mnist_dist.py) consumes about 100
examples per global step at a few hundred steps per second per worker.
"""

from __future__ import annotations

import time

import numpy as np

import psrt as tf

N = 20000


def _write(path):
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(N):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[bytes([i % 256]) * 784])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
            })).SerializeToString())


def _queue_pipeline(path, threads):
    tf.reset_default_graph()
    fq = tf.train.string_input_producer([path], num_epochs=1)
    _, ser = tf.TFRecordReader().read(fq)
    f = tf.parse_single_example(ser, {"image_raw": tf.FixedLenFeature([], tf.string),
                                      "label": tf.FixedLenFeature([], tf.int64)})
    img = tf.cast(tf.decode_raw(f["image_raw"], tf.uint8), tf.float32)
    img.set_shape([784])
    batch = tf.train.shuffle_batch([img, f["label"]], 100, capacity=2000,
                                   min_after_dequeue=1000, num_threads=threads,
                                   allow_smaller_final_batch=True)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        ths = tf.train.start_queue_runners(sess, coord)
        n, t0 = 0, time.perf_counter()
        try:
            while True:
                n += len(sess.run(batch)[1])
        except tf.errors.OutOfRangeError:
            pass
        dt = time.perf_counter() - t0
        coord.request_stop()
        coord.join(ths)
    assert n == N
    return n / dt


def _plain_loop(path):
    spec = {"image_raw": tf.FixedLenFeature([], tf.string),
            "label": tf.FixedLenFeature([], tf.int64)}
    tf.reset_default_graph()
    ser = tf.placeholder(tf.string, [None])
    parsed = tf.parse_example(ser, spec)
    with tf.Session() as sess:
        t0, n, buf = time.perf_counter(), 0, []
        for rec in tf.python_io.tf_record_iterator(path):
            buf.append(rec)
            if len(buf) == 100:
                out = sess.run(parsed, {ser: np.array(buf, dtype=object)})
                np.frombuffer(b"".join(out["image_raw"]), np.uint8).astype(np.float32)
                n += len(buf)
                buf = []
        return n / (time.perf_counter() - t0)


def test_queue_input_examples_per_second(tmp_path, figures, benchmark):
    path = str(tmp_path / "mnist.tfrecord")
    _write(path)
    plain = _plain_loop(path)
    one = benchmark.pedantic(_queue_pipeline, args=(path, 1), rounds=1, iterations=1)
    two = _queue_pipeline(path, 2)
    figures.add("queue input, 1 thread (examples/s)", one, "examples/s")
    figures.add("queue input, 2 threads (examples/s)", two, "examples/s")
    figures.add("plain loop, parse_example per 100 (examples/s)", plain, "examples/s")
    print(f"\nqueue input: {one:.0f} examples/s (1 thread), {two:.0f} (2 threads); "
          f"plain loop with batched parse_example: {plain:.0f}")
    assert one > 0 and two > 0
