"""``tensorflow.python.training.moving_averages``: ``ExponentialMovingAverage``. A face."""

from psrt.training.moving_averages import ExponentialMovingAverage

__all__ = ["ExponentialMovingAverage"]
