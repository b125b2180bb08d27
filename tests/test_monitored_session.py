"""Tests for psrt.monitored_session: MonitoredTrainingSession, MonitoredSession,
SingularMonitoredSession, the session creators and Scaffold, against real ps tasks.

ps tasks are subprocesses on ports the OS hands out (tests/_mts_cluster.py), reaped by PID.
The API-level tests run the worker in this process (its own ``psrt.train.Server``); the
multi-worker ones (a non-chief started 10 s before its chief, a job whose ps tasks exit by
themselves, two workers stopping at one step) run every worker as a subprocess too.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from typing import Any

import numpy as np
import pytest

import psrt
from psrt import errors

from _mts_cluster import (  # noqa: F401  (fixtures)
    LOCALHOST,
    Job,
    Model,
    fresh_graph,
    initial_values,
    job,
    ps_ports,
    tasks,
)

STATE_KEYS = ("W", "b", "W/Adagrad", "b/Adagrad", "global_step")


class Recorder(psrt.train.SessionRunHook):
    """Counts every hook call; fetches the global step in each run and the whole state when a
    session is created and at the end."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.calls: collections.Counter[str] = collections.Counter()
        self.steps: list[int] = []
        self.created: list[dict[str, Any]] = []
        self.ended: dict[str, Any] | None = None
        self.original_fetches: list[Any] = []

    def begin(self) -> None:
        self.calls["begin"] += 1

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.calls["after_create_session"] += 1
        self.created.append(session.run(self.model.state_fetches()))

    def before_run(self, run_context: Any) -> Any:
        self.calls["before_run"] += 1
        self.original_fetches.append(run_context.original_args.fetches)
        return psrt.train.SessionRunArgs({"step": self.model.global_step})

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.calls["after_run"] += 1
        self.steps.append(run_values.results["step"])

    def end(self, session: Any) -> None:
        self.calls["end"] += 1
        self.ended = session.run(self.model.state_fetches())


def _tensors(path: str) -> dict[str, np.ndarray]:
    reader = psrt.train.load_checkpoint(path)
    return {k: reader.get_tensor(k) for k in STATE_KEYS}


def _steps_of(ckpt_dir: str) -> list[int]:
    state = psrt.train.get_checkpoint_state(ckpt_dir)
    return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def _assert_state_equal(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]), err_msg=k)


def _train(sess: Any, model: Model, max_runs: int = 10_000) -> list[int]:
    steps = []
    while not sess.should_stop() and len(steps) < max_runs:
        _, step = sess.run([model.train_op, model.global_step])
        steps.append(step)
    return steps


# ---- the chief: initialize or restore, default hooks -----------------------------------------

def test_chief_initializes_and_saves_every_5_steps_and_at_end(job, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="psrt")
    ckpt = str(tmp_path / "train")  # does not exist yet: created, as TF's hook does
    m = job.model
    rec = Recorder(m)
    inits = []
    scaffold = psrt.train.Scaffold(init_fn=lambda scaffold, sess: inits.append(scaffold))
    with psrt.train.MonitoredTrainingSession(
            master=job.target, is_chief=True, checkpoint_dir=ckpt, scaffold=scaffold,
            hooks=[rec, psrt.train.StopAtStepHook(last_step=12)], save_checkpoint_steps=5,
            log_step_count_steps=4) as sess:
        assert inits == [scaffold]
        # The CheckpointSaverHook saved right after the session was created.
        assert _steps_of(ckpt) == [0]
        steps = _train(sess, m)
    assert steps == list(range(1, 13))
    assert rec.steps == steps
    assert rec.calls == {"begin": 1, "after_create_session": 1, "before_run": 12,
                         "after_run": 12, "end": 1}

    # Initialized from the chief's initial values, accumulators at 0.1.
    init = initial_values(5)
    created = rec.created[0]
    np.testing.assert_array_equal(created["W"], init["W"])
    np.testing.assert_array_equal(created["b"], init["b"])
    np.testing.assert_array_equal(created["W/Adagrad"], np.full_like(init["W"], 0.1))
    assert created["global_step"] == 0

    assert _steps_of(ckpt) == [0, 5, 10, 12]
    assert psrt.train.latest_checkpoint(ckpt) == os.path.join(ckpt, "model.ckpt-12")
    _assert_state_equal(_tensors(os.path.join(ckpt, "model.ckpt-0")), created)
    _assert_state_equal(_tensors(os.path.join(ckpt, "model.ckpt-12")), rec.ended)
    assert rec.ended["global_step"] == 12
    # The default StepCounterHook logged global_step/sec every 4 steps.
    assert len([r for r in caplog.records if "global_step/sec:" in r.getMessage()]) >= 2


def test_chief_restores_latest_checkpoint_with_optimizer_slots(tasks, fresh_graph, tmp_path):
    ckpt = str(tmp_path / "train")
    first = Job(tasks, init_seed=5)
    try:
        with psrt.train.MonitoredTrainingSession(
                master=first.target, checkpoint_dir=ckpt, save_checkpoint_steps=5,
                hooks=[psrt.train.StopAtStepHook(last_step=12)]) as sess:
            _train(sess, first.model)
    finally:
        first.end()
    at_10 = _tensors(os.path.join(ckpt, "model.ckpt-10"))
    at_12 = _tensors(os.path.join(ckpt, "model.ckpt-12"))

    # A new job: fresh ps task (nothing on it), other initial values in the graph.
    second = Job(tasks, init_seed=99)
    try:
        rec = Recorder(second.model)
        inits = []
        with psrt.train.MonitoredTrainingSession(
                master=second.target, checkpoint_dir=ckpt, hooks=[rec],
                scaffold=psrt.train.Scaffold(init_fn=lambda s, sess: inits.append(1))) as sess:
            _, step = sess.run([second.model.train_op, second.model.global_step])
        assert inits == []  # restored, not initialized
        _assert_state_equal(rec.created[0], at_12)
        assert rec.created[0]["global_step"] == 12
        assert not np.array_equal(at_12["W/Adagrad"], at_10["W/Adagrad"])
        assert step == 13
    finally:
        second.end()


def test_hooks_see_the_step_after_the_increment_once_per_run(job):
    m = job.model
    rec = Recorder(m)
    with psrt.train.MonitoredTrainingSession(master=job.target, hooks=[rec],
                                             log_step_count_steps=None) as sess:
        fetched = [sess.run([m.train_op, m.global_step])[1] for _ in range(3)]
        W = sess.run(m.W)  # no train op: the hooks see the step unchanged
        fetched.append(sess.run({"gs": m.global_step, "op": m.train_op})["gs"])
    assert fetched == [1, 2, 3, 4]
    assert rec.steps == [1, 2, 3, 3, 4]
    assert rec.calls["before_run"] == rec.calls["after_run"] == 5
    assert rec.original_fetches[3] is m.W
    assert W.shape == m.W.shape


def test_run_step_fn_runs_with_hooks_and_request_stop(job):
    m = job.model
    rec = Recorder(m)
    raw_steps = []

    def step_fn(ctx: Any) -> Any:
        raw_steps.append(ctx.session.run(m.global_step))  # the raw session: no hooks
        _, step = ctx.run_with_hooks([m.train_op, m.global_step])
        if step >= 3:
            ctx.request_stop()
        return step

    with psrt.train.MonitoredTrainingSession(master=job.target, hooks=[rec]) as sess:
        results = []
        while not sess.should_stop():
            results.append(sess.run_step_fn(step_fn))
    assert results == [1, 2, None]
    assert raw_steps == [0, 1, 2]
    assert rec.steps == [1, 2, 3]
    assert rec.calls["before_run"] == 3


def test_should_stop_close_and_context_manager(job):
    m = job.model
    rec = Recorder(m)
    sess = psrt.train.MonitoredTrainingSession(master=job.target, hooks=[rec])
    assert not sess.should_stop()
    assert sess.run([m.train_op, m.global_step])[1] == 1
    sess.close()
    assert sess.should_stop()
    assert rec.calls["end"] == 1
    sess.close()  # idempotent
    assert rec.calls["end"] == 1
    with pytest.raises(RuntimeError):
        sess.run(m.train_op)

    with psrt.train.MonitoredTrainingSession(master=job.target) as entered:
        assert isinstance(entered, psrt.train.MonitoredSession)  # as TF's function returns
        assert entered.run(m.global_step) == 0  # initialized again: no checkpoint_dir
    assert entered.should_stop()


def test_hooks_get_a_coord_that_stops_before_the_first_run(job):
    class StopAtCreation(psrt.train.SessionRunHook):
        def after_create_session(self, session: Any, coord: Any) -> None:
            assert not coord.should_stop()
            coord.request_stop()

    rec = Recorder(job.model)
    with psrt.train.MonitoredTrainingSession(master=job.target,
                                             hooks=[StopAtCreation(), rec]) as sess:
        assert sess.should_stop()
    assert rec.calls["before_run"] == 0 and rec.calls["end"] == 1


def test_out_of_range_error_inside_with_block_ends_normally(job, tmp_path):
    m = job.model
    ckpt = str(tmp_path / "train")
    rec = Recorder(m)
    with psrt.train.MonitoredTrainingSession(master=job.target, checkpoint_dir=ckpt,
                                             hooks=[rec], save_checkpoint_steps=100) as sess:
        for _ in range(3):
            sess.run(m.train_op)
        raise errors.OutOfRangeError(None, None, "End of sequence")
    assert sess.should_stop()
    assert rec.calls["end"] == 1  # a normal end: hooks' end ran, the final checkpoint saved
    assert _steps_of(ckpt) == [0, 3]

    # Any other exception propagates and skips the hooks' end, as TF.
    rec2 = Recorder(m)
    with pytest.raises(ValueError, match="boom"):
        with psrt.train.MonitoredTrainingSession(master=job.target, hooks=[rec2]) as sess:
            sess.run(m.train_op)
            raise ValueError("boom")
    assert rec2.calls["end"] == 0
    assert sess.should_stop()


def test_non_chief_never_initializes_and_runs_only_its_hooks(job, tmp_path, caplog):
    m = job.model
    with psrt.train.MonitoredTrainingSession(master=job.target, is_chief=True) as sess:
        for _ in range(3):
            sess.run(m.train_op)
        left = sess.run(m.state_fetches())
    caplog.set_level(logging.INFO, logger="psrt")
    caplog.clear()
    rec, chief_only = Recorder(m), Recorder(m)
    ckpt = tmp_path / "never"
    with psrt.train.MonitoredTrainingSession(
            master=job.target, is_chief=False, checkpoint_dir=str(ckpt), hooks=[rec],
            chief_only_hooks=[chief_only], save_checkpoint_steps=1,
            log_step_count_steps=1) as sess:
        steps = [sess.run([m.train_op, m.global_step])[1] for _ in range(2)]
    _assert_state_equal(rec.created[0], left)  # what the chief left, not re-initialized
    assert steps == [4, 5]
    assert rec.steps == [4, 5]
    assert chief_only.calls == {}
    assert not ckpt.exists()  # no CheckpointSaverHook on a non-chief
    assert not [r for r in caplog.records if "global_step/sec" in r.getMessage()]


def test_non_chief_without_chief_fails_naming_uninitialized_variables(job):
    rec = Recorder(job.model)
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as info:
        psrt.train.MonitoredTrainingSession(master=job.target, is_chief=False, hooks=[rec],
                                            max_wait_secs=1)
    assert 1.0 <= time.monotonic() - start < 5.0
    message = info.value.message
    assert "Session was not ready after waiting 1 secs" in message
    names = message.split("variables never initialized: ", 1)[1].split(", ")
    assert sorted(names) == ["W", "b", "global_step"]
    assert rec.calls == {"begin": 1}


def test_monitored_session_creators_and_singular_monitored_session(job, tmp_path):
    m = job.model
    ckpt = str(tmp_path / "train")
    scaffold = psrt.train.Scaffold()
    creator = psrt.train.ChiefSessionCreator(scaffold=scaffold, master=job.target,
                                             checkpoint_dir=ckpt)
    saver = psrt.train.CheckpointSaverHook(ckpt, save_steps=100, scaffold=scaffold)
    with psrt.train.MonitoredSession(
            session_creator=creator,
            hooks=[saver, psrt.train.StopAtStepHook(last_step=3)]) as sess:
        assert _train(sess, m) == [1, 2, 3]
    assert _steps_of(ckpt) == [0, 3]

    worker_creator = psrt.train.WorkerSessionCreator(master=job.target, max_wait_secs=5)
    with psrt.train.MonitoredSession(session_creator=worker_creator) as sess:
        assert sess.run([m.train_op, m.global_step])[1] == 4

    # A scaffold's local_init_op runs in each new session once ready_for_local_init_op
    # (default: every global variable initialized) reports nothing, as TF's.
    local = psrt.train.Scaffold(local_init_op=m.b.assign(np.full(m.b.shape, 3.0, m.b.dtype)))
    local_creator = psrt.train.WorkerSessionCreator(scaffold=local, master=job.target,
                                                    max_wait_secs=5)
    with psrt.train.MonitoredSession(session_creator=local_creator) as sess:
        np.testing.assert_array_equal(sess.run(m.b), np.full(m.b.shape, 3.0))

    with psrt.train.SingularMonitoredSession(master=job.target, checkpoint_dir=ckpt) as sess:
        # Restored from model.ckpt-3: the ps task's step 4 is rolled back.
        assert sess.raw_session().run(m.global_step) == 3
        assert sess.run([m.train_op, m.global_step])[1] == 4


# ---- StopAtStepHook(last_step=10), end to end -----------------------------------------------

def test_stop_at_step_10_continues_at_5_and_9_stops_at_10_and_11(job, tmp_path):
    m = job.model
    dirs = {}
    with psrt.Session(job.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for start in (5, 9, 10, 11):
            sess.run(m.global_step.assign(start))
            d = tmp_path / f"at{start}"
            d.mkdir()
            psrt.train.Saver().save(sess, str(d / "model.ckpt"), global_step=m.global_step)
            dirs[start] = str(d)
    for start, runs in ((0, 10), (5, 5), (9, 1), (10, 0), (11, 0)):
        rec = Recorder(m)
        with psrt.train.MonitoredTrainingSession(
                master=job.target, checkpoint_dir=dirs.get(start),
                hooks=[psrt.train.StopAtStepHook(last_step=10), rec]) as sess:
            assert rec.created[0]["global_step"] == start
            steps = _train(sess, m)
        assert steps == list(range(start + 1, 11)), start
        assert rec.calls["before_run"] == runs
        assert rec.ended["global_step"] == max(start, 10)


@pytest.mark.slow
def test_two_workers_stop_at_step_10_between_them(tasks):
    ps = tasks.ps(1, workers=2)
    # The chief holds back 0.5 s after initializing, so both workers train together.
    workers = [tasks.worker("chief", ps, 2, 0, last_step=10, init_seed=1, step_sleep=0.05,
                            pause_before_training=0.5),
               tasks.worker("worker1", ps, 2, 1, last_step=10, step_sleep=0.05)]
    for w in workers:
        w.expect_exit(0, timeout=60)
    done = [w.expect("done") for w in workers]
    final = max(d["last"] or 0 for d in done)
    assert final in (10, 11)
    # Every global step was one run of one of the workers, and each stopped at >= 10.
    assert sum(d["runs"] for d in done) == final
    for w, d in zip(workers, done):
        assert (d["last"] if d["runs"] else w.expect("session")["step"]) >= 10, d


# ---- a non-chief started 10 s before its chief ------------------------------------------------

HEAD_START = 10.0


@pytest.mark.slow
def test_non_chief_started_10s_before_chief_trains_from_its_values(tasks):
    ps = tasks.ps(2, workers=2)
    other = tasks.worker("worker1", ps, 2, 1, last_step=60, step_sleep=0.01)
    other.expect("devices", timeout=30)
    started = other.expect("started")["t"]
    time.sleep(max(0.0, started + HEAD_START - time.time()))

    # 10 s on, the non-chief still waits, and initialized nothing: its registrations are
    # on both ps tasks, uninitialized.
    assert other.event("session") is None and other.proc.poll() is None
    from psrt import _core  # noqa: PLC0415

    seen = {}
    for i, port in enumerate(ps_ports(ps)):
        client = _core.Client("worker", 99)
        try:
            client.connect(0, f"{LOCALHOST}:{port}", 5.0)
            seen.update({v["name"]: (i, v["initialized"]) for v in client.list_variables(0)})
        finally:
            client.close()
    assert seen == {"W": (0, False), "global_step": (0, False), "b": (1, False)}

    chief = tasks.worker("chief", ps, 2, 0, last_step=60, step_sleep=0.01, init_seed=42,
                         pause_before_training=1.5)
    assert chief.expect("started")["t"] - started >= HEAD_START
    init = chief.expect("init", timeout=30)
    first = other.expect("first_step", timeout=30)
    # Training starts within ~1 s of the chief's initialization (0.1 s readiness polls).
    assert -0.05 <= first["t"] - init["t"] < 1.0, (first["t"] - init["t"])
    # Its first values are the chief's initial values (its own graph would say zeros).
    chief_init = initial_values(42)
    np.testing.assert_array_equal(np.asarray(init["W"], np.float32), chief_init["W"])
    np.testing.assert_array_equal(np.asarray(init["b"], np.float32), chief_init["b"])
    session = other.expect("session")
    np.testing.assert_array_equal(np.asarray(session["state"]["W"], np.float32), chief_init["W"])
    np.testing.assert_array_equal(np.asarray(session["state"]["b"], np.float32), chief_init["b"])
    np.testing.assert_array_equal(np.asarray(first["seen"]["W"], np.float32), chief_init["W"])
    np.testing.assert_array_equal(np.asarray(first["seen"]["b"], np.float32), chief_init["b"])
    assert first["step"] == 1 and session["step"] == 0
    assert other.event("init") is None
    chief.expect_exit(0, timeout=60)
    other.expect_exit(0, timeout=60)
    assert chief.expect("done")["last"] >= 60 and other.expect("done")["last"] >= 60


# ---- the job can end --------------------------------------------------------------------------

@pytest.mark.slow
def test_ps_tasks_exit_by_themselves_once_every_worker_closed(tasks):
    # ps 0 opts in through the environment, ps 1 through join(exit_when_workers_done=True).
    ps = tasks.ps(2, workers=2, exit_when_workers_done=[None, True],
                  env=[{"PSRT_EXIT_WHEN_WORKERS_DONE": "1"}, None])
    chief = tasks.worker("chief", ps, 2, 0, last_step=150, step_sleep=0.01, init_seed=2,
                         pause_before_training=0.5)
    early = tasks.worker("early", ps, 2, 1, last_step=20, step_sleep=0.01)
    early.expect_exit(0, timeout=60)
    early_done = early.expect("done")
    assert 20 <= early_done["last"] < 150
    # One worker finished: the ps tasks keep serving the other.
    time.sleep(0.3)
    assert [p.proc.poll() for p in ps] == [None, None]
    assert chief.proc.poll() is None
    chief.expect_exit(0, timeout=60)
    chief_done = chief.expect("done")
    assert chief_done["last"] >= 150 and chief_done["t"] > early_done["t"]
    for p in ps:
        p.expect_exit(0, timeout=10)
        assert p.expect("exit")["t"] > early_done["t"] + 0.3


# ---- summaries (TF's default SummarySaverHook and StepCounterHook) ----------------------------

def _events(logdir: str) -> Any:
    """Every event of ``logdir`` read by TensorBoard, after closing the cached writers (so
    the last CheckpointSaverHook log, written after the summary hook's flush, is there)."""
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415

    psrt.summary.FileWriterCache.clear()
    acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def test_chief_writes_step_rate_and_summaries_every_n_steps_to_the_checkpoint_dir(job,
                                                                                 tmp_path):
    m = job.model
    ckpt = str(tmp_path / "train")
    psrt.summary.scalar("loss", m.train_op)
    psrt.summary.histogram("weights", m.W)
    losses = {}
    with psrt.train.MonitoredTrainingSession(
            master=job.target, is_chief=True, checkpoint_dir=ckpt, save_summaries_steps=5,
            log_step_count_steps=5, hooks=[psrt.train.StopAtStepHook(last_step=12)]) as sess:
        while not sess.should_stop():
            loss, step = sess.run([m.train_op, m.global_step])
            losses[step] = loss
    acc = _events(ckpt)
    # Summaries at TF's steps (the first run's, then every 5), each the loss of that step.
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [
        (s, pytest.approx(losses[s])) for s in (1, 6, 11)]
    assert [e.step for e in acc.Histograms("weights")] == [1, 6, 11]
    assert acc.Histograms("weights")[-1].histogram_value.num == m.W.shape[0] * m.W.shape[1]
    rates = acc.Scalars("global_step/sec")
    assert [e.step for e in rates] == [6, 11] and all(e.value > 0 for e in rates)
    # The scaffold's default summary op is merge_all(), kept in the SUMMARY_OP collection.
    [merged] = psrt.get_default_graph().get_collection(psrt.summary.SUMMARY_OP)
    assert merged.tags == ["loss", "weights"]


def test_summary_dir_save_summaries_secs_and_no_summaries(job, tmp_path):
    m = job.model
    psrt.summary.scalar("b0", lambda: 1.5)
    logs = str(tmp_path / "logs")
    with psrt.train.MonitoredTrainingSession(
            master=job.target, is_chief=True, summary_dir=logs, save_summaries_secs=3600,
            log_step_count_steps=2) as sess:
        for _ in range(4):
            sess.run(m.train_op)
    acc = _events(logs)
    # By time: only the first run's summaries within an hour; the step rate by steps.
    assert [(e.step, e.value) for e in acc.Scalars("b0")] == [(1, 1.5)]
    assert [e.step for e in acc.Scalars("global_step/sec")] == [3]
    # No checkpoint_dir: nothing but the summaries there.
    assert psrt.train.latest_checkpoint(logs) is None
    # Both frequencies None: no SummarySaverHook, the step rate still written.
    quiet = str(tmp_path / "quiet")
    with psrt.train.MonitoredTrainingSession(
            master=job.target, is_chief=True, summary_dir=quiet, save_summaries_steps=None,
            log_step_count_steps=1) as sess:
        for _ in range(3):
            sess.run(m.train_op)
    acc = _events(quiet)
    assert acc.Tags()["scalars"] == ["global_step/sec"]


def test_non_chief_writes_no_summaries(job, tmp_path):
    m = job.model
    psrt.summary.scalar("loss", m.train_op)
    with psrt.train.MonitoredTrainingSession(master=job.target, is_chief=True) as chief:
        chief.run(m.train_op)
    worker_dir = tmp_path / "worker"
    with psrt.train.MonitoredTrainingSession(
            master=job.target, is_chief=False, checkpoint_dir=str(worker_dir),
            save_summaries_steps=1, log_step_count_steps=1) as sess:
        steps = [sess.run([m.train_op, m.global_step])[1] for _ in range(3)]
    assert steps == [2, 3, 4]
    assert not worker_dir.exists()


def test_scaffold_summary_op_defaults_and_collection():
    psrt.reset_default_graph()
    try:
        assert psrt.train.Scaffold().summary_op is None
        psrt.Variable(np.zeros(2, np.float32), name="v")  # the default Saver needs one
        a = psrt.summary.scalar("a", 1.0)
        scaffold = psrt.train.Scaffold()
        scaffold.finalize()
        assert scaffold.summary_op.tags == ["a"]
        assert psrt.get_default_graph().get_collection("summary_op") == [scaffold.summary_op]
        copy = psrt.train.Scaffold(copy_from_scaffold=scaffold)
        assert copy.summary_op is scaffold.summary_op
        # A second scaffold of the finalized graph takes the collection's op.
        again = psrt.train.Scaffold()
        again.finalize()
        assert again.summary_op is scaffold.summary_op
        assert psrt.train.Scaffold(summary_op=a).summary_op is a
    finally:
        psrt.reset_default_graph()
    try:
        psrt.Variable(np.zeros(2, np.float32), name="v")
        psrt.get_default_graph().add_to_collection("summary_op", psrt.summary.scalar("x", 1))
        psrt.get_default_graph().add_to_collection("summary_op", psrt.summary.scalar("y", 2))
        with pytest.raises(RuntimeError, match='More than one item in the collection '
                                               '"summary_op".*Scaffold\\(summary_op='):
            psrt.train.Scaffold().finalize()
    finally:
        psrt.reset_default_graph()


def test_signature_shows_use_default_not_an_object_address():
    import inspect  # noqa: PLC0415
    import pydoc  # noqa: PLC0415

    sig = inspect.signature(psrt.train.MonitoredTrainingSession)
    for name in ("save_checkpoint_secs", "save_summaries_steps", "save_summaries_secs",
                 "save_checkpoint_steps"):
        assert repr(sig.parameters[name].default) == "USE_DEFAULT", name
    text = pydoc.render_doc(psrt.train.MonitoredTrainingSession, renderer=pydoc.plaintext)
    assert "object at 0x" not in text and text.count("= USE_DEFAULT") == 4
    import copy as copy_module  # noqa: PLC0415
    import pickle  # noqa: PLC0415
    from psrt.training.monitored_session import USE_DEFAULT  # noqa: PLC0415

    assert copy_module.deepcopy(USE_DEFAULT) is USE_DEFAULT
    assert pickle.loads(pickle.dumps(USE_DEFAULT)) is USE_DEFAULT
