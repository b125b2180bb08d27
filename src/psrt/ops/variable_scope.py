"""get_variable and variable scopes, as tensorflow/python/ops/variable_scope.py."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework.ops import Graph, GraphKeys, get_default_graph
from psrt.ops.init_ops import (
    Constant,
    Initializer,
    _PartitionInfo,
    glorot_uniform_initializer,
    zeros_initializer,
)
from psrt.ops.variables import PartitionedVariable, Variable


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
        regularizer: A function of the new variable returning a loss tensor (or None),
            e.g. ``psrt.contrib.layers.l2_regularizer(0.1)``; default: the scope's. The loss
            joins ``GraphKeys.REGULARIZATION_LOSSES``, as TF.
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
        want = _dtypes.variable_dtype(dtype, full)
        if want != existing.dtype:
            raise ValueError(f"Trying to share variable {full}, but specified dtype "
                             f"{want.name} and found dtype {existing.dtype.name}.")
        return existing
    if reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with "
                         f"tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         f"VarScope?")
    dt = _dtypes.variable_dtype(dtype, full)
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
    if regularizer is None:
        regularizer = scope.regularizer
    if regularizer is not None:
        # As TF's _VariableStore: the loss of a new variable, in <name>/Regularizer/, joins
        # REGULARIZATION_LOSSES (tf.losses.get_regularization_loss sums them).
        with graph.name_scope(None), graph.name_scope(f"{full}/Regularizer/"):
            loss = regularizer(var)
        if loss is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return var


def _get_variable_store(graph: Graph) -> dict[str, Any]:
    store = getattr(graph, "_get_variable_store", None)
    if store is None:
        store = {}
        graph._get_variable_store = store  # type: ignore[attr-defined]
    return store


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
        """Sets the default regularizer of the scope's new variables (their losses join
        ``REGULARIZATION_LOSSES``)."""
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
