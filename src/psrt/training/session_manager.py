"""SessionManager, as tensorflow/python/training/session_manager.py: the chief prepares a
session (restore or initialize), other workers wait until the model is ready."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from psrt.checkpoint import checkpoint_management as _checkpoint_management
from psrt.checkpoint.saver import Saver
from psrt.framework import errors
from psrt.ops import variables as _variables
from psrt.runtime.session import Session

_logger = logging.getLogger("psrt")

# Beyond TF: non-chief workers poll readiness this often (TF sleeps 30 s between checks).
_READY_POLL_SECS = 0.1


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
        # Beyond TF: set by a session creator re-creating its session after a preemption, so
        # that what the ps tasks still hold is kept (see prepare_session).
        self._psrt_recovering = False

    def _keeps_held_state(self, sess: Session) -> bool:
        """Whether ``sess`` keeps the variables its ps tasks still hold instead of TF's
        restore-everything: when re-created after a preemption, or when no earlier session of
        this process knew these ps tasks (a restarted chief)."""
        return self._psrt_recovering or not getattr(sess, "_psrt_ps_seen_before", True)

    def _ready_op_or_default(self) -> Any:
        return self._ready_op or _variables.report_uninitialized_variables()

    def _restore_checkpoint(self, master: str, saver: Any, checkpoint_dir: str | None,
                            checkpoint_filename_with_path: str | None, wait_for_checkpoint: bool,
                            max_wait_secs: float, config: Any) -> tuple[Session, bool]:
        sess = Session(master, graph=self._graph, config=config)
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            try:
                self._restore(sess, saver, checkpoint_filename_with_path)
            except BaseException:
                sess.close()
                raise
            return sess, True
        deadline = time.monotonic() + max_wait_secs
        path = _checkpoint_management.latest_checkpoint(checkpoint_dir)
        while path is None and wait_for_checkpoint and time.monotonic() < deadline:
            time.sleep(min(self._recovery_wait_secs, max(0.0, deadline - time.monotonic())))
            path = _checkpoint_management.latest_checkpoint(checkpoint_dir)
        if path is None:
            return sess, False
        try:
            self._restore(sess, saver, path)
        except BaseException:
            sess.close()
            raise
        # As TF: the saver continues the kept-checkpoint list of the state file, so that
        # max_to_keep still deletes the checkpoints written before the restart.
        state = _checkpoint_management.get_checkpoint_state(checkpoint_dir)
        if state is not None and hasattr(saver, "recover_last_checkpoints"):
            saver.recover_last_checkpoints(list(state.all_model_checkpoint_paths))
        return sess, True

    def _restore(self, sess: Session, saver: Any, path: str) -> None:
        if self._keeps_held_state(sess):
            self._restore_lost(sess, saver, path)
        else:
            saver.restore(sess, path)

    def _restore_lost(self, sess: Session, saver: Any, path: str) -> None:
        """Restores from ``path`` only the variables whose ps task lost them (uninitialized
        there: the task restarted), keeping every variable a ps task still holds.

        TF's SessionManager restores every variable whenever a checkpoint exists, so a chief
        restart, or a ps task lost while the others kept running, rolls the whole model back
        to the checkpoint. psrt's ps tasks keep their state across a chief restart and a
        healed partition, so what they hold is newer than any checkpoint: it is kept, and a
        restarted ps task's variables (with their optimizer slots) are the only ones
        restored. A saver that is not a :class:`psrt.train.Saver` restores everything, as TF.
        """
        missing = set(self._uninitialized(sess))
        pairs = None
        if isinstance(saver, Saver):
            saver.build()
            pairs = saver._pairs
        if pairs is None:
            saver.restore(sess, path)
            return
        lost = [(key, v) for key, v in pairs if _variable_names(v) & missing]
        if len(lost) == len(pairs):
            saver.restore(sess, path)
            return
        if not lost:
            _logger.info("Every ps task still holds its variables: keeping them, not restoring "
                         "the older checkpoint %s", path)
            return
        _logger.warning("Restoring %d of %d variables from %s, the ones whose ps task lost "
                        "them (%s); the others keep the newer values their ps tasks hold",
                        len(lost), len(pairs), path,
                        ", ".join(sorted(key for key, _ in lost)[:10]))
        Saver(var_list=dict(lost), reshape=saver._reshape).restore(sess, path)

    def prepare_session(self, master: str, init_op: Any = None, saver: Any = None,
                        checkpoint_dir: str | None = None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config: Any = None,
                        init_feed_dict: Any = None, init_fn: Callable[[Any], None] | None = None,
                        checkpoint_filename_with_path: str | None = None) -> Session:
        """The chief's session: restored from the latest checkpoint in ``checkpoint_dir`` if
        there is one, else initialized with ``init_op`` and ``init_fn``, as TF.

        Beyond TF, when the session is re-created after a preemption (a lost ps task, a
        partition: MonitoredSession's recovery) or no earlier session of this process knew
        these ps tasks (a restarted chief): a variable its ps task still holds (initialized
        there: the task did not restart) is kept, never rolled back to the checkpoint; only
        the variables of a ps task that lost them are restored (see ``_restore_lost``). With
        no checkpoint, a model its ps tasks hold whole is kept too (``init_op`` and
        ``init_fn`` do not run); a model partly lost is initialized with them, as TF. A
        further chief session of a process that already used these ps tasks restores (or
        initializes) everything, as TF.

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
            if (not restored and self._keeps_held_state(sess) and _variables.global_variables()
                    and not self._uninitialized(sess)):
                _logger.info("Every ps task still holds its variables: keeping them, not "
                             "running the init op")
                restored = True
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


def _variable_names(v: Any) -> set[str]:
    """The names report_uninitialized_variables gives ``v`` (each part of a partitioned
    variable)."""
    parts = v._get_variable_list() if hasattr(v, "_get_variable_list") else [v]
    return {getattr(p, "name", str(p)) for p in parts}
