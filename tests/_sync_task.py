"""Helpers of tests/test_sync_cluster.py: a SyncReplicasOptimizer worker as a real
subprocess, its model, and the single-process numpy reference it must match.

Run as the child process (the ps tasks are tests/_mts_cluster.py's ``ps`` role)::

    python tests/_sync_task.py sync_worker CONFIG_JSON

The child reports events on stdout as tests/_mts_cluster.py's children do (``EVENT {...}``
lines, read by its ``Task``), and every warning of the ``psrt`` logger as a ``log`` event, so
a test can see that a worker logged its wait for missing gradients, and when.

The model: least squares ``y ~ x @ W + b`` (W [D, K] and b [K]) under
``replica_device_setter`` over two ps tasks (W on /job:ps/task:0, b on task 1, the global
step on task 0). Worker i owns a fixed sequence of ``L`` batches (its own data, other than
every other worker's) and trains on batch ``k % L`` when the global step is ``k``: in a run
where every step aggregates one gradient of each of two workers, step k applies the mean of
worker 0's and worker 1's gradients of batch ``k % L`` at the values after step k - 1, which
is exactly what :func:`reference` computes.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(__file__)

D, K = 6, 3     # W [D, K], b [K]
BATCH = 16      # rows per batch
L = 7           # batches per worker, cycled by global step
INIT_SEED = 17  # every worker's graph has the same initial values (only the chief's count)


def initial_values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(INIT_SEED)
    return {"W": rng.normal(size=(D, K)).astype(np.float32),
            "b": rng.normal(size=K).astype(np.float32)}


def batches(worker: int) -> tuple[np.ndarray, np.ndarray]:
    """Worker ``worker``'s fixed data: x [L, BATCH, D] and y [L, BATCH, K], float32."""
    true_w = np.random.default_rng(99).normal(size=(D, K))
    rng = np.random.default_rng(1000 + worker)
    x = rng.normal(size=(L, BATCH, D)).astype(np.float32)
    y = (x @ true_w + 0.5 + 0.1 * rng.normal(size=(L, BATCH, K))).astype(np.float32)
    return x, y


def loss_and_grads(W: np.ndarray, b: np.ndarray, x: np.ndarray,
                   y: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Mean squared error of ``x @ W + b`` against ``y`` and its float32 gradients."""
    err = x @ W + b - y
    n = np.float32(x.shape[0])
    return (float(np.mean(err * err)),
            [np.ascontiguousarray(np.float32(2) * (x.T @ err) / n, dtype=np.float32),
             np.ascontiguousarray(np.float32(2) * err.sum(axis=0) / n, dtype=np.float32)])


def reference(steps: int, optimizer: str, learning_rate: float,
              workers: tuple[int, ...] = (0, 1)) -> dict[str, np.ndarray]:
    """Synchronous training in one process: ``steps`` updates, step k applying the mean of
    the gradients of batch ``k % L`` of every worker in ``workers`` (float32, TF1's update
    formulas; Adagrad's accumulators start at 0.1).

    Returns:
        {"W", "b"} and, for Adagrad, {"W/Adagrad", "b/Adagrad"}.
    """
    data = [batches(w) for w in workers]
    params = initial_values()
    names = ("W", "b")
    accums = {n: np.full_like(params[n], 0.1) for n in names}
    lr = np.float32(learning_rate)
    for k in range(steps):
        grads = [loss_and_grads(params["W"], params["b"], x[k % L], y[k % L])[1]
                 for x, y in data]
        for i, n in enumerate(names):
            total = grads[0][i].copy()
            for g in grads[1:]:
                total += g[i]
            mean = total / np.float32(len(grads))
            if optimizer == "sgd":
                params[n] = params[n] - lr * mean
            elif optimizer == "adagrad":
                accums[n] = accums[n] + mean * mean
                params[n] = params[n] - lr * mean / np.sqrt(accums[n])
            else:
                raise ValueError(f"optimizer {optimizer!r}; expected 'sgd' or 'adagrad'")
    out = dict(params)
    if optimizer == "adagrad":
        out.update({f"{n}/Adagrad": accums[n] for n in names})
    return out


class SyncModel:
    """W, b and the global step under ``replica_device_setter``, trained by
    ``SyncReplicasOptimizer(inner, replicas_to_aggregate, total_num_replicas)``.

    The test process builds the same graph to read the variables back through a Session
    (the same declarations as the workers', so the ps tasks accept them).

    Attributes:
        W, b, global_step: The variables.
        inner: The wrapped optimizer (GradientDescent or Adagrad).
        opt: The SyncReplicasOptimizer.
        train_op: Its train op; feeds ``x`` and ``y`` (one batch).
    """

    def __init__(self, cluster: Any, task_index: int, replicas_to_aggregate: int,
                 total_num_replicas: int | None, optimizer: str = "sgd",
                 learning_rate: float = 0.1) -> None:
        import psrt  # noqa: PLC0415

        init = initial_values()
        with psrt.device(psrt.train.replica_device_setter(
                worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
            self.W = psrt.Variable(init["W"], name="W")
            self.b = psrt.Variable(init["b"], name="b")
            self.global_step = psrt.train.get_or_create_global_step()
        if optimizer == "sgd":
            self.inner = psrt.train.GradientDescentOptimizer(learning_rate)
        elif optimizer == "adagrad":
            self.inner = psrt.train.AdagradOptimizer(learning_rate)
        else:
            raise ValueError(f"optimizer {optimizer!r}; expected 'sgd' or 'adagrad'")
        self.opt = psrt.train.SyncReplicasOptimizer(
            self.inner, replicas_to_aggregate=replicas_to_aggregate,
            total_num_replicas=total_num_replicas)
        self.train_op = self.opt.minimize(loss_and_grads, var_list=[self.W, self.b],
                                          global_step=self.global_step)

    def state_fetches(self, optimizer: str) -> dict[str, Any]:
        fetches: dict[str, Any] = {"W": self.W, "b": self.b, "global_step": self.global_step}
        if optimizer == "adagrad":
            fetches["W/Adagrad"] = self.inner.get_slot(self.W, "accumulator")
            fetches["b/Adagrad"] = self.inner.get_slot(self.b, "accumulator")
        return fetches


# ---- the child side --------------------------------------------------------------------------

class _EventLogHandler(logging.Handler):
    """Reports every warning of the psrt logger as a ``log`` event."""

    def emit(self, record: logging.LogRecord) -> None:
        from _mts_cluster import emit  # noqa: PLC0415

        emit("log", level=record.levelname, logger=record.name, message=record.getMessage(),
             t=record.created)


def sync_worker_main(cfg: dict[str, Any]) -> None:
    """One worker of a SyncReplicasOptimizer job in a MonitoredTrainingSession loop::

        hooks = [opt.make_session_run_hook(is_chief), StopAtStepHook(last_step=N)]
        with MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks,
                                      config=ConfigProto(sync_timeout_secs=...)) as sess:
            while not sess.should_stop():
                _, step = sess.run([train_op, global_step], {"x": x[step % L], ...})

    Config keys: cluster, task_index, is_chief (default: task 0), replicas_to_aggregate,
    total_num_replicas, optimizer ("sgd" or "adagrad"), learning_rate, last_step or
    num_steps (a StopAtStepHook), sync_timeout_secs, step_sleep (seconds after each run),
    report_step (emit "reached" once the global step is >= it), checkpoint_dir (the
    session's; the chief restores from it and saves into it).

    Events: started, devices, session (the global step the session started at),
    first_step, reached, log (each psrt warning), out_of_range (a run raised
    OutOfRangeError, which ends the session normally: its message and the last global step
    this worker saw), error (another OpError ended the task: its class, message and the
    last global step this worker saw; exit status 1), done (runs, first and last global
    step, and the global step of every run).
    """
    import psrt  # noqa: PLC0415
    from _mts_cluster import emit  # noqa: PLC0415

    emit("started")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s:%(name)s:%(message)s")
    handler = _EventLogHandler(level=logging.WARNING)
    logging.getLogger("psrt").addHandler(handler)

    index = int(cfg["task_index"])
    is_chief = bool(cfg.get("is_chief", index == 0))
    cluster = psrt.train.ClusterSpec(cfg["cluster"])
    server = psrt.train.Server(cluster, job_name="worker", task_index=index)
    model = SyncModel(cluster, index, int(cfg["replicas_to_aggregate"]),
                      cfg.get("total_num_replicas"), cfg.get("optimizer", "sgd"),
                      float(cfg.get("learning_rate", 0.1)))
    gs = model.global_step
    emit("devices", W=model.W.device, b=model.b.device, global_step=gs.device)
    x, y = batches(index)
    step: int | None = None

    class Observer(psrt.train.SessionRunHook):
        def after_create_session(self, session: Any, coord: Any) -> None:
            nonlocal step
            step = int(session.run(gs))
            emit("session", step=step)

    hooks: list[Any] = [model.opt.make_session_run_hook(is_chief), Observer()]
    if cfg.get("last_step") is not None:
        hooks.append(psrt.train.StopAtStepHook(last_step=int(cfg["last_step"])))
    if cfg.get("num_steps") is not None:
        hooks.append(psrt.train.StopAtStepHook(num_steps=int(cfg["num_steps"])))
    config = psrt.ConfigProto(sync_timeout_secs=float(cfg.get("sync_timeout_secs", 30.0)),
                              connect_timeout_secs=30.0)
    runs, first = 0, None
    steps: list[int] = []
    report_step = cfg.get("report_step")
    step_sleep = float(cfg.get("step_sleep", 0.0))
    try:
        with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                                 checkpoint_dir=cfg.get("checkpoint_dir"),
                                                 hooks=hooks, config=config,
                                                 log_step_count_steps=None) as sess:
            while not sess.should_stop():
                assert step is not None
                k = step % L
                try:
                    _, step = sess.run([model.train_op, gs],
                                       feed_dict={"x": x[k], "y": y[k]})
                except psrt.errors.OutOfRangeError as e:  # ends the with block normally
                    emit("out_of_range", message=e.message, last=step, runs=runs)
                    raise
                runs += 1
                steps.append(step)
                if first is None:
                    first = step
                    emit("first_step", step=step)
                if report_step is not None and step >= report_step:
                    emit("reached", step=step)
                    report_step = None
                if step_sleep:
                    time.sleep(step_sleep)
    except psrt.errors.OpError as e:
        emit("error", type=type(e).__name__, message=e.message, last=step, runs=runs)
        server.stop()
        sys.exit(1)
    emit("done", runs=runs, first=first, last=step, steps=steps)
    server.stop()


if __name__ == "__main__":
    import faulthandler  # noqa: PLC0415
    import json  # noqa: PLC0415

    from _mts_cluster import _exit_with_parent  # noqa: PLC0415

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # stacks to stderr, for a hang
    _exit_with_parent()
    _role, _config = sys.argv[1], json.loads(sys.argv[2])
    {"sync_worker": sync_worker_main}[_role](_config)
