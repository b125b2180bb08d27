"""``tf.layers``' 2-D convolution and pooling layers, as TF r1.15's
tensorflow/python/layers/convolutional.py and pooling.py (over keras/layers/convolutional.py
and pooling.py): :class:`Conv2D`, :class:`MaxPooling2D`, :class:`AveragePooling2D` and their
functions ``conv2d``, ``max_pooling2d``, ``average_pooling2d``.

``Conv2D`` owns ``<scope>/kernel`` ``[kh, kw, in_channels, filters]`` and ``<scope>/bias``
``[filters]`` (made with :func:`get_variable`, so a ``replica_device_setter`` puts them on
the ps tasks) and computes ``activation(bias_add(conv2d(inputs, kernel)))`` with
``tf.nn.conv2d`` (psrt/ops/conv_ops.py); the poolings run ``tf.nn.max_pool``/``avg_pool``
(psrt/ops/pooling_ops.py). Arguments are checked as Keras's ``conv_utils``:
``kernel_size``/``strides``/``pool_size`` an int or a tuple of 2 ints, ``padding``
``'valid'``/``'same'`` (any case), ``data_format`` ``'channels_last'``/``'channels_first'``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import conv_ops as _conv
from psrt.ops import nn_ops as _nn
from psrt.ops import pooling_ops as _pool
from psrt.ops.init_ops import zeros_initializer
from psrt.ops.layers_base import Layer

__all__ = ["AveragePooling2D", "Conv2D", "MaxPooling2D", "average_pooling2d", "conv2d",
           "max_pooling2d"]


# ---- Keras's conv_utils --------------------------------------------------------------------------

def _tuple_n(value: Any, n: int, name: str) -> tuple[int, ...]:
    """An int or ``n`` ints as an ``n``-tuple (Keras's ``normalize_tuple(value, n, name)``).

    Raises:
        ValueError: anything else, naming the argument and the value (TF's message)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    msg = f"The `{name}` argument must be a tuple of {n} integers. Received: {value!r}"
    if isinstance(value, TensorShape):
        value = value.as_list()
    try:
        vals = tuple(value)
    except TypeError:
        raise ValueError(msg) from None
    if len(vals) != n:
        raise ValueError(msg)
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{msg} including element {v!r} of type {type(v)}")
        out.append(int(v))
    return tuple(out)


def _tuple2(value: Any, name: str) -> tuple[int, int]:
    """An int or 2 ints as a pair (Keras's ``normalize_tuple(value, 2, name)``)."""
    a, b = _tuple_n(value, 2, name)
    return a, b


def _padding(value: Any) -> str:
    """'valid' or 'same', case-insensitive (Keras's ``normalize_padding``)."""
    pad = value.lower() if isinstance(value, str) else value
    if pad not in ("valid", "same"):
        raise ValueError(f'The `padding` argument must be one of "valid", "same" (causal '
                         f'padding is only for 1-D convolutions). Received: {value!r}')
    return str(pad)


def _data_format(value: Any) -> str:
    """'channels_last' or 'channels_first', case-insensitive (Keras's
    ``normalize_data_format``); ``None`` is channels_last."""
    fmt = "channels_last" if value is None else (
        value.lower() if isinstance(value, str) else value)
    if fmt not in ("channels_first", "channels_last"):
        raise ValueError(f'The `data_format` argument must be one of "channels_first", '
                         f'"channels_last". Received: {value!r}')
    return str(fmt)


def _nn_format(data_format: str) -> str:
    return "NCHW" if data_format == "channels_first" else "NHWC"


def _check_rank(shape: TensorShape, layer: str, rank: int) -> None:
    if shape.ndims is not None and shape.ndims != rank:
        raise ValueError(f"Input 0 of layer {layer} is incompatible with the layer: expected "
                         f"ndim={rank}, found ndim={shape.ndims}. Full shape received: "
                         f"{shape.as_list()}")


def _check_rank4(shape: TensorShape, layer: str) -> None:
    _check_rank(shape, layer, 4)


# ---- Conv2D ------------------------------------------------------------------------------------

class Conv2D(Layer):
    """A 2-D convolution layer, as ``tf.layers.Conv2D``: ``activation(conv2d(inputs, kernel)
    + bias)`` with ``kernel`` ``[kh, kw, in_channels, filters]`` (``<scope>/kernel``) and
    ``bias`` ``[filters]`` (``<scope>/bias``). See :func:`conv2d` for the arguments."""

    _base_name = "conv2d"

    def __init__(self, filters: int, kernel_size: Any, strides: Any = (1, 1),
                 padding: str = "valid", data_format: str = "channels_last",
                 dilation_rate: Any = (1, 1), activation: Any = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 kernel_regularizer: Any = None, bias_regularizer: Any = None,
                 activity_regularizer: Any = None, kernel_constraint: Any = None,
                 bias_constraint: Any = None, trainable: bool = True,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        if isinstance(filters, bool) or not isinstance(filters, (int, np.integer)) \
                or filters <= 0:
            raise ValueError(f"filters must be a positive integer; got {filters!r}")
        self.filters = int(filters)
        self.kernel_size = _tuple2(kernel_size, "kernel_size")
        self.strides = _tuple2(strides, "strides")
        self.padding = _padding(padding)
        self.data_format = _data_format(data_format)
        self.dilation_rate = _tuple2(dilation_rate, "dilation_rate")
        if min(self.strides) < 1 or min(self.kernel_size) < 1 or min(self.dilation_rate) < 1:
            raise ValueError(f"kernel_size, strides and dilation_rate must be positive; got "
                             f"{self.kernel_size}, {self.strides}, {self.dilation_rate}")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            # TF's nn_ops.Convolution: "strides > 1 not supported in conjunction with
            # dilation_rate > 1"
            raise ValueError(f"strides > 1 not supported in conjunction with dilation_rate > "
                             f"1 (strides {self.strides}, dilation_rate "
                             f"{self.dilation_rate})")
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
            ValueError: inputs not of rank 4, or their channel dimension unknown (TF's
                message)."""
        _check_rank4(input_shape, self._name or "conv2d")
        dims = input_shape.as_list() if input_shape.ndims is not None else None
        channels = None if dims is None else dims[1 if self.data_format == "channels_first"
                                                  else -1]
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found "
                             "`None`.")
        self.kernel = self.add_weight("kernel", list(self.kernel_size) + [channels,
                                                                          self.filters],
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", [self.filters],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer)
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """``activation(conv2d(inputs, kernel) + bias)``."""
        fmt = _nn_format(self.data_format)
        out = _conv.conv2d(convert_to_tensor(inputs), self.kernel, strides=self.strides,
                           padding=self.padding.upper(), data_format=fmt,
                           dilations=self.dilation_rate)
        if self.use_bias:
            out = _nn.bias_add(out, self.bias, data_format=fmt)
        if self.activation is not None:
            out = self.activation(out)
        return out


def conv2d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1),
           padding: str = "valid", data_format: str = "channels_last",
           dilation_rate: Any = (1, 1), activation: Any = None, use_bias: bool = True,
           kernel_initializer: Any = None, bias_initializer: Any = None,
           kernel_regularizer: Any = None, bias_regularizer: Any = None,
           activity_regularizer: Any = None, kernel_constraint: Any = None,
           bias_constraint: Any = None, trainable: bool = True, name: str | None = None,
           reuse: Any = None) -> Tensor:
    """A 2-D convolution layer on ``inputs``, as ``tf.layers.conv2d`` (TF r1.15's
    layers/convolutional.py): ``activation(tf.nn.conv2d(inputs, kernel) + bias)``.

    Args:
        inputs: A float Tensor ``[batch, height, width, channels]`` (channels_last) or
            ``[batch, channels, height, width]`` (channels_first); the channel dimension
            known, the others may be None.
        filters: The number of output channels (int > 0).
        kernel_size: An int or 2 ints ``(kh, kw)``.
        strides: An int or 2 ints (default ``(1, 1)``); not above 1 with a dilation above 1.
        padding: ``'valid'`` (default) or ``'same'``, any case (TF's window sizes).
        data_format: ``'channels_last'`` (default) or ``'channels_first'``.
        dilation_rate: An int or 2 ints: the spacing of the kernel's taps (atrous).
        activation: A function of the output (e.g. ``psrt.nn.relu``), or None (linear).
        use_bias: Whether to add ``bias``.
        kernel_initializer: Default: the variable scope's, else glorot uniform (TF's).
        bias_initializer: Default zeros.
        kernel_regularizer, bias_regularizer: Functions of the weight returning a loss;
            added to ``REGULARIZATION_LOSSES``.
        activity_regularizer: A function of the output; its loss joins the same collection.
        kernel_constraint, bias_constraint: Accepted and ignored.
        trainable: Whether the weights join ``TRAINABLE_VARIABLES``.
        name: The variable scope (default ``conv2d``, ``conv2d_1``, ...).
        reuse: True or ``AUTO_REUSE`` reuses the weights of the scope ``name``.

    Returns:
        A Tensor of the inputs' dtype: ``[batch, out_h, out_w, filters]`` (channels_last)
        or ``[batch, filters, out_h, out_w]``, the batch dimension as the inputs'.

    Raises:
        ValueError: a bad ``kernel_size``, ``strides``, ``dilation_rate``, ``padding`` or
            ``data_format`` (naming the argument and the value), ``filters`` not positive,
            inputs not of rank 4 or of unknown channels.
    """
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding,
                   data_format=data_format, dilation_rate=dilation_rate,
                   activation=activation, use_bias=use_bias,
                   kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                   kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                   activity_regularizer=activity_regularizer, trainable=trainable, name=name,
                   _reuse=reuse, _scope=name)
    return layer(inputs)


# ---- pooling -----------------------------------------------------------------------------------

class _Pooling2D(Layer):
    """A 2-D pooling layer over ``tf.nn.max_pool``/``avg_pool`` (TF's ``_Pooling2D``)."""

    _op: Any = None

    def __init__(self, pool_size: Any, strides: Any, padding: str = "valid",
                 data_format: str = "channels_last", name: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.pool_size = _tuple2(pool_size, "pool_size")
        self.strides = _tuple2(strides, "strides")
        if min(self.pool_size) < 1 or min(self.strides) < 1:
            raise ValueError(f"pool_size and strides must be positive; got {self.pool_size}, "
                             f"{self.strides}")
        self.padding = _padding(padding)
        self.data_format = _data_format(data_format)

    def build(self, input_shape: TensorShape) -> None:
        """No weights; the inputs must be of rank 4."""
        _check_rank4(input_shape, self._name or self._base_name)
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """The pooled inputs."""
        return type(self)._op(convert_to_tensor(inputs), ksize=self.pool_size,
                              strides=self.strides, padding=self.padding.upper(),
                              data_format=_nn_format(self.data_format))


class MaxPooling2D(_Pooling2D):
    """Max pooling for 2-D inputs, as ``tf.layers.MaxPooling2D``: see
    :func:`max_pooling2d`. No weights."""

    _base_name = "max_pooling2d"
    _op = staticmethod(_pool.max_pool)


class AveragePooling2D(_Pooling2D):
    """Average pooling for 2-D inputs, as ``tf.layers.AveragePooling2D``: see
    :func:`average_pooling2d`. No weights."""

    _base_name = "average_pooling2d"
    _op = staticmethod(_pool.avg_pool)


def max_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: str | None = None) -> Tensor:
    """Max pooling on ``inputs``, as ``tf.layers.max_pooling2d`` (TF r1.15's
    layers/pooling.py, over ``tf.nn.max_pool``): each output is the maximum of its window.

    Args:
        inputs: A float Tensor of rank 4 (``data_format``'s order; batch may be None).
        pool_size: An int or 2 ints ``(ph, pw)``: the window.
        strides: An int or 2 ints (required, as TF's).
        padding: ``'valid'`` (default) or ``'same'``, any case.
        data_format: ``'channels_last'`` (default) or ``'channels_first'``.
        name: The layer's name.

    Returns:
        A Tensor of the inputs' dtype and rank, channels unchanged, spatial sizes TF's
        (VALID: ``ceil((in - p + 1) / s)``, SAME: ``ceil(in / s)``).

    Raises:
        ValueError: a bad ``pool_size``, ``strides``, ``padding`` or ``data_format`` (naming
            the argument and the value), inputs not of rank 4.
    """
    return MaxPooling2D(pool_size, strides, padding=padding, data_format=data_format,
                        name=name)(inputs)


def average_pooling2d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: str | None = None
                      ) -> Tensor:
    """Average pooling on ``inputs``, as ``tf.layers.average_pooling2d`` (over
    ``tf.nn.avg_pool``: with SAME padding a border window divides by the number of input
    elements it covers). Arguments, shapes and errors as :func:`max_pooling2d`'s."""
    return AveragePooling2D(pool_size, strides, padding=padding, data_format=data_format,
                            name=name)(inputs)
