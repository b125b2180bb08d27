"""AdagradOptimizer, as tensorflow/python/training/adagrad.py; its update runs on the ps tasks
(the core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr


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
