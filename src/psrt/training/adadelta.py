"""AdadeltaOptimizer, as tensorflow/python/training/adadelta.py; its update runs on the ps
tasks (the core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr, _check_real


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
