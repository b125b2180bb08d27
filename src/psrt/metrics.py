"""The ``tf.metrics`` namespace: re-exports only (the metrics live in
``psrt/ops/metrics_impl.py``, ``metrics_confusion.py`` and ``metrics_multiclass.py``)."""

from psrt.framework import missing as _missing
from psrt.ops.metrics_confusion import (
    auc,
    false_negatives,
    false_negatives_at_thresholds,
    false_positives,
    false_positives_at_thresholds,
    precision,
    precision_at_thresholds,
    recall,
    recall_at_thresholds,
    sensitivity_at_specificity,
    specificity_at_sensitivity,
    true_negatives,
    true_negatives_at_thresholds,
    true_positives,
    true_positives_at_thresholds,
)
from psrt.ops.metrics_impl import (
    accuracy,
    mean,
    mean_absolute_error,
    mean_cosine_distance,
    mean_relative_error,
    mean_squared_error,
    mean_tensor,
    percentage_below,
    root_mean_squared_error,
)
from psrt.ops.metrics_multiclass import (
    mean_iou,
    mean_per_class_accuracy,
    precision_at_k,
    precision_at_top_k,
    recall_at_k,
    recall_at_top_k,
    sparse_precision_at_k,
)

__all__ = [
    "accuracy",
    "auc",
    "false_negatives",
    "false_negatives_at_thresholds",
    "false_positives",
    "false_positives_at_thresholds",
    "mean",
    "mean_absolute_error",
    "mean_cosine_distance",
    "mean_iou",
    "mean_per_class_accuracy",
    "mean_relative_error",
    "mean_squared_error",
    "mean_tensor",
    "percentage_below",
    "precision",
    "precision_at_k",
    "precision_at_thresholds",
    "precision_at_top_k",
    "recall",
    "recall_at_k",
    "recall_at_thresholds",
    "recall_at_top_k",
    "root_mean_squared_error",
    "sensitivity_at_specificity",
    "sparse_precision_at_k",
    "specificity_at_sensitivity",
    "true_negatives",
    "true_negatives_at_thresholds",
    "true_positives",
    "true_positives_at_thresholds",
]

__getattr__ = _missing.module_getattr("psrt.metrics")  # TF1 names psrt lacks: what to use instead
