"""Test helpers: ps (and worker) tasks as real subprocesses on ports the OS hands out.

Imported by the test modules (``from _cluster import ...``) and run as a script for the
child processes::

    python tests/_cluster.py ps CLUSTER_JSON TASK_INDEX
    python tests/_cluster.py worker CLUSTER_JSON TASK_INDEX STEPS [barrier]

A ps child prints ``READY <port>`` once its server listens and then ``join()``s. A worker
child prints ``STARTED`` before it connects, trains :func:`softmax_problem` with Adagrad and
prints ``RESULT <json>``; with ``barrier`` it prints ``WAITING`` once the variables are
initialized and reads a line from stdin before its first step. Children exit by themselves when the test process dies (a
watchdog thread polls the parent pid), and the fixtures reap them by PID: terminate, wait,
then kill.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

LOCALHOST = "127.0.0.1"
READY_TIMEOUT = 60.0


# ---- ports and processes -------------------------------------------------------------------

def free_ports(n: int) -> list[int]:
    """``n`` distinct ports the OS hands out for binding port 0 (closed again, so the
    caller can give them to tasks that are not started yet)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOCALHOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _child_env() -> dict[str, str]:
    import psrt  # noqa: PLC0415

    src = os.path.dirname(os.path.dirname(os.path.abspath(psrt.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (src, HERE, os.environ.get("PYTHONPATH", "")) if p)
    env.pop("PSRT_EXIT_WHEN_WORKERS_DONE", None)
    return env


def spawn(role: str, *args: Any, env: dict[str, str] | None = None,
          stdin: int | None = None) -> subprocess.Popen:
    """Starts ``python tests/_cluster.py role *args`` with stdout piped (text)."""
    full_env = _child_env()
    full_env.update(env or {})
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), role,
                             *[str(a) for a in args]],
                            stdout=subprocess.PIPE, stdin=stdin, text=True, env=full_env)


def read_line(proc: subprocess.Popen, prefix: str, timeout: float = READY_TIMEOUT) -> str:
    """Reads the child's stdout until a line starting with ``prefix``; returns the rest of
    that line. Fails the test if the child exits or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    # Raw reads with our own line buffer: select() on the fd cannot see lines that a
    # buffered readline() already pulled into Python's buffer.
    pending: bytearray = proc.__dict__.setdefault("_pending_output", bytearray())
    while True:
        while b"\n" in pending:
            raw, _, rest = bytes(pending).partition(b"\n")
            pending[:] = rest
            line = raw.decode(errors="replace")
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"pid {proc.pid} printed no {prefix!r} within {timeout} s")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"pid {proc.pid} exited (status {proc.wait()}) before "
                                 f"printing {prefix!r}")
        pending += chunk


def reap(proc: subprocess.Popen, timeout: float = 5.0) -> int:
    """Ends ``proc`` by PID (terminate, wait ``timeout``, kill) and returns its status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdout, proc.stdin):
        if f is not None:
            f.close()
    return proc.returncode


class PsTasks:
    """ps tasks running as subprocesses of this test.

    Attributes:
        procs: The ``Popen`` of each ps task, by task index.
        ports: The port each one listens on.
    """

    def __init__(self, procs: list[subprocess.Popen], ports: list[int]) -> None:
        self.procs = procs
        self.ports = ports

    @property
    def addresses(self) -> list[str]:
        return [f"{LOCALHOST}:{p}" for p in self.ports]

    def cluster(self, workers: int = 1) -> dict[str, list[str]]:
        """A cluster dict: these ps tasks, and ``workers`` worker tasks on port 0 (a worker's
        own server binds whatever port the OS hands out)."""
        return {"ps": self.addresses, "worker": [f"{LOCALHOST}:0"] * workers}

    def list_variables(self, task: int) -> list[dict[str, Any]]:
        """What ps task ``task`` holds, read over a raw ``psrt._core.Client``."""
        from psrt import _core  # noqa: PLC0415

        client = _core.Client("worker", 99)
        try:
            client.connect(0, self.addresses[task], 10.0)
            return list(client.list_variables(0))
        finally:
            client.close()

    def names_on(self, task: int) -> set[str]:
        return {v["name"] for v in self.list_variables(task)}


def start_ps_tasks(n: int, ports: list[int] | None = None) -> PsTasks:
    """Starts ``n`` ps tasks. With ``ports`` None each binds port 0 and reports the port the
    OS chose; otherwise task ``i`` binds ``ports[i]``. Returns once all listen."""
    if ports is None:
        cluster = {"ps": [f"{LOCALHOST}:0"] * n}
    else:
        cluster = {"ps": [f"{LOCALHOST}:{p}" for p in ports]}
    procs = [spawn("ps", json.dumps(cluster), i) for i in range(n)]
    try:
        got = [int(read_line(p, "READY ")) for p in procs]
    except BaseException:
        for p in procs:
            reap(p)
        raise
    return PsTasks(procs, got)


# ---- pytest fixtures (imported by the test modules) ----------------------------------------

try:
    import pytest
except ImportError:  # in a child process pytest is not needed
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.fixture
    def fresh_graph() -> Iterator[None]:
        """A new default graph for the test (and none of its variables left after)."""
        import psrt  # noqa: PLC0415

        psrt.reset_default_graph()
        yield
        psrt.reset_default_graph()

    @pytest.fixture
    def ps_tasks() -> Iterator[Callable[..., PsTasks]]:
        """A factory ``ps_tasks(n, ports=None) -> PsTasks`` of ps subprocesses, all reaped
        by PID at teardown."""
        started: list[subprocess.Popen] = []

        def start(n: int = 1, ports: list[int] | None = None) -> PsTasks:
            tasks = start_ps_tasks(n, ports)
            started.extend(tasks.procs)
            return tasks

        yield start
        for p in started:
            reap(p)

    @pytest.fixture(scope="module")
    def shared_ps2() -> Iterator[PsTasks]:
        """Two ps subprocesses shared by the tests of a module: tests using them must name
        their variables uniquely (see ``prefix``), as the ps tasks keep every variable."""
        tasks = start_ps_tasks(2)
        yield tasks
        for p in tasks.procs:
            reap(p)

    @pytest.fixture
    def prefix(request: Any) -> str:
        """A variable-name prefix unique to the test (its node name, sanitized)."""
        return re.sub(r"[^A-Za-z0-9_.\-]", "_", request.node.name).strip("_")

    @pytest.fixture
    def ps2(ps_tasks: Callable[..., PsTasks]) -> PsTasks:
        """Two ps subprocesses on OS-chosen ports."""
        return ps_tasks(2)

    @pytest.fixture
    def ps1(ps_tasks: Callable[..., PsTasks]) -> PsTasks:
        """One ps subprocess on an OS-chosen port."""
        return ps_tasks(1)

    @pytest.fixture
    def worker(fresh_graph: None) -> Iterator[Callable[[PsTasks], Any]]:
        """A factory ``worker(ps, task_index=0, workers=1) -> psrt.train.Server`` for an
        in-process worker task of the cluster of ``ps``; its server is stopped at teardown.
        """
        import psrt  # noqa: PLC0415

        servers: list[Any] = []

        def make(ps: PsTasks, task_index: int = 0, workers: int = 1) -> Any:
            server = psrt.train.Server(ps.cluster(workers), job_name="worker",
                                       task_index=task_index)
            servers.append(server)
            return server

        yield make
        for s in servers:
            s.stop()


# ---- the small problem the end-to-end tests train ------------------------------------------

def softmax_problem(seed: int = 0, n: int = 64, d: int = 12, k: int = 4
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 inputs [n, d] and one-hot float32 labels [n, k] from a random linear
    teacher, so softmax regression can fit them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    teacher = rng.normal(size=(d, k)).astype(np.float32)
    labels = np.argmax(x @ teacher, axis=1)
    y = np.zeros((n, k), np.float32)
    y[np.arange(n), labels] = 1.0
    return x, y


def softmax_loss_and_grads(W: np.ndarray, b: np.ndarray, images: np.ndarray,
                           labels: np.ndarray) -> tuple[float, tuple[np.ndarray, np.ndarray]]:
    """Mean cross-entropy of softmax(images @ W + b) and its gradients, all float32."""
    logits = images @ W + b
    logits = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    p = e / e.sum(axis=1, keepdims=True)
    n = images.shape[0]
    loss = float(-np.sum(labels * np.log(p)) / n)
    dlogits = ((p - labels) / np.float32(n)).astype(np.float32)
    return loss, (np.ascontiguousarray(images.T @ dlogits, dtype=np.float32),
                  np.ascontiguousarray(dlogits.sum(axis=0), dtype=np.float32))


def build_softmax_model(cluster: Any, task_index: int, learning_rate: float = 0.5
                        ) -> tuple[Any, Any, Any, Any]:
    """The usage example's model under ``replica_device_setter``: returns
    ``(W, b, global_step, train_op)``."""
    import psrt  # noqa: PLC0415

    x, y = softmax_problem()
    with psrt.device(psrt.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        W = psrt.Variable(np.zeros((x.shape[1], y.shape[1]), np.float32), name="W")
        b = psrt.Variable(np.zeros(y.shape[1], np.float32), name="b")
        global_step = psrt.train.get_or_create_global_step()
    train_op = psrt.train.AdagradOptimizer(learning_rate).minimize(
        softmax_loss_and_grads, var_list=[W, b], global_step=global_step)
    return W, b, global_step, train_op


# ---- child processes ------------------------------------------------------------------------

def _exit_with_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def ps_main(cluster_json: str, task_index: str) -> None:
    """Runs ps task ``task_index`` of the cluster until it is stopped (SIGTERM/SIGINT
    exit with status 0, through ``Server.join``)."""
    import psrt  # noqa: PLC0415

    server = psrt.train.Server(json.loads(cluster_json), job_name="ps",
                               task_index=int(task_index))
    print(f"READY {server.port}", flush=True)
    server.join()


def worker_main(cluster_json: str, task_index: str, steps: str, barrier: str = "") -> None:
    """Trains the softmax model for ``steps`` steps as worker ``task_index``. Task 0
    initializes the variables (the chief); the others wait until they are initialized.
    With ``barrier``, prints ``WAITING`` and waits for a line on stdin before training, so
    that the test can start several workers' steps together. Prints
    ``RESULT {"losses": [...], "steps": [...]}``."""
    import psrt  # noqa: PLC0415

    print("STARTED", flush=True)
    cluster = psrt.train.ClusterSpec(json.loads(cluster_json))
    index = int(task_index)
    server = psrt.train.Server(cluster, job_name="worker", task_index=index)
    W, b, global_step, train_op = build_softmax_model(cluster, index)
    x, y = softmax_problem()
    losses, seen = [], []
    with psrt.Session(server.target) as sess:
        if index == 0:
            sess.run(psrt.global_variables_initializer())
        else:
            deadline = time.monotonic() + 60
            while len(sess.run(psrt.report_uninitialized_variables())):
                if time.monotonic() > deadline:
                    raise RuntimeError("the chief never initialized the variables")
                time.sleep(0.02)
        if barrier:
            print("WAITING", flush=True)
            sys.stdin.readline()
        for _ in range(int(steps)):
            loss, step = sess.run([train_op, global_step],
                                  feed_dict={"images": x, "labels": y})
            losses.append(loss)
            seen.append(step)
    server.stop()
    print("RESULT " + json.dumps({"losses": losses, "steps": seen}), flush=True)


if __name__ == "__main__":
    _exit_with_parent()
    role, *rest = sys.argv[1:]
    {"ps": ps_main, "worker": worker_main}[role](*rest)
