"""TF1's ``tensorflow/python/ops/nn_impl.py`` (r1.15) names: ``moments``,
``batch_normalization``, ``fused_batch_norm``, ``l2_normalize``, ``zero_fraction``,
``weighted_cross_entropy_with_logits``, and the sampled losses ``nce_loss`` and
``sampled_softmax_loss``.

Each is a graph op (or TF's composition of psrt's graph ops) with static dtype and shape and
TF's gradient; float32 in gives float32 out. The sampled losses read the weights and biases
through ``embedding_lookup`` of the true and sampled classes only, so their gradients are
row-sparse: a training step pulls and pushes just those rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor, unbroadcast
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import candidate_sampling_ops as _sampling
from psrt.ops import embedding_ops as _embedding
from psrt.ops import math_ops as _math
from psrt.ops import nn_ops as _nn
from psrt.ops.nn_ops_extra import sigmoid_stable

__all__ = ["batch_normalization", "fused_batch_norm", "l2_normalize", "moments", "nce_loss",
           "sampled_softmax_loss", "weighted_cross_entropy_with_logits", "zero_fraction"]


def _input(x: Any) -> Any:
    return x if _lib.is_graph_value(x) else constant(x)


def _float(op: str, param: str, x: Any) -> Any:
    dt = _lib.static_dtype(x)
    if dt is not None and np.dtype(dt).kind != "f":
        raise TypeError(f"Value passed to parameter '{param}' of op '{op}' has DataType "
                        f"{_dtypes.as_dtype(dt).name} not in list of allowed values: "
                        f"float16, float32, float64")
    return dt


def _shape_str(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# ---- moments, batch normalization ------------------------------------------------------------


def moments(x: Any, axes: Any, shift: Any = None, name: str | None = None,
            keep_dims: bool | None = None, keepdims: bool | None = None) -> tuple[Any, Any]:
    """Mean and variance of ``x`` over ``axes``, as ``tf.nn.moments`` (nn_impl.py): TF's
    composition ``mean = reduce_mean(x, axes, keepdims=True)``, ``variance =
    reduce_mean(squared_difference(x, stop_gradient(mean)), axes, keepdims=True)``, both
    squeezed unless ``keep_dims``. The variance is the biased one (divided by the count).
    A float16 ``x`` is computed in float32 and cast back, as TF's.

    Args:
        x: A float Tensor.
        axes: The axes (a list of ints) to reduce, e.g. ``[0]`` for a batch of vectors or
            ``[0, 1, 2]`` for NHWC images (per-channel moments).
        shift: Unused, as in TF.
        name: The name scope (default ``"moments"``).
        keep_dims, keepdims: Keep the reduced axes as size 1 (TF1's two spellings).

    Returns:
        ``(mean, variance)``, of ``x``'s dtype.

    Raises:
        ValueError: both ``keep_dims`` and ``keepdims``; an axis out of range.
        TypeError: a non-float ``x``.
    """
    keep = _nn._keepdims(keepdims, keep_dims)
    x = _input(x)
    dt = _float("Mean", "x", x)
    axes = [int(a) for a in (axes if isinstance(axes, (list, tuple, np.ndarray)) else [axes])]
    name = name or "moments"
    y = _math.cast(x, np.float32) if dt == np.float16 else x
    mean = _math.reduce_mean(y, axes, keepdims=True, name=f"{name}/mean")
    variance = _math.reduce_mean(
        _math.squared_difference(y, _array.stop_gradient(mean)), axes, keepdims=True,
        name=f"{name}/variance")
    if not keep:
        mean = _array.squeeze(mean, axes)
        variance = _array.squeeze(variance, axes)
    if dt == np.float16:
        return _math.cast(mean, np.float16), _math.cast(variance, np.float16)
    return mean, variance


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any,
                        variance_epsilon: float, name: str | None = None) -> Any:
    """``scale * (x - mean) / sqrt(variance + variance_epsilon) + offset``, as
    ``tf.nn.batch_normalization``, computed as TF's: ``inv = rsqrt(variance + eps)``
    (times ``scale``), ``x * inv + (offset - mean * inv)``. Every argument broadcasts
    against ``x`` (e.g. per-channel ``[C]`` statistics of NHWC images); gradients flow to
    all of them.

    Args:
        x: A float Tensor of any rank.
        mean, variance: Float Tensors broadcastable to ``x``, e.g. from :func:`moments`.
        offset: The beta of the paper, or None.
        scale: The gamma, or None.
        variance_epsilon: A small float added to the variance.
        name: The name scope (default ``"batchnorm"``).

    Returns:
        A Tensor of ``x``'s shape and dtype.

    Raises:
        TypeError: inputs of different dtypes (TF's message).
    """
    name = name or "batchnorm"
    inv = _math.rsqrt(_math.add(variance, variance_epsilon), name=f"{name}/Rsqrt")
    if scale is not None:
        inv = _math.multiply(inv, scale, name=f"{name}/mul")
    shifted = _math.negative(_math.multiply(mean, inv)) if offset is None else \
        _math.subtract(offset, _math.multiply(mean, inv))
    return _math.add(_math.multiply(x, inv), shifted, name=f"{name}/add_1")


def _channels_last(x: np.ndarray, data_format: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if data_format == "NCHW" else x


def _fused_bn(needs: Any, x: Any, scale: Any, offset: Any, mean: Any, variance: Any,
              epsilon: float, data_format: str, is_training: bool) -> Any:
    x = np.asarray(x)
    xc = _channels_last(x, data_format)
    depth = xc.shape[-1]
    u = np.float64 if x.dtype == np.float64 else np.float32
    scale, offset = np.asarray(scale, u), np.asarray(offset, u)
    for what, v in (("scale", scale), ("offset", offset)) + (
            () if is_training else (("estimated_mean", mean), ("estimated_variance",
                                                                  variance))):
        if np.shape(v) != (depth,):
            raise _errors.InvalidArgumentError(
                None, None, f"{what} must have the same number of elements as the channels "
                f"of x, got {np.size(v)} and {depth}")
    flat = xc.reshape(-1, depth).astype(u, copy=False)
    n = flat.shape[0]
    if is_training:
        m = flat.mean(axis=0)
        var = np.square(flat - m).mean(axis=0)
    else:
        m, var = np.asarray(mean, u), np.asarray(variance, u)
    inv = 1 / np.sqrt(var + u(epsilon))
    xhat = (flat - m) * inv
    y = (xhat * scale + offset).astype(x.dtype).reshape(xc.shape)

    def grad(dy: Any) -> Any:
        g = _channels_last(np.asarray(dy), data_format).reshape(-1, depth).astype(u)
        d_offset = g.sum(axis=0)
        d_scale = (g * xhat).sum(axis=0)
        if is_training:   # TF's FusedBatchNormGrad with is_training: the batch statistics
            dx = scale * inv / n * (n * g - d_offset - xhat * d_scale)
        else:
            dx = g * (scale * inv)
        dx = dx.astype(x.dtype).reshape(xc.shape)
        return (np.moveaxis(dx, -1, 1) if data_format == "NCHW" else dx, d_scale, d_offset,
                None, None)
    return (np.moveaxis(y, -1, 1) if data_format == "NCHW" else y), grad


def _fused_bn_stats(x: Any, mean: Any, variance: Any, data_format: str,
                    is_training: bool) -> Any:
    x = np.asarray(x)
    u = np.float64 if x.dtype == np.float64 else np.float32
    if not is_training:   # TF's inference kernel copies the estimates through
        return np.asarray(mean, u), np.asarray(variance, u)
    xc = _channels_last(x, data_format)
    flat = xc.reshape(-1, xc.shape[-1]).astype(u, copy=False)
    n = flat.shape[0]
    m = flat.mean(axis=0)
    var = np.square(flat - m).mean(axis=0)
    # The variance output is Bessel-corrected (n / (n - 1)), as TF's rest_size_adjust.
    return m, var * u(n / max(n - 1, 1))


def fused_batch_norm(x: Any, scale: Any, offset: Any, mean: Any = None,
                     variance: Any = None, epsilon: float = 0.001,
                     data_format: str = "NHWC", is_training: bool = True,
                     name: str | None = None) -> tuple[Any, Any, Any]:
    """Batch normalization of a 4-D ``x`` over its batch and spatial axes, as
    ``tf.nn.fused_batch_norm`` (nn_impl.py; tensorflow/core/kernels/fused_batch_norm_op.cc).

    With ``is_training`` the batch's own per-channel mean and (biased) variance normalize
    ``x``: ``y = scale * (x - m) / sqrt(v + epsilon) + offset``; the returned variance is
    the Bessel-corrected ``v * n / (n - 1)`` (``n`` = batch * height * width), as TF's
    kernel, for moving averages; ``mean`` and ``variance`` must be None. Without it the given
    ``mean`` and ``variance`` normalize and are returned as they are. ``epsilon`` is raised to
    at least 1.001e-5, as TF's (cuDNN's minimum). The gradient flows to ``x``, ``scale`` and
    ``offset`` (TF's FusedBatchNormGrad); the batch mean and variance outputs carry none.

    Args:
        x: A 4-D float Tensor, ``[N, H, W, C]`` (``"NHWC"``) or ``[N, C, H, W]`` (``"NCHW"``).
        scale, offset: 1-D ``[C]`` float Tensors.
        mean, variance: 1-D ``[C]`` estimates when ``is_training`` is False, else None.
        epsilon: The small float added to the variance.
        data_format: ``"NHWC"`` or ``"NCHW"``.
        is_training: Use the batch's statistics (True) or the given estimates.
        name: The op name (default ``"FusedBatchNorm"``).

    Returns:
        ``(y, batch_mean, batch_variance)``: ``y`` of ``x``'s shape and dtype; the
        statistics ``[C]`` float32 (float64 for a float64 ``x``).

    Raises:
        ValueError: an unknown ``data_format``, a known rank of ``x`` other than 4,
            ``is_training`` with ``mean`` or ``variance`` (TF's message), or
            ``is_training=False`` without them.
        TypeError: a non-float ``x``.
        InvalidArgumentError (at run): ``scale``/``offset``/estimates not of ``[C]``.
    """
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW'; got {data_format!r}")
    x = _input(x)
    dt = _float("FusedBatchNorm", "x", x)
    shape = _lib.static_shape(x)
    if shape.ndims not in (None, 4):
        raise ValueError(f"x must be 4-dimensional [N, H, W, C] or [N, C, H, W]; got shape "
                         f"{shape}")
    if is_training and (mean is not None or variance is not None):
        raise ValueError("Both 'mean' and 'variance' must be None if is_training is True.")
    if not is_training and (mean is None or variance is None):
        raise ValueError("fused_batch_norm with is_training=False needs the mean and "
                         "variance estimates; got None")
    mean = np.zeros(0, np.float32) if mean is None else mean
    variance = np.zeros(0, np.float32) if variance is None else variance
    epsilon = max(float(epsilon), 1.001e-5)
    u = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    channels = None if shape.ndims is None else shape.as_list()[1 if data_format == "NCHW"
                                                              else 3]
    name = name or "FusedBatchNorm"
    ins = [x, scale, offset, mean, variance]
    y = _lib.apply_op("FusedBatchNorm", name, ins, _fused_bn, dt, shape, epsilon=epsilon,
                      data_format=data_format, is_training=bool(is_training))

    def stats(xv: Any, m: Any, v: Any) -> Any:
        return _fused_bn_stats(xv, m, v, data_format, bool(is_training))
    bm, bv = _lib.apply_op_outputs("FusedBatchNorm", f"{name}_stats", [x, mean, variance],
                                   stats, [u, u], [TensorShape([channels])] * 2)
    return y, bm, bv


def l2_normalize(x: Any, axis: Any = None, epsilon: float = 1e-12, name: str | None = None,
                 dim: Any = None) -> Any:
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``, as ``tf.nn.l2_normalize`` (TF's
    composition: ``x * rsqrt(maximum(reduce_sum(square(x), axis, keepdims=True),
    epsilon))``). ``axis`` (TF1's ``dim``) is an int, a list, or None (every axis).

    Raises:
        ValueError: both ``axis`` and ``dim`` (TF's message).
        TypeError: a non-float ``x``.
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'.")
    axis = axis if axis is not None else dim
    x = _input(x)
    _float("Rsqrt", "x", x)
    name = name or "l2_normalize"
    square_sum = _math.reduce_sum(_math.square(x), axis, keepdims=True)
    inv_norm = _math.rsqrt(_math.maximum(square_sum, epsilon))
    return _math.multiply(x, inv_norm, name=name)


def _zero_fraction(needs: Any, v: Any) -> Any:
    v = np.asarray(v)
    frac = np.float32(np.count_nonzero(v == 0) / v.size) if v.size else np.float32(np.nan)
    return frac, lambda dy: (None,)


def zero_fraction(value: Any, name: str | None = None) -> Tensor:
    """The fraction of zeros in ``value``, a float32 scalar, as ``tf.nn.zero_fraction``
    (the sparsity of ReLU outputs in summaries); NaN for an empty ``value`` (TF's 0/0). No
    gradient."""
    v = _input(value)
    return _lib.apply_op("zero_fraction", name or "zero_fraction", [v], _zero_fraction,
                         np.float32, TensorShape([]))


# ---- weighted cross-entropy ------------------------------------------------------------------


def _weighted_xent(needs: Any, z: Any, x: Any, q: Any) -> Any:
    x = np.asarray(x)
    z, q = np.asarray(z, x.dtype), np.asarray(q, x.dtype)
    one = x.dtype.type(1)
    softplus_neg = np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)   # log(1 + exp(-x))
    log_weight = one + (q - one) * z
    loss = (one - z) * x + log_weight * softplus_neg

    def grad(dy: Any) -> Any:
        dy = np.asarray(dy, x.dtype)
        sig_neg = sigmoid_stable(-x)
        dz = dy * (-x + (q - one) * softplus_neg) if 0 in needs else None
        dx = dy * ((one - z) - log_weight * sig_neg) if 1 in needs else None
        dq = dy * z * softplus_neg if 2 in needs else None
        return (None if dz is None else unbroadcast(dz, z.shape),
                None if dx is None else unbroadcast(dx, x.shape),
                None if dq is None else unbroadcast(dq, q.shape))
    return loss, grad


def weighted_cross_entropy_with_logits(targets: Any = None, logits: Any = None,
                                       pos_weight: Any = None, name: str | None = None,
                                       labels: Any = None) -> Tensor:
    """Sigmoid cross-entropy with positives weighted by ``pos_weight``, as TF1's
    ``tf.nn.weighted_cross_entropy_with_logits(targets, logits, pos_weight)``:
    ``targets * -log(sigmoid(logits)) * pos_weight + (1 - targets) * -log(1 -
    sigmoid(logits))``, computed as TF's stable ``(1 - z) * x + (1 + (q - 1) * z) *
    (log1p(exp(-|x|)) + max(-x, 0))``. Gradients flow to all three inputs.

    Args:
        targets: Float, the shape of ``logits`` (``labels``: TF2's name, accepted).
        logits: Float Tensor of any shape.
        pos_weight: The weight of positive examples, broadcast against ``logits``.
        name: The op name (default ``"logistic_loss"``).

    Returns:
        Elementwise losses of ``logits``' shape and dtype.

    Raises:
        ValueError: ``targets`` and ``logits`` of different known shapes (TF's message),
            or a missing argument.
    """
    if labels is not None:
        if targets is not None:
            raise ValueError("Cannot specify both 'targets' and 'labels'.")
        targets = labels
    if targets is None or logits is None or pos_weight is None:
        raise ValueError("weighted_cross_entropy_with_logits needs targets, logits and "
                         "pos_weight")
    x = _input(logits)
    dt = _float("logistic_loss", "logits", x)
    z = targets if _lib.is_graph_value(targets) else np.asarray(targets, dt)
    q = pos_weight if _lib.is_graph_value(pos_weight) else np.asarray(pos_weight, dt)
    xs, zs = _lib.static_shape(x), _lib.static_shape(z)
    if not xs.is_compatible_with(zs):
        raise ValueError(f"logits and targets must have the same shape ({xs} vs {zs})")
    return _lib.apply_op("logistic_loss", name or "logistic_loss", [z, x, q], _weighted_xent,
                         dt, xs)


# ---- sampled losses --------------------------------------------------------------------------


def _all_ids(needs: Any, labels: Any, sampled: Any) -> Any:
    ids = np.concatenate([np.asarray(labels).reshape(-1).astype(np.int64),
                          np.asarray(sampled).reshape(-1).astype(np.int64)])
    return ids, lambda dy: (None, None)


def _sampled_logits(needs: Any, inputs: Any, all_w: Any, all_b: Any, true_expected: Any,
                    sampled_expected: Any, labels: Any, sampled: Any, num_true: int,
                    subtract_log_q: bool, remove_accidental_hits: bool) -> Any:
    """TF's ``_compute_sampled_logits`` (nn_impl.py) in one op: ``[batch, num_true +
    num_sampled]`` logits of the true classes, then the sampled ones."""
    h = np.asarray(inputs)
    dt = h.dtype
    w_dtype = np.asarray(all_w).dtype
    w, b = np.asarray(all_w, dt), np.asarray(all_b, dt)
    labels = np.asarray(labels).reshape(-1, num_true)
    batch, dim = h.shape[0], h.shape[-1]
    if labels.shape[0] != batch:
        raise _errors.InvalidArgumentError(
            None, None, f"labels must be [batch_size, num_true] = [{batch},{num_true}]; got "
            f"{labels.size} labels for {batch} inputs")
    n = batch * num_true
    tw = w[:n].reshape(batch, num_true, dim)
    sw = w[n:]
    true_logits = np.einsum("bd,btd->bt", h, tw) + b[:n].reshape(batch, num_true)
    sampled_logits = h @ sw.T + b[n:]
    if remove_accidental_hits:
        rows, where = _sampling.accidental_hits(labels, sampled)
        hit = np.zeros(sampled_logits.shape, bool)
        hit[rows, where] = True                      # TF's sparse_to_dense: set, not summed
        sampled_logits = sampled_logits + np.where(hit, dt.type(-_sampling._FLT_MAX), 0)
    if subtract_log_q:
        true_logits = true_logits - np.log(np.asarray(true_expected, dt))
        sampled_logits = sampled_logits - np.log(np.asarray(sampled_expected, dt))
    out = np.concatenate([true_logits, sampled_logits], axis=1).astype(dt, copy=False)

    def grad(dy: Any) -> Any:
        dy = np.asarray(dy, dt)
        dt_, ds = dy[:, :num_true], dy[:, num_true:]
        d_in = np.einsum("bt,btd->bd", dt_, tw) + ds @ sw if 0 in needs else None
        d_w = d_b = None
        if 1 in needs:
            d_w = np.concatenate([(dt_[:, :, None] * h[:, None, :]).reshape(n, dim),
                                  ds.T @ h]).astype(w_dtype, copy=False)
        if 2 in needs:
            d_b = np.concatenate([dt_.reshape(n), ds.sum(axis=0)])
        return d_in, d_w, d_b, None, None, None, None
    return out, grad


def _nce_sum(needs: Any, z: Any, x: Any) -> Any:
    """``sum(sigmoid_cross_entropy_with_logits(z, x), 1)``: TF's stable form, with a
    gradient that stays finite at the ``-FLT_MAX`` logits of removed accidental hits."""
    x = np.asarray(x)
    z = np.asarray(z, x.dtype)
    loss = np.sum(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x))), axis=1)

    def grad(dy: Any) -> Any:
        return None, np.asarray(dy, x.dtype)[:, None] * (sigmoid_stable(x) - z)
    return loss, grad


def _sampled_labels(needs: Any, logits: Any, num_true: int) -> Any:
    logits = np.asarray(logits)
    out = np.zeros_like(logits)
    out[:, :num_true] = logits.dtype.type(1) / logits.dtype.type(num_true)
    return out, lambda dy: (None,)


def _compute_sampled_logits(weights: Any, biases: Any, labels: Any, inputs: Any,
                            num_sampled: int, num_classes: int, num_true: int,
                            sampled_values: Any, subtract_log_q: bool,
                            remove_accidental_hits: bool, partition_strategy: str,
                            name: str, seed: Any) -> tuple[Tensor, Tensor]:
    if isinstance(weights, (list, tuple)):
        weights = list(weights)
    h = _input(inputs)
    dt = _float(name, "inputs", h)
    hs = _lib.static_shape(h)
    if hs.ndims not in (None, 2):
        raise ValueError(f"inputs must be [batch_size, dim]; got shape {hs}")
    lab = labels if _lib.is_graph_value(labels) else np.asarray(labels)
    ldt = _lib.static_dtype(lab)
    if ldt is not None and np.dtype(ldt).kind not in "iu":
        raise TypeError(f"labels must be int64 (or int32) class ids; got {np.dtype(ldt).name}")
    if int(num_true) != num_true or num_true < 1:
        raise ValueError(f"num_true must be an int >= 1; got {num_true!r}")
    num_true = int(num_true)
    if sampled_values is None:
        lab2 = lab if _lib.static_shape(lab).ndims == 2 else \
            _array.reshape(lab, [-1, num_true])
        sampled_values = _sampling.log_uniform_candidate_sampler(
            lab2, num_true, num_sampled, True, num_classes, seed=seed)
    if len(sampled_values) != 3:
        raise ValueError("sampled_values must be a tuple (sampled_candidates, "
                         "true_expected_count, sampled_expected_count)")
    sampled, true_expected, sampled_expected = sampled_values
    ids = _lib.apply_op("ConcatV2", f"{name}/all_ids", [lab, sampled], _all_ids, np.int64,
                        TensorShape([None]))
    all_w = _embedding.embedding_lookup(weights, ids, partition_strategy=partition_strategy,
                                        name=f"{name}/embedding_lookup")
    all_b = _embedding.embedding_lookup(biases, ids, partition_strategy=partition_strategy,
                                        name=f"{name}/embedding_lookup_1")
    batch = hs.as_list()[0] if hs.ndims else None
    s = _lib.static_shape(sampled)
    count = s.as_list()[0] if s.ndims == 1 else None
    width = None if count is None else num_true + count
    logits = _lib.apply_op("SampledLogits", f"{name}/logits", [
        h, all_w, all_b, true_expected, sampled_expected, lab, sampled], _sampled_logits, dt,
        TensorShape([batch, width]), num_true=num_true, subtract_log_q=subtract_log_q,
        remove_accidental_hits=bool(remove_accidental_hits))
    out_labels = _lib.apply_op("SampledLabels", f"{name}/labels", [logits], _sampled_labels,
                               dt, logits.shape, num_true=num_true)
    return logits, out_labels


_SAMPLED_ARGS = """
    Args:
        weights: The class embeddings ``[num_classes, dim]``: a Variable, a
            PartitionedVariable or a list of Variables (partitioned along dimension 0).
        biases: The class biases ``[num_classes]`` (a Variable, or parts as ``weights``).
        labels: int64 (or int32) ``[batch_size, num_true]`` target classes.
        inputs: float ``[batch_size, dim]``, the forward activations.
        num_sampled: The number of classes sampled per batch.
        num_classes: The number of possible classes.
        num_true: The number of target classes per example.
        sampled_values: A ``(sampled_candidates, true_expected_count,
            sampled_expected_count)`` tuple of a ``*_candidate_sampler``; default
            ``log_uniform_candidate_sampler(labels, num_true, num_sampled, unique=True,
            range_max=num_classes)``.
        remove_accidental_hits: Subtract ``FLT_MAX`` from the logit of a sampled class that
            equals a target class of its example.
        partition_strategy: ``"mod"`` or ``"div"``, as ``embedding_lookup``.
        name: The name scope.

    Returns:
        A ``[batch_size]`` Tensor of per-example losses, ``inputs``' dtype.

    Raises:
        ValueError: ``inputs`` not 2-D, a bad count or ``sampled_values``, an unknown
            partition strategy.
        TypeError: non-integer labels, or non-float inputs.
"""


def nce_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int,
             num_classes: int, num_true: int = 1, sampled_values: Any = None,
             remove_accidental_hits: bool = False, partition_strategy: str = "mod",
             name: str = "nce_loss") -> Tensor:
    """Noise-contrastive estimation loss, as ``tf.nn.nce_loss`` (nn_impl.py): the logits
    ``inputs . weights[c] + biases[c] - log(expected_count(c))`` of the true and the sampled
    classes ``c``, each scored by sigmoid cross-entropy against 1/num_true (true) or 0
    (sampled), summed per example. Only the rows of the true and sampled classes are read
    (``embedding_lookup``), so the gradient of ``weights`` and ``biases`` is row-sparse.
    """
    logits, out_labels = _compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values,
        True, remove_accidental_hits, partition_strategy, name, None)
    batch = logits.shape.as_list()[0] if logits.shape.ndims else None
    return _lib.apply_op("Sum", f"{name}/sampled_losses", [out_labels, logits], _nce_sum,
                         logits.dtype, TensorShape([batch]))


def sampled_softmax_loss(weights: Any, biases: Any, labels: Any, inputs: Any,
                         num_sampled: int, num_classes: int, num_true: int = 1,
                         sampled_values: Any = None, remove_accidental_hits: bool = True,
                         partition_strategy: str = "mod", name: str = "sampled_softmax_loss",
                         seed: int | None = None) -> Tensor:
    """Sampled softmax loss, as ``tf.nn.sampled_softmax_loss`` (nn_impl.py): softmax
    cross-entropy over the logits of the true and sampled classes (each corrected by
    ``-log(expected_count)``), against 1/num_true on the true classes; accidental hits
    removed by default. Row-sparse gradients as :func:`nce_loss`; ``seed`` seeds the default
    sampler.
    """
    logits, out_labels = _compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values,
        True, remove_accidental_hits, partition_strategy, name, seed)
    losses = _nn.softmax_cross_entropy_with_logits_v2(
        labels=_array.stop_gradient(out_labels), logits=logits, name=f"{name}/xent")
    losses.dtype = logits.dtype
    losses.shape = TensorShape([logits.shape.as_list()[0] if logits.shape.ndims else None])
    return losses


nce_loss.__doc__ = (nce_loss.__doc__ or "") + _SAMPLED_ARGS
sampled_softmax_loss.__doc__ = (sampled_softmax_loss.__doc__ or "") + _SAMPLED_ARGS
