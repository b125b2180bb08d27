"""Cluster description and TF_CONFIG parsing, as ``tf.train.ClusterSpec`` and Estimator.

A cluster is a set of tasks grouped into named jobs (``"ps"``, ``"worker"``,
``"chief"``, ...); each task has a ``"host:port"`` address. :class:`ClusterSpec` copies
the semantics of TF1's ``tensorflow/python/training/server_lib.py``: dense jobs are
lists, sparse jobs are ``{task_index: address}`` dicts, and the accessors raise
``ValueError`` for unknown jobs and tasks.

:func:`cluster_spec_from_tf_config` and :func:`task_role_from_tf_config` read the
``TF_CONFIG`` environment variable in the format Kubeflow's TFJob and TF's Estimator
``RunConfig`` use::

    {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"], "ps": ["host2:2222"]},
     "task": {"type": "worker", "index": 0}}
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ClusterSpec",
    "TaskRole",
    "cluster_spec_from_tf_config",
    "task_role_from_tf_config",
]

_TF_CONFIG_ENV = "TF_CONFIG"
_CHIEF = "chief"
_MASTER = "master"
_WORKER = "worker"
_EVALUATOR = "evaluator"


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


def _check_address(job_name: str, index: int, address: Any) -> str:
    if not isinstance(address, str):
        raise TypeError(
            f"address of task {index} in job {job_name!r} must be a 'host:port' str, "
            f"got {address!r} (type {type(address).__name__})")
    return address


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

    Differences from TF: there is no ``ClusterDef`` protobuf (``as_cluster_def`` is
    absent); ``None`` gives an empty cluster (TF raises ``TypeError``); task addresses
    must be ``str`` (TF also takes ``bytes``); negative task indices are rejected;
    ``==`` is only true against another ``ClusterSpec``.

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
        ValueError: a sparse task index is not an integer or is negative.
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


@dataclasses.dataclass(frozen=True)
class TaskRole:
    """This process's place in the cluster, as TF's Estimator ``RunConfig`` derives it.

    Attributes:
        job_name: The task type: ``"chief"``, ``"master"``, ``"worker"``, ``"ps"``,
            ``"evaluator"`` or any other job in the cluster (str).
        task_index: The index of this task in its job (int, >= 0).
        is_chief: True for the task that initializes variables and writes
            checkpoints: the ``"chief"``/``"master"`` task, or worker 0 when the
            cluster has neither job.
        cluster: The whole cluster (empty in local mode).
    """

    job_name: str
    task_index: int
    is_chief: bool
    cluster: ClusterSpec


def _load_tf_config(tf_config: str | Mapping[str, Any] | None) -> dict[str, Any]:
    source = "tf_config argument"
    if tf_config is None:
        tf_config = os.environ.get(_TF_CONFIG_ENV, "")
        source = f"environment variable {_TF_CONFIG_ENV}"
    if isinstance(tf_config, str):
        if not tf_config.strip():
            return {}
        try:
            parsed = json.loads(tf_config)
        except json.JSONDecodeError as e:
            shown = tf_config if len(tf_config) <= 200 else tf_config[:200] + "..."
            raise ValueError(
                f"{source} is not valid JSON: {e.msg} at line {e.lineno} column "
                f"{e.colno}: {shown!r}") from None
    elif isinstance(tf_config, Mapping):
        parsed = tf_config
    else:
        raise TypeError(
            f"tf_config must be a JSON str, a dict or None; got {tf_config!r} "
            f"(type {type(tf_config).__name__})")
    if not isinstance(parsed, Mapping):
        raise ValueError(
            f"{source} must be a JSON object with keys 'cluster' and 'task'; got "
            f"{parsed!r}")
    return dict(parsed)


def _parse_tf_config_index(index: Any) -> int:
    if isinstance(index, bool) or not isinstance(index, (int, str)):
        raise ValueError(
            f"TF_CONFIG task index {index!r} must be an int or a string of digits")
    try:
        value = int(index)
    except ValueError:
        raise ValueError(f"TF_CONFIG task index {index!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"TF_CONFIG task index {index!r} must be >= 0")
    return value


def cluster_spec_from_tf_config(
        tf_config: str | Mapping[str, Any] | None = None,
) -> tuple[ClusterSpec, str | None, int | None]:
    """Parses a ``TF_CONFIG`` into the cluster, this task's type and its index.

    Validates as TF's Estimator ``RunConfig`` does when ``"cluster"`` is set: the task
    type and index are required; the type must be a job of the cluster, except
    ``"evaluator"``, which runs outside the training cluster (its index is not
    checked); the index must be a task of that job; a ``"chief"`` or ``"master"`` job
    has at most one task; ``"chief"`` and ``"master"`` may not both be present, and an
    evaluator may not be used with ``"master"``. Other top-level keys (e.g. Kubeflow's
    ``"environment"``) are ignored.

    Args:
        tf_config: The JSON text, an already parsed dict, or None to read
            ``os.environ["TF_CONFIG"]``. A missing or empty ``TF_CONFIG`` means local
            mode.

    Returns:
        ``(cluster, task_type, task_index)``: a :class:`ClusterSpec` (empty when
        ``"cluster"`` is absent), the ``"task"`` ``"type"`` (str) and ``"index"``
        (int; JSON strings such as ``"1"`` are converted), each None if absent.

    Raises:
        ValueError: the text is not JSON or not an object, ``"task"`` is not an
            object, or the task does not fit the cluster as described above.
        TypeError: ``"cluster"`` is not a valid :class:`ClusterSpec` dict.
    """
    config = _load_tf_config(tf_config)
    cluster = ClusterSpec(config.get("cluster") or {})
    task = config.get("task") or {}
    if not isinstance(task, Mapping):
        raise ValueError(
            f"TF_CONFIG 'task' must be an object like {{\"type\": \"worker\", "
            f"\"index\": 0}}; got {task!r}")
    task_type = task.get("type")
    task_index = task.get("index")
    if task_type is not None and not isinstance(task_type, str):
        raise ValueError(f"TF_CONFIG task type {task_type!r} must be a str")
    if task_index is not None:
        task_index = _parse_tf_config_index(task_index)
    if not cluster:
        return cluster, task_type or None, task_index

    jobs = cluster.jobs
    if _MASTER in jobs and _CHIEF in jobs:
        raise ValueError(
            f"TF_CONFIG cluster has both a 'master' and a 'chief' job; use one "
            f"(jobs are {jobs!r})")
    for chief_job in (_CHIEF, _MASTER):
        if chief_job in jobs and cluster.num_tasks(chief_job) > 1:
            raise ValueError(
                f"TF_CONFIG cluster must have only one {chief_job!r} task; got "
                f"{cluster.as_dict()[chief_job]!r}")
    if not task_type:
        raise ValueError(
            f"TF_CONFIG has a 'cluster' but no task type; set task.type to one of "
            f"{jobs + [_EVALUATOR]!r}")
    if task_index is None:
        raise ValueError(
            f"TF_CONFIG has a 'cluster' but no task index for task type {task_type!r}")
    if task_type == _EVALUATOR:
        if _MASTER in jobs:
            raise ValueError(
                "TF_CONFIG task type 'evaluator' is not supported when the cluster has "
                "a 'master' job; name the chief job 'chief'")
        return cluster, task_type, task_index
    if task_type not in jobs:
        raise ValueError(
            f"TF_CONFIG task type {task_type!r} is not a job in the cluster; jobs are "
            f"{jobs!r} (or 'evaluator')")
    indices = cluster.task_indices(task_type)
    if task_index not in indices:
        raise ValueError(
            f"TF_CONFIG task index {task_index} is not a task of job {task_type!r}; "
            f"valid indices are {indices!r}")
    return cluster, task_type, task_index


def task_role_from_tf_config(tf_config: str | Mapping[str, Any] | None = None) -> TaskRole:
    """Returns this process's :class:`TaskRole` from a ``TF_CONFIG``.

    With a cluster, ``is_chief`` is true for the ``"chief"`` or ``"master"`` task (TF's
    Estimator ``RunConfig``) and, when the cluster has neither job, for worker 0 (TF's
    ``multi_worker_util.is_chief`` rule; the Estimator would instead require a chief
    job). ``"ps"`` and ``"evaluator"`` tasks are never chief.

    Without a cluster (no ``TF_CONFIG``, or no ``"cluster"`` key) this is local mode, as
    the Estimator's: the role is worker 0, chief, with an empty cluster.

    Args:
        tf_config: As for :func:`cluster_spec_from_tf_config`.

    Returns:
        A :class:`TaskRole`.

    Raises:
        ValueError: As :func:`cluster_spec_from_tf_config`; or, in local mode, the task
            is given and is not worker 0.
    """
    cluster, task_type, task_index = cluster_spec_from_tf_config(tf_config)
    if not cluster:
        job_name = task_type if task_type is not None else _WORKER
        index = task_index if task_index is not None else 0
        if job_name != _WORKER or index != 0:
            raise ValueError(
                f"TF_CONFIG has no 'cluster', so the task must be worker 0 (local "
                f"mode); got type {job_name!r} index {index}")
        return TaskRole(job_name=_WORKER, task_index=0, is_chief=True, cluster=cluster)
    assert task_type is not None and task_index is not None
    jobs = cluster.jobs
    if task_type in (_CHIEF, _MASTER):
        is_chief = True
    else:
        is_chief = (task_type == _WORKER and task_index == 0
                    and _CHIEF not in jobs and _MASTER not in jobs)
    return TaskRole(job_name=task_type, task_index=task_index, is_chief=is_chief,
                    cluster=cluster)
