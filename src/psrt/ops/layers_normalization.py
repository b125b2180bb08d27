"""``tf.layers.batch_normalization`` and ``tf.layers.BatchNormalization``, as TF r1.15's
tensorflow/python/layers/normalization.py (over keras/layers/normalization.py).

The layer's variables, created in this order in its scope (``batch_normalization``,
``batch_normalization_1``, ...): ``gamma`` and ``beta`` (trainable, when ``scale`` and
``center``), ``moving_mean`` and ``moving_variance`` (not trainable, global: a
``replica_device_setter`` puts them on the ps tasks, and the Saver saves them). In
training, the output is normalized by the batch's moments and two update ops join
``GraphKeys.UPDATE_OPS``: ``moving -= (moving - batch) * (1 - momentum)`` (TF's
``_assign_moving_average``, an atomic add on the ps task), run by

    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = optimizer.minimize(loss)

At inference (``training=False``) the moving averages normalize and nothing updates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant, convert_to_tensor
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import control_flow_ops as _cf
from psrt.ops import math_ops as _math
from psrt.ops.init_ops import ones_initializer, zeros_initializer
from psrt.ops.layers_base import Layer


class BatchNormalization(Layer):
    """Batch normalization, as ``tf.layers.BatchNormalization``: see
    :func:`batch_normalization` for the arguments."""

    _base_name = "batch_normalization"

    def __init__(self, axis: Any = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True, beta_initializer: Any = None,
                 gamma_initializer: Any = None, moving_mean_initializer: Any = None,
                 moving_variance_initializer: Any = None, beta_regularizer: Any = None,
                 gamma_regularizer: Any = None, beta_constraint: Any = None,
                 gamma_constraint: Any = None, renorm: bool = False,
                 renorm_clipping: Any = None, renorm_momentum: float = 0.99,
                 fused: Any = None, trainable: bool = True, virtual_batch_size: Any = None,
                 adjustment: Any = None, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(trainable=trainable, name=name, **kwargs)
        if renorm or virtual_batch_size is not None or adjustment is not None:
            raise NotImplementedError(
                "batch_normalization(renorm=True, virtual_batch_size=..., adjustment=...) is "
                "not implemented by psrt; use the plain batch normalization")
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center = bool(center)
        self.scale = bool(scale)
        self.beta_initializer = beta_initializer or zeros_initializer()
        self.gamma_initializer = gamma_initializer or ones_initializer()
        self.moving_mean_initializer = moving_mean_initializer or zeros_initializer()
        self.moving_variance_initializer = moving_variance_initializer or ones_initializer()
        self.beta_regularizer = beta_regularizer
        self.gamma_regularizer = gamma_regularizer
        self.fused = fused
        self.gamma: Any = None
        self.beta: Any = None
        self.moving_mean: Any = None
        self.moving_variance: Any = None

    def build(self, input_shape: TensorShape) -> None:
        """Creates gamma, beta, moving_mean and moving_variance of the axis' size.

        Raises:
            ValueError: unknown rank, an axis out of range or repeated, or an axis of
                unknown size (TF's messages)."""
        ndims = input_shape.ndims
        if ndims is None:
            raise ValueError(f"Input has undefined rank: {input_shape}")
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        axes = [a + ndims if a < 0 else a for a in axes]
        for a in axes:
            if not 0 <= a < ndims:
                raise ValueError(f"Invalid axis: {a}")
        if len(axes) != len(set(axes)):
            raise ValueError(f"Duplicate axis: {self.axis}")
        self._axes = sorted(axes)
        dims = input_shape.as_list()
        for a in self._axes:
            if dims[a] is None:
                raise ValueError(f"Input has undefined `axis` dimension. Input shape: "
                                 f"{input_shape}")
        self._ndims = ndims
        self._dims = dims
        param_shape = [dims[a] for a in self._axes]
        # TF fuses 4-D inputs normalized over one channel axis (1 or 3) unless fused=False;
        # the fused kernel's batch variance for the moving average is Bessel-corrected.
        self._bessel = self.fused is not False and ndims == 4 and self._axes in ([1], [3])
        dt = self.dtype if self.dtype is not None and np.dtype(self.dtype).kind == "f" \
            else np.float32
        if self.scale:
            self.gamma = self.add_weight("gamma", param_shape, dtype=dt,
                                         initializer=self.gamma_initializer,
                                         regularizer=self.gamma_regularizer)
        if self.center:
            self.beta = self.add_weight("beta", param_shape, dtype=dt,
                                        initializer=self.beta_initializer,
                                        regularizer=self.beta_regularizer)
        self.moving_mean = self.add_weight("moving_mean", param_shape, dtype=dt,
                                           initializer=self.moving_mean_initializer,
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", param_shape, dtype=dt,
                                               initializer=self.moving_variance_initializer,
                                               trainable=False)
        self.built = True

    def _broadcast(self, v: Any) -> Any:
        """A ``[C]`` parameter reshaped to broadcast against the inputs (``[1, C, 1, 1]``
        for axis 1 of a 4-D input); unchanged for the last axis."""
        if self._axes == [self._ndims - 1]:
            return v
        shape = [1] * self._ndims
        for a in self._axes:
            shape[a] = int(self._dims[a])
        return _array.reshape(v, shape)

    def call(self, inputs: Any, training: Any = False) -> Any:
        """The normalized inputs: by the batch's moments when ``training`` (a Python bool
        or a scalar bool Tensor), else by the moving averages; the update ops are made
        (and join ``UPDATE_OPS``) unless ``training`` is False."""
        x = convert_to_tensor(inputs)
        reduce_axes = [a for a in range(self._ndims) if a not in self._axes]
        tensor_training = _lib.is_graph_value(training)
        mm, mv = self.moving_mean, self.moving_variance
        if not tensor_training and not training:
            mean, variance = self._broadcast(mm), self._broadcast(mv)
        else:
            batch_mean = _math.reduce_mean(x, reduce_axes, keepdims=True)
            batch_var = _math.reduce_mean(
                _math.squared_difference(x, _array.stop_gradient(batch_mean)), reduce_axes,
                keepdims=True)
            flat_mean = _array.reshape(batch_mean, [-1])
            flat_var = _array.reshape(batch_var, [-1])
            if self._bessel:
                n = _math.cast(_array.size(x), x.dtype) / _math.cast(_array.size(flat_var),
                                                                       x.dtype)
                flat_var = flat_var * (n / (n - 1.0))
            if tensor_training:
                mean = _cf.cond(training, lambda: batch_mean, lambda: self._broadcast(mm))
                variance = _cf.cond(training, lambda: batch_var, lambda: self._broadcast(mv))
                decay: Any = _cf.cond(training, lambda: constant(1.0 - self.momentum, x.dtype),
                                      lambda: constant(0.0, x.dtype))
            else:
                mean, variance = batch_mean, batch_var
                decay = np.asarray(1.0 - self.momentum, x.dtype)
            flat_mean = _array.stop_gradient(flat_mean)
            flat_var = _array.stop_gradient(flat_var)
            self.add_update(mm.assign_sub((mm - flat_mean) * decay,
                                          name=f"{self._scope.name}/AssignMovingAvg"))
            self.add_update(mv.assign_sub((mv - flat_var) * decay,
                                          name=f"{self._scope.name}/AssignMovingAvg_1"))
        inv = _math.rsqrt(variance + np.asarray(self.epsilon, x.dtype))
        if self.gamma is not None:
            inv = inv * self._broadcast(self.gamma)
        out = x * inv - mean * inv
        if self.beta is not None:
            out = out + self._broadcast(self.beta)
        out.shape = x.shape
        return out


def batch_normalization(inputs: Any, axis: Any = -1, momentum: float = 0.99,
                        epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                        beta_initializer: Any = None, gamma_initializer: Any = None,
                        moving_mean_initializer: Any = None,
                        moving_variance_initializer: Any = None, beta_regularizer: Any = None,
                        gamma_regularizer: Any = None, beta_constraint: Any = None,
                        gamma_constraint: Any = None, training: Any = False,
                        trainable: bool = True, name: str | None = None, reuse: Any = None,
                        renorm: bool = False, renorm_clipping: Any = None,
                        renorm_momentum: float = 0.99, fused: Any = None,
                        virtual_batch_size: Any = None, adjustment: Any = None) -> Tensor:
    """Batch normalization of ``inputs``, as ``tf.layers.batch_normalization``:
    ``gamma * (x - mean) / sqrt(variance + epsilon) + beta`` over the axes other than
    ``axis``.

    Args:
        inputs: A float Tensor of known rank, ``axis``' dimension known.
        axis: The feature axis (int or list; -1: channels last; 1 for NCHW).
        momentum: Of the moving averages: ``moving = moving * momentum + batch * (1 -
            momentum)``.
        epsilon: Added to the variance.
        center, scale: Whether to add ``beta`` / multiply by ``gamma``.
        *_initializer: Default zeros (beta, moving_mean) and ones (gamma, moving_variance).
        beta_regularizer, gamma_regularizer: Losses into ``REGULARIZATION_LOSSES``.
        training: A Python bool or a scalar bool Tensor (a placeholder): normalize by the
            batch's moments and update the moving averages (the ops in ``UPDATE_OPS``), or
            by the moving averages. TF's default False.
        trainable: Whether gamma and beta join ``TRAINABLE_VARIABLES``.
        name, reuse: The variable scope and whether to reuse its variables.
        fused: None or True use TF's fused rule for 4-D inputs (the moving variance gets
            the Bessel-corrected batch variance, as TF's fused kernel); False never.

    Returns:
        A Tensor of the inputs' shape and dtype.

    Raises:
        ValueError: an unknown rank or axis size, a bad axis.
        NotImplementedError: ``renorm``, ``virtual_batch_size`` or ``adjustment``.
    """
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        renorm=renorm, fused=fused, trainable=trainable,
        virtual_batch_size=virtual_batch_size, adjustment=adjustment, name=name,
        _reuse=reuse, _scope=name)
    return layer(inputs, training=training)

