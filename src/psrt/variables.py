"""Variables, the global step, initializers and partitioned variables (TF1's tf.Variable,
tf.get_variable, tf.train.get_or_create_global_step).

psrt has no dataflow graph: a :class:`Graph` is the ordered record of the variables, their
devices and the optimizers bound to them. A variable's value lives on the ps task its
device names; a :class:`psrt.Session` registers it there and moves its values.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt import placement as _device

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"
GLOBAL_STEP = "global_step"
LOCAL_VARIABLES = "local_variables"

_SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64))
_NAME_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$")


def _as_dtype(dtype: Any, name: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"dtype {dtype!r} of variable '{name}' is not a numpy dtype") from e
    if dt not in _SUPPORTED_DTYPES:
        raise TypeError(f"dtype {dt} not supported for variable '{name}'; expected float32, "
                        f"float64 or int64")
    return dt


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

    def unique_name(self, name: str) -> str:
        """Returns ``name``, or ``name_1``, ``name_2``... when taken (TF's rule)."""
        with self._lock:
            if name not in self._names:
                self._names[name] = 1
                return name
            i = self._names[name]
            while f"{name}_{i}" in self._names:
                i += 1
            self._names[name] = i + 1
            self._names[f"{name}_{i}"] = 1
            return f"{name}_{i}"

    def add_to_collection(self, key: str, value: Any) -> None:
        """Appends ``value`` to the collection ``key`` (str)."""
        with self._lock:
            self._collections.setdefault(key, []).append(value)
            self._version += 1

    def get_collection(self, key: str) -> list[Any]:
        """Returns a copy of the collection ``key`` (empty list if absent)."""
        with self._lock:
            return list(self._collections.get(key, []))

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
        """numpy dtype: float32, float64 or int64."""
        return self._dtype

    @property
    def nbytes(self) -> int:
        """Size of the value in bytes."""
        return int(np.prod(self._shape, dtype=np.int64)) * self._dtype.itemsize


class Variable(_VariableBase):
    """A variable held by a ps task, as ``tf.Variable`` (TF1 ref-variable semantics).

    The device is chosen when the variable is created, from the ``psrt.device`` scopes in
    force (for example ``replica_device_setter``). Fetching it with ``Session.run`` returns
    its value as a new numpy array.

    Args:
        initial_value: A numpy array (or anything ``numpy.asarray`` takes), or a callable
            with no arguments returning one. Its shape is the variable's shape.
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
        self._name = graph.unique_name(base)
        self._init_fn: Callable[[], Any] | None = (
            initial_value if callable(initial_value) else None)
        raw = initial_value if self._init_fn is None else self._init_fn()
        value = np.asarray(raw)
        if dtype is None:
            if value.dtype.kind == "f":
                # numpy float64 (array or scalar, also from a callable) stays float64; Python
                # floats become float32, as TF's convert_to_tensor.
                dtype = np.float64 if value.dtype == np.float64 and isinstance(
                    raw, (np.ndarray, np.generic)) else np.float32
            elif value.dtype.kind in "iub":
                dtype = np.int64
            else:
                dtype = value.dtype
        self._dtype = _as_dtype(dtype, self._name)
        if self._init_fn is not None:
            self._initial_value: np.ndarray | None = None  # re-evaluated at each init, as TF
            self._shape = tuple(np.shape(value))
        else:
            # A private read-only copy, as TF's constant: the caller's array stays writable
            # and later changes to it do not change the initial value.
            self._initial_value = np.array(value, dtype=self._dtype, order="C")
            self._initial_value.setflags(write=False)
            self._shape = tuple(self._initial_value.shape)
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
        """The initial value as a C-contiguous array of the variable's dtype and shape."""
        if self._init_fn is None:
            return self._initial_value
        value = _c_array(self._init_fn(), self._dtype)
        if value.shape != self._shape:
            raise ValueError(f"initializer of '{self._name}' returned shape {value.shape}; "
                             f"expected {self._shape}")
        return value

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

class _VarStore(threading.local):
    pass


def zeros_initializer(dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Returns an initializer of zeros, as ``tf.zeros_initializer``."""
    return lambda shape, dtype=dtype, partition_info=None: np.zeros(shape, dtype)


def ones_initializer(dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Returns an initializer of ones, as ``tf.ones_initializer``."""
    return lambda shape, dtype=dtype, partition_info=None: np.ones(shape, dtype)


def constant_initializer(value: Any = 0, dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Fills with ``value`` (scalar, or an array reshaped to the shape), as TF."""
    def init(shape, dtype=dtype, partition_info=None):
        v = np.asarray(value, dtype)
        return np.full(shape, v, dtype) if v.ndim == 0 else v.reshape(shape).copy()
    return init


def random_normal_initializer(mean: float = 0.0, stddev: float = 1.0, seed: int | None = None,
                              dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Normal values (mean, stddev; seeded by ``seed``), as ``tf.random_normal_initializer``."""
    rng = np.random.default_rng(seed)
    return lambda shape, dtype=dtype, partition_info=None: rng.normal(
        mean, stddev, shape).astype(dtype)


def truncated_normal_initializer(mean: float = 0.0, stddev: float = 1.0,
                                 seed: int | None = None,
                                 dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Normal values re-drawn when more than 2 stddev from the mean, as TF."""
    rng = np.random.default_rng(seed)

    def init(shape, dtype=dtype, partition_info=None):
        out = rng.normal(mean, stddev, shape)
        bad = np.abs(out - mean) > 2 * stddev
        while bad.any():
            out[bad] = rng.normal(mean, stddev, int(bad.sum()))
            bad = np.abs(out - mean) > 2 * stddev
        return out.astype(dtype)
    return init


def random_uniform_initializer(minval: float = 0.0, maxval: float | None = None,
                               seed: int | None = None,
                               dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Uniform values in [minval, maxval) (maxval default 1), as
    ``tf.random_uniform_initializer``."""
    rng = np.random.default_rng(seed)
    hi = 1.0 if maxval is None else maxval
    return lambda shape, dtype=dtype, partition_info=None: rng.uniform(
        minval, hi, shape).astype(dtype)


def glorot_uniform_initializer(seed: int | None = None,
                               dtype: Any = np.float32) -> Callable[..., np.ndarray]:
    """Uniform in ±sqrt(6 / (fan_in + fan_out)), as ``tf.glorot_uniform_initializer``."""
    rng = np.random.default_rng(seed)

    def init(shape, dtype=dtype, partition_info=None):
        shape = tuple(shape)
        if len(shape) == 0:
            fan_in = fan_out = 1
        elif len(shape) == 1:
            fan_in = fan_out = shape[0]
        else:
            receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
            fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
        limit = np.sqrt(6.0 / max(1.0, fan_in + fan_out))
        return rng.uniform(-limit, limit, shape).astype(dtype)
    return init


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


def get_variable(name: str, shape: Sequence[int] | None = None, dtype: Any = np.float32,
                 initializer: Any = None, regularizer: Any = None, trainable: bool = True,
                 collections: Sequence[str] | None = None, caching_device: Any = None,
                 partitioner: Callable[..., list[int]] | None = None,
                 validate_shape: bool = True, use_resource: Any = None,
                 custom_getter: Any = None, constraint: Any = None,
                 reuse: bool | None = None) -> Variable | PartitionedVariable:
    """Creates a variable, or returns it with ``reuse=True``, as ``tf.get_variable``.

    Args:
        name: Name (str); must be new unless ``reuse`` is True.
        shape: Shape (sequence of int); needed unless ``initializer`` is an array.
        dtype: float32 (default), float64 or int64.
        initializer: A callable ``(shape, dtype=..., partition_info=None) -> array``, an
            array, a scalar, or None (glorot uniform for floats, zeros for ints, as TF).
        partitioner: e.g. ``fixed_size_partitioner(n)``; gives a :class:`PartitionedVariable`
            whose parts ``name/part_K`` are placed one by one (round robin over the ps).
        reuse: True returns the existing variable.

    Raises:
        ValueError: the name exists and ``reuse`` is not True ("Variable W already exists,
            disallowed..."), ``reuse`` is True and it does not exist, or the shape is missing.
    """
    graph = get_default_graph()
    existing = _get_variable_store(graph).get(name)
    if existing is not None:
        if not reuse:
            raise ValueError(f"Variable {name} already exists, disallowed. Did you mean to set "
                             f"reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        if shape is not None and tuple(shape) != tuple(existing.shape):
            raise ValueError(f"Trying to share variable {name}, but specified shape "
                             f"{tuple(shape)} and found shape {tuple(existing.shape)}.")
        return existing
    if reuse is True:
        raise ValueError(f"Variable {name} does not exist, or was not created with "
                         f"tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         f"VarScope?")
    dt = _as_dtype(dtype, name)
    if initializer is not None and not callable(initializer):
        arr = np.asarray(initializer, dt)
        if shape is None:
            shape = arr.shape
        init_fn: Callable[..., np.ndarray] = lambda s, dtype=dt, partition_info=None: (
            np.broadcast_to(arr, s).copy() if arr.ndim == 0 else arr.reshape(s).copy())
    else:
        if shape is None:
            raise ValueError(f"Shape of a new variable ({name}) must be fully defined, but "
                             f"instead was None.")
        init_fn = initializer or (glorot_uniform_initializer() if dt.kind == "f"
                                  else zeros_initializer())
    shape = tuple(int(d) for d in shape)
    if partitioner is None:
        full = init_fn(shape, dtype=dt)
        var: Variable | PartitionedVariable = Variable(
            np.asarray(full, dt), trainable=trainable, name=name, dtype=dt,
            collections=collections)
    else:
        if len(shape) == 0:
            raise ValueError(f"cannot partition scalar variable {name}")
        parts = partitioner(shape, dtype=dt)
        n = int(parts[0])
        full = np.asarray(init_fn(shape, dtype=dt), dt)
        # TF's split: the first (rows % n) parts get one extra row.
        base, extra = divmod(shape[0], n)
        offsets = [0]
        for k in range(n):
            offsets.append(offsets[-1] + base + (1 if k < extra else 0))
        pieces = [Variable(full[offsets[k]:offsets[k + 1]], trainable=trainable,
                           name=f"{name}/part_{k}", dtype=dt, collections=collections)
                  for k in range(n)]
        var = PartitionedVariable(name, shape, dt, pieces, offsets)
    _get_variable_store(graph)[name] = var
    return var


def _get_variable_store(graph: Graph) -> dict[str, Any]:
    store = getattr(graph, "_get_variable_store", None)
    if store is None:
        store = {}
        graph._get_variable_store = store  # type: ignore[attr-defined]
    return store


# ---- global step ---------------------------------------------------------------------------

def get_global_step(graph: Graph | None = None) -> Variable | None:
    """The global step variable, or None, as ``tf.train.get_global_step``.

    Raises:
        TypeError: more than one variable is in the ``GLOBAL_STEP`` collection.
    """
    graph = graph or get_default_graph()
    steps = graph.get_collection(GLOBAL_STEP)
    if len(steps) > 1:
        raise TypeError("Multiple tensors in global_step collection.")
    if steps:
        return steps[0]
    return None


def create_global_step(graph: Graph | None = None) -> Variable:
    """Creates the int64 scalar ``global_step`` (initial 0, not trainable), as TF.

    Raises:
        ValueError: a global step already exists ("'global_step' already exists.").
    """
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError("'global_step' already exists.")
    with graph.as_default():
        return Variable(np.zeros((), np.int64), trainable=False, name="global_step",
                        dtype=np.int64, collections=[GLOBAL_VARIABLES, GLOBAL_STEP])


def get_or_create_global_step(graph: Graph | None = None) -> Variable:
    """Returns the global step, creating it if needed, as TF."""
    graph = graph or get_default_graph()
    return get_global_step(graph) or create_global_step(graph)


def global_step(sess: Any, global_step_tensor: Variable) -> int:
    """The global step's value as an int, as ``tf.train.global_step``."""
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor: Any) -> None:
    """Raises TypeError unless ``global_step_tensor`` is an int64 scalar Variable."""
    if not isinstance(global_step_tensor, Variable) or global_step_tensor.dtype != np.int64 \
            or global_step_tensor.shape != ():
        raise TypeError(f"Existing \"global_step\" does not have integer type: "
                        f"{global_step_tensor!r}")
