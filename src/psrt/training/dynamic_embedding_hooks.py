"""EvictionHook: evicts rows of dynamic embedding tables as training goes on
(psrt.dynamic_embedding.EvictionHook)."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from psrt.ops.dynamic_embedding import DynamicEmbeddingVariable
from psrt.training.session_run_hook import SessionRunArgs, SessionRunHook
from psrt.training.training_util import get_global_step

_logger = logging.getLogger("psrt")


class EvictionHook(SessionRunHook):
    """Evicts rows of dynamic tables every ``every_n_steps`` global steps, on the chief
    (a ``MonitoredTrainingSession`` chief hook): :meth:`DynamicEmbeddingVariable.evict` with
    ``unseen_steps`` and ``min_count``. The number removed is logged at INFO.

    Args:
        tables: DynamicEmbeddingVariables.
        every_n_steps: Global steps between evictions (int >= 1).
        unseen_steps, min_count: The rules (0: off); at least one must be on.

    Raises:
        ValueError: bad counts, or both rules off.
    """

    def __init__(self, tables: Sequence[DynamicEmbeddingVariable], every_n_steps: int,
                 unseen_steps: int = 0, min_count: int = 0) -> None:
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1; got {every_n_steps}")
        if unseen_steps < 0 or min_count < 0 or (unseen_steps == 0 and min_count == 0):
            raise ValueError(f"unseen_steps {unseen_steps} and min_count {min_count}: both "
                             f">= 0 and at least one > 0")
        self._tables = list(tables)
        for t in self._tables:
            if not isinstance(t, DynamicEmbeddingVariable):
                raise TypeError(f"EvictionHook evicts psrt.dynamic_embedding tables; got {t!r}")
        self._every = int(every_n_steps)
        self._unseen = int(unseen_steps)
        self._min_count = int(min_count)
        self._last = None
        self._global_step = None
        self.evicted = 0

    def begin(self) -> None:
        """Finds the global step (RuntimeError without one, as TF's step-based hooks)."""
        self._global_step = get_global_step()
        if self._global_step is None:
            raise RuntimeError("Global step should be created to use EvictionHook.")

    def before_run(self, run_context: Any) -> Any:
        """Fetches the global step with the run."""
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        """Evicts once ``every_n_steps`` global steps have passed since the last time."""
        step = int(run_values.results)
        if self._last is None:
            self._last = step
            return
        if step - self._last < self._every:
            return
        self._last = step
        for t in self._tables:
            n = t.evict(run_context.session, self._unseen, self._min_count)
            self.evicted += n
            _logger.info("evicted %d rows of '%s' at step %d", n, t.name, step)
