"""Recovery end to end, across real processes (issue 4's "Done when"): a ps task killed
with SIGKILL and restarted at its address, a ps task that never comes back, a whole-job
restart from a checkpoint, and a process killed in the middle of ``Saver.save``.

Every ps task and worker is a subprocess (tests/_mts_cluster.py) on a port the OS hands
out; the ``tasks`` fixture reaps them by PID. Workers train least squares with Adagrad
under ``replica_device_setter``: W on /job:ps/task:0, b and nothing else on task 1.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import numpy as np
import pytest

import psrt

from _mts_cluster import (  # noqa: F401  (fixtures)
    LOCALHOST,
    cluster_of,
    fresh_graph,
    ps_ports,
    tasks,
)

STATE_KEYS = ("W", "b", "W/Adagrad", "b/Adagrad", "global_step")


def _checkpoint_tensors(path: str) -> dict[str, np.ndarray]:
    reader = psrt.train.load_checkpoint(path)
    return {k: reader.get_tensor(k) for k in STATE_KEYS}


def _steps_of(ckpt_dir: str) -> list[int]:
    state = psrt.train.get_checkpoint_state(ckpt_dir)
    return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


# ---- a ps task killed and restarted ----------------------------------------------------------

@pytest.mark.slow
def test_ps_killed_at_step_120_and_restarted_3s_later(tasks, tmp_path):
    ckpt = str(tmp_path / "train")
    record = str(tmp_path)
    ps = tasks.ps(2, workers=2)
    ports = ps_ports(ps)
    chief = tasks.worker("chief", ps, 2, 0, checkpoint_dir=ckpt, save_checkpoint_steps=50,
                         last_step=300, step_sleep=0.005, init_seed=7, report_step=120,
                         record_dir=record)
    # The non-chief holds back 0.5 s after its re-created session, so nothing trains between
    # the chief's restore and the chief's read of the restored state.
    other = tasks.worker("worker1", ps, 2, 1, last_step=300, step_sleep=0.005,
                         recovery_pause=0.5)
    devices = chief.expect("devices")
    assert (devices["W"], devices["b"]) == ("/job:ps/task:0", "/job:ps/task:1")

    reached = chief.expect("reached", timeout=30)["step"]
    assert 120 <= reached < 140
    ps[1].kill9()
    killed_at = time.time()
    # The checkpoint there is while ps 1 is down (training stopped): the one the chief
    # restores b from. (Once recovered, the chief saves again at once.)
    time.sleep(0.5)
    before = str(tmp_path / "before-restart.ckpt")
    shutil.copyfile(psrt.train.latest_checkpoint(ckpt), before)
    time.sleep(2.5)
    restarted = tasks.ps_task(1, 2, 2, port=ports[1])
    assert restarted.expect("ready")["port"] == ports[1]

    recovered = chief.expect("recovered", timeout=30)
    assert recovered["t"] - killed_at >= 3.0
    chief.expect_exit(0, timeout=60)
    other.expect_exit(0, timeout=60)
    assert chief.expect("done")["last"] >= 300
    assert other.expect("done")["last"] >= 300
    assert other.expect("session", nth=2)["step"] >= recovered["step"]

    # The chief restored only what ps 1 lost (b and its accumulator) from the latest
    # checkpoint there was, the one of step ~100; W, its accumulator and the global step,
    # which ps 0 still held, kept their newer values (issue 22 item 5; TF would roll them back
    # too: see tests/test_recovery_keeps_ps_state.py).
    saved = _checkpoint_tensors(before)
    assert 100 <= int(saved["global_step"]) <= reached
    assert recovered["step"] >= reached
    pulled = np.load(os.path.join(record, f"pulled-{recovered['n']}.npz"))
    assert sorted(pulled.files) == sorted(STATE_KEYS)
    for k in ("b", "b/Adagrad"):
        np.testing.assert_array_equal(pulled[k], saved[k], err_msg=k)
    assert not np.array_equal(pulled["W"], saved["W"])
    assert np.all(pulled["W/Adagrad"] > saved["W/Adagrad"])
    # Trained state, not the initial one: accumulators grew from 0.1.
    assert saved["W/Adagrad"].min() > 0.1 and saved["b/Adagrad"].min() > 0.1
    # After the restart the chief kept saving every 50 steps, and once more at its end (the
    # global step then: 300, or 301 when the other worker's last step came first).
    steps = _steps_of(ckpt)
    assert steps[-1] >= chief.expect("done")["last"] >= 300
    assert psrt.train.latest_checkpoint(ckpt) == os.path.join(ckpt, f"model.ckpt-{steps[-1]}")
    assert all(b - a <= 52 for a, b in zip(steps, steps[1:])), steps


@pytest.mark.slow
def test_ps_that_never_comes_back_fails_workers_within_connect_timeout(tasks, tmp_path):
    ps = tasks.ps(2, workers=2)
    port1 = ps_ports(ps)[1]
    common = dict(last_step=100000, step_sleep=0.005, connect_timeout_secs=3)
    chief = tasks.worker("chief", ps, 2, 0, checkpoint_dir=str(tmp_path / "train"),
                         save_checkpoint_steps=50, report_step=30, init_seed=3, **common)
    other = tasks.worker("worker1", ps, 2, 1, **common)
    chief.expect("reached", timeout=30)
    other.expect("first_step", timeout=30)
    ps[1].kill9()
    killed_at = time.time()
    for w in (chief, other):
        w.expect_exit(1, timeout=20)
        err = w.expect("error")
        assert err["type"] == "UnavailableError", err
        assert "/job:ps/task:1" in err["message"], err
        assert f"{LOCALHOST}:{port1}" in err["message"], err
        assert "did not accept a connection within 3 s" in err["message"], err
        # Bounded: the 3 s connect timeout (plus one connect attempt), never a hang.
        assert 2.5 <= err["t"] - killed_at < 8.0, err
    assert ps[0].proc.poll() is None


# ---- a whole-job restart ---------------------------------------------------------------------

@pytest.mark.slow
def test_whole_job_restart_resumes_from_checkpoint_150(tasks, tmp_path):
    ckpt = str(tmp_path / "train")

    def job(name: str, **config):
        ps = tasks.ps(2, workers=1)
        chief = tasks.worker(name, ps, 1, 0, checkpoint_dir=ckpt, save_checkpoint_steps=50,
                             init_seed=11, **config)
        chief.expect_exit(0, timeout=60)
        for p in ps:  # the whole job goes away, ps tasks included
            assert p.reap() == 0
        return chief

    first = job("first", last_step=150)
    assert first.expect("done")["last"] == 150
    assert _steps_of(ckpt) == [0, 50, 100, 150]
    assert psrt.train.latest_checkpoint(ckpt) == os.path.join(ckpt, "model.ckpt-150")
    at_150 = _checkpoint_tensors(os.path.join(ckpt, "model.ckpt-150"))
    assert int(at_150["global_step"]) == 150

    # Restarted with the same last_step: restored at 150, stops before running a step.
    again = job("again", last_step=150)
    session = again.expect("session")
    assert session["step"] == 150
    for k in STATE_KEYS:
        np.testing.assert_array_equal(np.asarray(session["state"][k], at_150[k].dtype),
                                      at_150[k], err_msg=k)
    assert again.expect("done")["runs"] == 0
    assert again.event("first_step") is None
    assert again.event("init") is None  # restored, never initialized
    assert psrt.train.latest_checkpoint(ckpt) == os.path.join(ckpt, "model.ckpt-150")

    # Restarted with num_steps=50: exactly 50 more steps, from the checkpoint's values.
    more = job("more", num_steps=50)
    done = more.expect("done")
    assert (done["runs"], done["first"], done["last"]) == (50, 151, 200)
    seen = more.expect("first_step")["seen"]
    np.testing.assert_array_equal(np.asarray(seen["W"], np.float32), at_150["W"])
    np.testing.assert_array_equal(np.asarray(seen["b"], np.float32), at_150["b"])
    assert more.event("init") is None
    assert psrt.train.latest_checkpoint(ckpt) == os.path.join(ckpt, "model.ckpt-200")
    # The restored saver went on with the state file's list (TF's recover_last_checkpoints).
    assert _steps_of(ckpt) == [0, 50, 100, 150, 200]
    assert int(_checkpoint_tensors(os.path.join(ckpt, "model.ckpt-200"))["global_step"]) == 200


# ---- a process killed during Saver.save ------------------------------------------------------

BIG = 8 * 1024 * 1024  # float32 elements: 32 MiB, and as much again for the accumulator


@pytest.mark.slow
def test_sigkill_during_saver_save_leaves_loadable_latest_checkpoint(tasks, tmp_path, fresh_graph):
    ckpt = tmp_path / "train"
    ckpt.mkdir()
    ps = tasks.ps(1, workers=1)
    saver_proc = tasks.worker("saver", ps, 1, 0, role="saver", size=BIG, save_dir=str(ckpt))
    first = saver_proc.expect("saved", timeout=60)
    saver_proc.expect("saving", nth=2, timeout=60)
    # Kill as soon as the second save's temporary data file appears on disk.
    deadline = time.monotonic() + 30
    temp = None
    while temp is None and time.monotonic() < deadline:
        temp = next((f for f in os.listdir(ckpt) if ".psrt-tmp-" in f), None)
    assert temp is not None, saver_proc.stderr_tail()
    os.kill(saver_proc.pid, signal.SIGKILL)
    saver_proc.expect_exit(-signal.SIGKILL, timeout=10)
    assert len(saver_proc.all("saved")) == 1, "the second save finished before the kill"

    latest = psrt.train.latest_checkpoint(str(ckpt))
    assert latest == first["path"] == str(ckpt / "model.ckpt-1")
    assert not (ckpt / "model.ckpt-2").exists()
    reader = psrt.train.load_checkpoint(str(ckpt))
    assert reader.get_variable_to_shape_map() == {"big": [BIG], "big/Adagrad": [BIG],
                                                  "global_step": []}
    assert int(reader.get_tensor("global_step")) == 1
    for name, total in first["sums"].items():
        assert float(reader.get_tensor(name).astype(np.float64).sum()) == total

    # Restored through a Session + Saver into a fresh ps task: the same values.
    ps2 = tasks.ps(1, workers=1)
    server = psrt.train.Server(cluster_of(ps2, 1), job_name="worker", task_index=0)
    try:
        with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
            big = psrt.Variable(np.zeros(BIG, np.float32), name="big")
            gs = psrt.train.get_or_create_global_step()
        opt = psrt.train.AdagradOptimizer(0.1)
        opt.minimize(lambda v: (0.0, [v]), var_list=[big], global_step=gs)
        with psrt.Session(server.target) as sess:
            psrt.train.Saver().restore(sess, latest)
            value, acc, step = sess.run([big, opt.get_slot(big, "accumulator"), gs])
        assert step == 1
        np.testing.assert_array_equal(value, reader.get_tensor("big"))
        np.testing.assert_array_equal(acc, reader.get_tensor("big/Adagrad"))
    finally:
        server.stop()


# ---- a ps task that stops answering (SIGSTOP: a hung process or a host gone silent) --------

def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def _wait_for(pred, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, what
        time.sleep(0.05)
    return time.monotonic() - t0


@pytest.mark.slow
def test_stopped_ps_is_noticed_by_every_worker_and_the_job_recovers(tasks, tmp_path):
    # Before heartbeats the workers made no step and raised nothing while the ps was stopped,
    # for as long as it stayed stopped. Now each one's pending run fails within the heartbeat
    # timeout (2 s) naming the task, the workers wait for it, and after SIGCONT the job goes on
    # and reaches its last step.
    ckpt = str(tmp_path / "train")
    ps = tasks.ps(2, workers=2)
    common = dict(last_step=400, step_sleep=0.005, heartbeat_timeout_secs=2.0)
    chief = tasks.worker("chief", ps, 2, 0, checkpoint_dir=ckpt, save_checkpoint_steps=50,
                         init_seed=7, report_step=100, **common)
    other = tasks.worker("worker1", ps, 2, 1, **common)
    chief.expect("reached", timeout=30)
    os.kill(ps[1].pid, signal.SIGSTOP)
    try:
        _wait_for(lambda: _stopped(ps[1].pid), 5, "ps1 did not stop")
        needle = "/job:ps/task:1 at 127.0.0.1:%d did not answer a heartbeat within 2 s" % \
            ps_ports(ps)[1]
        for w in (chief, other):
            waited = _wait_for(lambda: needle in w.stderr_tail(200), 10,
                               f"{w.name} did not report the silent ps: {w.stderr_tail()}")
            assert waited < 6.0, (w.name, waited)
        assert chief.event("done") is None and other.event("done") is None
    finally:
        os.kill(ps[1].pid, signal.SIGCONT)
    for w in (chief, other):
        assert w.expect("done", timeout=60)["last"] >= 400
        w.expect_exit(0)
    assert chief.expect("session", nth=2)["n"] == 2  # the session was re-created


@pytest.mark.slow
def test_ps_stopped_for_good_ends_the_worker_with_one_clear_error(tasks):
    ps = tasks.ps(1, workers=1)
    worker = tasks.worker("chief", ps, 1, 0, last_step=100000, step_sleep=0.005,
                          heartbeat_timeout_secs=1.0, connect_timeout_secs=3.0, init_seed=1)
    worker.expect("first_step", timeout=30)
    os.kill(ps[0].pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        err = worker.expect("error", timeout=30)
        elapsed = time.monotonic() - t0
        assert worker.wait(10) == 1
    finally:
        os.kill(ps[0].pid, signal.SIGCONT)
    assert err["type"] == "UnavailableError"
    assert "/job:ps/task:0" in err["message"] and "3 s" in err["message"], err
    assert "\n" not in err["message"]
    assert 3.0 < elapsed < 15.0, elapsed  # heartbeat 1 s, then the 3 s connect deadline
