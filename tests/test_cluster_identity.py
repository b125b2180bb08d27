"""Every task of a job must be given the same cluster (issue 22, item 1; wire version 6,
docs/protocol.md "Connection set-up"). A worker whose --ps_hosts lists the ps tasks in
another order used to split the model silently (both ps tasks ended up holding W and b):
now its HELLO says which task it means to reach and the digest of each job of its cluster,
the ps task compares them with its own, and the worker fails at connect with
FailedPreconditionError naming both tasks and both clusters. The ps tasks are real
processes (tests/_cluster.py) on ports the OS hands out.
"""

from __future__ import annotations

import numpy as np
import pytest

import psrt
from psrt import _core, errors
from psrt.runtime import targets

from _cluster import (LOCALHOST, build_softmax_model, free_ports, fresh_graph,  # noqa: F401
                      ps_tasks, softmax_problem)


def _cluster(ps: list[str]) -> dict[str, list[str]]:
    return {"ps": ps, "worker": [f"{LOCALHOST}:{free_ports(1)[0]}"]}


@pytest.mark.parametrize("explicit_ports", [True, False], ids=["ports-given", "ports-from-os"])
def test_a_swapped_ps_hosts_order_fails_at_connect_naming_both(ps_tasks, fresh_graph,
                                                               explicit_ports):
    # Ports given: the ps tasks know the whole ps job (the digests are compared too); from
    # the OS: each ps task knows only its own address, and the task index alone decides.
    ps = ps_tasks(2, ports=free_ports(2) if explicit_ports else None)
    a, b = ps.addresses
    cluster = _cluster([b, a])  # task 0 is at b for this worker; b is /job:ps/task:1
    server = psrt.train.Server(cluster, job_name="worker", task_index=0)
    try:
        build_softmax_model(psrt.train.ClusterSpec(cluster), 0)
        with pytest.raises(errors.FailedPreconditionError) as e:
            psrt.Session(server.target)
    finally:
        server.stop()
    msg = e.value.message
    assert f"/job:ps/task:0 at {b}" in msg, msg                       # whom it called
    assert "meant to reach /job:ps/task:0, but this is /job:ps/task:1" in msg, msg
    assert f"this worker's cluster: ps: [{b}, {a}]" in msg, msg       # its spec
    if explicit_ports:
        assert f"its cluster: ps: {a}, {b}" in msg, msg               # the ps task's spec
    # Nothing was registered anywhere: the model was not split.
    assert ps.names_on(0) == set() and ps.names_on(1) == set()


def test_a_different_ps_job_fails_at_connect_naming_both_lists(ps_tasks, fresh_graph):
    """The first ps task is where the worker expects it, but the worker's ps job lists a
    third task: the digests of job 'ps' differ, and variables would be placed over three
    tasks by this worker and over two by the others."""
    ps = ps_tasks(2, ports=free_ports(2))
    a, b = ps.addresses
    c = f"{LOCALHOST}:{free_ports(1)[0]}"
    cluster = _cluster([a, b, c])
    server = psrt.train.Server(cluster, job_name="worker", task_index=0)
    try:
        build_softmax_model(psrt.train.ClusterSpec(cluster), 0)
        with pytest.raises(errors.FailedPreconditionError) as e:
            psrt.Session(server.target)
    finally:
        server.stop()
    msg = e.value.message
    assert "/job:worker/task:0 and /job:ps/task:0 were given different clusters" in msg, msg
    assert f"job 'ps' is [{a}, {b}]" in msg, msg
    assert f"this worker's cluster: ps: [{a}, {b}, {c}]" in msg, msg


def test_the_normal_job_is_unaffected(ps_tasks, fresh_graph):
    ps = ps_tasks(2, ports=free_ports(2))
    cluster = _cluster(ps.addresses)
    server = psrt.train.Server(cluster, job_name="worker", task_index=0)
    try:
        W, b, gs, train_op = build_softmax_model(psrt.train.ClusterSpec(cluster), 0)
        x, y = softmax_problem()
        with psrt.Session(server.target) as sess:
            sess.run(psrt.global_variables_initializer())
            losses = [sess.run(train_op, feed_dict={"images": x, "labels": y})
                      for _ in range(5)]
            assert sess.run(gs) == 5
    finally:
        server.stop()
    assert losses[-1] < losses[0]
    assert ps.names_on(0) == {"W", "global_step"} and ps.names_on(1) == {"b"}


def test_a_raw_client_without_an_expectation_is_not_checked(ps_tasks):
    """Tools that only read (a LIST, a checkpoint inspector) name no task and no cluster."""
    ps = ps_tasks(1, ports=free_ports(1))
    client = _core.Client("tool", 0)
    try:
        client.connect(0, ps.addresses[0], 10.0)
        assert client.list_variables(0) == []
        with pytest.raises(errors.FailedPreconditionError, match="meant to reach /job:ps/task:3"):
            client.connect(1, ps.addresses[0], 10.0, "ps", 3)
    finally:
        client.close()


def test_job_digests_follow_the_documented_canonical_text():
    """docs/protocol.md "Cluster digests": SHA-256 of "psrt-cluster-v1\\n" + job + "\\n" +
    each address + "\\n", the first 8 bytes little-endian; incomplete jobs are left out."""
    import hashlib  # noqa: PLC0415

    want = int.from_bytes(hashlib.sha256(b"psrt-cluster-v1\nps\nh:1\nh:2\n").digest()[:8],
                          "little")
    assert targets.job_digest("ps", ["h:1", "h:2"]) == want
    assert targets.job_digest("ps", ["h:2", "h:1"]) != want
    spec = psrt.train.ClusterSpec({"ps": ["h:1", "h:2"], "worker": ["h:3", "h:0"],
                                   "chief": {1: "h:4"}})
    assert targets.cluster_jobs(spec) == [("ps", want, "h:1, h:2")]


def test_a_ps_task_with_a_secret_names_no_address_before_authentication():
    """The check runs at HELLO, before AUTH: a ps task with the job's secret refuses a peer
    meant for another task without showing it the cluster's addresses."""
    from _ps_task import PsProcess  # noqa: PLC0415

    secret = b"correct horse battery staple"
    ps = PsProcess(task=1, secret=secret, cluster={"ps": ["127.0.0.1:1", "127.0.0.1:2"]})
    client = _core.Client("worker", 0, secret)
    try:
        with pytest.raises(errors.FailedPreconditionError) as e:
            client.connect(0, ps.address, 10.0, "ps", 0)
        assert "meant to reach /job:ps/task:0, but this is /job:ps/task:1" in e.value.message
        assert "127.0.0.1:1" not in e.value.message and "its cluster" not in e.value.message
        client.connect(0, ps.address, 10.0, "ps", 1)  # the right task: authenticated, served
        assert client.list_variables(0) == []
    finally:
        client.close()
        ps.stop()
