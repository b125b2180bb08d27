"""Device names and device scopes, as TF1's ``tf.device``.

psrt has no graph, but it places variables the way a TF1 graph does: every op that
needs a device (a variable, a slot, a lookup table) is described by an :class:`OpDef`
and :func:`get_device_for` runs the current thread's :func:`device` stack over it,
innermost scope first, exactly as TF's ``Graph._apply_device_functions``.

Device strings are TF's: ``"/job:ps/replica:0/task:1/device:CPU:0"``, every part
optional, also in the short forms ``"/cpu:0"`` and ``"/gpu:1"``. :class:`DeviceSpec`
parses, merges and prints them (TF1's ``tensorflow/python/framework/device.py``).

The device functions that spread variables over ps tasks (``replica_device_setter`` and
its strategies) sit a layer up, in :mod:`psrt.distribute.device_setter`, beside the
``ClusterSpec`` they read.

Example::

    with device("/job:ps/task:1"):
        with device("/cpu:0"):
            get_device_for(OpDef("w", "VariableV2"))  # '/job:ps/task:1/device:CPU:0'
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import operator
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "DeviceSpec",
    "OpDef",
    "canonical_name",
    "current_device_stack",
    "device",
    "get_device_for",
    "merge_device",
]

_logger = logging.getLogger(__name__)

_SHORT_DEVICE_TYPES = ("CPU", "GPU")


def _to_index(value: Any, field: str) -> int:
    """Returns ``value`` as an int >= 0 (ints, numpy ints or strings of digits)."""
    if isinstance(value, bool):
        raise ValueError(f"device {field} must be an int >= 0, got {value!r}")
    if isinstance(value, str):
        try:
            result = int(value)
        except ValueError:
            raise ValueError(
                f"device {field} must be an int >= 0, got {value!r}") from None
    else:
        try:
            result = operator.index(value)
        except TypeError:
            raise ValueError(
                f"device {field} must be an int >= 0, got {value!r} "
                f"(type {type(value).__name__})") from None
    if result < 0:
        raise ValueError(f"device {field} must be an int >= 0, got {value!r}")
    return result


class DeviceSpec:
    """A (possibly partial) device specification, as TF1's ``tf.DeviceSpec``.

    Five optional fields: job name, replica index, task index, device type
    (``"CPU"``, ``"GPU"``, ...) and device index. Unset fields are None and are
    filled in by merging with outer scopes: see :meth:`merge_from`. Like TF1's
    ``DeviceSpec`` (``DeviceSpecV1``), it is mutable.

    Example::

        spec = DeviceSpec(job="ps", task=1, device_type="cpu", device_index=0)
        spec.to_string()   # '/job:ps/task:1/device:CPU:0'
        DeviceSpec.from_string("/job:worker/gpu:1").task  # None

    Args:
        job: Job name (str), e.g. ``"ps"``.
        replica: Replica index (int >= 0).
        task: Task index (int >= 0).
        device_type: Device type (str); ``"cpu"``/``"gpu"`` are upper-cased, as TF.
        device_index: Device index (int >= 0); None means any device of the type.

    Raises:
        ValueError: a field has a bad value (empty job, negative or non-integer index).
    """

    __slots__ = ("_job", "_replica", "_task", "_device_type", "_device_index")
    __hash__ = None  # type: ignore[assignment]  # Mutable, as TF1's DeviceSpec.

    def __init__(self, job: str | None = None, replica: int | None = None,
                 task: int | None = None, device_type: str | None = None,
                 device_index: int | None = None) -> None:
        self.job = job
        self.replica = replica
        self.task = task
        self.device_type = device_type
        self.device_index = device_index

    @property
    def job(self) -> str | None:
        """Job name (str) or None."""
        return self._job

    @job.setter
    def job(self, job: str | None) -> None:
        """Sets ``job`` (None clears it); a bad value is ValueError naming it."""
        if job is not None and (not isinstance(job, str) or not job):
            raise ValueError(f"device job must be a non-empty str, got {job!r}")
        self._job = job

    @property
    def replica(self) -> int | None:
        """Replica index (int) or None."""
        return self._replica

    @replica.setter
    def replica(self, replica: int | None) -> None:
        """Sets ``replica`` (None clears it); a bad value is ValueError naming it."""
        self._replica = None if replica is None else _to_index(replica, "replica")

    @property
    def task(self) -> int | None:
        """Task index (int) or None."""
        return self._task

    @task.setter
    def task(self, task: int | None) -> None:
        """Sets ``task`` (None clears it); a bad value is ValueError naming it."""
        self._task = None if task is None else _to_index(task, "task")

    @property
    def device_type(self) -> str | None:
        """Device type (str, e.g. ``"CPU"``) or None."""
        return self._device_type

    @device_type.setter
    def device_type(self, device_type: str | None) -> None:
        """Sets ``device_type`` (None clears it); a bad value is ValueError naming it."""
        if device_type is not None:
            if not isinstance(device_type, str) or not device_type:
                raise ValueError(
                    f"device type must be a non-empty str such as 'CPU' or 'GPU', got "
                    f"{device_type!r}")
            if device_type.upper() in _SHORT_DEVICE_TYPES:
                device_type = device_type.upper()
        self._device_type = device_type

    @property
    def device_index(self) -> int | None:
        """Device index (int) or None (any device of the type)."""
        return self._device_index

    @device_index.setter
    def device_index(self, device_index: int | None) -> None:
        """Sets ``device_index`` (None clears it); a bad value is ValueError naming it."""
        self._device_index = (
            None if device_index is None else _to_index(device_index, "index"))

    def _clear(self) -> None:
        self._job = self._replica = self._task = None
        self._device_type = self._device_index = None

    def parse_from_string(self, spec: str) -> DeviceSpec:
        """Replaces this spec's fields with those parsed from ``spec``.

        Accepts TF's forms, each part optional and in any order:
        ``/job:<name>``, ``/replica:<int>``, ``/task:<int>``,
        ``/device:<TYPE>:<int or *>``, and the short ``/cpu:<int or *>``,
        ``/gpu:<int or *>`` (also without an index). ``""`` clears every field.

        Args:
            spec: A device string, e.g. ``"/job:ps/task:0/cpu:0"``.

        Returns:
            ``self``.

        Raises:
            TypeError: ``spec`` is not a str.
            ValueError: ``spec`` has an unknown part, a non-integer index, or two
                device types.
        """
        if not isinstance(spec, str):
            raise TypeError(
                f"device spec must be a str, got {spec!r} (type {type(spec).__name__})")
        self._clear()
        try:
            for part in spec.split("/"):
                fields = part.split(":")
                n = len(fields)
                head = fields[0]
                if n == 2 and head == "job":
                    self.job = fields[1]
                elif n == 2 and head == "replica":
                    self._replica = _to_index(fields[1], "replica")
                elif n == 2 and head == "task":
                    self._task = _to_index(fields[1], "task")
                elif n in (1, 2) and head.upper() in _SHORT_DEVICE_TYPES:
                    if self._device_type is not None:
                        raise ValueError("it names more than one device type")
                    self.device_type = head.upper()
                    if n == 2 and fields[1] != "*":
                        self._device_index = _to_index(fields[1], "index")
                elif n == 3 and head == "device":
                    if self._device_type is not None:
                        raise ValueError("it names more than one device type")
                    self.device_type = fields[1]
                    if fields[2] != "*":
                        self._device_index = _to_index(fields[2], "index")
                elif part:
                    raise ValueError(
                        f"unknown part {part!r}; expected job:<name>, replica:<int>, "
                        f"task:<int>, device:<TYPE>:<int>, cpu:<int> or gpu:<int>")
        except ValueError as e:
            self._clear()
            raise ValueError(f"invalid device spec {spec!r}: {e}") from None
        return self

    @classmethod
    def from_string(cls, spec: str) -> DeviceSpec:
        """Returns a new :class:`DeviceSpec` parsed from ``spec``.

        See :meth:`parse_from_string` for the accepted forms and errors.
        """
        return cls().parse_from_string(spec)

    def to_string(self) -> str:
        """Returns the canonical string: ``/job:<j>/replica:<r>/task:<t>/device:<T>:<i>``.

        Only set fields appear, in that order; a device type without an index prints
        as ``device:<T>:*``. An empty spec gives ``""``.
        """
        parts = []
        if self._job is not None:
            parts.append(f"/job:{self._job}")
        if self._replica is not None:
            parts.append(f"/replica:{self._replica}")
        if self._task is not None:
            parts.append(f"/task:{self._task}")
        if self._device_type is not None:
            index = "*" if self._device_index is None else str(self._device_index)
            parts.append(f"/device:{self._device_type}:{index}")
        return "".join(parts)

    def merge_from(self, dev: DeviceSpec | str) -> None:
        """Overwrites this spec's fields with the fields that ``dev`` sets.

        Fields that ``dev`` leaves as None keep this spec's value, as TF1's
        ``DeviceSpec.merge_from``: ``/job:ps/cpu:0`` merged from ``/task:1/gpu:0``
        gives ``/job:ps/task:1/device:GPU:0``.

        Args:
            dev: A :class:`DeviceSpec` or a device string.
        """
        if not isinstance(dev, DeviceSpec):
            dev = DeviceSpec.from_string(dev)
        if dev._job is not None:
            self._job = dev._job
        if dev._replica is not None:
            self._replica = dev._replica
        if dev._task is not None:
            self._task = dev._task
        if dev._device_type is not None:
            self._device_type = dev._device_type
        if dev._device_index is not None:
            self._device_index = dev._device_index

    def make_merged_spec(self, dev: DeviceSpec | str) -> DeviceSpec:
        """Returns a new spec: a copy of this one after :meth:`merge_from` ``dev``."""
        merged = copy.copy(self)
        merged.merge_from(dev)
        return merged

    def __copy__(self) -> DeviceSpec:
        return DeviceSpec(self._job, self._replica, self._task, self._device_type,
                          self._device_index)

    def _fields(self) -> tuple[Any, ...]:
        return (self._job, self._replica, self._task, self._device_type,
                self._device_index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceSpec):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return f"DeviceSpec.from_string({self.to_string()!r})"


def canonical_name(device: DeviceSpec | str | None) -> str:
    """Returns the canonical string of a device, as TF's ``device.canonical_name``.

    Args:
        device: A :class:`DeviceSpec`, a device string, or None (gives ``""``).

    Raises:
        ValueError: the string is not a valid device spec.
    """
    if device is None:
        return ""
    if isinstance(device, DeviceSpec):
        return device.to_string()
    return DeviceSpec.from_string(device).to_string()


def merge_device(spec: DeviceSpec | str | None) -> Callable[[OpDef], DeviceSpec]:
    """Returns a device function that merges ``spec`` under the op's device.

    As TF's ``device.merge_device``: fields already set on the op (by inner scopes)
    win; ``spec`` fills in the rest. ``device(s)`` for a string ``s`` behaves as
    ``device(merge_device(s))``; ``merge_device(None)`` and ``merge_device("")``
    change nothing.

    Args:
        spec: A :class:`DeviceSpec`, a device string, or None.

    Returns:
        A function ``OpDef -> DeviceSpec``.

    Raises:
        ValueError: ``spec`` is not a valid device string.
    """
    base = copy.copy(spec) if isinstance(spec, DeviceSpec) else DeviceSpec.from_string(
        spec or "")

    def _merge_device_function(op: OpDef) -> DeviceSpec:
        return base.make_merged_spec(DeviceSpec.from_string(op.device or ""))

    return _merge_device_function


@dataclasses.dataclass
class OpDef:
    """The description of an op that needs a device (a variable, slot or table).

    psrt's stand-in for the ``NodeDef``/``Operation`` that TF's device functions
    receive. Device functions read ``name``, ``type``, ``device`` (what inner scopes
    have requested so far), ``shape`` and ``dtype``.

    Attributes:
        name: Op name (str), e.g. ``"hid_w"``.
        type: Op type (str); ``"VariableV2"`` for variables. Types in
            :data:`~psrt.distribute.device_setter.STANDARD_PS_OPS` go to ps under
            :func:`~psrt.distribute.device_setter.replica_device_setter`.
        device: The device already requested for the op (str, ``""`` for none); scope
            devices are merged under it.
        shape: The output shape (tuple of int; ``()`` for a scalar). A list is
            converted to a tuple; None entries mean unknown dimensions.
        dtype: The output dtype (anything ``numpy.dtype`` accepts); float32 by default.
        colocate_with: For an op that must live with another (an optimizer slot with
            its variable, as TF's ``colocate_with``): that op's placed device string.
            When not None, :func:`get_device_for` returns it without running device
            functions, so round-robin counters do not advance.
    """

    name: str
    type: str
    device: str = ""
    shape: tuple[int | None, ...] | None = ()
    dtype: Any = np.float32
    colocate_with: str | None = None

    def __post_init__(self) -> None:
        if self.device is None:
            self.device = ""
        elif isinstance(self.device, DeviceSpec):
            self.device = self.device.to_string()
        if self.shape is not None and not isinstance(self.shape, tuple):
            self.shape = tuple(self.shape)
        if isinstance(self.colocate_with, DeviceSpec):
            self.colocate_with = self.colocate_with.to_string()


DeviceFunction = Callable[[OpDef], str | DeviceSpec | None]


class _ScopeEntry:
    """One :func:`device` scope: a merge spec, a device function, or None (a reset)."""

    __slots__ = ("spec", "function", "display")

    def __init__(self, spec: DeviceSpec | None, function: DeviceFunction | None,
                 display: Any) -> None:
        self.spec = spec
        self.function = function
        self.display = display


class _ThreadStack(threading.local):
    def __init__(self) -> None:
        self.entries: list[_ScopeEntry] = []


_stack = _ThreadStack()


class _DeviceScope:
    """The context manager :func:`device` returns; pushes one entry on enter."""

    __slots__ = ("_entry", "_pushed_on")

    def __init__(self, entry: _ScopeEntry) -> None:
        self._entry = entry
        self._pushed_on: list[_ScopeEntry] | None = None

    def __enter__(self) -> None:
        if self._pushed_on is not None:
            raise RuntimeError("a device() scope object cannot be entered twice")
        self._pushed_on = _stack.entries
        self._pushed_on.append(self._entry)

    def __exit__(self, *exc_info: object) -> None:
        entries = self._pushed_on
        assert entries is not None, "device() scope exited without being entered"
        self._pushed_on = None
        # Remove this scope's own entry (normally the last one).
        for i in range(len(entries) - 1, -1, -1):
            if entries[i] is self._entry:
                del entries[i]
                break


def device(device_name_or_function: str | DeviceSpec | DeviceFunction | None
           ) -> _DeviceScope:
    """Returns a context manager that sets the device for ops described inside it.

    As TF1's ``tf.device``. The scope is pushed on a per-thread stack that
    :func:`get_device_for` applies:

    * a string or :class:`DeviceSpec` is merged: its fields fill in what inner
      scopes (and the op's own ``device``) leave unset, so inner fields override
      outer ones; ``""`` inherits everything;
    * a function is called with the :class:`OpDef` (its ``device`` holding what inner
      scopes chose) and returns the device string or :class:`DeviceSpec` to use
      (None or ``""`` clears the device);
    * None clears every outer scope: ops inside get only what inner scopes set.

    Example::

        with device("/job:worker/replica:2/device:CPU:1"):
            with device("/device:GPU:2"):
                ...  # ops get "/job:worker/replica:2/device:GPU:2"
            with device(None):
                ...  # ops get ""

    Args:
        device_name_or_function: A device string, a :class:`DeviceSpec`, a function
            ``OpDef -> str | DeviceSpec``, or None.

    Returns:
        A context manager (use it in a ``with`` statement).

    Raises:
        ValueError: the string is not a valid device spec (raised here, before the
            scope is entered).
        TypeError: the argument is none of the types above.
    """
    arg = device_name_or_function
    if arg is None:
        entry = _ScopeEntry(None, None, None)
    elif isinstance(arg, DeviceSpec):
        entry = _ScopeEntry(copy.copy(arg), None, arg.to_string())
    elif isinstance(arg, str):
        spec = DeviceSpec.from_string(arg)
        entry = _ScopeEntry(spec, None, spec.to_string())
    elif callable(arg):
        entry = _ScopeEntry(None, arg, arg)
    else:
        raise TypeError(
            f"device() takes a device string, a DeviceSpec, a function OpDef -> device "
            f"string, or None; got {arg!r} (type {type(arg).__name__})")
    return _DeviceScope(entry)


def current_device_stack() -> list[Any]:
    """Returns this thread's device scopes, outermost first, for debugging.

    Returns:
        A list with one item per open :func:`device` scope: the canonical device
        string for string/:class:`DeviceSpec` scopes, the function for function
        scopes, None for ``device(None)``.
    """
    return [entry.display for entry in _stack.entries]


def _result_to_string(result: Any, function: Callable[..., Any]) -> str:
    if result is None:
        return ""
    if isinstance(result, DeviceSpec):
        return result.to_string()
    if isinstance(result, str):
        return canonical_name(result)
    raise TypeError(
        f"device function {function!r} returned {result!r} "
        f"(type {type(result).__name__}); expected a device string or DeviceSpec")


def get_device_for(op: OpDef) -> str:
    """Returns the canonical device for ``op`` under this thread's device scopes.

    Copies TF's ``Graph._apply_device_functions``: starting from ``op.device``, the
    scopes are applied innermost first, each seeing the device chosen so far in the
    ``OpDef`` it receives; a ``device(None)`` scope stops the walk. Merge scopes
    (strings, :class:`DeviceSpec`) only fill fields still unset, so the innermost
    setting of each field wins; a device function may override anything.

    If ``op.colocate_with`` is set (an optimizer slot) the result is that device and
    no device function runs, as for ops created under TF's ``colocate_with``; if
    ``op.device`` requests a different device, ``op.device`` is kept and a warning is
    logged, as TF does.

    ``op`` is not modified; device functions receive a copy.

    Args:
        op: The op to place.

    Returns:
        A canonical device string such as ``"/job:ps/task:0"``; ``""`` when no scope
        sets anything.

    Raises:
        TypeError: ``op`` is not an :class:`OpDef`, or a device function returned
            something other than a str, a :class:`DeviceSpec` or None.
        ValueError: a device string (in ``op`` or returned by a function) is invalid.
    """
    if not isinstance(op, OpDef):
        raise TypeError(
            f"get_device_for() takes an OpDef, got {op!r} (type {type(op).__name__})")
    requested = canonical_name(op.device)
    if op.colocate_with is not None:
        colocated = canonical_name(op.colocate_with)
        if not colocated:
            return requested
        if requested and requested != colocated:
            _logger.warning(
                "Op %r requests device %r but is colocated with device %r; keeping %r",
                op.name, requested, colocated, requested)
            return requested
        return colocated
    current = dataclasses.replace(op, device=requested)
    for entry in reversed(_stack.entries):
        if entry.spec is not None:
            merged = entry.spec.make_merged_spec(DeviceSpec.from_string(current.device))
            current.device = merged.to_string()
        elif entry.function is not None:
            current.device = _result_to_string(entry.function(current), entry.function)
        else:  # device(None): outer scopes do not apply.
            break
    return current.device
