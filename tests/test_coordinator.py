"""psrt.train.Coordinator and the queue runners (issue 13, item 5), with TF's semantics:
tensorflow/python/training/coordinator.py (coordinator_test.py) and queue_runner_impl.py
(queue_runner_test.py). Real threads; no timing assertions."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import fresh_graph  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("fresh_graph")


def test_stop_and_clear():
    # coordinator_test.py testStopAPI / testClearStopClearsExceptionToo.
    coord = psrt.train.Coordinator()
    assert not coord.should_stop() and not coord.wait_for_stop(0.01)
    coord.request_stop()
    assert coord.should_stop() and coord.wait_for_stop(0.01)
    coord.clear_stop()
    assert not coord.should_stop()
    coord.request_stop(RuntimeError("first"))
    coord.clear_stop()
    coord.raise_requested_exception()  # cleared: nothing to raise
    coord.join([])


def test_first_exception_is_raised_by_join():
    # coordinator_test.py testJoinRaiseReportExcInfo: the first reported exception wins.
    coord = psrt.train.Coordinator()

    def fail(msg):
        with coord.stop_on_exception():
            raise RuntimeError(msg)

    t1 = threading.Thread(target=fail, args=("First",))
    t1.start()
    t1.join()
    coord.request_stop(ValueError("Second"))
    with pytest.raises(RuntimeError, match="First"):
        coord.raise_requested_exception()
    with pytest.raises(RuntimeError, match="First"):
        coord.join([t1])
    assert coord.joined
    # After join, a reported exception is raised at once (it would go unseen otherwise).
    with pytest.raises(ValueError, match="late"):
        coord.request_stop(ValueError("late"))


def test_out_of_range_is_a_clean_stop():
    # coordinator_test.py testJoinIgnoresOutOfRange.
    coord = psrt.train.Coordinator()
    with coord.stop_on_exception():
        raise errors.OutOfRangeError(None, None, "done")
    assert coord.should_stop()
    coord.join([])
    custom = psrt.train.Coordinator(clean_stop_exception_types=(KeyError,))
    custom.request_stop(KeyError("k"))
    custom.join([])


def test_exc_info_tuple_and_registered_threads():
    coord = psrt.train.Coordinator()
    started = threading.Event()

    def loop():
        started.set()
        while not coord.should_stop():
            coord.wait_for_stop(0.01)
    t = threading.Thread(target=loop)
    coord.register_thread(t)
    t.start()
    started.wait()
    try:
        raise KeyError("from exc_info")
    except KeyError:
        coord.request_stop(sys.exc_info())
    with pytest.raises(KeyError, match="from exc_info"):
        coord.join()  # joins the registered thread
    assert not t.is_alive()


def test_join_names_threads_still_running():
    # coordinator_test.py testJoinGraceExpires: RuntimeError naming the stragglers, unless
    # ignore_live_threads.
    coord = psrt.train.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, name="stuck")
    t.start()
    coord.request_stop()
    try:
        with pytest.raises(RuntimeError,
                           match="Coordinator stopped with threads still running: stuck"):
            coord.join([t], stop_grace_period_secs=0.01)
        coord.clear_stop()
        coord.request_stop()
        coord.join([t], stop_grace_period_secs=0.01, ignore_live_threads=True)
    finally:
        release.set()
        t.join()


# ---- queues and queue runners -----------------------------------------------------------

def test_fifo_queue_order_close_and_fetch():
    # data_flow_ops FIFOQueue: FIFO order; after close dequeues drain then OutOfRangeError,
    # enqueues raise CancelledError.
    q = psrt.train.FIFOQueue(3)
    for i in range(3):
        q.enqueue(np.array([i, i]))()
    assert q.size()() == 3
    assert q.dequeue()().tolist() == [0, 0]
    q.close()()
    with pytest.raises(errors.CancelledError, match="is closed"):
        q.enqueue(np.zeros(2))()
    np.testing.assert_array_equal(q.dequeue_many(2)(), [[1, 1], [2, 2]])
    with pytest.raises(errors.OutOfRangeError,
                       match=r"is closed and has insufficient elements \(requested 1, "
                             r"current size 0\)"):
        q.dequeue()()
    assert q.is_closed()()


def test_queue_runner_fills_the_queue_until_the_input_ends():
    # queue_runner_test.py testBasic: the threads run the enqueue ops until OutOfRange,
    # then the last one closes the queue; the consumer drains it and sees OutOfRange.
    data = iter(range(100))
    lock = threading.Lock()

    def produce():
        with lock:
            i = next(data)  # StopIteration at the end: the input is exhausted
        return (np.float32(i), np.int64(i * 2))
    q = psrt.train.FIFOQueue(10)
    qr = psrt.train.QueueRunner(q, [q.enqueue(produce)] * 3)
    psrt.train.add_queue_runner(qr)
    assert psrt.get_collection(psrt.GraphKeys.QUEUE_RUNNERS) == [qr]
    coord = psrt.train.Coordinator()
    threads = psrt.train.start_queue_runners(coord=coord)
    assert len(threads) == 4  # 3 enqueue threads + the cancel thread
    seen = []
    batch = q.dequeue_many(5)
    try:
        while True:
            x, y = batch()
            np.testing.assert_array_equal(y, 2 * x.astype(np.int64))
            seen.extend(int(v) for v in x)
    except errors.OutOfRangeError:
        pass
    coord.request_stop()
    coord.join(threads)
    assert sorted(seen) == list(range(100))
    assert qr.exceptions_raised == []


def test_a_failing_producer_stops_the_coordinator():
    # queue_runner_test.py testRespectCoordShouldStop / testRealDequeueEnqueue: an error
    # in an enqueue op is reported to the coordinator and raised by join.
    def bad():
        raise ValueError("bad record")
    q = psrt.train.FIFOQueue(2)
    qr = psrt.train.QueueRunner(q, [q.enqueue(bad)])
    coord = psrt.train.Coordinator()
    threads = qr.create_threads(None, coord=coord, start=True)
    with pytest.raises(ValueError, match="bad record"):
        coord.join(threads)


def test_a_stop_cancels_blocked_enqueues():
    q = psrt.train.FIFOQueue(1)
    qr = psrt.train.QueueRunner(q, [q.enqueue(lambda: np.ones(1))] * 2)
    coord = psrt.train.Coordinator()
    threads = qr.create_threads(None, coord=coord, start=True)
    assert q.dequeue()().tolist() == [1.0]
    coord.request_stop()
    coord.join(threads)  # the cancel thread closes the queue: blocked enqueues end
    assert not any(t.is_alive() for t in threads)


def test_monitored_session_starts_and_joins_queue_runners(monkeypatch):
    # monitored_session.py _CoordinatedSessionCreator: queue runners are started on a
    # Coordinator the hooks see; close joins them.
    import psrt.training.monitored_session as ms

    class FakeCreator(ms.SessionCreator):
        def create_session(self):
            return _FakeSession()

    q = psrt.train.FIFOQueue(4)
    qr = psrt.train.QueueRunner(q, [q.enqueue(lambda: np.arange(3))])
    psrt.train.add_queue_runner(qr)
    seen = {}

    class Hook(psrt.train.SessionRunHook):
        def after_create_session(self, session, coord):
            seen["coord"] = coord

    with psrt.train.MonitoredSession(session_creator=FakeCreator(), hooks=[Hook()]) as sess:
        assert isinstance(seen["coord"], psrt.train.Coordinator)
        assert q.dequeue()().tolist() == [0, 1, 2]
        assert not sess.should_stop()
        seen["coord"].request_stop()
        assert sess.should_stop()
    assert seen["coord"].joined


class _FakeSession:
    _closed = False

    def close(self):
        self._closed = True

    def run(self, fetches, feed_dict=None):
        return fetches
