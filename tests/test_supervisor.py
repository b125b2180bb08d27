"""Tests for psrt.train.Supervisor (tf.train.Supervisor's semantics) against real ps tasks.

The classic loop::

    sv = psrt.train.Supervisor(is_chief=..., logdir=..., init_op=..., summary_op=None,
                               saver=..., global_step=..., save_model_secs=600)
    with sv.managed_session(server.target) as sess:
        while not sv.should_stop() and step < N:
            _, step = sess.run([train_op, global_step])

runs in worker subprocesses (tests/_mts_cluster.py ``sv_worker``) on a chief and a
non-chief, and again after a restart; the other tests run the worker in this process
against ps subprocesses. Every ps task binds a port the OS hands out and is reaped by PID.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import _child_env, reap
from _mts_cluster import (  # noqa: F401  (fixtures)
    Job,
    cluster_of,
    fresh_graph,
    initial_values,
    job,
    tasks,
)

STATE_KEYS = ("W", "b", "W/Adagrad", "b/Adagrad", "global_step")


def _steps_of(logdir: str) -> list[int]:
    state = psrt.train.get_checkpoint_state(logdir)
    return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def _first_checkpoint(logdir: str, timeout: float = 60.0) -> str:
    """The first checkpoint the checkpoint thread writes in ``logdir`` (waited for)."""
    deadline = time.monotonic() + timeout
    while (latest := psrt.train.latest_checkpoint(logdir)) is None:
        assert time.monotonic() < deadline, f"no checkpoint in {logdir} within {timeout} s"
        time.sleep(0.01)
    return latest


def _supervisor(job: Job, logdir: str | None, is_chief: bool = True,
                save_model_secs: float = 600) -> psrt.train.Supervisor:
    return psrt.train.Supervisor(is_chief=is_chief, logdir=logdir,
                                 init_op=psrt.global_variables_initializer(), summary_op=None,
                                 saver=psrt.train.Saver(), global_step=job.model.global_step,
                                 save_model_secs=save_model_secs)


# ---- the classic loop across processes ------------------------------------------------------

@pytest.mark.slow
def test_supervisor_loop_runs_on_chief_and_non_chief(tasks, tmp_path):
    logdir = str(tmp_path / "logs")  # does not exist: the chief creates it, as TF's
    ps = tasks.ps(1, workers=2)
    other = tasks.worker("worker1", ps, 2, 1, role="sv_worker", logdir=logdir, last_step=80,
                         step_sleep=0.005)
    other.expect("started", timeout=30)
    time.sleep(0.5)  # the non-chief waits in prepare_or_wait_for_session
    assert other.event("session") is None
    chief = tasks.worker("chief", ps, 2, 0, role="sv_worker", logdir=logdir, last_step=80,
                         step_sleep=0.005, init_seed=9, pause_before_training=1.0)
    chief.expect_exit(0, timeout=60)
    other.expect_exit(0, timeout=60)
    init = initial_values(9)
    for w in (chief, other):
        done = w.expect("done")
        assert done["last"] >= 80 and done["runs"] > 0, done
        assert w.expect("queue_runners")["value"] == []
    # The non-chief started from the chief's initial values (it never initializes; the
    # chief held back 1 s before its first step).
    session = other.expect("session")
    assert session["step"] == 0
    assert session["t"] < chief.expect("done")["t"]
    np.testing.assert_array_equal(np.asarray(session["state"]["W"], np.float32), init["W"])
    np.testing.assert_array_equal(np.asarray(session["state"]["b"], np.float32), init["b"])
    # The chief's stop() saved a last checkpoint at the step it ended with.
    latest = psrt.train.latest_checkpoint(logdir)
    assert latest is not None
    step = int(latest.rsplit("-", 1)[1])
    assert step >= chief.expect("done")["last"] >= 80


@pytest.mark.slow
def test_supervisor_restores_from_logdir_on_restart(tasks, tmp_path):
    logdir = str(tmp_path / "logs")

    def run(name: str, last_step: int):
        ps = tasks.ps(1, workers=1)
        chief = tasks.worker(name, ps, 1, 0, role="sv_worker", logdir=logdir,
                             last_step=last_step, init_seed=4)
        chief.expect_exit(0, timeout=60)
        for p in ps:
            assert p.reap() == 0
        return chief

    first = run("first", 30)
    assert first.expect("session")["step"] == 0
    assert first.expect("done")["last"] == 30
    assert psrt.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-30")
    reader = psrt.train.load_checkpoint(logdir)
    saved = {k: reader.get_tensor(k) for k in STATE_KEYS}

    again = run("again", 50)
    session = again.expect("session")
    assert session["step"] == 30
    for k in STATE_KEYS:
        np.testing.assert_array_equal(np.asarray(session["state"][k], saved[k].dtype), saved[k],
                                      err_msg=k)
    done = again.expect("done")
    assert (done["runs"], done["first"], done["last"]) == (20, 31, 50)
    assert psrt.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-50")


def test_the_chief_saves_when_its_services_start(tasks, tmp_path):
    # TF's SVTimerCheckpointThread is a coordinator.LooperThread (tensorflow/python/training/
    # supervisor.py, coordinator.py): LooperThread.run sets next_timer_time = time.time() and
    # calls run_loop before its first wait, so the chief saves at once, then every
    # save_model_secs. Issue 22, item 8: psrt waited save_model_secs (600 s) first, so a job
    # killed in its first interval had no checkpoint at all.
    logdir = str(tmp_path / "logs")
    ps = tasks.ps(1, workers=1)
    chief = tasks.worker("chief", ps, 1, 0, role="sv_worker", logdir=logdir, last_step=10,
                         init_seed=3, save_model_secs=600, pause_before_training=120)
    assert chief.expect("session")["step"] == 0
    assert _first_checkpoint(logdir, timeout=30) == os.path.join(logdir, "model.ckpt-0")
    chief.kill9()                     # no final save: only the first one exists
    assert _steps_of(logdir) == [0]
    reader = psrt.train.load_checkpoint(logdir)
    init = initial_values(3)
    np.testing.assert_array_equal(reader.get_tensor("W"), init["W"])
    np.testing.assert_array_equal(reader.get_tensor("b"), init["b"])
    assert reader.get_tensor("global_step") == 0


SIGINT_DURING_SAVES = """
import sys
import numpy as np
import psrt

ps_address, logdir, mode = sys.argv[1:]
cluster = psrt.train.ClusterSpec({"ps": [ps_address], "worker": ["127.0.0.1:0"]})
server = psrt.train.Server(cluster, job_name="worker", task_index=0)
with psrt.device(psrt.train.replica_device_setter(cluster=cluster)):
    big = psrt.Variable(np.zeros((4096, 4096), np.float32), name="big")  # 64 MiB per save
    gs = psrt.train.get_or_create_global_step()
sv = psrt.train.Supervisor(logdir=logdir, global_step=gs, save_model_secs=0.01,
                           summary_op=None, summary_writer=None)
if mode == "managed":
    with sv.managed_session(server.target) as sess:
        while True:
            sess.run(gs)
else:   # TF1's other loop: prepare_or_wait_for_session, train, sv.stop() never reached
    sess = sv.prepare_or_wait_for_session(server.target)
    while True:
        sess.run(gs)
"""


@pytest.mark.parametrize("mode", ["managed", "prepare"])
def test_ctrl_c_during_a_save_leaves_no_temporary_files(tasks, tmp_path, mode):
    # Issue 22, item 8: SIGINT while the checkpoint thread wrote left
    # .model.ckpt-N.psrt-tmp-* behind when the loop did not reach sv.stop() (the interpreter
    # exited past the daemon thread). The signal is sent once a temporary file exists.
    logdir = tmp_path / "logs"
    ps = tasks.ps(1, workers=1)
    address = cluster_of(ps, 1)["ps"][0]
    proc = subprocess.Popen([sys.executable, "-c", SIGINT_DURING_SAVES, address, str(logdir),
                             mode], env=_child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        seen: list[str] = []
        while not seen:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no save started within 60 s"
            seen = [n for n in (os.listdir(logdir) if logdir.exists() else [])
                    if ".psrt-tmp-" in n]
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        reap(proc)
    assert "KeyboardInterrupt" in err, err
    left = sorted(os.listdir(logdir))
    assert [n for n in left if ".psrt-tmp-" in n] == [], (seen, left)
    # What is there is whole: every checkpoint the state file lists loads.
    state = psrt.train.get_checkpoint_state(str(logdir))
    if state is not None:
        for path in state.all_model_checkpoint_paths:
            assert psrt.train.load_checkpoint(path).get_tensor("big").shape == (4096, 4096)


READ_ONLY_LOGDIR = """
import json, sys
import numpy as np
import psrt
from psrt import errors

psrt.Variable(np.zeros(3, np.float32), name="W")
gs = psrt.train.get_or_create_global_step()
for logdir, writer in ((sys.argv[1], "default"), (sys.argv[1], None),
                       (sys.argv[1] + "/run1", None)):
    kwargs = {} if writer == "default" else {"summary_writer": None}
    try:
        psrt.train.Supervisor(logdir=logdir, global_step=gs, **kwargs)
        print("CREATED", logdir, flush=True)
    except errors.PermissionDeniedError as e:
        print("REFUSED", json.dumps(e.message), flush=True)
"""


def _read_only(directory: str) -> Callable[[], None]:
    """Makes ``directory`` read-only for this test's processes (mode 555, or, for root, whom
    modes do not stop, the immutable attribute); returns what undoes it."""
    if os.geteuid() != 0:
        os.chmod(directory, 0o555)
        return lambda: os.chmod(directory, 0o755)
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", directory], capture_output=True).returncode != 0:
        pytest.skip("running as root, and chattr +i is not available here")
    return lambda: subprocess.run(["chattr", "-i", directory], check=True)


def test_a_read_only_logdir_is_permission_denied_naming_it_when_the_supervisor_is_built(
        tmp_path):
    # Issue 22, item 8: a read-only checkpoint directory gave a raw OSError (tensorboardX's
    # events file) or, with no summary writer, only a warning at the final save. Now it is
    # PermissionDeniedError naming the directory, from the constructor, before any session.
    # TF's chief fails there too (its FileWriter creates the events file in logdir).
    ro = str(tmp_path / "ro")
    os.mkdir(ro)
    undo = _read_only(ro)
    try:
        proc = subprocess.run([sys.executable, "-c", READ_ONLY_LOGDIR, ro], env=_child_env(),
                              capture_output=True, text=True, timeout=120)
    finally:
        undo()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["REFUSED"] * 3, proc.stdout
    messages = [json.loads(line.split(" ", 1)[1]) for line in lines]
    denied = r" failed: (Permission denied \(errno 13\)|Operation not permitted \(errno 1\))$"
    for message, what, path in zip(messages, ["Creating a file in"] * 2 + ["Creating"],
                                   [ro, ro, os.path.join(ro, "run1")]):
        assert re.match(re.escape(f"{what} the Supervisor's logdir {path!r}") + denied,
                        message), message


# ---- the Supervisor API in this process -------------------------------------------------------

def test_prepare_or_wait_for_session_request_stop_and_stop(job, tmp_path):
    m = job.model
    logdir = str(tmp_path / "logs")
    saver = psrt.train.Saver()
    sv = psrt.train.Supervisor(is_chief=True, logdir=logdir,
                               init_op=psrt.global_variables_initializer(), summary_op=None,
                               saver=saver, global_step=m.global_step, save_model_secs=600)
    assert sv.is_chief and sv.saver is saver and sv.global_step is m.global_step
    assert sv.save_path == os.path.join(logdir, "model.ckpt")
    sess = sv.prepare_or_wait_for_session(job.target)
    try:
        init = initial_values(5)
        np.testing.assert_array_equal(sess.run(m.W), init["W"])
        assert sess.run(m.global_step) == 0
        # TF's checkpoint thread saves when the services start (its first loop is at once).
        assert _first_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-0")
        assert sv.start_queue_runners(sess) == []
        assert not sv.should_stop()
        steps = [sess.run([m.train_op, m.global_step])[1] for _ in range(3)]
        assert steps == [1, 2, 3]
        sv.request_stop()
        assert sv.should_stop() and sv.coord.should_stop()
        assert _steps_of(logdir) == [0]  # 600 s: no periodic save since
        sv.stop()
        assert psrt.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-3")
        assert _steps_of(logdir) == [0, 3]
    finally:
        sess.close()


def test_save_model_secs_saves_on_a_thread(job, tmp_path):
    m = job.model
    logdir = str(tmp_path / "logs")
    sv = _supervisor(job, logdir, save_model_secs=0.2)
    with sv.managed_session(job.target) as sess:
        start = time.monotonic()
        step = 0
        while not sv.should_stop() and time.monotonic() - start < 0.9:
            _, step = sess.run([m.train_op, m.global_step])
            time.sleep(0.005)
        during = _steps_of(logdir) if psrt.train.get_checkpoint_state(logdir) else []
    assert len(during) >= 2, during
    assert during == sorted(during) and during[-1] <= step
    # stop() (on leaving managed_session) saved once more, at the last step.
    assert _steps_of(logdir)[-1] == step
    assert sv.should_stop()


def test_managed_session_out_of_range_ends_normally_other_errors_propagate(job, tmp_path):
    m = job.model
    logdir = str(tmp_path / "logs")
    sv = _supervisor(job, logdir)
    with sv.managed_session(job.target) as sess:
        sess.run(m.train_op)
        sess.run(m.train_op)
        raise errors.OutOfRangeError(None, None, "End of sequence")
    assert sv.should_stop()
    assert psrt.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-2")
    with pytest.raises(RuntimeError):
        sess.run(m.W)  # the session was closed

    # Any other exception propagates, after the supervisor stopped.
    sv2 = _supervisor(job, str(tmp_path / "logs2"))
    with pytest.raises(ValueError, match="boom"):
        with sv2.managed_session(job.target) as sess2:
            sess2.run(m.train_op)
            raise ValueError("boom")
    assert sv2.should_stop()


def test_managed_session_keeps_the_last_good_checkpoint_when_the_body_raises(job, tmp_path):
    # TF's managed_session (tensorflow/python/training/supervisor.py) saves nothing on the
    # way out: after an error (e.g. a NaN check) the latest checkpoint is the last periodic
    # save. psrt saves on exit only when the body ended cleanly or was interrupted.
    m = job.model
    logdir = str(tmp_path / "logs")
    sv = _supervisor(job, logdir, save_model_secs=0)  # no checkpoint thread: saves by hand
    with pytest.raises(psrt.train.NanLossDuringTrainingError):
        with sv.managed_session(job.target) as sess:
            sess.run(m.train_op)
            sv.saver.save(sess, sv.save_path, global_step=m.global_step)  # "periodic" save
            sess.run(m.train_op)
            raise psrt.train.NanLossDuringTrainingError()
    assert psrt.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-1")
    assert _steps_of(logdir) == [1]
    sv2 = _supervisor(job, str(tmp_path / "logs2"), save_model_secs=0)
    with pytest.raises(KeyboardInterrupt):
        with sv2.managed_session(job.target) as sess:
            sess.run(m.train_op)
            raise KeyboardInterrupt
    assert _steps_of(str(tmp_path / "logs2")) == [1]  # Ctrl-C saves, as before


def test_non_chief_waits_for_the_model_then_fails_naming_variables(job):
    sv = _supervisor(job, None, is_chief=False)
    assert not sv.is_chief
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as info:
        sv.prepare_or_wait_for_session(job.target, max_wait_secs=0.5)
    assert 0.5 <= time.monotonic() - start < 4.0
    names = info.value.message.split("variables never initialized: ", 1)[1].split(", ")
    assert sorted(names) == ["W", "b", "global_step"]
    with pytest.raises(RuntimeError, match="Only chief supervisor"):
        sv.start_standard_services(None)


def test_non_chief_supervisor_uses_the_chiefs_values(job, tmp_path):
    m = job.model
    chief = _supervisor(job, str(tmp_path / "logs"))
    sess = chief.prepare_or_wait_for_session(job.target)
    try:
        for _ in range(4):
            sess.run(m.train_op)
        left = sess.run([m.W, m.b, m.global_step])
        other = psrt.train.Supervisor(is_chief=False, logdir=str(tmp_path / "logs"),
                                      init_op=psrt.global_variables_initializer(),
                                      summary_op=None, global_step=m.global_step)
        with other.managed_session(job.target) as osess:
            W, b, step = osess.run([m.W, m.b, m.global_step])
        np.testing.assert_array_equal(W, left[0])
        np.testing.assert_array_equal(b, left[1])
        assert step == left[2] == 4
    finally:
        chief.stop()
        sess.close()


def test_local_init_op_runs_once_ready_for_local_init_op_reports_nothing(job, tmp_path):
    m = job.model
    marked = np.full(m.b.shape, 7.0, m.b.dtype)
    never = psrt.Variable(np.zeros(2, np.float32), name="never_initialized", collections=[])
    # Chief: local_init_op (here an assign, as a SyncReplicasOptimizer's chief_init_op would
    # be) runs after the init op, in the same preparation.
    chief = psrt.train.Supervisor(is_chief=True, logdir=None,
                                  init_op=psrt.global_variables_initializer(),
                                  local_init_op=m.b.assign(marked), summary_op=None,
                                  global_step=m.global_step)
    sess = chief.prepare_or_wait_for_session(job.target)
    try:
        np.testing.assert_array_equal(sess.run(m.b), marked)
    finally:
        chief.stop()
        sess.close()
    # A non-chief runs it too, once the model it needs is initialized.
    other = psrt.train.Supervisor(is_chief=False, logdir=None,
                                  local_init_op=m.b.assign(marked + 1), summary_op=None,
                                  global_step=m.global_step)
    with other.managed_session(job.target) as osess:
        np.testing.assert_array_equal(osess.run(m.b), marked + 1)
    # A ready_for_local_init_op that init never satisfies fails the chief, naming it (TF).
    bad = psrt.train.Supervisor(
        is_chief=True, logdir=None, init_op=psrt.global_variables_initializer(),
        local_init_op=m.b.assign(marked),
        ready_for_local_init_op=psrt.report_uninitialized_variables([never]),
        summary_op=None, global_step=m.global_step)
    with pytest.raises(RuntimeError, match="not make model ready for local_init.*"
                                           "never_initialized"):
        bad.prepare_or_wait_for_session(job.target)


# ---- summaries --------------------------------------------------------------------------------

def _events(logdir: str):
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415

    acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def _session_logs(logdir: str) -> list[tuple[int, int]]:
    from tensorboard.backend.event_processing import event_file_loader  # noqa: PLC0415

    out = []
    for name in sorted(os.listdir(logdir)):
        if "tfevents" in name:
            for e in event_file_loader.LegacyEventFileLoader(os.path.join(logdir, name)).Load():
                if e.HasField("session_log"):
                    out.append((e.session_log.status, e.step))
    return out


def _wait_for_tags(sv: psrt.train.Supervisor, logdir: str, kind: str, tags: set[str]) -> None:
    """Waits (up to 30 s) until the summary threads' first writes are in the event file."""
    deadline = time.monotonic() + 30
    while True:
        sv.summary_writer.flush()
        if tags <= set(_events(logdir).Tags()[kind]):
            return
        assert time.monotonic() < deadline, f"no {tags} in {logdir} after 30 s"
        time.sleep(0.05)


def test_chief_summary_threads_and_summary_computed(job, tmp_path):
    m = job.model
    logdir = str(tmp_path / "logs")
    psrt.summary.histogram("weights", m.W)
    psrt.summary.scalar("lr", lambda: 0.05)      # a function of no feed runs alone
    # A summary of the train op's loss cannot run alone: kept out of merge_all and written
    # by the training loop through summary_computed, as TF scripts do.
    loss_summary = psrt.summary.scalar("loss", m.train_op, collections=[])
    sv = psrt.train.Supervisor(is_chief=True, logdir=logdir,
                               init_op=psrt.global_variables_initializer(),
                               saver=psrt.train.Saver(), global_step=m.global_step,
                               save_model_secs=0, save_summaries_secs=3600)
    assert sv.summary_op.tags == ["weights", "lr"] and sv.save_summaries_secs == 3600
    assert psrt.get_default_graph().get_collection("summary_op") == [sv.summary_op]
    assert sv.summary_writer.get_logdir() == logdir
    with sv.managed_session(job.target) as sess:
        # The summary and step counter threads run at once (then hourly).
        _wait_for_tags(sv, logdir, "histograms", {"weights"})
        _wait_for_tags(sv, logdir, "scalars", {"lr", "global_step/sec"})
        losses = [sess.run([m.train_op, loss_summary]) for _ in range(3)]
        sv.summary_computed(sess, losses[-1][1])                   # at the global step: 3
        sv.summary_computed(sess, losses[0][1], global_step=100)
    acc = _events(logdir)
    assert [e.step for e in acc.Histograms("weights")] == [0]
    assert [(e.step, e.value) for e in acc.Scalars("lr")] == [(0, pytest.approx(0.05))]
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [
        (3, pytest.approx(losses[-1][0])), (100, pytest.approx(losses[0][0]))]
    assert [e.step for e in acc.Scalars("global_step/sec")] == [0]
    # START when the services started, STOP (no step) when the supervisor stopped.
    start, stop = psrt.summary.SessionLog.START, psrt.summary.SessionLog.STOP
    assert _session_logs(logdir) == [(start, 0), (stop, 0)]
    with pytest.warns(UserWarning, match="closed FileWriter"):
        sv.summary_writer.flush()                                  # stop() closed it


def test_summary_thread_error_stops_training_and_is_raised_on_exit(job, tmp_path):
    m = job.model
    psrt.summary.scalar("loss", m.train_op)      # needs its train op in the same run
    logdir = str(tmp_path / "logs")
    sv = psrt.train.Supervisor(is_chief=True, logdir=logdir,
                               init_op=psrt.global_variables_initializer(),
                               global_step=m.global_step, save_model_secs=0)
    with pytest.raises(errors.InvalidArgumentError, match="reads the loss of train op"):
        with sv.managed_session(job.target) as sess:
            deadline = time.monotonic() + 30
            while not sv.should_stop():
                assert time.monotonic() < deadline
                sess.run(m.train_op)
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(m.W)


def test_summary_writer_only_on_a_chief_with_a_logdir_or_given(job, tmp_path):
    m = job.model
    chief = _supervisor(job, None)
    assert chief.summary_writer is None and chief.summary_op is None
    sess = chief.prepare_or_wait_for_session(job.target)
    try:
        with pytest.raises(RuntimeError, match="Writing a summary requires a summary writer"):
            chief.summary_computed(sess, psrt.Summary())
    finally:
        chief.stop()
        sess.close()
    other = psrt.train.Supervisor(is_chief=False, logdir=str(tmp_path / "w"), summary_op=None,
                                  global_step=m.global_step)
    assert other.summary_writer is None and other.save_summaries_secs is None
    assert not (tmp_path / "w").exists()
    writer = psrt.summary.FileWriter(str(tmp_path / "mine"))
    given = psrt.train.Supervisor(is_chief=True, logdir=str(tmp_path / "given"),
                                  summary_op=None, summary_writer=writer,
                                  global_step=m.global_step)
    assert given.summary_writer is writer
    writer.close()


def test_stop_on_a_worker_tells_the_ps_tasks_it_is_done():
    """A script that stops its Supervisor by hand (``sv.stop()``, not managed_session) still
    lets ps tasks started by psrt-launch (PSRT_EXIT_WHEN_WORKERS_DONE) end: the worker says
    WORKER_DONE, once."""
    psrt.reset_default_graph()
    cluster = {"ps": ["127.0.0.1:0"], "worker": ["127.0.0.1:0"]}
    ps = psrt.train.Server(cluster, job_name="ps", task_index=0)
    cluster["ps"] = [f"127.0.0.1:{ps.port}"]
    worker = psrt.train.Server(cluster, job_name="worker", task_index=0)
    try:
        with psrt.device(psrt.train.replica_device_setter(cluster=worker.server_def_cluster)):
            gs = psrt.train.get_or_create_global_step()
            psrt.Variable(np.zeros(2, np.float32), name="sv_done_w")
        sv = psrt.train.Supervisor(is_chief=True, global_step=gs, save_model_secs=0,
                                   save_summaries_secs=0)
        sess = sv.prepare_or_wait_for_session(worker.target)
        assert ps._core.done_workers() == []
        sv.stop()
        assert ps._core.done_workers() == [("worker", 0)]
        sv.stop()  # idempotent
        assert ps._core.done_workers() == [("worker", 0)]
        sess.close()
    finally:
        worker.stop()
        ps.stop()
