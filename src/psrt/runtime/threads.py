"""BLAS threads of tasks that share a host.

numpy's BLAS (OpenBLAS, MKL) starts one thread per CPU in every process. Several workers
started by hand on one machine then fight over the CPUs, and a small matmul per step runs
tens of times slower. ``psrt-launch`` sets ``OMP_NUM_THREADS=max(1, CPUs // workers)``
before the tasks start; a task started by hand gets the same share here, when its session
is created, through threadpoolctl (which changes the BLAS's thread count at run time),
unless ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS`` is set.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from psrt.runtime import targets as _targets

_logger = logging.getLogger("psrt")

_THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}
_done = False
_limiter: Any = None  # keeps the threadpoolctl limits object alive for the process


def _same_host(a: str, b: str) -> bool:
    if a == b:
        return True
    local = _LOOPBACK | {socket.gethostname()}
    return a in local and b in local


def colocated_workers(cluster: Any, job: str, task: int) -> int:
    """How many worker-like tasks (``worker``, ``chief``, ``master``) of ``cluster`` run on
    the host of ``/job:job/task:task`` (by their names in the cluster)."""
    def host(address: str) -> str:
        return address.rsplit(":", 1)[0].strip("[]")
    mine = host(cluster.task_address(job, task))
    count = 0
    for j in cluster.jobs:
        if j not in ("worker", "chief", "master"):
            continue
        for i in cluster.task_indices(j):
            if _same_host(host(cluster.task_address(j, i)), mine):
                count += 1
    return count


def share_blas_threads(master: str) -> None:
    """Limits this process's BLAS threads to its share of the CPUs when the session's target
    is a worker task sharing its host with other workers (once per process)."""
    global _done, _limiter
    if _done or any(v in os.environ for v in _THREAD_ENV_VARS):
        return
    srv = _targets.lookup(master) if master else None
    if srv is None or srv.job_name not in ("worker", "chief", "master"):
        return
    _done = True
    n = colocated_workers(srv.server_def_cluster, srv.job_name, srv.task_index)
    if n < 2:
        return
    cpus = os.cpu_count() or 1
    threads = max(1, cpus // n)
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:
        _logger.warning("%d workers share this host and each BLAS uses %d threads, which "
                        "can make training many times slower: set OMP_NUM_THREADS=%d "
                        "(or pip install threadpoolctl)", n, cpus, threads)
        return
    _limiter = threadpool_limits(limits=threads, user_api="blas")
    _logger.info("%d workers share this host: BLAS limited to %d thread(s) per worker (%d "
                 "CPUs); set OMP_NUM_THREADS to choose another value", n, threads, cpus)
