"""Input queues filled by Python threads: ``FIFOQueue``, ``QueueRunner``,
``add_queue_runner`` and ``start_queue_runners``, as TF1's
(tensorflow/python/training/queue_runner_impl.py, ops/data_flow_ops.py).

How TF's graph queues map to psrt:

=====================================================  ==========================================
TF1                                                    psrt
=====================================================  ==========================================
``q = tf.FIFOQueue(capacity, dtypes)``                 ``q = psrt.train.FIFOQueue(capacity)``
``enqueue_op = q.enqueue(tensors)``                    ``enqueue_op = q.enqueue(fn)``: ``fn()``
                                                       returns one element (a numpy array, a
                                                       tuple or dict of them); raising
                                                       ``OutOfRangeError`` or ``StopIteration``
                                                       ends the input (``enqueue_many(fn)``: a
                                                       batch, split along axis 0)
``qr = tf.train.QueueRunner(q, [enqueue_op] * 4)``     the same
``tf.train.add_queue_runner(qr)``                      the same (``GraphKeys.QUEUE_RUNNERS``)
``threads = tf.train.start_queue_runners(sess,         the same; ``MonitoredTrainingSession``
coord)``                                               starts them itself, as TF's
``x = q.dequeue()`` / ``dequeue_many(n)``              the same: a fetch ``sess.run(x)`` gives
                                                       the next element (blocking); it can be
                                                       fed (``feed_dict={x: value}``), as TF
``q.close()``, ``q.size()``                            the same (ops you run)
=====================================================  ==========================================

Elements stay in the process that enqueued them (TF's queues live on a device; psrt's
input queues are local to the worker, which is where TF1 PS scripts place them).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import ops as _ops
from psrt.training.coordinator import Coordinator

__all__ = ["FIFOQueue", "QueueRunner", "add_queue_runner", "start_queue_runners"]

_logger = logging.getLogger("psrt")


class _QueueOp:
    """An op on a queue: runs when fetched by ``Session.run`` (a computed fetch), when
    called, or by a QueueRunner; named so that it can be fed."""

    def __init__(self, queue: "FIFOQueue", name: str, run: Callable[[], Any]) -> None:
        self.queue = queue
        self.name = _ops.get_default_graph().unique_name(f"{queue.name}_{name}")
        self._run = run

    def __call__(self) -> Any:
        return self._run()

    def _psrt_fetch_inputs(self, feeds: dict[str, Any], fetched: Sequence[Any]) -> Any:
        return []

    def _psrt_compute(self, values: Any, feeds: dict[str, Any]) -> Any:
        if self.name in feeds:
            return feeds[self.name]
        return self._run()

    def __repr__(self) -> str:
        return f"<psrt queue op '{self.name}'>"


class FIFOQueue:
    """A bounded first-in first-out queue of elements, as ``tf.FIFOQueue``.

    Args:
        capacity: Most elements held; an enqueue blocks while the queue is full.
        dtypes, shapes, names, shared_name: Accepted for TF's signature; elements are
            whatever the producers return (``names`` is kept as ``.names``).
        name: Name (made unique in the graph), default ``"fifo_queue"``.

    Raises:
        ValueError: ``capacity`` is not a positive int.
    """

    def __init__(self, capacity: int, dtypes: Any = None, shapes: Any = None,
                 names: Any = None, shared_name: str | None = None,
                 name: str = "fifo_queue") -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int; got {capacity!r}")
        self._capacity = capacity
        self._items: collections.deque[Any] = collections.deque()
        # Guards _items and _closed/_cancelled; notified on every change.
        self._cond = threading.Condition()
        self._closed = False
        self._cancelled = False
        self.names = names
        self.name = _ops.get_default_graph().unique_name(name)

    @property
    def capacity(self) -> int:
        """The most elements the queue holds."""
        return self._capacity

    def _put(self, items: list[Any]) -> None:
        with self._cond:
            # As TF: an enqueue on a closed queue fails; one already waiting for room
            # completes unless the close cancels pending enqueues.
            if self._closed:
                raise errors.CancelledError(None, None, f"FIFOQueue '{self.name}' is closed.")
            for item in items:
                while len(self._items) >= self._capacity and not self._cancelled:
                    self._cond.wait()
                if self._cancelled:
                    raise errors.CancelledError(
                        None, None, f"FIFOQueue '{self.name}' is closed; pending enqueue "
                        f"cancelled.")
                self._items.append(item)
                self._cond.notify_all()

    def _get(self, n: int | None) -> Any:
        want = 1 if n is None else n
        with self._cond:
            while len(self._items) < want and not self._closed:
                self._cond.wait()
            if len(self._items) < want:
                raise errors.OutOfRangeError(
                    None, None, f"FIFOQueue '{self.name}' is closed and has insufficient "
                    f"elements (requested {want}, current size {len(self._items)})")
            out = [self._items.popleft() for _ in range(want)]
            self._cond.notify_all()
        return out[0] if n is None else _stack(out)

    def enqueue(self, fn: Callable[[], Any] | Any, name: str | None = None) -> _QueueOp:
        """An op adding one element each time it runs: ``fn()``'s value (or ``fn`` itself
        when it is not callable). ``fn`` raising OutOfRangeError or StopIteration ends the
        input: the op raises OutOfRangeError, which stops its QueueRunner thread cleanly.

        Running it raises CancelledError once the queue is closed, as TF."""
        return _QueueOp(self, name or "enqueue", lambda: self._put([_produce(fn)]))

    def enqueue_many(self, fn: Callable[[], Any] | Any, name: str | None = None) -> _QueueOp:
        """As :meth:`enqueue`, for a batch: every element along axis 0 of ``fn()``'s value
        (an array, or a tuple/dict of arrays of the same length) is enqueued."""
        return _QueueOp(self, name or "enqueue_many", lambda: self._put(_unstack(_produce(fn))))

    def dequeue(self, name: str | None = None) -> _QueueOp:
        """An op whose value is the next element, waiting for one; once the queue is closed
        and empty it raises OutOfRangeError, as TF."""
        return _QueueOp(self, name or "dequeue", lambda: self._get(None))

    def dequeue_many(self, n: int, name: str | None = None) -> _QueueOp:
        """An op whose value is the next ``n`` elements stacked along a new axis 0."""
        return _QueueOp(self, name or "dequeue_many", lambda: self._get(int(n)))

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> _QueueOp:
        """An op closing the queue, as TF: enqueues fail from then on; dequeues drain
        what is left, then raise OutOfRangeError. With ``cancel_pending_enqueues``,
        blocked enqueues fail at once (CancelledError)."""
        def run() -> None:
            with self._cond:
                self._closed = True
                self._cancelled = self._cancelled or cancel_pending_enqueues
                self._cond.notify_all()
        return _QueueOp(self, name or "close", run)

    def size(self, name: str | None = None) -> _QueueOp:
        """An op whose value is the number of elements held (int)."""
        def run() -> int:
            with self._cond:
                return len(self._items)
        return _QueueOp(self, name or "size", run)

    def is_closed(self, name: str | None = None) -> _QueueOp:
        """An op whose value is True once the queue is closed."""
        return _QueueOp(self, name or "is_closed", lambda: self._closed)


def _produce(fn: Any) -> Any:
    if not callable(fn):
        return fn
    try:
        return fn()
    except StopIteration as e:
        raise errors.OutOfRangeError(None, None, "input producer exhausted") from e


def _unstack(batch: Any) -> list[Any]:
    if isinstance(batch, dict):
        keys = list(batch)
        cols = [np.asarray(batch[k]) for k in keys]
        return [dict(zip(keys, row)) for row in zip(*cols)]
    if isinstance(batch, tuple):
        return [tuple(row) for row in zip(*(np.asarray(c) for c in batch))]
    return list(np.asarray(batch))


def _stack(items: list[Any]) -> Any:
    first = items[0]
    if isinstance(first, dict):
        return {k: np.stack([np.asarray(it[k]) for it in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(np.stack([np.asarray(it[i]) for it in items]) for i in range(len(first)))
    return np.stack([np.asarray(it) for it in items])


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

    def __init__(self, queue: FIFOQueue | None = None, enqueue_ops: Sequence[Any] | None = None,
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
                    enqueue_op()
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[id(sess)] -= 1
                        decremented = True
                        if self._runs_per_session[id(sess)] == 0:
                            try:
                                self._close_op()
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
            self._cancel_op()
        except Exception as e:  # noqa: BLE001 - as TF: logged
            _logger.debug("Ignored exception: %s", e)

    def create_threads(self, sess: Any, coord: Coordinator | None = None,
                       daemon: bool = False, start: bool = False) -> list[threading.Thread]:
        """Creates (and with ``start`` starts) the threads for session ``sess``, as TF:
        one per enqueue op, plus the cancel thread with a coordinator; they are registered
        with ``coord``. Returns [] when threads of this runner still run for ``sess``."""
        with self._lock:
            if self._runs_per_session.get(id(sess), 0) > 0:
                return []
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


def add_queue_runner(qr: QueueRunner,
                     collection: str = _ops.GraphKeys.QUEUE_RUNNERS) -> None:
    """Adds ``qr`` to the graph collection ``collection`` (default ``QUEUE_RUNNERS``)."""
    _ops.get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess: Any = None, coord: Coordinator | None = None,
                        daemon: bool = True, start: bool = True,
                        collection: str = _ops.GraphKeys.QUEUE_RUNNERS
                        ) -> list[threading.Thread]:
    """Starts the threads of every QueueRunner in ``collection``, as TF; returns them.

    ``sess`` identifies the session the threads serve (a QueueRunner runs one set of
    threads per session); psrt's queue ops run in the process, so any object, or None,
    will do."""
    threads: list[threading.Thread] = []
    for qr in _ops.get_default_graph().get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
