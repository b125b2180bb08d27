"""Helpers of the MonitoredTrainingSession, Supervisor and recovery tests: ps and worker
tasks as real subprocesses on ports the OS hands out, reaped by PID.

Imported by tests/test_monitored_session.py, test_supervisor.py and test_recovery.py, and
run as the child processes::

    python tests/_mts_cluster.py ps CONFIG_JSON         # a ps task: Server + join()
    python tests/_mts_cluster.py worker CONFIG_JSON     # MonitoredTrainingSession loop
    python tests/_mts_cluster.py sv_worker CONFIG_JSON  # the classic Supervisor loop
    python tests/_mts_cluster.py saver CONFIG_JSON      # Session + Saver of a big model

(``Tasks.start``/``Tasks.worker`` take ``script=`` to run another file's roles the same
way, e.g. tests/_sync_task.py's ``sync_worker``.)

A child reports on stdout, one line per event: ``EVENT {"kind": ..., "t": ..., ...}``
where ``t`` is ``time.time()`` when it happened (one clock for every process of the
machine, so the test compares times across processes). A reader thread per child collects
the events, so a child never blocks on a full pipe. stderr goes to a file whose tail is put
in every assertion message about that child.

A ps child binds the port in its config (0: the OS picks one) and reports it in its
``ready`` event. Every child exits by itself when the test process dies (a watchdog thread
polls the parent pid); the ``tasks`` fixture reaps the ones still running by PID at
teardown: SIGTERM, wait, SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Iterator

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LOCALHOST = "127.0.0.1"
EVENT_PREFIX = "EVENT "

# The model every worker trains: least squares y ~ x @ W + b, W [D, K] and b [K], Adagrad,
# under replica_device_setter (W on /job:ps/task:0, b on task 1 when there are two ps).
D, K = 6, 3
LEARNING_RATE = 0.05


# ---- the test side: children as Task objects -------------------------------------------------

def _child_env(extra: dict[str, str] | None) -> dict[str, str]:
    import psrt  # noqa: PLC0415

    src = os.path.dirname(os.path.dirname(os.path.abspath(psrt.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (src, HERE, os.environ.get("PYTHONPATH", "")) if p)
    env.pop("PSRT_EXIT_WHEN_WORKERS_DONE", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class Task:
    """One child process and the events it printed.

    Attributes:
        name: A label for messages ("ps1", "chief", ...).
        proc: Its ``subprocess.Popen``.
        events: Every event read so far, in order (dicts with "kind" and "t").
    """

    def __init__(self, name: str, role: str, config: dict[str, Any], log_dir: str,
                 env: dict[str, str] | None = None, script: str | None = None) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.stderr_path = os.path.join(log_dir, f"{name}-{time.monotonic_ns()}.stderr")
        self._cond = threading.Condition()
        self._eof = False
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, script or os.path.abspath(__file__), role, json.dumps(config)],
                stdout=subprocess.PIPE, stderr=err, env=_child_env(env))
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name=f"events-{name}")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            if line.startswith(EVENT_PREFIX):
                event = json.loads(line[len(EVENT_PREFIX):])
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_tail(self, n: int = 40) -> str:
        try:
            with open(self.stderr_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def _fail(self, what: str) -> AssertionError:
        return AssertionError(
            f"{self.name} (pid {self.pid}, status {self.proc.poll()}): {what}\n"
            f"events: {[e['kind'] for e in self.events]}\n--- stderr tail ---\n"
            f"{self.stderr_tail()}")

    def event(self, kind: str) -> dict[str, Any] | None:
        """The first event of ``kind`` read so far, or None."""
        with self._cond:
            return next((e for e in self.events if e["kind"] == kind), None)

    def all(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e["kind"] == kind]

    def expect(self, kind: str, timeout: float = 30.0, nth: int = 1) -> dict[str, Any]:
        """Waits for the ``nth`` event of ``kind`` and returns it; fails the test if the child
        ends or ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [e for e in self.events if e["kind"] == kind]
                if len(found) >= nth:
                    return found[nth - 1]
                if self._eof:
                    self.proc.wait()
                    raise self._fail(f"ended before event {kind!r} #{nth}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._fail(f"no event {kind!r} #{nth} within {timeout} s")
                self._cond.wait(left)

    def wait(self, timeout: float = 60.0) -> int:
        """Waits until the child exits (and its stdout is read); returns its status."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise self._fail(f"still running after {timeout} s") from None
        self._reader.join(5.0)
        return self.proc.returncode

    def expect_exit(self, status: int = 0, timeout: float = 60.0) -> None:
        code = self.wait(timeout)
        if code != status:
            raise self._fail(f"exited with status {code}; expected {status}")

    def kill9(self) -> None:
        """SIGKILL, then reap (the status is -9)."""
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10.0)

    def reap(self, timeout: float = 5.0) -> int:
        """Ends the child by PID if it still runs: SIGTERM, wait ``timeout``, SIGKILL."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


class Tasks:
    """Starts children for one test and remembers them so the fixture reaps them all."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.started: list[Task] = []

    def start(self, name: str, role: str, config: dict[str, Any],
              env: dict[str, str] | None = None, script: str | None = None) -> Task:
        """Starts ``script role CONFIG_JSON`` (default script: this file)."""
        task = Task(name, role, config, self.log_dir, env, script)
        self.started.append(task)
        return task

    def ps(self, n: int, workers: int, ports: list[int] | None = None,
           exit_when_workers_done: list[Any] | None = None,
           env: list[dict[str, str] | None] | None = None,
           behind_proxy: bool = False) -> list[Task]:
        """Starts ``n`` ps tasks of a cluster with ``workers`` worker tasks and waits until
        each listens. With ``ports`` None each binds port 0 (the OS picks; see
        :func:`ps_ports`)."""
        tasks = [self.ps_task(i, n, workers, ports[i] if ports else 0,
                              (exit_when_workers_done or [None] * n)[i],
                              (env or [None] * n)[i], behind_proxy) for i in range(n)]
        for t in tasks:
            t.expect("ready")
        return tasks

    def ps_task(self, index: int, n: int, workers: int, port: int = 0,
                exit_when_workers_done: Any = None, env: dict[str, str] | None = None,
                behind_proxy: bool = False) -> Task:
        """Starts ps task ``index`` of ``n`` on ``port`` (0: any); does not wait."""
        cluster = {"ps": [f"{LOCALHOST}:{port if i == index else 0}" for i in range(n)],
                   "worker": [f"{LOCALHOST}:0"] * workers}
        return self.start(f"ps{index}", "ps", {"cluster": cluster, "task_index": index,
                                                "exit_when_workers_done": exit_when_workers_done,
                                                "behind_proxy": behind_proxy},
                          env)

    def worker(self, name: str, ps: list[Task], workers: int, task_index: int,
               role: str = "worker", script: str | None = None, **config: Any) -> Task:
        """Starts worker ``task_index`` of the cluster of ``ps``; ``config`` as
        :func:`worker_main` reads it (or the ``role`` of another ``script``)."""
        cfg = {"cluster": cluster_of(ps, workers), "task_index": task_index, **config}
        return self.start(name, role, cfg, script=script)

    def reap_all(self) -> None:
        for t in self.started:
            t.reap()


def ps_ports(ps: list[Task]) -> list[int]:
    return [t.expect("ready")["port"] for t in ps]


def cluster_of(ps: list[Task], workers: int) -> dict[str, list[str]]:
    """The cluster dict a worker uses: the ps tasks' bound ports; worker tasks on port 0 (a
    worker's own server takes whatever port the OS hands out)."""
    return {"ps": [f"{LOCALHOST}:{p}" for p in ps_ports(ps)],
            "worker": [f"{LOCALHOST}:0"] * workers}


try:
    import pytest
except ImportError:  # a child process needs no pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.fixture
    def tasks(tmp_path: Any) -> Iterator[Tasks]:
        """A :class:`Tasks` whose children are all reaped by PID at teardown."""
        t = Tasks(str(tmp_path))
        try:
            yield t
        finally:
            t.reap_all()

    @pytest.fixture
    def fresh_graph() -> Iterator[None]:
        import psrt  # noqa: PLC0415

        psrt.reset_default_graph()
        yield
        psrt.reset_default_graph()

    @pytest.fixture
    def job(tasks: Tasks, fresh_graph: None) -> Iterator["Job"]:
        """One ps subprocess and this process's worker task 0 with a :class:`Model`."""
        j = Job(tasks)
        try:
            yield j
        finally:
            j.server.stop()


class Job:
    """ps subprocesses plus a worker task 0 in this process (its own Server) and its
    :class:`Model` in a new default graph.

    Attributes:
        ps: The ps :class:`Task` objects.
        server: The worker's ``psrt.train.Server``; ``target`` is its ``server.target``.
        model: The :class:`Model` (chief's initial values from ``init_seed``).
    """

    def __init__(self, tasks: Tasks, n_ps: int = 1, init_seed: int | None = 5) -> None:
        import psrt  # noqa: PLC0415

        psrt.reset_default_graph()
        self.ps = tasks.ps(n_ps, workers=1)
        self.server = psrt.train.Server(cluster_of(self.ps, 1), job_name="worker",
                                        task_index=0)
        self.model = Model(self.server.server_def_cluster, 0, init_seed)
        self.target = self.server.target

    def end(self) -> None:
        """Stops the worker's server and reaps the ps tasks (the whole job ends)."""
        self.server.stop()
        for p in self.ps:
            p.reap()


# ---- the model -------------------------------------------------------------------------------

def problem() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(32, D)).astype(np.float32)
    y = (x @ rng.normal(size=(D, K)) + 0.5).astype(np.float32)
    return x, y


def initial_values(seed: int | None) -> dict[str, np.ndarray]:
    """The chief's initial W and b from ``seed``; None gives zeros (what a non-chief's graph
    would initialize to, if it ever initialized)."""
    if seed is None:
        return {"W": np.zeros((D, K), np.float32), "b": np.zeros(K, np.float32)}
    rng = np.random.default_rng(seed)
    return {"W": rng.normal(size=(D, K)).astype(np.float32),
            "b": rng.normal(size=K).astype(np.float32)}


class Model:
    """W, b, global_step and an Adagrad train op, placed by ``replica_device_setter``.

    Attributes:
        seen: The values the loss function received, per call, while ``record_seen`` (the
            first call's are the first values this worker trained from).
    """

    def __init__(self, cluster: Any, task_index: int, init_seed: int | None) -> None:
        import psrt  # noqa: PLC0415

        init = initial_values(init_seed)
        self.x, self.y = problem()
        with psrt.device(psrt.train.replica_device_setter(
                worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
            self.W = psrt.Variable(init["W"], name="W")
            self.b = psrt.Variable(init["b"], name="b")
            self.global_step = psrt.train.get_or_create_global_step()
        self.optimizer = psrt.train.AdagradOptimizer(LEARNING_RATE)
        self.first_seen: dict[str, list[Any]] | None = None
        self.train_op = self.optimizer.minimize(self._loss, var_list=[self.W, self.b],
                                                global_step=self.global_step)

    def _loss(self, W: np.ndarray, b: np.ndarray) -> tuple[float, list[np.ndarray]]:
        if self.first_seen is None:
            self.first_seen = {"W": W.tolist(), "b": b.tolist()}
        err = self.x @ W + b - self.y
        n = np.float32(self.x.shape[0])
        return (float(np.mean(err * err)),
                [np.ascontiguousarray(2 * self.x.T @ err / n, dtype=np.float32),
                 np.ascontiguousarray(2 * err.sum(axis=0) / n, dtype=np.float32)])

    def state_fetches(self) -> dict[str, Any]:
        """Fetches of every value a checkpoint holds, keyed by checkpoint name."""
        return {"W": self.W, "b": self.b,
                "W/Adagrad": self.optimizer.get_slot(self.W, "accumulator"),
                "b/Adagrad": self.optimizer.get_slot(self.b, "accumulator"),
                "global_step": self.global_step}


# ---- the child side --------------------------------------------------------------------------

def emit(kind: str, **fields: Any) -> None:
    fields.setdefault("t", time.time())
    print(EVENT_PREFIX + json.dumps({"kind": kind, **fields}, default=_jsonable), flush=True)


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def _exit_with_parent() -> None:
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def ps_main(cfg: dict[str, Any]) -> None:
    """A ps task: serves until SIGTERM (exit 0), or until every worker finished when
    ``exit_when_workers_done`` (None: the PSRT_EXIT_WHEN_WORKERS_DONE variable).
    ``behind_proxy``: workers reach this task through a proxy's address, which their cluster
    names instead of this task's own: the HELLO check of the cluster's digest (wire v6,
    which would rightly refuse them) is switched off; the job and task index still count."""
    import psrt  # noqa: PLC0415

    server = psrt.train.Server(cfg["cluster"], job_name="ps", task_index=cfg["task_index"])
    if cfg.get("behind_proxy"):
        server._core.set_cluster_jobs([])
    emit("ready", port=server.port)
    server.join(exit_when_workers_done=cfg.get("exit_when_workers_done"))
    emit("exit")


def worker_main(cfg: dict[str, Any]) -> None:
    """One worker task training :class:`Model` in a MonitoredTrainingSession loop.

    Config keys: cluster, task_index, is_chief (default task 0), checkpoint_dir,
    save_checkpoint_steps, last_step or num_steps (a StopAtStepHook), step_sleep (seconds
    after each run), max_wait_secs, connect_timeout_secs, heartbeat_timeout_secs, init_seed
    (the chief's initial
    values), pause_before_training (seconds), report_step (emit "reached" once the global
    step is >= it), report_every (emit "step" after every N-th run), record_dir (chief: record the pulled state after each re-created
    session), recovery_pause (seconds to hold back after a re-created session).

    Events: started, session (per created session: its number, step and pulled state),
    init (chief: right after init_op, with the values), first_step, reached, recovered,
    error (an OpError ended the task: exit status 1), done (runs, first and last step).
    """
    import psrt  # noqa: PLC0415

    emit("started")
    index = int(cfg["task_index"])
    is_chief = bool(cfg.get("is_chief", index == 0))
    cluster = psrt.train.ClusterSpec(cfg["cluster"])
    server = psrt.train.Server(cluster, job_name="worker", task_index=index)
    model = Model(cluster, index, cfg.get("init_seed") if is_chief else None)
    gs = model.global_step
    emit("devices", W=model.W.device, b=model.b.device, global_step=gs.device)

    class Observer(psrt.train.SessionRunHook):
        """Reports each created session; after the first, records the restored state (chief)
        or holds back (non-chief) as the config says."""

        def __init__(self) -> None:
            self.sessions = 0

        def after_create_session(self, session: Any, coord: Any) -> None:
            self.sessions += 1
            state = session.run(model.state_fetches())
            emit("session", n=self.sessions, step=state["global_step"],
                 state={k: np.asarray(v).tolist() for k, v in state.items()})
            if self.sessions < 2:
                return
            record_dir = cfg.get("record_dir")
            if record_dir:
                ckpt_dir = cfg["checkpoint_dir"]
                latest = psrt.train.latest_checkpoint(ckpt_dir)
                copy = os.path.join(record_dir, f"restored-{self.sessions}.ckpt")
                shutil.copyfile(latest, copy)
                np.savez(os.path.join(record_dir, f"pulled-{self.sessions}.npz"),
                         **{k: np.asarray(v) for k, v in state.items()})
                emit("recovered", n=self.sessions, step=state["global_step"],
                     checkpoint=latest, copy=copy)
            time.sleep(float(cfg.get("recovery_pause", 0.0)))

    hooks: list[Any] = [Observer()]
    if cfg.get("last_step") is not None:
        hooks.append(psrt.train.StopAtStepHook(last_step=int(cfg["last_step"])))
    if cfg.get("num_steps") is not None:
        hooks.append(psrt.train.StopAtStepHook(num_steps=int(cfg["num_steps"])))

    def on_init(scaffold: Any, sess: Any) -> None:
        t = time.time()
        emit("init", t=t, W=sess.run(model.W), b=sess.run(model.b))

    kwargs: dict[str, Any] = {}
    if cfg.get("save_checkpoint_steps") is not None:
        kwargs["save_checkpoint_steps"] = int(cfg["save_checkpoint_steps"])
    config = psrt.ConfigProto(connect_timeout_secs=float(cfg.get("connect_timeout_secs", 300)),
                              heartbeat_timeout_secs=float(cfg.get("heartbeat_timeout_secs", 20)))
    runs, first, step = 0, None, None
    report_step = cfg.get("report_step")
    report_every = int(cfg.get("report_every", 0))
    step_sleep = float(cfg.get("step_sleep", 0.0))
    try:
        with psrt.train.MonitoredTrainingSession(
                master=server.target, is_chief=is_chief,
                checkpoint_dir=cfg.get("checkpoint_dir"),
                scaffold=psrt.train.Scaffold(init_fn=on_init), hooks=hooks, config=config,
                max_wait_secs=float(cfg.get("max_wait_secs", 7200)), **kwargs) as sess:
            time.sleep(float(cfg.get("pause_before_training", 0.0)))
            while not sess.should_stop():
                _, step = sess.run([model.train_op, gs])
                runs += 1
                if first is None:
                    first = step
                    emit("first_step", step=step, seen=model.first_seen)
                if report_every and runs % report_every == 0:
                    emit("step", step=step)
                if report_step is not None and step >= report_step:
                    emit("reached", step=step)
                    report_step = None
                if step_sleep:
                    time.sleep(step_sleep)
    except psrt.errors.OpError as e:
        emit("error", type=type(e).__name__, message=e.message)
        server.stop()
        sys.exit(1)
    emit("done", runs=runs, first=first, last=step)
    server.stop()


def sv_worker_main(cfg: dict[str, Any]) -> None:
    """One worker task running TF's classic Supervisor loop::

        sv = Supervisor(is_chief, logdir, init_op, summary_op, saver, global_step,
                        save_model_secs)
        with sv.managed_session(server.target) as sess:
            while not sv.should_stop() and step < last_step:
                _, step = sess.run([train_op, global_step])

    Config keys: cluster, task_index, is_chief (default task 0), logdir, last_step,
    step_sleep, save_model_secs, init_seed, pause_before_training (seconds before the first
    step). Events: started, session (step and state at the start), queue_runners, done
    (runs, first, last).
    """
    import psrt  # noqa: PLC0415

    emit("started")
    index = int(cfg["task_index"])
    is_chief = bool(cfg.get("is_chief", index == 0))
    cluster = psrt.train.ClusterSpec(cfg["cluster"])
    server = psrt.train.Server(cluster, job_name="worker", task_index=index)
    model = Model(cluster, index, cfg.get("init_seed") if is_chief else None)
    gs = model.global_step
    sv = psrt.train.Supervisor(is_chief=is_chief, logdir=cfg["logdir"],
                               init_op=psrt.global_variables_initializer(), summary_op=None,
                               saver=psrt.train.Saver(), global_step=gs,
                               save_model_secs=float(cfg.get("save_model_secs", 600)))
    last_step = int(cfg["last_step"])
    step_sleep = float(cfg.get("step_sleep", 0.0))
    runs, first, step = 0, None, 0
    with sv.managed_session(server.target) as sess:
        state = sess.run(model.state_fetches())
        step = state["global_step"]
        emit("session", step=step, state={k: np.asarray(v).tolist() for k, v in state.items()})
        emit("queue_runners", value=sv.start_queue_runners(sess))
        time.sleep(float(cfg.get("pause_before_training", 0.0)))
        while not sv.should_stop() and step < last_step:
            _, step = sess.run([model.train_op, gs])
            runs += 1
            if first is None:
                first = step
            if step_sleep:
                time.sleep(step_sleep)
    emit("done", runs=runs, first=first, last=step, should_stop=sv.should_stop())
    server.stop()


def saver_main(cfg: dict[str, Any]) -> None:
    """Session + Saver of one big variable (``size`` float32 and its Adagrad accumulator):
    initialize, one step, save ``model.ckpt-1`` (event "saved" with checksums of what was
    saved), one more step, event "saving", then save ``model.ckpt-2`` (event "saved"). The
    test SIGKILLs this process during the second save."""
    import psrt  # noqa: PLC0415

    cluster = psrt.train.ClusterSpec(cfg["cluster"])
    server = psrt.train.Server(cluster, job_name="worker", task_index=0)
    size = int(cfg["size"])
    with psrt.device(psrt.train.replica_device_setter(cluster=cluster)):
        big = psrt.Variable(np.full(size, 0.5, np.float32), name="big")
        gs = psrt.train.get_or_create_global_step()
    opt = psrt.train.AdagradOptimizer(0.1)
    grad = np.linspace(-1, 1, size, dtype=np.float32)
    train_op = opt.minimize(lambda v: (0.0, [grad]), var_list=[big], global_step=gs)
    saver = psrt.train.Saver(max_to_keep=5)
    prefix = os.path.join(cfg["save_dir"], "model.ckpt")
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for n in (1, 2):
            sess.run(train_op)
            value, acc = sess.run([big, opt.get_slot(big, "accumulator")])
            sums = {"big": float(value.astype(np.float64).sum()),
                    "big/Adagrad": float(acc.astype(np.float64).sum())}
            emit("saving", n=n, step=sess.run(gs), sums=sums)
            path = saver.save(sess, prefix, global_step=gs)
            emit("saved", n=n, path=path, sums=sums)
    server.stop()


if __name__ == "__main__":
    import faulthandler  # noqa: PLC0415

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks to stderr, for a hang
    _exit_with_parent()
    _role, _config = sys.argv[1], json.loads(sys.argv[2])
    {"ps": ps_main, "worker": worker_main, "sv_worker": sv_worker_main,
     "saver": saver_main}[_role](_config)
