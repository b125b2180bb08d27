"""Supervisor, as tensorflow/python/training/supervisor.py (TF1's older training wrapper)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from psrt.checkpoint import atomic_file as _atomic_file
from psrt.checkpoint import saver as _checkpoint
from psrt.framework import errors
from psrt.framework import ops as _ops
from psrt.ops import summary_ops as _summary_ops
from psrt.ops import summary_writer as _summary_writer
from psrt.ops import variables as _variables
from psrt.runtime import threads as _threads
from psrt.runtime.session import Session
from psrt.training import basic_session_run_hooks as _hooks
from psrt.ops import local_variables as _local_variables
from psrt.training import training_util
from psrt.training.coordinator import Coordinator
from psrt.training.monitored_session import (
    _PREEMPTION_ERRORS,
    _first_of_collection,
    _is_worker_target,
)
from psrt.training.session_manager import SessionManager

_logger = logging.getLogger("psrt")


class Supervisor:
    """The older training helper, as ``tf.train.Supervisor``: the chief initializes or
    restores from ``logdir``, saves a checkpoint when its services start and then every
    ``save_model_secs``, and computes the summaries every ``save_summaries_secs``, on
    threads; other tasks wait for the model.

    Summaries, on the chief, as TF: ``summary_writer`` (default a ``FileWriter(logdir)``)
    gets a ``SessionLog`` START when the services start, the value of ``summary_op`` and
    ``global_step/sec`` from the summary threads (at once, then every
    ``save_summaries_secs``), a CHECKPOINT per periodic save, and a STOP when the supervisor
    stops (which closes the writer). The summary thread runs ``summary_op`` alone, so a
    summary that reads feeds or a train op's loss fails there, stopping training with that
    error, as in TF: pass ``summary_op=None`` and write such summaries from the training
    loop with :meth:`summary_computed`.

    Args:
        graph: Accepted (psrt uses the default graph).
        ready_op: Default ``report_uninitialized_variables()``.
        ready_for_local_init_op: What ``local_init_op`` waits for; default
            ``report_uninitialized_variables(global_variables())``, as TF.
        is_chief: Whether this task initializes and saves.
        init_op: Default ``global_variables_initializer()``.
        local_init_op: Run in each new session once ``ready_for_local_init_op`` reports
            nothing, as TF (e.g. a SyncReplicasOptimizer's ``local_step_init_op`` or
            ``chief_init_op``, which do nothing in psrt). Default: ``local_variables_initializer()``
            when the graph has local variables (``psrt.metrics``' accumulators), else None.
        logdir: Checkpoint directory (None: no checkpoints), created by the chief when
            missing. The chief restores its latest checkpoint, or, beyond TF, when that one
            is corrupt, the newest intact one the state file lists (see
            :meth:`psrt.train.Saver.restore`).
        summary_op: The summary op the chief's summary thread writes. Default
            (``USE_DEFAULT``): the first op of the ``SUMMARY_OP`` collection, else
            ``psrt.summary.merge_all()`` (None without summary ops). None: no summary
            thread.
        saver: Default ``Saver(max_to_keep=5)`` of all global variables (when ``logdir``).
        global_step: Default the graph's global step.
        save_summaries_secs: Seconds between the chief's summaries (default 120; 0: none).
        save_model_secs: Seconds between checkpoints (0: none).
        recovery_wait_secs: Accepted (readiness is polled every 0.1 s).
        checkpoint_basename: Default "model.ckpt".
        summary_writer: The chief's ``psrt.summary.FileWriter``. Default: a new one for
            ``logdir`` (none without a ``logdir``). None: no summaries are written.
        init_fn: ``init_fn(sess)`` after ``init_op``.

    Raises:
        PermissionDeniedError: on the chief, ``logdir`` cannot be created or written to,
            naming it (TF's chief fails the same way, creating its events file there).
    """

    USE_DEFAULT = 0

    def __init__(self, graph: Any = None, ready_op: Any = USE_DEFAULT,
                 ready_for_local_init_op: Any = USE_DEFAULT, is_chief: bool = True,
                 init_op: Any = USE_DEFAULT, init_feed_dict: Any = None,
                 local_init_op: Any = USE_DEFAULT, logdir: str | None = None,
                 summary_op: Any = USE_DEFAULT, saver: Any = USE_DEFAULT,
                 global_step: Any = USE_DEFAULT, save_summaries_secs: float = 120,
                 save_model_secs: float = 600, recovery_wait_secs: float = 30,
                 stop_grace_secs: float = 120, checkpoint_basename: str = "model.ckpt",
                 session_manager: SessionManager | None = None,
                 summary_writer: Any = USE_DEFAULT, init_fn: Callable[[Any], None] | None = None,
                 local_init_run_options: Any = None) -> None:
        self._is_chief = is_chief
        self._logdir = logdir
        self._ready_op = (_variables.report_uninitialized_variables() if ready_op is
                          Supervisor.USE_DEFAULT else ready_op)
        self._init_op = (_variables.global_variables_initializer() if init_op is
                         Supervisor.USE_DEFAULT else init_op)
        self._init_feed_dict = init_feed_dict
        self._init_fn = init_fn
        if local_init_op is Supervisor.USE_DEFAULT:
            # As TF's default (local_variables_initializer): the input pipelines' epoch
            # counters and file lists; None when the graph has no local variables.
            local_init_op = _local_variables.local_variables_initializer() \
                if _local_variables.local_variables() else None
        self._local_init_op = local_init_op
        self._ready_for_local_init_op = (
            _variables.report_uninitialized_variables(_variables.global_variables())
            if ready_for_local_init_op is Supervisor.USE_DEFAULT else ready_for_local_init_op)
        if saver is Supervisor.USE_DEFAULT:
            saver = _checkpoint.Saver(var_list=_variables.global_variables(), max_to_keep=5) \
                if logdir else None
        self._saver = saver
        if summary_op is Supervisor.USE_DEFAULT:
            summary = _summary_ops
            summary_op = _first_of_collection(summary.SUMMARY_OP)
            if summary_op is None:
                summary_op = summary.merge_all()
                if summary_op is not None:
                    _ops.get_default_graph().add_to_collection(summary.SUMMARY_OP,
                                                                     summary_op)
        self._summary_op = summary_op
        self._global_step = (training_util.get_global_step() if global_step is
                             Supervisor.USE_DEFAULT else global_step)
        self._save_model_secs = save_model_secs
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        # As TF, only the chief computes and writes summaries.
        self._save_summaries_secs = save_summaries_secs if is_chief else None
        if is_chief and logdir:
            # TF's chief creates logdir through its summary writer, whose events file fails
            # in a directory it cannot write to; psrt checks it here whatever the writer, so
            # a read-only logdir fails now, not at the first save.
            _atomic_file.check_writable_dir(logdir, "the Supervisor's logdir")
        self._summary_writer = None
        if is_chief:
            if summary_writer is Supervisor.USE_DEFAULT:
                if logdir:
                    self._summary_writer = _summary_writer.FileWriter(logdir)
            else:
                self._summary_writer = summary_writer
        self._session_manager = session_manager or SessionManager(
            ready_op=self._ready_op, local_init_op=self._local_init_op,
            ready_for_local_init_op=self._ready_for_local_init_op)
        self._coord_stop = threading.Event()
        # The queue runners' coordinator (their threads, the error one reports).
        self._qr_coord = Coordinator()
        self._stop_grace_secs = stop_grace_secs
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._thread_error: BaseException | None = None
        self._sess: Session | None = None
        self._sess_master = ""
        _ops.get_default_graph().finalize()

    is_chief = property(lambda self: self._is_chief)
    summary_op = property(lambda self: self._summary_op)
    summary_writer = property(lambda self: self._summary_writer)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    save_model_secs = property(lambda self: self._save_model_secs)
    saver = property(lambda self: self._saver)
    global_step = property(lambda self: self._global_step)
    save_path = property(lambda self: self._save_path)
    init_op = property(lambda self: self._init_op)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    session_manager = property(lambda self: self._session_manager)

    @property
    def coord(self) -> "Supervisor":
        """The object that carries stop requests (this Supervisor: ``should_stop``,
        ``request_stop``)."""
        return self

    def prepare_or_wait_for_session(self, master: str = "", config: Any = None,
                                    wait_for_checkpoint: bool = False,
                                    max_wait_secs: float = 7200,
                                    start_standard_services: bool = True) -> Session:
        """The chief's initialized or restored session (and its checkpoint and summary
        threads), or a non-chief's session once the model is ready, as TF. A supervisor
        stopped before is usable again: its stop request is cleared and its summary writer
        reopened (a new event file), as TF."""
        self._coord_stop.clear()
        self._qr_coord = Coordinator()
        self._stopped = False
        self._thread_error = None
        self._sess_master = master
        _threads.share_blas_threads(master)
        if self._summary_writer is not None:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver, checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
                config=config, init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            self._sess = sess
            if start_standard_services:
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(master, config=config,
                                                          max_wait_secs=max_wait_secs)
            self._sess = sess
        if start_standard_services:
            self.start_queue_runners(sess)   # chief and others, as TF
        return sess

    def start_standard_services(self, sess: Session) -> list[threading.Thread]:
        """Starts the chief's services, as TF: with a summary writer, a ``SessionLog`` START
        at the current step, then the summary thread (``summary_op`` at once and every
        ``save_summaries_secs``) and the step counter thread (``global_step/sec``, as
        often); and the checkpoint thread (a save at once, then every ``save_model_secs``,
        as TF's ``SVTimerCheckpointThread``). Without a ``logdir`` nothing starts (TF's
        rule). Returns the threads started.

        Raises:
            RuntimeError: called on a non-chief supervisor.
        """
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because "
                               "only chief supervisors can write events.")
        if not self._logdir:
            return []
        writer = self._summary_writer
        if self._global_step is not None and writer is not None:
            writer.add_session_log(_hooks._session_log("START"),
                                   training_util.global_step(sess, self._global_step))
        started = []
        if self._save_summaries_secs and self._save_summaries_secs > 0 and writer is not None:
            if self._summary_op is not None:
                started.append(self._start_looper(
                    "summary", self._save_summaries_secs, lambda: self._write_summaries(sess)))
            if self._global_step is not None:
                counter = _StepCounter(self, sess)
                started.append(self._start_looper("step-counter", self._save_summaries_secs,
                                                  counter.run, counter.start))
        if self._saver is not None and self._save_model_secs and self._save_model_secs > 0:
            t = threading.Thread(target=self._checkpoint_loop, args=(sess,),
                                 name="psrt-supervisor-checkpoint", daemon=True)
            t.start()
            self._threads.append(t)
            started.append(t)
        return started

    def _start_looper(self, name: str, interval: float, target: Callable[[], None],
                      start: Callable[[], None] | None = None) -> threading.Thread:
        """A thread calling ``target`` at once and then every ``interval`` seconds until stop,
        as TF's ``LooperThread``. A lost or restarted ps task (AbortedError,
        UnavailableError) is logged and the next call tried; any other error stops the
        supervisor and is raised again by :meth:`stop`, as TF's coordinator does."""
        def run() -> None:
            try:
                if start is not None:
                    start()
                next_time = time.monotonic()
                while not self._coord_stop.wait(max(0.0, next_time - time.monotonic())):
                    next_time += interval
                    try:
                        target()
                    except _PREEMPTION_ERRORS as e:
                        _logger.warning("Supervisor %s thread: %s", name, e)
            except BaseException as e:  # noqa: BLE001 - handed to the training thread
                _logger.error("Supervisor %s thread failed; stopping: %s", name, e)
                if self._thread_error is None:
                    self._thread_error = e
                self.request_stop(e)
        t = threading.Thread(target=run, name=f"psrt-supervisor-{name}", daemon=True)
        t.start()
        self._threads.append(t)
        return t

    def _write_summaries(self, sess: Session) -> None:
        """The summary thread's call (TF's ``SVSummaryThread.run_loop``)."""
        if self._global_step is not None:
            summary, step = sess.run([self._summary_op, self._global_step])
        else:
            summary, step = sess.run(self._summary_op), None
        if self._summary_writer is not None:
            _logger.info("Recording summary at step %s.", step)
            self._summary_writer.add_summary(summary, step)

    def _checkpoint_loop(self, sess: Session) -> None:
        """The checkpoint thread (TF's ``SVTimerCheckpointThread``, a ``coordinator.
        LooperThread``, whose first ``run_loop`` is at once): a save when the services start,
        then every ``save_model_secs``, so a job stopped in its first interval has one."""
        next_time = time.monotonic()
        while not self._coord_stop.wait(max(0.0, next_time - time.monotonic())):
            next_time += self._save_model_secs
            try:
                _logger.info("Saving checkpoint to path %s", self._save_path)
                self._save(sess)
                if self._summary_writer is not None and self._global_step is not None:
                    self._summary_writer.add_session_log(
                        _hooks._session_log("CHECKPOINT", checkpoint_path=self._save_path),
                        training_util.global_step(sess, self._global_step))
            except errors.OpError as e:
                _logger.warning("Supervisor checkpoint failed: %s", e)

    def _save(self, sess: Session) -> None:
        if self._saver is None or self._save_path is None:
            return
        step = self._global_step if self._global_step is not None else None
        self._saver.save(sess, self._save_path, global_step=step)

    def start_queue_runners(self, sess: Session, queue_runners: Any = None) -> list[Any]:
        """Starts the threads of ``queue_runners`` (default: the graph's
        ``QUEUE_RUNNERS``) on the supervisor's coordinator, as TF; returns them.
        ``prepare_or_wait_for_session`` (and ``managed_session``) call it with
        ``start_standard_services``. An error of a thread makes ``should_stop()`` True and
        is re-raised by :meth:`stop`."""
        if queue_runners is None:
            queue_runners = _ops.get_default_graph().get_collection(
                _ops.GraphKeys.QUEUE_RUNNERS)
        threads: list[Any] = []
        for qr in queue_runners:
            threads.extend(qr.create_threads(sess, coord=self._qr_coord, daemon=True,
                                             start=True))
        return threads

    def should_stop(self) -> bool:
        """True once ``request_stop`` or ``stop`` was called, or a queue runner thread
        stopped (its input ended or failed)."""
        return self._coord_stop.is_set() or self._qr_coord.should_stop()

    def request_stop(self, ex: BaseException | None = None) -> None:
        """Asks the training loop, the service and queue runner threads to stop; ``ex``
        (not OutOfRangeError) is re-raised by :meth:`stop`, as TF's coordinator."""
        self._coord_stop.set()
        self._qr_coord.request_stop(ex)

    def stop(self, threads: Any = None, close_summary_writer: bool = True,
             ignore_live_threads: bool = False) -> None:
        """Stops the services; beyond TF, the chief saves a final checkpoint (when it has a
        ``logdir``). Then, as TF, writes a ``SessionLog`` STOP to the summary writer and
        closes it (when ``close_summary_writer``). Idempotent: a second call does nothing.

        Raises:
            Exception: the error that stopped a service thread (e.g. a summary op that
                cannot run alone), as TF's coordinator re-raises it.
        """
        first = not self._stopped
        self._stop(close_summary_writer=close_summary_writer, final_save=True)
        # A worker task that stops its supervisor is done: ps tasks started with
        # PSRT_EXIT_WHEN_WORKERS_DONE (psrt-launch) end once every worker is, as with
        # managed_session and MonitoredTrainingSession.
        sess = self._sess
        if first and sess is not None and not sess._closed and \
                _is_worker_target(self._sess_master):
            try:
                sess._psrt_worker_done()
            except errors.OpError as e:
                _logger.warning("Could not tell the ps tasks this worker is done: %s", e)

    def _stop(self, close_summary_writer: bool, final_save: bool) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._coord_stop.set()
        for t in self._threads:
            t.join()
        self._threads = []
        try:
            self._qr_coord.request_stop()
            self._qr_coord.join(stop_grace_period_secs=self._stop_grace_secs,
                                ignore_live_threads=True)
        except Exception as e:  # noqa: BLE001 - re-raised below, as TF's coord.join
            if self._thread_error is None:
                self._thread_error = e
        if final_save and self._is_chief and self._sess is not None and \
                not self._sess._closed:
            try:
                self._save(self._sess)
            except errors.OpError as e:
                _logger.warning("Supervisor final checkpoint failed: %s", e)
        if close_summary_writer and self._summary_writer is not None:
            # No step: the session may be gone (TF's rule).
            self._summary_writer.add_session_log(_hooks._session_log("STOP"))
            self._summary_writer.close()
        if self._thread_error is not None:
            error, self._thread_error = self._thread_error, None
            raise error

    def summary_computed(self, sess: Session, summary: Any, global_step: Any = None) -> None:
        """Writes a summary the training loop computed, as TF's ``summary_computed``.

        Args:
            sess: The session, to read the global step when ``global_step`` is None.
            summary: ``sess.run(summary_op)``'s value (serialized Summary bytes) or a
                ``psrt.Summary``.
            global_step: The step to record (int); None: the current global step (when
                the supervisor has one).

        Raises:
            RuntimeError: the supervisor has no summary writer (a non-chief, or no
                ``logdir``).
        """
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = training_util.global_step(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config: Any = None,
                        start_standard_services: bool = True,
                        close_summary_writer: bool = True) -> Iterator[Session]:
        """A context manager yielding a prepared session and stopping the supervisor on
        exit (see :meth:`stop`; ``close_summary_writer`` is passed on); an OutOfRangeError
        inside ends it normally, as TF.

        The chief's final checkpoint is written only when the body ends cleanly (or with
        OutOfRangeError) or is interrupted (KeyboardInterrupt). When the body raises, e.g.
        a NaN check, no checkpoint is written on the way out, so the latest one stays the
        last good periodic save, as TF's ``managed_session`` (which never saves on exit;
        tensorflow/python/training/supervisor.py). The exception propagates."""
        sess = self.prepare_or_wait_for_session(master, config=config,
                                                start_standard_services=start_standard_services)
        failed = False
        try:
            yield sess
        except errors.OutOfRangeError:
            pass
        except Exception:
            failed = True
            raise
        finally:
            try:
                self._stop(close_summary_writer=close_summary_writer, final_save=not failed)
            finally:
                if _is_worker_target(master):
                    try:
                        sess._psrt_worker_done()
                    except errors.OpError:
                        pass
                sess.close()

    def loop(self, timer_interval_secs: float, target: Callable[..., Any],
             args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None
             ) -> threading.Thread:
        """Calls ``target`` every ``timer_interval_secs`` on a thread until stop."""
        def run() -> None:
            while not self._coord_stop.wait(timer_interval_secs):
                target(*(args or ()), **(kwargs or {}))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self._threads.append(t)
        return t


class _StepCounter:
    """The Supervisor's step counter thread (TF's ``SVStepCounterThread``): writes the
    global steps per second since the previous call as ``global_step/sec`` at the current
    step, and logs the first 10."""

    def __init__(self, sv: Supervisor, sess: Session) -> None:
        self._sv = sv
        self._sess = sess
        self._tag = f"{sv.global_step.name.split(':', 1)[0]}/sec"
        self._last_time = 0.0
        self._last_step = 0
        self._logged = 0

    def start(self) -> None:
        """Records the starting global step and time (as TF's SVStepCounterThread)."""
        self._last_time = time.monotonic()
        self._last_step = training_util.global_step(self._sess, self._sv.global_step)

    def run(self) -> None:
        """Writes ``global_step/sec`` since the last call to the summary writer (and logs it),
        as TF's SVStepCounterThread.run_loop."""
        step = training_util.global_step(self._sess, self._sv.global_step)
        now = time.monotonic()
        elapsed = now - self._last_time
        steps_per_sec = (step - self._last_step) / elapsed if elapsed > 0 else float("inf")
        self._last_step, self._last_time = step, now
        writer = self._sv.summary_writer
        if writer is not None:
            summary = _summary_ops.Summary
            writer.add_summary(summary(value=[summary.Value(
                tag=self._tag, simple_value=steps_per_sec)]), step)
        if self._logged < 10:
            self._logged += 1
            _logger.info("%s: %g", self._tag, steps_per_sec)
