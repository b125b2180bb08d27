"""The hooks that write files: CheckpointSaverHook (with CheckpointSaverListener) and
SummarySaverHook, as in tensorflow/python/training/basic_session_run_hooks.py."""

from __future__ import annotations

import logging
import os
from typing import Iterable, Optional

from psrt.checkpoint import saver as _saver
from psrt.framework import file_io as _file_io
from psrt.ops import summary_writer as _summary_writer
from psrt.training.basic_session_run_hooks import (
    SecondOrStepTimer,
    _global_step_for,
    _session_log,
    _step_value,
)
from psrt.training.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

_logger = logging.getLogger("psrt")


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
        self._save_path = _file_io.join(os.fspath(checkpoint_dir), checkpoint_basename)
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
        _file_io.MakeDirs(os.fspath(self._checkpoint_dir))  # local, or an s3:// prefix
        self._summary_writer = _summary_writer.FileWriterCache.get(self._checkpoint_dir)
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
            self._summary_writer = _summary_writer.FileWriterCache.get(self._output_dir)
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
