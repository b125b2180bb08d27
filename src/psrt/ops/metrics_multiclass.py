"""``tf.metrics``' class metrics, as TF r1.15's tensorflow/python/ops/metrics_impl.py:
``mean_iou`` and ``mean_per_class_accuracy`` (integer labels and predictions in
``[0, num_classes)``), and the sparse top-k metrics ``precision_at_k``, ``recall_at_k``,
``precision_at_top_k``, ``recall_at_top_k`` (labels are class ids: a dense int Tensor or a
``SparseTensor`` of them, a set per row, as TF's ``tf.sets`` semantics).

The accumulators are local variables (see ``metrics_impl.py``) named as TF's:
``mean_iou/total_confusion_matrix`` (float64), ``mean_accuracy/total`` and ``count``,
``precision_at_5/true_positive_at_5`` and ``false_positive_at_5`` (float64 scalars;
``_class3`` appended with ``class_id=3``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.sparse_tensor import SparseTensor, SparseTensorValue
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math
from psrt.ops import nn_ops_extra as _nn
from psrt.ops import variable_scope as _vs
from psrt.ops.metrics_impl import collect, div_no_nan, metric_variable, read_after, scoped_name

__all__ = ["mean_iou", "mean_per_class_accuracy", "precision_at_k", "precision_at_top_k",
           "recall_at_k", "recall_at_top_k", "sparse_precision_at_k"]


def _flat(x: Any) -> Any:
    """``x`` reshaped to a vector when its static rank is above 1 (TF's flattening)."""
    nd = _lib.static_shape(x).ndims
    return _array.reshape(x, [-1]) if nd is not None and nd > 1 else x


def _check_classes(values: np.ndarray, num_classes: int, what: str) -> np.ndarray:
    ids = np.asarray(values).reshape(-1).astype(np.int64)
    bad = ids[(ids < 0) | (ids >= num_classes)]
    if bad.size:
        raise errors.InvalidArgumentError(
            None, None, f"`{what}` out of bound: {int(bad[0])} is not in [0, {num_classes})")
    return ids


def _flat_weights(weights: Any, like: Any) -> Any:
    """Weights flattened as TF's ``_streaming_confusion_matrix``, their static shape
    checked against the flat predictions.

    Raises:
        ValueError: a static shape other than the predictions'."""
    weights = _flat(convert_to_tensor(weights))
    ws, ps = _lib.static_shape(weights), _lib.static_shape(like)
    if not ws.is_compatible_with(ps):
        raise ValueError(f"weights of shape {ws} do not match the labels and predictions "
                         f"of shape {ps} (TF's confusion_matrix takes one weight each)")
    return _math.cast(weights, np.float32)


def _cm_kernel(needs: Any, labels: Any, predictions: Any, weights: Any = None, *,
               num_classes: int) -> Any:
    lab = _check_classes(labels, num_classes, "labels")
    pred = _check_classes(predictions, num_classes, "predictions")
    if lab.size != pred.size:
        raise errors.InvalidArgumentError(
            None, None, f"labels and predictions must have the same number of elements: "
                        f"{lab.size} vs {pred.size}")
    w = np.ones(lab.size) if weights is None else np.asarray(weights, np.float64).reshape(-1)
    cm = np.zeros((num_classes, num_classes), np.float64)
    np.add.at(cm, (lab, pred), w)                     # rows: labels, columns: predictions
    return cm, lambda dy: (None,) * (2 if weights is None else 3)


def _mean_iou_kernel(needs: Any, cm: Any) -> Any:
    cm = np.asarray(cm, np.float64)
    rows = cm.sum(0).astype(np.float32)
    cols = cm.sum(1).astype(np.float32)
    diag = np.diag(cm).astype(np.float32)
    denominator = rows + cols - diag
    valid = np.float32((denominator != 0).sum())
    iou = diag / np.where(denominator > 0, denominator, np.float32(1))
    out = np.float32(iou.sum() / valid) if valid > 0 else np.float32(0)
    return out, lambda dy: (None,)


def mean_iou(labels: Any, predictions: Any, num_classes: int, weights: Any = None,
             metrics_collections: Any = None, updates_collections: Any = None,
             name: str | None = None) -> tuple[Tensor, Tensor]:
    """The mean intersection-over-union of the classes over every batch, as
    ``tf.metrics.mean_iou``: a confusion matrix ``mean_iou/total_confusion_matrix``
    (float64 ``[num_classes, num_classes]``, rows labels, columns predictions) and, per
    class, ``IOU = tp / (tp + fp + fn)``, averaged over the classes that occur in the
    labels or predictions (0 when none does).

    Args:
        labels, predictions: Integer Tensors of one shape (flattened), values in
            ``[0, num_classes)``.
        num_classes: The number of classes (int).
        weights: None, or a Tensor of the labels' shape (one weight each).
        name: The variable scope (default ``mean_iou``).

    Returns:
        ``(mean_iou, update_op)``: a float32 scalar, and the float64 confusion matrix
        after adding the batch.

    Raises:
        ValueError: shapes that do not match.
        InvalidArgumentError (at run): a label or prediction outside ``[0, num_classes)``.
    """
    n = int(num_classes)
    with _vs.variable_scope(name, default_name="mean_iou"):
        labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
        ps, ls = _lib.static_shape(predictions), _lib.static_shape(labels)
        if not ps.is_compatible_with(ls):
            raise ValueError(f"Shapes {ps} and {ls} are incompatible")
        total_cm = metric_variable([n, n], np.float64, name="total_confusion_matrix")
        predictions, labels = _flat(predictions), _flat(labels)
        inputs = [labels, predictions]
        if weights is not None:
            inputs.append(_flat_weights(weights, predictions))
        current = _lib.apply_op("ConfusionMatrix", None, inputs, _cm_kernel, np.float64,
                                TensorShape([n, n]), num_classes=n)
        update_op = read_after([total_cm.assign_add(current)], total_cm)
        value = _lib.apply_op("MeanIoU", scoped_name("mean_iou"), [total_cm],
                              _mean_iou_kernel, np.float32, TensorShape([]))
    collect(metrics_collections, value)
    collect(updates_collections, update_op)
    return value, update_op


def _class_sums_kernel(needs: Any, labels: Any, values: Any, *, num_classes: int) -> Any:
    ids = _check_classes(labels, num_classes, "labels")
    vals = np.asarray(values, np.float64).reshape(-1)
    if vals.size != ids.size:
        raise errors.InvalidArgumentError(
            None, None, f"labels and predictions must have the same number of elements: "
                        f"{ids.size} vs {vals.size}")
    out = np.zeros(num_classes, np.float64)
    np.add.at(out, ids, vals)
    return out.astype(np.float32), lambda dy: (None, None)


def _mean_kernel(needs: Any, x: Any) -> Any:
    return np.float32(np.mean(np.asarray(x, np.float32))), lambda dy: (None,)


def mean_per_class_accuracy(labels: Any, predictions: Any, num_classes: int,
                            weights: Any = None, metrics_collections: Any = None,
                            updates_collections: Any = None, name: str | None = None
                            ) -> tuple[Tensor, Tensor]:
    """The mean over the classes of each class's accuracy (the weighted fraction of its
    labels predicted right; 0 for a class with no label) over every batch, as
    ``tf.metrics.mean_per_class_accuracy``: local variables ``mean_accuracy/total`` (the
    weights of each class's labels) and ``mean_accuracy/count`` (of its correct ones),
    float32 ``[num_classes]``.

    Args:
        labels, predictions: Integer Tensors of one shape (flattened); labels in
            ``[0, num_classes)``.
        num_classes: The number of classes (int).
        weights: None, or a Tensor of the labels' shape.
        name: The variable scope (default ``mean_accuracy``).

    Returns:
        ``(mean_accuracy, update_op)``: a float32 scalar, and the float32
        ``[num_classes]`` per-class accuracies after adding the batch.

    Raises:
        ValueError: shapes that do not match.
        InvalidArgumentError (at run): a label outside ``[0, num_classes)``.
    """
    n = int(num_classes)
    with _vs.variable_scope(name, default_name="mean_accuracy"):
        labels = _flat(_math.cast(labels, np.int64))
        predictions = _flat(convert_to_tensor(predictions))
        ps, ls = _lib.static_shape(predictions), _lib.static_shape(labels)
        if not ps.is_compatible_with(ls):
            raise ValueError(f"Shapes {ps} and {ls} are incompatible")
        total = metric_variable([n], np.float32, name="total")
        count = metric_variable([n], np.float32, name="count")
        if labels.dtype != predictions.dtype:
            predictions = _math.cast(predictions, labels.dtype)
        is_correct = _math.cast(_math.equal(predictions, labels), np.float32)
        ones: Any = _array.ones_like(is_correct)
        if weights is not None:
            w = _flat_weights(weights, predictions)
            is_correct = _math.multiply(is_correct, w)
            ones = _math.multiply(ones, w)

        def sums(values: Any) -> Tensor:
            return _lib.apply_op("ScatterAdd", None, [labels, values], _class_sums_kernel,
                                 np.float32, TensorShape([n]), num_classes=n)
        update_total = total.assign_add(sums(ones))
        update_count = count.assign_add(sums(is_correct))
        per_class = div_no_nan(count, _math.maximum(total, np.float32(0)), "per_class")
        value = _lib.apply_op("Mean", scoped_name("mean_accuracy"), [per_class],
                              _mean_kernel, np.float32, TensorShape([]))
        with _ops.control_dependencies([update_total, update_count]):
            update_op = div_no_nan(count, _math.maximum(total, np.float32(0)), "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update_op)
    return value, update_op


# ---- precision@k and recall@k ---------------------------------------------------------------

def _at_k_name(name: str, k: Any = None, class_id: Any = None) -> str:
    """TF's ``_at_k_name``: ``recall_at_5``, ``recall_at_k``, ``recall_at_5_class3``."""
    out = f"{name}_at_{int(k)}" if k is not None else f"{name}_at_k"
    return f"{out}_class{int(class_id)}" if class_id is not None else out


def _label_rows(labels: Any, lead: tuple[int, ...]) -> list[set[int]]:
    """Each row's label set (rows: the leading dimensions ``lead`` of the predictions, in
    row-major order), from a dense array ``[*lead, L]`` or a sparse value whose indices'
    leading columns are the row."""
    n_rows = int(np.prod(lead, dtype=np.int64))
    rows: list[set[int]] = [set() for _ in range(n_rows)]
    if isinstance(labels, SparseTensorValue):
        ind = np.asarray(labels.indices, np.int64)
        vals = np.asarray(labels.values).astype(np.int64)
        if ind.shape[1] == len(lead) + 1:
            ind = ind[:, :-1]
        elif ind.shape[1] != len(lead):
            raise errors.InvalidArgumentError(
                None, None, f"sparse labels of rank {ind.shape[1]} for predictions of rank "
                            f"{len(lead) + 1}: expected rank {len(lead)} or {len(lead) + 1}")
        flat = np.ravel_multi_index(ind.T, lead) if len(lead) else np.zeros(len(ind), int)
        for r, v in zip(flat, vals):
            rows[int(r)].add(int(v))
        return rows
    dense = np.asarray(labels).astype(np.int64).reshape(n_rows, -1)
    for r in range(n_rows):
        rows[r].update(int(v) for v in dense[r])
    return rows


def _weights_for_rows(weights: Any, lead: tuple[int, ...]) -> np.ndarray:
    if weights is None:
        return np.ones(lead, np.float64)
    w = np.asarray(weights, np.float64)
    if w.ndim and (w.ndim != len(lead) or any(a not in (1, b) for a, b in zip(w.shape, lead))):
        raise errors.InvalidArgumentError(
            None, None, f"weights of shape {list(w.shape)} can not be broadcast to the "
                        f"{list(lead)} rows of the predictions (rank 0, or that rank with "
                        f"dimensions 1 or the rows')")
    return np.broadcast_to(w, lead)


def _at_k_kernel(idx: Any, *rest: Any, sparse: bool, has_weights: bool,
                 class_id: Any) -> list[Any]:
    idx = np.asarray(idx).astype(np.int64)
    lead = tuple(idx.shape[:-1])
    labels: Any = SparseTensorValue(*rest[:3]) if sparse else rest[0]
    weights = rest[-1] if has_weights else None
    label_rows = _label_rows(labels, lead)
    w = _weights_for_rows(weights, lead).reshape(-1)
    preds = idx.reshape(len(label_rows), -1)
    tp = fp = fn = 0.0
    for r, lab in enumerate(label_rows):
        pred = set(int(v) for v in preds[r])
        if class_id is not None:
            lab = lab & {class_id}
            pred = pred & {class_id}
        tp += w[r] * len(pred & lab)
        fp += w[r] * len(pred - lab)
        fn += w[r] * len(lab - pred)
    return [np.float64(tp), np.float64(fp), np.float64(fn)]


def _prepare_labels(labels: Any, predictions_idx: Any) -> tuple[list[Any], bool]:
    """The labels' op inputs (a sparse tensor's three components, or a dense Tensor) and
    whether they are sparse; TF's ``_maybe_expand_labels`` rank rule checked statically.

    Raises:
        ValueError: dense labels of a rank other than the predictions' or one less."""
    if isinstance(labels, (SparseTensor, SparseTensorValue)):
        return [labels.indices, labels.values, labels.dense_shape], True
    labels = convert_to_tensor(labels)
    lr = _lib.static_shape(labels).ndims
    pr = _lib.static_shape(predictions_idx).ndims
    if lr is not None and pr is not None and pr not in (lr, lr + 1):
        raise ValueError(f"Unexpected labels shape {_lib.static_shape(labels)} for "
                         f"predictions shape {_lib.static_shape(predictions_idx)}. "
                         f"Predictions rank should be the same rank as labels rank or "
                         f"labels rank plus one .")
    return [labels], False


def _quotient_kernel(needs: Any, a: Any, b: Any) -> Any:
    a, b = np.float64(a), np.float64(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.float64(a / (a + b)), lambda dy: (None, None)


def _at_top_k(kind: str, labels: Any, predictions_idx: Any, k: Any, class_id: Any,
              weights: Any, metrics_collections: Any, updates_collections: Any,
              name: str | None) -> tuple[Tensor, Tensor]:
    other = "false_positive" if kind == "precision" else "false_negative"
    with _ops.name_scope(name, _at_k_name(kind, k, class_id)) as scope:
        idx = convert_to_tensor(predictions_idx)
        if _lib.static_shape(idx).ndims == 0:
            raise ValueError("The rank of `predictions_idx` must be at least 1.")
        label_inputs, sparse = _prepare_labels(labels, idx)
        inputs = [_math.cast(idx, np.int64)] + label_inputs
        if weights is not None:
            inputs.append(_math.cast(weights, np.float64))
        counts = _lib.apply_op_outputs(
            "SetSizes", None, inputs, _at_k_kernel, [np.float64] * 3,
            [TensorShape([])] * 3, sparse=sparse, has_weights=weights is not None,
            class_id=None if class_id is None else int(class_id))
        batch_tp, batch_other = counts[0], counts[1 if kind == "precision" else 2]
        tp_var = metric_variable([], np.float64, name=_at_k_name("true_positive", k, class_id))
        ot_var = metric_variable([], np.float64, name=_at_k_name(other, k, class_id))
        tp_update = read_after([tp_var.assign_add(batch_tp)], tp_var)
        ot_update = read_after([ot_var.assign_add(batch_other)], ot_var)
        base = scope.rstrip("/")
        metric = _lib.apply_op("RealDiv", f"{base}/value", [tp_var, ot_var], _quotient_kernel,
                               np.float64, TensorShape([]))
        update = _lib.apply_op("RealDiv", f"{base}/update", [tp_update, ot_update],
                               _quotient_kernel, np.float64, TensorShape([]))
    collect(metrics_collections, metric)
    collect(updates_collections, update)
    return metric, update


_AT_K_ARGS = """
    Args:
        labels: The class ids of each row: an int Tensor ``[D1, ... DN, num_labels]`` (or
            ``[D1, ... DN]``: one label), or a ``SparseTensor`` (value) of them, a set per
            row ([D1, ... DN] must match the predictions'). Ids outside the classes are
            never predicted (they count as false negatives for recall).
        {pred}
        k: {k}
        class_id: None (every class), or an int: only that class counts (NaN when it has
            no {denominator}).
        weights: None, or a Tensor of rank 0 or N broadcastable to [D1, ... DN] (per row).
        metrics_collections, updates_collections: Collections for the value and the
            update op.
        name: The name scope (default {default}).

    Returns:
        ``({what}, update_op)``: float64 scalars (NaN while the denominator is 0).

    Raises:
        ValueError: dense labels of a rank other than the predictions' or one less.
        InvalidArgumentError (at run): weights that do not broadcast to the rows.
    """
_PRED_SCORES = ("predictions: A float Tensor ``[D1, ... DN, num_classes]`` of scores; its "
                "``k`` largest\n            per row are the predicted classes.")
_PRED_IDX = ("predictions_idx: An int Tensor ``[D1, ... DN, k]`` of the predicted class "
             "ids (``top_k``'s\n            indices).")


def precision_at_k(labels: Any, predictions: Any, k: int, class_id: Any = None,
                   weights: Any = None, metrics_collections: Any = None,
                   updates_collections: Any = None, name: str | None = None
                   ) -> tuple[Tensor, Tensor]:
    with _ops.name_scope(name, _at_k_name("precision", k, class_id)) as scope:
        top = _nn.top_k(predictions, k)
        return _at_top_k("precision", labels, top.indices, k, class_id, weights,
                         metrics_collections, updates_collections, scope)


def recall_at_k(labels: Any, predictions: Any, k: int, class_id: Any = None,
                weights: Any = None, metrics_collections: Any = None,
                updates_collections: Any = None, name: str | None = None
                ) -> tuple[Tensor, Tensor]:
    with _ops.name_scope(name, _at_k_name("recall", k, class_id)) as scope:
        top = _nn.top_k(predictions, k)
        return _at_top_k("recall", labels, top.indices, k, class_id, weights,
                         metrics_collections, updates_collections, scope)


def sparse_precision_at_k(labels: Any, predictions: Any, k: int, class_id: Any = None,
                          weights: Any = None, metrics_collections: Any = None,
                          updates_collections: Any = None, name: str | None = None
                          ) -> tuple[Tensor, Tensor]:
    """TF1's deprecated name of :func:`precision_at_k` (``tf.metrics.sparse_precision_at_k``,
    "Renamed to `precision_at_k`"): the same metric, arguments and errors."""
    return precision_at_k(labels, predictions, k, class_id, weights, metrics_collections,
                          updates_collections, name)


def precision_at_top_k(labels: Any, predictions_idx: Any, k: Any = None,
                       class_id: Any = None, weights: Any = None,
                       metrics_collections: Any = None, updates_collections: Any = None,
                       name: str | None = None) -> tuple[Tensor, Tensor]:
    return _at_top_k("precision", labels, predictions_idx, k, class_id, weights,
                     metrics_collections, updates_collections, name)


def recall_at_top_k(labels: Any, predictions_idx: Any, k: Any = None, class_id: Any = None,
                    weights: Any = None, metrics_collections: Any = None,
                    updates_collections: Any = None, name: str | None = None
                    ) -> tuple[Tensor, Tensor]:
    return _at_top_k("recall", labels, predictions_idx, k, class_id, weights,
                     metrics_collections, updates_collections, name)


precision_at_k.__doc__ = (
    """How often a class among the ``k`` top-scored of a row is one of its labels,
    ``tp / (tp + fp)`` summed over every batch, as ``tf.metrics.precision_at_k``
    (``sparse_precision_at_k``): per row, ``tp`` the predicted classes that are labels and
    ``fp`` the others, in local float64 variables ``precision_at_<k>/true_positive_at_<k>``
    and ``false_positive_at_<k>``.
""" + _AT_K_ARGS.format(pred=_PRED_SCORES, k="The number of top classes (int >= 1).",
                        denominator="prediction", default="``precision_at_<k>``",
                        what="precision"))
recall_at_k.__doc__ = (
    """How often a label of a row is among its ``k`` top-scored classes,
    ``tp / (tp + fn)`` summed over every batch, as ``tf.metrics.recall_at_k``: per row,
    ``tp`` the labels predicted and ``fn`` the labels not, in local float64 variables
    ``recall_at_<k>/true_positive_at_<k>`` and ``false_negative_at_<k>``.
""" + _AT_K_ARGS.format(pred=_PRED_SCORES, k="The number of top classes (int >= 1).",
                        denominator="label", default="``recall_at_<k>``", what="recall"))
precision_at_top_k.__doc__ = (
    """:func:`precision_at_k` of predicted class ids instead of scores, as
    ``tf.metrics.precision_at_top_k``.
""" + _AT_K_ARGS.format(pred=_PRED_IDX, k="Only names the scope (``precision_at_<k>``).",
                        denominator="prediction", default="``precision_at_<k>``",
                        what="precision"))
recall_at_top_k.__doc__ = (
    """:func:`recall_at_k` of predicted class ids instead of scores, as
    ``tf.metrics.recall_at_top_k``.
""" + _AT_K_ARGS.format(pred=_PRED_IDX, k="Only names the scope (``recall_at_<k>``).",
                        denominator="label", default="``recall_at_<k>``", what="recall"))
