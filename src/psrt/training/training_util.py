"""The global step, as tensorflow/python/training/training_util.py."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from psrt.framework.ops import GLOBAL_STEP, GLOBAL_VARIABLES, Graph, get_default_graph
from psrt.ops.variables import Variable

_logger = logging.getLogger("psrt")


def get_global_step(graph: Graph | None = None) -> Variable | None:
    """The global step variable, or None, as ``tf.train.get_global_step``
    (tensorflow/python/training/training_util.py): the one variable of the ``GLOBAL_STEP``
    collection, else the variable named ``global_step`` (TF's ``global_step:0``), so that
    ``Variable(0, name='global_step', trainable=False)`` is found. Several in the collection:
    logged as an error, None returned, as TF.

    Raises:
        TypeError: the variable found is not an integer scalar (:func:`assert_global_step`).
    """
    graph = graph or get_default_graph()
    steps = graph.get_collection(GLOBAL_STEP)
    if len(steps) == 1:
        step = steps[0]
    elif not steps:
        step = graph.get_variable_by_name("global_step")
        if step is None:
            return None
    else:
        _logger.error("Multiple tensors in global_step collection.")
        return None
    assert_global_step(step)
    return step


def create_global_step(graph: Graph | None = None) -> Variable:
    """Creates the int64 scalar ``global_step`` (initial 0, not trainable, in the
    ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP`` collections, outside any name scope), as TF.

    Raises:
        ValueError: a global step already exists ("'global_step' already exists.").
    """
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError("'global_step' already exists.")
    with graph.as_default(), graph.name_scope(None):
        return Variable(np.zeros((), np.int64), trainable=False, name="global_step",
                        dtype=np.int64, collections=[GLOBAL_VARIABLES, GLOBAL_STEP])


def get_or_create_global_step(graph: Graph | None = None) -> Variable:
    """Returns the global step, creating it if needed, as TF."""
    graph = graph or get_default_graph()
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)


def global_step(sess: Any, global_step_tensor: Variable) -> int:
    """The global step's value as an int, as ``tf.train.global_step``."""
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor: Any) -> None:
    """Checks that ``global_step_tensor`` can be a global step, as TF's: a Variable of an
    integer dtype (int32 or int64) and scalar shape.

    Raises:
        TypeError: 'Existing "global_step" must be a Variable or Tensor', '... does not
            have integer type', or '... is not scalar', with TF's messages.
    """
    if not isinstance(global_step_tensor, Variable):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: '
                        f'{global_step_tensor!r}.')
    if global_step_tensor.dtype.kind not in "iu":
        raise TypeError(f'Existing "global_step" does not have integer type: '
                        f'{global_step_tensor.dtype.name}')
    if global_step_tensor.shape != ():
        raise TypeError(f'Existing "global_step" is not scalar: {global_step_tensor.shape}')
