"""conv2d's and conv3d's throughput: a training step's forward and backward pass of
``psrt.nn.conv2d`` (and ``conv3d``) against the BLAS GEMM the same convolution amounts to,
same run.

Run with ``pytest benchmarks/ --benchmark-only``; without that flag these tests skip.

The case: batch 128, 32x32x64 input, 3x3 filter to 64 channels, stride 1, SAME (float32),
run through the graph: ``sess.run([dx, dfilter])`` with ``tf.gradients(y, [x, filter],
grad_ys=dy)``, whose one backward op runs the forward pass and then the backward pass (what a
training step pays; fetching ``y`` too would compute the forward pass a second time, in its
own op). Its work is three GEMMs of
``2 * M * K * N`` FLOPs each (forward, input gradient, filter gradient) with
``M = 128 * 32 * 32`` output positions, ``K = 3 * 3 * 64`` patch values and ``N = 64``
filters. The reference is ``np.matmul`` of the equivalent im2col operands ``[M, K] @ [K, N]``,
one GEMM, measured in the untimed setup of each conv2d round so both share whatever the
machine is doing. The figure is the ratio of the FLOP rates (``3 * 2MKN / t_conv`` over
``2MKN / t_gemm``); the goal >= 0.5x: im2col, col2im and the graph cost at most as much
again as the GEMMs themselves. Printed, and in the run's closing table (conftest.py), not
asserted: on a shared 2-vCPU machine the figures vary by 15-25 % from run to run.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import psrt as tf

BATCH, SIZE, CIN, COUT, KSIZE = 128, 32, 64, 64, 3
GOAL = 0.5


@pytest.fixture(autouse=True)
def _only_with_benchmark_only(request):
    if not request.config.getoption("benchmark_only", False):
        pytest.skip("benchmark: run with pytest benchmarks/ --benchmark-only")


def report(capsys, line):
    with capsys.disabled():
        print("\n" + line)


def test_conv2d_forward_backward_vs_gemm(benchmark, capsys, figures):
    benchmark.group = "conv2d 128x32x32x64 -> 64, 3x3 SAME, forward + backward"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZE, SIZE, CIN), dtype=np.float32)
    w = rng.standard_normal((KSIZE, KSIZE, CIN, COUT), dtype=np.float32) * 0.05
    dy = rng.standard_normal((BATCH, SIZE, SIZE, COUT), dtype=np.float32)
    m, k, n = BATCH * SIZE * SIZE, KSIZE * KSIZE * CIN, COUT
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)

    tf.reset_default_graph()
    xp = tf.placeholder(tf.float32, [None, SIZE, SIZE, CIN])
    wp = tf.placeholder(tf.float32, [KSIZE, KSIZE, CIN, COUT])
    y = tf.nn.conv2d(xp, wp, [1, 1, 1, 1], "SAME")
    grads = tf.gradients(y, [xp, wp], grad_ys=dy)
    feed = {xp: x, wp: w}
    gemm_seconds: list[float] = []

    def gemm():
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        gemm_seconds.append(time.perf_counter() - t0)

    with tf.Session("") as sess:
        out, dx, dw = sess.run([y] + grads, feed)
        assert out.shape == (BATCH, SIZE, SIZE, COUT) and dx.shape == x.shape
        assert out.dtype == dx.dtype == dw.dtype == np.float32
        # one output and one filter-gradient entry against their sums, written plainly
        np.testing.assert_allclose(out[3, 0, 5, 7], np.sum(
            x[3, 0:2, 4:7, :] * w[1:3, :, :, 7]), rtol=1e-4)
        np.testing.assert_allclose(dw[0, 0, 2, 5], np.sum(
            x[:, 0:31, 0:31, 2] * dy[:, 1:32, 1:32, 5]), rtol=1e-3)
        benchmark.pedantic(lambda: sess.run(grads, feed), setup=gemm, rounds=7,
                           warmup_rounds=1, iterations=1)

    conv_s = benchmark.stats.stats.median
    gemm_s = float(np.median(gemm_seconds))
    flops = 2.0 * m * k * n
    conv_gflops, gemm_gflops = 3 * flops / conv_s / 1e9, flops / gemm_s / 1e9
    ratio = conv_gflops / gemm_gflops
    figures.add("conv2d fwd+bwd: median", conv_s, "s")
    figures.add("conv2d fwd+bwd: GFLOP/s", conv_gflops, "GFLOP/s")
    figures.add("im2col GEMM (np.matmul): median", gemm_s, "s")
    figures.add("im2col GEMM (np.matmul): GFLOP/s", gemm_gflops, "GFLOP/s")
    met = figures.add("conv2d fwd+bwd / np.matmul GEMM (FLOP rate)", ratio, "x", at_least=GOAL)
    benchmark.extra_info.update(conv_gflops=round(conv_gflops, 2),
                                gemm_gflops=round(gemm_gflops, 2), ratio=round(ratio, 3))
    report(capsys, f"conv2d fwd+bwd: median {conv_s * 1e3:.0f} ms, {conv_gflops:.1f} GFLOP/s; "
                   f"np.matmul [{m}x{k}]@[{k}x{n}]: median {gemm_s * 1e3:.0f} ms, "
                   f"{gemm_gflops:.1f} GFLOP/s -> {ratio:.2f}x (goal >= {GOAL:g}x"
                   f"{'' if met else ', MISSED'})")


# conv3d: batch 8, 16x16x16x32 input, 3x3x3 filter to 32 channels, stride 1, SAME (float32),
# the same forward + backward run through the graph against np.matmul of the equivalent
# vol2col operands [8 * 16^3, 27 * 32] @ [27 * 32, 32]; the same goal.
BATCH3, SIZE3, CIN3, COUT3 = 8, 16, 32, 32


def test_conv3d_forward_backward_vs_gemm(benchmark, capsys, figures):
    benchmark.group = "conv3d 8x16x16x16x32 -> 32, 3x3x3 SAME, forward + backward"
    rng = np.random.default_rng(0)
    shape = (BATCH3, SIZE3, SIZE3, SIZE3, CIN3)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((3, 3, 3, CIN3, COUT3), dtype=np.float32) * 0.05
    dy = rng.standard_normal((*shape[:4], COUT3), dtype=np.float32)
    m, k, n = BATCH3 * SIZE3 ** 3, 27 * CIN3, COUT3
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)

    tf.reset_default_graph()
    xp = tf.placeholder(tf.float32, [None, SIZE3, SIZE3, SIZE3, CIN3])
    wp = tf.placeholder(tf.float32, [3, 3, 3, CIN3, COUT3])
    y = tf.nn.conv3d(xp, wp, [1, 1, 1, 1, 1], "SAME")
    grads = tf.gradients(y, [xp, wp], grad_ys=dy)
    feed = {xp: x, wp: w}
    gemm_seconds: list[float] = []

    def gemm():
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        gemm_seconds.append(time.perf_counter() - t0)

    with tf.Session("") as sess:
        out, dx, dw = sess.run([y] + grads, feed)
        assert out.shape == (*shape[:4], COUT3) and dx.shape == x.shape
        assert out.dtype == dx.dtype == dw.dtype == np.float32
        # one output and one filter-gradient entry against their sums, written plainly
        np.testing.assert_allclose(out[3, 0, 5, 7, 2], np.sum(
            x[3, 0:2, 4:7, 6:9, :] * w[1:3, :, :, :, 2]), rtol=1e-4)
        np.testing.assert_allclose(dw[0, 0, 0, 2, 5], np.sum(
            x[:, 0:15, 0:15, 0:15, 2] * dy[:, 1:16, 1:16, 1:16, 5]), rtol=1e-3)
        benchmark.pedantic(lambda: sess.run(grads, feed), setup=gemm, rounds=7,
                           warmup_rounds=1, iterations=1)

    conv_s = benchmark.stats.stats.median
    gemm_s = float(np.median(gemm_seconds))
    flops = 2.0 * m * k * n
    conv_gflops, gemm_gflops = 3 * flops / conv_s / 1e9, flops / gemm_s / 1e9
    ratio = conv_gflops / gemm_gflops
    figures.add("conv3d fwd+bwd: median", conv_s, "s")
    figures.add("conv3d fwd+bwd: GFLOP/s", conv_gflops, "GFLOP/s")
    figures.add("vol2col GEMM (np.matmul): median", gemm_s, "s")
    met = figures.add("conv3d fwd+bwd / np.matmul GEMM (FLOP rate)", ratio, "x", at_least=GOAL)
    benchmark.extra_info.update(conv_gflops=round(conv_gflops, 2),
                                gemm_gflops=round(gemm_gflops, 2), ratio=round(ratio, 3))
    report(capsys, f"conv3d fwd+bwd: median {conv_s * 1e3:.0f} ms, {conv_gflops:.1f} GFLOP/s; "
                   f"np.matmul [{m}x{k}]@[{k}x{n}]: median {gemm_s * 1e3:.0f} ms, "
                   f"{gemm_gflops:.1f} GFLOP/s -> {ratio:.2f}x (goal >= {GOAL:g}x"
                   f"{'' if met else ', MISSED'})")
