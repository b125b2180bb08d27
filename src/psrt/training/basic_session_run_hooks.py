"""Session run hooks: TF1's ``session_run_hook`` and ``basic_session_run_hooks``.

A :class:`SessionRunHook` observes the calls a ``MonitoredSession`` makes and can add
fetches and feeds to each ``run()``, read their results, and request a stop. The
standard hooks here copy TensorFlow 1.x's names, signatures, defaults and behaviour:

* :class:`StopAtStepHook`: requests stop at a global step.
* :class:`CheckpointSaverHook` (+ :class:`CheckpointSaverListener`): saves checkpoints.
* :class:`StepCounterHook`: logs global steps per second (and writes it as a summary).
* :class:`SummarySaverHook`: writes summary ops' values every N steps or seconds.
* :class:`LoggingTensorHook`: logs values every N local steps, N seconds, or at end.
* :class:`NanTensorHook`: stops or fails on a NaN loss.
* :class:`GlobalStepWaiterHook`: holds a worker back until the global step is reached.
* :class:`FinalOpsHook`: fetches values when the session ends.
* :class:`FeedFnHook`: feeds ``feed_fn()`` to every run.

Call order, as in TF::

    hooks.begin()
    sess = <create session>
    hooks.after_create_session(sess, coord)     # again after every recovery
    while not stop requested:
      hooks.before_run(run_context)              # fetches/feeds merged into the run
      results = sess.run(merged_fetches, feed_dict=merged_feeds)
      hooks.after_run(run_context, run_values)   # skipped on OutOfRangeError/StopIteration
    hooks.end(sess)                              # skipped on any other exception

One psrt difference, by design: the global step a hook fetches in the same run as a
train op is the value *after* that step's increment (the push reply carries it, at no
cost), where TF's hooks read a stale pre-increment value and then spend an extra
``session.run`` to re-read it. psrt's hooks use the fetched value directly and never
make that extra round trip; the trigger points are the same as TF's.

Summaries go to event files for TensorBoard, as TF's: ``StepCounterHook`` writes
``global_step/sec``, ``SummarySaverHook`` the values of summary ops (``psrt.summary``), and
``CheckpointSaverHook`` a ``SessionLog`` CHECKPOINT per save, each to the shared
``psrt.summary.FileWriterCache`` writer of its directory. psrt has no dataflow graph, so
``save_graph_def`` has no effect. Logging goes to the ``logging`` logger ``"psrt"``.
``ProfilerHook`` is not provided.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from typing import Any, Callable, Iterable, Mapping, Optional

import numpy as np

from psrt.checkpoint import saver as _saver
from psrt.framework import errors
from psrt.ops import variables as _variables

_logger = logging.getLogger("psrt")

# How often GlobalStepWaiterHook re-reads the global step. TF polls every 0.5 s; a psrt
# read is one small round trip, so polling faster costs little and starts workers sooner.
_WAIT_POLL_SECS = 0.1

__all__ = [
    "SessionRunHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunValues",
    "SecondOrStepTimer",
    "NeverTriggerTimer",
    "StopAtStepHook",
    "CheckpointSaverListener",
    "CheckpointSaverHook",
    "StepCounterHook",
    "SummarySaverHook",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "GlobalStepWaiterHook",
    "FinalOpsHook",
    "FeedFnHook",
]


# --------------------------------------------------------------------------------------
# session_run_hook.py
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Timers
# --------------------------------------------------------------------------------------


class _HookTimer:
    """Base class of the timers that decide when a hook triggers."""

    def reset(self) -> None:
        """Forgets the last trigger."""

    def should_trigger_for_step(self, step: int) -> bool:
        """Returns True if the timer should trigger for ``step``."""
        raise NotImplementedError

    def update_last_triggered_step(self, step: int):
        """Records a trigger at ``step`` now.

        Returns:
            ``(elapsed_secs, elapsed_steps)`` since the previous trigger, both None on
            the first trigger.
        """
        raise NotImplementedError

    def last_triggered_step(self) -> Optional[int]:
        """The step of the last trigger, or None if it never triggered."""
        raise NotImplementedError


class SecondOrStepTimer(_HookTimer):
    """Triggers at most once every N seconds or once every N steps.

    As ``tf.train.SecondOrStepTimer``: the first call of :meth:`should_trigger_for_step`
    is always True; after a trigger at step S it is False for S itself, and True once
    ``every_steps`` steps have passed (``step >= S + every_steps``) or ``every_secs``
    seconds have elapsed. Seconds are measured with ``time.monotonic()`` (TF uses
    ``time.time()``; a monotonic clock is immune to wall-clock jumps).

    Args:
        every_secs: Seconds between triggers (int or float), or None.
        every_steps: Steps between triggers (int), or None.

    Raises:
        ValueError: Neither or both of ``every_secs`` and ``every_steps`` were given.
    """

    def __init__(self, every_secs: Optional[float] = None,
                 every_steps: Optional[int] = None) -> None:
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self) -> None:
        """Forgets the last trigger: the next step triggers, as TF's ``reset``."""
        self._last_triggered_step: Optional[int] = None
        self._last_triggered_time: Optional[float] = None

    def should_trigger_for_step(self, step: int) -> bool:
        """Returns True if ``step`` is the first, or enough steps or seconds have passed.

        Args:
            step: The training step to decide for.
        """
        if self._last_triggered_step is None:
            return True
        if step == self._last_triggered_step:
            return False
        if self._every_secs is not None:
            assert self._last_triggered_time is not None
            if time.monotonic() >= self._last_triggered_time + self._every_secs:
                return True
        if self._every_steps is not None:
            if step >= self._last_triggered_step + self._every_steps:
                return True
        return False

    def update_last_triggered_step(self, step: int):
        """Records a trigger at ``step`` now.

        Returns:
            ``(elapsed_secs, elapsed_steps)`` since the previous trigger (a float and an
            int), or ``(None, None)`` on the first trigger.
        """
        now = time.monotonic()
        if self._last_triggered_time is None:
            elapsed = (None, None)
        else:
            assert self._last_triggered_step is not None
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self) -> Optional[int]:
        """The step (int) of the last trigger, or None before the first."""
        return self._last_triggered_step


class NeverTriggerTimer(_HookTimer):
    """A timer that never triggers (``LoggingTensorHook`` with only ``at_end``)."""

    def should_trigger_for_step(self, step: int) -> bool:
        """Always False."""
        return False

    def update_last_triggered_step(self, step: int):
        """Records nothing; returns ``(None, None)``."""
        return (None, None)

    def last_triggered_step(self) -> Optional[int]:
        """Always None."""
        return None


# --------------------------------------------------------------------------------------
# Lazy links to modules written beside this one
# --------------------------------------------------------------------------------------


def _global_step_for(hook_name: str):
    """Returns the global step Variable, or raises as TF's hooks do in ``begin()``.

    Raises:
        RuntimeError: No global step was created (``psrt.train.get_or_create_global_step``).
    """
    global_step = _variables.get_global_step()
    if global_step is None:
        raise RuntimeError("Global step should be created to use %s." % hook_name)
    return global_step


def _step_value(value) -> int:
    """The fetched global step as a Python int (accepts numpy scalars too)."""
    return int(value)


def _summary():
    """The psrt.summary module (lazy: it imports the optimizers, which import this module)."""
    from psrt.ops import summary_ops as summary  # noqa: PLC0415

    return summary


def _session_log(status: str, **fields):
    """A ``SessionLog`` protocol buffer with status START, STOP or CHECKPOINT."""
    session_log = _summary().SessionLog
    return session_log(status=getattr(session_log, status), **fields)


# --------------------------------------------------------------------------------------
# basic_session_run_hooks.py
# --------------------------------------------------------------------------------------


class LoggingTensorHook(SessionRunHook):
    """Logs values every N local steps, every N seconds, or at end.

    As ``tf.train.LoggingTensorHook``. Values are logged with INFO severity to the
    ``"psrt"`` logger as ``"tag1 = v1, tag2 = v2 (0.123 sec)"`` (the seconds since the
    previous log, omitted the first time) with numpy's ``suppress=True`` print option.
    Steps are local: this hook counts its own ``run()`` calls, not the global step.

    If ``at_end`` is True the values are fetched once more in ``end()``; they should not
    have side effects such as consuming input.

    Args:
        tensors: A dict mapping string tags to fetchables (psrt Variables or names), or
            an iterable of fetchables. For an iterable, a string is its own tag and any
            other item is tagged by its ``name`` attribute (TF tags it by the object).
            Dict tags are logged in sorted order, iterable items in their order.
        every_n_iter: Log once every N local steps (int > 0).
        every_n_secs: Log at most once every N seconds (int or float).
        at_end: Whether to log the values in ``end()``.
        formatter: A function from the dict ``{tag: value}`` to the string to log, or
            None for the default format.

    Raises:
        ValueError: ``every_n_iter`` is not positive; or not exactly one of
            ``every_n_iter`` and ``every_n_secs`` was given (both may be omitted only
            when ``at_end`` is True).
    """

    def __init__(self, tensors, every_n_iter: Optional[int] = None,
                 every_n_secs: Optional[float] = None, at_end: bool = False,
                 formatter: Optional[Callable[[dict], str]] = None) -> None:
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs "
                "must be provided.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError("invalid every_n_iter=%s." % every_n_iter)
        if isinstance(tensors, Mapping):
            self._tag_order = sorted(tensors.keys())
            self._tensors = dict(tensors)
        else:
            items = [tensors] if isinstance(tensors, str) else list(tensors)
            self._tag_order = [_tag_of(item) for item in items]
            self._tensors = dict(zip(self._tag_order, items))
        self._formatter = formatter
        self._timer: _HookTimer = (
            NeverTriggerTimer() if only_log_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter))
        self._log_at_end = at_end
        self._iter_count = 0
        self._should_trigger = False

    def begin(self) -> None:
        """Resets the timer and the iteration count."""
        self._timer.reset()
        self._iter_count = 0

    def before_run(self, run_context: SessionRunContext) -> Optional[SessionRunArgs]:
        """Requests the tensors when this iteration is due to be logged."""
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        if self._should_trigger:
            return SessionRunArgs(dict(self._tensors))
        return None

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        """Logs the fetched values when this iteration was due."""
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session) -> None:
        """Logs the tensors once more when ``at_end`` (one extra ``session.run``)."""
        if self._log_at_end:
            self._log_tensors(session.run(dict(self._tensors)))

    def _log_tensors(self, tensor_values: dict) -> None:
        elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
        with np.printoptions(suppress=True):
            if self._formatter is not None:
                _logger.info(self._formatter(tensor_values))
                return
            stats = ", ".join("%s = %s" % (tag, tensor_values[tag])
                              for tag in self._tag_order)
        if elapsed_secs is not None:
            _logger.info("%s (%.3f sec)", stats, elapsed_secs)
        else:
            _logger.info("%s", stats)


def _tag_of(item) -> str:
    """The log tag of an item of ``LoggingTensorHook``'s iterable: a name, or its name."""
    if isinstance(item, str):
        return item
    name = getattr(item, "name", None)
    return name if isinstance(name, str) else str(item)


class StopAtStepHook(SessionRunHook):
    """Requests stop at a specified global step, as ``tf.train.StopAtStepHook``.

    With ``last_step`` the hook stops the loop after the run whose global step reaches
    ``last_step``; with ``num_steps`` it does so ``num_steps`` global steps after the
    step read in the first ``after_create_session`` (the target is computed once per
    hook object, so a recovered session keeps it).

    TF requests stop when ``stale_step + 1 >= last_step`` and a re-read of the step
    (an extra ``session.run``) is ``>= last_step``. The step psrt hands to ``after_run``
    already is that re-read value, so the rule is ``step >= last_step`` with no extra
    round trip. E.g. ``last_step=10``: steps 5 and 9 continue, 10 and 11 stop.

    Beyond TF: when a (re-)created session already starts at ``last_step`` or later, the
    hook requests a stop in ``after_create_session`` through the monitored session's
    ``coord``, so ``should_stop()`` is True before any step runs (TF runs one more step).

    Args:
        num_steps: Number of global steps to run after the session is created.
        last_step: The global step after which to stop.

    Raises:
        ValueError: Neither or both of ``num_steps`` and ``last_step`` were given.
    """

    def __init__(self, num_steps: Optional[int] = None,
                 last_step: Optional[int] = None) -> None:
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step
        self._global_step_tensor = None

    def begin(self) -> None:
        """Looks up the global step.

        Raises:
            RuntimeError: No global step exists.
        """
        self._global_step_tensor = _global_step_for("StopAtStepHook")

    def after_create_session(self, session, coord) -> None:
        """Computes the last step for ``num_steps``; beyond TF, requests a stop through
        ``coord`` when the global step already is ``>= last_step`` (a job restarted after
        its last step ends without running one more step). With ``coord`` None (a bare
        hook, as in TF's tests) a ``last_step`` hook reads nothing here."""
        step = None
        if self._last_step is None:
            step = _step_value(session.run(self._global_step_tensor))
            self._last_step = step + self._num_steps
        if coord is not None:
            if step is None:
                step = _step_value(session.run(self._global_step_tensor))
            if step >= self._last_step:
                coord.request_stop()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Requests the global step (fetched with the train op: no extra round trip)."""
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        """Requests a stop once the step after this run is >= the last step.

        Raises:
            RuntimeError: ``after_create_session`` never ran (num_steps has no base).
        """
        if self._last_step is None:
            raise RuntimeError(
                "StopAtStepHook(num_steps=%s) has no last step: after_create_session() "
                "must run before after_run()." % self._num_steps)
        if _step_value(run_values.results) >= self._last_step:
            run_context.request_stop()


class CheckpointSaverListener:
    """Callbacks around the saves of a :class:`CheckpointSaverHook`.

    As ``tf.train.CheckpointSaverListener``: ``begin()`` from the hook's ``begin``,
    ``before_save``/``after_save`` around every save, ``end`` from the hook's ``end``
    (after its final save). ``after_save`` returning True requests that training stop.

    Example::

        class Evaluate(psrt.train.CheckpointSaverListener):
            def after_save(self, session, global_step_value):
                return evaluate_latest_checkpoint() > 0.99   # True: stop training
    """

    def begin(self) -> None:
        """Called from the hook's ``begin``."""

    def before_save(self, session, global_step_value: int) -> None:
        """Called before each save, with the step (int) being saved."""

    def after_save(self, session, global_step_value: int) -> Optional[bool]:
        """Called after each save; returning True requests that training stop."""

    def end(self, session, global_step_value: int) -> None:
        """Called from the hook's ``end``, after its final save."""


class CheckpointSaverHook(SessionRunHook):
    """Saves checkpoints every N steps or seconds, as ``tf.train.CheckpointSaverHook``.

    Saves to ``os.path.join(checkpoint_dir, checkpoint_basename)`` with
    ``global_step=step`` (files ``model.ckpt-STEP``):

    * in ``after_create_session``, the state at the current global step;
    * in ``after_run``, when the timer triggers for the global step the run returned;
    * in ``end()``, unless the last save was at the current step.

    The saver is ``saver``, else ``scaffold.saver``, else the one Saver of the default
    graph's ``SAVERS`` collection, where a default ``Saver()`` is created and added when it
    is empty (TF's ``saver._get_saver_or_default``; TF's hook raises instead). Each save also
    writes a ``SessionLog`` CHECKPOINT event at its step to
    ``psrt.summary.FileWriterCache.get(checkpoint_dir)``, as TF.

    Args:
        checkpoint_dir: Directory for the checkpoint files (str).
        save_secs: Save every N seconds (int or float).
        save_steps: Save every N global steps (int). Exactly one of ``save_secs`` and
            ``save_steps`` must be given.
        saver: A ``psrt.train.Saver``, or None.
        checkpoint_basename: Base name of the checkpoint files.
        scaffold: A ``Scaffold`` whose ``saver`` is used, or None.
        listeners: ``CheckpointSaverListener`` instances called around every save.
        save_graph_def: Accepted for TF's signature; psrt has no dataflow graph to save.

    Raises:
        ValueError: Both ``saver`` and ``scaffold`` were given; or not exactly one of
            ``save_secs`` and ``save_steps``.
    """

    def __init__(self, checkpoint_dir: str, save_secs: Optional[float] = None,
                 save_steps: Optional[int] = None, saver=None,
                 checkpoint_basename: str = "model.ckpt", scaffold=None,
                 listeners: Optional[Iterable[CheckpointSaverListener]] = None,
                 save_graph_def: bool = True) -> None:
        _logger.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._scaffold = scaffold
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])
        self._save_graph_def = save_graph_def
        self._global_step_tensor = None
        self._summary_writer = None

    def begin(self) -> None:
        """Gets the summary writer of ``checkpoint_dir`` (which creates the directory, as
        TF's), looks up the global step and calls the listeners' ``begin()``.

        Raises:
            RuntimeError: No global step exists.
        """
        os.makedirs(self._checkpoint_dir, exist_ok=True)
        self._summary_writer = _summary().FileWriterCache.get(self._checkpoint_dir)
        self._global_step_tensor = _global_step_for("CheckpointSaverHook")
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord) -> None:
        """Saves a checkpoint right after the session is created (or re-created), as TF."""
        step = _step_value(session.run(self._global_step_tensor))
        self._save(session, step)
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Requests the global step, fetched with the train op (no extra round trip)."""
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        """Saves when the timer triggers for the step this run reached; a listener
        returning True from ``after_save`` requests a stop."""
        step = _step_value(run_values.results)
        if self._timer.should_trigger_for_step(step):
            self._timer.update_last_triggered_step(step)
            if self._save(run_context.session, step):
                run_context.request_stop()

    def end(self, session) -> None:
        """Saves a final checkpoint unless the last save was at this step."""
        last_step = _step_value(session.run(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)

    def _save(self, session, step: int) -> bool:
        """Saves a checkpoint at ``step``; returns True if a listener asked to stop."""
        _logger.info("Calling checkpoint listeners before saving checkpoint %d...", step)
        for listener in self._listeners:
            listener.before_save(session, step)
        _logger.info("Saving checkpoints for %d into %s.", step, self._save_path)
        self._get_saver().save(session, self._save_path, global_step=step)
        if self._summary_writer is not None:
            self._summary_writer.add_session_log(
                _session_log("CHECKPOINT", checkpoint_path=self._save_path), step)
        _logger.info("Calling checkpoint listeners after saving checkpoint %d...", step)
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                _logger.info("A CheckpointSaverListener requested that training be "
                             "stopped. listener: %s", listener)
                should_stop = True
        return should_stop

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None and getattr(self._scaffold, "saver", None) is not None:
            return self._scaffold.saver
        self._saver = _saver._get_saver_or_default()
        return self._saver


class StepCounterHook(SessionRunHook):
    """Logs global steps per second and writes them as a summary, as
    ``tf.train.StepCounterHook``.

    Every ``every_n_steps`` global steps (or ``every_n_secs`` seconds) logs
    ``"global_step/sec: X"`` at INFO to the ``"psrt"`` logger (the tag is the global
    step's name, without any ``:0`` suffix, plus ``/sec``), where X is the global steps
    between the two triggers, as returned by the session, divided by the seconds between
    them; with a summary writer, X is also written as a scalar summary of that tag at the
    global step. The first trigger only starts the clock. If the global step does not
    change between runs, a warning is logged (the first 5 times), as TF does.

    Args:
        every_n_steps: Log every N global steps (int).
        every_n_secs: Log every N seconds. Exactly one of the two must be given.
        output_dir: Directory to write the summaries to, through
            ``psrt.summary.FileWriterCache.get(output_dir)``; used when ``summary_writer``
            is None.
        summary_writer: A ``psrt.summary.FileWriter``, or None.

    Raises:
        ValueError: Not exactly one of ``every_n_steps`` and ``every_n_secs`` was given.
    """

    _MAX_NOT_INCREASED_WARNINGS = 5

    def __init__(self, every_n_steps: Optional[int] = 100,
                 every_n_secs: Optional[float] = None, output_dir: Optional[str] = None,
                 summary_writer=None) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError(
                "exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps,
                                        every_secs=every_n_secs)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self._last_global_step: Optional[int] = None
        self._not_increased_warnings = 0
        self._global_step_tensor = None
        self._summary_tag = "global_step/sec"

    def begin(self) -> None:
        """Gets the summary writer of ``output_dir`` (when no writer was given) and looks up
        the global step.

        Raises:
            RuntimeError: No global step exists.
        """
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _summary().FileWriterCache.get(self._output_dir)
        self._global_step_tensor = _global_step_for("StepCounterHook")
        name = getattr(self._global_step_tensor, "name", None)
        if isinstance(name, str) and name:
            self._summary_tag = name.split(":", 1)[0] + "/sec"

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Requests the global step, fetched with the train op (no extra round trip)."""
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        """Logs ``global_step/sec`` (steps per second) when the timer triggers, and writes
        it to the summary writer at this step."""
        step = _step_value(run_values.results)
        if self._timer.should_trigger_for_step(step):
            elapsed_secs, elapsed_steps = self._timer.update_last_triggered_step(step)
            if elapsed_secs is not None and elapsed_secs > 0:
                self._log_and_record(elapsed_steps / elapsed_secs, step)
        if step == self._last_global_step:
            if self._not_increased_warnings < self._MAX_NOT_INCREASED_WARNINGS:
                self._not_increased_warnings += 1
                _logger.warning(
                    "It seems that global step (psrt.train.get_global_step) has not "
                    "been increased. Current value (could be stable): %s vs previous "
                    "value: %s. You could increase the global step by passing "
                    "psrt.train.get_global_step() to Optimizer.apply_gradients or "
                    "Optimizer.minimize.", step, self._last_global_step)
        self._last_global_step = step

    def _log_and_record(self, steps_per_sec: float, step: int) -> None:
        if self._summary_writer is not None:
            summary = _summary().Summary
            self._summary_writer.add_summary(summary(value=[summary.Value(
                tag=self._summary_tag, simple_value=steps_per_sec)]), step)
        _logger.info("%s: %g", self._summary_tag, steps_per_sec)


class SummarySaverHook(SessionRunHook):
    """Saves summaries every N steps or seconds, as ``tf.train.SummarySaverHook``.

    The summary ops are fetched in the same run as the training step (so a summary of a
    train op's loss sees that step's loss, and variables are pulled in the same round
    trip) on the first run and then whenever the timer triggers for the next global
    step; their values are written at the global step that run reached. The first run
    also writes a ``SessionLog`` START at that step (TensorBoard then drops events a
    restarted job left beyond it). ``end()`` flushes the writer.

    TF reads the global step again after a run that fetched summaries (an extra
    ``session.run``); psrt's run already returns the step after its increment, so summaries
    are written at the same steps as TF's (with ``save_steps=100`` from step 0: 1, 101,
    201...) with no extra round trip.

    Args:
        save_steps: Save every N global steps (int).
        save_secs: Save every N seconds. Exactly one of ``save_steps`` and ``save_secs``
            must be given.
        output_dir: Directory to write to, through ``psrt.summary.FileWriterCache``; used
            when ``summary_writer`` is None.
        summary_writer: A ``psrt.summary.FileWriter``, or None (then ``output_dir``'s).
            With neither, the summaries are computed and dropped, as TF.
        scaffold: A ``Scaffold`` whose ``summary_op`` (by default ``merge_all()`` of the
            graph) is saved.
        summary_op: A summary op (``psrt.summary.scalar``, ``merge_all()``...) or a list of
            them.

    Raises:
        ValueError: Not exactly one of ``scaffold`` and ``summary_op``; or not exactly one
            of ``save_steps`` and ``save_secs``.
    """

    def __init__(self, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
                 output_dir: Optional[str] = None, summary_writer=None, scaffold=None,
                 summary_op=None) -> None:
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._next_step: Optional[int] = None
        self._request_summary = False
        self._global_step_tensor = None

    def begin(self) -> None:
        """Gets the summary writer of ``output_dir`` (when no writer was given) and looks up
        the global step.

        Raises:
            RuntimeError: No global step exists.
        """
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _summary().FileWriterCache.get(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_for("SummarySaverHook")

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Requests the global step, and the summary ops when this run is due."""
        self._request_summary = (self._next_step is None or
                                 self._timer.should_trigger_for_step(self._next_step))
        requests = {"global_step": self._global_step_tensor}
        if self._request_summary:
            summary_op = self._get_summary_op()
            if summary_op is not None:
                requests["summary"] = summary_op
        return SessionRunArgs(requests)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        """Writes the fetched summaries at the global step this run reached."""
        if not self._summary_writer:
            return
        global_step = _step_value(run_values.results["global_step"])
        if self._next_step is None:
            self._summary_writer.add_session_log(_session_log("START"), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None) -> None:
        """Flushes the summary writer."""
        if self._summary_writer:
            self._summary_writer.flush()

    def _get_summary_op(self) -> Optional[list]:
        """The summary ops to fetch (a list), from ``summary_op`` or the scaffold; None if
        there are none."""
        summary_op = self._summary_op
        if summary_op is None:
            summary_op = self._scaffold.summary_op
        if summary_op is None:
            return None
        if not isinstance(summary_op, list):
            return [summary_op]
        return summary_op


class NanLossDuringTrainingError(RuntimeError):
    """Raised by :class:`NanTensorHook`, as ``tf.train.NanLossDuringTrainingError``."""

    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Stops training, or fails, if the loss is NaN, as ``tf.train.NanTensorHook``.

    Fetches ``loss_tensor`` on every run. On a NaN (any NaN element, for an array) it
    logs ``"Model diverged with loss = NaN."`` and either raises
    :class:`NanLossDuringTrainingError` or requests a stop.

    Args:
        loss_tensor: The loss to watch: a fetchable (psrt Variable or name).
        fail_on_nan_loss: Raise (True) or only request a stop (False).
    """

    def __init__(self, loss_tensor, fail_on_nan_loss: bool = True) -> None:
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Requests the loss."""
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        """Checks the loss.

        Raises:
            NanLossDuringTrainingError: The loss is NaN and ``fail_on_nan_loss`` is True.
        """
        if np.any(np.isnan(run_values.results)):
            message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                _logger.error(message)
                raise NanLossDuringTrainingError
            _logger.warning(message)
            run_context.request_stop()


class GlobalStepWaiterHook(SessionRunHook):
    """Delays the first run until the global step reaches ``wait_until_step``.

    As ``tf.train.GlobalStepWaiterHook``: used to start workers gradually, e.g.
    ``wait_until_step=int(K * log(task_index + 1))``. The first ``before_run`` blocks,
    reading the global step with ``run_context.session.run(global_step)`` every 0.1 s
    (TF: 0.5 s) until it is ``>= wait_until_step``; later runs do not wait.

    Args:
        wait_until_step: The global step to wait for (int); ``<= 0`` means no wait.
    """

    def __init__(self, wait_until_step: int) -> None:
        self._wait_until_step = wait_until_step
        self._worker_is_started = False
        self._global_step_tensor = None

    def begin(self) -> None:
        """Looks up the global step.

        Raises:
            RuntimeError: No global step exists.
        """
        self._worker_is_started = False
        self._global_step_tensor = _global_step_for("GlobalStepWaiterHook")

    def before_run(self, run_context: SessionRunContext) -> None:
        """Blocks, polling the global step every 0.1 s, until it reaches ``wait_until_step``."""
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        _logger.info("Waiting for global step %d before starting training.",
                     self._wait_until_step)
        last_logged_step = 0
        while True:
            step = _step_value(run_context.session.run(self._global_step_tensor))
            if step >= self._wait_until_step:
                self._worker_is_started = True
                return None
            if step - last_logged_step > 1000:
                _logger.info("Waiting for global step %d before starting training. "
                             "Current step is %d.", self._wait_until_step, step)
                last_logged_step = step
            time.sleep(_WAIT_POLL_SECS)


class FinalOpsHook(SessionRunHook):
    """Fetches values when the session ends, as ``tf.train.FinalOpsHook``.

    Args:
        final_ops: A fetchable, or a list or dict of fetchables, run in ``end()``.
        final_ops_feed_dict: The ``feed_dict`` for that run, or None.
    """

    def __init__(self, final_ops, final_ops_feed_dict: Optional[dict] = None) -> None:
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values: Any = None

    @property
    def final_ops_values(self):
        """The values fetched in ``end()``, in the structure of ``final_ops``; or None."""
        return self._final_ops_values

    def end(self, session) -> None:
        """Fetches ``final_ops``.

        Raises:
            OutOfRangeError, StopIteration: From the fetch, after logging a warning that
                final ops should not depend on an input source.
        """
        if self._final_ops is None:
            return
        try:
            self._final_ops_values = session.run(self._final_ops,
                                                 feed_dict=self._final_ops_feed_dict)
        except (errors.OutOfRangeError, StopIteration):
            _logger.warning(
                "An OutOfRangeError or StopIteration exception is raised by the code in "
                "FinalOpsHook. This typically means the values fetched by FinalOpsHook "
                "have a dependency back to some input source, which should not happen: "
                "final ops should only read variables, not consume more input.")
            raise


class FeedFnHook(SessionRunHook):
    """Feeds ``feed_fn()`` to every run, as ``tf.train.FeedFnHook``.

    Args:
        feed_fn: A function of no arguments returning the dict to merge into each
            run's ``feed_dict``.
    """

    def __init__(self, feed_fn: Callable[[], dict]) -> None:
        self.feed_fn = feed_fn

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Adds ``feed_fn()``'s dict to the run's feeds."""
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())
