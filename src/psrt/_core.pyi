"""Type stub for psrt._core, the C++ core (csrc/bindings.cc).

Mirrors the compiled module exactly: every public name, parameter name, default and
keyword-only marker (tests/test_core_stub.py checks it against the module's signatures).
Errors are raised as psrt.errors classes, one per canonical status code. Every blocking call
releases the GIL after its arguments are converted; arrays are used in place, never copied,
and no pointer to them is kept after the call returns.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

WIRE_VERSION: Final = 7
"""The wire protocol version this build speaks (docs/protocol.md)."""
HEADER_SIZE: Final = 64
"""Bytes in a frame header."""
DEFAULT_MAX_PAYLOAD: Final = 2147483648
"""A Server's default frame payload limit in bytes (2 GiB)."""
OPTIMIZER_STATE_SLOT: Final = 255
"""The slot index of Adam's (beta1_power, beta2_power), a float64[2], for pull/assign."""

# ---- Kernels ---------------------------------------------------------------------------------

def sha256(data: bytes) -> bytes:
    """SHA-256 digest (32 bytes), FIPS 180-4; the core's own implementation."""

def hmac_sha256(key: bytes, msg: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104) of msg under key: 32 bytes."""

def compiled_kernel_targets() -> list[str]:
    """Instruction-set targets compiled into this build, best first."""

def kernel_targets() -> list[str]:
    """Compiled targets this CPU can run, best first."""

def kernel_target() -> str:
    """The target in use (PSRT_KERNEL_TARGET forces one at first use)."""

def set_kernel_target(name: str) -> None:
    """Selects a target. Raises InvalidArgumentError naming the supported ones."""

def apply_dense(
    optimizer: str,
    var: npt.NDArray[Any],
    slots: Sequence[npt.NDArray[Any]],
    grad: npt.NDArray[Any],
    *,
    learning_rate: float,
    momentum: float = 0.0,
    use_nesterov: bool = False,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float | None = None,
    beta1_power: float = 0.0,
    beta2_power: float = 0.0,
    rho: float | None = None,
    l1: float = 0.0,
    l2: float = 0.0,
    l2_shrinkage: float = 0.0,
    lr_power: float = -0.5,
    global_step: int = 0,
) -> None:
    """One fused TF1 optimizer step on float32/float64 C-contiguous arrays, in place.

    optimizer: GradientDescent, Adagrad, Momentum, Adam, Adadelta, AdagradDA, Ftrl,
    ProximalGradientDescent, ProximalAdagrad, RMSProp or CenteredRMSProp; ``slots`` in
    ``slot_names(optimizer)`` order. The keywords are the inputs of TF's Apply* kernel:
    ``rho`` is Adadelta's rho and RMSProp's decay; ``l2_shrinkage`` > 0 makes Ftrl TF's
    FtrlV2; ``global_step`` is the step AdagradDA applies (TF passes its global step + 1).
    ``rho``/``epsilon`` None: TF1's default for the optimizer (Adadelta 0.95/1e-8, RMSProp
    0.9/1e-10, Adam epsilon 1e-8). Raises InvalidArgumentError before writing anything for
    a bad array or a hyper-parameter TF's kernel refuses."""

def apply_sparse(
    optimizer: str,
    var: npt.NDArray[Any],
    slots: Sequence[npt.NDArray[Any]],
    indices: npt.NDArray[np.int64],
    rows: npt.NDArray[Any],
    *,
    learning_rate: float,
    momentum: float = 0.0,
    use_nesterov: bool = False,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float | None = None,
    beta1_power: float = 0.0,
    beta2_power: float = 0.0,
    rho: float | None = None,
    l1: float = 0.0,
    l2: float = 0.0,
    l2_shrinkage: float = 0.0,
    lr_power: float = -0.5,
    global_step: int = 0,
) -> None:
    """Row-sparse step: row indices[j] of var is updated with rows[j]; duplicates summed,
    then each row updated by TF's SparseApply* formula. Arguments as apply_dense; an index
    out of range raises InvalidArgumentError and writes nothing."""

def slot_names(optimizer: str) -> list[str]:
    """The names of the optimizer's slots, in the order apply_* takes them ("Adagrad";
    "Adam", "Adam_1"; Adadelta "accum", "accum_update"; RMSProp "rms", "momentum"; ...)."""

# ---- Transport ------------------------------------------------------------------------------

class Server:
    """A ps task's server: listens on host:port and serves every connection on its own C++
    thread (none takes the GIL). Raises UnavailableError "address H:P already in use"."""

    def __init__(
        self,
        host: str,
        port: int,
        job: str = "ps",
        task: int = 0,
        max_payload: int = 2147483648,
        secret: bytes = b"",
        hello_timeout: float = 10.0,
        idle_timeout: float = 600.0,
        max_connections: int = 1024,
        chunk_bytes: int = 524288,
        max_inflight_bytes: int = 268435456,
        stall_timeout: float = 60.0,
        cluster_def: str = "",
        auth_failures_per_s: float = 1.0,
        auth_failure_burst: float = 10.0,
        auth_summary_s: float = 10.0,
        memory_limit_bytes: int = 0,
    ) -> None:
        """secret: the job's shared secret (b"": no authentication); with one every connection
        must answer HELLO's HMAC-SHA256 challenge before any other request. hello_timeout
        (seconds): a connection that has not completed HELLO/AUTH by then is closed.
        idle_timeout (seconds): a connection with no frame for that long is closed, unless
        (a request connection) its task's heartbeat is alive. max_connections: past it new
        peers get RESOURCE_EXHAUSTED. <= 0 disables a limit. chunk_bytes: a dense PUSH,
        ASSIGN or initial value larger than this is read and applied chunk by chunk (each
        chunk whole). max_inflight_bytes: received payload held at once over all connections;
        past it sockets are not read (backpressure). stall_timeout (seconds): a peer silent
        in the middle of a frame that long is dropped. cluster_def: the cluster this task
        belongs to (JSON, at most 1 MiB), answered to CLUSTER_INFO (Client.cluster_info).
        auth_failures_per_s, auth_failure_burst: with a secret, failed authentications per
        peer host: after a burst of auth_failure_burst, at most auth_failures_per_s (<= 0:
        unlimited); past it the host's new connections are refused at accept with
        UNAVAILABLE, and what was refused is summarized in the events once per
        auth_summary_s seconds ("refused N failed authentications from HOST in the last S
        s"). memory_limit_bytes: the bytes this task's variables (values, slots, synchronous
        sums, table rows) may hold (0: no limit); a registration, table growth or initial
        value past it is RESOURCE_EXHAUSTED, refused before anything is allocated."""
    @property
    def port(self) -> int:
        """The bound port (the OS's choice when constructed with port 0)."""
    @property
    def incarnation(self) -> int:
        """A random positive id of this server's lifetime, sent in every HELLO reply."""
    @property
    def stopped(self) -> bool: ...
    def stop(self) -> None:
        """Closes every connection and the port, joins the threads. Idempotent."""
    def wait(self, timeout: float) -> bool:
        """Blocks up to timeout seconds (< 0: forever) for stop(); True once stopped."""
    def done_workers(self) -> list[tuple[str, int]]:
        """(job, task) of every worker that sent WORKER_DONE."""
    def num_connections(self) -> int: ...
    def num_variables(self) -> int: ...
    def peak_inflight_bytes(self) -> int:
        """The most received-but-unapplied payload bytes held at once so far."""
    def reserved_bytes(self) -> int:
        """The bytes held against memory_limit_bytes now."""
    def set_cluster_def(self, cluster_def: str) -> None:
        """Replaces what CLUSTER_INFO answers (JSON, at most 1 MiB; InvalidArgumentError
        past it)."""
    def set_cluster_jobs(self, jobs: list[tuple[str, int, str]]) -> None:
        """(job, digest, "addr, addr") of the jobs of this task's cluster known in full
        (psrt.runtime.targets.cluster_jobs): a HELLO whose digest of one of them differs,
        or that means to reach another task, is refused with FAILED_PRECONDITION."""
    def take_events(self) -> list[str]:
        """Events since the last call, oldest first: failed authentication (with the peer's
        host:port), unauthenticated requests, idle or silent peers closed, peers refused past
        max_connections. At most 1000 are kept."""
    # ---- ps replication (wire version 7; docs/protocol.md "Replication") ----
    def set_replication(self, on: bool) -> None:
        """Turns replication on (before serving): every mutation holds its variable's
        replication section, a variable registered without a value awaits a copy (its
        mutations wait for it up to replica_wait_s, its reads answer AWAITING), and
        REPLICA_READ / REPLICA_INSTALL are served. Off (the default): none of it, no lock
        taken; turning it off ends every awaiting state."""
    @property
    def replication(self) -> bool:
        """Whether replication is on."""
    @property
    def replica_wait_s(self) -> float:
        """Seconds a mutation of an awaiting variable waits for its copy before it proceeds
        (and fails as uninitialized); default 30. InvalidArgumentError outside 0..3600."""
    @replica_wait_s.setter
    def replica_wait_s(self, value: float) -> None: ...
    def awaiting_variables(self) -> list[str]:
        """Names of the variables awaiting a copy, in id order (cheap when none)."""
    def marks(self) -> list[tuple[int, int]]:
        """(client id, highest SEQUENCED request id completed) per client, sorted by client
        id; at most 4096 clients (the least recently used is dropped)."""
    def replica_install(self, name: str, state: bytes) -> None:
        """Installs a ReplicaState (Client.replica_read's bytes) into the variable `name`, all
        or nothing: value, slots, optimizer state, synchronous state or table rows, and the
        record's marks as the variable's install marks (SEQUENCED requests at or below them
        are duplicates). The variable becomes initialized and awaits no more; the model epoch
        does not change. NotFoundError for an unknown name; InvalidArgumentError naming both
        declarations for another variable's record, or naming the bad count, index or length;
        FailedPreconditionError when replication is off; ResourceExhaustedError out of
        memory or past a table's max_rows. Runs without the GIL."""

class Client:
    """A worker's connections to its ps tasks (shards). Batched calls send every request to
    every shard before awaiting any reply. One call at a time; errors on a connection are
    sticky (its first failure is raised again by every later call on that shard)."""

    def __init__(self, job: str, task: int, secret: bytes = b"",
                 heartbeat_timeout: float = 0.0) -> None:
        """secret: the job's shared secret (b"": none). heartbeat_timeout (seconds, <= 0: off):
        each connect also opens a heartbeat connection; a ps task that leaves a PING
        unanswered that long fails the pending and later calls with UnavailableError."""
    def connect(self, shard: int, address: str, timeout: float, expect_job: str = "",
                expect_task: int = -1) -> None:
        """Connects shard to "host:port", retrying refused connections until timeout seconds,
        then exchanges HELLO. Raises UnavailableError naming /job:ps/task:K and the address;
        FailedPreconditionError naming both versions on a wire version mismatch. With
        expect_job, the task there must be /job:expect_job/task:expect_task and agree with
        set_cluster's digests: FailedPreconditionError naming both tasks and this worker's
        cluster otherwise."""
    def set_cluster(self, jobs: list[tuple[str, int]], description: str) -> None:
        """(job, digest) of this worker's cluster, carried by every later HELLO, and the
        cluster as error messages show it."""
    @property
    def atomic_pushes(self) -> bool:
        """Dense pushes carry the ATOMIC flag: applied only once all of the gradient
        arrived (ConfigProto.atomic_pushes)."""
    @atomic_pushes.setter
    def atomic_pushes(self, arg0: bool) -> None: ...
    @property
    def num_shards(self) -> int: ...
    @property
    def bytes_sent(self) -> int:
        """Bytes sent on the request connections so far (headers and payloads); readable from
        any thread, also while another one is inside a call (progress reports)."""
    @property
    def bytes_received(self) -> int:
        """Bytes received on the request connections so far (headers and payloads); readable
        from any thread, also while another one is inside a call."""
    @property
    def client_id(self) -> int:
        """The random non-zero id (u64) every HELLO of this client carries (wire version 7):
        the key of its SEQUENCED requests on each ps task."""
    def shard_name(self, shard: int) -> str:
        """"/job:ps/task:K at host:port"."""
    def incarnation(self, shard: int) -> int:
        """The incarnation the shard's server sent in HELLO (0 when not connected)."""
    @property
    def timeout(self) -> float:
        """Deadline in seconds for every batched call (< 0: none; default -1)."""
    @timeout.setter
    def timeout(self, arg0: float) -> None: ...
    def register(
        self,
        specs: list[
            tuple[
                int,
                str,
                str,
                Sequence[int],
                str,
                Mapping[str, float],
                npt.NDArray[Any] | Mapping[str, Any] | None,
            ]
        ],
    ) -> list[tuple[int, bool]]:
        """Declares variables, each (shard, name, dtype, shape, optimizer, hyper-parameters,
        initial value or None), returning (handle, initialized) for each. Hyper-parameter
        keys: learning_rate, momentum, beta1, beta2, epsilon, slot_init, use_locking,
        use_nesterov, replicas_to_aggregate/total_num_replicas (whole numbers, both 0
        or absent: asynchronous) for synchronous training, and rho, l1, l2, l2_shrinkage,
        lr_power, slot_init2, slot_init3. The initial value may also be an initializer the ps
        task runs (the worker never holds the value): {"kind": "zeros" | "ones" | "constant"
        | "random_uniform" | "random_normal" | "truncated_normal" | "variance_scaling", "a",
        "b", "fan_mode", "distribution", "seed", "offset", "full_shape"} (docs/protocol.md,
        Initializers)."""
    def var_info(self, handle: int) -> tuple[int, int, str, str, tuple[int, ...]]:
        """(shard, id, name, dtype, shape) of a registered variable."""
    def pull(
        self,
        handles: Sequence[int],
        outs: Sequence[npt.NDArray[Any]],
        slot: int = 0,
    ) -> None:
        """Fills each out (writable, C-contiguous, the variable's dtype and shape) in place."""
    def push(
        self,
        handles: Sequence[int],
        grads: Sequence[npt.NDArray[Any]],
        learning_rate: float | None = None,
        step_handle: int = -1,
        step_delta: int = 1,
        return_values: Sequence[npt.NDArray[Any]] | None = None,
        sparse_handles: Sequence[int] = [],
        sparse_indices: Sequence[npt.NDArray[np.int64]] = [],
        sparse_rows: Sequence[npt.NDArray[Any]] = [],
    ) -> int:
        """Applies dense gradients (C-contiguous, the variable's dtype and shape) on the ps
        tasks, and row-sparse ones (sparse_rows[i][j] updates row sparse_indices[i][j] of
        sparse_handles[i]) in the same batch: one parallel round trip; bumps step_handle by
        step_delta in it too and returns the new step (-1 without one). return_values
        receive each dense variable's value after its update."""
    def pull_rows_batch(
        self,
        handles: Sequence[int],
        indices: Sequence[npt.NDArray[np.int64]],
        outs: Sequence[npt.NDArray[Any]],
    ) -> None:
        """pull_rows of several variables in one parallel round trip."""
    def push_sparse(
        self,
        handle: int,
        indices: npt.NDArray[np.int64],
        rows: npt.NDArray[Any],
        learning_rate: float | None = None,
        step_handle: int = -1,
        step_delta: int = 1,
    ) -> int:
        """Row-sparse gradient: rows[j] updates row indices[j]. Returns the new step or -1."""
    def pull_rows(
        self,
        handle: int,
        indices: npt.NDArray[np.int64],
        out: npt.NDArray[Any],
    ) -> None:
        """out[j] = row indices[j] of the variable."""
    def assign(
        self,
        handles: Sequence[int],
        values: Sequence[npt.NDArray[Any]],
        slot: int = 0,
        restore: bool = False,
    ) -> None:
        """Overwrites slot `slot` (0: the value) of each variable. restore=True (slot 0 only)
        marks a checkpoint restore: a synchronous variable's step and pending gradients are
        reset too."""
    def sync_step(
        self,
        push_handles: Sequence[int],
        grads: Sequence[npt.NDArray[Any]],
        sparse_handles: Sequence[int],
        sparse_indices: Sequence[npt.NDArray[np.int64]],
        sparse_rows: Sequence[npt.NDArray[Any]],
        lr: float | None,
        tag: int,
        step_handle: int,
        increment: bool,
        wait_handles: Sequence[int],
        outs: Sequence[npt.NDArray[Any]],
        needs: Sequence[int],
        step_need: int,
        wait_secs: float,
    ) -> tuple[list[bool], list[tuple[bool, int, int]], tuple[bool, int, int]]:
        """One synchronous training step in one parallel round trip: gradients tagged with
        step `tag` (dense, then row-sparse), the global step's tagged increment (when
        `increment`), then waits: each wait holds until that variable's step >= needs[i]
        (global step: its value >= step_need), at most wait_secs seconds (0..60), and then
        fills outs[i]. Returns (accepted per push (False: dropped as stale), (ready, step,
        gradients collected) per wait, (ready, value, count) of the global step or
        (True, -1, 0) without one). A wait that was not ready leaves its out untouched.
        Raises OutOfRangeError once synchronous training ended (too few workers left)."""
    def assign_add(
        self,
        handles: Sequence[int],
        values: Sequence[npt.NDArray[Any]],
    ) -> None: ...
    def step_read(self, handle: int) -> int: ...
    def step_increment(self, handle: int, delta: int = 1) -> int:
        """Atomically adds delta to an int64 scalar; returns the new value."""
    def is_initialized(self, handles: Sequence[int]) -> list[bool]: ...
    def list_variables(self, shard: int) -> list[dict[str, Any]]:
        """Every variable on the shard: {"id", "name", "dtype", "shape", "initialized",
        "optimizer", "table", "rows", "bytes"}, in id order. A hash table's "rows" are its
        rows and "bytes" the memory they hold; a variable's are its element count and the
        bytes of its value and slots."""
    def table_export(
        self, handle: int, cursor: int, max_rows: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[Any],
               list[npt.NDArray[Any]], int]:
        """A page of a hash table's rows from position `cursor` (0 first), at most max_rows:
        (ids int64[n], update counts int64[n], values [n, row...], one array per optimizer
        slot, next cursor or -1 when done)."""
    def table_import(
        self,
        handle: int,
        ids: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
        values: npt.NDArray[Any],
        slots: Sequence[npt.NDArray[Any]],
        clear: bool,
    ) -> None:
        """Writes rows into a hash table (created or overwritten); clear empties it first
        (a restore). ResourceExhaustedError past its max_rows."""
    def table_evict(self, handle: int, unseen: int, min_count: int) -> tuple[int, int]:
        """Removes the rows not seen for >= unseen updates of the table (0: rule off) or
        updated fewer than min_count times (0: rule off): (rows evicted, rows left)."""
    def cluster_info(self, shard: int) -> bytes:
        """The cluster definition (JSON) the task at `shard` was started with; b"" when
        it has none."""
    def replica_read(self, shard: int, var_id: int) -> bytes:
        """REPLICA_READ (wire version 7): the ReplicaState record (docs/protocol.md) of the
        variable with id var_id (list_variables' "id") on `shard`, taken in its exclusive
        replication section, for a ps task's copier (Server.replica_install).
        FailedPreconditionError when that ps task's replication is off or the variable holds
        no value (uninitialized or awaiting a copy itself); ResourceExhaustedError naming it
        past the ps task's max_payload; NotFoundError for an unknown id."""
    def ping(self, shards: Sequence[int]) -> None: ...
    def worker_done(self, job: str, task: int) -> None:
        """Tells every connected shard that worker /job:job/task:task closed its session
        (except replicas this client lost and has not reconnected)."""
    def set_replicas(self, shard: int, replicas: Sequence[int]) -> None:
        """Declares that shard `shard`'s variables live on the connected shards `replicas`
        (preference order, starting with `shard`; ps replication, docs/protocol.md). Before
        any variable of the shard is registered. Mutations then go to every live replica
        (one SEQUENCED request id), reads to the first whole one; a lost replica is redialed
        every 0.5 s, registered again and read again once an IS_INITIALIZED check finds a
        whole copy. Raises InvalidArgumentError naming a bad list,
        FailedPreconditionError when the shard has variables or replicas already; later calls
        raise UnavailableError when a group's last whole replica is lost."""
    def replica_status(self) -> list[tuple[int, str]]:
        """(shard, "whole" | "joining" | "dead") of every shard that is a replica."""
    def failovers(self) -> int:
        """How many times a lost replica's reads moved to another whole replica."""
    def close(self) -> None:
        """Closes every connection (idempotent); later calls raise CancelledError."""
