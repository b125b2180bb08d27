"""TF's strided slice in numpy: what ``Tensor[...]`` and ``tf.strided_slice`` compute.

A slice spec is a tuple of entries, as TF's ``array_ops._slice_helper`` reads a Python key:
``Ellipsis``, ``None`` (``tf.newaxis``: a new axis of size 1), an integer (the axis is
indexed and removed: TF's ``shrink_axis_mask``) or a ``slice`` (start, stop, step; each may
be omitted: TF's ``begin_mask`` / ``end_mask``). An integer or a slice bound may be a
:class:`Dyn`: a value read at run time from one of the op's other inputs (a scalar int32 or
int64 tensor, or an element of a 1-D one), as TF packs tensor indices into ``begin``/``end``.

Bounds follow Python's (and TF's) rules: negative values count from the end, slice bounds
are clamped to the axis, an integer index out of range is an error. TF's own errors are kept:
fancy (array) indices and more than one ellipsis are refused when the op is built.

This module is pure numpy; the op is built by ``framework/tensor.py`` (``Tensor[...]``) and
``ops/indexing_ops.py`` (``tf.strided_slice``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework.tensor_shape import TensorShape


class Dyn:
    """A slice bound or index read at run time: element ``element`` of dynamic input
    ``input`` (``element`` None: the input is a scalar)."""

    __slots__ = ("input", "element")

    def __init__(self, input: int, element: int | None = None) -> None:
        self.input = input
        self.element = element

    def value(self, dyn: Sequence[Any]) -> int:
        v = np.asarray(dyn[self.input])
        if v.dtype.kind not in "iu":
            raise _errors.InvalidArgumentError(
                None, None, f"strided_slice: a slice index must be int32 or int64; got "
                f"dtype {v.dtype.name}")
        return int(v if self.element is None else v.reshape(-1)[self.element])

    def __repr__(self) -> str:
        return f"Dyn({self.input}, {self.element})"


INDEX_HELP = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
               "tf.int32/tf.int64 tensors are valid indices")


def check_spec(spec: tuple[Any, ...], key: Any) -> None:
    """TF's build-time checks of a slice spec (``_slice_helper``).

    Raises:
        TypeError: an entry is not an integer, a slice, ``...``, ``None`` or a Dyn.
        ValueError: more than one ellipsis.
    """
    ellipses = 0
    for e in spec:
        if e is Ellipsis:
            ellipses += 1
        elif e is None or isinstance(e, (Dyn, int, np.integer)) and not isinstance(e, bool):
            continue
        elif isinstance(e, slice):
            for b in (e.start, e.stop, e.step):
                if not (b is None or isinstance(b, (Dyn, int, np.integer))) or \
                        isinstance(b, bool):
                    raise TypeError(f"{INDEX_HELP}, got {key!r}")
            if isinstance(e.step, (int, np.integer)) and e.step == 0:
                raise ValueError("strided_slice: a slice step must be non-zero; got 0")
        else:
            raise TypeError(f"{INDEX_HELP}, got {key!r}")
    if ellipses > 1:
        raise ValueError("Multiple ellipses in slice spec not allowed")


def _expanded(spec: tuple[Any, ...], rank: int) -> list[Any]:
    """The spec with its ellipsis (or the implicit trailing one) replaced by whole slices,
    one per axis it stands for."""
    consuming = sum(1 for e in spec if e is not None and e is not Ellipsis)
    if consuming > rank:
        raise ValueError(f"Index out of range using input dim {rank}; input has only "
                         f"{rank} dims")
    fill = [slice(None)] * (rank - consuming)
    out: list[Any] = []
    seen = False
    for e in spec:
        if e is Ellipsis:
            out.extend(fill)
            seen = True
        else:
            out.append(e)
    if not seen:
        out.extend(fill)
    return out


def static_shape(spec: tuple[Any, ...], shape: TensorShape) -> TensorShape:
    """The static shape of ``x[spec]`` for ``x`` of static ``shape`` (None dimensions and
    run-time bounds give None sizes; an unknown rank gives an unknown shape).

    Raises:
        ValueError: an integer index out of range of a known dimension, or more indices than
            the rank, as TF's shape inference.
    """
    if shape.dims is None:
        return TensorShape(None)
    dims = [d.value for d in shape.dims]
    out: list[int | None] = []
    axis = 0
    for e in _expanded(spec, len(dims)):
        if e is None:
            out.append(1)
            continue
        n = dims[axis]
        if isinstance(e, slice):
            if n is None or any(isinstance(b, Dyn) for b in (e.start, e.stop, e.step)):
                out.append(None)
            else:
                out.append(len(range(*e.indices(n))))
        elif not isinstance(e, Dyn) and n is not None and not -n <= int(e) < n:
            raise ValueError(f"slice index {int(e)} of dimension {axis} out of bounds.")
        axis += 1
    return TensorShape(out)


def _concrete(spec: tuple[Any, ...], dyn: Sequence[Any]) -> tuple[Any, ...]:
    def bound(b: Any) -> Any:
        return b.value(dyn) if isinstance(b, Dyn) else b

    key: list[Any] = []
    for e in spec:
        if isinstance(e, slice):
            step = bound(e.step)
            if step == 0:
                raise _errors.InvalidArgumentError(None, None,
                                                   "strided_slice: slice step must be non-zero")
            key.append(slice(bound(e.start), bound(e.stop), step))
        else:
            key.append(bound(e))
    return tuple(key)


def _index_key(key: tuple[Any, ...], shape: tuple[int, ...]) -> None:
    """InvalidArgumentError for an integer index out of range (numpy's IndexError)."""
    axis = 0
    for e in _expanded(key, len(shape)):
        if e is None:
            continue
        if not isinstance(e, slice):
            n = shape[axis]
            if not -n <= e < n:
                raise _errors.InvalidArgumentError(
                    None, None, f"slice index {e} of dimension {axis} out of bounds.")
        axis += 1


def strided_slice_kernel(needs: Any, x: Any, *dyn: Any, spec: tuple[Any, ...]) -> Any:
    """The op's kernel (``op_def_library``'s form): ``x[spec]`` and its gradient, the
    incoming gradient written into zeros of ``x``'s shape (a basic slice reaches each
    element at most once, so a plain assignment is exact). Run-time bounds get no gradient.
    """
    x = np.asarray(x)
    key = _concrete(spec, dyn)
    _index_key(key, x.shape)
    y = np.array(x[key])

    def grad(dy: Any) -> Any:
        dx = np.zeros(x.shape, dtype=np.result_type(dy))
        dx[key] = dy
        return (dx,) + (None,) * len(dyn)
    return y, grad


def spec_from_masks(begin: Sequence[Any], end: Sequence[Any], strides: Sequence[Any],
                    begin_mask: int, end_mask: int, ellipsis_mask: int, new_axis_mask: int,
                    shrink_axis_mask: int) -> tuple[Any, ...]:
    """The slice spec ``tf.strided_slice``'s arguments describe (TF's StridedSlice op: bit i
    of each mask applies to entry i of ``begin``/``end``/``strides``)."""
    spec: list[Any] = []
    for i in range(len(begin)):
        bit = 1 << i
        if ellipsis_mask & bit:
            spec.append(Ellipsis)
        elif new_axis_mask & bit:
            spec.append(None)
        elif shrink_axis_mask & bit:
            spec.append(begin[i])
        else:
            spec.append(slice(None if begin_mask & bit else begin[i],
                              None if end_mask & bit else end[i], strides[i]))
    return tuple(spec)
