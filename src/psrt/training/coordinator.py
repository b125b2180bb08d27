"""``tf.train.Coordinator``: threads that stop together, with TF's semantics
(tensorflow/python/training/coordinator.py).

Threads check :meth:`Coordinator.should_stop` in their loop; any of them (or the training
loop) calls :meth:`Coordinator.request_stop`, with the exception that made it stop; the
main thread :meth:`Coordinator.join`\\ s them, which re-raises that exception. Exceptions of
the ``clean_stop_exception_types`` (default ``OutOfRangeError``: input exhausted) stop
without being reported.

Example::

    coord = psrt.train.Coordinator()
    threads = [threading.Thread(target=loop, args=(coord,)) for _ in range(4)]
    for t in threads:
        t.start()
    coord.join(threads)   # re-raises what a thread passed to request_stop

    def loop(coord):
        with coord.stop_on_exception():
            while not coord.should_stop():
                ...
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Iterable, Iterator

from psrt.framework import errors

__all__ = ["Coordinator"]

_logger = logging.getLogger("psrt")


class Coordinator:
    """A coordinator for threads, as ``tf.train.Coordinator``.

    Args:
        clean_stop_exception_types: Exception types that stop the coordinator without being
            reported to :meth:`join` (default: ``(psrt.errors.OutOfRangeError,)``, as TF).
    """

    def __init__(self, clean_stop_exception_types: Iterable[type] | None = None) -> None:
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        # Protects the fields below and the stop event's transitions.
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise: tuple[Any, Any, Any] | None = None
        self._joined = False
        self._registered_threads: set[threading.Thread] = set()

    def _filter_exception(self, ex: Any) -> Any:
        value = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(value, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex: Any = None) -> None:
        """Requests that the threads stop; ``should_stop()`` is True afterwards.

        Args:
            ex: None, an exception, or a ``sys.exc_info()`` tuple. The first one reported
                (not of the clean-stop types) is re-raised by :meth:`join` and
                :meth:`raise_requested_exception`; later ones are ignored, as TF. An
                exception instance passed from outside its ``except`` block has no
                traceback; TF then records a ValueError instead ("ex must be a tuple or
                sys.exc_info must return the current exception"); psrt records the
                exception itself.

        Raises:
            The exception ``ex`` when the coordinator was already joined (it could not be
            reported otherwise), as TF.
        """
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined:
                value = ex[1] if isinstance(ex, tuple) else ex
                if value is not None:
                    # As TF: after join nobody would see the error, so raise it here.
                    raise value
            if not self._stop_event.is_set():
                if ex is not None and self._exc_info_to_raise is None:
                    if isinstance(ex, tuple):
                        _logger.info("Error reported to Coordinator: %s", ex[1],
                                     exc_info=ex)
                        self._exc_info_to_raise = ex
                    else:
                        _logger.info("Error reported to Coordinator: %s, %s", type(ex), ex)
                        current = sys.exc_info()
                        self._exc_info_to_raise = (
                            current if current[1] is ex else (type(ex), ex, ex.__traceback__))
                self._stop_event.set()

    def clear_stop(self) -> None:
        """Clears the stop request and the recorded exception, so the coordinator can be
        used again (e.g. after a session is re-created), as TF."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            if self._stop_event.is_set():
                self._stop_event.clear()

    def should_stop(self) -> bool:
        """True once a stop was requested."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """A context manager that requests a stop with any exception raised inside, and
        swallows it, as TF (the exception is re-raised by :meth:`join`; an OutOfRangeError
        just stops)."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - as TF's bare except: reported to join()
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Waits until a stop is requested or ``timeout`` seconds passed (None: forever).

        Returns:
            True if a stop was requested, False on timeout.
        """
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        """Adds ``thread`` to those :meth:`join` waits for when given no list."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads: Iterable[threading.Thread] | None = None,
             stop_grace_period_secs: float = 120, ignore_live_threads: bool = False) -> None:
        """Waits for the threads to end, as TF: until all have ended or a stop was
        requested, then up to ``stop_grace_period_secs`` more for them to end; then
        re-raises the exception reported to :meth:`request_stop`, if any.

        Args:
            threads: Threads to wait for, with the registered ones (default: the
                registered ones).
            stop_grace_period_secs: Seconds threads get to end after the stop request.
            ignore_live_threads: If True, threads still alive after the grace period are
                logged instead of raising RuntimeError.

        Raises:
            The exception reported with :meth:`request_stop`; else RuntimeError
            "Coordinator stopped with threads still running: NAMES" unless
            ``ignore_live_threads``.
        """
        with self._lock:
            if threads is None:
                chosen = set(self._registered_threads)
            else:
                chosen = self._registered_threads.union(threads)
            waiting = list(chosen)
        while any(t.is_alive() for t in waiting) and not self.wait_for_stop(1.0):
            pass
        # As TF: sleep in doubling steps through the grace period while threads end.
        stop_wait_secs = 0.001
        while any(t.is_alive() for t in waiting) and stop_grace_period_secs >= 0.0:
            time.sleep(stop_wait_secs)
            stop_grace_period_secs -= stop_wait_secs
            stop_wait_secs = max(min(2 * stop_wait_secs, stop_grace_period_secs), 0.001)
        stragglers = [t.name for t in waiting if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exc_info_to_raise:
                raise self._exc_info_to_raise[1].with_traceback(self._exc_info_to_raise[2])
            if stragglers:
                if ignore_live_threads:
                    _logger.info("Coordinator stopped with threads still running: %s",
                                 " ".join(stragglers))
                else:
                    raise RuntimeError("Coordinator stopped with threads still running: "
                                       + " ".join(stragglers))

    @property
    def joined(self) -> bool:
        """True once :meth:`join` returned or raised (until :meth:`clear_stop`)."""
        return self._joined

    def raise_requested_exception(self) -> None:
        """Re-raises the exception reported to :meth:`request_stop`, if any."""
        with self._lock:
            if self._exc_info_to_raise:
                raise self._exc_info_to_raise[1].with_traceback(self._exc_info_to_raise[2])
