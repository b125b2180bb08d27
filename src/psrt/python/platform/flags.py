"""``tensorflow.python.platform.flags``: ``tf.flags``. A face."""

from psrt.flags import *  # noqa: F403  (the tf.flags face, by its __all__)
from psrt.flags import __all__  # noqa: F401
