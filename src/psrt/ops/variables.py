"""Variables, the global step, initializers and partitioned variables (TF1's tf.Variable,
tf.get_variable, tf.train.get_or_create_global_step).

psrt has no dataflow graph: a :class:`Graph` is the ordered record of the variables, their
devices and the optimizers bound to them. A variable's value lives on the ps task its
device names; a :class:`psrt.Session` registers it there and moves its values.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt.framework import device as _device
from psrt.framework import dtypes as _dtypes
from psrt.framework.ops import (
    GLOBAL_VARIABLES,
    LOCAL_VARIABLES,
    GraphKeys,
    TRAINABLE_VARIABLES,
    Graph,
    Operation,
    VariableBase,
    get_default_graph,
)
from psrt.framework import autodiff as _autodiff
from psrt.framework.tensor import Tensor, TensorOperators
from psrt.ops.init_ops import (
    Initializer,
    initial_value,
)

_NAME_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$")
_logger = logging.getLogger("psrt")


def _c_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """A C-contiguous copy-if-needed of ``value`` (keeps 0-d arrays 0-d, unlike
    ``numpy.ascontiguousarray``)."""
    return np.require(np.asarray(value, dtype=dtype), requirements="C")


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


class Variable(VariableBase, TensorOperators):
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
        if isinstance(initial_value, Tensor):
            initial_value = _tensor_initial_value(initial_value, self._name)
        on_ps = _ps_initializer_call(initial_value, dtype)
        if on_ps is not None:
            self._init_spec, shape_, dt_ = on_ps
            self._init_fn: Callable[[], Any] | None = None
            self._initial_value: np.ndarray | None = None
            self._dtype = _dtypes.variable_dtype(dt_, self._name)
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
        self._dtype = _dtypes.variable_dtype(dtype, self._name)
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
        # A local variable (a metric's accumulator: in LOCAL_VARIABLES, not global) is no
        # ps op: a replica_device_setter gives it the worker's device, so it lives on the
        # worker's own server and no other worker shares it.
        local = collections is not None and LOCAL_VARIABLES in collections and \
            GLOBAL_VARIABLES not in collections
        self._local = local   # a session places it on its own task when its device says no task
        self.device = _device.get_device_for(_device.OpDef(
            name=self._name, type="LocalVariable" if local else "VariableV2",
            shape=self._shape, dtype=self._dtype))
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

    def _ps_spec(self, init: bool) -> tuple[str, tuple[int, ...], str, dict[str, float], Any]:
        """What its ps task needs to register the variable: ``(dtype name on the wire, shape,
        optimizer kernel ("" for none), hyper-parameters, initial value)``. The initial value
        (an array, or an initializer's specification the ps computes) is sent when ``init``,
        else None. The only place a session reads a variable's registration from."""
        opt = self._optimizer
        kernel = opt._kernel if opt is not None else ""
        hyper = opt._hyper() if opt is not None else {}
        if self._sync is not None:
            hyper = {**hyper, "replicas_to_aggregate": float(self._sync[0]),
                     "total_num_replicas": float(self._sync[1])}
        value = self._ps_initial_value() if init else None
        return _dtypes.WIRE_NAMES[self._wire_dtype], self._shape, kernel, hyper, value

    @property
    def initializer(self) -> "Operation":
        """An op that initializes this variable (as ``tf.Variable.initializer``)."""
        return variables_initializer([self])

    def assign(self, value: Any, use_locking: bool = False, name: str | None = None,
               read_value: bool = True) -> "Operation":
        """An op assigning ``value`` when run, as ``tf.Variable.assign``: an array (or
        scalar) broadcast to the variable's shape, or a Tensor computed in the run that
        runs the op (on the variables' values at that moment). psrt's op has no value of
        its own (``Session.run`` gives None): to read the new value, fetch a tensor of the
        variable created under ``control_dependencies([op])``."""
        return Operation("assign", variables=[self], value=value, name=name)

    def assign_add(self, delta: Any, use_locking: bool = False, name: str | None = None,
                   read_value: bool = True) -> "Operation":
        """An op adding ``delta`` (an array or a Tensor, as :meth:`assign`) when run, as
        ``tf.Variable.assign_add``; the ps task adds it atomically, so concurrent workers'
        additions all count."""
        return Operation("assign_add", variables=[self], value=delta, name=name)

    def assign_sub(self, delta: Any, use_locking: bool = False, name: str | None = None,
                   read_value: bool = True) -> "Operation":
        """An op subtracting ``delta`` (an array or a Tensor) when run, as
        ``tf.Variable.assign_sub``: the ps task adds ``-delta`` atomically."""
        neg = -delta if isinstance(delta, Tensor) else np.negative(delta)
        return Operation("assign_add", variables=[self], value=neg, name=name)

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


class PartitionedVariable(VariableBase):
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


def moving_average_variables(scope: str | None = None) -> list[Variable]:
    """The variables ``ExponentialMovingAverage.apply`` averages (``MOVING_AVERAGE_VARIABLES``:
    the averaged variables, not their shadows; tensors' averages are not in it), as
    ``tf.moving_average_variables``."""
    return _graph_vars(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


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


# ---- variable scopes ------------------------------------------------------------------------


# ---- global step ---------------------------------------------------------------------------


def _tensor_initial_value(t: Tensor, name: str) -> Callable[[], Any]:
    """A Tensor initial value (``tf.Variable(tf.truncated_normal([784, 10]))``) as the
    function computing it here, at each initialization (a random op draws anew, as TF's
    initializer op runs again).

    Raises:
        ValueError: the tensor reads variables or placeholders (psrt computes initial values
            before the variables exist on the ps).
    """
    plan = _autodiff.Plan([t])
    if plan.variables or plan.run_inputs or any(not p.op.inputs for p in plan.placeholders):
        raise ValueError(f"initial value of variable '{name}' ({t.name}) reads variables or "
                         f"placeholders; psrt computes initial values from constants and "
                         f"random ops only: initialize it with a numpy value or an "
                         f"initializer, then assign")

    def compute() -> Any:
        memo: dict[int, Any] = {}
        _autodiff.evaluate(plan, {}, {}, memo)
        return np.array(memo[id(t)])
    return compute


def _state_target(ref: Any, what: str) -> Variable:
    if not isinstance(ref, Variable):
        raise TypeError(f"{what} needs a psrt.Variable as ref; got {type(ref).__name__} "
                        f"{ref!r}")
    return ref


def assign(ref: Variable, value: Any, validate_shape: Any = None, use_locking: Any = None,
           name: str | None = None) -> Operation:
    """``ref.assign(value)``, as ``tf.assign`` (tensorflow/python/ops/state_ops.py).

    Raises:
        TypeError: ``ref`` is not a Variable."""
    return _state_target(ref, "tf.assign").assign(value, name=name)


def assign_add(ref: Variable, value: Any, use_locking: Any = None,
               name: str | None = None) -> Operation:
    """``ref.assign_add(value)``, as ``tf.assign_add`` (state_ops.py).

    Raises:
        TypeError: ``ref`` is not a Variable."""
    return _state_target(ref, "tf.assign_add").assign_add(value, name=name)


def assign_sub(ref: Variable, value: Any, use_locking: Any = None,
               name: str | None = None) -> Operation:
    """``ref.assign_sub(value)``, as ``tf.assign_sub`` (state_ops.py).

    Raises:
        TypeError: ``ref`` is not a Variable."""
    return _state_target(ref, "tf.assign_sub").assign_sub(value, name=name)
