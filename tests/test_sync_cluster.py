"""SyncReplicasOptimizer across real processes (issue 6's "Done when").

Every ps task and worker is a subprocess on a port the OS hands out, talking real TCP: the
ps tasks are tests/_mts_cluster.py's, the workers tests/_sync_task.py's
(``SyncReplicasOptimizer`` in a ``MonitoredTrainingSession`` loop with a
``StopAtStepHook``); the ``tasks`` fixture reaps every child by PID. Worker i trains on
its own fixed sequence of batches, so a run in which every step averages one gradient of
each of two workers must equal tests/_sync_task.py's single-process numpy ``reference``.
The test reads the variables back through a Session of its own against the ps tasks, which
stay up after the workers exit.

(``examples/mnist_dist.py --sync_replicas`` under ``psrt-launch``: tests/test_launch.py.)
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np
import pytest

import psrt

import _sync_task
from _mts_cluster import (  # noqa: F401  (fixtures)
    LOCALHOST,
    Task,
    Tasks,
    cluster_of,
    fresh_graph,
    ps_ports,
    tasks,
)

WAIT_RE = re.compile(r"^step (\d+): waiting for 1 more gradient\(s\) from 2 replicas")


def _sync_worker(tasks: Tasks, name: str, ps: list[Task], workers: int, index: int,
                 **config: Any) -> Task:
    return tasks.worker(name, ps, workers, index, role="sync_worker",
                        script=_sync_task.SCRIPT, **config)


def _read_state(ps: list[Task], workers: int, replicas_to_aggregate: int,
                total_num_replicas: int | None, optimizer: str) -> dict[str, Any]:
    """The variables (and Adagrad's accumulators) and the global step, read through a
    Session of this process against the ps tasks: the same graph as the workers', so the
    same declarations."""
    psrt.reset_default_graph()
    cluster = cluster_of(ps, workers)
    model = _sync_task.SyncModel(psrt.train.ClusterSpec(cluster), 0, replicas_to_aggregate,
                                 total_num_replicas, optimizer)
    target = f"grpc://{LOCALHOST}:{ps_ports(ps)[0]}"
    with psrt.Session(target, config=psrt.ConfigProto(cluster_def=cluster,
                                                      connect_timeout_secs=5)) as sess:
        return sess.run(model.state_fetches(optimizer))


def _assert_matches_reference(state: dict[str, Any], steps: int, optimizer: str,
                              learning_rate: float = 0.1) -> None:
    want = _sync_task.reference(steps, optimizer, learning_rate)
    assert int(state["global_step"]) == steps
    for name, value in want.items():
        got = np.asarray(state[name])
        assert got.dtype == np.float32 and got.shape == value.shape, (name, got)
        np.testing.assert_allclose(got, value, rtol=0, atol=1e-6, err_msg=name)


def _done(worker: Task) -> tuple[dict[str, Any], str]:
    """The worker's "done" event, and a description for assertion messages that names any
    run that ended with OutOfRangeError (the end of training)."""
    done = worker.expect("done")
    return done, (f"{worker.name}: {done['runs']} runs, global steps {done['first']}.."
                  f"{done['last']}; OutOfRangeError: {worker.all('out_of_range')}")


def _assert_devices(worker: Task) -> None:
    devices = worker.expect("devices")
    assert (devices["W"], devices["b"], devices["global_step"]) == (
        "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"), devices


# ---- 2 workers, R = 2: the numpy reference --------------------------------------------------

@pytest.mark.slow
def test_two_workers_average_gradients_each_step_like_numpy(tasks, fresh_graph):
    n = 40
    ps = tasks.ps(2, workers=2)
    common = dict(replicas_to_aggregate=2, total_num_replicas=2, optimizer="sgd",
                  last_step=n, sync_timeout_secs=30)
    workers = [_sync_worker(tasks, "chief", ps, 2, 0, **common),
               _sync_worker(tasks, "worker1", ps, 2, 1, **common)]
    for w in workers:
        w.expect_exit(0, timeout=45)
    _assert_devices(workers[0])
    state = _read_state(ps, 2, 2, 2, "sgd")
    _assert_matches_reference(state, n, "sgd")
    for w in workers:
        assert w.event("error") is None
        done, what = _done(w)
        # In lockstep: every global step took one successful run of each worker, the last
        # one included (its step completed: no OutOfRangeError for it).
        assert (done["runs"], done["first"], done["last"]) == (n, 1, n), what
        assert done["steps"] == list(range(1, n + 1)), what
    # Averaged, not summed, and neither worker's data alone: the reference tells them apart.
    summed = _sync_task.reference(n, "sgd", 0.2)
    alone = _sync_task.reference(n, "sgd", 0.1, workers=(0,))
    for other in (summed, alone):
        assert np.abs(np.asarray(state["W"]) - other["W"]).max() > 1e-3


# ---- 3 workers, R = 2: a dead chief does not stall the others -------------------------------

@pytest.mark.slow
def test_backup_worker_killed_chief_survivors_reach_stop_step(tasks, fresh_graph):
    n = 120
    ps = tasks.ps(2, workers=3)
    common = dict(replicas_to_aggregate=2, total_num_replicas=3, optimizer="adagrad",
                  last_step=n, sync_timeout_secs=30, step_sleep=0.01)
    chief = _sync_worker(tasks, "chief", ps, 3, 0, report_step=40, **common)
    others = [_sync_worker(tasks, f"worker{i}", ps, 3, i, **common) for i in (1, 2)]
    reached = chief.expect("reached", timeout=30)["step"]
    for w in others:
        w.expect("first_step", timeout=30)
    chief.kill9()
    killed_at = time.time()
    assert reached < n
    for w in others:
        w.expect_exit(0, timeout=30)
        done, what = _done(w)
        assert done["last"] == n, what
        # The global step never goes back. (It may repeat: a run computes at the lowest
        # step its variables reached, which can trail the global step by one on a ps task
        # that has not yet applied that step; its gradients for the others are stale.)
        steps = done["steps"]
        assert all(a <= b for a, b in zip(steps, steps[1:])), (what, steps)
        assert done["t"] > killed_at
        assert w.event("error") is None
    assert int(_read_state(ps, 3, 2, 3, "adagrad")["global_step"]) == n


# ---- the chief killed and started again: the survivor re-reads the model ------------------

@pytest.mark.slow
def test_chief_restarted_mid_run_the_survivor_re_reads_and_both_finish(tasks, fresh_graph,
                                                                       tmp_path):
    # The ps tasks never restarted, so the restarted chief keeps what they hold (issue 22,
    # item 5: only a ps that lost its state is restored; TF r1.15 would restore the
    # checkpoint saved at step 0 and lose every step since) while the survivor waits for the
    # chief's gradient of that step; both train on to the stop step, well before the sync
    # timeout.
    n = 80
    ps = tasks.ps(2, workers=2)
    common = dict(replicas_to_aggregate=2, total_num_replicas=2, optimizer="adagrad",
                  last_step=n, sync_timeout_secs=60.0, checkpoint_dir=str(tmp_path / "ckpt"))
    chief = _sync_worker(tasks, "chief", ps, 2, 0, report_step=30, step_sleep=0.01, **common)
    survivor = _sync_worker(tasks, "survivor", ps, 2, 1, **common)
    reached = chief.expect("reached", timeout=30)["step"]
    assert reached < n
    chief.kill9()
    killed_at = time.time()
    again = _sync_worker(tasks, "chief-again", ps, 2, 0, **common)
    for w in (again, survivor):
        w.expect_exit(0, timeout=30)
        assert w.event("error") is None
    assert time.time() - killed_at < 30.0  # far below the 60 s sync timeout
    # Not model.ckpt-0: the step the ps tasks had reached.
    assert again.expect("session")["step"] >= reached
    sessions = [e["step"] for e in survivor.all("session")]
    # Never rolled back: a re-created session (if the restart aborted a wait) is at the
    # step the ps tasks hold.
    assert sessions[0] == 0 and all(s >= reached for s in sessions[1:]), sessions
    done, what = _done(survivor)
    assert done["last"] == n, what
    assert int(_read_state(ps, 2, 2, 2, "adagrad")["global_step"]) == n


# ---- 2 workers, R = 2, one killed: DeadlineExceededError, not a hang ------------------------

@pytest.mark.slow
def test_survivor_raises_deadline_exceeded_after_sync_timeout(tasks):
    timeout = 3.0
    ps = tasks.ps(2, workers=2)
    common = dict(replicas_to_aggregate=2, total_num_replicas=2, last_step=100000,
                  sync_timeout_secs=timeout, step_sleep=0.01)
    survivor = _sync_worker(tasks, "chief", ps, 2, 0, report_step=20, **common)
    victim = _sync_worker(tasks, "worker1", ps, 2, 1, **common)
    survivor.expect("reached", timeout=30)
    victim.kill9()
    killed_at = time.time()
    survivor.expect_exit(1, timeout=timeout + 15)
    err = survivor.expect("error")
    assert err["type"] == "DeadlineExceededError", err
    match = WAIT_RE.match(err["message"])
    assert match, err
    # The step it waited at is the global step its last successful run returned.
    assert int(match.group(1)) == err["last"], err
    # Not before the timeout (its wait began at most one step before the kill), and not
    # much after it.
    elapsed = err["t"] - killed_at
    assert timeout - 0.5 <= elapsed < timeout + 4.0, elapsed
    # It logged the wait, naming the step, before giving up (issue 6: "logs that wait
    # periodically before it gives up"), also when the timeout is short.
    waits = [e for e in survivor.all("log") if WAIT_RE.match(e["message"])]
    assert waits, (f"no wait warning before DeadlineExceededError after {elapsed:.1f} s; "
                   f"warnings: {survivor.all('log')}")
    assert all(int(WAIT_RE.match(e["message"]).group(1)) == err["last"] for e in waits)
    assert killed_at <= waits[0]["t"] < err["t"], (waits[0], err)


# ---- the end of training, and a new run against ps tasks that stayed up ---------------------

@pytest.mark.slow
def test_early_stop_ends_the_others_then_new_workers_continue(tasks, fresh_graph):
    early_stop, later_stop, timeout = 30, 60, 30.0
    ps = tasks.ps(2, workers=2)
    common = dict(replicas_to_aggregate=2, total_num_replicas=2, optimizer="adagrad",
                  sync_timeout_secs=timeout)
    chief = _sync_worker(tasks, "chief", ps, 2, 0, last_step=10 * later_stop, **common)
    early = _sync_worker(tasks, "early", ps, 2, 1, last_step=early_stop, **common)
    early.expect_exit(0, timeout=45)
    early_done, what = _done(early)
    assert early_done["last"] == early_stop, what
    # The chief's next step can no longer complete: it ends normally (OutOfRangeError),
    # at once, having seen the global step the early worker stopped at.
    chief.expect_exit(0, timeout=15)
    assert chief.event("error") is None
    chief_done, what = _done(chief)
    assert chief_done["t"] - early_done["t"] < 5.0, (chief_done, early_done)
    assert not [e for e in chief.all("log") if e["message"].startswith(f"step {early_stop}:")]
    _assert_matches_reference(_read_state(ps, 2, 2, 2, "adagrad"), early_stop, "adagrad")
    assert chief_done["last"] == early_stop, what
    assert len(chief.all("out_of_range")) == 1, what

    # A new run of both workers against the same ps tasks: non-chiefs (a chief without a
    # checkpoint would initialize the model again, as TF's) continue from the global step.
    again = [_sync_worker(tasks, f"again{i}", ps, 2, i, is_chief=False,
                          last_step=later_stop, **common) for i in (0, 1)]
    for w in again:
        w.expect_exit(0, timeout=45)
        assert w.expect("session")["step"] == early_stop
    # Nothing of the first run's abandoned step leaked into the second run's first step.
    _assert_matches_reference(_read_state(ps, 2, 2, 2, "adagrad"), later_stop, "adagrad")
    for w in again:
        done, what = _done(w)
        assert (done["runs"], done["first"], done["last"]) == (
            later_stop - early_stop, early_stop + 1, later_stop), what


def test_whole_job_run_again_with_a_checkpoint_continues_from_the_global_step(
        tasks, fresh_graph, tmp_path):
    # Both runs have the same chief and checkpoint_dir: the chief saves the last step when
    # the first run ends and restores it when the second begins (as TF's, a chief without a
    # checkpoint would initialize the model again), then both continue in step.
    first_stop, second_stop = 25, 50
    ps = tasks.ps(2, workers=2)
    common = dict(replicas_to_aggregate=2, total_num_replicas=2, optimizer="adagrad",
                  sync_timeout_secs=30.0, checkpoint_dir=str(tmp_path / "ckpt"))
    for run, stop in ((1, first_stop), (2, second_stop)):
        # In the second run the chief starts a second late, after the other worker read the
        # model: the ps tasks still hold the first run's last step (nothing lost), so the
        # chief keeps it instead of restoring the checkpoint, and the other worker's session
        # goes on (issue 22, item 5; TF's chief would restore, aborting that session).
        late = run == 2
        other = _sync_worker(tasks, f"run{run}-w1", ps, 2, 1, last_step=stop, **common)
        if late:
            other.expect("session", timeout=30)
            time.sleep(1.0)
        chief = _sync_worker(tasks, f"run{run}-w0", ps, 2, 0, last_step=stop, **common)
        workers = [chief, other]
        for w in workers:
            w.expect_exit(0, timeout=45)
        start = 0 if run == 1 else first_stop
        for w in workers:
            assert w.expect("session")["step"] == start
            done, what = _done(w)
            assert (done["runs"], done["first"], done["last"]) == (
                stop - start, start + 1, stop), what
        _assert_matches_reference(_read_state(ps, 2, 2, 2, "adagrad"), stop, "adagrad")
        if late:  # no restore: the session that read the model first was not aborted
            assert [e["step"] for e in other.all("session")] == [first_stop]
    assert psrt.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith(f"-{second_stop}")
