"""MomentumOptimizer, as tensorflow/python/training/momentum.py; its update runs on the ps
tasks (the core's fused kernel)."""

from __future__ import annotations

import numbers
from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr


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
