"""The executor's part of embedding lookups: a run's rows pulled once per part and distinct id
(every part in one parallel round trip), and the row-sparse gradients of a lookup's rows pushed
per part. The graph side (what a lookup reads) is psrt/ops/embedding_ops.py."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from psrt.framework import autodiff as _autodiff
from psrt.framework import errors
from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.tensor import Tensor
from psrt.ops.embedding_ops import _Gather, _Rows
from psrt.ops.variables import PartitionedVariable, Variable


def prepare_rows(executor: Any, plans: Sequence[Any], var_values: dict[int, Any],
                 feeds: dict[str, Any], memo: dict[int, Any]) -> dict[int, Any]:
    """Supplies the run inputs of every lookup of ``plans``: computes their ids (into
    ``memo``), then pulls each touched part's distinct ids once and puts them and their rows
    in ``var_values``. Called by the executor before it evaluates the plans.

    Returns:
        The tensor values computed on the way to the ids (id(Tensor) -> value), which a
        traced evaluation of the same run reuses instead of recomputing.

    Raises:
        InvalidArgumentError: an id out of range (nothing of the run has been sent).
        UnimplementedError: ids that depend on another lookup's rows.
    """
    lookups: dict[int, Any] = {}
    for plan in plans:
        if plan is None:
            continue
        for node in plan.lookups:
            lookups.setdefault(id(node), node)
    if not lookups:
        return {}
    known: dict[int, Any] = {}
    tensors = [n.inputs[0] for n in lookups.values()
               if isinstance(n.inputs[0], Tensor) and id(n.inputs[0]) not in memo]
    if tensors:
        sub = _autodiff.plan_for(list(dict.fromkeys(tensors)), feeds)
        if sub.lookups:
            raise errors.UnimplementedError(
                None, None, f"the ids of an embedding lookup are computed from another "
                f"lookup ('{sub.lookups[0].name}'); psrt computes a run's ids before it pulls "
                f"any rows")
        values = {id(v): var_values[id(v)] for v in sub.variables if id(v) in var_values}
        missing = [v for v in sub.variables if id(v) not in values]
        if missing:
            values.update(zip(map(id, missing), executor._pull_new(missing)))
        before = set(memo)
        _autodiff.evaluate(sub, values, feeds, memo)
        known = {k: v for k, v in memo.items() if k not in before}
    # The id bookkeeping, once per ids value and layout (an ids tensor shared by lookups of
    # tables partitioned alike, as a user's embedding and bias): each part's distinct rows
    # and every id's position among them.
    located: dict[tuple[Any, ...], tuple[list[np.ndarray], np.ndarray]] = {}
    entries: list[tuple[_Gather, Any, tuple[Any, ...], tuple[_Rows, ...]]] = []
    owner: dict[int, Any] = {}        # id(_Rows) -> (group, part index), or None if shared
    sources: dict[int, _Rows] = {}
    for node in lookups.values():
        func: _Gather = node.func
        func._fast = None
        ids = node.inputs[0]
        value = memo[id(ids)] if isinstance(ids, Tensor) else ids
        group = (id(value), func.layout)
        if group not in located:
            located[group] = func.index(value)
        n = len(func.parts)
        srcs = tuple(node.inputs[1 + n:1 + 2 * n])
        for k, src in enumerate(srcs):
            if id(src) not in sources:
                sources[id(src)] = src
                owner[id(src)] = (group, k)
            elif owner[id(src)] != (group, k):
                owner[id(src)] = None     # read with other ids: the union is pulled
        entries.append((func, value, group, srcs))
    uniq_of: dict[int, np.ndarray] = {}
    unions: dict[int, list[np.ndarray]] = {}
    for func, value, group, srcs in entries:
        for k, src in enumerate(srcs):
            if owner[id(src)] is None:
                unions.setdefault(id(src), []).append(located[group][0][k])
            else:
                uniq_of[id(src)] = located[group][0][k]
    for key, chunks in unions.items():
        uniq_of[key] = np.unique(np.concatenate(chunks))
    # A lookup whose parts no other ids read gets their rows in one array (a view of it
    # per part): it gathers from that array without concatenating the parts.
    wire: dict[int, np.ndarray] = {}                   # id(_Rows) -> its rows (wire dtype)
    tables: dict[tuple[int, ...], np.ndarray] = {}     # ids of a lookup's parts -> array
    fast: list[tuple[_Gather, Any, tuple[int, ...], tuple[Any, ...], tuple[_Rows, ...]]] = []
    for func, value, group, srcs in entries:
        key = tuple(map(id, srcs))
        if key not in tables:
            if len(set(key)) != len(key) or any(owner[k] is None or k in wire for k in key):
                continue
            v = srcs[0].variable
            lens = [len(uniq_of[k]) for k in key]
            buf = np.empty((sum(lens),) + tuple(v.shape[1:]), v._wire_dtype)
            base = 0
            for k, u in zip(key, lens):
                wire[k] = buf[base:base + u]
                base += u
            tables[key] = buf
        fast.append((func, value, key, group, srcs))
    handles, idx, outs = [], [], []
    for key, src in sources.items():
        uniq = uniq_of[key]
        out = wire.get(key)
        if out is None:
            v = src.variable
            out = wire[key] = np.empty((len(uniq),) + tuple(v.shape[1:]), v._wire_dtype)
        if len(uniq):
            handles.append(executor._host._handle(src.variable))
            idx.append(uniq)
            outs.append(out)
        var_values[id(src.ids)] = uniq
    # Every part's rows in one parallel round trip (one request per part).
    if handles:
        executor._host._client.pull_rows_batch(handles, idx, outs)
    converted: dict[tuple[int, ...], np.ndarray] = {}
    for key, buf in tables.items():
        dt = sources[key[0]].variable.dtype
        table = converted[key] = buf if buf.dtype == dt else buf.astype(dt)
        base = 0
        for k in key:
            u = len(uniq_of[k])
            var_values[k] = table[base:base + u]
            base += u
    in_tables = {k for key in tables for k in key}
    for key, src in sources.items():
        if key not in in_tables:
            out = wire[key]
            v = src.variable
            var_values[key] = out if out.dtype == v.dtype else out.astype(v.dtype)
    for func, value, key, group, srcs in fast:
        func._fast = (value, tuple(uniq_of[k] for k in key),
                      tuple(var_values[k] for k in key), converted[key], located[group][1])
    return known


def trainable_rows(plan: Any, var_list: Sequence[Any]) -> list[_Rows]:
    """The run inputs of ``plan`` holding rows of a variable of ``var_list`` (a part, or
    the PartitionedVariable it belongs to): what autodiff differentiates for them."""
    want = {id(v) for v in var_list}
    out = []
    for src in plan.run_inputs:
        if not isinstance(src, _Rows):
            continue
        v = src.variable
        whole = v._partition[0] if v._partition is not None else None
        if id(v) in want or (whole is not None and id(whole) in want):
            out.append(src)
    return out


class _PartSlices(IndexedSlices):
    """The row-sparse gradient of a PartitionedVariable as its parts' gradients: ``parts``
    is ``(part, IndexedSlices with part-local indices, those indices)`` of each part with
    rows (the executor pushes them as they are; their ids were checked by the lookups).
    ``values`` and ``indices`` (rows of the whole variable) are made when read."""

    def __init__(self, whole: PartitionedVariable,
                 pieces: Sequence[tuple[Variable, Any, Any]]) -> None:
        self.dense_shape = tuple(whole.shape)
        self._whole = whole
        self._pieces = pieces
        self._joined: tuple[Any, Any] | None = None
        self.parts = [(p, IndexedSlices(g, uniq, p.shape), uniq)
                      for p, uniq, g in pieces if len(uniq)]

    def _join(self) -> tuple[Any, Any]:
        if self._joined is None:
            whole = self._whole
            self._joined = (
                np.concatenate([g for _, _, g in self._pieces]),
                np.concatenate([whole.offsets[p._partition[1]] + uniq
                                for p, uniq, _ in self._pieces]))
        return self._joined

    @property  # type: ignore[override]
    def values(self) -> Any:
        """The parts' gradient rows, joined in part order ([N, row...], the variable's
        dtype)."""
        return self._join()[0]

    @property  # type: ignore[override]
    def indices(self) -> Any:
        """Their rows in the whole variable (int64 [N]), joined in part order."""
        return self._join()[1]


def table_gradients(var_list: Sequence[Any], dense: Sequence[Any], dense_grads: Sequence[Any],
                    rows: Sequence[_Rows], row_grads: Sequence[Any],
                    var_values: dict[int, Any]) -> list[Any]:
    """The gradient of each variable of ``var_list``: a dense one (``dense``, plus the rows'
    gradients added in where the variable is also looked up), an ``IndexedSlices`` of the
    distinct looked-up ids (a part, or a PartitionedVariable with its parts' rows at their
    offsets), or None."""
    dense_of = {id(v): g for v, g in zip(dense, dense_grads)}
    slices: dict[int, list[tuple[int, Any, Any]]] = {}   # id(target) -> (offset, ids, grad)
    parts_of: dict[int, list[tuple[Variable, Any, Any]]] = {}  # id(whole) -> (part, ids, grad)
    for src, g in zip(rows, row_grads):
        v = src.variable
        uniq = var_values[id(src.ids)]
        slices.setdefault(id(v), []).append((0, uniq, g))
        if v._partition is not None:
            whole, k = v._partition
            slices.setdefault(id(whole), []).append((whole.offsets[k], uniq, g))
            parts_of.setdefault(id(whole), []).append((v, uniq, g))
    out: list[Any] = []
    for v in var_list:
        pieces = slices.get(id(v), [])
        if id(v) in dense_of:
            g = dense_of[id(v)]
            if pieces:
                g = np.array(g, copy=True)
                for off, uniq, gr in pieces:
                    np.add.at(g, off + uniq, gr)
            out.append(g)
        elif not pieces:
            out.append(None)
        elif len(pieces) == 1 and pieces[0][0] == 0:
            _, uniq, gr = pieces[0]
            out.append(IndexedSlices(gr, uniq, tuple(v.shape)))
        elif isinstance(v, PartitionedVariable):
            out.append(_PartSlices(v, parts_of[id(v)]))
        else:
            out.append(IndexedSlices(
                np.concatenate([gr for _, _, gr in pieces]),
                np.concatenate([off + uniq for off, uniq, _ in pieces]), tuple(v.shape)))
    return out
