"""The base of ``tf.layers``' layers, as TF r1.15's tensorflow/python/layers/base.py: a layer
owns a variable scope named as TF names it (``dense``, ``dense_1``, ... in the current
variable scope, or its ``name``), creates its weights there with :func:`get_variable` (so a
``replica_device_setter`` places them on the ps tasks, a scope's initializer and
partitioner apply, and a ``kernel_regularizer``'s loss joins ``REGULARIZATION_LOSSES``),
and puts its update ops (batch normalization's moving averages) in ``UPDATE_OPS``.

A subclass gives ``build(input_shape)`` (its weights, through :meth:`Layer.add_weight`) and
``call(inputs, ...)`` (its output tensor); a new layer (``conv2d``, the poolings) is those
two methods and a function calling the class, as TF's.
"""

from __future__ import annotations

from typing import Any, Callable

from psrt.framework import ops as _ops
from psrt.framework.ops import GraphKeys
from psrt.framework.tensor_shape import TensorShape
from psrt.ops import variable_scope as _vs


class Layer:
    """A layer, as ``tf.layers.Layer``: called on a tensor, it builds its weights once (in
    its variable scope) and returns its output; called again, it reuses them.

    Args:
        trainable: Whether its weights join ``TRAINABLE_VARIABLES`` (and ``trainable_weights``).
        name: The variable scope's name; default the class's snake-case name, made unique
            in the current variable scope (``dense``, ``dense_1``), as TF.
        dtype: The weights' dtype; default the first input's (float32).
        _reuse: True (or ``AUTO_REUSE``) reuses the variables of the scope ``name``: the
            functional forms' ``reuse=`` argument.
        _scope: The variable scope (a name or VariableScope) used as it is: the functional
            forms pass their ``name``.
    """

    _base_name = "layer"

    def __init__(self, trainable: bool = True, name: str | None = None, dtype: Any = None,
                 _reuse: Any = None, _scope: Any = None, **kwargs: Any) -> None:
        unknown = set(kwargs) - {"activity_regularizer", "input_shape", "batch_input_shape",
                                 "weights"}
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments "
                            f"{sorted(unknown)}")
        self.trainable = bool(trainable)
        self._name = name
        self._given_name = name
        self.dtype = dtype
        self._reuse = _reuse
        # The functional forms pass _scope=name, as TF's: their scope is ``name`` itself
        # (a second dense(name="fc") without reuse is the "already exists" error), a
        # class's is ``name`` made unique.
        self._scope_arg = _scope
        self._scope: Any = None
        self.built = False
        self._trainable_weights: list[Any] = []
        self._non_trainable_weights: list[Any] = []
        self._updates: list[Any] = []
        self._losses: list[Any] = []
        self._activity_regularizer: Callable[[Any], Any] | None = kwargs.get(
            "activity_regularizer")

    # ---- what a subclass gives -----------------------------------------------------------

    def build(self, input_shape: TensorShape) -> None:
        """Creates the weights for inputs of ``input_shape``; the base creates none."""
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """The output for ``inputs``; the base returns them."""
        return inputs

    # ---- weights, updates, losses --------------------------------------------------------

    def add_weight(self, name: str, shape: Any, dtype: Any = None, initializer: Any = None,
                   regularizer: Any = None, trainable: bool | None = None,
                   constraint: Any = None, **kwargs: Any) -> Any:
        """A weight ``<scope>/<name>`` from :func:`get_variable` (TF's ``add_weight``):
        trainable only when the layer and ``trainable`` both are; a regularizer's loss goes
        to ``REGULARIZATION_LOSSES``."""
        trainable = self.trainable if trainable is None else (trainable and self.trainable)
        before = len(_ops.get_collection(GraphKeys.REGULARIZATION_LOSSES))
        var = _vs.get_variable(name, shape=shape, dtype=dtype or self.dtype or "float32",
                               initializer=initializer, regularizer=regularizer,
                               trainable=trainable)
        (self._trainable_weights if trainable else self._non_trainable_weights).append(var)
        # the regularizer's loss get_variable added: the layer's ``losses`` too, as TF's
        self._losses.extend(_ops.get_collection(GraphKeys.REGULARIZATION_LOSSES)[before:])
        return var

    def add_update(self, updates: Any, inputs: Any = None) -> None:
        """Records update ops (run them before the train op: TF's ``UPDATE_OPS``)."""
        ups = list(updates) if isinstance(updates, (list, tuple)) else [updates]
        for u in ups:
            self._updates.append(u)
            _ops.add_to_collection(GraphKeys.UPDATE_OPS, u)

    def add_loss(self, losses: Any, inputs: Any = None) -> None:
        """Records losses and adds them to ``REGULARIZATION_LOSSES``, as TF's layers."""
        ls = list(losses) if isinstance(losses, (list, tuple)) else [losses]
        for loss in ls:
            if loss is not None:
                self._losses.append(loss)
                _ops.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)

    name = property(lambda self: self._name)
    scope_name = property(lambda self: self._scope.name if self._scope is not None else None)
    updates = property(lambda self: list(self._updates))
    losses = property(lambda self: list(self._losses))
    trainable_weights = property(lambda self: list(self._trainable_weights)
                                 if self.trainable else [])
    trainable_variables = trainable_weights
    non_trainable_weights = property(
        lambda self: list(self._non_trainable_weights) + (
            [] if self.trainable else list(self._trainable_weights)))
    non_trainable_variables = non_trainable_weights
    weights = property(lambda self: self.trainable_weights + self.non_trainable_weights)
    variables = weights

    # ---- calling -------------------------------------------------------------------------

    def _enter_scope(self) -> Any:
        """The layer's variable scope: made on the first call (TF's ``_set_scope``), then
        re-entered reusing its variables."""
        if self._scope is None:
            if self._scope_arg is not None:
                return _vs.variable_scope(self._scope_arg, reuse=self._reuse or None)
            if self._reuse:
                return _vs.variable_scope(self._given_name or self._base_name,
                                          reuse=self._reuse)
            return _vs.variable_scope(None, default_name=self._given_name or self._base_name)
        return _vs.variable_scope(self._scope, reuse=True if self.built else self._reuse)

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """Builds the layer on the first call (its weights in its variable scope), then
        returns ``call(inputs, ...)``, as ``tf.layers.Layer.__call__``."""
        with self._enter_scope() as scope:
            if self._scope is None:
                self._scope = scope
                if self._name is None:
                    self._name = scope.name.rpartition("/")[2]
            if not self.built:
                if self.dtype is None:
                    self.dtype = getattr(inputs, "dtype", None)
                shape = getattr(inputs, "shape", None)
                self.build(shape if isinstance(shape, TensorShape) else TensorShape(shape))
                self.built = True
            outputs = self.call(inputs, *args, **kwargs)
            if self._activity_regularizer is not None:
                self.add_loss(self._activity_regularizer(outputs))
        return outputs

    def apply(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """``self(inputs, ...)``, as TF's ``Layer.apply``."""
        return self(inputs, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<psrt.layers.{type(self).__name__} '{self._name}'>"
