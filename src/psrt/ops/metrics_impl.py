"""``tf.metrics``: streaming metrics, as TF r1.15's tensorflow/python/ops/metrics_impl.py.

Each metric returns ``(value, update_op)``: ``update_op`` adds a batch to the metric's
accumulators and gives the metric over every batch so far, ``value`` reads it without
adding. The accumulators are local variables (``LOCAL_VARIABLES`` and
``METRIC_VARIABLES``, zeros, not trainable): held by this worker (never a ps task, so
workers do not mix their counts), not saved by the default ``Saver``, and reset by
``tf.local_variables_initializer()`` (what a ``MonitoredTrainingSession``'s
``local_init_op`` runs). Their names are TF's: ``accuracy/total``, ``accuracy/count``,
``auc/true_positives`` ...

    acc, acc_op = tf.metrics.accuracy(labels, predictions)
    sess.run(tf.local_variables_initializer())
    for batch in batches:
        sess.run(acc_op, feed_dict=batch)
    print(sess.run(acc))

This module holds the means (``mean``, ``accuracy``, ``mean_tensor``, the regression errors,
``mean_cosine_distance``, ``percentage_below``) and what every metric shares (accumulators,
TF's weight rules); ``metrics_confusion.py`` the binary counts at thresholds (``auc``,
``precision``, ``recall``, ...), ``metrics_multiclass.py`` the class metrics (``mean_iou``,
``mean_per_class_accuracy``, ``precision_at_k``, ``recall_at_k``).
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


def scoped_name(name: str) -> str:
    """``name`` in the current name scope (the names of metric values, as TF's)."""
    scope = _ops.get_default_graph().get_name_scope()
    return f"{scope}/{name}" if scope else name


def _div_no_nan_kernel(needs: Any, x: Any, y: Any, dtype: Any) -> Any:
    x, y = np.asarray(x, dtype), np.asarray(y, dtype)
    safe = np.where(y == 0, np.ones_like(y), y)
    return np.where(y == 0, np.zeros_like(x), x / safe).astype(dtype), \
        lambda dy: (None, None)


def div_no_nan(x: Any, y: Any, name: str, dtype: Any = np.float32) -> Tensor:
    """``x / y`` elementwise, 0 where ``y`` is 0 (TF's ``div_no_nan``), named ``name`` in
    the current scope; no gradient."""
    shape = _lib.broadcast_static(_lib.static_shape(x), _lib.static_shape(y))
    dt = np.dtype(dtype)
    return _lib.apply_op("DivNoNan", scoped_name(name), [x, y], _div_no_nan_kernel, dt,
                         shape, dtype=dt)


def read_after(ops: Sequence[Any], var: Any) -> Tensor:
    """The value of ``var`` read after ``ops`` (its assignments) ran: what TF's
    ``assign_add`` returns, the update op of a count."""
    with _ops.control_dependencies(list(ops)):
        return _array.identity(var)


def _squeeze_last(x: Any) -> Any:
    return _array.squeeze(x, [-1])


def remove_squeezable(labels: Any, predictions: Any, weights: Any
                      ) -> tuple[Any, Any, Any]:
    """TF's ``_remove_squeezable_dimensions`` on static ranks: a trailing dimension of 1
    squeezed off whichever of labels/predictions has one more dimension; weights (unless
    scalar) squeezed when one rank above the predictions, expanded by a trailing 1 when
    one below. Unknown ranks are left to :func:`broadcast_weights`' run-time rule.

    Raises:
        ValueError: labels and predictions of incompatible static shapes."""
    predictions = convert_to_tensor(predictions)
    pr = _lib.static_shape(predictions).ndims
    if labels is not None:
        labels = convert_to_tensor(labels)
        lr = _lib.static_shape(labels).ndims
        if lr is not None and pr is not None:
            if pr - lr == 1 and _lib.static_shape(predictions).as_list()[-1] == 1:
                predictions = _squeeze_last(predictions)
                pr -= 1
            elif lr - pr == 1 and _lib.static_shape(labels).as_list()[-1] == 1:
                labels = _squeeze_last(labels)
        ps, ls = _lib.static_shape(predictions), _lib.static_shape(labels)
        if not ps.is_compatible_with(ls):
            raise ValueError(f"Shapes {ps} and {ls} are incompatible")
    if weights is not None:
        weights = convert_to_tensor(weights)
        wr = _lib.static_shape(weights).ndims
        if wr and pr is not None:
            if wr - pr == 1:
                weights = _squeeze_last(weights)
            elif pr - wr == 1:
                weights = _array.expand_dims(weights, -1)
    return labels, predictions, weights


def _broadcast_message(values_shape: Any, weights_shape: Any) -> str:
    vs, ws = list(values_shape), list(weights_shape)
    return (f"weights can not be broadcast to values. values.rank={len(vs)}. "
            f"weights.rank={len(ws)}. values.shape={vs}. weights.shape={ws}.")


def _broadcastable(ws: Sequence[Any], vs: Sequence[Any]) -> bool:
    """TF's rule (weights_broadcast_ops): scalar weights, or the values' rank with each
    dimension 1 or the values' (None: unknown, accepted)."""
    if len(ws) == 0:
        return True
    return len(ws) == len(vs) and all(
        w is None or v is None or w == 1 or w == v for w, v in zip(ws, vs))


def _broadcast_kernel(needs: Any, w: Any, v: Any) -> Any:
    w = np.asarray(w, np.float32)
    shape = np.shape(v)
    if w.ndim and w.ndim - len(shape) == 1 and w.shape[-1] == 1:
        w = w[..., 0]                                  # TF's run-time squeeze
    elif w.ndim and len(shape) - w.ndim == 1:
        w = w[..., None]                               # and expand
    if not _broadcastable(w.shape, shape):
        raise errors.InvalidArgumentError(None, None, _broadcast_message(shape, w.shape))
    return np.array(np.broadcast_to(w, shape), np.float32), lambda dy: (None, None)


def broadcast_weights(weights: Any, values: Any) -> Tensor:
    """``weights`` (float32) broadcast to ``values``' shape, as TF's ``broadcast_weights``:
    scalar weights, or weights of the values' rank whose dimensions are 1 or the values'.

    Raises:
        ValueError: static shapes that break the rule ("weights can not be broadcast to
            values", TF's message); InvalidArgumentError at run for dynamic ones."""
    ws, vs = _lib.static_shape(weights), _lib.static_shape(values)
    if ws.ndims is not None and vs.ndims is not None and not _broadcastable(
            ws.as_list(), vs.as_list()):
        raise ValueError(_broadcast_message(vs.as_list(), ws.as_list()))
    return _lib.apply_op("BroadcastWeights", None, [weights, values], _broadcast_kernel,
                         np.float32, vs)


def collect(collections: Any, value: Any) -> None:
    """Adds ``value`` to each of ``collections`` (None or a list of keys)."""
    if collections:
        _ops.add_to_collections(collections, value)


# ---- means --------------------------------------------------------------------------------

def mean(values: Any, weights: Any = None, metrics_collections: Any = None,
         updates_collections: Any = None, name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of every ``values`` seen, as ``tf.metrics.mean``: accumulators
    ``<name>/total`` (sum of ``values * weights``) and ``<name>/count`` (sum of weights, or
    the number of values), the value ``total / count`` (0 before any value).

    Args:
        values: A numeric Tensor of any shape (cast to float32).
        weights: None, or a Tensor broadcastable to ``values`` (scalar, or of its rank with
            dimensions 1 or the values'; a zero weight drops a value).
        metrics_collections, updates_collections: Collections the value and the update op
            are added to.
        name: The variable scope (default ``mean``).

    Returns:
        ``(mean, update_op)``: float32 scalar Tensors; running ``update_op`` adds the batch
        and gives the new mean.

    Raises:
        ValueError: weights that do not broadcast to the values (TF's message).
    """
    with _vs.variable_scope(name, default_name="mean"):
        values = _math.cast(values, np.float32)
        total = metric_variable([], np.float32, name="total")
        count = metric_variable([], np.float32, name="count")
        if weights is None:
            num_values = _math.cast(_array.size(values), np.float32)
        else:
            _, values, weights = remove_squeezable(None, values, weights)
            weights = broadcast_weights(weights, values)
            values = _math.multiply(values, weights)
            num_values = _math.reduce_sum(weights)
        update_total = total.assign_add(_math.reduce_sum(values))
        update_count = count.assign_add(num_values)
        value = div_no_nan(total, _math.maximum(count, np.float32(0)), "value")
        with _ops.control_dependencies([update_total, update_count]):
            update_op = div_no_nan(total, _math.maximum(count, np.float32(0)), "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update_op)
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
    labels, predictions, weights = remove_squeezable(labels, predictions, weights)
    if labels.dtype != predictions.dtype:
        predictions = _math.cast(predictions, labels.dtype)
    is_correct = _math.cast(_math.equal(predictions, labels), np.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


def mean_tensor(values: Any, weights: Any = None, metrics_collections: Any = None,
                updates_collections: Any = None, name: str | None = None
                ) -> tuple[Tensor, Tensor]:
    """The elementwise (weighted) mean of every ``values`` seen, as
    ``tf.metrics.mean_tensor``: accumulators ``<name>/total_tensor`` and
    ``<name>/count_tensor`` of the values' shape, the value ``total / count`` elementwise
    (0 where the count is 0).

    Args:
        values: A numeric Tensor of a fully defined static shape (cast to float32).
        weights: None, or a Tensor broadcastable to ``values``.
        name: The variable scope (default ``mean``).

    Returns:
        ``(mean, update_op)``: float32 Tensors of the values' shape.

    Raises:
        ValueError: values of a shape not fully known (the accumulators need it), or
            weights that do not broadcast.
    """
    with _vs.variable_scope(name, default_name="mean"):
        values = _math.cast(values, np.float32)
        shape = _lib.static_shape(values)
        if not shape.is_fully_defined():
            raise ValueError(f"mean_tensor needs values of a fully defined static shape "
                             f"(its accumulators have that shape); got {shape}")
        total = metric_variable(shape.as_list(), np.float32, name="total_tensor")
        count = metric_variable(shape.as_list(), np.float32, name="count_tensor")
        num_values: Any = _array.ones_like(values)
        if weights is not None:
            _, values, weights = remove_squeezable(None, values, weights)
            weights = broadcast_weights(weights, values)
            values = _math.multiply(values, weights)
            num_values = weights
        update_total = total.assign_add(values)
        update_count = count.assign_add(num_values)
        value = div_no_nan(total, _math.maximum(count, np.float32(0)), "value")
        with _ops.control_dependencies([update_total, update_count]):
            update_op = div_no_nan(total, _math.maximum(count, np.float32(0)), "update_op")
    collect(metrics_collections, value)
    collect(updates_collections, update_op)
    return value, update_op


def mean_absolute_error(labels: Any, predictions: Any, weights: Any = None,
                        metrics_collections: Any = None, updates_collections: Any = None,
                        name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of ``|predictions - labels|``, as
    ``tf.metrics.mean_absolute_error``: :func:`mean` in the scope
    ``mean_absolute_error`` (accumulators ``total`` and ``count``).

    Args:
        labels, predictions: Numeric Tensors of one shape and dtype (a trailing 1 of
            either is squeezed).
        weights: None, or a Tensor broadcastable to them.

    Returns:
        ``(mean_absolute_error, update_op)``, float32 scalars.

    Raises:
        ValueError: shapes that do not match, or weights that do not broadcast.
    """
    labels, predictions, weights = remove_squeezable(labels, predictions, weights)
    errs = _math.abs(_math.subtract(predictions, labels))
    return mean(errs, weights, metrics_collections, updates_collections,
                name or "mean_absolute_error")


def mean_squared_error(labels: Any, predictions: Any, weights: Any = None,
                       metrics_collections: Any = None, updates_collections: Any = None,
                       name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of ``(labels - predictions)**2``, as
    ``tf.metrics.mean_squared_error`` (scope ``mean_squared_error``); arguments, returns
    and errors as :func:`mean_absolute_error`."""
    labels, predictions, weights = remove_squeezable(labels, predictions, weights)
    errs = _math.squared_difference(labels, predictions)
    return mean(errs, weights, metrics_collections, updates_collections,
                name or "mean_squared_error")


def root_mean_squared_error(labels: Any, predictions: Any, weights: Any = None,
                            metrics_collections: Any = None,
                            updates_collections: Any = None, name: str | None = None
                            ) -> tuple[Tensor, Tensor]:
    """The square root of :func:`mean_squared_error`, as
    ``tf.metrics.root_mean_squared_error`` (accumulators
    ``root_mean_squared_error/total`` and ``count``); arguments, returns and errors as
    :func:`mean_absolute_error`."""
    labels, predictions, weights = remove_squeezable(labels, predictions, weights)
    mse, update_mse = mean_squared_error(labels, predictions, weights, None, None,
                                         name or "root_mean_squared_error")
    rmse, update_rmse = _math.sqrt(mse), _math.sqrt(update_mse)
    collect(metrics_collections, rmse)
    collect(updates_collections, update_rmse)
    return rmse, update_rmse


def _relative_kernel(needs: Any, labels: Any, predictions: Any, normalizer: Any) -> Any:
    lab = np.asarray(labels, np.float64)
    pred = np.asarray(predictions, np.float64)
    norm = np.asarray(normalizer, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(norm == 0.0, 0.0, np.abs(lab - pred) / np.where(norm == 0, 1, norm))
    return rel.astype(np.float32), lambda dy: (None, None, None)


def mean_relative_error(labels: Any, predictions: Any, normalizer: Any, weights: Any = None,
                        metrics_collections: Any = None, updates_collections: Any = None,
                        name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of ``|labels - predictions| / normalizer`` (0 where the
    normalizer is 0), as ``tf.metrics.mean_relative_error`` (scope
    ``mean_relative_error``).

    Args:
        labels, predictions, normalizer: Numeric Tensors of one shape.
        weights: None, or a Tensor broadcastable to them.

    Returns:
        ``(mean_relative_error, update_op)``, float32 scalars.

    Raises:
        ValueError: shapes that do not match, or weights that do not broadcast.
    """
    labels, predictions, weights = remove_squeezable(labels, predictions, weights)
    normalizer, predictions, _ = remove_squeezable(normalizer, predictions, None)
    shape = _lib.broadcast_static(_lib.static_shape(labels), _lib.static_shape(predictions))
    rel = _lib.apply_op("RelativeError", None, [labels, predictions, normalizer],
                        _relative_kernel, np.float32, shape)
    return mean(rel, weights, metrics_collections, updates_collections,
                name or "mean_relative_error")


def mean_cosine_distance(labels: Any, predictions: Any, dim: int, weights: Any = None,
                         metrics_collections: Any = None, updates_collections: Any = None,
                         name: str | None = None) -> tuple[Tensor, Tensor]:
    """``1 -`` the (weighted) mean of ``sum(labels * predictions, axis=dim)``, as
    ``tf.metrics.mean_cosine_distance`` (scope ``mean_cosine_distance``): the cosine
    distance of unit vectors along ``dim``.

    Args:
        labels, predictions: Float Tensors of one shape, normalized along ``dim``.
        dim: The axis of the vectors (int).
        weights: None, or a Tensor broadcastable to them with dimension ``dim`` of 1.

    Returns:
        ``(mean_distance, update_op)``, float32 scalars.

    Raises:
        ValueError: shapes that do not match, or weights that do not broadcast.
    """
    labels, predictions, weights = remove_squeezable(labels, predictions, weights)
    radial = _math.reduce_sum(_math.multiply(predictions, labels), axis=[dim],
                              keepdims=True)
    dist, update = mean(radial, weights, None, None, name or "mean_cosine_distance")
    dist = _math.subtract(np.float32(1.0), dist)
    update = _math.subtract(np.float32(1.0), update)
    collect(metrics_collections, dist)
    collect(updates_collections, update)
    return dist, update


def percentage_below(values: Any, threshold: Any, weights: Any = None,
                     metrics_collections: Any = None, updates_collections: Any = None,
                     name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) fraction of ``values`` below ``threshold`` (``values < threshold``),
    as ``tf.metrics.percentage_below`` (scope ``percentage_below_threshold``).

    Args:
        values: A numeric Tensor of any shape.
        threshold: A scalar of the values' dtype.
        weights: None, or a Tensor broadcastable to ``values``.

    Returns:
        ``(percentage, update_op)``, float32 scalars in ``[0, 1]``.
    """
    values = convert_to_tensor(values)
    below = _math.cast(_math.less(values, np.asarray(threshold, values.dtype)), np.float32)
    return mean(below, weights, metrics_collections, updates_collections,
                name or "percentage_below_threshold")


__all__ = ["accuracy", "mean", "mean_absolute_error", "mean_cosine_distance",
           "mean_relative_error", "mean_squared_error", "mean_tensor", "metric_variable",
           "percentage_below", "root_mean_squared_error"]

