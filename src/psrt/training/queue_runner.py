"""TF1's queue runners (tensorflow/python/training/queue_runner_impl.py): ``QueueRunner``,
``add_queue_runner``, ``start_queue_runners``.

A QueueRunner's threads run its enqueue ops with ``sess.run`` until the input ends
(OutOfRangeError: the last thread closes the queue) or the coordinator stops (a cancel
thread closes the queue, cancelling pending enqueues); any other error goes to the
coordinator. The queues are ops/data_flow_ops.py's graph queues; the input producers and
batching that register runners are training/input.py's. ``MonitoredTrainingSession`` and
``Supervisor`` start the graph's runners themselves, as TF's.

psrt's older Python-filled queue (``psrt.train.FIFOQueue(capacity)`` without ``dtypes``) is
run the same way: its ops are callables (``q.enqueue(fn)``: ``fn()`` returns one element;
raising ``OutOfRangeError`` or ``StopIteration`` ends the input), called by the threads.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Sequence

from psrt.framework import errors
from psrt.framework import ops as _ops
from psrt.ops.data_flow_ops import FIFOQueue, QueueBase
from psrt.training.coordinator import Coordinator

__all__ = ["FIFOQueue", "QueueRunner", "add_queue_runner", "start_queue_runners"]

_logger = logging.getLogger("psrt")


class QueueRunner:
    """Threads that run a queue's enqueue ops, as ``tf.train.QueueRunner``.

    Each enqueue op gets one thread, which runs it until the coordinator stops or it raises
    one of ``queue_closed_exception_types`` (default OutOfRangeError: the input is
    exhausted). When the last thread ends that way, ``close_op`` (default
    ``queue.close()``) runs, so dequeues drain the queue and then raise OutOfRangeError.
    Any other exception is passed to the coordinator's ``request_stop`` (without one it is
    logged and kept in ``exceptions_raised``). With a coordinator, one more thread runs
    ``cancel_op`` (default ``queue.close(cancel_pending_enqueues=True)``) when it stops.

    Args:
        queue: A :class:`FIFOQueue`.
        enqueue_ops: Ops from ``queue.enqueue``/``enqueue_many`` (or any callables).
        close_op, cancel_op: As above.
        queue_closed_exception_types: Exceptions that end a thread quietly.
    """

    def __init__(self, queue: QueueBase | None = None, enqueue_ops: Sequence[Any] | None = None,
                 close_op: Any = None, cancel_op: Any = None,
                 queue_closed_exception_types: Sequence[type] | None = None,
                 queue_runner_def: Any = None, import_scope: Any = None) -> None:
        if queue is None or not enqueue_ops:
            raise ValueError("Queue and enqueue_ops must be specified")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else queue.close(
            cancel_pending_enqueues=True)
        self._queue_closed_exception_types = tuple(
            queue_closed_exception_types or (errors.OutOfRangeError,))
        self._lock = threading.Lock()
        self._runs_per_session: dict[int, int] = {}
        self._exceptions_raised: list[BaseException] = []

    queue = property(lambda self: self._queue)
    enqueue_ops = property(lambda self: list(self._enqueue_ops))
    close_op = property(lambda self: self._close_op)
    cancel_op = property(lambda self: self._cancel_op)
    queue_closed_exception_types = property(lambda self: self._queue_closed_exception_types)

    @property
    def exceptions_raised(self) -> list[BaseException]:
        """Exceptions the threads raised without a coordinator to report them to."""
        return list(self._exceptions_raised)

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._queue.name

    def _run(self, sess: Any, enqueue_op: Any, coord: Coordinator | None) -> None:
        decremented = False
        try:
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    _run_op(sess, enqueue_op)
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[id(sess)] -= 1
                        decremented = True
                        if self._runs_per_session[id(sess)] == 0:
                            try:
                                _run_op(sess, self._close_op)
                            except Exception as e:  # noqa: BLE001 - as TF: ignored
                                _logger.debug("Ignored exception: %s", e)
                    return
        except Exception as e:  # noqa: BLE001 - reported to the coordinator, as TF
            if coord is not None:
                coord.request_stop(e)
            else:
                _logger.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[id(sess)] -= 1

    def _close_on_stop(self, sess: Any, coord: Coordinator) -> None:
        coord.wait_for_stop()
        try:
            _run_op(sess, self._cancel_op)
        except Exception as e:  # noqa: BLE001 - as TF: logged
            _logger.debug("Ignored exception: %s", e)
            # Beyond TF: a session closed before the stop cannot run the cancel op, but a
            # queue's close needs no session (it reads nothing), so the blocked enqueue
            # threads still end instead of waiting out the join's grace period.
            node = getattr(getattr(self._cancel_op, "value", None), "op", None)
            if isinstance(self._cancel_op, _ops.Operation) and \
                    self._cancel_op.type == "local" and node is not None and not node.inputs:
                node.func()

    def create_threads(self, sess: Any, coord: Coordinator | None = None,
                       daemon: bool = False, start: bool = False) -> list[threading.Thread]:
        """Creates (and with ``start`` starts) the threads for session ``sess``, as TF:
        one per enqueue op, plus the cancel thread with a coordinator; they are registered
        with ``coord``. Returns [] when threads of this runner still run for ``sess``."""
        with self._lock:
            if self._runs_per_session.get(id(sess), 0) > 0:
                return []
            if any(k != id(sess) for k in self._runs_per_session) and \
                    isinstance(self._queue, QueueBase) and not self._queue._legacy and \
                    not any(self._runs_per_session.values()):
                # Beyond TF: threads for a new session (a MonitoredSession re-created after
                # a ps preemption) find the queue closed by the old session's stop; it
                # opens again, keeping its elements (an input whose epochs ended closes it
                # again at once).
                self._queue._reopen()
            self._runs_per_session[id(sess)] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [threading.Thread(target=self._run, args=(sess, op, coord), daemon=daemon,
                                    name=f"psrt-queue-runner-{self.name}-{i}")
                   for i, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(sess, coord),
                                            daemon=daemon,
                                            name=f"psrt-queue-runner-{self.name}-close"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def _run_op(sess: Any, op: Any) -> Any:
    """Runs one op of a queue runner: a graph op with ``sess.run`` (as TF's threads do),
    an op of a Python-filled queue (a callable) by calling it."""
    if isinstance(op, _ops.Operation) or not callable(op):
        if sess is None:
            raise ValueError(f"QueueRunner needs a session to run graph op {op!r}")
        return sess.run(op)
    return op()


def add_queue_runner(qr: QueueRunner,
                     collection: str = _ops.GraphKeys.QUEUE_RUNNERS) -> None:
    """Adds ``qr`` to the graph collection ``collection`` (default ``QUEUE_RUNNERS``)."""
    _ops.get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess: Any = None, coord: Coordinator | None = None,
                        daemon: bool = True, start: bool = True,
                        collection: str = _ops.GraphKeys.QUEUE_RUNNERS
                        ) -> list[threading.Thread]:
    """Starts the threads of every QueueRunner in ``collection``, as TF; returns them.

    ``sess`` is the session the threads run the enqueue ops with (a QueueRunner runs one
    set of threads per session). Only runners of Python-filled queues run without one.

    Raises:
        ValueError: ``sess`` is None and a runner has graph enqueue ops (TF's error when
            no default session is registered; psrt has no default session)."""
    runners = _ops.get_default_graph().get_collection(collection)
    if sess is None and any(isinstance(op, _ops.Operation)
                            for qr in runners for op in getattr(qr, "enqueue_ops", ())):
        raise ValueError("Cannot start queue runners: No default session is registered "
                         "(psrt has none). Pass the session: "
                         "tf.train.start_queue_runners(sess=sess)")
    threads: list[threading.Thread] = []
    for qr in runners:
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
