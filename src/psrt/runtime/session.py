"""Session: a worker's connection to the ps tasks that hold its variables (TF1's tf.Session).

This module holds the connections: the session's target and cluster, which ps task each
variable lives on, registration of variables there, checkpoint state, lifetime, and
``run``. What a run does with its fetches (pull, compute, push) is the executor's
(``psrt/runtime/executor.py``); the placeholders and derived tensors a script builds are the
graph's (``psrt/framework/tensor.py``). Nothing here touches a socket: the C++ client
(psrt._core.Client) does every transfer with the GIL released.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterable

import numpy as np

from psrt import _core
from psrt.distribute.cluster_spec import ClusterSpec
from psrt.framework import errors
from psrt.framework.device import DeviceSpec
from psrt.framework.ops import Graph, get_default_graph
from psrt.framework.protos import ConfigProto
from psrt.ops import conv_threads as _conv_threads
from psrt.ops import dynamic_embedding as _de
from psrt.ops.variables import PartitionedVariable, Variable
from psrt.platform import progress as _progress
from psrt.runtime import auth as _auth
from psrt.runtime import malloc as _malloc
from psrt.runtime import tables as _tables
from psrt.runtime import targets as _targets
from psrt.runtime.executor import Executor, _part_views, _wire_dtype_of

_logger = logging.getLogger("psrt")

# A new session waiting for a ps task to start logs it after the first interval, then every
# second one.
_CONNECT_FIRST_LOG_SECS = 2.0
_CONNECT_LOG_SECS = 10.0
# Beyond TF: one connect attempt (TCP connect and HELLO) lasts at most a heartbeat ping
# interval (a quarter of heartbeat_timeout_secs, within [0.5, 2] s) before a fresh one, so a
# ps task that is reachable again after a partition is reached within about one interval,
# not after the kernel's SYN backoff or a 10 s attempt still waiting on a dead connection.
_ATTEMPT_MIN_SECS, _ATTEMPT_MAX_SECS = 0.5, 2.0

# With ConfigProto.ps_replicas == 2 the variables of this job's tasks are replicated (issue 23):
# those of task k also live on the next task of the job (docs/protocol.md, "Replication").
_REPLICATED_JOB = "ps"

# (address, incarnation) of every ps task a session of this process connected to: a chief
# session whose ps tasks none of this process's sessions knew is a restarted chief's, which
# keeps the model they hold (training/session_manager.py).
_SEEN_PS: set[tuple[str, int]] = set()
_SEEN_PS_LOCK = threading.Lock()


def _parse_target(target: str) -> str:
    for prefix in ("psrt://", "grpc://"):
        if target.startswith(prefix):
            return target[len(prefix):]
    return target


class Session:
    """A connection from this process to the ps tasks, as ``tf.Session``.

    Args:
        target: ``server.target`` of a :class:`psrt.train.Server` in this process (then the
            session knows the cluster and reaches every task of it), a ``"host:port"`` /
            ``"psrt://host:port"`` of one psrt server (every variable is placed there), or
            ``""`` for a private in-process server (TF's local session).
        graph: The :class:`psrt.Graph` whose variables are used; default: the default graph.
        config: A :class:`ConfigProto`.

    Raises:
        UnavailableError: a ps task did not accept a connection within
            ``config.connect_timeout_secs``, naming ``/job:ps/task:K`` and its address.
        InvalidArgumentError: a variable's device names a task the cluster does not have.
        ValueError: ``config.ps_replicas`` is 2 but the cluster's ps job has fewer than 2
            tasks.
        FailedPreconditionError: the task at a variable's address is not the one this
            session's cluster places there, or the two were given different clusters (a
            swapped ``--ps_hosts`` order, one ps task more): the message names both tasks
            and both clusters (docs/protocol.md, "Cluster digests").
        ResourceExhaustedError: (from ``run``) with ``atomic_pushes``, a dense gradient
            larger than the ps task's ``max_inflight_bytes``.
    """

    def __init__(self, target: str = "", graph: Graph | None = None,
                 config: ConfigProto | None = None) -> None:
        # A training loop's arrays reuse heap memory instead of page-faulting in (_malloc.py).
        _malloc.fix_thresholds()
        self._graph = graph or get_default_graph()
        self._config = config or ConfigProto()
        # TF's intra-op threads: how many threads a conv2d pass splits over (process-wide).
        if getattr(self._config, "intra_op_parallelism_threads", 0):
            _conv_threads.set_intra_op_threads(self._config.intra_op_parallelism_threads)
        self._target = target
        self._closed = False
        self._lock = threading.RLock()
        self._own_server: _core.Server | None = None
        # True once a ps task this session connected to was known to an earlier session of
        # this process (same address and incarnation).
        self._psrt_ps_seen_before = False
        secret = _auth.resolve_secret(self._config.auth_secret)
        self._cluster = None
        self._self_task: tuple[str, int] | None = None
        if target == "":
            self._own_server = _core.Server("127.0.0.1", 0, "localhost", 0,
                                            _core.DEFAULT_MAX_PAYLOAD, secret)
            self._default_address = f"127.0.0.1:{self._own_server.port}"
        else:
            address = _parse_target(target)
            srv = _targets.lookup(target)
            if srv is not None:
                self._cluster = srv.server_def_cluster
                self._self_task = (srv.job_name, srv.task_index)
                if self._config.auth_secret is None and srv._secret:
                    secret = srv._secret  # the Server's config named the job's secret
            elif self._config.cluster_def is not None:
                self._cluster = ClusterSpec(self._config.cluster_def)
            self._default_address = address
        job, task = self._self_task or ("client", 0)
        self._client = _core.Client(job, task, secret, self._config.heartbeat_timeout_secs)
        self._client.atomic_pushes = bool(self._config.atomic_pushes)
        self._cluster_sent: Any = None  # the cluster whose digests the client's HELLOs carry
        timeout_ms = self._config.operation_timeout_in_ms
        self._client.timeout = timeout_ms / 1000.0 if timeout_ms > 0 else -1.0
        self._shards: dict[tuple[str | None, int], int] = {}
        self._shard_names: list[str] = []
        self._handles: dict[int, int] = {}        # id(Variable) -> client handle
        self._vars_by_handle: dict[int, Variable] = {}
        self._shard_of: dict[int, int] = {}       # handle -> shard
        self._replicated: set[int] = set()        # shards whose replicas are declared
        self._executor = Executor(self)
        self._register(self._graph.get_collection("variables"))

    # ---- placement and registration ------------------------------------------------------

    @property
    def graph(self) -> Graph:
        """The :class:`psrt.Graph` this session runs."""
        return self._graph

    @property
    def sess_str(self) -> str:
        """The target this session was created with (str)."""
        return self._target

    def _shard_for(self, var: Variable) -> int:
        spec = DeviceSpec.from_string(var.device or "")
        job, task = spec.job, spec.task if spec.task is not None else 0
        if getattr(var, "_local", False) and self._self_task is not None and (
                job is None or (job == self._self_task[0] and spec.task is None)):
            # A local variable (a metric's accumulator) on "/job:worker" (a device setter's
            # default worker_device) is this task's: each worker keeps its own.
            job, task = self._self_task
        if self._own_server is not None or job is None:
            key: tuple[str | None, int] = (None, 0)
            address = self._default_address
            name = f"the session target {self._default_address}"
        else:
            key = (job, task)
            if self._cluster is None and self._self_task is None:
                self._cluster = self._target_cluster()
            if self._self_task is not None and (job, task) == self._self_task:
                address = self._default_address
            elif self._cluster is None:
                raise errors.InvalidArgumentError(
                    None, None,
                    f"variable '{var.name}' is placed on '{var.device}', but session target "
                    f"'{self._target}' is not a psrt.train.Server of this process, so the "
                    f"cluster is unknown; create the Session from server.target or pass "
                    f"config=psrt.ConfigProto(cluster_def=cluster)")
            else:
                if job not in self._cluster.jobs:
                    raise errors.InvalidArgumentError(
                        None, None, f"variable '{var.name}' is placed on '{var.device}', but "
                        f"the cluster has no job '{job}'; jobs: {self._cluster.jobs}")
                try:
                    address = self._cluster.task_address(job, task)
                except ValueError:
                    raise errors.InvalidArgumentError(
                        None, None, f"variable '{var.name}' is placed on '{var.device}', but "
                        f"job '{job}' has tasks {self._cluster.task_indices(job)}") from None
            name = f"/job:{job}/task:{task} at {address}"
        backup = None
        if (self._config.ps_replicas == 2 and key[0] == _REPLICATED_JOB
                and self._own_server is None and self._cluster is not None):
            backup = self._backup_of(key[0], key[1])
        shard = self._task_shard(key, address, name)
        if backup is not None and shard not in self._replicated:
            # Replication: task k's variables also live on the next task of the job,
            # connected here too; the client writes both and reads the first live whole one.
            address = (self._default_address if backup == self._self_task
                       else self._cluster.task_address(*backup))
            backup_shard = self._task_shard(backup, address,
                                            f"/job:{backup[0]}/task:{backup[1]} at {address}")
            self._client.set_replicas(shard, [shard, backup_shard])
            self._replicated.add(shard)
        return shard

    def _task_shard(self, key: tuple[str | None, int], address: str, name: str) -> int:
        """The client shard of task ``key`` (job, index), connected on first use."""
        if key not in self._shards:
            shard = len(self._shards)
            self._connect(shard, address, name, key)
            self._shards[key] = shard
            self._shard_names.append(name)
        return self._shards[key]

    def _backup_of(self, job: str, task: int) -> tuple[str, int]:
        """The task holding the copy of ``/job:job/task:task``'s variables (``ps_replicas``
        2): the next task of the job, k + 1 mod N over its sorted task indices.

        Raises:
            ValueError: the job has fewer than 2 tasks.
        """
        indices = sorted(self._cluster.task_indices(job))
        if len(indices) < 2:
            raise ValueError(
                f"ps_replicas=2 keeps each ps task's variables on the next ps task too, so it "
                f"needs at least 2 ps tasks; job '{job}' of the cluster has {len(indices)}")
        return job, indices[(indices.index(task) + 1) % len(indices)]

    def _target_cluster(self) -> Any:
        """The cluster the session target's task was started with, asked over the wire
        (CLUSTER_INFO), as TF's worker server knows its ``ClusterDef``; None when the target
        has none (a task started without a cluster)."""
        key: tuple[str | None, int] = (None, 0)
        if key not in self._shards:
            name = f"the session target {self._default_address}"
            self._connect(len(self._shards), self._default_address, name)
            self._shards[key] = len(self._shards)
            self._shard_names.append(name)
        raw = self._client.cluster_info(self._shards[key])
        cluster = _targets.cluster_from_json(raw, self._target)
        if cluster is not None:
            _logger.debug("session target %s belongs to cluster %s", self._target,
                          cluster.as_dict())
        return cluster

    def _connect(self, shard: int, address: str, name: str,
                 task: tuple[str | None, int] = (None, 0)) -> None:
        # Wire version 6: the task at `address` must be `task` (job, index) of the same
        # cluster, else FailedPreconditionError naming both (a swapped --ps_hosts order).
        if self._cluster is not None and self._cluster_sent is not self._cluster:
            jobs = _targets.cluster_jobs(self._cluster)
            self._client.set_cluster([(j, d) for j, d, _ in jobs],
                                     _targets.describe_cluster(jobs))
            self._cluster_sent = self._cluster
        expect_job, expect_task = (task[0], task[1]) if task[0] is not None else ("", -1)
        # A task that is not up yet is logged after _CONNECT_FIRST_LOG_SECS, then every
        # _CONNECT_LOG_SECS (TF: "CreateSession still waiting for response from worker: ..."
        # every 10 s): each connect attempt ends at the next log time or the deadline.
        deadline = time.monotonic() + self._config.connect_timeout_secs
        started = time.monotonic()
        next_log = started + _CONNECT_FIRST_LOG_SECS
        hb = self._config.heartbeat_timeout_secs
        attempt = (min(max(hb / 4, _ATTEMPT_MIN_SECS), _ATTEMPT_MAX_SECS) if hb > 0
                   else _ATTEMPT_MAX_SECS)
        while True:
            now = time.monotonic()
            left = deadline - now
            try:
                self._client.connect(shard, address,
                                     max(0.0, min(next_log - now, left, attempt)),
                                     expect_job, expect_task)
                key = (address, int(self._client.incarnation(shard)))
                with _SEEN_PS_LOCK:
                    self._psrt_ps_seen_before = self._psrt_ps_seen_before or key in _SEEN_PS
                    _SEEN_PS.add(key)
                if time.monotonic() > started + _CONNECT_FIRST_LOG_SECS:
                    _logger.info("Connected to %s after %.0f s", name,
                                 time.monotonic() - started)
                return
            except errors.UnavailableError as e:
                if time.monotonic() >= deadline:
                    err = errors.UnavailableError(
                        None, None, f"{name} did not accept a connection within "
                        f"{self._config.connect_timeout_secs:g} s: {e.message}")
                    # Retrying will not help (unlike a lost connection): the monitored
                    # session lets an error marked so through instead of re-creating.
                    err.task_unreachable = True
                    raise err from None
                if time.monotonic() >= next_log:
                    _logger.info("Waiting for %s to start (%.0f s so far; giving up after "
                                 "%g s)", name, time.monotonic() - started,
                                 self._config.connect_timeout_secs)
                    next_log += _CONNECT_LOG_SECS

    def _register(self, var_list: Iterable[Any], init: bool = False) -> list[int]:
        """Registers variables on their ps tasks (with their initial values when ``init``),
        returning their handles."""
        entries, owners = [], []
        for v in var_list:
            if not init and id(v) in self._handles:
                continue
            dtype, shape, kernel, hyper, value = v._ps_spec(init)
            entries.append((self._shard_for(v), v.name, dtype, shape, kernel, hyper, value))
            owners.append(v)
        if entries:
            valued = [e[6] for e in entries if isinstance(e[6], np.ndarray)]
            sent = sum(int(v.nbytes) for v in valued)
            if sent:
                # A big initial value takes a while to reach its ps task.
                report = _progress.Progress(
                    f"Sending the initial values of {len(valued)} variable(s) to the ps "
                    f"tasks", sent)
                with _progress.watch(report, lambda: self._client.bytes_sent):
                    results = self._client.register(entries)
            else:
                results = self._client.register(entries)
            for v, entry, (handle, _initialized) in zip(owners, entries, results):
                self._handles[id(v)] = handle
                self._vars_by_handle[handle] = v
                self._shard_of[handle] = entry[0]
        return [self._handles[id(v)] for v in var_list]

    def _handle(self, v: Variable) -> int:
        h = self._handles.get(id(v))
        if h is None:
            h = self._register([v])[0]
        return h

    # ---- run ----------------------------------------------------------------------------

    def run(self, fetches: Any, feed_dict: dict[Any, Any] | None = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Runs ops and computes fetches, as ``tf.Session.run``.

        Args:
            fetches: A single fetch or a list, tuple, namedtuple, dict or nesting of them. A
                fetch is a Variable (its value: a new numpy array; the global step and other
                integer scalars: an int), a PartitionedVariable (the whole array), an
                optimizer slot, a :class:`psrt.Tensor` (a placeholder's feed, or a derived
                tensor computed from the variables' values: forward only, or on the values
                of a train op's step when one runs in the same run), an op (a train op gives
                its loss; initializers give None), a summary op (``psrt.summary``: the
                serialized Summary, bytes), a variable or tensor name (str), or None. Each
                distinct fetch is computed once per run.
            feed_dict: Values keyed by placeholder (the object), its name (``"x"``) or
                tensor name (``"x:0"``), or by any name a loss function reads as a keyword
                argument. A placeholder's value is converted to its dtype and checked
                against its shape. Feeding a derived tensor replaces its value.
            options, run_metadata: Accepted for TF compatibility.

        Returns:
            The fetched values, in the structure of ``fetches``.

        Raises:
            RuntimeError: the session is closed.
            TypeError: a fetch of an unsupported type.
            ValueError: a fed value does not fit its placeholder's shape (TF's "Cannot feed
                value of shape ..."), or a name refers to nothing in the graph.
            InvalidArgumentError: a placeholder a fetch needs is not fed (TF's "You must feed
                a value for placeholder tensor 'x' with dtype float and shape [?,784]"),
                raised before anything of the run executes.
            OpError: from the ps tasks (e.g. FailedPreconditionError for an uninitialized
                variable, UnavailableError for a lost ps task).
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        return self._executor.execute(fetches, feed_dict)

    def pull_rows(self, var: Variable, ids: Any) -> np.ndarray:
        """Rows ``ids`` of ``var`` (array [len(ids), *var.shape[1:]]), pulled from its ps task
        without the rest of the variable (the row pull behind ``psrt.nn.embedding_lookup``).

        Raises:
            InvalidArgumentError: an id out of range, naming it and its position.
        """
        idx = np.ascontiguousarray(np.asarray(ids).reshape(-1), dtype=np.int64)
        out = np.empty((idx.size,) + tuple(var.shape[1:]), var.dtype)
        with self._lock:
            self._client.pull_rows(self._handle(var), idx, out)
        return out.reshape(np.shape(ids) + tuple(var.shape[1:]))

    # ---- checkpoint support (psrt.checkpoint.Saver) ----------------------------------------

    def _state_items(self, variables: Iterable[Any]) -> list[tuple[str, Any, int]]:
        """(checkpoint name, variable or partitioned variable, slot) for values and slots;
        dynamic tables are not among them (see :func:`psrt.dynamic_embedding.read_state`)."""
        seen: set[int] = set()
        items: list[tuple[str, Any, int]] = []
        for v in variables:
            if getattr(v, "_table", None) is not None or _de.tables_of([v]):
                continue
            if isinstance(v, Variable) and v._partition is not None:
                v = v._partition[0]
            if id(v) in seen:
                continue
            seen.add(id(v))
            items.append((v.name, v, 0))
            first = v._get_variable_list()[0] if isinstance(v, PartitionedVariable) else v
            opt = first._optimizer
            if opt is not None:
                for i, vname in enumerate(opt._slot_var_names()):
                    items.append((f"{v.name}/{vname}", v, i + 1))
                if opt._kernel == "Adam":
                    items.append((f"{v.name}/{opt.get_name()}/beta_powers", v,
                                  _core.OPTIMIZER_STATE_SLOT))
        return items

    def _psrt_expected_state(self, variables: Iterable[Any]) -> dict[str, tuple[tuple[int, ...],
                                                                                 np.dtype]]:
        out = {}
        for name, v, slot in self._state_items(variables):
            if slot == _core.OPTIMIZER_STATE_SLOT:
                shape = (len(v._get_variable_list()), 2) if isinstance(v, PartitionedVariable) \
                    else (2,)
                out[name] = (shape, np.dtype(np.float64))
            else:
                out[name] = (tuple(v.shape), np.dtype(_wire_dtype_of(v)))
        for table in _de.tables_of(variables):
            out.update(_de.expected_state(table))
        return out

    def _psrt_read_state(self, variables: Iterable[Any],
                         progress: _progress.Progress | None = None) -> dict[str, np.ndarray]:
        """Values and optimizer slots of ``variables`` by checkpoint name; one parallel pull
        per slot index. ``progress`` follows the bytes received meanwhile."""
        if progress is not None:
            with _progress.watch(progress, lambda: self._client.bytes_received):
                return self._psrt_read_state(variables)
        expected = self._psrt_expected_state(variables)
        by_slot: dict[int, tuple[list[int], list[np.ndarray]]] = {}
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for name, v, slot in self._state_items(variables):
                shape, dtype = expected[name]
                arr = np.empty(shape, dtype)
                parts = v._get_variable_list() if isinstance(v, PartitionedVariable) else [v]
                if slot == _core.OPTIMIZER_STATE_SLOT:
                    views = [arr.reshape(-1, 2)[k] for k in range(len(parts))]
                else:
                    views = _part_views(v, arr)
                hl, ol = by_slot.setdefault(slot, ([], []))
                hl.extend(self._handle(p) for p in parts)
                ol.extend(views)
                out[name] = arr
            for slot, (hl, ol) in by_slot.items():
                self._client.pull(hl, ol, slot)
            for table in _de.tables_of(variables):
                out.update(_tables.read_state(self, table))
        return out

    def _psrt_write_state(self, variables: Iterable[Any], tensors: dict[str, np.ndarray],
                          progress: _progress.Progress | None = None) -> None:
        """Assigns values and slots from ``tensors`` (checkpoint names). Slots are written
        before values so that a variable reads as initialized only once fully restored.
        ``progress`` follows the bytes sent meanwhile."""
        if progress is not None:
            with _progress.watch(progress, lambda: self._client.bytes_sent):
                return self._psrt_write_state(variables, tensors)
        expected = self._psrt_expected_state(variables)
        by_slot: dict[int, tuple[list[int], list[np.ndarray]]] = {}
        touched = []
        with self._lock:
            for name, v, slot in self._state_items(variables):
                if name not in tensors:
                    raise errors.NotFoundError(None, None,
                                               f"Key {name} not found in checkpoint")
                shape, dtype = expected[name]
                arr = np.require(np.asarray(tensors[name], dtype=dtype), requirements="C")
                if arr.shape != shape:
                    raise errors.InvalidArgumentError(
                        None, None, f"checkpoint value of '{name}' has shape {list(arr.shape)}; "
                        f"the variable has shape {list(shape)}")
                parts = v._get_variable_list() if isinstance(v, PartitionedVariable) else [v]
                if slot == _core.OPTIMIZER_STATE_SLOT:
                    views = [np.ascontiguousarray(arr.reshape(-1, 2)[k]) for k in range(len(parts))]
                else:
                    views = _part_views(v, arr)
                hl, ol = by_slot.setdefault(slot, ([], []))
                hl.extend(self._handle(p) for p in parts)
                ol.extend(views)
                touched.extend(parts)
            for slot in sorted(by_slot, key=lambda s: (s == 0, s)):
                hl, ol = by_slot[slot]
                # restore: a synchronous variable also starts its step afresh (step 0,
                # nothing pending), so the workers' next gradients are not judged stale.
                self._client.assign(hl, ol, slot, restore=True)
            for table in _de.tables_of(variables):
                _tables.write_state(self, table, tensors)
            self._executor._invalidate(touched)

    def _psrt_worker_done(self) -> None:
        """Tells every connected task that this worker finished (psrt's job-end opt-in)."""
        if self._self_task is not None and not self._closed:
            self._client.worker_done(self._self_task[0], self._self_task[1])

    # ---- lifetime -----------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connections (and a private server). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        if self._own_server is not None:
            self._own_server.stop()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
