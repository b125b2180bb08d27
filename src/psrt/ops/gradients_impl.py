"""``tf.gradients`` (tensorflow/python/ops/gradients_impl.py and gradients_util.py, r1.15): the
gradients of tensors with respect to variables or tensors, as tensors a run can fetch, clip,
summarize or apply.

One ``tf.gradients`` call builds one backward op (psrt/framework/autodiff.py ``Backward``)
whose inputs are the ``ys`` (and tensor ``grad_ys``), and one small op per ``x`` picking its
gradient from the backward op's list. A run that fetches any of them computes the forward
ops of the ``ys`` once, with their gradient functions, and the backward pass from those
values: a fetched forward tensor, a random op's draw (dropout's mask) and the gradients all
come from the same forward pass, as in TF, where a run evaluates each op once.

A variable read through ``embedding_lookup`` (or a part of a partitioned one) gets TF's
row-sparse gradient, an :class:`psrt.IndexedSlices` of tensors: TF's gather gradient per
lookup (``values`` one row per looked-up id, ``indices`` the ids' rows, duplicates not summed),
lookups of one variable concatenated (gradients_util ``_AggregateIndexedSlicesGradients``);
only the looked-up rows are pulled from the ps tasks.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from psrt.framework import autodiff as _autodiff
from psrt.framework import dtypes as _dtypes
from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant, convert_to_tensor
from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.ops import VariableBase
from psrt.framework.tensor import Tensor
from psrt.ops import array_ops as _array
from psrt.ops import embedding_ops as _embedding
from psrt.ops.variables import PartitionedVariable, Variable


class _Assemble:
    """The value of a backward op: each connected ``x``'s gradient from the seeds' ones
    (``Backward.finish``). ``parts[i]`` lists ``(seed index, how, argument)``: ``"dense"``
    the seed's gradient is x's; ``"rows"`` rows ``lo:hi`` of it are (x a part of a
    partitioned variable read whole); ``"into"`` it fills x's rows ``lo:hi`` (x a
    partitioned variable, the seed a part read as a variable); ``"sparse"`` the seed's
    ``(values, indices)`` pieces, indices offset by the argument."""

    __slots__ = ("xs", "ys", "own", "shapes", "dtypes", "index_dtypes", "parts")

    def __init__(self) -> None:
        self.xs: list[Any] = []
        # The ys when every one is weighted 1 and nothing is stopped: a train op of these
        # gradients runs the loss's own backward pass instead (``source_of``).
        self.ys: list[Any] | None = None
        # Per x: whether a training step's own backward pass makes its gradient (x read
        # whole, or through lookups; not a part of a partitioned variable read whole).
        self.own: list[bool] = []
        self.shapes: list[tuple[int, ...] | None] = []
        self.dtypes: list[np.dtype] = []
        self.index_dtypes: list[np.dtype | None] = []   # None: a dense gradient
        self.parts: list[list[tuple[int, str, Any]]] = []

    def __call__(self, raw: list[Any]) -> list[Any]:
        out: list[Any] = []
        for shape, dt, idt, parts in zip(self.shapes, self.dtypes, self.index_dtypes,
                                         self.parts):
            dense: Any = None
            pieces: list[tuple[Any, Any]] = []
            for j, how, arg in parts:
                g = raw[j]
                if how == "sparse":
                    pieces.extend((v, i + arg if arg else i) for v, i in g)
                    continue
                if how == "rows":
                    g = g[arg[0]:arg[1]]
                elif how == "into":
                    assert shape is not None
                    whole = np.zeros(shape, dt)
                    whole[arg[0]:arg[1]] = g
                    g = whole
                dense = g if dense is None else dense + g
            if idt is None:
                out.append(dense)
                continue
            if dense is not None:   # TF's _as_indexed_slices: every row, in order
                pieces.insert(0, (dense, np.arange(len(dense), dtype=np.int32)))
            assert shape is not None
            if pieces:
                values = np.concatenate([np.asarray(v, dt) for v, _ in pieces], axis=0)
                indices = np.concatenate([np.asarray(i).reshape(-1) for _, i in pieces])
            else:
                values = np.zeros((0,) + shape[1:], dt)
                indices = np.zeros(0, np.int64)
            out.append((values, indices.astype(idt, copy=False)))
        return out


def _pick(needs: Any, grads: Any, index: int) -> Any:
    """One ``x``'s gradient of the backward op's list (not differentiable again)."""
    return grads[index], lambda dy: (None,)


def _pick_part(needs: Any, grads: Any, index: int, part: int) -> Any:
    """The ``values`` (part 0) or ``indices`` (part 1) of one ``x``'s row-sparse
    gradient."""
    return grads[index][part], lambda dy: (None,)


def source_of(g: Any) -> tuple[list[Any] | None, Any] | None:
    """``(ys, x)`` when ``g`` is a gradient :func:`gradients` returned, unchanged (a
    Tensor, or an IndexedSlices of its tensors): ``ys`` the differentiated tensors when
    each was weighted 1 and nothing was stopped (else None), ``x`` what ``g`` is the
    gradient of. Else None. (``apply_gradients`` pushes such gradients of one loss from the
    loss's own backward pass, in the training step.)"""
    t = g.values if isinstance(g, IndexedSlices) else g
    vjp = t.op.vjp if isinstance(t, Tensor) else None
    if not isinstance(vjp, functools.partial) or vjp.func not in (_pick, _pick_part):
        return None
    if (vjp.func is _pick_part) != isinstance(g, IndexedSlices):
        return None
    kernel = t.op.inputs[0].op.func
    if not isinstance(kernel, _autodiff.Backward) or not isinstance(kernel.finish, _Assemble):
        return None
    assemble = kernel.finish
    k = int(vjp.keywords["index"])
    return assemble.ys if assemble.own[k] else None, assemble.xs[k]


def _as_y(y: Any) -> Tensor:
    if isinstance(y, Tensor):
        return y
    if isinstance(y, VariableBase):
        return _array.identity(y)   # TF reads the variable: d var / d var is 1
    return convert_to_tensor(y)   # a constant (no x reaches it), or IndexedSlices made dense


def _check_grad_y(i: int, y: Tensor, g: Any) -> Any:
    """``grad_ys[i]`` as TF's ``_DefaultGradYs`` takes it (gradients_util.py, r1.15): None
    (ones; refused for a complex y), a Tensor, an IndexedSlices, or a constant (an array);
    its dtype real or integer for a real or integer y.

    Raises:
        TypeError: TF's messages for the dtypes it refuses.
    """
    ydt = np.dtype(y.dtype) if y.dtype is not None else None
    yname = _dtypes.as_dtype(ydt).name if ydt is not None else "unknown"
    if g is None:
        if ydt is not None and ydt.kind == "c":
            raise TypeError(f"Gradients of complex tensors must set grad_ys (y.dtype = "
                            f"tf.{yname})")
        return None
    if isinstance(g, VariableBase):
        g = _array.identity(g)
    if not isinstance(g, (Tensor, IndexedSlices)):
        g = np.asarray(g)
    gdt = getattr(g, "dtype", None)
    if ydt is None or gdt is None:
        return g
    gname = _dtypes.as_dtype(gdt).name
    kind = np.dtype(gdt).kind
    if ydt.kind in "fiu":
        if kind not in "fiu":
            raise TypeError(f"Gradient type {gname} generated for real or integer-valued "
                            f"tensor {y} with type {yname} must be real or integer")
    elif ydt.kind == "c":
        if kind != "c":
            raise TypeError(f"Gradient type {gname} generated for complex-valued tensor {y} "
                            f"with type {yname} must be real")
    else:
        raise TypeError(f"Tensor {y} with type {yname} must be numeric to obtain a default "
                        f"gradient")
    return g


def _seeds_of(x: Any, plan: Any) -> list[tuple[Any, str, Any]]:
    """What ``x``'s gradient is made of: ``(seed, how, argument)`` (see :class:`_Assemble`)
    for each way the ``ys`` read it (whole, or rows through lookups)."""
    if isinstance(x, Tensor):
        return [(x, "dense", None)]
    dense = {id(v) for v in plan.variables}
    rows = {id(r): r for r in plan.run_inputs}
    out: list[tuple[Any, str, Any]] = []

    def rows_of(v: Variable, offset: int) -> None:
        src = _embedding.rows_read(v, rows)
        if src is not None:
            out.append((src, "sparse", offset))

    if isinstance(x, PartitionedVariable):
        off = x.offsets
        if id(x) in dense:
            out.append((x, "dense", None))
        for k, p in enumerate(x._get_variable_list()):
            if id(p) in dense:
                out.append((p, "into", (off[k], off[k + 1])))
            rows_of(p, off[k])
        return out
    if isinstance(x, Variable):
        if id(x) in dense:
            out.append((x, "dense", None))
        if x._partition is not None:
            whole, k = x._partition
            if id(whole) in dense:
                out.append((whole, "rows", (whole.offsets[k], whole.offsets[k + 1])))
        rows_of(x, 0)
        return out
    if isinstance(x, VariableBase):
        if id(x) in dense:
            out.append((x, "dense", None))
        return out
    if x is None:
        raise TypeError("tf.gradients: an x is None; xs must be Tensors or Variables")
    return out   # a constant: nothing reads it


def _index_dtype(x: Any, plan: Any, seeds: list[Any]) -> np.dtype:
    """The dtype of ``x``'s gradient indices: int64 if the ids of a lookup reading it are
    int64 (or unknown), else int32 (TF's gather keeps the ids' dtype; gradients_util's
    aggregation casts mixed ones to int64)."""
    want = {id(s) for s in seeds}
    for node in plan.lookups:
        if any(id(a) in want for a in node.inputs[1:]):
            ids = node.inputs[0]
            dt = ids.dtype if isinstance(ids, Tensor) else np.asarray(ids).dtype
            if dt is None or np.dtype(dt) != np.int32:
                return np.dtype(np.int64)
    return np.dtype(np.int32)


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients",
              colocate_gradients_with_ops: bool = False, gate_gradients: bool = False,
              aggregation_method: Any = None, stop_gradients: Any = None,
              unconnected_gradients: str = "none") -> list[Any]:
    """The gradient of ``sum(ys)`` (each ``ys[i]`` weighted by ``grad_ys[i]``, default
    ones) with respect to each of ``xs``, as ``tf.gradients``.

    Args:
        ys: A Tensor (or Variable) or a list of them.
        xs: A Tensor, Variable or PartitionedVariable, or a list of them.
        grad_ys: None, or one entry per y: None (ones), a Tensor, an IndexedSlices or a
            constant, broadcast to its y's shape (the initial gradient of that y; not
            differentiated).
        name: The name scope of the gradient ops.
        colocate_gradients_with_ops, gate_gradients, aggregation_method: Accepted for TF
            compatibility (one process computes every gradient; sums are exact).
        stop_gradients: A Tensor or a list of them held constant: no gradient flows through
            their ops into what they are computed from (TF's partial derivatives); a
            gradient with respect to one of them is still computed.
        unconnected_gradients: ``"none"`` (the default: None for an x the ys do not depend
            on) or ``"zero"`` (zeros of its shape and dtype).

    Returns:
        A list of ``len(xs)``: for each x a Tensor of its shape and dtype; for a variable
        the ys read through ``embedding_lookup`` (or a part of a partitioned one), an
        :class:`psrt.IndexedSlices` of tensors (``values`` [N, *shape[1:]] of its dtype,
        ``indices`` [N] of the ids' integer dtype, ``dense_shape`` int32 [rank]; TF's
        gather gradient per lookup, lookups concatenated; ``psrt.convert_to_tensor`` makes
        it dense); a PartitionedVariable gets one over its whole rows (TF refuses a
        PartitionedVariable as an x: NotImplementedError). None for an x the ys do not
        depend on through float tensors (an integer tensor, ``psrt.stop_gradient`` and
        ``stop_gradients`` cut a path, as in TF), unless ``unconnected_gradients="zero"``.
        These tensors are not differentiable again.

    Raises:
        ValueError: ``grad_ys`` of another length than ``ys``, or an unknown
            ``unconnected_gradients`` (TF's messages).
        TypeError: a ``grad_ys`` dtype TF refuses (TF's messages), or an x that is None.
        NotImplementedError: a gradient tensor between the xs and the ys (second
            derivatives).
        InvalidArgumentError (at run): a ``grad_ys`` value that does not broadcast to its
            y.
    """
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"Unknown value for unconnected_gradients: "
                         f"'{unconnected_gradients}'; expected 'none' or 'zero'")
    ys = [_as_y(y) for y in (list(ys) if isinstance(ys, (list, tuple)) else [ys])]
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = list(grad_ys) if isinstance(grad_ys, (list, tuple)) else [grad_ys]
        if len(grad_ys) != len(ys):
            raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
        grad_ys = [_check_grad_y(i, y, g) for i, (y, g) in enumerate(zip(ys, grad_ys))]
    stops = [] if stop_gradients is None else (
        list(stop_gradients) if isinstance(stop_gradients, (list, tuple)) else [stop_gradients])
    stop_ops = {id(t.op) for t in stops if isinstance(t, Tensor)}
    plan = _autodiff.Plan(ys)
    seeds: list[Any] = []
    where: dict[int, int] = {}
    uses = []
    for x in xs:
        mine = []
        for s, how, arg in _seeds_of(x, plan):
            if id(s) not in where:
                where[id(s)] = len(seeds)
                seeds.append(s)
            mine.append((where[id(s)], how, arg))
        uses.append(mine)
    assemble = _Assemble()
    if all(g is None for g in grad_ys) and not stop_ops:
        assemble.ys = ys
    kernel = _autodiff.Backward(ys, grad_ys, seeds, stop_ops, assemble, plan)
    picks: list[Any] = []
    for x, mine in zip(xs, uses):
        live = [(j, how, arg) for j, how, arg in mine if kernel.connected[j]]
        if not live:
            picks.append(None)
            continue
        shape = tuple(x.shape) if isinstance(x, VariableBase) else x._shape
        sparse = any(how == "sparse" for _, how, _ in live)
        picks.append(len(assemble.xs))
        assemble.xs.append(x)
        assemble.shapes.append(None if shape is None or None in shape else shape)
        assemble.dtypes.append(np.dtype(x.dtype))
        assemble.index_dtypes.append(
            _index_dtype(x, plan, [seeds[j] for j, how, _ in live if how == "sparse"])
            if sparse else None)
        assemble.parts.append(live)
        assemble.own.append(all(how in ("dense", "sparse") for _, how, _ in live))
    if not assemble.xs:
        return [_unconnected(x, unconnected_gradients) for x in xs]
    inputs = list(ys)
    for g in grad_ys:
        if isinstance(g, Tensor):
            inputs.append(g)
        elif isinstance(g, IndexedSlices):
            inputs.extend(c for c in (g.values, g.indices) if isinstance(c, Tensor))
    backward = kernel.op(inputs, f"{name}/Backward")
    out: list[Any] = []
    for x, k in zip(xs, picks):
        if k is None:
            out.append(_unconnected(x, unconnected_gradients))
            continue
        label = f"{name}/{_op_label(x)}_grad"
        shape = assemble.shapes[k]
        idt = assemble.index_dtypes[k]
        if idt is None:
            out.append(_lib.apply_op("Gradients", label, [backward], _pick, x.dtype,
                                     _lib.static_shape(x), index=k))
            continue
        assert shape is not None
        values = _lib.apply_op("Gradients", f"{label}/values", [backward], _pick_part,
                               x.dtype, [None, *shape[1:]], index=k, part=0)
        indices = _lib.apply_op("Gradients", f"{label}/indices", [backward], _pick_part, idt,
                                [None], index=k, part=1)
        out.append(IndexedSlices(values, indices, constant(np.asarray(shape, np.int32),
                                                           name=f"{label}/dense_shape")))
    return out


def _unconnected(x: Any, how: str) -> Any:
    if how == "none":
        return None
    if isinstance(x, VariableBase):   # zeros of its shape, without reading it
        return _array.zeros(tuple(x.shape), x.dtype)
    if isinstance(x, Tensor):
        return _array.zeros_like(x)
    return _array.zeros_like(convert_to_tensor(x))


def _op_label(x: Any) -> str:
    n = x.op.name if isinstance(x, Tensor) else getattr(x, "op_name", None) or \
        str(getattr(x, "name", "x")).split(":")[0]
    return n


def hessians(*args: Any, **kwargs: Any) -> Any:
    """Not supported: psrt's gradient tensors are not differentiable again."""
    raise NotImplementedError("psrt.hessians is not implemented: gradient tensors are not "
                              "differentiable again")
