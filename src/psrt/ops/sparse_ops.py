"""TF1's ``sparse_to_dense`` (tensorflow/python/ops/sparse_ops.py, r1.15) as a graph op over
numpy, with TF's gradient (sparse_grad.py ``_SparseToDenseGrad``): the values' gradient is
the incoming gradient gathered at the indices, the default value's is the sum of the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors as _errors
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.tensor import Tensor
from psrt.framework.tensor_shape import TensorShape


def _in(x: Any) -> Any:
    return x if _lib.is_graph_value(x) else constant(x)


def _index_rows(indices: np.ndarray) -> np.ndarray:
    """``sparse_indices`` as an [N, R] matrix (a scalar is one index of a vector, a vector N
    indices of a vector)."""
    if indices.ndim == 0:
        return indices.reshape(1, 1)
    if indices.ndim == 1:
        return indices.reshape(-1, 1)
    if indices.ndim == 2:
        return indices
    raise _errors.InvalidArgumentError(
        None, None, f"sparse_indices should be a scalar, vector, or matrix, got shape "
        f"{list(indices.shape)}")


def _sparse_to_dense(needs: Any, indices: Any, shape: Any, values: Any, default: Any,
                     validate: bool) -> Any:
    idx = _index_rows(np.asarray(indices))
    out_shape = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    vals = np.asarray(values)
    n, r = idx.shape
    if r != len(out_shape):
        raise _errors.InvalidArgumentError(
            None, None, f"sparse_indices has {r} columns but output_shape has "
            f"{len(out_shape)} dimensions")
    if vals.ndim > 1 or (vals.ndim == 1 and vals.shape[0] != n):
        raise _errors.InvalidArgumentError(
            None, None, f"sparse_values has incorrect shape {list(vals.shape)}, should be [] "
            f"or [{n}]")
    if np.asarray(default).ndim != 0:
        raise _errors.InvalidArgumentError(None, None, "default_value should be a scalar")
    for i in range(n):
        row = idx[i]
        if np.any(row < 0) or np.any(row >= np.asarray(out_shape)):
            raise _errors.InvalidArgumentError(
                None, None, f"indices[{i}] = {row.tolist()} is out of bounds: need 0 <= "
                f"index < {list(out_shape)}")
        if validate and i:
            prev = tuple(idx[i - 1])
            if tuple(row) == prev:
                raise _errors.InvalidArgumentError(
                    None, None, f"indices[{i}] = {row.tolist()} is repeated")
            if tuple(row) < prev:
                raise _errors.InvalidArgumentError(
                    None, None, f"indices[{i}] = {row.tolist()} is out of order")
    y = np.full(out_shape, default, dtype=vals.dtype)
    key = tuple(idx.T)
    y[key] = vals

    def grad(dy: Any) -> Any:
        dy = np.asarray(dy)
        picked = dy[key]
        d_values = picked if vals.ndim == 1 else picked.sum()
        return None, None, d_values, np.asarray(dy.sum() - picked.sum(), dy.dtype)
    return y, grad


def sparse_to_dense(sparse_indices: Any, output_shape: Any, sparse_values: Any,
                    default_value: Any = 0, validate_indices: bool = True,
                    name: str | None = None) -> Tensor:
    """A dense tensor of ``output_shape`` holding ``sparse_values`` at ``sparse_indices``
    and ``default_value`` elsewhere, as ``tf.sparse_to_dense``.

    Args:
        sparse_indices: int32/int64, a scalar, a vector [N] (indices of a vector) or a
            matrix [N, R] (index tuples); with ``validate_indices``, in lexicographic order
            without repeats.
        output_shape: A 1-D int vector [R].
        sparse_values: A scalar (every index gets it) or a vector [N].
        default_value: A scalar of the values' dtype.

    Returns:
        A Tensor of ``sparse_values``' dtype and shape ``output_shape``.

    Raises:
        InvalidArgumentError (at run): an index out of bounds, repeated or out of order,
            or shapes that do not match (TF's kernel messages).
    """
    values = _in(sparse_values)
    dt = _lib.static_dtype(values)
    c = _lib.constant_value(output_shape)
    if c is not None:
        shape = TensorShape([int(d) for d in np.asarray(c).reshape(-1)])
    else:
        s = _lib.static_shape(output_shape)
        n = s[0].value if s.ndims == 1 else None
        shape = TensorShape(None) if n is None else TensorShape([None] * n)
    default = default_value if _lib.is_graph_value(default_value) else \
        constant(np.asarray(default_value, dtype=dt))
    return _lib.apply_op("SparseToDense", name, [sparse_indices, output_shape, values, default],
                         _sparse_to_dense, dt, shape, validate=bool(validate_indices))
