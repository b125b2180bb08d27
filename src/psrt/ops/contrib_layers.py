"""The few ``tf.contrib`` names TF1 scripts still use for their models, as TF r1.15's
tensorflow/contrib/layers/python/layers/layers.py (``fully_connected``), regularizers.py
(``l2_regularizer``), initializers.py (``xavier_initializer``,
``variance_scaling_initializer``) and tensorflow/contrib/nn (the argument-flipped
cross-entropies). The rest of ``tf.contrib`` is not implemented (psrt.contrib says so).
"""

from __future__ import annotations

import logging
import numbers
from typing import Any, Callable

import numpy as np

from psrt.framework import ops as _ops
from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.ops import GraphKeys
from psrt.framework.tensor import Tensor
from psrt.ops import nn_ops as _nn
from psrt.ops import variable_scope as _vs
from psrt.ops.init_ops import VarianceScaling, zeros_initializer
from psrt.ops.layers_core import Dense

_logger = logging.getLogger("psrt")

# contrib's truncated normal has stddev sqrt(1.3 * factor / n); core VarianceScaling's is
# sqrt(scale / n) / 0.87962566103423978, so scale = 1.3 * factor * 0.8796...**2 gives it.
_TRUNC = 0.87962566103423978


def variance_scaling_initializer(factor: float = 2.0, mode: str = "FAN_IN",
                                 uniform: bool = False, seed: int | None = None,
                                 dtype: Any = np.float32) -> VarianceScaling:
    """``tf.contrib.layers.variance_scaling_initializer``: with ``n`` the fan ``mode``
    names (``FAN_IN``, ``FAN_OUT`` or ``FAN_AVG``, TF's fans), uniform values in
    ``[-sqrt(3 factor / n), sqrt(3 factor / n))`` when ``uniform``, else a normal truncated
    at two standard deviations of stddev ``sqrt(1.3 factor / n)`` (contrib's formula; the
    default ``factor=2.0, FAN_IN`` is He initialization). Computed on the ps tasks.

    Raises:
        TypeError: a non-float dtype, or an unknown mode (TF's messages).
    """
    if np.dtype(np.float32 if dtype is None else getattr(dtype, "as_numpy_dtype", dtype)
                ).kind != "f":
        raise TypeError("Cannot create initializer for non-floating point type.")
    if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
        raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_AVG, FAN_OUT]")
    if uniform:
        return VarianceScaling(float(factor), mode.lower(), "uniform", seed, dtype)
    return VarianceScaling(1.3 * float(factor) * _TRUNC * _TRUNC, mode.lower(),
                           "truncated_normal", seed, dtype)


def xavier_initializer(uniform: bool = True, seed: int | None = None,
                       dtype: Any = np.float32) -> VarianceScaling:
    """``tf.contrib.layers.xavier_initializer`` (Glorot): ``variance_scaling_initializer(
    factor=1.0, mode='FAN_AVG', uniform=uniform)``; uniform in ``[-sqrt(6 / (fan_in +
    fan_out)), ...)`` by default."""
    return variance_scaling_initializer(1.0, "FAN_AVG", uniform, seed, dtype)


xavier_initializer_conv2d = xavier_initializer


def l2_regularizer(scale: float, scope: str | None = None) -> Callable[[Any], Any]:
    """``tf.contrib.layers.l2_regularizer``: a function of a weight returning ``scale *
    l2_loss(weight)`` (``scale * sum(w**2) / 2``), for ``get_variable(regularizer=...)`` or
    a layer's ``kernel_regularizer``; ``scale=0`` gives one returning None (no loss).

    Raises:
        ValueError: an integer or negative scale (TF's messages).
    """
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"scale cannot be an integer: {scale}")
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale:g}")
        if scale == 0.0:
            _logger.info("Scale of 0 disables regularizer.")
            return lambda _: None

    def l2(weights: Any) -> Tensor:
        w = convert_to_tensor(weights) if not hasattr(weights, "dtype") else weights
        return _nn.l2_loss(w) * np.asarray(scale, np.dtype(w.dtype))
    return l2


class _FullyConnected(Dense):
    _weight_names = ("weights", "biases")


def fully_connected(inputs: Any, num_outputs: int, activation_fn: Any = _nn.relu,
                    normalizer_fn: Any = None, normalizer_params: Any = None,
                    weights_initializer: Any = None, weights_regularizer: Any = None,
                    biases_initializer: Any = "zeros", biases_regularizer: Any = None,
                    reuse: Any = None, variables_collections: Any = None,
                    outputs_collections: Any = None, trainable: bool = True,
                    scope: str | None = None) -> Tensor:
    """``tf.contrib.layers.fully_connected``: ``activation_fn(normalizer_fn(inputs @ weights
    + biases))`` with ``<scope>/weights`` ``[in, num_outputs]`` and ``<scope>/biases``
    (scope default ``fully_connected``, ``fully_connected_1``, ...), both also in
    ``MODEL_VARIABLES``, as contrib's.

    Args:
        inputs: A float Tensor ``[batch, ..., in]``.
        num_outputs: Output size.
        activation_fn: Default ``relu`` (contrib's); None: linear.
        normalizer_fn: e.g. ``psrt.layers.batch_normalization``, called as
            ``normalizer_fn(outputs, **normalizer_params)``; there is no bias then.
        weights_initializer: Default ``xavier_initializer()``.
        biases_initializer: Default zeros; None: no biases.
        weights_regularizer, biases_regularizer: Losses into ``REGULARIZATION_LOSSES``.
        reuse: Reuse the scope's variables (needs ``scope``).
        variables_collections: Further collections for the variables (a list, or a dict
            with keys ``weights`` and ``biases``).
        outputs_collections: Collections the output is added to.
        trainable: Whether the variables join ``TRAINABLE_VARIABLES``.
        scope: The variable scope.

    Raises:
        ValueError: ``num_outputs`` not an int (TF's message).
    """
    if not isinstance(num_outputs, numbers.Integral):
        raise ValueError(f"num_outputs type should be one of (int, long), got "
                         f"{type(num_outputs)}.")
    if biases_initializer == "zeros":
        biases_initializer = zeros_initializer()
    if weights_initializer is None:
        weights_initializer = xavier_initializer()
    with _vs.variable_scope(scope, default_name="fully_connected", reuse=reuse) as sc:
        layer = _FullyConnected(int(num_outputs), activation=None,
                                use_bias=not normalizer_fn and biases_initializer is not None,
                                kernel_initializer=weights_initializer,
                                bias_initializer=biases_initializer,
                                kernel_regularizer=weights_regularizer,
                                bias_regularizer=biases_regularizer, trainable=trainable,
                                name=sc.name, _scope=sc, _reuse=reuse)
        outputs = layer(inputs)
        graph = _ops.get_default_graph()
        for var, key in ((layer.kernel, "weights"), (layer.bias, "biases")):
            if var is None:
                continue
            if var not in graph.get_collection(GraphKeys.MODEL_VARIABLES):
                graph.add_to_collection(GraphKeys.MODEL_VARIABLES, var)
            extra = variables_collections.get(key) if isinstance(variables_collections,
                                                                 dict) \
                else variables_collections
            for c in ([extra] if isinstance(extra, str) else list(extra or [])):
                if var not in graph.get_collection(c):
                    graph.add_to_collection(c, var)
        if normalizer_fn is not None:
            outputs = normalizer_fn(outputs, **(normalizer_params or {}))
        if activation_fn is not None:
            outputs = activation_fn(outputs)
    if outputs_collections:
        _ops.add_to_collections(outputs_collections, outputs)
    return outputs


# ---- tf.contrib.nn ---------------------------------------------------------------------------

def deprecated_flipped_softmax_cross_entropy_with_logits(logits: Any, labels: Any,
                                                         dim: int = -1,
                                                         name: str | None = None) -> Tensor:
    """``tf.contrib.nn.deprecated_flipped_softmax_cross_entropy_with_logits``: TF 0.x's
    positional order ``(logits, labels)`` of ``tf.nn.softmax_cross_entropy_with_logits``."""
    return _nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits, dim=dim,
                                                 name=name)


def deprecated_flipped_sparse_softmax_cross_entropy_with_logits(
        logits: Any, labels: Any, name: str | None = None) -> Tensor:
    """``tf.contrib.nn.deprecated_flipped_sparse_softmax_cross_entropy_with_logits``:
    ``(logits, labels)`` order of ``tf.nn.sparse_softmax_cross_entropy_with_logits``."""
    return _nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                        name=name)


def deprecated_flipped_sigmoid_cross_entropy_with_logits(
        logits: Any = None, targets: Any = None, name: str | None = None) -> Tensor:
    """``tf.contrib.nn.deprecated_flipped_sigmoid_cross_entropy_with_logits``: TF 0.x's
    ``(logits, targets)`` of ``tf.nn.sigmoid_cross_entropy_with_logits``."""
    return _nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits, name=name)
