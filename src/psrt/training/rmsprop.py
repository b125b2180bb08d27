"""RMSPropOptimizer, as tensorflow/python/training/rmsprop.py; its update runs on the ps tasks
(the core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr, _check_real


class RMSPropOptimizer(Optimizer):
    """RMSProp, as ``tf.train.RMSPropOptimizer`` (training_ops.cc ApplyRMSProp and, with
    ``centered``, ApplyCenteredRMSProp): ``ms = decay*ms + (1-decay)*g*g``; centered also
    ``mg = decay*mg + (1-decay)*g`` and ``ms - mg*mg`` in place of ``ms`` below; ``mom =
    momentum*mom + lr*g/sqrt(ms + epsilon)``; ``var -= mom``. Slots ``rms`` (starting at
    ones, as TF), ``momentum`` (zeros) and, centered, ``mg`` (zeros); their variables are
    named in TF's creation order: ``<var>/RMSProp`` (rms), then ``<var>/RMSProp_1`` (mg when
    centered, else momentum), then ``<var>/RMSProp_2`` (momentum when centered).

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        decay: The discounting factor of the history (float, default 0.9).
        momentum: float (default 0.0).
        epsilon: float (default 1e-10, TF1's).
        use_locking: Serialize updates per variable.
        centered: Normalize by the estimated variance of the gradient (default False).
        name: Default "RMSProp".

    Raises:
        TypeError: ``decay``, ``momentum`` or ``epsilon`` is not a number.
    """

    def __init__(self, learning_rate: Any, decay: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-10, use_locking: bool = False, centered: bool = False,
                 name: str = "RMSProp") -> None:
        super().__init__(use_locking, name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._decay = _check_real(decay, "decay", name)
        self._momentum = _check_real(momentum, "momentum", name)
        self._epsilon = _check_real(epsilon, "epsilon", name)
        self._centered = bool(centered)
        # The kernels' slot order: rms, momentum (, mg).
        self._kernel = "CenteredRMSProp" if self._centered else "RMSProp"
        self._slot_keys = ("rms", "momentum", "mg") if self._centered else ("rms", "momentum")

    def _slot_var_names(self) -> list[str]:
        n = self._name
        return [n, f"{n}_2", f"{n}_1"] if self._centered else [n, f"{n}_1"]

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "rho": self._decay, "momentum": self._momentum,
                "epsilon": self._epsilon, "slot_init": 1.0, "slot_init2": 0.0,
                "slot_init3": 0.0}
