"""Checkpoints across ps replication (issue 23, docs/replication.md "Checkpoints"): a job with
``ps_replicas=2`` saves a checkpoint that restores into an unreplicated job with another
number of ps tasks, and that job's checkpoint restores into a replicated job again, where
every replica of each shard holds the restored values (read over a plain client, each ps
task's own view). ps and worker servers run in this process, over real TCP.

The model trains GradientDescent at learning rate 0.5 on ``sum(w0) + sum(w1)``, so after
``n`` global steps every element of w0 and w1 is exactly ``-0.5 n``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import psrt
from psrt import _core
from replica_chaos import free_ports

LR = 0.5


def _job(num_ps: int, replicas: int) -> tuple[dict[str, list[str]], list[Any], Any, Any]:
    """(cluster, ps servers, worker server, config) on ports the OS hands out."""
    ports = free_ports(num_ps + 1)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[:num_ps]],
               "worker": [f"127.0.0.1:{ports[-1]}"]}
    config = psrt.ConfigProto(ps_replicas=replicas)
    ps = [psrt.train.Server(cluster, job_name="ps", task_index=i, config=config)
          for i in range(num_ps)]
    worker = psrt.train.Server(cluster, job_name="worker", task_index=0, config=config)
    return cluster, ps, worker, config


def _train(num_ps: int, replicas: int, ckpt: str, last_step: int,
           check: Any = None) -> dict[str, Any]:
    """Restores from ``ckpt`` (if it holds a checkpoint), trains to ``last_step``, saves there
    at the end; returns the final w0, w1 and global step (and calls ``check(cluster)`` while
    the ps tasks still run)."""
    psrt.reset_default_graph()
    cluster, ps, worker, config = _job(num_ps, replicas)
    try:
        with psrt.device(psrt.train.replica_device_setter(cluster=cluster)):
            w0 = psrt.Variable(np.zeros(3, np.float32), name="w0")
            w1 = psrt.Variable(np.zeros(3, np.float32), name="w1")
            step = psrt.train.get_or_create_global_step()
        train = psrt.train.GradientDescentOptimizer(LR).minimize(
            psrt.reduce_sum(w0) + psrt.reduce_sum(w1), global_step=step)
        hooks = [psrt.train.StopAtStepHook(last_step=last_step)]
        with psrt.train.MonitoredTrainingSession(
                master=worker.target, is_chief=True, checkpoint_dir=ckpt, hooks=hooks,
                config=config, save_checkpoint_steps=1000, save_summaries_steps=None) as sess:
            while not sess.should_stop():
                sess.run(train)
        with psrt.Session(worker.target, config=config) as sess:
            got = dict(zip(("w0", "w1", "step"), sess.run([w0, w1, step])))
        if check is not None:
            check(cluster)
        return got
    finally:
        worker.stop()
        for s in ps:
            s.stop()


def _held(address: str) -> dict[str, Any]:
    """name -> value of every initialized variable at ``address`` (the ps task's own copy)."""
    plain = _core.Client("worker", 9)
    try:
        plain.connect(0, address, 5.0)
        out = {}
        for d in plain.list_variables(0):
            [(h, init)] = plain.register([(0, d["name"], d["dtype"], list(d["shape"]),
                                           d["optimizer"], {}, None)])
            if not init:
                continue
            value = np.empty(d["shape"], np.float32 if d["dtype"] == "float32" else np.int64)
            plain.pull([h], [value])
            out[d["name"]] = value
        return out
    finally:
        plain.close()


def test_checkpoints_move_between_replicated_and_unreplicated_jobs(tmp_path):
    ckpt = str(tmp_path / "train")
    # 1. Replicated, 2 ps tasks: 6 steps, saved at the end.
    got = _train(2, 2, ckpt, 6)
    np.testing.assert_array_equal(got["w0"], np.full(3, -3.0, np.float32))
    assert got["step"] == 6
    assert psrt.train.latest_checkpoint(ckpt).endswith("model.ckpt-6")
    # 2. Unreplicated, 3 ps tasks: restores step 6 and trains on to 8.
    got = _train(3, 1, ckpt, 8)
    np.testing.assert_array_equal(got["w0"], np.full(3, -4.0, np.float32))
    np.testing.assert_array_equal(got["w1"], np.full(3, -4.0, np.float32))
    assert got["step"] == 8

    # 3. Replicated again, 2 ps tasks: restores step 8 into every replica of each shard.
    def both_replicas_hold_it(cluster: dict[str, list[str]]) -> None:
        for address in cluster["ps"]:
            held = _held(address)
            assert set(held) == {"w0", "w1", "global_step"}, (address, held)
            np.testing.assert_array_equal(held["w0"], np.full(3, -4.0, np.float32))
            np.testing.assert_array_equal(held["w1"], np.full(3, -4.0, np.float32))
            assert int(held["global_step"]) == 8, (address, held)

    got = _train(2, 2, ckpt, 8, check=both_replicas_hold_it)
    np.testing.assert_array_equal(got["w0"], np.full(3, -4.0, np.float32))
    assert got["step"] == 8
