"""ps replication as a training script sees it (issue 23): ``ConfigProto(ps_replicas=2)`` (or
``PSRT_PS_REPLICAS``), a Session that connects every replica of each ps task's group and
declares it, and a MonitoredTrainingSession that trains on across a ps task killed with
SIGKILL and restarted at its port: the same session object and handles, no session
re-created (the lost-ps path does not fire while a group keeps a whole replica), and exact
final values with GradientDescent on a constant gradient (no update lost, none applied
twice). The restarted ps task copies nothing here (the ps side's copier does that): it is
registered again and written, not read.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

import psrt
from _cluster import fresh_graph, ps_tasks, read_line, reap, spawn, worker  # noqa: F401
from psrt.ops.dynamic_embedding import raw_session

LR = 0.5  # float32 multiples of 0.5 stay exact


def test_ps_replicas_default_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("PSRT_PS_REPLICAS", raising=False)
    assert psrt.ConfigProto().ps_replicas == 1
    monkeypatch.setenv("PSRT_PS_REPLICAS", "2")
    assert psrt.ConfigProto().ps_replicas == 2
    assert psrt.ConfigProto(ps_replicas=1).ps_replicas == 1  # an explicit value wins
    monkeypatch.setenv("PSRT_PS_REPLICAS", "two")
    with pytest.raises(ValueError, match=r"PSRT_PS_REPLICAS must be a whole number, 1 .* or 2 "
                                         r".*got 'two'"):
        psrt.ConfigProto()
    for bad in (3, 0):
        with pytest.raises(ValueError, match=rf"ps_replicas {bad} is not supported: only 1 "
                                             r"\(no replication\) or 2"):
            psrt.ConfigProto(ps_replicas=bad)


def test_two_replicas_need_two_ps_tasks(fresh_graph):
    cluster = {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
    with psrt.device("/job:ps/task:0"):
        psrt.Variable(np.zeros(2, np.float32), name="w")
    config = psrt.ConfigProto(ps_replicas=2, cluster_def=cluster, connect_timeout_secs=1)
    with pytest.raises(ValueError, match=r"ps_replicas=2 .* needs at least 2 ps tasks; job "
                                         r"'ps' of the cluster has 1"):
        psrt.Session("psrt://127.0.0.1:1", config=config)


class _Creations(psrt.train.SessionRunHook):
    def __init__(self) -> None:
        self.created = 0

    def after_create_session(self, session, coord) -> None:
        self.created += 1


def test_training_goes_on_across_a_ps_kill_and_restart(ps_tasks, worker):
    ps = ps_tasks(2)
    server = worker(ps)
    cluster = ps.cluster(1)
    with psrt.device(psrt.train.replica_device_setter(cluster=cluster)):
        w0 = psrt.Variable(np.zeros(3, np.float32), name="w0")  # round robin: ps 0, ps 1
        w1 = psrt.Variable(np.zeros(3, np.float32), name="w1")
        step = psrt.train.get_or_create_global_step()
    with psrt.device("/job:worker/task:0"):
        mine = psrt.Variable(np.zeros(2, np.float32), name="mine")  # this task's: unreplicated
    train = psrt.train.GradientDescentOptimizer(LR).minimize(
        psrt.reduce_sum(w0) + psrt.reduce_sum(w1), global_step=step)
    hook = _Creations()
    restarted = None
    config = psrt.ConfigProto(ps_replicas=2, heartbeat_timeout_secs=5)
    try:
        with psrt.train.MonitoredTrainingSession(master=server.target, config=config,
                                                 hooks=[hook]) as sess:
            raw = raw_session(sess)
            client = raw._client
            shard = {k: raw._shards[("ps", k)] for k in (0, 1)}
            assert raw._shards[("worker", 0)] not in {s for s, _ in client.replica_status()}
            runs = 0
            for _ in range(5):
                sess.run(train)
                runs += 1
            # SIGKILL while steps are under way: some run is cut in the middle.
            killer = threading.Timer(0.02, ps.procs[1].kill)
            killer.start()
            while dict(client.replica_status())[shard[1]] != "dead" or runs < 20:
                sess.run(train)
                runs += 1
            killer.join()
            got = sess.run([w0, w1, step, mine])
            for value in got[:2]:
                np.testing.assert_array_equal(value, np.full(3, -LR * runs, np.float32))
            assert got[2] == runs
            np.testing.assert_array_equal(got[3], np.zeros(2, np.float32))
            assert client.failovers() == 1  # ps 1 was the primary of its own variables
            # Restarted at its address: dialed again, every variable of its two groups
            # registered there again (uninitialized: a new process), then written, not read.
            ps.procs[1].wait(10)
            restarted = spawn("ps", json.dumps({"ps": ps.addresses}), 1)
            assert int(read_line(restarted, "READY ")) == ps.ports[1]
            deadline = time.monotonic() + 10
            while dict(client.replica_status())[shard[1]] != "joining":
                assert time.monotonic() < deadline
                sess.run(train)
                runs += 1
            held = {d["name"]: d["initialized"] for d in ps.list_variables(1)}
            assert held == {"w0": False, "w1": False, "global_step": False}
            for _ in range(3):
                sess.run(train)
                runs += 1
            got = sess.run([w0, w1, step])
            np.testing.assert_array_equal(got[0], np.full(3, -LR * runs, np.float32))
            np.testing.assert_array_equal(got[1], np.full(3, -LR * runs, np.float32))
            assert got[2] == runs
            assert raw_session(sess) is raw and raw._client is client
        assert hook.created == 1  # never re-created
    finally:
        if restarted is not None:
            reap(restarted)
