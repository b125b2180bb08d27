"""The rest of TF1's ``tensorflow/python/ops/nn_ops.py`` (r1.15) names psrt's nn_ops.py does
not hold: the activations ``elu``, ``relu6``, ``leaky_relu``, ``softplus``, ``softsign``;
``dropout``; ``top_k`` and ``in_top_k``; ``local_response_normalization`` (``lrn``).

Each is a graph op (framework/op_def_library.py's ``apply_op``) with its static dtype and
shape and TF's gradient (tensorflow/python/ops/nn_grad.py); float32 in gives float32 out.
"""

from __future__ import annotations

import collections
import numbers
from typing import Any, Callable

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math
from psrt.ops import random_ops as _random

__all__ = ["TopKV2", "dropout", "elu", "in_top_k", "leaky_relu", "local_response_normalization",
           "lrn", "relu6", "softplus", "softsign", "top_k"]

_FLOATS = "float16, float32, float64"


def _input(x: Any) -> Any:
    """A graph value as is; anything else as an array of the dtype TF gives it."""
    return x if _lib.is_graph_value(x) else np.asarray(x, _lib.python_value_dtype(x))


def _dtype_name(dt: Any) -> str:
    return _dtypes.as_dtype(dt).name if dt is not None else "unknown"


def _check_kind(op: str, param: str, dt: Any, kinds: str, allowed: str) -> None:
    if dt is not None and np.dtype(dt).kind not in kinds:
        raise TypeError(f"Value passed to parameter '{param}' of op '{op}' has DataType "
                        f"{_dtype_name(dt)} not in list of allowed values: {allowed}")


def _shape_str(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# ---- activations -----------------------------------------------------------------------------


def _activation(op: str, fwd: Callable[[Any], Any], grad: Callable[[Any, Any, Any], Any],
                kinds: str = "f", allowed: str = _FLOATS) -> Callable[..., Tensor]:
    def kernel(needs: Any, x: Any) -> Any:
        x = np.asarray(x)
        y = fwd(x)
        return y, lambda dy: (grad(x, y, np.asarray(dy, y.dtype)),)

    def build(features: Any, name: str | None = None) -> Tensor:
        x = _input(features)
        dt = _lib.static_dtype(x)
        _check_kind(op, "features", dt, kinds, allowed)
        return _lib.apply_op(op, name, [x], kernel, dt, _lib.static_shape(x))
    build.__name__ = op.lower()
    return build


def _elu(x: Any) -> Any:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


_elu_op = _activation("Elu", _elu, lambda x, y, dy: np.where(y > 0, dy, dy * (y + 1)))
_relu6_op = _activation(
    "Relu6", lambda x: np.minimum(np.maximum(x, 0), 6).astype(x.dtype, copy=False),
    lambda x, y, dy: dy * ((x > 0) & (x < 6)), "fiu", "float16, float32, float64, int32, int64")
# log(1 + exp(x)) without overflow; TF's thresholded form agrees to float precision.
def sigmoid_stable(x: Any) -> Any:
    """``1 / (1 + exp(-x))`` without overflow for large ``|x|`` (keeps x's dtype)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_softplus_op = _activation("Softplus", lambda x: np.logaddexp(np.zeros((), x.dtype), x),
                           lambda x, y, dy: dy * sigmoid_stable(x))
_softsign_op = _activation("Softsign", lambda x: x / (1 + np.abs(x)),
                           lambda x, y, dy: dy / np.square(1 + np.abs(x)))


def elu(features: Any, name: str | None = None) -> Tensor:
    """Exponential linear unit, as ``tf.nn.elu``: ``features`` where positive, else
    ``exp(features) - 1``. Gradient (TF's EluGrad) ``dy`` where the output is positive, else
    ``dy * (output + 1)``. Any shape; a float dtype, kept.

    Raises:
        TypeError: a non-float ``features`` (TF's message naming the allowed dtypes).
    """
    return _elu_op(features, name=name or "Elu")


def relu6(features: Any, name: str | None = None) -> Tensor:
    """``min(max(features, 0), 6)``, as ``tf.nn.relu6``; gradient ``dy`` where
    ``0 < features < 6``, else 0 (TF's Relu6Grad). Any shape; float or integer dtype, kept.

    Raises:
        TypeError: a bool or string ``features``.
    """
    return _relu6_op(features, name=name or "Relu6")


def softplus(features: Any, name: str | None = None) -> Tensor:
    """``log(exp(features) + 1)``, computed without overflow, as ``tf.nn.softplus``;
    gradient ``dy * sigmoid(features)`` (TF's SoftplusGrad). Float dtypes, kept.

    Raises:
        TypeError: a non-float ``features``.
    """
    return _softplus_op(features, name=name or "Softplus")


def softsign(features: Any, name: str | None = None) -> Tensor:
    """``features / (abs(features) + 1)``, as ``tf.nn.softsign``; gradient
    ``dy / (1 + abs(features))**2`` (TF's SoftsignGrad). Float dtypes, kept.

    Raises:
        TypeError: a non-float ``features``.
    """
    return _softsign_op(features, name=name or "Softsign")


def _leaky_relu(needs: Any, x: Any, alpha: float) -> Any:
    x = np.asarray(x)
    a = x.dtype.type(alpha)
    # TF's kernel (relu_op_functor.h): a select, not a max, so alpha > 1 or < 0 work too.
    y = np.where(x > 0, x, x * a)
    return y, lambda dy: (np.where(x > 0, dy, dy * a),)


def leaky_relu(features: Any, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """Leaky ReLU, as ``tf.nn.leaky_relu``: ``features`` where positive, else ``alpha *
    features`` (TF's LeakyRelu kernel; ``max(alpha * x, x)`` for ``alpha <= 1``); gradient
    ``dy`` where ``features > 0``, else ``alpha * dy`` (TF's LeakyReluGrad). Integer
    ``features`` are cast to float32 first, as TF's; float dtypes are kept.

    Args:
        features: Any shape.
        alpha: The slope for negative inputs, a Python number (or a 0-d array).
        name: The op name (default ``"LeakyRelu"``).

    Raises:
        TypeError: a bool or string ``features``; an ``alpha`` that is not a number.
    """
    x = _input(features)
    dt = _lib.static_dtype(x)
    _check_kind("LeakyRelu", "features", dt, "fiu", _FLOATS)
    if dt is not None and np.dtype(dt).kind in "iu":
        x, dt = _math.cast(x, np.float32), np.dtype(np.float32)
    if isinstance(alpha, np.ndarray):
        alpha = alpha.item()
    if not isinstance(alpha, numbers.Real):
        raise TypeError(f"alpha must be a Python number; got {alpha!r}")
    return _lib.apply_op("LeakyRelu", name or "LeakyRelu", [x], _leaky_relu, dt,
                         _lib.static_shape(x), alpha=float(alpha))


# ---- dropout ---------------------------------------------------------------------------------


def _dropout(needs: Any, x: Any, u: Any, rate: Any) -> Any:
    x = np.asarray(x)
    r = np.asarray(rate, x.dtype)
    scale = np.asarray(1, x.dtype) / (np.asarray(1, x.dtype) - r)
    keep = (np.asarray(u) >= r).astype(x.dtype)
    factor = scale * keep                  # broadcast: noise_shape against x's shape
    return x * factor, lambda dy: (np.asarray(dy, x.dtype) * factor, None, None)


def _run_noise_shape(needs: Any, x: Any, *given: Any, spec: tuple[Any, ...]) -> Any:
    dims, k = [], 0
    for i, d in enumerate(spec):
        if d == "tensor":
            dims.append(int(np.asarray(given[k])))
            k += 1
        else:
            dims.append(np.shape(x)[i] if d is None else d)
    return np.asarray(dims, np.int32), lambda dy: (None,) * (1 + len(given))


def _noise_shape(x: Any, noise_shape: Any) -> Any:
    # TF's _get_noise_shape: None entries of a given noise_shape take x's static sizes;
    # psrt also fills those unknown until the run (a None batch) and takes scalar tensors
    # (``[tf.shape(x)[0], 1]``) as entries.
    if noise_shape is None:
        return _array.shape(x)
    if _lib.is_graph_value(noise_shape):
        return noise_shape
    dims: list[Any] = list(noise_shape)
    xs = _lib.static_shape(x)
    known = xs.as_list() if xs.ndims is not None else None
    if known is not None and len(known) == len(dims):
        dims = [xd if nd is None else nd for nd, xd in zip(dims, known)]
    if known is not None:
        consts = [None if d is None or _lib.is_graph_value(d) else int(d) for d in dims]
        pairs = list(zip(reversed(consts), reversed(known)))
        if len(dims) > len(known) or any(nd is not None and nd != 1 and xd is not None and
                                         nd != xd for nd, xd in pairs):
            raise ValueError(f"noise_shape {list(noise_shape)!r} does not broadcast to x's "
                             f"shape {xs}")
    if all(d is not None and not _lib.is_graph_value(d) for d in dims):
        return np.asarray([int(d) for d in dims], np.int32)
    if any(d is None for d in dims) and (known is None or len(known) != len(dims)):
        raise ValueError(f"noise_shape {list(noise_shape)!r} has None entries but x's rank "
                         f"is not {len(dims)}")
    given = [d for d in dims if _lib.is_graph_value(d)]
    spec = tuple("tensor" if _lib.is_graph_value(d) else (None if d is None else int(d))
                 for d in dims)
    return _lib.apply_op("Pack", "noise_shape", [x] + given, _run_noise_shape, np.int32,
                         TensorShape([len(dims)]), spec=spec)


def dropout(x: Any, keep_prob: Any = None, noise_shape: Any = None, seed: int | None = None,
            name: str | None = None, rate: Any = None) -> Any:
    """Dropout, as TF1's ``tf.nn.dropout`` (tensorflow/python/ops/nn_ops.py ``dropout`` and
    ``dropout_v2``): each element of ``x`` is kept with probability ``1 - rate``
    (``keep_prob``) and scaled by ``1 / (1 - rate)``, else set to 0, so the expected sum is
    unchanged. As TF's, the mask is ``random_uniform(noise_shape, seed=seed) >= rate``, drawn
    anew at each run (seeded as TF's graph and op seeds, ``psrt.set_random_seed``); the
    gradient is ``dy`` times the same mask and scale: a run's fetched output, its loss, its
    training step's update and its ``psrt.gradients`` tensors all use one mask, as in TF.

    Args:
        x: A float Tensor of any shape.
        keep_prob: TF1's argument: the probability to keep an element (``rate = 1 -
            keep_prob``); give it or ``rate``, not both.
        noise_shape: The shape of the mask (1-D int32), broadcast against ``x``'s: e.g.
            ``[batch, 1]`` keeps or drops whole rows. None entries take ``x``'s static sizes.
        seed: The op seed (TF's ``random_seed.get_seed``).
        name: The op name (default ``"dropout"``).
        rate: The probability to drop an element, a float in ``[0, 1)`` or a scalar
            Tensor. A constant 0 returns ``x`` itself, as TF's.

    Returns:
        A Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: both ``keep_prob`` and ``rate``, neither, a number outside ``[0, 1)``,
            a non-float ``x``, or a non-numeric ``keep_prob`` (TF's messages).
    """
    if keep_prob is not None:
        if rate is not None:
            raise ValueError("Cannot specify both 'keep_prob' and 'rate'.")
        if isinstance(keep_prob, (str, bytes)) or not (
                isinstance(keep_prob, numbers.Real) or _lib.is_graph_value(keep_prob) or
                isinstance(keep_prob, np.ndarray)):
            raise ValueError(f"keep_prob must be a floating point number or Tensor (got "
                             f"{keep_prob!r})")
        rate = (1 - keep_prob) if not _lib.is_graph_value(keep_prob) else \
            _sub_from_one(keep_prob)
    if rate is None:
        raise ValueError("You must provide a rate to dropout.")
    if isinstance(rate, numbers.Real) and not 0 <= float(rate) < 1:
        raise ValueError(f"rate must be a scalar tensor or a float in the range [0, 1), got "
                         f"{float(rate):g}")
    x = _input(x)
    dt = _lib.static_dtype(x)
    if dt is None or np.dtype(dt).kind != "f":
        raise ValueError(f"x has to be a floating point tensor since it's going to be scaled. "
                         f"Got a {_dtype_name(dt)} tensor instead.")
    const = _lib.constant_value(rate)
    if const is not None:
        if np.ndim(const) != 0:
            raise ValueError(f"rate must be a scalar; got shape {np.shape(const)}")
        if float(const) == 0:
            return x
        rate = np.asarray(const, dt)
    elif _lib.static_shape(rate).ndims not in (None, 0):
        raise ValueError(f"rate must be a scalar tensor; got shape {_lib.static_shape(rate)}")
    u = _random.random_uniform(_noise_shape(x, noise_shape), seed=seed, dtype=dt)
    return _lib.apply_op("Mul", name or "dropout", [x, u, rate], _dropout, dt,
                         _lib.static_shape(x))


def _one_minus(needs: Any, p: Any) -> Any:
    p = np.asarray(p)
    return np.asarray(1, p.dtype) - p, lambda dy: (None,)


def _sub_from_one(p: Any) -> Tensor:
    return _lib.apply_op("Sub", "sub", [p], _one_minus, _lib.static_dtype(p),
                         _lib.static_shape(p))


# ---- top_k, in_top_k -------------------------------------------------------------------------

TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])
TopKV2.__doc__ = "The outputs of :func:`top_k`: ``values`` and their int32 ``indices``."


def _k_value(k: Any, who: str) -> Any:
    if _lib.is_graph_value(k):
        return k, None
    kv = np.asarray(k)
    if kv.ndim != 0 or kv.dtype.kind not in "iu":
        raise TypeError(f"k of {who} must be an int scalar; got {k!r}")
    if int(kv) < 0:
        raise ValueError(f"Need k >= 0, got {int(kv)}")
    return np.asarray(int(kv), np.int32), int(kv)


def _top_k_indices(needs: Any, x: Any, k: Any) -> Any:
    x = np.asarray(x)
    k = int(k)
    if x.ndim < 1:
        raise _errors.InvalidArgumentError(
            None, None, f"input must be >= 1-D, got shape {_shape_str(x.shape)}")
    if k < 0:
        raise _errors.InvalidArgumentError(None, None, f"Need k >= 0, got {k}")
    if x.shape[-1] < k:
        raise _errors.InvalidArgumentError(
            None, None, f"input must have at least k columns. Had {x.shape[-1]}, needed {k}")
    # Largest first; equal values in index order (TF's TopKV2 is stable).
    # (A stable ascending sort of the reversed row, read backwards; any dtype, no negation.)
    asc = np.argsort(x[..., ::-1], axis=-1, kind="stable")
    order = x.shape[-1] - 1 - asc[..., ::-1]
    return order[..., :k].astype(np.int32), lambda dy: (None, None)


def _take_last(needs: Any, x: Any, idx: Any) -> Any:
    x = np.asarray(x)
    idx = np.asarray(idx, np.intp)

    def grad(dy: Any) -> Any:
        dx = np.zeros_like(x)
        np.put_along_axis(dx, idx, np.asarray(dy, x.dtype), axis=-1)
        return dx, None
    return np.take_along_axis(x, idx, axis=-1), grad


def top_k(input: Any, k: Any = 1, sorted: bool = True,  # noqa: A002  (TF's names)
          name: str | None = None) -> TopKV2:
    """The ``k`` largest entries of the last dimension and their indices, as
    ``tf.nn.top_k`` / ``tf.math.top_k`` (TF's TopKV2): ``values[..., j]`` is the ``j``-th
    largest of ``input[..., :]`` and ``indices[..., j]`` its int32 position; equal values
    come in index order. The output is always sorted (TF leaves the order unspecified with
    ``sorted=False``). Gradient: ``dy`` scattered back to the chosen positions.

    Args:
        input: A float or integer Tensor of rank >= 1.
        k: A non-negative int (or an int32 scalar Tensor), at most the last dimension.
        sorted: Accepted: True (default) or False. With False TF's order of the ``k``
            entries is unspecified, so psrt's sorted output is one of TF's answers
            (topk_op_test.py testTop3Unsorted compares them as sets).
        name: The op name (default ``"TopKV2"``).

    Returns:
        ``TopKV2(values, indices)``: ``input.shape[:-1] + [k]``, ``input``'s dtype and int32.

    Raises:
        ValueError: ``k`` negative, a rank-0 ``input``, or a last dimension known to be
            smaller than ``k``.
        InvalidArgumentError (at run): the same, found at run time.
    """
    x = _input(input)
    dt = _lib.static_dtype(x)
    _check_kind("TopKV2", "input", dt, "fiu", "float16, float32, float64, int32, int64, ...")
    k_in, kv = _k_value(k, "top_k")
    shape = _lib.static_shape(x)
    out = None
    if shape.ndims is not None:
        if shape.ndims < 1:
            raise ValueError(f"Shape must be at least rank 1 but is rank 0 for 'TopKV2' "
                             f"(input {shape})")
        last = shape.as_list()[-1]
        if kv is not None and last is not None and last < kv:
            raise ValueError(f"input must have last dimension >= k = {kv} but is {last} for "
                             f"'TopKV2'")
        out = TensorShape(shape.as_list()[:-1] + [kv])
    name = name or "TopKV2"
    idx = _lib.apply_op("TopKV2", name, [x, k_in], _top_k_indices, np.int32, out)
    values = _lib.apply_op("TopKV2", name + "_values", [x, idx], _take_last, dt, out)
    return TopKV2(values, idx)


def _in_top_k(needs: Any, predictions: Any, targets: Any, k: Any) -> Any:
    p = np.asarray(predictions)
    t = np.asarray(targets).astype(np.int64)
    k = int(k)
    if p.ndim != 2:
        raise _errors.InvalidArgumentError(
            None, None, f"predictions must be 2-dimensional; got shape {_shape_str(p.shape)}")
    if t.ndim != 1 or t.shape[0] != p.shape[0]:
        raise _errors.InvalidArgumentError(
            None, None, f"First dimension of predictions {p.shape[0]} must match length of "
            f"targets {t.shape[0] if t.ndim else t.shape}")
    n = p.shape[1]
    valid = (t >= 0) & (t < n)
    target_p = p[np.arange(p.shape[0]), np.where(valid, t, 0)]
    # TF's kernel (core/kernels/in_topk_op.h): an out-of-range target or a non-finite
    # prediction in the row gives False; ties with the target's prediction count as in.
    finite = np.isfinite(p).all(axis=1)
    more = (p > target_p[:, None]).sum(axis=1)
    return valid & finite & (more < k), lambda dy: (None, None, None)


def in_top_k(predictions: Any, targets: Any, k: Any, name: str | None = None) -> Tensor:
    """Whether each target is among its row's ``k`` largest predictions, as
    ``tf.nn.in_top_k`` / ``tf.math.in_top_k`` (TF's InTopKV2; tensorflow/core/kernels/
    in_topk_op.h): ``out[i]`` is True when fewer than ``k`` predictions of row ``i`` are
    strictly larger than ``predictions[i, targets[i]]`` (so classes tied at the boundary are
    all in), and False for a target outside ``[0, classes)`` or a row with a non-finite
    prediction.

    Args:
        predictions: float ``[batch, classes]``.
        targets: int32/int64 ``[batch]`` class indices.
        k: An int (or an int scalar Tensor).
        name: The op name (default ``"in_top_k"``).

    Returns:
        A bool Tensor ``[batch]``.

    Raises:
        TypeError: non-float predictions or non-integer targets.
        ValueError: known shapes of the wrong ranks, or a negative ``k``.
        InvalidArgumentError (at run): shapes found wrong at run time.
    """
    p, t = _input(predictions), _input(targets)
    _check_kind("InTopKV2", "predictions", _lib.static_dtype(p), "f", _FLOATS)
    _check_kind("InTopKV2", "targets", _lib.static_dtype(t), "iu", "int32, int64")
    k_in, _ = _k_value(k, "in_top_k")
    ps, ts = _lib.static_shape(p), _lib.static_shape(t)
    if ps.ndims not in (None, 2):
        raise ValueError(f"Shape must be rank 2 but is rank {ps.ndims} for 'InTopKV2' "
                         f"(predictions {ps})")
    if ts.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {ts.ndims} for 'InTopKV2' "
                         f"(targets {ts})")
    batch = ps.as_list()[0] if ps.ndims else (ts.as_list()[0] if ts.ndims else None)
    return _lib.apply_op("InTopKV2", name or "in_top_k", [p, t, k_in], _in_top_k, np.bool_,
                         TensorShape([batch]))


# ---- local response normalization ------------------------------------------------------------


def _window_sum(a: np.ndarray, r: int) -> np.ndarray:
    """``out[..., d] = sum(a[..., d - r : d + r + 1])`` (clipped at the ends)."""
    out = a.copy()
    depth = a.shape[-1]
    for s in range(1, min(r, depth - 1) + 1):
        out[..., s:] += a[..., :-s]
        out[..., :-s] += a[..., s:]
    return out


def _lrn(needs: Any, x: Any, depth_radius: int, bias: float, alpha: float, beta: float) -> Any:
    x = np.asarray(x)
    if x.ndim != 4:
        raise _errors.InvalidArgumentError(
            None, None, f"input must be 4-dimensional; got shape {_shape_str(x.shape)}")
    t = x.dtype.type
    norm = t(bias) + t(alpha) * _window_sum(x * x, depth_radius)
    pw = np.power(norm, t(-beta))
    y = x * pw

    def grad(dy: Any) -> Any:
        dy = np.asarray(dy, x.dtype)
        # d/dx_j: dy_j * N_j^-b - 2 a b x_j * sum_{i near j} dy_i x_i N_i^(-b-1)
        inner = _window_sum(dy * x * pw / norm, depth_radius)
        return (dy * pw - t(2 * alpha * beta) * x * inner,)
    return y, grad


def local_response_normalization(input: Any, depth_radius: int = 5,  # noqa: A002
                                 bias: float = 1.0, alpha: float = 1.0, beta: float = 0.5,
                                 name: str | None = None) -> Tensor:
    """Local response normalization across channels, as ``tf.nn.lrn`` /
    ``tf.nn.local_response_normalization`` (TF's LRN op, tensorflow/core/kernels/lrn_op.cc):
    ``sqr_sum[a, b, c, d] = sum(input[a, b, c, d - depth_radius : d + depth_radius + 1] ** 2)``
    and ``output = input / (bias + alpha * sqr_sum) ** beta``. Gradient as TF's LRNGrad.

    Args:
        input: A 4-D float Tensor ``[batch, height, width, channels]`` (TF allows
            float16/float32; psrt computes float64 too).
        depth_radius: Half-width of the channel window, an int >= 0.
        bias, alpha, beta: The offset, scale and exponent.
        name: The op name (default ``"LRN"``).

    Returns:
        A Tensor of ``input``'s shape and dtype.

    Raises:
        TypeError: a non-float input.
        ValueError: a known rank other than 4, or a negative ``depth_radius``.
        InvalidArgumentError (at run): a value of rank other than 4.
    """
    x = _input(input)
    dt = _lib.static_dtype(x)
    _check_kind("LRN", "input", dt, "f", _FLOATS)
    shape = _lib.static_shape(x)
    if shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {shape.ndims} for 'LRN' "
                         f"(input {shape})")
    if int(depth_radius) != depth_radius or depth_radius < 0:
        raise ValueError(f"depth_radius must be a non-negative int; got {depth_radius!r}")
    return _lib.apply_op("LRN", name or "LRN", [x], _lrn, dt, shape,
                         depth_radius=int(depth_radius), bias=float(bias),
                         alpha=float(alpha), beta=float(beta))


lrn = local_response_normalization
