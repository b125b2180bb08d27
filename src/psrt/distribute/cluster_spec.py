"""The cluster a job runs on, as ``tf.train.ClusterSpec``.

A cluster is a set of tasks grouped into named jobs (``"ps"``, ``"worker"``,
``"chief"``, ...); each task has a ``"host:port"`` address. :class:`ClusterSpec` copies
the semantics of TF1's ``tensorflow/python/training/server_lib.py``: dense jobs are
lists, sparse jobs are ``{task_index: address}`` dicts, and the accessors raise
``ValueError`` for unknown jobs and tasks.

Where this process sits in the cluster comes from ``TF_CONFIG``
(:mod:`psrt.distribute.tf_config`) or from SLURM (:mod:`psrt.distribute.slurm`).
"""

from __future__ import annotations

import ipaddress
import operator
import string
from collections.abc import Mapping
from typing import Any

from psrt.framework.server_protos import ClusterDef, is_message

__all__ = ["ClusterSpec"]


def _parse_task_index(job_name: str, key: Any) -> int:
    """Returns ``key`` as a non-negative int task index (JSON gives string keys)."""
    if isinstance(key, bool):
        raise TypeError(
            f"task index {key!r} in job {job_name!r} must be an int or a string of "
            f"digits, not a bool")
    if isinstance(key, str):
        try:
            index = int(key.strip())
        except ValueError:
            raise ValueError(
                f"task index {key!r} in job {job_name!r} is not an integer; sparse jobs "
                f"map integer task indices (or strings of digits, as JSON gives) to "
                f"addresses") from None
    else:
        try:
            index = operator.index(key)
        except TypeError:
            raise TypeError(
                f"task index {key!r} (type {type(key).__name__}) in job {job_name!r} "
                f"must be an int or a string of digits") from None
    if index < 0:
        raise ValueError(f"task index {key!r} in job {job_name!r} must be >= 0")
    return index


_HOST_CHARS = frozenset(string.ascii_letters + string.digits + "-_")


def _address_problem(address: str) -> str | None:
    """What is wrong with a stripped ``host:port`` address, or None when nothing is."""
    if not address:
        return "it is empty"
    if any(c.isspace() for c in address):
        return "it contains whitespace"
    host, sep, port = address.rpartition(":")
    if not sep:
        return "it has no port"
    if not port:
        return "the port is empty"
    if not (port.isascii() and port.isdigit()):
        return f"the port {port!r} is not a number"
    if int(port) > 65535:
        return f"the port {int(port)} is out of range (0..65535)"
    if not host:
        return "the host is empty"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"{host} is not an IPv6 address"
        return None
    if ":" in host:
        return f"the host {host!r} has a ':'; write an IPv6 host in brackets ('[::1]:2222')"
    if host.endswith("."):
        return f"the host {host!r} ends with a dot"
    labels = host.split(".")
    if any(not label for label in labels):
        return f"the host {host!r} has an empty label (a leading dot or '..')"
    for label in labels:
        bad = sorted(set(label) - _HOST_CHARS)
        if bad:
            return (f"the host {host!r} has {bad[0]!r}; a host name takes letters, digits, "
                    f"'-', '_' and '.'")
    return None


def _check_address(job_name: str, index: int, address: Any) -> str:
    """``address`` with surrounding whitespace stripped (``--ps_hosts 'h:1, h:2'`` split on
    ","), checked.

    Raises:
        TypeError: not a str.
        ValueError: a malformed address, naming it, its job and its task index.
    """
    if not isinstance(address, str):
        raise TypeError(
            f"address of task {index} in job {job_name!r} must be a 'host:port' str, "
            f"got {address!r} (type {type(address).__name__})")
    stripped = address.strip()
    problem = _address_problem(stripped)
    if problem is not None:
        raise ValueError(
            f"address {address!r} of task {index} in job {job_name!r} is malformed: "
            f"{problem}; expected 'host:port' (a host name, an IPv4 address or an IPv6 "
            f"address in brackets, then a port 0..65535)")
    return stripped


class ClusterSpec:
    """Represents a cluster as a set of tasks, organized into jobs.

    Copies ``tf.train.ClusterSpec``. Each job maps to either a list of network
    addresses (task ``i`` is the ``i``-th address) or, for a sparse job, a dict from
    task index to address, so a process can be configured without knowing every
    other task::

        cluster = ClusterSpec({"worker": ["worker0:2222", "worker1:2222"],
                               "ps": {1: "ps1:2222"}})
        cluster.task_address("ps", 1)   # 'ps1:2222'
        cluster.as_dict()  # {'worker': ['worker0:2222', 'worker1:2222'], 'ps': {1: 'ps1:2222'}}

    A ``tf.train.ClusterDef`` message (``cluster.job.add()``, ``job.tasks[i] = "h:p"``) is
    taken too, and ``as_cluster_def()`` makes one, as TF.

    Differences from TF: ``None`` gives an empty cluster (TF raises ``TypeError``); task addresses
    must be ``str`` (TF also takes ``bytes``); negative task indices are rejected;
    ``==`` is only true against another ``ClusterSpec``. Beyond TF, every address has its
    surrounding whitespace stripped (``--ps_hosts 'h:1, h:2'`` split on ``","`` gives
    ``"h:2"``), and a malformed one is refused here, not when its task fails to start: it
    must be ``host:port`` with a host name (letters, digits, ``-``, ``_``, dots between
    labels, no trailing dot), an IPv4 address or a bracketed IPv6 address (``[::1]:2222``),
    and a port 0..65535 (0: the OS chooses, for a task's own server).

    Args:
        cluster: A dict mapping job names (str) to (i) a list or tuple of
            ``"host:port"`` strings or (ii) a dict mapping task indices to
            ``"host:port"`` strings, where an index is an int or a string of digits
            (as JSON object keys are); or another ``ClusterSpec`` (copied); or None or
            ``{}`` for an empty cluster.

    Raises:
        TypeError: ``cluster`` is not one of the types above, a job name is not a str,
            a job's tasks are neither a list/tuple nor a dict, or an address is not a
            str.
        ValueError: a sparse task index is not an integer or is negative; an address is
            malformed (no port, a port out of range, an empty host, a trailing dot,
            whitespace inside), naming the address, its job and its task index.
    """

    __hash__ = None  # type: ignore[assignment]  # Compared by value, unhashable, as TF's.

    def __init__(self, cluster: Mapping[str, Any] | ClusterSpec | None) -> None:
        self._cluster_spec: dict[str, dict[int, str]] = {}
        if cluster is None:
            return
        if isinstance(cluster, ClusterSpec):
            for job_name, tasks in cluster._cluster_spec.items():
                self._cluster_spec[job_name] = dict(tasks)
            return
        if is_message(cluster, "ClusterDef"):
            # TF's ClusterSpec(cluster_def): one job per JobDef, its tasks by index.
            cluster = {job.name: {int(i): a for i, a in sorted(job.tasks.items())}
                       for job in cluster.job}
        if not isinstance(cluster, Mapping):
            raise TypeError(
                "`cluster` must be a dict mapping one or more job names to lists of "
                "network addresses (or to dicts from task index to address), a "
                f"ClusterSpec, or None; got {cluster!r} (type {type(cluster).__name__})")
        for job_name, tasks in cluster.items():
            if not isinstance(job_name, str):
                raise TypeError(
                    f"job name {job_name!r} (type {type(job_name).__name__}) must be a "
                    f"str")
            if isinstance(tasks, (list, tuple)):
                job = {i: _check_address(job_name, i, a) for i, a in enumerate(tasks)}
            elif isinstance(tasks, Mapping):
                job = {}
                for key, address in tasks.items():
                    index = _parse_task_index(job_name, key)
                    if index in job:
                        raise ValueError(
                            f"task index {index} appears twice in job {job_name!r} "
                            f"(keys {list(tasks)!r})")
                    job[index] = _check_address(job_name, index, address)
            else:
                raise TypeError(
                    f"the tasks for job {job_name!r} must be a list of addresses or a "
                    f"dict from task index to address; got {tasks!r} "
                    f"(type {type(tasks).__name__})")
            self._cluster_spec[job_name] = job

    def __bool__(self) -> bool:
        """False when the cluster has no jobs, as TF's."""
        return bool(self._cluster_spec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClusterSpec):
            return NotImplemented
        return self._cluster_spec == other._cluster_spec

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, ClusterSpec):
            return NotImplemented
        return self._cluster_spec != other._cluster_spec

    def __repr__(self) -> str:
        as_dict = self.as_dict()
        items = ", ".join(f"{k!r}: {as_dict[k]!r}" for k in sorted(as_dict))
        return f"ClusterSpec({{{items}}})"

    def _job(self, job_name: str) -> dict[int, str]:
        try:
            return self._cluster_spec[job_name]
        except (KeyError, TypeError):
            raise ValueError(
                f"no such job in cluster: {job_name!r}; jobs are {self.jobs!r}") from None

    def as_cluster_def(self) -> Any:
        """The cluster as a ``tf.train.ClusterDef`` message (TF's ``as_cluster_def``):
        one JobDef per job, in the jobs' order, its ``tasks`` mapping index to address."""
        cluster_def = ClusterDef()
        for job_name, job in self._cluster_spec.items():
            job_def = cluster_def.job.add()
            job_def.name = job_name
            for index in sorted(job):
                job_def.tasks[index] = job[index]
        return cluster_def

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """Returns a dict from job name to the job's tasks.

        A job whose task indices are exactly ``0..n-1`` (``n >= 1``) is a list of
        addresses; any other job, including an empty one (as TF), is a dict from task
        index to address. The result is a fresh copy.

        Returns:
            A dict mapping job names to lists or dicts of ``"host:port"`` strings, in
            the jobs' order.
        """
        ret: dict[str, list[str] | dict[int, str]] = {}
        for job_name, job in self._cluster_spec.items():
            indices = sorted(job)
            if indices and indices[-1] + 1 == len(indices):
                ret[job_name] = [job[i] for i in indices]
            else:
                ret[job_name] = {i: job[i] for i in indices}
        return ret

    @property
    def jobs(self) -> list[str]:
        """The job names (list of str), in the order the cluster dict gave them."""
        return list(self._cluster_spec)

    def num_tasks(self, job_name: str) -> int:
        """Returns the number of tasks defined in ``job_name``.

        For a sparse job this counts the defined tasks, not the largest index + 1.

        Raises:
            ValueError: ``job_name`` is not a job in this cluster.
        """
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """Returns the sorted task indices (list of int) defined in ``job_name``.

        Raises:
            ValueError: ``job_name`` is not a job in this cluster.
        """
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """Returns the ``"host:port"`` address of task ``task_index`` of ``job_name``.

        Args:
            job_name: A job in this cluster.
            task_index: A non-negative int.

        Raises:
            ValueError: ``job_name`` is not a job in this cluster, or it has no task
                ``task_index``.
        """
        job = self._job(job_name)
        try:
            return job[operator.index(task_index)]
        except (KeyError, TypeError):
            raise ValueError(
                f"no task with index {task_index!r} in job {job_name!r}; its task "
                f"indices are {sorted(job)!r}") from None

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Returns the addresses of ``job_name`` as a list indexed by task index.

        As TF, for a sparse job the list has ``None`` at the missing indices, so its
        length is the largest index + 1, not :meth:`num_tasks`. An empty job gives
        ``[]``.

        Raises:
            ValueError: ``job_name`` is not a job in this cluster.
        """
        job = self._job(job_name)
        ret: list[str | None] = [None] * (max(job) + 1 if job else 0)
        for i, address in job.items():
            ret[i] = address
        return ret

