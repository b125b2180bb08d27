"""The ``tf.metrics`` namespace: re-exports only (the metrics live in
``psrt/ops/metrics_impl.py``)."""

from psrt.framework import missing as _missing
from psrt.ops.metrics_impl import accuracy, auc, mean

__all__ = ["accuracy", "auc", "mean"]

__getattr__ = _missing.module_getattr("psrt.metrics")  # TF1 names psrt lacks: what to use instead
