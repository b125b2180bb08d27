"""The ``tf.io`` namespace (TF r1.15): TFRecord files, the parsing and decoding ops and
``tf.io.gfile``. Re-exports only (``psrt/framework/tf_record.py``, ``psrt/ops/parsing_ops.py``,
``psrt/ops/string_ops.py``, ``psrt/ops/image_ops.py``, ``psrt/io_gfile.py``)."""

from psrt import io_gfile as gfile
from psrt.framework.tf_record import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)
from psrt.ops.image_ops import decode_image, decode_jpeg, decode_png, encode_jpeg, encode_png
from psrt.ops.io_ops import matching_files, read_file
from psrt.ops.parsing_ops import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    VarLenFeature,
    decode_csv,
    decode_raw,
    parse_example,
    parse_single_example,
    parse_single_sequence_example,
)

__all__ = [
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "TFRecordCompressionType",
    "TFRecordOptions",
    "TFRecordWriter",
    "VarLenFeature",
    "decode_csv",
    "decode_image",
    "decode_jpeg",
    "decode_png",
    "decode_raw",
    "encode_jpeg",
    "encode_png",
    "gfile",
    "matching_files",
    "parse_example",
    "parse_single_example",
    "parse_single_sequence_example",
    "read_file",
    "tf_record_iterator",
]
