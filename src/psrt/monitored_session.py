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
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from psrt import checkpoint as _checkpoint
from psrt import errors
from psrt import hooks as _hooks
from psrt import variables as _variables
from psrt.session import ConfigProto, Session

_logger = logging.getLogger("psrt")

# Errors after which the session is re-created, as TF's _PREEMPTION_ERRORS.
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

# Beyond TF: non-chief workers poll readiness this often (TF sleeps 30 s between checks).
_READY_POLL_SECS = 0.1

USE_DEFAULT = object()


class Scaffold:
    """What a training session needs besides the model: init op, ready op, saver, as TF's
    ``tf.train.Scaffold``. ``finalize()`` fills the defaults: ``global_variables_initializer()``,
    ``report_uninitialized_variables()`` and a :class:`psrt.train.Saver` of all global
    variables; then the graph is finalized (no new variables).

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
        summary_op: Accepted; psrt writes no summaries.
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


class _Coordinator:
    """The ``coord`` hooks receive in ``after_create_session``: the stop part of TF's
    ``tf.train.Coordinator`` (psrt starts no threads to join)."""

    def __init__(self, monitored: "_MonitoredSession") -> None:
        self._monitored = monitored

    def request_stop(self, ex: BaseException | None = None) -> None:
        """Makes the monitored session's ``should_stop()`` True."""
        self._monitored._stop_requested = True

    def should_stop(self) -> bool:
        """The monitored session's ``should_stop()``, as TF's ``StepContext``."""
        return self._monitored.should_stop()


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
        self._coord = _Coordinator(self)
        self._create()

    def _create(self) -> None:
        """Creates the raw session (re-trying after a preemption when recovering) and runs
        every hook's ``after_create_session``."""
        while True:
            try:
                self._sess = self._creator.create_session()
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

    def _close_raw(self) -> None:
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
        """True once a hook requested a stop (or ``close``/a stop step function)."""
        return self._stop_requested or self._closed

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
        stop_grace_period_secs: Accepted; psrt starts no threads to wait for.
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
    when none is intact does DataLossError surface (:meth:`psrt.train.Saver.restore`). The
    chief adds a ``StepCounterHook`` (every ``log_step_count_steps``) and, with a
    ``checkpoint_dir``, a ``CheckpointSaverHook`` (every ``save_checkpoint_secs``, default
    600 s, or ``save_checkpoint_steps``). Other workers never initialize: they wait until
    the model is ready (polling every 0.1 s, up to ``max_wait_secs``) and run only
    ``hooks``. On the chief, hooks run in TF's order: ``chief_only_hooks``, the default
    hooks, then ``hooks``. A lost ps task that comes back is recovered from; see the module
    docstring. psrt writes no summaries: ``save_summaries_*`` and ``summary_dir`` are
    accepted and unused.

    When the session closes normally, a worker tells the ps tasks it finished, so their
    ``Server.join(exit_when_workers_done=True)`` can return once every worker has.

    Args:
        master: ``server.target``.
        is_chief: Whether this task initializes, restores and saves.
        checkpoint_dir: Directory of checkpoints to restore from and save to.
        scaffold: A :class:`Scaffold`.
        hooks: Hooks for every worker.
        chief_only_hooks: Hooks for the chief only.
        save_checkpoint_secs: Seconds between saves (default 600; None: not by time).
        save_checkpoint_steps: Global steps between saves (default: by time).
        config: A :class:`psrt.ConfigProto` (``connect_timeout_secs`` bounds how long the
            session waits for a lost ps task to come back before UnavailableError).
        log_step_count_steps: Steps between ``global_step/sec`` logs (None or 0: none).
        max_wait_secs: How long a non-chief waits for the model (seconds), then
            DeadlineExceededError naming the variables never initialized.

    Returns:
        A :class:`MonitoredSession` (a context manager).
    """
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator = WorkerSessionCreator(scaffold=scaffold, master=master, config=config,
                                       max_wait_secs=max_wait_secs)
        return MonitoredSession(session_creator=creator, hooks=hooks or [],
                                stop_grace_period_secs=stop_grace_period_secs)
    # TF's order: chief-only hooks, the default hooks, then ``hooks``.
    all_hooks = list(chief_only_hooks or [])
    if log_step_count_steps and log_step_count_steps > 0:
        all_hooks.append(_hooks.StepCounterHook(output_dir=summary_dir,
                                                every_n_steps=log_step_count_steps))
    if checkpoint_dir and ((save_checkpoint_secs and save_checkpoint_secs > 0) or
                           (save_checkpoint_steps and save_checkpoint_steps > 0)):
        all_hooks.append(_hooks.CheckpointSaverHook(
            checkpoint_dir, save_steps=save_checkpoint_steps, save_secs=save_checkpoint_secs,
            scaffold=scaffold))
    all_hooks.extend(hooks or [])
    creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                  checkpoint_dir=checkpoint_dir)
    return MonitoredSession(session_creator=creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs)


def _is_worker_target(master: str) -> bool:
    from psrt import server as _server  # noqa: PLC0415

    srv = _server._lookup_target(master) if master else None
    return srv is not None and srv.job_name in ("worker", "chief", "master")


# ---- Supervisor ---------------------------------------------------------------------------

class Supervisor:
    """The older training helper, as ``tf.train.Supervisor``: the chief initializes or
    restores from ``logdir`` and saves a checkpoint every ``save_model_secs`` on a thread;
    other tasks wait for the model.

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
        summary_op, summary_writer, save_summaries_secs: Accepted; psrt writes no summaries.
        saver: Default ``Saver(max_to_keep=5)`` of all global variables (when ``logdir``).
        global_step: Default the graph's global step.
        save_model_secs: Seconds between checkpoints (0: none).
        recovery_wait_secs: Accepted (readiness is polled every 0.1 s).
        checkpoint_basename: Default "model.ckpt".
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
        self._global_step = (_variables.get_global_step() if global_step is
                             Supervisor.USE_DEFAULT else global_step)
        self._save_model_secs = save_model_secs
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        if is_chief and logdir:
            # TF's chief creates logdir through its summary writer.
            os.makedirs(logdir, exist_ok=True)
        self._session_manager = session_manager or SessionManager(
            ready_op=self._ready_op, local_init_op=self._local_init_op,
            ready_for_local_init_op=self._ready_for_local_init_op)
        self._coord_stop = threading.Event()
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._sess: Session | None = None
        _variables.get_default_graph().finalize()

    is_chief = property(lambda self: self._is_chief)
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
        """The chief's initialized or restored session (and its checkpoint thread), or a
        non-chief's session once the model is ready, as TF."""
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
        """Starts the checkpoint thread (every ``save_model_secs``) on the chief."""
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. Because "
                               "only chief supervisors can write events.")
        if self._saver is not None and self._save_model_secs and self._save_model_secs > 0:
            t = threading.Thread(target=self._checkpoint_loop, args=(sess,),
                                 name="psrt-supervisor-checkpoint", daemon=True)
            t.start()
            self._threads.append(t)
        return list(self._threads)

    def _checkpoint_loop(self, sess: Session) -> None:
        while not self._coord_stop.wait(self._save_model_secs):
            try:
                self._save(sess)
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
        ``logdir``). Idempotent: a second call saves nothing more."""
        if self._stopped:
            return
        self._stopped = True
        self._coord_stop.set()
        for t in self._threads:
            t.join()
        self._threads = []
        if self._is_chief and self._sess is not None and not self._sess._closed:
            try:
                self._save(self._sess)
            except errors.OpError as e:
                _logger.warning("Supervisor final checkpoint failed: %s", e)

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config: Any = None,
                        start_standard_services: bool = True,
                        close_summary_writer: bool = True) -> Iterator[Session]:
        """A context manager yielding a prepared session and stopping the supervisor on
        exit; an OutOfRangeError inside ends it normally, as TF."""
        self._stopped = False
        sess = self.prepare_or_wait_for_session(master, config=config,
                                                start_standard_services=start_standard_services)
        try:
            yield sess
        except errors.OutOfRangeError:
            pass
        finally:
            self.stop()
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
