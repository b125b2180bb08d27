"""A TF1 conv net's training step: its throughput, and its cost against hand-written numpy.

Run with ``pytest benchmarks/test_bench_convnet.py --benchmark-only``; without that flag these
tests skip. The model is examples/mnist_conv_layers.py's, the Kubeflow TFJob MNIST example's
shape with narrower layers: ``[100, 28, 28, 1]`` images, ``tf.layers.conv2d`` 5x5 SAME to 16
channels + ReLU, ``max_pooling2d`` 2x2/2, conv2d 5x5 SAME to 32 + ReLU, max pooling,
``dense`` 1568 -> 128 + ReLU, dropout 0.4, ``dense`` -> 10, sparse softmax cross-entropy.

(a) ``test_convnet_training_steps_per_second``: training steps/s of that model with Adam at
batch 100 on one in-process worker (``Session("")``, feeds from numpy), goal >= 20 steps/s.
The Kubeflow example's own widths (32/64 filters, dense 1024) are measured too, without a
target.

(b) ``test_convnet_step_vs_numpy``: the same model without dropout, trained by plain SGD,
written with psrt ops (``tf.layers`` over ``tf.nn.conv2d``/``max_pool``, ``minimize``'s
derived gradients), against the same step written by hand in numpy (im2col with
``sliding_window_view`` and ``np.matmul``, col2im by slices, the pooling by reshapes, the
dense layers, the loss and its gradient, the SGD update) on the same weights and batch; the
first step's loss and updated weights are checked to agree. Rounds of the two alternate in
the same run; the figure is the ratio of their medians, goal <= 1.15x.

On a shared 2-vCPU machine OpenBLAS's threads compete with the other processes; set
``OPENBLAS_NUM_THREADS=1`` there (both sides of (b) use the same BLAS). Figures are printed
and go to the run's closing table (conftest.py); none is asserted.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import pytest

import psrt as tf

BATCH = 100
STEPS_GOAL = 20.0
RATIO_GOAL = 1.15


@pytest.fixture(autouse=True)
def _only_with_benchmark_only(request):
    if not request.config.getoption("benchmark_only", False):
        pytest.skip("benchmark: run with pytest benchmarks/ --benchmark-only")


def report(capsys, line):
    with capsys.disabled():
        print("\n" + line)


def _batches(n, seed=0):
    """``n`` random batches of ``[BATCH, 28, 28, 1]`` images in [0, 1] and int64 labels."""
    rng = np.random.RandomState(seed)
    return [(rng.rand(BATCH, 28, 28, 1).astype(np.float32),
             rng.randint(0, 10, BATCH).astype(np.int64)) for _ in range(n)]


def _cnn(images, is_training, widths=(16, 32, 128), dropout=True, init=None):
    init = init or {}
    c = lambda k: tf.constant_initializer(init[k]) if k in init else None  # noqa: E731
    h = tf.layers.conv2d(images, widths[0], 5, padding="same", activation=tf.nn.relu,
                         kernel_initializer=c("k1"), bias_initializer=c("b1"))
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.conv2d(h, widths[1], 5, padding="same", activation=tf.nn.relu,
                         kernel_initializer=c("k2"), bias_initializer=c("b2"))
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.reshape(h, [-1, 7 * 7 * widths[1]])
    h = tf.layers.dense(h, widths[2], activation=tf.nn.relu, kernel_initializer=c("k3"),
                        bias_initializer=c("b3"))
    if dropout:
        h = tf.layers.dropout(h, rate=0.4, training=is_training)
    return tf.layers.dense(h, 10, kernel_initializer=c("k4"), bias_initializer=c("b4"))


def _training_step(widths, config=None):
    """(run one step, its session) for the model with Adam at batch 100 (dropout on)."""
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.placeholder(tf.int64, [None])
    training = tf.placeholder_with_default(False, [])
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=_cnn(x, training, widths))
    train = tf.train.AdamOptimizer(1e-3).minimize(
        loss, global_step=tf.train.get_or_create_global_step())
    data = _batches(8)
    sess = tf.Session("", config=config)
    sess.run(tf.global_variables_initializer())
    count = [0]
    times: list[float] = []

    def step():
        bx, by = data[count[0] % len(data)]
        count[0] += 1
        t0 = time.perf_counter()
        sess.run(train, {x: bx, y: by, training: True})
        times.append(time.perf_counter() - t0)
    return step, sess, times


def test_convnet_training_steps_per_second(benchmark, capsys, figures):
    """The target holds for one worker given the host's cores as TF1 users give them:
    ``ConfigProto(intra_op_parallelism_threads=<cores>)`` with a one-thread BLAS (conv2d's
    passes then split over the cores, psrt/ops/conv_threads.py); the BLAS's default (one
    thread per core, each GEMM split) is measured too, without a target."""
    from psrt.ops import conv_threads
    from threadpoolctl import threadpool_limits

    benchmark.group = "conv net training step, batch 100"
    cores = len(os.sched_getaffinity(0))
    config = tf.ConfigProto(intra_op_parallelism_threads=cores)
    with threadpool_limits(1, user_api="blas"):
        step, sess, times = _training_step((16, 32, 128), config)
        with sess:
            benchmark.pedantic(step, rounds=60, warmup_rounds=5, iterations=1)
    conv_threads.set_intra_op_threads(0)
    rate = 1.0 / statistics.median(times[5:])
    met = figures.add(f"convnet 16/32/128 training steps/s (batch 100, 1 worker, "
                      f"intra_op {cores}, BLAS 1 thread)", rate, "steps/s", at_least=STEPS_GOAL)
    step, sess, times = _training_step((16, 32, 128))
    with sess:
        for _ in range(30):
            step()
    figures.add("convnet 16/32/128 training steps/s (default config and BLAS threads)",
                1.0 / statistics.median(times[5:]), "steps/s")
    step, sess, times = _training_step((32, 64, 1024))
    with sess:
        for _ in range(14):
            step()
    kubeflow = 1.0 / statistics.median(times[2:])
    figures.add("convnet 32/64/1024 (Kubeflow widths) training steps/s", kubeflow, "steps/s")
    report(capsys, f"conv net training step (batch {BATCH}): 16/32/128 median {rate:.1f} "
                   f"steps/s (goal >= {STEPS_GOAL:g}: {'met' if met else 'MISSED'}); "
                   f"Kubeflow widths 32/64/1024 {kubeflow:.1f} steps/s")


# ---- (b) the hand-written numpy step ------------------------------------------------------------

def _conv_same(x, k, b):
    """5x5 (any odd k) SAME stride-1 NHWC convolution; returns (y, cols)."""
    kh, kw, cin, cout = k.shape
    n, h, w, _ = x.shape
    xp = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, kh * kw * cin)
    y = cols @ k.reshape(-1, cout) + b
    return y.reshape(n, h, w, cout), cols


def _conv_same_grad(dy, cols, k, x_shape, need_dx):
    kh, kw, cin, cout = k.shape
    n, h, w, _ = x_shape
    d2 = dy.reshape(-1, cout)
    dk = (cols.T @ d2).reshape(k.shape)
    db = d2.sum(axis=0)
    dx = None
    if need_dx:
        dcols = (d2 @ k.reshape(-1, cout).T).reshape(n, h, w, kh, kw, cin)
        dxp = np.zeros((n, h + kh - 1, w + kw - 1, cin), dy.dtype)
        for i in range(kh):
            for j in range(kw):
                dxp[:, i:i + h, j:j + w, :] += dcols[:, :, :, i, j, :]
        dx = dxp[:, kh // 2:kh // 2 + h, kw // 2:kw // 2 + w, :]
    return dx, dk, db


def _pool(x):
    n, h, w, c = x.shape
    xr = x.reshape(n, h // 2, 2, w // 2, 2, c)
    y = xr.max(axis=(2, 4))
    return y, xr


def _pool_grad(dy, xr, y):
    mask = xr == y[:, :, None, :, None, :]
    return (mask * dy[:, :, None, :, None, :]).reshape(
        xr.shape[0], xr.shape[1] * 2, xr.shape[3] * 2, xr.shape[5])


def numpy_sgd_step(p, x, labels, lr):
    """One SGD step of the model (no dropout) in numpy, in place; returns the loss."""
    a1, c1 = _conv_same(x, p["k1"], p["b1"])
    r1 = np.maximum(a1, 0)
    q1, q1r = _pool(r1)
    a2, c2 = _conv_same(q1, p["k2"], p["b2"])
    r2 = np.maximum(a2, 0)
    q2, q2r = _pool(r2)
    f = q2.reshape(x.shape[0], -1)
    a3 = f @ p["k3"] + p["b3"]
    r3 = np.maximum(a3, 0)
    logits = r3 @ p["k4"] + p["b4"]
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = float(np.mean(np.log(s[:, 0]) - z[np.arange(n), labels]))
    dl = e / s
    dl[np.arange(n), labels] -= 1
    dl /= np.float32(n)
    g = {"k4": r3.T @ dl, "b4": dl.sum(axis=0)}
    d3 = (dl @ p["k4"].T) * (a3 > 0)
    g["k3"], g["b3"] = f.T @ d3, d3.sum(axis=0)
    dq2 = (d3 @ p["k3"].T).reshape(q2.shape)
    da2 = _pool_grad(dq2, q2r, q2) * (a2 > 0)
    dq1, g["k2"], g["b2"] = _conv_same_grad(da2, c2, p["k2"], q1.shape, True)
    da1 = _pool_grad(dq1, q1r, q1) * (a1 > 0)
    _, g["k1"], g["b1"] = _conv_same_grad(da1, c1, p["k1"], x.shape, False)
    for key, grad in g.items():
        p[key] -= np.float32(lr) * grad.astype(np.float32)
    return loss


def test_convnet_step_vs_numpy(benchmark, capsys, figures):
    benchmark.group = "conv net SGD step vs numpy, batch 100"
    lr, rounds = 0.05, 25
    rng = np.random.RandomState(1)

    def glorot(*shape):
        fan_in = int(np.prod(shape[:-1]))
        fan_out = int(np.prod(shape[:-2])) * shape[-1] if len(shape) == 4 else shape[-1]
        lim = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-lim, lim, shape).astype(np.float32)

    init = {"k1": glorot(5, 5, 1, 16), "b1": np.full(16, 0.01, np.float32),
            "k2": glorot(5, 5, 16, 32), "b2": np.full(32, 0.01, np.float32),
            "k3": glorot(1568, 128), "b3": np.full(128, 0.01, np.float32),
            "k4": glorot(128, 10), "b4": np.zeros(10, np.float32)}
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    y = tf.placeholder(tf.int64, [None])
    loss = tf.losses.sparse_softmax_cross_entropy(
        labels=y, logits=_cnn(x, False, dropout=False, init=init))
    train = tf.train.GradientDescentOptimizer(lr).minimize(loss)
    names = ["k1", "b1", "k2", "b2", "k3", "b3", "k4", "b4"]
    variables = tf.trainable_variables()
    data = _batches(4, seed=2)
    params = {k: v.copy() for k, v in init.items()}
    psrt_times, numpy_times = [], []
    with tf.Session("") as sess:
        sess.run(tf.global_variables_initializer())
        # the two steps agree: the loss before the step and the weights after it
        bx, by = data[0]
        got_loss, _ = sess.run([loss, train], {x: bx, y: by})
        want_loss = numpy_sgd_step(params, bx, by, lr)
        np.testing.assert_allclose(got_loss, want_loss, rtol=1e-4)
        for name, value in zip(names, sess.run(variables)):
            np.testing.assert_allclose(value, params[name], rtol=1e-3, atol=1e-5,
                                       err_msg=name)
        count = [0]

        def numpy_round():           # untimed by pytest-benchmark: the setup of each round
            bx, by = data[count[0] % len(data)]
            t0 = time.perf_counter()
            numpy_sgd_step(params, bx, by, lr)
            numpy_times.append(time.perf_counter() - t0)

        def psrt_round():
            bx, by = data[count[0] % len(data)]
            count[0] += 1
            t0 = time.perf_counter()
            sess.run(train, {x: bx, y: by})
            psrt_times.append(time.perf_counter() - t0)

        benchmark.pedantic(psrt_round, setup=numpy_round, rounds=rounds + 2, iterations=1)
        psrt_times, numpy_times = psrt_times[2:], numpy_times[2:]
    tp, tn = statistics.median(psrt_times), statistics.median(numpy_times)
    ratio = tp / tn
    met = figures.add("convnet SGD step: psrt ops / hand-written numpy (median)", ratio, "x",
                      at_most=RATIO_GOAL)
    figures.add("convnet SGD step, psrt ops (median)", tp * 1e3, "ms")
    figures.add("convnet SGD step, hand-written numpy (median)", tn * 1e3, "ms")
    report(capsys, f"conv net SGD step (batch {BATCH}): psrt {tp * 1e3:.1f} ms, numpy "
                   f"{tn * 1e3:.1f} ms (medians of {rounds}), ratio {ratio:.3f}x (goal <= "
                   f"{RATIO_GOAL:g}x: {'met' if met else 'MISSED'})")
