"""The ``tf.layers`` namespace: re-exports only (the layers live in ``psrt/ops/layers_*.py``).

``conv2d``, ``max_pooling2d`` and ``average_pooling2d`` (and their classes) are not here
yet: they raise psrt's "not implemented" error until ``tf.nn``'s convolution and pooling ops
exist."""

from psrt.framework import missing as _missing
from psrt.ops.layers_base import Layer
from psrt.ops.layers_core import Dense, Dropout, Flatten, dense, dropout, flatten
from psrt.ops.layers_normalization import BatchNormalization, batch_normalization

__all__ = [
    "BatchNormalization",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "batch_normalization",
    "dense",
    "dropout",
    "flatten",
]

__getattr__ = _missing.module_getattr("psrt.layers")  # TF1 names psrt lacks: what to use instead
