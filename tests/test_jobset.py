"""Tests for psrt.distribute.jobset: a JobSet pod's cluster and role from its environment.

The environments are the ones a JobSet pod gets: the JobSet controller's annotations read
through the downward API (JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX,
REPLICATED_JOB_REPLICAS), the Job controller's JOB_COMPLETION_INDEX and the pod's HOSTNAME
(``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``). tests/test_deploy.py derives them from
deploy/kubernetes/jobset.yaml; tests/test_multihost.py runs such pods as processes.
"""

from __future__ import annotations

import pytest

import psrt
from psrt.distribute.jobset import JOBSET_ENV, parse_replicated_jobs, task_role_from_jobset


def _pod(jobset: str, rjob: str, job_index: int, pod_index: int, layout: str | None,
         **extra: str) -> dict[str, str]:
    env = {"JOBSET_NAME": jobset, "REPLICATED_JOB_NAME": rjob, "JOB_INDEX": str(job_index),
           "JOB_COMPLETION_INDEX": str(pod_index),
           "HOSTNAME": f"{jobset}-{rjob}-{job_index}-{pod_index}"}
    if layout is not None:
        env["PSRT_JOBSET_REPLICATED_JOBS"] = layout
    env.update(extra)
    return env


def test_face_exports_it():
    assert psrt.train.task_role_from_jobset is task_role_from_jobset
    assert "task_role_from_jobset" in psrt.train.__all__


def test_one_pod_per_job_layout():
    role = task_role_from_jobset(environ=_pod("mnist", "ps", 1, 0, "ps=2,worker=3"))
    assert (role.job_name, role.task_index, role.is_chief) == ("ps", 1, False)
    assert role.cluster.as_dict() == {
        "ps": ["mnist-ps-0-0.mnist:2222", "mnist-ps-1-0.mnist:2222"],
        "worker": ["mnist-worker-0-0.mnist:2222", "mnist-worker-1-0.mnist:2222",
                   "mnist-worker-2-0.mnist:2222"]}
    assert role.cluster.jobs == ["ps", "worker"]
    chief = task_role_from_jobset(environ=_pod("mnist", "worker", 0, 0, "ps=2,worker=3"))
    assert (chief.job_name, chief.task_index, chief.is_chief) == ("worker", 0, True)
    assert chief.worker_count == 3 and chief.id_in_cluster == 0
    other = task_role_from_jobset(environ=_pod("mnist", "worker", 2, 0, "ps=2,worker=3"))
    assert (other.task_index, other.is_chief) == (2, False)


def test_pods_per_job_layout_numbers_tasks_job_by_job():
    # worker=2x3: two Jobs of three pods (parallelism = completions = 3).
    env = _pod("js", "worker", 1, 2, "ps=1x2,worker=2x3")
    role = task_role_from_jobset(environ=env)
    assert (role.job_name, role.task_index) == ("worker", 5)
    assert role.cluster.as_dict()["worker"] == [
        f"js-worker-{j}-{p}.js:2222" for j in range(2) for p in range(3)]
    assert role.cluster.as_dict()["ps"] == ["js-ps-0-0.js:2222", "js-ps-0-1.js:2222"]
    assert role.cluster.task_address("worker", 5) == "js-worker-1-2.js:2222"


def test_chief_replicated_job_is_the_chief_as_in_a_tfjob():
    layout = {"chief": 1, "ps": 1, "worker": 2}
    chief = task_role_from_jobset(layout, environ=_pod("j", "chief", 0, 0, None))
    assert chief.is_chief and chief.worker_count == 3
    worker = task_role_from_jobset(layout, environ=_pod("j", "worker", 0, 0, None))
    assert not worker.is_chief
    classic = worker.chief_as_first_worker()
    assert (classic.job_name, classic.task_index) == ("worker", 1)
    assert classic.cluster.as_dict()["worker"] == [
        "j-chief-0-0.j:2222", "j-worker-0-0.j:2222", "j-worker-1-0.j:2222"]


def test_port_and_subdomain_from_arguments_and_environment():
    env = _pod("a", "ps", 0, 0, "ps=1,worker=1", PSRT_JOBSET_PORT="5000",
               PSRT_JOBSET_SUBDOMAIN="net")
    assert task_role_from_jobset(environ=env).cluster.task_address("ps", 0) == "a-ps-0-0.net:5000"
    role = task_role_from_jobset(port=7, subdomain="s", environ=env)
    assert role.cluster.task_address("worker", 0) == "a-worker-0-0.s:7"


def test_indices_fall_back_to_the_pods_hostname():
    env = _pod("big-set", "worker", 3, 1, "ps=1,worker=4x2")
    del env["JOB_INDEX"], env["JOB_COMPLETION_INDEX"]
    role = task_role_from_jobset(environ=env)
    assert (role.job_name, role.task_index) == ("worker", 7)


def test_outside_a_jobset_is_local_mode_like_tf_config():
    role = task_role_from_jobset(environ={})
    assert (role.job_name, role.task_index, role.is_chief) == ("worker", 0, True)
    assert not role.cluster
    assert task_role_from_jobset(environ={"JOBSET_NAME": " "}) == role


def test_parse_replicated_jobs():
    assert parse_replicated_jobs("ps=2, worker=1x4") == {"ps": (2, 1), "worker": (1, 4)}
    assert list(parse_replicated_jobs("worker=1,ps=1")) == ["worker", "ps"]  # order kept
    assert parse_replicated_jobs({"ps": 2, "worker": (3, 2)}) == {"ps": (2, 1),
                                                                  "worker": (3, 2)}


@pytest.mark.parametrize("text, message", [
    ("ps", "item 'ps' has no '='"),
    ("ps=0", "count '0' is not REPLICAS or REPLICASxPODS"),
    ("ps=2x", "count '2x' is not REPLICAS"),
    ("ps=two", "count 'two'"),
    ("PS=1", "replicated job name 'PS' is not a DNS label"),
    ("ps=1,ps=2", "replicated job 'ps' is given twice"),
    ("=1", "replicated job name '' is not a DNS label"),
])
def test_parse_replicated_jobs_rejects_bad_layouts_naming_them(text, message):
    with pytest.raises(ValueError, match="expected|twice") as info:
        parse_replicated_jobs(text)
    assert message in str(info.value)


def test_parse_replicated_jobs_rejects_bad_mapping_counts():
    with pytest.raises(ValueError, match=r"'ps': count \(2, 0\) must be replicas"):
        parse_replicated_jobs({"ps": (2, 0)})
    with pytest.raises(ValueError, match="count True"):
        parse_replicated_jobs({"ps": True})
    with pytest.raises(TypeError, match="must be a str or a mapping; got list"):
        parse_replicated_jobs(["ps=1"])  # type: ignore[arg-type]


def test_errors_name_the_missing_variable_and_where_it_comes_from():
    env = _pod("m", "ps", 0, 0, None)
    with pytest.raises(ValueError, match="set PSRT_JOBSET_REPLICATED_JOBS"):
        task_role_from_jobset(environ=env)
    env = _pod("m", "ps", 0, 0, "ps=1,worker=1")
    del env["REPLICATED_JOB_NAME"]
    with pytest.raises(ValueError, match=r"REPLICATED_JOB_NAME is not set.*replicatedjob-name"):
        task_role_from_jobset(environ=env)
    env = _pod("m", "ps", 0, 0, "ps=1,worker=1")
    del env["JOB_INDEX"], env["HOSTNAME"]
    with pytest.raises(ValueError, match=r"JOB_INDEX is not set.*jobset.sigs.k8s.io/job-index"):
        task_role_from_jobset(environ=env)
    assert "JOB_COMPLETION_INDEX" in JOBSET_ENV


def test_errors_name_the_bad_value_and_the_choices():
    with pytest.raises(ValueError, match=r"'evaluator' .* not in the layout 'ps=1,worker=1'; "
                                         r"its replicated jobs are \['ps', 'worker'\]"):
        task_role_from_jobset(environ=_pod("m", "evaluator", 0, 0, "ps=1,worker=1"))
    with pytest.raises(ValueError, match="JOB_INDEX=2 is past the 2 replicas of replicated job "
                                         "'worker'"):
        task_role_from_jobset(environ=_pod("m", "worker", 2, 0, "ps=1,worker=2"))
    with pytest.raises(ValueError, match="JOB_COMPLETION_INDEX=1 is past the 1 pods per Job"):
        task_role_from_jobset(environ=_pod("m", "worker", 0, 1, "ps=1,worker=2"))
    with pytest.raises(ValueError, match="REPLICATED_JOB_REPLICAS=3 .* says 2"):
        task_role_from_jobset(environ=_pod("m", "worker", 0, 0, "ps=1,worker=2",
                                           REPLICATED_JOB_REPLICAS="3"))
    with pytest.raises(ValueError, match="JOB_INDEX='x' is not a whole number"):
        task_role_from_jobset(environ=_pod("m", "ps", 0, 0, "ps=1", JOB_INDEX="x"))
    with pytest.raises(ValueError, match="PSRT_JOBSET_PORT='http' is not a port number"):
        task_role_from_jobset(environ=_pod("m", "ps", 0, 0, "ps=1", PSRT_JOBSET_PORT="http"))
    with pytest.raises(ValueError, match="port 70000 is not a port number"):
        task_role_from_jobset(port=70000, environ=_pod("m", "ps", 0, 0, "ps=1"))
