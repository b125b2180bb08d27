"""The cluster and this task's role from a SLURM job step, as TF's ``SlurmClusterResolver``.

:class:`SlurmClusterResolver` and :func:`task_role_from_slurm` compute what
:mod:`psrt.distribute.tf_config` reads from ``TF_CONFIG``, from the variables SLURM sets
for every task of an ``srun`` step; :func:`expand_hostlist` and
:func:`expand_tasks_per_node` expand SLURM's compressed node and task lists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.distribute.tf_config import _WORKER, TaskRole, _role_in

__all__ = [
    "SlurmClusterResolver",
    "expand_hostlist",
    "expand_tasks_per_node",
    "task_role_from_slurm",
]

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
