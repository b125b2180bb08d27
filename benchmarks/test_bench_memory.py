"""ps memory under many pushing workers: peak RSS against variables + slots + budget.

Run with ``pytest benchmarks/ --benchmark-only``; without that flag these tests skip.

A ps task (tests/_ps_task.py, in its own process) holds one float32 Adagrad variable (value +
accumulator = 2x its bytes); N client connections in this process (their pushes release the
GIL) push whole gradients of it back to back for a fixed time. The figure is the ps's peak RSS
(VmHWM) against the bound the in-flight budget promises: its RSS once the variable exists
(interpreter, variable, slot) + max_inflight_bytes. Before the budget the ps kept a receive
buffer as large as the gradient per connection: 8 workers with 40 MB pushes peaked at 9.8x the
variable, 16 at 17.8x. Every push must complete without an error.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _ps_task import PsProcess  # noqa: E402

from psrt import _core  # noqa: E402

BUDGET = 256 << 20  # the server's default max_inflight_bytes
CASES = [("8 workers x 40 MB", 8, 40 << 20, 10.0), ("16 workers x 40 MB", 16, 40 << 20, 8.0),
         ("64 connections x 1 MiB", 64, 1 << 20, 5.0)]


def _status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


@pytest.mark.parametrize("label,workers,nbytes,seconds", CASES, ids=[c[0] for c in CASES])
def test_ps_peak_rss_stays_under_the_budget(benchmark, figures, label, workers, nbytes, seconds):
    benchmark.group = f"ps memory: {label}"
    n = nbytes // 4
    hyper = {"learning_rate": 0.01, "slot_init": 0.1}
    proc = PsProcess()
    admin = _core.Client("worker", 0)
    admin.timeout = 120.0
    admin.connect(0, proc.address, 10.0)
    try:
        admin.register([(0, "W", "float32", [n], "Adagrad", hyper, {"kind": "zeros"})])
        base = _status(proc.pid, "VmRSS")
        counts = [0] * workers
        failures: list[BaseException] = []

        def push(k: int, stop: float) -> None:
            try:
                c = _core.Client("worker", k + 1)
                c.timeout = 120.0
                c.connect(0, proc.address, 10.0)
                [(h, _)] = c.register([(0, "W", "float32", [n], "Adagrad", hyper, None)])
                g = np.full(n, 1e-3, np.float32)
                while time.monotonic() < stop:
                    c.push([h], [g])
                    counts[k] += 1
                c.close()
            except BaseException as e:  # noqa: BLE001 - reported below
                failures.append(e)

        def flood() -> None:
            stop = time.monotonic() + seconds
            threads = [threading.Thread(target=push, args=(k, stop)) for k in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        benchmark.pedantic(flood, rounds=1, iterations=1)
        assert failures == [] and sum(counts) > 0
        peak = _status(proc.pid, "VmHWM")
        bound = base + BUDGET
        figures.add(f"{label}: pushes", sum(counts), "")
        figures.add(f"{label}: ps peak RSS / variable", peak / nbytes, "x")
        met = figures.add(f"{label}: ps peak RSS (MB)", peak / 2**20, "MB",
                          at_most=bound / 2**20)
        print(f"{label}: {sum(counts)} pushes; ps RSS {base / 2**20:.0f} MB with the "
              f"variable, peak {peak / 2**20:.0f} MB = {peak / nbytes:.1f}x the variable; "
              f"bound {bound / 2**20:.0f} MB ({'met' if met else 'MISSED'})")
    finally:
        admin.close()
        proc.stop()
