"""IndexedSlices: a sparse gradient (rows of a variable and their indices), as
tensorflow/python/framework/indexed_slices.py. A value type every layer passes."""

from __future__ import annotations

from typing import Any

import numpy as np


class IndexedSlices:
    """A row-sparse gradient, as ``tf.IndexedSlices``: ``values[j]`` is the gradient of row
    ``indices[j]`` of a variable of ``dense_shape``. Duplicate indices are summed on the ps.

    Args:
        values: Array [k, *dense_shape[1:]] of the variable's dtype.
        indices: int64 array [k] of row indices in [0, dense_shape[0]).
        dense_shape: The variable's shape (optional).
    """

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None) -> None:
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    def __repr__(self) -> str:
        return (f"IndexedSlices(indices={np.shape(self.indices)}, "
                f"values={np.shape(self.values)}, dense_shape={self.dense_shape})")
