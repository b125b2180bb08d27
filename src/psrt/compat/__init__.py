"""``tf.compat``: ``tf.compat.v1`` (the whole TF1 namespace, i.e. psrt's) and TF's string
helpers. ``import tensorflow.compat.v1 as tf`` becomes ``import psrt.compat.v1 as tf``.
A face."""

from psrt.compat import v1
from psrt.platform.compat import as_bytes, as_str, as_str_any, as_text, path_to_str

__all__ = ["as_bytes", "as_str", "as_str_any", "as_text", "path_to_str", "v1"]
