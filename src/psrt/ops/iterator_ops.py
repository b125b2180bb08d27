"""``tf.data.Iterator`` in TF 1.x graph mode (tensorflow/python/data/ops/iterator_ops.py,
r1.15): one-shot, initializable, reinitializable (``from_structure``) and feedable
(``from_string_handle``) iterators, and ``tf.compat.v1.data``'s functions.

``get_next()`` is one graph op with one output per component of the element: a run that
fetches any of its outputs (or a train op whose loss reads them) advances the iterator once,
however many of them it fetches, as TF's ``IteratorGetNext``; at the end of the data it
raises ``OutOfRangeError("End of sequence")``, which ends a ``MonitoredTrainingSession``
loop (``should_stop()``). ``initializer`` is an op; its run feeds the dataset's
placeholders. The iterator's position lives in this Python object, in the process that
runs it (TF keeps it in the session's resources on the worker's device): each worker
process has its own.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import errors as _errors
from psrt.framework import tensor as _tensor
from psrt.framework.constant_op import constant
from psrt.framework.ops import Operation, control_dependencies, get_default_graph
from psrt.framework.sparse_tensor import SparseTensor
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import dataset_structure as _st

__all__ = ["Iterator", "get_output_classes", "get_output_shapes", "get_output_types",
           "make_initializable_iterator", "make_one_shot_iterator"]

# The iterators of this process by string handle (``Iterator.from_string_handle``).
_BY_HANDLE: "weakref.WeakValueDictionary[bytes, Iterator]" = weakref.WeakValueDictionary()
_handle_lock = threading.Lock()
_handle_count = [0]


class Iterator:
    """The state of an iteration through a dataset, as ``tf.data.Iterator`` (TF 1.15 graph
    mode). Make one with ``dataset.make_one_shot_iterator()``,
    ``dataset.make_initializable_iterator()``, :meth:`from_structure` or
    :meth:`from_string_handle`."""

    def __init__(self, structure: Any, dtypes: list[np.dtype], shapes: list[TensorShape],
                 name: str, sparse: list[bool] | None = None) -> None:
        self._structure = structure
        self._dtypes = list(dtypes)
        self._shapes = list(shapes)
        self._sparse = list(sparse) if sparse is not None else [False] * len(self._dtypes)
        self._name = get_default_graph().unique_name(name)
        self._lock = threading.Lock()
        self._state: Any = None
        self._start_on: Any = None       # the dataset a one-shot iterator starts on
        self._initializer: Operation | None = None
        self._handle: bytes | None = None
        self._source: Any = None         # from_string_handle: the handle tensor

    # ---- construction --------------------------------------------------------------------

    @classmethod
    def _one_shot(cls, dataset: Any) -> "Iterator":
        for p in dataset._placeholders():
            raise ValueError(f"Cannot capture a placeholder (name:{p.op.name}, "
                             f"type:Placeholder) by value. (a one-shot iterator cannot read "
                             f"placeholders: use make_initializable_iterator())")
        it = cls(dataset._structure, dataset._dtypes, dataset._shapes, "OneShotIterator",
                 dataset._sparse)
        it._start_on = dataset
        return it

    @classmethod
    def _initializable(cls, dataset: Any, shared_name: str | None = None) -> "Iterator":
        it = cls(dataset._structure, dataset._dtypes, dataset._shapes, "Iterator",
                 dataset._sparse)
        it._initializer = it.make_initializer(dataset, name="MakeIterator")
        return it

    @staticmethod
    def from_structure(output_types: Any, output_shapes: Any = None,
                       shared_name: str | None = None, output_classes: Any = None
                       ) -> "Iterator":
        """An iterator not bound to a dataset (TF's reinitializable iterator): run
        ``make_initializer(dataset)`` to start it on any dataset of this structure.

        Raises:
            TypeError: ``output_shapes`` does not match ``output_types``' structure.
        """
        types = _st.to_dtypes(output_types)
        shapes = _st.to_shapes(output_shapes, types)
        classes = [False] * len(_st.flatten(types)) if output_classes is None else \
            [c is SparseTensor for c in _st.flatten(output_classes)]
        return Iterator(types, [d.dtype for d in _st.flatten(types)], _st.flatten(shapes),
                        "Iterator", classes)

    @staticmethod
    def from_string_handle(string_handle: Any, output_types: Any, output_shapes: Any = None,
                           output_classes: Any = None) -> "Iterator":
        """An iterator reading whichever iterator ``string_handle`` (a scalar string
        tensor, usually a placeholder fed with ``sess.run(it.string_handle())``) names in
        each run, as TF's feedable iterator. Handles name iterators of this process."""
        it = Iterator.from_structure(output_types, output_shapes, output_classes=output_classes)
        it._source = string_handle
        return it

    # ---- the element's spec --------------------------------------------------------------

    @property
    def output_types(self) -> Any:
        """The structure of the element's dtypes (:class:`psrt.DType`)."""
        return _st.pack(self._structure, [_dtypes.as_dtype(d) for d in self._dtypes])

    @property
    def output_shapes(self) -> Any:
        """The structure of the element's static shapes."""
        return _st.pack(self._structure, list(self._shapes))

    @property
    def output_classes(self) -> Any:
        """The structure of the element's classes (``psrt.Tensor`` or ``psrt.SparseTensor``)."""
        return _st.pack(self._structure, [SparseTensor if sp else Tensor for sp in self._sparse])

    # ---- ops -----------------------------------------------------------------------------

    @property
    def initializer(self) -> Operation:
        """The op (re)starting the iterator on its dataset, as ``Iterator.initializer``.

        Raises:
            ValueError: the iterator has none (one-shot, or ``from_structure``: TF's
                "Iterator does not have an initializer.").
        """
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    def make_initializer(self, dataset: Any, name: str | None = None) -> Operation:
        """An op starting this iterator on ``dataset``, as ``Iterator.make_initializer``;
        its run feeds the dataset's placeholders.

        Raises:
            TypeError: ``dataset``'s element types or structure differ from the iterator's.
        """
        dataset = getattr(dataset, "_node", dataset)
        types = dataset.output_types()
        if _st.flatten(types) != [_dtypes.as_dtype(d) for d in self._dtypes] or \
                repr(_st.map_structure(lambda _: 0, types)) != \
                repr(_st.map_structure(lambda _: 0, self._structure)):
            raise TypeError(f"Expected output types {self.output_types!r} but got dataset "
                            f"with output types {types!r}.")
        if dataset._sparse != self._sparse:
            raise TypeError(f"Expected output classes {self.output_classes!r} but got dataset "
                            f"with output classes {dataset.output_classes()!r}.")
        for mine, theirs in zip(self._shapes, dataset._shapes):
            if not mine.is_compatible_with(theirs):
                raise TypeError(f"Expected output shapes compatible with "
                                f"{self.output_shapes!r} but got dataset with output shapes "
                                f"{dataset.output_shapes()!r}.")
        phs = dataset._placeholders()
        names = [p.op.name for p in phs]

        def make_iterator(*values: Any) -> Any:
            ctx = _st.Context(dict(zip(names, values)))
            state = dataset._make(ctx)
            with self._lock:
                self._state = state
            return np.int64(0)
        base = name or "MakeIterator"
        t = _tensor.py_func(make_iterator, phs, np.int64, name=f"{self._name}/{base}")
        with control_dependencies([t]):
            return Operation("noop", name=get_default_graph().unique_name(base))

    def get_next(self, name: str | None = None) -> Any:
        """The next element as a structure of tensors (dtypes and static shapes of the
        dataset's), as ``Iterator.get_next``: every run that needs one of them advances the
        iterator once. Each call makes a new op (fetching two calls' results advances
        twice, as in TF).

        Raises (when run):
            OutOfRangeError: the end of the data ("End of sequence").
            FailedPreconditionError: the iterator was not initialized.
        """
        inputs = [self._source] if self._source is not None else []
        dtypes: list[Any] = []
        for dt, sp in zip(self._dtypes, self._sparse):
            dtypes += [np.int64, dt, np.int64] if sp else [dt]
        outs = iter(_tensor.py_func(self._next, inputs, dtypes,
                                    name=name or f"{self._name}/IteratorGetNext"))
        leaves: list[Any] = []
        for s, sp in zip(self._shapes, self._sparse):
            if not sp:
                t = next(outs)
                t.shape = s
                leaves.append(t)
                continue
            ind, val, shp = next(outs), next(outs), next(outs)
            rank = s.ndims
            ind.shape, val.shape, shp.shape = [None, rank], [None], [rank]
            st = SparseTensor(ind, val, shp)
            st._declared_shape = None if rank is None else tuple(  # type: ignore[attr-defined]
                s.as_list())
            leaves.append(st)
        return _st.pack(self._structure, leaves)

    def string_handle(self, name: str | None = None) -> Tensor:
        """A scalar string tensor naming this iterator, to feed the handle of
        :meth:`from_string_handle`, as ``Iterator.string_handle``."""
        if self._handle is None:
            with _handle_lock:
                _handle_count[0] += 1
                self._handle = f"psrt-iterator-{_handle_count[0]}-{self._name}".encode()
                _BY_HANDLE[self._handle] = self
        return constant(np.array(self._handle, dtype=object), name=name or "IteratorToStringHandle")

    def _next(self, *handle: Any) -> list[Any]:
        if handle:
            key = np.asarray(handle[0]).reshape(()).item()
            key = key.encode() if isinstance(key, str) else key
            target = _BY_HANDLE.get(key)
            if target is None:
                raise _errors.InvalidArgumentError(
                    None, None, f"string_handle {key!r} names no iterator of this process; "
                    f"feed the value of some iterator's string_handle()")
            if [_dtypes.as_dtype(d) for d in target._dtypes] != \
                    [_dtypes.as_dtype(d) for d in self._dtypes] or target._sparse != self._sparse:
                raise _errors.InvalidArgumentError(
                    None, None, f"The iterator {key!r} has output types "
                    f"{target.output_types}, which differ from the expected "
                    f"{self.output_types}")
            return target._next()
        with self._lock:
            if self._state is None and self._start_on is not None:
                self._state = self._start_on._make(_st.Context({}))
            if self._state is None:
                raise _errors.FailedPreconditionError(
                    None, None, "GetNext() failed because the iterator has not been "
                    "initialized. Ensure that you have run the initializer operation for "
                    "this iterator before getting the next element.")
            try:
                elem = next(self._state)
            except StopIteration:
                raise _errors.OutOfRangeError(None, None, "End of sequence") from None
        # A scalar string is fetched as bytes, as TF's session returns it; a SparseTensor's
        # value gives its three components.
        out: list[Any] = []
        for v, sp in zip(elem, self._sparse):
            if sp:
                out += [np.asarray(v[0], np.int64), np.asarray(v[1]), np.asarray(v[2], np.int64)]
            elif isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype == object:
                out.append(v.item())
            else:
                out.append(v)
        return out

    def __repr__(self) -> str:
        return f"<psrt.data.Iterator '{self._name}' types: {self.output_types}>"


def make_one_shot_iterator(dataset: Any) -> Iterator:
    """``dataset.make_one_shot_iterator()``, as ``tf.compat.v1.data.make_one_shot_iterator``."""
    it: Iterator = dataset.make_one_shot_iterator()
    return it


def make_initializable_iterator(dataset: Any, shared_name: str | None = None) -> Iterator:
    """``dataset.make_initializable_iterator()``, as
    ``tf.compat.v1.data.make_initializable_iterator``."""
    it: Iterator = dataset.make_initializable_iterator(shared_name)
    return it


def get_output_types(dataset_or_iterator: Any) -> Any:
    """``.output_types`` of a dataset or iterator, as ``tf.compat.v1.data.get_output_types``."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator: Any) -> Any:
    """``.output_shapes`` of a dataset or iterator, as ``tf.compat.v1.data.get_output_shapes``."""
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator: Any) -> Any:
    """``.output_classes`` of a dataset or iterator, as
    ``tf.compat.v1.data.get_output_classes``."""
    return dataset_or_iterator.output_classes
