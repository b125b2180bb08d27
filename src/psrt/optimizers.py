"""Optimizers whose updates run on the ps tasks (TF1's tf.train.*Optimizer).

An optimizer is bound to the variables it trains when ``minimize`` or ``apply_gradients``
is called; a :class:`psrt.Session` registers each variable on its ps task together with the
optimizer's kernel and hyper-parameters, and every push then applies that kernel there
(csrc/kernels.cc, TF1's exact formulas). The worker only computes gradients.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt import variables as _variables
from psrt.variables import Operation, PartitionedVariable, Variable


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
    returned by the loss function (None for ``apply_gradients`` with given gradients)."""

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


class _LazyGradient:
    """Placeholder that ``compute_gradients`` returns: the i-th gradient of ``loss_fn``,
    computed when the train op runs."""

    def __init__(self, loss_fn: Callable[..., Any], index: int) -> None:
        self.loss_fn = loss_fn
        self.index = index


def _check_lr(learning_rate: Any, who: str) -> Any:
    if callable(learning_rate):
        return learning_rate
    if not isinstance(learning_rate, numbers.Real) or isinstance(learning_rate, bool):
        raise TypeError(f"{who}: learning_rate must be a number or a callable returning one; "
                        f"got {learning_rate!r}")
    return float(learning_rate)


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

    def _learning_rate_value(self) -> float:
        lr = self._learning_rate
        return float(lr() if callable(lr) else lr)

    def _hyper(self) -> dict[str, float]:
        """Hyper-parameters sent when a variable is registered on its ps task."""
        return {"learning_rate": self._learning_rate_value(),
                "use_locking": float(self._use_locking)}

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
            if p.dtype == np.int64:
                raise ValueError(f"variable '{p.name}' is int64; optimizers need float32 or "
                                 f"float64")
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

    def compute_gradients(self, loss: Callable[..., Any], var_list: Sequence[Any] | None = None,
                          gate_gradients: int = 1, aggregation_method: Any = None,
                          colocate_gradients_with_ops: bool = False,
                          grad_loss: Any = None) -> list[tuple[Any, Any]]:
        """Pairs each variable with its (lazy) gradient from ``loss``, as TF.

        Args:
            loss: A callable ``loss(*values, **feeds) -> (loss, grads)``: ``values`` are the
                variables' current values (read-only numpy arrays, in ``var_list`` order),
                ``feeds`` the run's ``feed_dict`` by name; ``grads`` is a sequence aligned
                with ``var_list`` of arrays of each variable's shape and dtype,
                :class:`IndexedSlices`, or None (no update).
            var_list: Variables to train; default: the trainable variables.

        Returns:
            A list of ``(gradient, variable)`` pairs for :meth:`apply_gradients`.

        Raises:
            TypeError: ``loss`` is not callable.
            ValueError: no variables to optimize.
        """
        if not callable(loss):
            raise TypeError(f"loss must be a callable returning (loss, grads) from the "
                            f"variables' values; got {loss!r}")
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
            global_step: If given, incremented by one with each push, on its ps task.
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
            _variables.assert_global_step(global_step)
        for _, v in live:
            self._bind(v)
        lazy = [g for g, _ in live if isinstance(g, _LazyGradient)]
        if lazy:
            fns = {id(g.loss_fn) for g in lazy}
            if len(lazy) != len(live) or len(fns) != 1:
                raise ValueError("apply_gradients: mix gradients from one compute_gradients "
                                 "call only with each other")
            loss_fn = lazy[0].loss_fn
            n = len(pairs)
            if len(lazy) != n or sorted(g.index for g in lazy) != list(range(n)):
                raise ValueError("apply_gradients: pass every pair from compute_gradients "
                                 "unchanged (drop a variable from var_list instead of setting "
                                 "its gradient to None)")
            return TrainOp(self, [v for _, v in pairs], loss_fn, None, global_step, name)
        return TrainOp(self, [v for _, v in live], None, [g for g, _ in live], global_step,
                       name)

    def minimize(self, loss: Callable[..., Any], global_step: Variable | None = None,
                 var_list: Sequence[Any] | None = None, gate_gradients: int = 1,
                 aggregation_method: Any = None, colocate_gradients_with_ops: bool = False,
                 name: str | None = None, grad_loss: Any = None) -> TrainOp:
        """``compute_gradients`` then ``apply_gradients``, as TF. See those for ``loss``."""
        return self.apply_gradients(self.compute_gradients(loss, var_list), global_step, name)


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
