"""Placement of variables on ps tasks: ``tf.train.replica_device_setter`` and its strategies.

:func:`replica_device_setter` is TF1's ``tf.train.replica_device_setter``
(``tensorflow/python/training/device_setter.py``): variables go round-robin to the ps
tasks in creation order, other ops to the worker. :class:`GreedyLoadBalancingStrategy`
and :func:`byte_size_load_fn` are ``tf.contrib.training``'s alternative ps strategy.
The device functions run under :func:`psrt.framework.device.device` scopes, over the
:class:`~psrt.framework.device.OpDef` of each op.

Example::

    cluster = {"ps": ["ps0:2222", "ps1:2222"], "worker": ["worker0:2222"]}
    with device(replica_device_setter(cluster=cluster)):
        get_device_for(OpDef("w", "VariableV2", shape=(784, 100)))  # '/job:ps/task:0'
        get_device_for(OpDef("b", "VariableV2", shape=(100,)))      # '/job:ps/task:1'
        get_device_for(OpDef("add", "Add"))                          # '/job:worker'
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.framework.device import DeviceSpec, OpDef

__all__ = [
    "STANDARD_PS_OPS",
    "GreedyLoadBalancingStrategy",
    "byte_size_load_fn",
    "replica_device_setter",
]

_logger = logging.getLogger(__name__)

STANDARD_PS_OPS: tuple[str, ...] = (
    "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
    "MutableHashTableV2", "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable", "MutableDenseHashTableV2", "VarHandleOp",
)
"""Op types :func:`replica_device_setter` places on ps tasks by default (TF's list)."""


class _RoundRobinStrategy:
    """Returns ps task indices ``0, 1, ..., num_tasks - 1, 0, ...``, one per call."""

    def __init__(self, num_tasks: int) -> None:
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op: OpDef) -> int:
        task = self._next_task
        self._next_task = (self._next_task + 1) % self._num_tasks
        return task


class _ReplicaDeviceChooser:
    """The device function :func:`replica_device_setter` returns (TF's semantics)."""

    def __init__(self, ps_tasks: int, ps_device: str | None, worker_device: str | None,
                 merge_devices: bool, ps_ops: list[str],
                 ps_strategy: Callable[[OpDef], int]) -> None:
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = ps_ops
        self._ps_strategy = ps_strategy

    def device_function(self, op: OpDef) -> str:
        """Returns the device for ``op`` given what inner scopes set (``op.device``)."""
        # Without merging, any device set by an inner scope is kept as is; with an
        # empty op.device merging is a no-op, so below we can always merge.
        if not self._merge_devices and op.device:
            return op.device
        current = DeviceSpec.from_string(op.device or "")
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps_device = DeviceSpec.from_string(self._ps_device)
            # Choose a ps task only if the op is not pinned to some other job; the
            # op's own fields are merged over the ps device either way.
            if ps_device.job and (not current.job or current.job == ps_device.job):
                ps_device.task = self._ps_strategy(op)
            ps_device.merge_from(current)
            return ps_device.to_string()
        worker_device = DeviceSpec.from_string(self._worker_device or "")
        worker_device.merge_from(current)
        return worker_device.to_string()


def replica_device_setter(ps_tasks: int = 0, ps_device: str | None = "/job:ps",
                          worker_device: str | None = "/job:worker",
                          merge_devices: bool = True, cluster: Any = None,
                          ps_ops: list[str] | None = None,
                          ps_strategy: Callable[[OpDef], int] | None = None,
                          ) -> Callable[[OpDef], str] | None:
    """Returns a device function that places variables on ps tasks, as TF1's.

    Copies ``tf.train.replica_device_setter``. Use the result in :func:`device`. Ops
    whose ``type`` is in ``ps_ops`` (variables) get ``ps_device`` with a task chosen
    by ``ps_strategy`` (round-robin over the ps tasks, in creation order, by
    default); other ops get ``worker_device``. The fields an inner scope already set
    on the op are merged over the chosen device. A ps task is chosen (and the
    round-robin counter advanced) only if the op is not pinned to a job other than
    ``ps_device``'s: under ``device("/job:moon")`` a variable stays on
    ``/job:moon``. With ``merge_devices=False`` any device set by an inner scope is
    kept unchanged. Ops with ``colocate_with`` set (slots) never reach this function.

    Example::

        cluster = {"ps": ["ps0:2222", "ps1:2222"],
                   "worker": ["worker0:2222", "worker1:2222", "worker2:2222"]}
        with device(replica_device_setter(cluster=cluster)):
            v1 = ...  # /job:ps/task:0
            v2 = ...  # /job:ps/task:1
            v3 = ...  # /job:ps/task:0

    Args:
        ps_tasks: Number of ps tasks (int); ignored when ``cluster`` is given.
        ps_device: Device string of the ps job; empty or None places nothing on ps.
        worker_device: Device string for all other ops; empty or None adds nothing.
        merge_devices: If True, merge inner scopes' fields into the chosen device; if
            False, keep an inner scope's device unchanged (TF logs a deprecation
            warning for False, and so does psrt).
        cluster: A :class:`~psrt.distribute.cluster_spec.ClusterSpec` or a dict it
            accepts. The number of ps tasks is the number of tasks of ``ps_device``'s
            job in it.
        ps_ops: Op types to place on ps; :data:`STANDARD_PS_OPS` if None.
        ps_strategy: Callable ``OpDef -> int`` returning the ps task index for each ps
            op, e.g. :class:`GreedyLoadBalancingStrategy`; round-robin if None.

    Returns:
        A device function ``OpDef -> str``, or None when there are no ps tasks
        (``ps_tasks == 0``, or ``cluster`` has no ``ps_device`` job).

    Raises:
        TypeError: ``cluster`` is not a valid cluster, or ``ps_strategy`` is not
            callable.
        ValueError: ``ps_device`` is not a valid device string, or ``ps_tasks`` is
            negative.
    """
    if cluster is not None:
        cluster_spec = ClusterSpec(cluster)
        ps_job_name = DeviceSpec.from_string(ps_device or "").job
        if ps_job_name is None or ps_job_name not in cluster_spec.jobs:
            return None
        ps_tasks = cluster_spec.num_tasks(ps_job_name)
    ps_tasks = operator.index(ps_tasks)
    if ps_tasks < 0:
        raise ValueError(f"ps_tasks must be >= 0, got {ps_tasks}")
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        _logger.warning(
            "DEPRECATION: It is recommended to set merge_devices=True in "
            "replica_device_setter")
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError(f"ps_strategy must be callable, got {ps_strategy!r}")
    chooser = _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices,
                                    list(ps_ops), ps_strategy)
    return chooser.device_function


class GreedyLoadBalancingStrategy:
    """A ps strategy that puts each op on the least-loaded ps task so far.

    Copies ``tf.contrib.training.GreedyLoadBalancingStrategy``: each call picks the
    task with the smallest accumulated load (the lowest index on ties), then adds
    ``load_fn(op)`` to it. The result depends on the order variables are created.
    Pass it as ``ps_strategy`` to :func:`replica_device_setter`.

    Args:
        num_tasks: Number of ps tasks (int >= 1).
        load_fn: Callable ``OpDef -> number`` giving an op's load, in any consistent
            unit, e.g. :func:`byte_size_load_fn` (bytes).

    Raises:
        ValueError: ``num_tasks`` is not a positive int.
        TypeError: ``load_fn`` is not callable.
    """

    def __init__(self, num_tasks: int, load_fn: Callable[[OpDef], float]) -> None:
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, (int, np.integer)) \
                or num_tasks < 1:
            raise ValueError(f"num_tasks must be an int >= 1, got {num_tasks!r}")
        if not callable(load_fn):
            raise TypeError(f"load_fn must be callable, got {load_fn!r}")
        self._num_tasks = int(num_tasks)
        self._load_fn = load_fn
        self._ps_loads = np.zeros(self._num_tasks, dtype=np.float64)

    def __call__(self, op: OpDef) -> int:
        """Returns the ps task index (int) for ``op`` and adds its load there."""
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


def byte_size_load_fn(op: OpDef) -> int:
    """Returns the byte size of ``op``'s output: ``dtype.itemsize * prod(shape)``.

    Copies ``tf.contrib.training.byte_size_load_fn``; a scalar (shape ``()``) is one
    element. For use with :class:`GreedyLoadBalancingStrategy`.

    Args:
        op: An :class:`OpDef` with a fully known ``shape`` and a numpy ``dtype``.

    Returns:
        The size in bytes (int).

    Raises:
        ValueError: the shape is None or has an unknown (None or negative) dimension,
            as TF raises for shapes that are not fully defined.
        TypeError: ``op.dtype`` is not a numpy dtype.
    """
    shape = op.shape
    num_elements = 1
    for dim in shape if shape is not None else (None,):
        if dim is None or dim < 0:
            raise ValueError(
                f"byte_size_load_fn needs a fully defined shape; op {op.name!r} has "
                f"shape {shape!r}")
        num_elements *= int(dim)
    return num_elements * int(np.dtype(op.dtype).itemsize)

