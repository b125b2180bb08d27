"""Tests for psrt.platform.sigterm: a worker and a ps task running as PID 1 end on SIGTERM.

A container without an init runs the task as PID 1 of its PID namespace, where the kernel
drops a SIGTERM the process has no handler for. Here each task runs as PID 1 of a PID
namespace of its own (``unshare --pid --fork --mount-proc``, as root) and gets SIGTERM from
outside the namespace, as a container runtime sends it on ``kubectl delete``. The worker
writes a 32 MB checkpoint every step, so the signal usually lands in the middle of one:
what is left must be whole checkpoints only. Processes are reaped by PID.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import psrt
from psrt.checkpoint.checkpoint_format import read_checkpoint_file
from psrt.platform import sigterm

ROOT = Path(__file__).resolve().parents[1]
SRC = str(Path(psrt.__file__).resolve().parents[1])
MNIST_DIST = ROOT / "examples" / "mnist_dist.py"
END_WITHIN = 2.0

_WORKER = textwrap.dedent("""
    import sys
    import numpy as np
    import psrt

    ps, ckpt = sys.argv[1], sys.argv[2]
    cluster = psrt.train.ClusterSpec({"ps": [ps], "worker": ["127.0.0.1:0"]})
    with psrt.device(psrt.train.replica_device_setter(cluster=cluster)):
        step = psrt.train.get_or_create_global_step()
        big = psrt.get_variable("big", [2048, 4096], initializer=psrt.zeros_initializer())
        w = psrt.Variable(np.zeros(4, np.float32), name="w")

        def loss_fn(w):
            return float(w @ w), [2 * w - 1]

        train_op = psrt.train.GradientDescentOptimizer(0.01).minimize(
            loss_fn, var_list=[w], global_step=step)
    saver = psrt.train.Saver(max_to_keep=3)
    hooks = [psrt.train.CheckpointSaverHook(ckpt, save_steps=1, saver=saver)]
    with psrt.train.MonitoredTrainingSession(master="psrt://" + ps, is_chief=True,
                                             hooks=hooks, save_checkpoint_secs=None,
                                             save_summaries_steps=None) as sess:
        print("training", flush=True)
        while not sess.should_stop():
            sess.run(train_op)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = "1"
    for var in ("TF_CONFIG", "JOBSET_NAME", "PSRT_LOG_LEVEL", "PSRT_EXIT_WHEN_WORKERS_DONE"):
        env.pop(var, None)
    return env


class _Pid1:
    """``argv`` as PID 1 of a new PID namespace; ``pid`` is that process outside it."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.unshare = subprocess.Popen(
                ["unshare", "--pid", "--fork", "--mount-proc", *argv], env=_env(),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.pid = self._child()

    def _child(self) -> int:
        deadline = time.monotonic() + 10
        path = Path(f"/proc/{self.unshare.pid}/task/{self.unshare.pid}/children")
        while time.monotonic() < deadline:
            children = path.read_text().split() if path.exists() else []
            if children:
                return int(children[0])
            time.sleep(0.01)
        raise AssertionError(f"unshare started no child: {self.output()}")

    def in_namespace_pid(self) -> int:
        """The process's pid inside its own namespace (its NSpid line's last field)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
        raise AssertionError("no NSpid line")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.unshare.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} in the output:\n{self.output()}")
            time.sleep(0.02)

    def terminate(self) -> tuple[float, int]:
        """SIGTERM to PID 1 from outside; (seconds until it ended, unshare's status)."""
        start = time.monotonic()
        os.kill(self.pid, signal.SIGTERM)
        try:
            status = self.unshare.wait(10)
        except subprocess.TimeoutExpired:
            status = -1
        return time.monotonic() - start, status

    def reap(self) -> None:
        for pid in (self.pid, self.unshare.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.unshare.wait(10)


@pytest.fixture
def pid_namespaces(tmp_path):
    if os.geteuid() != 0:
        pytest.skip(f"a PID namespace needs root (unshare --pid); running as uid "
                    f"{os.geteuid()}")
    if shutil.which("unshare") is None:
        pytest.skip("no 'unshare' command (util-linux)")
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable,
                            "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        pytest.skip(f"cannot run a process as PID 1 of its own namespace here: {probe.stderr}")
    started: list[_Pid1] = []

    def start(argv: list[str], name: str) -> _Pid1:
        p = _Pid1(argv, tmp_path / f"{name}.log")
        started.append(p)
        return p

    yield start
    for p in started:
        p.reap()
    for p in started:
        assert not Path(f"/proc/{p.pid}").exists(), p.pid


@pytest.mark.slow
def test_worker_and_ps_as_pid_1_end_on_sigterm_within_2_s(pid_namespaces, tmp_path):
    port = _free_port()
    ps = pid_namespaces([sys.executable, "-u", str(MNIST_DIST), f"--ps_hosts=127.0.0.1:{port}",
                         "--worker_hosts=127.0.0.1:1", "--job_name=ps", "--task_index=0"], "ps")
    ps.wait_for("Started server with target")
    assert ps.in_namespace_pid() == 1
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    worker = pid_namespaces([sys.executable, "-u", "-c", _WORKER, f"127.0.0.1:{port}",
                             str(ckpt)], "worker")
    worker.wait_for("training")
    assert worker.in_namespace_pid() == 1
    # Some checkpoints done, one most likely being written.
    deadline = time.monotonic() + 30
    while len(list(ckpt.glob("model.ckpt-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    took, status = worker.terminate()
    assert took < END_WITHIN and status == sigterm.EXIT_STATUS, (took, status, worker.output())
    assert "SIGTERM received by PID 1" in worker.output()
    # Nothing partial: no temporary file, and every checkpoint file is whole.
    names = sorted(p.name for p in ckpt.iterdir())
    assert not [n for n in names if ".psrt-tmp-" in n], names
    files = [p for p in ckpt.glob("model.ckpt-*")]
    assert files, names
    for path in files:
        tensors = read_checkpoint_file(path)  # checks every tensor's CRC-32C
        assert tensors["big"].shape == (2048, 4096)
    latest = psrt.train.latest_checkpoint(str(ckpt))
    assert latest is not None and Path(latest).name in names

    took, status = ps.terminate()
    assert took < END_WITHIN and status == 0, (took, status, ps.output())
    assert re.search(r"/job:ps/task:0: signal 15, stopping", ps.output()), ps.output()


def test_install_only_as_pid_1_and_only_over_the_default(monkeypatch):
    assert sigterm.install() is (os.getpid() == 1)  # pytest is not PID 1 here
    calls = []
    monkeypatch.setattr(sigterm.signal, "signal", lambda *a: calls.append(a))
    monkeypatch.setattr(sigterm.signal, "getsignal", lambda s: signal.SIG_DFL)
    assert sigterm.install(pid=2) is False and not calls
    assert sigterm.install(pid=1) is True
    assert calls == [(signal.SIGTERM, sigterm._on_sigterm)]
    monkeypatch.setattr(sigterm.signal, "getsignal", lambda s: signal.SIG_IGN)
    assert sigterm.install(pid=1) is False and len(calls) == 1


def test_the_handler_ends_a_stuck_process_within_a_second():
    # The handler, installed as for PID 1, in a process whose main thread then blocks
    # in a non-daemon thread's join (a shutdown that would never finish).
    script = textwrap.dedent("""
        import threading, time, sys
        from psrt.platform import sigterm
        assert sigterm.install(pid=1)
        import psrt  # the psrt logger's handler
        stop = threading.Event()
        threading.Thread(target=stop.wait).start()   # never set: exit would wait forever
        print("ready", flush=True)
        while True:
            time.sleep(0.01)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        took = time.monotonic() - start
        status = proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert status == 143 and sigterm.FORCE_EXIT_SECS <= took < END_WITHIN, (status, took, err)
    assert "SIGTERM received by PID 1" in err and "Traceback" not in err, err


def test_forced_exit_removes_an_abandoned_checkpoint_write(tmp_path):
    """The forced ``os._exit`` skips atexit, so psrt.platform.sigterm runs the checkpoint
    writer's clean-up first: a write stuck in a thread leaves no temporary file behind."""
    target = tmp_path / "model.ckpt-1"
    script = textwrap.dedent(f"""
        import threading
        from psrt.checkpoint import atomic_file
        from psrt.platform import sigterm

        started = threading.Event()

        def stuck(f):
            f.write(b"x" * 1024)
            started.set()
            threading.Event().wait()          # never returns: the write is abandoned

        t = threading.Thread(target=atomic_file._atomic_write, args=({str(target)!r}, stuck),
                             daemon=True)
        t.start()
        started.wait(10)
        sigterm._forced_exit()
        """)
    proc = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == sigterm.EXIT_STATUS, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], proc.stderr
