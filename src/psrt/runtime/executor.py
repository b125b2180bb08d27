"""The executor: what one ``Session.run`` does with its fetches and feeds.

A run is planned before anything executes: its fetch structure is flattened, its feeds
are keyed by name (placeholders' values converted and checked), the inputs of computed
fetches (``psrt.summary`` ops) are added, and every derived tensor's plan is checked for
unfed placeholders. Then:

* ops run in fetch order, each once (an initializer registers values; a train op is one
  training step: pull the variables, compute the gradients, push them with the global
  step's increment, in two parallel round trips, one in steady state);
* derived tensors (``psrt/framework/tensor.py``) fetched with a train op are computed on the values that
  step uses, before its push, sharing what the loss computed; without a train op they are
  computed forward only from one parallel pull of the variables they read (no push);
* fetched variables and slots are pulled together, in one parallel round trip;
* computed fetches (summaries) are computed last from their inputs' values.

:class:`Executor` is a collaborator each :class:`psrt.Session` owns: it reaches the
connections only through the small interface :class:`ExecutorHost` names (the client, the
handles and registration of variables, the shard names).
Nothing here touches a socket: the C++ client does every transfer with the GIL released.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np

from psrt.framework import autodiff as _autodiff
from psrt.framework import errors
from psrt.framework import feeds as _feeds
from psrt.framework import tensor as _graph
from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.ops import Graph, Operation
from psrt.framework.tensor import Tensor
from psrt.ops import training_ops as _training_ops
from psrt.ops.training_ops import SlotVariable, TrainOp
from psrt.ops.variables import PartitionedVariable, Variable
from psrt.runtime import fetches as _fetches
from psrt.runtime import row_lookups as _row_lookups
from psrt.runtime import sync_step as _sync

_logger = logging.getLogger("psrt")


class ExecutorHost(Protocol):
    """What an :class:`Executor` uses of the session that owns it: the connections, the
    variables' registration and handles. Nothing else of the session is read."""

    _client: Any                       # psrt._core.Client: every transfer, GIL released
    _config: Any                       # the session's ConfigProto (timeouts)
    _graph: Graph                      # the graph fetch names are looked up in
    _lock: Any                         # held for the whole of a run
    _shard_names: list[str]            # shard index -> name for messages
    _shard_of: dict[int, int]          # handle -> shard index
    _vars_by_handle: dict[int, Any]    # handle -> Variable

    def _handle(self, var: Any) -> int:
        """The client handle of a registered variable (registering it if needed)."""

    def _register(self, variables: Sequence[Any], init: bool = ...) -> Any:
        """Registers ``variables`` on their ps tasks."""


class Executor:
    """Runs fetches for the :class:`psrt.Session` that owns it (see the module docstring):
    ``session.run`` is :meth:`execute`. It keeps the values a run pulled or a push returned
    (the next step computes on them) and the progress of synchronous steps."""

    def __init__(self, host: ExecutorHost) -> None:
        self._host = host
        self._cache: dict[int, np.ndarray] = {}   # id(Variable or PartitionedVariable) -> value
        self._views: dict[int, np.ndarray] = {}
        self._last_step: dict[int, int] = {}      # id(global step) -> value from a push reply
        self._sync_states: dict[int, _sync.SyncState] = {}  # id(sync TrainOp) -> its progress
        self._prefixes: dict[int, tuple[Any, list[Any]]] = {}  # id(Plan) -> its input ops

    # ---- run ----------------------------------------------------------------------------

    def execute(self, fetches: Any, feed_dict: dict[Any, Any] | None) -> Any:
        """``Session.run``'s work (see the module docstring)."""
        fetch = _fetches.Fetch(fetches)
        feeds = self._feeds(feed_dict)
        leaves, computed = _fetches.expand_computed(fetch.leaves, feeds)
        rs = _RunState(feeds)
        tensors: list[Tensor] = []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, str):
                leaf = leaves[i] = self._by_name(leaf)
        # control_dependencies: the ops a fetch waits for run first in this run, and the
        # tensors and variables it waits for are computed and read (results dropped).
        before = _fetches.control_leaves(leaves, feeds) if self._host._graph._has_control_deps else []
        extra = len(before)
        if extra:
            leaves = before + leaves
            computed = [(i + extra, leaf, inputs, start + extra)
                        for i, leaf, inputs, start in computed]
        # A local op (a queue's enqueue or close, a reader's reset: ops/data_flow_ops.py)
        # runs as a fetch of its tensor; its result is None.
        local_ops = [i for i, leaf in enumerate(leaves)
                     if isinstance(leaf, Operation) and leaf.type == "local"]
        for i in local_ops:
            leaves[i] = leaves[i].value
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                tensors.append(leaf)
            elif isinstance(leaf, TrainOp) and leaf.loss is not None:
                _autodiff.plan_for([leaf.loss], feeds)  # unfed placeholders fail the run now
        if tensors:
            rs.pending = _autodiff.plan_for(list(dict.fromkeys(tensors)), feeds)
            rs.fetched = [id(t) for t in tensors]
        if self._host._graph._has_input_ops:
            _input_prefix(rs, leaves, feeds, self._prefixes)
        # A run of local ops only (no variable, no ps op: a queue runner's enqueue) takes
        # no lock, so it proceeds while another thread's step waits in a dequeue.
        with self._host._lock if _touches_ps(leaves, rs.pending) else contextlib.nullcontext():
            results: list[Any] = [None] * len(leaves)
            reads: list[tuple[int, Any]] = []
            op_results: dict[int, Any] = {}
            for i, leaf in enumerate(leaves):
                if leaf is None or isinstance(leaf, Tensor):
                    continue
                if isinstance(leaf, Operation):
                    # An op fetched more than once runs once per run (one training step), as
                    # TF evaluates each distinct fetch once.
                    if id(leaf) not in op_results:
                        op_results[id(leaf)] = self._run_op(leaf, feeds, rs.fresh_steps, rs)
                    results[i] = op_results[id(leaf)]
                elif isinstance(leaf, (Variable, PartitionedVariable, SlotVariable)):
                    reads.append((i, leaf))
                else:
                    raise TypeError(f"Fetch argument {leaf!r} has invalid type "
                                    f"{type(leaf).__name__}; must be a psrt Variable, "
                                    f"PartitionedVariable, slot, Tensor, Operation, name or "
                                    f"None")
            pending = rs.pending
            if pending is not None and pending.variables:
                # Forward only: the variables the tensors read come in the same parallel
                # pull as the fetched variables.
                base = len(results)
                results.extend([None] * len(pending.variables))
                reads.extend((base + k, v) for k, v in enumerate(pending.variables))
            if reads:
                self._read(reads, results, rs.fresh_steps)
            if pending is not None:
                var_values = {id(v): results[base + k]
                              for k, v in enumerate(pending.variables)} if pending.variables \
                    else {}
                if pending.lookups:  # embedding lookups: pull only the rows they touch
                    _row_lookups.prepare_rows(self, [pending], var_values, feeds, rs.memo)
                _autodiff.evaluate(pending, var_values, feeds, rs.memo)
                rs.pending = None
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                results[i] = _owned(rs.memo[id(leaf)])
        for i in local_ops:
            results[i] = None
        # Innermost first: a computed fetch found later is an input of one found earlier.
        for i, leaf, inputs, start in reversed(computed):
            results[i] = leaf._psrt_compute(
                inputs.build(results[start:start + len(inputs.leaves)]), feeds)
        return fetch.build(results[extra:len(leaves)])

    def _feeds(self, feed_dict: dict[Any, Any] | None) -> dict[str, Any]:
        """``feed_dict`` keyed by name; a placeholder's value converted exactly to its dtype
        and checked against its shape, a fed derived tensor's converted exactly to its dtype,
        as TF's session converts every feed (``_feeds.exact_feed_array``), before
        anything of the run is sent.

        Raises:
            InvalidArgumentError: a value that does not convert exactly, naming the tensor,
                its dtype and the value.
            ValueError: a placeholder's value of another shape.
        """
        if not feed_dict:
            return {}
        nodes = _graph.nodes_of(self._host._graph)
        out = {}
        for k, val in feed_dict.items():
            expand = getattr(k, "_psrt_feed_items", None)
            if expand is not None:  # a SparseTensor: a value for each placeholder of it
                for p, v in expand(val):
                    out[p.op.name] = _feeds.convert_feed(p, v)
                continue
            if isinstance(k, Tensor):
                out[k.op.name] = _convert(k, val)
                continue
            name = _feeds.feed_name(k)
            node = nodes.get(name)
            out[name] = val if node is None else _convert(node.outputs[0], val)
        return out

    def _by_name(self, name: str) -> Any:
        """The variable or tensor a fetch names (``"W"``, ``"W:0"``, ``"loss:0"``)."""
        base, _, index = name.rpartition(":")
        if not base or not index.isdigit():
            base, index = name, "0"
        v = self._host._graph.get_variable_by_name(base) if index == "0" else None
        if v is not None:
            return v
        node = _graph.nodes_of(self._host._graph).get(base)
        if node is not None and int(index) < len(node.outputs):
            return node.outputs[int(index)]
        raise ValueError(f"The name '{name}' refers to no variable in the graph")

    def _pull_new(self, var_list: Sequence[Any]) -> list[np.ndarray]:
        """The values of ``var_list`` pulled now into new arrays (one parallel round trip),
        bypassing the session's cache of trained values."""
        results: list[Any] = [None] * len(var_list)
        self._read(list(enumerate(var_list)), results, {})
        return results

    def _read(self, reads: list[tuple[int, Any]], results: list[Any],
              fresh_steps: dict[int, int]) -> None:
        """Pulls every fetched variable and slot into new arrays, one batch per slot index.
        A global step that a train op of this run incremented comes from its push reply."""
        batches: dict[int, tuple[list[int], list[np.ndarray]]] = {}
        scalars: list[int] = []
        for i, leaf in reads:
            if _is_int_scalar(leaf):
                if id(leaf) in fresh_steps:
                    results[i] = fresh_steps[id(leaf)]
                    continue
                scalars.append(i)
            slot, target = (leaf.index + 1, leaf.primary) if isinstance(leaf, SlotVariable) \
                else (0, leaf)
            out = np.empty(target.shape, _wire_dtype_of(target))
            parts = target._get_variable_list() if isinstance(target, PartitionedVariable) \
                else [target]
            hl, ol = batches.setdefault(slot, ([], []))
            hl.extend(self._host._handle(p) for p in parts)
            ol.extend(_part_views(target, out))
            results[i] = out
        for slot, (hl, ol) in batches.items():
            self._host._client.pull(hl, ol, slot)
        for i in scalars:
            results[i] = int(results[i])
        for i, leaf in reads:
            # int32 variables are int64 on the ps: give them back as the user's int32.
            if isinstance(results[i], np.ndarray) and results[i].dtype != leaf.dtype:
                results[i] = results[i].astype(leaf.dtype)

    # ---- ops ----------------------------------------------------------------------------

    def _run_op(self, op: Operation, feeds: dict[str, Any], fresh_steps: dict[int, int],
                rs: _RunState | None = None) -> Any:
        if isinstance(op, TrainOp):
            return self._train(op, feeds, fresh_steps, rs)
        if op.type == "initialize":
            self._host._register(op.variables, init=True)
            self._invalidate(op.variables)
            return None
        if op.type in ("assign", "assign_add"):
            (v,) = op.variables
            wire = _wire_dtype_of(v)
            raw = self._tensor_value(op.value, feeds, rs) if isinstance(op.value, Tensor) \
                else op.value
            value = np.array(np.broadcast_to(np.asarray(raw, wire), v.shape), order="C")
            h = self._host._handle(v)
            if op.type == "assign":
                self._host._client.assign([h], [value], 0)
            else:
                self._host._client.assign_add([h], [value])
            self._invalidate([v])
            return None
        if op.type == "report_uninitialized":
            names = [v.name for v, ok in zip(op.variables, self._initialized(op.variables))
                     if not ok]
            return np.array([n.encode() for n in names], dtype=object)
        if op.type == "is_initialized":
            return bool(self._initialized(op.variables)[0])
        if op.type == "gather":
            return self.pull_rows(op.variables[0], op.value)
        if op.type == "noop":
            return None
        raise TypeError(f"psrt cannot run op {op!r}")

    def _tensor_value(self, t: Tensor, feeds: dict[str, Any], rs: _RunState | None) -> Any:
        """The value of ``t`` (an assignment's value: a metric's sum, a moving average's
        step) computed now, on the variables' values pulled now (after the ops this run
        ran before it), sharing the run's computed tensors."""
        plan = _autodiff.plan_for([t], feeds)
        memo = rs.memo if rs is not None else {}
        var_values: dict[int, Any] = {}
        if plan.variables:
            var_values = {id(v): x for v, x in zip(plan.variables,
                                                   self._pull_new(plan.variables))}
        if plan.lookups:
            _row_lookups.prepare_rows(self, [plan], var_values, feeds, memo)
        _autodiff.evaluate(plan, var_values, feeds, memo)
        return memo[id(t)]

    def _initialized(self, var_list: Sequence[Variable]) -> list[bool]:
        if not var_list:
            return []
        return list(self._host._client.is_initialized([self._host._handle(v) for v in var_list]))

    def _invalidate(self, var_list: Iterable[Variable]) -> None:
        for v in var_list:
            self._cache.pop(id(v), None)
            if isinstance(v, PartitionedVariable):
                for p in v._get_variable_list():
                    self._cache.pop(id(p), None)
            elif v._partition is not None:
                self._cache.pop(id(v._partition[0]), None)

    def _buffers(self, var_list: Sequence[Any], refill: bool) -> tuple[list[int],
                                                                      list[np.ndarray]]:
        """Handles of the parts of ``var_list`` and views of the cached value buffers that
        receive them, for the variables not cached (allocating their buffers), or for every
        variable (once each) when ``refill``."""
        handles: list[int] = []
        outs: list[np.ndarray] = []
        seen: set[int] = set()
        for v in var_list:
            if id(v) in seen:
                continue
            seen.add(id(v))
            buf = self._cache.get(id(v))
            if buf is None:
                buf = np.empty(v.shape, _wire_dtype_of(v))
                view = buf.view()
                view.setflags(write=False)
                self._cache[id(v)] = buf
                self._views[id(v)] = view
            elif not refill:
                continue
            parts = v._get_variable_list() if isinstance(v, PartitionedVariable) else [v]
            handles.extend(self._host._handle(p) for p in parts)
            outs.extend(_part_views(v, buf))
        return handles, outs

    def _values_for(self, var_list: Sequence[Any]) -> list[np.ndarray]:
        """The train op's inputs: values returned by the last push when this session holds
        them (ps-lite's push-pull: as fresh as a separate pull at that moment), else pulled
        now in one batch."""
        missing_h, missing_o = self._buffers(var_list, refill=False)
        if missing_h:
            try:
                self._host._client.pull(missing_h, missing_o, 0)
            except Exception:
                self._invalidate(var_list)
                raise
        return [self._views[id(v)] for v in var_list]

    def _gradients(self, op: TrainOp, feeds: dict[str, Any],
                   rs: _RunState | None = None) -> tuple[Any, list[Any]]:
        """(loss, gradients aligned with ``op.var_list``): by autodiff of the op's loss
        tensor, from its loss function called on the variables' values, or the op's given
        gradients (fed ones looked up in ``feeds``) with loss None. Tensors fetched in the
        same run (``rs.pending``) are computed here, on the values of this step, before its
        push overwrites them."""
        var_list = op.var_list
        if op.loss is not None:
            plan = _autodiff.plan_for([op.loss], feeds)
            pending = rs.pending if rs is not None else None
            # Variables read only through embedding lookups are not pulled whole: their
            # rows are (prepare_rows) and their gradients are row-sparse.
            lookups = bool(plan.lookups or (pending is not None and pending.lookups))
            if lookups:
                read = {id(v) for v in plan.variables}
                dense = [v for v in var_list if id(v) in read]
            else:
                dense = var_list
            values = self._values_for(dense)
            var_values = {id(v): x for v, x in zip(dense, values)}
            others = [v for v in plan.variables if id(v) not in var_values]
            # The loss fetched with its own train op (``run([train_op, loss])``) has the
            # same cached plan: computing the loss computes every fetched tensor.
            same = pending is plan
            if pending is not None and not same:
                others += [v for v in pending.variables
                           if id(v) not in var_values and v not in others]
            if others:
                var_values.update(zip(map(id, others), self._pull_new(others)))
            memo = rs.memo if rs is not None else {}
            rows: list[Any] = []
            # The input ops computed before the lock (a dequeue): not run again.
            known: dict[int, Any] = {k: memo[k] for k in rs.prefix} if rs is not None \
                and rs.prefix else {}
            if memo:
                known.update(_autodiff.run_constants(plan, memo))
            if lookups:
                known.update(_row_lookups.prepare_rows(self, [plan, pending], var_values,
                                                       feeds, memo))
                rows = _row_lookups.trainable_rows(plan, var_list)
            # tf.gradients tensors fetched in the run reuse this step's gradient functions.
            loss, grads = _autodiff.value_and_gradients(
                plan, op.loss, list(dense) + rows if rows else dense, var_values, feeds, memo,
                known, keep_tape=pending is not None and bool(pending.backwards))
            if dense is not var_list or rows:
                grads = _row_lookups.table_gradients(var_list, dense, grads[:len(dense)], rows,
                                                   grads[len(dense):], var_values)
            if pending is not None:
                if not same:
                    _autodiff.evaluate(pending, var_values, feeds, memo)
                rs.pending = None  # type: ignore[union-attr]
            if rs is not None:
                _own_all(rs)
            return loss, grads
        if op.loss_fn is None:
            # Given gradients: arrays, feeds, or tensors (clipped tf.gradients, say) computed
            # now from the variables' current values; fetched tensors are computed forward
            # after the push (a fetched gradient tensor keeps the value pushed).
            grads = [_fed_gradient(feeds, g, v) if isinstance(g, str) else g
                     for g, v in zip(op.grads, var_list)]
            tensors = [t for g in grads for t in _training_ops.gradient_tensors(g)]
            if tensors:
                memo = self._forward_many(list(dict.fromkeys(tensors)), feeds,
                                          rs.fresh_steps if rs else {}, rs.memo if rs else {})
                grads = [_training_ops.gradient_value(g, v, memo) for g, v in zip(grads, var_list)]
            return None, grads
        values = self._values_for(var_list)
        if rs is not None and rs.pending is not None:
            self._compute_pending(rs, var_list, values, feeds)
        out = op.loss_fn(*values, **feeds)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("the loss function must return (loss, grads); got "
                            f"{type(out).__name__}")
        loss, grads = out
        grads = list(grads)
        if len(grads) != len(var_list):
            raise ValueError(f"the loss function returned {len(grads)} gradients for "
                             f"{len(var_list)} variables {[v.name for v in var_list]}")
        return loss, grads

    def _compute_pending(self, rs: _RunState, var_list: Sequence[Any],
                         values: Sequence[np.ndarray], feeds: dict[str, Any]) -> None:
        """Computes the run's fetched tensors on the values of a training step (its
        ``var_list`` values; other variables pulled now)."""
        pending = rs.pending
        assert pending is not None
        var_values = {id(v): x for v, x in zip(var_list, values)}
        others = [v for v in pending.variables if id(v) not in var_values]
        if others:
            var_values.update(zip(map(id, others), self._pull_new(others)))
        if pending.lookups:
            _row_lookups.prepare_rows(self, [pending], var_values, feeds, rs.memo)
        _autodiff.evaluate(pending, var_values, feeds, rs.memo)
        _own_all(rs)
        rs.pending = None

    def _dense_parts(self, v: Any, g: Any) -> tuple[list[int], list[np.ndarray]]:
        """The handles of ``v``'s parts and the gradient rows each receives (views of
        ``g``)."""
        if not isinstance(g, np.ndarray):
            raise errors.InvalidArgumentError(
                None, None, f"gradient for variable '{v.name}' must be a numpy array of "
                f"{v.dtype}{list(v.shape)}; got {type(g).__name__}")
        parts = v._get_variable_list() if isinstance(v, PartitionedVariable) else [v]
        if len(parts) > 1 and (g.shape != v.shape or g.dtype != v.dtype
                               or not g.flags.c_contiguous):
            raise errors.InvalidArgumentError(
                None, None, f"gradient for variable '{v.name}' must be {v.dtype}"
                f"{list(v.shape)} C-contiguous; got {g.dtype}{list(g.shape)}")
        handles = [self._host._handle(p) for p in parts]
        return handles, (_part_views(v, g) if len(parts) > 1 else [g])

    def _train(self, op: TrainOp, feeds: dict[str, Any], fresh_steps: dict[int, int],
               rs: _RunState | None = None) -> Any:
        if op.sync is not None:
            return self._train_sync(op, feeds, fresh_steps, rs)
        var_list = op.var_list
        loss, grads = self._gradients(op, feeds, rs)
        lr = self._learning_rate(op, feeds, fresh_steps)
        dense_h: list[int] = []
        dense_g: list[np.ndarray] = []
        dense_out: list[np.ndarray] = []
        sparse: list[tuple[Any, IndexedSlices, np.ndarray]] = []
        for v, g in zip(var_list, grads):
            if g is None:
                continue
            if isinstance(g, IndexedSlices):
                sparse.extend(self._sparse_parts(v, g))
                continue
            handles, pieces = self._dense_parts(v, g)
            dense_h.extend(handles)
            dense_g.extend(pieces)
            cached = self._cache.get(id(v))
            if cached is not None:
                dense_out.extend(_part_views(v, cached))
        gs = op.global_step
        # The core steps integer global steps in the push itself; a float one (TF adds 1 to
        # any global_step given to minimize) gets an assign_add of 1 after the push.
        float_step = gs is not None and gs.dtype.kind == "f"
        step_h = self._host._handle(gs) if gs is not None and not float_step else -1
        use_return = (op.loss_fn is not None or op.loss is not None) and \
            len(dense_out) == len(dense_h)
        step = -1
        try:
            # Dense and row-sparse gradients and the global step: one parallel round trip.
            step = self._host._client.push(dense_h, dense_g, lr, step_h, 1,
                                     dense_out if use_return and dense_h else None,
                                     [self._host._handle(v) for v, _, _ in sparse],
                                     [idx for _, _, idx in sparse],
                                     [g.values for _, g, _ in sparse])
            if float_step:
                self._host._client.assign_add([self._host._handle(gs)],
                                              [np.ones((), _wire_dtype_of(gs))])
                self._invalidate([gs])
        except Exception:
            self._invalidate(var_list)
            raise
        if not use_return:
            self._invalidate(var_list)
        for v, _, _ in sparse:
            self._invalidate([v])
        if gs is not None and step >= 0:
            fresh_steps[id(gs)] = step
            self._last_step[id(gs)] = step
        return loss

    def _learning_rate(self, op: TrainOp, feeds: dict[str, Any],
                       fresh_steps: dict[int, int]) -> float:
        """The learning rate this step pushes: the optimizer's number, its callable's value,
        or a :class:`psrt.Tensor` (a ``psrt.train.*_decay`` schedule of the global step, a
        fed placeholder) computed now, forward only: a global step this run already
        advanced comes from that push's reply, other variables it reads are pulled (one
        parallel round trip), so the value is the one TF's graph would read at this step."""
        return op.optimizer._learning_rate_value(
            lambda t: self._forward_now(t, feeds, fresh_steps))

    def _forward_now(self, t: Tensor, feeds: dict[str, Any],
                     fresh_steps: dict[int, int]) -> Any:
        """``t``'s value from the variables' current values (see :meth:`_learning_rate`)."""
        return self._forward_many([t], feeds, fresh_steps, {})[id(t)]

    def _forward_many(self, ts: list[Tensor], feeds: dict[str, Any],
                      fresh_steps: dict[int, int], memo: dict[int, Any]) -> dict[int, Any]:
        """``memo`` with the values of ``ts`` (and what they read) computed from the
        variables' current values: those this run's pushes advanced from their replies,
        the others pulled in one parallel round trip."""
        plan = _autodiff.plan_for(ts, feeds)
        values: dict[int, Any] = {}
        pull = []
        for v in plan.variables:
            if id(v) in fresh_steps:
                values[id(v)] = fresh_steps[id(v)]
            else:
                pull.append(v)
        if pull:
            values.update(zip(map(id, pull), self._pull_new(pull)))
        if plan.lookups:
            _row_lookups.prepare_rows(self, [plan], values, feeds, memo)
        _autodiff.evaluate(plan, values, feeds, memo)
        return memo

    def _sparse_parts(self, v: Any, g: IndexedSlices
                      ) -> list[tuple[Variable, IndexedSlices, np.ndarray]]:
        """(variable, gradient, int64 indices) of each part of ``v`` that ``g`` touches: a
        PartitionedVariable's rows (indices into its whole value, part ``k`` holding
        ``offsets[k]:offsets[k+1]``) go to their parts with part-local indices; an
        embedding lookup's gradient comes split by part already."""
        parts = getattr(g, "parts", None)
        if parts is not None and isinstance(g, _row_lookups._PartSlices):
            return parts
        idx = self._sparse_indices(v, g)
        if not isinstance(v, PartitionedVariable):
            return [(v, g, idx)]
        off = v.offsets
        part = np.searchsorted(np.asarray(off[1:-1], np.int64), idx, side="right")
        out = []
        for k, p in enumerate(v._get_variable_list()):
            m = part == k
            if m.any():
                local = np.ascontiguousarray(idx[m] - off[k])
                out.append((p, IndexedSlices(np.ascontiguousarray(g.values[m]), local,
                                             p.shape), local))
        return out

    def _sparse_indices(self, v: Any, g: IndexedSlices) -> np.ndarray:
        """``g.indices`` as the int64 C-contiguous array the core takes, every index checked
        here, before anything of the step is sent: a bad one fails the whole step rather
        than leave the step's other updates applied."""
        idx = np.asarray(g.indices)
        if idx.dtype != np.int64:
            if idx.dtype.kind not in "iu":
                raise errors.InvalidArgumentError(
                    None, None, f"indices for variable '{v.name}' must be integers; got "
                    f"{idx.dtype}")
            idx = idx.astype(np.int64)
        rows = v.shape[0] if len(v.shape) else 0
        # A dynamic table's shard takes any int64 id (its rows are made on first use).
        table = getattr(v, "_table", None) is not None
        bad = np.flatnonzero((idx < 0) | (idx >= rows)) if idx.ndim == 1 and not table else []
        if len(bad):
            j = int(bad[0])
            raise errors.InvalidArgumentError(
                None, None, f"variable '{v.name}': index {int(idx[j])} at position {j} is out "
                f"of range [0, {rows})")
        values = g.values
        want = (idx.shape[0],) + tuple(v.shape[1:]) if idx.ndim == 1 else None
        if not isinstance(values, np.ndarray) or values.dtype != v.dtype or \
                (want is not None and values.shape != want):
            def shape(dims: Any) -> str:
                return "[" + ",".join(str(d) for d in dims) + "]"
            raise errors.InvalidArgumentError(
                None, None, f"gradient rows for variable '{v.name}' must be {v.dtype}"
                f"{shape(want) if want is not None else ''}; got "
                f"{getattr(values, 'dtype', type(values).__name__)}{shape(np.shape(values))}")
        return np.ascontiguousarray(idx)

    # ---- synchronous training (SyncReplicasOptimizer) --------------------------------------

    def _train_sync(self, op: TrainOp, feeds: dict[str, Any], fresh_steps: dict[int, int],
                    rs: _RunState | None = None) -> Any:
        """One run of a SyncReplicasOptimizer's train op: gradients at the session's step
        ``tag``, pushed tagged with it together with the global step's tagged increment;
        after this worker's last push of the step (the ``ceil(R / total_num_replicas)``-th)
        the same round trip waits until the step is complete on every pushed variable and
        the global step, and refills the cached values. The next ``tag`` is the lowest step
        reached. Any error forgets the progress: the next run re-reads the global step."""
        assert op.sync is not None and op.global_step is not None
        replicas, total = op.sync
        var_list = op.var_list
        gs = op.global_step
        try:
            step_h = self._host._handle(gs)
            state = self._sync_states.get(id(op))
            if state is None or state.op is not op or any(
                    id(v) not in self._cache for v in var_list):
                # First run, or values invalidated (initialization, restore, an error):
                # read every value and the global step, which is the step to compute at.
                handles, outs = self._buffers(var_list, refill=True)
                _, _, (_, value, _) = self._host._client.sync_step(
                    [], [], [], [], [], None, 0, step_h, False,
                    handles, outs, [0] * len(handles), 0, 0.0)
                state = self._sync_states[id(op)] = _sync.SyncState(op, value)
            tag = state.tag
            loss, grads = self._gradients(op, feeds, rs)
            lr = self._learning_rate(op, feeds, fresh_steps)
            push_h: list[int] = []
            push_g: list[np.ndarray] = []
            sparse_h: list[int] = []
            sparse_i: list[np.ndarray] = []
            sparse_r: list[Any] = []
            pushed: set[int] = set()
            for v, g in zip(var_list, grads):
                if g is None:
                    continue
                if isinstance(g, IndexedSlices):
                    for part, gp, idx in self._sparse_parts(v, g):
                        sparse_i.append(idx)
                        sparse_h.append(self._host._handle(part))
                        sparse_r.append(gp.values)
                else:
                    handles, pieces = self._dense_parts(v, g)
                    push_h.extend(handles)
                    push_g.extend(pieces)
                pushed.add(id(v))
            state.pushes += 1
            last = state.pushes >= -(-replicas // total)  # ceil(R / total) pushes per step
            wait_h: list[int] = []
            outs: list[np.ndarray] = []
            needs: list[int] = []
            if last:
                for v in var_list:
                    handles, views = self._buffers([v], refill=True)
                    wait_h.extend(handles)
                    outs.extend(views)
                    needs.extend([tag + 1 if id(v) in pushed else 0] * len(handles))
            timeout = _sync.sync_timeout(self._host)
            start = time.monotonic()
            accepted, waits, gstep = self._host._client.sync_step(
                push_h, push_g, sparse_h, sparse_i, sparse_r, lr, tag, step_h, True,
                wait_h, outs, needs, tag + 1 if last else 0,
                _sync.wait_secs(self._host, start + timeout, wait_h + [step_h]) if last else 0.0)
            stale = accepted.count(False)
            if stale:
                _logger.debug("step %d: %d of %d gradient(s) dropped as stale", tag, stale,
                              len(accepted))
            if last:
                waits, gstep = _sync.wait_for_step(self._host, tag, replicas, step_h, wait_h,
                                                   outs, needs, waits, gstep, start, timeout)
                state.tag = min([gstep[1]] + [w[1] for w, n in zip(waits, needs) if n > 0])
                state.pushes = 0
        except BaseException:
            self._sync_states.pop(id(op), None)
            self._invalidate(var_list)
            raise
        fresh_steps[id(gs)] = gstep[1]
        self._last_step[id(gs)] = gstep[1]
        return loss


class _RunState:
    """One run's state: its feeds, the fetched tensors not computed yet (a Plan), every
    tensor value computed (id(Tensor) -> value) and the global steps from push replies."""

    __slots__ = ("feeds", "pending", "memo", "fresh_steps", "fetched", "prefix")

    def __init__(self, feeds: dict[str, Any]) -> None:
        self.feeds = feeds
        self.fetched: list[int] = []   # ids of the fetched tensors
        self.pending: _autodiff.Plan | None = None
        self.memo: dict[int, Any] = {}
        self.fresh_steps: dict[int, int] = {}
        self.prefix: list[int] = []    # ids of tensors computed before the lock


def _owned(value: Any) -> Any:
    """A fetched tensor's value, copied when it is a read-only view (of a variable value
    the session caches and a later push overwrites)."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy()
    return value


def _own_all(rs: _RunState) -> None:
    """Copies the fetched tensors' values that are read-only views (of cached variable
    values, which the step's push is about to overwrite)."""
    memo = rs.memo
    for key in rs.fetched:
        value = memo.get(key)
        if isinstance(value, np.ndarray) and not value.flags.writeable:
            memo[key] = value.copy()


def _input_prefix(rs: _RunState, leaves: list[Any], feeds: dict[str, Any],
                  cache: dict[int, tuple[Any, list[Any]]]) -> None:
    """Computes, before the run takes the session's lock, the ops of its tensors and train
    op losses that read no variable (an input pipeline's dequeue waits there, not holding
    the lock that its producers' runs or the Supervisor's threads may need)."""
    plans = [_autodiff.plan_for([leaf.loss], feeds) for leaf in leaves
             if isinstance(leaf, TrainOp) and leaf.loss is not None]
    if rs.pending is not None:
        plans.append(rs.pending)
    for plan in plans:
        hit = cache.get(id(plan))
        if hit is not None and hit[0] is plan:   # the entry holds its plan: no id reuse
            nodes = hit[1]
        else:
            nodes = _autodiff.local_prefix(plan, feeds)
            if len(cache) > 256:                  # plans pruned by feeds are new each run
                cache.clear()
            cache[id(plan)] = (plan, nodes)
        _autodiff.evaluate(_autodiff.Nodes(nodes), {}, feeds, rs.memo)
        rs.prefix.extend(id(t) for n in nodes for t in n.outputs)


def _touches_ps(leaves: list[Any], pending: Any) -> bool:
    """Whether a run reads or changes anything on the ps tasks: a fetched variable, slot
    or op other than a no-op, or a tensor reading variables or rows."""
    for leaf in leaves:
        if leaf is None or isinstance(leaf, Tensor):
            continue
        if isinstance(leaf, Operation) and leaf.type == "noop":
            continue
        return True
    return pending is not None and bool(pending.variables or pending.lookups)


def _is_int_scalar(v: Any) -> bool:
    """True for integer scalar variables (the global step): fetched as a Python int."""
    return isinstance(v, Variable) and v.dtype.kind == "i" and v.shape == ()


def _part_views(v: Any, arr: np.ndarray) -> list[np.ndarray]:
    """Row ranges of ``arr`` for each part of ``v`` (one view for a plain variable); axis-0
    slices of a C-contiguous array are C-contiguous, so no copy is made."""
    if isinstance(v, PartitionedVariable):
        off = v.offsets
        return [arr[off[k]:off[k + 1]] for k in range(len(off) - 1)]
    return [arr]


def _convert(t: Tensor, value: Any) -> Any:
    """A fed value of ``t`` converted as TF's session converts feeds: a placeholder's to its
    dtype and shape, a derived tensor's (one of a known dtype) to its dtype."""
    if t.op.type == "Placeholder":
        return _feeds.convert_feed(t, value)
    dt = t.op._dtypes[0] if t.op._single and t.op._dtypes else None
    return value if dt is None else _feeds.exact_feed_array(t.op.name, dt, value)


def _fed_gradient(feeds: dict[str, Any], name: str, var: Any) -> Any:
    """The ``feed_dict`` value of a gradient given by feed name (``"g"`` or ``"g:0"``), as
    TF's placeholder: a missing feed is InvalidArgumentError naming it and the variable."""
    key = name[:-2] if name.endswith(":0") else name
    if key not in feeds:
        raise errors.InvalidArgumentError(
            None, None, f"You must feed a value for '{key}', the gradient of variable "
                        f"'{var.name}' ({np.dtype(var.dtype).name}{list(var.shape)})")
    return feeds[key]


def _wire_dtype_of(v: Any) -> np.dtype:
    """The dtype of ``v``'s values on the ps (a variable's or slot's ``_wire_dtype``)."""
    return getattr(v, "_wire_dtype", v.dtype)
