"""The ``tf.contrib.framework`` names psrt has: re-exports only."""

from psrt.framework import missing as _missing
from psrt.training.training_util import get_global_step, get_or_create_global_step

__all__ = ["get_global_step", "get_or_create_global_step"]

__getattr__ = _missing.module_getattr("psrt.contrib.framework")
