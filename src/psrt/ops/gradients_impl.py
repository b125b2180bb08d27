"""``tf.gradients`` (tensorflow/python/ops/gradients_impl.py, r1.15): the gradients of
tensors with respect to variables or tensors, as tensors a run can fetch, clip or summarize.

A gradient tensor's op runs the forward pass of its ``ys`` and the backward pass of psrt's
reverse-mode autodiff (psrt/framework/autodiff.py ``value_and_gradients``) in the run that
fetches it; its inputs are what the ``ys`` read (variables, placeholders, embedding rows), so
a run feeds and pulls them as for any tensor.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from psrt.framework import autodiff as _autodiff
from psrt.framework import op_def_library as _lib
from psrt.framework import tensor as _tensor
from psrt.framework.ops import VariableBase
from psrt.framework.tensor import Tensor
from psrt.ops import array_ops as _array
from psrt.ops import math_ops as _math


class _Backward:
    """The kernel of one gradients op: every ``xs`` gradient of one combined loss."""

    __slots__ = ("loss", "plan", "xs", "reads", "ys")

    def __init__(self, loss: Tensor, xs: list[Any], ys: list[Any] | None = None) -> None:
        self.loss = loss
        # The tensors differentiated, when their gradients are unweighted (their sum is the
        # loss): a train op can push these gradients from ys[0]'s own backward pass.
        self.ys = ys
        self.plan = _autodiff.Plan([loss])
        self.xs = xs
        # The op's inputs: what the forward pass reads.
        self.reads = list(self.plan.variables) + list(self.plan.run_inputs) + \
            list(self.plan.placeholders)

    def run(self, *values: Any) -> list[Any]:
        """The gradients (numpy arrays, in ``xs`` order) from the values of ``reads``: the
        variables and lookup rows first, then the placeholders."""
        nv = len(self.plan.variables) + len(self.plan.run_inputs)
        var_values = {id(r): v for r, v in zip(self.reads[:nv], values[:nv])}
        feeds = {p.op.name: v for p, v in zip(self.reads[nv:], values[nv:])}
        memo: dict[int, Any] = {}
        _, grads = _autodiff.value_and_gradients(self.plan, self.loss, self.xs, var_values,
                                                 feeds, memo)
        return grads


def _reachable(ys: list[Tensor]) -> set[int]:
    plan = _autodiff.Plan(ys)
    ids = {id(v) for v in plan.variables}
    for node in plan.nodes:
        ids.update(id(t) for t in node.outputs)
    return ids


def _pick(needs: Any, grads: Any, index: int) -> Any:
    """One ``x``'s gradient of the backward op's list (not differentiable again)."""
    return grads[index], lambda dy: (None,)


def source_of(t: Any) -> tuple[_Backward, int] | None:
    """``(backward pass, index into its xs)`` when ``t`` is a tensor :func:`gradients`
    returned, unchanged; else None (``apply_gradients`` pushes such gradients from the loss's
    own backward pass, in the training step)."""
    vjp = t.op.vjp if isinstance(t, Tensor) else None
    if not isinstance(vjp, functools.partial) or vjp.func is not _pick:
        return None
    src = t.op.inputs[0]
    kernel = getattr(src.op.func, "__self__", None)
    if not isinstance(kernel, _Backward):
        return None
    return kernel, int(vjp.keywords["index"])


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients",
              colocate_gradients_with_ops: bool = False, gate_gradients: bool = False,
              aggregation_method: Any = None, stop_gradients: Any = None,
              unconnected_gradients: str = "none") -> list[Any]:
    """The gradient of ``sum(ys)`` (each ``ys[i]`` weighted by ``grad_ys[i]``, default
    ones) with respect to each of ``xs`` (Variables or Tensors), as ``tf.gradients``: a
    list of Tensors of the ``xs``' shapes and dtypes; None for an ``x`` the ``ys`` do not
    depend on (``unconnected_gradients="zero"``: zeros). Differentiating these tensors again
    (second derivatives) is not supported.

    Raises:
        ValueError: ``grad_ys`` of another length than ``ys``, or an unknown
            ``unconnected_gradients`` (TF's messages).
        NotImplementedError: ``stop_gradients`` given (use ``tf.stop_gradient``).
    """
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"Unknown value for unconnected_gradients: "
                         f"'{unconnected_gradients}'; expected 'none' or 'zero'")
    if stop_gradients is not None:
        raise NotImplementedError("gradients(stop_gradients=) is not supported by psrt; "
                                  "wrap those tensors in psrt.stop_gradient")
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    if grad_ys is not None:
        grad_ys = list(grad_ys) if isinstance(grad_ys, (list, tuple)) else [grad_ys]
        if len(grad_ys) != len(ys):
            raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    terms = []
    for i, y in enumerate(ys):
        y = y.value() if isinstance(y, VariableBase) and hasattr(y, "value") else y
        g = None if grad_ys is None else grad_ys[i]
        terms.append(_math.reduce_sum(y if g is None else _math.multiply(y, g)))
    loss = terms[0] if len(terms) == 1 else _math.add_n(terms)
    reach = _reachable([loss])
    connected = [x for x in xs if id(x) in reach]
    kernel = _Backward(loss, connected, ys if grad_ys is None else None) if connected else None
    backward = None
    if kernel is not None:
        # One op computes every gradient in one backward pass (once per run: its value, a
        # list, is computed once like any tensor's); each x's tensor picks its own.
        backward = _tensor.py_func(kernel.run, kernel.reads, None, name=f"{name}/Backward")
    out: list[Any] = []
    for x in xs:
        if id(x) not in reach:
            out.append(None if unconnected_gradients == "none" else _array.zeros_like(x))
            continue
        assert kernel is not None
        out.append(_lib.apply_op("Gradients", f"{name}/{_op_label(x)}_grad", [backward],
                                 _pick, _lib.static_dtype(x), _lib.static_shape(x),
                                 index=connected.index(x)))
    return out


def _op_label(x: Any) -> str:
    n = x.op.name if isinstance(x, Tensor) else getattr(x, "op_name", None) or \
        str(getattr(x, "name", "x")).split(":")[0]
    return n


def hessians(*args: Any, **kwargs: Any) -> Any:
    """Not supported: psrt's gradient tensors are not differentiable again."""
    raise NotImplementedError("psrt.hessians is not implemented: gradient tensors are not "
                              "differentiable again")
