"""``tensorflow.python.platform.app``: ``tf.app``. A face."""

from psrt import flags
from psrt.platform.app import run

__all__ = ["flags", "run"]
