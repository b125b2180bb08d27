"""``tf.metrics``: streaming metrics, as TF r1.15's tensorflow/python/ops/metrics_impl.py.

Each metric returns ``(value, update_op)``: ``update_op`` adds a batch to the metric's
accumulators and gives the metric over every batch so far, ``value`` reads it without
adding. The accumulators are local variables (``LOCAL_VARIABLES`` and
``METRIC_VARIABLES``, float32, zeros, not trainable): held by this worker (never a ps task,
so workers do not mix their counts), not saved by the default ``Saver``, and reset by
``tf.local_variables_initializer()`` (what a ``MonitoredTrainingSession``'s
``local_init_op`` runs). Their names are TF's: ``accuracy/total``, ``accuracy/count``,
``auc/true_positives`` ...

    acc, acc_op = tf.metrics.accuracy(labels, predictions)
    sess.run(tf.local_variables_initializer())
    for batch in batches:
        sess.run(acc_op, feed_dict=batch)
    print(sess.run(acc))
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.ops import GraphKeys
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math
from psrt.ops import variable_scope as _vs
from psrt.ops.variables import Variable


def metric_variable(shape: Sequence[int], dtype: Any, validate_shape: bool = True,
                    name: str | None = None) -> Variable:
    """A zero-initialized local variable of ``shape`` for a metric's accumulator, as TF's
    ``metric_variable``: not trainable, in ``LOCAL_VARIABLES`` and ``METRIC_VARIABLES``,
    named in the current name scope."""
    dt = _lib.np_dtype(dtype)
    return Variable(np.zeros(tuple(shape), dt), trainable=False, dtype=dt,
                    collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
                    name=name)


def _div_no_nan_kernel(needs: Any, x: Any, y: Any) -> Any:
    x, y = np.asarray(x), np.asarray(y)
    safe = np.where(y == 0, np.ones_like(y), y)
    return np.where(y == 0, np.zeros_like(x), x / safe).astype(x.dtype), \
        lambda dy: (None, None)


def _div_no_nan(x: Any, y: Any, name: str) -> Tensor:
    """``x / y`` elementwise, 0 where ``y`` is 0 (TF's ``div_no_nan``); no gradient."""
    scope = _ops.get_default_graph().get_name_scope()
    shape = _lib.broadcast_static(_lib.static_shape(x), _lib.static_shape(y))
    return _lib.apply_op("DivNoNan", f"{scope}/{name}" if scope else name, [x, y],
                         _div_no_nan_kernel, np.float32, shape)


def _squeeze_last(x: Any) -> Any:
    return _array.squeeze(x, [-1])


def _remove_squeezable(labels: Any, predictions: Any, weights: Any) -> tuple[Any, Any, Any]:
    """TF's ``_remove_squeezable_dimensions`` on static ranks: a trailing dimension of 1
    squeezed off whichever of labels/predictions has one more dimension, and off weights
    one rank above the predictions."""
    pr = _lib.static_shape(predictions).ndims
    if labels is not None:
        lr = _lib.static_shape(labels).ndims
        if lr is not None and pr is not None:
            if pr - lr == 1 and _lib.static_shape(predictions).as_list()[-1] == 1:
                predictions = _squeeze_last(predictions)
                pr -= 1
            elif lr - pr == 1 and _lib.static_shape(labels).as_list()[-1] == 1:
                labels = _squeeze_last(labels)
    if weights is not None:
        wr = _lib.static_shape(weights).ndims
        if wr is not None and pr is not None and wr - pr == 1:
            weights = _squeeze_last(weights)
    return labels, predictions, weights


def _broadcast_weights(weights: Any, values: Any) -> Any:
    """``weights`` (float32) broadcast to ``values``' shape, as TF's ``broadcast_weights``."""
    return _math.multiply(_math.cast(weights, np.float32), _array.ones_like(values,
                                                                            np.float32))


def _collect(collections: Any, value: Any) -> None:
    if collections:
        _ops.add_to_collections(collections, value)


def mean(values: Any, weights: Any = None, metrics_collections: Any = None,
         updates_collections: Any = None, name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of every ``values`` seen, as ``tf.metrics.mean``: accumulators
    ``<name>/total`` (sum of ``values * weights``) and ``<name>/count`` (sum of weights, or
    the number of values), the value ``total / count`` (0 before any value).

    Args:
        values: A numeric Tensor of any shape (cast to float32).
        weights: None, or a Tensor broadcastable to ``values`` (a zero weight drops a value).
        metrics_collections, updates_collections: Collections the value and the update op
            are added to.
        name: The variable scope (default ``mean``).

    Returns:
        ``(mean, update_op)``: float32 scalar Tensors; running ``update_op`` adds the batch
        and gives the new mean.
    """
    with _vs.variable_scope(name, default_name="mean"):
        values = _math.cast(values, np.float32)
        total = metric_variable([], np.float32, name="total")
        count = metric_variable([], np.float32, name="count")
        if weights is None:
            num_values = _math.cast(_array.size(values), np.float32)
        else:
            _, values, weights = _remove_squeezable(None, values, weights)
            weights = _broadcast_weights(weights, values)
            values = _math.multiply(values, weights)
            num_values = _math.reduce_sum(weights)
        update_total = total.assign_add(_math.reduce_sum(values))
        update_count = count.assign_add(num_values)
        value = _div_no_nan(total, _math.maximum(count, np.float32(0)), "value")
        with _ops.control_dependencies([update_total, update_count]):
            update_op = _div_no_nan(total, _math.maximum(count, np.float32(0)), "update_op")
    _collect(metrics_collections, value)
    _collect(updates_collections, update_op)
    return value, update_op


def accuracy(labels: Any, predictions: Any, weights: Any = None,
             metrics_collections: Any = None, updates_collections: Any = None,
             name: str | None = None) -> tuple[Tensor, Tensor]:
    """How often ``predictions`` equal ``labels`` (weighted), as ``tf.metrics.accuracy``:
    the :func:`mean` of ``equal(predictions, labels)`` in the scope ``accuracy``.

    Args:
        labels: A Tensor of any shape (a trailing dimension of 1 is squeezed).
        predictions: A Tensor of the labels' shape (cast to the labels' dtype).
        weights: None, or a Tensor broadcastable to the labels.

    Returns:
        ``(accuracy, update_op)``, float32 scalars.

    Raises:
        ValueError: labels and predictions of incompatible static shapes.
    """
    labels = convert_to_tensor(labels)
    predictions = convert_to_tensor(predictions)
    labels, predictions, weights = _remove_squeezable(labels, predictions, weights)
    if not _lib.static_shape(predictions).is_compatible_with(_lib.static_shape(labels)):
        raise ValueError(f"Shapes {_lib.static_shape(predictions)} and "
                         f"{_lib.static_shape(labels)} are incompatible")
    if labels.dtype != predictions.dtype:
        predictions = _math.cast(predictions, labels.dtype)
    is_correct = _math.cast(_math.equal(predictions, labels), np.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


# ---- auc --------------------------------------------------------------------------------------

_INCLUDES = ("tp", "fn", "tn", "fp")
_VAR_NAMES = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
              "fp": "false_positives"}


def _confusion_kernel(labels: Any, predictions: Any, weights: Any, *,
                      thresholds: np.ndarray) -> list[np.ndarray]:
    p = np.asarray(predictions, np.float32).reshape(-1)
    if p.size and (np.nanmin(p) < 0 or np.nanmax(p) > 1):
        raise errors.InvalidArgumentError(
            None, None, f"predictions must be in [0, 1]: got values in "
                        f"[{np.nanmin(p)}, {np.nanmax(p)}]")
    lab = np.asarray(labels).astype(bool).reshape(-1)
    if lab.size != p.size:
        raise errors.InvalidArgumentError(
            None, None, f"labels and predictions must have the same number of elements: "
                        f"{lab.size} vs {p.size}")
    w = np.ones_like(p) if weights is None else np.broadcast_to(
        np.asarray(weights, np.float32), np.shape(predictions)).reshape(-1)
    pos = p[None, :] > thresholds[:, None]             # [thresholds, predictions]
    wl = w * lab
    wn = w * ~lab
    tp = (pos * wl).sum(1)
    fp = (pos * wn).sum(1)
    return [tp.astype(np.float32), (wl.sum() - tp).astype(np.float32),
            (wn.sum() - fp).astype(np.float32), fp.astype(np.float32)]


def _confusion_matrix_at_thresholds(labels: Any, predictions: Any, thresholds: list[float],
                                    weights: Any = None) -> tuple[dict[str, Variable],
                                                                  dict[str, Any]]:
    """TF's ``_confusion_matrix_at_thresholds``: per threshold, the (weighted) counts of
    true positives, false negatives, true negatives and false positives (a prediction is
    positive when ``> threshold``), as local variables and the ops adding a batch."""
    labels, predictions, weights = _remove_squeezable(
        _math.cast(labels, np.bool_), _math.cast(predictions, np.float32), weights)
    th = np.asarray(thresholds, np.float32)
    n = len(thresholds)
    inputs = [labels, predictions] + ([] if weights is None else [weights])

    def fwd(lab: Any, pred: Any, w: Any = None, thresholds: np.ndarray = th) -> Any:
        return _confusion_kernel(lab, pred, w, thresholds=thresholds)
    counts = _lib.apply_op_outputs("ConfusionMatrixAtThresholds", None, inputs, fwd,
                                   [np.float32] * 4, [TensorShape([n])] * 4)
    values: dict[str, Variable] = {}
    updates: dict[str, Any] = {}
    for key, c in zip(_INCLUDES, counts):
        var = metric_variable([n], np.float32, name=_VAR_NAMES[key])
        values[key] = var
        updates[key] = var.assign_add(c)
    return values, updates


_SUMMATIONS = ("trapezoidal", "careful_interpolation", "minoring", "majoring")


def _compute_auc(tp: Any, fn: Any, tn: Any, fp: Any, n: int, curve: str,
                 summation_method: str, name: str) -> Tensor:
    """TF's ``compute_auc``: the area under the ROC (false-positive rate, recall) or PR
    (recall, precision) points of the thresholds, by trapezoids, or by the lower
    (``minoring``) or upper (``majoring``) rectangles; PR by ``careful_interpolation`` as
    TF's ``interpolate_pr_auc``."""
    epsilon = np.float32(1.0e-6)
    if curve == "PR" and summation_method == "careful_interpolation":
        dtp = tp[:n - 1] - tp[1:]
        p = tp + fp
        prec_slope = _div_no_nan(dtp, _math.maximum(p[:n - 1] - p[1:], np.float32(0)),
                                 "prec_slope")
        intercept = tp[1:] - _math.multiply(prec_slope, p[1:])
        safe_p_ratio = _array.where(
            _math.logical_and(_math.greater(p[:n - 1], np.float32(0)),
                              _math.greater(p[1:], np.float32(0))),
            _div_no_nan(p[:n - 1], _math.maximum(p[1:], np.float32(0)),
                        "recall_relative_ratio"),
            _array.ones_like(p[1:]))
        return _math.reduce_sum(
            _div_no_nan(prec_slope * (dtp + intercept * _math.log(safe_p_ratio)),
                        _math.maximum(tp[1:] + fn[1:], np.float32(0)), "pr_auc_increment"),
            name=name)
    rec = _math.truediv(tp + epsilon, tp + fn + epsilon)
    if curve == "ROC":
        x, y = _math.truediv(fp, fp + tn + epsilon), rec
    else:
        x, y = rec, _math.truediv(tp + epsilon, tp + fp + epsilon)
    dx = x[:n - 1] - x[1:]
    if summation_method == "minoring":
        h = _math.minimum(y[:n - 1], y[1:])
    elif summation_method == "majoring":
        h = _math.maximum(y[:n - 1], y[1:])
    else:
        h = (y[:n - 1] + y[1:]) / np.float32(2.0)
    scope = _ops.get_default_graph().get_name_scope()
    return _math.reduce_sum(_math.multiply(dx, h), name=f"{scope}/{name}" if scope else name)


def auc(labels: Any, predictions: Any, weights: Any = None, num_thresholds: int = 200,
        metrics_collections: Any = None, updates_collections: Any = None,
        curve: str = "ROC", name: str | None = None,
        summation_method: str = "trapezoidal", thresholds: Any = None
        ) -> tuple[Tensor, Tensor]:
    """The area under the ROC or PR curve of every batch seen, as ``tf.metrics.auc``
    (TF1's Riemann sum over ``num_thresholds`` thresholds evenly spaced in ``[0, 1]``, the
    first ``-1e-7`` and the last ``1 + 1e-7``).

    Args:
        labels: Bool (or 0/1) Tensor of the predictions' shape.
        predictions: Float Tensor of probabilities in ``[0, 1]``.
        weights: None, or a Tensor broadcastable to the predictions.
        num_thresholds: Number of thresholds (int > 1).
        curve: ``"ROC"`` or ``"PR"``.
        summation_method: ``"trapezoidal"`` (TF1's default), ``"careful_interpolation"``,
            ``"minoring"`` or ``"majoring"``.
        thresholds: Explicit thresholds in ``[0, 1]`` (then ``num_thresholds`` is theirs
            plus 2).

    Returns:
        ``(auc, update_op)``, float32 scalars. The accumulators are
        ``<name>/true_positives``, ``false_negatives``, ``true_negatives``,
        ``false_positives`` (``[num_thresholds]`` each).

    Raises:
        ValueError: an unknown curve or summation method, or ``num_thresholds < 2``.
        InvalidArgumentError (at run): a prediction outside ``[0, 1]``.
    """
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    if summation_method not in _SUMMATIONS:
        raise ValueError(f"Invalid summation_method: {summation_method}; valid: "
                         f"{', '.join(_SUMMATIONS)}")
    kepsilon = 1e-7
    if thresholds is not None:
        inner = sorted(float(t) for t in thresholds)
        num_thresholds = len(inner) + 2
    else:
        if int(num_thresholds) < 2:
            raise ValueError(f"num_thresholds must be > 1; got {num_thresholds}")
        num_thresholds = int(num_thresholds)
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    th = [0.0 - kepsilon] + inner + [1.0 + kepsilon]
    with _vs.variable_scope(name, default_name="auc"):
        values, updates = _confusion_matrix_at_thresholds(labels, predictions, th, weights)
        value = _compute_auc(values["tp"], values["fn"], values["tn"], values["fp"],
                             num_thresholds, curve, summation_method, "value")
        with _ops.control_dependencies([updates[k] for k in _INCLUDES]):
            tp, fn, tn, fp = (_array.identity(values[k]) for k in _INCLUDES)
            update_op = _compute_auc(tp, fn, tn, fp, num_thresholds, curve,
                                     summation_method, "update_op")
    _collect(metrics_collections, value)
    _collect(updates_collections, update_op)
    return value, update_op
