"""ProximalGradientDescentOptimizer, as
tensorflow/python/training/proximal_gradient_descent.py; its update runs on the ps tasks (the
core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr, _non_negative


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
