"""The rest of ``tf.layers``' convolution and pooling layers, as TF r1.15's
tensorflow/python/layers/convolutional.py and pooling.py (over Keras's layers of the same
names): :class:`Conv3D`, :class:`Conv2DTranspose`, :class:`Conv3DTranspose`,
:class:`SeparableConv2D`, :class:`MaxPooling3D`, :class:`AveragePooling3D` and their
functions ``conv3d``, ``conv2d_transpose``, ``conv3d_transpose``, ``separable_conv2d``,
``max_pooling3d``, ``average_pooling3d`` (the 2-D convolution and pooling layers:
psrt/ops/layers_convolutional.py, whose Keras argument checks these share).

Weights are TF's, made with :func:`get_variable` in the layer's variable scope (so a
``replica_device_setter`` puts them on the ps tasks): ``kernel`` ``[kd, kh, kw, in,
filters]`` (Conv3D), ``[kh, kw, filters, in]`` (Conv2DTranspose; ``[kd, kh, kw, filters,
in]`` in 3-D), ``depthwise_kernel`` ``[kh, kw, in, depth_multiplier]`` and
``pointwise_kernel`` ``[1, 1, in * depth_multiplier, filters]`` (SeparableConv2D), ``bias``
``[filters]``. A transposed convolution's output size is Keras's ``deconv_output_length``:
``in * stride`` for ``'same'``, ``in * stride + max(kernel - stride, 0)`` for ``'valid'``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import conv3d_ops as _conv3
from psrt.ops import conv_ops as _conv
from psrt.ops import depthwise_conv_ops as _dw
from psrt.ops import nn_ops as _nn
from psrt.ops import pooling3d_ops as _pool3
from psrt.ops.array_ops import shape as _shape
from psrt.ops.init_ops import zeros_initializer
from psrt.ops.layers_base import Layer
from psrt.ops.layers_convolutional import _check_rank, _data_format, _padding, _tuple_n

__all__ = ["AveragePooling3D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose",
           "MaxPooling3D", "SeparableConv2D", "average_pooling3d", "conv2d_transpose",
           "conv3d", "conv3d_transpose", "max_pooling3d", "separable_conv2d"]


def _positive_filters(filters: Any) -> int:
    if isinstance(filters, bool) or not isinstance(filters, (int, np.integer)) or filters <= 0:
        raise ValueError(f"filters must be a positive integer; got {filters!r}")
    return int(filters)


def _channels(input_shape: TensorShape, data_format: str, layer: str, rank: int) -> int:
    """The inputs' channel count (TF's message when it is unknown)."""
    _check_rank(input_shape, layer, rank)
    dims = input_shape.as_list() if input_shape.ndims is not None else None
    c = None if dims is None else dims[1 if data_format == "channels_first" else -1]
    if c is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found "
                         "`None`.")
    return int(c)


class _Conv(Layer):
    """What the convolution layers share (Keras's ``Conv``): the checked arguments, the
    bias, the activation."""

    _rank = 2

    def __init__(self, filters: int, kernel_size: Any, strides: Any = 1,
                 padding: str = "valid", data_format: str = "channels_last",
                 dilation_rate: Any = 1, activation: Any = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 kernel_regularizer: Any = None, bias_regularizer: Any = None,
                 activity_regularizer: Any = None, kernel_constraint: Any = None,
                 bias_constraint: Any = None, trainable: bool = True,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        n = self._rank
        self.filters = _positive_filters(filters)
        self.kernel_size = _tuple_n(kernel_size, n, "kernel_size")
        self.strides = _tuple_n(strides, n, "strides")
        self.padding = _padding(padding)
        self.data_format = _data_format(data_format)
        self.dilation_rate = _tuple_n(dilation_rate, n, "dilation_rate")
        if min(self.strides) < 1 or min(self.kernel_size) < 1 or min(self.dilation_rate) < 1:
            raise ValueError(f"kernel_size, strides and dilation_rate must be positive; got "
                             f"{self.kernel_size}, {self.strides}, {self.dilation_rate}")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
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

    def _fmt(self) -> str:
        first = self.data_format == "channels_first"
        return {2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[self._rank][int(first)]

    def _kernel_shape(self, channels: int) -> list[int]:
        return list(self.kernel_size) + [channels, self.filters]

    def build(self, input_shape: TensorShape) -> None:
        """Creates ``kernel`` (and ``bias``) for inputs of ``input_shape``.

        Raises:
            ValueError: inputs not of the layer's rank, or of unknown channels (TF's
                message)."""
        channels = _channels(input_shape, self.data_format, self._name or self._base_name,
                             self._rank + 2)
        self.kernel = self.add_weight("kernel", self._kernel_shape(channels),
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", [self.filters],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer)
        self.built = True

    def _finish(self, out: Any) -> Any:
        if self.use_bias:
            out = _nn.bias_add(out, self.bias, data_format="NCHW"
                               if self.data_format == "channels_first" else "NHWC")
        return out if self.activation is None else self.activation(out)


class Conv3D(_Conv):
    """A 3-D convolution layer, as ``tf.layers.Conv3D``: ``activation(conv3d(inputs, kernel)
    + bias)``, ``kernel`` ``[kd, kh, kw, in_channels, filters]``. See :func:`conv3d`."""

    _base_name = "conv3d"
    _rank = 3

    def __init__(self, filters: int, kernel_size: Any, strides: Any = (1, 1, 1),
                 padding: str = "valid", data_format: str = "channels_last",
                 dilation_rate: Any = (1, 1, 1), **kwargs: Any) -> None:
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         **kwargs)

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """``activation(conv3d(inputs, kernel) + bias)``."""
        out = _conv3.conv3d(convert_to_tensor(inputs), self.kernel, strides=self.strides,
                            padding=self.padding.upper(), data_format=self._fmt(),
                            dilations=self.dilation_rate)
        return self._finish(out)


def _deconv_length(size: Any, k: int, stride: int, padding: str) -> Any:
    """Keras's ``deconv_output_length`` (no output padding, no dilation): an int, or a
    scalar Tensor for a size known only in a run."""
    extra = 0 if padding == "same" else max(k - stride, 0)
    return size * stride + extra


class _ConvTranspose(_Conv):
    """A transposed convolution layer over ``tf.nn.conv2d_transpose``/``conv3d_transpose``:
    ``kernel`` ``[*kernel_size, filters, in_channels]``."""

    def __init__(self, filters: int, kernel_size: Any, strides: Any = 1,
                 padding: str = "valid", data_format: str = "channels_last",
                 **kwargs: Any) -> None:
        super().__init__(filters, kernel_size, strides, padding, data_format, 1, **kwargs)

    def _kernel_shape(self, channels: int) -> list[int]:
        return list(self.kernel_size) + [self.filters, channels]

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """``activation(conv_transpose(inputs, kernel) + bias)``, the output size Keras's."""
        x = convert_to_tensor(inputs)
        dims = x.shape.as_list() if x.shape.ndims is not None else [None] * (self._rank + 2)
        dynamic = _shape(x)
        first = self.data_format == "channels_first"
        axes = range(2, self._rank + 2) if first else range(1, self._rank + 1)
        batch = dims[0] if dims[0] is not None else dynamic[0]
        sizes = [_deconv_length(dims[a] if dims[a] is not None else dynamic[a],
                                self.kernel_size[i], self.strides[i], self.padding)
                 for i, a in enumerate(axes)]
        shape = [batch, self.filters, *sizes] if first else [batch, *sizes, self.filters]
        op = _conv.conv2d_transpose if self._rank == 2 else _conv3.conv3d_transpose
        out = op(x, self.kernel, shape, strides=self.strides, padding=self.padding.upper(),
                 data_format=self._fmt())
        return self._finish(out)


class Conv2DTranspose(_ConvTranspose):
    """A transposed 2-D convolution layer (deconvolution), as ``tf.layers.Conv2DTranspose``:
    ``kernel`` ``[kh, kw, filters, in_channels]``. See :func:`conv2d_transpose`."""

    _base_name = "conv2d_transpose"
    _rank = 2

    def __init__(self, filters: int, kernel_size: Any, strides: Any = (1, 1),
                 padding: str = "valid", data_format: str = "channels_last",
                 **kwargs: Any) -> None:
        super().__init__(filters, kernel_size, strides, padding, data_format, **kwargs)


class Conv3DTranspose(_ConvTranspose):
    """A transposed 3-D convolution layer, as ``tf.layers.Conv3DTranspose``: ``kernel``
    ``[kd, kh, kw, filters, in_channels]``. See :func:`conv3d_transpose`."""

    _base_name = "conv3d_transpose"
    _rank = 3

    def __init__(self, filters: int, kernel_size: Any, strides: Any = (1, 1, 1),
                 padding: str = "valid", data_format: str = "channels_last",
                 **kwargs: Any) -> None:
        super().__init__(filters, kernel_size, strides, padding, data_format, **kwargs)


class SeparableConv2D(_Conv):
    """A depthwise separable 2-D convolution layer, as ``tf.layers.SeparableConv2D``:
    ``activation(separable_conv2d(inputs, depthwise_kernel, pointwise_kernel) + bias)``. See
    :func:`separable_conv2d`."""

    _base_name = "separable_conv2d"
    _rank = 2

    def __init__(self, filters: int, kernel_size: Any, strides: Any = (1, 1),
                 padding: str = "valid", data_format: str = "channels_last",
                 dilation_rate: Any = (1, 1), depth_multiplier: int = 1,
                 activation: Any = None, use_bias: bool = True,
                 depthwise_initializer: Any = None, pointwise_initializer: Any = None,
                 bias_initializer: Any = None, depthwise_regularizer: Any = None,
                 pointwise_regularizer: Any = None, bias_regularizer: Any = None,
                 activity_regularizer: Any = None, depthwise_constraint: Any = None,
                 pointwise_constraint: Any = None, bias_constraint: Any = None,
                 trainable: bool = True, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate,
                         activation=activation, use_bias=use_bias,
                         bias_initializer=bias_initializer, bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer, trainable=trainable,
                         name=name, **kwargs)
        if isinstance(depth_multiplier, bool) or not isinstance(
                depth_multiplier, (int, np.integer)) or depth_multiplier < 1:
            raise ValueError(f"depth_multiplier must be a positive integer; got "
                             f"{depth_multiplier!r}")
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = depthwise_initializer
        self.pointwise_initializer = pointwise_initializer
        self.depthwise_regularizer = depthwise_regularizer
        self.pointwise_regularizer = pointwise_regularizer
        self.depthwise_kernel: Any = None
        self.pointwise_kernel: Any = None

    def build(self, input_shape: TensorShape) -> None:
        """Creates ``depthwise_kernel``, ``pointwise_kernel`` (and ``bias``), in TF's order.

        Raises:
            ValueError: inputs not of rank 4, or of unknown channels (TF's message)."""
        c = _channels(input_shape, self.data_format, self._name or self._base_name, 4)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", list(self.kernel_size) + [c, self.depth_multiplier],
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", [1, 1, c * self.depth_multiplier, self.filters],
            initializer=self.pointwise_initializer, regularizer=self.pointwise_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", [self.filters],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer)
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """``activation(separable_conv2d(inputs, ...) + bias)``."""
        fmt = self._fmt()
        strides = (1, *self.strides, 1) if fmt == "NHWC" else (1, 1, *self.strides)
        out = _dw.separable_conv2d(convert_to_tensor(inputs), self.depthwise_kernel,
                                   self.pointwise_kernel, strides=list(strides),
                                   padding=self.padding.upper(), rate=self.dilation_rate,
                                   data_format=fmt)
        return self._finish(out)


_CONV_DOC = """
    Args:
        inputs: A float Tensor, channels last (default) or first; the channel dimension
            known, the others may be None.
        filters: The number of output channels (int > 0).
        kernel_size: An int or {n} ints.
        strides: An int or {n} ints (default 1).
        padding: ``'valid'`` (default) or ``'same'``, any case.
        data_format: ``'channels_last'`` (default) or ``'channels_first'``.
        activation: A function of the output (e.g. ``psrt.nn.relu``), or None (linear).
        use_bias: Whether to add ``bias`` (default True).
        kernel_initializer, bias_initializer: default the variable scope's (else glorot
            uniform) and zeros, as TF's.
        kernel_regularizer, bias_regularizer, activity_regularizer: functions returning a
            loss; added to ``REGULARIZATION_LOSSES``.
        kernel_constraint, bias_constraint: Accepted and ignored.
        trainable: Whether the weights join ``TRAINABLE_VARIABLES``.
        name: The variable scope (default ``{base}``, ``{base}_1``, ...).
        reuse: True or ``AUTO_REUSE`` reuses the weights of the scope ``name``.

    Raises:
        ValueError: a bad ``kernel_size``, ``strides``, ``padding`` or ``data_format``
            (naming the argument and the value), ``filters`` not positive, inputs not of
            rank {rank} or of unknown channels.
"""


def _functional(cls: Any, inputs: Any, reuse: Any, name: str | None, **kwargs: Any) -> Any:
    return cls(name=name, _reuse=reuse, _scope=name, **kwargs)(inputs)


def conv3d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1, 1),
           padding: str = "valid", data_format: str = "channels_last",
           dilation_rate: Any = (1, 1, 1), activation: Any = None, use_bias: bool = True,
           kernel_initializer: Any = None, bias_initializer: Any = None,
           kernel_regularizer: Any = None, bias_regularizer: Any = None,
           activity_regularizer: Any = None, kernel_constraint: Any = None,
           bias_constraint: Any = None, trainable: bool = True, name: str | None = None,
           reuse: Any = None) -> Tensor:
    """A 3-D convolution layer on ``inputs``, as ``tf.layers.conv3d``:
    ``activation(tf.nn.conv3d(inputs, kernel) + bias)``, ``kernel`` ``[kd, kh, kw, in,
    filters]``; ``dilation_rate`` an int or 3 ints (not above 1 with a stride above 1).
    Returns ``[batch, out_d, out_h, out_w, filters]`` (or channels first)."""
    return _functional(Conv3D, inputs, reuse, name, filters=filters, kernel_size=kernel_size,
                       strides=strides, padding=padding, data_format=data_format,
                       dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                       kernel_initializer=kernel_initializer,
                       bias_initializer=bias_initializer,
                       kernel_regularizer=kernel_regularizer,
                       bias_regularizer=bias_regularizer,
                       activity_regularizer=activity_regularizer, trainable=trainable)


def conv2d_transpose(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1),
                     padding: str = "valid", data_format: str = "channels_last",
                     activation: Any = None, use_bias: bool = True,
                     kernel_initializer: Any = None, bias_initializer: Any = None,
                     kernel_regularizer: Any = None, bias_regularizer: Any = None,
                     activity_regularizer: Any = None, kernel_constraint: Any = None,
                     bias_constraint: Any = None, trainable: bool = True,
                     name: str | None = None, reuse: Any = None) -> Tensor:
    """A transposed 2-D convolution layer on ``inputs``, as ``tf.layers.conv2d_transpose``:
    ``activation(tf.nn.conv2d_transpose(inputs, kernel, output_shape) + bias)``, ``kernel``
    ``[kh, kw, filters, in]``; the output ``[batch, h * s + max(k - s, 0), ..., filters]``
    (``'valid'``) or ``[batch, h * s, w * s, filters]`` (``'same'``)."""
    return _functional(Conv2DTranspose, inputs, reuse, name, filters=filters,
                       kernel_size=kernel_size, strides=strides, padding=padding,
                       data_format=data_format, activation=activation, use_bias=use_bias,
                       kernel_initializer=kernel_initializer,
                       bias_initializer=bias_initializer,
                       kernel_regularizer=kernel_regularizer,
                       bias_regularizer=bias_regularizer,
                       activity_regularizer=activity_regularizer, trainable=trainable)


def conv3d_transpose(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1, 1),
                     padding: str = "valid", data_format: str = "channels_last",
                     activation: Any = None, use_bias: bool = True,
                     kernel_initializer: Any = None, bias_initializer: Any = None,
                     kernel_regularizer: Any = None, bias_regularizer: Any = None,
                     activity_regularizer: Any = None, kernel_constraint: Any = None,
                     bias_constraint: Any = None, trainable: bool = True,
                     name: str | None = None, reuse: Any = None) -> Tensor:
    """A transposed 3-D convolution layer on ``inputs``, as ``tf.layers.conv3d_transpose``:
    ``kernel`` ``[kd, kh, kw, filters, in]``, output sizes as :func:`conv2d_transpose`'s per
    axis."""
    return _functional(Conv3DTranspose, inputs, reuse, name, filters=filters,
                       kernel_size=kernel_size, strides=strides, padding=padding,
                       data_format=data_format, activation=activation, use_bias=use_bias,
                       kernel_initializer=kernel_initializer,
                       bias_initializer=bias_initializer,
                       kernel_regularizer=kernel_regularizer,
                       bias_regularizer=bias_regularizer,
                       activity_regularizer=activity_regularizer, trainable=trainable)


def separable_conv2d(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1),
                     padding: str = "valid", data_format: str = "channels_last",
                     dilation_rate: Any = (1, 1), depth_multiplier: int = 1,
                     activation: Any = None, use_bias: bool = True,
                     depthwise_initializer: Any = None, pointwise_initializer: Any = None,
                     bias_initializer: Any = None, depthwise_regularizer: Any = None,
                     pointwise_regularizer: Any = None, bias_regularizer: Any = None,
                     activity_regularizer: Any = None, depthwise_constraint: Any = None,
                     pointwise_constraint: Any = None, bias_constraint: Any = None,
                     trainable: bool = True, name: str | None = None,
                     reuse: Any = None) -> Tensor:
    """A depthwise separable 2-D convolution layer on ``inputs``, as
    ``tf.layers.separable_conv2d``: ``tf.nn.separable_conv2d`` with ``depthwise_kernel``
    ``[kh, kw, in, depth_multiplier]`` and ``pointwise_kernel`` ``[1, 1, in *
    depth_multiplier, filters]``, then ``bias`` and ``activation``; ``dilation_rate`` is the
    depthwise step's ``rate``. Constraints are accepted and ignored."""
    return _functional(SeparableConv2D, inputs, reuse, name, filters=filters,
                       kernel_size=kernel_size, strides=strides, padding=padding,
                       data_format=data_format, dilation_rate=dilation_rate,
                       depth_multiplier=depth_multiplier, activation=activation,
                       use_bias=use_bias, depthwise_initializer=depthwise_initializer,
                       pointwise_initializer=pointwise_initializer,
                       bias_initializer=bias_initializer,
                       depthwise_regularizer=depthwise_regularizer,
                       pointwise_regularizer=pointwise_regularizer,
                       bias_regularizer=bias_regularizer,
                       activity_regularizer=activity_regularizer, trainable=trainable)


for _f, _n, _b in ((conv3d, 3, "conv3d"), (conv2d_transpose, 2, "conv2d_transpose"),
                   (conv3d_transpose, 3, "conv3d_transpose"),
                   (separable_conv2d, 2, "separable_conv2d")):
    _f.__doc__ = (_f.__doc__ or "") + _CONV_DOC.format(n=_n, base=_b, rank=_n + 2)
del _f, _n, _b


# ---- 3-D pooling -------------------------------------------------------------------------------


class _Pooling3D(Layer):
    """A 3-D pooling layer over ``tf.nn.max_pool3d``/``avg_pool3d`` (TF's ``_Pooling3D``)."""

    _op: Any = None

    def __init__(self, pool_size: Any, strides: Any, padding: str = "valid",
                 data_format: str = "channels_last", name: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        self.pool_size = _tuple_n(pool_size, 3, "pool_size")
        self.strides = _tuple_n(strides, 3, "strides")
        if min(self.pool_size) < 1 or min(self.strides) < 1:
            raise ValueError(f"pool_size and strides must be positive; got {self.pool_size}, "
                             f"{self.strides}")
        self.padding = _padding(padding)
        self.data_format = _data_format(data_format)

    def build(self, input_shape: TensorShape) -> None:
        """No weights; the inputs must be of rank 5."""
        _check_rank(input_shape, self._name or self._base_name, 5)
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """The pooled inputs."""
        fmt = "NCDHW" if self.data_format == "channels_first" else "NDHWC"
        return type(self)._op(convert_to_tensor(inputs), ksize=self.pool_size,
                              strides=self.strides, padding=self.padding.upper(),
                              data_format=fmt)


class MaxPooling3D(_Pooling3D):
    """Max pooling for 3-D inputs, as ``tf.layers.MaxPooling3D``: see
    :func:`max_pooling3d`. No weights."""

    _base_name = "max_pooling3d"
    _op = staticmethod(_pool3.max_pool3d)


class AveragePooling3D(_Pooling3D):
    """Average pooling for 3-D inputs, as ``tf.layers.AveragePooling3D``: see
    :func:`average_pooling3d`. No weights."""

    _base_name = "average_pooling3d"
    _op = staticmethod(_pool3.avg_pool3d)


def max_pooling3d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                  data_format: str = "channels_last", name: str | None = None) -> Tensor:
    """Max pooling on 5-D ``inputs``, as ``tf.layers.max_pooling3d`` (over
    ``tf.nn.max_pool3d``).

    Args:
        inputs: A float Tensor of rank 5 (``data_format``'s order; batch may be None).
        pool_size: An int or 3 ints ``(pd, ph, pw)``: the window.
        strides: An int or 3 ints (required, as TF's).
        padding: ``'valid'`` (default) or ``'same'``, any case.
        data_format: ``'channels_last'`` (default) or ``'channels_first'``.
        name: The layer's name.

    Returns:
        A Tensor of the inputs' dtype and rank, channels unchanged, TF's spatial sizes.

    Raises:
        ValueError: a bad ``pool_size``, ``strides``, ``padding`` or ``data_format`` (naming
            the argument and the value), inputs not of rank 5.
    """
    return MaxPooling3D(pool_size, strides, padding=padding, data_format=data_format,
                        name=name)(inputs)


def average_pooling3d(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
                      data_format: str = "channels_last", name: str | None = None
                      ) -> Tensor:
    """Average pooling on 5-D ``inputs``, as ``tf.layers.average_pooling3d`` (over
    ``tf.nn.avg_pool3d``: a border window divides by the number of elements it covers).
    Arguments, shapes and errors as :func:`max_pooling3d`'s."""
    return AveragePooling3D(pool_size, strides, padding=padding, data_format=data_format,
                            name=name)(inputs)
