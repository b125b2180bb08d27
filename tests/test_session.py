"""Tests for psrt.session (``psrt.Session``): placement on real ps tasks, fetch structures,
initialization ops, errors, lifetime, local mode, and the end-to-end training runs of the
issue's "Done when" (worker before ps, two concurrent workers).

ps tasks are subprocesses (tests/_cluster.py) on ports the OS hands out, reaped by PID.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import psrt
from psrt import _core, errors

from _cluster import (  # noqa: F401  (fixtures)
    LOCALHOST,
    build_softmax_model,
    free_ports,
    fresh_graph,
    ps1,
    ps2,
    ps_tasks,
    read_line,
    reap,
    softmax_loss_and_grads,
    softmax_problem,
    spawn,
    start_ps_tasks,
    worker,
)

Pair = collections.namedtuple("Pair", ["first", "second"])


def _zero_grads(*values, **feeds):
    return 0.0, [np.zeros_like(v) for v in values]


# ---- placement end to end ------------------------------------------------------------------

def _pinned_mnist_model(cluster):
    """TF's device_setter_test order: global_step, hid_w, hid_b, sm_w, sm_b."""
    with psrt.device(psrt.train.replica_device_setter(
            worker_device="/job:worker/task:0", cluster=cluster)):
        global_step = psrt.train.get_or_create_global_step()
        hid_w = psrt.Variable(np.zeros((784, 100), np.float32), name="hid_w")
        hid_b = psrt.Variable(np.zeros(100, np.float32), name="hid_b")
        sm_w = psrt.Variable(np.zeros((100, 10), np.float32), name="sm_w")
        sm_b = psrt.Variable(np.zeros(10, np.float32), name="sm_b")
    return global_step, hid_w, hid_b, sm_w, sm_b


def test_pinned_placement_lands_on_the_named_ps_tasks(ps2, worker):
    server = worker(ps2)
    global_step, hid_w, hid_b, sm_w, sm_b = _pinned_mnist_model(server.server_def_cluster)
    assert [v.device for v in (global_step, hid_w, hid_b, sm_w, sm_b)] == [
        "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0", "/job:ps/task:1",
        "/job:ps/task:0"]
    opt = psrt.train.AdagradOptimizer(0.1)
    train_op = opt.minimize(_zero_grads, var_list=[hid_w, hid_b, sm_w, sm_b],
                            global_step=global_step)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train_op)
        on_ps0 = {v["name"]: v for v in ps2.list_variables(0)}
        on_ps1 = {v["name"]: v for v in ps2.list_variables(1)}
        assert set(on_ps0) == {"global_step", "hid_b", "sm_b"}
        assert set(on_ps1) == {"hid_w", "sm_w"}
        assert on_ps1["hid_w"]["shape"] == (784, 100)
        assert on_ps1["hid_w"]["dtype"] == "float32"
        assert on_ps1["hid_w"]["optimizer"] == "Adagrad"
        assert on_ps1["hid_w"]["initialized"] is True
        assert on_ps0["global_step"]["shape"] == () and on_ps0["global_step"]["dtype"] == "int64"
        assert on_ps0["global_step"]["optimizer"] == "None"
        # Slots live with their variable: same device, no separate variable on any ps,
        # fetched from the variable's ps.
        slot = opt.get_slot(hid_w, "accumulator")
        assert slot.name == "hid_w/Adagrad" and slot.device == hid_w.device
        np.testing.assert_array_equal(sess.run(slot), np.full((784, 100), 0.1, np.float32))
        assert sess.run(global_step) == 1


def test_values_live_on_the_ps_task(ps2, worker):
    """A raw client connected to ps1 alone reads what the session wrote to hid_w."""
    server = worker(ps2)
    _, hid_w, *_ = _pinned_mnist_model(server.server_def_cluster)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        value = np.arange(78400, dtype=np.float32).reshape(784, 100)
        sess.run(hid_w.assign(value))
    client = _core.Client("worker", 7)
    try:
        client.connect(0, ps2.addresses[1], 10.0)
        [(handle, initialized)] = client.register(
            [(0, "hid_w", "float32", (784, 100), "", {}, None)])
        assert initialized
        out = np.empty((784, 100), np.float32)
        client.pull([handle], [out], 0)
    finally:
        client.close()
    np.testing.assert_array_equal(out, value)


def test_device_naming_a_missing_job_or_task(ps1, worker):
    server = worker(ps1)
    with psrt.device("/job:ps/task:1"):
        psrt.Variable(np.zeros(2, np.float32), name="far")
    with pytest.raises(errors.InvalidArgumentError) as e:
        psrt.Session(server.target)
    assert str(e.value) == ("variable 'far' is placed on '/job:ps/task:1', but job 'ps' has "
                            "tasks [0]")
    psrt.reset_default_graph()
    with psrt.device("/job:moon/task:0"):
        psrt.Variable(np.zeros(2, np.float32), name="moon")
    with pytest.raises(errors.InvalidArgumentError) as e:
        psrt.Session(server.target)
    assert str(e.value) == ("variable 'moon' is placed on '/job:moon/task:0', but the cluster "
                            "has no job 'moon'; jobs: ['ps', 'worker']")


def test_raw_address_target(ps1, fresh_graph):
    """A "host:port" target of another process: unplaced variables live there; placed ones
    resolve through the cluster the target task was started with (CLUSTER_INFO)."""
    v = psrt.Variable(np.arange(4, dtype=np.float32), name="v")
    with psrt.Session(ps1.addresses[0]) as sess:
        assert sess.sess_str == ps1.addresses[0]
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), np.arange(4, dtype=np.float32))
    assert ps1.names_on(0) == {"v"}
    with psrt.device("/job:ps/task:0"):
        psrt.Variable(np.zeros(1, np.float32), name="placed")
    with psrt.Session("psrt://" + ps1.addresses[0]) as sess:
        sess.run(psrt.global_variables_initializer())
    assert ps1.names_on(0) == {"v", "placed"}


def test_unreachable_ps_is_unavailable_after_the_connect_timeout(worker, fresh_graph):
    (port,) = free_ports(1)

    class NoPs:
        addresses = [f"{LOCALHOST}:{port}"]

        def cluster(self, workers):
            return {"ps": self.addresses, "worker": [f"{LOCALHOST}:0"]}

    server = worker(NoPs())
    with psrt.device("/job:ps/task:0"):
        psrt.Variable(np.zeros(1, np.float32), name="v")
    start = time.monotonic()
    with pytest.raises(errors.UnavailableError) as e:
        psrt.Session(server.target, config=psrt.ConfigProto(connect_timeout_secs=0.5))
    assert time.monotonic() - start < 5.0
    assert str(e.value).startswith(f"/job:ps/task:0 at {LOCALHOST}:{port} did not accept a "
                                   f"connection within 0.5 s: ")


# ---- fetches --------------------------------------------------------------------------------

@pytest.fixture
def model(ps1, worker):
    """W [2,3] float32, b [3] float64, c int64 [2] and the global step on one ps task, in an
    open session with everything initialized."""
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="W")
        b = psrt.Variable(np.array([0.5, 1.5, 2.5]), name="b")
        c = psrt.Variable([7, 8], name="c")
        gs = psrt.train.get_or_create_global_step()
    sess = psrt.Session(server.target)
    sess.run(psrt.global_variables_initializer())
    yield sess, W, b, c, gs
    sess.close()


W0 = np.arange(6, dtype=np.float32).reshape(2, 3)
B0 = np.array([0.5, 1.5, 2.5])


def test_single_fetch_is_a_new_numpy_array(model):
    sess, W, b, c, gs = model
    w = sess.run(W)
    assert isinstance(w, np.ndarray) and w.dtype == np.float32 and w.shape == (2, 3)
    np.testing.assert_array_equal(w, W0)
    w[:] = -1  # the caller owns it
    w2 = sess.run(W)
    assert w2 is not w
    np.testing.assert_array_equal(w2, W0)
    assert sess.run(b).dtype == np.float64
    c_value = sess.run(c)
    assert c_value.dtype == np.int64
    np.testing.assert_array_equal(c_value, [7, 8])


def test_global_step_fetch_is_an_int(model):
    sess, W, b, c, gs = model
    step = sess.run(gs)
    assert type(step) is int and step == 0
    assert psrt.train.global_step(sess, gs) == 0


def test_list_tuple_dict_namedtuple_and_nested_fetches(model):
    sess, W, b, c, gs = model
    out = sess.run([W, b])
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[0], W0)
    out = sess.run((gs, b))
    assert isinstance(out, tuple) and out[0] == 0
    out = sess.run({"w": W, "step": gs})
    assert isinstance(out, dict) and set(out) == {"w", "step"} and out["step"] == 0
    out = sess.run(Pair(first=gs, second=W))
    assert isinstance(out, Pair) and out.first == 0
    np.testing.assert_array_equal(out.second, W0)
    out = sess.run({"a": [W, (gs, {"deep": b})], "p": Pair(c, None)})
    assert out["a"][1][0] == 0
    assert isinstance(out["a"][1], tuple) and isinstance(out["a"][1][1], dict)
    np.testing.assert_array_equal(out["a"][1][1]["deep"], B0)
    assert isinstance(out["p"], Pair) and out["p"].second is None
    np.testing.assert_array_equal(out["p"].first, [7, 8])
    ordered = collections.OrderedDict([("z", gs), ("a", gs)])
    out = sess.run(ordered)
    assert type(out) is collections.OrderedDict and list(out) == ["z", "a"]
    assert sess.run([]) == [] and sess.run(None) is None


def test_fetch_by_name(model):
    sess, W, b, c, gs = model
    np.testing.assert_array_equal(sess.run("W"), W0)
    np.testing.assert_array_equal(sess.run("W:0"), W0)
    assert sess.run("global_step:0") == 0
    with pytest.raises(ValueError) as e:
        sess.run("nope:0")
    assert str(e.value) == "The name 'nope:0' refers to no variable in the graph"


def test_fetch_of_an_invalid_type(model):
    sess = model[0]
    with pytest.raises(TypeError) as e:
        sess.run([3])
    assert str(e.value) == ("Fetch argument 3 has invalid type int; must be a psrt Variable, "
                            "PartitionedVariable, slot, Tensor, Operation, name or None")


def test_assign_and_assign_add(model):
    sess, W, b, c, gs = model
    assert sess.run(W.assign(np.ones((2, 3), np.float32))) is None
    np.testing.assert_array_equal(sess.run(W), np.ones((2, 3)))
    sess.run(W.assign_add(np.full((2, 3), 2.0, np.float32)))
    np.testing.assert_array_equal(sess.run(W), np.full((2, 3), 3.0))
    sess.run(c.assign_add(np.array([1, 1])))
    np.testing.assert_array_equal(sess.run(c), [8, 9])
    sess.run(gs.assign(41))
    assert sess.run(gs) == 41
    assert W.eval(session=sess)[0, 0] == 3.0
    with pytest.raises(ValueError, match="psrt has no default session: pass session="):
        W.eval()


def test_feed_dict_keys_by_name_or_object(ps1, worker):
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(np.zeros(2, np.float32), name="W")
    seen = {}

    def loss(W, **feeds):
        seen.update(feeds)
        return 1.5, [np.zeros_like(W)]

    class Placeholder:
        name = "y:0"

    op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[W])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run(op, feed_dict={"x:0": 1, Placeholder(): 2}) == 1.5
        assert seen == {"x": 1, "y": 2}
        with pytest.raises(TypeError, match="feed_dict key 3 must be a placeholder, a name"):
            sess.run(op, feed_dict={3: 1})


def test_an_op_fetched_twice_runs_once(ps1, worker):
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(W0, name="W")
        gs = psrt.train.get_or_create_global_step()
    op = psrt.train.GradientDescentOptimizer(1.0).apply_gradients(
        [(np.ones((2, 3), np.float32), W)], global_step=gs)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run([op, {"again": op}, gs]) == [None, {"again": None}, 1]
        np.testing.assert_array_equal(sess.run(W), W0 - 1)


# ---- failures of the ps tasks ------------------------------------------------------------------

def test_a_lost_ps_task_is_unavailable(ps1, worker):
    server = worker(ps1)
    with psrt.device("/job:ps/task:0"):
        v = psrt.Variable(np.zeros(2, np.float32), name="v")
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        ps1.procs[0].kill()
        ps1.procs[0].wait()
        for _ in range(2):  # the first failure is kept
            with pytest.raises(errors.UnavailableError) as e:
                sess.run(v)
            assert str(e.value) == (f"connection to /job:ps/task:0 at {ps1.addresses[0]} "
                                    f"closed by the ps task")


def _wait_stopped(pid, timeout=5.0):
    """Waits until every thread of ``pid`` is stopped: kill() returns before threads running
    on another CPU have stopped, and one of them could still answer a request."""
    tasks = f"/proc/{pid}/task"
    if not os.path.isdir(tasks):
        time.sleep(0.2)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(tasks):
            try:
                with open(f"{tasks}/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in "tT" for st in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} did not stop within {timeout} s")


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
def test_operation_timeout_is_deadline_exceeded(ps1, worker):
    server = worker(ps1)
    with psrt.device("/job:ps/task:0"):
        v = psrt.Variable(np.zeros(2, np.float32), name="v")
    config = psrt.ConfigProto(operation_timeout_in_ms=300)
    with psrt.Session(server.target, config=config) as sess:
        sess.run(psrt.global_variables_initializer())
        pid = ps1.procs[0].pid
        os.kill(pid, signal.SIGSTOP)  # the ps task stops answering
        try:
            _wait_stopped(pid)
            start = time.monotonic()
            with pytest.raises(errors.DeadlineExceededError) as e:
                sess.run(v)
            elapsed = time.monotonic() - start
        finally:
            os.kill(pid, signal.SIGCONT)
    assert 0.25 <= elapsed < 3.0
    assert str(e.value).startswith(f"no reply from /job:ps/task:0 at {ps1.addresses[0]} "
                                   f"within 0.3")


# ---- initialization --------------------------------------------------------------------------

def test_uninitialized_fetch_fails_and_reports(ps1, worker):
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(np.ones((2, 2), np.float32), name="W")
        b = psrt.Variable(np.ones(2, np.float32), name="b")
        gs = psrt.train.get_or_create_global_step()
    with psrt.Session(server.target) as sess:
        report = sess.run(psrt.report_uninitialized_variables())
        assert report.dtype == object
        assert list(report) == [b"W", b"b", b"global_step"]
        assert sess.run(psrt.is_variable_initialized(W)) is False
        with pytest.raises(errors.FailedPreconditionError) as e:
            sess.run(W)
        assert str(e.value) == "Attempting to use uninitialized value W"
        with pytest.raises(errors.FailedPreconditionError,
                           match="Attempting to use uninitialized value global_step"):
            sess.run(gs)

        assert sess.run(psrt.variables_initializer([W, gs])) is None
        assert list(sess.run(psrt.report_uninitialized_variables())) == [b"b"]
        assert list(sess.run(psrt.report_uninitialized_variables([W]))) == []
        assert sess.run(psrt.is_variable_initialized(W)) is True
        assert sess.run(b.initializer) is None
        report = sess.run(psrt.report_uninitialized_variables())
        assert report.shape == (0,) and report.dtype == object
        np.testing.assert_array_equal(sess.run(W), np.ones((2, 2)))


def test_initializer_resets_values_and_a_second_session_sees_them(ps1, worker):
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        v = psrt.Variable(np.zeros(3, np.float32), name="v")
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(v.assign(np.ones(3, np.float32)))
        with psrt.Session(server.target) as other:
            np.testing.assert_array_equal(other.run(v), np.ones(3))
            assert list(other.run(psrt.report_uninitialized_variables())) == []
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), np.zeros(3))


# ---- lifetime and local mode ----------------------------------------------------------------

def test_context_manager_and_close(ps1, worker):
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        v = psrt.Variable(np.zeros(1, np.float32), name="v")
    with psrt.Session(server.target) as sess:
        assert sess.graph is psrt.get_default_graph()
        assert sess.sess_str == server.target
        sess.run(v.initializer)
    with pytest.raises(RuntimeError) as e:
        sess.run(v)
    assert str(e.value) == "Attempted to use a closed Session."
    sess.close()  # idempotent
    other = psrt.Session(server.target)
    other.close()
    with pytest.raises(RuntimeError, match="Attempted to use a closed Session."):
        other.run(psrt.global_variables_initializer())


def test_local_session(fresh_graph):
    """Session("") holds every variable in a private in-process server, whatever the
    device says, as TF's local session ignores /job:ps."""
    with psrt.device("/job:ps/task:3"):
        v = psrt.Variable(np.full(4, 2.0, np.float32), name="v")
        gs = psrt.train.get_or_create_global_step()
    op = psrt.train.GradientDescentOptimizer(0.25).minimize(
        lambda v: (float(v.sum()), [np.ones(4, np.float32)]), var_list=[v], global_step=gs)
    with psrt.Session("") as sess:
        assert sess.sess_str == ""
        sess.run(psrt.global_variables_initializer())
        assert sess.run([op, gs]) == [8.0, 1]
        np.testing.assert_array_equal(sess.run(v), np.full(4, 1.75, np.float32))
        port = sess._own_server.port
    with psrt.Session("") as fresh:  # a new private server: nothing initialized there
        assert list(fresh.run(psrt.report_uninitialized_variables())) == [b"v", b"global_step"]
        assert fresh._own_server.port != port


def test_separate_graph(ps1, worker):
    server = worker(ps1)
    g = psrt.Graph()
    with g.as_default():
        with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
            v = psrt.Variable(np.ones(2, np.float32), name="in_g")
    assert psrt.global_variables() == []
    with psrt.Session(server.target, graph=g) as sess:
        assert sess.graph is g
        with g.as_default():
            sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), np.ones(2))


# ---- end-to-end training (the "Done when") ------------------------------------------

def test_each_step_returns_the_loss_and_the_incremented_global_step(ps2, worker):
    server = worker(ps2)
    W, b, gs, train_op = build_softmax_model(server.server_def_cluster, 0)
    x, y = softmax_problem()
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for i in range(5):
            w_before, b_before = sess.run([W, b])
            expected_loss, _ = softmax_loss_and_grads(w_before, b_before, x, y)
            loss, step = sess.run([train_op, gs], feed_dict={"images": x, "labels": y})
            assert loss == expected_loss
            assert type(step) is int and step == i + 1
            assert sess.run(gs) == i + 1
        # Order in the fetch list does not matter: the step is the one this run pushed.
        step, loss = sess.run((gs, train_op), feed_dict={"images": x, "labels": y})
        assert step == 6 and isinstance(loss, float)


def _run_worker(proc):
    out = json.loads(read_line(proc, "RESULT ", timeout=120))
    assert proc.wait(timeout=30) == 0
    return out


def test_two_concurrent_workers_train_to_a_lower_loss(ps2):
    steps = 150
    cluster = json.dumps(ps2.cluster(workers=2))
    procs = [spawn("worker", cluster, i, steps, "barrier", stdin=subprocess.PIPE)
             for i in range(2)]
    try:
        for p in procs:
            read_line(p, "WAITING")
        for p in procs:  # both start stepping together
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [_run_worker(p) for p in procs]
    finally:
        for p in procs:
            reap(p)
    x, y = softmax_problem()
    initial = np.log(y.shape[1])
    for r in results:
        assert len(r["losses"]) == steps
        assert r["steps"] == sorted(r["steps"])  # each worker sees the step grow
        assert r["losses"][-1] < r["losses"][0]
    # Every increment is atomic on the ps: the 2 * steps pushes returned 1..2*steps once each.
    assert sorted(results[0]["steps"] + results[1]["steps"]) == list(range(1, 2 * steps + 1))
    # The workers' steps interleave: they trained concurrently, not one after the other.
    assert results[0]["steps"][-1] > results[1]["steps"][0]
    assert results[1]["steps"][-1] > results[0]["steps"][0]
    psrt.reset_default_graph()
    try:
        server = psrt.train.Server(ps2.cluster(), job_name="worker", task_index=0)
        W, b, gs, _ = build_softmax_model(server.server_def_cluster, 0)
        with psrt.Session(server.target) as sess:
            w, bias, step = sess.run([W, b, gs])
        server.stop()
    finally:
        psrt.reset_default_graph()
    assert step == 2 * steps
    final, _ = softmax_loss_and_grads(w, bias, x, y)
    assert final < 0.5 * initial
    assert final < min(r["losses"][-1] for r in results) + 1e-6


def test_worker_started_before_its_ps_tasks_trains_once_they_come_up():
    ports = free_ports(2)
    cluster = {"ps": [f"{LOCALHOST}:{p}" for p in ports], "worker": [f"{LOCALHOST}:0"]}
    steps = 10
    proc = spawn("worker", json.dumps(cluster), 0, steps)
    ps = None
    try:
        read_line(proc, "STARTED")
        time.sleep(1.5)
        assert proc.poll() is None  # still waiting for the ps tasks
        ps = start_ps_tasks(2, ports)
        result = _run_worker(proc)
    finally:
        reap(proc)
        if ps is not None:
            for p in ps.procs:
                reap(p)
    assert result["steps"] == list(range(1, steps + 1))
    assert result["losses"][-1] < result["losses"][0]


# ---- Session('grpc://<a worker>') learns the cluster from the target ----------------------

def test_session_on_a_worker_target_learns_the_cluster_over_the_wire(ps2, worker):
    """TF: a worker server knows its ClusterDef, so ``tf.Session('grpc://worker:port')``
    from any process places variables on the ps tasks with no ``cluster_def``
    (tensorflow/core/distributed_runtime/master.cc creates the session from the server's
    cluster). psrt's target answers CLUSTER_INFO (docs/protocol.md)."""
    server = worker(ps2)
    # Not server.target: "grpc://host:port" is not this process's Server object, so the
    # session must ask the task itself.
    target = f"grpc://{LOCALHOST}:{server.port}"
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        w = psrt.Variable(np.arange(3, dtype=np.float32), name="grpc_w")
        b = psrt.Variable(np.ones(2, np.float32), name="grpc_b")
    assert (w.device, b.device) == ("/job:ps/task:0", "/job:ps/task:1")
    with psrt.Session(target) as sess:
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(w), np.arange(3, dtype=np.float32))
        sess.run(b.assign(np.full(2, 5.0, np.float32)))
    assert "grpc_w" in ps2.names_on(0) and "grpc_b" in ps2.names_on(1)
    assert "grpc_w" not in ps2.names_on(1)


def test_session_on_a_target_without_a_cluster_says_so(ps1, fresh_graph):
    bare = _core.Server(LOCALHOST, 0, "ps", 0)  # a task started with no cluster
    try:
        with psrt.device("/job:ps/task:0"):
            psrt.Variable(np.zeros(2, np.float32), name="nowhere")
        with pytest.raises(errors.InvalidArgumentError, match="cluster is unknown"):
            psrt.Session(f"grpc://{LOCALHOST}:{bare.port}")
    finally:
        bare.stop()
