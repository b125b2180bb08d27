"""The ``tf.contrib.nn`` names psrt has: re-exports only."""

from psrt.framework import missing as _missing
from psrt.ops.contrib_layers import (
    deprecated_flipped_sigmoid_cross_entropy_with_logits,
    deprecated_flipped_softmax_cross_entropy_with_logits,
    deprecated_flipped_sparse_softmax_cross_entropy_with_logits,
)

__all__ = [
    "deprecated_flipped_sigmoid_cross_entropy_with_logits",
    "deprecated_flipped_softmax_cross_entropy_with_logits",
    "deprecated_flipped_sparse_softmax_cross_entropy_with_logits",
]

__getattr__ = _missing.module_getattr("psrt.contrib.nn")
