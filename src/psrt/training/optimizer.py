"""Optimizers whose updates run on the ps tasks (TF1's tf.train.*Optimizer).

An optimizer is bound to the variables it trains when ``minimize`` or ``apply_gradients``
is called; a :class:`psrt.Session` registers each variable on its ps task together with the
optimizer's kernel and hyper-parameters, and every push then applies that kernel there
(csrc/kernels.cc, TF1's exact formulas). The worker only computes gradients.
:class:`SyncReplicasOptimizer` wraps one of them for synchronous training: the ps tasks
average the gradients of several workers per step before applying them.
"""

from __future__ import annotations

import logging
import numbers
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt.framework.autodiff import Plan
from psrt.framework.tensor import Tensor
from psrt.ops import gradients_impl as _gradients_impl
from psrt.ops import variables as _variables
from psrt.ops.embedding_ops import looked_up
from psrt.ops.training_ops import SlotVariable, TrainOp, _LazyGradient
from psrt.ops.variables import PartitionedVariable, Variable
from psrt.training import training_util

_logger = logging.getLogger("psrt")


def _check_lr(learning_rate: Any, who: str) -> Any:
    if isinstance(learning_rate, Tensor) or callable(learning_rate):
        return learning_rate
    if not isinstance(learning_rate, numbers.Real) or isinstance(learning_rate, bool):
        # (A psrt.Tensor is accepted too; tests/test_optimizers.py pins this message.)
        raise TypeError(f"{who}: learning_rate must be a number or a callable returning one; "
                        f"got {learning_rate!r}")
    return float(learning_rate)


def _check_real(value: Any, what: str, who: str) -> float:
    """``value`` as a float, or TypeError naming ``what``, the optimizer and the value."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{who}: {what} must be a number; got {value!r}")
    return float(value)


class Optimizer:
    """Base class of the optimizers, as ``tf.train.Optimizer``.

    Args:
        use_locking: If True, updates of one variable are serialized on its ps task;
            otherwise they race Hogwild style, as TF's ``use_locking=False``.
        name: The optimizer's name; slot variables are named ``<var>/<name>``.

    Raises:
        ValueError: ``name`` is empty.
    """

    _kernel = ""
    _slot_keys: tuple[str, ...] = ()

    def __init__(self, use_locking: bool, name: str) -> None:
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = bool(use_locking)
        self._name = name
        self._slots: dict[tuple[int, str], SlotVariable] = {}

    def get_name(self) -> str:
        """The optimizer's name (str)."""
        return self._name

    def _learning_rate_value(self, read: Callable[[Tensor], Any] | None = None) -> float:
        """The learning rate of the step being pushed (float): the number given, the
        callable's value now, or the value of a :class:`psrt.Tensor` learning rate (a
        ``psrt.train.*_decay`` schedule, a placeholder) computed by ``read`` in the run.

        Raises:
            ValueError: a Tensor learning rate and no ``read`` (outside a run).
        """
        lr = self._learning_rate
        if isinstance(lr, Tensor):
            if read is None:
                raise ValueError(f"{self._name}: the learning rate {lr!r} is a psrt.Tensor, "
                                 f"computed in a Session.run only")
            return float(np.asarray(read(lr)))
        return float(lr() if callable(lr) else lr)

    def _hyper(self) -> dict[str, float]:
        """Hyper-parameters sent when a variable is registered on its ps task. Every push
        carries the step's learning rate; a Tensor one registers as 0.0."""
        lr = 0.0 if isinstance(self._learning_rate, Tensor) else self._learning_rate_value()
        return {"learning_rate": lr, "use_locking": float(self._use_locking)}

    def get_slot_names(self) -> list[str]:
        """Slot names, sorted (e.g. ``["accumulator"]`` for Adagrad)."""
        return sorted(self._slot_keys)

    def get_slot(self, var: Any, name: str) -> SlotVariable | None:
        """The slot ``name`` of ``var``, or None when ``var`` is not trained by this
        optimizer, as ``tf.train.Optimizer.get_slot``."""
        return self._slots.get((id(var), name))

    def variables(self) -> list[SlotVariable]:
        """The optimizer's slot variables, as ``tf.train.Optimizer.variables``."""
        return list(self._slots.values())

    def _slot_var_names(self) -> list[str]:
        return [self._name if i == 0 else f"{self._name}_{i}" for i in range(len(self._slot_keys))]

    def _bind(self, var: Any) -> None:
        """Makes this optimizer's kernel the one applied to ``var`` on its ps task."""
        parts = var._get_variable_list() if isinstance(var, PartitionedVariable) else [var]
        for p in parts:
            if not isinstance(p, Variable):
                raise TypeError(f"can only optimize psrt Variables; got {p!r}")
            if p.dtype.kind == "i":
                raise ValueError(f"variable '{p.name}' is {p.dtype.name}; optimizers need "
                                 f"float32 or float64")
            bound = p._optimizer
            if bound is not None and bound is not self and (
                    bound._kernel != self._kernel or bound._hyper() != self._hyper()):
                raise ValueError(
                    f"variable '{p.name}' is already trained by {bound.get_name()} "
                    f"({bound._kernel}); psrt applies one optimizer per variable on the ps, "
                    f"so it cannot also be trained by {self._name} ({self._kernel})")
            p._optimizer = self
        for i, (key, vname) in enumerate(zip(self._slot_keys, self._slot_var_names())):
            if (id(var), key) not in self._slots:
                self._slots[(id(var), key)] = SlotVariable(var, key, i, vname)

    def compute_gradients(self, loss: Any, var_list: Sequence[Any] | None = None,
                          gate_gradients: int = 1, aggregation_method: Any = None,
                          colocate_gradients_with_ops: bool = False,
                          grad_loss: Any = None) -> list[tuple[Any, Any]]:
        """Pairs each variable with its (lazy) gradient from ``loss``, as TF.

        Args:
            loss: A :class:`psrt.Tensor` computed from the variables by forward numpy code
                (``psrt.py_func``, ``psrt.function``): its gradients are derived when the
                train op runs, by reverse-mode autodiff (autograd), as ``tf.gradients``
                (a non-scalar loss is summed). Or a callable ``loss(*values, **feeds) ->
                (loss, grads)``: ``values`` are the variables' current values (read-only
                numpy arrays, in ``var_list`` order), ``feeds`` the run's ``feed_dict`` by
                name; ``grads`` is a sequence aligned with ``var_list`` of arrays of each
                variable's shape and dtype, :class:`IndexedSlices`, or None (no update).
            var_list: Variables to train; default: the trainable variables (for a loss
                tensor, those it reads).

        Returns:
            A list of ``(gradient, variable)`` pairs for :meth:`apply_gradients`; for a loss
            tensor, the gradient of a variable it does not read is None, as TF's. The
            gradients of a loss tensor are ``tf.gradients``' (Tensors, and for variables
            read through embedding lookups ``IndexedSlices`` of tensors) to clip,
            summarize or fetch (with the loss, from the same forward pass); given back
            unchanged, the train step computes them in its own backward pass (row-sparse,
            per part), and changed (``clip_by_global_norm``...), they are computed in the
            step and pushed.

        Raises:
            TypeError: ``loss`` is neither a Tensor nor callable.
            ValueError: no variables to optimize.
        """
        if isinstance(loss, Tensor):
            plan = Plan([loss])
            reached = {id(v) for v in plan.variables}
            if plan.run_inputs:  # variables read through embedding lookups (their rows)
                reached |= looked_up(plan)
            if var_list is None:
                # TF's default: every trainable variable (a partitioned one whole, when the
                # loss reads it whole); those the loss does not read get None.
                var_list = []
                for v in _variables.trainable_variables():
                    whole = v._partition[0] if v._partition is not None else None
                    if whole is not None and id(whole) in reached:
                        if whole not in var_list:
                            var_list.append(whole)
                    else:
                        var_list.append(v)
            var_list = list(var_list)
            if not var_list:
                raise ValueError("No variables to optimize.")
            plain = [v for v in var_list if id(v) in reached]
            # Gradient tensors (tf.gradients'; IndexedSlices for variables read through
            # embedding lookups) a script can clip, summarize and fetch; given back
            # unchanged, the train step computes them in its own backward pass (row-sparse,
            # per part).
            grads = iter(_gradients_impl.gradients(loss, plain))
            return [(next(grads) if id(v) in reached else None, v) for v in var_list]
        if not callable(loss):
            raise TypeError(f"loss must be a psrt.Tensor, or a callable returning (loss, "
                            f"grads) from the variables' values; got {loss!r}")
        if var_list is None:
            var_list = _variables.trainable_variables()
        var_list = list(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        return [(_LazyGradient(loss, i), v) for i, v in enumerate(var_list)]

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]],
                        global_step: Variable | None = None,
                        name: str | None = None) -> TrainOp:
        """An op applying gradients to variables on their ps tasks, as TF.

        Args:
            grads_and_vars: ``(gradient, variable)`` pairs. A gradient is a numpy array of
                the variable's shape and dtype (C-contiguous), an :class:`IndexedSlices`, a
                feed name (str) whose ``feed_dict`` value is the gradient at run time, a pair
                from :meth:`compute_gradients`, or None (the variable is skipped).
            global_step: If given, a scalar variable incremented by one with each push, on
                its ps task: an integer one (int64, int32) in the push itself, a float one
                (TF adds 1 to any global_step) by an assign_add after it.
            name: Name of the returned op.

        Returns:
            A :class:`TrainOp`.

        Raises:
            ValueError: no pairs ("No variables provided."), or every gradient is None.
            TypeError: a variable is not a psrt Variable.
        """
        pairs = list(grads_and_vars)
        if not pairs:
            raise ValueError("No variables provided.")
        for g, v in pairs:
            if not isinstance(v, (Variable, PartitionedVariable)):
                raise TypeError(f"apply_gradients needs psrt Variables; got {v!r}")
        live = [(g, v) for g, v in pairs if g is not None]
        if not live:
            raise ValueError("No gradients provided for any variable: "
                             f"{[v.name for _, v in pairs]}.")
        if global_step is not None:
            _check_step(global_step)
        for _, v in live:
            self._bind(v)
        own = _own_backward(live)
        if own is not None:
            # Unchanged tensors of compute_gradients: the loss's backward pass in the step.
            op = TrainOp(self, [v for _, v in live], None, None, global_step, name)
            op.loss = own
            return op
        lazy = [g for g, _ in live if isinstance(g, _LazyGradient)]
        if lazy:
            fns = {id(g.loss_fn) for g in lazy}
            if len(lazy) != len(live) or len(fns) != 1:
                raise ValueError("apply_gradients: mix gradients from one compute_gradients "
                                 "call only with each other")
            loss_fn = lazy[0].loss_fn
            if not callable(loss_fn):
                # A loss tensor: autodiff gives the variables it reads their gradients.
                op = TrainOp(self, [v for _, v in live], None, None, global_step, name)
                op.loss = loss_fn
                return op
            n = len(pairs)
            if len(lazy) != n or sorted(g.index for g in lazy) != list(range(n)):
                raise ValueError("apply_gradients: pass every pair from compute_gradients "
                                 "unchanged (drop a variable from var_list instead of setting "
                                 "its gradient to None)")
            return TrainOp(self, [v for _, v in pairs], loss_fn, None, global_step, name)
        return TrainOp(self, [v for _, v in live], None, [g for g, _ in live], global_step,
                       name)

    def minimize(self, loss: Any, global_step: Variable | None = None,
                 var_list: Sequence[Any] | None = None, gate_gradients: int = 1,
                 aggregation_method: Any = None, colocate_gradients_with_ops: bool = False,
                 name: str | None = None, grad_loss: Any = None) -> TrainOp:
        """``compute_gradients`` then ``apply_gradients``, as TF. See those for ``loss``.

        Raises:
            ValueError: ``loss`` is a tensor that reads none of the variables (TF's "No
                gradients provided for any variable, check your graph ...").
        """
        grads_and_vars = self.compute_gradients(loss, var_list)
        if all(g is None for g, _ in grads_and_vars):
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do "
                f"not support gradients, between variables {[v.name for _, v in grads_and_vars]}"
                f" and loss {loss!r}.")
        return self.apply_gradients(grads_and_vars, global_step, name)


def _own_backward(live: list[tuple[Any, Any]]) -> Any:
    """The loss tensor when every gradient is the unchanged tensor :meth:`compute_gradients`
    made for its variable from that loss (one backward pass), else None."""
    loss = None
    for g, v in live:
        src = _gradients_impl.source_of(g)
        if src is None:
            return None
        ys, x = src
        if ys is None or len(ys) != 1 or x is not v:
            return None
        if loss is None:
            loss = ys[0]
        elif ys[0] is not loss:
            return None
    return loss


def _check_step(global_step: Any) -> None:
    """As TF's ``apply_gradients``, which adds 1 to any ``global_step``: a scalar Variable
    of any numeric dtype, or TypeError with TF's messages."""
    if isinstance(global_step, Variable) and global_step.dtype.kind == "f":
        if global_step.shape != ():
            raise TypeError(f'Existing "global_step" is not scalar: {global_step.shape}')
        return
    training_util.assert_global_step(global_step)


# ---- TF1's other optimizers (fused kernels in csrc/kernels*.cc) ----------------------------

def _non_negative(value: Any, what: str, who: str) -> float:
    """``value`` as a float >= 0, or TF's ValueError "<what> <value> needs to be positive or
    zero" (tensorflow/python/training/ftrl.py)."""
    v = _check_real(value, what, who)
    if v < 0.0:
        raise ValueError(f"{what} {v:f} needs to be positive or zero")
    return v


# ---- synchronous training ------------------------------------------------------------------


