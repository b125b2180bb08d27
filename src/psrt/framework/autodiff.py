"""Running and differentiating the graph of forward numpy code that psrt.Tensor ops build.

A :class:`Plan` orders the nodes a set of tensors needs; :func:`evaluate` computes them from
the run's feeds and variable values; :func:`value_and_gradients` traces the same computation
with autograd (HIPS) and returns the loss with its gradients with respect to the variables, as
``tf.gradients`` does for a TF1 graph. :class:`Backward` is the kernel of a ``tf.gradients``
op: its backward pass runs on the forward values of its own run (:func:`evaluate` computes the
ops it differentiates once, with their gradient functions). What a session run does with
them is the executor's business (psrt/runtime/executor.py); the conversion of its feeds is
psrt/framework/feeds.py's."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from psrt.framework import errors
from psrt.framework.feeds import missing_feed
from psrt.framework.ops import VariableBase
from psrt.framework.tensor import Node, RunInput, Tensor, py_func


class Plan:
    """What computing some tensors needs: the ops in dependency order, the variables they
    read, the placeholders that must be fed. Built once per set of tensors and cached; a
    run feeding a computed tensor gets a plan that stops there (TF prunes what a fed
    tensor depends on)."""

    __slots__ = ("nodes", "variables", "placeholders", "derived_names", "run_inputs",
                 "lookups", "backwards", "program")

    def __init__(self, targets: Iterable[Tensor], fed: Any = ()) -> None:
        self.nodes: list[Node] = []
        self.variables: list[Any] = []
        self.placeholders: list[Tensor] = []
        self.run_inputs: list[RunInput] = []
        self.lookups: list[Node] = []
        seen: set[int] = set()
        seen_vars: set[int] = set()
        stack: list[tuple[Node, bool]] = [(t.op, False) for t in reversed(list(targets))]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                self.nodes.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.type == "Placeholder" or node.name in fed:
                if node.type == "Placeholder":
                    self.placeholders.append(node.outputs[0])
                self.nodes.append(node)
                continue
            stack.append((node, True))
            for c in node.control_inputs:   # control_dependencies: computed first
                if isinstance(c, Node) and id(c) not in seen:
                    stack.append((c, False))
            for x in reversed(node.inputs):
                if isinstance(x, Tensor):
                    if id(x.op) not in seen:
                        stack.append((x.op, False))
                elif isinstance(x, VariableBase) and id(x) not in seen_vars:
                    seen_vars.add(id(x))
                    self.variables.append(x)
                elif isinstance(x, RunInput):
                    if not self.lookups or self.lookups[-1] is not node:
                        self.lookups.append(node)
                    if id(x) not in seen_vars:
                        seen_vars.add(id(x))
                        self.run_inputs.append(x)
        self.derived_names = frozenset(n.name for n in self.nodes if n.type == "PyFunc")
        # The ``tf.gradients`` ops among the nodes (:class:`Backward`): evaluate computes
        # the forward ops they differentiate with their gradient functions, once.
        self.backwards = _backwards_of(self.nodes)
        self.program: list[tuple[Node, Any]] | None = None


def _backwards_of(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if isinstance(n.func, Backward)]


class Nodes:
    """A plan of the given ops only (in order), for :func:`evaluate`."""

    __slots__ = ("nodes", "backwards", "program")

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.backwards = _backwards_of(nodes)
        self.program: list[tuple[Node, Any]] | None = None


def local_prefix(plan: Plan, feeds: dict[str, Any]) -> list[Node]:
    """The ops of ``plan`` that read no variable and no run input, directly or through
    other ops or control dependencies (an input pipeline's dequeues, reads, decodes), in
    plan order: computable before a run touches the ps tasks."""
    local: set[int] = set()
    out: list[Node] = []
    for node in plan.nodes:
        if node.type == "Placeholder" or node.name in feeds:
            ok = True
        else:
            ok = all(not isinstance(x, (VariableBase, RunInput)) and
                     (not isinstance(x, Tensor) or id(x.op) in local) for x in node.inputs) \
                and all(isinstance(c, Node) and id(c) in local for c in node.control_inputs)
        if ok:
            local.add(id(node))
            out.append(node)
    return out


def plan_for(targets: Sequence[Tensor], feeds: dict[str, Any]) -> Plan:
    """The :class:`Plan` of ``targets`` in a run with ``feeds``, checked: every placeholder
    it needs is fed (or has a default), else TF's InvalidArgumentError, raised before
    anything of the run executes. Cached on the first target."""
    key = tuple(id(t) for t in targets)
    plan = targets[0]._plans.get(key)
    if plan is None:
        plan = targets[0]._plans[key] = Plan(targets)
    if feeds and not plan.derived_names.isdisjoint(feeds):
        plan = Plan(targets, plan.derived_names.intersection(feeds))
    for p in plan.placeholders:
        if p.op.name not in feeds and not p.op.inputs:
            raise missing_feed(p)
    return plan


def evaluate(plan: Plan, var_values: dict[int, Any], feeds: dict[str, Any],
             memo: dict[int, Any]) -> None:
    """Computes every op of ``plan`` not in ``memo`` (keyed by id of Tensor), in order.
    ``var_values`` maps id(variable) to its value in this run; fed tensors take their
    feed.

    A plan with ``tf.gradients`` ops (:class:`Backward`) computes each op its backward
    passes go through once, with its gradient function (kept in ``memo`` under the negative
    id of its node, ``(argument positions, gradient function)``), and each backward pass
    from those: the fetched forward values and the gradients come from one forward pass
    (one draw of every random op, one call of every ``py_func``), as in TF, where a run
    evaluates each op once."""
    if plan.backwards:
        _evaluate_differentiating(plan, var_values, feeds, memo)
        return
    _evaluate_nodes(plan.nodes, var_values, feeds, memo)


def _evaluate_nodes(nodes: list[Node], var_values: dict[int, Any], feeds: dict[str, Any],
                    memo: dict[int, Any]) -> None:
    for node in nodes:
        outs = node.outputs
        if id(outs[0]) in memo:
            continue
        if node.type == "Placeholder":
            if node.name in feeds:
                memo[id(outs[0])] = feeds[node.name]
            elif node.inputs:
                memo[id(outs[0])] = node.inputs[0]
            else:
                raise missing_feed(outs[0])
            continue
        if node.name in feeds:
            fed = feeds[node.name]
            if node._single:
                memo[id(outs[0])] = np.asarray(fed) if node._dtypes[0] is None else \
                    np.asarray(fed, node._dtypes[0])
                continue
        args = []
        for x in node.inputs:
            if isinstance(x, Tensor):
                args.append(memo[id(x)])
            elif isinstance(x, (VariableBase, RunInput)):
                args.append(var_values[id(x)])
            else:
                args.append(x)
        try:
            result = node.func(*args)
        except TypeError as e:
            if "ArrayBox" in str(e):
                raise TypeError(
                    f"op '{node.name}' ({getattr(node.func, '__name__', 'py_func')}) cannot "
                    f"be differentiated by autograd: compute with autograd.numpy ('import "
                    f"autograd.numpy as np'), without float()/int() or in-place writes on "
                    f"values that depend on the variables, or give the function a "
                    f"psrt.custom_gradient ({e})") from e
            raise
        if node._single:
            memo[id(outs[0])] = _convert_output(node, 0, result)
        else:
            if not isinstance(result, (list, tuple)) or len(result) != len(outs):
                raise errors.InvalidArgumentError(
                    None, None, f"op '{node.name}' returned {_count(result)} values, but "
                    f"expects to see {len(outs)} values")
            for i, (t, r) in enumerate(zip(outs, result)):
                memo[id(t)] = _convert_output(node, i, r)


def _count(result: Any) -> int:
    return len(result) if isinstance(result, (list, tuple)) else 1


def _convert_output(node: Node, i: int, value: Any) -> Any:
    dt = node._dtypes[i]
    if dt is None:
        return value
    if isinstance(value, np.ndarray):
        return value if value.dtype == dt else value.astype(dt)
    if isinstance(value, (np.generic, int, float, bool, list, tuple)):
        return np.asarray(value, dt)
    # A traced value (autograd's box): cast only if needed, keeping the trace.
    inner = getattr(value, "_value", None)
    if inner is not None and getattr(inner, "dtype", dt) != dt:
        return value.astype(dt)
    return value


def _traced(node: Node, act: list[int], var_values: dict[int, Any], feeds: dict[str, Any],
            vals: dict[int, Any]) -> Callable[[Any], list[Any]]:
    """Runs ``node`` with its arguments at positions ``act`` traced by autograd, leaves its
    outputs (plain values) in ``vals`` and returns its gradient function: ``dy`` (a list
    of them for a multi-output op) to one gradient or None per argument."""
    from autograd.core import VJPNode, add_outgrads, getval, toposort  # noqa: PLC0415
    from autograd.tracer import isbox, new_box, trace_stack  # noqa: PLC0415

    ins = node.inputs
    local: dict[int, Any] = {}
    overlay = dict(var_values)
    roots = []
    with trace_stack.new_trace() as trace:
        for i, x in enumerate(ins):
            if isinstance(x, Tensor):
                local[id(x)] = vals[id(x)]
        for i in act:
            x = ins[i]
            root = VJPNode.new_root()
            roots.append(root)
            if isinstance(x, Tensor):
                local[id(x)] = new_box(vals[id(x)], trace, root)
            else:
                overlay[id(x)] = new_box(var_values[id(x)], trace, root)
        _evaluate_nodes([node], overlay, feeds, local)
    ends = [local[id(t)] for t in node.outputs]
    for t, e in zip(node.outputs, ends):
        vals[id(t)] = getval(e)
    root_pos = {id(r): i for r, i in zip(roots, act)}

    def backprop(end: Any, dy: Any, out: list[Any]) -> None:
        if not (isbox(end) and end._trace == trace):
            return
        outgrads: dict[Any, Any] = {end._node: (dy, False)}
        for vjp_node in toposort(end._node):
            og = outgrads.pop(vjp_node)
            if not vjp_node.parents:
                i = root_pos.get(id(vjp_node))
                if i is not None:
                    out[i] = og[0] if out[i] is None else out[i] + og[0]
                continue
            for parent, g in zip(vjp_node.parents, vjp_node.vjp(og[0])):
                outgrads[parent] = add_outgrads(outgrads.get(parent), g)

    def grad_fn(dy: Any) -> list[Any]:
        out: list[Any] = [None] * len(ins)
        if node._single:
            backprop(ends[0], dy, out)
        else:
            for end, d in zip(ends, dy):
                if d is not None:
                    backprop(end, d, out)
        return out
    return grad_fn


def _gradient_program(plan: Plan, loss: Tensor, diff_vars: Sequence[Any],
                      var_values: dict[int, Any], feeds: dict[str, Any]
                      ) -> tuple[list[Any], bool]:
    """``(program, loss_active)``: whether ``loss`` depends on ``diff_vars``, and how
    :func:`value_and_gradients` runs each op of ``plan``: ``(0, node, one-op plan, None,
    None)`` plainly, ``(3, node, id of its output, default, None)`` a fed placeholder,
    ``(1, node, needs, sources, back)`` with its own gradient (``sources``: per argument
    ``(0, id)`` a tensor, ``(1, id)`` a variable's value, ``(2, constant)``), or ``(2, node,
    needs, None, back)`` traced; ``back`` is ``(output id, or a tuple of them for a
    multi-output op; ((position, id) of each input whose gradient is wanted))``. Built once per loss plan and set of differentiated
    variables, and kept with the loss's cached plans (a plan pruned by this run's feeds is
    not kept)."""
    key = ("gradients", id(plan)) + tuple(map(id, diff_vars))
    cached = loss._plans.get(key)
    if cached is not None:
        return cached
    active: set[int] = {id(v) for v in diff_vars}
    program: list[tuple[Any, ...]] = []
    for node in plan.nodes:
        ins = node.inputs
        act = tuple(i for i, x in enumerate(ins) if id(x) in active) \
            if node.type == "PyFunc" and node.name not in feeds else ()
        if node.type == "Placeholder" and node.name in feeds:
            program.append((3, node, id(node.outputs[0]), ins[0] if ins else None, None))
            continue
        if not act:
            program.append((0, node, _OneNode(node), None, None))
            continue
        # What the backward pass needs: the output ids, and (position, id) of each input
        # whose gradient is wanted.
        back = (id(node.outputs[0]) if node._single else tuple(id(t) for t in node.outputs),
                tuple((i, id(ins[i])) for i in act))
        if node.vjp is not None and node._single:
            srcs = tuple((0, id(x)) if isinstance(x, Tensor) else
                         (1, id(x)) if id(x) in var_values else (2, x) for x in ins)
            program.append((1, node, act, srcs, back))
        else:
            program.append((2, node, list(act), None, back))
        active.update(id(t) for t in node.outputs)
    result = (program, id(loss) in active)
    if loss._plans.get((id(loss),)) is plan:
        loss._plans[key] = result
    return result


class _OneNode:
    """A plan of one op, to run :func:`evaluate` on it alone."""

    __slots__ = ("nodes", "backwards", "program")

    def __init__(self, node: Node) -> None:
        self.nodes = [node]
        self.backwards = [node] if isinstance(node.func, Backward) else []
        self.program: list[tuple[Node, Any]] | None = None


def run_constants(plan: Plan, memo: dict[int, Any]) -> dict[int, Any]:
    """The values in ``memo`` (this run's) of the plan's ``stop_gradient`` outputs: for
    ``value_and_gradients``' ``known``. TF computes each tensor once per run, so a value an
    earlier op of the run computed (batch renorm's corrections, computed by the update ops
    before they change the averages the corrections read) is the training step's too; it
    passes no gradient back, so the gradients are those of the constant."""
    out: dict[int, Any] = {}
    for node in plan.nodes:
        if node.stops_gradient and id(node.outputs[0]) in memo:
            out[id(node.outputs[0])] = memo[id(node.outputs[0])]
    return out


def value_and_gradients(plan: Plan, loss: Tensor, diff_vars: Sequence[Any],
                        var_values: dict[int, Any], feeds: dict[str, Any],
                        memo: dict[int, Any], known: dict[int, Any] | None = None,
                        keep_tape: bool = False) -> tuple[Any, list[Any]]:
    """``loss``'s value and its gradient for each of ``diff_vars`` (arrays of each
    variable's dtype; zeros for a variable the loss reads but does not depend on), by
    reverse-mode autodiff over the plan's ops. Every tensor computed on the way is left in
    ``memo`` for other fetches of the run. A non-scalar loss is summed, as
    ``tf.gradients``. ``known`` holds tensor values (by id) already computed in this run
    that do not depend on ``diff_vars``: their ops are not run again.

    An op that reads no differentiated value runs plainly. An op with its own gradient
    (``Node.vjp``: psrt.nn's fused ops, the tensor operators, custom_gradient functions)
    runs it with no tracing; any other op is traced alone by autograd. The backward pass
    then walks the ops in reverse, as TF's ``gradients`` walks the graph: the Python cost
    per step is one call per op, not one per numpy call inside the ops. With ``keep_tape``
    the gradient function of each op is left in ``memo`` too (as :func:`evaluate` keeps
    them), for ``tf.gradients`` tensors fetched in the same run to reuse."""
    vals: dict[int, Any] = dict(known) if known else {}   # id(Tensor) -> value this step
    tape: list[tuple[Any, Any]] = []
    program, loss_active = _gradient_program(plan, loss, diff_vars, var_values, feeds)
    for kind, node, act, srcs, back in program:
        if kind == 1:      # has its own gradient
            y, grad_fn = node.vjp(act, *[vals[k] if s == 0 else var_values[k] if s == 1
                                         else k for s, k in srcs])
            vals[back[0]] = y if node._dtypes[0] is None else _convert_output(node, 0, y)
        elif kind == 3:    # a placeholder: its feed or default
            vals[act] = feeds[node.name] if node.name in feeds else srcs
            continue
        elif kind == 0:    # reads nothing differentiated: runs plainly
            evaluate(act, var_values, feeds, vals)  # act: an _OneNode
            continue
        else:              # traced by autograd
            grad_fn = _traced(node, act, var_values, feeds, vals)
        tape.append((back, grad_fn))
        if keep_tape:
            vals[-id(node)] = (tuple(act), grad_fn)
    value = vals[id(loss)]
    if memo:
        for key, val in vals.items():
            memo.setdefault(key, val)
    else:
        memo.update(vals)
    cotangents: dict[int, Any] = {}
    if loss_active:
        cotangents[id(loss)] = np.ones_like(value)
    for (outs, wanted), grad_fn in reversed(tape):
        if outs.__class__ is int:
            dy = cotangents.pop(outs, None)
            if dy is None:
                continue
            gs = grad_fn(dy)
        else:
            dys = [cotangents.pop(k, None) for k in outs]
            if all(d is None for d in dys):
                continue
            gs = grad_fn(dys)
        if not isinstance(gs, (tuple, list)):
            gs = (gs,)
        for i, key in wanted:
            g = gs[i] if i < len(gs) else None
            if g is None:
                continue
            prev = cotangents.get(key)
            cotangents[key] = g if prev is None else prev + g
    grads = [cotangents.get(id(v)) for v in diff_vars]
    out = []
    for v, g in zip(diff_vars, grads):
        # A tensor's gradient (tf.gradients with respect to a Tensor) has its value's shape.
        dt = v.dtype if v.dtype is not None else None
        if g is None:
            src = var_values[id(v)] if id(v) in var_values else vals[id(v)]
            out.append(np.zeros(np.shape(src), dt if dt is not None else np.asarray(src).dtype))
        else:
            g = np.asarray(g)
            dt = dt if dt is not None else g.dtype
            # np.require keeps a 0-d gradient 0-d (np.ascontiguousarray makes it 1-d).
            out.append(g if g.dtype == dt and g.flags.c_contiguous
                       else np.require(g, dt, "C"))
    return value, out


# ---- tf.gradients: backward passes from the run's own forward pass --------------------------


class NotDifferentiable:
    """An op kernel (``fwd(needs, *args) -> (value, grad_fn)``) whose op passes no gradient
    to its inputs, as an op TF declares with ``ops.NotDifferentiable`` (``StopGradient``):
    ``tf.gradients`` finds no path through it, so an ``x`` reached only through it gets
    None (TF's ``StopGradientTest``), and backward passes stop there."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: Callable[..., Any]) -> None:
        self.kernel = kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel(*args, **kwargs)


def differentiable(x: Any) -> bool:
    """Whether a gradient flows through ``x`` (a Tensor, Variable or run input): a float or
    complex dtype, or one not declared. TF's gradients_util ``_IsBackpropagatable``: "All
    integer tensors are considered constant with respect to all ``xs``" (gradients_impl.py,
    r1.15)."""
    dt = getattr(x, "dtype", None)
    return dt is None or np.dtype(dt).kind in "fc"


def _second_order(needs: Any, *args: Any) -> Any:
    raise NotImplementedError("psrt cannot differentiate a tf.gradients tensor (second "
                              "derivatives, hessians): its op has no gradient")


class Backward:
    """The kernel of one ``tf.gradients`` op (built by psrt/ops/gradients_impl.py): the
    gradient of ``sum(ys)``, each ``ys[i]`` weighted by ``grad_ys[i]``, with respect to each
    of ``seeds``, from the forward values of the run that computes it.

    ``seeds`` are what is differentiated: Tensors and Variables (dense gradients, arrays of
    their values' shapes) and run inputs read by ops with a ``row_slices(dy, *args)`` method
    (an embedding lookup's rows of a variable: for each, the list of ``(values, indices)``
    pieces TF's gather gradient gives per lookup). ``stops`` are the ids of nodes not to
    differentiate through (``stop_gradients``). ``finish`` turns the list of seed gradients
    into the op's value.

    Built once, at graph construction: which seeds the ``ys`` depend on through
    differentiable values (TF's ``_PendingCount``: float tensors, no ``stop_gradients`` op,
    no :class:`NotDifferentiable` op), the ops between them whose gradient functions the
    backward pass calls (and at which argument positions), in reverse order.

    Raises:
        NotImplementedError: a ``tf.gradients`` op between the seeds and the ``ys``
            (second derivatives).
    """

    __slots__ = ("ys", "grad_ys", "seeds", "finish", "connected", "tape_needs", "sweep",
                 "_seed_ids")

    def __init__(self, ys: Sequence[Tensor], grad_ys: Sequence[Any], seeds: Sequence[Any],
                 stops: set[int], finish: Callable[[list[Any]], Any],
                 plan: Plan | None = None) -> None:
        self.ys = list(ys)
        self.grad_ys = list(grad_ys)
        self.seeds = list(seeds)
        self._seed_ids = {id(s) for s in self.seeds}
        self.finish = finish
        plan = plan if plan is not None else Plan(self.ys)
        # Backward from the ys: the values whose gradient a y receives.
        needed = {id(y) for y in self.ys if differentiable(y)}
        for node in reversed(plan.nodes):
            if not any(id(t) in needed for t in node.outputs) or _stops_here(node, stops):
                continue
            for x in node.inputs:
                if isinstance(x, (Tensor, VariableBase, RunInput)) and differentiable(x):
                    needed.add(id(x))
        self.connected = [id(s) in needed for s in self.seeds]
        # Forward from the seeds: the ops between them and the ys.
        active = {id(s) for s, ok in zip(self.seeds, self.connected) if ok}
        self.tape_needs: dict[int, tuple[int, ...]] = {}
        sweep: list[tuple[Node, Any, tuple[tuple[int, int], ...], bool]] = []
        for node in plan.nodes:
            if _stops_here(node, stops):
                continue
            ins = node.inputs
            pos = tuple(i for i, x in enumerate(ins) if id(x) in active and id(x) in needed)
            if not pos or not any(id(t) in needed for t in node.outputs):
                continue
            if isinstance(node.func, Backward):
                _second_order(pos)
            wanted = tuple((i, id(ins[i])) for i in pos)
            sink = hasattr(node.func, "row_slices") and node._single and \
                all(isinstance(ins[i], RunInput) for i in pos)
            outs = id(node.outputs[0]) if node._single else tuple(id(t) for t in node.outputs)
            if not sink:
                self.tape_needs[id(node)] = pos
            sweep.append((node, outs, wanted, sink))
            active.update(id(t) for t in node.outputs if differentiable(t))
        self.sweep = sweep[::-1]

    def __call__(self, *args: Any) -> Any:
        raise RuntimeError("a tf.gradients op is computed by psrt.framework.autodiff.evaluate "
                           "with the run's forward values, not called")

    def op(self, inputs: Sequence[Any], name: str) -> Tensor:
        """The graph op of this kernel: its inputs (the ys and the tensors of ``grad_ys``),
        its value the list ``finish`` returns; it has no gradient (second derivatives)."""
        t: Tensor = py_func(self, list(inputs), None, name=name)
        t.op.vjp = _second_order
        return t

    def backward(self, memo: dict[int, Any], var_values: dict[int, Any],
                 feeds: dict[str, Any]) -> Any:
        """The op's value: ``finish`` of the seeds' gradients, by the reverse pass over the
        gradient functions the run's forward pass left in ``memo``.

        Raises:
            InvalidArgumentError: a ``grad_ys`` value that does not broadcast to its y.
        """
        self._complete_tape(memo, var_values, feeds)
        cot: dict[int, Any] = {}
        for i, (y, g) in enumerate(zip(self.ys, self.grad_ys)):
            yv = np.asarray(memo[id(y)])
            gv = np.ones_like(yv) if g is None else _grad_y_value(i, y, yv, g, memo)
            key = id(y)
            cot[key] = gv if key not in cot else cot[key] + gv
        sparse: dict[int, list[Any]] = {}
        keep = self._seed_ids
        # A cotangent is dropped once its op has used it, unless it is a seed's gradient.
        for node, outs, wanted, sink in self.sweep:
            if sink:
                dy = (cot.get if outs in keep else cot.pop)(outs, None)
                if dy is None:
                    continue
                lookup: Any = node.func    # an op with row_slices (a lookup's)
                pieces = lookup.row_slices(dy, *_arguments(node, var_values, memo))
                for i, key in wanted:
                    if i in pieces:
                        sparse.setdefault(key, []).append(pieces[i])
                continue
            entry = memo.get(-id(node))
            if entry is None:        # not computed in this run (fed, or behind a feed)
                continue
            if outs.__class__ is int:
                dy = (cot.get if outs in keep else cot.pop)(outs, None)
                if dy is None:
                    continue
                gs = entry[1](dy)
            else:
                dys = [(cot.get if k in keep else cot.pop)(k, None) for k in outs]
                if all(d is None for d in dys):
                    continue
                gs = entry[1](dys)
            if not isinstance(gs, (tuple, list)):
                gs = (gs,)
            for i, key in wanted:
                g = gs[i] if i < len(gs) else None
                if g is None:
                    continue
                prev = cot.get(key)
                cot[key] = g if prev is None else prev + g
        raw: list[Any] = []
        for s, ok in zip(self.seeds, self.connected):
            if not ok:          # the ys do not depend on it: never asked for
                raw.append(None)
            elif isinstance(s, RunInput):
                raw.append(sparse.get(id(s), []))
            else:
                src = var_values[id(s)] if isinstance(s, VariableBase) else memo[id(s)]
                dt = s.dtype if s.dtype is not None else np.asarray(src).dtype
                g = cot.get(id(s))
                raw.append(np.zeros(np.shape(src), dt) if g is None else np.require(g, dt, "C"))
        return self.finish(raw)

    def _complete_tape(self, memo: dict[int, Any], var_values: dict[int, Any],
                       feeds: dict[str, Any]) -> None:
        """Gives every op the backward pass goes through its gradient function: one the
        run's forward pass left in ``memo`` (this evaluation, or a training step's
        ``value_and_gradients`` of the same run), else one made now from the op's
        arguments as the run computed them, its value already computed left as it is."""
        for node, _, _, sink in self.sweep:
            if sink:
                continue
            needs = self.tape_needs[id(node)]
            key = -id(node)
            have = memo.get(key)
            if have is not None and all(i in have[0] for i in needs):
                continue
            if id(node.outputs[0]) not in memo or node.name in feeds or any(
                    isinstance(x, Tensor) and id(x) not in memo for x in node.inputs):
                continue
            if have is not None:
                needs = tuple(sorted(set(needs) | set(have[0])))
            scratch = {id(x): memo[id(x)] for x in node.inputs if isinstance(x, Tensor)}
            memo[key] = (needs, _gradient_of(node, needs, var_values, feeds, scratch))


def _stops_here(node: Node, stops: set[int]) -> bool:
    return node.type == "Placeholder" or id(node) in stops or \
        isinstance(node.vjp, NotDifferentiable)


def _arguments(node: Node, var_values: dict[int, Any], memo: dict[int, Any]) -> list[Any]:
    return [memo[id(x)] if isinstance(x, Tensor) else
            var_values[id(x)] if isinstance(x, (VariableBase, RunInput)) else x
            for x in node.inputs]


def _grad_y_value(i: int, y: Tensor, yv: np.ndarray, g: Any, memo: dict[int, Any]) -> Any:
    """``grad_ys[i]``'s value as the cotangent of ``ys[i]``: its dtype, broadcast to its
    shape (a row-sparse one made dense)."""
    if isinstance(g, Tensor):
        gv = memo[id(g)]
    elif hasattr(g, "indices") and hasattr(g, "values"):   # IndexedSlices
        vals = np.asarray(memo[id(g.values)] if isinstance(g.values, Tensor) else g.values)
        idx = np.asarray(memo[id(g.indices)] if isinstance(g.indices, Tensor) else g.indices)
        gv = np.zeros(yv.shape, yv.dtype)
        np.add.at(gv, idx.reshape(-1), vals.reshape((-1,) + yv.shape[1:]))
    else:
        gv = g
    gv = np.asarray(gv, yv.dtype)
    if gv.shape != yv.shape:
        try:
            gv = np.broadcast_to(gv, yv.shape)
        except ValueError:
            raise errors.InvalidArgumentError(
                None, None, f"grad_ys[{i}] has shape {list(gv.shape)}, which does not "
                f"broadcast to the shape {list(yv.shape)} of ys[{i}] ('{y.name}')") from None
    return gv


def _gradient_of(node: Node, needs: tuple[int, ...], var_values: dict[int, Any],
                 feeds: dict[str, Any], vals: dict[int, Any]) -> Callable[[Any], Any]:
    """Computes ``node`` from its arguments (tensors' values in ``vals``) with the gradient
    function of the arguments at ``needs``: its own (``Node.vjp``) or autograd's trace.
    Leaves its outputs in ``vals``."""
    if node.vjp is not None and node._single:
        y, grad_fn = node.vjp(needs, *_arguments(node, var_values, vals))
        vals[id(node.outputs[0])] = y if node._dtypes[0] is None else \
            _convert_output(node, 0, y)
        return grad_fn  # type: ignore[no-any-return]
    return _traced(node, list(needs), var_values, feeds, vals)


def _program(plan: Any, feeds: dict[str, Any]) -> list[tuple[Node, Any]]:
    """How :func:`evaluate` runs each op of a plan with ``tf.gradients`` ops: ``(node,
    None)`` a backward pass, ``(node, ())`` plainly, ``(node, positions)`` with the
    gradient function of those arguments (the union over the plan's backward passes).
    Kept with the plan (a plan pruned by feeds is made per run)."""
    if plan.program is not None:
        return plan.program
    needs: dict[int, set[int]] = {}
    for b in plan.backwards:
        for key, pos in b.func.tape_needs.items():
            needs.setdefault(key, set()).update(pos)
    program: list[tuple[Node, Any]] = []
    for node in plan.nodes:
        if node.type == "Placeholder" or node.name in feeds:
            program.append((node, ()))
        elif isinstance(node.func, Backward):
            program.append((node, None))
        else:
            program.append((node, tuple(sorted(needs.get(id(node), ())))))
    plan.program = program
    return program


def _evaluate_differentiating(plan: Any, var_values: dict[int, Any], feeds: dict[str, Any],
                              memo: dict[int, Any]) -> None:
    """:func:`evaluate` of a plan with ``tf.gradients`` ops (see there)."""
    for node, needs in _program(plan, feeds):
        out = id(node.outputs[0])
        if needs is None:
            if out not in memo:
                kernel: Any = node.func
                memo[out] = kernel.backward(memo, var_values, feeds)
        elif not needs or out in memo:
            _evaluate_nodes([node], var_values, feeds, memo)
        else:
            memo[-id(node)] = (needs, _gradient_of(node, needs, var_values, feeds, memo))
