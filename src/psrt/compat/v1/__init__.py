"""``tf.compat.v1``: the TF1 namespace, which is psrt's own (``psrt``): every name of
``psrt.__all__`` (``tf.compat.v1.train``, ``tf.compat.v1.placeholder``, ...), so a script
written for TF2's ``import tensorflow.compat.v1 as tf`` runs on ``import psrt.compat.v1 as
tf``. A face."""

import psrt as _psrt
from psrt import *  # noqa: F403  (the whole face, by its __all__)

__all__ = list(_psrt.__all__)
