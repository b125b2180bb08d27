"""Graphs, collections and ops: what a TF1 script's graph records, as
tensorflow/python/framework/ops.py.

psrt has no dataflow graph: a :class:`Graph` is the ordered record of the variables, ops and
collections a script creates, with TF's unique-name and name-scope rules. Value types every
layer passes (:class:`Operation`, the variable base class) live here too."""

from __future__ import annotations

import re
import threading
from typing import Any, Sequence

import numpy as np

from psrt.framework import dtypes as _dtypes

GLOBAL_VARIABLES = "variables"


TRAINABLE_VARIABLES = "trainable_variables"


GLOBAL_STEP = "global_step"


LOCAL_VARIABLES = "local_variables"


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
        self._has_control_deps = False  # a control_dependencies block was opened
        # A queue or reader was built (ops/data_flow_ops.py, io_ops.py): runs compute
        # their input ops before taking the session's lock (runtime/executor.py).
        self._has_input_ops = False
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
        """Context manager making this the default graph in the current thread, as
        ``tf.Graph.as_default``: ops and variables created in the block belong to it."""
        return _DefaultGraph(self)

    # ---- control dependencies ---------------------------------------------------------

    def _control_stack(self) -> list[list[Any]]:
        stack = getattr(self._scopes, "control", None)
        if stack is None:
            stack = self._scopes.control = []
        return stack

    def _control_inputs(self) -> list[Any]:
        """What an op created now must wait for: every open ``control_dependencies`` block's
        inputs, outermost first (a ``None`` block clears the outer ones, as TF)."""
        stack = getattr(self._scopes, "control", None)
        if not stack:
            return []
        out: list[Any] = []
        for deps in stack:
            if deps is None:
                out = []
            else:
                out.extend(d for d in deps if all(d is not o for o in out))
        return out

    def control_dependencies(self, control_inputs: Any) -> "_ControlDependencies":
        """A context manager: every op created in the block runs after ``control_inputs``
        in any run that runs it, as ``tf.Graph.control_dependencies``
        (tensorflow/python/framework/ops.py). ``control_inputs`` are Operations (train
        ops, assignments, ``group``), Tensors (their ops are computed first) or Variables
        (their values are read), or None to clear the enclosing blocks' dependencies.

        Raises:
            TypeError: an input that is none of these (TF's message).
        """
        if control_inputs is None:
            return _ControlDependencies(self, None)
        deps: list[Any] = []
        for c in control_inputs:
            op = getattr(c, "op", None)
            target = op if op is not None and not isinstance(c, VariableBase) else c
            if not (isinstance(target, Operation) or hasattr(target, "outputs")
                    or isinstance(c, VariableBase)):
                raise TypeError(f"Can not convert a {type(c).__name__} into a Tensor or "
                                f"Operation.")
            deps.append(target)
        if deps:
            self._has_control_deps = True
        return _ControlDependencies(self, deps)

    # ---- lookups by name --------------------------------------------------------------

    def get_operation_by_name(self, name: str) -> Any:
        """The op named ``name`` (a placeholder's or another graph op's node, or a
        variable), as ``tf.Graph.get_operation_by_name``.

        Raises:
            KeyError: no op of that name (TF's message).
            ValueError: ``name`` is a tensor name (``"x:0"``).
        """
        if ":" in name:
            raise ValueError(f"Name '{name}' appears to refer to a Tensor, not a Operation.")
        node = getattr(self, "_psrt_nodes", {}).get(name)
        if node is None:
            node = self._by_name.get(name)
        if node is None:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.")
        return node

    def get_tensor_by_name(self, name: str) -> Any:
        """The tensor named ``name`` (``"<op>:<index>"``), as
        ``tf.Graph.get_tensor_by_name``; a variable's ``"W:0"`` gives the variable.

        Raises:
            ValueError: ``name`` has no ``:<index>`` (TF's message).
            KeyError: no such op, or the op has no output of that index.
        """
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            raise ValueError(f"The name '{name}' looks a like an Operation name, but is not "
                             f"a valid Tensor name; Tensor names must be of the form "
                             f"\"<op_name>:<output_index>\".")
        node = getattr(self, "_psrt_nodes", {}).get(op_name)
        if node is None:
            var = self._by_name.get(op_name)
            if var is not None and index == "0":
                return var
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. The "
                           f"operation, '{op_name}', does not exist in the graph.")
        if int(index) >= len(node.outputs):
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. The "
                           f"operation, '{op_name}', exists but only has "
                           f"{len(node.outputs)} outputs.")
        return node.outputs[int(index)]


class _ControlDependencies:
    def __init__(self, graph: Graph, deps: list[Any] | None) -> None:
        self._graph = graph
        self._deps = deps

    def __enter__(self) -> None:
        self._graph._control_stack().append(self._deps)  # type: ignore[arg-type]

    def __exit__(self, *exc: object) -> None:
        self._graph._control_stack().pop()


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


class Operation:
    """A runnable op without a value (initializers, assignments), as ``tf.Operation``.

    Sessions dispatch on ``type``; nothing here touches the network.
    """

    def __init__(self, type: str, variables: Sequence[Any] = (), value: Any = None,
                 name: str | None = None) -> None:
        self.type = type
        self.variables = list(variables)
        self.value = value
        self.name = name or type
        # Run before this op in a run that runs it (``control_dependencies``).
        self.control_inputs: list[Any] = list(get_default_graph()._control_inputs())

    def __repr__(self) -> str:
        return f"<psrt.Operation '{self.name}' type={self.type} on {len(self.variables)} variables>"


def name_scope(name: str | None, default_name: str | None = None,
               values: Any = None) -> Any:
    """Opens a name scope in the default graph, as ``tf.name_scope`` (see
    :meth:`Graph.name_scope`): it prefixes the names of ``psrt.Variable`` objects, not those
    of :func:`get_variable`'s variables, as in TF. Yields the scope's name ending in ``/``."""
    return get_default_graph().name_scope(name if name is not None else default_name)


def control_dependencies(control_inputs: Any) -> Any:
    """``get_default_graph().control_dependencies(control_inputs)``, as
    ``tf.control_dependencies``: ops created in the block run after ``control_inputs``
    (e.g. a train op after the ``UPDATE_OPS``). See :meth:`Graph.control_dependencies`."""
    return get_default_graph().control_dependencies(control_inputs)


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


class VariableBase:
    """Name, shape and dtype of a value held by the ps tasks, shared by ``psrt.Variable`` and
    ``psrt.PartitionedVariable`` (psrt/ops/variables.py). Graph code below the ops layer (tensors,
    autodiff) recognises variables by this base class."""

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
        return _dtypes.wire_dtype(self._dtype)

    @property
    def nbytes(self) -> int:
        """Size of the value in bytes."""
        return int(np.prod(self._shape, dtype=np.int64)) * self._wire_dtype.itemsize
