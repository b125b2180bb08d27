"""``tensorflow.python.framework.errors``: TF's error classes (``tf.errors``). A face."""

from psrt.errors import *  # noqa: F403  (the tf.errors face, by its __all__)
from psrt.errors import __all__  # noqa: F401
