"""A worker dying in the middle of a big push (issue 22, item 6; docs/protocol.md "Streamed
frames", PUSH ``ATOMIC``). The worker is a real process (tests/_push_task.py) that SIGKILLs
itself once a quarter of a 64 MiB gradient is sent; the ps task is one too
(tests/_ps_task.py).

- Asynchronous, by default: the ps task applies a streamed push chunk by chunk, so the
  chunks before the break are applied and the rest is not (TF applies the parts of a
  partitioned variable independently too).
- ``ConfigProto(atomic_pushes=True)``: the gradient is applied only once all of it arrived,
  so the variable stays bit for bit as it was.
- ``SyncReplicasOptimizer``: a step-tagged gradient is read whole before it counts, so the
  partial one never counts towards the step: the step then applies the mean of the two
  whole gradients only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import psrt
from psrt import errors

import _push_task as task
from _cluster import _child_env, fresh_graph, read_line  # noqa: F401
from _ps_task import PsProcess

HERE = os.path.dirname(os.path.abspath(__file__))
N = 16 << 20  # float32 elements: a 64 MiB variable, 128 chunks of the default 512 KiB


@pytest.fixture
def ps():
    p = PsProcess()
    yield p
    p.stop()


def _die_mid_push(address: str, mode: str, n: int = N) -> None:
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "_push_task.py"), address, mode,
                             str(n)], stdout=subprocess.PIPE, text=True, env=_child_env())
    try:
        read_line(proc, "READY", timeout=120)
        assert proc.wait(120) == -9  # SIGKILL, mid-push (it never printed PUSHED)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _session(ps: PsProcess, mode: str) -> psrt.Session:
    return psrt.Session(f"psrt://{ps.address}", config=task.config(ps.address, mode))


def test_asynchronous_push_cut_off_leaves_the_chunks_before_the_break(ps, fresh_graph):
    w, gs, _ = task.build("async", N)
    _die_mid_push(ps.address, "async")
    with _session(ps, "async") as sess:
        value = sess.run(w)
        assert sess.run(gs) == 0
    updated = task.W0 - np.float32(task.LR) * task.KILLED_GRADIENT
    applied = value == updated
    # The gradient's first chunk arrived (a quarter of it was sent), its last never did.
    assert applied[0] and not applied[-1]
    assert np.all(applied | (value == task.W0))  # every element old or new, none torn
    assert 0 < applied.sum() < N


def test_atomic_push_cut_off_leaves_the_variable_bit_identical(ps, fresh_graph):
    w, gs, _ = task.build("atomic", N)
    _die_mid_push(ps.address, "atomic")
    with _session(ps, "atomic") as sess:
        value = sess.run(w)
        assert sess.run(gs) == 0
    np.testing.assert_array_equal(value, np.full(N, task.W0, np.float32))


def test_atomic_push_that_arrives_whole_is_applied_like_a_streamed_one(ps, fresh_graph):
    """The same update either way, on a variable of several chunks (not killed)."""
    n = 3 << 18  # 3 MiB: 6 chunks
    w, gs, train_op = task.build("atomic", n)
    for mode in ("atomic", "async"):
        with _session(ps, mode) as sess:
            sess.run(psrt.global_variables_initializer())
            sess.run(train_op, feed_dict={"x": np.float32(0.0)})
            np.testing.assert_array_equal(sess.run(w), np.full(n, task.W0 - task.W0 * np.float32(
                task.LR), np.float32))
            assert sess.run(gs) == 1


def test_atomic_push_larger_than_the_budget_is_refused(fresh_graph):
    ps = PsProcess(max_inflight_bytes=1 << 20)
    try:
        w, _, train_op = task.build("atomic", 1 << 19)  # 2 MiB > the 1 MiB budget
        with _session(ps, "atomic") as sess:
            sess.run(psrt.global_variables_initializer())
            with pytest.raises(errors.ResourceExhaustedError,
                               match=r"atomic PUSH of 'W'.*in-flight budget of 1048576 bytes"):
                sess.run(train_op, feed_dict={"x": np.float32(0.0)})
    finally:
        ps.stop()


def test_sync_partial_gradient_never_counts_towards_the_step(ps, fresh_graph):
    w, gs, train_op = task.build("sync", N)
    _die_mid_push(ps.address, "sync")
    a, b = _session(ps, "sync"), _session(ps, "sync")
    try:
        # Nothing was collected for step 0 on W or the global step (both on ps task 0).
        h = a._handle(w)
        out = np.empty(N, np.float32)
        _, [(_, step, count)], _ = a._client.sync_step(
            [], [], [], [], [], None, 0, -1, False, [h], [out], [0], 0, 0.0)
        assert (step, count) == (0, 0)
        # Two whole gradients complete step 0: W0 - lr * mean(W0 - 0, W0 - 0.25).
        results = {}

        def run(sess, x, key):
            results[key] = sess.run([train_op, gs], feed_dict={"x": np.float32(x)})

        threads = [threading.Thread(target=run, args=(a, 0.0, "a")),
                   threading.Thread(target=run, args=(b, 0.25, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert results["a"][1] == results["b"][1] == 1
        g = (np.float32(0.5) + np.float32(0.25)) / np.float32(2)
        np.testing.assert_array_equal(a.run(w), np.full(N, task.W0 - g, np.float32))
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("atomic", [False, True], ids=["streamed", "atomic"])
def test_raw_push_cut_off_after_two_chunks(atomic):
    """The frame level (docs/protocol.md, "Streamed frames"): a PUSH of 8 chunks of 4 KiB whose
    sender closes after 2 and a half: streamed, the first two chunks are applied, each whole;
    with ATOMIC (flag bit 3) nothing is."""
    import _frames as fr  # noqa: PLC0415
    from psrt import _core  # noqa: PLC0415

    ps = PsProcess(chunk_bytes=4096)
    client = _core.Client("worker", 0)
    try:
        client.connect(0, ps.address, 10.0)
        n = 8 * 1024  # float32: 8 chunks
        [(h, _)] = client.register([(0, "v", "float32", [n], "GradientDescent",
                                     {"learning_rate": 1.0}, np.zeros(n, np.float32))])
        var_id = client.var_info(h)[1]
        grad = np.ones(n, np.float32).tobytes()
        with fr.connect(ps.address) as sock:
            sock.sendall(fr.header(fr.PUSH, len(grad), var_id=var_id, dtype=fr.FLOAT32,
                                   flags=fr.F_ATOMIC if atomic else 0)
                         + grad[:2 * 4096 + 2048])
        value = np.empty(n, np.float32)
        for _ in range(100):  # the ps task sees the end of stream, then has applied it all
            client.pull([h], [value])
            if atomic or value[2047] == -1.0:
                break
            time.sleep(0.05)
        want = np.zeros(n, np.float32)
        if not atomic:
            want[:2048] = -1.0  # two chunks of 1024 elements
        time.sleep(0.2)
        client.pull([h], [value])
        np.testing.assert_array_equal(value, want)
        # The connection is usable for a whole atomic push afterwards.
        client.atomic_pushes = True
        client.push([h], [np.ones(n, np.float32)])
        client.pull([h], [value])
        np.testing.assert_array_equal(value, want - 1.0)
    finally:
        client.close()
        ps.stop()
