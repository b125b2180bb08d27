"""Progress of long byte transfers: log lines every few seconds, a bar on a terminal.

TF1 logs "Saving checkpoints for 100 into /train/model.ckpt." before a save and nothing
until it ends; a checkpoint of a few GB, a big initial value sent to the ps tasks or a table
restore can take minutes in that silence. :class:`Progress` reports such an operation while
it runs, under the ``"psrt"`` logger at INFO (shown by default: see ``psrt_logging``)::

    INFO:psrt:Saving checkpoint /train/model.ckpt-2000: writing, 268.4 of 536.9 MB (50%),
    104.2 MB/s, about 3 s left

once :data:`interval <DEFAULT_INTERVAL_SECS>` seconds have passed since it began and every
interval after, then one closing line (``... : 536.9 MB in 5.1 s, 105.3 MB/s``) when it
logged any. An operation shorter than the interval logs nothing. MB are 10^6 bytes.
``PSRT_PROGRESS_SECS`` sets the interval (seconds; 0 reports every update).

Where the process has a terminal (stderr is a tty) and INFO is enabled, a progress bar from
``tqdm`` replaces the periodic lines when tqdm is installed (psrt does not depend on it);
otherwise the lines are printed there too.

:func:`watch` reports an operation that runs inside one blocking call (a pull of many
variables, a table import): a thread samples a byte counter (the core client's
``bytes_received`` or ``bytes_sent``) while the call runs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "DEFAULT_INTERVAL_SECS",
    "PROGRESS_SECS_ENV",
    "Progress",
    "progress_interval_secs",
    "watch",
]

PROGRESS_SECS_ENV = "PSRT_PROGRESS_SECS"
DEFAULT_INTERVAL_SECS = 5.0
"""Seconds between two progress lines of one operation (and before the first)."""

_MB = 1e6
_logger = logging.getLogger("psrt")


def progress_interval_secs() -> float:
    """The interval between progress lines: ``$PSRT_PROGRESS_SECS`` if it is a number >= 0,
    else :data:`DEFAULT_INTERVAL_SECS`."""
    text = os.environ.get(PROGRESS_SECS_ENV, "").strip()
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_INTERVAL_SECS
    return value if value >= 0 and math.isfinite(value) else DEFAULT_INTERVAL_SECS


def _duration(secs: float) -> str:
    if secs < 60:
        return f"{secs:.0f} s" if secs >= 10 else f"{secs:.1f} s"
    minutes, rest = divmod(int(round(secs)), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


class Progress:
    """Reports the progress of one operation of ``total_bytes`` bytes.

    Thread-safe: :meth:`update` may be called from any thread. Use as a context manager, or
    call :meth:`close` at the end.

    Args:
        description: What is being done, e.g. ``"Saving checkpoint /train/model.ckpt-7:
            writing"``; each line starts with it.
        total_bytes: The operation's size in bytes, or None when unknown (then the lines give
            bytes done and the rate, without a percentage or a time left).
        interval_secs: Seconds between lines; default :func:`progress_interval_secs`.
        logger: Where the lines go; default the ``"psrt"`` logger.
        bar: Show a tqdm bar instead of the lines: default when stderr is a terminal, the
            logger is enabled for INFO and tqdm can be imported.
    """

    def __init__(self, description: str, total_bytes: int | None, *,
                 interval_secs: float | None = None, logger: logging.Logger | None = None,
                 bar: bool | None = None) -> None:
        self.description = description
        self.total = total_bytes
        self.done = 0
        self.lines = 0
        self._logger = logger or _logger
        self._interval = progress_interval_secs() if interval_secs is None else interval_secs
        self._start = time.monotonic()
        self._next = self._start + self._interval
        self._lock = threading.Lock()
        self._closed = False
        self._bar: Any = None
        if bar is None:
            bar = self._logger.isEnabledFor(logging.INFO) and _isatty(sys.stderr)
        if bar:
            self._bar = _tqdm_bar(description, total_bytes)

    def begin(self, total_bytes: int | None) -> None:
        """Sets the size once it is known and restarts the clock: the transfer starts now
        (what came before, such as serializing a checkpoint, does not count in the rate)."""
        with self._lock:
            self.total = total_bytes
            self._start = time.monotonic()
            self._next = self._start + self._interval
            if self._bar is not None:
                self._bar.reset(total=total_bytes)

    def update(self, done_bytes: int) -> None:
        """Records that ``done_bytes`` bytes (a running total) are done; logs a line when one
        is due."""
        with self._lock:
            if self._closed:
                return
            advance = done_bytes - self.done
            self.done = done_bytes
            if self._bar is not None:
                if advance > 0:
                    self._bar.update(advance)
                return
            now = time.monotonic()
            if now < self._next:
                return
            self._next = now + self._interval
            self._log_line(now)

    def add(self, nbytes: int) -> None:
        """Records ``nbytes`` more bytes done."""
        self.update(self.done + nbytes)

    def _log_line(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        # A counter of bytes on the wire also counts frame headers: never past the total.
        done = min(self.done, self.total) if self.total else self.done
        text = f"{self.description}, {done / _MB:.1f}"
        if self.total:
            text += f" of {self.total / _MB:.1f} MB ({100 * done / self.total:.0f}%)"
        else:
            text += " MB"
        text += f", {rate / _MB:.1f} MB/s"
        if self.total and rate > 0 and done < self.total:
            text += f", about {_duration((self.total - done) / rate)} left"
        self.lines += 1
        self._logger.info("%s", text)

    def close(self) -> None:
        """Ends the report: closes the bar, or logs the closing line if any line was logged.
        Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            elapsed = max(time.monotonic() - self._start, 1e-9)
            if self._bar is not None:
                self._bar.close()
            elif not self.lines:
                return
            self._logger.info("%s: %.1f MB in %s, %.1f MB/s", self.description,
                              self.done / _MB, _duration(elapsed), self.done / elapsed / _MB)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _tqdm_bar(description: str, total: int | None) -> Any:
    try:
        import tqdm  # noqa: PLC0415  (optional: used only where it is installed)
    except ImportError:
        return None
    return tqdm.tqdm(total=total, desc=description, unit="B", unit_scale=True,
                     unit_divisor=1000, file=sys.stderr, leave=False)


@contextlib.contextmanager
def watch(progress: Progress, counter: Callable[[], int],
          poll_secs: float = 0.1) -> Iterator[Progress]:
    """Samples ``counter()`` every ``poll_secs`` seconds on a thread of its own while the
    ``with`` block runs, reporting what it counted since the block began to ``progress``;
    closes ``progress`` at the end.

    ``counter`` must be safe to call from another thread while the block runs (the core
    client's ``bytes_sent`` and ``bytes_received`` are: they read atomics, without the
    client's lock).
    """
    base = counter()
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(poll_secs):
            progress.update(counter() - base)

    thread = threading.Thread(target=sample, name="psrt progress", daemon=True)
    thread.start()
    try:
        yield progress
        progress.update(counter() - base)
    finally:
        stop.set()
        thread.join()
        progress.close()
