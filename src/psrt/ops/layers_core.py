"""``tf.layers``' core layers, as TF r1.15's tensorflow/python/layers/core.py (over
keras/layers/core.py): :class:`Dense`, :class:`Dropout`, :class:`Flatten` and their
functions ``dense``, ``dropout``, ``flatten`` (the convolution and pooling layers:
psrt/ops/layers_convolutional.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import control_flow_ops as _cf
from psrt.ops import indexing_ops as _indexing
from psrt.ops import math_ops as _math
from psrt.ops import nn_ops as _nn
from psrt.ops import random_ops as _random
from psrt.ops.init_ops import zeros_initializer
from psrt.ops.layers_base import Layer


def _last_dim(shape: TensorShape, layer: str) -> int:
    if shape.ndims is None or shape.ndims < 2 or shape.as_list()[-1] is None:
        raise ValueError(f"The last dimension of the inputs to `{layer}` should be defined. "
                         f"Found `None`. (inputs of shape {shape})")
    return int(shape.as_list()[-1])


class Dense(Layer):
    """A densely-connected layer, as ``tf.layers.Dense``: ``activation(inputs @ kernel +
    bias)`` with ``kernel`` ``[in, units]`` (``<scope>/kernel``) and ``bias`` ``[units]``
    (``<scope>/bias``). Inputs of rank > 2 are multiplied along their last axis (TF's
    ``tensordot``). See :func:`dense` for the arguments.
    """

    _base_name = "dense"
    _weight_names = ("kernel", "bias")   # tf.contrib's fully_connected: weights, biases

    def __init__(self, units: int, activation: Any = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 kernel_regularizer: Any = None, bias_regularizer: Any = None,
                 activity_regularizer: Any = None, kernel_constraint: Any = None,
                 bias_constraint: Any = None, trainable: bool = True,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        if int(units) <= 0:
            raise ValueError(f"units must be a positive integer; got {units!r}")
        self.units = int(units)
        self.activation = activation
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer if bias_initializer is not None \
            else zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel: Any = None
        self.bias: Any = None

    def build(self, input_shape: TensorShape) -> None:
        """Creates ``kernel`` (and ``bias``) for inputs of ``input_shape``.

        Raises:
            ValueError: the inputs' last dimension is unknown (TF's message)."""
        n_in = _last_dim(input_shape, "Dense")
        self.kernel = self.add_weight(self._weight_names[0], [n_in, self.units],
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight(self._weight_names[1], [self.units],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer)
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """``activation(inputs @ kernel + bias)``."""
        inputs = convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if rank is not None and rank > 2:
            out = _indexing.tensordot(inputs, self.kernel, [[rank - 1], [0]])
        else:
            out = _math.matmul(inputs, self.kernel)
        if self.use_bias:
            out = _nn.bias_add(out, self.bias)
        if self.activation is not None:
            out = self.activation(out)
        return out


def dense(inputs: Any, units: int, activation: Any = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None,
          kernel_regularizer: Any = None, bias_regularizer: Any = None,
          activity_regularizer: Any = None, kernel_constraint: Any = None,
          bias_constraint: Any = None, trainable: bool = True, name: str | None = None,
          reuse: Any = None) -> Tensor:
    """A densely-connected layer on ``inputs``, as ``tf.layers.dense``.

    Args:
        inputs: A float Tensor ``[batch, ..., in]`` (the last dimension known).
        units: Output size (int > 0).
        activation: A function of the output (e.g. ``psrt.nn.relu``), or None (linear).
        use_bias: Whether to add ``bias``.
        kernel_initializer: Default: the variable scope's, else glorot uniform (TF's).
        bias_initializer: Default zeros.
        kernel_regularizer, bias_regularizer: Functions of the weight returning a loss
            (``psrt.contrib.layers.l2_regularizer(s)``): added to ``REGULARIZATION_LOSSES``.
        activity_regularizer: A function of the output; its loss joins the same collection.
        trainable: Whether the weights join ``TRAINABLE_VARIABLES``.
        name: The variable scope (default ``dense``, ``dense_1``, ...).
        reuse: True or ``AUTO_REUSE`` reuses the weights of the scope ``name``.

    Returns:
        A Tensor ``[batch, ..., units]`` of the inputs' dtype.

    Raises:
        ValueError: ``units`` not positive, or the inputs' last dimension unknown.
    """
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer, trainable=trainable, name=name,
                  _reuse=reuse, _scope=name)
    return layer(inputs)


# ---- dropout ----------------------------------------------------------------------------------

def _noise_shape(x: Tensor, noise_shape: Any) -> Any:
    """TF's ``_get_noise_shape``: the inputs' shape by default; None entries of
    ``noise_shape`` take the inputs' dimension there."""
    shape = x.shape
    if noise_shape is None:
        return shape.as_list() if shape.is_fully_defined() else _array.shape(x)
    ns = list(noise_shape)
    if all(d is not None for d in ns):
        return [int(d) for d in ns]
    if shape.ndims is not None and len(ns) == shape.ndims:
        known = shape.as_list()
        if all(d is not None or k is not None for d, k in zip(ns, known)):
            return [int(k if d is None else d) for d, k in zip(ns, known)]
    dyn = _array.shape(x)
    return _array.stack([dyn[i] if d is None else np.int32(d) for i, d in enumerate(ns)])


def _dropout(x: Tensor, rate: float, noise_shape: Any, seed: Any) -> Tensor:
    """TF r1.15's ``nn.dropout`` (dropout_v2): keep each element (or each slice of
    ``noise_shape``) where a uniform ``[0, 1)`` draw is ``>= rate``, scaled by ``1 / (1 -
    rate)``; a new draw at every run."""
    draw = _random.random_uniform(_noise_shape(x, noise_shape), dtype=x.dtype, seed=seed)
    keep = _math.cast(_math.greater_equal(draw, np.asarray(rate, x.dtype)), x.dtype)
    out = x * np.asarray(1.0 / (1.0 - rate), x.dtype) * keep
    out.shape = x.shape
    return out


class Dropout(Layer):
    """Dropout, as ``tf.layers.Dropout``: see :func:`dropout`. No weights."""

    _base_name = "dropout"

    def __init__(self, rate: float = 0.5, noise_shape: Any = None, seed: int | None = None,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        rate = float(rate)
        if not 0 <= rate < 1:
            raise ValueError(f"rate must be a scalar tensor or a float in the range [0, 1), "
                             f"got {rate}")
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs: Any, training: Any = False) -> Any:
        """The inputs with dropout when ``training`` (a Python bool, or a scalar bool
        Tensor chosen at each run, TF's ``smart_cond``), else the inputs unchanged."""
        x = convert_to_tensor(inputs)
        if not _lib.is_graph_value(training):
            if not training or self.rate == 0:
                return _array.identity(x)
            return _dropout(x, self.rate, self.noise_shape, self.seed)
        out = _cf.cond(training, lambda: _dropout(x, self.rate, self.noise_shape, self.seed),
                       lambda: _array.identity(x))
        out.shape = x.shape
        return out


def dropout(inputs: Any, rate: float = 0.5, noise_shape: Any = None, seed: int | None = None,
            training: Any = False, name: str | None = None) -> Tensor:
    """Dropout on ``inputs``, as ``tf.layers.dropout``: when ``training``, each element is
    zeroed with probability ``rate`` and the rest scaled by ``1 / (1 - rate)`` (a new mask
    at every run); else the inputs pass unchanged (TF's default ``training=False``).

    Args:
        inputs: A float Tensor.
        rate: Drop probability in ``[0, 1)``.
        noise_shape: The mask's shape (broadcast against the inputs; a None entry takes
            the inputs' dimension), e.g. ``[batch, 1, 1, channels]``.
        seed: The op seed (with the graph seed, TF's rule: ``psrt.set_random_seed``).
        training: A Python bool, or a scalar bool Tensor (e.g. a placeholder) chosen at each
            run.
        name: The layer's name.

    Returns:
        A Tensor of the inputs' shape and dtype.

    Raises:
        ValueError: ``rate`` outside ``[0, 1)``.
    """
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)(inputs,
                                                                        training=training)


# ---- flatten ----------------------------------------------------------------------------------

class Flatten(Layer):
    """Flattens each example, as ``tf.layers.Flatten``: ``[batch, d1, ..., dn]`` becomes
    ``[batch, d1 * ... * dn]``. No weights."""

    _base_name = "flatten"

    def __init__(self, data_format: str = "channels_last", name: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(f"data_format must be 'channels_last' or 'channels_first'; got "
                             f"{data_format!r}")
        self.data_format = data_format

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """``inputs`` reshaped to ``[batch, -1]`` (channels first moved last first, as TF's
        ``data_format='channels_first'``)."""
        x = convert_to_tensor(inputs)
        dims = x.shape.as_list() if x.shape.ndims is not None else None
        if self.data_format == "channels_first" and dims is not None and len(dims) > 2:
            x = _array.transpose(x, [0] + list(range(2, len(dims))) + [1])
            dims = x.shape.as_list()
        if dims is not None and all(d is not None for d in dims[1:]):
            rest = int(np.prod(dims[1:], dtype=np.int64)) if len(dims) > 1 else 1
            out = _array.reshape(x, [-1, rest])
            out.shape = TensorShape([dims[0], rest])
            return out
        return _array.reshape(x, _array.stack([_array.shape(x)[0], np.int32(-1)]))


def flatten(inputs: Any, name: str | None = None, data_format: str = "channels_last"
            ) -> Tensor:
    """``[batch, d1, ..., dn]`` inputs as ``[batch, d1 * ... * dn]``, as
    ``tf.layers.flatten`` (the batch dimension may be unknown).

    Raises:
        ValueError: an unknown ``data_format``."""
    return Flatten(data_format=data_format, name=name)(inputs)
