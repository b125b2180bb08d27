"""TF1's queue-based input pipelines (tensorflow/python/training/input.py, r1.15): the
producers ``input_producer``, ``string_input_producer``, ``range_input_producer``,
``slice_input_producer``, ``limit_epochs``, ``match_filenames_once``, and the batching of
``batch``, ``batch_join``, ``shuffle_batch``, ``shuffle_batch_join``.

Each producer or batch builds a queue (ops/data_flow_ops.py) and registers a
:class:`QueueRunner` in ``GraphKeys.QUEUE_RUNNERS``: ``start_queue_runners(sess, coord)``,
a MonitoredTrainingSession or a Supervisor starts its threads. With ``num_epochs`` the
producer's epoch counter is a local variable (``local_variables_initializer()``; a
Scaffold's default ``local_init_op`` runs it); after the last epoch the queues close in
turn and the training loop's ``sess.run`` raises OutOfRangeError, which ends a
MonitoredTrainingSession's ``with`` block (and sets the coordinator's ``should_stop()``),
as TF. An error of a producer thread (a corrupt record: DataLossError) stops the
coordinator, whose cancel threads close the queues: the waiting ``sess.run`` ends, and the
session's close (or ``coord.join``) re-raises the error.

Dict inputs are enqueued by sorted key and come back as a dict; a single tensor (or a
one-element list) comes back as a single tensor; a SparseTensor (a ``VarLenFeature``) of
each example comes back as one SparseTensor ``[batch, longest...]``, as TF's.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
from psrt.framework import random_seed as _random_seed
from psrt.framework import tensor as _tensor
from psrt.framework.constant_op import constant
from psrt.framework.sparse_tensor import SparseTensor
from psrt.framework.tensor_shape import TensorShape, as_shape
from psrt.ops import array_ops as _array
from psrt.ops import io_ops as _io
from psrt.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from psrt.ops.local_variables import LocalVariable
from psrt.training.queue_runner import QueueRunner, add_queue_runner

__all__ = ["batch", "batch_join", "input_producer", "limit_epochs", "match_filenames_once",
           "range_input_producer", "shuffle_batch", "shuffle_batch_join",
           "slice_input_producer", "string_input_producer"]


def _graph_value(x: Any, dtype: Any = None) -> Any:
    if _lib.is_graph_value(x):
        return x
    if isinstance(x, LocalVariable):
        return x.value()
    arr = np.asarray(x)
    if arr.dtype.kind in "USO":
        out = np.empty(arr.shape, dtype=object)
        for idx, v in np.ndenumerate(arr):
            out[idx] = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        return constant(out)
    return constant(x, dtype)


def match_filenames_once(pattern: Any, name: str | None = None) -> LocalVariable:
    """The files matching ``pattern`` (a glob, or a list of them), found once: a local
    variable set by ``local_variables_initializer()``, as TF's. Give it to
    ``string_input_producer`` or read it with ``sess.run(v.value())``."""
    return LocalVariable(_io.matching_files(pattern), name or "matching_filenames",
                         np.dtype(object))


def limit_epochs(tensor: Any, num_epochs: int | None = None, name: str | None = None) -> Any:
    """``tensor``, but a run that computes it more than ``num_epochs`` times raises
    OutOfRangeError, as TF's (an ``epochs`` local variable counts the runs).

    Raises:
        ValueError: ``num_epochs`` <= 0.
    """
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    scope = name or "limit_epochs"
    epochs = LocalVariable(np.int64(0), f"{scope}/epochs", np.int64)
    counter = epochs.count_up_to(num_epochs)
    with _ops.control_dependencies([counter]):
        return _array.identity(_graph_value(tensor), name=scope)


def _shuffled(x: Any, seed: int | None, name: str) -> Any:
    seed1, seed2 = _random_seed.get_seed(seed)
    rng = np.random.default_rng(None if seed1 is None else [seed1, seed2 or 0])
    t = _tensor.py_func(lambda v: v[rng.permutation(len(v))] if np.ndim(v) else v, [x],
                        _lib.static_dtype(x), name=name)
    t.shape = _lib.static_shape(x)
    return t


def input_producer(input_tensor: Any, element_shape: Any = None, num_epochs: int | None = None,
                   shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                   shared_name: str | None = None, summary_name: str | None = None,
                   name: str | None = None, cancel_op: Any = None) -> FIFOQueue:
    """A queue filled with the rows of ``input_tensor`` (shuffled each epoch with
    ``shuffle``), ``num_epochs`` times (None: forever), by a QueueRunner, as TF's
    ``input_producer``. Returns the FIFOQueue."""
    scope = name or "input_producer"
    x = _graph_value(input_tensor)
    if shuffle:
        x = _shuffled(x, seed, f"{scope}/RandomShuffle")
    x = limit_epochs(x, num_epochs, name=f"{scope}/limit_epochs")
    shape = as_shape(element_shape) if element_shape is not None else \
        TensorShape(None) if _lib.static_shape(x).ndims is None else \
        TensorShape(_lib.static_shape(x).as_list()[1:])
    q = FIFOQueue(capacity, [_lib.static_dtype(x)], [shape], shared_name=shared_name,
                  name=scope)
    enq = q.enqueue_many([x])
    add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
    return q


def string_input_producer(string_tensor: Any, num_epochs: int | None = None,
                          shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                          shared_name: str | None = None, name: str | None = None,
                          cancel_op: Any = None) -> FIFOQueue:
    """A queue of the strings (file names) of ``string_tensor``, as TF's
    ``string_input_producer``: each epoch every string once (in random order with
    ``shuffle``), ``num_epochs`` times, then the queue closes. Give it to a reader.

    Raises:
        ValueError: ``string_tensor`` is a known empty list ("string_input_producer
            requires a non-null input tensor"; an empty tensor is InvalidArgumentError in
            the run).
    """
    msg = "string_input_producer requires a non-null input tensor"
    if not _lib.is_graph_value(string_tensor) and not isinstance(string_tensor, LocalVariable):
        if np.size(np.asarray(string_tensor, dtype=object)) == 0:
            raise ValueError(msg)
    x = _graph_value(string_tensor)

    def check(v: Any) -> Any:
        if np.size(v) == 0:
            raise errors.InvalidArgumentError(None, None, f"assertion failed: [{msg}]")
        return v
    checked = _tensor.py_func(check, [x], np.dtype(object), name="input_producer/Assert")
    checked.shape = _lib.static_shape(x)
    return input_producer(checked, [], num_epochs, shuffle, seed, capacity, shared_name,
                          f"fraction_of_{capacity}_full", name or "input_producer", cancel_op)


def range_input_producer(limit: Any, num_epochs: int | None = None, shuffle: bool = True,
                         seed: int | None = None, capacity: int = 32,
                         shared_name: str | None = None, name: str | None = None) -> FIFOQueue:
    """A queue of the int32 integers ``0 .. limit-1``, each epoch (in random order with
    ``shuffle``), ``num_epochs`` times, as TF's ``range_input_producer``."""
    rng = _graph_value(np.arange(int(limit), dtype=np.int32)) \
        if not _lib.is_graph_value(limit) else _range(limit)
    return input_producer(rng, [], num_epochs, shuffle, seed, capacity, shared_name,
                          f"fraction_of_{capacity}_full", name or "input_producer")


def _range(limit: Any) -> Any:
    t = _tensor.py_func(lambda n: np.arange(int(n), dtype=np.int32), [limit], np.int32,
                        name="range")
    t.shape = [None]
    return t


def slice_input_producer(tensor_list: Sequence[Any], num_epochs: int | None = None,
                         shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                         shared_name: str | None = None, name: str | None = None) -> list[Any]:
    """One row of each tensor of ``tensor_list`` (the same row of each), every row once per
    epoch (in random order with ``shuffle``), as TF's ``slice_input_producer``.

    Raises:
        ValueError: an empty ``tensor_list``.
    """
    tensors = [_graph_value(t) for t in tensor_list]
    if not tensors:
        raise ValueError("Expected at least one tensor in slice_input_producer().")
    n = _lib.static_shape(tensors[0])
    size = n.as_list()[0] if n.ndims else None
    limit: Any = size if size is not None else _array.shape(tensors[0])[0]
    queue = range_input_producer(limit,
                                 num_epochs, shuffle, seed, capacity, shared_name,
                                 name or "input_producer")
    index = queue.dequeue()
    return [_array.gather(t, index) for t in tensors]


# ---- batching ---------------------------------------------------------------------------------


def _as_tensor_list(tensors: Any) -> list[Any]:
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors)]
    if isinstance(tensors, (list, tuple)):
        return list(tensors)
    return [tensors]


def _as_original_type(original: Any, dequeued: Any) -> Any:
    if isinstance(original, dict):
        if not isinstance(dequeued, list):
            dequeued = [dequeued]
        return {k: dequeued[i] for i, k in enumerate(sorted(original))}
    return dequeued


def _shapes(lists: list[list[Any]], shapes: Any, enqueue_many: bool) -> list[TensorShape]:
    if shapes is not None:
        return [as_shape(s) for s in shapes]
    out: list[TensorShape] = []
    for i in range(len(lists[0])):
        merged: TensorShape | None = None
        for tl in lists:
            s = _lib.static_shape(tl[i])
            if s.ndims is None:
                raise ValueError(f"Cannot infer Tensor's rank: {tl[i]!r}")
            if enqueue_many:
                s = TensorShape(s.as_list()[1:])
            merged = s if merged is None else merged.merge_with(s)
        assert merged is not None
        out.append(merged)
    return out


def _dtypes(lists: list[list[Any]]) -> list[Any]:
    types = [_lib.static_dtype(t) for t in lists[0]]
    for tl in lists[1:]:
        if [_lib.static_dtype(t) for t in tl] != types:
            raise TypeError(f"Expected types to be the same for every tensor list: "
                            f"{[np.dtype(d).name for d in types]}")
    return types


def _queue_batch(tensors_list: list[Any], batch_size: int, capacity: int, enqueue_many: bool,
                 shapes: Any, threads: int, make_queue: Any, allow_smaller_final_batch: bool,
                 name: str) -> Any:
    if not tensors_list:
        raise ValueError("Expected at least one tensor list")
    raw = [_as_tensor_list(ts) for ts in tensors_list]
    if any(len(tl) != len(raw[0]) for tl in raw) or not raw[0]:
        raise ValueError("Expected tensor lists of the same, non-zero, length")
    sparse = [isinstance(t, SparseTensor) for t in raw[0]]
    if any(sparse) and enqueue_many:
        raise ValueError("psrt batches SparseTensors one example at a time: enqueue_many "
                         "with a SparseTensor is not supported")
    lists = [[_pack_sparse(t) if isinstance(t, SparseTensor) else _graph_value(t) for t in tl]
             for tl in raw]
    types = _dtypes(lists)
    shps = _shapes(lists, shapes, enqueue_many)
    if shapes is not None and any(sparse):
        shps = [TensorShape([]) if s else shp for s, shp in zip(sparse, shps)]
    queue = make_queue(types, shps)
    enq = [queue.enqueue_many(tl) if enqueue_many else queue.enqueue(tl)
           for tl in lists for _ in range(threads)]
    add_queue_runner(QueueRunner(queue, enq))
    if allow_smaller_final_batch:
        out = queue.dequeue_up_to(batch_size, name=name)
    else:
        out = queue.dequeue_many(batch_size, name=name)
    if any(sparse):
        parts = out if isinstance(out, list) else [out]
        parts = [_unpack_sparse(c, _lib.static_dtype(raw[0][i].values)) if sparse[i] else c
                 for i, c in enumerate(parts)]
        out = parts if len(parts) > 1 else parts[0]
    return _as_original_type(tensors_list[0], out)


def _pack(indices: Any, values: Any, dense_shape: Any) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = (np.asarray(indices, np.int64), np.asarray(values), np.asarray(dense_shape,
                                                                             np.int64))
    return out


def _pack_sparse(st: SparseTensor) -> Any:
    """One example's SparseTensor as one queue element (TF stores it in a
    SparseTensorsMap and enqueues its handle, ``_store_sparse_tensors``)."""
    t = _tensor.py_func(_pack, [st.indices, st.values, st.dense_shape], np.dtype(object),
                        name="store_sparse")
    t.shape = []
    return t


def _unpack(packed: Any, dtype: Any) -> list[Any]:
    items = list(np.asarray(packed, dtype=object).reshape(-1))
    rank = max((len(it[2]) for it in items), default=1)
    shape = [len(items)] + [max((int(it[2][d]) for it in items), default=0)
                            for d in range(rank)]
    idx = [np.concatenate([np.full((len(it[0]), 1), b, np.int64),
                           np.asarray(it[0], np.int64).reshape(-1, rank)], axis=1)
           for b, it in enumerate(items)]
    vals = [np.asarray(it[1], dtype).reshape(-1) for it in items]
    return [np.concatenate(idx) if idx else np.zeros((0, rank + 1), np.int64),
            np.concatenate(vals) if vals else np.zeros(0, dtype),
            np.asarray(shape, np.int64)]


def _unpack_sparse(packed: Any, dtype: Any) -> SparseTensor:
    """The batch of packed SparseTensors as one SparseTensor with a new dimension 0 and
    each other dimension the largest of the batch, as TF's ``_restore_sparse_tensors``."""
    ind, val, shp = _tensor.py_func(functools.partial(_unpack, dtype=dtype), [packed],
                                    [np.int64, dtype, np.int64], name="restore_sparse")
    ind.shape = [None, None]
    val.shape = [None]
    shp.shape = [None]
    return SparseTensor(ind, val, shp)


def batch(tensors: Any, batch_size: int, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: str | None = None,
          name: str | None = None) -> Any:
    """Batches of ``batch_size`` of ``tensors`` (a list or dict of tensors: one example
    each, or with ``enqueue_many`` a batch of examples along dimension 0) through a
    FIFOQueue of ``capacity`` filled by ``num_threads`` threads, as ``tf.train.batch``.
    ``dynamic_pad`` pads dimensions of unknown size to the largest of the batch
    (PaddingFIFOQueue). With ``allow_smaller_final_batch`` the last batch, once the input
    ends, may be smaller (dimension 0 unknown); otherwise its leftover examples are dropped
    and the next run raises OutOfRangeError.

    Raises:
        ValueError: a tensor of unknown rank (shapes not given), or mismatched lists.
    """
    return _batch([tensors], batch_size, num_threads, capacity, enqueue_many, shapes,
                  dynamic_pad, allow_smaller_final_batch, shared_name, name)


def batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int = 32,
               enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
               allow_smaller_final_batch: bool = False, shared_name: str | None = None,
               name: str | None = None) -> Any:
    """As :func:`batch`, with one enqueuing thread per entry of ``tensors_list`` (lists
    or dicts of the same dtypes and shapes, e.g. one reader each), as
    ``tf.train.batch_join``."""
    return _batch(list(tensors_list), batch_size, 1, capacity, enqueue_many, shapes,
                  dynamic_pad, allow_smaller_final_batch, shared_name, name)


def _batch(tensors_list: list[Any], batch_size: int, threads: int, capacity: int,
           enqueue_many: bool, shapes: Any, dynamic_pad: bool,
           allow_smaller_final_batch: bool, shared_name: str | None,
           name: str | None) -> Any:
    scope = name or "batch"

    def make(types: list[np.dtype], shps: list[TensorShape]) -> Any:
        if dynamic_pad:
            return PaddingFIFOQueue(capacity, types, shps, shared_name=shared_name,
                                    name=f"{scope}/padding_fifo_queue")
        return FIFOQueue(capacity, types, shps, shared_name=shared_name,
                         name=f"{scope}/fifo_queue")
    return _queue_batch(tensors_list, batch_size, capacity, enqueue_many, shapes,
                        threads, make, allow_smaller_final_batch, scope)


def shuffle_batch(tensors: Any, batch_size: int, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed: int | None = None, enqueue_many: bool = False,
                  shapes: Any = None, allow_smaller_final_batch: bool = False,
                  shared_name: str | None = None, name: str | None = None) -> Any:
    """Shuffled batches of ``tensors``, as ``tf.train.shuffle_batch``: examples go
    through a RandomShuffleQueue of ``capacity`` that keeps at least
    ``min_after_dequeue`` examples to draw from (until the input ends); ``seed`` makes the
    order repeat (for one thread of a deterministic input). See :func:`batch`.

    Raises:
        ValueError: as :func:`batch`; ``min_after_dequeue`` not below ``capacity``.
    """
    return _shuffle_batch([tensors], batch_size, capacity, min_after_dequeue, num_threads,
                          seed, enqueue_many, shapes, allow_smaller_final_batch,
                          shared_name, name)


def shuffle_batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int,
                       min_after_dequeue: int, seed: int | None = None,
                       enqueue_many: bool = False, shapes: Any = None,
                       allow_smaller_final_batch: bool = False,
                       shared_name: str | None = None, name: str | None = None) -> Any:
    """As :func:`shuffle_batch`, one enqueuing thread per entry of ``tensors_list``, as
    ``tf.train.shuffle_batch_join``."""
    return _shuffle_batch(list(tensors_list), batch_size, capacity, min_after_dequeue, 1,
                          seed, enqueue_many, shapes, allow_smaller_final_batch,
                          shared_name, name)


def _shuffle_batch(tensors_list: list[Any], batch_size: int, capacity: int,
                   min_after_dequeue: int, threads: int, seed: int | None,
                   enqueue_many: bool, shapes: Any, allow_smaller_final_batch: bool,
                   shared_name: str | None, name: str | None) -> Any:
    scope = name or "shuffle_batch"
    if min_after_dequeue >= capacity:
        raise ValueError(f"min_after_dequeue ({min_after_dequeue}) must be less than "
                         f"capacity ({capacity})")

    def make(types: list[np.dtype], shps: list[TensorShape]) -> Any:
        return RandomShuffleQueue(capacity, min_after_dequeue, types, shps, seed=seed,
                                  shared_name=shared_name,
                                  name=f"{scope}/random_shuffle_queue")
    return _queue_batch(tensors_list, batch_size, capacity, enqueue_many, shapes,
                        threads, make, allow_smaller_final_batch, scope)

