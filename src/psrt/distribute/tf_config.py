"""This task's role from ``TF_CONFIG``, as TF's Estimator ``RunConfig`` reads it.

:func:`cluster_spec_from_tf_config` and :func:`task_role_from_tf_config` read the
``TF_CONFIG`` environment variable in the format Kubeflow's TFJob and TF's Estimator
``RunConfig`` use::

    {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"], "ps": ["host2:2222"]},
     "task": {"type": "worker", "index": 0}}

:class:`TaskRole` is the result: the job, the task index, whether the task is the chief,
and the whole :class:`~psrt.distribute.cluster_spec.ClusterSpec`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from psrt.distribute.cluster_spec import ClusterSpec

__all__ = [
    "TaskRole",
    "cluster_spec_from_tf_config",
    "task_role_from_tf_config",
]

_TF_CONFIG_ENV = "TF_CONFIG"
_CHIEF = "chief"
_MASTER = "master"
_WORKER = "worker"
_EVALUATOR = "evaluator"


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

    :attr:`worker_count` and :attr:`id_in_cluster` count the chief as a worker, as TF's
    ``multi_worker_util``; :meth:`chief_as_first_worker` gives the classic layout where
    the chief is worker 0, for scripts written for ``ps`` and ``worker`` jobs.
    """

    job_name: str
    task_index: int
    is_chief: bool
    cluster: ClusterSpec

    def _chief_job(self) -> str | None:
        """The cluster's ``"chief"`` or ``"master"`` job when it has a task, else None."""
        for job in (_CHIEF, _MASTER):
            if job in self.cluster.jobs and self.cluster.num_tasks(job):
                return job
        return None

    @property
    def worker_count(self) -> int:
        """The number of tasks that train: the chief (or master) and the workers.

        TF's ``multi_worker_util.worker_count`` and Estimator ``RunConfig.
        num_worker_replicas``: the chief is also a worker. For an ``"evaluator"`` role,
        the number of evaluators (1 when the cluster lists none: it runs on its own). In
        local mode (empty cluster), 1.
        """
        if not self.cluster:
            return 1
        if self.job_name == _EVALUATOR:
            return (self.cluster.num_tasks(_EVALUATOR) if _EVALUATOR in self.cluster.jobs
                    else 1)
        chief = self._chief_job()
        workers = self.cluster.num_tasks(_WORKER) if _WORKER in self.cluster.jobs else 0
        return workers + (self.cluster.num_tasks(chief) if chief is not None else 0)

    @property
    def id_in_cluster(self) -> int | None:
        """This task's index among the :attr:`worker_count` training tasks, or None for a
        task that does not train (``"ps"`` and other jobs).

        TF's ``multi_worker_util.id_in_cluster``: the chief (or master) is 0 and worker
        ``i`` is ``i + 1`` when the cluster has a chief, ``i`` otherwise; an evaluator
        keeps its index. A sparse worker job keeps its gaps.
        """
        if not self.cluster:
            return 0
        if self.job_name in (_CHIEF, _MASTER):
            return 0
        if self.job_name == _WORKER:
            return self.task_index + (1 if self._chief_job() is not None else 0)
        if self.job_name == _EVALUATOR:
            return self.task_index
        return None

    def chief_as_first_worker(self) -> TaskRole:
        """This role in the classic TF1 layout, where the chief is worker 0.

        Kubeflow's TFJob and TF's Estimator put the chief in a job of its own
        (``{"chief": [c], "worker": [w0, w1], "ps": [...]}``); TF1 PS scripts expect
        ``ps`` and ``worker`` jobs with worker 0 as the chief. This returns the same
        tasks in that layout: the ``"worker"`` job becomes ``[c, w0, w1]``, the chief
        (or master) task becomes ``worker`` 0 and worker ``i`` becomes worker
        :attr:`id_in_cluster` (``i + 1``); every other job, ``is_chief`` and the
        addresses are unchanged. Without a chief or master job (or in local mode) the
        role is returned as it is.

        Every task of a job must use the same layout (a ps task counts the workers it
        waits for in its own copy of the cluster), so call it in every task or in none.

        Returns:
            A :class:`TaskRole`.

        Example::

            role = psrt.train.task_role_from_tf_config().chief_as_first_worker()
            server = psrt.train.Server(role.cluster, job_name=role.job_name,
                                       task_index=role.task_index)
            is_chief = role.job_name == "worker" and role.task_index == 0
        """
        chief_job = self._chief_job()
        if chief_job is None:
            return self
        merged: dict[str, Any] = {}
        for job_name, tasks in self.cluster.as_dict().items():
            if job_name in (chief_job, _WORKER):
                if _WORKER in merged:
                    continue
                chief = self.cluster.task_address(
                    chief_job, self.cluster.task_indices(chief_job)[0])
                workers = (self.cluster.as_dict()[_WORKER] if _WORKER in self.cluster.jobs
                           else [])
                if isinstance(workers, list):
                    merged[_WORKER] = [chief] + workers
                else:
                    merged[_WORKER] = {0: chief, **{i + 1: a for i, a in workers.items()}}
            else:
                merged[job_name] = tasks
        if self.job_name in (chief_job, _WORKER):
            job_name, task_index = _WORKER, self.id_in_cluster
            assert task_index is not None
        else:
            job_name, task_index = self.job_name, self.task_index
        return TaskRole(job_name=job_name, task_index=task_index, is_chief=self.is_chief,
                        cluster=ClusterSpec(merged))


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
    return _role_in(cluster, task_type, task_index)


def _role_in(cluster: ClusterSpec, task_type: str, task_index: int) -> TaskRole:
    """The :class:`TaskRole` of a task of a (non-empty) cluster, with TF's chief rule."""
    jobs = cluster.jobs
    if task_type in (_CHIEF, _MASTER):
        is_chief = True
    else:
        is_chief = (task_type == _WORKER and task_index == 0
                    and _CHIEF not in jobs and _MASTER not in jobs)
    return TaskRole(job_name=task_type, task_index=task_index, is_chief=is_chief,
                    cluster=cluster)
