"""The tasks of the replication chaos runs (tests/test_replication_chaos.py and
benchmarks/replication_chaos.py): ps tasks that a driver kills with SIGKILL and restarts on
the same port, workers training a model whose exact final value is known, and a reader.

    python tests/_replica_task.py ps CONFIG_JSON
    python tests/_replica_task.py worker CONFIG_JSON
    python tests/_replica_task.py reader CONFIG_JSON

The model: ``loss = sum(w0) + sum(w1)`` (+ ``sum(rows)`` of a dynamic embedding table's
lookup of :data:`IDS` in mode "table"), GradientDescent with learning rate 1 and
``use_locking=True`` (Hogwild races would lose updates without any kill), so every
applied step subtracts exactly 1.0 from every element of w0 and w1 (and, per occurrence of
its id in :data:`IDS`, from every element of a table row); in mode "sync" SyncReplicasOptimizer
over both workers, whose step applies the mean, 1.0 again. So after the job
``w0 == w1 == -global_step`` exactly, and a table row of id ``i`` holds
``-IDS.count(i) * global_step``: an update lost or applied twice shows.

Children report as tests/_mts_cluster.py's do (``EVENT {...}`` lines) and exit with their
parent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from _mts_cluster import _exit_with_parent, emit  # noqa: E402

DIM = 4
IDS = [3, 5, 5, 11]   # the table rows a step looks up (5 twice: duplicates are summed)


def build(cluster: Any, mode: str) -> dict[str, Any]:
    """The model's graph under replica_device_setter: the global step on ps task 0, w0 on
    task 1, w1 on task 0 (round robin), the table's two shards on both."""
    import psrt as tf  # noqa: PLC0415
    from psrt import dynamic_embedding as de  # noqa: PLC0415

    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        gs = tf.train.get_or_create_global_step()
        w0 = tf.get_variable("w0", [DIM], initializer=tf.zeros_initializer())
        w1 = tf.get_variable("w1", [DIM], initializer=tf.zeros_initializer())
        loss = tf.reduce_sum(w0) + tf.reduce_sum(w1)
        out: dict[str, Any] = {"global_step": gs, "w0": w0, "w1": w1}
        if mode == "table":
            table = de.get_variable("emb", dim=DIM, num_shards=2)
            ids = tf.placeholder(tf.int64, [None], name="ids")
            rows = de.embedding_lookup(table, ids)
            loss = loss + tf.reduce_sum(rows)
            out["ids"] = ids
            out["rows"] = rows
        # use_locking: two workers' Hogwild updates of one variable race on its ps task (a
        # read-modify-write each), which loses one now and then with or without replication,
        # as in TF1; serialized, every applied step counts exactly.
        opt = tf.train.GradientDescentOptimizer(1.0, use_locking=True)
        if mode == "sync":
            opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2,
                                                 total_num_replicas=2)
            out["sync_opt"] = opt
        out["train_op"] = opt.minimize(loss, global_step=gs)
    return out


def ps_main(cfg: dict[str, Any]) -> None:
    """A ps task on the port the config names (a restart binds the same one)."""
    import psrt  # noqa: PLC0415

    server = psrt.train.Server(cfg["cluster"], job_name="ps", task_index=cfg["task_index"])
    emit("ready", port=server.port)
    server.join()


def worker_main(cfg: dict[str, Any]) -> None:
    """Trains until the global step reaches the one the driver writes into ``stop_file``;
    reports each created session and,
    at the end, its runs and the wall-clock time after each run (for the stalls)."""
    import psrt  # noqa: PLC0415

    index = int(cfg["task_index"])
    mode = cfg.get("mode", "async")
    cluster = psrt.train.ClusterSpec(cfg["cluster"])
    server = psrt.train.Server(cluster, job_name="worker", task_index=index)
    m = build(cluster, mode)
    sessions = []

    class Observer(psrt.train.SessionRunHook):
        def after_create_session(self, session: Any, coord: Any) -> None:
            sessions.append(time.time())
            emit("session", n=len(sessions))

    stop_file = cfg["stop_file"]

    class StopFile(psrt.train.SessionRunHook):
        """Stops at the global step the driver writes into ``stop_file`` (every worker at
        the same one), as StopAtStepHook(last_step=...) once it is known."""

        def __init__(self) -> None:
            self.last: int | None = None

        def before_run(self, run_context: Any) -> Any:
            if self.last is None and os.path.exists(stop_file):
                with open(stop_file) as f:
                    self.last = int(f.read())
            return psrt.train.SessionRunArgs(m["global_step"])

        def after_run(self, run_context: Any, run_values: Any) -> None:
            if self.last is not None and run_values.results >= self.last:
                run_context.request_stop()

    hooks: list[Any] = [Observer(), StopFile()]
    if mode == "sync":
        hooks.append(m["sync_opt"].make_session_run_hook(index == 0))
    config = psrt.ConfigProto(
        heartbeat_timeout_secs=float(cfg.get("heartbeat_timeout_secs", 2.0)),
        connect_timeout_secs=60.0)
    feed = {m["ids"]: np.array(IDS, np.int64)} if "ids" in m else None
    times: list[float] = []
    runs = 0
    step_sleep = float(cfg.get("step_sleep", 0.0))
    report_every = int(cfg.get("report_every", 100))
    try:
        with psrt.train.MonitoredTrainingSession(
                master=server.target, is_chief=index == 0, hooks=hooks, config=config,
                max_wait_secs=120) as sess:
            while not sess.should_stop():
                _, step = sess.run([m["train_op"], m["global_step"]], feed_dict=feed)
                runs += 1
                times.append(round(time.time(), 4))
                if runs % report_every == 0:
                    emit("step", step=int(step))
                if step_sleep:
                    time.sleep(step_sleep)
    except psrt.errors.OpError as e:
        emit("error", type=type(e).__name__, message=e.message)
        server.stop()
        sys.exit(1)
    emit("done", runs=runs, sessions=len(sessions), times=times)
    server.stop()


def reader_main(cfg: dict[str, Any]) -> None:
    """Reads the model once every worker finished: the global step, w0, w1 (and the table's
    rows of IDS)."""
    import psrt  # noqa: PLC0415

    cluster = psrt.train.ClusterSpec(cfg["cluster"])
    server = psrt.train.Server(cluster, job_name="worker", task_index=0)
    mode = cfg.get("mode", "async")
    m = build(cluster, mode)
    fetches = {k: m[k] for k in ("global_step", "w0", "w1")}
    feed = None
    if mode == "table":
        fetches["rows"] = m["rows"]
        feed = {m["ids"]: np.array(sorted(set(IDS)), np.int64)}
    with psrt.Session(server.target) as sess:
        values = sess.run(fetches, feed_dict=feed)
    emit("values", **{k: np.asarray(v).tolist() for k, v in values.items()})
    server.stop()


def memory_main(cfg: dict[str, Any]) -> None:
    """Registers two Adagrad variables of ``elements`` float32 each (w0 on ps task 1, w1 on
    task 0), trains 3 steps, reports "trained" and waits until ``release_file`` exists (the
    driver reads the ps tasks' memory meanwhile)."""
    import psrt as tf  # noqa: PLC0415

    cluster = tf.train.ClusterSpec(cfg["cluster"])
    server = tf.train.Server(cluster, job_name="worker", task_index=0)
    n = int(cfg["elements"])
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        gs = tf.train.get_or_create_global_step()
        w0 = tf.get_variable("w0", [n], initializer=tf.zeros_initializer())
        w1 = tf.get_variable("w1", [n], initializer=tf.zeros_initializer())
        train_op = tf.train.AdagradOptimizer(0.1).minimize(
            tf.reduce_sum(w0) + tf.reduce_sum(w1), global_step=gs)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
        for _ in range(3):
            sess.run(train_op)
        emit("trained", step=int(sess.run(gs)))
        while not os.path.exists(cfg["release_file"]):
            time.sleep(0.05)
    server.stop()


if __name__ == "__main__":
    _exit_with_parent()
    role, config_json = sys.argv[1], sys.argv[2]
    {"ps": ps_main, "worker": worker_main, "reader": reader_main,
     "memory": memory_main}[role](json.loads(config_json))
