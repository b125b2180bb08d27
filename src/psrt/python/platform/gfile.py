"""``tensorflow.python.platform.gfile``: ``tf.gfile``. A face."""

from psrt.gfile import *  # noqa: F403  (the tf.gfile face, by its __all__)
from psrt.gfile import __all__  # noqa: F401
