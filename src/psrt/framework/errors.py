"""Exception types for psrt, one class per canonical error code, as ``tf.errors``.

Every failure raised by the core (``psrt._core``) or by the Python layer is an
:class:`OpError` subclass chosen by its canonical code. The codes are TensorFlow's
(``tensorflow/core/protobuf/error_codes.proto``), carried on the wire as one byte, so a
server-side error arrives at the worker as the same class.

The monitored session (as TF's ``_RecoverableSession``) recovers from exactly
:class:`AbortedError` and :class:`UnavailableError`.
"""

from __future__ import annotations

from typing import Any

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """A failed psrt operation, as ``tf.errors.OpError``. Args: node_def: Unused; kept for
    TF's signature (psrt has no graph nodes). May be None. op: The operation that failed,
    or None (TF's ``op`` attribute). message: What went wrong, with the bad value and the
    valid choices. error_code: The canonical code (an int from this module, e.g.
    ``UNAVAILABLE``)."""

    def __init__(self, node_def: Any, op: Any, message: str, error_code: int) -> None:
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    @property
    def message(self) -> str:
        """The error message (str)."""
        return self._message

    @property
    def op(self) -> Any:
        """The operation that failed, or None."""
        return self._op

    @property
    def node_def(self) -> Any:
        """Always None in psrt; kept for TF compatibility."""
        return self._node_def

    @property
    def error_code(self) -> int:
        """The canonical error code (int)."""
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self) -> tuple[Any, ...]:
        # A subclass's code is its class; OpError itself carries its code.
        if type(self) is OpError:
            return (OpError, (self._node_def, self._op, self._message, self._error_code))
        return (type(self), (self._node_def, self._op, self._message))


class CancelledError(OpError):
    """An operation was cancelled: canonical code ``CANCELLED``, as
    ``tf.errors.CancelledError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, CANCELLED)


class UnknownError(OpError):
    """An error of unknown kind: canonical code ``UNKNOWN``, as ``tf.errors.UnknownError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNKNOWN)


class InvalidArgumentError(OpError):
    """An argument had a bad value: wrong dtype, shape, index or name: canonical code
    ``INVALID_ARGUMENT``, as ``tf.errors.InvalidArgumentError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, INVALID_ARGUMENT)


class DeadlineExceededError(OpError):
    """A deadline passed before the operation finished: canonical code ``DEADLINE_EXCEEDED``,
    as ``tf.errors.DeadlineExceededError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, DEADLINE_EXCEEDED)


class NotFoundError(OpError):
    """A variable, file or task was not found: canonical code ``NOT_FOUND``, as
    ``tf.errors.NotFoundError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, NOT_FOUND)


class AlreadyExistsError(OpError):
    """The entity already exists: canonical code ``ALREADY_EXISTS``, as
    ``tf.errors.AlreadyExistsError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, ALREADY_EXISTS)


class PermissionDeniedError(OpError):
    """The caller may not run the operation: canonical code ``PERMISSION_DENIED``, as
    ``tf.errors.PermissionDeniedError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, PERMISSION_DENIED)


class ResourceExhaustedError(OpError):
    """A size limit was exceeded: canonical code ``RESOURCE_EXHAUSTED``, as
    ``tf.errors.ResourceExhaustedError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, RESOURCE_EXHAUSTED)


class FailedPreconditionError(OpError):
    """The system is not in a state the operation needs (e.g. an uninitialized variable):
    canonical code ``FAILED_PRECONDITION``, as ``tf.errors.FailedPreconditionError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, FAILED_PRECONDITION)


class AbortedError(OpError):
    """The operation was aborted, e.g. because a ps task restarted: canonical code
    ``ABORTED``, as ``tf.errors.AbortedError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, ABORTED)


class OutOfRangeError(OpError):
    """An operation went past a valid range: canonical code ``OUT_OF_RANGE``, as
    ``tf.errors.OutOfRangeError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, OUT_OF_RANGE)


class UnimplementedError(OpError):
    """The operation is not supported: canonical code ``UNIMPLEMENTED``, as
    ``tf.errors.UnimplementedError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNIMPLEMENTED)


class InternalError(OpError):
    """An internal invariant was broken: canonical code ``INTERNAL``, as
    ``tf.errors.InternalError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, INTERNAL)


class UnavailableError(OpError):
    """A ps task could not be reached or the connection was lost: canonical code
    ``UNAVAILABLE``, as ``tf.errors.UnavailableError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNAVAILABLE)


class DataLossError(OpError):
    """Unrecoverable data loss or corruption: canonical code ``DATA_LOSS``, as
    ``tf.errors.DataLossError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, DATA_LOSS)


class UnauthenticatedError(OpError):
    """The request lacks valid credentials: canonical code ``UNAUTHENTICATED``, as
    ``tf.errors.UnauthenticatedError``."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNAUTHENTICATED)


_CODE_TO_CLASS = {
    CANCELLED: CancelledError,
    UNKNOWN: UnknownError,
    INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError,
    NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError,
    PERMISSION_DENIED: PermissionDeniedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError,
    UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError,
    DATA_LOSS: DataLossError,
    UNAUTHENTICATED: UnauthenticatedError,
}


def exception_type_from_error_code(error_code: int) -> type:
    """Returns the OpError subclass for a canonical code, as TF's function of that name.
    Raises: KeyError: ``error_code`` is not a canonical non-OK code (1..16)."""
    return _CODE_TO_CLASS[error_code]


def error_code_from_exception_type(cls: type) -> int:
    """Returns the canonical code of an OpError subclass."""
    for code, c in _CODE_TO_CLASS.items():
        if c is cls:
            return code
    raise KeyError(cls)


__all__ = [n for n in list(globals()) if n.endswith("Error") or n.isupper()] + [
    "exception_type_from_error_code", "error_code_from_exception_type"]
