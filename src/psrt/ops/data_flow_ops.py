"""TF1's queues as graph ops (tensorflow/python/ops/data_flow_ops.py, r1.15; kernels
tensorflow/core/kernels/fifo_queue.cc, random_shuffle_queue_op.cc, padding_fifo_queue.cc):
``FIFOQueue``, ``RandomShuffleQueue``, ``PaddingFIFOQueue``.

A queue holds tuples of numpy values (one per component, of the queue's ``dtypes`` and
``shapes``) in the process that built the graph: psrt's input queues are local to the
worker, where TF1 PS scripts place them. Its ops are graph nodes run by ``Session.run``:

* ``enqueue(vals)``, ``enqueue_many(vals)``, ``close()``: ops (``Session.run`` gives None);
  an enqueue waits while the queue is full;
* ``dequeue()``, ``dequeue_many(n)``, ``dequeue_up_to(n)``: tensors (one per component;
  a single tensor for a one-component queue without names, a dict with ``names``), each
  computed once per run, waiting for elements; once the queue is closed and holds too
  few, OutOfRangeError, as TF;
* ``size()`` (int32), ``is_closed()`` (bool): tensors.

A run made only of such local ops (the enqueue runs of queue runner threads) does not take
the session's lock, so a training step blocked in a dequeue never stops its producers.

Without ``dtypes`` a :class:`FIFOQueue` is psrt's older Python-filled queue: its ops are
callables (``q.enqueue(fn)()``, ``q.dequeue()()``), elements are whatever ``fn`` returns.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
from psrt.framework import random_seed as _random_seed
from psrt.framework import tensor as _tensor
from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.tensor_shape import TensorShape, as_shape

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "QueueBase", "RandomShuffleQueue", "local_op"]


def local_op(t: Any, name: str) -> _ops.Operation:
    """An op whose run computes the tensor ``t`` (a stateful local node: an enqueue, a
    close, a reader reset, a local initializer) and gives None, as a TF op without
    outputs. The executor runs it like a fetch of ``t``."""
    return _ops.Operation("local", value=t, name=name)


def _component_list(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


class QueueBase:
    """What TF's queues share (``data_flow_ops.QueueBase``): the components' ``dtypes``,
    ``shapes`` and ``names``, the ops, the closing rules. See the module docstring."""

    _kind = "Queue"

    def __init__(self, capacity: int, dtypes: Any, shapes: Any, names: Any,
                 shared_name: str | None, name: str) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) \
                or capacity < 1:
            raise ValueError(f"capacity must be a positive int; got {capacity!r}")
        self._capacity = int(capacity)
        self._legacy = dtypes is None
        if self._legacy:
            self._dtypes: list[np.dtype] = []
            self._shapes: list[TensorShape] = []
        else:
            self._dtypes = [_lib.np_dtype(d) for d in _component_list(dtypes)]
            if shapes is None:
                self._shapes = [TensorShape(None) for _ in self._dtypes]
            else:
                self._shapes = [as_shape(s) for s in _shape_list(shapes)]
                if len(self._shapes) != len(self._dtypes):
                    raise ValueError(f"Queue shapes must have the same length as dtypes: "
                                     f"{len(self._shapes)} shapes for {len(self._dtypes)} "
                                     f"dtypes")
        if names is not None and not self._legacy:
            names = _component_list(names)
            if len(names) != len(self._dtypes):
                raise ValueError(f"Queue names must have the same length as dtypes: "
                                 f"{len(names)} names for {len(self._dtypes)} dtypes")
        self._names = names
        self._items: Any = collections.deque()
        # Guards _items, _closed and _cancelled; notified on every change.
        self._cond = threading.Condition()
        self._closed = False
        self._cancelled = False
        self._shared_name = shared_name
        graph = _ops.get_default_graph()
        self.name = graph.unique_name(name)
        if not self._legacy:
            graph._has_input_ops = True

    # ---- properties ------------------------------------------------------------------------

    capacity = property(lambda self: self._capacity, doc="The most elements held.")
    dtypes = property(lambda self: list(self._dtypes), doc="The components' numpy dtypes.")
    shapes = property(lambda self: list(self._shapes), doc="The components' TensorShapes.")
    names = property(lambda self: self._names, doc="The components' names, or None.")

    @property
    def queue_ref(self) -> "QueueBase":
        """The queue itself (what readers and TF's ops take as the queue's handle)."""
        return self

    # ---- the state ---------------------------------------------------------------------------

    def _ready(self, want: int) -> bool:
        """Whether a dequeue of ``want`` can take elements now (not closed)."""
        return len(self._items) >= want

    def _pop(self) -> Any:
        return self._items.popleft()

    def _put(self, items: list[Any]) -> None:
        with self._cond:
            # As TF: an enqueue on a closed queue fails; one already waiting for room
            # completes unless the close cancels pending enqueues.
            if self._closed:
                raise errors.CancelledError(None, None, f"{self._kind} '{self.name}' is closed.")
            for item in items:
                while len(self._items) >= self._capacity and not self._cancelled:
                    self._cond.wait()
                if self._cancelled:
                    raise errors.CancelledError(
                        None, None, f"{self._kind} '{self.name}' is closed; pending enqueue "
                        f"cancelled.")
                self._items.append(item)
                self._cond.notify_all()

    def _take(self, want: int, up_to: bool) -> list[Any]:
        """``want`` elements (fewer, at least one, with ``up_to`` once closed), waiting."""
        with self._cond:
            while not self._closed and not self._ready(want):
                self._cond.wait()
            n = len(self._items)
            if n < want and (not up_to or n == 0):
                raise errors.OutOfRangeError(
                    None, None, f"{self._kind} '{self.name}' is closed and has insufficient "
                    f"elements (requested {want}, current size {n})")
            out = [self._pop() for _ in range(min(want, n))]
            self._cond.notify_all()
        return out

    def _close(self, cancel: bool) -> None:
        with self._cond:
            self._closed = True
            self._cancelled = self._cancelled or cancel
            self._cond.notify_all()

    def _reopen(self) -> None:
        with self._cond:
            self._closed = False
            self._cancelled = False
            self._cond.notify_all()

    def _size(self) -> int:
        with self._cond:
            return len(self._items)

    # ---- graph ops ---------------------------------------------------------------------------

    def _scope(self, name: str | None, default: str) -> str:
        return name or f"{self.name}_{default}"

    def _inputs(self, vals: Any, many: bool) -> list[Any]:
        """The components of ``vals`` (a list/tuple, one value, or a dict by ``names``) as
        graph values of the queue's dtypes, their static shapes checked."""
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names) != sorted(vals):
                raise ValueError(f"Keys in dictionary to enqueue do not match names of "
                                 f"Queue.  Dictionary: {sorted(vals)}, Queue: "
                                 f"{sorted(self._names)}")
            vals = [vals[k] for k in self._names]
        vals = _component_list(vals)
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} tensors to enqueue, got "
                             f"{len(vals)}")
        out = []
        for i, (v, dt, shape) in enumerate(zip(vals, self._dtypes, self._shapes)):
            if _lib.is_graph_value(v):
                have = _lib.static_dtype(v)
                if have is not None and np.dtype(have) != dt:
                    raise ValueError(f"Tensor conversion requested dtype {dt.name} for "
                                     f"Tensor with dtype {np.dtype(have).name}: {v!r}")
            elif dt == np.dtype(object):
                v = convert_to_tensor(_strings(v), dtype=dt)
            else:
                v = convert_to_tensor(v, dtype=dt)
            s = _lib.static_shape(v)
            if many:
                s = TensorShape(None) if s.ndims is None else TensorShape(s.as_list()[1:]) \
                    if s.ndims >= 1 else s
                if _lib.static_shape(v).ndims == 0:
                    raise ValueError(f"Shape must be at least rank 1 but is rank 0 for "
                                     f"component {i} of enqueue_many")
            if not s.is_compatible_with(shape):
                raise ValueError(f"Shapes {s} and {shape} are incompatible")
            out.append(v)
        return out

    def _element(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """One element: each component converted to its dtype, checked against its shape."""
        out = []
        for i, (v, dt, shape) in enumerate(zip(values, self._dtypes, self._shapes)):
            arr = np.asarray(v, dtype=dt)
            if not _fits(arr.shape, shape):
                raise errors.InvalidArgumentError(
                    None, None, f"Shape mismatch in tuple component {i}. Expected "
                    f"{_shape_text(shape)}, got {list(arr.shape)}")
            out.append(arr)
        return tuple(out)

    def _many(self, values: Sequence[Any]) -> list[tuple[Any, ...]]:
        arrays = [np.asarray(v, dtype=dt) for v, dt in zip(values, self._dtypes)]
        n = arrays[0].shape[0]
        for i, a in enumerate(arrays):
            if a.ndim == 0 or a.shape[0] != n:
                raise errors.InvalidArgumentError(
                    None, None, f"Shape mismatch in tuple component {i}: every component of "
                    f"enqueue_many must have the same size in dimension 0 ({n}); got "
                    f"{list(a.shape)}")
        return [self._element([a[j] for a in arrays]) for j in range(n)]

    def enqueue(self, vals: Any, name: str | None = None) -> Any:
        """An op adding one element, as TF's ``QueueBase.enqueue``: ``vals`` is a tensor, a
        list/tuple of them (one per component) or a dict keyed by ``names``. Running it
        waits while the queue is full; CancelledError once the queue is closed.

        Raises:
            ValueError: the number, dtypes or static shapes of ``vals`` do not fit.
        """
        if self._legacy:
            return _LegacyOp(self, name or "enqueue", lambda: self._put([_produce(vals)]))
        ins = self._inputs(vals, many=False)
        scope = self._scope(name, "enqueue")
        t = _tensor.py_func(lambda *v: self._put([self._element(v)]), ins, None,
                            name=scope + "_run")
        return local_op(t, _ops.get_default_graph().unique_name(scope))

    def enqueue_many(self, vals: Any, name: str | None = None) -> Any:
        """An op adding every element along dimension 0 of ``vals`` (whose components
        have the same size there), as TF's ``enqueue_many``; see :meth:`enqueue`."""
        if self._legacy:
            return _LegacyOp(self, name or "enqueue_many",
                             lambda: self._put(_unstack(_produce(vals))))
        ins = self._inputs(vals, many=True)
        scope = self._scope(name, "enqueue_many")
        t = _tensor.py_func(lambda *v: self._put(self._many(v)), ins, None,
                            name=scope + "_run")
        return local_op(t, _ops.get_default_graph().unique_name(scope))

    def _dequeue_tensors(self, scope: str, run: Callable[[], list[Any]],
                         lead: list[Any] | None) -> Any:
        shapes = [TensorShape(None) if s.ndims is None else
                  TensorShape((lead or []) + s.as_list()) for s in self._shapes]
        both = _tensor.py_func(run, [], list(self._dtypes), name=scope)
        # One single-output node per component over the dequeue (computed once per run):
        # a feed of a component (``feed_dict={images: test_images}``) replaces it and
        # prunes the dequeue, as TF's feeds of a dequeue's outputs.
        outs = []
        for i, (t, s) in enumerate(zip(both, shapes)):
            c = _tensor.py_func(_same, [t], self._dtypes[i], name=f"{scope}/component_{i}")
            c.shape = s
            outs.append(c)
        if self._names:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else list(outs)

    def _require_shapes(self, op: str) -> None:
        if not all(s.is_fully_defined() for s in self._shapes):
            raise errors.InvalidArgumentError(
                None, None, f"{self._kind}'s DequeueMany and DequeueUpTo require the "
                f"components to have specified shapes.")

    def _batched(self, items: list[tuple[Any, ...]]) -> list[Any]:
        return [np.stack([it[i] for it in items]) if items else
                np.zeros((0,) + tuple(self._shapes[i].as_list()), self._dtypes[i])
                for i in range(len(self._dtypes))]

    def dequeue(self, name: str | None = None) -> Any:
        """The next element (a tensor per component), waiting for one, as TF's
        ``dequeue``; once the queue is closed and empty, OutOfRangeError."""
        if self._legacy:
            return _LegacyOp(self, name or "dequeue", lambda: self._take(1, False)[0])
        return self._dequeue_tensors(self._scope(name, "Dequeue"),
                                     lambda: list(self._take(1, False)[0]), None)

    def dequeue_many(self, n: int, name: str | None = None) -> Any:
        """The next ``n`` elements stacked along a new dimension 0, as TF's
        ``dequeue_many``; a closed queue with fewer than ``n`` raises OutOfRangeError (and
        keeps them). Needs fully defined ``shapes`` (InvalidArgumentError, as TF)."""
        if self._legacy:
            return _LegacyOp(self, name or "dequeue_many",
                             lambda: _stack(self._take(int(n), False)))
        count = _count(n)

        def run() -> list[Any]:
            self._require_shapes("DequeueMany")
            return self._batched(self._take(count, False))
        return self._dequeue_tensors(self._scope(name, "DequeueMany"), run, [count])

    def dequeue_up_to(self, n: int, name: str | None = None) -> Any:
        """As :meth:`dequeue_many`, but once the queue is closed it gives what is left
        (at least one element; none left: OutOfRangeError), as TF's ``dequeue_up_to``."""
        if self._legacy:
            return _LegacyOp(self, name or "dequeue_up_to",
                             lambda: _stack(self._take(int(n), True)))
        count = _count(n)

        def run() -> list[Any]:
            self._require_shapes("DequeueUpTo")
            return self._batched(self._take(count, True))
        return self._dequeue_tensors(self._scope(name, "DequeueUpTo"), run, [None])

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Any:
        """An op closing the queue, as TF: enqueues fail from then on; dequeues drain what
        is left, then raise OutOfRangeError. With ``cancel_pending_enqueues``, blocked
        enqueues fail at once (CancelledError)."""
        cancel = bool(cancel_pending_enqueues)
        if self._legacy:
            return _LegacyOp(self, name or "close", lambda: self._close(cancel))
        scope = self._scope(name, "Close")
        t = _tensor.py_func(lambda: self._close(cancel), [], None, name=scope + "_run")
        return local_op(t, _ops.get_default_graph().unique_name(scope))

    def size(self, name: str | None = None) -> Any:
        """The number of elements held: an int32 scalar tensor."""
        if self._legacy:
            return _LegacyOp(self, name or "size", self._size)
        t = _tensor.py_func(lambda: np.int32(self._size()), [], np.int32,
                            name=self._scope(name, "Size"))
        t.shape = []
        return t

    def is_closed(self, name: str | None = None) -> Any:
        """True once the queue is closed: a bool scalar tensor."""
        if self._legacy:
            return _LegacyOp(self, name or "is_closed", lambda: self._closed)
        t = _tensor.py_func(lambda: np.bool_(self._closed), [], np.bool_,
                            name=self._scope(name, "IsClosed"))
        t.shape = []
        return t


def _same(x: Any) -> Any:
    return x


def _strings(x: Any) -> np.ndarray:
    arr = np.asarray(x, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx, v in np.ndenumerate(arr):
        out[idx] = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return out


def _shape_list(shapes: Any) -> list[Any]:
    """``shapes`` as one shape per component, by TF's rule (``data_flow_ops._as_shape_list``):
    a TensorShape, or a list whose entries are all ints or None, is one shape.

    Raises:
        TypeError: not a TensorShape, list or tuple.
    """
    if isinstance(shapes, TensorShape):
        return [shapes]
    if not isinstance(shapes, (list, tuple)):
        raise TypeError(f"shapes must be a TensorShape or a list or tuple of TensorShapes; "
                        f"got {shapes!r}")
    if all(s is None or isinstance(s, (int, np.integer)) for s in shapes):
        return [shapes]
    return list(shapes)


def _fits(shape: tuple[int, ...], want: TensorShape) -> bool:
    if want.ndims is None:
        return True
    dims = want.as_list()
    return len(shape) == len(dims) and all(d is None or d == n for d, n in zip(dims, shape))


def _shape_text(s: TensorShape) -> str:
    return "<unknown>" if s.ndims is None else \
        "[" + ",".join("?" if d is None else str(d) for d in s.as_list()) + "]"


def _count(n: Any) -> int:
    if _lib.is_graph_value(n):
        v = _lib.constant_value(n)
        if v is None:
            raise TypeError("psrt's dequeue_many/dequeue_up_to take n as an int or a "
                            "constant tensor")
        n = v
    count: int = int(np.asarray(n).item())
    if count < 0:
        raise ValueError(f"n must be >= 0; got {count}")
    return count


class FIFOQueue(QueueBase):
    """A bounded first-in first-out queue, as ``tf.FIFOQueue`` (``tf.queue.FIFOQueue``).

    Args:
        capacity: Most elements held (int >= 1); an enqueue waits while it is full.
        dtypes: The components' dtypes (a list, or one dtype). None: psrt's Python-filled
            queue (module docstring).
        shapes: The components' shapes (None: any; ``dequeue_many`` needs them defined).
        names: Names of the components: enqueue takes and dequeue gives a dict.
        shared_name: Accepted for TF's signature (queues are local to the process).
        name: Name (made unique in the graph), default ``"fifo_queue"``.

    Raises:
        ValueError: ``capacity`` is not a positive int, or ``shapes``/``names`` do not
            match ``dtypes`` in length.
    """

    _kind = "FIFOQueue"

    def __init__(self, capacity: int, dtypes: Any = None, shapes: Any = None,
                 names: Any = None, shared_name: str | None = None,
                 name: str = "fifo_queue") -> None:
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)


class PaddingFIFOQueue(QueueBase):
    """A FIFOQueue whose ``dequeue_many``/``dequeue_up_to`` pad each component to the
    largest element of the batch along the dimensions ``shapes`` leaves None (zeros; empty
    strings), as ``tf.PaddingFIFOQueue`` (core/kernels/padding_fifo_queue.cc).

    Raises:
        ValueError: ``shapes`` not given for every component, or of unknown rank.
    """

    _kind = "PaddingFIFOQueue"

    def __init__(self, capacity: int, dtypes: Any, shapes: Any, names: Any = None,
                 shared_name: str | None = None, name: str = "padding_fifo_queue") -> None:
        n_dtypes = len(_component_list(dtypes))
        got = 0 if shapes is None else len(_shape_list(shapes))
        if got != n_dtypes:
            raise ValueError(f"Shapes must be provided for all components, but received "
                             f"{n_dtypes} dtypes and {got} shapes.")
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)
        for s in self._shapes:
            if s.ndims is None:
                raise ValueError("PaddingFIFOQueue requires every component's rank to be "
                                 "known (shapes entries may have None dimensions)")

    def _require_shapes(self, op: str) -> None:
        return None

    def _batched(self, items: list[tuple[Any, ...]]) -> list[Any]:
        out = []
        for i, dt in enumerate(self._dtypes):
            parts = [it[i] for it in items]
            rank = len(self._shapes[i].as_list())
            big = [max((p.shape[d] for p in parts), default=0) for d in range(rank)]
            fill = b"" if dt == np.dtype(object) else 0
            arr = np.full([len(parts)] + big, fill, dtype=dt)
            for j, p in enumerate(parts):
                arr[(j,) + tuple(slice(0, n) for n in p.shape)] = p
            out.append(arr)
        return out


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues its elements in random order, as ``tf.RandomShuffleQueue``
    (core/kernels/random_shuffle_queue_op.cc): each dequeued element is drawn uniformly
    from those held, and until the queue is closed a dequeue waits while taking would
    leave fewer than ``min_after_dequeue`` (after the close, what is left drains).

    ``seed`` (with the graph seed, ``psrt.set_random_seed``) makes the order repeat from
    one run of the program to the next, for the same sequence of enqueues; without either
    it differs every time, as TF.

    Raises:
        ValueError: ``capacity`` not positive, or ``min_after_dequeue`` negative or not
            below ``capacity``.
    """

    _kind = "RandomShuffleQueue"

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes: Any, shapes: Any = None,
                 names: Any = None, seed: int | None = None, shared_name: str | None = None,
                 name: str = "random_shuffle_queue") -> None:
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)
        if int(min_after_dequeue) < 0:
            raise ValueError(f"min_after_dequeue must be >= 0; got {min_after_dequeue}")
        self._min_after_dequeue = int(min_after_dequeue)
        self._items = []
        seed1, seed2 = _random_seed.get_seed(seed)
        self._rng = np.random.default_rng(None if seed1 is None else [seed1, seed2 or 0])

    min_after_dequeue = property(lambda self: self._min_after_dequeue)

    def _ready(self, want: int) -> bool:
        return len(self._items) - want >= self._min_after_dequeue

    def _pop(self) -> Any:
        items = self._items
        i = int(self._rng.integers(len(items)))
        items[i], items[-1] = items[-1], items[i]
        return items.pop()


# ---- psrt's older Python-filled queue --------------------------------------------------------


class _LegacyOp:
    """An op of a Python-filled :class:`FIFOQueue` (no ``dtypes``): runs when called, by a
    QueueRunner, or fetched by ``Session.run`` (a computed fetch); named so it can be fed."""

    def __init__(self, queue: QueueBase, name: str, run: Callable[[], Any]) -> None:
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
