"""SyncReplicasOptimizer and its hook, as tensorflow/python/training/sync_replicas_optimizer.py."""

from __future__ import annotations

import logging
import numbers
from typing import Any, Callable, Iterable

from psrt.framework import errors
from psrt.framework.ops import Operation
from psrt.framework.tensor import Tensor
from psrt.ops import variables as _variables
from psrt.ops.training_ops import SlotVariable, TrainOp
from psrt.ops.variables import Variable
from psrt.training import training_util
from psrt.training.moving_averages import ExponentialMovingAverage
from psrt.training.optimizer import Optimizer
from psrt.training.session_run_hook import SessionRunArgs, SessionRunHook

_logger = logging.getLogger("psrt")


def _replica_count(value: Any, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"SyncReplicasOptimizer: {what} must be an int >= 1; got {value!r}")
    if value < 1:
        raise ValueError(f"SyncReplicasOptimizer: {what} must be an int >= 1; got {value}")
    return int(value)


class SyncReplicasOptimizer(Optimizer):
    """Synchronous data-parallel training, as ``tf.train.SyncReplicasOptimizer``.

    Wraps ``opt``. At each step the gradients of ``replicas_to_aggregate`` (R) replicas are
    averaged per variable (the mean, not the sum, as TF's ``ConditionalAccumulator``; for
    :class:`IndexedSlices`, each row over the gradients that hold it, as TF's
    ``SparseConditionalAccumulator``) and applied once with ``opt``'s update, and the
    global step advances by one. A gradient computed at an older step than the variable's
    current one is stale and dropped. With
    ``total_num_replicas`` > R the extra workers are backups: each step takes the first R
    fresh gradients and later ones are dropped as stale. With ``total_num_replicas`` < R each
    worker computes ``ceil(R / total_num_replicas)`` gradients (one per run of the train op,
    on the same variable values) per step.

    How psrt does it: the ps task holding a variable collects the gradients, tagged with the
    step they were computed at, and applies their mean when R have arrived; the global step
    counts tagged increments the same way. There is no token queue and no chief queue
    runner, and no ``sync_rep_local_step`` variable: each session keeps its step. One run of
    the returned train op computes gradients at the session's step, pushes them, and (after
    a worker's last gradient of the step) waits until the step is complete and pulls the new
    values, in one parallel round trip. The wait is bounded by
    ``ConfigProto(sync_timeout_secs)`` (``operation_timeout_in_ms`` when set); past it the
    run raises DeadlineExceededError, naming the step, how many gradients are missing and the
    variable and ps task that waits for them. When a worker's MonitoredSession ends normally
    and too few workers remain to complete a step, the others' runs end with
    OutOfRangeError, which ends their ``with`` block normally.

    :meth:`get_chief_queue_runner`, :meth:`get_init_tokens_op` and the chief's part of
    :meth:`make_session_run_hook` have nothing to do in psrt; they return objects that do
    nothing when run or started, so TF code calling them works unchanged.

    ``variable_averages``: as TF, where the chief's queue runner updates the moving averages
    after each aggregated update, the chief's hook (``make_session_run_hook(is_chief=True)``,
    which MonitoredTrainingSession must be given, as TF) runs
    ``variable_averages.apply(variables_to_average)`` after each of the chief's runs whose
    global step shows a completed step: the averages see the values of that step (the
    chief's run ends only once its step is complete). The op is built in
    :meth:`apply_gradients`, so its shadow variables exist before a Saver is made.

    Example::

        opt = psrt.train.SyncReplicasOptimizer(
            psrt.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
            total_num_replicas=2)
        train_op = opt.minimize(loss_and_grads, global_step=global_step)
        hook = opt.make_session_run_hook(is_chief=(task_index == 0))
        with psrt.train.MonitoredTrainingSession(master=server.target,
                                                 is_chief=(task_index == 0),
                                                 hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run(train_op)

    Args:
        opt: The psrt :class:`Optimizer` whose update applies the averaged gradients (its
            kernel runs on the ps tasks).
        replicas_to_aggregate: R, the number of gradients averaged per variable and step
            (int >= 1).
        total_num_replicas: The number of workers running the train op (int >= 1); default
            R.
        variable_averages: A :class:`psrt.train.ExponentialMovingAverage` updated by the
            chief after each step, or None.
        variables_to_average: The variables it averages (default: the trainable ones, as
            ``ExponentialMovingAverage.apply(None)``).
        use_locking: Kept for TF's signature; ``opt``'s ``use_locking`` governs the update.
        name: Default "sync_replicas".

    Raises:
        TypeError: ``opt`` is not a psrt Optimizer, or is a SyncReplicasOptimizer;
            ``replicas_to_aggregate`` or ``total_num_replicas`` is not an int;
            ``variable_averages`` is not an ExponentialMovingAverage.
        ValueError: ``replicas_to_aggregate`` or ``total_num_replicas`` is < 1.
    """

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int,
                 total_num_replicas: int | None = None, variable_averages: Any = None,
                 variables_to_average: Any = None, use_locking: bool = False,
                 name: str = "sync_replicas") -> None:
        if not isinstance(opt, Optimizer) or isinstance(opt, SyncReplicasOptimizer):
            raise TypeError(f"SyncReplicasOptimizer wraps a psrt Optimizer (e.g. "
                            f"psrt.train.GradientDescentOptimizer); got {opt!r}")
        replicas = _replica_count(replicas_to_aggregate, "replicas_to_aggregate")
        total = replicas if total_num_replicas is None else _replica_count(
            total_num_replicas, "total_num_replicas")
        if variable_averages is not None:
            if not isinstance(variable_averages, ExponentialMovingAverage):
                raise TypeError(f"SyncReplicasOptimizer: variable_averages must be a "
                                f"psrt.train.ExponentialMovingAverage or None; got "
                                f"{variable_averages!r}")
        super().__init__(use_locking, name)
        _logger.info("SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
                     replicas, total)
        self._opt = opt
        self._replicas_to_aggregate = replicas
        self._total_num_replicas = total
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._gradients_applied = False
        self._global_step: Variable | None = None
        self._chief_queue_runner: _NoQueueRunner | None = None
        self._averages_op: Operation | None = None

    # The wrapped optimizer's kernel, learning rate and hyper-parameters are the update's.
    def _learning_rate_value(self, read: Callable[[Tensor], Any] | None = None) -> float:
        return self._opt._learning_rate_value(read)

    def _hyper(self) -> dict[str, float]:
        return self._opt._hyper()

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        """``opt.compute_gradients``: see :meth:`Optimizer.compute_gradients`."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]],
                        global_step: Variable | None = None,
                        name: str | None = None) -> TrainOp:
        """An op that runs one synchronous step of this worker, as TF's
        ``SyncReplicasOptimizer.apply_gradients``.

        Binds the variables to the wrapped optimizer (its kernel applies the averaged
        gradients on their ps tasks) and marks them and ``global_step`` as trained
        synchronously with ``(replicas_to_aggregate, total_num_replicas)``; sessions created
        afterwards register them so. Asynchronous train ops of the same variables then fail
        with FailedPreconditionError on the ps.

        Args:
            grads_and_vars: ``(gradient, variable)`` pairs, as for
                :meth:`Optimizer.apply_gradients` (from :meth:`compute_gradients`, numpy
                arrays, :class:`IndexedSlices`, feed names, or None to skip a variable).
            global_step: The int64 scalar global step; required (it tells stale gradients).
            name: Name of the returned op; default the optimizer's name.

        Returns:
            A :class:`TrainOp` whose ``Session.run`` value is the loss.

        Raises:
            ValueError: ``grads_and_vars`` is empty ("Must supply at least one variable"),
                ``global_step`` is None ("Global step is required to check staleness"), or a
                variable or the global step is already trained synchronously with other
                ``replicas_to_aggregate``/``total_num_replicas``; and the errors of
                :meth:`Optimizer.apply_gradients`.
            TypeError: ``global_step`` is not an int64 scalar Variable.
        """
        pairs = list(grads_and_vars)
        if not pairs:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        training_util.assert_global_step(global_step)
        train_op = self._opt.apply_gradients(pairs, global_step, name or self._name)
        sync = (self._replicas_to_aggregate, self._total_num_replicas)
        marked = list(train_op.variables) + [global_step]
        for p in marked:
            if p._sync is not None and p._sync != sync:
                what = (f"global step '{p.name}' is already advanced" if p is global_step else
                        f"variable '{p.name}' is already trained")
                raise ValueError(
                    f"{what} synchronously with replicas_to_aggregate={p._sync[0]}, "
                    f"total_num_replicas={p._sync[1]}; it cannot also be with "
                    f"replicas_to_aggregate={sync[0]}, total_num_replicas={sync[1]}")
        for p in marked:
            p._sync = sync
        train_op.sync = sync
        self._global_step = global_step
        self._chief_queue_runner = _NoQueueRunner(f"{self._name}/sync_token_q")
        # TF's initialization ops, for code that passes them to a Scaffold or Supervisor:
        # nothing to initialize in psrt (each session reads the global step itself).
        self.local_step_init_op = Operation("noop", name="sync_rep_local_step_init")
        self.chief_init_op = Operation("noop", name=f"{self._name}/chief_init")
        self.ready_for_local_init_op = _variables.report_uninitialized_variables(
            _variables.global_variables())
        if self._variable_averages is not None and self._averages_op is None:
            # TF: the chief's update runs variable_averages.apply(variables_to_average)
            # after the aggregated update; here the chief's hook runs this op.
            self._averages_op = self._variable_averages.apply(self._variables_to_average)
        self._gradients_applied = True
        return train_op

    def get_chief_queue_runner(self) -> _NoQueueRunner:
        """TF's chief queue runner, which psrt does not need (the ps tasks aggregate): an
        object with ``tf.train.QueueRunner``'s ``create_threads`` that starts no thread.

        Raises:
            ValueError: called before :meth:`apply_gradients` (TF's message).
        """
        if self._gradients_applied is False:
            raise ValueError("Should be called after apply_gradients().")
        assert self._chief_queue_runner is not None
        return self._chief_queue_runner

    def get_slot(self, *args: Any, **kwargs: Any) -> SlotVariable | None:
        """``opt.get_slot``: see :meth:`Optimizer.get_slot`."""
        return self._opt.get_slot(*args, **kwargs)

    def variables(self) -> list[SlotVariable]:
        """``opt.variables()``: the wrapped optimizer's slot variables."""
        return self._opt.variables()

    def get_slot_names(self, *args: Any, **kwargs: Any) -> list[str]:
        """``opt.get_slot_names()``."""
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens: int = -1) -> Operation:
        """TF's op filling the token queue, which psrt does not have: an op that does
        nothing when run (its ``Session.run`` value is None).

        Args:
            num_tokens: As TF: -1 (default) or at least ``replicas_to_aggregate -
                total_num_replicas``.

        Raises:
            ValueError: called before :meth:`apply_gradients`, or ``num_tokens`` too small
                (TF's messages).
        """
        if self._gradients_applied is False:
            raise ValueError(
                "get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens != -1 and num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} "
                             f"(given) vs {tokens_needed} (needed)")
        return Operation("noop", name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SessionRunHook:
        """A hook for ``MonitoredTrainingSession(hooks=...)``, as TF's. Its ``begin()``
        checks that :meth:`apply_gradients` ran and (chief) ``num_tokens``; it has no
        initialization, token or queue-runner work in psrt.

        Args:
            is_chief: Whether this worker is the chief.
            num_tokens: As :meth:`get_init_tokens_op`.
        """
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _NoQueueRunner:
    """What :meth:`SyncReplicasOptimizer.get_chief_queue_runner` returns: the interface of
    ``tf.train.QueueRunner`` with no queue and no op to run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue = None
        self.enqueue_ops: list[Any] = []
        self.close_op = None
        self.cancel_op = None
        self.queue_closed_exception_types = (errors.OutOfRangeError,)

    @property
    def exceptions_raised(self) -> list[BaseException]:
        """Always empty: no thread runs."""
        return []

    def create_threads(self, sess: Any, coord: Any = None, daemon: bool = False,
                       start: bool = False) -> list[Any]:
        """Starts nothing; returns []."""
        return []

    def __repr__(self) -> str:
        return f"<psrt no-op queue runner '{self.name}'>"


class _SyncReplicasOptimizerHook(SessionRunHook):
    """TF's ``_SyncReplicasOptimizerHook``: checks the optimizer in ``begin()``; nothing to
    run after the session is created (psrt has no local step, token queue or chief queue
    runner). On the chief of an optimizer with ``variable_averages`` it updates the moving
    averages after each run that completed a step (TF's chief queue runner does it after
    each aggregated update)."""

    def __init__(self, sync_optimizer: SyncReplicasOptimizer, is_chief: bool,
                 num_tokens: int) -> None:
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens
        self._averaged_step: int | None = None

    def _averages(self) -> tuple[Operation, Variable] | None:
        opt = self._sync_optimizer
        if not self._is_chief or opt._averages_op is None or opt._global_step is None:
            return None
        return opt._averages_op, opt._global_step

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Chief with moving averages: reads the global step the averages start from."""
        if self._averages() is not None:
            self._averaged_step = int(session.run(self._sync_optimizer._global_step))

    def before_run(self, run_context: Any) -> Any:
        """Chief with moving averages: fetches the global step with the run (from the push
        reply: no extra round trip)."""
        averages = self._averages()
        if averages is None:
            return None
        return SessionRunArgs(averages[1])

    def after_run(self, run_context: Any, run_values: Any) -> None:
        """Chief with moving averages: a run that completed a step (the global step moved)
        is followed by one run of the averages' update."""
        averages = self._averages()
        if averages is None or run_values.results is None:
            return
        step = int(run_values.results)
        if self._averaged_step is None or step > self._averaged_step:
            run_context.session.run(averages[0])
            self._averaged_step = step

    def begin(self) -> None:
        """Raises TF's ValueErrors: apply_gradients not called yet; (chief) too few
        tokens."""
        if self._sync_optimizer._gradients_applied is False:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before "
                             "using the hook.")
        if self._is_chief:
            self._sync_optimizer.get_chief_queue_runner()
            self._sync_optimizer.get_init_tokens_op(self._num_tokens)
