"""TF1's array ops (tensorflow/python/ops/array_ops.py, r1.15) as graph ops over numpy:
shapes and reshapes, joins and splits, gathers, fills, ``where``, ``one_hot``,
``identity`` and ``stop_gradient``.

Each builds a :class:`psrt.Tensor` with its static dtype and shape (None for sizes known
only at run time) and carries TF's gradient (tensorflow/python/ops/array_grad.py).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from psrt.framework import autodiff as _autodiff
from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape

_pyslice = builtins.slice


def _in(x: Any) -> Any:
    return x if _lib.is_graph_value(x) else constant(x)


def _ints(v: Any, what: str) -> list[int] | None:
    """The build-time value of an int list argument, or None when it is a graph value."""
    c = _lib.constant_value(v)
    if c is None:
        return None
    return [int(i) for i in np.asarray(c).reshape(-1)]


def _axis(a: int, rank: int | None, what: str = "axis") -> int:
    if rank is None:
        return a
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"{what} {a} is out of range for a tensor of rank {rank}; expected "
                         f"[{-rank}, {rank})")
    return a % rank if rank else 0


# ---- identity --------------------------------------------------------------------------------


def _identity(needs: Any, x: Any) -> Any:
    return x, lambda dy: (dy,)


def identity(input: Any, name: str | None = None) -> Tensor:
    """``input``'s value, as ``tf.identity``; gradient passes through. Inside
    ``control_dependencies`` it is the usual way to read a value after other ops run."""
    x = _in(input)
    return _lib.apply_op("Identity", name, [x], _identity, _lib.static_dtype(x),
                         _lib.static_shape(x))


def _stop(needs: Any, x: Any) -> Any:
    return x, lambda dy: (None,)


# TF's ops.NotDifferentiable("StopGradient"): tf.gradients sees no path through it.
_STOP = _autodiff.NotDifferentiable(_stop)


def stop_gradient(input: Any, name: str | None = None) -> Tensor:
    """``input``'s value with no gradient flowing back through it, as
    ``tf.stop_gradient``."""
    x = _in(input)
    t = _lib.apply_op("StopGradient", name, [x], _STOP, _lib.static_dtype(x),
                      _lib.static_shape(x))
    t.op.stops_gradient = True
    return t


# ---- shapes ----------------------------------------------------------------------------------


def _shape_of(needs: Any, x: Any, dtype: np.dtype) -> Any:
    return np.asarray(np.shape(x), dtype), lambda dy: (None,)


def shape(input: Any, name: str | None = None, out_type: Any = np.int32) -> Tensor:
    """The dynamic shape of ``input``, a 1-D ``out_type`` (int32) tensor, as ``tf.shape``."""
    x = _in(input)
    dt = _lib.np_dtype(out_type)
    return _lib.apply_op("Shape", name, [x], _shape_of, dt, [_lib.static_shape(x).ndims],
                         dtype=dt)


def _size(needs: Any, x: Any, dtype: np.dtype) -> Any:
    return np.asarray(np.size(x), dtype), lambda dy: (None,)


def size(input: Any, name: str | None = None, out_type: Any = np.int32) -> Tensor:
    """The number of elements of ``input``, a scalar ``out_type`` (int32), as ``tf.size``."""
    x = _in(input)
    dt = _lib.np_dtype(out_type)
    return _lib.apply_op("Size", name, [x], _size, dt, [], dtype=dt)


def _rank(needs: Any, x: Any) -> Any:
    return np.asarray(np.ndim(x), np.int32), lambda dy: (None,)


def rank(input: Any, name: str | None = None) -> Tensor:
    """The rank of ``input``, a scalar int32, as ``tf.rank``."""
    x = _in(input)
    return _lib.apply_op("Rank", name, [x], _rank, np.int32, [])


def _reshape(needs: Any, x: Any, shape: Any) -> Any:
    x = np.asarray(x)
    try:
        y = x.reshape(tuple(int(d) for d in np.asarray(shape).reshape(-1)))
    except ValueError:
        raise _errors.InvalidArgumentError(
            None, None, f"Input to reshape is a tensor with {x.size} values, but the "
            f"requested shape has {int(np.prod([d for d in np.asarray(shape) if d != -1]))}"
        ) from None
    return y, lambda dy: (np.reshape(dy, x.shape), None)


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """``tensor``'s values in a new shape (one ``-1`` is inferred), as ``tf.reshape``.

    Raises:
        ValueError: a static element count that does not fit (TF's message).
        InvalidArgumentError (at run): the same, found at run time.
    """
    x = _in(tensor)
    dims = _ints(shape, "shape")
    out: Any = None
    if dims is not None:
        if sum(1 for d in dims if d == -1) > 1:
            raise ValueError(f"Cannot infer multiple unknown dimensions in shape {dims}")
        n = _lib.static_shape(x).num_elements()
        known = int(np.prod([d for d in dims if d != -1]))
        if -1 in dims:
            out = [(n // known if n is not None and known else None) if d == -1 else d
                   for d in dims]
        else:
            out = dims
        if n is not None and (known != n if -1 not in dims else (known == 0 or n % known)):
            raise ValueError(f"Cannot reshape a tensor with {n} elements to shape {dims} "
                             f"({known} elements)")
        shape = np.asarray(dims, np.int64)
    elif _lib.static_shape(shape).ndims is not None and _lib.static_shape(shape)[0].value:
        out = [None] * _lib.static_shape(shape)[0].value
    return _lib.apply_op("Reshape", name, [x, shape], _reshape, _lib.static_dtype(x), out)


def _transpose(needs: Any, x: Any, perm: Any) -> Any:
    x = np.asarray(x)
    p = tuple(range(x.ndim))[::-1] if perm is None else tuple(perm)
    return np.transpose(x, p), lambda dy: (np.transpose(dy, np.argsort(p)),)


def transpose(a: Any, perm: Any = None, name: str = "transpose",
              conjugate: bool = False) -> Tensor:
    """``a`` with its dimensions permuted by ``perm`` (default: reversed), as
    ``tf.transpose``.

    Raises:
        ValueError: ``perm`` is not a permutation of the rank.
    """
    x = _in(a)
    s = _lib.static_shape(x)
    p = None if perm is None else [int(i) for i in perm]
    if p is not None and s.ndims is not None and sorted(p) != list(range(s.ndims)):
        raise ValueError(f"perm {p} is not a permutation of [0, {s.ndims})")
    out = None if s.ndims is None else [s[i].value for i in
                                        (p if p is not None else range(s.ndims)[::-1])]
    return _lib.apply_op("Transpose", name, [x], _transpose, _lib.static_dtype(x), out,
                         perm=None if p is None else tuple(p))


def _expand(needs: Any, x: Any, axis: int) -> Any:
    x = np.asarray(x)
    return np.expand_dims(x, axis), lambda dy: (np.reshape(dy, x.shape),)


def expand_dims(input: Any, axis: Any = None, name: str | None = None,
                dim: Any = None) -> Tensor:
    """``input`` with a size-1 dimension inserted at ``axis`` (``dim``: TF1's old name), as
    ``tf.expand_dims``.

    Raises:
        ValueError: both or neither of ``axis`` and ``dim``; an axis out of
            ``[-rank-1, rank]``.
    """
    if (axis is None) == (dim is None):
        raise ValueError("Must specify exactly one of 'axis' and 'dim'"
                         if axis is not None else "Must specify an axis argument to "
                         "tf.expand_dims()")
    a = int(axis if axis is not None else dim)
    x = _in(input)
    s = _lib.static_shape(x)
    out = None
    if s.ndims is not None:
        a = _axis(a, s.ndims + 1)
        dims = s.as_list()
        out = dims[:a] + [1] + dims[a:]
    return _lib.apply_op("ExpandDims", name, [x], _expand, _lib.static_dtype(x), out, axis=a)


def _squeeze(needs: Any, x: Any, axis: Any) -> Any:
    x = np.asarray(x)
    try:
        y = np.squeeze(x, axis)
    except ValueError:
        raise _errors.InvalidArgumentError(
            None, None, f"Can not squeeze dim{list(axis or ())}, expected a dimension of 1, "
            f"got shape {list(x.shape)}") from None
    return y, lambda dy: (np.reshape(dy, x.shape),)


def squeeze(input: Any, axis: Any = None, name: str | None = None,
            squeeze_dims: Any = None) -> Tensor:
    """``input`` without its size-1 dimensions (only those in ``axis``, a list; TF1's old
    name ``squeeze_dims``), as ``tf.squeeze``.

    Raises:
        ValueError: an axis whose static size is not 1 (TF's message).
    """
    if axis is not None and squeeze_dims is not None:
        raise ValueError("Cannot specify both 'axis' and 'squeeze_dims'")
    axis = axis if axis is not None else squeeze_dims
    x = _in(input)
    s = _lib.static_shape(x)
    axes = None if axis is None else tuple(
        int(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    out = None
    if s.ndims is not None:
        dims = s.as_list()
        if axes is None:
            out = None if None in dims else [d for d in dims if d != 1]
        else:
            axes = tuple(_axis(a, len(dims)) for a in axes)
            for a in axes:
                if dims[a] is not None and dims[a] != 1:
                    raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, "
                                     f"got {dims[a]}")
            out = [d for i, d in enumerate(dims) if i not in axes]
    return _lib.apply_op("Squeeze", name, [x], _squeeze, _lib.static_dtype(x), out,
                         axis=axes)


# ---- joins and splits ------------------------------------------------------------------------


def _same_dtype(op: str, xs: list[Any]) -> Any:
    dts = {np.dtype(d) for d in (_lib.static_dtype(x) for x in xs) if d is not None}
    if len(dts) > 1:
        raise TypeError(f"{op}: the inputs must have one dtype; got "
                        f"{sorted(d.name for d in dts)}")
    return dts.pop() if dts else None


def _concat(needs: Any, *xs: Any, axis: int) -> Any:
    arrs = [np.asarray(x) for x in xs]
    a = axis % arrs[0].ndim
    bounds = np.cumsum([v.shape[a] for v in arrs])[:-1]
    return np.concatenate(arrs, a), lambda dy: tuple(np.split(dy, bounds, a))


def concat(values: Any, axis: int, name: str = "concat") -> Tensor:
    """The tensors of ``values`` joined along ``axis``, as ``tf.concat`` (TF1's argument
    order: values first).

    Raises:
        ValueError: ranks or known sizes off ``axis`` differ (TF's message).
    """
    if not isinstance(values, (list, tuple)):
        values = [values]
    xs = [_in(v) for v in values]
    if len(xs) == 1:
        return identity(xs[0], name=name)
    dt = _same_dtype("concat", xs)
    shapes = [_lib.static_shape(x) for x in xs]
    out: Any = None
    known = [s for s in shapes if s.ndims is not None]
    if known:
        r = known[0].ndims
        a = _axis(int(axis), r)
        dims: list[Any] = list(known[0].as_list())
        total: Any = 0
        for s in shapes:
            if s.ndims is None:
                total = None
                continue
            if s.ndims != r:
                raise ValueError(f"Shape must be rank {r} but is rank {s.ndims} for "
                                 f"'{name}' (op: 'ConcatV2')")
            for i, d in enumerate(s.as_list()):
                if i == a:
                    total = None if total is None or d is None else total + d
                elif dims[i] is None:
                    dims[i] = d
                elif d is not None and d != dims[i]:
                    raise ValueError(f"Dimension {i} in both shapes must be equal, but are "
                                     f"{dims[i]} and {d}")
        dims[a] = total
        out = dims
        axis = a
    return _lib.apply_op("ConcatV2", name, xs, _concat, dt, out, axis=int(axis))


def _stack(needs: Any, *xs: Any, axis: int) -> Any:
    y = np.stack([np.asarray(x) for x in xs], axis)
    return y, lambda dy: tuple(np.take(dy, i, axis) for i in range(len(xs)))


def stack(values: Any, axis: int = 0, name: str = "stack") -> Tensor:
    """The tensors of ``values`` (one shape) stacked along a new ``axis``, as ``tf.stack``.

    Raises:
        ValueError: known shapes differ, or ``axis`` out of ``[-(R+1), R+1)``.
    """
    xs = [_in(v) for v in values]
    dt = _same_dtype("stack", xs)
    s = _lib.static_shape(xs[0])
    for x in xs[1:]:
        try:
            s = s.merge_with(_lib.static_shape(x))
        except ValueError:
            raise ValueError(f"Shapes {s} and {_lib.static_shape(x)} are incompatible "
                             f"(stack)") from None
    out = None
    a = int(axis)
    if s.ndims is not None:
        a = _axis(a, s.ndims + 1)
        dims = s.as_list()
        out = dims[:a] + [len(xs)] + dims[a:]
    return _lib.apply_op("Pack", name, xs, _stack, dt, out, axis=a)


def _take(needs: Any, x: Any, index: int, axis: int) -> Any:
    x = np.asarray(x)

    def grad(dy: Any) -> Any:
        g = np.zeros(x.shape, np.asarray(dy).dtype)
        sl = [_pyslice(None)] * x.ndim
        sl[axis] = index
        g[tuple(sl)] = dy
        return (g,)
    return np.take(x, index, axis), grad


def unstack(value: Any, num: int | None = None, axis: int = 0,
            name: str = "unstack") -> list[Tensor]:
    """The slices of ``value`` along ``axis``, a list of ``num`` tensors (known from the
    static shape when None), as ``tf.unstack``.

    Raises:
        ValueError: ``num`` not given and not known statically (TF's message).
    """
    x = _in(value)
    s = _lib.static_shape(x)
    if s.ndims is None:
        raise ValueError("Cannot infer num from shape <unknown>")
    a = _axis(int(axis), s.ndims)
    n = num if num is not None else s[a].value
    if n is None:
        raise ValueError(f"Cannot infer num from shape {s}")
    dims = s.as_list()
    out = dims[:a] + dims[a + 1:]
    return [_lib.apply_op("Unpack", name, [x], _take, _lib.static_dtype(x), out, index=i,
                          axis=a) for i in range(int(n))]


def _slice_axis(needs: Any, x: Any, start: int, stop: int, axis: int) -> Any:
    x = np.asarray(x)
    sl = [_pyslice(None)] * x.ndim
    sl[axis] = _pyslice(start, stop)
    key = tuple(sl)

    def grad(dy: Any) -> Any:
        g = np.zeros(x.shape, np.asarray(dy).dtype)
        g[key] = dy
        return (g,)
    return x[key], grad


def split(value: Any, num_or_size_splits: Any, axis: int = 0, num: int | None = None,
          name: str = "split") -> list[Tensor]:
    """``value`` split along ``axis`` into ``num_or_size_splits`` equal parts (an int) or
    parts of the given sizes (a list; one may be -1), as ``tf.split``.

    Raises:
        ValueError: an int that does not divide the known size, or sizes that do not sum
            to it (TF's messages).
    """
    x = _in(value)
    s = _lib.static_shape(x)
    if s.ndims is None:
        raise ValueError("split needs a tensor of known rank")
    a = _axis(int(axis), s.ndims)
    n = s[a].value
    if isinstance(num_or_size_splits, (int, np.integer)):
        k = int(num_or_size_splits)
        if n is None:
            raise ValueError(f"split of an unknown dimension {a} into {k} parts needs its "
                             f"size; give sizes instead")
        if k <= 0 or n % k:
            raise ValueError(f"Dimension size must be evenly divisible by {k} but is {n} "
                             f"for '{name}'")
        sizes = [n // k] * k
    else:
        sizes = [int(v) for v in num_or_size_splits]
        if sizes.count(-1) > 1:
            raise ValueError("split: at most one size may be -1")
        if -1 in sizes:
            if n is None:
                raise ValueError("split: a -1 size needs a known dimension")
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
        if n is not None and sum(sizes) != n:
            raise ValueError(f"Determined shape must either match input shape along "
                             f"split_dim exactly if fully specified, or be less than the "
                             f"size of the input along split_dim if not fully specified.  "
                             f"Got: {sum(sizes)} vs {n}")
    outs = []
    start = 0
    dims = s.as_list()
    for k in sizes:
        shape = dims[:a] + [k] + dims[a + 1:]
        outs.append(_lib.apply_op("Split", name, [x], _slice_axis, _lib.static_dtype(x),
                                  shape, start=start, stop=start + k, axis=a))
        start += k
    return outs


def _tile(needs: Any, x: Any, multiples: Any) -> Any:
    x = np.asarray(x)
    m = tuple(int(v) for v in np.asarray(multiples).reshape(-1))
    y = np.tile(x, m)

    def grad(dy: Any) -> Any:
        shp = []
        for k, d in zip(m, x.shape):
            shp += [k, d]
        g = np.reshape(dy, shp).sum(axis=tuple(range(0, 2 * x.ndim, 2)))
        return (g, None)
    return y, grad


def tile(input: Any, multiples: Any, name: str | None = None) -> Tensor:
    """``input`` repeated ``multiples[i]`` times along each dimension, as ``tf.tile``.

    Raises:
        ValueError: ``multiples`` of another length than the rank.
    """
    x = _in(input)
    s = _lib.static_shape(x)
    m = _ints(multiples, "multiples")
    out = None
    if m is not None and s.ndims is not None:
        if len(m) != s.ndims:
            raise ValueError(f"Shape must be rank {s.ndims} for multiples; got {m}")
        out = [None if d is None else d * k for d, k in zip(s.as_list(), m)]
    return _lib.apply_op("Tile", name, [x, multiples], _tile, _lib.static_dtype(x), out)


def _pad(needs: Any, x: Any, paddings: Any, mode: str, value: Any) -> Any:
    x = np.asarray(x)
    p = np.asarray(paddings, np.int64)
    if mode == "CONSTANT":
        y = np.pad(x, p, mode="constant", constant_values=value)
    else:
        y = np.pad(x, p, mode="reflect" if mode == "REFLECT" else "symmetric")
    key = tuple(_pyslice(int(lo), int(lo) + n) for (lo, _), n in zip(p, x.shape))
    if mode != "CONSTANT":
        return y, lambda dy: (None, None)
    return y, lambda dy: (np.asarray(dy)[key], None)


def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", name: str | None = None,
        constant_values: Any = 0) -> Tensor:
    """``tensor`` padded by ``paddings`` (``[rank, 2]``: before and after each dimension),
    as ``tf.pad``; ``mode`` ``"CONSTANT"`` (with ``constant_values``; differentiable),
    ``"REFLECT"`` or ``"SYMMETRIC"`` (no gradient in psrt).

    Raises:
        ValueError: another ``mode`` (case-insensitive, as TF's).
    """
    m = mode.upper()
    if m not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise ValueError(f"Unknown padding mode: {mode!r}; expected 'CONSTANT', 'REFLECT' "
                         f"or 'SYMMETRIC'")
    x = _in(tensor)
    s = _lib.static_shape(x)
    p = _lib.constant_value(paddings)
    out = None
    if p is not None and s.ndims is not None:
        p = np.asarray(p).reshape(-1, 2)
        out = [None if d is None else d + int(lo) + int(hi) for d, (lo, hi) in
               zip(s.as_list(), p)]
    return _lib.apply_op("Pad", name, [x, paddings], _pad, _lib.static_dtype(x), out,
                         mode=m, value=constant_values)


# ---- gathers ---------------------------------------------------------------------------------


def _gather(needs: Any, params: Any, indices: Any, axis: int) -> Any:
    params, idx = np.asarray(params), np.asarray(indices)
    n = params.shape[axis]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].flat[0]
        raise _errors.InvalidArgumentError(
            None, None, f"indices = {int(bad)} is not in [0, {n})")

    def grad(dy: Any) -> Any:
        g = np.zeros(params.shape, np.asarray(dy).dtype)
        moved = np.moveaxis(g, axis, 0)
        d = np.asarray(dy)
        d = np.moveaxis(d.reshape(params.shape[:axis] + (idx.size,) +
                                  params.shape[axis + 1:]), axis, 0)
        np.add.at(moved, idx.reshape(-1), d)
        return (g, None)
    return np.take(params, idx, axis), grad


def gather(params: Any, indices: Any, validate_indices: Any = None, name: str | None = None,
           axis: int = 0, batch_dims: int = 0) -> Tensor:
    """The slices of ``params`` at ``indices`` along ``axis``, as ``tf.gather``: shape
    ``params.shape[:axis] + indices.shape + params.shape[axis+1:]``. The gradient is dense
    here (psrt.nn.embedding_lookup gives row-sparse ones for variables on the ps).

    Raises:
        ValueError: ``batch_dims`` other than 0 (not supported).
        InvalidArgumentError (at run): an index out of range (TF's CPU message).
    """
    if batch_dims:
        raise ValueError(f"gather: batch_dims={batch_dims} is not supported by psrt; "
                         f"expected 0")
    p = _in(params)
    s = _lib.static_shape(p)
    si = _lib.static_shape(indices)
    out = None
    a = int(axis)
    if s.ndims is not None:
        a = _axis(a, s.ndims)
        out = s[:a].concatenate(si).concatenate(s[a + 1:])
    return _lib.apply_op("GatherV2", name, [p, indices], _gather, _lib.static_dtype(p), out,
                         axis=a)


def _gather_nd(needs: Any, params: Any, indices: Any) -> Any:
    params, idx = np.asarray(params), np.asarray(indices)
    key = tuple(np.moveaxis(idx, -1, 0))

    def grad(dy: Any) -> Any:
        g = np.zeros(params.shape, np.asarray(dy).dtype)
        np.add.at(g, key, dy)
        return (g, None)
    return params[key], grad


def gather_nd(params: Any, indices: Any, name: str | None = None,
              batch_dims: int = 0) -> Tensor:
    """The slices of ``params`` at the index tuples in ``indices``' last dimension, as
    ``tf.gather_nd``: shape ``indices.shape[:-1] + params.shape[indices.shape[-1]:]``."""
    if batch_dims:
        raise ValueError(f"gather_nd: batch_dims={batch_dims} is not supported; expected 0")
    p = _in(params)
    s, si = _lib.static_shape(p), _lib.static_shape(indices)
    out = None
    if s.ndims is not None and si.ndims is not None and si[-1].value is not None:
        out = si[:-1].concatenate(s[si[-1].value:])
    return _lib.apply_op("GatherNd", name, [p, indices], _gather_nd, _lib.static_dtype(p),
                         out)


def _one_hot(needs: Any, indices: Any, depth: int, on: Any, off: Any, axis: int,
             dtype: np.dtype) -> Any:
    idx = np.asarray(indices)
    eye = np.arange(depth).reshape((1,) * idx.ndim + (depth,))
    y = np.where(idx[..., None] == eye, on, off).astype(dtype)
    if axis != -1:
        y = np.moveaxis(y, -1, axis)
    return y, lambda dy: (None,)


def one_hot(indices: Any, depth: int, on_value: Any = None, off_value: Any = None,
            axis: int | None = None, dtype: Any = None, name: str | None = None) -> Tensor:
    """One-hot rows of ``depth`` entries for ``indices``, as ``tf.one_hot``: ``on_value``
    (1) at the index, ``off_value`` (0) elsewhere (an index outside ``[0, depth)`` gives a
    row of ``off_value``); the new dimension at ``axis`` (default last); dtype float32
    unless ``dtype`` or the values say otherwise."""
    if dtype is not None:
        dt = _lib.np_dtype(dtype)
    elif on_value is not None or off_value is not None:
        dt = _lib.python_value_dtype(on_value if on_value is not None else off_value)
    else:
        dt = np.dtype(np.float32)
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value
    si = _lib.static_shape(indices)
    a = -1 if axis is None else int(axis)
    out = None
    if si.ndims is not None:
        dims = si.as_list()
        pos = len(dims) if a == -1 else _axis(a, len(dims) + 1)
        out = dims[:pos] + [int(depth)] + dims[pos:]
    return _lib.apply_op("OneHot", name, [indices], _one_hot, dt, out, depth=int(depth),
                         on=on, off=off, axis=a, dtype=dt)


# ---- fills and selection ---------------------------------------------------------------------


def _fill(needs: Any, dims: Any, value: Any, dtype: np.dtype) -> Any:
    shp = tuple(int(d) for d in np.asarray(dims).reshape(-1))
    return np.full(shp, value, dtype), lambda dy: (None, None)


def fill(dims: Any, value: Any, name: str | None = None) -> Tensor:
    """A tensor of shape ``dims`` filled with ``value`` (its dtype: float32 for a Python
    float), as ``tf.fill``."""
    dt = _lib.static_dtype(value)
    d = _ints(dims, "dims")
    return _lib.apply_op("Fill", name, [dims, value], _fill, dt, d, dtype=dt)


def zeros(shape: Any, dtype: Any = np.float32, name: str | None = None) -> Tensor:
    """A tensor of zeros of ``shape`` and ``dtype`` (float32), as ``tf.zeros``."""
    dt = _lib.np_dtype(dtype)
    return _lib.apply_op("zeros", name, [shape, dt.type(0)], _fill, dt, _ints(shape, "shape"),
                         dtype=dt)


def ones(shape: Any, dtype: Any = np.float32, name: str | None = None) -> Tensor:
    """A tensor of ones of ``shape`` and ``dtype`` (float32), as ``tf.ones``."""
    dt = _lib.np_dtype(dtype)
    return _lib.apply_op("ones", name, [shape, dt.type(1)], _fill, dt, _ints(shape, "shape"),
                         dtype=dt)


def _like(needs: Any, x: Any, value: Any, dtype: np.dtype) -> Any:
    return np.full(np.shape(x), value, dtype), lambda dy: (None,)


def zeros_like(tensor: Any, dtype: Any = None, name: str | None = None,
               optimize: bool = True) -> Tensor:
    """Zeros of ``tensor``'s shape and dtype (or ``dtype``), as ``tf.zeros_like``."""
    x = _in(tensor)
    dt = _lib.np_dtype(dtype) if dtype is not None else _lib.static_dtype(x)
    return _lib.apply_op("ZerosLike", name, [x], _like, dt, _lib.static_shape(x), value=0,
                         dtype=dt)


def ones_like(tensor: Any, dtype: Any = None, name: str | None = None,
              optimize: bool = True) -> Tensor:
    """Ones of ``tensor``'s shape and dtype (or ``dtype``), as ``tf.ones_like``."""
    x = _in(tensor)
    dt = _lib.np_dtype(dtype) if dtype is not None else _lib.static_dtype(x)
    return _lib.apply_op("OnesLike", name, [x], _like, dt, _lib.static_shape(x), value=1,
                         dtype=dt)


def _select(needs: Any, c: Any, x: Any, y: Any) -> Any:
    c, x, y = np.asarray(c), np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        raise _errors.InvalidArgumentError(
            None, None, f"'then' and 'else' must have the same size.  but received: "
            f"{list(x.shape)} vs. {list(y.shape)}")
    if c.shape != x.shape:
        if c.ndim != 1 or x.ndim < 1 or c.shape[0] != x.shape[0]:
            raise _errors.InvalidArgumentError(
                None, None, f"'cond' must be a scalar, a vector of the first dimension of "
                f"'then', or of its shape: {list(c.shape)} vs. {list(x.shape)}")
        c = c.reshape(c.shape + (1,) * (x.ndim - 1))
    zero = np.zeros((), x.dtype)
    return np.where(c, x, y), lambda dy: (None, np.where(c, dy, zero), np.where(c, zero, dy))


def _where_true(needs: Any, c: Any) -> Any:
    return np.argwhere(np.asarray(c)).astype(np.int64), lambda dy: (None,)


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """TF1's ``tf.where``: with ``x`` and ``y`` (one shape), ``x`` where ``condition`` is
    true, else ``y``; ``condition`` has their shape, or is a vector of their first
    dimension selecting whole rows (no broadcasting, as TF1's Select). Without them: the
    int64 ``[n, rank]`` coordinates of the true entries. Gradient flows to the selected
    entries of ``x`` and ``y``.

    Raises:
        ValueError: only one of ``x`` and ``y`` given (TF's message).
        InvalidArgumentError (at run): shapes as above do not hold.
    """
    c = _in(condition)
    if x is None and y is None:
        r = _lib.static_shape(c).ndims
        return _lib.apply_op("Where", name, [c], _where_true, np.int64, [None, r])
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    xi, yi = _in(x), _in(y)
    shape = _lib.static_shape(xi).merge_with(_lib.static_shape(yi))
    return _lib.apply_op("Select", name, [c, xi, yi], _select, _lib.static_dtype(xi), shape)


def _slice(needs: Any, x: Any, begin: Any, size: Any) -> Any:
    x = np.asarray(x)
    b = [int(v) for v in np.asarray(begin).reshape(-1)]
    sz = [int(v) for v in np.asarray(size).reshape(-1)]
    key = tuple(_pyslice(lo, n if s == -1 else lo + s) for lo, s, n in zip(b, sz, x.shape))

    def grad(dy: Any) -> Any:
        g = np.zeros(x.shape, np.asarray(dy).dtype)
        g[key] = dy
        return (g, None, None)
    return x[key], grad


def slice(input_: Any, begin: Any, size: Any, name: str | None = None) -> Tensor:  # noqa: A001
    """The block of ``input_`` starting at ``begin`` of ``size`` (-1: to the end), as
    ``tf.slice``."""
    x = _in(input_)
    s = _lib.static_shape(x)
    b, sz = _ints(begin, "begin"), _ints(size, "size")
    out = None
    if b is not None and sz is not None and s.ndims is not None:
        out = [(None if d is None else d - lo) if k == -1 else k
               for lo, k, d in zip(b, sz, s.as_list())]
    return _lib.apply_op("Slice", name, [x, begin, size], _slice, _lib.static_dtype(x), out)


def _mask(needs: Any, x: Any, m: Any, axis: int) -> Any:
    x, m = np.asarray(x), np.asarray(m, bool)
    lead = x.shape[:axis]
    flat = x.reshape(lead + (-1,) + x.shape[axis + m.ndim:])
    mf = m.reshape(-1)

    def grad(dy: Any) -> Any:
        g = np.zeros(flat.shape, np.asarray(dy).dtype)
        sl = (np.s_[:],) * axis + (mf,)
        g[sl] = dy
        return (g.reshape(x.shape), None)
    return flat[(np.s_[:],) * axis + (mf,)], grad


def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: int | None = None
                 ) -> Tensor:
    """The entries of ``tensor`` where the bool ``mask`` (shape ``tensor.shape[axis:axis+
    k]``) is true, flattened into one dimension, as ``tf.boolean_mask``."""
    x = _in(tensor)
    s, sm = _lib.static_shape(x), _lib.static_shape(mask)
    a = 0 if axis is None else int(axis)
    out = None
    if s.ndims is not None and sm.ndims is not None:
        out = s[:a].concatenate([None]).concatenate(s[a + sm.ndims:])
    return _lib.apply_op("BooleanMask", name, [x, mask], _mask, _lib.static_dtype(x), out,
                         axis=a)
