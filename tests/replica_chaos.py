"""The chaos driver of ps replication: 2 ps + 2 workers as real processes, a ps task killed
with SIGKILL at random intervals and restarted on its port, and what the run shows.

Used by tests/test_replication_chaos.py (short runs) and benchmarks/replication_chaos.py
(minutes). The workers train tests/_replica_task.py's model, whose exact final value is
known from the final global step; the driver checks it, the sessions each worker created
(one: no re-created session), and how long each kill stalled training (the longest gap
between two runs of a worker from the kill until the restarted task is whole again).
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from _mts_cluster import LOCALHOST, Task, Tasks

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "_replica_task.py")
WHOLE_LINE = "is whole again"


def free_ports(n: int) -> list[int]:
    """n ports the OS hands out now (bound and released; a ps task binds one again, and its
    restart the same one)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind((LOCALHOST, 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class Kill:
    task: int
    t_kill: float
    t_ready: float = 0.0
    t_whole: float = 0.0      # 0: the restarted task did not log it was whole again
    stall: float = 0.0        # the longest gap between two runs of any worker around it


@dataclass
class ChaosResult:
    mode: str
    seconds: float
    kills: list[Kill] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    steps_per_sec: float = 0.0


def _wait_whole(task: Task, since_bytes: int, timeout: float) -> float:
    """The time the ps task's log first says it is whole again after ``since_bytes``, or 0."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(task.stderr_path, "rb") as f:
                f.seek(since_bytes)
                if WHOLE_LINE.encode() in f.read():
                    return time.time()
        except OSError:
            pass
        if task.proc.poll() is not None:
            return 0.0
        time.sleep(0.05)
    return 0.0


def _max_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval between consecutive runs that overlaps [start, end]."""
    gap = 0.0
    for a, b in zip(times, times[1:]):
        if b >= start and a <= end:
            gap = max(gap, b - a)
    return gap


def run(tasks: Tasks, mode: str = "async", seconds: float = 20.0,
        interval: tuple[float, float] = (4.0, 7.0), heartbeat_secs: float = 2.0,
        seed: int = 0, step_sleep: float = 0.0, replicas: int = 2,
        whole_timeout: float = 30.0, kills: bool = True) -> ChaosResult:
    """Runs the job for ``seconds`` of chaos (a kill + restart every ``interval`` seconds,
    each after the previous restart is whole again), then lets it end 50 steps later, reads
    the model and returns what happened. Children are the ``tasks``' (reaped by its owner)."""
    rng = random.Random(seed)
    ports = free_ports(2)
    cluster = {"ps": [f"{LOCALHOST}:{p}" for p in ports],
               "worker": [f"{LOCALHOST}:0", f"{LOCALHOST}:0"]}
    env = {"PSRT_PS_REPLICAS": str(replicas), "PSRT_LOG_LEVEL": "INFO"}
    stop_file = os.path.join(tasks.log_dir, f"stop-{mode}-{seed}")

    def start_ps(i: int) -> Task:
        return tasks.start(f"ps{i}", "ps", {"cluster": cluster, "task_index": i}, env=env,
                           script=SCRIPT)

    ps = [start_ps(i) for i in range(2)]
    for p in ps:
        p.expect("ready", timeout=60)
    workers = [tasks.start(f"worker{i}", "worker",
                           {"cluster": cluster, "task_index": i, "mode": mode,
                            "stop_file": stop_file, "heartbeat_timeout_secs": heartbeat_secs,
                            "step_sleep": step_sleep, "report_every": 50},
                           env=env, script=SCRIPT) for i in range(2)]
    for w in workers:
        w.expect("step", timeout=120)
    result = ChaosResult(mode=mode, seconds=seconds)
    t0 = time.time()
    end = t0 + seconds
    while True:
        pause = rng.uniform(*interval)
        if time.time() + pause > end:
            break
        time.sleep(pause)
        if any(w.proc.poll() is not None for w in workers):
            break
        if not kills:
            continue
        i = rng.randrange(2)
        kill = Kill(task=i, t_kill=time.time())
        ps[i].kill9()
        ps[i] = start_ps(i)
        ps[i].expect("ready", timeout=60)
        kill.t_ready = time.time()
        kill.t_whole = _wait_whole(ps[i], 0, whole_timeout)
        result.kills.append(kill)
    # The end: every worker stops at the same global step, 50 past the current one.
    step = max(w.all("step")[-1]["step"] for w in workers)
    with open(stop_file + ".tmp", "w") as f:
        f.write(str(step + 50))
    os.replace(stop_file + ".tmp", stop_file)
    elapsed = time.time() - t0
    times = []
    for w in workers:
        w.expect_exit(0, timeout=120)
        done = w.event("done")
        assert done is not None
        result.runs.append(int(done["runs"]))
        result.sessions.append(int(done["sessions"]))
        times.append(done["times"])
    for k in result.kills:
        end_k = (k.t_whole or k.t_ready) + 1.0
        k.stall = max(_max_gap(t, k.t_kill - 0.5, end_k) for t in times)
    reader = tasks.start("reader", "reader", {"cluster": cluster, "mode": mode}, env=env,
                         script=SCRIPT)
    result.values = reader.expect("values", timeout=60)
    reader.expect_exit(0, timeout=30)
    result.steps_per_sec = sum(result.runs) / max(elapsed, 1e-9)
    return result


def summary(r: ChaosResult) -> str:
    """One line: the kills, their stalls and copy times, the final step and runs."""
    stalls = sorted(k.stall for k in r.kills)
    copies = sorted(k.t_whole - k.t_ready for k in r.kills if k.t_whole)
    med = (lambda xs: xs[len(xs) // 2] if xs else float("nan"))
    return json.dumps({
        "mode": r.mode, "kills": len(r.kills), "global_step": r.values.get("global_step"),
        "runs": r.runs, "sessions": r.sessions,
        "stall_median_s": round(med(stalls), 3), "stall_max_s": round(max(stalls or [0]), 3),
        "copy_median_s": round(med(copies), 3), "steps_per_s": round(r.steps_per_sec, 1)})
