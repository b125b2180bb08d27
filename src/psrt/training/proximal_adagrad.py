"""ProximalAdagradOptimizer, as tensorflow/python/training/proximal_adagrad.py; its update runs
on the ps tasks (the core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr, _check_real, _non_negative


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
