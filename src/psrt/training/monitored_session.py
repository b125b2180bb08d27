"""MonitoredTrainingSession, session creators, Scaffold, SessionManager and Supervisor, with
TF1's semantics (tensorflow/python/training/monitored_session.py, session_manager.py,
supervisor.py).

The chief initializes the variables or restores them from the latest checkpoint; the other
workers wait until the variables they use are initialized on the ps tasks; hooks stop and
save; and when a ps task is lost and comes back, ``run`` re-creates the session instead of
surfacing AbortedError/UnavailableError. Beyond TF, the re-created chief session (and a
restarted chief's first one) restores from the latest checkpoint only the variables of the
ps tasks that lost them, keeping the newer values the others still hold (a healed
partition loses no step; TF restores everything): see
:meth:`psrt.train.SessionManager.prepare_session`. Beyond TF too, a corrupt latest checkpoint (a tensor's CRC-32C does not match, or the file is
truncated) is skipped for the newest intact one the ``checkpoint`` state file lists, with
a WARNING naming both: see :meth:`psrt.train.Saver.restore`.

Summaries, as TF: the chief of a MonitoredTrainingSession writes ``global_step/sec`` and the
graph's merged summaries (``psrt.summary.merge_all()``) to its summary directory; a
Supervisor's chief writes them from its summary thread, and ``summary_computed`` writes
summaries the training loop computed itself.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from psrt.checkpoint import saver as _checkpoint
from psrt.framework import errors
from psrt.framework import ops as _ops
from psrt.ops import local_variables as _local_variables
from psrt.ops import summary_ops as _summary_ops
from psrt.ops import variables as _variables
from psrt.runtime import targets as _targets
from psrt.runtime import threads as _threads
from psrt.runtime.session import Session
from psrt.training import basic_session_run_hooks as _hooks
from psrt.training import saver_hooks as _saver_hooks
from psrt.training import session_run_hook as _session_run_hook
from psrt.training.coordinator import Coordinator
from psrt.training.queue_runner import start_queue_runners
from psrt.training.session_manager import SessionManager

_logger = logging.getLogger("psrt")

# Errors after which the session is re-created, as TF's _PREEMPTION_ERRORS.
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)


class _UseDefault:
    """The "argument not given" marker of MonitoredTrainingSession (TF's ``USE_DEFAULT``),
    shown as ``USE_DEFAULT`` in signatures and ``help()``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "USE_DEFAULT"

    def __reduce__(self) -> str:
        return "USE_DEFAULT"  # pickles (and copies) as this module's single instance


USE_DEFAULT = _UseDefault()




def _first_of_collection(key: str, arg_name: str | None = None) -> Any:
    """The first item of collection ``key`` of the default graph, or None. With
    ``arg_name`` (a Scaffold field, TF's ``Scaffold.get_or_default``) more than one item is
    an error; without (TF's ``Supervisor._get_first_op_from_collection``) it is logged.

    Raises:
        RuntimeError: ``arg_name`` was given and the collection holds several items.
    """
    items = _ops.get_default_graph().get_collection(key)
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
            ``ready_for_local_init_op`` reports nothing, as TF (default:
            ``local_variables_initializer()`` when the graph has local variables, e.g.
            ``psrt.metrics``' accumulators, else None).
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
        if self._local_init_op is None:
            # TF's default_local_init_op: local_variables_initializer() (the input
            # pipelines' epoch counters and file lists); None without local variables.
            self._local_init_op = _first_of_collection(_ops.GraphKeys.LOCAL_INIT_OP,
                                                       "local_init_op")
            if self._local_init_op is None and _local_variables.local_variables():
                self._local_init_op = _local_variables.local_variables_initializer()
        if self._ready_for_local_init_op is None and self._local_init_op is not None:
            self._ready_for_local_init_op = _variables.report_uninitialized_variables(
                _variables.global_variables())
        if self._summary_op is None:
            summary = _summary_ops
            self._summary_op = _first_of_collection(summary.SUMMARY_OP, "summary_op")
            if self._summary_op is None:
                self._summary_op = summary.merge_all()
                if self._summary_op is not None:
                    _ops.get_default_graph().add_to_collection(summary.SUMMARY_OP,
                                                                     self._summary_op)
        if self._saver is None:
            self._saver = _checkpoint.Saver(var_list=_variables.global_variables(),
                                            max_to_keep=5)
        _ops.get_default_graph().finalize()

    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    init_fn = property(lambda self: self._init_fn)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)


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
        self._created = 0

    def create_session(self) -> Session:
        """Finalizes the scaffold once, then returns a restored or initialized session.

        Beyond TF, a session created again (MonitoredSession's recovery) keeps what the ps
        tasks still hold and restores only a lost task's variables
        (:meth:`SessionManager.prepare_session`)."""
        if not self._finalized:
            self._scaffold.finalize()
            self._finalized = True
        manager = _session_manager(self._scaffold)
        manager._psrt_recovering = self._created > 0
        self._created += 1
        return manager.prepare_session(
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
        return _ops.get_default_graph()

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
            except Exception:
                # As TF's _CoordinatedSession.run: the error a coordinated thread reported
                # (a queue runner's reader hit a corrupt record: DataLossError) is what the
                # loop sees, not the OutOfRangeError of the queue its stop closed.
                self._coord.raise_requested_exception()
                raise

    def _run_hooked(self, fetches: Any, feed_dict: dict[Any, Any] | None) -> Any:
        context = _session_run_hook.SessionRunContext(
            original_args=_session_run_hook.SessionRunArgs(fetches, feed_dict), session=self._sess)
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
            h.after_run(context, _session_run_hook.SessionRunValues(
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
        all_hooks.append(_saver_hooks.SummarySaverHook(
            scaffold=scaffold, save_steps=save_summaries_steps or None,
            save_secs=save_summaries_secs or None, output_dir=summary_dir))
    if checkpoint_dir and ((save_checkpoint_secs and save_checkpoint_secs > 0) or
                           (save_checkpoint_steps and save_checkpoint_steps > 0)):
        # As TF documents: when both are given, only save_checkpoint_secs is used.
        all_hooks.append(_saver_hooks.CheckpointSaverHook(
            checkpoint_dir, save_secs=save_checkpoint_secs or None,
            save_steps=None if save_checkpoint_secs else save_checkpoint_steps,
            scaffold=scaffold))
    all_hooks.extend(hooks or [])
    creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                  checkpoint_dir=checkpoint_dir)
    return MonitoredSession(session_creator=creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs)


def _is_worker_target(master: str) -> bool:
    srv = _targets.lookup(master) if master else None
    return srv is not None and srv.job_name in ("worker", "chief", "master")


# ---- Supervisor ---------------------------------------------------------------------------


