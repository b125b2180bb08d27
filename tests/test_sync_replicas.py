"""Tests for psrt.train.SyncReplicasOptimizer and the session's synchronous step, in one
process: ``Session("")`` (a private in-process ps) or several Sessions on one
``Server.create_local_server()``, run from threads where replicas must meet.

Every trained value is compared bit for bit with a numpy loop written from TF1's rules: the
mean (sum in float32, then divided by the count) of the step's gradients, applied with the
wrapped optimizer's update (gradient descent: ``var - grad * float32(lr)``).
Multi-process clusters are tested in tests/test_sync_cluster.py.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import fresh_graph  # noqa: F401  (fixture)

LR = 0.25
LR32 = np.float32(LR)
W0 = np.array([1.0, -2.0, 0.5, 3.0], np.float32)

pytestmark = pytest.mark.usefixtures("fresh_graph")


def _quadratic(w: np.ndarray, x: Any = None) -> tuple[float, list[np.ndarray]]:
    """Loss 0.5 * |w - x|^2 (x fed per run, default 0); gradient w - x, float32."""
    target = np.zeros_like(w) if x is None else np.asarray(x, np.float32)
    g = (w - target).astype(np.float32)
    return float(0.5 * np.sum(g * g)), [g]


def _model(replicas: int, total: int | None = None, opt: Any = None
           ) -> tuple[psrt.Variable, psrt.Variable, Any, psrt.train.SyncReplicasOptimizer]:
    gs = psrt.train.get_or_create_global_step()
    w = psrt.Variable(W0, name="W")
    sync = psrt.train.SyncReplicasOptimizer(
        opt or psrt.train.GradientDescentOptimizer(LR), replicas_to_aggregate=replicas,
        total_num_replicas=total)
    return w, gs, sync.minimize(_quadratic, global_step=gs, var_list=[w]), sync


def _core_state(sess: psrt.Session, var: Any) -> tuple[int, int]:
    """(step, gradients collected) of a variable (global step: (value, count)) on its ps."""
    h = sess._handle(var)
    if var.dtype == np.int64:
        _, _, (_, value, count) = sess._client.sync_step(
            [], [], [], [], [], None, 0, h, False, [], [], [], 0, 0.0)
        return value, count
    out = np.empty(var.shape, var.dtype)
    _, [(_, step, count)], _ = sess._client.sync_step(
        [], [], [], [], [], None, 0, -1, False, [h], [out], [0], 0, 0.0)
    return step, count


class _Run(threading.Thread):
    """``fn()`` on a thread, keeping its result or exception (join re-raises it)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as e:  # noqa: BLE001 - handed to the joining test
            self.error = e

    def get(self, timeout: float = 10.0) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the run did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def _wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


FAST = psrt.ConfigProto(sync_timeout_secs=10.0)


# ---- API: construction and TF's errors ------------------------------------------------------

def test_constructor_validates_its_arguments():
    gd = psrt.train.GradientDescentOptimizer(0.1)
    opt = psrt.train.SyncReplicasOptimizer(gd, 3)
    assert (opt._replicas_to_aggregate, opt._total_num_replicas) == (3, 3)
    assert opt.get_name() == "sync_replicas"
    assert psrt.train.SyncReplicasOptimizer(gd, np.int64(2), 5)._total_num_replicas == 5
    with pytest.raises(ValueError, match=r"replicas_to_aggregate must be an int >= 1; got 0$"):
        psrt.train.SyncReplicasOptimizer(gd, 0)
    with pytest.raises(ValueError, match=r"total_num_replicas must be an int >= 1; got -1$"):
        psrt.train.SyncReplicasOptimizer(gd, 2, -1)
    with pytest.raises(TypeError, match=r"replicas_to_aggregate must be an int >= 1; got 2\.0"):
        psrt.train.SyncReplicasOptimizer(gd, 2.0)
    with pytest.raises(TypeError, match=r"total_num_replicas must be an int >= 1; got True"):
        psrt.train.SyncReplicasOptimizer(gd, 2, True)
    with pytest.raises(TypeError, match="wraps a psrt Optimizer"):
        psrt.train.SyncReplicasOptimizer("sgd", 2)
    with pytest.raises(TypeError, match="wraps a psrt Optimizer"):
        psrt.train.SyncReplicasOptimizer(opt, 2)
    with pytest.raises(TypeError, match="variable_averages must be a psrt.train.Exponential"):
        psrt.train.SyncReplicasOptimizer(gd, 2, variable_averages=object())


def test_apply_gradients_raises_tfs_errors():
    w = psrt.Variable(W0, name="W")
    gs = psrt.train.get_or_create_global_step()
    opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(0.1), 2)
    with pytest.raises(ValueError, match="^Must supply at least one variable$"):
        opt.apply_gradients([], global_step=gs)
    with pytest.raises(ValueError, match="^Global step is required to check staleness$"):
        opt.apply_gradients([(W0, w)])
    with pytest.raises(TypeError, match="does not have integer type"):
        opt.apply_gradients([(W0, w)], global_step=w)
    assert w._sync is None and gs._sync is None and not opt._gradients_applied
    op = opt.apply_gradients(iter([(W0, w)]), global_step=gs)
    assert op.sync == (2, 2) and w._sync == (2, 2) and gs._sync == (2, 2)
    assert w._optimizer is opt._opt and op.name == "sync_replicas"
    other = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(0.1), 3)
    with pytest.raises(ValueError, match=r"^variable 'W' is already trained synchronously with "
                       r"replicas_to_aggregate=2, total_num_replicas=2; it cannot also be with "
                       r"replicas_to_aggregate=3, total_num_replicas=3$"):
        other.apply_gradients([(W0, w)], global_step=gs)
    v = psrt.Variable(W0, name="V")
    with pytest.raises(ValueError, match=r"^global step 'global_step' is already advanced "
                       r"synchronously with replicas_to_aggregate=2, total_num_replicas=2"):
        other.apply_gradients([(W0, v)], global_step=gs)


def test_queue_runner_tokens_and_hook_before_and_after_apply_gradients():
    w = psrt.Variable(W0, name="W")
    gs = psrt.train.get_or_create_global_step()
    opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(0.1), 3, 1)
    with pytest.raises(ValueError, match=r"^Should be called after apply_gradients\(\)\.$"):
        opt.get_chief_queue_runner()
    with pytest.raises(ValueError, match=r"^get_init_tokens_op\(\) should be called after "
                                         r"apply_gradients\(\)\.$"):
        opt.get_init_tokens_op()
    for is_chief in (True, False):
        hook = opt.make_session_run_hook(is_chief)
        assert isinstance(hook, psrt.train.SessionRunHook)
        with pytest.raises(ValueError, match=r"^SyncReplicasOptimizer\.apply_gradient should be "
                                             r"called before using the hook\.$"):
            hook.begin()
    op = opt.minimize(_quadratic, global_step=gs, var_list=[w])
    assert op.sync == (3, 1)
    qr = opt.get_chief_queue_runner()
    assert qr.create_threads(None, coord=None, daemon=True, start=True) == []
    assert qr.exceptions_raised == []
    # R - total = 2 tokens are needed; -1 means "the default", as TF.
    with pytest.raises(ValueError, match=r"^Too few tokens to finish the first step: 1 "
                                         r"\(given\) vs 2 \(needed\)$"):
        opt.get_init_tokens_op(1)
    with pytest.raises(ValueError, match=r"Too few tokens .* 0 \(given\) vs 2 \(needed\)"):
        opt.make_session_run_hook(True, num_tokens=0).begin()
    opt.make_session_run_hook(False, num_tokens=0).begin()  # TF checks tokens on the chief only
    opt.make_session_run_hook(True).begin()
    opt.make_session_run_hook(True, num_tokens=2).begin()
    tokens = opt.get_init_tokens_op()
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run([tokens, opt.get_init_tokens_op(5), opt.chief_init_op,
                         opt.local_step_init_op]) == [None, None, None, None]
        assert list(sess.run(opt.ready_for_local_init_op)) == []


def test_slots_and_gradients_delegate_to_the_wrapped_optimizer():
    w = psrt.Variable(W0, name="W")
    gs = psrt.train.get_or_create_global_step()
    adagrad = psrt.train.AdagradOptimizer(0.1)
    opt = psrt.train.SyncReplicasOptimizer(adagrad, 1)
    pairs = opt.compute_gradients(_quadratic, var_list=[w])
    assert [v for _, v in pairs] == [w]
    opt.apply_gradients(pairs, global_step=gs)
    assert opt.get_slot_names() == ["accumulator"]
    assert opt.get_slot(w, "accumulator") is adagrad.get_slot(w, "accumulator")
    assert opt.get_slot(w, "accumulator").name == "W/Adagrad"
    assert opt.variables() == adagrad.variables() and len(opt.variables()) == 1


def test_config_sync_timeout_secs():
    assert psrt.ConfigProto().sync_timeout_secs == 300.0
    assert psrt.ConfigProto(sync_timeout_secs=2).sync_timeout_secs == 2.0
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="sync_timeout_secs must be > 0 seconds; got"):
            psrt.ConfigProto(sync_timeout_secs=bad)


# ---- one worker -------------------------------------------------------------------------------

def test_one_replica_equals_async_training_and_numpy():
    """R = 1: every run applies its own gradient, bit for bit as the asynchronous path and a
    numpy loop; the global step advances every run."""
    w, gs, train_op, _ = _model(1)
    v = psrt.Variable(W0, name="V")
    async_op = psrt.train.GradientDescentOptimizer(LR).minimize(_quadratic, var_list=[v])
    ref = W0.copy()
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        for step in range(1, 6):
            x = np.float32(step) * np.ones(4, np.float32)
            ref_loss, [g] = _quadratic(ref, x)
            loss, _, got_step = sess.run([train_op, async_op, gs], feed_dict={"x": x})
            ref = ref - g * LR32
            assert loss == ref_loss and got_step == step
            np.testing.assert_array_equal(sess.run(w), ref)
            np.testing.assert_array_equal(sess.run(v), ref)
        assert _core_state(sess, w) == (5, 0) and _core_state(sess, gs) == (5, 0)


def test_fewer_workers_than_replicas_average_consecutive_gradients():
    """total 1, R 2: each update applies the mean of two runs' gradients, both computed at the
    same values; the global step advances every second run."""
    w, gs, train_op, _ = _model(2, 1)
    ref = W0.copy()
    seen = []
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        for run in range(6):
            x = np.arange(4, dtype=np.float32) * np.float32(run + 1)
            seen.append(sess.run(w))
            _, got_step = sess.run([train_op, gs], feed_dict={"x": x})
            if run % 2 == 0:
                g1 = ref - x
                assert got_step == run // 2
                np.testing.assert_array_equal(sess.run(w), ref)  # nothing applied yet
            else:
                ref = ref - ((g1 + (ref - x)) / np.float32(2)) * LR32
                assert got_step == run // 2 + 1
                np.testing.assert_array_equal(sess.run(w), ref)
        assert sess.run(gs) == 3


def test_given_gradients_and_feeds():
    """apply_gradients with a fed gradient: the run's value is None, updates are averaged."""
    w = psrt.Variable(W0, name="W")
    gs = psrt.train.get_or_create_global_step()
    opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(LR), 2, 1)
    train_op = opt.apply_gradients([("g", w)], global_step=gs)
    g1 = np.array([1, 2, 3, 4], np.float32)
    g2 = np.array([0.5, -1, 7, 0], np.float32)
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run(train_op, feed_dict={"g": g1}) is None
        assert sess.run(train_op, feed_dict={"g:0": g2}) is None
        np.testing.assert_array_equal(sess.run(w), W0 - ((g1 + g2) / np.float32(2)) * LR32)
        assert sess.run(gs) == 1


def test_row_sparse_gradients_are_averaged():
    """IndexedSlices of two runs (R 2, total 1) are summed row by row, duplicates included,
    and each row divided by the number of gradients that held it (TF's
    SparseConditionalAccumulator); a step mixing a dense and a sparse gradient averages
    both over the 2 gradients."""
    gs = psrt.train.get_or_create_global_step()
    emb0 = np.arange(12, dtype=np.float32).reshape(6, 2)
    emb = psrt.Variable(emb0, name="emb")
    grads = iter([
        psrt.IndexedSlices(np.array([[1, 1], [2, 2], [4, 4]], np.float32),
                           np.array([0, 2, 2], np.int32)),
        psrt.IndexedSlices(np.array([[8, 8], [16, 16]], np.float32), np.array([2, 5])),
        np.full((6, 2), 0.5, np.float32),
        psrt.IndexedSlices(np.array([[2, -2]], np.float32), np.array([1])),
    ])
    opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(LR), 2, 1)
    train_op = opt.minimize(lambda e: (0.0, [next(grads)]), global_step=gs, var_list=[emb])
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train_op)
        sess.run(train_op)
        mean = np.zeros((6, 2), np.float32)
        mean[0] = 1                                                        # 1 gradient
        mean[2] = ((np.float32(2) + np.float32(4)) + np.float32(8)) / np.float32(2)  # both
        mean[5] = 16                                                       # 1 gradient
        ref = emb0 - mean * LR32
        np.testing.assert_array_equal(sess.run(emb), ref)
        sess.run(train_op)
        sess.run(train_op)
        dense = np.full((6, 2), 0.5, np.float32)
        dense[1] += np.array([2, -2], np.float32)
        ref = ref - (dense / np.float32(2)) * LR32
        np.testing.assert_array_equal(sess.run(emb), ref)
        assert sess.run(gs) == 2


def test_partitioned_variable():
    """Each part collects its rows of the gradient; the loss function sees the new values
    of every part after a step."""
    gs = psrt.train.get_or_create_global_step()
    w0 = np.arange(15, dtype=np.float32).reshape(5, 3) / np.float32(4)
    w = psrt.get_variable("P", initializer=w0, partitioner=psrt.fixed_size_partitioner(2))
    inputs = []

    def loss(value, x):
        inputs.append(value.copy())
        return 0.0, [(value - x).astype(np.float32)]

    opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(LR), 2, 1)
    train_op = opt.minimize(loss, global_step=gs, var_list=[w])
    ref = w0.copy()
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        for step in range(2):
            x1, x2 = np.float32(step + 1), np.float32(-step)
            sess.run(train_op, feed_dict={"x": x1})
            sess.run(train_op, feed_dict={"x": x2})
            np.testing.assert_array_equal(inputs[-2], ref)
            np.testing.assert_array_equal(inputs[-1], ref)
            ref = ref - (((ref - x1) + (ref - x2)) / np.float32(2)) * LR32
            np.testing.assert_array_equal(sess.run(w), ref)
        assert [_core_state(sess, p) for p in w] == [(2, 0), (2, 0)]
        assert sess.run(gs) == 2
        # An error (here: a row-sparse gradient naming a row past the variable's 5) forgets
        # the session's step; the next run starts afresh from the ps's values.
        sparse_op = opt.apply_gradients(
            [(psrt.IndexedSlices(np.ones((1, 3), np.float32), [99]), w)], global_step=gs)
        with pytest.raises(errors.InvalidArgumentError, match="99"):
            sess.run(sparse_op)
        sess.run(train_op, feed_dict={"x": np.float32(0)})
        sess.run(train_op, feed_dict={"x": np.float32(0)})
        np.testing.assert_array_equal(inputs[-1], ref)
        np.testing.assert_array_equal(sess.run(w), ref - ref * LR32)
        assert sess.run(gs) == 3


def test_asynchronous_push_to_a_synchronous_variable_fails():
    w, _, _, _ = _model(1)
    async_op = psrt.train.GradientDescentOptimizer(LR).minimize(_quadratic, var_list=[w])
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        with pytest.raises(errors.FailedPreconditionError, match="'W' is trained synchronously"):
            sess.run(async_op)


def test_initialization_and_restore_restart_the_step(tmp_path):
    """Re-initializing or restoring resets the variables' steps on the ps; the session
    re-reads the global step on its next run, so no gradient is judged stale."""
    w, gs, train_op, _ = _model(1)
    saver = psrt.train.Saver()
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op)
        sess.run(psrt.global_variables_initializer())
        sess.run(train_op)
        np.testing.assert_array_equal(sess.run(w), W0 - W0 * LR32)
        assert sess.run(gs) == 1 and _core_state(sess, w) == (1, 0)
        saved = sess.run(w)
        path = saver.save(sess, str(tmp_path / "model"), global_step=gs)
        for _ in range(3):
            sess.run(train_op)
        assert _core_state(sess, w) == (4, 0)
        saver.restore(sess, path)
        assert sess.run(gs) == 1 and _core_state(sess, w) == (0, 0)
        assert sess.run([train_op, gs])[1] == 2
        np.testing.assert_array_equal(sess.run(w), saved - saved * LR32)
        assert _core_state(sess, w) == (2, 0)


def test_monitored_session_with_the_hook_stops_at_the_global_step():
    """The optimizer's hook and StopAtStepHook in MonitoredTrainingSession: the global step
    each run reports is the aggregated one (R 2, total 1: one step per two runs)."""
    _, _, train_op, opt = _model(2, 1)
    hooks = [opt.make_session_run_hook(is_chief=True),
             psrt.train.StopAtStepHook(last_step=3)]
    runs = 0
    with psrt.train.MonitoredTrainingSession(master="", hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
            runs += 1
    assert runs == 6


# ---- several workers: sessions on one server ------------------------------------------------

@pytest.fixture
def local_server():
    server = psrt.train.Server.create_local_server()
    yield server
    server.stop()


def test_two_replicas_meet_and_average(local_server):
    """R 2: two sessions (threads) each push once per step; every step applies the mean of
    both gradients and both sessions continue from the new values."""
    w, gs, train_op, _ = _model(2)
    ref = W0.copy()
    a = psrt.Session(local_server.target, config=FAST)
    b = psrt.Session(local_server.target, config=FAST)
    try:
        a.run(psrt.global_variables_initializer())
        for step in range(1, 4):
            xa = np.full(4, step, np.float32)
            xb = np.full(4, -2 * step, np.float32)
            ra = _Run(lambda xa=xa: a.run([train_op, gs], feed_dict={"x": xa}))
            rb = _Run(lambda xb=xb: b.run([train_op, gs], feed_dict={"x": xb}))
            assert ra.get()[1] == rb.get()[1] == step
            ref = ref - (((ref - xa) + (ref - xb)) / np.float32(2)) * LR32
            np.testing.assert_array_equal(a.run(w), ref)
        assert _core_state(a, w) == (3, 0) and _core_state(a, gs) == (3, 0)
    finally:
        a.close()
        b.close()


def test_a_replica_behind_has_its_gradient_dropped(local_server):
    """R 1 of 2 workers: B computes at step 0 while A completes step 0; B's gradient is stale
    and dropped, and B continues at step 1 from A's values."""
    w, gs, train_op, _ = _model(1, 2)
    a = psrt.Session(local_server.target, config=FAST)
    b = psrt.Session(local_server.target, config=FAST)
    in_loss, release = threading.Event(), threading.Event()

    def slow_loss(value, x=None):
        in_loss.set()
        assert release.wait(10)
        return _quadratic(value, x)

    b_op = psrt.train.SyncReplicasOptimizer(
        psrt.train.GradientDescentOptimizer(LR), 1, 2).minimize(slow_loss, global_step=gs,
                                                                 var_list=[w])
    try:
        a.run(psrt.global_variables_initializer())
        rb = _Run(lambda: b.run([b_op, gs], feed_dict={"x": np.ones(4, np.float32)}))
        assert in_loss.wait(10)                           # B read step 0 and computes
        assert a.run([train_op, gs])[1] == 1              # A completes step 0
        after_a = W0 - W0 * LR32
        release.set()
        assert rb.get()[1] == 1                           # B's push was stale: no step
        np.testing.assert_array_equal(a.run(w), after_a)
        assert _core_state(a, w) == (1, 0) and _core_state(a, gs) == (1, 0)
        b.run(b_op, feed_dict={"x": np.ones(4, np.float32)})  # B computes at step 1
        np.testing.assert_array_equal(a.run(w), after_a - (after_a - 1) * LR32)
        assert a.run(gs) == 2
    finally:
        release.set()
        a.close()
        b.close()


def test_a_gradient_from_a_later_step_drops_the_pending_ones(local_server):
    """R 2: A pushed at step 0 and waits; the global step is moved to 1 and B pushes at
    step 1, which drops A's pending gradient and releases A at step 1; A's next gradient
    completes step 1 with B's. (``obs``, a third session, observes: a session runs one call
    at a time.)"""
    w, gs, train_op, _ = _model(2)
    a = psrt.Session(local_server.target, config=FAST)
    b = psrt.Session(local_server.target, config=FAST)
    obs = psrt.Session(local_server.target)
    try:
        obs.run(psrt.global_variables_initializer())
        ra = _Run(lambda: a.run(train_op, feed_dict={"x": np.full(4, 9, np.float32)}))
        _wait_for(lambda: _core_state(obs, w) == (0, 1))  # A's gradient is pending
        obs.run(gs.assign(1))
        xb = np.full(4, 2, np.float32)
        rb = _Run(lambda: b.run([train_op, gs], feed_dict={"x": xb}))
        ra.get()                                          # released: W moved to step 1
        assert _core_state(obs, w) == (1, 1)              # A's step-0 gradient was dropped
        np.testing.assert_array_equal(obs.run(w), W0)
        xa = np.full(4, -1, np.float32)
        assert a.run([train_op, gs], feed_dict={"x": xa})[1] == 2
        assert rb.get()[1] == 2
        ref = W0 - (((W0 - xb) + (W0 - xa)) / np.float32(2)) * LR32
        np.testing.assert_array_equal(obs.run(w), ref)
    finally:
        for sess in (a, b, obs):
            sess.close()


# ---- waiting too long ---------------------------------------------------------------------------

def test_a_missing_replica_times_out_with_deadline_exceeded(caplog):
    """R 2 and one worker: the run waits ConfigProto(sync_timeout_secs), logging where it
    waits (every 10 s, or a third of a shorter timeout), then raises DeadlineExceededError
    naming the step, what is missing and where."""
    w, gs, train_op, _ = _model(2)
    with psrt.Session("", config=psrt.ConfigProto(sync_timeout_secs=1.2)) as sess:
        sess.run(psrt.global_variables_initializer())
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="psrt"), \
                pytest.raises(errors.DeadlineExceededError) as e:
            sess.run(train_op)
        took = time.monotonic() - start
        assert 1.1 <= took < 3.0
        msg = str(e.value)
        assert msg.startswith("step 0: waiting for 1 more gradient(s) from 2 replicas for "
                              "variable 'W' on "), msg
        assert "sync_timeout_secs=1.2" in msg
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings and warnings[0].startswith(
            "step 0: waiting for 1 more gradient(s) from 2 replicas for variable 'W' on ")
        assert warnings[0].endswith(" s so far)")
        # The session forgot the step: its next run re-reads step 0 and, as a second
        # gradient of step 0, completes it (the ps does not tell workers apart).
        assert _core_state(sess, w) == (0, 1)
        sess.run(train_op)
        assert sess.run(gs) == 1
        np.testing.assert_array_equal(sess.run(w), W0 - W0 * LR32)


def test_operation_timeout_bounds_the_wait():
    """A positive operation_timeout_in_ms takes precedence over sync_timeout_secs."""
    _, _, train_op, _ = _model(2)
    config = psrt.ConfigProto(operation_timeout_in_ms=400, sync_timeout_secs=100)
    with psrt.Session("", config=config) as sess:
        sess.run(psrt.global_variables_initializer())
        start = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError,
                           match=r"^step 0: waiting for 1 more gradient\(s\) from 2 replicas "
                                 r".*operation_timeout_in_ms=400"):
            sess.run(train_op)
        assert 0.3 <= time.monotonic() - start < 3.0


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_bad_sparse_gradient_fails_the_whole_step_before_anything_is_sent(sync):
    """An out-of-range row index (or rows of the wrong shape) of one variable's
    IndexedSlices fails the run before any push: the other variable and the global step are
    untouched, and the next good run applies normally."""
    gs = psrt.train.get_or_create_global_step()
    w = psrt.Variable(np.zeros(3, np.float32), name="w")
    e = psrt.Variable(np.zeros((5, 2), np.float32), name="e")
    rows = iter([(np.array([7]), np.ones((1, 2), np.float32)),
                 (np.array([1]), np.ones((2, 2), np.float32)),
                 (np.array([1]), np.ones((1, 2), np.float32))])

    def loss(w_value, e_value):
        idx, values = next(rows)
        return 0.0, [np.ones(3, np.float32), psrt.IndexedSlices(values, idx)]

    opt = psrt.train.GradientDescentOptimizer(LR)
    if sync:
        opt = psrt.train.SyncReplicasOptimizer(opt, 1)
    train_op = opt.minimize(loss, global_step=gs, var_list=[w, e])
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        with pytest.raises(psrt.errors.InvalidArgumentError,
                           match=r"'e': index 7 at position 0 is out of range \[0, 5\)"):
            sess.run(train_op)
        with pytest.raises(psrt.errors.InvalidArgumentError,
                           match=r"rows for variable .e. must be float32\[1,2\]"):
            sess.run(train_op)
        np.testing.assert_array_equal(sess.run(w), np.zeros(3, np.float32))
        assert sess.run(gs) == 0
        sess.run(train_op)
        np.testing.assert_array_equal(sess.run(w), np.full(3, -LR32, np.float32))
        assert sess.run(gs) == 1


def test_a_gradient_missing_on_one_replica_only_is_named_when_the_wait_gives_up(
        local_server):
    """R 2: replica a pushes gradients for w and b, replica b for w only (None for b). The
    global step and w complete the step; b can not, and a's run gives up naming b and the
    likely cause instead of blaming a missing replica."""
    gs = psrt.train.get_or_create_global_step()
    w = psrt.Variable(np.zeros(2, np.float32), name="w")
    b = psrt.Variable(np.zeros(2, np.float32), name="b")
    opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(LR), 2)
    train_op = opt.minimize(
        lambda wv, bv, skip_b: (0.0, [np.ones(2, np.float32),
                                      None if skip_b else np.ones(2, np.float32)]),
        global_step=gs, var_list=[w, b])
    config = psrt.ConfigProto(sync_timeout_secs=1.0)
    sa = psrt.Session(local_server.target, config=config)
    sb = psrt.Session(local_server.target, config=config)
    try:
        sa.run(psrt.global_variables_initializer())
        ra = _Run(lambda: sa.run(train_op, feed_dict={"skip_b": False}))
        rb = _Run(lambda: sb.run(train_op, feed_dict={"skip_b": True}))
        rb.get()  # w and the global step completed step 0
        with pytest.raises(errors.DeadlineExceededError) as e:
            ra.get()
        msg = str(e.value)
        assert msg.startswith("step 0: waiting for 1 more gradient(s) from 2 replicas for "
                              "variable 'b' on "), msg
        assert "global step already advanced to 1" in msg and "None gradient" in msg, msg
    finally:
        sa.close()
        sb.close()
