"""The transformations of ``tf.data`` (psrt/ops/dataset_ops.py's ``Dataset.map``,
``filter``, ``batch``, ``padded_batch``, ``shuffle``, ``repeat``, ``take``, ``skip``,
``shard``, ``cache``, ``prefetch``, ``interleave``) as dataset nodes
(psrt/ops/dataset_structure.py), each following its TF kernel
(tensorflow/core/kernels/data/*_dataset_op.cc, r1.15)."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import random_seed as _random_seed
from psrt.framework.sparse_tensor import SparseTensorValue
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import dataset_structure as _st
from psrt.ops.dataset_sources import rng as _rng
from psrt.ops.dataset_sources import spec as _spec
from psrt.ops.dataset_structure import DatasetNode, Flat

__all__ = ["AUTOTUNE", "Batch", "Cache", "Filter", "Interleave", "Map", "PaddedBatch",
           "Prefetch", "Repeat", "Shard", "Shuffle", "Skip", "Take", "Unbatch",
           "interleave_iterators"]

AUTOTUNE = -1
"""``tf.data.experimental.AUTOTUNE``: let the runtime choose (psrt: a buffer of 2, a cycle of
4)."""

class _Unary(DatasetNode):
    def __init__(self, input_dataset: DatasetNode) -> None:
        if not isinstance(input_dataset, DatasetNode):
            raise TypeError(f"expected a Dataset; got {input_dataset!r}")
        self._input = input_dataset
        self._like(input_dataset)

    def _inputs(self) -> list[DatasetNode]:
        return [self._input]


class Map(_Unary):
    """``Dataset.map``: ``func`` applied to each element (or batch), as TF's MapDataset."""

    def __init__(self, input_dataset: DatasetNode, func: Callable[..., Any]) -> None:
        super().__init__(input_dataset)
        self._fn = _traced(func, input_dataset, "map")
        if self._fn.plan is None:
            raise TypeError("the function given to map returned a Dataset; use flat_map or "
                            "interleave")
        specs = [(_spec(o.values), _st.sparse_shape(o)) if sp else (_spec(o), None)
                 for o, sp in zip(self._fn.outputs, self._fn.sparse)]
        self._set_spec(self._fn.structure, [d for (d, _), _ in specs],
                       [s if s is not None else t for (_, t), s in specs], self._fn.sparse)

    def _functions(self) -> list[_st.TracedFunction]:
        return [self._fn]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        fn, src = self._fn, self._input._make(ctx)
        return (fn(ctx, e) for e in src)


class Filter(_Unary):
    """``Dataset.filter``: the elements whose ``predicate`` is True, as TF's FilterDataset."""

    def __init__(self, input_dataset: DatasetNode, predicate: Callable[..., Any]) -> None:
        super().__init__(input_dataset)
        self._fn = _traced(predicate, input_dataset, "filter")
        outs = self._fn.outputs if self._fn.plan is not None else []
        if len(outs) != 1 or not isinstance(outs[0], Tensor) or outs[0].dtype != np.bool_ \
                or outs[0].shape.ndims != 0:
            raise ValueError(f"`predicate` return type must be convertible to a scalar "
                             f"boolean tensor. Was {outs or self._fn.result!r}.")

    def _functions(self) -> list[_st.TracedFunction]:
        return [self._fn]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        fn, src = self._fn, self._input._make(ctx)
        return (e for e in src if bool(fn(ctx, e)[0]))


def _traced(func: Callable[..., Any], ds: DatasetNode, what: str) -> _st.TracedFunction:
    return _st.TracedFunction(func, ds._structure, ds._dtypes, ds._shapes, what, ds._sparse)


def _size_arg(x: Any, what: str) -> Any:
    v = _st.element_value(x)
    if not isinstance(v, Tensor) and (v.shape != () or v.dtype.kind not in "iu"):
        raise TypeError(f"{what} must be a scalar integer; got {x!r}")
    return v


def _static_int(x: Any) -> int | None:
    return None if isinstance(x, Tensor) else int(x)


class Batch(_Unary):
    """``Dataset.batch``: ``batch_size`` consecutive elements stacked (a last smaller batch
    unless ``drop_remainder``), as TF's BatchDataset."""

    def __init__(self, input_dataset: DatasetNode, batch_size: Any, drop_remainder: Any) -> None:
        super().__init__(input_dataset)
        self._size = _size_arg(batch_size, "batch_size")
        self._drop = bool(drop_remainder)
        n = _static_int(self._size) if self._drop else None
        self._shapes = [TensorShape([n]).concatenate(s) for s in input_dataset._shapes]

    def _tensors(self) -> list[Any]:
        return [self._size]

    def _batch_size(self, ctx: _st.Context) -> int:
        n = ctx.scalar(self._size, "batch_size")
        if n <= 0:
            raise _errors.InvalidArgumentError(None, None, f"Batch size must be greater than "
                                               f"zero; got {n}")
        return n

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        n, src, drop = self._batch_size(ctx), self._input._make(ctx), self._drop

        def gen() -> Iterator[Flat]:
            while True:
                items = []
                for e in src:
                    items.append(e)
                    if len(items) == n:
                        break
                if not items or (drop and len(items) < n):
                    return
                yield self._stack(items)
                if len(items) < n:
                    return
        return gen()

    def _stack(self, items: list[Flat]) -> Flat:
        out: Flat = []
        for c in range(len(items[0])):
            parts = [e[c] for e in items]
            if self._sparse[c]:
                out.append(_batch_sparse(parts, c))
                continue
            first = np.shape(parts[0])
            for i, p in enumerate(parts):
                if np.shape(p) != first:
                    raise _errors.InvalidArgumentError(
                        None, None, f"Cannot batch tensors with different shapes in component "
                        f"{c}. First element had shape {list(first)} and element {i} had "
                        f"shape {list(np.shape(p))}.")
            out.append(np.stack(parts).astype(self._dtypes[c], copy=False))
        return out


def _batch_sparse(parts: list[Any], c: int) -> SparseTensorValue:
    """SparseTensorValues of one rank batched as TF batches SparseTensors: a new first
    dimension (each entry's index prefixed by its element's position), the dense shape the
    largest of the elements' in each dimension."""
    ranks = {len(p.dense_shape) for p in parts}
    if len(ranks) != 1:
        raise _errors.InvalidArgumentError(
            None, None, f"Cannot batch SparseTensors of different ranks in component {c}: "
                        f"{sorted(ranks)}")
    rank = ranks.pop()
    shape = np.max(np.stack([np.asarray(p.dense_shape, np.int64) for p in parts]), axis=0) \
        if rank else np.zeros(0, np.int64)
    indices = np.concatenate([np.concatenate(
        [np.full((len(p.indices), 1), i, np.int64),
         np.asarray(p.indices, np.int64).reshape(-1, rank)], axis=1)
        for i, p in enumerate(parts)])
    values = np.concatenate([np.asarray(p.values) for p in parts])
    return SparseTensorValue(indices, values, np.concatenate([[len(parts)], shape]).astype(
        np.int64))


class PaddedBatch(Batch):
    """``Dataset.padded_batch``: batches padded to ``padded_shapes`` with ``padding_values``,
    as TF's PaddedBatchDataset."""

    def __init__(self, input_dataset: DatasetNode, batch_size: Any, padded_shapes: Any,
                 padding_values: Any, drop_remainder: Any) -> None:
        super().__init__(input_dataset, batch_size, drop_remainder)
        if any(input_dataset._sparse):
            raise TypeError("padded_batch is not supported for SparseTensor components; use "
                            "batch")
        shapes = _st.flatten(_st.to_shapes(padded_shapes, input_dataset._structure))
        self._padded = [s.as_list() for s in shapes]
        for s, own in zip(shapes, input_dataset._shapes):
            if own.ndims is not None and s.ndims != own.ndims:
                raise ValueError(f"The padded shape {s} is not compatible with the "
                                 f"corresponding input component shape {own}.")
        if padding_values is None:
            pads = [b"" if dt == np.object_ else dt.type(0) for dt in self._dtypes]
        else:
            pads = _st.flatten(padding_values)
        self._pads = [_st.as_tensor_value(p, dt) for p, dt in zip(pads, self._dtypes)]
        n = _static_int(self._size) if self._drop else None
        self._shapes = [TensorShape([n] + s) for s in self._padded]

    def _stack(self, items: list[Flat]) -> Flat:
        out = []
        for c, (want, pad) in enumerate(zip(self._padded, self._pads)):
            parts = [np.asarray(e[c]) for e in items]
            size = [max(p.shape[k] for p in parts) if d is None else d
                    for k, d in enumerate(want)]
            arr = np.full([len(parts)] + size, pad, dtype=self._dtypes[c])
            for i, p in enumerate(parts):
                if any(a > b for a, b in zip(p.shape, size)):
                    raise _errors.InvalidArgumentError(
                        None, None, f"Attempted to pad to a smaller size than the input "
                        f"element: component {c} of shape {list(p.shape)}, padded shape "
                        f"{size}.")
                arr[(i,) + tuple(slice(0, k) for k in p.shape)] = p
            out.append(arr)
        return out


class Unbatch(_Unary):
    """Each element's slices along its first dimension, as ``unbatch``
    (tensorflow/core/kernels/data/experimental/unbatch_dataset_op.cc)."""

    def __init__(self, input_dataset: DatasetNode) -> None:
        super().__init__(input_dataset)
        if any(self._sparse):
            raise TypeError("unbatch is not supported for SparseTensor components")
        for s in self._shapes:
            if s.ndims == 0:
                raise ValueError("Cannot unbatch an input with scalar components.")
        self._shapes = [TensorShape(s.as_list()[1:]) if s.ndims is not None else s
                        for s in self._shapes]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        src = self._input._make(ctx)

        def gen() -> Iterator[Flat]:
            for e in src:
                sizes = {np.shape(v)[0] for v in e}
                if len(sizes) != 1:
                    raise _errors.InvalidArgumentError(
                        None, None, f"Input element must have the same batch size in each "
                                    f"component; got shapes {[list(np.shape(v)) for v in e]}")
                for i in range(sizes.pop()):
                    yield [v[i, ...] for v in e]
        return gen()


class Shuffle(_Unary):
    """``Dataset.shuffle``: a ``buffer_size`` buffer drawn from at random (graph + op seed),
    reshuffled each iteration unless told not to, as TF's ShuffleDataset."""

    def __init__(self, input_dataset: DatasetNode, buffer_size: Any, seed: int | None,
                 reshuffle: bool | None) -> None:
        super().__init__(input_dataset)
        self._size = _size_arg(buffer_size, "buffer_size")
        self._seeds = _random_seed.get_seed(seed)
        self._reshuffle = True if reshuffle is None else bool(reshuffle)

    def _tensors(self) -> list[Any]:
        return [self._size]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        n = ctx.scalar(self._size, "buffer_size")
        if n <= 0:
            raise _errors.InvalidArgumentError(None, None, f"buffer_size must be greater than "
                                               f"zero; got {n}")
        rng = _rng(self._seeds, ctx.counter(id(self)) if self._reshuffle else 0)
        src = self._input._make(ctx)

        def gen() -> Iterator[Flat]:
            buf: list[Flat] = []
            end = False
            while True:
                while not end and len(buf) < n:
                    try:
                        buf.append(next(src))
                    except StopIteration:
                        end = True
                if not buf:
                    return
                i = int(rng.integers(len(buf)))
                item = buf[i]
                buf[i] = buf[-1]
                buf.pop()
                yield item
        return gen()


class Repeat(_Unary):
    """``Dataset.repeat``: the input ``count`` times (None or -1: forever), as TF's
    RepeatDataset."""

    def __init__(self, input_dataset: DatasetNode, count: Any) -> None:
        super().__init__(input_dataset)
        self._count = _size_arg(-1 if count is None else count, "count")

    def _tensors(self) -> list[Any]:
        return [self._count]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        count = ctx.scalar(self._count, "count")
        src = self._input

        def gen() -> Iterator[Flat]:
            epoch = 0
            while count < 0 or epoch < count:
                empty = True
                for e in src._make(ctx):
                    empty = False
                    yield e
                epoch += 1
                if empty:   # TF stops an endless repeat of an empty dataset
                    return
        return gen()


class Take(_Unary):
    """``Dataset.take``: the first ``count`` elements (-1: all), as TF's TakeDataset."""

    def __init__(self, input_dataset: DatasetNode, count: Any) -> None:
        super().__init__(input_dataset)
        self._count = _size_arg(count, "count")

    def _tensors(self) -> list[Any]:
        return [self._count]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        count = ctx.scalar(self._count, "count")
        src: Iterator[Flat] = self._input._make(ctx)
        if count < 0:
            return src

        def gen() -> Iterator[Flat]:
            for i in range(count):
                try:
                    yield next(src)
                except StopIteration:
                    return
        return gen()


class Skip(Take):
    """``Dataset.skip``: the elements after the first ``count`` (-1: none left), as TF's
    SkipDataset."""

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        count, src = ctx.scalar(self._count, "count"), self._input._make(ctx)

        def gen() -> Iterator[Flat]:
            if count < 0:
                return
            for _ in range(count):
                try:
                    next(src)
                except StopIteration:
                    return
            yield from src
        return gen()


class Shard(_Unary):
    """``Dataset.shard``: every ``num_shards``-th element from ``index`` (worker i of n), as
    TF's ShardDataset."""

    def __init__(self, input_dataset: DatasetNode, num_shards: Any, index: Any) -> None:
        super().__init__(input_dataset)
        self._num = _size_arg(num_shards, "num_shards")
        self._index = _size_arg(index, "index")

    def _tensors(self) -> list[Any]:
        return [self._num, self._index]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        n, k = ctx.scalar(self._num, "num_shards"), ctx.scalar(self._index, "index")
        if n <= 0:
            raise _errors.InvalidArgumentError(
                None, None, f"Number of shards must be greater than zero (currently "
                f"num_shards = {n}).")
        if not 0 <= k < n:
            raise _errors.InvalidArgumentError(
                None, None, f"Index must be between 0 and {n - 1} (currently index = {k}).")
        src = self._input._make(ctx)
        return (e for i, e in enumerate(src) if i % n == k)


class Cache(_Unary):
    """``Dataset.cache`` (in memory): the first iteration's elements replayed by later ones,
    as TF's CacheDataset without a filename."""

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        key = ("cache", id(self))
        store = ctx.counters
        done = store.get(key)
        if done is not None:
            return iter(done)
        src = self._input._make(ctx)

        def gen() -> Iterator[Flat]:
            seen = []
            for e in src:
                seen.append(e)
                yield e
            store[key] = seen
        return gen()


class Prefetch(_Unary):
    """``Dataset.prefetch``: a background thread keeps up to ``buffer_size`` elements ready
    (bounded; an input error is raised at the ``get_next`` that reaches it), as TF's
    PrefetchDataset."""

    def __init__(self, input_dataset: DatasetNode, buffer_size: Any) -> None:
        super().__init__(input_dataset)
        self._size = _size_arg(buffer_size, "buffer_size")

    def _tensors(self) -> list[Any]:
        return [self._size]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        n = ctx.scalar(self._size, "buffer_size")
        if n == AUTOTUNE:
            n = 2
        if n < 0:
            raise _errors.InvalidArgumentError(None, None, f"buffer_size must be >= 0 or "
                                               f"AUTOTUNE (-1); got {n}")
        src = self._input._make(ctx)
        return src if n == 0 else _Prefetcher(src, n)


_END = object()


class _Prefetcher:
    """Elements of ``src`` produced ahead by a daemon thread into a queue of ``n``; the
    thread ends at the end of ``src``, on an error (re-raised to the reader, in order) or
    when this object is closed or dropped (an iterator re-initialized)."""

    def __init__(self, src: Iterator[Flat], n: int) -> None:
        self._q: queue.Queue[Any] = queue.Queue(n)
        self._stop = threading.Event()
        self._done = False
        self.thread = threading.Thread(target=_produce, args=(src, self._q, self._stop),
                                       name="psrt-prefetch", daemon=True)
        self.thread.start()

    def __iter__(self) -> "_Prefetcher":
        return self

    def __next__(self) -> Flat:
        if self._done:
            raise StopIteration
        item = self._q.get()
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stops the producing thread."""
        self._stop.set()

    def __del__(self) -> None:
        self._stop.set()


def _produce(src: Iterator[Flat], q: "queue.Queue[Any]", stop: threading.Event) -> None:
    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False
    try:
        for e in src:
            if not put(e):
                return
        put(_END)
    except BaseException as e:  # noqa: BLE001  (handed to the reader)
        put(e)


class Interleave(_Unary):
    """``Dataset.interleave``: ``func`` maps each input element to a dataset; ``block_length``
    elements are taken in turn from ``cycle_length`` of them at once, as TF's
    InterleaveDataset (its orders are tests/test_data.py's interleave cases)."""

    def __init__(self, input_dataset: DatasetNode, func: Callable[..., Any], cycle_length: Any,
                 block_length: Any) -> None:
        super().__init__(input_dataset)
        self._fn = _traced(func, input_dataset, "interleave")
        inner = getattr(self._fn.result, "_node", None)
        if not isinstance(inner, DatasetNode):
            raise TypeError(f"`map_func` must return a `Dataset` object; got "
                            f"{self._fn.result!r}")
        self._inner = inner
        self._like(inner)
        self._cycle = _size_arg(cycle_length, "cycle_length")
        self._block = _size_arg(block_length, "block_length")

    def _functions(self) -> list[_st.TracedFunction]:
        return [self._fn]

    def _tensors(self) -> list[Any]:
        return [self._cycle, self._block]

    def _make(self, ctx: _st.Context) -> Iterator[Flat]:
        cycle = ctx.scalar(self._cycle, "cycle_length")
        block = ctx.scalar(self._block, "block_length")
        if cycle == AUTOTUNE:
            cycle = 4
        if cycle <= 0 or block <= 0:
            raise _errors.InvalidArgumentError(
                None, None, f"cycle_length and block_length must be greater than zero; got "
                f"{cycle} and {block}")
        src, fn, inner = self._input._make(ctx), self._fn, self._inner

        def open_one(elem: Flat) -> Iterator[Flat]:
            it: Iterator[Flat] = inner._make(ctx.child(fn.element_feeds(elem)))
            return it

        return interleave_iterators(src, open_one, cycle, block)


def interleave_iterators(src: Iterator[Flat], open_one: Callable[[Flat], Iterator[Flat]],
                         cycle: int, block: int) -> Iterator[Flat]:
    """The elements of ``open_one(e)`` for each ``e`` of ``src``, ``block`` at a time from
    ``cycle`` open ones in turn, a finished one replaced by the next input's in its slot,
    in TF's order (tensorflow/core/kernels/data/interleave_dataset_op.cc,
    ``GetNextInternal``)."""
    slots: list[Iterator[Flat] | None] = [None] * cycle
    ci = bi = 0
    open_n, end_of_input = 0, False
    while not end_of_input or open_n > 0:
        cur = slots[ci]
        if cur is not None:
            try:
                e = next(cur)
            except StopIteration:
                slots[ci] = None
                open_n -= 1
                ci, bi = (ci + 1) % cycle, 0
                continue
            bi += 1
            if bi == block:
                ci, bi = (ci + 1) % cycle, 0
            yield e
        elif not end_of_input:
            try:
                elem = next(src)
            except StopIteration:
                end_of_input = True
                continue
            slots[ci] = open_one(elem)
            open_n += 1
        else:
            ci, bi = (ci + 1) % cycle, 0


