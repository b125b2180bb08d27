"""A tiny task script for tests/test_launch.py: behaves as told by its first argument.

Usage: launch_task.py MODE [MARKER_DIR] --ps_hosts=... --worker_hosts=... --job_name=J
--task_index=I (the cluster flags are appended by psrt-launch).

Every task prints ``pid=<pid> job=<job> index=<i>`` (then ``ps_replicas=<N>`` when
``PSRT_PS_REPLICAS`` is set) to stdout and ``ready`` to stderr, then:

- ``ok``: workers exit 0; ps tasks wait for SIGTERM and exit 0.
- ``fail``: worker 1 exits 3; every other task waits to be stopped.
- ``flaky``: worker 1 exits 4 on its first run (it leaves a marker file in MARKER_DIR) and 0
  on the next; other tasks as in ``ok``.
- ``hang``: every task waits to be stopped.
- ``stubborn``: as ``ok``, but ps tasks ignore SIGTERM (only SIGKILL ends them).
- ``interleave``: as ``ok``, after writing ``line 0`` ... ``line 199``, even numbers to
  stdout and odd ones to stderr, each flushed at once.
"""

import argparse
import json
import os
import signal
import sys
import time


def wait_forever():
    while True:
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("marker_dir", nargs="?")
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--job_name", required=True)
    parser.add_argument("--task_index", type=int, required=True)
    args = parser.parse_args()

    tf_config = json.loads(os.environ["TF_CONFIG"])
    assert tf_config["cluster"] == {"ps": args.ps_hosts.split(","),
                                    "worker": args.worker_hosts.split(",")}, tf_config
    assert tf_config["task"] == {"type": args.job_name, "index": args.task_index}, tf_config
    assert os.environ["PSRT_EXIT_WHEN_WORKERS_DONE"] == "1"

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"pid={os.getpid()} job={args.job_name} index={args.task_index}", flush=True)
    if "PSRT_PS_REPLICAS" in os.environ:
        print(f"ps_replicas={os.environ['PSRT_PS_REPLICAS']}", flush=True)
    print("ready", file=sys.stderr, flush=True)
    worker = args.job_name == "worker"
    if args.mode == "interleave":
        for i in range(200):
            print(f"line {i}", file=sys.stderr if i % 2 else sys.stdout, flush=True)
    if args.mode == "hang":
        wait_forever()
    if args.mode == "stubborn" and not worker:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        wait_forever()
    if args.mode == "fail":
        if worker and args.task_index == 1:
            time.sleep(0.2)  # Let every task start, so the test sees the launcher stop them.
            sys.exit(3)
        wait_forever()
    if args.mode == "flaky" and worker and args.task_index == 1:
        marker = os.path.join(args.marker_dir, "worker1-failed-once")
        if not os.path.exists(marker):
            open(marker, "w").close()
            print("failing on purpose", flush=True)
            sys.exit(4)
        print("second run succeeds", flush=True)
    if not worker:
        wait_forever()
    print(f"worker {args.task_index} done", end="")  # No trailing newline, on purpose.
    sys.exit(0)


if __name__ == "__main__":
    main()
