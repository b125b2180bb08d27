"""The ``tf.contrib.layers`` names psrt has: re-exports only (they live in
``psrt/ops/contrib_layers.py``)."""

from psrt.framework import missing as _missing
from psrt.ops.contrib_layers import (
    fully_connected,
    l2_regularizer,
    variance_scaling_initializer,
    xavier_initializer,
    xavier_initializer_conv2d,
)

__all__ = [
    "fully_connected",
    "l2_regularizer",
    "variance_scaling_initializer",
    "xavier_initializer",
    "xavier_initializer_conv2d",
]

__getattr__ = _missing.module_getattr("psrt.contrib.layers")
