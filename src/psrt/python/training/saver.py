"""``tensorflow.python.training.saver``: ``Saver``, ``latest_checkpoint``. A face."""

from psrt.checkpoint.checkpoint_management import latest_checkpoint
from psrt.checkpoint.saver import Saver

__all__ = ["Saver", "latest_checkpoint"]
