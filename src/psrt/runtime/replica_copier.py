"""The copier of a replicated ps task: a restarted task copies its shards back.

With ``ps_replicas=2`` (docs/replication.md) every shard of the model lives on two ps tasks:
shard *k* on tasks *k* and *(k+1) mod N*. A ps task that was killed and restarted comes back
empty; the workers re-register their variables on it, and each such variable waits there,
*awaiting* a copy (docs/protocol.md, "Replication"). This thread finds them
(``_core.Server.awaiting_variables``), reads each from the other replica of its shard
(REPLICA_READ: value, slots, synchronous state and the marks of the requests it holds, taken
whole) and installs it (``_core.Server.replica_install``), while the workers go on training
against the live replica; their requests to this task wait for the copy of the variable they
touch, and the marks make the ones the copy already holds duplicates, so none is applied
twice or lost.

A variable no peer holds a value of (a job that is starting: the chief initializes it
soon) is left alone; one whose only other replica is gone too (two failures at once) stays
uninitialized, and the chief's session restores it from the latest checkpoint, as without
replication (a log line says which).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from psrt import _core
from psrt.distribute.cluster_spec import ClusterSpec
from psrt.framework import errors
from psrt.runtime import targets as _targets

_logger = logging.getLogger("psrt")

# How often the copier looks for variables awaiting a copy: often while some wait (a worker's
# request to them waits too), rarely when none do.
BUSY_INTERVAL_SECS = 0.05
IDLE_INTERVAL_SECS = 0.5
# One connect attempt to a peer; a peer that is down is tried again at the next look.
CONNECT_TIMEOUT_SECS = 1.0
# A variable that stays uncopyable this long is reported once (its peers hold no value of it).
REPORT_AFTER_SECS = 10.0


def replica_peers(task: int, num_ps: int) -> list[int]:
    """The ps tasks whose shards ps task ``task`` shares: the backup of its own shard
    (``task + 1``) and the owner of the shard it backs up (``task - 1``), mod ``num_ps``, each
    once, never ``task`` itself.

    Raises:
        ValueError: ``num_ps`` < 2 (one ps task cannot hold a replica elsewhere) or ``task``
            outside ``[0, num_ps)``.
    """
    if num_ps < 2:
        raise ValueError(f"replication needs at least 2 ps tasks; the cluster has {num_ps}")
    if not 0 <= task < num_ps:
        raise ValueError(f"ps task {task} is not in [0, {num_ps})")
    peers = []
    for p in ((task + 1) % num_ps, (task - 1) % num_ps):
        if p != task and p not in peers:
            peers.append(p)
    return peers


class ReplicaCopier:
    """The thread that installs the variables this ps task awaits from their other replica.

    Args:
        server: This task's ``_core.Server`` (replication switched on).
        cluster: The job's :class:`ClusterSpec` (its ``job`` names the ps tasks).
        job: This task's job name (``"ps"``).
        task: This task's index.
        secret: The job's secret (bytes, empty for none): the copier authenticates to its
            peers as any task does.
    """

    def __init__(self, server: Any, cluster: ClusterSpec, job: str, task: int,
                 secret: bytes) -> None:
        self._server = server
        self._cluster = cluster
        self._job = job
        self._task = task
        self._secret = secret
        self._peers = replica_peers(task, cluster.num_tasks(job))
        self._client: Any = None
        self._shard_of: dict[int, int] = {}   # peer task -> client shard
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first_seen: dict[str, float] = {}
        self._reported: set[str] = set()
        self.copied_variables = 0
        self.copied_bytes = 0

    @property
    def peers(self) -> list[int]:
        """The ps tasks this one copies from (ints)."""
        return list(self._peers)

    def start(self) -> None:
        """Starts the thread (daemon; idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"psrt-replica-copier-{self._task}")
            self._thread.start()

    def stop(self) -> None:
        """Stops the thread and closes its connections (idempotent)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._close_client()

    def _name(self, task: int | None = None) -> str:
        return f"/job:{self._job}/task:{self._task if task is None else task}"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.copy_once()
            except Exception:  # noqa: BLE001 -- the thread must outlive any one failure
                _logger.exception("%s: replica copy failed; retrying", self._name())
                self._close_client()
                busy = True
            self._stop.wait(BUSY_INTERVAL_SECS if busy else IDLE_INTERVAL_SECS)

    def copy_once(self) -> bool:
        """One look: installs every awaiting variable a peer holds a value of. Returns True
        while variables still await a copy."""
        if self._server.stopped:
            self._stop.set()
            return False
        names = list(self._server.awaiting_variables())
        if not names:
            self._first_seen.clear()
            return False
        now = time.monotonic()
        for n in names:
            self._first_seen.setdefault(n, now)
        start = time.monotonic()
        done: dict[int, tuple[int, int]] = {}    # peer -> (variables, bytes)
        wanted = set(names)
        for peer in self._peers:
            if not wanted:
                break
            listing = self._list_peer(peer)
            if listing is None:
                continue
            for record in listing:
                name = record["name"]
                if name not in wanted or not record["initialized"]:
                    continue
                state = self._read(peer, record)
                if state is None:
                    continue
                try:
                    self._server.replica_install(name, state)
                except errors.OpError as e:
                    # The variable is no longer awaiting (the chief initialized or restored
                    # it meanwhile), or its declaration differs from the peer's.
                    _logger.debug("%s: install of %r skipped: %s", self._name(), name, e)
                    continue
                wanted.discard(name)
                self._first_seen.pop(name, None)
                n_vars, n_bytes = done.get(peer, (0, 0))
                done[peer] = (n_vars + 1, n_bytes + len(state))
        secs = time.monotonic() - start
        for peer, (n_vars, n_bytes) in done.items():
            self.copied_variables += n_vars
            self.copied_bytes += n_bytes
            _logger.info("%s: copied %d variable(s) (%d bytes) from %s in %.3f s%s",
                         self._name(), n_vars, n_bytes, self._name(peer), secs,
                         "" if wanted else "; every variable this task holds is whole again")
        self._report_stuck(wanted)
        return bool(wanted)

    def _report_stuck(self, wanted: set[str]) -> None:
        now = time.monotonic()
        for name in sorted(wanted):
            if name in self._reported or now - self._first_seen.get(name, now) < \
                    REPORT_AFTER_SECS:
                continue
            self._reported.add(name)
            _logger.warning(
                "%s: variable %r awaits a copy, but no replica peer (%s) holds a value of it "
                "(a job still starting, or its other replica is lost too: then the chief "
                "restores it from the latest checkpoint)", self._name(), name,
                ", ".join(self._name(p) for p in self._peers))

    # ---- the peers ------------------------------------------------------------------------

    def _ensure_client(self) -> Any:
        if self._client is None:
            self._client = _core.Client(self._job, self._task, self._secret, 0.0)
            self._client.timeout = 60.0
            jobs = _targets.cluster_jobs(self._cluster)
            self._client.set_cluster([(j, d) for j, d, _ in jobs],
                                     _targets.describe_cluster(jobs))
            self._shard_of = {}
        return self._client

    def _close_client(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except errors.OpError:
                pass
        self._client = None
        self._shard_of = {}

    def _shard(self, peer: int) -> int | None:
        client = self._ensure_client()
        shard = self._shard_of.get(peer)
        if shard is not None:
            try:
                client.ping([shard])
                return shard
            except errors.OpError:
                # The peer restarted or went away: a fresh client reconnects every peer.
                self._close_client()
                client = self._ensure_client()
        shard = client.num_shards
        address = self._cluster.task_address(self._job, peer)
        try:
            client.connect(shard, address, CONNECT_TIMEOUT_SECS, self._job, peer)
        except errors.OpError as e:
            _logger.debug("%s: peer %s not reachable: %s", self._name(), self._name(peer), e)
            self._close_client()
            return None
        self._shard_of[peer] = shard
        return shard

    def _list_peer(self, peer: int) -> list[dict[str, Any]] | None:
        shard = self._shard(peer)
        if shard is None:
            return None
        try:
            return list(self._client.list_variables(shard))
        except errors.OpError as e:
            _logger.debug("%s: LIST of %s failed: %s", self._name(), self._name(peer), e)
            self._close_client()
            return None

    def _read(self, peer: int, record: dict[str, Any]) -> bytes | None:
        shard = self._shard_of.get(peer)
        if shard is None:
            return None
        try:
            return bytes(self._client.replica_read(shard, int(record["id"])))
        except errors.FailedPreconditionError as e:
            # The peer's copy is awaiting too (it restarted as well) or holds no value.
            _logger.debug("%s: %s has no value of %r to copy: %s", self._name(),
                          self._name(peer), record["name"], e)
            return None
        except errors.OpError as e:
            _logger.debug("%s: REPLICA_READ of %r from %s failed: %s", self._name(),
                          record["name"], self._name(peer), e)
            self._close_client()
            return None
