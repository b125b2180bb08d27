"""The ops that train variables, as the session runs them: a training step (:class:`TrainOp`,
what ``minimize`` returns) and an optimizer slot (:class:`SlotVariable`, e.g. Adagrad's
accumulator, held beside its variable on the same ps task).

The optimizers that build them live in psrt/training/; the session (psrt/runtime/) runs them,
computing a train op's given gradient tensors with :func:`gradient_tensors` and
:func:`gradient_value`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.ops import Operation
from psrt.framework.tensor import Tensor
from psrt.ops import variables as _variables
from psrt.ops.variables import PartitionedVariable, Variable


class SlotVariable:
    """An optimizer slot (e.g. Adagrad's accumulator) held beside its variable on the same ps
    task. Fetching it with ``Session.run`` returns its value (numpy)."""

    def __init__(self, primary: Variable | PartitionedVariable, slot_name: str, index: int,
                 var_name: str) -> None:
        self.primary = primary
        self.slot_name = slot_name
        self.index = index
        self._name = f"{primary.name}/{var_name}"
        self.device = getattr(primary, "device", "")

    @property
    def name(self) -> str:
        """``<variable>/<Optimizer name>`` as TF names slot variables (e.g. ``W/Adagrad``)."""
        return self._name

    @property
    def shape(self) -> tuple[int, ...]:
        """The primary variable's shape (tuple of int)."""
        return self.primary.shape

    @property
    def dtype(self) -> np.dtype:
        """The primary variable's numpy dtype."""
        return self.primary.dtype

    def __repr__(self) -> str:
        return f"<psrt slot '{self._name}' of '{self.primary.name}'>"


class TrainOp(Operation):
    """The op ``minimize``/``apply_gradients`` return. Running it is one training step: pull
    the variables (one parallel round trip), compute the gradients, push them with the
    global-step increment (one parallel round trip). Its ``Session.run`` value is the loss
    returned by the loss function (None for ``apply_gradients`` with given gradients).

    ``sync`` is ``(replicas_to_aggregate, total_num_replicas)`` for the op a
    :class:`SyncReplicasOptimizer` returns (the session then runs synchronous steps), else
    None."""

    def __init__(self, optimizer: Any, var_list: Sequence[Any],
                 loss_fn: Callable[..., Any] | None, grads: Sequence[Any] | None,
                 global_step: Variable | None, name: str | None) -> None:
        super().__init__("train", variables=_variables._flatten(var_list), name=name or
                         optimizer.get_name())
        self.optimizer = optimizer
        self.var_list = list(var_list)
        self.loss_fn = loss_fn
        self.grads = list(grads) if grads is not None else None
        self.global_step = global_step
        self.sync: tuple[int, int] | None = None
        # The loss tensor whose gradients (autodiff) the step pushes; None: ``loss_fn`` or
        # ``grads``.
        self.loss: Any = None


class _LazyGradient:
    """Placeholder that ``compute_gradients`` returns: the i-th gradient of ``loss_fn``,
    computed when the train op runs."""

    def __init__(self, loss_fn: Any, index: int) -> None:
        self.loss_fn = loss_fn   # a loss function, or a loss Tensor (autodiff)
        self.index = index


def gradient_tensors(g: Any) -> list[Tensor]:
    """The tensors a train op's given gradient (``apply_gradients`` of tensors) is computed
    from: itself, or an IndexedSlices' ``values`` and ``indices`` (a ``tf.gradients``
    row-sparse gradient, clipped, say); none for an array or a feed name."""
    if isinstance(g, Tensor):
        return [g]
    if isinstance(g, IndexedSlices):
        return [c for c in (g.values, g.indices) if isinstance(c, Tensor)]
    return []


def gradient_value(g: Any, var: Any, memo: dict[int, Any]) -> Any:
    """A given gradient's value for the push, from the run's tensor values ``memo`` (by id):
    a Tensor's as a C-contiguous array of ``var``'s dtype, an IndexedSlices of tensors as
    one of arrays (values of ``var``'s dtype; the push checks the indices); anything else
    as it is."""
    if isinstance(g, Tensor):
        return np.asarray(memo[id(g)], dtype=var.dtype, order="C")
    if isinstance(g, IndexedSlices) and gradient_tensors(g):
        values, indices = (memo[id(c)] if isinstance(c, Tensor) else c
                           for c in (g.values, g.indices))
        return IndexedSlices(np.asarray(values, dtype=var.dtype, order="C"),
                             np.asarray(indices), tuple(var.shape))
    return g
