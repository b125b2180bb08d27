"""The ``tf.summary`` namespace: re-exports only (the ops live in ``psrt/ops/summary_ops.py``)."""

from psrt.ops.summary_ops import (
    SUMMARIES,
    SUMMARY_OP,
    histogram,
    image,
    merge,
    merge_all,
    scalar,
    text,
)
from psrt.ops.summary_ops import (
    proto_attribute as _proto_attribute,
)
from psrt.ops.summary_writer import FileWriter, FileWriterCache

__all__ = [
    "FileWriter",
    "FileWriterCache",
    "SUMMARIES",
    "SUMMARY_OP",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "text",
]


def __getattr__(name: str) -> object:
    """TF1's summary protocol buffers (``psrt.summary.Summary``, ``Event``, ``SessionLog`` ...),
    tensorboardX's classes, imported on first use (~70 ms, paid only where summaries are
    written)."""
    return _proto_attribute(name)
