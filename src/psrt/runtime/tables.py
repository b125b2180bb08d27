"""Dynamic tables' state on the ps tasks: the session under a monitored session, and a table's
rows read and written page by page (TABLE_EXPORT / TABLE_IMPORT) for checkpoints."""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import errors
from psrt.ops.dynamic_embedding import DynamicEmbeddingVariable, _slot_names

# Rows per TABLE_EXPORT/TABLE_IMPORT frame: a page stays a few MB for rows of a few hundred
# floats.
_PAGE_ROWS = 16384


def read_state(sess: Any, table: DynamicEmbeddingVariable) -> dict[str, np.ndarray]:
    """Every row of every shard, page by page (TABLE_EXPORT)."""
    keys, counts, values = [], [], []
    slots: list[list[np.ndarray]] = [[] for _ in _slot_names(table)]
    for shard in table.shards:
        handle = sess._handle(shard)
        cursor = 0
        while cursor != -1:
            k, c, v, s, cursor = sess._client.table_export(handle, cursor, _PAGE_ROWS)
            keys.append(k)
            counts.append(c)
            values.append(v)
            for i, a in enumerate(s):
                slots[i].append(a)
    rows = (0,) + table.row_shape
    out = {f"{table.name}-keys": np.concatenate(keys) if keys else np.zeros(0, np.int64),
           f"{table.name}-counts": np.concatenate(counts) if counts else np.zeros(0, np.int64),
           f"{table.name}-values": (np.concatenate(values) if values
                                    else np.zeros(rows, table.dtype))}
    for name, parts in zip(_slot_names(table), slots):
        out[f"{table.name}/{name}-values"] = (np.concatenate(parts) if parts
                                              else np.zeros(rows, table.dtype))
    return out


def write_state(sess: Any, table: DynamicEmbeddingVariable,
                tensors: dict[str, np.ndarray]) -> None:
    """Empties every shard, then writes each row into shard ``id % num_shards``
    (TABLE_IMPORT): restores into any shard count.

    Raises:
        InvalidArgumentError: the arrays disagree in length or row shape.
        ResourceExhaustedError: a shard's rows exceed its max_rows (that shard unchanged).
    """
    keys = np.ascontiguousarray(tensors[f"{table.name}-keys"], np.int64).reshape(-1)
    counts = np.ascontiguousarray(tensors[f"{table.name}-counts"], np.int64).reshape(-1)
    values = tensors[f"{table.name}-values"]
    slot_arrays = [tensors[f"{table.name}/{s}-values"] for s in _slot_names(table)]
    n = len(keys)
    for what, arr in [("counts", counts), ("values", values)] + [
            (s, a) for s, a in zip(_slot_names(table), slot_arrays)]:
        if len(arr) != n or (arr is not counts and tuple(arr.shape[1:]) != table.row_shape):
            raise errors.InvalidArgumentError(
                None, None, f"checkpoint of table '{table.name}': {what} has shape "
                f"{list(np.shape(arr))}; expected {n} rows of {list(table.row_shape)}")
    shard = table.shard_of(keys)
    if table._shard_max_rows:
        # Every shard's limit before any shard is emptied: a refused restore changes nothing.
        for k in range(table.num_shards):
            distinct = len(np.unique(keys[shard == k]))
            if distinct > table._shard_max_rows:
                raise errors.ResourceExhaustedError(
                    None, None, f"restoring table '{table.name}': shard {k} would hold "
                    f"{distinct} rows, past its limit of {table._shard_max_rows} (max_rows "
                    f"{table.max_rows} over {table.num_shards} shards); nothing was restored")
    for k, s in enumerate(table.shards):
        mine = np.flatnonzero(shard == k)
        handle = sess._handle(s)
        first = True
        for start in range(0, max(len(mine), 1), _PAGE_ROWS):
            sel = mine[start:start + _PAGE_ROWS]
            sess._client.table_import(
                handle, np.ascontiguousarray(keys[sel]), np.ascontiguousarray(counts[sel]),
                np.ascontiguousarray(values[sel], table.dtype),
                [np.ascontiguousarray(a[sel], table.dtype) for a in slot_arrays], first)
            first = False
