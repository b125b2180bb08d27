"""The ``tf.python_io`` namespace (TF r1.15): TFRecord files. Re-exports only (the format
lives in ``psrt/framework/tf_record.py``)."""

from psrt.framework.tf_record import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)

__all__ = [
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordWriter",
    "tf_record_iterator",
]
