"""TF1's local variables of input pipelines: values held in the worker's process, not on the
ps tasks, in the ``LOCAL_VARIABLES`` collection and set by ``local_variables_initializer``
(tensorflow/python/ops/variables.py). ``limit_epochs``'s epoch counter and
``match_filenames_once``'s file list are such variables in TF; here they are
:class:`LocalVariable` objects.

Reading one before ``local_variables_initializer()`` (or the ``local_init_op`` of a
Scaffold or Supervisor) ran in this process is FailedPreconditionError ("Attempting to use
uninitialized value ..."), as TF's.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
from psrt.framework import tensor as _tensor
from psrt.framework.ops import GraphKeys, Operation, VariableBase
from psrt.ops.control_flow_ops import group
from psrt.ops.data_flow_ops import local_op
from psrt.ops.variables import variables_initializer

__all__ = ["LocalVariable", "local_variables", "local_variables_initializer"]


class LocalVariable:
    """A value of the worker's process, initialized from a tensor by its ``initializer``
    op (see the module docstring).

    Args:
        initial_value: A tensor (e.g. ``matching_files(pattern)``) or a numpy value.
        name: The variable's name, made unique in the graph.
        dtype: Its numpy dtype (default: the initial value's).
    """

    def __init__(self, initial_value: Any, name: str, dtype: Any = None) -> None:
        graph = _ops.get_default_graph()
        self.name = graph.unique_name(name)
        self.dtype = _lib.np_dtype(dtype) if dtype is not None else \
            _lib.static_dtype(initial_value)
        self._shape = _lib.static_shape(initial_value)
        self._lock = threading.Lock()
        self._value: Any = None
        self._initialized = False

        def assign(v: Any) -> None:
            with self._lock:
                self._value = np.array(v, dtype=self.dtype)
                self._initialized = True
        t = _tensor.py_func(assign, [initial_value], None, name=f"{self.name}/Assign_run")
        self.initializer = local_op(t, graph.unique_name(f"{self.name}/Assign"))
        self._read = self._read_tensor()
        graph.add_to_collection(GraphKeys.LOCAL_VARIABLES, self)

    @property
    def shape(self) -> Any:
        """The static shape of the initial value (a TensorShape)."""
        return self._shape

    def _uninitialized(self) -> errors.FailedPreconditionError:
        return errors.FailedPreconditionError(
            None, None, f"Attempting to use uninitialized value {self.name}")

    def value(self) -> Any:
        """The tensor of the current value (one per variable, as TF's snapshot)."""
        return self._read

    def eval(self, session: Any) -> Any:
        """``session.run(self.value())``."""
        return session.run(self._read)

    # A fetch of the variable itself (``sess.run(v)``) is a fetch of its value.
    def _psrt_fetch_inputs(self, feeds: Any, fetched: Any) -> Any:
        return [self._read]

    def _psrt_compute(self, values: Any, feeds: Any) -> Any:
        return values[0]

    def _read_tensor(self) -> Any:
        def read() -> Any:
            with self._lock:
                if not self._initialized:
                    raise self._uninitialized()
                return self._value.copy()
        t = _tensor.py_func(read, [], self.dtype, name=f"{self.name}/read")
        t.shape = self._shape
        return t

    read_value = value

    def count_up_to(self, limit: int) -> Any:
        """A tensor that gives the value and then increments it, as TF's
        ``Variable.count_up_to``; once the value reached ``limit``, OutOfRangeError
        ("Reached limit of N") without incrementing."""
        lim = int(limit)

        def step() -> Any:
            with self._lock:
                if not self._initialized:
                    raise self._uninitialized()
                before = self._value.copy()
                if int(before) >= lim:
                    raise errors.OutOfRangeError(None, None, f"Reached limit of {lim}")
                self._value = self._value + 1
                return before
        t = _tensor.py_func(step, [], self.dtype, name=f"{self.name}/CountUpTo")
        t.shape = []
        return t

    def __repr__(self) -> str:
        return f"<psrt.LocalVariable '{self.name}' dtype={np.dtype(self.dtype).name}>"


def local_variables(scope: str | None = None) -> list[Any]:
    """The ``LOCAL_VARIABLES`` collection (creation order), as ``tf.local_variables``: the
    input pipelines' :class:`LocalVariable` values (epoch counters, file lists), the
    metrics' accumulators and variables created with ``collections=[LOCAL_VARIABLES]``
    (each held by this worker, not a ps task, and not saved by a default ``Saver``)."""
    return _ops.get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def local_variables_initializer() -> Operation:
    """An op initializing every local variable, as ``tf.local_variables_initializer``:
    the process's :class:`LocalVariable` objects (epoch counters, file lists) and any
    ``psrt.Variable`` in ``LOCAL_VARIABLES`` (the metrics' accumulators, held by this
    worker's own server); with none, an op that does nothing."""
    items = local_variables()
    ps_vars = [v for v in items if isinstance(v, VariableBase)]
    ops = [v.initializer for v in items if isinstance(v, LocalVariable)]
    if ps_vars:
        ops.append(variables_initializer(ps_vars))  # type: ignore[arg-type]
    return group(*ops, name="init")
