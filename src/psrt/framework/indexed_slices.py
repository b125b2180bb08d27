"""IndexedSlices: a sparse gradient (rows of a variable and their indices), as
tensorflow/python/framework/indexed_slices.py. A value type every layer passes: of numpy arrays
(the gradients a training step pushes) or of graph tensors (what ``tf.gradients`` returns for a
variable read through ``embedding_lookup``), fetched as an :class:`IndexedSlicesValue`."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from psrt.framework.tensor import Tensor


class IndexedSlicesValue(collections.namedtuple("IndexedSlicesValue",
                                                ["values", "indices", "dense_shape"])):
    """An IndexedSlices' value: the namedtuple ``(values, indices, dense_shape)`` of numpy
    arrays, as ``tf.IndexedSlicesValue``; what ``Session.run`` returns for an
    :class:`IndexedSlices` of tensors."""

    __slots__ = ()


class IndexedSlices:
    """A row-sparse gradient, as ``tf.IndexedSlices``: ``values[j]`` is the gradient of row
    ``indices[j]`` of a variable of ``dense_shape``; rows of repeated indices add up (on the
    ps, and in ``psrt.convert_to_tensor``, which makes it dense).

    Args:
        values: [k, *dense_shape[1:]] of the variable's dtype: an array or a
            :class:`psrt.Tensor`.
        indices: [k] integer row indices in [0, dense_shape[0]): an array or a Tensor.
        dense_shape: The variable's shape (a tuple, an int array or a Tensor; optional).
    """

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None) -> None:
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    @property
    def dtype(self) -> Any:
        """The dtype of ``values`` (numpy; None when not declared)."""
        return getattr(self.values, "dtype", None)

    @property
    def name(self) -> str | None:
        """The name of ``values`` when it is a Tensor (TF's ``IndexedSlices.name``)."""
        return self.values.name if isinstance(self.values, Tensor) else None

    @property
    def op(self) -> Any:
        """The op of ``values`` when it is a Tensor."""
        return self.values.op if isinstance(self.values, Tensor) else None

    @property
    def graph(self) -> Any:
        """The graph of ``values`` when it is a Tensor."""
        return self.values.graph if isinstance(self.values, Tensor) else None

    # ---- the executor's fetch protocol (as SparseTensor's) ----------------------------------

    def _components(self) -> tuple[Any, Any, Any]:
        return self.values, self.indices, self.dense_shape

    def _psrt_fetch_inputs(self, feeds: Any, fetched: Any) -> list[Any]:
        return [c if isinstance(c, Tensor) else None for c in self._components()]

    def _psrt_compute(self, values: list[Any], feeds: Any) -> IndexedSlicesValue:
        comps = [v if isinstance(c, Tensor) else None if c is None else np.asarray(c)
                 for c, v in zip(self._components(), values)]
        return IndexedSlicesValue(*comps)

    def __repr__(self) -> str:
        def show(c: Any) -> str:
            return c.name if isinstance(c, Tensor) else str(np.shape(c))
        shape = self.dense_shape
        return (f"IndexedSlices(indices={show(self.indices)}, values={show(self.values)}, "
                f"dense_shape={shape.name if isinstance(shape, Tensor) else shape})")
