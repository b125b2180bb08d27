"""psrt: a parameter-server training runtime for numpy with TensorFlow 1.x's API."""

from psrt import errors

__version__ = "0.1.0"
