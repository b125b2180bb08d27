"""GradientDescentOptimizer, as tensorflow/python/training/gradient_descent.py; its update runs
on the ps tasks (the core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr


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
