"""``tf.logging``: TF 1.x's logging functions (``tensorflow/python/platform/tf_logging.py``,
r1.15), writing through Python's ``logging`` to the logger named ``"tensorflow"``.

As in TF:

* The levels are Python's: ``DEBUG`` 10, ``INFO`` 20, ``WARN`` 30, ``ERROR`` 40, ``FATAL`` 50.
* The ``"tensorflow"`` logger's level is left unset, so until ``set_verbosity`` it follows the
  root logger (WARNING by default): ``tf.logging.info`` shows only after
  ``tf.logging.set_verbosity(tf.logging.INFO)``. ``get_verbosity`` is the logger's effective
  level.
* On the first call (``get_logger``), when the root logger has no handler, the logger gets a
  handler writing ``LEVEL:tensorflow:message`` (``logging.BASIC_FORMAT``) to stderr, or to
  stdout in an interactive interpreter (where the level is also set to INFO). An application
  that configured logging first sees the records through its own handlers only.
* ``fatal`` logs at FATAL (CRITICAL) and does not exit the process.
* ``log_every_n`` and ``log_first_n`` count calls per call site (file and line of the caller).
* ``vlog(level, msg)`` logs ``msg`` at ``level`` (Python levels, not glog's verbosity).

This logger is separate from psrt's own ``"psrt"`` logger (psrt/platform/psrt_logging.py),
which writes psrt's progress lines at INFO from import on.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

__all__ = [
    "DEBUG",
    "ERROR",
    "FATAL",
    "INFO",
    "WARN",
    "debug",
    "error",
    "fatal",
    "flush",
    "get_logger",
    "get_verbosity",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "log_if",
    "set_verbosity",
    "vlog",
    "warn",
    "warning",
]

DEBUG = logging.DEBUG
INFO = logging.INFO
WARN = logging.WARN
ERROR = logging.ERROR
FATAL = logging.FATAL

LOGGER_NAME = "tensorflow"

_logger: logging.Logger | None = None
_lock = threading.Lock()
_this_file = os.path.normcase(__file__)


def _interactive() -> bool:
    return hasattr(sys, "ps1") or bool(sys.flags.interactive)


def get_logger() -> logging.Logger:
    """The ``"tensorflow"`` logger, set up on first use as the module docstring says."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            logger = logging.getLogger(LOGGER_NAME)
            if not logging.getLogger().handlers:
                if _interactive():
                    logger.setLevel(INFO)
                    target = sys.stdout
                else:
                    target = sys.stderr
                handler = logging.StreamHandler(target)
                handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT, None))
                logger.addHandler(handler)
            _logger = logger
    return _logger


def _log(level: int, msg: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    # stacklevel 3: the record names the caller of tf.logging.info, not this module.
    kwargs.setdefault("stacklevel", 3)
    get_logger().log(level, msg, *args, **kwargs)


def log(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at ``level`` (an int level) on the "tensorflow" logger."""
    _log(level, msg, args, kwargs)


def debug(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at DEBUG (10)."""
    _log(DEBUG, msg, args, kwargs)


def info(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at INFO (20)."""
    _log(INFO, msg, args, kwargs)


def warn(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at WARN (30)."""
    _log(WARN, msg, args, kwargs)


def warning(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at WARN (30)."""
    _log(WARN, msg, args, kwargs)


def error(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at ERROR (40)."""
    _log(ERROR, msg, args, kwargs)


def fatal(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at FATAL (50); the process goes on (as TF's)."""
    _log(FATAL, msg, args, kwargs)


def vlog(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs ``msg % args`` at ``level`` (TF's ``vlog`` is ``log``)."""
    _log(level, msg, args, kwargs)


def log_if(level: int, msg: Any, condition: Any, *args: Any) -> None:
    """Logs ``msg % args`` at ``level`` when ``condition`` is true."""
    if condition:
        _log(level, msg, args, {"stacklevel": 3})


_counts: dict[tuple[str, int], int] = {}
_counts_lock = threading.Lock()


def _next_count(depth: int) -> int:
    """How many times the call site ``depth`` frames up logged before (0 the first time)."""
    frame = sys._getframe(depth)
    key = (frame.f_code.co_filename, frame.f_lineno)
    with _counts_lock:
        count = _counts.get(key, 0)
        _counts[key] = count + 1
    return count


def log_every_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Logs ``msg % args`` at ``level`` on the 1st, (n+1)th, (2n+1)th... call from the same
    call site (file and line).

    Raises:
        ValueError: ``n`` is not a positive integer.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"log_every_n needs n >= 1, got {n!r}")
    count = _next_count(2)
    if count % n == 0:
        _log(level, msg, args, {"stacklevel": 3})


def log_first_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Logs ``msg % args`` at ``level`` on the first ``n`` calls from the same call site."""
    count = _next_count(2)
    if count < n:
        _log(level, msg, args, {"stacklevel": 3})


def flush() -> None:
    """Flushes the handlers of the "tensorflow" logger."""
    for handler in get_logger().handlers:
        handler.flush()


def get_verbosity() -> int:
    """The "tensorflow" logger's effective level (WARN, 30, until ``set_verbosity``)."""
    return get_logger().getEffectiveLevel()


def set_verbosity(v: int | str) -> None:
    """Sets the "tensorflow" logger's level: an int level (``tf.logging.INFO``) or a level
    name ("INFO").

    Raises:
        ValueError: ``v`` names no logging level.
    """
    if isinstance(v, str):
        level = logging.getLevelName(v.upper())
        if not isinstance(level, int):
            raise ValueError(f"set_verbosity({v!r}): not a logging level; expected one of "
                             "DEBUG, INFO, WARN, ERROR, FATAL or an integer")
        v = level
    get_logger().setLevel(v)
