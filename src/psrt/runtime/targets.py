"""The servers this process started, by target (``grpc://host:port``), and the cluster
definition a task tells its peers (CLUSTER_INFO, docs/protocol.md). A session or a monitored
session finds the Server of its own target here, so it knows its cluster and task as TF's does
with no cluster_def.

A started server is also held here, strongly, until it is stopped (``Server.stop``, or the end
of ``Server.join``): as TF's in-process server, it keeps serving when the script drops its last
reference (a TF1 helper that returns only ``server.target``) until the process ends."""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.framework import errors

_targets: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
# id(server) -> server, for every started server not stopped yet: what keeps it serving.
_serving: dict[int, Any] = {}


def register(target: str, server: Any) -> None:
    """Records ``server`` (a started ``psrt.train.Server``) as the one serving ``target``,
    and keeps it alive until :func:`release`."""
    _targets[target] = server
    _serving[id(server)] = server


def release(server: Any) -> None:
    """Lets ``server`` go (it stopped): it is collected with its last other reference.
    :func:`lookup` finds it until then."""
    _serving.pop(id(server), None)


def lookup(target: str) -> Any:
    """The started ``psrt.train.Server`` of this process serving ``target``, or None."""
    return _targets.get(target)


def cluster_def_json(cluster: ClusterSpec, job: str, task: int) -> str:
    """The cluster definition a task's server answers to CLUSTER_INFO (docs/protocol.md):
    ``{"cluster": {job: {"index": "host:port"}}, "job_name": job, "task_index": task}``."""
    jobs = {j: {str(i): cluster.task_address(j, i) for i in cluster.task_indices(j)}
            for j in cluster.jobs}
    return json.dumps({"cluster": jobs, "job_name": job, "task_index": task}, sort_keys=True)


def cluster_from_json(raw: bytes, target: str) -> ClusterSpec | None:
    """The ClusterSpec of a CLUSTER_INFO reply (None when the task has none).

    Raises:
        InvalidArgumentError: the reply is not a cluster definition (naming ``target``).
    """
    if not raw:
        return None
    try:
        d = json.loads(raw.decode("utf-8"))
        jobs = {str(j): {int(i): str(a) for i, a in tasks.items()}
                for j, tasks in d["cluster"].items()}
        return ClusterSpec(jobs)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise errors.InvalidArgumentError(
            None, None, f"the task at {target} answered CLUSTER_INFO with something that is "
                        f"not a cluster definition ({e})") from e


# A HELLO carries at most this many job digests (csrc/wire.h kMaxHelloJobs).
_MAX_HELLO_JOBS = 16


def job_digest(job: str, addresses: list[str]) -> int:
    """The digest of one job of a cluster that a HELLO carries (docs/protocol.md, "Cluster
    digests"): the first 8 bytes, little-endian, of SHA-256 over ``"psrt-cluster-v1\n"``,
    the job name and each task's address in task order, each followed by ``"\n"``."""
    text = "psrt-cluster-v1\n" + "".join(f"{x}\n" for x in [job, *addresses])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def cluster_jobs(cluster: ClusterSpec | None) -> list[tuple[str, int, str]]:
    """``(job, digest, "addr, addr")`` for every job of ``cluster`` whose tasks are all known:
    indices 0..n-1 without a gap and no address on port 0 (a task that binds what the OS
    hands out; its peers cannot know it). The others are left out: HELLO compares the jobs
    both sides know in full (TF's per-task sparse clusters, a ps started with the ps job
    only, keep working). At most 16 jobs, in name order."""
    out: list[tuple[str, int, str]] = []
    if cluster is None:
        return out
    for job in sorted(cluster.jobs):
        indices = cluster.task_indices(job)
        if list(indices) != list(range(len(indices))) or not indices:
            continue
        addresses = [cluster.task_address(job, i) for i in indices]
        if any(a.rpartition(":")[2] == "0" for a in addresses):
            continue
        out.append((job, job_digest(job, addresses), ", ".join(addresses)))
    return out[:_MAX_HELLO_JOBS]


def describe_cluster(jobs: list[tuple[str, int, str]]) -> str:
    """``"ps: [h:1, h:2]; worker: [h:3]"``: what messages show of :func:`cluster_jobs`."""
    return "; ".join(f"{job}: [{tasks}]" for job, _, tasks in jobs)
