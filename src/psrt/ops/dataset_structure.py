"""The machinery under ``tf.data`` (psrt/ops/dataset_ops.py): element structures, the
values a pipeline's tensors take in one initialization of an iterator, and the functions of
``map``/``filter``/``interleave`` traced once over placeholders and evaluated per element.

An element is a nested structure (tuples, namedtuples and dicts, as TF's ``nest``; dict keys
in sorted order) of numpy arrays. Internally a pipeline passes *flat* lists of arrays; the
structure is packed again only at ``get_next``. A pipeline's arguments may be tensors
(``from_tensor_slices(placeholder)``, ``batch(batch_size_tensor)``): their values are
computed once per initialization of the iterator (a :class:`Context`), from the feeds of
the run of ``iterator.initializer``, as TF's ``MakeIterator`` captures them by value.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import autodiff as _autodiff
from psrt.framework import dtypes as _dtypes
from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.sparse_tensor import SparseTensor, SparseTensorValue, sparse_placeholder
from psrt.framework.tensor import Tensor, placeholder
from psrt.framework.tensor_shape import TensorShape, as_shape

__all__ = ["Context", "DatasetNode", "Flat", "sparse_shape", "TracedFunction", "as_tensor_value", "flatten", "pack", "element_value",
           "is_structure", "map_structure", "placeholders_of", "spec_of_value", "to_dtypes",
           "to_shapes"]


def is_structure(x: Any) -> bool:
    """True for the containers of an element: tuple, namedtuple, dict (a
    SparseTensorValue is a leaf)."""
    return isinstance(x, dict) or (isinstance(x, tuple) and not isinstance(x, SparseTensorValue))


def flatten(s: Any) -> list[Any]:
    """The leaves of ``s`` in TF's ``nest.flatten`` order (dicts by sorted key)."""
    if isinstance(s, dict):
        return [leaf for k in sorted(s) for leaf in flatten(s[k])]
    if isinstance(s, tuple) and not isinstance(s, SparseTensorValue):
        return [leaf for v in s for leaf in flatten(v)]
    return [s]


def pack(template: Any, flat: Sequence[Any]) -> Any:
    """``flat`` (as :func:`flatten` of something shaped as ``template``) rebuilt in the
    structure of ``template``."""
    it = iter(flat)

    def build(t: Any) -> Any:
        if isinstance(t, dict):
            done = {k: build(t[k]) for k in sorted(t)}
            return type(t)((k, done[k]) for k in t) if type(t) is not dict else \
                {k: done[k] for k in t}
        if isinstance(t, tuple) and not isinstance(t, SparseTensorValue):
            vals = [build(v) for v in t]
            return type(t)(*vals) if hasattr(t, "_fields") else tuple(vals)
        return next(it)
    return build(template)


def map_structure(fn: Callable[[Any], Any], s: Any) -> Any:
    """``s`` with ``fn`` applied to each leaf."""
    return pack(s, [fn(x) for x in flatten(s)])


def to_dtypes(s: Any) -> Any:
    """A structure of :class:`psrt.DType` from one of dtypes (or names)."""
    return map_structure(_dtypes.as_dtype, s)


def to_shapes(s: Any, like: Any) -> Any:
    """A structure of :class:`TensorShape` in the structure of ``like`` (None: unknown)."""
    if s is None:
        return map_structure(lambda _: TensorShape(None), like)
    leaves = flatten(like)
    if not is_structure(like):
        return _as_shape(s)
    # shapes are lists: flatten only the element's containers (tuples and dicts).
    out = []

    def walk(shape: Any, t: Any) -> None:
        if isinstance(t, dict):
            if not isinstance(shape, dict) or sorted(shape) != sorted(t):
                raise TypeError(f"output_shapes {s!r} do not match the structure of "
                                f"output_types {like!r}")
            for k in sorted(t):
                walk(shape[k], t[k])
        elif isinstance(t, tuple):
            if not isinstance(shape, (tuple, list)) or len(shape) != len(t):
                raise TypeError(f"output_shapes {s!r} do not match the structure of "
                                f"output_types {like!r}")
            for a, b in zip(shape, t):
                walk(a, b)
        else:
            out.append(_as_shape(shape))
    walk(s, like)
    assert len(out) == len(leaves)
    return pack(like, out)


def _as_shape(shape: Any) -> TensorShape:
    """A shape argument (TensorShape, list with None or -1 for unknown sizes, None)."""
    if isinstance(shape, (list, tuple)):
        shape = [None if d is None or (not isinstance(d, TensorShape) and d == -1) else d
                 for d in shape]
    return as_shape(shape)


def spec_of_value(v: np.ndarray) -> tuple[np.dtype, TensorShape]:
    """The (dtype, static shape) of a value."""
    return v.dtype, TensorShape(v.shape)


def as_tensor_value(x: Any, dtype: Any = None) -> np.ndarray:
    """A Python or numpy value as the array TF converts it to (``python_value_dtype``:
    Python floats float32, ints int32, strings bytes)."""
    if isinstance(x, np.ndarray) and (dtype is None or x.dtype == dtype):
        return x
    dt = _lib.python_value_dtype(x) if dtype is None else np.dtype(dtype)
    if dt == np.object_:
        arr = np.asarray(x, dtype=object)
        flat = [v.encode() if isinstance(v, str) else bytes(v) if isinstance(v, np.bytes_)
                else v for v in arr.reshape(-1)]
        out = np.empty(arr.shape, object)
        out.reshape(-1)[:] = flat if flat else []
        return out
    return np.asarray(x, dt)


def element_value(x: Any) -> Any:
    """A structure's leaf as the dataset holds it: a Tensor stays (computed per
    initialization); anything else becomes an array.

    Raises:
        TypeError: a SparseTensor (psrt's sources take dense tensors; a ``map`` function
            may return SparseTensors).
    """
    if isinstance(x, (SparseTensor, SparseTensorValue)):
        raise TypeError("psrt's dataset sources take dense tensors only; got a SparseTensor "
                        "(a map function may return one, e.g. parse_example's VarLenFeature)")
    if _lib.is_graph_value(x):
        return x
    return as_tensor_value(x)


def placeholders_of(tensors: Sequence[Any]) -> list[Tensor]:
    """The placeholders ``tensors`` read (their values come from the feeds of a run).

    Raises:
        ValueError: they read a variable (psrt's input pipelines run on the worker, away
            from the ps tasks).
    """
    tensors = [t for t in tensors if isinstance(t, Tensor)]
    if not tensors:
        return []
    plan = _autodiff.Plan(tensors)
    if plan.variables:
        raise ValueError(f"a tf.data pipeline cannot read the variable "
                         f"'{plan.variables[0].name}' in psrt (its tensors are computed on "
                         f"the worker without the ps); pass its value with a placeholder")
    return list(plan.placeholders)


class Context:
    """The values of a pipeline's tensors in one initialization of its iterator: ``feeds``
    (placeholder name -> value) and the values computed from them, plus the per-iteration
    counters of reshuffling datasets (shared with the contexts of nested datasets)."""

    def __init__(self, feeds: dict[str, Any], counters: dict[Any, Any] | None = None) -> None:
        self.feeds = feeds
        self.counters: dict[Any, Any] = {} if counters is None else counters
        self._memo: dict[int, Any] = {}

    def child(self, feeds: dict[str, Any]) -> "Context":
        """A context with more feeds (an element's placeholders), the same counters."""
        return Context({**self.feeds, **feeds}, self.counters)

    def value(self, x: Any) -> Any:
        """The value of ``x`` here: a Tensor's computed from the feeds, else ``x``."""
        if not isinstance(x, Tensor):
            return x
        if id(x) not in self._memo:
            _autodiff.evaluate(_autodiff.Plan([x]), {}, self.feeds, self._memo)
        return self._memo[id(x)]

    def array(self, x: Any) -> np.ndarray:
        """:meth:`value` as an array (a Python value converted as TF converts it)."""
        v = self.value(x)
        return v if isinstance(v, np.ndarray) else as_tensor_value(v)

    def scalar(self, x: Any, what: str) -> int:
        """:meth:`value` as a Python int (``batch_size``, ``count`` ...).

        Raises:
            InvalidArgumentError: not a scalar integer.
        """
        v = np.asarray(self.value(x))
        if v.shape != () or v.dtype.kind not in "iu":
            raise _errors.InvalidArgumentError(None, None, f"{what} must be a scalar integer; "
                                               f"got {v!r}")
        return int(v)

    def counter(self, key: int) -> int:
        """The next count of ``key`` (0 first), in this initialization."""
        n = int(self.counters.get(key, 0))
        self.counters[key] = n + 1
        return n


class TracedFunction:
    """A user function of a dataset's elements (``map``, ``filter``, ``interleave``), traced
    once over placeholders shaped as the element's components, as TF traces a ``Defun``,
    and evaluated per element with the components as feeds.

    Tuples are passed as separate arguments, other structures (dicts, single components) as
    one, as TF 1.15's ``StructuredFunctionWrapper``. ``outputs`` is the structure returned
    (of Tensors, or a Dataset for ``interleave``/``flat_map``)."""

    def __init__(self, func: Callable[..., Any], structure: Any, dtypes: list[np.dtype],
                 shapes: list[TensorShape], what: str, sparse: Sequence[bool] | None = None
                 ) -> None:
        if not callable(func):
            raise TypeError(f"{what}: the function must be callable; got {func!r}")
        name = getattr(func, "__name__", "fn")
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "fn"
        sparse = list(sparse) if sparse is not None else [False] * len(dtypes)
        self.args: list[Any] = [
            (sparse_placeholder if sp else placeholder)(
                dt, s.as_list() if s.ndims is not None else None, name=f"{what}_{name}/arg{i}")
            for i, (dt, s, sp) in enumerate(zip(dtypes, shapes, sparse))]
        # The placeholder names each component feeds (three for a SparseTensor).
        self._slots = [[c.op.name for c in a._components()] if sp else [a.op.name]
                       for a, sp in zip(self.args, sparse)]
        self._own = {id(c) for a, sp in zip(self.args, sparse)
                     for c in (a._components() if sp else [a])}
        packed = pack(structure, self.args)
        if isinstance(structure, tuple) and not hasattr(structure, "_fields"):
            result = func(*packed)
        else:
            result = func(packed)
        self.result = result
        self.plan: Any = None
        if hasattr(result, "_node"):   # a Dataset (interleave, flat_map)
            return
        if isinstance(result, list):
            result = tuple(result)  # TF 1.15 turns a returned list into a tuple
        self.structure = map_structure(_output_tensor, result)
        self.outputs: list[Any] = flatten(self.structure)   # Tensors and SparseTensors
        self.sparse = [isinstance(o, SparseTensor) for o in self.outputs]
        self._tensors = [c for o in self.outputs
                         for c in (o._components() if isinstance(o, SparseTensor) else [o])
                         if isinstance(c, Tensor)]
        self.plan = _autodiff.Plan(self._tensors)
        placeholders_of(self._tensors)   # refuses variables

    def outer_placeholders(self) -> list[Tensor]:
        """The placeholders outside the element that the function reads (fed at
        initialization)."""
        if self.plan is None:
            found = self.result._node._placeholders()
        else:
            found = placeholders_of(self._tensors)
        return [p for p in found if id(p) not in self._own]

    def element_feeds(self, values: Sequence[Any]) -> dict[str, Any]:
        """The feeds of one element's components (a SparseTensorValue feeds three)."""
        f: dict[str, Any] = {}
        for names, v in zip(self._slots, values):
            if len(names) == 1:
                f[names[0]] = v
            else:
                f.update(zip(names, v))
        return f

    def __call__(self, ctx: Context, values: Sequence[Any]) -> list[Any]:
        """The function's flat outputs on one element (flat component values; a
        SparseTensor output as a SparseTensorValue)."""
        memo: dict[int, Any] = {}
        feeds = dict(ctx.feeds)
        feeds.update(self.element_feeds(values))
        _autodiff.evaluate(self.plan, {}, feeds, memo)
        out = []
        for o, sp in zip(self.outputs, self.sparse):
            if sp:
                out.append(SparseTensorValue(*[memo[id(c)] if isinstance(c, Tensor) else c
                                               for c in o._components()]))
            else:
                out.append(memo[id(o)])
        return out


def sparse_shape(st: SparseTensor) -> TensorShape:
    """The static dense shape of a SparseTensor: declared or constant, else of its rank (from
    its components' static shapes), else unknown."""
    known = st.get_shape()
    if known is not None:
        return TensorShape(list(known))
    for c, axis in ((st.dense_shape, 0), (st.indices, 1)):
        shape = c.shape if isinstance(c, Tensor) else TensorShape(np.shape(c))
        dims = shape.as_list() if shape.ndims is not None else []
        rank = dims[axis] if len(dims) > axis else None
        if rank is not None:
            return TensorShape([None] * int(rank))
    return TensorShape(None)


def _output_tensor(x: Any) -> Any:
    if isinstance(x, SparseTensor):
        return x
    if isinstance(x, SparseTensorValue):   # TF converts a returned value to a SparseTensor
        return SparseTensor(*x)
    if isinstance(x, Tensor):
        return x
    if _lib.is_graph_value(x):
        raise TypeError(f"a dataset function cannot return the variable {x.name!r} in psrt")
    return constant(as_tensor_value(x))


Flat = list[Any]  # one element: its components' values, flat


class DatasetNode:
    """What a dataset is underneath ``psrt.data.Dataset``: the element's spec (structure,
    flat dtypes and static shapes) and ``_make(ctx)``, an iterator of flat elements. The
    sources and transformations (psrt/ops/dataset_sources.py, dataset_kernels.py) subclass
    it; a public Dataset holds one."""

    _structure: Any     # the element's structure (leaves: anything)
    _dtypes: list[np.dtype]
    _shapes: list[TensorShape]
    _sparse: list[bool]  # per component: a SparseTensor (its value a SparseTensorValue)

    def _set_spec(self, structure: Any, dtypes: list[Any], shapes: list[Any],
                  sparse: Sequence[bool] | None = None) -> None:
        self._structure = structure
        self._dtypes = [np.dtype(d) for d in dtypes]
        self._shapes = [TensorShape(s) for s in shapes]
        self._sparse = list(sparse) if sparse is not None else [False] * len(self._dtypes)

    def _like(self, other: "DatasetNode") -> None:
        self._set_spec(other._structure, other._dtypes, other._shapes, other._sparse)

    def _make(self, ctx: Context) -> Any:
        """An iterator of flat elements in ``ctx`` (arguments checked now)."""
        raise NotImplementedError

    def _inputs(self) -> list["DatasetNode"]:
        return []

    def _tensors(self) -> list[Any]:
        return []

    def _functions(self) -> list["TracedFunction"]:
        return []

    def _placeholders(self) -> list[Tensor]:
        """Every placeholder the pipeline reads (fed to the initializer's run)."""
        found: dict[int, Tensor] = {}
        for p in placeholders_of(self._tensors()):
            found[id(p)] = p
        for f in self._functions():
            for p in f.outer_placeholders():
                found[id(p)] = p
        for d in self._inputs():
            for p in d._placeholders():
                found[id(p)] = p
        return list(found.values())

    def output_types(self) -> Any:
        """The structure of the element's dtypes (:class:`psrt.DType`)."""
        return pack(self._structure, [_dtypes.as_dtype(d) for d in self._dtypes])

    def output_shapes(self) -> Any:
        """The structure of the element's static shapes."""
        return pack(self._structure, list(self._shapes))

    def output_classes(self) -> Any:
        """The structure of the element's classes (``psrt.Tensor`` or ``psrt.SparseTensor``)."""
        return pack(self._structure, [SparseTensor if sp else Tensor for sp in self._sparse])
