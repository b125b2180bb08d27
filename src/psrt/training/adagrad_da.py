"""AdagradDAOptimizer, as tensorflow/python/training/adagrad_da.py; its update runs on the ps
tasks (the core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.ops.variables import Variable
from psrt.training.optimizer import Optimizer, _check_lr, _check_real, _non_negative


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
