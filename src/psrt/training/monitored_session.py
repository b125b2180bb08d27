"""MonitoredTrainingSession, session creators, Scaffold, SessionManager and Supervisor, with
TF1's semantics (tensorflow/python/training/monitored_session.py, session_manager.py,
supervisor.py).

The chief initializes the variables or restores them from the latest checkpoint; the other
workers wait until the variables they use are initialized on the ps tasks; hooks stop and
save; and when a ps task is lost and comes back, ``run`` re-creates the session (the chief
restores the latest checkpoint) instead of surfacing AbortedError/UnavailableError. Beyond
TF, a corrupt latest checkpoint (a tensor's CRC-32C does not match, or the file is
truncated) is skipped for the newest intact one the ``checkpoint`` state file lists, with
a WARNING naming both: see :meth:`psrt.train.Saver.restore`.

Summaries, as TF: the chief of a MonitoredTrainingSession writes ``global_step/sec`` and the
graph's merged summaries (``psrt.summary.merge_all()``) to its summary directory; a
Supervisor's chief writes them from its summary thread, and ``summary_computed`` writes
summaries the training loop computed itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from psrt.checkpoint import saver as _checkpoint
from psrt.framework import errors
from psrt.ops import variables as _variables
from psrt.runtime import threads as _threads
from psrt.runtime.session import Session
from psrt.training import basic_session_run_hooks as _hooks
from psrt.training import training_util
from psrt.training.coordinator import Coordinator
from psrt.training.queue_runner import start_queue_runners

_logger = logging.getLogger("psrt")

# Errors after which the session is re-created, as TF's _PREEMPTION_ERRORS.
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

# Beyond TF: non-chief workers poll readiness this often (TF sleeps 30 s between checks).
_READY_POLL_SECS = 0.1


class _UseDefault:
    """The "argument not given" marker of MonitoredTrainingSession (TF's ``USE_DEFAULT``),
    shown as ``USE_DEFAULT`` in signatures and ``help()``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "USE_DEFAULT"

    def __reduce__(self) -> str:
        return "USE_DEFAULT"  # pickles (and copies) as this module's single instance


USE_DEFAULT = _UseDefault()


def _summary() -> Any:
    """The psrt.summary module (imported here on first use, like the hooks do)."""
    from psrt.ops import summary_ops as summary  # noqa: PLC0415

    return summary


def _first_of_collection(key: str, arg_name: str | None = None) -> Any:
    """The first item of collection ``key`` of the default graph, or None. With
    ``arg_name`` (a Scaffold field, TF's ``Scaffold.get_or_default``) more than one item is
    an error; without (TF's ``Supervisor._get_first_op_from_collection``) it is logged.

    Raises:
        RuntimeError: ``arg_name`` was given and the collection holds several items.
    """
    items = _variables.get_default_graph().get_collection(key)
    if len(items) > 1:
        if arg_name is not None:
            raise RuntimeError(f'More than one item in the collection "{key}". Please '
                               f'indicate which one to use by passing it to the Scaffold '
                               f'constructor as: Scaffold({arg_name}=item to use)')
        _logger.info("Found %d %s operations. Returning the first one.", len(items), key)
    return items[0] if items else None


class Scaffold:
    """What a training session needs besides the model: init op, ready op, summary op, saver,
    as TF's ``tf.train.Scaffold``. ``finalize()`` fills the defaults:
    ``global_variables_initializer()``, ``report_uninitialized_variables()``, the summary op
    of the ``SUMMARY_OP`` collection or else ``psrt.summary.merge_all()`` (None without
    summaries), and a :class:`psrt.train.Saver` of all global variables; then the graph is
    finalized (no new variables).

    Args:
        init_op: Op run by the chief when there is no checkpoint to restore.
        init_feed_dict: Unused by psrt's init ops; kept for TF's signature.
        init_fn: ``init_fn(scaffold, session)`` called after ``init_op``.
        ready_op: Op whose value lists the uninitialized variable names (empty: ready).
        ready_for_local_init_op: What ``local_init_op`` needs: an op listing the variables
            not yet initialized (default: every global variable's, as TF).
        local_init_op: Run in every new session (chief and others) once
            ``ready_for_local_init_op`` reports nothing, as TF (default None: psrt has no
            local variables or tables; e.g. a SyncReplicasOptimizer's ``chief_init_op``).
        summary_op: The summary op a MonitoredTrainingSession's ``SummarySaverHook`` writes;
            default as above.
        saver: A Saver; default: ``Saver(max_to_keep=5)`` over all global variables.
        copy_from_scaffold: Copy unset fields from this scaffold.
    """

    def __init__(self, init_op: Any = None, init_feed_dict: Any = None,
                 init_fn: Callable[[Any, Any], None] | None = None, ready_op: Any = None,
                 ready_for_local_init_op: Any = None, local_init_op: Any = None,
                 summary_op: Any = None, saver: Any = None,
                 copy_from_scaffold: "Scaffold | None" = None) -> None:
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            init_op = init_op or copy_from_scaffold.init_op
            init_fn = init_fn or copy_from_scaffold._user_init_fn
            ready_op = ready_op or copy_from_scaffold.ready_op
            saver = saver or copy_from_scaffold.saver
            summary_op = summary_op or copy_from_scaffold.summary_op
            local_init_op = local_init_op or copy_from_scaffold.local_init_op
            ready_for_local_init_op = (ready_for_local_init_op or
                                       copy_from_scaffold.ready_for_local_init_op)
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._summary_op = summary_op
        self._saver = saver

    def finalize(self) -> None:
        """Creates the default ops and saver for unset fields and finalizes the graph."""
        if self._init_op is None:
            self._init_op = _variables.global_variables_initializer()
        if self._ready_op is None:
            self._ready_op = _variables.report_uninitialized_variables()
        if self._ready_for_local_init_op is None and self._local_init_op is not None:
            self._ready_for_local_init_op = _variables.report_uninitialized_variables(
                _variables.global_variables())
        if self._summary_op is None:
            summary = _summary()
            self._summary_op = _first_of_collection(summary.SUMMARY_OP, "summary_op")
            if self._summary_op is None:
                self._summary_op = summary.merge_all()
                if self._summary_op is not None:
                    _variables.get_default_graph().add_to_collection(summary.SUMMARY_OP,
                                                                     self._summary_op)
        if self._saver is None:
            self._saver = _checkpoint.Saver(var_list=_variables.global_variables(),
                                            max_to_keep=5)
        _variables.get_default_graph().finalize()

    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    init_fn = property(lambda self: self._init_fn)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)


class SessionManager:
    """Creates sessions that are initialized, restored or waited for, as TF's
    ``tf.train.SessionManager``.

    Args:
        local_init_op: Op run in every new session once ``ready_for_local_init_op`` reports
            nothing (chief: after initializing or restoring; others: before the model is
            checked ready), as TF. None: nothing to run.
        ready_op: Op listing uninitialized variables (default: all global variables').
        ready_for_local_init_op: Op listing the variables ``local_init_op`` needs that are
            not initialized yet (None: it needs nothing).
        recovery_wait_secs: TF's poll interval while waiting for a checkpoint (seconds).
        local_init_feed_dict: ``feed_dict`` of the ``local_init_op`` run.
    """

    def __init__(self, local_init_op: Any = None, ready_op: Any = None,
                 ready_for_local_init_op: Any = None, graph: Any = None,
                 recovery_wait_secs: float = 30, local_init_run_options: Any = None,
                 local_init_feed_dict: Any = None) -> None:
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_feed_dict = local_init_feed_dict

    def _ready_op_or_default(self) -> Any:
        return self._ready_op or _variables.report_uninitialized_variables()

    def _restore_checkpoint(self, master: str, saver: Any, checkpoint_dir: str | None,
                            checkpoint_filename_with_path: str | None, wait_for_checkpoint: bool,
                            max_wait_secs: float, config: Any) -> tuple[Session, bool]:
        sess = Session(master, graph=self._graph, config=config)
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        deadline = time.monotonic() + max_wait_secs
        path = _checkpoint.latest_checkpoint(checkpoint_dir)
        while path is None and wait_for_checkpoint and time.monotonic() < deadline:
            time.sleep(min(self._recovery_wait_secs, max(0.0, deadline - time.monotonic())))
            path = _checkpoint.latest_checkpoint(checkpoint_dir)
        if path is None:
            return sess, False
        try:
            saver.restore(sess, path)
        except BaseException:
            sess.close()
            raise
        # As TF: the saver continues the kept-checkpoint list of the state file, so that
        # max_to_keep still deletes the checkpoints written before the restart.
        state = _checkpoint.get_checkpoint_state(checkpoint_dir)
        if state is not None and hasattr(saver, "recover_last_checkpoints"):
            saver.recover_last_checkpoints(list(state.all_model_checkpoint_paths))
        return sess, True

    def prepare_session(self, master: str, init_op: Any = None, saver: Any = None,
                        checkpoint_dir: str | None = None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config: Any = None,
                        init_feed_dict: Any = None, init_fn: Callable[[Any], None] | None = None,
                        checkpoint_filename_with_path: str | None = None) -> Session:
        """The chief's session: restored from the latest checkpoint in ``checkpoint_dir`` if
        there is one, else initialized with ``init_op`` and ``init_fn``, as TF.

        The restore goes through ``saver.restore``, so with a :class:`psrt.train.Saver` a
        corrupt latest checkpoint (DataLossError: a tensor's CRC-32C does not match, or the
        file is truncated) is replaced by the newest intact one that the state file lists
        before it, with a WARNING naming both; nothing corrupt is ever assigned.

        Raises:
            RuntimeError: "Init operations did not make model ready." listing the variables
                still uninitialized.
            psrt.errors.DataLossError: The checkpoint and every older one listed are
                corrupt (see :meth:`psrt.train.Saver.restore`).
        """
        sess, restored = self._restore_checkpoint(master, saver, checkpoint_dir,
                                                  checkpoint_filename_with_path,
                                                  wait_for_checkpoint, max_wait_secs, config)
        try:
            if not restored:
                if not init_op and not init_fn:
                    raise RuntimeError("Model is not initialized and no init_op or init_fn "
                                       "was given.")
                if init_op is not None:
                    sess.run(init_op, feed_dict=init_feed_dict)
                if init_fn:
                    init_fn(sess)
            not_ready = self._try_run_local_init_op(sess)
            if not_ready:
                raise RuntimeError(f"Init operations did not make model ready for local_init. "
                                   f"Init op: {getattr(init_op, 'name', init_op)}, init fn: "
                                   f"{init_fn}, error: {not_ready}")
            missing = self._uninitialized(sess)
            if missing:
                raise RuntimeError(f"Init operations did not make model ready.  Init op: "
                                   f"{getattr(init_op, 'name', init_op)}, init fn: {init_fn}, "
                                   f"error: Variables not initialized: {', '.join(missing)}")
        except BaseException:
            sess.close()
            raise
        return sess

    def _uninitialized(self, sess: Session, op: Any = None) -> list[str]:
        names = sess.run(op if op is not None else self._ready_op_or_default())
        return [n.decode() if isinstance(n, bytes) else str(n) for n in names]

    def _try_run_local_init_op(self, sess: Session) -> str | None:
        """Runs ``local_init_op`` if ``ready_for_local_init_op`` reports nothing, as TF's
        ``_try_run_local_init_op``; returns None when done (or nothing to run), else why
        not."""
        if self._local_init_op is None:
            return None
        if self._ready_for_local_init_op is not None:
            missing = self._uninitialized(sess, self._ready_for_local_init_op)
            if missing:
                return f"Variables not initialized: {', '.join(missing)}"
        sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict)
        return None

    def wait_for_session(self, master: str, config: Any = None,
                         max_wait_secs: float = float("inf")) -> Session:
        """A non-chief's session, once every variable is initialized on the ps tasks.

        Beyond TF: readiness is polled every 0.1 s on one session (TF closes the session and
        sleeps ``recovery_wait_secs``, 30 s, between checks), so a worker starts within a
        fraction of a second of the chief's initialization. Which variables are missing is
        logged (at most every 10 s).

        Raises:
            DeadlineExceededError: not ready within ``max_wait_secs``, listing the names of
                the variables never initialized.
        """
        start = time.monotonic()
        deadline = start + max_wait_secs
        sess = Session(master, graph=self._graph, config=config)
        next_log = start
        try:
            local_init_done = False
            while True:
                # As TF: local_init_op runs (once) when ready_for_local_init_op is, then the
                # model must be ready.
                not_ready_local = None if local_init_done else self._try_run_local_init_op(sess)
                local_init_done = not_ready_local is None
                missing = self._uninitialized(sess)
                if local_init_done and not missing:
                    return sess
                now = time.monotonic()
                if now >= deadline:
                    raise errors.DeadlineExceededError(
                        None, None, f"Session was not ready after waiting {max_wait_secs} "
                        f"secs; variables never initialized: "
                        f"{', '.join(missing) or not_ready_local}")
                if now >= next_log:
                    _logger.info("Waiting for model to be ready. Ready_for_local_init_op: "
                                 "%s, ready: Variables not initialized: %s", not_ready_local,
                                 ", ".join(missing))
                    next_log = now + 10.0
                time.sleep(min(_READY_POLL_SECS, max(0.0, deadline - now)))
        except BaseException:
            sess.close()
            raise


class SessionCreator:
    """Base class of session factories, as TF's."""

    def create_session(self) -> Session:
        """Returns a new :class:`psrt.Session`."""
        raise NotImplementedError


def _session_manager(scaffold: Scaffold) -> SessionManager:
    return SessionManager(ready_op=scaffold.ready_op, local_init_op=scaffold.local_init_op,
                          ready_for_local_init_op=scaffold.ready_for_local_init_op)


class ChiefSessionCreator(SessionCreator):
    """Creates the chief's session: restore the latest checkpoint of ``checkpoint_dir`` or
    initialize, as TF's ``ChiefSessionCreator``."""

    def __init__(self, scaffold: Scaffold | None = None, master: str = "", config: Any = None,
                 checkpoint_dir: str | None = None,
                 checkpoint_filename_with_path: str | None = None) -> None:
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Only one of checkpoint_dir or checkpoint_filename_with_path "
                             "can be specified.")
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self._finalized = False

    def create_session(self) -> Session:
        """Finalizes the scaffold once, then returns a restored or initialized session."""
        if not self._finalized:
            self._scaffold.finalize()
            self._finalized = True
        return _session_manager(self._scaffold).prepare_session(
            self._master, init_op=self._scaffold.init_op, saver=self._scaffold.saver,
            checkpoint_dir=self._checkpoint_dir, config=self._config,
            init_feed_dict=self._scaffold.init_feed_dict, init_fn=self._scaffold.init_fn,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path)


class WorkerSessionCreator(SessionCreator):
    """Creates a non-chief's session once the model is ready, as TF's
    ``WorkerSessionCreator`` (without its 30 s sleeps)."""

    def __init__(self, scaffold: Scaffold | None = None, master: str = "", config: Any = None,
                 max_wait_secs: float = 30 * 60) -> None:
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs
        self._finalized = False

    def create_session(self) -> Session:
        """Finalizes the scaffold once, then returns a session once the model is ready."""
        if not self._finalized:
            self._scaffold.finalize()
            self._finalized = True
        return _session_manager(self._scaffold).wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs)


class _StopRequested(Exception):
    pass


class StepContext:
    """What ``run_step_fn``'s function receives, as TF's ``MonitoredSession.StepContext``."""

    def __init__(self, session: Session, run_with_hooks_fn: Callable[..., Any]) -> None:
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self) -> Session:
        """The raw session (no hooks)."""
        return self._session

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any:
        """Runs like ``MonitoredSession.run``, with every hook's callbacks."""
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self) -> None:
        """Stops after this step; ``run_step_fn`` returns None."""
        raise _StopRequested()


class _MonitoredSession:
    """Shared machinery of MonitoredSession and SingularMonitoredSession."""

    def __init__(self, session_creator: SessionCreator, hooks: Sequence[Any] | None,
                 should_recover: bool, stop_grace_period_secs: float = 120,
                 worker_task: bool | None = None) -> None:
        self._hooks = list(hooks or [])
        for h in self._hooks:
            h.begin()
        self._creator = session_creator
        self._should_recover = should_recover
        self._stop_requested = False
        self._closed = False
        # Whether close() tells the ps tasks this worker finished: the session runs on a
        # worker task's server.target (default: read from the creator's master).
        self._worker_task = (_is_worker_target(getattr(session_creator, "_master", ""))
                             if worker_task is None else worker_task)
        self._sess: Session | None = None
        self._stop_grace_period_secs = stop_grace_period_secs
        self._coord = Coordinator()
        self._create()

    def _create(self) -> None:
        """Creates the raw session (re-trying after a preemption when recovering) and runs
        every hook's ``after_create_session``."""
        while True:
            try:
                self._sess = self._creator.create_session()
                # As TF's _CoordinatedSessionCreator: a new Coordinator per session, and the
                # graph's queue runners started on it before the hooks see the session.
                self._coord = Coordinator()
                start_queue_runners(self._sess, self._coord)
                for h in self._hooks:
                    h.after_create_session(self._sess, self._coord)
                return
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover or getattr(e, "task_unreachable", False):
                    raise
                _logger.info("An error was raised while a session was being created. This "
                             "may be due to a preemption of a connected worker or "
                             "parameter server. A new session will be created. Error: %s", e)
                self._close_raw()

    def _stop_threads(self) -> None:
        """Stops and joins the coordinator's threads (queue runners), as TF's
        ``_CoordinatedSession.close``; re-raises what a thread reported."""
        self._coord.request_stop()
        self._coord.join(stop_grace_period_secs=self._stop_grace_period_secs,
                         ignore_live_threads=True)

    def _close_raw(self) -> None:
        try:
            self._stop_threads()
        except Exception as e:  # noqa: BLE001 - the session is being replaced or closed
            _logger.info("A thread of the closed session failed: %s", e)
        if self._sess is not None:
            try:
                self._sess.close()
            except Exception:  # noqa: BLE001 - best effort on a broken session
                pass
            self._sess = None

    @property
    def graph(self) -> Any:
        """The :class:`psrt.Graph` the session runs (the default graph)."""
        return _variables.get_default_graph()

    def should_stop(self) -> bool:
        """True once a hook or a coordinated thread requested a stop (or ``close``/a stop
        step function)."""
        return self._stop_requested or self._closed or self._coord.should_stop()

    def run(self, fetches: Any, feed_dict: dict[Any, Any] | None = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Runs ``fetches`` with every hook's ``before_run``/``after_run``, as TF.

        Hooks' fetches are merged into the same ``Session.run`` (one round trip per step);
        a preemption (AbortedError/UnavailableError) re-creates the session and retries the
        step, when recovery is on.
        """
        if self._closed:
            raise RuntimeError("Run called even after should_stop requested.")
        while True:
            if self._sess is None:
                # Outside the try: _create() already retries what it can recover from, and
                # a ps task that never came back (UnavailableError after the connect
                # timeout) must surface here, not start another round of re-creation.
                self._create()
            try:
                return self._run_hooked(fetches, feed_dict)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                _logger.info("An error was raised. This may be due to a preemption in a "
                             "connected worker or parameter server, or to a restore of the "
                             "model by the chief. The current session will be closed and a "
                             "new session will be created. Error: %s", e)
                self._close_raw()

    def _run_hooked(self, fetches: Any, feed_dict: dict[Any, Any] | None) -> Any:
        context = _hooks.SessionRunContext(
            original_args=_hooks.SessionRunArgs(fetches, feed_dict), session=self._sess)
        hook_fetches: dict[int, Any] = {}
        feeds = dict(feed_dict or {})
        for i, h in enumerate(self._hooks):
            args = h.before_run(context)
            if args is None:
                continue
            if args.feed_dict:
                for k, v in args.feed_dict.items():
                    if k in feeds:
                        raise RuntimeError(f"Same tensor is fed by two hooks: {k}")
                    feeds[k] = v
            if args.fetches is not None:
                hook_fetches[i] = args.fetches
        results = self._sess.run({"caller": fetches, "hooks": hook_fetches},
                                 feed_dict=feeds)
        for i, h in enumerate(self._hooks):
            h.after_run(context, _hooks.SessionRunValues(
                results=results["hooks"].get(i), options=None, run_metadata=None))
        if context.stop_requested:
            self._stop_requested = True
        return results["caller"]

    def run_step_fn(self, step_fn: Callable[[StepContext], Any]) -> Any:
        """Calls ``step_fn(step_context)``, as TF; returns its value, or None when it called
        ``step_context.request_stop()``."""
        while True:
            if self._sess is None:
                self._create()
            try:
                return step_fn(StepContext(self._sess, self.run))
            except _StopRequested:
                self._stop_requested = True
                return None
            except _PREEMPTION_ERRORS:
                if not self._should_recover:
                    raise
                self._close_raw()

    def close(self) -> None:
        """Calls every hook's ``end`` and closes the session. Idempotent."""
        self._close_internal(None)

    def _close_internal(self, exception_type: type | None) -> None:
        if self._closed:
            return
        try:
            if exception_type is None and self._sess is not None:
                for h in self._hooks:
                    h.end(self._sess)
                if self._worker_task:
                    try:
                        self._sess._psrt_worker_done()
                    except errors.OpError as e:
                        _logger.warning("Could not tell the ps tasks this worker is done: %s", e)
            if exception_type is None:
                self._stop_threads()  # re-raises a queue runner's error, as TF
        finally:
            self._closed = True
            self._close_raw()

    def __enter__(self) -> "_MonitoredSession":
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> bool:
        if exc_type in (errors.OutOfRangeError, StopIteration):
            exc_type = None
        self._close_internal(exc_type)
        # An OutOfRangeError or StopIteration ends training normally, as in TF.
        return exc_type is None and exc is not None


class MonitoredSession(_MonitoredSession):
    """A session with hooks and recovery from preemptions, as ``tf.train.MonitoredSession``.

    Args:
        session_creator: A :class:`ChiefSessionCreator` (default) or
            :class:`WorkerSessionCreator`.
        hooks: :class:`psrt.train.SessionRunHook` objects.
        stop_grace_period_secs: Seconds the queue runner threads get to end on close.
    """

    def __init__(self, session_creator: SessionCreator | None = None,
                 hooks: Sequence[Any] | None = None, stop_grace_period_secs: float = 120) -> None:
        super().__init__(session_creator or ChiefSessionCreator(), hooks, should_recover=True,
                         stop_grace_period_secs=stop_grace_period_secs)


class SingularMonitoredSession(_MonitoredSession):
    """A chief-only monitored session without recovery, as TF's
    ``SingularMonitoredSession``; ``raw_session()`` returns the session without hooks."""

    def __init__(self, hooks: Sequence[Any] | None = None, scaffold: Scaffold | None = None,
                 master: str = "", config: Any = None, checkpoint_dir: str | None = None,
                 stop_grace_period_secs: float = 120,
                 checkpoint_filename_with_path: str | None = None) -> None:
        creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                      checkpoint_dir=checkpoint_dir,
                                      checkpoint_filename_with_path=checkpoint_filename_with_path)
        super().__init__(creator, hooks, should_recover=False,
                         stop_grace_period_secs=stop_grace_period_secs)

    def raw_session(self) -> Session:
        """The underlying :class:`psrt.Session`, without hooks."""
        return self._sess


def MonitoredTrainingSession(master: str = "", is_chief: bool = True,  # noqa: N802 - TF's name
                             checkpoint_dir: str | None = None, scaffold: Scaffold | None = None,
                             hooks: Sequence[Any] | None = None,
                             chief_only_hooks: Sequence[Any] | None = None,
                             save_checkpoint_secs: Any = USE_DEFAULT,
                             save_summaries_steps: Any = USE_DEFAULT,
                             save_summaries_secs: Any = USE_DEFAULT, config: Any = None,
                             stop_grace_period_secs: float = 120,
                             log_step_count_steps: int = 100, max_wait_secs: float = 7200,
                             save_checkpoint_steps: Any = USE_DEFAULT,
                             summary_dir: str | None = None,
                             save_graph_def: bool = True) -> MonitoredSession:
    """A :class:`MonitoredSession` for distributed training, as TF1's function.

    The chief restores the latest checkpoint in ``checkpoint_dir`` (global step, variables
    and optimizer slots) or initializes; beyond TF, when the latest checkpoint is corrupt
    (a tensor's CRC-32C does not match, or the file is truncated) it restores the newest
    intact one the ``checkpoint`` state file lists and logs a WARNING naming both, and only
    when none is intact does DataLossError surface (:meth:`psrt.train.Saver.restore`).

    The chief adds TF's default hooks: a ``StepCounterHook`` logging ``global_step/sec``
    every ``log_step_count_steps`` global steps (beyond TF, also without a summary
    directory: it then only logs) and writing it to the summary directory; with a summary
    directory (``summary_dir``, else ``checkpoint_dir``) a ``SummarySaverHook`` writing the
    scaffold's summary op (by default ``psrt.summary.merge_all()``: every summary op of the
    graph) every ``save_summaries_steps`` global steps (default 100) or
    ``save_summaries_secs``; with a ``checkpoint_dir`` a ``CheckpointSaverHook`` (every
    ``save_checkpoint_secs``, default 600 s, or ``save_checkpoint_steps``). Summaries are
    computed in the same run as the training step, so ``psrt.summary.scalar("loss",
    train_op)`` records the loss of the step at that global step. Other workers never
    initialize: they wait until the model is ready (polling every 0.1 s, up to
    ``max_wait_secs``), run only ``hooks`` and write no summaries. On the chief, hooks run
    in TF's order: ``chief_only_hooks``, the default hooks, then ``hooks``. A lost ps task
    that comes back is recovered from; see the module docstring.

    When the session closes normally, a worker tells the ps tasks it finished, so their
    ``Server.join(exit_when_workers_done=True)`` can return once every worker has.

    Args:
        master: ``server.target``.
        is_chief: Whether this task initializes, restores and saves.
        checkpoint_dir: Directory of checkpoints to restore from and save to.
        scaffold: A :class:`Scaffold`.
        hooks: Hooks for every worker.
        chief_only_hooks: Hooks for the chief only.
        save_checkpoint_secs: Seconds between saves. Not given (``USE_DEFAULT``): 600,
            unless ``save_checkpoint_steps`` is given. None or 0: not by time.
        save_summaries_steps: Global steps between summaries. Not given: 100, unless
            ``save_summaries_secs`` is given. None or 0: not by steps.
        save_summaries_secs: Seconds between summaries. Not given: none. When both are
            None (or 0) no summaries are written.
        config: A :class:`psrt.ConfigProto` (``connect_timeout_secs`` bounds how long the
            session waits for a lost ps task to come back before UnavailableError).
        stop_grace_period_secs: Seconds the queue runner threads get to end on close.
        log_step_count_steps: Steps between ``global_step/sec`` logs (None or 0: none).
        max_wait_secs: How long a non-chief waits for the model (seconds), then
            DeadlineExceededError naming the variables never initialized.
        save_checkpoint_steps: Global steps between saves. Not given: none (saves are by
            time). Given alone, it replaces the 600 s default; when both are given, only
            ``save_checkpoint_secs`` is used, as TF.
        summary_dir: Directory of the event files (default: ``checkpoint_dir``; neither:
            no summaries are written).
        save_graph_def: Accepted; psrt has no dataflow graph to save.

    Returns:
        A :class:`MonitoredSession` (a context manager).
    """
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    _threads.share_blas_threads(master)
    if not is_chief:
        creator = WorkerSessionCreator(scaffold=scaffold, master=master, config=config,
                                       max_wait_secs=max_wait_secs)
        return MonitoredSession(session_creator=creator, hooks=hooks or [],
                                stop_grace_period_secs=stop_grace_period_secs)
    # TF's order: chief-only hooks, the default hooks, then ``hooks``.
    all_hooks = list(chief_only_hooks or [])
    summary_dir = summary_dir or checkpoint_dir
    if log_step_count_steps and log_step_count_steps > 0:
        all_hooks.append(_hooks.StepCounterHook(output_dir=summary_dir,
                                                every_n_steps=log_step_count_steps))
    if summary_dir and ((save_summaries_steps and save_summaries_steps > 0) or
                        (save_summaries_secs and save_summaries_secs > 0)):
        all_hooks.append(_hooks.SummarySaverHook(
            scaffold=scaffold, save_steps=save_summaries_steps or None,
            save_secs=save_summaries_secs or None, output_dir=summary_dir))
    if checkpoint_dir and ((save_checkpoint_secs and save_checkpoint_secs > 0) or
                           (save_checkpoint_steps and save_checkpoint_steps > 0)):
        # As TF documents: when both are given, only save_checkpoint_secs is used.
        all_hooks.append(_hooks.CheckpointSaverHook(
            checkpoint_dir, save_secs=save_checkpoint_secs or None,
            save_steps=None if save_checkpoint_secs else save_checkpoint_steps,
            scaffold=scaffold))
    all_hooks.extend(hooks or [])
    creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                  checkpoint_dir=checkpoint_dir)
    return MonitoredSession(session_creator=creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs)


def _is_worker_target(master: str) -> bool:
    from psrt.runtime import server as _server  # noqa: PLC0415

    srv = _server._lookup_target(master) if master else None
    return srv is not None and srv.job_name in ("worker", "chief", "master")


# ---- Supervisor ---------------------------------------------------------------------------

class Supervisor:
    """The older training helper, as ``tf.train.Supervisor``: the chief initializes or
    restores from ``logdir``, saves a checkpoint every ``save_model_secs`` and computes the
    summaries every ``save_summaries_secs`` on threads; other tasks wait for the model.

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
            ``chief_init_op``, which do nothing in psrt). Default None: psrt has no local
            variables or tables to initialize.
        logdir: Checkpoint directory (None: no checkpoints). The chief restores its latest
            checkpoint, or, beyond TF, when that one is corrupt, the newest intact one the
            state file lists (see :meth:`psrt.train.Saver.restore`).
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
        self._local_init_op = None if local_init_op is Supervisor.USE_DEFAULT else local_init_op
        self._ready_for_local_init_op = (
            _variables.report_uninitialized_variables(_variables.global_variables())
            if ready_for_local_init_op is Supervisor.USE_DEFAULT else ready_for_local_init_op)
        if saver is Supervisor.USE_DEFAULT:
            saver = _checkpoint.Saver(var_list=_variables.global_variables(), max_to_keep=5) \
                if logdir else None
        self._saver = saver
        if summary_op is Supervisor.USE_DEFAULT:
            summary = _summary()
            summary_op = _first_of_collection(summary.SUMMARY_OP)
            if summary_op is None:
                summary_op = summary.merge_all()
                if summary_op is not None:
                    _variables.get_default_graph().add_to_collection(summary.SUMMARY_OP,
                                                                     summary_op)
        self._summary_op = summary_op
        self._global_step = (training_util.get_global_step() if global_step is
                             Supervisor.USE_DEFAULT else global_step)
        self._save_model_secs = save_model_secs
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        # As TF, only the chief computes and writes summaries.
        self._save_summaries_secs = save_summaries_secs if is_chief else None
        self._summary_writer = None
        if is_chief:
            if summary_writer is Supervisor.USE_DEFAULT:
                if logdir:
                    self._summary_writer = _summary().FileWriter(logdir)
            else:
                self._summary_writer = summary_writer
        if is_chief and logdir:
            # TF's chief creates logdir through its summary writer.
            os.makedirs(logdir, exist_ok=True)
        self._session_manager = session_manager or SessionManager(
            ready_op=self._ready_op, local_init_op=self._local_init_op,
            ready_for_local_init_op=self._ready_for_local_init_op)
        self._coord_stop = threading.Event()
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._thread_error: BaseException | None = None
        self._sess: Session | None = None
        self._sess_master = ""
        _variables.get_default_graph().finalize()

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
        return sess

    def start_standard_services(self, sess: Session) -> list[threading.Thread]:
        """Starts the chief's services, as TF: with a summary writer, a ``SessionLog`` START
        at the current step, then the summary thread (``summary_op`` at once and every
        ``save_summaries_secs``) and the step counter thread (``global_step/sec``, as
        often); and the checkpoint thread (every ``save_model_secs``). Without a ``logdir``
        nothing starts (TF's rule). Returns the threads started.

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
        while not self._coord_stop.wait(self._save_model_secs):
            try:
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
        """Accepted for TF compatibility: psrt has no queues, so nothing starts; returns []."""
        return []

    def should_stop(self) -> bool:
        """True once ``request_stop`` or ``stop`` was called."""
        return self._coord_stop.is_set()

    def request_stop(self, ex: BaseException | None = None) -> None:
        """Asks the training loop and the service threads to stop (``ex`` is ignored)."""
        self._coord_stop.set()

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
            summary = _summary().Summary
            writer.add_summary(summary(value=[summary.Value(
                tag=self._tag, simple_value=steps_per_sec)]), step)
        if self._logged < 10:
            self._logged += 1
            _logger.info("%s: %g", self._tag, steps_per_sec)
