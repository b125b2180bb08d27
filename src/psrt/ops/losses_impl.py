"""``tf.losses``: the weighted losses of TF r1.15's tensorflow/python/ops/losses/losses_impl.py
and the loss collection helpers of losses/util.py.

Each loss computes its per-element losses, then :func:`compute_weighted_loss` multiplies
them by ``weights`` (a scalar or a tensor broadcastable to the losses), reduces them as
``reduction`` says and adds the result to ``loss_collection`` (``GraphKeys.LOSSES``), so
:func:`get_total_loss` finds it. The arithmetic is float32, as TF's (the losses and weights
are cast to float32, the result back to the losses' dtype). Gradients flow through every
op (psrt's graph ops, each with its hand-written gradient).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
from psrt.framework.constant_op import constant, convert_to_tensor
from psrt.framework.ops import GraphKeys
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math
from psrt.ops import nn_ops as _nn


class Reduction:
    """How :func:`compute_weighted_loss` reduces the weighted losses, as TF1's
    ``tf.losses.Reduction`` (TF's exact strings):

    * ``NONE``: the weighted losses, unreduced (same shape as the losses).
    * ``SUM``: their sum.
    * ``MEAN``: their sum divided by the sum of the weights (broadcast to the losses).
    * ``SUM_OVER_BATCH_SIZE``: their sum divided by the number of losses.
    * ``SUM_BY_NONZERO_WEIGHTS`` (TF1's default; ``SUM_OVER_NONZERO_WEIGHTS`` is the same):
      their sum divided by the number of losses whose weight is not zero.

    A division by zero gives 0, as TF's ``div_no_nan``.
    """

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple[str, ...]:
        """Every valid reduction key (str)."""
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key: Any) -> None:
        """Raises ValueError (TF's message, with the valid keys) for an invalid key."""
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}. Valid keys: "
                             f"{', '.join(sorted(set(cls.all())))}")


# ---- the loss collection (losses/util.py) ----------------------------------------------------

def add_loss(loss: Any, loss_collection: str | None = GraphKeys.LOSSES) -> None:
    """Adds ``loss`` to ``loss_collection`` (none when it is None or empty), as
    ``tf.losses.add_loss``."""
    if loss_collection:
        _ops.add_to_collection(loss_collection, loss)


def get_losses(scope: str | None = None, loss_collection: str = GraphKeys.LOSSES
               ) -> list[Any]:
    """The losses in ``loss_collection`` whose name matches ``scope`` (a regex from the
    start, as ``get_collection``), as ``tf.losses.get_losses``."""
    return _ops.get_collection(loss_collection, scope)


def get_regularization_losses(scope: str | None = None) -> list[Any]:
    """The ``REGULARIZATION_LOSSES`` collection (what ``get_variable(regularizer=...)`` and
    the layers' ``kernel_regularizer`` add), filtered by ``scope``, as
    ``tf.losses.get_regularization_losses``."""
    return _ops.get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope: str | None = None,
                            name: str = "total_regularization_loss") -> Tensor:
    """The sum of :func:`get_regularization_losses` (a float32 scalar 0.0 when there are
    none), as ``tf.losses.get_regularization_loss``."""
    losses = get_regularization_losses(scope)
    if losses:
        return _math.add_n(losses, name=name)
    return constant(0.0, name=name)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss",
                   scope: str | None = None) -> Tensor:
    """The sum of :func:`get_losses` and, when ``add_regularization_losses``, of
    :func:`get_regularization_losses`, as ``tf.losses.get_total_loss``.

    Raises:
        ValueError: there are no losses (TF's add_n message).
    """
    losses = list(get_losses(scope=scope))
    if add_regularization_losses:
        losses += get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses to sum: get_total_loss found nothing in the losses "
                         "collection (tf.losses.* add to it) nor regularization losses")
    return _math.add_n(losses, name=name)


# ---- weighting and reduction ------------------------------------------------------------------

def _div_no_nan_kernel(needs: Any, x: Any, y: Any) -> Any:
    x, y = np.asarray(x), np.asarray(y)
    zero = y == 0
    safe = np.where(zero, np.ones_like(y), y)
    z = np.where(zero, np.zeros_like(x), x / safe).astype(x.dtype)

    def grad(dy: Any) -> Any:
        dx = np.where(zero, 0, dy / safe).astype(x.dtype) if 0 in needs else None
        dd = np.where(zero, 0, -dy * x / (safe * safe)).astype(y.dtype) if 1 in needs else None
        return dx, dd
    return z, grad


def _div_no_nan(x: Any, y: Any) -> Tensor:
    """``x / y``, 0 where ``y`` is 0 (TF's ``div_no_nan``), scalars, named ``value`` in the
    current name scope (TF's ``<loss scope>/value``)."""
    scope = _ops.get_default_graph().get_name_scope()
    return _lib.apply_op("DivNoNan", f"{scope}/value" if scope else "value", [x, y],
                         _div_no_nan_kernel, np.float32, TensorShape([]))


def _assert_broadcastable(weights: Any, values: Any) -> None:
    """TF's ``weights_broadcast_ops.assert_broadcastable`` on static shapes: ``weights`` is
    a scalar, or has the losses' rank with each dimension 1 or the losses'.

    Raises:
        ValueError: not broadcastable (TF's message, naming both shapes)."""
    ws, vs = _lib.static_shape(weights), _lib.static_shape(values)
    if ws.ndims is None or vs.ndims is None or ws.ndims == 0:
        return
    ok = ws.ndims == vs.ndims and all(
        w is None or v is None or w in (1, v) for w, v in zip(ws.as_list(), vs.as_list()))
    if not ok:
        raise ValueError(f"weights can not be broadcast to values. values.rank={vs.ndims}. "
                         f"weights.rank={ws.ndims}. values.shape={vs}. weights.shape={ws}.")


def _num_elements(losses: Any) -> Tensor:
    return _math.cast(_array.size(losses), np.float32)


def _num_present(losses: Any, weights: Any) -> Any:
    """How many losses have a nonzero weight (weights broadcast to the losses), as TF's
    ``_num_present``; a nonzero Python float weight counts every loss."""
    if isinstance(weights, float) and weights != 0.0:
        return _num_elements(losses)
    with _ops.name_scope(None, "num_present"):
        w = _math.cast(weights, np.float32)
        present = _array.where(_math.equal(w, 0.0), _array.zeros_like(w), _array.ones_like(w))
        present = present * _array.ones_like(losses)
        return _math.reduce_sum(present)


def compute_weighted_loss(losses: Any, weights: Any = 1.0, scope: str | None = None,
                          loss_collection: str | None = GraphKeys.LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``losses * weights`` reduced by ``reduction`` (see :class:`Reduction`) and added to
    ``loss_collection``, as ``tf.losses.compute_weighted_loss``.

    Args:
        losses: A float Tensor (or array) of any shape.
        weights: A scalar, or a Tensor of the losses' rank whose dimensions are 1 or the
            losses' (broadcast).
        scope: Name scope of the ops.
        loss_collection: Collection the result joins (None: none).
        reduction: A :class:`Reduction` key.

    Returns:
        A float Tensor of the losses' dtype: a scalar, or the losses' shape for
        ``Reduction.NONE``.

    Raises:
        ValueError: an invalid reduction, or weights not broadcastable to the losses.
    """
    Reduction.validate(reduction)
    with _ops.name_scope(scope or "weighted_loss"):
        return _weighted(losses, weights, loss_collection, reduction)


def _weighted(losses: Any, weights: Any, loss_collection: str | None,
              reduction: str) -> Tensor:
    """:func:`compute_weighted_loss` in the current name scope (each loss's scope, so its
    value is ``<loss scope>/value`` as TF's)."""
    Reduction.validate(reduction)
    if weights is None:
        raise ValueError("None values not supported: weights must be a number or a "
                         "Tensor, not None")
    losses = convert_to_tensor(losses)
    _assert_broadcastable(weights, losses)
    input_dtype = losses.dtype
    losses = _math.cast(losses, np.float32)
    w = _math.cast(weights, np.float32)
    weighted = _math.multiply(losses, w)
    if reduction == Reduction.NONE:
        loss = weighted
    else:
        loss = _math.reduce_sum(weighted)
        if reduction == Reduction.MEAN:
            loss = _div_no_nan(loss, _math.reduce_sum(_array.ones_like(losses) * w))
        elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
            loss = _div_no_nan(loss, _num_present(losses, weights))
        elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
            loss = _div_no_nan(loss, _num_elements(losses))
    if input_dtype != np.float32:
        loss = _math.cast(loss, input_dtype)
    add_loss(loss, loss_collection)
    return loss


# ---- the losses -------------------------------------------------------------------------------

def _check_args(labels: Any, predictions: Any, labels_name: str = "labels",
                predictions_name: str = "predictions") -> None:
    if labels is None:
        raise ValueError(f"{labels_name} must not be None.")
    if predictions is None:
        raise ValueError(f"{predictions_name} must not be None.")


def _compatible(a: Any, b: Any) -> None:
    sa, sb = _lib.static_shape(a), _lib.static_shape(b)
    if not sa.is_compatible_with(sb):
        raise ValueError(f"Shapes {sa} and {sb} are incompatible")


def _float_pair(labels: Any, predictions: Any) -> tuple[Tensor, Tensor]:
    predictions = _math.cast(predictions, np.float32)
    labels = _math.cast(labels, np.float32)
    _compatible(predictions, labels)
    return labels, predictions


def absolute_difference(labels: Any, predictions: Any, weights: Any = 1.0,
                        scope: str | None = None,
                        loss_collection: str | None = GraphKeys.LOSSES,
                        reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``|predictions - labels|``, as ``tf.losses.absolute_difference``
    (float32; labels and predictions of compatible shapes; see
    :func:`compute_weighted_loss` for ``weights`` and ``reduction``).

    Raises:
        ValueError: labels or predictions None, or incompatible shapes."""
    _check_args(labels, predictions)
    with _ops.name_scope(scope or "absolute_difference"):
        labels, predictions = _float_pair(labels, predictions)
        losses = _math.abs(_math.subtract(predictions, labels))
        return _weighted(losses, weights, loss_collection, reduction)


def mean_squared_error(labels: Any, predictions: Any, weights: Any = 1.0,
                       scope: str | None = None,
                       loss_collection: str | None = GraphKeys.LOSSES,
                       reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``(predictions - labels)**2``, as ``tf.losses.mean_squared_error``
    (float32; the mean comes from ``reduction``).

    Raises:
        ValueError: labels or predictions None, or incompatible shapes."""
    _check_args(labels, predictions)
    with _ops.name_scope(scope or "mean_squared_error"):
        labels, predictions = _float_pair(labels, predictions)
        losses = _math.squared_difference(predictions, labels)
        return _weighted(losses, weights, loss_collection, reduction)


def huber_loss(labels: Any, predictions: Any, weights: Any = 1.0, delta: float = 1.0,
               scope: str | None = None, loss_collection: str | None = GraphKeys.LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted Huber loss, as ``tf.losses.huber_loss``: with ``x = predictions -
    labels``, ``0.5 * x**2`` where ``|x| <= delta``, else ``0.5 * delta**2 + delta * (|x| -
    delta)`` (float32).

    Raises:
        ValueError: labels or predictions None, or incompatible shapes."""
    _check_args(labels, predictions)
    with _ops.name_scope(scope or "huber_loss"):
        labels, predictions = _float_pair(labels, predictions)
        abs_error = _math.abs(_math.subtract(predictions, labels))
        quadratic = _math.minimum(abs_error, np.float32(delta))
        linear = _math.subtract(abs_error, quadratic)
        losses = _math.add(_math.multiply(np.float32(0.5), _math.multiply(quadratic, quadratic)),
                           _math.multiply(np.float32(delta), linear))
        return _weighted(losses, weights, loss_collection, reduction)


def log_loss(labels: Any, predictions: Any, weights: Any = 1.0, epsilon: float = 1e-7,
             scope: str | None = None, loss_collection: str | None = GraphKeys.LOSSES,
             reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted log loss of probabilities, as ``tf.losses.log_loss``: ``-labels *
    log(predictions + epsilon) - (1 - labels) * log(1 - predictions + epsilon)`` (float32).

    Raises:
        ValueError: labels or predictions None, or incompatible shapes."""
    _check_args(labels, predictions)
    with _ops.name_scope(scope or "log_loss"):
        labels, predictions = _float_pair(labels, predictions)
        eps = np.float32(epsilon)
        losses = -_math.multiply(labels, _math.log(predictions + eps)) - _math.multiply(
            1.0 - labels, _math.log(1.0 - predictions + eps))
        return _weighted(losses, weights, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: str | None = None,
                          loss_collection: str | None = GraphKeys.LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``tf.nn.sigmoid_cross_entropy_with_logits``, as
    ``tf.losses.sigmoid_cross_entropy``: labels (0/1, any dtype, cast to the logits') of the
    logits' shape; ``label_smoothing > 0`` uses ``labels * (1 - s) + 0.5 * s``.

    Raises:
        ValueError: labels or logits None, or incompatible shapes."""
    _check_args(multi_class_labels, logits, "multi_class_labels", "logits")
    with _ops.name_scope(scope or "sigmoid_cross_entropy_loss"):
        logits = convert_to_tensor(logits)
        labels = _math.cast(multi_class_labels, logits.dtype)
        _compatible(logits, labels)
        if label_smoothing > 0:
            labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = _nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                       name="xentropy")
        return _weighted(losses, weights, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: str | None = None,
                          loss_collection: str | None = GraphKeys.LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted softmax cross-entropy of ``[batch, classes]`` logits against one-hot
    (or probability) labels of the same shape, as ``tf.losses.softmax_cross_entropy``.
    ``label_smoothing > 0`` uses ``labels * (1 - s) + s / classes``. No gradient flows into
    the labels (TF's ``stop_gradient``). ``weights``: a scalar or ``[batch]``.

    Raises:
        ValueError: labels or logits None, or incompatible shapes."""
    _check_args(onehot_labels, logits, "onehot_labels", "logits")
    with _ops.name_scope(scope or "softmax_cross_entropy_loss"):
        logits = convert_to_tensor(logits)
        labels = _math.cast(onehot_labels, logits.dtype)
        _compatible(logits, labels)
        if label_smoothing > 0:
            num_classes = _math.cast(_array.shape(labels)[-1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / num_classes
        labels = _array.stop_gradient(labels, name="labels_stop_gradient")
        losses = _nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits,
                                                          name="xentropy")
        return _weighted(losses, weights, loss_collection, reduction)


def _squeeze_last(x: Any) -> Any:
    return _array.squeeze(x, [-1])


def sparse_softmax_cross_entropy(labels: Any, logits: Any, weights: Any = 1.0,
                                 scope: str | None = None,
                                 loss_collection: str | None = GraphKeys.LOSSES,
                                 reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``tf.nn.sparse_softmax_cross_entropy_with_logits``, as
    ``tf.losses.sparse_softmax_cross_entropy``: int labels ``[batch]`` (or ``[batch, 1]``,
    squeezed, as TF's ``_remove_squeezable_dimensions``) in ``[0, classes)`` for
    ``[batch, classes]`` logits; weights a scalar, ``[batch]`` or ``[batch, 1]``.

    Raises:
        ValueError: labels or logits None.
    """
    _check_args(labels, logits, "labels", "logits")
    with _ops.name_scope(scope or "sparse_softmax_cross_entropy_loss"):
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels)
        lr, pr = _lib.static_shape(labels).ndims, _lib.static_shape(logits).ndims
        if lr is not None and pr is not None:
            if pr - lr == 2:
                logits = _squeeze_last(logits)
            elif pr - lr == 0:
                labels = _squeeze_last(labels)
                lr -= 1
        wr = _lib.static_shape(weights).ndims
        if lr is not None and wr is not None and wr - lr == 1:
            weights = _squeeze_last(weights)
        losses = _nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                              name="xentropy")
        return _weighted(losses, weights, loss_collection, reduction)


def hinge_loss(labels: Any, logits: Any, weights: Any = 1.0, scope: str | None = None,
               loss_collection: str | None = GraphKeys.LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted hinge loss, as ``tf.losses.hinge_loss``: labels in ``{0, 1}`` become
    ``{-1, 1}`` and the loss is ``max(0, 1 - labels * logits)`` (float32, logits and
    labels of compatible shapes).

    Raises:
        ValueError: labels or logits None, or incompatible shapes."""
    _check_args(labels, logits, "labels", "logits")
    with _ops.name_scope(scope or "hinge_loss"):
        labels, logits = _float_pair(labels, logits)
        signs = _math.subtract(2.0 * labels, 1.0)
        losses = _nn.relu(_math.subtract(1.0, _math.multiply(signs, logits)))
        return _weighted(losses, weights, loss_collection, reduction)


def cosine_distance(labels: Any, predictions: Any, axis: int | None = None,
                    weights: Any = 1.0, scope: str | None = None,
                    loss_collection: str | None = GraphKeys.LOSSES,
                    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
                    dim: int | None = None) -> Tensor:
    """The weighted cosine distance ``1 - sum(labels * predictions, axis)`` of unit-normalized
    labels and predictions, as ``tf.losses.cosine_distance`` (``dim``: TF's old name of
    ``axis``; the per-example losses keep the axis as size 1, so ``weights`` are shaped
    ``[batch, 1]`` or a scalar).

    Raises:
        ValueError: no ``axis`` (TF's "You must specify 'axis'."), labels or predictions
            None, or incompatible shapes."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    _check_args(labels, predictions)
    with _ops.name_scope(scope or "cosine_distance_loss"):
        labels, predictions = _float_pair(labels, predictions)
        radial = _math.multiply(predictions, labels)
        losses = 1.0 - _math.reduce_sum(radial, axis=[axis], keepdims=True)
        return _weighted(losses, weights, loss_collection, reduction)

