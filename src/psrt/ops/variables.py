"""Variables, the global step, initializers and partitioned variables (TF1's tf.Variable,
tf.get_variable, tf.train.get_or_create_global_step).

psrt has no dataflow graph: a :class:`Graph` is the ordered record of the variables, their
devices and the optimizers bound to them. A variable's value lives on the ps task its
device names; a :class:`psrt.Session` registers it there and moves its values.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import device as _device
from psrt.ops.init_ops import (  # noqa: F401  (TF's initializer names, re-exported)
    Constant,
    GlorotNormal,
    GlorotUniform,
    Initializer,
    Ones,
    RandomNormal,
    RandomUniform,
    TruncatedNormal,
    VarianceScaling,
    Zeros,
    _PartitionInfo,
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    initial_value,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"
GLOBAL_STEP = "global_step"
LOCAL_VARIABLES = "local_variables"

_SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64),
                     np.dtype(np.int32))
_NAME_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$")
_logger = logging.getLogger("psrt")


class GraphKeys:
    """Standard collection names, as ``tf.GraphKeys`` (TF's exact strings,
    tensorflow/python/framework/ops.py). psrt fills ``GLOBAL_VARIABLES``,
    ``TRAINABLE_VARIABLES``, ``GLOBAL_STEP``, ``SUMMARIES``, ``SUMMARY_OP`` and
    ``QUEUE_RUNNERS``; the others are there for scripts that add to or read them."""

    GLOBAL_VARIABLES = GLOBAL_VARIABLES
    VARIABLES = GLOBAL_VARIABLES  # TF's deprecated alias
    LOCAL_VARIABLES = LOCAL_VARIABLES
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = TRAINABLE_VARIABLES
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = GLOBAL_STEP
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"


def _as_dtype(dtype: Any, name: str) -> np.dtype:
    """The dtype a variable of ``dtype`` (a numpy dtype, a ``psrt.DType`` or a TF name) is
    stored with on the ps: float32, float64 and int64 as they are, int32 as int64 (the
    core's integers are int64; the variable keeps int32 as its ``dtype``, as TF accepts
    int32 global steps).

    Raises:
        TypeError: not a dtype, or a dtype variables cannot have.
    """
    try:
        dt = dtype.dtype if isinstance(dtype, _dtypes.DType) else np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"dtype {dtype!r} of variable '{name}' is not a numpy dtype") from e
    if dt not in _SUPPORTED_DTYPES:
        shown = "string" if dt == np.object_ else dt.name
        raise TypeError(f"dtype {shown} not supported for variable '{name}'; expected "
                        f"float32, float64, int32 or int64")
    return dt


def _wire(dt: np.dtype) -> np.dtype:
    return np.dtype(np.int64) if dt == np.int32 else dt


def _c_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """A C-contiguous copy-if-needed of ``value`` (keeps 0-d arrays 0-d, unlike
    ``numpy.ascontiguousarray``)."""
    return np.require(np.asarray(value, dtype=dtype), requirements="C")


class Graph:
    """The variables of a model, in creation order (psrt's stand-in for ``tf.Graph``).

    Holds named collections (``GLOBAL_VARIABLES``, ``TRAINABLE_VARIABLES``,
    ``GLOBAL_STEP``) and the unique-name state TF's graph keeps. Thread-safe for
    creation; the default graph is process-wide, as TF's.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._collections: dict[str, list[Any]] = {}
        self._names: dict[str, int] = {}
        self._by_name: dict[str, Any] = {}
        self._version = 0
        self._finalized = False
        self._seed: int | None = None
        self._last_op_seed = 0
        self._scopes = threading.local()  # name and variable scope stacks, per thread

    @property
    def seed(self) -> int | None:
        """The graph-level random seed (:func:`set_random_seed`), or None."""
        return self._seed

    @seed.setter
    def seed(self, seed: int | None) -> None:
        """Sets the graph-level seed (an int, or None for none), as ``tf.set_random_seed``."""
        self._seed = None if seed is None else int(seed)

    def _next_op_seed(self) -> int:
        """A new op-level seed, as TF takes ``graph._last_id`` (the count of ops created so
        far: 0 in a new graph) for a random op without its own seed: deterministic for the
        same program."""
        with self._lock:
            self._last_op_seed += 1
            return self._last_op_seed - 1

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """Returns ``name``, or ``name_1``, ``name_2``... when taken (TF's rule)."""
        with self._lock:
            if name not in self._names:
                if mark_as_used:
                    self._names[name] = 1
                return name
            i = self._names[name]
            while f"{name}_{i}" in self._names:
                i += 1
            if mark_as_used:
                self._names[name] = i + 1
                self._names[f"{name}_{i}"] = 1
            return f"{name}_{i}"

    def add_to_collection(self, name: str, value: Any) -> None:
        """Appends ``value`` to the collection ``name`` (str), as TF."""
        with self._lock:
            self._collections.setdefault(name, []).append(value)
            self._version += 1

    def add_to_collections(self, names: Any, value: Any) -> None:
        """Adds ``value`` to each collection of ``names`` (a str or an iterable; each once)."""
        names = (names,) if isinstance(names, str) else set(names)
        for n in names:
            self.add_to_collection(n, value)

    def get_collection(self, name: str, scope: str | None = None) -> list[Any]:
        """A copy of the collection ``name`` (empty list if absent), as TF. With ``scope``,
        only the items whose ``name`` starts with a match of the regular expression
        ``scope`` (``re.match``); items without a ``name`` are left out then, as TF."""
        with self._lock:
            items = list(self._collections.get(name, []))
        if scope is None:
            return items
        pattern = re.compile(scope)
        return [x for x in items if isinstance(getattr(x, "name", None), str)
                and pattern.match(x.name)]

    def get_collection_ref(self, name: str) -> list[Any]:
        """The collection ``name`` itself (created empty if absent), as TF: changing the list
        changes the collection."""
        with self._lock:
            return self._collections.setdefault(name, [])

    def get_all_collection_keys(self) -> list[str]:
        """The names of every collection created, as TF."""
        with self._lock:
            return list(self._collections)

    def clear_collection(self, name: str) -> None:
        """Removes the collection ``name``, as TF."""
        with self._lock:
            self._collections.pop(name, None)

    def _name_stack(self) -> list[str]:
        stack = getattr(self._scopes, "names", None)
        if stack is None:
            stack = self._scopes.names = [""]
        return stack

    def get_name_scope(self) -> str:
        """The current name scope (e.g. ``"outer/inner"``; ``""`` at the root), as TF."""
        return self._name_stack()[-1]

    def name_scope(self, name: str | None) -> "_NameScope":
        """A context manager opening the name scope ``name``, as ``tf.Graph.name_scope``:
        a relative name nests (made unique: ``a``, then ``a_1``), a name ending in ``/``
        re-enters that exact scope, and None or ``""`` goes back to the root. It yields the
        scope's full name ending in ``/`` (``""`` at the root)."""
        return _NameScope(self, name)

    def _register(self, var: Any) -> None:
        with self._lock:
            if self._finalized:
                raise RuntimeError("Graph is finalized and cannot be modified.")
            self._by_name[var.name] = var
            self._version += 1

    def get_variable_by_name(self, name: str) -> Any:
        """The variable named ``name`` (str, no ``:0``), or None."""
        return self._by_name.get(name)

    def finalize(self) -> None:
        """Makes the graph read-only, as ``tf.Graph.finalize``."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        """True after :meth:`finalize`."""
        return self._finalized

    def as_default(self) -> "_DefaultGraph":
        """Context manager making this the default graph in the current thread."""
        return _DefaultGraph(self)


class _DefaultGraph:
    def __init__(self, graph: Graph) -> None:
        self._graph = graph

    def __enter__(self) -> Graph:
        _graph_stack.stack.append(self._graph)
        return self._graph

    def __exit__(self, *exc: object) -> None:
        _graph_stack.stack.pop()


class _NameScope:
    def __init__(self, graph: Graph, name: str | None) -> None:
        self._graph = graph
        self._name = name

    def __enter__(self) -> str:
        stack = self._graph._name_stack()
        name = self._name
        if not name:
            full = ""
        elif name.endswith("/"):
            full = name[:-1]
        else:
            current = stack[-1]
            full = self._graph.unique_name(f"{current}/{name}" if current else name)
        stack.append(full)
        return full + "/" if full else ""

    def __exit__(self, *exc: object) -> None:
        self._graph._name_stack().pop()


class _GraphStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Graph] = []


_graph_stack = _GraphStack()
_global_graph = Graph()


def get_default_graph() -> Graph:
    """Returns the current default :class:`Graph` (as ``tf.get_default_graph``)."""
    return _graph_stack.stack[-1] if _graph_stack.stack else _global_graph


def reset_default_graph() -> None:
    """Clears the process-wide default graph (as ``tf.reset_default_graph``).

    Raises:
        AssertionError: called inside a ``Graph.as_default()`` block, as TF.
    """
    global _global_graph
    if _graph_stack.stack:
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs. "
                             "If you need a cleared graph, exit the nesting and create a "
                             "new graph.")
    _global_graph = Graph()


class _VariableBase:
    """Name, shape and dtype, shared by Variable and PartitionedVariable."""

    _name: str
    _shape: tuple[int, ...]
    _dtype: np.dtype

    @property
    def name(self) -> str:
        """The variable's name (str, without TF's ``:0``)."""
        return self._name

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape (tuple of int)."""
        return self._shape

    def get_shape(self) -> tuple[int, ...]:
        """Shape (tuple of int), as TF's ``get_shape()``."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """numpy dtype: float32, float64, int32 or int64 (an int32 variable is kept as int64
        on its ps task, as psrt's core keeps integers; fetching it gives its values as
        int32, an int32 scalar as an int, as int64 scalars)."""
        return self._dtype

    @property
    def _wire_dtype(self) -> np.dtype:
        """The dtype on the ps and on the wire (int64 for int32)."""
        return _wire(self._dtype)

    @property
    def nbytes(self) -> int:
        """Size of the value in bytes."""
        return int(np.prod(self._shape, dtype=np.int64)) * self._wire_dtype.itemsize


def _ps_initializer_call(initial_value: Any, dtype: Any
                         ) -> tuple[dict[str, Any], tuple[int, ...], np.dtype] | None:
    """(spec, shape, dtype) when ``initial_value`` is ``functools.partial(initializer,
    shape, dtype=..., partition_info=...)`` of a psrt initializer the ps task can compute
    (TF's ``get_variable`` passes its variable this form), else None."""
    if not (isinstance(initial_value, functools.partial)
            and isinstance(initial_value.func, Initializer)):
        return None
    init: Initializer = initial_value.func
    names = ("shape", "dtype", "partition_info")
    bound = dict(zip(names, initial_value.args))
    if len(initial_value.args) > len(names) or any(
            k not in names or k in bound for k in initial_value.keywords):
        return None
    bound.update(initial_value.keywords)
    if bound.get("shape") is None:
        return None
    call_dt = init._call_dtype(dtype if dtype is not None else bound.get("dtype"))
    spec = init._spec(bound["shape"], call_dt, bound.get("partition_info"))
    if spec is None:
        return None
    return spec, tuple(int(d) for d in bound["shape"]), call_dt


class Variable(_VariableBase):
    """A variable held by a ps task, as ``tf.Variable`` (TF1 ref-variable semantics).

    The device is chosen when the variable is created, from the ``psrt.device`` scopes in
    force (for example ``replica_device_setter``). Fetching it with ``Session.run`` returns
    its value as a new numpy array.

    Args:
        initial_value: A numpy array (or anything ``numpy.asarray`` takes), or a callable
            with no arguments returning one (evaluated now for its shape, and again at each
            initialization, as TF). Its shape is the variable's shape. The form TF's
            ``get_variable`` builds, ``functools.partial(initializer, shape, dtype=...,
            partition_info=...)`` of a psrt initializer (``psrt.truncated_normal_initializer``
            ...), is not evaluated here: the initializer goes to the ps task as a
            specification and is computed there, so the worker never holds the value (its
            random seed is decided now; see ``psrt.init_ops``).
        trainable: If True, the variable is added to ``TRAINABLE_VARIABLES``.
        name: Name (str); default "Variable". A taken name gets TF's ``_1``, ``_2``... suffix.
        dtype: float32, float64 or int64; default: that of ``initial_value`` (a Python float
            list becomes float32, an int list int64).
        collections: Collections to add to; default ``[GLOBAL_VARIABLES]``.

    Raises:
        ValueError: ``initial_value`` is None, or the name is invalid.
        TypeError: the dtype is not float32, float64 or int64.
    """

    def __init__(self, initial_value: Any = None, trainable: bool = True,
                 collections: Sequence[str] | None = None, validate_shape: bool = True,
                 caching_device: Any = None, name: str | None = None,
                 variable_def: Any = None, dtype: Any = None, expected_shape: Any = None,
                 import_scope: Any = None, constraint: Any = None, use_resource: Any = None,
                 synchronization: Any = None, aggregation: Any = None,
                 shape: Any = None) -> None:
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        graph = get_default_graph()
        base = name or "Variable"
        if base.endswith(":0"):
            base = base[:-2]
        if not _NAME_RE.match(base):
            raise ValueError(f"'{base}' is not a valid variable name: use letters, digits, "
                             f"'.', '_', '-' and '/'")
        scope = graph.get_name_scope()
        # As TF: a variable's name is in the current name scope (tf.name_scope, and the
        # name scope a tf.variable_scope opens).
        self._name = graph.unique_name(f"{scope}/{base}" if scope else base)
        # An initializer computed on the ps task (psrt.init_ops): its spec, the value never
        # built here.
        self._init_spec: dict[str, Any] | None = None
        on_ps = _ps_initializer_call(initial_value, dtype)
        if on_ps is not None:
            self._init_spec, shape_, dt_ = on_ps
            self._init_fn: Callable[[], Any] | None = None
            self._initial_value: np.ndarray | None = None
            self._dtype = _as_dtype(dt_, self._name)
            self._shape = shape_
            self._finish_init(graph, trainable, collections)
            return
        self._init_fn = initial_value if callable(initial_value) else None
        raw = initial_value if self._init_fn is None else self._init_fn()
        value = np.asarray(raw)
        if dtype is None:
            if value.dtype.kind == "f":
                # numpy float64 (array or scalar, also from a callable) stays float64; Python
                # floats become float32, as TF's convert_to_tensor.
                dtype = np.float64 if value.dtype == np.float64 and isinstance(
                    raw, (np.ndarray, np.generic)) else np.float32
            elif value.dtype.kind in "iub":
                # numpy int32 stays int32 (as TF); Python ints and other integers: int64.
                dtype = np.int32 if value.dtype == np.int32 and isinstance(
                    raw, (np.ndarray, np.generic)) else np.int64
            else:
                dtype = value.dtype
        self._dtype = _as_dtype(dtype, self._name)
        if self._init_fn is not None:
            self._initial_value = None  # re-evaluated at each init, as TF
            self._shape = tuple(np.shape(value))
        else:
            # A private read-only copy, as TF's constant: the caller's array stays writable
            # and later changes to it do not change the initial value.
            self._initial_value = np.array(value, dtype=self._wire_dtype, order="C")
            self._initial_value.setflags(write=False)
            self._shape = tuple(self._initial_value.shape)
        self._finish_init(graph, trainable, collections)

    def _finish_init(self, graph: Graph, trainable: bool,
                     collections: Sequence[str] | None) -> None:
        self._trainable = bool(trainable)
        self._optimizer: Any = None
        # (replicas_to_aggregate, total_num_replicas) when a SyncReplicasOptimizer trains
        # this variable or steps it as its global step; sent when the session registers it.
        self._sync: tuple[int, int] | None = None
        self._partition: tuple[Any, int] | None = None
        self.device = _device.get_device_for(_device.OpDef(
            name=self._name, type="VariableV2", shape=self._shape, dtype=self._dtype))
        self._graph = graph
        graph._register(self)
        for c in (collections if collections is not None else [GLOBAL_VARIABLES]):
            graph.add_to_collection(c, self)
        if self._trainable and TRAINABLE_VARIABLES not in (collections or ()):
            graph.add_to_collection(TRAINABLE_VARIABLES, self)

    @property
    def op(self) -> "Variable":
        """The variable itself (psrt has no separate op objects)."""
        return self

    @property
    def trainable(self) -> bool:
        """Whether the variable is in ``TRAINABLE_VARIABLES``."""
        return self._trainable

    @property
    def graph(self) -> Graph:
        """The :class:`Graph` the variable belongs to."""
        return self._graph

    def initial_value_array(self) -> np.ndarray:
        """The initial value as a C-contiguous array of the variable's dtype and shape (int64
        for int32). An initializer the ps task computes is computed here on the host, with
        the same values (``psrt.init_ops.initial_value``)."""
        if self._init_spec is not None:
            return initial_value(self._init_spec, self._shape, self._wire_dtype)
        if self._init_fn is None:
            assert self._initial_value is not None
            return self._initial_value
        value = _c_array(self._init_fn(), self._wire_dtype)
        if value.shape != self._shape:
            raise ValueError(f"initializer of '{self._name}' returned shape {value.shape}; "
                             f"expected {self._shape}")
        return value

    def _ps_initial_value(self) -> np.ndarray | dict[str, Any]:
        """What a session sends to initialize the variable: the initializer's specification
        (a dict the ps task computes the value from), else the value."""
        if self._init_spec is not None:
            return dict(self._init_spec)
        return self.initial_value_array()

    @property
    def initializer(self) -> "Operation":
        """An op that initializes this variable (as ``tf.Variable.initializer``)."""
        return variables_initializer([self])

    def assign(self, value: Any) -> "Operation":
        """An op assigning ``value`` (array of this shape) when run."""
        return Operation("assign", variables=[self], value=value)

    def assign_add(self, delta: Any) -> "Operation":
        """An op adding ``delta`` (array of this shape) when run."""
        return Operation("assign_add", variables=[self], value=delta)

    def eval(self, session: Any = None) -> Any:
        """The value from ``session.run(self)``, as ``tf.Variable.eval``.

        Raises:
            ValueError: no ``session`` (psrt has no default session)."""
        if session is None:
            raise ValueError("psrt has no default session: pass session=")
        return session.run(self)

    def __repr__(self) -> str:
        return (f"<psrt.Variable '{self._name}' shape={self._shape} dtype={self._dtype.name} "
                f"device='{self.device}'>")


class PartitionedVariable(_VariableBase):
    """A variable split along axis 0 into parts placed independently (TF's
    ``PartitionedVariable``). Sessions pull and push it as one array: part ``k`` holds rows
    ``offsets[k]:offsets[k+1]``.
    """

    def __init__(self, name: str, shape: tuple[int, ...], dtype: np.dtype,
                 parts: list[Variable], offsets: list[int]) -> None:
        self._name = name
        self._shape = shape
        self._dtype = dtype
        self._parts = parts
        self._offsets = offsets
        for k, p in enumerate(parts):
            p._partition = (self, k)

    @property
    def trainable(self) -> bool:
        """Whether the parts are trainable."""
        return self._parts[0].trainable

    def __iter__(self):
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def _get_variable_list(self) -> list[Variable]:
        return list(self._parts)

    @property
    def offsets(self) -> list[int]:
        """Row offset of each part, plus the total row count last."""
        return list(self._offsets)

    def __repr__(self) -> str:
        return (f"<psrt.PartitionedVariable '{self._name}' shape={self._shape} "
                f"parts={len(self._parts)}>")


class Operation:
    """A runnable op without a value (initializers, assignments), as ``tf.Operation``.

    Sessions dispatch on ``type``; nothing here touches the network.
    """

    def __init__(self, type: str, variables: Sequence[Variable] = (), value: Any = None,
                 name: str | None = None) -> None:
        self.type = type
        self.variables = list(variables)
        self.value = value
        self.name = name or type

    def __repr__(self) -> str:
        return f"<psrt.Operation '{self.name}' type={self.type} on {len(self.variables)} variables>"


def _graph_vars(key: str, scope: str | None = None) -> list[Variable]:
    out = get_default_graph().get_collection(key)
    if scope:
        out = [v for v in out if re.match(scope, v.name)]
    return out


def global_variables(scope: str | None = None) -> list[Variable]:
    """Variables in ``GLOBAL_VARIABLES`` (creation order), as ``tf.global_variables``."""
    return _graph_vars(GLOBAL_VARIABLES, scope)


def trainable_variables(scope: str | None = None) -> list[Variable]:
    """Variables in ``TRAINABLE_VARIABLES``, as ``tf.trainable_variables``."""
    return _graph_vars(TRAINABLE_VARIABLES, scope)


def all_variables() -> list[Variable]:
    """Deprecated TF name of :func:`global_variables`."""
    return global_variables()


def variables_initializer(var_list: Iterable[Variable], name: str = "init") -> Operation:
    """An op that initializes ``var_list`` (values and optimizer slots) when run."""
    return Operation("initialize", variables=_flatten(var_list), name=name)


def global_variables_initializer() -> Operation:
    """An op initializing every global variable, as ``tf.global_variables_initializer``."""
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def report_uninitialized_variables(var_list: Iterable[Variable] | None = None,
                                   name: str = "report_uninitialized_variables") -> Operation:
    """An op whose value is a 1-D numpy array of the names (bytes, as TF's string tensor)
    of the variables in ``var_list`` (default: all global) not initialized on their ps."""
    return Operation("report_uninitialized",
                     variables=_flatten(global_variables() if var_list is None else var_list),
                     name=name)


def is_variable_initialized(variable: Variable) -> Operation:
    """An op whose value is True when ``variable`` is initialized on its ps."""
    return Operation("is_initialized", variables=[variable])


def _flatten(var_list: Iterable[Any]) -> list[Variable]:
    out: list[Variable] = []
    for v in var_list:
        if isinstance(v, PartitionedVariable):
            out.extend(v._get_variable_list())
        else:
            out.append(v)
    return out


# ---- get_variable, initializers, partitioners ---------------------------------------------

DEFAULT_GRAPH_SEED = 87654321  # TF's, used when only an op seed is given
_MAXINT32 = 2**31 - 1  # TF's random_seed._MAXINT32


def set_random_seed(seed: int | None) -> None:
    """Sets the default graph's random seed, as ``tf.set_random_seed``: initializers
    created without their own ``seed`` then draw deterministic values, each from the
    op-level seed TF would give it (the graph's count of random ops so far), so the same
    program gives the same initial values on every run and different variables different
    values (tensorflow/python/framework/random_seed.py, ``get_seed``)."""
    get_default_graph().seed = seed


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """``(graph seed, op seed)`` for an op with ``op_seed``, as TF's ``random_seed.get_seed``
    (tensorflow/python/framework/random_seed.py): with a graph seed and no op seed, the op
    seed is the next of the graph's counter; with an op seed only, the graph seed is
    ``DEFAULT_GRAPH_SEED``; with neither, (None, None). Seeds are reduced modulo 2**31 - 1,
    and (0, 0) becomes (0, 2**31 - 1), as TF's."""
    graph = get_default_graph()
    if graph.seed is not None:
        op = graph._next_op_seed() if op_seed is None else int(op_seed)
        seeds: tuple[int | None, int | None] = (graph.seed % _MAXINT32, op % _MAXINT32)
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32
    else:
        seeds = None, None
    return (0, _MAXINT32) if seeds == (0, 0) else seeds


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Callable[..., list[int]]:
    """Splits axis 0 into ``num_shards`` parts, as ``tf.fixed_size_partitioner``.

    Raises:
        ValueError: ``num_shards`` < 1, or ``axis`` is not 0 (psrt partitions rows only).
    """
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer; got {num_shards!r}")
    if axis != 0:
        raise ValueError(f"psrt partitions along axis 0 only; got axis={axis}")

    def partitioner(shape, dtype=None):
        parts = [1] * len(shape)
        parts[0] = min(num_shards, shape[0])
        return parts
    return partitioner


def get_variable(name: str, shape: Sequence[int] | None = None, dtype: Any = None,
                 initializer: Any = None, regularizer: Any = None, trainable: bool = True,
                 collections: Sequence[str] | None = None, caching_device: Any = None,
                 partitioner: Callable[..., list[int]] | None = None,
                 validate_shape: bool = True, use_resource: Any = None,
                 custom_getter: Any = None, constraint: Any = None,
                 reuse: Any = None) -> Variable | PartitionedVariable:
    """Creates a variable, or returns the existing one when its scope reuses, as
    ``tf.get_variable`` (tensorflow/python/ops/variable_scope.py).

    The full name is the current :func:`variable_scope`'s name, ``/``, ``name`` (name scopes
    do not count, as TF). Whether an existing variable is returned depends on the scope's
    ``reuse``: True returns it (and a missing one is an error), ``AUTO_REUSE`` returns it or
    creates it, False/None creates it (and an existing one is an error).

    Args:
        name: Name (str), relative to the current variable scope.
        shape: Shape (sequence of int); needed unless ``initializer`` is an array.
        dtype: float32, float64, int32 or int64 (numpy or ``psrt.float32``...); default:
            the scope's dtype (float32).
        initializer: A psrt initializer (``psrt.truncated_normal_initializer(...)``, ...:
            computed on the ps tasks, part by part for a partitioned variable, so this
            process never holds the value; see ``psrt.init_ops``), another callable
            ``(shape, dtype=..., partition_info=None) -> array`` (run here), an array, a
            scalar, or None: the scope's initializer, else glorot uniform for floats and
            zeros for integers, as TF.
        partitioner: e.g. ``fixed_size_partitioner(n)`` (default: the scope's); gives a
            :class:`PartitionedVariable` whose parts ``name/part_K`` are placed one by one
            (round robin over the ps).
        reuse: Overrides the scope's ``reuse`` (psrt's argument; TF's is the scope's).

    Raises:
        ValueError: the name exists and the scope does not reuse ("Variable W already
            exists, disallowed..."), the scope reuses with True and it does not exist, a
            reused variable's shape or dtype differs, or the shape is missing.
    """
    graph = get_default_graph()
    scope = get_variable_scope()
    full = f"{scope.name}/{name}" if scope.name else name
    if reuse is None:
        reuse = scope.reuse
    if dtype is None:
        dtype = scope.dtype
    if initializer is None:
        initializer = scope.initializer
    if partitioner is None:
        partitioner = scope.partitioner
    existing = _get_variable_store(graph).get(full)
    if existing is not None:
        if not reuse:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you mean to set "
                             f"reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        if shape is not None and tuple(shape) != tuple(existing.shape):
            raise ValueError(f"Trying to share variable {full}, but specified shape "
                             f"{tuple(shape)} and found shape {tuple(existing.shape)}.")
        want = _as_dtype(dtype, full)
        if want != existing.dtype:
            raise ValueError(f"Trying to share variable {full}, but specified dtype "
                             f"{want.name} and found dtype {existing.dtype.name}.")
        return existing
    if reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with "
                         f"tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         f"VarScope?")
    dt = _as_dtype(dtype, full)
    if initializer is not None and not callable(initializer):
        arr = np.asarray(initializer, dt)
        if shape is None:
            shape = arr.shape
        init_fn: Callable[..., np.ndarray] = (
            Constant(arr.item(), dtype=dt) if arr.ndim == 0 else
            lambda s, dtype=dt, partition_info=None: arr.reshape(s).copy())
    else:
        if shape is None:
            raise ValueError(f"Shape of a new variable ({full}) must be fully defined, but "
                             f"instead was None.")
        init_fn = initializer or (glorot_uniform_initializer() if dt.kind == "f"
                                  else zeros_initializer())
    shape = tuple(int(d) for d in shape)
    # A psrt initializer is computed on the ps tasks, part by part (TF's get_variable gives
    # each part functools.partial(initializer, shape, dtype, partition_info)); its seed is
    # decided once, so every part draws from the same stream as the whole would.
    on_ps = False
    if isinstance(init_fn, Initializer):
        init_fn = init_fn._seeded()
        on_ps = init_fn._spec(shape, dt) is not None
    # As TF's VariableScope.get_variable: the variable's name is the variable scope's path,
    # outside any name scope.
    with graph.name_scope(None):
        if partitioner is None:
            value: Any = (functools.partial(init_fn, shape, dtype=dt) if on_ps
                          else np.asarray(init_fn(shape, dtype=dt), dt))
            var: Variable | PartitionedVariable = Variable(
                value, trainable=trainable, name=full, dtype=dt, collections=collections)
        else:
            if len(shape) == 0:
                raise ValueError(f"cannot partition scalar variable {full}")
            parts = partitioner(shape, dtype=dt)
            n = int(parts[0])
            # TF's split: the first (rows % n) parts get one extra row.
            base, extra = divmod(shape[0], n)
            offsets = [0]
            for k in range(n):
                offsets.append(offsets[-1] + base + (1 if k < extra else 0))
            full_value = None if on_ps else np.asarray(init_fn(shape, dtype=dt), dt)
            pieces = []
            for k in range(n):
                rows = offsets[k + 1] - offsets[k]
                if full_value is None:
                    info = _PartitionInfo(shape, [offsets[k]] + [0] * (len(shape) - 1))
                    value = functools.partial(init_fn, (rows,) + shape[1:], dtype=dt,
                                              partition_info=info)
                else:
                    value = full_value[offsets[k]:offsets[k + 1]]
                pieces.append(Variable(value, trainable=trainable, name=f"{full}/part_{k}",
                                       dtype=dt, collections=collections))
            var = PartitionedVariable(full, shape, dt, pieces, offsets)
    _get_variable_store(graph)[full] = var
    return var


def _get_variable_store(graph: Graph) -> dict[str, Any]:
    store = getattr(graph, "_get_variable_store", None)
    if store is None:
        store = {}
        graph._get_variable_store = store  # type: ignore[attr-defined]
    return store


# ---- variable scopes ------------------------------------------------------------------------

class _ReuseMode:
    """``tf.AUTO_REUSE``: get_variable creates a variable that does not exist and returns
    one that does."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "AUTO_REUSE"

    def __reduce__(self) -> str:
        return "AUTO_REUSE"


AUTO_REUSE = _ReuseMode()


class VariableScope:
    """What :func:`get_variable` reads from the current scope, as TF's ``VariableScope``:
    the scope's ``name``, ``reuse`` (False, True or ``AUTO_REUSE``), ``initializer``,
    ``partitioner`` and ``dtype``; ``original_name_scope`` is the name scope opened with
    it. Get the current one with :func:`get_variable_scope`; pass one to
    :func:`variable_scope` to re-enter it."""

    def __init__(self, reuse: Any, name: str = "", initializer: Any = None,
                 regularizer: Any = None, caching_device: Any = None,
                 partitioner: Any = None, custom_getter: Any = None,
                 name_scope: str = "", dtype: Any = np.float32, use_resource: Any = None,
                 constraint: Any = None) -> None:
        self._name = name
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._partitioner = partitioner
        self._dtype = dtype
        self._name_scope = name_scope

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    regularizer = property(lambda self: self._regularizer)
    partitioner = property(lambda self: self._partitioner)
    dtype = property(lambda self: self._dtype)

    def reuse_variables(self) -> None:
        """Makes this scope reuse its variables from now on, as TF."""
        self._reuse = True

    def set_initializer(self, initializer: Any) -> None:
        """Sets the default initializer of the scope's new variables."""
        self._initializer = initializer

    def set_partitioner(self, partitioner: Any) -> None:
        """Sets the default partitioner of the scope's new variables."""
        self._partitioner = partitioner

    def set_dtype(self, dtype: Any) -> None:
        """Sets the default dtype of the scope's new variables."""
        self._dtype = dtype

    def set_regularizer(self, regularizer: Any) -> None:
        """Accepted: psrt does not add regularization losses."""
        self._regularizer = regularizer

    def get_variable(self, var_store: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """:func:`get_variable` in this scope (``var_store`` is ignored)."""
        with variable_scope(self):
            return get_variable(name, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<psrt.VariableScope '{self._name}' reuse={self._reuse}>"


def _scope_stack(graph: Graph) -> list[VariableScope]:
    stack = getattr(graph._scopes, "var_scopes", None)
    if stack is None:
        stack = graph._scopes.var_scopes = [VariableScope(False)]
    return stack


def _scope_counts(graph: Graph) -> dict[str, int]:
    counts = getattr(graph, "_var_scope_counts", None)
    if counts is None:
        counts = graph._var_scope_counts = {}  # type: ignore[attr-defined]
    return counts


def get_variable_scope() -> VariableScope:
    """The current :class:`VariableScope`, as ``tf.get_variable_scope``."""
    return _scope_stack(get_default_graph())[-1]


@contextlib.contextmanager
def variable_scope(name_or_scope: Any = None, default_name: str | None = None,
                   values: Any = None, initializer: Any = None, regularizer: Any = None,
                   caching_device: Any = None, partitioner: Any = None,
                   custom_getter: Any = None, reuse: Any = None, dtype: Any = None,
                   use_resource: Any = None, constraint: Any = None,
                   auxiliary_name_scope: bool = True) -> Iterator[VariableScope]:
    """Opens a variable scope for :func:`get_variable`, as ``tf.variable_scope``
    (tensorflow/python/ops/variable_scope.py).

    A name nests under the current scope (``outer/inner``); a :class:`VariableScope`
    re-enters that scope by its full name. ``reuse`` is True, ``AUTO_REUSE`` or None/False
    (inherit): a scope inside a reusing scope reuses too, as TF. ``initializer``,
    ``partitioner`` and ``dtype`` become the defaults of get_variable inside, inherited by
    nested scopes unless they set their own. With ``name_or_scope`` None, ``default_name``
    is made unique (``default``, ``default_1``, ...). The scope also opens a name scope of
    its name (unique-ified as name scopes are), which names the ``psrt.Variable`` objects
    created inside; re-entering a ``VariableScope`` re-enters its original name scope.

    Yields:
        The new :class:`VariableScope`.

    Raises:
        ValueError: ``reuse=True`` with only a ``default_name``, or neither name given.
        TypeError: ``name_or_scope`` is neither a str nor a VariableScope.
    """
    graph = get_default_graph()
    stack = _scope_stack(graph)
    old = stack[-1]
    if default_name is None and name_or_scope is None:
        raise TypeError("If default_name is None then name_or_scope is required")
    if reuse is False:
        reuse = None  # as TF: False inherits, it cannot turn a reusing scope off
    if isinstance(name_or_scope, VariableScope):
        base = name_or_scope
        full = base.name
        name_scope = base.original_name_scope
        reuse = True if reuse is True else (reuse or base.reuse)
        scope = VariableScope(
            reuse, name=full, name_scope=name_scope,
            initializer=initializer if initializer is not None else base.initializer,
            partitioner=partitioner if partitioner is not None else base.partitioner,
            dtype=dtype if dtype is not None else base.dtype,
            regularizer=regularizer if regularizer is not None else base.regularizer)
        entered_name_scope = graph.name_scope(name_scope if name_scope else None)
    else:
        if name_or_scope is None:
            if reuse is True:
                raise ValueError("reuse=True cannot be used without a name_or_scope")
            prefix = f"{old.name}/{default_name}" if old.name else default_name
            counts = _scope_counts(graph)
            n = counts.get(prefix, 0)
            counts[prefix] = n + 1
            name = default_name if n == 0 else f"{default_name}_{n}"
        elif isinstance(name_or_scope, str):
            name = name_or_scope
        else:
            raise TypeError(f"VariableScope: name_or_scope must be a string or VariableScope; "
                            f"got {name_or_scope!r}")
        full = f"{old.name}/{name}" if old.name else name
        if name_or_scope is not None:
            counts = _scope_counts(graph)
            counts[full] = counts.get(full, 0) + 1
        entered_name_scope = graph.name_scope(name) if auxiliary_name_scope else None
        scope = VariableScope(
            reuse or old.reuse, name=full,
            initializer=initializer if initializer is not None else old.initializer,
            partitioner=partitioner if partitioner is not None else old.partitioner,
            dtype=dtype if dtype is not None else old.dtype,
            regularizer=regularizer if regularizer is not None else old.regularizer)
    with contextlib.ExitStack() as stack_ctx:
        if entered_name_scope is not None:
            opened = stack_ctx.enter_context(entered_name_scope)
            if not isinstance(name_or_scope, VariableScope):
                scope._name_scope = opened
        stack.append(scope)
        try:
            yield scope
        finally:
            stack.pop()


def name_scope(name: str | None, default_name: str | None = None,
               values: Any = None) -> Any:
    """Opens a name scope in the default graph, as ``tf.name_scope`` (see
    :meth:`Graph.name_scope`): it prefixes the names of ``psrt.Variable`` objects, not those
    of :func:`get_variable`'s variables, as in TF. Yields the scope's name ending in ``/``."""
    return get_default_graph().name_scope(name if name is not None else default_name)


def get_collection(key: str, scope: str | None = None) -> list[Any]:
    """``get_default_graph().get_collection(key, scope)``, as ``tf.get_collection``."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list[Any]:
    """``get_default_graph().get_collection_ref(key)``, as ``tf.get_collection_ref``."""
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name: str, value: Any) -> None:
    """``get_default_graph().add_to_collection(name, value)``, as ``tf.add_to_collection``."""
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names: Any, value: Any) -> None:
    """``get_default_graph().add_to_collections(names, value)``, as TF."""
    get_default_graph().add_to_collections(names, value)


# ---- global step ---------------------------------------------------------------------------

def get_global_step(graph: Graph | None = None) -> Variable | None:
    """The global step variable, or None, as ``tf.train.get_global_step``
    (tensorflow/python/training/training_util.py): the one variable of the ``GLOBAL_STEP``
    collection, else the variable named ``global_step`` (TF's ``global_step:0``), so that
    ``Variable(0, name='global_step', trainable=False)`` is found. Several in the collection:
    logged as an error, None returned, as TF.

    Raises:
        TypeError: the variable found is not an integer scalar (:func:`assert_global_step`).
    """
    graph = graph or get_default_graph()
    steps = graph.get_collection(GLOBAL_STEP)
    if len(steps) == 1:
        step = steps[0]
    elif not steps:
        step = graph.get_variable_by_name("global_step")
        if step is None:
            return None
    else:
        _logger.error("Multiple tensors in global_step collection.")
        return None
    assert_global_step(step)
    return step


def create_global_step(graph: Graph | None = None) -> Variable:
    """Creates the int64 scalar ``global_step`` (initial 0, not trainable, in the
    ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP`` collections, outside any name scope), as TF.

    Raises:
        ValueError: a global step already exists ("'global_step' already exists.").
    """
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError("'global_step' already exists.")
    with graph.as_default(), graph.name_scope(None):
        return Variable(np.zeros((), np.int64), trainable=False, name="global_step",
                        dtype=np.int64, collections=[GLOBAL_VARIABLES, GLOBAL_STEP])


def get_or_create_global_step(graph: Graph | None = None) -> Variable:
    """Returns the global step, creating it if needed, as TF."""
    graph = graph or get_default_graph()
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)


def global_step(sess: Any, global_step_tensor: Variable) -> int:
    """The global step's value as an int, as ``tf.train.global_step``."""
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor: Any) -> None:
    """Checks that ``global_step_tensor`` can be a global step, as TF's: a Variable of an
    integer dtype (int32 or int64) and scalar shape.

    Raises:
        TypeError: 'Existing "global_step" must be a Variable or Tensor', '... does not
            have integer type', or '... is not scalar', with TF's messages.
    """
    if not isinstance(global_step_tensor, Variable):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: '
                        f'{global_step_tensor!r}.')
    if global_step_tensor.dtype.kind not in "iu":
        raise TypeError(f'Existing "global_step" does not have integer type: '
                        f'{global_step_tensor.dtype.name}')
    if global_step_tensor.shape != ():
        raise TypeError(f'Existing "global_step" is not scalar: {global_step_tensor.shape}')
