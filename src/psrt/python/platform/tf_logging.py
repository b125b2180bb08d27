"""``tensorflow.python.platform.tf_logging``: ``tf.logging``. A face."""

from psrt.logging import *  # noqa: F403  (the tf.logging face, by its __all__)
from psrt.logging import __all__  # noqa: F401
