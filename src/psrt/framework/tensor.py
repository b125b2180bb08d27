"""Placeholders and derived tensors: the graph a TF1 script builds, over forward numpy code.

psrt has no dataflow engine. A script declares its inputs with :func:`placeholder` and its
model as forward numpy functions wrapped as graph nodes with :func:`py_func` (TF1's
``tf.py_func(func, inp, Tout)``) or the :func:`function` decorator; the result is a
:class:`Tensor`, fetchable with ``Session.run`` and differentiable by ``minimize``::

    import autograd.numpy as np        # numpy, traced for gradients

    x = psrt.placeholder(np.float32, [None, 784], name="x")
    y_ = psrt.placeholder(np.float32, [None, 10], name="y_")
    W = psrt.Variable(np.zeros([784, 10], np.float32), name="W")
    b = psrt.Variable(np.zeros([10], np.float32), name="b")

    @psrt.function
    def cross_entropy(W, b, x, y_):
        logits = x @ W + b
        logits = logits - np.max(logits, axis=1, keepdims=True)
        return -np.mean(np.sum(y_ * (logits - np.log(np.sum(np.exp(logits), 1,
                                                          keepdims=True))), 1))

    loss = cross_entropy(W, b, x, y_)                  # a psrt.Tensor
    train_op = psrt.train.GradientDescentOptimizer(0.5).minimize(loss)
    sess.run([train_op, loss], feed_dict={x: images, y_: labels})
    sess.run(loss, feed_dict={x: test_images, y_: test_labels})   # forward only

A node's inputs are tensors, placeholders, variables (their values, pulled from their ps
tasks) and constants. What a fetch of a tensor runs is the executor's business
(``psrt/runtime/executor.py``): forward only (pull the variables the tensor reads, compute, no
push), or, with a train op in the same run, on the values of that training step.

Gradients come from `autograd <https://github.com/HIPS/autograd>`_ (HIPS): it
differentiates plain numpy code (``import autograd.numpy as np``: the numpy API, traced),
it is pure Python with numpy as its only dependency (~50 kB), and it is maintained. JAX
would also need its ``jaxlib`` (~80 MB, XLA) and turns numpy code into jax.numpy code with
immutable arrays; PyTorch is heavier still and not numpy. A function that autograd cannot
trace, or that is faster with a hand-written gradient (a fused op, as TF's
``softmax_cross_entropy_with_logits``), gets one with :func:`custom_gradient` (TF's
``tf.custom_gradient``).
"""

from __future__ import annotations

import functools
import operator
import threading
from typing import Any, Callable, Sequence

import numpy as np

from psrt.framework import dtypes as _dtypes
from psrt.framework import slicing as _slicing
from psrt.framework.ops import Graph, VariableBase, get_default_graph
from psrt.framework.tensor_shape import TensorShape, as_shape, broadcast_static


def _shape_str(shape: tuple[int | None, ...] | None) -> str:
    """TF's error-message form of a shape: ``[?,784]``; unknown rank: ``<unknown>``."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _shape_tuple_str(shape: tuple[int | None, ...] | None) -> str:
    """TF's ``str(TensorShape)``: ``(?, 784)``; unknown rank: ``<unknown>``."""
    if shape is None:
        return "<unknown>"
    if len(shape) == 1:
        return "(?,)" if shape[0] is None else f"({shape[0]},)"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


class Node:
    """An op of the graph: a placeholder or a Python function (``py_func``).

    Attributes:
        name: The op's name (str), unique in its graph.
        type: ``"Placeholder"`` or ``"PyFunc"``.
        inputs: The function's arguments: :class:`Tensor`, Variable, PartitionedVariable
            or constants, in order.
        func: The Python function (None for a placeholder).
        outputs: The :class:`Tensor` outputs, in order.
    """

    __slots__ = ("name", "type", "inputs", "func", "outputs", "graph", "_single",
                 "_dtypes", "vjp", "control_inputs", "stops_gradient", "__weakref__")

    def __init__(self, type: str, name: str, graph: Graph, inputs: Sequence[Any] = (),
                 func: Callable[..., Any] | None = None) -> None:
        self.type = type
        self.name = name
        self.graph = graph
        self.inputs = list(inputs)
        self.func = func
        self.outputs: list[Tensor] = []
        self._single = True
        self._dtypes: list[np.dtype | None] = []
        # The op's own gradient, when it has one (psrt.nn's fused ops, the tensor operators,
        # psrt.custom_gradient functions): ``vjp(needs, *args) -> (value, grad_fn)``, where
        # ``needs`` is the tuple of argument positions whose gradient is wanted and
        # ``grad_fn(dy)`` returns one gradient (or None) per argument. Without one, minimize
        # differentiates ``func`` by tracing it with autograd.
        self.vjp: Callable[..., Any] | None = None
        # What must run before this op in a run (``tf.control_dependencies``): other ops'
        # nodes (computed first by the plan) and Operations (run first by the executor).
        self.control_inputs: list[Any] = list(graph._control_inputs())
        # A ``stop_gradient``: its value computed once in a run serves the whole run, the
        # training step's forward pass included (``autodiff.run_constants``).
        self.stops_gradient = False
        nodes_of(graph)[name] = self

    @property
    def node_def_name(self) -> str:
        """The op's name (TF's ``Operation.name``)."""
        return self.name

    def __repr__(self) -> str:
        return f"<psrt op '{self.name}' type={self.type}>"


class TensorOperators:
    """Python's arithmetic operators as differentiable graph ops, for :class:`Tensor` and for
    ``psrt.Variable`` (as TF1's: a variable converts to the tensor of its value, so ``w * 2.0``,
    ``2.0 * w``, ``-w``, ``w ** 2`` and ``x @ w`` build tensors)."""

    __slots__ = ()

    # numpy defers its binary operators to ours (ndarray + Tensor -> Tensor.__radd__).
    __array_ufunc__ = None

    def _binary(self, other: Any, fn: Callable[[Any, Any], Any], sym: str,
                reverse: bool = False) -> "Tensor":
        args = [other, self] if reverse else [self, other]
        t = py_func(fn, args, None, name=_op_name(sym))
        t.op.vjp = _OPERATOR_VJPS.get(sym)
        if sym != "MatMul":
            # The static dtype and shape (TF's shape inference): the graph operand's dtype,
            # numpy's broadcast of the shapes.
            t.dtype = self.dtype
            try:
                t.shape = broadcast_static(_static_shape(args[0]), _static_shape(args[1]))
            except ValueError as e:
                raise ValueError(f"{sym}: {e}") from None
        return t

    def __getitem__(self, key: Any) -> "Tensor":
        """``x[key]``: TF's strided slice (an integer index removes its axis, ``None`` adds
        one, ``...`` stands for the axes not named; scalar int tensors may be indices or
        bounds), with its gradient, as ``tf.Tensor.__getitem__``
        (``array_ops._slice_helper``).

        Raises:
            TypeError: an index that is not an integer, a slice, ``...``, ``None`` or a
                scalar integer tensor (TF refuses array indices: use ``tf.gather``).
            ValueError: more than one ellipsis, or an index out of a known dimension.
        """
        return strided_slice_op(self, key if isinstance(key, tuple) else (key,), [],
                                "strided_slice", key)

    def __add__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.add, "add")

    def __radd__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.add, "add", reverse=True)

    def __sub__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.sub, "sub")

    def __rsub__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.sub, "sub", reverse=True)

    def __mul__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.mul, "mul")

    def __rmul__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.mul, "mul", reverse=True)

    def __truediv__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.truediv, "truediv")

    def __rtruediv__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.truediv, "truediv", reverse=True)

    def __matmul__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.matmul, "MatMul")

    def __rmatmul__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.matmul, "MatMul", reverse=True)

    def __pow__(self, other: Any) -> "Tensor":
        return self._binary(other, _ops.pow, "pow")

    def __neg__(self) -> "Tensor":
        t = py_func(_ops.neg, [self], None, name=_op_name("Neg"))
        t.op.vjp = _neg_vjp
        t.dtype = self.dtype
        t.shape = _static_shape(self)
        return t


class Tensor(TensorOperators):
    """A value computed in a run, as ``tf.Tensor``: a placeholder's feed or the output of a
    Python function of other tensors, variables and constants.

    ``Session.run(tensor, feed_dict)`` returns its value (a numpy array or scalar). Tensors
    combine with ``+ - * / @ **``, unary ``-`` and indexing into new tensors, so
    ``psrt.placeholder(...) @ W + b`` reads as in TF (those ops are differentiable).

    Attributes:
        op: The :class:`Node` computing it.
        value_index: Its position among the op's outputs.
        dtype: numpy dtype, or None (not declared).
        shape: tuple of int or None per dimension, or None (unknown rank).
    """

    __slots__ = ("op", "value_index", "dtype", "_shape", "_plans", "__weakref__")

    def __init__(self, op: Node, value_index: int, dtype: np.dtype | None,
                 shape: Any) -> None:
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self.shape = shape
        self._plans: dict[Any, Any] = {}

    @property
    def shape(self) -> TensorShape:
        """The static shape, a :class:`psrt.TensorShape` (TF's ``Tensor.shape``): None
        sizes are known only at run time; ``TensorShape(None)``: unknown rank."""
        return TensorShape(self._shape)

    @shape.setter
    def shape(self, shape: Any) -> None:
        """Sets the static shape (anything :func:`as_shape` takes: a TensorShape, a list of
        int or None, or None for an unknown rank)."""
        self._shape = as_shape(shape)._as_tuple()

    def set_shape(self, shape: Any) -> None:
        """Narrows the static shape to ``shape``, as ``tf.Tensor.set_shape``.

        Raises:
            ValueError: ``shape`` is not compatible with the current one.
        """
        self.shape = self.shape.merge_with(shape)

    @property
    def name(self) -> str:
        """``"<op name>:<index>"``, as TF's tensor names (e.g. ``"x:0"``)."""
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> Graph:
        """The :class:`psrt.Graph` it belongs to."""
        return self.op.graph

    def get_shape(self) -> TensorShape:
        """The static shape (``self.shape``), as ``tf.Tensor.get_shape``."""
        return TensorShape(self._shape)

    def eval(self, feed_dict: dict[Any, Any] | None = None, session: Any = None) -> Any:
        """``session.run(self, feed_dict)``, as ``tf.Tensor.eval``.

        Raises:
            ValueError: no ``session`` (psrt has no default session).
        """
        if session is None:
            raise ValueError("psrt has no default session: pass session=")
        return session.run(self, feed_dict=feed_dict)

    def __iter__(self) -> Any:
        raise TypeError("'Tensor' object is not iterable (its value exists only in a run)")

    def __bool__(self) -> bool:
        raise TypeError("Using a psrt.Tensor as a Python bool is not allowed (its value "
                        "exists only in a run): fetch it with Session.run")

    def __repr__(self) -> str:
        dtype = self.dtype.name if self.dtype is not None else "?"
        return f"<psrt.Tensor '{self.name}' shape={_shape_tuple_str(self._shape)} dtype={dtype}>"


_ops = operator


def _static_shape(x: Any) -> TensorShape:
    if isinstance(x, Tensor):
        return TensorShape(x._shape)
    if isinstance(x, VariableBase):
        return TensorShape(tuple(x.shape))
    return TensorShape(np.shape(x))


def strided_slice_op(x: Any, spec: tuple[Any, ...], dyn: list[Any], name: str | None,
                     key: Any = None) -> "Tensor":
    """The graph op of ``x[spec]`` (``framework/slicing.py``): ``dyn`` are the inputs that
    ``Dyn`` entries of ``spec`` read; a Tensor inside ``spec`` itself is made one of them."""
    entries: list[Any] = []
    inputs = list(dyn)

    def dyn_of(b: Any) -> Any:
        if isinstance(b, (Tensor, VariableBase)):
            inputs.append(b)
            return _slicing.Dyn(len(inputs) - 1)
        return b

    for e in spec:
        if isinstance(e, slice):
            entries.append(slice(dyn_of(e.start), dyn_of(e.stop), dyn_of(e.step)))
        else:
            entries.append(dyn_of(e))
    spec = tuple(entries)
    _slicing.check_spec(spec, spec if key is None else key)
    for t in inputs:
        dt = t.dtype
        if dt is not None and np.dtype(dt).kind not in "iu":
            raise TypeError(f"{_slicing.INDEX_HELP}, got a tensor of dtype "
                            f"{np.dtype(dt).name}")
    shape = _slicing.static_shape(spec, _static_shape(x))
    kernel = functools.partial(_slicing.strided_slice_kernel, spec=spec)
    t = py_func(lambda *values: kernel(None, *values)[0], [x, *inputs], x.dtype,
                name=_op_name(name or "strided_slice"))
    t.op.vjp = kernel
    t.shape = shape
    return t


def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    """``g`` summed over the axes that broadcasting added or stretched to reach its shape
    from ``shape`` (the gradient of a broadcast input, as TF's ``BroadcastGradientArgs``)."""
    g = np.asarray(g)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _shape(x: Any) -> tuple[int, ...]:
    return np.shape(x)


def _add_vjp(needs: Any, a: Any, b: Any) -> Any:
    return a + b, lambda dy: (unbroadcast(dy, _shape(a)), unbroadcast(dy, _shape(b)))


def _sub_vjp(needs: Any, a: Any, b: Any) -> Any:
    return a - b, lambda dy: (unbroadcast(dy, _shape(a)), unbroadcast(-dy, _shape(b)))


def _mul_vjp(needs: Any, a: Any, b: Any) -> Any:
    def grad(dy: Any) -> Any:
        return (unbroadcast(dy * b, _shape(a)) if 0 in needs else None,
                unbroadcast(dy * a, _shape(b)) if 1 in needs else None)
    return a * b, grad


def _truediv_vjp(needs: Any, a: Any, b: Any) -> Any:
    y = a / b

    def grad(dy: Any) -> Any:
        return (unbroadcast(dy / b, _shape(a)) if 0 in needs else None,
                unbroadcast(-dy * y / b, _shape(b)) if 1 in needs else None)
    return y, grad


def _matmul_vjp(needs: Any, a: Any, b: Any) -> Any:
    def grad(dy: Any) -> Any:
        a_, b_ = np.asarray(a), np.asarray(b)
        if a_.ndim == 2 and b_.ndim == 2:
            return (dy @ b_.T if 0 in needs else None, a_.T @ dy if 1 in needs else None)
        if a_.ndim == 1 and b_.ndim == 1:
            return (dy * b_ if 0 in needs else None, dy * a_ if 1 in needs else None)
        if a_.ndim == 1:  # (k,) @ (k, n)
            return (b_ @ dy if 0 in needs else None,
                    np.outer(a_, dy) if 1 in needs else None)
        if b_.ndim == 1:  # (m, k) @ (k,)
            return (np.outer(dy, b_) if 0 in needs else None,
                    a_.T @ dy if 1 in needs else None)
        da = unbroadcast(dy @ np.swapaxes(b_, -1, -2), a_.shape) if 0 in needs else None
        db = unbroadcast(np.swapaxes(a_, -1, -2) @ dy, b_.shape) if 1 in needs else None
        return da, db
    return a @ b, grad


def _neg_vjp(needs: Any, a: Any) -> Any:
    return -a, lambda dy: (-dy,)


# Hand-written gradients of the tensor operators (``x @ W + b``): minimize needs no tracing
# for them.
_OPERATOR_VJPS: dict[str, Callable[..., Any]] = {
    "add": _add_vjp, "sub": _sub_vjp, "mul": _mul_vjp, "truediv": _truediv_vjp,
    "MatMul": _matmul_vjp,
}


def _graph() -> Graph:
    return get_default_graph()


def _op_name(base: str) -> str:
    return _graph().unique_name(base)


def _name_for(name: str | None, default: str) -> str:
    base = name or default
    if base.endswith(":0"):
        base = base[:-2]
    return _graph().unique_name(base)


# Every op by graph and name, for feed_dict keys and fetches given by name.
_nodes_lock = threading.Lock()


def nodes_of(graph: Graph) -> dict[str, Node]:
    """The ops of ``graph`` by name (placeholders and py_funcs)."""
    table = getattr(graph, "_psrt_nodes", None)
    if table is None:
        with _nodes_lock:
            table = getattr(graph, "_psrt_nodes", None)
            if table is None:
                table = {}
                graph._psrt_nodes = table  # type: ignore[attr-defined]
    return table


def placeholder(dtype: Any, shape: Sequence[int | None] | None = None,
                name: str | None = None) -> Tensor:
    """A tensor whose value is fed at each run, as ``tf.placeholder``.

    A run that needs it (it is fetched, or a fetched tensor or train op reads it) must feed
    it: ``feed_dict`` keys may be the placeholder itself, its name (``"x"``) or its tensor
    name (``"x:0"``). The fed value is converted to ``dtype`` and checked against ``shape``
    before anything of the run is sent, as TF's session does; a value that does not convert
    exactly (None or a string in a float feed, 1.5 or 2**40 in an int32 one) is
    InvalidArgumentError naming the placeholder, the dtype and the value
    (``psrt.framework.feeds.exact_feed_array``).

    Args:
        dtype: The element type (numpy dtype or type, e.g. ``numpy.float32``).
        shape: The shape; None entries take any size (``[None, 784]``); None: any shape.
        name: The op name; default ``"Placeholder"`` (made unique, TF's ``_1`` rule).

    Returns:
        A :class:`Tensor`.

    Raises:
        TypeError: ``dtype`` is not a dtype.
    """
    dt = _dtypes.as_numpy_dtype(dtype)
    shp = None if shape is None else tuple(None if d is None or d == -1 else int(d)
                                           for d in shape)
    graph = _graph()
    node = Node("Placeholder", _name_for(name, "Placeholder"), graph)
    t = Tensor(node, 0, dt, shp)
    node.outputs.append(t)
    node._dtypes = [dt]
    return t


def placeholder_with_default(input: Any, shape: Sequence[int | None] | None,
                             name: str | None = None) -> Tensor:
    """A placeholder that takes ``input``'s value when not fed, as
    ``tf.placeholder_with_default``."""
    value = np.asarray(input)
    t = placeholder(value.dtype, shape, name or "PlaceholderWithDefault")
    t.op.inputs = [value]
    return t


def py_func(func: Callable[..., Any], inp: Sequence[Any], Tout: Any = None,
            stateful: bool = True, name: str | None = None) -> Any:
    """Wraps a Python function of numpy arrays as a graph op, as ``tf.py_func``.

    ``func(*values)`` is called with the values of ``inp`` in a run that needs its output
    (numpy arrays: placeholders' feeds, variables' values, other tensors' values; constants
    as given), at most once per run. For ``minimize`` to differentiate through it, write it
    with ``autograd.numpy`` (numpy's API; plain ``numpy`` calls on traced values fail) or
    give it a gradient with :func:`custom_gradient`.

    Args:
        func: A Python function returning an array (or scalar), or a list/tuple of them when
            ``Tout`` is a list.
        inp: Its arguments: :class:`Tensor` objects (placeholders, other ops' outputs),
            Variables, PartitionedVariables, or constants.
        Tout: The output dtype, or a list of dtypes (one per output); an output of another
            dtype is converted. None: one output, not converted.
        stateful: Accepted for TF compatibility (psrt computes each op once per run either
            way).
        name: The op name; default ``"PyFunc"``.

    Returns:
        A :class:`Tensor`, or a list of them when ``Tout`` is a list or tuple.

    Raises:
        TypeError: ``func`` is not callable.
    """
    if not callable(func):
        raise TypeError(f"py_func: func must be callable; got {func!r}")
    single = not isinstance(Tout, (list, tuple))
    dtypes = ([_dtypes.as_numpy_dtype(Tout)] if single
              else [_dtypes.as_numpy_dtype(d) for d in Tout])
    graph = _graph()
    inputs = list(inp)
    for x in inputs:
        if isinstance(x, Tensor) and x.op.graph is not graph:
            raise ValueError(f"py_func: input {x.name} is from another graph")
    node = Node("PyFunc", _name_for(name, "PyFunc"), graph, inputs, func)
    node._single = single
    node._dtypes = dtypes
    for i, dt in enumerate(dtypes):
        node.outputs.append(Tensor(node, i, dt, None))
    return node.outputs[0] if single else list(node.outputs)


numpy_function = py_func


def function(func: Callable[..., Any] | None = None, *, Tout: Any = None,
             name: str | None = None) -> Any:
    """Decorator: calling the function with a :class:`Tensor` or Variable among its
    arguments returns a :class:`Tensor` (``py_func(func, args, Tout)``); called with plain
    arrays only it just computes. As TF 1.15's ``tf.function`` in graph mode builds a call op.

    Usable bare (``@psrt.function``) or with options (``@psrt.function(Tout=np.float32)``).
    Keyword arguments are passed through as constants.
    """
    def wrap(fn: Callable[..., Any]) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not any(_is_graph_value(a) for a in args):
                return fn(*args, **kwargs)
            target = functools.partial(fn, **kwargs) if kwargs else fn
            return py_func(target, args, Tout, name=name or fn.__name__)
        call.python_function = fn  # type: ignore[attr-defined]
        return call
    return wrap(func) if func is not None else wrap


def _is_graph_value(x: Any) -> bool:
    return isinstance(x, (Tensor, VariableBase))


class RunInput:
    """An op input whose value the executor supplies at each run, as it supplies variables'
    values: the rows of a variable that the run's embedding lookups touch
    (``psrt/ops/embedding_ops.py``). A :class:`Plan` lists them in ``run_inputs`` and the ops
    reading them in ``lookups``; :func:`evaluate` takes their values from ``var_values``."""

    __slots__ = ("__weakref__",)


# ---- custom gradients ------------------------------------------------------------------------


class _Pending(threading.local):
    grad_fn: Any = None


_pending = _Pending()


def custom_gradient(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator giving a numpy function its own gradient, as ``tf.custom_gradient``.

    ``f(*arrays)`` returns ``(y, grad_fn)``; ``grad_fn(dy)`` returns the gradient of each
    input (a tuple, one per input; None for an input without one). The decorated function
    returns ``y`` and is an autograd primitive: inside a tensor's function it is
    differentiated with ``grad_fn`` instead of tracing ``f``. Use it for code autograd
    cannot trace, or a fused op whose gradient is cheaper by hand::

        @psrt.custom_gradient
        def softmax_cross_entropy(logits, labels):
            ...
            def grad(dy):
                return dy * (softmax - labels) / n, None
            return loss, grad
    """
    from autograd.extend import defvjp_argnums, primitive  # noqa: PLC0415

    @primitive
    def forward(*args: Any) -> Any:
        y, grad_fn = f(*args)
        # autograd builds the op's node (asking for its VJP) right after this call in the
        # same thread: the gradient function waits here until then.
        _pending.grad_fn = grad_fn
        return y

    def vjp_maker(argnums: Sequence[int], ans: Any, args: Any, kwargs: Any) -> Any:
        grad_fn, _pending.grad_fn = _pending.grad_fn, None

        def vjp(g: Any) -> tuple[Any, ...]:
            grads = grad_fn(g)
            if not isinstance(grads, (tuple, list)):
                grads = (grads,)
            return tuple(_zero_if_none(grads[i] if i < len(grads) else None, args[i])
                         for i in argnums)
        return vjp

    defvjp_argnums(forward, vjp_maker)

    @functools.wraps(f)
    def call(*args: Any) -> Any:
        if any(_is_graph_value(a) for a in args):
            t = py_func(call, args, None, name=getattr(f, "__name__", None))
            t.op.vjp = lambda needs, *values: f(*values)
            return t
        return forward(*args)
    return call


def _zero_if_none(g: Any, x: Any) -> Any:
    return np.zeros_like(x) if g is None else g


# ---- evaluation ------------------------------------------------------------------------------
