"""TF1's option messages that scripts build and pass along: ``RunOptions`` and
``RunMetadata`` (taken by ``Session.run`` and ``MonitoredSession.run``) and ``GPUOptions`` (for
``ConfigProto(gpu_options=...)``). psrt has no tracing and no GPUs, so they carry their
fields and change nothing; building a ``GPUOptions`` logs that at DEBUG. Field names and
defaults are those of TF's ``config.proto``. (``ServerDef`` is a real protobuf message:
framework/server_protos.py.)
"""

from __future__ import annotations

import logging
import os
from typing import Any

_logger = logging.getLogger("psrt")

# The environment variable psrt-launch --ps-replicas sets for every task: the default of
# ConfigProto.ps_replicas.
PS_REPLICAS_ENV = "PSRT_PS_REPLICAS"


def _ps_replicas(value: Any, where: str) -> int:
    """``value`` (an int, or the environment's text) as a number of ps replicas, 1 or 2;
    ValueError naming ``where``, the value and the valid choices otherwise."""
    try:
        n = int(value) if not isinstance(value, (bool, float)) else None
    except (TypeError, ValueError):
        n = None
    if n is None or str(n) != str(value).strip():
        raise ValueError(f"{where} must be a whole number, 1 (no replication) or 2 (every ps "
                         f"task's variables also on the next ps task); got {value!r}")
    if n not in (1, 2):
        raise ValueError(f"{where} {value!r} is not supported: only 1 (no replication) or 2 "
                         f"(every ps task's variables also on the next ps task)")
    return n


class _Message:
    """Keyword fields with defaults, printable, compared by value (as a proto message)."""

    _FIELDS: dict[str, Any] = {}

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(self._FIELDS))
        if unknown:
            raise ValueError(f"Protocol message {type(self).__name__} has no field(s) "
                             f"{', '.join(unknown)}; fields: {', '.join(self._FIELDS)}")
        for k, default in self._FIELDS.items():
            setattr(self, k, kwargs.get(k, default))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a proto message

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                           if v != self._FIELDS[k])
        return f"{type(self).__name__}({fields})"


class RunOptions(_Message):
    """``tf.RunOptions``: accepted by ``run(options=...)``; psrt does not trace, so
    ``trace_level`` changes nothing. ``timeout_in_ms`` is not applied either: use
    ``ConfigProto(operation_timeout_in_ms=...)``."""

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3
    _FIELDS = {"trace_level": 0, "timeout_in_ms": 0, "inter_op_thread_pool": 0,
               "output_partition_graphs": False, "debug_options": None,
               "report_tensor_allocations_upon_oom": False, "experimental": None}

    class TraceLevel:
        """TF's ``RunOptions.TraceLevel`` enum values."""

        NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3


class RunMetadata(_Message):
    """``tf.RunMetadata``: accepted by ``run(run_metadata=...)``; stays empty (psrt records
    no step stats or partition graphs)."""

    _FIELDS = {"step_stats": None, "cost_graph": None, "partition_graphs": (),
               "function_graphs": ()}


class GPUOptions(_Message):
    """``tf.GPUOptions``: accepted (e.g. in ``ConfigProto(gpu_options=...)``) and ignored:
    psrt computes on the CPU with numpy."""

    _FIELDS = {"per_process_gpu_memory_fraction": 0.0, "allow_growth": False,
               "allocator_type": "", "deferred_deletion_bytes": 0, "visible_device_list": "",
               "polling_active_delay_usecs": 0, "polling_inactive_delay_msecs": 0,
               "force_gpu_compatible": False, "experimental": None}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _logger.debug("GPUOptions%s ignored: psrt has no GPU devices", kwargs or "()")


# tf.ConfigProto's fields psrt accepts and ignores (config.proto, r1.15), with TF's defaults:
# each is an attribute a script may read or set (``config.allow_soft_placement = True``);
# ``gpu_options`` is a GPUOptions (``config.gpu_options.allow_growth = True``).
_TF_IGNORED_FIELDS: dict[str, Any] = {
    "device_count": dict,
    "inter_op_parallelism_threads": 0, "use_per_session_threads": False,
    "session_inter_op_thread_pool": list, "placement_period": 0, "device_filters": list,
    "gpu_options": GPUOptions, "allow_soft_placement": False, "log_device_placement": False,
    "graph_options": None, "rpc_options": None, "isolate_session_state": False,
    "experimental": None,
}


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
            disables it. A new session's connect attempts last at most a quarter of it
            (within [0.5, 2] s) each, so a ps task reachable again after a partition is
            reached within about one ping interval. Long pushes and synchronous waits never count as silence.
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
            ``chunk_bytes`` (default 512 KiB: the smallest chunk at which a 4 MB push+apply
            ran at >= 0.9x a raw socket in benchmarks/test_bench_transport.py; 4 MiB, BytePS's
            partition size, left a single-chunk push unable to overlap its apply, 0.56-0.64x)
            is read and applied chunk by chunk, each chunk whole, while the next one arrives,
            so no frame limit caps a variable. All connections together hold at most
            ``max_inflight_bytes`` (default 256 MiB: 512 chunks in flight) of received payload not yet applied; past it the ps stops reading its
            sockets and senders wait, so its memory does not grow with the number of workers.
            A peer that stops sending in the middle of a frame for ``stall_timeout_secs``
            (default 60) is dropped and its buffers freed.
        atomic_pushes: psrt only (default False). A dense gradient larger than the ps
            task's ``chunk_bytes`` is applied only once all of it arrived (wire version 6,
            PUSH ``ATOMIC``): a worker dying in the middle of a push leaves the variable as
            it was, instead of updated chunk by chunk up to the break. It must fit the ps
            task's ``max_inflight_bytes`` (else ResourceExhaustedError) and costs the
            overlap of receiving and applying (benchmarks/test_bench_transport.py).
            Synchronous training needs none: a step-tagged gradient counts only whole.
        ps_replicas: psrt only (issue 23): copies of each ps task's variables, 1 (default:
            none) or 2: the variables of ``/job:ps/task:k`` also live on ``/job:ps/task:k+1``
            (mod the number of ps tasks, which must then be >= 2), every update goes to both
            and reads to the first live whole copy, so a lost ps task loses no acknowledged
            update and stops no worker. None (default): ``PSRT_PS_REPLICAS`` (what
            ``psrt-launch --ps-replicas`` sets), else 1.
        ps_memory_limit_bytes: psrt only, for servers made with this config: the bytes a
            ps task's variables (values, optimizer slots, synchronous sums, table rows) may
            hold; a registration, table growth or initial value past it is refused with
            ResourceExhaustedError naming the variable, the bytes asked and the limit, before
            anything is allocated. None (default): ``PSRT_PS_MEMORY_LIMIT`` (bytes, or with a
            K/M/G/T suffix), else the cgroup's or the machine's memory minus a margin
            (psrt.runtime.memory_limit); 0: no limit.
        intra_op_parallelism_threads: As TF's: the threads one op may use. psrt's conv2d
            passes (forward, filter and input gradients) split their chunks of images over
            that many threads, with single-threaded GEMMs meanwhile
            (psrt/ops/conv_threads.py). 0 (default): the BLAS's thread count decides.
            A session with a value > 0 sets it for the whole process (the last such one wins).
        device_filters, allow_soft_placement, log_device_placement, gpu_options, ...: TF's
            other fields (config.proto), accepted and ignored, for TF compatibility; each is
            an attribute with TF's default (``gpu_options`` a :class:`GPUOptions`, so
            ``config.gpu_options.allow_growth = True`` works as in TF).

    Raises:
        ValueError: ``sync_timeout_secs`` is not > 0, a timeout or limit is negative, or
            ``ps_replicas`` (or ``PSRT_PS_REPLICAS``) is not 1 or 2;
            ``intra_op_parallelism_threads`` is negative.
    """

    def __init__(self, operation_timeout_in_ms: int = 0, connect_timeout_secs: float = 300.0,
                 cluster_def: Any = None, sync_timeout_secs: float = 300.0,
                 heartbeat_timeout_secs: float = 20.0, auth_secret: str | bytes | None = None,
                 hello_timeout_secs: float = 10.0, idle_timeout_secs: float = 600.0,
                 max_connections: int = 1024, max_inflight_bytes: int = 256 << 20,
                 chunk_bytes: int = 512 << 10, stall_timeout_secs: float = 60.0,
                 atomic_pushes: bool = False, ps_memory_limit_bytes: int | None = None,
                 ps_replicas: int | None = None, intra_op_parallelism_threads: int = 0,
                 **ignored: Any) -> None:
        self.operation_timeout_in_ms = int(operation_timeout_in_ms)
        if not int(intra_op_parallelism_threads) >= 0:
            raise ValueError(f"intra_op_parallelism_threads must be >= 0 (0: the BLAS's thread "
                             f"count decides); got {intra_op_parallelism_threads!r}")
        self.intra_op_parallelism_threads = int(intra_op_parallelism_threads)
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
        self.atomic_pushes = bool(atomic_pushes)
        if ps_memory_limit_bytes is not None and not int(ps_memory_limit_bytes) >= 0:
            raise ValueError(f"ps_memory_limit_bytes must be >= 0 bytes (0: no limit) or None; "
                             f"got {ps_memory_limit_bytes!r}")
        self.ps_memory_limit_bytes = (None if ps_memory_limit_bytes is None
                                      else int(ps_memory_limit_bytes))
        if ps_replicas is not None:
            self.ps_replicas = _ps_replicas(ps_replicas, "ps_replicas")
        else:
            env = os.environ.get(PS_REPLICAS_ENV, "")
            self.ps_replicas = _ps_replicas(env, PS_REPLICAS_ENV) if env.strip() else 1
        for name, default in _TF_IGNORED_FIELDS.items():
            value = ignored.pop(name) if name in ignored else \
                (default() if callable(default) else default)
            setattr(self, name, value)
        # Other names (psrt's older keywords, fields of later TF releases): kept, unused.
        self.ignored = ignored
