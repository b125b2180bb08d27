"""psrt-launch: start every task of a local psrt cluster with one command.

Runs ``script.py`` once per task of a cluster of ``--ps`` parameter-server tasks and
``--workers`` worker tasks on free loopback ports, the way TF1 distributed jobs were started
by hand, one terminal per task::

    psrt-launch --ps 2 --workers 2 examples/mnist_dist.py --train_steps 2000

Each task is ``sys.executable -u script.py [script args]`` followed by the classic flags::

    --ps_hosts=127.0.0.1:P0,127.0.0.1:P1 --worker_hosts=127.0.0.1:W0,127.0.0.1:W1
    --job_name=ps|worker --task_index=I

with the environment variables

* ``TF_CONFIG``: the same cluster and role in Kubeflow's TFJob format,
  ``{"cluster": {"ps": [...], "worker": [...]}, "task": {"type": "ps", "index": 0}}``, for
  scripts that read their role from it (:func:`psrt.train.task_role_from_tf_config`);
* ``PSRT_EXIT_WHEN_WORKERS_DONE=1``: a ps task's ``server.join()`` returns once every worker
  task has closed its ``MonitoredTrainingSession``;
* ``PSRT_AUTH_SECRET``: a random secret for this job (32 bytes, hex), unless
  ``PSRT_AUTH_SECRET`` or ``PSRT_AUTH_SECRET_FILE`` is already set, so every task
  authenticates the others and nothing else that reaches the ports can join or change the job;
* ``PYTHONUNBUFFERED=1``;
* ``PSRT_PS_REPLICAS=N`` with ``--ps-replicas N``: the default of every task's
  ``ConfigProto(ps_replicas=...)``; with 2, the variables of ps task k also live on ps task
  k+1 (mod ``--ps``, which must then be >= 2), so a lost ps task (restarted with
  ``--max-restarts``) loses no update and stops no worker;
* ``OMP_NUM_THREADS=max(1, CPUs // workers)``, unless ``OMP_NUM_THREADS``,
  ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS`` is set: otherwise the BLAS behind every
  worker's numpy starts one busy-waiting thread per CPU and the workers fight over the CPUs.

Every line a task writes is copied to the launcher's output prefixed with the task's name
(``[ps0] ``, ``[worker1] ``), in the order the task wrote it. Options in the manner of
torchrun's log options:

* ``--log-dir DIR``: each task's stdout and stderr go instead to ``DIR/<task>.log``
  (``DIR/ps0.log``, ``DIR/worker1.log``), unprefixed, in the order written; a restarted
  task's runs follow each other in the same file. ``DIR`` is created if missing.
* ``--tee``: with ``--log-dir``, the lines also go to the console, prefixed, as without it.
* ``--tasks-filter worker:0,ps``: only these tasks print to the console (``JOB`` for every
  task of a job, ``JOB:INDEX`` for one); the others still write their log files.
* ``--version``: prints ``psrt-launch <version of psrt-runtime>``.
 When the launcher's stdout and
stderr are the same file (a terminal, or ``2>&1``), a task's stdout and stderr share one
pipe, so its print()s and its log lines come out exactly in the order written, on stdout.
When they are different files (``2>errors.log``), each line goes to the stream the task
wrote it to; one reader per task copies lines as they arrive on either pipe, which keeps a
task's order except for lines written to the two streams in the same instant (the kernel
records no order between two pipes). The launcher's own messages are prefixed
``[psrt-launch] `` and go to stderr.

The job ends when every worker task has exited. The ps tasks then have up to a second to
exit on their own (``server.join()`` returns once the workers are done), after which those
still running get SIGTERM (``server.join()`` turns it into a clean exit 0), and SIGKILL if
they are still alive after ``--grace-period`` seconds. The exit status is 0 when every worker exited with 0.

A task that exits with a non-zero status is restarted, at the same address and with the same
arguments, up to ``--max-restarts`` times (per task). A worker that fails past that ends the
job: every other task is stopped (SIGTERM, then SIGKILL after the grace period) and the
launcher exits with that worker's status. A ps task that fails past its restarts ends the
job the same way, with the ps task's status (its workers could not go on). A ps task that
exits with 0 is not restarted: ``join()`` returns once the workers are done, which may be
before the last worker process has exited.

SIGINT (Ctrl-C) or SIGTERM to the launcher stops every task the same way and exits with
128 + the signal number (130 for Ctrl-C); a second signal skips the grace period. Tasks run in
their own sessions (process groups), so a terminal's Ctrl-C reaches only the launcher, which
then stops the tasks and everything they started.

Usage errors (script not found, counts below 1, a host that cannot be bound) print one
``psrt-launch: error: ...`` line on stderr and exit with status 2, as argparse does.

Limits: every task runs on this machine; a launcher killed with SIGKILL cannot stop its
tasks. Ports are chosen by binding port 0 and released just before the tasks start, so
another program could take one in between (the task then fails to bind and, with
``--max-restarts``, is retried on the same port).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any, NoReturn

__all__ = ["main"]

PROG = "psrt-launch"

_EXIT_WHEN_WORKERS_DONE_ENV = "PSRT_EXIT_WHEN_WORKERS_DONE"
# ConfigProto.ps_replicas's default (psrt/framework/protos.py, PS_REPLICAS_ENV).
_PS_REPLICAS_ENV = "PSRT_PS_REPLICAS"
_POLL_SECS = 0.02
_READER_JOIN_SECS = 2.0
# How long ps tasks may take to exit on their own after the last worker (see
# _Launcher._wait_for_ps_exit) before they get SIGTERM.
_PS_EXIT_WAIT_SECS = 1.0
# Thread-count variables of numpy's BLAS libraries; when none is set the launcher sets
# OMP_NUM_THREADS (which OpenBLAS and MKL also read) for every task.
_THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# Options of the launcher that take a value: the scan in _split_argv must skip their values.
_VALUE_OPTIONS = ("--ps", "--workers", "--max-restarts", "--host", "--grace-period",
                  "--log-dir", "--tasks-filter", "--ps-replicas")
# The distribution whose version --version prints (the launcher imports nothing of psrt).
_DISTRIBUTION = "psrt-runtime"

_logger = logging.getLogger("psrt.launch")


class _OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are a single line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        """Prints ``prog: error: message (see prog --help)`` and exits with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _bounded(kind: type, minimum: float, strict: bool):
    """An argparse type: ``kind`` (int or float) >= ``minimum`` (> when ``strict``)."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if strict else '>='} {minimum}, got {text}")
        return value
    return parse


_positive_int = _bounded(int, 1, strict=False)
_non_negative_int = _bounded(int, 0, strict=False)
_positive_float = _bounded(float, 0, strict=True)


def _make_parser() -> _OneLineParser:
    parser = _OneLineParser(
        prog=PROG,
        usage=f"{PROG} [-h] [--version] [--ps N] [--workers N] [--ps-replicas {{1,2}}] "
              f"[--max-restarts N] [--host HOST] [--grace-period SECS] [--log-dir DIR [--tee]] "
              f"[--tasks-filter TASKS] [--] script.py [script args ...]",
        description="Start every task of a local psrt cluster (ps and worker tasks) on free "
                    "ports, each running script.py with --ps_hosts, --worker_hosts, "
                    "--job_name and --task_index appended and TF_CONFIG set. Output lines "
                    "are prefixed with their task ([ps0], [worker1]). Exits with the first "
                    "failing worker's status, or 0 when every worker succeeds.",
        allow_abbrev=False)
    parser.add_argument("--ps", type=_positive_int, default=1, metavar="N",
                        help="number of ps tasks (default 1)")
    parser.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                        help="number of worker tasks (default 1); worker 0 is the chief")
    parser.add_argument("--ps-replicas", type=int, choices=(1, 2), default=None,
                        help="copies of each ps task's variables (sets PSRT_PS_REPLICAS for "
                             "every task): 2 also keeps ps task k's on ps task k+1, so a lost "
                             "ps task loses no update (default: PSRT_PS_REPLICAS, else 1)")
    parser.add_argument("--max-restarts", type=_non_negative_int, default=0, metavar="N",
                        help="restart a task that exits with a non-zero status up to N "
                             "times, at the same address (default 0)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address every task listens on (default 127.0.0.1)")
    parser.add_argument("--grace-period", type=_positive_float, default=5.0, metavar="SECS",
                        help="seconds between SIGTERM and SIGKILL when stopping tasks "
                             "(default 5)")
    parser.add_argument("--log-dir", metavar="DIR",
                        help="write each task's stdout and stderr to DIR/<task>.log (ps0.log, "
                             "worker1.log) instead of the console")
    parser.add_argument("--tee", action="store_true",
                        help="with --log-dir, also print the tasks' lines to the console, "
                             "prefixed")
    parser.add_argument("--tasks-filter", metavar="TASKS",
                        help="print only these tasks' lines to the console: comma-separated "
                             "JOB or JOB:INDEX, e.g. worker:0,ps (default: every task)")
    parser.add_argument("--version", action="version",
                        version=f"{PROG} {_version()}")
    parser.add_argument("script", nargs="?", help="the Python script every task runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="arguments passed to the script before the cluster flags")
    return parser


def _version() -> str:
    """The installed psrt-runtime's version, or "unknown" (running from a source tree)."""
    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _parse_tasks_filter(text: str, counts: dict[str, int]) -> set[str]:
    """The task names (``ps0``, ``worker1``) a ``--tasks-filter`` value selects.

    Raises:
        ValueError: an item names no job of the cluster, or an index past its job's count;
            the message quotes the item and lists the choices.
    """
    chosen: set[str] = set()
    for item in text.split(","):
        job, sep, index = item.strip().partition(":")
        if job not in counts:
            raise ValueError(f"--tasks-filter item {item.strip()!r}: no job {job!r}; the jobs "
                             f"are {sorted(counts)} (JOB or JOB:INDEX, e.g. worker:0,ps)")
        if not sep:
            chosen.update(f"{job}{i}" for i in range(counts[job]))
            continue
        if not index.isdigit() or int(index) >= counts[job]:
            raise ValueError(f"--tasks-filter item {item.strip()!r}: {job} has tasks 0 to "
                             f"{counts[job] - 1} (--{'ps' if job == 'ps' else 'workers'} "
                             f"{counts[job]})")
        chosen.add(f"{job}{int(index)}")
    return chosen


def _split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Splits the command line into the launcher's options and ``[script, *script_args]``.

    The script is the first token that is neither an option nor an option's value, or the
    token after the first ``--``. Everything after the script belongs to the script, even
    tokens that look like the launcher's options.
    """
    argv = list(argv)
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return argv[:i], argv[i + 1:]
        if token.startswith("-") and token != "-":
            i += 2 if token in _VALUE_OPTIONS else 1
            continue
        return argv[:i], argv[i:]
    return argv, []


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _free_ports(host: str, count: int) -> list[int]:
    """Returns ``count`` distinct ports that were free on ``host`` a moment ago.

    Raises:
        OSError: ``host`` cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _same_file(a: IO[str], b: IO[str]) -> bool:
    """True when ``a`` and ``b`` write to one file, pipe or terminal."""
    try:
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor (e.g. a StringIO)
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


class _Output:
    """Writes whole prefixed lines to the launcher's stdout and stderr, one at a time.

    Attributes:
        merged: The launcher's stdout and stderr are the same file: each task then gets one
            pipe for both of its streams, so its lines keep their order.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stdout = sys.stdout
        self.stderr = sys.stderr
        self.merged = _same_file(self.stdout, self.stderr)

    def write(self, stream: IO[str], data: bytes) -> None:
        """Writes ``data`` (a child's output line, already prefixed) to ``stream`` whole."""
        with self._lock:
            try:
                raw = getattr(stream, "buffer", None)
                if raw is not None:
                    stream.flush()
                    raw.write(data)
                    raw.flush()
                else:
                    stream.write(data.decode("utf-8", "replace"))
                    stream.flush()
            except (OSError, ValueError):
                pass  # The launcher's own output is gone (closed pipe); keep the job going.


class _LogHandler(logging.Handler):
    """Routes the launcher's log records through :class:`_Output` as ``[psrt-launch]`` lines."""

    def __init__(self, output: _Output) -> None:
        super().__init__(logging.INFO)
        self._output = output

    def emit(self, record: logging.LogRecord) -> None:
        """Writes the record as one ``[psrt-launch] ...`` line to stderr."""
        try:
            line = f"[{PROG}] {self.format(record)}\n"
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)
            return
        self._output.write(self._output.stderr, line.encode("utf-8", "replace"))


def _pump(sources: list[tuple[IO[bytes], IO[str] | None]], output: _Output, prefix: bytes,
          log: IO[bytes] | None = None) -> None:
    """Copies each ``(pipe, stream)`` pair's pipe to its stream (None: not to the console),
    line by line, each line prefixed, and to ``log`` unprefixed, until every pipe reaches EOF;
    then closes ``log``.

    One thread watches all of a task's pipes and copies each line as soon as it is complete,
    so lines written to different pipes come out in the order they arrived. A last line
    without a newline gets one.
    """
    def emit(stream: IO[str] | None, line: bytes) -> None:
        if log is not None:
            try:
                log.write(line + b"\n")
                log.flush()
            except (OSError, ValueError):
                pass  # A full disk must not stop the job.
        if stream is not None:
            output.write(stream, prefix + line + b"\n")

    selector = selectors.DefaultSelector()
    partial: dict[int, bytes] = {}
    try:
        for source, stream in sources:
            selector.register(source.fileno(), selectors.EVENT_READ, stream)
            partial[source.fileno()] = b""
        while selector.get_map():
            for key, _ in selector.select():
                fd, stream = key.fd, key.data
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(fd)
                    if partial[fd]:
                        emit(stream, partial[fd])
                    continue
                lines = (partial[fd] + data).split(b"\n")
                partial[fd] = lines.pop()
                for line in lines:
                    emit(stream, line)
    except (OSError, ValueError):
        pass
    finally:
        selector.close()
        for source, _ in sources:
            source.close()
        if log is not None:
            log.close()


def _exit_status(returncode: int) -> int:
    """A process's status as a shell reports it: 128 + N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class _Task:
    """One task of the cluster: its command line, environment and current process."""

    def __init__(self, job: str, index: int, argv: list[str], env: dict[str, str],
                 output: _Output, log_path: str | None = None, console: bool = True) -> None:
        self.job = job
        self.index = index
        self.name = f"{job}{index}"
        self.log_path = log_path
        self.console = console
        self.argv = argv
        self.env = env
        self.output = output
        self.proc: subprocess.Popen[bytes] | None = None
        self.readers: list[threading.Thread] = []
        self.restarts = 0
        self.returncode: int | None = None

    def start(self) -> None:
        """Starts (or restarts) the task's process with its prefixed output readers.

        Raises:
            OSError: the process or its log file cannot be started or opened.
        """
        self.returncode = None
        # One pipe for both streams when they end up in one place: the console's single
        # file, or only the log file.
        merged = self.output.merged or not self.console
        log = open(self.log_path, "ab") if self.log_path is not None else None
        try:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                start_new_session=True)
        except BaseException:
            if log is not None:
                log.close()
            raise
        assert self.proc.stdout is not None
        console = self.console
        sources: list[tuple[IO[bytes], IO[str] | None]] = [
            (self.proc.stdout, self.output.stdout if console else None)]
        if not merged:
            assert self.proc.stderr is not None
            sources.append((self.proc.stderr, self.output.stderr if console else None))
        prefix = f"[{self.name}] ".encode()
        t = threading.Thread(target=_pump, args=(sources, self.output, prefix, log),
                             name=f"{PROG} {self.name} reader", daemon=True)
        t.start()
        self.readers = [t]

    @property
    def pid(self) -> int:
        """The process id of the task's current process (-1 before it starts)."""
        return self.proc.pid if self.proc is not None else -1

    def running(self) -> bool:
        """True while the task's process has been started and not reaped."""
        return self.proc is not None and self.returncode is None

    def poll(self) -> int | None:
        """Returns the exit status if the process ended since the last call, else None."""
        if not self.running():
            return None
        assert self.proc is not None
        rc = self.proc.poll()
        if rc is None:
            return None
        self.returncode = rc
        self.join_readers()
        return rc

    def join_readers(self) -> None:
        """Waits (bounded) for the thread copying the task's stdout and stderr."""
        # The pipes close when the process and everything it started have exited; a
        # grandchild that keeps them open must not hang the launcher.
        deadline = time.monotonic() + _READER_JOIN_SECS
        for t in self.readers:
            t.join(max(0.0, deadline - time.monotonic()))

    def signal(self, signum: int) -> None:
        """Sends ``signum`` to the task's process group (the task and its children)."""
        if not self.running():
            return
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError:  # pragma: no cover - group changed hands; signal the task
            try:
                self.proc.send_signal(signum)
            except ProcessLookupError:
                pass


class _Launcher:
    """Starts the tasks, watches them, restarts failures and stops the job."""

    def __init__(self, args: argparse.Namespace, script: str, script_args: list[str],
                 output: _Output, console: set[str] | None = None) -> None:
        self._args = args
        self._output = output
        self._stop_signals: list[int] = []
        self._wake = threading.Event()
        ports = _free_ports(args.host, args.ps + args.workers)
        ps_hosts = [_format_address(args.host, p) for p in ports[:args.ps]]
        worker_hosts = [_format_address(args.host, p) for p in ports[args.ps:]]
        cluster = {"ps": ps_hosts, "worker": worker_hosts}
        self.blas_threads = None
        if not any(v in os.environ for v in _THREAD_ENV_VARS):
            # Every worker's BLAS would start one spinning thread per CPU: with several
            # workers on one machine they fight over the CPUs (mnist_dist's hidden layer
            # trains 10x slower). Share the CPUs instead, as torchrun does.
            self.blas_threads = max(1, (os.cpu_count() or 1) // args.workers)
        # One secret for the whole job: the tasks authenticate each other (docs/protocol.md).
        secret = None
        if not (os.environ.get("PSRT_AUTH_SECRET") or os.environ.get("PSRT_AUTH_SECRET_FILE")):
            secret = secrets.token_hex(32)
        self.tasks: list[_Task] = []
        for job, count in (("ps", args.ps), ("worker", args.workers)):
            for i in range(count):
                argv = [sys.executable, "-u", script, *script_args,
                        f"--ps_hosts={','.join(ps_hosts)}",
                        f"--worker_hosts={','.join(worker_hosts)}",
                        f"--job_name={job}", f"--task_index={i}"]
                env = dict(os.environ)
                env["TF_CONFIG"] = json.dumps(
                    {"cluster": cluster, "task": {"type": job, "index": i}})
                env[_EXIT_WHEN_WORKERS_DONE_ENV] = "1"
                env["PYTHONUNBUFFERED"] = "1"
                if args.ps_replicas is not None:
                    env[_PS_REPLICAS_ENV] = str(args.ps_replicas)
                if secret is not None:
                    env["PSRT_AUTH_SECRET"] = secret
                if self.blas_threads is not None:
                    env["OMP_NUM_THREADS"] = str(self.blas_threads)
                name = f"{job}{i}"
                log_path = (os.path.join(args.log_dir, f"{name}.log") if args.log_dir
                            else None)
                shown = (not args.log_dir or args.tee) and (console is None or name in console)
                self.tasks.append(_Task(job, i, argv, env, output, log_path, shown))
        self.cluster = cluster

    @property
    def workers(self) -> list[_Task]:
        """The worker tasks, in task index order."""
        return [t for t in self.tasks if t.job == "worker"]

    def request_stop(self, signum: int) -> None:
        """Signal handler body: asks the watch loop to stop the job (safe in a handler)."""
        self._stop_signals.append(signum)
        self._wake.set()

    def run(self) -> int:
        """Runs the job to its end and returns the launcher's exit status."""
        try:
            return self._run()
        except BaseException:
            # A bug here, or KeyboardInterrupt when main() runs without its signal handlers
            # (not in the main thread): never leave tasks running behind the launcher.
            self._stop_all()
            raise

    def _run(self) -> int:
        _logger.info("cluster %s", json.dumps(self.cluster))
        if self.blas_threads is not None:
            _logger.info("OMP_NUM_THREADS=%d for every task (%s, %s); set "
                         "OMP_NUM_THREADS to choose another value", self.blas_threads,
                         _plural(os.cpu_count() or 1, "CPU"),
                         _plural(len(self.workers), "worker"))
        if self._args.log_dir:
            _logger.info("each task's output goes to %s",
                         os.path.join(self._args.log_dir, "<task>.log"))
        hidden = [t.name for t in self.tasks if not t.console]
        if hidden and not self._args.log_dir:
            _logger.info("not printing the output of %s (--tasks-filter); --log-dir keeps it",
                         ", ".join(hidden))
        try:
            for t in self.tasks:
                t.start()
        except OSError as e:
            _logger.error("cannot start %s: %s", " ".join(self.tasks[0].argv[:3]), e)
            self._stop_all()
            return 1
        _logger.info("started %s", ", ".join(f"{t.name} (pid {t.pid})" for t in self.tasks))
        while True:
            if self._stop_signals:
                signum = self._stop_signals[0]
                _logger.info("%s received; stopping all tasks", signal.Signals(signum).name)
                self._stop_all()
                return 128 + signum
            status = self._check_tasks()
            if status is not None:
                return status
            if all(t.returncode == 0 for t in self.workers):
                self._wait_for_ps_exit()
                if any(t.running() for t in self.tasks):
                    _logger.info("every worker task finished (%d); stopping the ps tasks",
                                 len(self.workers))
                self._stop_all()
                return 0
            self._wake.wait(_POLL_SECS)
            self._wake.clear()

    def _wait_for_ps_exit(self) -> None:
        """Gives the ps tasks a moment to exit on their own once the workers are done.

        With PSRT_EXIT_WHEN_WORKERS_DONE a ps task's join() returns within ~0.1 s of the
        last worker closing its session, usually before that worker's process has exited; a
        SIGTERM during the ps task's own exit would turn its status 0 into 143.
        """
        deadline = time.monotonic() + min(_PS_EXIT_WAIT_SECS, self._args.grace_period)
        while time.monotonic() < deadline and not self._stop_signals:
            for t in self.tasks:
                if t.poll() == 0:
                    _logger.info("%s exited with status 0", t.name)
            if not any(t.running() for t in self.tasks):
                return
            self._wake.wait(_POLL_SECS)
            self._wake.clear()

    def _check_tasks(self) -> int | None:
        """Handles every task that exited; returns an exit status when the job must end."""
        for t in self.tasks:
            rc = t.poll()
            if rc is None:
                continue
            if t.job == "ps" and all(w.returncode == 0 for w in self.workers):
                continue  # The job is over; _stop_all ends the remaining ps tasks.
            if rc == 0:
                _logger.info("%s exited with status 0", t.name)
                continue
            status = _exit_status(rc)
            if t.restarts < self._args.max_restarts:
                t.restarts += 1
                _logger.warning("%s exited with status %d; restarting it (restart %d of %d)",
                                t.name, status, t.restarts, self._args.max_restarts)
                t.start()
                _logger.info("%s restarted (pid %d)", t.name, t.pid)
                continue
            if self._args.max_restarts:
                _logger.error("%s exited with status %d after %d restarts; stopping all tasks",
                              t.name, status, t.restarts)
            else:
                _logger.error("%s exited with status %d; stopping all tasks", t.name, status)
            self._stop_all()
            return status
        return None

    def _stop_all(self) -> None:
        """SIGTERM to every running task, SIGKILL after the grace period; reaps them all."""
        live = [t for t in self.tasks if t.running()]
        stopped = list(live)
        for t in live:
            t.signal(signal.SIGTERM)
        deadline = time.monotonic() + self._args.grace_period
        signals_seen = len(self._stop_signals)
        while True:
            live = [t for t in live if t.poll() is None and t.running()]
            if not live:
                break
            if time.monotonic() >= deadline or len(self._stop_signals) > signals_seen:
                for t in live:
                    _logger.warning("%s still running; sending SIGKILL", t.name)
                    t.signal(signal.SIGKILL)
                for t in live:
                    assert t.proc is not None
                    t.returncode = t.proc.wait()
                    t.join_readers()
                break
            self._wake.wait(_POLL_SECS)
            self._wake.clear()
        for t in self.tasks:
            t.join_readers()
        for t in stopped:
            if t.returncode is not None:
                _logger.info("%s stopped with status %d", t.name, _exit_status(t.returncode))


def _install_logging(output: _Output) -> logging.Handler:
    handler = _LogHandler(output)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(handler)
    _logger.setLevel(logging.INFO)
    _logger.propagate = False
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``psrt-launch``: starts a local cluster of ``script.py`` tasks and waits for it.

    Args:
        argv: The command line without the program name; default ``sys.argv[1:]``.
            ``[--ps N] [--workers N] [--ps-replicas {1,2}] [--max-restarts N] [--host HOST]
            [--grace-period SECS] [--log-dir DIR [--tee]] [--tasks-filter TASKS]
            [--version] [--] script.py [script args ...]``.

    Returns:
        The exit status: 0 when every worker exited with 0; the status of the first worker
        (or ps task) that failed past its restarts; 128 + N after signal N stopped the
        launcher.

    Raises:
        SystemExit: status 2 on a usage error (one ``psrt-launch: error: ...`` line on
            stderr: ``--tee`` without ``--log-dir``, ``--ps-replicas 2`` with one ps task, a
            ``--tasks-filter`` item naming no task,
            a ``--log-dir`` that cannot be created, ...), status 0 after ``--help`` or
            ``--version``.

    Example::

        psrt-launch --ps 2 --workers 2 examples/mnist_dist.py --train_steps 2000
    """
    parser = _make_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    options, command = _split_argv(argv)
    args = parser.parse_args(options)
    if not command:
        parser.error("no script given; usage: psrt-launch [options] [--] script.py [args]")
    script, script_args = command[0], command[1:]
    if args.ps_replicas == 2 and args.ps < 2:
        parser.error(f"--ps-replicas 2 keeps each ps task's variables on the next ps task too: "
                     f"it needs --ps 2 or more, got --ps {args.ps}")
    if args.tee and not args.log_dir:
        parser.error("--tee copies the --log-dir files to the console; give --log-dir DIR too")
    console = None
    if args.tasks_filter is not None:
        try:
            console = _parse_tasks_filter(args.tasks_filter,
                                          {"ps": args.ps, "worker": args.workers})
        except ValueError as e:
            parser.error(str(e))
    if args.log_dir:
        try:
            os.makedirs(args.log_dir, exist_ok=True)
        except OSError as e:
            parser.error(f"cannot create --log-dir {args.log_dir!r}: {e.strerror or e}")
    if not os.path.exists(script):
        parser.error(f"script not found: {script!r} (cwd {os.getcwd()})")
    if not os.path.isfile(script):
        parser.error(f"script {script!r} is not a file")
    output = _Output()
    try:
        launcher = _Launcher(args, script, script_args, output, console)
    except OSError as e:
        parser.error(f"cannot bind a port on --host {args.host!r}: {e.strerror or e}")
    handler = _install_logging(output)
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, frame: launcher.request_stop(signum))
    try:
        return launcher.run()
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
        _logger.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
