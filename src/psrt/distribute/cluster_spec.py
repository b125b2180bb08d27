"""Cluster description and role resolution (TF_CONFIG, SLURM), as ``tf.train.ClusterSpec``,
TF's Estimator and TF's ``SlurmClusterResolver``.

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

:class:`SlurmClusterResolver` and :func:`task_role_from_slurm` compute the same from the
variables SLURM sets for every task of an ``srun`` step, as TF's ``SlurmClusterResolver``.
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
    "SlurmClusterResolver",
    "TaskRole",
    "cluster_spec_from_tf_config",
    "expand_hostlist",
    "expand_tasks_per_node",
    "task_role_from_slurm",
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


# ---- SLURM ----------------------------------------------------------------------------------

_SLURM_PORT_BASE = 8888


def expand_hostlist(hostlist: str) -> list[str]:
    """Expands a SLURM hostlist such as ``node[01-04,07],gpu3`` into host names.

    As TF's ``slurm_cluster_resolver.expand_hostlist``: comma-separated hosts, each with
    optional bracketed ranges and single numbers; order kept, nothing deduplicated. Beyond
    TF, as SLURM itself: a range keeps its zero padding (``node[01-04]`` gives ``node01``
    ... ``node04``, where TF gives ``node1``), text may follow the brackets
    (``n[1-2]-ib``), and a name may have several bracket groups (``r[1-2]n[1-2]`` gives
    ``r1n1 r1n2 r2n1 r2n2``).

    Args:
        hostlist: The list, e.g. ``os.environ["SLURM_STEP_NODELIST"]``.

    Returns:
        The host names (list of str).

    Raises:
        ValueError: the text is not a hostlist (unbalanced brackets, an empty name or range,
            a range that is not ``lo-hi`` with ``lo <= hi``), quoting the text.
    """
    def bad(why: str) -> ValueError:
        return ValueError(f"invalid SLURM hostlist {hostlist!r}: {why}; expected names "
                          f"such as 'node[01-04,07],gpu3'")

    names: list[str] = []
    depth, start = 0, 0
    parts: list[str] = []
    for i, c in enumerate(hostlist):
        if c == "[":
            if depth:
                raise bad("nested '['")
            depth = 1
        elif c == "]":
            if not depth:
                raise bad("']' without '['")
            depth = 0
        elif c == "," and not depth:
            parts.append(hostlist[start:i])
            start = i + 1
    if depth:
        raise bad("'[' without ']'")
    parts.append(hostlist[start:])
    for part in parts:
        part = part.strip()
        if not part:
            raise bad("an empty host name")
        expanded = [""]
        for text, ranges in _split_brackets(part):
            choices = [text] if ranges is None else [text + n for n in _expand_ranges(
                ranges, bad)]
            expanded = [e + c for e in expanded for c in choices]
        names.extend(expanded)
    return names


def _split_brackets(name: str) -> list[tuple[str, str | None]]:
    """``"r[1-2]n[3]x"`` -> ``[("r", "1-2"), ("n", "3"), ("x", None)]``."""
    pieces: list[tuple[str, str | None]] = []
    rest = name
    while "[" in rest:
        text, _, tail = rest.partition("[")
        ranges, _, rest = tail.partition("]")
        pieces.append((text, ranges))
    if rest or not pieces:
        pieces.append((rest, None))
    return pieces


def _expand_ranges(ranges: str, bad: Any) -> list[str]:
    """``"01-03,7"`` -> ``["01", "02", "03", "7"]``: each range padded to its low end's width."""
    out: list[str] = []
    for item in ranges.split(","):
        lo, sep, hi = item.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise bad(f"range {item!r} is not a number or lo-hi")
        if not sep:
            out.append(lo)
            continue
        if int(lo) > int(hi):
            raise bad(f"range {item!r} runs backwards")
        out.extend(f"{n:0{len(lo)}d}" for n in range(int(lo), int(hi) + 1))
    return out


def expand_tasks_per_node(tasks_per_node: str) -> list[int]:
    """Expands SLURM's tasks-per-node list: ``"3(x2),2,1"`` gives ``[3, 3, 2, 1]``.

    As TF's ``slurm_cluster_resolver.expand_tasks_per_node``.

    Raises:
        ValueError: an item is neither ``N`` nor ``N(xM)``, quoting the text.
    """
    result: list[int] = []
    for item in tasks_per_node.split(","):
        count, sep, rest = item.strip().partition("(x")
        if not count.isdigit() or (sep and (not rest.endswith(")")
                                            or not rest[:-1].isdigit())):
            raise ValueError(
                f"invalid SLURM tasks-per-node list {tasks_per_node!r}: item {item!r} is "
                f"not N or N(xM); expected e.g. '3(x2),2,1'")
        result.extend([int(count)] * (int(rest[:-1]) if sep else 1))
    return result


class SlurmClusterResolver:
    """The cluster and this task's role from the SLURM job step it runs in.

    Copies TF's ``tf.distribute.cluster_resolver.SlurmClusterResolver`` for psrt's CPU
    tasks: every task of the step (one ``srun`` process each, ranks ``SLURM_PROCID`` 0 to
    N-1) computes the same cluster from SLURM's variables. Tasks are laid out node by node,
    each node holding its number of tasks (``SLURM_STEP_TASKS_PER_NODE``, e.g. ``2(x3)``)
    on ports ``port_base``, ``port_base + 1``, ...; the jobs take consecutive ranks in
    the sorted order of their names (so with ``{"ps": 2, "worker": 4}`` ranks 0-1 are the
    ps tasks, ranks 2-5 workers 0-3; a ``"chief"`` job comes first)::

        # srun --nodes=3 --ntasks-per-node=2 python train.py   (on node[01-03])
        resolver = psrt.train.SlurmClusterResolver({"ps": 2, "worker": 4})
        resolver.cluster_spec()
        # ClusterSpec({'ps': ['node01:8888', 'node01:8889'],
        #              'worker': ['node02:8888', 'node02:8889', 'node03:8888', 'node03:8889']})
        resolver.get_task_info()   # ('worker', 1) for SLURM_PROCID=3

    Environment variables read: ``SLURM_PROCID``; ``SLURM_STEP_NUM_TASKS`` (when
    ``jobs`` is None); ``SLURM_STEP_NODELIST`` and ``SLURM_STEP_TASKS_PER_NODE`` (unless
    ``tasks_per_node`` is a dict); ``SLURMD_NODENAME`` and ``SLURM_LOCALID`` when set, to
    check that this task runs where the layout puts it.

    Differences from TF: no GPU options (``gpus_per_node``, ``gpus_per_task``,
    ``auto_set_gpu``: psrt runs on CPUs, nothing sets ``CUDA_VISIBLE_DEVICES``); nodes
    keep SLURM's order instead of being sorted by name (SLURM places ranks in its own
    order, which is numeric: TF's sort puts ``node10`` before ``node9`` and so gives
    ranks addresses on other nodes); node ranges keep their zero padding
    (``node[01-04]``); ``task_type``/``task_id`` are set at construction; a layout that
    does not match where this task runs (e.g. ``srun --distribution=cyclic``) is an
    error instead of a cluster that cannot start.

    Args:
        jobs: Job names (str) to task counts (int >= 0), e.g. ``{"ps": 2, "worker": 4}``;
            the counts must add up to the step's task count. Default: every task is a
            ``"worker"`` (TF's default).
        port_base: The first task's port on each node (default 8888, as TF).
        tasks_per_node: Tasks per node: an int for every node of
            ``SLURM_STEP_NODELIST``, a dict from host name to count (the hosts in its
            order), or None to read ``SLURM_STEP_TASKS_PER_NODE``.
        rpc_layer: The scheme :meth:`master` puts before an address (default ``"psrt"``).
        environ: Where to read the variables; default ``os.environ``.

    Raises:
        RuntimeError: a variable is missing ("Not running inside a SLURM step?"), the
            jobs do not add up to the step's tasks, or this task's rank, node or local id
            does not fit the layout.
        ValueError: a variable or argument is malformed, quoting it.
    """

    def __init__(self, jobs: Mapping[str, int] | None = None,
                 port_base: int = _SLURM_PORT_BASE,
                 tasks_per_node: int | Mapping[str, int] | None = None,
                 rpc_layer: str = "psrt",
                 environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self.rpc_layer = rpc_layer
        if isinstance(port_base, bool) or not isinstance(port_base, int) or not (
                0 < port_base <= 65535):
            raise ValueError(f"port_base must be an int port in 1..65535, got {port_base!r}")
        self._port_base = port_base
        self._rank = self._int_var("PROCID")
        if jobs is None:
            jobs = {_WORKER: self._int_var("STEP_NUM_TASKS")}
        for name, count in jobs.items():
            if not isinstance(name, str) or isinstance(count, bool) or not isinstance(
                    count, int) or count < 0:
                raise ValueError(
                    f"jobs must map job names (str) to task counts (int >= 0); got "
                    f"{dict(jobs)!r}")
        self._jobs = dict(jobs)
        self._nodes = self._task_configuration(tasks_per_node)
        num_tasks = sum(count for _, count in self._nodes)
        if sum(self._jobs.values()) != num_tasks:
            raise RuntimeError(
                f"Requested {sum(self._jobs.values())} tasks ({self._jobs!r}) but SLURM "
                f"assigned {num_tasks} ({self._describe_nodes()}); make the job counts add "
                f"up to srun's --ntasks")
        if not 0 <= self._rank < num_tasks:
            raise RuntimeError(
                f"SLURM_PROCID={self._rank} is not a rank of the {num_tasks} tasks "
                f"({self._describe_nodes()})")
        addresses: list[str] = []
        placement: list[tuple[str, int]] = []
        for host, count in self._nodes:
            for offset in range(count):
                port = port_base + offset
                if port > 65535:
                    raise ValueError(
                        f"port_base {port_base} + {count} tasks on {host} passes port 65535")
                addresses.append(f"{host}:{port}")
                placement.append((host, offset))
        self._cluster: dict[str, list[str]] = {}
        start = 0
        self.task_type: str = ""
        self.task_id: int = 0
        for name in sorted(self._jobs):
            end = start + self._jobs[name]
            self._cluster[name] = addresses[start:end]
            if start <= self._rank < end:
                self.task_type, self.task_id = name, self._rank - start
            start = end
        self._check_placement(*placement[self._rank])

    def _var(self, name: str) -> str:
        key = "SLURM_" + name
        try:
            return self._environ[key]
        except KeyError:
            raise RuntimeError(
                f"{key} not found in environment. Not running inside a SLURM step? Start "
                f"every task with srun (in an sbatch script or salloc)") from None

    def _int_var(self, name: str) -> int:
        text = self._var(name)
        if not text.strip().isdigit():
            raise ValueError(f"SLURM_{name}={text!r} is not a non-negative integer")
        return int(text)

    def _task_configuration(self, tasks_per_node: int | Mapping[str, int] | None,
                            ) -> list[tuple[str, int]]:
        """``[(host, number of tasks)]`` in SLURM's node order."""
        if isinstance(tasks_per_node, Mapping):
            nodes = list(tasks_per_node.items())
        else:
            hosts = expand_hostlist(self._var("STEP_NODELIST"))
            if tasks_per_node is None:
                counts = expand_tasks_per_node(self._var("STEP_TASKS_PER_NODE"))
                if len(counts) != len(hosts):
                    raise ValueError(
                        f"SLURM_STEP_TASKS_PER_NODE={self._var('STEP_TASKS_PER_NODE')!r} "
                        f"gives {len(counts)} nodes but SLURM_STEP_NODELIST="
                        f"{self._var('STEP_NODELIST')!r} has {len(hosts)}")
            else:
                counts = [tasks_per_node] * len(hosts)
            nodes = list(zip(hosts, counts))
        for host, count in nodes:
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"tasks per node must be ints >= 0; got {count!r} for "
                                 f"{host!r}")
        return nodes

    def _describe_nodes(self) -> str:
        return ", ".join(f"{count} on {host}" for host, count in self._nodes)

    def _check_placement(self, host: str, offset: int) -> None:
        node = self._environ.get("SLURMD_NODENAME")
        local = self._environ.get("SLURM_LOCALID")
        wrong_node = node is not None and node != host
        wrong_slot = local is not None and local.strip().isdigit() and int(local) != offset
        if wrong_node or wrong_slot:
            raise RuntimeError(
                f"SLURM placed rank {self._rank} on node {node!r} as local task {local}, "
                f"but the layout ({self._describe_nodes()}, ranks filling each node in "
                f"turn) puts it on {host!r} as local task {offset}; use srun's default "
                f"block distribution, or pass tasks_per_node as a dict in rank order")

    def cluster_spec(self) -> ClusterSpec:
        """Returns the whole cluster: each job's ``"host:port"`` addresses."""
        return ClusterSpec(self._cluster)

    def get_task_info(self) -> tuple[str, int]:
        """Returns ``(task_type, task_id)`` of this task, e.g. ``("worker", 1)``."""
        return self.task_type, self.task_id

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """Returns a task's address with the scheme, e.g. ``"psrt://node02:8889"``:
        this task's, or that of ``task_type``/``task_id`` when given."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        address = self.cluster_spec().task_address(task_type, task_id)
        layer = self.rpc_layer if rpc_layer is None else rpc_layer
        return f"{layer}://{address}" if layer else address

    @property
    def environment(self) -> str:
        """Always ``""``, as TF's resolver."""
        return ""

    def task_role(self) -> TaskRole:
        """This task's :class:`TaskRole` (``is_chief`` as for ``TF_CONFIG``)."""
        return _role_in(self.cluster_spec(), self.task_type, self.task_id)

    def tf_config(self) -> str:
        """This task's cluster and role as ``TF_CONFIG`` JSON, for scripts that read it."""
        return json.dumps({"cluster": self._cluster,
                           "task": {"type": self.task_type, "index": self.task_id}})


def task_role_from_slurm(jobs: Mapping[str, int] | None = None,
                         port_base: int = _SLURM_PORT_BASE,
                         tasks_per_node: int | Mapping[str, int] | None = None,
                         environ: Mapping[str, str] | None = None) -> TaskRole:
    """Returns this process's :class:`TaskRole` from the SLURM job step it runs in.

    The SLURM counterpart of :func:`task_role_from_tf_config`: see
    :class:`SlurmClusterResolver` for the layout and the arguments. ``is_chief`` is true
    for the ``"chief"``/``"master"`` task, or for worker 0 when there is neither.

    Example, in an ``sbatch`` script that runs ``srun python train.py``::

        role = psrt.train.task_role_from_slurm({"ps": 2, "worker": 4})
        server = psrt.train.Server(role.cluster, job_name=role.job_name,
                                   task_index=role.task_index)

    Raises:
        RuntimeError, ValueError: as :class:`SlurmClusterResolver`.
    """
    return SlurmClusterResolver(jobs, port_base=port_base, tasks_per_node=tasks_per_node,
                                environ=environ).task_role()
