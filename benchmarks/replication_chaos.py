"""The long chaos run of ps replication (issue 23): minutes of 2 ps + 2 workers with a random
ps task killed with SIGKILL every 15-40 s and restarted, for each mode.

    python benchmarks/replication_chaos.py --seconds 180 --mode async sync table

Prints one JSON line per mode (tests/replica_chaos.py's summary: kills, final global step,
runs, sessions per worker, the median and longest stall, the median copy time, steps/s) and
checks what tests/test_replication_chaos.py checks in its short runs: one session per
worker, ``w0 == w1 == -global_step`` exactly (the table's rows too), every stall within 2 x
the heartbeat timeout. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

import replica_chaos  # noqa: E402  (tests/ helpers)
from _mts_cluster import Tasks  # noqa: E402
from _replica_task import DIM, IDS  # noqa: E402


def check(r: replica_chaos.ChaosResult, heartbeat: float) -> list[str]:
    """What went wrong in the run (empty: nothing)."""
    problems = []
    step = int(r.values["global_step"])
    if r.sessions != [1, 1]:
        problems.append(f"sessions per worker {r.sessions} (a session was re-created)")
    for name in ("w0", "w1"):
        if not np.array_equal(np.asarray(r.values[name]), np.full(DIM, -float(step))):
            problems.append(f"{name} = {r.values[name]}, expected -{step} everywhere")
    if r.mode in ("async", "table") and sum(r.runs) != step:
        problems.append(f"runs {r.runs} sum to {sum(r.runs)}, global step {step}")
    if r.mode == "table":
        ids = sorted(set(IDS))
        want = [[-float(IDS.count(i) * step)] * DIM for i in ids]
        if not np.array_equal(np.asarray(r.values["rows"]), np.asarray(want)):
            problems.append(f"table rows {r.values['rows']}, expected {want}")
    for k in r.kills:
        if not k.t_whole:
            problems.append(f"ps{k.task} killed at {k.t_kill:.1f} never became whole again")
        if k.stall > 2 * heartbeat:
            problems.append(f"ps{k.task} killed at {k.t_kill:.1f} stalled {k.stall:.2f} s")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--mode", nargs="+", default=["async", "sync", "table"],
                    choices=["async", "sync", "table"])
    ap.add_argument("--min_interval", type=float, default=15.0)
    ap.add_argument("--max_interval", type=float, default=40.0)
    ap.add_argument("--heartbeat", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    failed = False
    for i, mode in enumerate(args.mode):
        with tempfile.TemporaryDirectory() as tmp:
            tasks = Tasks(tmp)
            try:
                r = replica_chaos.run(tasks, mode=mode, seconds=args.seconds,
                                      interval=(args.min_interval, args.max_interval),
                                      heartbeat_secs=args.heartbeat, seed=args.seed + i)
            finally:
                tasks.reap_all()
        print(replica_chaos.summary(r), flush=True)
        for p in check(r, args.heartbeat):
            failed = True
            print(f"  FAILED: {p}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
