"""What a run computes besides its fetches: the inputs of computed fetches (summaries) and
the ops and tensors its fetches wait for through ``control_dependencies``, in run order.
The executor (``runtime/executor.py``) runs them; this module only finds them."""

from __future__ import annotations

from typing import Any, Callable

from psrt.framework import autodiff as _autodiff
from psrt.framework import tensor as _graph
from psrt.framework.tensor import Tensor


class Fetch:
    """A flattened fetch structure: leaves in order plus a function rebuilding it."""

    def __init__(self, fetches: Any) -> None:
        self.leaves: list[Any] = []
        self._build = self._flatten(fetches)

    def _flatten(self, f: Any) -> Callable[[list[Any]], Any]:
        if isinstance(f, dict):
            items = [(k, self._flatten(v)) for k, v in f.items()]
            kind = type(f)
            return lambda r: kind((k, b(r)) for k, b in items) if kind is dict else \
                kind({k: b(r) for k, b in items})
        if isinstance(f, (list, tuple)) and not hasattr(f, "_fields"):
            subs = [self._flatten(v) for v in f]
            kind = type(f)
            return lambda r: kind(b(r) for b in subs)
        if isinstance(f, tuple):  # namedtuple
            subs = [self._flatten(v) for v in f]
            kind = type(f)
            return lambda r: kind(*(b(r) for b in subs))
        i = len(self.leaves)
        self.leaves.append(f)
        return lambda r: r[i]

    def build(self, results: list[Any]) -> Any:
        """The fetch structure with each leaf replaced by its result, in leaf order."""
        return self._build(results)


def expand_computed(leaves: list[Any], feeds: dict[str, Any]
                     ) -> tuple[list[Any], list[tuple[int, Any, Fetch, int]]]:
    """The run's leaves with the inputs of its computed fetches appended, and those fetches
    as (leaf index, fetch, Fetch of its inputs, index of its first input).

    A computed fetch (a ``psrt.summary`` op) has ``_psrt_fetch_inputs(feeds, fetched)``,
    returning a fetch structure of what its value needs (``fetched``: the run's leaves), and
    ``_psrt_compute(values, feeds)``, computing its value from theirs. Its inputs are fetched
    in the same run as every other leaf (variables in the same pull, each op once: a summary
    of a train op's loss sees that run's step); its own leaf becomes None until computed."""
    if not any(hasattr(type(leaf), "_psrt_compute") for leaf in leaves):
        return leaves, []
    out = list(leaves)
    computed: list[tuple[int, Any, Fetch, int]] = []
    i = 0
    while i < len(out):
        leaf = out[i]
        if hasattr(type(leaf), "_psrt_compute"):
            inputs = Fetch(leaf._psrt_fetch_inputs(feeds, leaves))
            computed.append((i, leaf, inputs, len(out)))
            out[i] = None
            out.extend(inputs.leaves)
        i += 1
    return out, computed


def control_leaves(leaves: list[Any], feeds: dict[str, Any]) -> list[Any]:
    """What the fetches wait for through ``control_dependencies``, in the order to run:
    Operations (train ops, assignments, groups) and the tensors or variables the
    dependencies name, each before what depends on it; none of them is a fetch itself."""
    out: list[Any] = []
    seen: set[int] = {id(x) for x in leaves}
    done: set[int] = set()

    def deps_of(x: Any) -> list[Any]:
        if isinstance(x, Tensor):
            found: list[Any] = []
            for node in _autodiff.Plan([x], feeds).nodes:
                found.extend(c for c in node.control_inputs if not isinstance(c, _graph.Node))
            return found
        if isinstance(x, _graph.Node):
            return [t for t in x.outputs[:1]] + list(x.control_inputs)
        own = list(getattr(x, "control_inputs", ()))
        loss = getattr(x, "loss", None)
        if isinstance(loss, Tensor):
            # A train op waits for what its loss tensor waits for, as TF's (whose train op
            # depends on the loss): `with control_dependencies(update_ops): loss =
            # tf.identity(loss)` runs the updates before the step.
            # The loss's plan is cached (plan_for), so a step pays no new plan per run.
            for node in _autodiff.plan_for([loss], feeds).nodes:
                own.extend(c for c in node.control_inputs if not isinstance(c, _graph.Node))
        return own

    def visit(x: Any, is_leaf: bool) -> None:
        if id(x) in done:
            return
        done.add(id(x))
        for d in deps_of(x):
            if isinstance(d, _graph.Node):
                d = d.outputs[0] if d.outputs else None
                if d is None:
                    continue
            visit(d, False)
        if not is_leaf and id(x) not in seen:
            seen.add(id(x))
            out.append(x)
    for leaf in leaves:
        if leaf is not None and not isinstance(leaf, str):
            visit(leaf, True)
    return out
