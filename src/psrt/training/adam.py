"""AdamOptimizer, as tensorflow/python/training/adam.py; its update runs on the ps tasks (the
core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr


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
