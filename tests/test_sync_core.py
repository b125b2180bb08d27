"""The ps side of synchronous training (SyncReplicasOptimizer), through psrt._core over TCP.

A ps task (an in-process _core.Server on a port the OS picks) holds variables declared with
replicas_to_aggregate; several _core.Client objects play the workers. Checked: the mean of the
collected gradients is applied once per step, stale gradients are dropped, a lagging variable
adopts a newer tag, waits hold until the step is applied or time out, the global step advances
once per aggregated update, and a worker that finishes ends the steps that can no longer
complete (OutOfRangeError) for the sessions of that run only.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from psrt import _core, errors


class Worker:
    """A _core.Client that declared w (float32[3], GradientDescent lr 0.5), e (float32[4, 2],
    row-sparse use) and the global step, all synchronous with R and T."""

    def __init__(self, address: str, task: int, r: int = 2, t: int = 2, init: bool = False):
        self.c = _core.Client("worker", task)
        self.c.timeout = 20.0
        self.c.connect(0, address, 5.0)
        sync = {"replicas_to_aggregate": r, "total_num_replicas": t}
        gd = {"learning_rate": 0.5, **sync}
        results = self.c.register([
            (0, "w", "float32", [3], "GradientDescent", gd,
             np.zeros(3, np.float32) if init else None),
            (0, "e", "float32", [4, 2], "GradientDescent", gd,
             np.zeros((4, 2), np.float32) if init else None),
            (0, "global_step", "int64", [], "", sync, np.zeros((), np.int64) if init else None),
        ])
        self.w, self.e, self.gs = (h for h, _ in results)

    def step(self, tag: int, grad: np.ndarray | None = None, need: int | None = None,
             wait: float = 0.0, out: np.ndarray | None = None):
        """Pushes `grad` to w tagged `tag` (with the global step's increment); with `need`,
        waits for w and the global step to reach it."""
        pushes = [self.w] if grad is not None else []
        grads = [np.asarray(grad, np.float32)] if grad is not None else []
        waits = [self.w] if need is not None else []
        outs = [out if out is not None else np.empty(3, np.float32)] if need is not None else []
        return self.c.sync_step(pushes, grads, [], [], [], None, tag, self.gs, grad is not None,
                                waits, outs, [need] * len(waits), need or 0, wait)

    def value(self) -> np.ndarray:
        out = np.empty(3, np.float32)
        self.c.pull([self.w], [out])
        return out


@pytest.fixture
def ps():
    srv = _core.Server("127.0.0.1", 0, "ps", 0)
    yield f"127.0.0.1:{srv.port}"
    srv.stop()


def in_thread(fn):
    box: dict[str, object] = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            box["error"] = e
    t = threading.Thread(target=run)
    t.start()
    return t, box


def test_mean_of_two_gradients_applied_once_and_step_advances(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    acc, waits, step = a.step(0, [1, 2, 3], need=1, wait=0.05)
    assert acc == [True] and waits == [(False, 0, 1)] and step == (False, 0, 1)
    np.testing.assert_array_equal(a.value(), [0, 0, 0])  # nothing applied with 1 of 2
    out = np.empty(3, np.float32)
    acc, waits, step = b.step(0, [3, 4, 5], need=1, wait=1.0, out=out)
    assert acc == [True] and waits == [(True, 1, 0)] and step == (True, 1, 0)
    # mean [2, 3, 4] times lr 0.5, applied once
    np.testing.assert_allclose(out, [-1.0, -1.5, -2.0])
    assert a.c.step_read(a.gs) == 1


def test_waiting_worker_wakes_when_the_last_gradient_arrives(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    out = np.empty(3, np.float32)
    t, box = in_thread(lambda: a.step(0, [2, 2, 2], need=1, wait=10.0, out=out))
    time.sleep(0.3)
    assert t.is_alive()  # held by the ps until b's gradient
    t0 = time.monotonic()
    b.step(0, [4, 4, 4])
    t.join(5)
    assert time.monotonic() - t0 < 2.0
    assert box["value"] == ([True], [(True, 1, 0)], (True, 1, 0))
    np.testing.assert_allclose(out, [-1.5, -1.5, -1.5])


def test_stale_gradient_is_dropped(ps):
    a, b, c = (Worker(ps, i, r=2, t=3, init=(i == 0)) for i in range(3))
    a.step(0, [2, 2, 2])
    b.step(0, [4, 4, 4])
    acc, _, step = c.step(0, [100, 100, 100], need=1, wait=0.0)
    assert acc == [False] and step == (True, 1, 0)  # the backup worker came too late
    np.testing.assert_allclose(a.value(), [-1.5, -1.5, -1.5])
    assert a.c.step_read(a.gs) == 1


def test_lagging_variable_adopts_a_newer_tag_and_drops_its_pending_gradient(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    a.step(0, [8, 8, 8])  # w: step 0, one gradient pending
    # Both workers moved on to step 5 (w had no gradient from b at step 0..4).
    acc, waits, _ = a.c.sync_step([a.w], [np.ones(3, np.float32)], [], [], [], None, 5, -1,
                                  False, [a.w], [np.empty(3, np.float32)], [0], 0, 0.0)
    assert acc == [True] and waits == [(True, 5, 1)]
    b.c.sync_step([b.w], [np.full(3, 3, np.float32)], [], [], [], None, 5, -1, False, [], [],
                  [], 0, 0.0)
    np.testing.assert_allclose(a.value(), [-1, -1, -1])  # mean(1, 3) * 0.5; the 8s dropped


def test_row_sparse_gradients_are_averaged_per_row_over_the_gradients_holding_it(ps):
    # As TF's SparseConditionalAccumulator: a row is summed over the gradients that hold it
    # and divided by their number (a row repeated within one gradient is summed, counted once).
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    ga = np.array([[1, 1], [2, 2], [3, 3]], np.float32)
    a.c.sync_step([], [], [a.e], [np.array([0, 2, 0], np.int64)], [ga], 1.0, 0, -1, False,
                  [], [], [], 0, 0.0)
    out = np.empty((4, 2), np.float32)
    _, waits, _ = b.c.sync_step([], [], [b.e], [np.array([1, 2], np.int64)],
                                [np.array([[6, 6], [8, 8]], np.float32)], 1.0, 0, -1, False,
                                [b.e], [out], [1], 0, 1.0)
    assert waits == [(True, 1, 0)]
    # row 0: a only, 1 + 3; row 1: b only, 6; row 2: (2 + 8) / 2; row 3 untouched; lr 1.0
    np.testing.assert_allclose(out, [[-4, -4], [-6, -6], [-5, -5], [0, 0]])


def test_bad_index_is_refused_before_anything_is_summed(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    with pytest.raises(errors.InvalidArgumentError, match=r"index 4 at position 1"):
        a.c.sync_step([], [], [a.e], [np.array([0, 4], np.int64)],
                      [np.ones((2, 2), np.float32)], None, 0, -1, False, [], [], [], 0, 0.0)
    _, waits, _ = a.c.sync_step([], [], [], [], [], None, 0, -1, False, [a.e],
                                [np.empty((4, 2), np.float32)], [0], 0, 0.0)
    assert waits == [(True, 0, 0)]  # nothing was counted


def test_wait_times_out_with_where_the_variable_is(ps):
    a = Worker(ps, 0, init=True)
    out = np.full(3, 7, np.float32)
    t0 = time.monotonic()
    acc, waits, step = a.step(0, [1, 1, 1], need=1, wait=0.4, out=out)
    elapsed = time.monotonic() - t0
    assert 0.35 < elapsed < 2.0
    assert waits == [(False, 0, 1)] and step == (False, 0, 1)
    np.testing.assert_array_equal(out, [7, 7, 7])  # untouched


def test_untagged_updates_of_synchronous_variables_are_refused(ps):
    a = Worker(ps, 0, init=True)
    with pytest.raises(errors.FailedPreconditionError, match="'w' is trained synchronously"):
        a.c.push([a.w], [np.ones(3, np.float32)])
    with pytest.raises(errors.FailedPreconditionError, match="'global_step' is advanced by"):
        a.c.step_increment(a.gs, 1)
    np.testing.assert_array_equal(a.value(), [0, 0, 0])
    assert a.c.step_read(a.gs) == 0


def test_global_step_tag_from_the_future_is_aborted(ps):
    a = Worker(ps, 0, init=True)
    with pytest.raises(errors.AbortedError, match="global step 'global_step' is 0 but this "
                                                  "worker's step is 3"):
        a.c.sync_step([], [], [], [], [], None, 3, a.gs, True, [], [], [], 0, 0.0)


def test_declaring_other_sync_settings_is_refused(ps):
    Worker(ps, 0, init=True)
    with pytest.raises(errors.InvalidArgumentError) as e:
        Worker(ps, 1, r=3, t=3)
    assert "replicas_to_aggregate 2" in e.value.message
    assert "replicas_to_aggregate 3" in e.value.message


def test_restore_resets_the_synchronous_state(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    for tag in range(3):  # w and the global step at 3
        a.step(tag, [0, 0, 0])
        b.step(tag, [0, 0, 0])
    a.step(3, [5, 5, 5])  # pending at step 3
    a.c.assign([a.w], [np.ones(3, np.float32)], 0, restore=True)
    a.c.assign([a.gs], [np.array(1, np.int64)], 0, restore=True)
    # b's session read the model before the restore: its next request is aborted (the
    # monitored session then re-creates it), and nothing of it is applied.
    with pytest.raises(errors.AbortedError, match="initialized or restored"):
        b.step(3, [100, 100, 100])
    b = Worker(ps, 1)
    # Restored to step 1: both workers go on from tag 1; the pending 5s are gone.
    a.step(1, [2, 2, 2])
    _, waits, step = b.step(1, [2, 2, 2], need=2, wait=1.0)
    assert waits == [(True, 2, 0)] and step == (True, 2, 0)
    np.testing.assert_allclose(a.value(), [0, 0, 0])  # 1 - 0.5 * mean(2, 2)


def test_waiting_worker_is_aborted_when_another_session_restores(ps):
    # A chief restarted mid-run initializes (or restores) the model while the survivor waits
    # for it: the survivor's wait ends with AbortedError at once, not at its timeout.
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    a.step(0, [1, 1, 1])
    b.step(0, [1, 1, 1], need=1, wait=1.0)
    t, box = in_thread(lambda: b.step(1, [1, 1, 1], need=2, wait=10.0))
    time.sleep(0.3)
    t0 = time.monotonic()
    Worker(ps, 0, init=True)  # the new chief's session initializes again
    t.join(5)
    assert time.monotonic() - t0 < 2.0
    assert isinstance(box.get("error"), errors.AbortedError), box


def test_first_sync_request_after_initialization_is_not_aborted(ps):
    # Workers that connect before the chief initializes (they wait for the model to be
    # ready) adopt the model as it is at their first synchronous request.
    b = Worker(ps, 1)
    a = Worker(ps, 0, init=True)
    a.step(0, [1, 1, 1])
    assert b.step(0, [3, 3, 3], need=1, wait=1.0)[1] == [(True, 1, 0)]


def test_finished_worker_ends_the_steps_that_cannot_complete(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    t, box = in_thread(lambda: b.step(0, [1, 1, 1], need=1, wait=10.0))
    time.sleep(0.3)
    t0 = time.monotonic()
    a.c.worker_done("worker", 0)
    t.join(5)
    assert time.monotonic() - t0 < 2.0
    err = box.get("error")
    assert isinstance(err, errors.OutOfRangeError), box
    assert "/job:worker/task:0 finished" in err.message
    with pytest.raises(errors.OutOfRangeError):  # the same session stays ended
        b.step(0, [1, 1, 1])
    # A new run (new sessions) against the ps that stayed up continues at step 0, and the
    # pending gradient of the ended run is gone.
    a2, b2 = Worker(ps, 0), Worker(ps, 1)
    assert a2.step(0, [2, 2, 2], need=0)[1] == [(True, 0, 1)]
    assert b2.step(0, [2, 2, 2], need=1, wait=1.0)[1] == [(True, 1, 0)]
    np.testing.assert_allclose(a2.value(), [-1, -1, -1])


def test_backup_worker_finishing_does_not_end_training(ps):
    a, b, c = (Worker(ps, i, r=2, t=3, init=(i == 0)) for i in range(3))
    c.c.worker_done("worker", 2)  # 2 of 3 workers remain: steps can still complete
    a.step(0, [2, 2, 2])
    assert b.step(0, [2, 2, 2], need=1, wait=1.0)[1] == [(True, 1, 0)]


def test_one_worker_aggregating_several_batches(ps):
    # total_num_replicas 1 < replicas_to_aggregate 2: one worker pushes twice per step, and
    # finishing it ends training (no one is left to push).
    a = Worker(ps, 0, r=2, t=1, init=True)
    a.step(0, [1, 1, 1])
    _, waits, step = a.step(0, [3, 3, 3], need=1, wait=1.0)
    assert waits == [(True, 1, 0)] and step == (True, 1, 0)
    np.testing.assert_allclose(a.value(), [-1, -1, -1])
    watcher = Worker(ps, 1, r=2, t=1)
    a.c.worker_done("worker", 0)
    with pytest.raises(errors.OutOfRangeError):
        watcher.step(1, [1, 1, 1])


def test_step_is_not_sent_at_all_when_one_shard_is_lost():
    ps0 = _core.Server("127.0.0.1", 0, "ps", 0)
    ps1 = _core.Server("127.0.0.1", 0, "ps", 1)
    try:
        c = _core.Client("worker", 0)
        c.timeout = 10.0
        c.connect(0, f"127.0.0.1:{ps0.port}", 5.0)
        c.connect(1, f"127.0.0.1:{ps1.port}", 5.0)
        sync = {"learning_rate": 1.0, "replicas_to_aggregate": 2, "total_num_replicas": 2}
        (a, _), (b, _) = c.register([
            (0, "a", "float32", [2], "GradientDescent", sync, np.zeros(2, np.float32)),
            (1, "b", "float32", [2], "GradientDescent", sync, np.zeros(2, np.float32))])
        ps1.stop()
        with pytest.raises(errors.UnavailableError):
            c.ping([1])  # the lost connection is now known (sticky)
        with pytest.raises(errors.UnavailableError, match="task:1"):
            c.sync_step([a, b], [np.ones(2, np.float32)] * 2, [], [], [], None, 0, -1, False,
                        [], [], [], 0, 0.0)
        _, waits, _ = c.sync_step([], [], [], [], [], None, 0, -1, False, [a],
                                  [np.empty(2, np.float32)], [0], 0, 0.0)
        assert waits == [(True, 0, 0)]  # a's shard got nothing
    finally:
        ps0.stop()
        ps1.stop()


def test_wait_for_a_step_already_reached_is_answered_after_training_ended(ps):
    a, b = Worker(ps, 0, init=True), Worker(ps, 1)
    a.step(0, [2, 2, 2])
    b.step(0, [2, 2, 2])  # step 1 complete
    a.c.worker_done("worker", 0)
    out = np.empty(3, np.float32)
    _, waits, step = b.step(0, None, need=1, wait=1.0, out=out)
    assert waits == [(True, 1, 0)] and step == (True, 1, 0)
    np.testing.assert_allclose(out, [-1, -1, -1])
    # A backup worker's late gradient for the completed step is dropped as stale, as before
    # the end, and its wait answered: its run returns normally.
    acc, waits, step = b.step(0, [9, 9, 9], need=1, wait=1.0)
    assert acc == [False] and waits == [(True, 1, 0)] and step == (True, 1, 0)
    with pytest.raises(errors.OutOfRangeError):  # a fresh gradient can no longer count
        b.step(1, [1, 1, 1])
    with pytest.raises(errors.OutOfRangeError):  # step 2 can no longer complete
        b.step(1, None, need=2, wait=1.0)
