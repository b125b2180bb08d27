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

from psrt.framework import errors
from psrt.framework.tensor import Plan, Tensor
from psrt.ops import variables as _variables
from psrt.ops.variables import Operation, PartitionedVariable, Variable
from psrt.training import training_util
from psrt.training.basic_session_run_hooks import SessionRunArgs, SessionRunHook

_logger = logging.getLogger("psrt")


class IndexedSlices:
    """A row-sparse gradient, as ``tf.IndexedSlices``: ``values[j]`` is the gradient of row
    ``indices[j]`` of a variable of ``dense_shape``. Duplicate indices are summed on the ps.

    Args:
        values: Array [k, *dense_shape[1:]] of the variable's dtype.
        indices: int64 array [k] of row indices in [0, dense_shape[0]).
        dense_shape: The variable's shape (optional).
    """

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None) -> None:
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    def __repr__(self) -> str:
        return (f"IndexedSlices(indices={np.shape(self.indices)}, "
                f"values={np.shape(self.values)}, dense_shape={self.dense_shape})")


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

    def __init__(self, optimizer: "Optimizer", var_list: Sequence[Any],
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
            tensor, the gradient of a variable it does not read is None, as TF's.

        Raises:
            TypeError: ``loss`` is neither a Tensor nor callable.
            ValueError: no variables to optimize.
        """
        if isinstance(loss, Tensor):
            plan = Plan([loss])
            reached = {id(v) for v in plan.variables}
            if plan.run_inputs:  # variables read through embedding lookups (their rows)
                from psrt.ops.embedding_ops import looked_up  # noqa: PLC0415  (imports us)

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
            return [(_LazyGradient(loss, i) if id(v) in reached else None, v)
                    for i, v in enumerate(var_list)]
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


def _check_step(global_step: Any) -> None:
    """As TF's ``apply_gradients``, which adds 1 to any ``global_step``: a scalar Variable
    of any numeric dtype, or TypeError with TF's messages."""
    if isinstance(global_step, Variable) and global_step.dtype.kind == "f":
        if global_step.shape != ():
            raise TypeError(f'Existing "global_step" is not scalar: {global_step.shape}')
        return
    training_util.assert_global_step(global_step)


class GradientDescentOptimizer(Optimizer):
    """``var -= learning_rate * grad``, as ``tf.train.GradientDescentOptimizer``.

    Args:
        learning_rate: float, or a callable returning one (read at each step).
        use_locking: Serialize updates per variable.
        name: Default "GradientDescent".
    """

    _kernel = "GradientDescent"

    def __init__(self, learning_rate: Any, use_locking: bool = False,
                 name: str = "GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)


class AdagradOptimizer(Optimizer):
    """Adagrad, as ``tf.train.AdagradOptimizer``: ``accum += g*g; var -= lr*g/sqrt(accum)``
    (no epsilon). The slot ``accumulator`` (variable ``<var>/Adagrad``) starts at
    ``initial_accumulator_value``.

    Args:
        learning_rate: float, or a callable returning one.
        initial_accumulator_value: Starting value of the accumulators; must be positive.
        use_locking: Serialize updates per variable.
        name: Default "Adagrad".

    Raises:
        ValueError: ``initial_accumulator_value`` <= 0 (TF's message).
    """

    _kernel = "Adagrad"
    _slot_keys = ("accumulator",)

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 use_locking: bool = False, name: str = "Adagrad") -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._initial_accumulator_value = float(initial_accumulator_value)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "slot_init": self._initial_accumulator_value}


class MomentumOptimizer(Optimizer):
    """Momentum, as ``tf.train.MomentumOptimizer``: ``accum = accum*momentum + g``, then
    ``var -= lr*accum`` or, with ``use_nesterov``, ``var -= lr*g + lr*momentum*accum``. The
    slot ``momentum`` (variable ``<var>/Momentum``) starts at zero.

    Args:
        learning_rate: float, or a callable returning one.
        momentum: float.
        use_locking: Serialize updates per variable.
        name: Default "Momentum".
        use_nesterov: Use Nesterov momentum.
    """

    _kernel = "Momentum"
    _slot_keys = ("momentum",)

    def __init__(self, learning_rate: Any, momentum: float, use_locking: bool = False,
                 name: str = "Momentum", use_nesterov: bool = False) -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        if not isinstance(momentum, numbers.Real):
            raise TypeError(f"{name}: momentum must be a number; got {momentum!r}")
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "momentum": self._momentum,
                "use_nesterov": float(self._use_nesterov)}


class AdamOptimizer(Optimizer):
    """Adam, as ``tf.train.AdamOptimizer`` (TF1's formula: ``lr_t = lr*sqrt(1-beta2^t)/
    (1-beta1^t)``, ``var -= lr_t*m/(sqrt(v)+epsilon)``). Slots ``m`` and ``v`` (variables
    ``<var>/Adam`` and ``<var>/Adam_1``) start at zero. The beta powers are kept per variable
    on its ps task (TF keeps one pair per optimizer; the values are the same when every
    variable is updated at every step). Row-sparse gradients update only the rows given
    (LazyAdam semantics).

    Args:
        learning_rate: float (default 0.001), or a callable returning one.
        beta1: float (default 0.9).
        beta2: float (default 0.999).
        epsilon: float (default 1e-8), added to ``sqrt(v)`` ("epsilon hat").
        use_locking: Serialize updates per variable.
        name: Default "Adam".
    """

    _kernel = "Adam"
    _slot_keys = ("m", "v")

    def __init__(self, learning_rate: Any = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, use_locking: bool = False, name: str = "Adam") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._beta1 = float(beta1)
        self._beta2 = float(beta2)
        self._epsilon = float(epsilon)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "beta1": self._beta1, "beta2": self._beta2,
                "epsilon": self._epsilon}


# ---- TF1's other optimizers (fused kernels in csrc/kernels*.cc) ----------------------------

def _non_negative(value: Any, what: str, who: str) -> float:
    """``value`` as a float >= 0, or TF's ValueError "<what> <value> needs to be positive or
    zero" (tensorflow/python/training/ftrl.py)."""
    v = _check_real(value, what, who)
    if v < 0.0:
        raise ValueError(f"{what} {v:f} needs to be positive or zero")
    return v


class AdadeltaOptimizer(Optimizer):
    """Adadelta, as ``tf.train.AdadeltaOptimizer`` (tensorflow/core/kernels/training_ops.cc
    ApplyAdadelta): ``accum = rho*accum + (1-rho)*g*g``; ``update = sqrt(accum_update +
    epsilon) / sqrt(accum + epsilon) * g``; ``var -= lr*update``; ``accum_update =
    rho*accum_update + (1-rho)*update*update``. Slots ``accum`` and ``accum_update``
    (variables ``<var>/Adadelta`` and ``<var>/Adadelta_1``) start at zero.

    Args:
        learning_rate: float (default 0.001, TF's), a :class:`psrt.Tensor` (e.g. a
            ``psrt.train.*_decay`` schedule) or a callable returning a float, read at each step.
        rho: The decay rate (float, default 0.95).
        epsilon: float (default 1e-8), added inside both square roots.
        use_locking: Serialize updates per variable.
        name: Default "Adadelta".

    Raises:
        TypeError: ``learning_rate``, ``rho`` or ``epsilon`` is not a number.
    """

    _kernel = "Adadelta"
    _slot_keys = ("accum", "accum_update")

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.95, epsilon: float = 1e-8,
                 use_locking: bool = False, name: str = "Adadelta") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._rho = _check_real(rho, "rho", name)
        self._epsilon = _check_real(epsilon, "epsilon", name)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "rho": self._rho, "epsilon": self._epsilon}


class AdagradDAOptimizer(Optimizer):
    """Adagrad dual averaging, as ``tf.train.AdagradDAOptimizer`` (training_ops.cc
    ApplyAdagradDA): ``g_acc += g``; ``gg_acc += g*g``; ``var = -sign(g_acc) * lr *
    max(|g_acc| - l1*t, 0) / (l2*t*lr + sqrt(gg_acc))`` with ``t`` the step count. Slots
    ``gradient_accumulator`` (zeros) and ``gradient_squared_accumulator`` (starting at
    ``initial_gradient_squared_accumulator_value``), variables ``<var>/AdagradDA`` and
    ``<var>/AdagradDA_1``.

    ``t``: TF passes ``global_step + 1``; psrt's ps task counts the updates applied to the
    variable since it was initialized, plus one: the same value when training starts at
    global step 0 and every step updates the variable once. ``global_step`` is required,
    as TF's signature has it. The count is not saved in checkpoints: after a restore it
    starts again at 1 (it only matters with ``l1`` or ``l2`` > 0).

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        global_step: The global step variable (required, as TF).
        initial_gradient_squared_accumulator_value: float > 0 (default 0.1).
        l1_regularization_strength: float >= 0 (default 0.0).
        l2_regularization_strength: float >= 0 (default 0.0).
        use_locking: Serialize updates per variable.
        name: Default "AdagradDA".

    Raises:
        ValueError: ``initial_gradient_squared_accumulator_value`` <= 0 (TF's message), or
            a regularization strength < 0 (the message of TF's kernel check).
        TypeError: ``global_step`` is not a psrt Variable, or a number is not a number.
    """

    _kernel = "AdagradDA"
    _slot_keys = ("gradient_accumulator", "gradient_squared_accumulator")

    def __init__(self, learning_rate: Any, global_step: Any,
                 initial_gradient_squared_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "AdagradDA") -> None:
        init = _check_real(initial_gradient_squared_accumulator_value,
                           "initial_gradient_squared_accumulator_value", name)
        if init <= 0.0:
            raise ValueError(f"initial_gradient_squared_accumulator_value must be positive: "
                             f"{initial_gradient_squared_accumulator_value}")
        if not isinstance(global_step, Variable):
            raise TypeError(f"{name}: global_step must be the global step psrt.Variable "
                            f"(psrt.train.get_or_create_global_step()); got {global_step!r}")
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._global_step = global_step
        self._initial_gradient_squared_accumulator_value = init
        self._l1 = _non_negative(l1_regularization_strength, "l1_regularization_strength",
                                 name)
        self._l2 = _non_negative(l2_regularization_strength, "l2_regularization_strength",
                                 name)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "slot_init": 0.0,
                "slot_init2": self._initial_gradient_squared_accumulator_value,
                "l1": self._l1, "l2": self._l2}


class FtrlOptimizer(Optimizer):
    """FTRL-proximal, as ``tf.train.FtrlOptimizer`` (training_ops.cc ApplyFtrl, and
    ApplyFtrlV2 when ``l2_shrinkage_regularization_strength`` > 0): with ``p =
    -learning_rate_power``, ``g' = g + 2*l2_shrinkage*var`` (V2), ``accum_new = accum +
    g*g``; ``linear += g' - (accum_new^p - accum^p)/lr * var``; ``var = (sign(linear)*l1 -
    linear) / (accum_new^p/lr + 2*l2)`` if ``|linear| > l1`` else 0; ``accum = accum_new``.
    Slots ``accum`` (starting at ``initial_accumulator_value``) and ``linear`` (zeros),
    variables ``<var>/<accum_name or name>`` and ``<var>/<linear_name or name>`` (TF's
    ``<var>/Ftrl`` and ``<var>/Ftrl_1`` by default).

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        learning_rate_power: float <= 0 (default -0.5).
        initial_accumulator_value: float >= 0 (default 0.1).
        l1_regularization_strength: float >= 0 (default 0.0).
        l2_regularization_strength: float >= 0 (default 0.0).
        use_locking: Serialize updates per variable.
        name: Default "Ftrl".
        accum_name: Suffix of the ``accum`` slot variable's name (default ``name``).
        linear_name: Suffix of the ``linear`` slot variable's name (default ``name``).
        l2_shrinkage_regularization_strength: float >= 0 (default 0.0): TF's magnitude
            penalty (FtrlV2); on row-sparse gradients only the given rows shrink.

    Raises:
        ValueError: an argument outside its range, with TF's message (e.g.
            "learning_rate_power 0.500000 needs to be negative or zero").
    """

    _kernel = "Ftrl"
    _slot_keys = ("accum", "linear")

    def __init__(self, learning_rate: Any, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "Ftrl", accum_name: str | None = None,
                 linear_name: str | None = None,
                 l2_shrinkage_regularization_strength: float = 0.0) -> None:
        super().__init__(use_locking, name)
        init = _non_negative(initial_accumulator_value, "initial_accumulator_value", name)
        power = _check_real(learning_rate_power, "learning_rate_power", name)
        if power > 0.0:
            raise ValueError(f"learning_rate_power {power:f} needs to be negative or zero")
        self._l1 = _non_negative(l1_regularization_strength, "l1_regularization_strength",
                                 name)
        self._l2 = _non_negative(l2_regularization_strength, "l2_regularization_strength",
                                 name)
        self._l2_shrinkage = _non_negative(l2_shrinkage_regularization_strength,
                                           "l2_shrinkage_regularization_strength", name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._learning_rate_power = power
        self._initial_accumulator_value = init
        self._accum_name = accum_name
        self._linear_name = linear_name

    def _slot_var_names(self) -> list[str]:
        # TF makes each slot variable "<var>/<accum_name or name>" and
        # "<var>/<linear_name or name>", the second uniquified with "_1" when they clash.
        first = self._accum_name or self._name
        second = self._linear_name or self._name
        return [first, f"{second}_1" if second == first else second]

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "slot_init": self._initial_accumulator_value,
                "slot_init2": 0.0, "lr_power": self._learning_rate_power, "l1": self._l1,
                "l2": self._l2, "l2_shrinkage": self._l2_shrinkage}


class ProximalGradientDescentOptimizer(Optimizer):
    """Proximal gradient descent (FOBOS), as ``tf.train.ProximalGradientDescentOptimizer``
    (training_ops.cc ApplyProximalGradientDescent): ``prox = var - lr*g``; ``var =
    sign(prox) * max(|prox| - lr*l1, 0) / (1 + lr*l2)``. No slots.

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        l1_regularization_strength: float >= 0 (default 0.0).
        l2_regularization_strength: float >= 0 (default 0.0).
        use_locking: Serialize updates per variable.
        name: Default "ProximalGradientDescent".

    Raises:
        ValueError: a regularization strength < 0 (TF's kernel refuses it).
    """

    _kernel = "ProximalGradientDescent"

    def __init__(self, learning_rate: Any, l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalGradientDescent") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._l1 = _non_negative(l1_regularization_strength, "l1_regularization_strength",
                                 name)
        self._l2 = _non_negative(l2_regularization_strength, "l2_regularization_strength",
                                 name)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "l1": self._l1, "l2": self._l2}


class ProximalAdagradOptimizer(Optimizer):
    """Proximal Adagrad, as ``tf.train.ProximalAdagradOptimizer`` (training_ops.cc
    ApplyProximalAdagrad): ``accum += g*g``; ``rate = lr/sqrt(accum)``; ``prox = var -
    rate*g``; ``var = sign(prox) * max(|prox| - rate*l1, 0) / (1 + rate*l2)``. Slot
    ``accumulator`` (variable ``<var>/ProximalAdagrad``) starts at
    ``initial_accumulator_value``.

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        initial_accumulator_value: float > 0 (default 0.1).
        l1_regularization_strength: float >= 0 (default 0.0).
        l2_regularization_strength: float >= 0 (default 0.0).
        use_locking: Serialize updates per variable.
        name: Default "ProximalAdagrad".

    Raises:
        ValueError: ``initial_accumulator_value`` <= 0 (TF's message), a regularization
            strength < 0.
    """

    _kernel = "ProximalAdagrad"
    _slot_keys = ("accumulator",)

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalAdagrad") -> None:
        init = _check_real(initial_accumulator_value, "initial_accumulator_value", name)
        if init <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._initial_accumulator_value = init
        self._l1 = _non_negative(l1_regularization_strength, "l1_regularization_strength",
                                 name)
        self._l2 = _non_negative(l2_regularization_strength, "l2_regularization_strength",
                                 name)

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "slot_init": self._initial_accumulator_value,
                "l1": self._l1, "l2": self._l2}


class RMSPropOptimizer(Optimizer):
    """RMSProp, as ``tf.train.RMSPropOptimizer`` (training_ops.cc ApplyRMSProp and, with
    ``centered``, ApplyCenteredRMSProp): ``ms = decay*ms + (1-decay)*g*g``; centered also
    ``mg = decay*mg + (1-decay)*g`` and ``ms - mg*mg`` in place of ``ms`` below; ``mom =
    momentum*mom + lr*g/sqrt(ms + epsilon)``; ``var -= mom``. Slots ``rms`` (starting at
    ones, as TF), ``momentum`` (zeros) and, centered, ``mg`` (zeros); their variables are
    named in TF's creation order: ``<var>/RMSProp`` (rms), then ``<var>/RMSProp_1`` (mg when
    centered, else momentum), then ``<var>/RMSProp_2`` (momentum when centered).

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        decay: The discounting factor of the history (float, default 0.9).
        momentum: float (default 0.0).
        epsilon: float (default 1e-10, TF1's).
        use_locking: Serialize updates per variable.
        centered: Normalize by the estimated variance of the gradient (default False).
        name: Default "RMSProp".

    Raises:
        TypeError: ``decay``, ``momentum`` or ``epsilon`` is not a number.
    """

    def __init__(self, learning_rate: Any, decay: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-10, use_locking: bool = False, centered: bool = False,
                 name: str = "RMSProp") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._decay = _check_real(decay, "decay", name)
        self._momentum = _check_real(momentum, "momentum", name)
        self._epsilon = _check_real(epsilon, "epsilon", name)
        self._centered = bool(centered)
        # The kernels' slot order: rms, momentum (, mg).
        self._kernel = "CenteredRMSProp" if self._centered else "RMSProp"
        self._slot_keys = ("rms", "momentum", "mg") if self._centered else ("rms", "momentum")

    def _slot_var_names(self) -> list[str]:
        n = self._name
        return [n, f"{n}_2", f"{n}_1"] if self._centered else [n, f"{n}_1"]

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "rho": self._decay, "momentum": self._momentum,
                "epsilon": self._epsilon, "slot_init": 1.0, "slot_init2": 0.0,
                "slot_init3": 0.0}


# ---- synchronous training ------------------------------------------------------------------

def _replica_count(value: Any, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"SyncReplicasOptimizer: {what} must be an int >= 1; got {value!r}")
    if value < 1:
        raise ValueError(f"SyncReplicasOptimizer: {what} must be an int >= 1; got {value}")
    return int(value)


class SyncReplicasOptimizer(Optimizer):
    """Synchronous data-parallel training, as ``tf.train.SyncReplicasOptimizer``.

    Wraps ``opt``. At each step the gradients of ``replicas_to_aggregate`` (R) replicas are
    averaged per variable (the mean, not the sum, as TF's ``ConditionalAccumulator``; for
    :class:`IndexedSlices`, each row over the gradients that hold it, as TF's
    ``SparseConditionalAccumulator``) and applied once with ``opt``'s update, and the
    global step advances by one. A gradient computed at an older step than the variable's
    current one is stale and dropped. With
    ``total_num_replicas`` > R the extra workers are backups: each step takes the first R
    fresh gradients and later ones are dropped as stale. With ``total_num_replicas`` < R each
    worker computes ``ceil(R / total_num_replicas)`` gradients (one per run of the train op,
    on the same variable values) per step.

    How psrt does it: the ps task holding a variable collects the gradients, tagged with the
    step they were computed at, and applies their mean when R have arrived; the global step
    counts tagged increments the same way. There is no token queue and no chief queue
    runner, and no ``sync_rep_local_step`` variable: each session keeps its step. One run of
    the returned train op computes gradients at the session's step, pushes them, and (after
    a worker's last gradient of the step) waits until the step is complete and pulls the new
    values, in one parallel round trip. The wait is bounded by
    ``ConfigProto(sync_timeout_secs)`` (``operation_timeout_in_ms`` when set); past it the
    run raises DeadlineExceededError, naming the step, how many gradients are missing and the
    variable and ps task that waits for them. When a worker's MonitoredSession ends normally
    and too few workers remain to complete a step, the others' runs end with
    OutOfRangeError, which ends their ``with`` block normally.

    :meth:`get_chief_queue_runner`, :meth:`get_init_tokens_op` and the chief's part of
    :meth:`make_session_run_hook` have nothing to do in psrt; they return objects that do
    nothing when run or started, so TF code calling them works unchanged.

    ``variable_averages``: as TF, where the chief's queue runner updates the moving averages
    after each aggregated update, the chief's hook (``make_session_run_hook(is_chief=True)``,
    which MonitoredTrainingSession must be given, as TF) runs
    ``variable_averages.apply(variables_to_average)`` after each of the chief's runs whose
    global step shows a completed step: the averages see the values of that step (the
    chief's run ends only once its step is complete). The op is built in
    :meth:`apply_gradients`, so its shadow variables exist before a Saver is made.

    Example::

        opt = psrt.train.SyncReplicasOptimizer(
            psrt.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
            total_num_replicas=2)
        train_op = opt.minimize(loss_and_grads, global_step=global_step)
        hook = opt.make_session_run_hook(is_chief=(task_index == 0))
        with psrt.train.MonitoredTrainingSession(master=server.target,
                                                 is_chief=(task_index == 0),
                                                 hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run(train_op)

    Args:
        opt: The psrt :class:`Optimizer` whose update applies the averaged gradients (its
            kernel runs on the ps tasks).
        replicas_to_aggregate: R, the number of gradients averaged per variable and step
            (int >= 1).
        total_num_replicas: The number of workers running the train op (int >= 1); default
            R.
        variable_averages: A :class:`psrt.train.ExponentialMovingAverage` updated by the
            chief after each step, or None.
        variables_to_average: The variables it averages (default: the trainable ones, as
            ``ExponentialMovingAverage.apply(None)``).
        use_locking: Kept for TF's signature; ``opt``'s ``use_locking`` governs the update.
        name: Default "sync_replicas".

    Raises:
        TypeError: ``opt`` is not a psrt Optimizer, or is a SyncReplicasOptimizer;
            ``replicas_to_aggregate`` or ``total_num_replicas`` is not an int;
            ``variable_averages`` is not an ExponentialMovingAverage.
        ValueError: ``replicas_to_aggregate`` or ``total_num_replicas`` is < 1.
    """

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int,
                 total_num_replicas: int | None = None, variable_averages: Any = None,
                 variables_to_average: Any = None, use_locking: bool = False,
                 name: str = "sync_replicas") -> None:
        if not isinstance(opt, Optimizer) or isinstance(opt, SyncReplicasOptimizer):
            raise TypeError(f"SyncReplicasOptimizer wraps a psrt Optimizer (e.g. "
                            f"psrt.train.GradientDescentOptimizer); got {opt!r}")
        replicas = _replica_count(replicas_to_aggregate, "replicas_to_aggregate")
        total = replicas if total_num_replicas is None else _replica_count(
            total_num_replicas, "total_num_replicas")
        if variable_averages is not None:
            from psrt.training.moving_averages import ExponentialMovingAverage  # noqa: PLC0415
            if not isinstance(variable_averages, ExponentialMovingAverage):
                raise TypeError(f"SyncReplicasOptimizer: variable_averages must be a "
                                f"psrt.train.ExponentialMovingAverage or None; got "
                                f"{variable_averages!r}")
        super().__init__(use_locking, name)
        _logger.info("SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
                     replicas, total)
        self._opt = opt
        self._replicas_to_aggregate = replicas
        self._total_num_replicas = total
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._gradients_applied = False
        self._global_step: Variable | None = None
        self._chief_queue_runner: _NoQueueRunner | None = None
        self._averages_op: Operation | None = None

    # The wrapped optimizer's kernel, learning rate and hyper-parameters are the update's.
    def _learning_rate_value(self, read: Callable[[Tensor], Any] | None = None) -> float:
        return self._opt._learning_rate_value(read)

    def _hyper(self) -> dict[str, float]:
        return self._opt._hyper()

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        """``opt.compute_gradients``: see :meth:`Optimizer.compute_gradients`."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]],
                        global_step: Variable | None = None,
                        name: str | None = None) -> TrainOp:
        """An op that runs one synchronous step of this worker, as TF's
        ``SyncReplicasOptimizer.apply_gradients``.

        Binds the variables to the wrapped optimizer (its kernel applies the averaged
        gradients on their ps tasks) and marks them and ``global_step`` as trained
        synchronously with ``(replicas_to_aggregate, total_num_replicas)``; sessions created
        afterwards register them so. Asynchronous train ops of the same variables then fail
        with FailedPreconditionError on the ps.

        Args:
            grads_and_vars: ``(gradient, variable)`` pairs, as for
                :meth:`Optimizer.apply_gradients` (from :meth:`compute_gradients`, numpy
                arrays, :class:`IndexedSlices`, feed names, or None to skip a variable).
            global_step: The int64 scalar global step; required (it tells stale gradients).
            name: Name of the returned op; default the optimizer's name.

        Returns:
            A :class:`TrainOp` whose ``Session.run`` value is the loss.

        Raises:
            ValueError: ``grads_and_vars`` is empty ("Must supply at least one variable"),
                ``global_step`` is None ("Global step is required to check staleness"), or a
                variable or the global step is already trained synchronously with other
                ``replicas_to_aggregate``/``total_num_replicas``; and the errors of
                :meth:`Optimizer.apply_gradients`.
            TypeError: ``global_step`` is not an int64 scalar Variable.
        """
        pairs = list(grads_and_vars)
        if not pairs:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        training_util.assert_global_step(global_step)
        train_op = self._opt.apply_gradients(pairs, global_step, name or self._name)
        sync = (self._replicas_to_aggregate, self._total_num_replicas)
        marked = list(train_op.variables) + [global_step]
        for p in marked:
            if p._sync is not None and p._sync != sync:
                what = (f"global step '{p.name}' is already advanced" if p is global_step else
                        f"variable '{p.name}' is already trained")
                raise ValueError(
                    f"{what} synchronously with replicas_to_aggregate={p._sync[0]}, "
                    f"total_num_replicas={p._sync[1]}; it cannot also be with "
                    f"replicas_to_aggregate={sync[0]}, total_num_replicas={sync[1]}")
        for p in marked:
            p._sync = sync
        train_op.sync = sync
        self._global_step = global_step
        self._chief_queue_runner = _NoQueueRunner(f"{self._name}/sync_token_q")
        # TF's initialization ops, for code that passes them to a Scaffold or Supervisor:
        # nothing to initialize in psrt (each session reads the global step itself).
        self.local_step_init_op = Operation("noop", name="sync_rep_local_step_init")
        self.chief_init_op = Operation("noop", name=f"{self._name}/chief_init")
        self.ready_for_local_init_op = _variables.report_uninitialized_variables(
            _variables.global_variables())
        if self._variable_averages is not None and self._averages_op is None:
            # TF: the chief's update runs variable_averages.apply(variables_to_average)
            # after the aggregated update; here the chief's hook runs this op.
            self._averages_op = self._variable_averages.apply(self._variables_to_average)
        self._gradients_applied = True
        return train_op

    def get_chief_queue_runner(self) -> _NoQueueRunner:
        """TF's chief queue runner, which psrt does not need (the ps tasks aggregate): an
        object with ``tf.train.QueueRunner``'s ``create_threads`` that starts no thread.

        Raises:
            ValueError: called before :meth:`apply_gradients` (TF's message).
        """
        if self._gradients_applied is False:
            raise ValueError("Should be called after apply_gradients().")
        assert self._chief_queue_runner is not None
        return self._chief_queue_runner

    def get_slot(self, *args: Any, **kwargs: Any) -> SlotVariable | None:
        """``opt.get_slot``: see :meth:`Optimizer.get_slot`."""
        return self._opt.get_slot(*args, **kwargs)

    def variables(self) -> list[SlotVariable]:
        """``opt.variables()``: the wrapped optimizer's slot variables."""
        return self._opt.variables()

    def get_slot_names(self, *args: Any, **kwargs: Any) -> list[str]:
        """``opt.get_slot_names()``."""
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens: int = -1) -> Operation:
        """TF's op filling the token queue, which psrt does not have: an op that does
        nothing when run (its ``Session.run`` value is None).

        Args:
            num_tokens: As TF: -1 (default) or at least ``replicas_to_aggregate -
                total_num_replicas``.

        Raises:
            ValueError: called before :meth:`apply_gradients`, or ``num_tokens`` too small
                (TF's messages).
        """
        if self._gradients_applied is False:
            raise ValueError(
                "get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens != -1 and num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} "
                             f"(given) vs {tokens_needed} (needed)")
        return Operation("noop", name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SessionRunHook:
        """A hook for ``MonitoredTrainingSession(hooks=...)``, as TF's. Its ``begin()``
        checks that :meth:`apply_gradients` ran and (chief) ``num_tokens``; it has no
        initialization, token or queue-runner work in psrt.

        Args:
            is_chief: Whether this worker is the chief.
            num_tokens: As :meth:`get_init_tokens_op`.
        """
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _NoQueueRunner:
    """What :meth:`SyncReplicasOptimizer.get_chief_queue_runner` returns: the interface of
    ``tf.train.QueueRunner`` with no queue and no op to run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue = None
        self.enqueue_ops: list[Any] = []
        self.close_op = None
        self.cancel_op = None
        self.queue_closed_exception_types = (errors.OutOfRangeError,)

    @property
    def exceptions_raised(self) -> list[BaseException]:
        """Always empty: no thread runs."""
        return []

    def create_threads(self, sess: Any, coord: Any = None, daemon: bool = False,
                       start: bool = False) -> list[Any]:
        """Starts nothing; returns []."""
        return []

    def __repr__(self) -> str:
        return f"<psrt no-op queue runner '{self.name}'>"


class _SyncReplicasOptimizerHook(SessionRunHook):
    """TF's ``_SyncReplicasOptimizerHook``: checks the optimizer in ``begin()``; nothing to
    run after the session is created (psrt has no local step, token queue or chief queue
    runner). On the chief of an optimizer with ``variable_averages`` it updates the moving
    averages after each run that completed a step (TF's chief queue runner does it after
    each aggregated update)."""

    def __init__(self, sync_optimizer: SyncReplicasOptimizer, is_chief: bool,
                 num_tokens: int) -> None:
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens
        self._averaged_step: int | None = None

    def _averages(self) -> tuple[Operation, Variable] | None:
        opt = self._sync_optimizer
        if not self._is_chief or opt._averages_op is None or opt._global_step is None:
            return None
        return opt._averages_op, opt._global_step

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Chief with moving averages: reads the global step the averages start from."""
        if self._averages() is not None:
            self._averaged_step = int(session.run(self._sync_optimizer._global_step))

    def before_run(self, run_context: Any) -> Any:
        """Chief with moving averages: fetches the global step with the run (from the push
        reply: no extra round trip)."""
        averages = self._averages()
        if averages is None:
            return None
        return SessionRunArgs(averages[1])

    def after_run(self, run_context: Any, run_values: Any) -> None:
        """Chief with moving averages: a run that completed a step (the global step moved)
        is followed by one run of the averages' update."""
        averages = self._averages()
        if averages is None or run_values.results is None:
            return
        step = int(run_values.results)
        if self._averaged_step is None or step > self._averaged_step:
            run_context.session.run(averages[0])
            self._averaged_step = step

    def begin(self) -> None:
        """Raises TF's ValueErrors: apply_gradients not called yet; (chief) too few
        tokens."""
        if self._sync_optimizer._gradients_applied is False:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before "
                             "using the hook.")
        if self._is_chief:
            self._sync_optimizer.get_chief_queue_runner()
            self._sync_optimizer.get_init_tokens_op(self._num_tokens)
