"""The copier of a replicated ps task (psrt/runtime/replica_copier.py, docs/replication.md
"Rejoin"): a ps task restarted empty installs the variables workers re-register on it from
their other replica, value and optimizer slots, while the other replica keeps serving.

Two ps tasks in this process (psrt.train.Server with PSRT_PS_REPLICAS=2) over real TCP; the
"restart" is a new Server on the stopped one's port; raw _core.Clients play the workers.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import psrt
from psrt import _core
from replica_chaos import free_ports

ADAGRAD = {"learning_rate": 0.5, "slot_init": 0.1}


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setenv("PSRT_PS_REPLICAS", "2")
    ports = free_ports(2)
    spec = {"ps": [f"127.0.0.1:{p}" for p in ports]}
    servers = [psrt.train.Server(spec, job_name="ps", task_index=i) for i in range(2)]
    yield spec, servers
    for s in servers:
        s.stop()


def _client(spec):
    c = _core.Client("worker", 0, b"", 0.0)
    for i, address in enumerate(spec["ps"]):
        c.connect(i, address, 10.0)
    return c


def _wait_installed(server, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server._core.awaiting_variables():
            return
        time.sleep(0.02)
    raise AssertionError(f"still awaiting: {server._core.awaiting_variables()}")


def test_a_restarted_ps_task_copies_values_and_slots_back(cluster):
    spec, servers = cluster
    assert servers[0]._core.replication and servers[1]._core.replication
    init = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = _client(spec)
    # "v" lives on both tasks (a shard and its backup), trained with Adagrad on both.
    handles = [h for h, _ in c.register([(i, "v", "float32", [2, 3], "Adagrad", ADAGRAD, init)
                                         for i in range(2)])]
    grad = np.full((2, 3), 0.25, np.float32)
    for _ in range(3):
        c.push(handles, [grad, grad])
    want, want_acc = np.empty_like(init), np.empty_like(init)
    c.pull([handles[0]], [want])
    c.pull([handles[0]], [want_acc], slot=1)
    c.close()

    # ps task 1 is lost and comes back empty on its port.
    servers[1].stop()
    servers[1] = psrt.train.Server(spec, job_name="ps", task_index=1)
    c2 = _client(spec)
    [(h1, initialized)] = c2.register([(1, "v", "float32", [2, 3], "Adagrad", ADAGRAD, None)])
    assert not initialized
    _wait_installed(servers[1])
    got, got_acc = np.empty_like(init), np.empty_like(init)
    c2.pull([h1], [got])
    c2.pull([h1], [got_acc], slot=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_acc, want_acc)
    # The copy trains on as the original: one more push moves both alike.
    [h0] = [h for h, _ in c2.register([(0, "v", "float32", [2, 3], "Adagrad", ADAGRAD, None)])]
    c2.push([h0, h1], [grad, grad])
    a, b = np.empty_like(init), np.empty_like(init)
    c2.pull([h0, h1], [a, b])
    np.testing.assert_array_equal(a, b)
    assert servers[1]._copier is not None and servers[1]._copier.copied_variables == 1
    c2.close()


def test_a_variable_no_peer_holds_stays_awaiting(cluster):
    spec, servers = cluster
    c = _client(spec)
    # Registered without a value anywhere (a job still starting): nothing to copy.
    c.register([(1, "u", "float32", [4], "GradientDescent", {"learning_rate": 1.0}, None)])
    time.sleep(0.3)
    assert servers[1]._core.awaiting_variables() == ["u"]
    # The chief's initialization ends the wait the normal way (the ps task ends the state
    # right after its reply).
    c.register([(1, "u", "float32", [4], "GradientDescent", {"learning_rate": 1.0},
                 np.ones(4, np.float32))])
    _wait_installed(servers[1], timeout=2.0)
    assert servers[1]._copier is not None and servers[1]._copier.copied_variables == 0
    c.close()


def test_one_ps_task_cannot_replicate(monkeypatch):
    monkeypatch.setenv("PSRT_PS_REPLICAS", "2")
    with pytest.raises(ValueError, match="at least 2 ps tasks"):
        psrt.train.Server({"ps": ["127.0.0.1:0"]}, job_name="ps", task_index=0, start=False)
