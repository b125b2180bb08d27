"""The ``tf.layers`` namespace: re-exports only (the layers live in ``psrt/ops/layers_*.py``)."""

from psrt.framework import missing as _missing
from psrt.ops.layers_base import Layer
from psrt.ops.layers_convolutional import (
    AveragePooling2D,
    Conv2D,
    MaxPooling2D,
    average_pooling2d,
    conv2d,
    max_pooling2d,
)
from psrt.ops.layers_convolutional_more import (
    AveragePooling3D,
    Conv2DTranspose,
    Conv3D,
    Conv3DTranspose,
    MaxPooling3D,
    SeparableConv2D,
    average_pooling3d,
    conv2d_transpose,
    conv3d,
    conv3d_transpose,
    max_pooling3d,
    separable_conv2d,
)
from psrt.ops.layers_core import Dense, Dropout, Flatten, dense, dropout, flatten
from psrt.ops.layers_normalization import BatchNormalization, batch_normalization

__all__ = [
    "AveragePooling2D",
    "AveragePooling3D",
    "BatchNormalization",
    "Conv2D",
    "Conv2DTranspose",
    "Conv3D",
    "Conv3DTranspose",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPooling2D",
    "MaxPooling3D",
    "SeparableConv2D",
    "average_pooling2d",
    "average_pooling3d",
    "batch_normalization",
    "conv2d",
    "conv2d_transpose",
    "conv3d",
    "conv3d_transpose",
    "dense",
    "dropout",
    "flatten",
    "max_pooling2d",
    "max_pooling3d",
    "separable_conv2d",
]

__getattr__ = _missing.module_getattr("psrt.layers")  # TF1 names psrt lacks: what to use instead
