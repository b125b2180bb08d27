"""FtrlOptimizer, as tensorflow/python/training/ftrl.py; its update runs on the ps tasks (the
core's fused kernel)."""

from __future__ import annotations

from typing import Any

from psrt.training.optimizer import Optimizer, _check_lr, _check_real, _non_negative


class FtrlOptimizer(Optimizer):
    """FTRL-proximal, as ``tf.train.FtrlOptimizer`` (training_ops.cc ApplyFtrl, and
    ApplyFtrlV2 when ``l2_shrinkage_regularization_strength`` > 0): with ``p =
    -learning_rate_power``, ``g' = g + 2*l2_shrinkage*var`` (V2), ``accum_new = accum +
    g*g``; ``linear += g' - (accum_new^p - accum^p)/lr * var``; ``var = (sign(linear)*l1 -
    linear) / (accum_new^p/lr + 2*l2)`` if ``|linear| > l1`` else 0; ``accum = accum_new``.
    Slots ``accum`` (starting at ``initial_accumulator_value``) and ``linear`` (zeros),
    variables ``<var>/<accum_name or name>`` and ``<var>/<linear_name or name>`` (TF's
    ``<var>/Ftrl`` and ``<var>/Ftrl_1`` by default).

    Args:
        learning_rate: float, :class:`psrt.Tensor` or callable, read at each step.
        learning_rate_power: float <= 0 (default -0.5).
        initial_accumulator_value: float >= 0 (default 0.1).
        l1_regularization_strength: float >= 0 (default 0.0).
        l2_regularization_strength: float >= 0 (default 0.0).
        use_locking: Serialize updates per variable.
        name: Default "Ftrl".
        accum_name: Suffix of the ``accum`` slot variable's name (default ``name``).
        linear_name: Suffix of the ``linear`` slot variable's name (default ``name``).
        l2_shrinkage_regularization_strength: float >= 0 (default 0.0): TF's magnitude
            penalty (FtrlV2); on row-sparse gradients only the given rows shrink.

    Raises:
        ValueError: an argument outside its range, with TF's message (e.g.
            "learning_rate_power 0.500000 needs to be negative or zero").
    """

    _kernel = "Ftrl"
    _slot_keys = ("accum", "linear")

    def __init__(self, learning_rate: Any, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "Ftrl", accum_name: str | None = None,
                 linear_name: str | None = None,
                 l2_shrinkage_regularization_strength: float = 0.0) -> None:
        super().__init__(use_locking, name)
        init = _non_negative(initial_accumulator_value, "initial_accumulator_value", name)
        power = _check_real(learning_rate_power, "learning_rate_power", name)
        if power > 0.0:
            raise ValueError(f"learning_rate_power {power:f} needs to be negative or zero")
        self._l1 = _non_negative(l1_regularization_strength, "l1_regularization_strength",
                                 name)
        self._l2 = _non_negative(l2_regularization_strength, "l2_regularization_strength",
                                 name)
        self._l2_shrinkage = _non_negative(l2_shrinkage_regularization_strength,
                                           "l2_shrinkage_regularization_strength", name)
        self._learning_rate = _check_lr(learning_rate, name)
        self._learning_rate_power = power
        self._initial_accumulator_value = init
        self._accum_name = accum_name
        self._linear_name = linear_name

    def _slot_var_names(self) -> list[str]:
        # TF makes each slot variable "<var>/<accum_name or name>" and
        # "<var>/<linear_name or name>", the second uniquified with "_1" when they clash.
        first = self._accum_name or self._name
        second = self._linear_name or self._name
        return [first, f"{second}_1" if second == first else second]

    def _hyper(self) -> dict[str, float]:
        return {**super()._hyper(), "slot_init": self._initial_accumulator_value,
                "slot_init2": 0.0, "lr_power": self._learning_rate_power, "l1": self._l1,
                "l2": self._l2, "l2_shrinkage": self._l2_shrinkage}
