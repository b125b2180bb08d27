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

``renorm=True`` is Batch Renormalization (Ioffe 2017) as TF r1.15's Keras layer: four more
non-trainable variables, ``renorm_mean``, ``renorm_mean_weight``, ``renorm_stddev``,
``renorm_stddev_weight`` (zeros; the averages with ``renorm_momentum``, debiased by their
weights), the batch-normalized value corrected by ``r = stddev / renorm_stddev`` and
``d = (mean - renorm_mean) / renorm_stddev`` (clipped by ``renorm_clipping``, no gradient),
and the moving averages fed the debiased renorm averages. ``virtual_batch_size`` is Ghost
Batch Normalization: the batch split as TF reshapes it (``[virtual_batch_size, -1, ...]``:
sub-batch ``j`` holds rows ``j, j + n, j + 2n, ...``), each normalized by its own moments,
the moving averages fed their means, the variables' shape ``[1, 1, ..., C]`` (the input's
rank plus one), as TF's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework import ops as _ops
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
        if adjustment is not None:
            raise NotImplementedError(
                "batch_normalization(adjustment=...) is not implemented by psrt; use the "
                "plain batch normalization (renorm and virtual_batch_size are supported)")
        self.renorm = bool(renorm)
        self.renorm_clipping: dict[str, Any] = {}
        self.renorm_momentum = float(renorm_momentum)
        if self.renorm:
            clipping = dict(renorm_clipping or {})
            keys = ["rmax", "rmin", "dmax"]
            if set(clipping) - set(keys):
                raise ValueError(f"renorm_clipping {clipping} contains keys not in {keys}")
            self.renorm_clipping = clipping
        self.virtual_batch_size = None if virtual_batch_size is None \
            else int(virtual_batch_size)
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
        self.renorm_mean: Any = None
        self.renorm_mean_weight: Any = None
        self.renorm_stddev: Any = None
        self.renorm_stddev_weight: Any = None

    def build(self, input_shape: TensorShape) -> None:
        """Creates gamma, beta, moving_mean and moving_variance of the axis' size (and the
        renorm variables).

        Raises:
            ValueError: unknown rank, an axis out of range or repeated, an axis of unknown
                size, a ``virtual_batch_size`` not positive or with axis 0 normalized (TF's
                messages)."""
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
        vbs = self.virtual_batch_size
        if vbs is not None:
            if vbs <= 0:
                raise ValueError(f"virtual_batch_size must be a positive integer that divides "
                                 f"the true batch size of the input Tensor; got {vbs}")
            if 0 in axes:
                raise ValueError("When using virtual_batch_size, the batch dimension must be "
                                 "0 and thus axis cannot include 0")
        self._axes = sorted(axes)
        dims = input_shape.as_list()
        for a in self._axes:
            if dims[a] is None:
                raise ValueError(f"Input has undefined `axis` dimension. Input shape: "
                                 f"{input_shape}")
        self._ndims = ndims
        self._dims = dims
        if vbs is None:
            param_shape = [dims[a] for a in self._axes]
        else:
            # TF's ghost batches: the input gets a sub-batch axis at 1, the parameters its
            # rank with 1 in every axis but the normalized ones.
            param_shape = [dims[i] if i in self._axes else 1 for i in range(ndims)]
            param_shape.insert(1, 1)
        self._param_shape = param_shape
        # TF fuses 4-D inputs normalized over one channel axis (1 or 3) unless fused=False,
        # renorm or virtual batches; the fused kernel's batch variance for the moving
        # average is Bessel-corrected.
        self._bessel = (self.fused is not False and ndims == 4 and self._axes in ([1], [3])
                        and not self.renorm and vbs is None)
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
        if self.renorm:
            def renorm_variable(name: str, shape: Any) -> Any:
                return self.add_weight(name, shape, dtype=dt, initializer=zeros_initializer(),
                                       trainable=False)
            self.renorm_mean = renorm_variable("renorm_mean", param_shape)
            self.renorm_mean_weight = renorm_variable("renorm_mean_weight", [])
            self.renorm_stddev = renorm_variable("renorm_stddev", param_shape)
            self.renorm_stddev_weight = renorm_variable("renorm_stddev_weight", [])
        self.built = True

    def _broadcast(self, v: Any) -> Any:
        """A ``[C]`` parameter reshaped to broadcast against the inputs (``[1, C, 1, 1]``
        for axis 1 of a 4-D input); unchanged for the last axis, and with virtual batches
        (whose parameters have the inputs' rank already)."""
        if self.virtual_batch_size is not None or self._axes == [self._ndims - 1]:
            return v
        shape = [1] * self._ndims
        for a in self._axes:
            shape[a] = int(self._dims[a])
        return _array.reshape(v, shape)

    def _renorm(self, mean: Any, variance: Any, training: Any, tensor_training: bool,
                dtype: Any) -> tuple[Any, Any, Any, Any, list[Any], list[Any]]:
        """TF's ``_renorm_correction_and_moments``: the corrections ``r`` and ``d`` (no
        gradient; 1 and 0 when ``training`` is a False tensor), the renorm averages'
        updates, and what the moving averages move to: the debiased renorm mean and
        ``renorm_stddev**2 - epsilon``, read after those updates ran (the update ops of
        the moving averages wait for them)."""
        eps = np.asarray(self.epsilon, dtype)
        one = np.asarray(1.0, dtype)
        rm, rmw = self.renorm_mean, self.renorm_mean_weight
        rs, rsw = self.renorm_stddev, self.renorm_stddev_weight
        stddev = _math.sqrt(variance + eps)
        # The averages so far, as if they had started at this batch's moments.
        mixed_mean = rm + (one - rmw) * mean
        mixed_stddev = rs + (one - rsw) * stddev
        r = stddev / mixed_stddev
        d = (mean - mixed_mean) / mixed_stddev
        clip = {k: self.renorm_clipping.get(k) for k in ("rmin", "rmax", "dmax")}
        if clip["rmin"] is not None:
            r = _math.maximum(r, _math.cast(clip["rmin"], dtype))
        if clip["rmax"] is not None:
            r = _math.minimum(r, _math.cast(clip["rmax"], dtype))
        if clip["dmax"] is not None:
            dmax = _math.cast(clip["dmax"], dtype)
            d = _math.minimum(_math.maximum(d, -dmax), dmax)
        if tensor_training:
            r_t, d_t = r, d
            r = _cf.cond(training, lambda: r_t, lambda: _array.ones_like(r_t))
            d = _cf.cond(training, lambda: d_t, lambda: _array.zeros_like(d_t))
            rdecay: Any = _cf.cond(training,
                                   lambda: constant(1.0 - self.renorm_momentum, dtype),
                                   lambda: constant(0.0, dtype))
        else:
            rdecay = np.asarray(1.0 - self.renorm_momentum, dtype)
        r = _array.stop_gradient(r, name="renorm_r")
        d = _array.stop_gradient(d, name="renorm_d")

        def after_corrections(value: Any) -> Any:
            # An input of r and d: a run computes them (on the averages before its updates)
            # before it computes this update, and its other uses keep those values.
            return _lib.apply_op("Identity", None, [value, r, d], _first, dtype,
                                 _lib.static_shape(value))
        scope = self._scope.name
        mean_updates = [rm.assign_sub(after_corrections((rm - mean) * rdecay),
                                      name=f"{scope}/AssignMovingAvg_2"),
                        rmw.assign_sub((rmw - one) * rdecay, name=f"{scope}/AssignMovingAvg_3")]
        std_updates = [rs.assign_sub(after_corrections((rs - stddev) * rdecay),
                                     name=f"{scope}/AssignMovingAvg_4"),
                       rsw.assign_sub((rsw - one) * rdecay, name=f"{scope}/AssignMovingAvg_5")]
        new_mean = _lib.apply_op("RealDiv", None, [rm, rmw], _unbiased, dtype,
                                 _lib.static_shape(mean))
        new_stddev = _lib.apply_op("RealDiv", None, [rs, rsw], _unbiased, dtype,
                                   _lib.static_shape(mean))
        new_variance = _math.square(new_stddev) - eps
        return r, d, new_mean, new_variance, mean_updates, std_updates

    def call(self, inputs: Any, training: Any = False) -> Any:
        """The normalized inputs: by the batch's (or each virtual batch's) moments when
        ``training`` (a Python bool or a scalar bool Tensor), else by the moving averages;
        the update ops are made (and join ``UPDATE_OPS``) unless ``training`` is False.

        Raises:
            ValueError: virtual batches of an input whose non-batch dimensions are not all
                known, or whose known batch size ``virtual_batch_size`` does not divide."""
        x = convert_to_tensor(inputs)
        vbs = self.virtual_batch_size
        ndims, axes = self._ndims, self._axes
        x_in = x
        if vbs is not None:
            rest = self._dims[1:]
            if any(dim is None for dim in rest):
                raise ValueError(f"virtual_batch_size needs the input's dimensions after the "
                                 f"batch known; got shape {x.shape}")
            if self._dims[0] is not None and self._dims[0] % vbs:
                raise ValueError(f"virtual_batch_size {vbs} does not divide the batch size "
                                 f"{self._dims[0]}")
            x_in = _array.reshape(x, [vbs, -1] + list(rest))
            ndims, axes = ndims + 1, [a + 1 for a in axes]
        reduce_axes = [a for a in range(ndims) if a not in axes]
        if vbs is not None:
            del reduce_axes[1]                       # each virtual batch its own moments
        tensor_training = _lib.is_graph_value(training)
        mm, mv = self.moving_mean, self.moving_variance
        scale = self._broadcast(self.gamma) if self.gamma is not None else None
        offset = self._broadcast(self.beta) if self.beta is not None else None
        if not tensor_training and not training:
            mean, variance = self._broadcast(mm), self._broadcast(mv)
        else:
            batch_mean = _math.reduce_mean(x_in, reduce_axes, keepdims=True)
            batch_var = _math.reduce_mean(
                _math.squared_difference(x_in, _array.stop_gradient(batch_mean)), reduce_axes,
                keepdims=True)
            if vbs is None:
                new_mean = _array.reshape(batch_mean, self._param_shape)
                new_var = _array.reshape(batch_var, self._param_shape)
            else:   # the mean of the virtual batches' moments, as TF's
                new_mean = _math.reduce_mean(batch_mean, [1], keepdims=True)
                new_var = _math.reduce_mean(batch_var, [1], keepdims=True)
            if self._bessel:
                n = _math.cast(_array.size(x), x.dtype) / _math.cast(_array.size(new_var),
                                                                       x.dtype)
                new_var = new_var * (n / (n - 1.0))
            if tensor_training:
                mean = _cf.cond(training, lambda: batch_mean, lambda: self._broadcast(mm))
                variance = _cf.cond(training, lambda: batch_var, lambda: self._broadcast(mv))
                decay: Any = _cf.cond(training, lambda: constant(1.0 - self.momentum, x.dtype),
                                      lambda: constant(0.0, x.dtype))
            else:
                mean, variance = batch_mean, batch_var
                decay = np.asarray(1.0 - self.momentum, x.dtype)
            new_mean = _array.stop_gradient(new_mean)
            new_var = _array.stop_gradient(new_var)
            mean_deps: list[Any] = []
            var_deps: list[Any] = []
            if self.renorm:
                r, d, new_mean, new_var, mean_deps, var_deps = self._renorm(
                    new_mean, new_var, training, tensor_training, x.dtype)
                # (x - mean) / stddev * r + d, then gamma and beta (TF's _compose_transforms)
                r, d = self._broadcast(r), self._broadcast(d)
                offset = d * scale if scale is not None else d
                if self.beta is not None:
                    offset = offset + self._broadcast(self.beta)
                scale = r * scale if scale is not None else r
            with _ops.control_dependencies(mean_deps):
                self.add_update(mm.assign_sub((mm - new_mean) * decay,
                                              name=f"{self._scope.name}/AssignMovingAvg"))
            with _ops.control_dependencies(var_deps):
                self.add_update(mv.assign_sub((mv - new_var) * decay,
                                              name=f"{self._scope.name}/AssignMovingAvg_1"))
        inv = _math.rsqrt(variance + np.asarray(self.epsilon, x.dtype))
        if scale is not None:
            inv = inv * scale
        out = x_in * inv - mean * inv
        if offset is not None:
            out = out + offset
        if vbs is not None:
            out = _array.reshape(out, [-1] + list(self._dims[1:]))
        out.shape = x.shape
        return out


def _first(needs: Any, value: Any, *after: Any) -> Any:
    return value, lambda dy: (None,) * (1 + len(after))


def _unbiased(needs: Any, average: Any, weight: Any) -> Any:
    """An average without zero-debiasing divided by its weight (TF's renorm ``new_var /
    new_weight``); the average itself while the weight is 0 (before any training step,
    where TF's quotient is NaN and an inference-time update multiplies it by 0)."""
    average, weight = np.asarray(average), np.asarray(weight)
    safe = np.where(weight == 0, np.ones_like(weight), weight)
    return np.where(weight == 0, average, average / safe), lambda dy: (None, None)


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
        renorm: Batch Renormalization (see the module docstring): four more variables,
            ``renorm_mean``, ``renorm_mean_weight``, ``renorm_stddev``,
            ``renorm_stddev_weight``.
        renorm_clipping: A dict of ``rmax``, ``rmin``, ``dmax`` (floats or scalar Tensors):
            ``r`` clipped to ``[rmin, rmax]``, ``d`` to ``[-dmax, dmax]``; a missing key is
            no clip.
        renorm_momentum: Of the renorm averages (the moving averages keep ``momentum``).
        fused: None or True use TF's fused rule for 4-D inputs (the moving variance gets
            the Bessel-corrected batch variance, as TF's fused kernel) unless renorm or
            virtual batches; False never.
        virtual_batch_size: None, or an int dividing the batch: Ghost Batch Normalization
            over sub-batches of that size (see the module docstring; axis 0 cannot be
            normalized).

    Returns:
        A Tensor of the inputs' shape and dtype.

    Raises:
        ValueError: an unknown rank or axis size, a bad axis, ``renorm_clipping`` keys
            other than ``rmax``, ``rmin``, ``dmax``, a bad ``virtual_batch_size``.
        NotImplementedError: ``adjustment``.
    """
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        renorm=renorm, renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum,
        fused=fused, trainable=trainable,
        virtual_batch_size=virtual_batch_size, adjustment=adjustment, name=name,
        _reuse=reuse, _scope=name)
    return layer(inputs, training=training)

