"""SIGTERM for a process that runs as PID 1: a container started without an init process.

The kernel never applies a signal's default action to the first process of a PID namespace:
a SIGTERM it has no handler for is dropped, whoever sends it. A psrt task started as a
container's command (``CMD ["python", "train.py"]``, as deploy/kubernetes/Dockerfile does)
is that process, so ``kubectl delete`` or ``docker stop`` would wait out the whole grace
period and then SIGKILL it. Everywhere else a SIGTERM ends a Python process at once (the
default action), which is what TF1 tasks rely on.

:func:`install` (called at ``import psrt``) gives PID 1 the behaviour every other process
has, when nothing else has claimed SIGTERM: the handler logs one line and raises
``SystemExit(143)`` (128 + SIGTERM, the status a shell reports for death by SIGTERM) in the
main thread. That ends the training loop as an error would: ``MonitoredTrainingSession``
then closes without its hooks' ``end()``, so no final checkpoint is written, and a
checkpoint that was being written is abandoned whole (its temporary file is removed; files
are renamed into place only once complete). If the process has not ended
:data:`FORCE_EXIT_SECS` seconds later (a blocking call, a thread that will not stop), it
ends with ``os._exit(143)``, after the callbacks given to :func:`before_forced_exit` (the
checkpoint writer's: an abandoned write's temporary file is removed then too, since
``os._exit`` runs no ``atexit`` handler). A ps task's ``Server.join()`` installs its own handler while
it runs and exits with status 0, as before.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["EXIT_STATUS", "FORCE_EXIT_SECS", "before_forced_exit", "install"]

EXIT_STATUS = 128 + signal.SIGTERM
"""143: the exit status after SIGTERM, as a shell reports death by that signal."""

FORCE_EXIT_SECS = 1.0
"""Seconds from SIGTERM to ``os._exit`` when the process has not ended by itself."""

_logger = logging.getLogger("psrt")

_forced_exit_callbacks: list[Callable[[], None]] = []


def before_forced_exit(callback: Callable[[], None]) -> None:
    """Has ``callback()`` run (in the timer's thread) just before the forced ``os._exit``,
    which skips ``atexit``: for clean-ups that must not be lost (an exception it raises is
    logged and the next one runs)."""
    _forced_exit_callbacks.append(callback)


def _forced_exit() -> None:
    for callback in list(_forced_exit_callbacks):
        try:
            callback()
        except Exception:  # noqa: BLE001 -- the process must still end
            _logger.exception("clean-up before the forced exit failed")
    os._exit(EXIT_STATUS)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Logs, arms the forced exit and raises ``SystemExit(143)`` in the main thread."""
    timer = threading.Timer(FORCE_EXIT_SECS, _forced_exit)
    timer.daemon = True
    timer.start()
    _logger.info("SIGTERM received by PID 1 (no init process runs in this container); "
                 "exiting with status %d without saving", EXIT_STATUS)
    raise SystemExit(EXIT_STATUS)


def install(pid: int | None = None) -> bool:
    """Installs the SIGTERM handler described above when this process is PID 1.

    Nothing is changed when the process is not PID 1 (SIGTERM's default action already ends
    it), when called outside the main thread (Python allows handlers only there) or when
    SIGTERM already has a handler or is ignored (the application chose).

    Args:
        pid: The process id to decide by; default ``os.getpid()`` (tests pass 1).

    Returns:
        True when the handler was installed.
    """
    if (os.getpid() if pid is None else pid) != 1:
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _on_sigterm)
    return True
