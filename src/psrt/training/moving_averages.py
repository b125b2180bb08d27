"""Exponential moving averages of variables, as TF1's ``tf.train.ExponentialMovingAverage``
(tensorflow/python/training/moving_averages.py, r1.15).

Where the shadow update runs, and why: each shadow variable lives on its variable's ps
task and is updated there by a push through the fused GradientDescent kernel, with the
gradient ``shadow - var`` computed on the worker and the learning rate ``1 - decay``:
``shadow -= (1 - decay) * (shadow - var)`` is TF's ``assign_moving_average`` formula
term for term. One update is two parallel round trips: a pull of the variables (fresh,
whatever the session cached, as TF's update reads them) and the push of the shadows' gradients
(the shadows' values come from their previous push's reply). Against the two alternatives:
an ``assign`` of a worker-computed shadow would overwrite whatever another writer did
meanwhile and is no cheaper; an ``assign_add`` of a worker-computed delta costs the same but
would not carry a per-step rate, which ``num_updates`` needs (the push carries the step's
learning rate, here ``1 - decay_t``), nor use the store's ``use_locking`` and chunked,
never-torn apply.
"""

from __future__ import annotations

import numbers
from typing import Any, Iterable, Sequence

import numpy as np

from psrt.framework import ops as _ops
from psrt.framework.device import device as _device
from psrt.framework.ops import GraphKeys
from psrt.framework.tensor import Tensor, custom_gradient, py_func
from psrt.ops import variables as _variables
from psrt.ops.training_ops import TrainOp
from psrt.ops.variables import PartitionedVariable, Variable
from psrt.training.gradient_descent import GradientDescentOptimizer

__all__ = ["ExponentialMovingAverage"]


def _parts(var_list: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in var_list:
        out.extend(v._get_variable_list() if isinstance(v, PartitionedVariable) else [v])
    return out


class ExponentialMovingAverage:
    """Maintains moving averages of variables, as ``tf.train.ExponentialMovingAverage``.

    :meth:`apply` creates a shadow variable per variable, ``<var>/<name>`` (TF's
    ``<var>/ExponentialMovingAverage``), on the same ps task, not trainable, in
    ``GLOBAL_VARIABLES`` (so Savers save it under that name), starting at the variable's
    initial value; it returns the op that updates every shadow:
    ``shadow -= (1 - decay) * (shadow - variable)``. With ``num_updates`` the decay of a
    step is ``min(decay, (1 + num_updates) / (10 + num_updates))``, read at that step.

    TF runs the update after the training step with ``tf.control_dependencies([opt_op])``;
    in psrt fetch both in one run, the train op first (ops run in fetch order)::

        opt_op = opt.minimize(loss, global_step=global_step)
        ema = psrt.train.ExponentialMovingAverage(decay=0.999, num_updates=global_step)
        averages_op = ema.apply([W, b])
        sess.run([opt_op, averages_op], feed_dict)   # TF: sess.run(training_op)

    To evaluate with the averages, restore them into the plain variables:
    ``psrt.train.Saver(ema.variables_to_restore()).restore(sess, path)``.

    The update reads the variables' current values from their ps tasks (one parallel pull)
    and pushes the shadows' updates (one parallel round trip); see the module docstring.

    Args:
        decay: The decay (float, typically close to 1: 0.999, 0.9999).
        num_updates: Optional global step (psrt Variable or Tensor) or number that lowers
            the decay early in training.
        zero_debias: As TF's, it applies only to averages of tensors (not variables);
            psrt does not debias: True with a tensor in ``apply`` is NotImplementedError.
        name: The shadow variables' suffix and the op's name (default
            "ExponentialMovingAverage").

    Raises:
        TypeError: ``decay`` is not a number, or ``num_updates`` not a Variable, Tensor or
            number.
    """

    def __init__(self, decay: Any, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage") -> None:
        if not isinstance(decay, numbers.Real) or isinstance(decay, bool):
            raise TypeError(f"ExponentialMovingAverage: decay must be a number (e.g. 0.999); "
                            f"got {decay!r}")
        if num_updates is not None and not isinstance(num_updates, (Variable, Tensor)) and (
                not isinstance(num_updates, numbers.Real) or isinstance(num_updates, bool)):
            raise TypeError(f"ExponentialMovingAverage: num_updates must be the global step "
                            f"(a psrt Variable), a psrt.Tensor, a number or None; got "
                            f"{num_updates!r}")
        if not name:
            raise ValueError("ExponentialMovingAverage: name must be a non-empty string")
        self._decay = float(decay)
        self._num_updates = num_updates
        self._zero_debias = bool(zero_debias)
        self._name = name
        self._averages: dict[int, Variable] = {}
        self._optimizer = GradientDescentOptimizer(self._rate(), name=name)

    @property
    def name(self) -> str:
        """The name of this ExponentialMovingAverage object (str)."""
        return self._name

    def _rate(self) -> Any:
        """``1 - decay`` of a step: a float, or a Tensor of ``num_updates``."""
        decay = self._decay
        n = self._num_updates
        if n is None:
            return 1.0 - decay
        if not isinstance(n, (Variable, Tensor)):
            return 1.0 - min(decay, (1.0 + float(n)) / (10.0 + float(n)))

        def one_minus_decay(count: Any) -> np.ndarray:
            c = float(count)
            return np.asarray(1.0 - min(decay, (1.0 + c) / (10.0 + c)), np.float64)

        return py_func(one_minus_decay, [n], np.float64, name=f"{self._name}/decay")

    def apply(self, var_list: Sequence[Any] | None = None) -> TrainOp:
        """Creates the shadow variables of ``var_list`` and returns the op updating them,
        as TF's ``apply``.

        Args:
            var_list: Variables or Tensors (float32 or float64; a PartitionedVariable counts
                as its parts); default: the trainable variables. Each variable is added to
                the ``MOVING_AVERAGE_VARIABLES`` collection, as TF. A tensor's average
                (``<op name>/<name>``) starts at zero, without zero-debiasing (TF's default),
                and each update reads the tensor's value computed in that run (its feeds
                must be given).

        Returns:
            An op; running it (``Session.run``) updates every shadow of ``var_list`` on its
            ps task; its run value is 0.0 (TF's is None).

        Raises:
            TypeError: an element is not a float psrt Variable or Tensor (TF's "The
                variables must be half, float, or double: <name>").
            ValueError: a tensor whose shape is not fully defined.
            ValueError: a variable already has a moving average from this object (TF's
                "Moving average already computed for: <name>"), or ``var_list`` is empty.
        """
        if var_list is None:
            var_list = _variables.trainable_variables()
        parts = _parts(var_list)
        for v in parts:
            if not isinstance(v, (Variable, Tensor)):
                raise TypeError(f"ExponentialMovingAverage.apply: var_list must hold psrt "
                                f"Variables or Tensors; got {v!r}")
            if v.dtype is None or np.dtype(v.dtype).kind != "f":
                raise TypeError(f"The variables must be half, float, or double: "
                                f"{self._label(v)}")
            if isinstance(v, Tensor):
                if not v.shape.is_fully_defined():
                    raise ValueError(f"ExponentialMovingAverage.apply: the tensor "
                                     f"{v.name} needs a fully defined shape for its average "
                                     f"variable; got {v.shape}")
                if self._zero_debias:
                    raise NotImplementedError(
                        "ExponentialMovingAverage(zero_debias=True) of a tensor is not "
                        "supported by psrt; use zero_debias=False (TF's default)")
            if id(v) in self._averages:
                raise ValueError(f"Moving average already computed for: {v.name}")
        if not parts:
            raise ValueError("ExponentialMovingAverage.apply: no variables to average")
        shadows = []
        for v in parts:
            shadow = self._make_shadow(v)
            self._averages[id(v)] = shadow
            self._optimizer._bind(shadow)
            shadows.append(shadow)
            # As TF: only variables join MOVING_AVERAGE_VARIABLES, not tensors' averages.
            if isinstance(v, Variable) and \
                    v not in _ops.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES):
                _ops.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, v)
        n = len(parts)

        @custom_gradient
        def moving_average_update(*values: Any) -> Any:
            # A zero "loss" whose gradient for each shadow is ``shadow - var``: the
            # GradientDescent push with rate 1 - decay is then TF's update.
            def grad(dy: Any) -> tuple[Any, ...]:
                return tuple(np.subtract(values[i], values[n + i]) for i in range(n)) + (
                    None,) * n
            return np.float64(0.0), grad

        op = TrainOp(self._optimizer, shadows, None, None, None, self._name)
        op.loss = moving_average_update(*shadows, *parts)
        return op

    @staticmethod
    def _label(var: Any) -> str:
        """A variable's name, or a tensor's op name (TF names averages after it)."""
        return var.op.name if isinstance(var, Tensor) else var.name

    def _make_shadow(self, var: Any) -> Variable:
        """``<var>/<name>`` on ``var``'s device, outside any name scope, not trainable. A
        tensor's average starts at zeros, on the device the current scope gives (TF's
        ``create_zeros_slot``: a ``replica_device_setter`` puts it on a ps task)."""
        graph = var.graph
        if isinstance(var, Tensor):
            dt = np.dtype(var.dtype)
            with graph.name_scope(None):
                return Variable(initial_value=np.zeros(var.shape.as_list(), dt),
                                trainable=False, name=self.average_name(var), dtype=dt)
        with _device(None), _device(var.device), graph.name_scope(None):
            return Variable(initial_value=var.initial_value_array, trainable=False,
                            name=self.average_name(var), dtype=var.dtype)

    def average(self, var: Any) -> Variable | None:
        """The shadow variable of ``var``, or None, as TF's ``average``."""
        return self._averages.get(id(var))

    def average_name(self, var: Any) -> str:
        """``"<var>/<name>"``, the checkpoint name of ``var``'s average, as TF's
        ``average_name`` (whether or not :meth:`apply` ran)."""
        return f"{self._label(var)}/{self._name}"

    def variables_to_restore(self, moving_avg_variables: Sequence[Any] | None = None
                             ) -> dict[str, Any]:
        """A Saver ``var_list`` restoring averages into the variables, as TF's
        ``variables_to_restore``: ``{average_name(v): v}`` for the trainable variables and
        those in ``MOVING_AVERAGE_VARIABLES`` (or ``moving_avg_variables``), and
        ``{v.name: v}`` for every other global variable.

        Example::

            saver = psrt.train.Saver(ema.variables_to_restore())
            saver.restore(sess, psrt.train.latest_checkpoint(train_dir))
        """
        if moving_avg_variables is None:
            moving_avg_variables = list(_variables.trainable_variables()) + list(
                _ops.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES))
        averaged = list(dict.fromkeys(_parts(moving_avg_variables)))
        name_map: dict[str, Any] = {self.average_name(v): v for v in averaged}
        names = {v.name for v in averaged}
        for v in _variables.global_variables():
            if v.name not in names and v.name not in name_map:
                name_map[v.name] = v
        return name_map
