"""TF1's clipping ops (tensorflow/python/ops/clip_ops.py, r1.15): ``clip_by_value``,
``clip_by_norm``, ``global_norm``, ``clip_by_global_norm``, built from psrt's math ops (so
their gradients are those ops'); the last three take ``tf.gradients``' IndexedSlices too."""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.tensor import Tensor
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math


def _clip(needs: Any, t: Any, lo: Any, hi: Any) -> Any:
    t = np.asarray(t)
    y = np.minimum(np.maximum(t, lo), hi)
    inside = (t >= lo) & (t <= hi)
    zero = np.zeros((), t.dtype)
    return y, lambda dy: (np.where(inside, dy, zero), None, None)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any,
                  name: str | None = None) -> Tensor:
    """``t`` clipped to ``[clip_value_min, clip_value_max]``, as ``tf.clip_by_value``; the
    gradient passes where ``t`` is inside the range (TF's)."""
    x = t if _lib.is_graph_value(t) else constant(t)
    dt = _lib.static_dtype(x)
    lo = clip_value_min if _lib.is_graph_value(clip_value_min) else np.asarray(clip_value_min, dt)
    hi = clip_value_max if _lib.is_graph_value(clip_value_max) else np.asarray(clip_value_max, dt)
    return _lib.apply_op("clip_by_value", name, [x, lo, hi], _clip, dt, _lib.static_shape(x))


def _values(t: Any) -> Any:
    """What TF's clipping ops compute on: an IndexedSlices' ``values``, else ``t``."""
    return t.values if isinstance(t, IndexedSlices) else t


def _like(t: Any, values: Any) -> Any:
    """``values`` in ``t``'s form: an IndexedSlices of them at ``t``'s indices for an
    IndexedSlices ``t`` (TF's clip ops keep a sparse gradient sparse)."""
    return IndexedSlices(values, t.indices, t.dense_shape) if isinstance(t, IndexedSlices) \
        else values


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Any:
    """``t * clip_norm / max(l2norm(t), clip_norm)`` (the L2 norm over ``axes``, default
    all), as ``tf.clip_by_norm``; an IndexedSlices' ``values`` are clipped (their norm, as
    TF's) and an IndexedSlices returned."""
    v = _values(t)
    x = v if _lib.is_graph_value(v) else constant(v)
    l2sum = _math.reduce_sum(_math.square(x), axes, keepdims=True)
    pred = _math.greater(l2sum, 0.0)
    safe = _array.where(pred, l2sum, _array.ones_like(l2sum))
    norm = _array.where(pred, _math.sqrt(safe), l2sum)
    return _like(t, _math.truediv(_math.multiply(x, clip_norm), _math.maximum(norm, clip_norm),
                                  name=name or "clip_by_norm"))


def global_norm(t_list: Any, name: str | None = None) -> Tensor:
    """``sqrt(sum(l2norm(t) ** 2 for t in t_list))`` (None entries skipped), as
    ``tf.global_norm``; an IndexedSlices counts by its ``values`` (TF's: rows of repeated
    indices count separately).

    Raises:
        TypeError: ``t_list`` is not a list or tuple (TF's message).
    """
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    sq = [_math.reduce_sum(_math.square(_values(t))) for t in t_list if t is not None]
    return _math.sqrt(_math.add_n(sq), name=name or "global_norm")


def clip_by_global_norm(t_list: Any, clip_norm: Any, use_norm: Any = None,
                        name: str | None = None) -> tuple[list[Any], Tensor]:
    """``(t_list scaled by clip_norm / max(global_norm, clip_norm), global_norm)``, as
    ``tf.clip_by_global_norm`` (None entries stay None; an IndexedSlices' ``values`` are
    scaled and an IndexedSlices returned, as TF's).

    Raises:
        TypeError: ``t_list`` is not a list or tuple (TF's message).
    """
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    norm = use_norm if use_norm is not None else global_norm(t_list)
    # TF's: 1 / clip_norm in the norm's dtype (a float64 norm clips float64 gradients).
    one = constant(1.0, _lib.static_dtype(norm) or np.float32)
    scale = _math.multiply(clip_norm, _math.minimum(
        _math.truediv(1.0, norm), _math.truediv(one, clip_norm)))
    out = [None if t is None else _like(t, _math.multiply(
        _values(t), _math.cast(scale, _lib.static_dtype(_values(t))))) for t in t_list]
    return out, norm
