"""The ``tf.nn`` names psrt needs: row lookups of embedding-style variables, and the fused
ops models are written with (cross-entropies, activations, ``xw_plus_b``, ``bias_add``) plus
``matmul``, ``reduce_sum`` and ``reduce_mean`` (exported as ``psrt.matmul`` ..., TF's
``tf.matmul`` ...), each with a hand-written gradient that ``minimize`` uses without
tracing."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework import tensor as _graph
from psrt.framework.tensor_shape import TensorShape

# TF1's tf.nn embedding names (psrt/ops/embedding_ops.py): Variables, PartitionedVariables and
# lists of variables, ids fed per run, row-sparse gradients.

# ---- fused ops with hand-written gradients ---------------------------------------------------
#
# Each op below is a forward function ``fwd(needs, *arrays, **settings) -> (value, grad_fn)``
# (``grad_fn(dy)`` returns one gradient or None per array; ``needs`` says which are wanted,
# so that, e.g., the gradient of ``x @ W`` for a fed ``x`` is not computed). Called with a
# psrt Tensor or Variable among its inputs, an op returns a Tensor whose graph node carries
# that gradient: ``minimize`` differentiates it without tracing (one Python call forward
# and one backward per op). Called with arrays it computes at once, and is an autograd
# primitive, so it also works inside a function autograd traces.


class _Everything:
    """``needs`` of a call outside minimize's backward pass: every gradient may be asked."""

    def __contains__(self, i: object) -> bool:
        return True


_ALL = _Everything()


class _Stash(threading.local):
    grad_fn: Any = None


_stash = _Stash()


def _static_of(x: Any) -> tuple[Any, Any]:
    """(dtype, static shape) of a graph value or constant; (None, None) when unknown."""
    if isinstance(x, _graph.Tensor):
        return x.dtype, x.shape
    if _graph._is_graph_value(x):
        return x.dtype, tuple(x.shape)
    a = np.asarray(x)
    return a.dtype, a.shape


def _like(i: int, drop_last: bool = False) -> Callable[[Sequence[Any]], tuple[Any, Any]]:
    """A static rule: the dtype and shape of input ``i`` (without its last dimension)."""
    def rule(inputs: Sequence[Any]) -> tuple[Any, Any]:
        dt, shape = _static_of(inputs[i])
        if drop_last and shape is not None:
            shape = TensorShape(shape)
            shape = shape[:-1] if shape.ndims else shape
        return dt, shape
    return rule


def _fused(fwd: Callable[..., Any],
           static: Callable[[Sequence[Any]], tuple[Any, Any]] | None = None
           ) -> Callable[..., Any]:
    """``apply(name, inputs, **settings)`` for the forward function ``fwd``: a graph Tensor
    when an input is a graph value, else the value (an autograd primitive)."""
    from autograd.extend import defvjp_argnums, primitive  # noqa: PLC0415

    def forward(*args: Any, **settings: Any) -> Any:
        y, grad_fn = fwd(_ALL, *args, **settings)
        # autograd builds the primitive's node (asking for its VJP) right after this call,
        # in the same thread.
        _stash.grad_fn = grad_fn
        return y

    prim = primitive(forward)

    def vjp_maker(argnums: Sequence[int], ans: Any, args: Any, kwargs: Any) -> Any:
        grad_fn, _stash.grad_fn = _stash.grad_fn, None

        def vjp(g: Any) -> tuple[Any, ...]:
            gs = grad_fn(g)
            return tuple(np.zeros_like(args[i]) if gs[i] is None else gs[i] for i in argnums)
        return vjp

    defvjp_argnums(prim, vjp_maker)

    def apply(name: str, inputs: Sequence[Any], **settings: Any) -> Any:
        if any(_graph._is_graph_value(x) for x in inputs):
            t = _graph.py_func(lambda *a: fwd(_ALL, *a, **settings)[0], list(inputs), None,
                               name=name)
            t.op.vjp = functools.partial(fwd, **settings) if settings else fwd
            if static is not None:   # TF's shape inference: static dtype and shape
                t.dtype, t.shape = static(inputs)
            return t
        return prim(*inputs, **settings)
    return apply


def _axis(axis: Any, dim: Any, default: int = -1) -> int:
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    a = axis if axis is not None else dim
    return default if a is None else int(a)


def _xent_args(op: str, sentinel: Any, labels: Any, logits: Any) -> None:
    # TF: tensorflow/python/ops/nn_ops.py, _ensure_xent_args.
    if sentinel is not None:
        raise ValueError(f"Only call `{op}` with named arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")


def _dims(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _log_softmax(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(log_softmax(x), softmax(x)) along ``axis``, shifted by the maximum (no overflow)."""
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=axis, keepdims=True)
    return shifted - np.log(s), e / s


def _softmax_xent(needs: Any, labels: Any, logits: Any, axis: int, labels_grad: bool) -> Any:
    logits = np.asarray(logits)
    labels = np.asarray(labels, logits.dtype)
    if labels.shape != logits.shape:
        raise errors.InvalidArgumentError(
            None, None, f"logits and labels must be broadcastable: logits_size="
            f"{_dims(logits.shape)} labels_size={_dims(labels.shape)}")
    shifted = logits - logits.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=axis, keepdims=True)
    log_p = shifted - np.log(s)
    loss = -np.sum(labels * log_p, axis=axis)

    def grad(dy: Any) -> tuple[Any, Any]:
        dy = np.asarray(dy, logits.dtype)
        dy = dy.reshape(dy.shape + (1,)) if axis == -1 else np.expand_dims(dy, axis)
        d_labels = -dy * log_p if labels_grad and 0 in needs else None
        return d_labels, (dy * (e / s - labels) if 1 in needs else None)
    return loss, grad


_softmax_xent_op = _fused(_softmax_xent, _like(1, True))


def softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                      logits: Any = None, dim: int = -1,
                                      name: str | None = None, axis: int | None = None) -> Any:
    """Softmax cross-entropy between ``logits`` and ``labels``, per example, as TF1's
    ``tf.nn.softmax_cross_entropy_with_logits``: ``-sum(labels * log_softmax(logits))``
    along ``axis`` (``dim``, default the last), computed stably (logits shifted by their
    maximum). As TF1's (deprecated) v1, no gradient flows into ``labels``; use
    :func:`softmax_cross_entropy_with_logits_v2` for that.

    Args:
        _sentinel: Must not be used: call with named arguments, as TF.
        labels: float ``[batch, classes]`` (each row a probability distribution, e.g.
            one-hot), a Tensor, placeholder or array.
        logits: float ``[batch, classes]``, unscaled log-probabilities.
        dim, axis: The class dimension (default -1).
        name: The op name (default ``"SoftmaxCrossEntropyWithLogits"``).

    Returns:
        A Tensor (an array when given arrays) of shape ``[batch]``, the dtype of ``logits``.
        Its gradient with respect to ``logits`` is ``dy * (softmax(logits) - labels)``, as
        TF's fused kernel.

    Raises:
        ValueError: called positionally, or without ``labels`` or ``logits``.
        InvalidArgumentError (at run): ``labels`` and ``logits`` of different shapes.
    """
    _xent_args("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    return _softmax_xent_op(name or "SoftmaxCrossEntropyWithLogits", [labels, logits],
                            axis=_axis(axis, dim if dim != -1 else None), labels_grad=False)


def softmax_cross_entropy_with_logits_v2(labels: Any, logits: Any, axis: int | None = None,
                                         name: str | None = None, dim: int | None = None
                                         ) -> Any:
    """:func:`softmax_cross_entropy_with_logits` whose gradient also flows into ``labels``
    (``-dy * log_softmax(logits)``), as TF1's ``tf.nn.softmax_cross_entropy_with_logits_v2``.
    Arguments, shapes and errors as there."""
    return _softmax_xent_op(name or "SoftmaxCrossEntropyWithLogits", [labels, logits],
                            axis=_axis(axis, dim), labels_grad=True)


def _sparse_xent(needs: Any, labels: Any, logits: Any) -> Any:
    logits = np.asarray(logits)
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise errors.InvalidArgumentError(
            None, None, f"labels must be int32 or int64 class indices; got {labels.dtype}")
    if labels.shape != logits.shape[:-1]:
        raise errors.InvalidArgumentError(
            None, None, f"logits and labels must have the same first dimension, got logits "
            f"shape {_dims(logits.shape)} and labels shape {_dims(labels.shape)}")
    classes = logits.shape[-1]
    bad = (labels < 0) | (labels >= classes)
    if bad.any():
        # TF: tensorflow/core/kernels/sparse_xent_op.cc (CPU).
        raise errors.InvalidArgumentError(
            None, None, f"Received a label value of {int(labels[bad].flat[0])} which is "
            f"outside the valid range of [0, {classes}).  Label values: "
            f"{' '.join(str(int(v)) for v in labels.flat)}")
    log_p, p = _log_softmax(logits, -1)
    idx = labels[..., None]
    loss = -np.take_along_axis(log_p, idx, axis=-1)[..., 0]

    def grad(dy: Any) -> tuple[Any, Any]:
        if 1 not in needs:
            return None, None
        d = p.copy()
        np.put_along_axis(d, idx, np.take_along_axis(d, idx, axis=-1) - 1, axis=-1)
        return None, np.asarray(dy, logits.dtype)[..., None] * d
    return loss, grad


_sparse_xent_op = _fused(_sparse_xent, _like(1, True))


def sparse_softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                             logits: Any = None, name: str | None = None
                                             ) -> Any:
    """Softmax cross-entropy with integer class labels, as TF1's
    ``tf.nn.sparse_softmax_cross_entropy_with_logits``: ``-log_softmax(logits)[label]`` per
    example.

    Args:
        _sentinel: Must not be used: call with named arguments, as TF.
        labels: int32/int64 ``[batch]`` class indices in ``[0, classes)``.
        logits: float ``[batch, classes]``.
        name: The op name (default ``"SparseSoftmaxCrossEntropyWithLogits"``).

    Returns:
        ``[batch]`` losses, the dtype of ``logits``; gradient ``dy * (softmax - one_hot)``.

    Raises:
        ValueError: called positionally, or without ``labels`` or ``logits``.
        InvalidArgumentError (at run): a label outside ``[0, classes)`` (TF's CPU message,
            naming the value and every label), non-integer labels, or mismatched shapes.
    """
    _xent_args("sparse_softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    return _sparse_xent_op(name or "SparseSoftmaxCrossEntropyWithLogits", [labels, logits])


def _sigmoid_xent(needs: Any, labels: Any, logits: Any) -> Any:
    x = np.asarray(logits)
    z = np.asarray(labels, x.dtype)
    if z.shape != x.shape:
        raise errors.InvalidArgumentError(
            None, None, f"logits and labels must have the same shape ({_dims(x.shape)} vs "
            f"{_dims(z.shape)})")
    # TF's stable form: max(x, 0) - x * z + log(1 + exp(-|x|)).
    loss = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))

    def grad(dy: Any) -> tuple[Any, Any]:
        sig = 1 / (1 + np.exp(-x))
        return (-dy * x if 0 in needs else None, dy * (sig - z) if 1 in needs else None)
    return loss, grad


_sigmoid_xent_op = _fused(_sigmoid_xent, _like(1))


def sigmoid_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                      logits: Any = None, name: str | None = None) -> Any:
    """Logistic loss per element, as TF1's ``tf.nn.sigmoid_cross_entropy_with_logits``:
    ``max(x, 0) - x * z + log(1 + exp(-|x|))`` for logits ``x`` and labels ``z`` (the
    same shape, any), with gradient ``dy * (sigmoid(x) - z)`` for the logits and
    ``-dy * x`` for the labels.

    Raises:
        ValueError: called positionally, or without ``labels`` or ``logits``.
        InvalidArgumentError (at run): shapes differ.
    """
    _xent_args("sigmoid_cross_entropy_with_logits", _sentinel, labels, logits)
    return _sigmoid_xent_op(name or "logistic_loss", [labels, logits])


def _relu(needs: Any, x: Any) -> Any:
    x = np.asarray(x)
    y = np.maximum(x, x.dtype.type(0)) if x.dtype.kind == "f" else np.maximum(x, 0)
    return y, lambda dy: (dy * (x > 0),)


_relu_op = _fused(_relu, _like(0))


def relu(features: Any, name: str | None = None) -> Any:
    """``max(features, 0)``, as ``tf.nn.relu``; gradient ``dy * (features > 0)`` (TF's
    ReluGrad: 0 at 0). Any shape; keeps the dtype."""
    return _relu_op(name or "Relu", [features])


def _sigmoid(needs: Any, x: Any) -> Any:
    x = np.asarray(x)
    y = 1 / (1 + np.exp(-x))
    return y, lambda dy: (dy * y * (1 - y),)


_sigmoid_op = _fused(_sigmoid, _like(0))


def sigmoid(x: Any, name: str | None = None) -> Any:
    """``1 / (1 + exp(-x))``, as ``tf.sigmoid`` / ``tf.nn.sigmoid``; gradient
    ``dy * y * (1 - y)``. Any shape; keeps a float dtype."""
    return _sigmoid_op(name or "Sigmoid", [x])


def _tanh(needs: Any, x: Any) -> Any:
    y = np.tanh(x)
    return y, lambda dy: (dy * (1 - y * y),)


_tanh_op = _fused(_tanh, _like(0))


def tanh(x: Any, name: str | None = None) -> Any:
    """``tanh(x)``, as ``tf.tanh`` / ``tf.nn.tanh``; gradient ``dy * (1 - y**2)``."""
    return _tanh_op(name or "Tanh", [x])


def _softmax(needs: Any, logits: Any, axis: int) -> Any:
    _, y = _log_softmax(np.asarray(logits), axis)
    return y, lambda dy: ((dy - np.sum(dy * y, axis=axis, keepdims=True)) * y,)


_softmax_op = _fused(_softmax, _like(0))


def softmax(logits: Any, axis: int | None = None, name: str | None = None,
            dim: int | None = None) -> Any:
    """``exp(logits) / sum(exp(logits), axis)``, as ``tf.nn.softmax`` (``axis``/``dim``,
    default the last), shifted by the maximum."""
    return _softmax_op(name or "Softmax", [logits], axis=_axis(axis, dim))


def _log_softmax_fwd(needs: Any, logits: Any, axis: int) -> Any:
    y, p = _log_softmax(np.asarray(logits), axis)
    return y, lambda dy: (dy - p * np.sum(dy, axis=axis, keepdims=True),)


_log_softmax_op = _fused(_log_softmax_fwd, _like(0))


def log_softmax(logits: Any, axis: int | None = None, name: str | None = None,
                dim: int | None = None) -> Any:
    """``logits - log(sum(exp(logits), axis))``, as ``tf.nn.log_softmax``."""
    return _log_softmax_op(name or "LogSoftmax", [logits], axis=_axis(axis, dim))


def _bias_add(needs: Any, value: Any, bias: Any, channel: int) -> Any:
    value = np.asarray(value)
    bias = np.asarray(bias)
    if bias.ndim != 1 or value.ndim < 2 or value.shape[channel] != bias.shape[0]:
        raise errors.InvalidArgumentError(
            None, None, f"Must provide as many biases as the channel dimension of the input "
            f"tensor: {_dims(bias.shape)} vs. {_dims(value.shape)}")
    shape = [1] * value.ndim
    shape[channel] = bias.shape[0]
    axes = tuple(i for i in range(value.ndim) if i != channel % value.ndim)
    if (channel == -1 and value.ndim >= 3 and value.size and value.dtype == bias.dtype
            and value.dtype.char in "fd" and value.flags.c_contiguous):
        # the same additions with numpy's inner loop over a whole row of W * C values, not
        # C (about 1.7x faster for a conv layer's [N, H, W, 16])
        width = value.shape[-2] * bias.shape[0]
        out = (value.reshape(-1, width) + np.tile(bias, value.shape[-2])).reshape(value.shape)
    else:
        out = value + bias.reshape(shape)
    return out, \
        lambda dy: (dy if 0 in needs else None, _bias_grad(dy, axes) if 1 in needs else None)


def _bias_grad(dy: Any, axes: tuple[int, ...]) -> Any:
    """``dy`` summed over every axis but the channel's. A C-contiguous channels-last float32
    or float64 gradient of two or more channels is summed by ``einsum`` over its ``[-1, C]``
    view: the same sum as ``np.sum`` there (each channel's rows added in order), about 4x
    faster for a conv layer's ``[N, H, W, C]`` (numpy's axis-0 reduction loops over rows of
    C)."""
    if (isinstance(dy, np.ndarray) and dy.ndim >= 2 and axes == tuple(range(dy.ndim - 1))
            and dy.shape[-1] >= 2 and dy.dtype.char in "fd" and dy.flags.c_contiguous):
        return np.einsum("ij->j", dy.reshape(-1, dy.shape[-1]))
    return dy.sum(axis=axes)


_bias_add_op = _fused(_bias_add, _like(0))


def bias_add(value: Any, bias: Any, data_format: str | None = None,
             name: str | None = None) -> Any:
    """``value + bias`` along the channel dimension, as ``tf.nn.bias_add``: the last one
    (``data_format`` None or ``"NHWC"``), or dimension 1 (``"NCHW"``).

    Raises:
        ValueError: an unknown ``data_format``.
        InvalidArgumentError (at run): ``bias`` not 1-D of the channel size, or ``value``
            of rank < 2 (TF's message).
    """
    if data_format not in (None, "NHWC", "NCHW", "N..C", "NC.."):
        raise ValueError(f"data_format must be one of 'NHWC', 'NCHW' or None; got "
                         f"{data_format!r}")
    channel = 1 if data_format in ("NCHW", "NC..") else -1
    return _bias_add_op(name or "BiasAdd", [value, bias], channel=channel)


def _xw_plus_b(needs: Any, x: Any, w: Any, b: Any) -> Any:
    x, w = np.asarray(x), np.asarray(w)

    def grad(dy: Any) -> tuple[Any, Any, Any]:
        return (dy @ w.T if 0 in needs else None, x.T @ dy if 1 in needs else None,
                dy.sum(axis=0) if 2 in needs else None)
    return x @ w + b, grad


_xw_plus_b_op = _fused(_xw_plus_b)


def xw_plus_b(x: Any, weights: Any, biases: Any, name: str | None = None) -> Any:
    """``x @ weights + biases``, as ``tf.nn.xw_plus_b``: x ``[batch, in]``, weights ``[in,
    out]``, biases ``[out]`` give ``[batch, out]``. One op forward and backward (the
    gradient of a fed ``x`` is not computed)."""
    return _xw_plus_b_op(name or "xw_plus_b", [x, weights, biases])


def _l2_loss(needs: Any, t: Any) -> Any:
    t = np.asarray(t)
    return np.sum(t * t) / t.dtype.type(2) if t.dtype.kind == "f" else np.sum(t * t) / 2, \
        lambda dy: (dy * t,)


_l2_loss_op = _fused(_l2_loss)


def l2_loss(t: Any, name: str | None = None) -> Any:
    """``sum(t ** 2) / 2``, a scalar of ``t``'s dtype, as ``tf.nn.l2_loss``."""
    return _l2_loss_op(name or "L2Loss", [t])


def _matmul(needs: Any, a: Any, b: Any, transpose_a: bool, transpose_b: bool) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 2 or b.ndim < 2:
        raise errors.InvalidArgumentError(
            None, None, f"In[0] and In[1] must be at least rank 2 (matmul); got shapes "
            f"{_dims(a.shape)} and {_dims(b.shape)}")
    at = np.swapaxes(a, -1, -2) if transpose_a else a
    bt = np.swapaxes(b, -1, -2) if transpose_b else b

    def grad(dy: Any) -> tuple[Any, Any]:
        da = db = None
        if 0 in needs:
            da = dy @ np.swapaxes(bt, -1, -2)          # d(at)
            da = np.swapaxes(da, -1, -2) if transpose_a else da
        if 1 in needs:
            db = np.swapaxes(at, -1, -2) @ dy          # d(bt)
            db = np.swapaxes(db, -1, -2) if transpose_b else db
        return da, db
    return at @ bt, grad


_matmul_op = _fused(_matmul)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, name: str | None = None) -> Any:
    """The matrix product ``a @ b`` (of the last two dimensions), as ``tf.matmul``; the
    ``transpose_*`` (``adjoint_*``: the same for real values) flags transpose an operand
    first; ``*_is_sparse`` are accepted and ignored.

    Raises:
        InvalidArgumentError (at run): an operand of rank < 2.
    """
    return _matmul_op(name or "MatMul", [a, b], transpose_a=bool(transpose_a or adjoint_a),
                      transpose_b=bool(transpose_b or adjoint_b))


def _reduce_axis(axis: Any, reduction_indices: Any) -> Any:
    if axis is not None and reduction_indices is not None:
        raise ValueError("Can not specify both 'axis' and 'reduction_indices'.")
    a = axis if axis is not None else reduction_indices
    if a is None:
        return None
    return tuple(int(i) for i in a) if isinstance(a, (list, tuple, np.ndarray)) else int(a)


def _keepdims(keepdims: Any, keep_dims: Any) -> bool:
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Can not specify both 'keepdims' and 'keep_dims'.")
    return bool(keepdims if keepdims is not None else keep_dims)


def _expand_back(dy: Any, shape: tuple[int, ...], axis: Any, keepdims: bool) -> Any:
    dy = np.asarray(dy)
    if axis is not None and not keepdims:
        axes = (axis,) if isinstance(axis, int) else axis
        dy = np.expand_dims(dy, tuple(a % len(shape) for a in axes))
    return np.broadcast_to(dy, shape)


def _reduce_sum(needs: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    x = np.asarray(x)
    y = np.sum(x, axis=axis, keepdims=keepdims)
    return y, lambda dy: (_expand_back(dy, x.shape, axis, keepdims),)


def _reduce_mean(needs: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    x = np.asarray(x)
    total = np.sum(x, axis=axis, keepdims=keepdims)
    count = x.size // max(np.size(total), 1) if x.size else 1
    if x.dtype.kind == "f":
        scale = x.dtype.type(1.0 / count)
        y = total * scale
    else:
        scale = 1.0 / count
        y = total / count
    if axis is None and not keepdims:
        return y, lambda dy: (np.full(x.shape, np.asarray(dy) * scale),)
    return y, lambda dy: (_expand_back(np.asarray(dy) * scale, x.shape, axis, keepdims),)


_reduce_sum_op = _fused(_reduce_sum)
_reduce_mean_op = _fused(_reduce_mean)


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Any:
    """Sum over ``axis`` (an int, a list, or None: every axis), as ``tf.reduce_sum``;
    ``reduction_indices`` and ``keep_dims`` are TF1's older spellings.

    Raises:
        ValueError: both spellings of one argument given.
    """
    return _reduce_sum_op(name or "Sum", [input_tensor],
                          axis=_reduce_axis(axis, reduction_indices),
                          keepdims=_keepdims(keepdims, keep_dims))


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
                name: str | None = None, reduction_indices: Any = None,
                keep_dims: bool | None = None) -> Any:
    """Mean over ``axis`` (an int, a list, or None: every axis), as ``tf.reduce_mean``;
    a float32 input gives a float32 mean. Arguments and errors as :func:`reduce_sum`.

    The mean of a whole :func:`softmax_cross_entropy_with_logits` tensor (the usual loss)
    is one fused op on that op's labels and logits: the same value and gradient, with the
    per-example losses never materialized (they are computed apart when fetched)."""
    axis = _reduce_axis(axis, reduction_indices)
    keep = _keepdims(keepdims, keep_dims)
    xent = getattr(getattr(input_tensor, "op", None), "vjp", None)
    if axis is None and not keep and isinstance(xent, functools.partial) and \
            xent.func is _softmax_xent and xent.keywords.get("axis") == -1:
        return _mean_softmax_xent_op(name or "Mean", list(input_tensor.op.inputs),
                                     labels_grad=xent.keywords["labels_grad"])
    return _reduce_mean_op(name or "Mean", [input_tensor], axis=axis, keepdims=keep)


def _mean_softmax_xent(needs: Any, labels: Any, logits: Any, labels_grad: bool) -> Any:
    """``reduce_mean(softmax_cross_entropy_with_logits(labels, logits))`` over the last
    axis, in one op: what a hand-written numpy loss computes."""
    logits = np.asarray(logits)
    labels = np.asarray(labels, logits.dtype)
    if labels.shape != logits.shape:
        raise errors.InvalidArgumentError(
            None, None, f"logits and labels must be broadcastable: logits_size="
            f"{_dims(logits.shape)} labels_size={_dims(labels.shape)}")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=-1, keepdims=True)
    log_p = shifted - np.log(s)
    n = labels.size // labels.shape[-1] if labels.ndim and labels.shape[-1] else 1
    # A Python float scale keeps float32 values float32 (numpy's weak scalars).
    scale = 1.0 / max(n, 1)
    loss = np.sum(labels * log_p) * -scale

    def grad(dy: Any) -> tuple[Any, Any]:
        k = dy * scale
        d_labels = (-k) * log_p if labels_grad and 0 in needs else None
        return d_labels, ((e / s - labels) * k if 1 in needs else None)
    return loss, grad


_mean_softmax_xent_op = _fused(_mean_softmax_xent)
