"""Partitioners, as TF1's ``tensorflow/python/ops/partitioned_variables.py``.

A partitioner is a function ``partitioner(shape, dtype) -> list of int`` (one entry per
dimension: how many parts to split it into) given to ``psrt.get_variable(partitioner=...)``
or ``psrt.variable_scope(partitioner=...)``; the variable becomes a
:class:`psrt.PartitionedVariable` whose parts are placed one by one (round robin over the ps
tasks under ``replica_device_setter``). psrt splits along axis 0 only (the rows of an
embedding table, which is what TF's embedding lookups and the ps kernels need), so each
partitioner here takes ``axis=0`` and raises for any other axis. The arithmetic is TF's:

* :func:`fixed_size_partitioner`: ``min(num_shards, rows)`` parts.
* :func:`min_max_variable_partitioner`: ``max(1, min(rows, max_partitions,
  ceil(total_bytes / min_slice_size)))`` parts, so each part holds at least
  ``min_slice_size`` bytes (256 KiB by default).
* :func:`variable_axis_size_partitioner`: ``ceil(rows / max(1, floor(max_shard_bytes /
  bytes_per_row)))`` parts, capped by ``max_shards``, so each part holds at most
  ``max_shard_bytes`` where one row allows it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["fixed_size_partitioner", "min_max_variable_partitioner",
           "variable_axis_size_partitioner"]


def _check_axis(axis: Any, who: str) -> None:
    if axis != 0:
        raise ValueError(f"{who}: psrt partitions along axis 0 only; got axis={axis!r}")


def _dims(shape: Any) -> list[int]:
    """A fully defined shape (sequence of int, or anything with ``as_list()``) as ints."""
    dims = shape.as_list() if hasattr(shape, "as_list") else list(shape)
    if any(d is None for d in dims):
        raise ValueError(f"shape is not fully defined: {dims}")
    return [int(d) for d in dims]


def _element_size(dtype: Any, bytes_per_string_element: int) -> int:
    """Bytes per element: the dtype's item size, or ``bytes_per_string_element`` for
    strings (TF's estimate)."""
    dt = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    if dt.kind in "OSU":
        return bytes_per_string_element
    return dt.itemsize


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0,
                                 min_slice_size: int = 256 << 10,
                                 bytes_per_string_element: int = 16
                                 ) -> Callable[..., list[int]]:
    """A partitioner giving each part at least ``min_slice_size`` bytes, in at most
    ``max_partitions`` parts, as ``tf.min_max_variable_partitioner``.

    For a variable of ``total`` bytes (elements x element size) it asks for ``max(1,
    min(rows, max_partitions, ceil(total / min_slice_size)))`` parts along axis 0: a
    float32 [1024, 1024] variable (4 MiB) gets 16 parts with ``max_partitions >= 16`` and
    the defaults, ``max_partitions`` parts otherwise (TF's documented example).

    Args:
        max_partitions: Upper bound on the number of parts (int >= 1). Default 1.
        axis: The axis to split: 0 (psrt splits rows only).
        min_slice_size: Minimum bytes per part (int >= 1). Default 256 KiB.
        bytes_per_string_element: Bytes assumed per element of a string variable.

    Returns:
        ``partitioner(shape, dtype) -> list of int``, for ``get_variable`` and
        ``variable_scope``.

    Raises:
        ValueError: ``axis`` is not 0, ``max_partitions`` or ``min_slice_size`` is not a
            positive integer; at call time, a scalar or not fully defined shape.
    """
    _check_axis(axis, "min_max_variable_partitioner")
    for name, value in (("max_partitions", max_partitions), ("min_slice_size", min_slice_size),
                        ("bytes_per_string_element", bytes_per_string_element)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"min_max_variable_partitioner: {name} must be a positive "
                             f"integer; got {value!r}")

    def partitioner(shape: Sequence[int], dtype: Any = np.float32,
                    **unused: Any) -> list[int]:
        dims = _dims(shape)
        if axis >= len(dims):
            raise ValueError(f"Can not partition variable along axis {axis} when shape is "
                             f"only {dims}")
        total = math.prod(dims) * _element_size(dtype, bytes_per_string_element)
        parts = [1] * len(dims)
        parts[axis] = max(1, min(dims[axis], max_partitions,
                                 int(math.ceil(total / min_slice_size))))
        return parts
    return partitioner


def variable_axis_size_partitioner(max_shard_bytes: int, axis: int = 0,
                                   bytes_per_string_element: int = 16,
                                   max_shards: int | None = None
                                   ) -> Callable[..., list[int]]:
    """A partitioner keeping each part under ``max_shard_bytes``, as
    ``tf.variable_axis_size_partitioner``.

    A row (one slice along axis 0) holds ``bytes_per_row`` bytes; a part holds
    ``max(1, floor(max_shard_bytes / bytes_per_row))`` rows, so the variable gets
    ``ceil(rows / rows_per_part)`` parts, at most ``max_shards`` when given (parts may then
    exceed ``max_shard_bytes``, as they do when a single row is larger). ``(64 << 20) - 1``
    is TF's suggested ``max_shard_bytes``.

    Args:
        max_shard_bytes: The most bytes a part should hold (int >= 1).
        axis: The axis to split: 0 (psrt splits rows only).
        bytes_per_string_element: Bytes assumed per element of a string variable (>= 1).
        max_shards: Upper bound on the number of parts (int >= 1), or None: no bound.

    Returns:
        ``partitioner(shape, dtype) -> list of int``, for ``get_variable`` and
        ``variable_scope``.

    Raises:
        ValueError: "Both max_shard_bytes and bytes_per_string_element must be positive."
            or "max_shards must be positive." (TF's messages, with the value), or ``axis``
            is not 0; at call time, a scalar or not fully defined shape.
    """
    _check_axis(axis, "variable_axis_size_partitioner")
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError(f"Both max_shard_bytes and bytes_per_string_element must be "
                         f"positive; got max_shard_bytes={max_shard_bytes!r}, "
                         f"bytes_per_string_element={bytes_per_string_element!r}")
    if max_shards is not None and max_shards < 1:
        raise ValueError(f"max_shards must be positive; got {max_shards!r}")

    def partitioner(shape: Sequence[int], dtype: Any = np.float32,
                    **unused: Any) -> list[int]:
        dims = _dims(shape)
        if axis >= len(dims):
            raise ValueError(f"Can not partition variable along axis {axis} when shape is "
                             f"only {dims}")
        if dims[axis] == 0:
            return [1] * len(dims)
        size = _element_size(dtype, bytes_per_string_element)
        bytes_per_row = (math.prod(dims) / dims[axis]) * size
        rows_per_part = max(1, math.floor(max_shard_bytes / bytes_per_row))
        shards = int(math.ceil(dims[axis] / rows_per_part))
        if max_shards:
            shards = min(max_shards, shards)
        parts = [1] * len(dims)
        parts[axis] = shards
        return parts
    return partitioner


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Callable[..., list[int]]:
    """Splits axis 0 into ``num_shards`` parts, as ``tf.fixed_size_partitioner``.

    Raises:
        ValueError: ``num_shards`` < 1, or ``axis`` is not 0 (psrt partitions rows only).
    """
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer; got {num_shards!r}")
    if axis != 0:
        raise ValueError(f"psrt partitions along axis 0 only; got axis={axis}")

    def partitioner(shape, dtype=None):
        parts = [1] * len(shape)
        parts[0] = min(num_shards, shape[0])
        return parts
    return partitioner
