"""The ``tf.losses`` namespace: re-exports only (the losses live in
``psrt/ops/losses_impl.py``)."""

from psrt.framework import missing as _missing
from psrt.ops.losses_impl import (
    Reduction,
    absolute_difference,
    add_loss,
    compute_weighted_loss,
    cosine_distance,
    get_losses,
    get_regularization_loss,
    get_regularization_losses,
    get_total_loss,
    hinge_loss,
    huber_loss,
    log_loss,
    mean_squared_error,
    sigmoid_cross_entropy,
    softmax_cross_entropy,
    sparse_softmax_cross_entropy,
)

__all__ = [
    "Reduction",
    "absolute_difference",
    "add_loss",
    "compute_weighted_loss",
    "cosine_distance",
    "get_losses",
    "get_regularization_loss",
    "get_regularization_losses",
    "get_total_loss",
    "hinge_loss",
    "huber_loss",
    "log_loss",
    "mean_squared_error",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]

__getattr__ = _missing.module_getattr("psrt.losses")  # TF1 names psrt lacks: what to use instead
