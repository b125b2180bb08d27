"""TF1's indexing ops of tensorflow/python/ops/array_ops.py (r1.15) beyond the basic ones:
``strided_slice`` (what ``Tensor[...]`` builds), ``unique``, ``unique_with_counts``, and
``tensordot`` (math_ops.py), as graph ops over numpy with TF's static shapes and gradients.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework import slicing as _slicing
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor, strided_slice_op
from psrt.framework.tensor_shape import TensorShape

#: ``tf.newaxis``: in a slice, a new axis of size 1 (array_ops.py: ``newaxis = None``).
newaxis = None

Unique = collections.namedtuple("Unique", ["y", "idx"])
UniqueWithCounts = collections.namedtuple("UniqueWithCounts", ["y", "idx", "count"])


def _in(x: Any) -> Any:
    return x if _lib.is_graph_value(x) else constant(x)


# ---- strided_slice ---------------------------------------------------------------------------


def _bounds(v: Any, what: str, n: int | None) -> tuple[list[Any], list[Any]]:
    """The entries of a begin/end/strides argument (ints, or Dyn reading a 1-D tensor) and
    the extra op inputs they read."""
    if _lib.is_graph_value(v):
        s = _lib.static_shape(v)
        if s.ndims != 1 or s[0].value is None:
            raise ValueError(f"strided_slice: {what} must be a 1-D tensor of known length; "
                             f"got shape {s}")
        return [_slicing.Dyn(-1, j) for j in range(s[0].value)], [v]
    vals = [int(i) for i in np.asarray(v).reshape(-1)]
    if n is not None and len(vals) != n:
        raise ValueError(f"strided_slice: {what} has {len(vals)} entries; begin has {n}")
    return vals, []


def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0, var: Any = None, name: str | None = None
                  ) -> Tensor:
    """The strided slice of ``input_``, as ``tf.strided_slice``: entry i of ``begin``,
    ``end`` and ``strides`` (int lists, or 1-D int32/int64 tensors of known length) slices
    axis i, and bit i of each mask changes it as TF's StridedSlice op: ``begin_mask`` /
    ``end_mask`` ignore the bound (the whole range), ``ellipsis_mask`` stands for the axes not
    named, ``new_axis_mask`` inserts an axis of size 1, ``shrink_axis_mask`` indexes with
    ``begin[i]`` and removes the axis. ``Tensor[...]`` builds the same op. The gradient writes
    the incoming gradient into zeros of ``input_``'s shape (TF's StridedSliceGrad).

    Args:
        input_: A Tensor, Variable or array.
        begin, end, strides: Equal-length int vectors; ``strides`` defaults to ones.
        var: Accepted as TF's (slice assignment is not supported): must be None.
        name: The op name; default ``"strided_slice"``.

    Returns:
        A Tensor of ``input_``'s dtype.

    Raises:
        ValueError: lengths that differ, a zero stride, more than one ellipsis bit, an index
            out of a known dimension; NotImplementedError: ``var`` given.
    """
    if var is not None:
        raise NotImplementedError("strided_slice(var=...) (slice assignment) is not supported "
                                  "by psrt; use tf.scatter_update or assign a new value")
    b, bin_ = _bounds(begin, "begin", None)
    e, ein = _bounds(end, "end", len(b))
    s, sin = _bounds(np.ones(len(b), np.int64) if strides is None else strides, "strides",
                     len(b))
    dyn: list[Any] = []
    for entries, extra in ((b, bin_), (e, ein), (s, sin)):
        if extra:
            dyn.append(extra[0])
            for i, x in enumerate(entries):
                entries[i] = _slicing.Dyn(len(dyn) - 1, x.element)
    if bin(ellipsis_mask).count("1") > 1:
        raise ValueError("Multiple ellipses in slice spec not allowed")
    spec = _slicing.spec_from_masks(b, e, s, begin_mask, end_mask, ellipsis_mask,
                                    new_axis_mask, shrink_axis_mask)
    return strided_slice_op(_in(input_), spec, dyn, name)


# ---- unique ----------------------------------------------------------------------------------


def _unique(x: Any, out_idx: np.dtype) -> tuple[Any, Any, Any]:
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"unique expects a 1D vector; got shape {list(x.shape)}")
    uniq, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                             return_counts=True)
    order = np.argsort(first, kind="stable")          # TF: in order of first occurrence
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return (uniq[order], rank[inverse.reshape(-1)].astype(out_idx),
            counts[order].astype(out_idx))


def _unique_part(needs: Any, x: Any, part: int, out_idx: np.dtype) -> Any:
    return _unique(x, out_idx)[part], lambda dy: (None,)


def _unique_ops(x: Any, out_idx: Any, name: str | None, parts: int) -> list[Tensor]:
    t = _in(x)
    s = _lib.static_shape(t)
    if s.ndims is not None and s.ndims != 1:
        raise ValueError(f"unique expects a 1D vector; got shape {s}")
    idx_dt = np.dtype(_lib.np_dtype(out_idx))
    if idx_dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"unique: out_idx must be int32 or int64; got {idx_dt.name}")
    base = name or "Unique"
    shapes = [TensorShape([None]), s if s.ndims is not None else TensorShape([None]),
              TensorShape([None])]
    dts = [_lib.static_dtype(t), idx_dt, idx_dt]
    return [_lib.apply_op("Unique", f"{base}_{k}" if k else base, [t], _unique_part, dts[k],
                          shapes[k], part=k, out_idx=idx_dt) for k in range(parts)]


def unique(x: Any, out_idx: Any = np.int32, name: str | None = None) -> Unique:
    """The distinct values of the 1-D ``x`` in the order they first occur, and for each
    element of ``x`` the index of its value in them, as ``tf.unique``: ``(y, idx)`` with
    ``x == y[idx]``. No gradient (TF registers none).

    Raises:
        ValueError: ``x`` not 1-D; TypeError: ``out_idx`` not int32/int64.
    """
    y, idx = _unique_ops(x, out_idx, name, 2)
    return Unique(y, idx)


def unique_with_counts(x: Any, out_idx: Any = np.int32, name: str | None = None
                       ) -> UniqueWithCounts:
    """:func:`unique` and how often each value occurs, as ``tf.unique_with_counts``:
    ``(y, idx, count)``."""
    y, idx, count = _unique_ops(x, out_idx, name, 3)
    return UniqueWithCounts(y, idx, count)


# ---- tensordot -------------------------------------------------------------------------------


def _axes_pair(axes: Any, ra: int, rb: int) -> tuple[list[int], list[int]]:
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if not 0 <= n <= min(ra, rb):
            raise ValueError(f"tensordot: axes={n} must be in [0, {min(ra, rb)}] for ranks "
                             f"{ra} and {rb}")
        return list(range(ra - n, ra)), list(range(n))
    pair = list(axes)
    if len(pair) != 2:
        raise ValueError(f"tensordot: axes must be an int or a pair of axis lists; got "
                         f"{axes!r}")
    a_ax = [int(i) for i in np.atleast_1d(pair[0])]
    b_ax = [int(i) for i in np.atleast_1d(pair[1])]
    if len(a_ax) != len(b_ax):
        raise ValueError(f"tensordot: different number of contraction axes for a and b: "
                         f"{a_ax} and {b_ax}")
    return [i % ra for i in a_ax], [i % rb for i in b_ax]


def _tensordot(needs: Any, a: Any, b: Any, a_ax: list[int], b_ax: list[int]) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    y = np.tensordot(a, b, (a_ax, b_ax))
    fa = [i for i in range(a.ndim) if i not in a_ax]
    fb = [i for i in range(b.ndim) if i not in b_ax]

    def grad(dy: Any) -> Any:
        dy = np.asarray(dy)
        da = db = None
        if 0 in needs:
            # tensordot(dy, b) over b's free axes: a's free axes, then b's contracted axes in
            # increasing order, each standing for its partner in a_ax.
            t = np.tensordot(dy, b, (list(range(len(fa), dy.ndim)), fb))
            order = fa + [a_ax[b_ax.index(j)] for j in sorted(b_ax)]
            da = np.transpose(t, np.argsort(order))
        if 1 in needs:
            t = np.tensordot(a, dy, (fa, list(range(len(fa)))))
            order = [b_ax[a_ax.index(i)] for i in sorted(a_ax)] + fb
            db = np.transpose(t, np.argsort(order))
        return da, db
    return y, grad


def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Tensor:
    """The sum of products of ``a`` and ``b`` over ``axes``, as ``tf.tensordot``
    (math_ops.py): ``axes`` an int N (the last N axes of ``a`` with the first N of ``b``) or
    a pair of equal-length axis lists. The result's shape is ``a``'s free axes then
    ``b``'s. Both operands need a known rank.

    Raises:
        ValueError: an unknown rank, axes out of range, contracted sizes that differ, or
            unequal axis lists.
    """
    ta, tb = _in(a), _in(b)
    sa, sb = _lib.static_shape(ta), _lib.static_shape(tb)
    if sa.ndims is None or sb.ndims is None:
        raise ValueError("tensordot: psrt needs operands of known rank")
    a_ax, b_ax = _axes_pair(axes, sa.ndims, sb.ndims)
    la, lb = sa.as_list(), sb.as_list()
    for i, j in zip(a_ax, b_ax):
        if la[i] is not None and lb[j] is not None and la[i] != lb[j]:
            raise ValueError(f"tensordot: contracted dimensions differ: a's axis {i} has "
                             f"{la[i]}, b's axis {j} has {lb[j]}")
    out = [la[i] for i in range(len(la)) if i not in a_ax] + \
        [lb[j] for j in range(len(lb)) if j not in b_ax]
    dt = _lib.static_dtype(ta)
    return _lib.apply_op("Tensordot", name, [ta, tb], _tensordot, dt, TensorShape(out),
                         a_ax=a_ax, b_ax=b_ax)
