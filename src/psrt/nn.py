"""The ``tf.nn`` names psrt needs: row lookups of embedding-style variables."""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.variables import Operation, PartitionedVariable, Variable


def embedding_lookup(params: Variable, ids: Any, partition_strategy: str = "mod",
                     name: str | None = None, validate_indices: bool = True,
                     max_norm: Any = None) -> Operation:
    """An op whose ``Session.run`` value is the rows ``ids`` of ``params``, as
    ``tf.nn.embedding_lookup``: an array ``ids.shape + params.shape[1:]`` pulled from the ps
    task without the rest of the variable. Train such a variable with row-sparse gradients
    (:class:`psrt.IndexedSlices` of the same ids).

    Args:
        params: A Variable of rank >= 1 (partitioned variables are not supported yet).
        ids: Integer array of row indices in ``[0, params.shape[0])``, any shape.
        name: Name of the op.

    Raises:
        TypeError: ``params`` is not a Variable, or ``ids`` are not integers.
        ValueError: ``params`` is a scalar, or ``max_norm`` is given (not supported).
        InvalidArgumentError (at run): an id out of range, naming it and its position.
    """
    if isinstance(params, PartitionedVariable):
        raise TypeError(f"embedding_lookup of partitioned variable '{params.name}' is not "
                        f"supported yet; use a plain Variable")
    if not isinstance(params, Variable):
        raise TypeError(f"params must be a psrt Variable; got {params!r}")
    if len(params.shape) == 0:
        raise ValueError(f"params '{params.name}' is a scalar; embedding_lookup needs rank >= 1")
    if max_norm is not None:
        raise ValueError("max_norm is not supported by psrt's embedding_lookup")
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"ids must be integers; got dtype {ids.dtype}")
    return Operation("gather", variables=[params], value=ids,
                     name=name or f"{params.name}/embedding_lookup")


def __getattr__(name: str) -> object:
    """TF1's ``tf.nn`` names psrt does not implement raise an AttributeError saying what to
    use instead (psrt/_missing.py)."""
    from psrt import _missing  # noqa: PLC0415

    return _missing.module_getattr("psrt.nn")(name)
