"""Runs a command with ``TF_CONFIG`` set from this task's place in its SLURM job step.

Every ``srun`` task of the step computes the same cluster (psrt's
``SlurmClusterResolver``: tasks laid out node by node on ports ``--port_base``,
``--port_base + 1``, ...; jobs in the sorted order of their names) and gets its own role,
so a script that reads its role from ``TF_CONFIG`` (``examples/mnist_dist.py``, TF1
scripts) runs under SLURM unchanged::

    srun python deploy/slurm/slurm_tf_config.py --jobs ps=2,worker=4 -- \\
        python examples/mnist_dist.py --train_steps 2000

The command replaces this process (``exec``), so SLURM's signals reach it directly.
``--print`` prints the ``TF_CONFIG`` instead of running anything. Scripts written for psrt
can call ``psrt.train.task_role_from_slurm(...)`` themselves instead.
"""

from __future__ import annotations

import argparse
import os
import sys

import psrt


def parse_jobs(text: str) -> dict[str, int]:
    """``"ps=2,worker=4"`` -> ``{"ps": 2, "worker": 4}``."""
    jobs: dict[str, int] = {}
    for item in text.split(","):
        name, sep, count = item.partition("=")
        if not sep or not name.strip() or not count.strip().isdigit():
            raise argparse.ArgumentTypeError(
                f"{text!r}: each item must be NAME=COUNT, e.g. ps=2,worker=4")
        jobs[name.strip()] = int(count)
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=parse_jobs, default=None,
                        help="job sizes, e.g. ps=2,worker=4 (they must add up to the step's "
                             "tasks); default: every task a worker")
    parser.add_argument("--port_base", type=int, default=8888,
                        help="port of the first task on each node (default 8888)")
    parser.add_argument("--print", action="store_true", dest="print_only",
                        help="print TF_CONFIG and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        resolver = psrt.train.SlurmClusterResolver(args.jobs, port_base=args.port_base)
    except (RuntimeError, ValueError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    tf_config = resolver.tf_config()
    if args.print_only:
        print(tf_config)
        return 0
    if not command:
        parser.error("no command given; usage: slurm_tf_config.py [options] -- command ...")
    os.environ["TF_CONFIG"] = tf_config
    try:
        os.execvp(command[0], command)
    except OSError as e:
        parser.exit(127, f"{parser.prog}: error: cannot run {command[0]!r}: {e.strerror}\n")
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
