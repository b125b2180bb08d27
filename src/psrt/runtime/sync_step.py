"""The waits of a synchronous training step (SyncReplicasOptimizer): how long a run waits
for the other replicas' gradients, the waits repeated until the step is complete on every
variable and the global step, and which replica a slow step waits for (for its log lines).

Each function takes the executor's host (the session: its client, config and handles).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

import numpy as np

from psrt.framework import errors
from psrt.ops.training_ops import TrainOp

_logger = logging.getLogger("psrt")

# How often a synchronous run that waits for other replicas logs a warning, in seconds (more
# often under a short sync timeout: a third of it, so that a run warns before it fails).
_SYNC_LOG_SECS = 10.0
# Longest single wait a synchronous run asks a ps task for; the run repeats shorter waits
# until its step completes or the sync timeout passes (the core allows at most 60 s).
_SYNC_WAIT_SECS = 1.0


class SyncState:
    """A synchronous train op's progress in one session: ``tag`` is the step its gradients
    are computed at (TF's ``sync_rep_local_step``), ``pushes`` how many it pushed at it."""

    __slots__ = ("op", "pushes", "tag")

    def __init__(self, op: TrainOp, tag: int) -> None:
        self.op = op
        self.tag = tag
        self.pushes = 0


def sync_timeout(host: Any) -> float:
    """Seconds a synchronous run waits for its step: the operation timeout when set,
    else ``ConfigProto.sync_timeout_secs``."""
    ms = host._config.operation_timeout_in_ms
    return ms / 1000.0 if ms > 0 else host._config.sync_timeout_secs


def wait_secs(host: Any, deadline: float, handles: list[int]) -> float:
    """``wait_secs`` of a round trip waiting on ``handles``, so that it takes at most
    _SYNC_WAIT_SECS, the time left, and half the operation timeout (which bounds each
    round trip). A ps task answers one connection's requests in order, so k waits on
    one task can take k times ``wait_secs``: it is divided by the largest k."""
    secs = min(_SYNC_WAIT_SECS, max(0.0, deadline - time.monotonic()))
    ms = host._config.operation_timeout_in_ms
    if ms > 0:
        secs = min(secs, ms / 2000.0)
    per_shard = collections.Counter(host._shard_of[h] for h in handles)
    return secs / max(per_shard.values(), default=1)


def wait_for_step(host: Any, tag: int, replicas: int, step_h: int, handles: list[int],
               outs: list[np.ndarray], needs: list[int],
               waits: list[tuple[bool, int, int]], gstep: tuple[bool, int, int],
               start: float, timeout: float
               ) -> tuple[list[tuple[bool, int, int]], tuple[bool, int, int]]:
    """Repeats the waits that were not ready (and the global step's) until all are;
    returns the final (ready, step, count) of each wait and of the global step.

    Raises:
        DeadlineExceededError: not ready ``timeout`` seconds after ``start``.
    """
    waits = list(waits)
    pending = [i for i, w in enumerate(waits) if not w[0]]
    log_every = min(_SYNC_LOG_SECS, timeout / 3)
    next_log = start + log_every
    while pending or not gstep[0]:
        now = time.monotonic()
        if now >= next_log or now >= start + timeout:
            name, shard, missing = laggard(
                    host,                 replicas, [(handles[i], waits[i]) for i in pending] +
                ([] if gstep[0] else [(step_h, gstep)]))
            lag = (f"step {tag}: waiting for {missing} more gradient(s) from {replicas} "
                   f"replicas for variable '{name}' on {shard}")
            if now >= start + timeout:
                setting = (f"operation_timeout_in_ms={host._config.operation_timeout_in_ms}"
                           if host._config.operation_timeout_in_ms > 0 else
                           f"sync_timeout_secs={host._config.sync_timeout_secs:g}")
                if gstep[0] and gstep[1] > tag:
                    # The step completed for the global step, not for this variable: the
                    # other replicas pushed no gradient for it.
                    hint = (f"The global step already advanced to {gstep[1]}: the other "
                            f"replicas' runs of step {tag} pushed no gradient for "
                            f"'{name}' (a None gradient on some replicas but not on "
                            f"others?)")
                else:
                    hint = f"Are {replicas} replicas running this train op?"
                raise errors.DeadlineExceededError(
                    None, None, f"{lag}; gave up after {now - start:.3g} s (ConfigProto "
                    f"{setting}). {hint}")
            _logger.warning("%s (%.0f s so far)", lag, now - start)
            next_log = now + log_every
        again_h = [handles[i] for i in pending]
        _, again, step_again = host._client.sync_step(
            [], [], [], [], [], None, tag, step_h if not gstep[0] else -1, False,
            again_h, [outs[i] for i in pending], [needs[i] for i in pending], tag + 1,
            wait_secs(host, start + timeout,
                                 again_h if gstep[0] else again_h + [step_h]))
        for i, w in zip(pending, again):
            waits[i] = w
        if not gstep[0]:
            gstep = step_again
        pending = [i for i in pending if not waits[i][0]]
    return waits, gstep


def laggard(host: Any, replicas: int, not_ready: list[tuple[int, tuple[bool, int, int]]]
                  ) -> tuple[str, str, int]:
    """(variable name, ps task, gradients still missing) of the first not-ready wait."""
    handle, (_, _, count) = not_ready[0]
    return (host._vars_by_handle[handle].name, host._shard_names[host._shard_of[handle]],
            replicas - count)
