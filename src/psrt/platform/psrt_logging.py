"""psrt's default logging: progress is visible without any ``logging`` setup.

TF1 users see a ps task's "Started server with target: ..." and a waiting worker's
"CreateSession still waiting for response from worker: ..." without configuring anything,
because TF's C++ core writes its INFO lines to stderr itself. psrt logs through Python's
``logging`` under the ``"psrt"`` logger, whose records below WARNING Python drops unless
the application configured logging. So, at ``import psrt``:

* If the application has not configured logging (the root logger has no handler, and the
  ``"psrt"`` logger has neither a handler nor a level), the ``"psrt"`` logger gets level
  INFO and a handler writing ``INFO:psrt:message`` lines (TF1's Python format,
  ``logging.BASIC_FORMAT``) to the current ``sys.stderr``. The handler stays silent once
  the root logger has a handler (the application called ``logging.basicConfig`` after
  ``import psrt``, say): the records then reach the application's handlers, once.
* Otherwise psrt's logger is left alone, like any library's.
* ``PSRT_LOG_LEVEL`` (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``, ``CRITICAL`` or a
  number) sets the ``"psrt"`` logger's level in either case: ``PSRT_LOG_LEVEL=WARNING``
  silences the progress lines.

An application that configures logging after ``import psrt`` with a level above INFO still
sees psrt's INFO lines (the logger's level was set at import); set ``PSRT_LOG_LEVEL`` or
``logging.getLogger("psrt").setLevel(...)`` to change that.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

LOG_LEVEL_ENV = "PSRT_LOG_LEVEL"
LOGGER_NAME = "psrt"

_LEVEL_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _DefaultHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (as ``logging.lastResort`` does), and
    only while the root logger has no handler of its own."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(logging.BASIC_FORMAT))

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        """The current ``sys.stderr``, looked up on every use (never a stale stream)."""
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """Ignored: the handler always writes to the current ``sys.stderr`` (pytest's capture
        and redirections included)."""

    def handle(self, record: logging.LogRecord) -> bool:
        """Emits ``record`` unless the application has configured logging since import."""
        if logging.getLogger().handlers:
            return False
        return super().handle(record)


def parse_level(text: str) -> int | None:
    """Returns the logging level ``text`` names (a level name in any case, or an integer),
    or None when it names none."""
    text = text.strip()
    if text.upper() in _LEVEL_NAMES:
        return int(getattr(logging, text.upper()))
    try:
        return int(text)
    except ValueError:
        return None


def application_configured(logger: logging.Logger) -> bool:
    """True when the application set up logging: a root handler, or a handler or level on
    psrt's logger."""
    return bool(logging.getLogger().handlers or logger.handlers
                or logger.level != logging.NOTSET)


def install(environ: dict[str, str] | None = None,
            logger: logging.Logger | None = None) -> logging.Handler | None:
    """Sets up psrt's logger as the module docstring says; returns the handler it added.

    Args:
        environ: The environment to read ``PSRT_LOG_LEVEL`` from; default ``os.environ``.
        logger: The logger to set up; default ``logging.getLogger("psrt")``.

    Returns:
        The stderr handler added, or None when the application had configured logging.
    """
    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    logger = logging.getLogger(LOGGER_NAME) if logger is None else logger
    handler: logging.Handler | None = None
    if not application_configured(logger):
        logger.setLevel(logging.INFO)
        handler = _DefaultHandler()
        logger.addHandler(handler)
    text = environ.get(LOG_LEVEL_ENV, "")
    if text.strip():
        level = parse_level(text)
        if level is None:
            logger.warning("%s=%r is not a logging level; expected one of %s or an integer",
                           LOG_LEVEL_ENV, text, ", ".join(_LEVEL_NAMES))
        else:
            logger.setLevel(level)
    return handler
