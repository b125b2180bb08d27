"""``tf.metrics``' binary counts, as TF r1.15's tensorflow/python/ops/metrics_impl.py:
``true_positives``, ``false_positives``, ``true_negatives``, ``false_negatives`` (bool
predictions), their ``*_at_thresholds`` forms, ``precision``, ``recall``,
``precision_at_thresholds``, ``recall_at_thresholds``, ``auc``,
``specificity_at_sensitivity`` and ``sensitivity_at_specificity`` (float predictions in
``[0, 1]``, positive when ``> threshold``).

Labels are cast to bool. Every count is a float32 local variable (see ``metrics_impl.py``)
named as TF's: ``true_positives/count``, ``precision/true_positives/count``,
``auc/true_positives`` (one entry per threshold) ...
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math
from psrt.ops import variable_scope as _vs
from psrt.ops.metrics_impl import (
    broadcast_weights,
    collect,
    div_no_nan,
    metric_variable,
    read_after,
    remove_squeezable,
    scoped_name,
)
from psrt.ops.variables import Variable

__all__ = ["auc", "false_negatives", "false_negatives_at_thresholds", "false_positives",
           "false_positives_at_thresholds", "precision", "precision_at_thresholds", "recall",
           "recall_at_thresholds", "sensitivity_at_specificity", "specificity_at_sensitivity",
           "true_negatives", "true_negatives_at_thresholds", "true_positives",
           "true_positives_at_thresholds"]

# ---- counts of bool predictions ---------------------------------------------------------------


def _count_condition(condition: Any, weights: Any, metrics_collections: Any,
                     updates_collections: Any) -> tuple[Tensor, Tensor]:
    """TF's ``_count_condition``: the (weighted) number of True entries of ``condition``
    summed over every batch, in the local variable ``count`` of the current scope."""
    count = metric_variable([], np.float32, name="count")
    values = _math.cast(condition, np.float32)
    if weights is not None:
        wr = _lib.static_shape(weights).ndims
        vr = _lib.static_shape(values).ndims
        if wr is not None and vr is not None and wr not in (0, vr):
            raise ValueError(f"weights must be a scalar or of the values' rank {vr}; got "
                             f"rank {wr} (shape {_lib.static_shape(weights)})")
        values = _math.multiply(values, _math.cast(weights, np.float32))
    value = _array.identity(count)
    update = read_after([count.assign_add(_math.reduce_sum(values))], count)
    collect(metrics_collections, value)
    collect(updates_collections, update)
    return value, update


def _bool_count(kind: str, labels: Any, predictions: Any, weights: Any,
                metrics_collections: Any, updates_collections: Any, name: str | None
                ) -> tuple[Tensor, Tensor]:
    want_label, want_pred = {"true_positives": (True, True),
                             "false_positives": (False, True),
                             "true_negatives": (False, False),
                             "false_negatives": (True, False)}[kind]
    with _vs.variable_scope(name, default_name=kind):
        labels, predictions, weights = remove_squeezable(
            _math.cast(labels, np.bool_), _math.cast(predictions, np.bool_), weights)
        cond = _math.logical_and(_math.equal(labels, want_label),
                                 _math.equal(predictions, want_pred))
        return _count_condition(cond, weights, metrics_collections, updates_collections)


def _bool_count_doc(what: str, tf_name: str) -> str:
    return f"""The (weighted) number of {what} over every batch, as ``tf.metrics.{tf_name}``:
    the local variable ``{tf_name}/count``.

    Args:
        labels: A Tensor of any dtype (cast to bool), of the predictions' shape (a trailing
            dimension of 1 of either is squeezed).
        predictions: A Tensor of any dtype (cast to bool).
        weights: None, or a Tensor of rank 0 or the labels' rank, broadcastable to them
            (one rank lower gets a trailing 1: per-row weights).
        metrics_collections, updates_collections: Collections for the value and the
            update op.
        name: The variable scope (default ``{tf_name}``).

    Returns:
        ``(value, update_op)``: float32 scalars; ``update_op`` adds the batch and gives
        the new count.

    Raises:
        ValueError: shapes that do not match, weights of another rank.
    """


def true_positives(labels: Any, predictions: Any, weights: Any = None,
                   metrics_collections: Any = None, updates_collections: Any = None,
                   name: str | None = None) -> tuple[Tensor, Tensor]:
    return _bool_count("true_positives", labels, predictions, weights, metrics_collections,
                       updates_collections, name)


def false_positives(labels: Any, predictions: Any, weights: Any = None,
                    metrics_collections: Any = None, updates_collections: Any = None,
                    name: str | None = None) -> tuple[Tensor, Tensor]:
    return _bool_count("false_positives", labels, predictions, weights, metrics_collections,
                       updates_collections, name)


def true_negatives(labels: Any, predictions: Any, weights: Any = None,
                   metrics_collections: Any = None, updates_collections: Any = None,
                   name: str | None = None) -> tuple[Tensor, Tensor]:
    return _bool_count("true_negatives", labels, predictions, weights, metrics_collections,
                       updates_collections, name)


def false_negatives(labels: Any, predictions: Any, weights: Any = None,
                    metrics_collections: Any = None, updates_collections: Any = None,
                    name: str | None = None) -> tuple[Tensor, Tensor]:
    return _bool_count("false_negatives", labels, predictions, weights, metrics_collections,
                       updates_collections, name)


true_positives.__doc__ = _bool_count_doc("true positives (label and prediction True)",
                                         "true_positives")
false_positives.__doc__ = _bool_count_doc("false positives (label False, prediction True)",
                                          "false_positives")
true_negatives.__doc__ = _bool_count_doc("true negatives (label and prediction False)",
                                         "true_negatives")
false_negatives.__doc__ = _bool_count_doc("false negatives (label True, prediction False)",
                                          "false_negatives")


def _ratio_kernel(needs: Any, a: Any, b: Any) -> Any:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    total = a + b
    out = np.where(total > 0, a / np.where(total > 0, total, 1), 0).astype(np.float32)
    return out, lambda dy: (None, None)


def _ratio(a: Any, b: Any, name: str) -> Tensor:
    """``a / (a + b)``, 0 where ``a + b`` is not positive (TF's precision and recall)."""
    return _lib.apply_op("Select", scoped_name(name), [a, b], _ratio_kernel, np.float32,
                         TensorShape([]))


def _ratio_metric(other: str, labels: Any, predictions: Any, weights: Any,
                  metrics_collections: Any, updates_collections: Any, name: str | None,
                  default: str) -> tuple[Tensor, Tensor]:
    with _vs.variable_scope(name, default_name=default):
        labels, predictions, weights = remove_squeezable(
            _math.cast(labels, np.bool_), _math.cast(predictions, np.bool_), weights)
        tp, tp_update = _bool_count("true_positives", labels, predictions, weights, None,
                                    None, None)
        ot, ot_update = _bool_count(other, labels, predictions, weights, None, None, None)
        value = _ratio(tp, ot, "value")
        update = _ratio(tp_update, ot_update, "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update)
    return value, update


def precision(labels: Any, predictions: Any, weights: Any = None,
              metrics_collections: Any = None, updates_collections: Any = None,
              name: str | None = None) -> tuple[Tensor, Tensor]:
    """``true_positives / (true_positives + false_positives)`` over every batch (0 with
    no positive prediction), as ``tf.metrics.precision``: local variables
    ``precision/true_positives/count`` and ``precision/false_positives/count``.

    Args:
        labels, predictions: Tensors of one shape, cast to bool.
        weights: None, or a Tensor of rank 0 or the labels' rank (one lower: per row).
        name: The variable scope (default ``precision``).

    Returns:
        ``(precision, update_op)``, float32 scalars.

    Raises:
        ValueError: shapes that do not match, weights of another rank.
    """
    return _ratio_metric("false_positives", labels, predictions, weights,
                         metrics_collections, updates_collections, name, "precision")


def recall(labels: Any, predictions: Any, weights: Any = None,
           metrics_collections: Any = None, updates_collections: Any = None,
           name: str | None = None) -> tuple[Tensor, Tensor]:
    """``true_positives / (true_positives + false_negatives)`` over every batch (0 with
    no positive label), as ``tf.metrics.recall``: local variables
    ``recall/true_positives/count`` and ``recall/false_negatives/count``; arguments and
    errors as :func:`precision`."""
    return _ratio_metric("false_negatives", labels, predictions, weights,
                         metrics_collections, updates_collections, name, "recall")


# ---- counts at thresholds ---------------------------------------------------------------------

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
    w = np.ones_like(p) if weights is None else np.asarray(weights, np.float32).reshape(-1)
    pos = p[None, :] > thresholds[:, None]             # [thresholds, predictions]
    wl = w * lab
    wn = w * ~lab
    tp = (pos * wl).sum(1)
    fp = (pos * wn).sum(1)
    return [tp.astype(np.float32), (wl.sum() - tp).astype(np.float32),
            (wn.sum() - fp).astype(np.float32), fp.astype(np.float32)]


def confusion_matrix_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float],
                                   weights: Any = None, includes: Sequence[str] | None = None
                                   ) -> tuple[dict[str, Variable], dict[str, Tensor]]:
    """TF's ``_confusion_matrix_at_thresholds``: per threshold, the (weighted) counts of
    true positives, false negatives, true negatives and false positives (a prediction is
    positive when ``> threshold``): the local variables of ``includes`` (keys of
    ``tp, fn, tn, fp``, made in that order) and their update values (the counts after
    adding a batch).

    Raises:
        ValueError: a key not in ``tp, fn, tn, fp``; shapes that do not match.
        InvalidArgumentError (at run): a prediction outside ``[0, 1]``."""
    if includes is None:
        includes = _INCLUDES
    for key in includes:
        if key not in _INCLUDES:
            raise ValueError(f"Invalid key: {key}; valid keys: {', '.join(_INCLUDES)}")
    labels, predictions, weights = remove_squeezable(
        _math.cast(labels, np.bool_), _math.cast(predictions, np.float32), weights)
    th = np.asarray(list(thresholds), np.float32)
    n = len(th)
    inputs = [labels, predictions]
    if weights is not None:
        inputs.append(broadcast_weights(weights, predictions))

    def fwd(lab: Any, pred: Any, w: Any = None, thresholds: np.ndarray = th) -> Any:
        return _confusion_kernel(lab, pred, w, thresholds=thresholds)
    counts = dict(zip(_INCLUDES, _lib.apply_op_outputs(
        "ConfusionMatrixAtThresholds", None, inputs, fwd, [np.float32] * 4,
        [TensorShape([n])] * 4)))
    values: dict[str, Variable] = {}
    updates: dict[str, Tensor] = {}
    for key in _INCLUDES:
        if key in includes:
            var = metric_variable([n], np.float32, name=_VAR_NAMES[key])
            values[key] = var
            updates[key] = read_after([var.assign_add(counts[key])], var)
    return values, updates


def _count_at_thresholds(key: str, labels: Any, predictions: Any, thresholds: Any,
                         weights: Any, metrics_collections: Any, updates_collections: Any,
                         name: str | None) -> tuple[Tensor, Tensor]:
    with _vs.variable_scope(name, default_name=_VAR_NAMES[key]):
        values, updates = confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                         weights, includes=(key,))
        value = _array.identity(values[key])
    collect(metrics_collections, value)
    collect(updates_collections, updates[key])
    return value, updates[key]


def _at_thresholds_doc(what: str, tf_name: str) -> str:
    return f"""The (weighted) number of {what} at each threshold over every batch, as
    ``tf.metrics.{tf_name}_at_thresholds``: the local variable ``{tf_name}/{tf_name}``
    (``[len(thresholds)]``). A prediction is positive when ``> threshold``.

    Args:
        labels: A Tensor of the predictions' shape (cast to bool).
        predictions: A float Tensor of values in ``[0, 1]``.
        thresholds: A list of float thresholds.
        weights: None, or a Tensor broadcastable to the predictions (one rank lower gets a
            trailing 1: per-row weights).
        name: The variable scope (default ``{tf_name}``).

    Returns:
        ``(value, update_op)``: float32 ``[len(thresholds)]``.

    Raises:
        ValueError: shapes that do not match, weights that do not broadcast.
        InvalidArgumentError (at run): a prediction outside ``[0, 1]``.
    """


def true_positives_at_thresholds(labels: Any, predictions: Any, thresholds: Any,
                                 weights: Any = None, metrics_collections: Any = None,
                                 updates_collections: Any = None, name: str | None = None
                                 ) -> tuple[Tensor, Tensor]:
    return _count_at_thresholds("tp", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def false_positives_at_thresholds(labels: Any, predictions: Any, thresholds: Any,
                                  weights: Any = None, metrics_collections: Any = None,
                                  updates_collections: Any = None, name: str | None = None
                                  ) -> tuple[Tensor, Tensor]:
    return _count_at_thresholds("fp", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def true_negatives_at_thresholds(labels: Any, predictions: Any, thresholds: Any,
                                 weights: Any = None, metrics_collections: Any = None,
                                 updates_collections: Any = None, name: str | None = None
                                 ) -> tuple[Tensor, Tensor]:
    return _count_at_thresholds("tn", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def false_negatives_at_thresholds(labels: Any, predictions: Any, thresholds: Any,
                                  weights: Any = None, metrics_collections: Any = None,
                                  updates_collections: Any = None, name: str | None = None
                                  ) -> tuple[Tensor, Tensor]:
    return _count_at_thresholds("fn", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


true_positives_at_thresholds.__doc__ = _at_thresholds_doc("true positives", "true_positives")
false_positives_at_thresholds.__doc__ = _at_thresholds_doc("false positives",
                                                           "false_positives")
true_negatives_at_thresholds.__doc__ = _at_thresholds_doc("true negatives", "true_negatives")
false_negatives_at_thresholds.__doc__ = _at_thresholds_doc("false negatives",
                                                           "false_negatives")


def _eps_ratio_kernel(needs: Any, a: Any, b: Any) -> Any:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return (a / (np.float32(1e-7) + a + b)).astype(np.float32), lambda dy: (None, None)


def _at_thresholds_ratio(other: str, default: str, labels: Any, predictions: Any,
                         thresholds: Any, weights: Any, metrics_collections: Any,
                         updates_collections: Any, name: str | None
                         ) -> tuple[Tensor, Tensor]:
    with _vs.variable_scope(name, default_name=default):
        values, updates = confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                         weights, includes=("tp", other))
        shape = TensorShape([len(list(thresholds))])
        prefix = default.split("_")[0]

        def ratio(a: Any, b: Any, what: str) -> Tensor:
            return _lib.apply_op("RealDiv", scoped_name(f"{prefix}_{what}"), [a, b],
                                 _eps_ratio_kernel, np.float32, shape)
        value = ratio(values["tp"], values[other], "value")
        update = ratio(updates["tp"], updates[other], "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update)
    return value, update


def precision_at_thresholds(labels: Any, predictions: Any, thresholds: Any,
                            weights: Any = None, metrics_collections: Any = None,
                            updates_collections: Any = None, name: str | None = None
                            ) -> tuple[Tensor, Tensor]:
    """Per threshold, ``tp / (1e-7 + tp + fp)`` over every batch, as
    ``tf.metrics.precision_at_thresholds``: local variables
    ``precision_at_thresholds/true_positives`` and ``.../false_positives``. Arguments and
    errors as :func:`true_positives_at_thresholds`.

    Returns:
        ``(precision, update_op)``: float32 ``[len(thresholds)]``.
    """
    return _at_thresholds_ratio("fp", "precision_at_thresholds", labels, predictions,
                                thresholds, weights, metrics_collections,
                                updates_collections, name)


def recall_at_thresholds(labels: Any, predictions: Any, thresholds: Any, weights: Any = None,
                         metrics_collections: Any = None, updates_collections: Any = None,
                         name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, ``tp / (1e-7 + tp + fn)`` over every batch, as
    ``tf.metrics.recall_at_thresholds``: local variables
    ``recall_at_thresholds/true_positives`` and ``.../false_negatives``. Arguments and
    errors as :func:`true_positives_at_thresholds`.

    Returns:
        ``(recall, update_op)``: float32 ``[len(thresholds)]``.
    """
    return _at_thresholds_ratio("fn", "recall_at_thresholds", labels, predictions,
                                thresholds, weights, metrics_collections,
                                updates_collections, name)


# ---- auc ----------------------------------------------------------------------------------

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
        prec_slope = div_no_nan(dtp, _math.maximum(p[:n - 1] - p[1:], np.float32(0)),
                                "prec_slope")
        intercept = tp[1:] - _math.multiply(prec_slope, p[1:])
        safe_p_ratio = _array.where(
            _math.logical_and(_math.greater(p[:n - 1], np.float32(0)),
                              _math.greater(p[1:], np.float32(0))),
            div_no_nan(p[:n - 1], _math.maximum(p[1:], np.float32(0)),
                       "recall_relative_ratio"),
            _array.ones_like(p[1:]))
        return _math.reduce_sum(
            div_no_nan(prec_slope * (dtp + intercept * _math.log(safe_p_ratio)),
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
    return _math.reduce_sum(_math.multiply(dx, h), name=scoped_name(name))


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
        values, updates = confusion_matrix_at_thresholds(labels, predictions, th, weights)
        value = _compute_auc(values["tp"], values["fn"], values["tn"], values["fp"],
                             num_thresholds, curve, summation_method, "value")
        update_op = _compute_auc(updates["tp"], updates["fn"], updates["tn"], updates["fp"],
                                 num_thresholds, curve, summation_method, "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update_op)
    return value, update_op


# ---- specificity and sensitivity ------------------------------------------------------------

_KEPSILON = 1e-7


def _spec_at_sens_kernel(needs: Any, tp: Any, tn: Any, fp: Any, fn: Any, target: float
                         ) -> Any:
    k = np.float32(_KEPSILON)
    sens = tp / (tp + fn + k)
    dist = np.abs(sens - np.float32(target))
    # The last threshold of those nearest the sensitivity (TF's cumsum/argmax trick).
    idx = int(np.nonzero(dist == dist.min())[0][-1])
    return np.float32(tn[idx] / (tn[idx] + fp[idx] + k)), lambda dy: (None,) * 4


def _sens_at_spec_kernel(needs: Any, tp: Any, tn: Any, fp: Any, fn: Any, target: float
                         ) -> Any:
    k = np.float32(_KEPSILON)
    spec = tn / (tn + fp + k)
    idx = int(np.argmin(np.abs(spec - np.float32(target))))   # the first nearest
    return np.float32(tp[idx] / (tp[idx] + fn[idx] + k)), lambda dy: (None,) * 4


def _at_rate(kind: str, labels: Any, predictions: Any, target: float, weights: Any,
             num_thresholds: int, metrics_collections: Any, updates_collections: Any,
             name: str | None) -> tuple[Tensor, Tensor]:
    arg = "sensitivity" if kind == "specificity_at_sensitivity" else "specificity"
    if target < 0 or target > 1:
        raise ValueError(f"`{arg}` must be in the range [0, 1]; got {target}")
    n = int(num_thresholds)
    if n < 2:
        raise ValueError(f"num_thresholds must be > 1; got {num_thresholds}")
    # TF's endpoints: 1 - 1e-7 for specificity_at_sensitivity, 1 + 1e-7 for the other.
    last = 1.0 - _KEPSILON if kind == "specificity_at_sensitivity" else 1.0 + _KEPSILON
    th = [0.0 - _KEPSILON] + [(i + 1) * 1.0 / (n - 1) for i in range(n - 2)] + [last]
    kernel = _spec_at_sens_kernel if kind == "specificity_at_sensitivity" \
        else _sens_at_spec_kernel
    with _vs.variable_scope(name, default_name=kind):
        values, updates = confusion_matrix_at_thresholds(labels, predictions, th, weights)

        def rate(src: dict[str, Any], what: str) -> Tensor:
            return _lib.apply_op("RealDiv", scoped_name(what),
                                 [src["tp"], src["tn"], src["fp"], src["fn"]], kernel,
                                 np.float32, TensorShape([]), target=float(target))
        value = rate(values, "value")
        update = rate(updates, "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update)
    return value, update


def specificity_at_sensitivity(labels: Any, predictions: Any, sensitivity: float,
                               weights: Any = None, num_thresholds: int = 200,
                               metrics_collections: Any = None,
                               updates_collections: Any = None, name: str | None = None
                               ) -> tuple[Tensor, Tensor]:
    """The specificity ``tn / (tn + fp)`` at the threshold whose sensitivity
    ``tp / (tp + fn)`` is nearest ``sensitivity`` (the last such threshold), over every
    batch, as ``tf.metrics.specificity_at_sensitivity``: ``num_thresholds`` thresholds in
    ``[-1e-7, 1 - 1e-7]`` and local variables ``specificity_at_sensitivity/
    true_positives``, ``false_negatives``, ``true_negatives``, ``false_positives``.

    Args:
        labels: A Tensor of the predictions' shape (cast to bool).
        predictions: A float Tensor of values in ``[0, 1]``.
        sensitivity: A float in ``[0, 1]``.
        weights: None, or a Tensor broadcastable to the predictions.
        num_thresholds: The number of thresholds (int > 1, default 200).

    Returns:
        ``(specificity, update_op)``, float32 scalars.

    Raises:
        ValueError: ``sensitivity`` outside ``[0, 1]``, shapes that do not match.
        InvalidArgumentError (at run): a prediction outside ``[0, 1]``.
    """
    return _at_rate("specificity_at_sensitivity", labels, predictions, sensitivity, weights,
                    num_thresholds, metrics_collections, updates_collections, name)


def sensitivity_at_specificity(labels: Any, predictions: Any, specificity: float,
                               weights: Any = None, num_thresholds: int = 200,
                               metrics_collections: Any = None,
                               updates_collections: Any = None, name: str | None = None
                               ) -> tuple[Tensor, Tensor]:
    """The sensitivity ``tp / (tp + fn)`` at the threshold whose specificity
    ``tn / (tn + fp)`` is nearest ``specificity`` (the first such threshold), over every
    batch, as ``tf.metrics.sensitivity_at_specificity``: thresholds in
    ``[-1e-7, 1 + 1e-7]``, local variables ``sensitivity_at_specificity/true_positives``
    ...; arguments and errors as :func:`specificity_at_sensitivity`.

    Returns:
        ``(sensitivity, update_op)``, float32 scalars.
    """
    return _at_rate("sensitivity_at_specificity", labels, predictions, specificity, weights,
                    num_thresholds, metrics_collections, updates_collections, name)

