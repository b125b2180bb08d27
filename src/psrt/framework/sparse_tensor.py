"""Sparse tensors, as TF1's ``tf.SparseTensor``, ``tf.SparseTensorValue`` and
``tf.sparse_placeholder`` (tensorflow/python/framework/sparse_tensor.py,
tensorflow/python/ops/array_ops.py).

A sparse tensor of rank R with N stored entries is three arrays: ``indices`` (int64 [N, R],
the coordinates of each entry, in row-major order), ``values`` ([N], any dtype) and
``dense_shape`` (int64 [R]). A :class:`SparseTensor` holds them as constants or as
:class:`psrt.Tensor` objects (those of a :func:`sparse_placeholder`, fed at each run);
``Session.run`` of a SparseTensor returns a :class:`SparseTensorValue`, as TF's. Multi-hot
features (a user's clicked items, a document's words) are SparseTensors of ids, the input
of ``psrt.nn.embedding_lookup_sparse``.
"""

from __future__ import annotations

import collections
from typing import Any, Iterator

import numpy as np

from psrt.framework import tensor as _graph


class SparseTensorValue(collections.namedtuple("SparseTensorValue",
                                               ["indices", "values", "dense_shape"])):
    """A sparse tensor's value: the namedtuple ``(indices, values, dense_shape)`` of numpy
    arrays, as ``tf.SparseTensorValue`` (``tf.compat.v1.SparseTensorValue``). What
    ``Session.run`` returns for a :class:`SparseTensor`, and what a sparse placeholder is
    fed with (a plain 3-tuple works too)."""

    __slots__ = ()


def _component(x: Any, dtype: Any, what: str) -> Any:
    """A SparseTensor component: a Tensor as it is, anything else as a numpy array."""
    if isinstance(x, _graph.Tensor):
        return x
    arr = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if arr.dtype == object:
        raise TypeError(f"SparseTensor {what} must be an array; got {x!r}")
    return arr


class SparseTensor:
    """A sparse tensor, as ``tf.SparseTensor`` (indices, values, dense_shape).

    Args:
        indices: int64 array [N, R] (or a :class:`psrt.Tensor`): the coordinates of the N
            stored entries, in canonical row-major order.
        values: Array [N] (or a Tensor): the entries, e.g. int64 ids or float32 weights.
        dense_shape: int64 array [R] (or a Tensor): the shape of the dense tensor.

    Raises:
        ValueError: constant components whose shapes disagree (indices not [N, R], values
            not [N], dense_shape not [R]).

    Example::

        sp_ids = psrt.SparseTensor(indices=[[0, 0], [0, 1], [1, 0]], values=[3, 7, 3],
                                   dense_shape=[2, 2])
    """

    def __init__(self, indices: Any, values: Any, dense_shape: Any) -> None:
        self._indices = _component(indices, np.int64, "indices")
        self._values = _component(values, None, "values")
        self._dense_shape = _component(dense_shape, np.int64, "dense_shape")
        ind, val, shp = self._indices, self._values, self._dense_shape
        if isinstance(ind, np.ndarray):
            if ind.size == 0:
                ind = self._indices = ind.reshape(0, -1 if not isinstance(shp, np.ndarray)
                                                  else shp.size)
            if ind.ndim != 2:
                raise ValueError(f"SparseTensor indices must be a matrix [N, rank]; got shape "
                                 f"{ind.shape}")
            if isinstance(val, np.ndarray) and (val.ndim != 1 or val.shape[0] != ind.shape[0]):
                raise ValueError(f"SparseTensor values must be a vector of {ind.shape[0]} "
                                 f"entries (one per row of indices); got shape {val.shape}")
            if isinstance(shp, np.ndarray) and shp.shape != (ind.shape[1],):
                raise ValueError(f"SparseTensor dense_shape must be a vector of the rank "
                                 f"{ind.shape[1]}; got {shp.tolist()}")

    @property
    def indices(self) -> Any:
        """int64 [N, R] coordinates (an array or a :class:`psrt.Tensor`)."""
        return self._indices

    @property
    def values(self) -> Any:
        """The [N] entries (an array or a :class:`psrt.Tensor`)."""
        return self._values

    @property
    def dense_shape(self) -> Any:
        """int64 [R] dense shape (an array or a :class:`psrt.Tensor`)."""
        return self._dense_shape

    @property
    def dtype(self) -> np.dtype | None:
        """The dtype of ``values`` (None when not declared)."""
        return self._values.dtype

    def get_shape(self) -> tuple[int | None, ...] | None:
        """The dense shape as far as it is known when the graph is built: a constant
        ``dense_shape`` in full, a placeholder's declared one, or None (unknown rank)."""
        if isinstance(self._dense_shape, np.ndarray):
            return tuple(int(d) for d in self._dense_shape)
        return getattr(self, "_declared_shape", None)

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        """Same as :meth:`get_shape`."""
        return self.get_shape()

    def _components(self) -> tuple[Any, Any, Any]:
        return self._indices, self._values, self._dense_shape

    # ---- the executor's protocols: feeding and fetching -------------------------------------

    def _psrt_feed_items(self, value: Any) -> Iterator[tuple[Any, Any]]:
        """(placeholder, value) for each placeholder component, from a fed
        :class:`SparseTensorValue` or 3-tuple, as TF's session feeds a SparseTensor."""
        if isinstance(value, SparseTensor):
            value = SparseTensorValue(*value._components())
        if not isinstance(value, tuple) or len(value) != 3:
            raise TypeError(f"a SparseTensor is fed a SparseTensorValue or a tuple (indices, "
                            f"values, dense_shape); got {type(value).__name__}")
        for comp, v in zip(self._components(), value):
            if isinstance(comp, _graph.Tensor) and comp.op.type == "Placeholder":
                yield comp, v

    def _psrt_fetch_inputs(self, feeds: Any, fetched: Any) -> list[Any]:
        return [c if isinstance(c, _graph.Tensor) else None for c in self._components()]

    def _psrt_compute(self, values: list[Any], feeds: Any) -> SparseTensorValue:
        comps = [v if isinstance(c, _graph.Tensor) else c
                 for c, v in zip(self._components(), values)]
        return SparseTensorValue(*comps)

    def __repr__(self) -> str:
        def show(c: Any) -> str:
            return c.name if isinstance(c, _graph.Tensor) else f"array{list(c.shape)}"
        return (f"SparseTensor(indices={show(self._indices)}, values={show(self._values)}, "
                f"dense_shape={show(self._dense_shape)})")


def sparse_placeholder(dtype: Any, shape: Any = None, name: str | None = None
                       ) -> SparseTensor:
    """A SparseTensor fed at each run, as ``tf.sparse_placeholder``
    (``tf.compat.v1.sparse.placeholder``).

    Feed it a :class:`SparseTensorValue` (or a tuple ``(indices, values, dense_shape)``):
    ``sess.run(y, feed_dict={sp: psrt.SparseTensorValue(indices, values, shape)})``.
    Its components are three placeholders named as TF's: ``<name>/indices`` (int64
    [None, rank]), ``<name>/values`` (``dtype`` [None]) and ``<name>/shape`` (int64 [rank]).

    Args:
        dtype: The dtype of ``values`` (e.g. ``numpy.int64`` for ids).
        shape: The dense shape (a sequence whose entries may be None), or None: any rank.
        name: The name prefix; default ``"Placeholder"`` (made unique).

    Returns:
        A :class:`SparseTensor`.

    Raises:
        TypeError: ``dtype`` is not a dtype.
    """
    rank = None if shape is None else len(shape)
    base = _graph._name_for(name, "Placeholder")
    sp = SparseTensor(
        _graph.placeholder(np.int64, [None, rank], name=f"{base}/indices"),
        _graph.placeholder(dtype, [None], name=f"{base}/values"),
        _graph.placeholder(np.int64, [rank], name=f"{base}/shape"))
    sp._declared_shape = None if shape is None else tuple(  # type: ignore[attr-defined]
        None if d is None or d == -1 else int(d) for d in shape)
    return sp
