"""Server: one task of a cluster, as ``tf.train.Server``.

Every task runs one. A ps task's server holds the variables placed on it and serves pushes
and pulls on C++ threads that never take the GIL; its Python thread sits in :meth:`join`.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from psrt import _core
from psrt.distribute.cluster_spec import ClusterSpec
from psrt.framework import errors
from psrt.framework.protos import ConfigProto
from psrt.framework.server_protos import is_message
from psrt.runtime import auth as _auth
from psrt.runtime import memory_limit as _memory_limit
from psrt.runtime import replica_copier as _replica_copier
from psrt.runtime import targets as _targets

_logger = logging.getLogger("psrt")

EXIT_WHEN_WORKERS_DONE_ENV = "PSRT_EXIT_WHEN_WORKERS_DONE"


def _split_port(address: str) -> tuple[str, int]:
    """The host (brackets of an IPv6 one removed) and port of an address ClusterSpec
    checked."""
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


class Server:
    """An in-process server for one task of a cluster, as ``tf.train.Server``.

    Args:
        server_or_cluster_def: A :class:`ClusterSpec`, a dict that ``ClusterSpec`` takes, a
            ``tf.train.ClusterDef``, or a ``tf.train.ServerDef`` whose ``job_name``,
            ``task_index`` and ``protocol`` are used where the arguments are None (TF's
            ``_make_server_def``).
        job_name: This task's job; may be omitted when the cluster has one job.
        task_index: This task's index; may be omitted when the job has one task.
        protocol: Accepted for TF compatibility ("grpc" or None); psrt speaks its own TCP
            protocol (docs/protocol.md).
        config: A :class:`psrt.ConfigProto` (TF's ``config``); the server reads its job secret
            (``auth_secret``), ``hello_timeout_secs``, ``idle_timeout_secs``,
            ``max_connections``, ``chunk_bytes``, ``max_inflight_bytes`` and
            ``stall_timeout_secs``, ``ps_memory_limit_bytes`` (psrt.runtime.memory_limit),
            ``ps_replicas`` (or ``PSRT_PS_REPLICAS``: 2 makes a ps task hold the backup of the
            previous task's shard and copy what it holds back after a restart,
            docs/replication.md). Anything else (None, TF's own proto) means the defaults.
        start: Start serving at once (default True).

    Raises:
        ValueError: "Must specify an explicit `job_name`." / "... `task_index`." when they
            cannot be inferred; an unknown job or task index, naming the valid ones; a
            malformed address in the cluster (no port, a port out of range, ...), naming it,
            its job and its index (:class:`ClusterSpec`).
        UnavailableError: the port is already in use (the message says "already in use").
        ValueError: a bad ``PSRT_PS_MEMORY_LIMIT``, naming it and the valid forms; a
            ``ps_replicas`` / ``PSRT_PS_REPLICAS`` other than 1 or 2, or 2 on a cluster with
            one ps task.
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None,
                 config: Any = None, start: bool = True) -> None:
        if is_message(server_or_cluster_def, "ServerDef"):
            server_def = server_or_cluster_def
            if job_name is None and server_def.job_name:
                job_name = server_def.job_name
            if task_index is None:
                task_index = server_def.task_index
            if protocol is None and server_def.protocol:
                protocol = server_def.protocol
            server_or_cluster_def = server_def.cluster
        cluster = ClusterSpec(server_or_cluster_def)
        if protocol not in (None, "grpc", "psrt"):
            raise ValueError(f"protocol {protocol!r} not supported; use None, 'grpc' or 'psrt'")
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("Must specify an explicit `job_name`.")
            job_name = cluster.jobs[0]
        if job_name not in cluster.jobs:
            raise ValueError(f"Job '{job_name}' is not in the cluster; jobs: {cluster.jobs}")
        if task_index is None:
            indices = cluster.task_indices(job_name)
            if len(indices) != 1:
                raise ValueError("Must specify an explicit `task_index`.")
            task_index = indices[0]
        if task_index not in cluster.task_indices(job_name):
            raise ValueError(f"Task index {task_index} is not in job '{job_name}'; valid "
                             f"indices: {cluster.task_indices(job_name)}")
        self._cluster = cluster
        self._job = job_name
        self._task = int(task_index)
        self._address = cluster.task_address(job_name, self._task)
        self._host, self._port = _split_port(self._address)
        self._core: _core.Server | None = None
        self._lock = threading.Lock()
        self._config = config if isinstance(config, ConfigProto) else ConfigProto()
        self._secret = _auth.resolve_secret(self._config.auth_secret)
        self._memory_limit = _memory_limit.resolve_memory_limit(
            self._config.ps_memory_limit_bytes)
        # ps replication (docs/replication.md): a ps task of a job with 2 copies of each shard
        # holds its own shard and the backup of the previous task's, and copies them back
        # after a restart.
        self._replicated = job_name == "ps" and self._config.ps_replicas > 1
        if self._replicated:
            _replica_copier.replica_peers(self._task, cluster.num_tasks("ps"))
        self._copier: _replica_copier.ReplicaCopier | None = None
        if start:
            self.start()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> "Server":
        """A single-task server on a free localhost port, as TF's ``create_local_server``."""
        return Server({"localhost": ["127.0.0.1:0"]}, job_name="localhost", task_index=0,
                      config=config, start=start)

    @property
    def target(self) -> str:
        """The address a :class:`psrt.Session` connects to (``psrt://host:port``)."""
        return f"psrt://{self._connect_host()}:{self.port}"

    @property
    def server_def_cluster(self) -> ClusterSpec:
        """The cluster this server belongs to (its port filled in if it was 0)."""
        return self._cluster

    @property
    def job_name(self) -> str:
        """This task's job (str)."""
        return self._job

    @property
    def task_index(self) -> int:
        """This task's index (int)."""
        return self._task

    @property
    def port(self) -> int:
        """The bound port (the OS's choice when the cluster said port 0)."""
        return self._core.port if self._core is not None else self._port

    def _connect_host(self) -> str:
        return "127.0.0.1" if self._host in ("0.0.0.0", "", "::") else self._host

    def start(self) -> None:
        """Starts serving (idempotent while running).

        Raises:
            UnavailableError: the port is already in use.
        """
        with self._lock:
            if self._core is not None and not self._core.stopped:
                return
            c = self._config
            self._core = _core.Server(self._host, self._port, self._job, self._task,
                                      _core.DEFAULT_MAX_PAYLOAD, self._secret,
                                      c.hello_timeout_secs, c.idle_timeout_secs,
                                      c.max_connections, c.chunk_bytes, c.max_inflight_bytes,
                                      c.stall_timeout_secs,
                                      memory_limit_bytes=self._memory_limit)
            if self._replicated:
                self._core.set_replication(True)
            _auth.warn_if_unprotected(self._host, self._core.port, self._secret, self._name())
            if self._port == 0:
                # Make the cluster (and so sessions of this process) name the bound port.
                d = self._cluster.as_dict()
                tasks = d[self._job]
                new = f"{self._connect_host()}:{self._core.port}"
                if isinstance(tasks, list):
                    tasks[self._task] = new
                else:
                    tasks[self._task] = new
                self._cluster = ClusterSpec(d)
                self._port = self._core.port
            # What a Session('grpc://<this task>') in another process learns from CLUSTER_INFO.
            self._core.set_cluster_def(
                _targets.cluster_def_json(self._cluster, self._job, self._task))
            # What HELLO compares (wire version 6): a peer given another cluster is refused.
            self._core.set_cluster_jobs(_targets.cluster_jobs(self._cluster))
            _targets.register(self.target, self)
            if self._replicated:
                self._copier = _replica_copier.ReplicaCopier(
                    self._core, self._cluster, self._job, self._task, self._secret)
                self._copier.start()
            # TF's server logs this line ("Started server with target: grpc://...").
            host = f"[{self._host}]" if ":" in self._host else self._host
            _logger.info("Started server with target: %s (%s, listening on %s:%d)",
                         self.target, self._name(), host, self._core.port)

    def stop(self) -> None:
        """Stops serving and frees the port (psrt addition; TF servers never stop). Until
        then a started server serves even when the script keeps no reference to it (as TF's,
        until the process ends)."""
        with self._lock:
            if self._copier is not None:
                self._copier.stop()
                self._copier = None
            if self._core is not None:
                self._core.stop()
            _targets.release(self)

    def join(self, exit_when_workers_done: bool | None = None) -> None:
        """Blocks until the server stops, as ``tf.train.Server.join``; the GIL is released
        while waiting.

        SIGINT and SIGTERM (when called from the main thread) stop the server and exit the
        process with status 0 (``SystemExit(0)``), so a ps task ends cleanly when its
        launcher or scheduler stops it.

        Args:
            exit_when_workers_done: Beyond TF: return once every worker task of the cluster
                (jobs "worker", "chief", "master") has closed its MonitoredTrainingSession.
                Default: the ``PSRT_EXIT_WHEN_WORKERS_DONE`` environment variable ("1").
        """
        if self._core is None:
            raise errors.FailedPreconditionError(None, None, "join() on a server never started")
        if exit_when_workers_done is None:
            exit_when_workers_done = os.environ.get(EXIT_WHEN_WORKERS_DONE_ENV, "") == "1"
        workers = {(job, i) for job in ("worker", "chief", "master")
                   if job in self._cluster.jobs for i in self._cluster.task_indices(job)}
        stop_signal: list[int] = []
        previous = {}
        if threading.current_thread() is threading.main_thread():
            def handler(signum: int, frame: Any) -> None:
                stop_signal.append(signum)
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, handler)
        try:
            while not self._core.wait(0.1):
                self._log_events()
                if stop_signal:
                    _logger.info("%s: signal %d, stopping", self._name(), stop_signal[0])
                    self._core.stop()
                    raise SystemExit(0)
                if exit_when_workers_done and workers:
                    done = set(self._core.done_workers())
                    if workers <= done:
                        _logger.info("%s: all %d worker tasks finished; stopping",
                                     self._name(), len(workers))
                        self._core.stop()
                        return
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
            if self._core.stopped:
                _targets.release(self)

    def _log_events(self) -> None:
        """Logs what the core recorded: refused or failed authentication (WARNING, with the
        peer's address), idle or silent peers closed and peers past max_connections (INFO)."""
        if self._core is None:
            return
        for event in self._core.take_events():
            warn = "authentication" in event or "unauthenticated" in event
            _logger.log(logging.WARNING if warn else logging.INFO, "%s: %s", self._name(), event)

    def _name(self) -> str:
        return f"/job:{self._job}/task:{self._task}"

    def __repr__(self) -> str:
        return f"<psrt.train.Server {self._name()} at {self._address} target={self.target}>"
