"""``tf.app``: ``run`` (TF 1.x's script entry point) and ``flags``. A face: see
psrt/platform/app.py."""

from psrt import flags
from psrt.platform.app import run

__all__ = ["flags", "run"]
