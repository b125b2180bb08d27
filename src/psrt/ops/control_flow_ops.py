"""TF1's control-flow ops (tensorflow/python/ops/control_flow_ops.py, r1.15): ``no_op``,
``group``, ``tuple`` and ``cond``; ``control_dependencies`` is the graph's
(psrt/framework/ops.py)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework.constant_op import constant
from psrt.framework.ops import Operation, control_dependencies, get_default_graph
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import array_ops as _array


_pytuple = type(())


def no_op(name: str | None = None) -> Operation:
    """An op that does nothing but run its control dependencies first, as ``tf.no_op``."""
    return Operation("noop", name=get_default_graph().unique_name(name or "NoOp"))


def group(*inputs: Any, **kwargs: Any) -> Operation:
    """One op that runs every input (ops, tensors, nested lists of them), as ``tf.group``:
    fetching it runs them in this run; its value is None.

    Raises:
        TypeError: a keyword other than ``name`` (TF's message).
    """
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Unknown keyword arguments: {', '.join(kwargs)}")
    flat: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, (list, _pytuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif x is not None:
            flat.append(x)
    walk(inputs)
    with control_dependencies(flat):
        return no_op(name=name or "group_deps")


def tuple(tensors: Any, name: str | None = None, control_inputs: Any = None) -> list[Any]:  # noqa: A001
    """``tensors``, each through an identity that runs after all of them (and
    ``control_inputs``), as ``tf.tuple``: fetching any one computes every one."""
    deps = [t for t in tensors if t is not None] + list(control_inputs or [])
    with control_dependencies(deps):
        return [None if t is None else _array.identity(t, name=name or "tuple")
                for t in tensors]


def _pick(needs: Any, pred: Any, a: Any, b: Any) -> Any:
    take = bool(np.asarray(pred))
    return (a if take else b), lambda dy: (None, dy if take else None, None if take else dy)


def cond(pred: Any, true_fn: Callable[[], Any] | None = None,
         false_fn: Callable[[], Any] | None = None, strict: bool = False,
         name: str | None = None, fn1: Any = None, fn2: Any = None) -> Any:
    """``true_fn()`` if the scalar bool ``pred`` is true in the run, else ``false_fn()``,
    as ``tf.cond`` (``fn1``/``fn2``: TF1's old names). Both functions are called once when
    the graph is built and must return the same structure of tensors; the gradient flows
    through the taken branch only. Unlike TF, psrt computes both branches in a run and
    selects one (keep side effects out of them).

    Raises:
        TypeError: a function missing or not callable (TF's message).
        ValueError: the branches return different structures.
    """
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    a, b = true_fn(), false_fn()
    single = not isinstance(a, (list, _pytuple))
    xs, ys = ([a], [b]) if single else (list(a), list(b))
    if len(xs) != len(ys):
        raise ValueError(f"Outputs of true_fn and false_fn must have the same structure: "
                         f"{len(xs)} vs {len(ys)} values")
    p = pred if _lib.is_graph_value(pred) else constant(bool(pred))
    outs = []
    for x, y in zip(xs, ys):
        x = x if _lib.is_graph_value(x) else constant(x)
        y = y if _lib.is_graph_value(y) else constant(y, _lib.static_dtype(x))
        shape = _lib.static_shape(x)
        sy = _lib.static_shape(y)
        merged = shape if shape == sy else TensorShape(
            None if shape.ndims != sy.ndims or shape.ndims is None else
            [d if d == e else None for d, e in zip(shape.as_list(), sy.as_list())])
        outs.append(_lib.apply_op("cond", name, [p, x, y], _pick, _lib.static_dtype(x),
                                  merged))
    return outs[0] if single else outs

