"""Exception types for psrt, one class per canonical error code, as ``tf.errors``.

Every failure raised by the core (``psrt._core``) or by the Python layer is an
:class:`OpError` subclass chosen by its canonical code. The codes are TensorFlow's
(``tensorflow/core/protobuf/error_codes.proto``), carried on the wire as one byte, so a
server-side error arrives at the worker as the same class.

The monitored session (as TF's ``_RecoverableSession``) recovers from exactly
:class:`AbortedError` and :class:`UnavailableError`.
"""

from __future__ import annotations

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
    """A failed psrt operation, as ``tf.errors.OpError``.

    Args:
        node_def: Unused; kept for TF's signature (psrt has no graph nodes). May be None.
        op: The operation that failed, or None (TF's ``op`` attribute).
        message: What went wrong, with the bad value and the valid choices.
        error_code: The canonical code (an int from this module, e.g. ``UNAVAILABLE``).
    """

    def __init__(self, node_def, op, message: str, error_code: int) -> None:
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
    def op(self):
        """The operation that failed, or None."""
        return self._op

    @property
    def node_def(self):
        """Always None in psrt; kept for TF compatibility."""
        return self._node_def

    @property
    def error_code(self) -> int:
        """The canonical error code (int)."""
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self):
        return (type(self), (self._node_def, self._op, self._message))


def _make(name: str, code: int, doc: str) -> type:
    def __init__(self, node_def, op, message, *args):
        OpError.__init__(self, node_def, op, message, code)

    def __reduce__(self):
        return (type(self), (self._node_def, self._op, self._message))

    cls = type(name, (OpError,), {"__init__": __init__, "__reduce__": __reduce__,
                                  "__doc__": doc, "__module__": __name__})
    return cls


CancelledError = _make("CancelledError", CANCELLED, "An operation was cancelled.")
UnknownError = _make("UnknownError", UNKNOWN, "An error of unknown kind.")
InvalidArgumentError = _make(
    "InvalidArgumentError", INVALID_ARGUMENT,
    "An argument had a bad value: wrong dtype, shape, index or name.")
DeadlineExceededError = _make(
    "DeadlineExceededError", DEADLINE_EXCEEDED, "A deadline passed before the operation finished.")
NotFoundError = _make("NotFoundError", NOT_FOUND, "A variable, file or task was not found.")
AlreadyExistsError = _make("AlreadyExistsError", ALREADY_EXISTS, "The entity already exists.")
PermissionDeniedError = _make(
    "PermissionDeniedError", PERMISSION_DENIED, "The caller may not run the operation.")
ResourceExhaustedError = _make(
    "ResourceExhaustedError", RESOURCE_EXHAUSTED, "A size limit was exceeded.")
FailedPreconditionError = _make(
    "FailedPreconditionError", FAILED_PRECONDITION,
    "The system is not in a state the operation needs (e.g. an uninitialized variable).")
AbortedError = _make(
    "AbortedError", ABORTED, "The operation was aborted, e.g. because a ps task restarted.")
OutOfRangeError = _make("OutOfRangeError", OUT_OF_RANGE, "An operation went past a valid range.")
UnimplementedError = _make("UnimplementedError", UNIMPLEMENTED, "The operation is not supported.")
InternalError = _make("InternalError", INTERNAL, "An internal invariant was broken.")
UnavailableError = _make(
    "UnavailableError", UNAVAILABLE, "A ps task could not be reached or the connection was lost.")
DataLossError = _make("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")
UnauthenticatedError = _make(
    "UnauthenticatedError", UNAUTHENTICATED, "The request lacks valid credentials.")

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

    Raises:
        KeyError: ``error_code`` is not a canonical non-OK code (1..16).
    """
    return _CODE_TO_CLASS[error_code]


def error_code_from_exception_type(cls: type) -> int:
    """Returns the canonical code of an OpError subclass."""
    for code, c in _CODE_TO_CLASS.items():
        if c is cls:
            return code
    raise KeyError(cls)


def _raise(code: int, message: str):
    """Raises the class for ``code``; called by psrt._core for a non-OK status."""
    raise _CODE_TO_CLASS.get(code, UnknownError)(None, None, message)


__all__ = [n for n in list(globals()) if n.endswith("Error") or n.isupper()] + [
    "exception_type_from_error_code", "error_code_from_exception_type"]
