"""Tests for psrt.cluster: ClusterSpec (TF's server_lib_test ClusterSpecTest) and TF_CONFIG."""

from __future__ import annotations

import json

import pytest

from psrt.cluster import (
    ClusterSpec,
    TaskRole,
    cluster_spec_from_tf_config,
    task_role_from_tf_config,
)

PS_WORKER = {
    "ps": ["ps0:2222", "ps1:2222"],
    "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
}


# --- ClusterSpec: ports of TF's ClusterSpecTest -------------------------------------


def test_string_conversion():
    spec = ClusterSpec({"ps": ["ps0:1111"], "worker": ["worker0:3333", "worker1:4444"]})
    assert str(spec) == (
        "ClusterSpec({'ps': ['ps0:1111'], 'worker': ['worker0:3333', 'worker1:4444']})")
    assert repr(spec) == str(spec)


def test_repr_sorts_jobs_and_shows_sparse_dicts():
    spec = ClusterSpec({"worker": {1: "w1:1"}, "ps": ["p0:1"]})
    assert repr(spec) == "ClusterSpec({'ps': ['p0:1'], 'worker': {1: 'w1:1'}})"


def test_dict_copy_and_round_trip_equivalences():
    spec = ClusterSpec(PS_WORKER)
    assert ClusterSpec(spec) == spec
    assert ClusterSpec(spec.as_dict()) == spec
    assert ClusterSpec(spec).as_dict() == PS_WORKER


def test_copy_is_independent_of_source_dict():
    source = {"ps": ["ps0:2222"]}
    spec = ClusterSpec(source)
    source["ps"].append("ps1:2222")
    source["worker"] = ["w:1"]
    assert spec.as_dict() == {"ps": ["ps0:2222"]}
    spec.as_dict()["ps"].append("x:1")
    assert spec.num_tasks("ps") == 1


def test_zero_worker_job():
    spec = ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": []})
    assert spec.jobs == ["ps", "worker"]
    assert spec.num_tasks("worker") == 0
    assert spec.task_indices("worker") == []
    assert spec.job_tasks("worker") == []
    # TF's as_dict gives {} for a job with no tasks.
    assert spec.as_dict() == {"ps": ["ps0:2222", "ps1:2222"], "worker": {}}
    assert ClusterSpec(spec.as_dict()) == spec


def test_cluster_spec_accessors():
    original = {
        "ps": ["ps0:2222", "ps1:2222"],
        "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
        "sparse": {0: "sparse0:2222", 3: "sparse3:2222"},
    }
    spec = ClusterSpec(original)
    assert spec.as_dict() == original

    assert spec.num_tasks("ps") == 2
    assert spec.num_tasks("worker") == 3
    assert spec.num_tasks("sparse") == 2
    with pytest.raises(ValueError, match=r"'unknown'.*\['ps', 'worker', 'sparse'\]"):
        spec.num_tasks("unknown")

    assert spec.task_address("ps", 0) == "ps0:2222"
    assert spec.task_address("sparse", 0) == "sparse0:2222"
    assert spec.task_address("sparse", 3) == "sparse3:2222"
    with pytest.raises(ValueError, match="unknown"):
        spec.task_address("unknown", 0)
    with pytest.raises(ValueError, match=r"index 2 in job 'sparse'.*\[0, 3\]"):
        spec.task_address("sparse", 2)

    assert spec.task_indices("ps") == [0, 1]
    assert spec.task_indices("worker") == [0, 1, 2]
    assert spec.task_indices("sparse") == [0, 3]
    with pytest.raises(ValueError, match="unknown"):
        spec.task_indices("unknown")

    assert spec.job_tasks("ps") == ["ps0:2222", "ps1:2222"]
    assert spec.job_tasks("worker") == ["worker0:2222", "worker1:2222", "worker2:2222"]
    assert spec.job_tasks("sparse") == ["sparse0:2222", None, None, "sparse3:2222"]
    with pytest.raises(ValueError, match="unknown"):
        spec.job_tasks("unknown")


def test_jobs_keep_dict_order():
    assert ClusterSpec({"worker": ["w:1"], "ps": ["p:1"], "chief": ["c:1"]}).jobs == [
        "worker", "ps", "chief"]


def test_sparse_job_with_json_string_keys():
    spec = ClusterSpec(json.loads('{"worker": {"1": "w1:2222", "0": "w0:2222"}, '
                                  '"ps": {"37": "ps37:2222"}}'))
    assert spec.task_indices("worker") == [0, 1]
    assert spec.as_dict() == {"worker": ["w0:2222", "w1:2222"], "ps": {37: "ps37:2222"}}
    assert spec.task_address("ps", 37) == "ps37:2222"
    assert spec == ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {37: "ps37:2222"}})


def test_task_address_accepts_numpy_int():
    np = pytest.importorskip("numpy")
    assert ClusterSpec(PS_WORKER).task_address("ps", np.int64(1)) == "ps1:2222"


def test_tuple_tasks_are_dense():
    assert ClusterSpec({"ps": ("a:1", "b:2")}).as_dict() == {"ps": ["a:1", "b:2"]}


def test_empty_cluster_spec_is_false():
    assert not ClusterSpec({})
    assert not ClusterSpec(None)
    assert ClusterSpec(None) == ClusterSpec({})
    assert ClusterSpec(None).jobs == []
    assert ClusterSpec(None).as_dict() == {}


def test_non_empty_cluster_spec_is_true():
    assert ClusterSpec({"job": ["host:port"]})


def test_eq():
    assert ClusterSpec({}) == ClusterSpec({})
    assert ClusterSpec({"job": ["host:2222"]}) == ClusterSpec({"job": ["host:2222"]})
    assert ClusterSpec({"job": {0: "host:2222"}}) == ClusterSpec({"job": ["host:2222"]})
    assert not (ClusterSpec({"job": ["host:2222"]}) != ClusterSpec({"job": ["host:2222"]}))


def test_ne():
    assert ClusterSpec({}) != ClusterSpec({"job": ["host:2223"]})
    assert ClusterSpec({"job1": ["host:2222"]}) != ClusterSpec({"job2": ["host:2222"]})
    assert ClusterSpec({"job": ["host:2222"]}) != ClusterSpec({"job": ["host:2223"]})
    assert (ClusterSpec({"job": ["host:2222", "host:2223"]})
            != ClusterSpec({"job": ["host:2223", "host:2222"]}))
    assert ClusterSpec({"job": ["host:2222"]}) != {"job": ["host:2222"]}


def test_not_hashable():
    with pytest.raises(TypeError):
        hash(ClusterSpec({}))


@pytest.mark.parametrize("bad", [["ps0:2222"], "ps0:2222", 3, ("ps", ["a:1"])])
def test_bad_cluster_type_raises_type_error(bad):
    with pytest.raises(TypeError, match="must be a dict mapping one or more job names"):
        ClusterSpec(bad)


def test_bad_job_name_raises_type_error():
    with pytest.raises(TypeError, match=r"job name 3 \(type int\)"):
        ClusterSpec({3: ["a:1"]})


def test_bad_tasks_type_raises_type_error():
    with pytest.raises(TypeError, match=r"tasks for job 'ps'.*'a:1'"):
        ClusterSpec({"ps": "a:1"})


@pytest.mark.parametrize("tasks", [["a:1", 2], {0: b"a:1"}, [None]])
def test_bad_address_raises_type_error(tasks):
    with pytest.raises(TypeError, match=r"address of task \d in job 'ps'"):
        ClusterSpec({"ps": tasks})


def test_non_integer_sparse_key_names_job_and_key():
    with pytest.raises(ValueError, match=r"task index 'one' in job 'worker'"):
        ClusterSpec({"worker": {"one": "w:1"}})
    with pytest.raises(TypeError, match=r"task index 1.5 .* in job 'worker'"):
        ClusterSpec({"worker": {1.5: "w:1"}})
    with pytest.raises(TypeError, match=r"task index True in job 'worker'"):
        ClusterSpec({"worker": {True: "w:1"}})


def test_negative_and_duplicate_sparse_keys():
    with pytest.raises(ValueError, match=r"task index -1 in job 'ps' must be >= 0"):
        ClusterSpec({"ps": {-1: "a:1"}})
    with pytest.raises(ValueError, match="task index 1 appears twice in job 'ps'"):
        ClusterSpec({"ps": {1: "a:1", "1": "b:1"}})


# --- TF_CONFIG ----------------------------------------------------------------------

KUBEFLOW = {
    "cluster": {
        "chief": ["trainer-chief-0:2222"],
        "worker": ["trainer-worker-0:2222", "trainer-worker-1:2222"],
        "ps": ["trainer-ps-0:2222", "trainer-ps-1:2222"],
    },
    "task": {"type": "worker", "index": 1},
    "environment": "cloud",
}


def test_tf_config_from_json_string():
    cluster, task_type, task_index = cluster_spec_from_tf_config(json.dumps(KUBEFLOW))
    assert cluster == ClusterSpec(KUBEFLOW["cluster"])
    assert cluster.task_address("ps", 1) == "trainer-ps-1:2222"
    assert (task_type, task_index) == ("worker", 1)


def test_tf_config_from_dict_with_string_index():
    config = {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker",
                                                                "index": "1"}}
    assert cluster_spec_from_tf_config(config)[1:] == ("worker", 1)


def test_tf_config_read_from_environment(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(KUBEFLOW))
    cluster, task_type, task_index = cluster_spec_from_tf_config()
    assert cluster.num_tasks("worker") == 2
    assert (task_type, task_index) == ("worker", 1)
    role = task_role_from_tf_config()
    assert role == TaskRole("worker", 1, False, ClusterSpec(KUBEFLOW["cluster"]))


@pytest.mark.parametrize("value", [None, "", "  "])
def test_tf_config_missing_is_local_mode(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", value)
    cluster, task_type, task_index = cluster_spec_from_tf_config()
    assert (cluster, task_type, task_index) == (ClusterSpec({}), None, None)
    role = task_role_from_tf_config()
    assert (role.job_name, role.task_index, role.is_chief) == ("worker", 0, True)
    assert not role.cluster


def test_tf_config_without_cluster_must_be_worker_0():
    assert task_role_from_tf_config({"task": {"type": "worker", "index": 0}}).is_chief
    with pytest.raises(ValueError, match=r"worker 0.*'ps' index 0"):
        task_role_from_tf_config({"task": {"type": "ps", "index": 0}})
    with pytest.raises(ValueError, match=r"worker 0.*'worker' index 2"):
        task_role_from_tf_config({"task": {"type": "worker", "index": 2}})


def test_tf_config_bad_json_quotes_problem():
    with pytest.raises(ValueError, match=r"not valid JSON: Expecting.*line 1 column 2.*"
                                         r"'\{cluster: 1\}'"):
        cluster_spec_from_tf_config("{cluster: 1}")


def test_tf_config_bad_json_in_environment_names_variable(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "not json")
    with pytest.raises(ValueError, match="environment variable TF_CONFIG is not valid"):
        cluster_spec_from_tf_config()


def test_tf_config_not_an_object():
    with pytest.raises(ValueError, match=r"JSON object.*\[1, 2\]"):
        cluster_spec_from_tf_config("[1, 2]")
    with pytest.raises(ValueError, match="'task' must be an object"):
        cluster_spec_from_tf_config({"cluster": {"worker": ["w:1"]}, "task": "worker"})
    with pytest.raises(TypeError, match="tf_config must be"):
        cluster_spec_from_tf_config(42)


def test_tf_config_task_type_missing_from_cluster_lists_jobs():
    config = {"cluster": {"worker": ["w:1"], "ps": ["p:1"]}, "task": {"type": "chief",
                                                                      "index": 0}}
    with pytest.raises(ValueError, match=r"'chief' is not a job.*\['worker', 'ps'\]"):
        cluster_spec_from_tf_config(config)


def test_tf_config_task_index_out_of_range_lists_indices():
    config = {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker",
                                                                "index": 2}}
    with pytest.raises(ValueError, match=r"index 2 .* 'worker'.*\[0, 1\]"):
        cluster_spec_from_tf_config(config)


@pytest.mark.parametrize("index", [-1, "x", 1.5, True, [0]])
def test_tf_config_bad_index(index):
    config = {"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker",
                                                                "index": index}}
    with pytest.raises(ValueError, match="task index"):
        cluster_spec_from_tf_config(config)


def test_tf_config_cluster_requires_task_type_and_index():
    with pytest.raises(ValueError, match=r"no task type.*\['worker', 'evaluator'\]"):
        cluster_spec_from_tf_config({"cluster": {"worker": ["w:1"]}})
    with pytest.raises(ValueError, match="no task index for task type 'worker'"):
        cluster_spec_from_tf_config({"cluster": {"worker": ["w:1"]},
                                     "task": {"type": "worker"}})


def test_tf_config_evaluator_may_live_outside_cluster():
    config = {"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
              "task": {"type": "evaluator", "index": 0}}
    cluster, task_type, task_index = cluster_spec_from_tf_config(config)
    assert cluster.jobs == ["chief", "worker"]
    assert (task_type, task_index) == ("evaluator", 0)
    assert task_role_from_tf_config(config).is_chief is False


def test_tf_config_chief_rules():
    chief = {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p:1"]}

    def role(cluster, task_type, index):
        return task_role_from_tf_config({"cluster": cluster,
                                         "task": {"type": task_type, "index": index}})

    assert role(chief, "chief", 0).is_chief is True
    assert role(chief, "worker", 0).is_chief is False
    assert role(chief, "ps", 0).is_chief is False
    master = {"master": ["m:1"], "worker": ["w0:1"], "ps": ["p:1"]}
    assert role(master, "master", 0).is_chief is True
    assert role(master, "worker", 0).is_chief is False
    no_chief = {"worker": ["w0:1", "w1:1"], "ps": ["p:1"]}
    assert role(no_chief, "worker", 0) == TaskRole("worker", 0, True, ClusterSpec(no_chief))
    assert role(no_chief, "worker", 1).is_chief is False
    assert role(no_chief, "ps", 0).is_chief is False


def test_tf_config_chief_job_checks():
    with pytest.raises(ValueError, match="only one 'chief' task"):
        cluster_spec_from_tf_config({"cluster": {"chief": ["a:1", "b:1"]},
                                     "task": {"type": "chief", "index": 0}})
    with pytest.raises(ValueError, match="both a 'master' and a 'chief'"):
        cluster_spec_from_tf_config({"cluster": {"chief": ["a:1"], "master": ["b:1"]},
                                     "task": {"type": "chief", "index": 0}})
    with pytest.raises(ValueError, match="'evaluator' is not supported .* 'master'"):
        cluster_spec_from_tf_config({"cluster": {"master": ["b:1"]},
                                     "task": {"type": "evaluator", "index": 0}})


def test_task_role_is_frozen():
    role = task_role_from_tf_config({})
    with pytest.raises(AttributeError):
        role.task_index = 3  # type: ignore[misc]
