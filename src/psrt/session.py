"""Session: a worker's connection to the ps tasks that hold its variables (TF1's tf.Session).

``Session.run`` accepts TF's fetch structures. A Variable fetch is pulled from its ps task
(all fetches of one run in one parallel round trip); a train op is one training step.
Nothing here touches a socket: the C++ client (psrt._core.Client) does every transfer with
the GIL released.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt import _auth, _core, errors
from psrt.optimizers import IndexedSlices, SlotVariable, TrainOp
from psrt.placement import DeviceSpec
from psrt.variables import Graph, Operation, PartitionedVariable, Variable, get_default_graph

_logger = logging.getLogger("psrt")

# How often a synchronous run that waits for other replicas logs a warning, in seconds (more
# often under a short sync timeout: a third of it, so that a run warns before it fails).
_SYNC_LOG_SECS = 10.0
# Longest single wait a synchronous run asks a ps task for; the run repeats shorter waits
# until its step completes or the sync timeout passes (the core allows at most 60 s).
_SYNC_WAIT_SECS = 1.0
# A new session waiting for a ps task to start logs it after the first interval, then every
# second one.
_CONNECT_FIRST_LOG_SECS = 2.0
_CONNECT_LOG_SECS = 10.0

_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
                np.dtype(np.int64): "int64"}


class ConfigProto:
    """Session options (the part of ``tf.ConfigProto`` psrt uses).

    Args:
        operation_timeout_in_ms: Deadline of one ``run`` round trip, in milliseconds; 0 or
            negative: none (TF's default). A ps task that stops answering then fails the run
            with DeadlineExceededError.
        connect_timeout_secs: How long a new session waits for its ps tasks to accept
            connections, in seconds (default 300). Past it: UnavailableError naming the task.
        cluster_def: The cluster (a ClusterSpec or its dict), as TF's
            ``ConfigProto.cluster_def``: lets a process without a Server of its own reach
            every task its variables are placed on.
        sync_timeout_secs: psrt only. How long one run of a ``SyncReplicasOptimizer`` train
            op waits for the other replicas' gradients to complete its step, in seconds
            (default 300; must be > 0). Past it the run raises DeadlineExceededError naming
            the step, the missing gradients, the variable and its ps task. A positive
            ``operation_timeout_in_ms`` takes precedence.
        heartbeat_timeout_secs: psrt only (as ps-lite's and gloo's heartbeats; TF1 has none).
            A session pings each ps task over a second connection; one that leaves a ping
            unanswered this long (a stopped or hung process, a vanished host) fails the
            pending run with UnavailableError naming ``/job:ps/task:K`` and its address, which
            MonitoredTrainingSession recovers from like a lost ps task. Default 20 s; 0
            disables it. Long pushes and synchronous waits never count as silence.
        auth_secret: psrt only. The job's shared secret (str or bytes) for sessions and
            servers made with this config; default: ``PSRT_AUTH_SECRET``, else the file named
            by ``PSRT_AUTH_SECRET_FILE``, else none. With a secret, every connection proves
            it knows it (HMAC-SHA256 challenge-response) before any request is served.
        hello_timeout_secs, idle_timeout_secs, max_connections: psrt only, for servers made
            with this config: a peer that has not completed HELLO (and authentication) within
            ``hello_timeout_secs`` (default 10) is closed; a connection with no request for
            ``idle_timeout_secs`` (default 600) whose task sends no heartbeat either is
            closed; at most ``max_connections`` (default 1024) are served at once, and a
            peer past it gets ResourceExhaustedError. 0 disables a limit.
        max_inflight_bytes, chunk_bytes, stall_timeout_secs: psrt only, for servers made
            with this config. A dense push, assign or initial value larger than
            ``chunk_bytes`` (default 4 MiB, BytePS's partition size) is read and applied chunk
            by chunk, each chunk whole, while the next one arrives, so no frame limit caps a
            variable. All connections together hold at most ``max_inflight_bytes`` (default
            256 MiB: 64 chunks in flight, enough for 64 workers pushing at once at full
            speed) of received payload not yet applied; past it the ps stops reading its
            sockets and senders wait, so its memory does not grow with the number of workers.
            A peer that stops sending in the middle of a frame for ``stall_timeout_secs``
            (default 60) is dropped and its buffers freed.
        device_filters, allow_soft_placement, log_device_placement, ...: accepted and
            ignored, for TF compatibility.

    Raises:
        ValueError: ``sync_timeout_secs`` is not > 0, or a timeout or limit is negative.
    """

    def __init__(self, operation_timeout_in_ms: int = 0, connect_timeout_secs: float = 300.0,
                 cluster_def: Any = None, sync_timeout_secs: float = 300.0,
                 heartbeat_timeout_secs: float = 20.0, auth_secret: str | bytes | None = None,
                 hello_timeout_secs: float = 10.0, idle_timeout_secs: float = 600.0,
                 max_connections: int = 1024, max_inflight_bytes: int = 256 << 20,
                 chunk_bytes: int = 4 << 20, stall_timeout_secs: float = 60.0,
                 **ignored: Any) -> None:
        self.operation_timeout_in_ms = int(operation_timeout_in_ms)
        self.cluster_def = cluster_def
        self.connect_timeout_secs = float(connect_timeout_secs)
        for name, value in (("heartbeat_timeout_secs", heartbeat_timeout_secs),
                            ("hello_timeout_secs", hello_timeout_secs),
                            ("idle_timeout_secs", idle_timeout_secs),
                            ("max_connections", max_connections),
                            ("stall_timeout_secs", stall_timeout_secs)):
            if not float(value) >= 0:
                raise ValueError(f"{name} must be >= 0 (0 disables it); got {value!r}")
        self.heartbeat_timeout_secs = float(heartbeat_timeout_secs)
        self.auth_secret = auth_secret
        self.hello_timeout_secs = float(hello_timeout_secs)
        self.idle_timeout_secs = float(idle_timeout_secs)
        self.max_connections = int(max_connections)
        for name, value in (("max_inflight_bytes", max_inflight_bytes),
                            ("chunk_bytes", chunk_bytes)):
            if not int(value) >= 4096:
                raise ValueError(f"{name} must be at least 4096 bytes; got {value!r}")
        self.max_inflight_bytes = int(max_inflight_bytes)
        self.chunk_bytes = int(chunk_bytes)
        self.stall_timeout_secs = float(stall_timeout_secs)
        if not float(sync_timeout_secs) > 0:
            raise ValueError(f"sync_timeout_secs must be > 0 seconds; got {sync_timeout_secs!r}")
        self.sync_timeout_secs = float(sync_timeout_secs)
        self.ignored = ignored


def _parse_target(target: str) -> str:
    for prefix in ("psrt://", "grpc://"):
        if target.startswith(prefix):
            return target[len(prefix):]
    return target


class _Fetch:
    """A flattened fetch structure: leaves in order plus a function rebuilding it."""

    def __init__(self, fetches: Any) -> None:
        self.leaves: list[Any] = []
        self._build = self._flatten(fetches)

    def _flatten(self, f: Any) -> Callable[[list[Any]], Any]:
        if isinstance(f, dict):
            items = [(k, self._flatten(v)) for k, v in f.items()]
            kind = type(f)
            return lambda r: kind((k, b(r)) for k, b in items) if kind is dict else \
                kind({k: b(r) for k, b in items})
        if isinstance(f, (list, tuple)) and not hasattr(f, "_fields"):
            subs = [self._flatten(v) for v in f]
            kind = type(f)
            return lambda r: kind(b(r) for b in subs)
        if isinstance(f, tuple):  # namedtuple
            subs = [self._flatten(v) for v in f]
            kind = type(f)
            return lambda r: kind(*(b(r) for b in subs))
        i = len(self.leaves)
        self.leaves.append(f)
        return lambda r: r[i]

    def build(self, results: list[Any]) -> Any:
        """The fetch structure with each leaf replaced by its result, in leaf order."""
        return self._build(results)


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
    """

    def __init__(self, target: str = "", graph: Graph | None = None,
                 config: ConfigProto | None = None) -> None:
        from psrt import server as _server  # noqa: PLC0415 (server imports session lazily)

        self._graph = graph or get_default_graph()
        self._config = config or ConfigProto()
        self._target = target
        self._closed = False
        self._lock = threading.RLock()
        self._own_server: _core.Server | None = None
        secret = _auth.resolve_secret(self._config.auth_secret)
        self._cluster = None
        self._self_task: tuple[str, int] | None = None
        if target == "":
            self._own_server = _core.Server("127.0.0.1", 0, "localhost", 0,
                                            _core.DEFAULT_MAX_PAYLOAD, secret)
            self._default_address = f"127.0.0.1:{self._own_server.port}"
        else:
            address = _parse_target(target)
            srv = _server._lookup_target(target)
            if srv is not None:
                self._cluster = srv.server_def_cluster
                self._self_task = (srv.job_name, srv.task_index)
                if self._config.auth_secret is None and srv._secret:
                    secret = srv._secret  # the Server's config named the job's secret
            elif self._config.cluster_def is not None:
                from psrt.cluster import ClusterSpec  # noqa: PLC0415

                self._cluster = ClusterSpec(self._config.cluster_def)
            self._default_address = address
        job, task = self._self_task or ("client", 0)
        self._client = _core.Client(job, task, secret, self._config.heartbeat_timeout_secs)
        timeout_ms = self._config.operation_timeout_in_ms
        self._client.timeout = timeout_ms / 1000.0 if timeout_ms > 0 else -1.0
        self._shards: dict[tuple[str | None, int], int] = {}
        self._shard_names: list[str] = []
        self._handles: dict[int, int] = {}        # id(Variable) -> client handle
        self._vars_by_handle: dict[int, Variable] = {}
        self._shard_of: dict[int, int] = {}       # handle -> shard
        self._cache: dict[int, np.ndarray] = {}   # id(Variable or PartitionedVariable) -> value
        self._views: dict[int, np.ndarray] = {}
        self._last_step: dict[int, int] = {}      # id(global step) -> value from a push reply
        self._sync_states: dict[int, _SyncState] = {}  # id(sync TrainOp) -> its progress
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
        if self._own_server is not None or job is None:
            key: tuple[str | None, int] = (None, 0)
            address = self._default_address
            name = f"the session target {self._default_address}"
        else:
            key = (job, task)
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
        if key not in self._shards:
            shard = len(self._shards)
            self._connect(shard, address, name)
            self._shards[key] = shard
            self._shard_names.append(name)
        return self._shards[key]

    def _connect(self, shard: int, address: str, name: str) -> None:
        # A task that is not up yet is logged after _CONNECT_FIRST_LOG_SECS, then every
        # _CONNECT_LOG_SECS (TF: "CreateSession still waiting for response from worker: ..."
        # every 10 s): each connect attempt ends at the next log time or the deadline.
        deadline = time.monotonic() + self._config.connect_timeout_secs
        started = time.monotonic()
        next_log = started + _CONNECT_FIRST_LOG_SECS
        while True:
            now = time.monotonic()
            left = deadline - now
            try:
                self._client.connect(shard, address, max(0.0, min(next_log - now, left)))
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
            opt = v._optimizer
            kernel = opt._kernel if opt is not None else ""
            hyper = opt._hyper() if opt is not None else {}
            if v._sync is not None:
                hyper = {**hyper, "replicas_to_aggregate": float(v._sync[0]),
                         "total_num_replicas": float(v._sync[1])}
            value = v.initial_value_array() if init else None
            entries.append((self._shard_for(v), v.name, _DTYPE_NAMES[_wire(v)], v.shape, kernel,
                            hyper, value))
            owners.append(v)
        if entries:
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
        """Runs ops and fetches values, as ``tf.Session.run``.

        Args:
            fetches: A single fetch or a list, tuple, namedtuple, dict or nesting of them. A
                fetch is a Variable (its value: a new numpy array; the global step and other
                int64 scalars: an int), a PartitionedVariable (the whole array), an optimizer
                slot, an op (a train op gives its loss; initializers give None), a summary
                op (``psrt.summary``: the serialized Summary, bytes), a variable name (str),
                or None.
            feed_dict: Values the loss functions of train ops receive as keyword arguments,
                keyed by name (str) or by an object with a ``name``.

        Returns:
            The fetched values, in the structure of ``fetches``.

        Raises:
            RuntimeError: the session is closed.
            TypeError: a fetch of an unsupported type.
            OpError: from the ps tasks (e.g. FailedPreconditionError for an uninitialized
                variable, UnavailableError for a lost ps task).
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        fetch = _Fetch(fetches)
        feeds = _feeds_by_name(feed_dict)
        leaves, computed = _expand_computed(fetch.leaves, feeds)
        with self._lock:
            results: list[Any] = [None] * len(leaves)
            reads: list[tuple[int, Any]] = []
            fresh_steps: dict[int, int] = {}
            op_results: dict[int, Any] = {}
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, str):
                    leaf = self._var_by_name(leaf)
                if leaf is None:
                    continue
                if isinstance(leaf, Operation):
                    # An op fetched more than once runs once per run (one training step), as
                    # TF evaluates each distinct fetch once.
                    if id(leaf) not in op_results:
                        op_results[id(leaf)] = self._run_op(leaf, feeds, fresh_steps)
                    results[i] = op_results[id(leaf)]
                elif isinstance(leaf, (Variable, PartitionedVariable, SlotVariable)):
                    reads.append((i, leaf))
                else:
                    raise TypeError(f"Fetch argument {leaf!r} has invalid type "
                                    f"{type(leaf).__name__}; must be a psrt Variable, "
                                    f"PartitionedVariable, slot, Operation, name or None")
            if reads:
                self._read(reads, results, fresh_steps)
        # Innermost first: a computed fetch found later is an input of one found earlier.
        for i, leaf, inputs, start in reversed(computed):
            results[i] = leaf._psrt_compute(
                inputs.build(results[start:start + len(inputs.leaves)]), feeds)
        return fetch.build(results)

    def _var_by_name(self, name: str) -> Any:
        base = name[:-2] if name.endswith(":0") else name
        v = self._graph.get_variable_by_name(base)
        if v is None:
            raise ValueError(f"The name '{name}' refers to no variable in the graph")
        return v

    def _read(self, reads: list[tuple[int, Any]], results: list[Any],
              fresh_steps: dict[int, int]) -> None:
        """Pulls every fetched variable and slot into new arrays, one batch per slot index.
        A global step that a train op of this run incremented comes from its push reply."""
        batches: dict[int, tuple[list[int], list[np.ndarray]]] = {}
        scalars: list[int] = []
        for i, leaf in reads:
            if _is_int_scalar(leaf):
                if id(leaf) in fresh_steps:
                    results[i] = fresh_steps[id(leaf)]
                    continue
                scalars.append(i)
            slot, target = (leaf.index + 1, leaf.primary) if isinstance(leaf, SlotVariable) \
                else (0, leaf)
            out = np.empty(target.shape, _wire(target))
            parts = target._get_variable_list() if isinstance(target, PartitionedVariable) \
                else [target]
            hl, ol = batches.setdefault(slot, ([], []))
            hl.extend(self._handle(p) for p in parts)
            ol.extend(_part_views(target, out))
            results[i] = out
        for slot, (hl, ol) in batches.items():
            self._client.pull(hl, ol, slot)
        for i in scalars:
            results[i] = int(results[i])
        for i, leaf in reads:
            # int32 variables are int64 on the ps: give them back as the user's int32.
            if isinstance(results[i], np.ndarray) and results[i].dtype != leaf.dtype:
                results[i] = results[i].astype(leaf.dtype)

    # ---- ops ----------------------------------------------------------------------------

    def _run_op(self, op: Operation, feeds: dict[str, Any], fresh_steps: dict[int, int]) -> Any:
        if isinstance(op, TrainOp):
            return self._train(op, feeds, fresh_steps)
        if op.type == "initialize":
            self._register(op.variables, init=True)
            self._invalidate(op.variables)
            return None
        if op.type in ("assign", "assign_add"):
            (v,) = op.variables
            value = np.array(np.broadcast_to(np.asarray(op.value, _wire(v)), v.shape), order="C")
            h = self._handle(v)
            if op.type == "assign":
                self._client.assign([h], [value], 0)
            else:
                self._client.assign_add([h], [value])
            self._invalidate([v])
            return None
        if op.type == "report_uninitialized":
            names = [v.name for v, ok in zip(op.variables, self._initialized(op.variables))
                     if not ok]
            return np.array([n.encode() for n in names], dtype=object)
        if op.type == "is_initialized":
            return bool(self._initialized(op.variables)[0])
        if op.type == "gather":
            return self.pull_rows(op.variables[0], op.value)
        if op.type == "noop":
            return None
        raise TypeError(f"psrt cannot run op {op!r}")

    def _initialized(self, var_list: Sequence[Variable]) -> list[bool]:
        if not var_list:
            return []
        return list(self._client.is_initialized([self._handle(v) for v in var_list]))

    def _invalidate(self, var_list: Iterable[Variable]) -> None:
        for v in var_list:
            self._cache.pop(id(v), None)
            if isinstance(v, PartitionedVariable):
                for p in v._get_variable_list():
                    self._cache.pop(id(p), None)
            elif v._partition is not None:
                self._cache.pop(id(v._partition[0]), None)

    def _buffers(self, var_list: Sequence[Any], refill: bool) -> tuple[list[int],
                                                                      list[np.ndarray]]:
        """Handles of the parts of ``var_list`` and views of the cached value buffers that
        receive them, for the variables not cached (allocating their buffers), or for every
        variable (once each) when ``refill``."""
        handles: list[int] = []
        outs: list[np.ndarray] = []
        seen: set[int] = set()
        for v in var_list:
            if id(v) in seen:
                continue
            seen.add(id(v))
            buf = self._cache.get(id(v))
            if buf is None:
                buf = np.empty(v.shape, _wire(v))
                view = buf.view()
                view.setflags(write=False)
                self._cache[id(v)] = buf
                self._views[id(v)] = view
            elif not refill:
                continue
            parts = v._get_variable_list() if isinstance(v, PartitionedVariable) else [v]
            handles.extend(self._handle(p) for p in parts)
            outs.extend(_part_views(v, buf))
        return handles, outs

    def _values_for(self, var_list: Sequence[Any]) -> list[np.ndarray]:
        """The train op's inputs: values returned by the last push when this session holds
        them (ps-lite's push-pull: as fresh as a separate pull at that moment), else pulled
        now in one batch."""
        missing_h, missing_o = self._buffers(var_list, refill=False)
        if missing_h:
            try:
                self._client.pull(missing_h, missing_o, 0)
            except Exception:
                self._invalidate(var_list)
                raise
        return [self._views[id(v)] for v in var_list]

    def _gradients(self, op: TrainOp, feeds: dict[str, Any]) -> tuple[Any, list[Any]]:
        """(loss, gradients aligned with ``op.var_list``): from the loss function called on
        the variables' values, or the op's given gradients (fed ones looked up in
        ``feeds``) with loss None."""
        var_list = op.var_list
        if op.loss_fn is None:
            return None, [_fed_gradient(feeds, g, v) if isinstance(g, str) else g
                          for g, v in zip(op.grads, var_list)]
        values = self._values_for(var_list)
        out = op.loss_fn(*values, **feeds)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("the loss function must return (loss, grads); got "
                            f"{type(out).__name__}")
        loss, grads = out
        grads = list(grads)
        if len(grads) != len(var_list):
            raise ValueError(f"the loss function returned {len(grads)} gradients for "
                             f"{len(var_list)} variables {[v.name for v in var_list]}")
        return loss, grads

    def _dense_parts(self, v: Any, g: Any) -> tuple[list[int], list[np.ndarray]]:
        """The handles of ``v``'s parts and the gradient rows each receives (views of
        ``g``)."""
        if not isinstance(g, np.ndarray):
            raise errors.InvalidArgumentError(
                None, None, f"gradient for variable '{v.name}' must be a numpy array of "
                f"{v.dtype}{list(v.shape)}; got {type(g).__name__}")
        parts = v._get_variable_list() if isinstance(v, PartitionedVariable) else [v]
        if len(parts) > 1 and (g.shape != v.shape or g.dtype != v.dtype
                               or not g.flags.c_contiguous):
            raise errors.InvalidArgumentError(
                None, None, f"gradient for variable '{v.name}' must be {v.dtype}"
                f"{list(v.shape)} C-contiguous; got {g.dtype}{list(g.shape)}")
        return [self._handle(p) for p in parts], (_part_views(v, g) if len(parts) > 1 else [g])

    def _train(self, op: TrainOp, feeds: dict[str, Any], fresh_steps: dict[int, int]) -> Any:
        if op.sync is not None:
            return self._train_sync(op, feeds, fresh_steps)
        var_list = op.var_list
        loss, grads = self._gradients(op, feeds)
        lr = op.optimizer._learning_rate_value()
        dense_h: list[int] = []
        dense_g: list[np.ndarray] = []
        dense_out: list[np.ndarray] = []
        sparse: list[tuple[Any, IndexedSlices, np.ndarray]] = []
        for v, g in zip(var_list, grads):
            if g is None:
                continue
            if isinstance(g, IndexedSlices):
                sparse.append((v, g, self._sparse_indices(v, g)))
                continue
            handles, pieces = self._dense_parts(v, g)
            dense_h.extend(handles)
            dense_g.extend(pieces)
            cached = self._cache.get(id(v))
            if cached is not None:
                dense_out.extend(_part_views(v, cached))
        gs = op.global_step
        # The core steps integer global steps in the push itself; a float one (TF adds 1 to
        # any global_step given to minimize) gets an assign_add of 1 after the push.
        float_step = gs is not None and gs.dtype.kind == "f"
        step_h = self._handle(gs) if gs is not None and not float_step else -1
        use_return = op.loss_fn is not None and len(dense_out) == len(dense_h)
        step = -1
        try:
            if dense_h or not sparse:
                step = self._client.push(dense_h, dense_g, lr, step_h if not sparse else -1, 1,
                                         dense_out if use_return and dense_h else None)
            for k, (v, g, idx) in enumerate(sparse):
                last = k == len(sparse) - 1
                step = self._push_sparse(v, g, idx, lr, step_h if last else -1)
            if float_step:
                self._client.assign_add([self._handle(gs)], [np.ones((), _wire(gs))])
                self._invalidate([gs])
        except Exception:
            self._invalidate(var_list)
            raise
        if not use_return:
            self._invalidate(var_list)
        for v, _, _ in sparse:
            self._invalidate([v])
        if gs is not None and step >= 0:
            fresh_steps[id(gs)] = step
            self._last_step[id(gs)] = step
        return loss

    def _sparse_indices(self, v: Any, g: IndexedSlices) -> np.ndarray:
        """``g.indices`` as the int64 C-contiguous array the core takes, every index checked
        here, before anything of the step is sent: a bad one fails the whole step rather
        than leave the step's other updates applied."""
        if isinstance(v, PartitionedVariable):
            raise errors.UnimplementedError(
                None, None, f"row-sparse gradients for partitioned variable '{v.name}' are not "
                f"supported yet; push a dense gradient")
        idx = np.asarray(g.indices)
        if idx.dtype != np.int64:
            if idx.dtype.kind not in "iu":
                raise errors.InvalidArgumentError(
                    None, None, f"indices for variable '{v.name}' must be integers; got "
                    f"{idx.dtype}")
            idx = idx.astype(np.int64)
        rows = v.shape[0] if len(v.shape) else 0
        bad = np.flatnonzero((idx < 0) | (idx >= rows)) if idx.ndim == 1 else []
        if len(bad):
            j = int(bad[0])
            raise errors.InvalidArgumentError(
                None, None, f"variable '{v.name}': index {int(idx[j])} at position {j} is out "
                f"of range [0, {rows})")
        values = g.values
        want = (idx.shape[0],) + tuple(v.shape[1:]) if idx.ndim == 1 else None
        if not isinstance(values, np.ndarray) or values.dtype != v.dtype or \
                (want is not None and values.shape != want):
            def shape(dims: Any) -> str:
                return "[" + ",".join(str(d) for d in dims) + "]"
            raise errors.InvalidArgumentError(
                None, None, f"gradient rows for variable '{v.name}' must be {v.dtype}"
                f"{shape(want) if want is not None else ''}; got "
                f"{getattr(values, 'dtype', type(values).__name__)}{shape(np.shape(values))}")
        return np.ascontiguousarray(idx)

    def _push_sparse(self, v: Any, g: IndexedSlices, idx: np.ndarray, lr: float,
                     step_h: int) -> int:
        return self._client.push_sparse(self._handle(v), idx, g.values, lr, step_h, 1)

    # ---- synchronous training (SyncReplicasOptimizer) --------------------------------------

    def _train_sync(self, op: TrainOp, feeds: dict[str, Any],
                    fresh_steps: dict[int, int]) -> Any:
        """One run of a SyncReplicasOptimizer's train op: gradients at the session's step
        ``tag``, pushed tagged with it together with the global step's tagged increment;
        after this worker's last push of the step (the ``ceil(R / total_num_replicas)``-th)
        the same round trip waits until the step is complete on every pushed variable and
        the global step, and refills the cached values. The next ``tag`` is the lowest step
        reached. Any error forgets the progress: the next run re-reads the global step."""
        assert op.sync is not None and op.global_step is not None
        replicas, total = op.sync
        var_list = op.var_list
        gs = op.global_step
        try:
            step_h = self._handle(gs)
            state = self._sync_states.get(id(op))
            if state is None or state.op is not op or any(
                    id(v) not in self._cache for v in var_list):
                # First run, or values invalidated (initialization, restore, an error):
                # read every value and the global step, which is the step to compute at.
                handles, outs = self._buffers(var_list, refill=True)
                _, _, (_, value, _) = self._client.sync_step(
                    [], [], [], [], [], None, 0, step_h, False,
                    handles, outs, [0] * len(handles), 0, 0.0)
                state = self._sync_states[id(op)] = _SyncState(op, value)
            tag = state.tag
            loss, grads = self._gradients(op, feeds)
            lr = op.optimizer._learning_rate_value()
            push_h: list[int] = []
            push_g: list[np.ndarray] = []
            sparse_h: list[int] = []
            sparse_i: list[np.ndarray] = []
            sparse_r: list[Any] = []
            pushed: set[int] = set()
            for v, g in zip(var_list, grads):
                if g is None:
                    continue
                if isinstance(g, IndexedSlices):
                    sparse_i.append(self._sparse_indices(v, g))
                    sparse_h.append(self._handle(v))
                    sparse_r.append(g.values)
                else:
                    handles, pieces = self._dense_parts(v, g)
                    push_h.extend(handles)
                    push_g.extend(pieces)
                pushed.add(id(v))
            state.pushes += 1
            last = state.pushes >= -(-replicas // total)  # ceil(R / total) pushes per step
            wait_h: list[int] = []
            outs: list[np.ndarray] = []
            needs: list[int] = []
            if last:
                for v in var_list:
                    handles, views = self._buffers([v], refill=True)
                    wait_h.extend(handles)
                    outs.extend(views)
                    needs.extend([tag + 1 if id(v) in pushed else 0] * len(handles))
            timeout = self._sync_timeout()
            start = time.monotonic()
            accepted, waits, gstep = self._client.sync_step(
                push_h, push_g, sparse_h, sparse_i, sparse_r, lr, tag, step_h, True,
                wait_h, outs, needs, tag + 1 if last else 0,
                self._sync_wait_secs(start + timeout, wait_h + [step_h]) if last else 0.0)
            stale = accepted.count(False)
            if stale:
                _logger.debug("step %d: %d of %d gradient(s) dropped as stale", tag, stale,
                              len(accepted))
            if last:
                waits, gstep = self._sync_wait(tag, replicas, step_h, wait_h, outs, needs,
                                               waits, gstep, start, timeout)
                state.tag = min([gstep[1]] + [w[1] for w, n in zip(waits, needs) if n > 0])
                state.pushes = 0
        except BaseException:
            self._sync_states.pop(id(op), None)
            self._invalidate(var_list)
            raise
        fresh_steps[id(gs)] = gstep[1]
        self._last_step[id(gs)] = gstep[1]
        return loss

    def _sync_timeout(self) -> float:
        """Seconds a synchronous run waits for its step: the operation timeout when set,
        else ``ConfigProto.sync_timeout_secs``."""
        ms = self._config.operation_timeout_in_ms
        return ms / 1000.0 if ms > 0 else self._config.sync_timeout_secs

    def _sync_wait_secs(self, deadline: float, handles: list[int]) -> float:
        """``wait_secs`` of a round trip waiting on ``handles``, so that it takes at most
        _SYNC_WAIT_SECS, the time left, and half the operation timeout (which bounds each
        round trip). A ps task answers one connection's requests in order, so k waits on
        one task can take k times ``wait_secs``: it is divided by the largest k."""
        secs = min(_SYNC_WAIT_SECS, max(0.0, deadline - time.monotonic()))
        ms = self._config.operation_timeout_in_ms
        if ms > 0:
            secs = min(secs, ms / 2000.0)
        per_shard = collections.Counter(self._shard_of[h] for h in handles)
        return secs / max(per_shard.values(), default=1)

    def _sync_wait(self, tag: int, replicas: int, step_h: int, handles: list[int],
                   outs: list[np.ndarray], needs: list[int],
                   waits: list[tuple[bool, int, int]], gstep: tuple[bool, int, int],
                   start: float, timeout: float
                   ) -> tuple[list[tuple[bool, int, int]], tuple[bool, int, int]]:
        """Repeats the waits that were not ready (and the global step's) until all are;
        returns the final (ready, step, count) of each wait and of the global step.

        Raises:
            DeadlineExceededError: not ready ``timeout`` seconds after ``start``.
        """
        waits = list(waits)
        pending = [i for i, w in enumerate(waits) if not w[0]]
        log_every = min(_SYNC_LOG_SECS, timeout / 3)
        next_log = start + log_every
        while pending or not gstep[0]:
            now = time.monotonic()
            if now >= next_log or now >= start + timeout:
                name, shard, missing = self._sync_laggard(
                    replicas, [(handles[i], waits[i]) for i in pending] +
                    ([] if gstep[0] else [(step_h, gstep)]))
                lag = (f"step {tag}: waiting for {missing} more gradient(s) from {replicas} "
                       f"replicas for variable '{name}' on {shard}")
                if now >= start + timeout:
                    setting = (f"operation_timeout_in_ms={self._config.operation_timeout_in_ms}"
                               if self._config.operation_timeout_in_ms > 0 else
                               f"sync_timeout_secs={self._config.sync_timeout_secs:g}")
                    if gstep[0] and gstep[1] > tag:
                        # The step completed for the global step, not for this variable: the
                        # other replicas pushed no gradient for it.
                        hint = (f"The global step already advanced to {gstep[1]}: the other "
                                f"replicas' runs of step {tag} pushed no gradient for "
                                f"'{name}' (a None gradient on some replicas but not on "
                                f"others?)")
                    else:
                        hint = f"Are {replicas} replicas running this train op?"
                    raise errors.DeadlineExceededError(
                        None, None, f"{lag}; gave up after {now - start:.3g} s (ConfigProto "
                        f"{setting}). {hint}")
                _logger.warning("%s (%.0f s so far)", lag, now - start)
                next_log = now + log_every
            again_h = [handles[i] for i in pending]
            _, again, step_again = self._client.sync_step(
                [], [], [], [], [], None, tag, step_h if not gstep[0] else -1, False,
                again_h, [outs[i] for i in pending], [needs[i] for i in pending], tag + 1,
                self._sync_wait_secs(start + timeout,
                                     again_h if gstep[0] else again_h + [step_h]))
            for i, w in zip(pending, again):
                waits[i] = w
            if not gstep[0]:
                gstep = step_again
            pending = [i for i in pending if not waits[i][0]]
        return waits, gstep

    def _sync_laggard(self, replicas: int, not_ready: list[tuple[int, tuple[bool, int, int]]]
                      ) -> tuple[str, str, int]:
        """(variable name, ps task, gradients still missing) of the first not-ready wait."""
        handle, (_, _, count) = not_ready[0]
        return (self._vars_by_handle[handle].name, self._shard_names[self._shard_of[handle]],
                replicas - count)

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
        """(checkpoint name, variable or partitioned variable, slot) for values and slots."""
        seen: set[int] = set()
        items: list[tuple[str, Any, int]] = []
        for v in variables:
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
                out[name] = (tuple(v.shape), np.dtype(_wire(v)))
        return out

    def _psrt_read_state(self, variables: Iterable[Any]) -> dict[str, np.ndarray]:
        """Values and optimizer slots of ``variables`` by checkpoint name; one parallel pull
        per slot index."""
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
        return out

    def _psrt_write_state(self, variables: Iterable[Any], tensors: dict[str, np.ndarray]) -> None:
        """Assigns values and slots from ``tensors`` (checkpoint names). Slots are written
        before values so that a variable reads as initialized only once fully restored."""
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
            self._invalidate(touched)

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


class _SyncState:
    """A synchronous train op's progress in one session: ``tag`` is the step its gradients
    are computed at (TF's ``sync_rep_local_step``), ``pushes`` how many it pushed at it."""

    __slots__ = ("op", "pushes", "tag")

    def __init__(self, op: TrainOp, tag: int) -> None:
        self.op = op
        self.tag = tag
        self.pushes = 0


def _expand_computed(leaves: list[Any], feeds: dict[str, Any]
                     ) -> tuple[list[Any], list[tuple[int, Any, _Fetch, int]]]:
    """The run's leaves with the inputs of its computed fetches appended, and those fetches
    as (leaf index, fetch, _Fetch of its inputs, index of its first input).

    A computed fetch (a ``psrt.summary`` op) has ``_psrt_fetch_inputs(feeds, fetched)``,
    returning a fetch structure of what its value needs (``fetched``: the run's leaves), and
    ``_psrt_compute(values, feeds)``, computing its value from theirs. Its inputs are fetched
    in the same run as every other leaf (variables in the same pull, each op once: a summary
    of a train op's loss sees that run's step); its own leaf becomes None until computed."""
    if not any(hasattr(type(leaf), "_psrt_compute") for leaf in leaves):
        return leaves, []
    out = list(leaves)
    computed: list[tuple[int, Any, _Fetch, int]] = []
    i = 0
    while i < len(out):
        leaf = out[i]
        if hasattr(type(leaf), "_psrt_compute"):
            inputs = _Fetch(leaf._psrt_fetch_inputs(feeds, leaves))
            computed.append((i, leaf, inputs, len(out)))
            out[i] = None
            out.extend(inputs.leaves)
        i += 1
    return out, computed


def _is_int_scalar(v: Any) -> bool:
    """True for integer scalar variables (the global step): fetched as a Python int."""
    return isinstance(v, Variable) and v.dtype.kind == "i" and v.shape == ()


def _wire(v: Any) -> np.dtype:
    """The dtype of ``v``'s values on the ps (int64 for an int32 variable)."""
    return getattr(v, "_wire_dtype", v.dtype)


def _part_views(v: Any, arr: np.ndarray) -> list[np.ndarray]:
    """Row ranges of ``arr`` for each part of ``v`` (one view for a plain variable); axis-0
    slices of a C-contiguous array are C-contiguous, so no copy is made."""
    if isinstance(v, PartitionedVariable):
        off = v.offsets
        return [arr[off[k]:off[k + 1]] for k in range(len(off) - 1)]
    return [arr]


def _fed_gradient(feeds: dict[str, Any], name: str, var: Any) -> Any:
    """The ``feed_dict`` value of a gradient given by feed name (``"g"`` or ``"g:0"``), as
    TF's placeholder: a missing feed is InvalidArgumentError naming it and the variable."""
    key = name[:-2] if name.endswith(":0") else name
    if key not in feeds:
        raise errors.InvalidArgumentError(
            None, None, f"You must feed a value for '{key}', the gradient of variable "
                        f"'{var.name}' ({np.dtype(var.dtype).name}{list(var.shape)})")
    return feeds[key]


def _feeds_by_name(feed_dict: dict[Any, Any] | None) -> dict[str, Any]:
    if not feed_dict:
        return {}
    out = {}
    for k, val in feed_dict.items():
        if isinstance(k, str):
            name = k
        elif hasattr(k, "name"):
            name = k.name
        else:
            raise TypeError(f"feed_dict key {k!r} must be a name (str) or have a .name")
        out[name[:-2] if name.endswith(":0") else name] = val
    return out
