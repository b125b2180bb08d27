"""The hook interface, as tensorflow/python/training/session_run_hook.py: SessionRunHook and
the values passed to its methods. It imports nothing of psrt's training code, so optimizers and
tables can define hooks without pulling the standard hooks in."""

from __future__ import annotations

import collections
from typing import Optional


class SessionRunHook:
    """Hook to extend calls to ``MonitoredSession.run()``, as ``tf.train.SessionRunHook``.

    Subclass it and override any of the five callbacks; the defaults do nothing.

    Example::

        class PrintLoss(psrt.train.SessionRunHook):
            def before_run(self, run_context):
                return psrt.train.SessionRunArgs({"loss": loss_var})

            def after_run(self, run_context, run_values):
                print(run_values.results["loss"])
                if run_values.results["loss"] < 0.01:
                    run_context.request_stop()
    """

    def begin(self) -> None:
        """Called once before the session is created (and never again on recovery)."""

    def after_create_session(self, session, coord) -> None:
        """Called when a session has been created, and again after every recovery.

        Args:
            session: The new ``psrt.Session``.
            coord: A ``Coordinator`` for the session's threads, or None.
        """

    def before_run(self, run_context: "SessionRunContext") -> Optional["SessionRunArgs"]:
        """Called before each ``run()``.

        Args:
            run_context: The :class:`SessionRunContext` of the upcoming call.

        Returns:
            None, or a :class:`SessionRunArgs` whose fetches and feeds are merged into the
            call; the results come back in ``after_run``'s ``run_values.results`` in the
            same structure as ``fetches``.
        """
        return None

    def after_run(self, run_context: "SessionRunContext",
                  run_values: "SessionRunValues") -> None:
        """Called after each successful ``run()``; not called if the run raised.

        Args:
            run_context: The same :class:`SessionRunContext` given to ``before_run``;
                call ``run_context.request_stop()`` to end the training loop.
            run_values: A :class:`SessionRunValues` with the results of this hook's fetches.
        """

    def end(self, session) -> None:
        """Called at the end of the session, before it closes.

        Called after a normal stop and after ``OutOfRangeError``/``StopIteration``; not
        called after any other exception.

        Args:
            session: The session that will soon be closed; it may still be run.
        """


class SessionRunArgs(collections.namedtuple("SessionRunArgs",
                                            ["fetches", "feed_dict", "options"])):
    """Fetches and feeds a hook adds to a ``run()`` call, as ``tf.train.SessionRunArgs``.

    Args:
        fetches: Anything ``Session.run`` accepts: a single fetchable (a psrt Variable, a
            name), or a list, tuple or dict of them, nested as deeply as needed.
        feed_dict: Feeds merged into the call's ``feed_dict``, or None.
        options: Kept for TF's signature; psrt's session takes no ``RunOptions``.
    """

    __slots__ = ()

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The ``run()`` call being made, as ``tf.train.SessionRunContext``.

    Args:
        original_args: A :class:`SessionRunArgs` with the user's own fetches and feeds.
        session: The session that will execute the call.
    """

    def __init__(self, original_args: Optional[SessionRunArgs], session) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> Optional[SessionRunArgs]:
        """The user's arguments: ``SessionRunArgs(fetches, feed_dict)`` of ``run()``."""
        return self._original_args

    @property
    def session(self):
        """The session that executes the call."""
        return self._session

    @property
    def stop_requested(self) -> bool:
        """True once any hook called :meth:`request_stop`."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Asks the ``MonitoredSession`` to stop after this call."""
        self._stop_requested = True


class SessionRunValues(collections.namedtuple("SessionRunValues",
                                              ["results", "options", "run_metadata"])):
    """Results of a ``run()`` call for one hook, as ``tf.train.SessionRunValues``.

    Args:
        results: The values of the hook's ``SessionRunArgs.fetches``, in the same
            structure (single value, list, tuple or dict, nested). A global step fetch is
            a Python int: the step after this run's increment.
        options: The ``options`` of the call (always None in psrt).
        run_metadata: Run metadata (always None in psrt).
    """

    __slots__ = ()
