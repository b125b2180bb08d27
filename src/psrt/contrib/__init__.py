"""The ``tf.contrib`` namespace, the few names TF1 scripts still use: ``contrib.framework``
(``get_or_create_global_step``), ``contrib.layers`` (``fully_connected``,
``l2_regularizer``, ``xavier_initializer``, ``variance_scaling_initializer``) and
``contrib.nn`` (the argument-flipped cross-entropies). Re-exports only; every other
``tf.contrib`` name raises psrt's "not implemented" AttributeError."""

from psrt.contrib import framework, layers, nn
from psrt.framework import missing as _missing

__all__ = ["framework", "layers", "nn"]


def __getattr__(name: str) -> object:
    """Every other ``tf.contrib`` name: an AttributeError saying psrt does not have it and
    what it has instead."""
    err = _missing.missing("psrt.contrib", name) or _missing.contrib_missing(name)
    raise err
