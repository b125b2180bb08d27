"""The ``tf.data`` namespace (TF r1.15, graph mode): datasets, their iterators and the
``tf.compat.v1.data`` functions. Re-exports only (``psrt/ops/dataset_ops.py``,
``psrt/ops/readers.py``, ``psrt/ops/iterator_ops.py``)."""

from psrt.data import experimental
from psrt.framework import missing as _missing
from psrt.ops.dataset_ops import Dataset
from psrt.ops.iterator_ops import (
    Iterator,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)
from psrt.ops.readers import FixedLengthRecordDataset, TFRecordDataset, TextLineDataset

__getattr__ = _missing.module_getattr("psrt.data")

__all__ = [
    "Dataset",
    "FixedLengthRecordDataset",
    "Iterator",
    "TFRecordDataset",
    "TextLineDataset",
    "experimental",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]
