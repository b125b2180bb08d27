"""Recovery keeps what the ps tasks still hold (issue 22 item 5), across real processes.

A re-created session restores from the checkpoint only the variables whose ps task lost them
(training/session_manager.py ``_restore_lost``): (a) a chief killed with SIGKILL and restarted
continues from the ps tasks' values, not the older checkpoint; (b) one ps task killed and
restarted: only its variables come from the checkpoint, the other task's keep their newer
values; (c) a healed partition (emulated by a TCP proxy between the worker and a ps task that
the test pauses, since this is one network namespace: ``ip netns`` needs privileges a CI
runner lacks) loses no step, and training resumes within one heartbeat interval of the ps
being reachable again.

TF r1.15's SessionManager.prepare_session restores every variable whenever a checkpoint
exists (tensorflow/python/training/session_manager.py, ``_restore_checkpoint``), so in TF
both (a) and (b) roll the whole model back to the checkpoint. TF must: its ps tasks' state is
only trustworthy through the checkpoint (a restarted TF ps has fresh, re-initialized
variables and TF has no per-task "lost" signal). psrt's ps tasks report which variables are
uninitialized, i.e. lost, so the newer values the others hold are kept.

Every ps task and worker is a subprocess (tests/_mts_cluster.py); the ``tasks`` fixture reaps
them by PID. W (and global_step) live on /job:ps/task:0, b on task 1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import psrt
from psrt import _core

from _mts_cluster import (  # noqa: F401  (fixtures)
    D,
    K,
    LOCALHOST,
    Tasks,
    fresh_graph,
    ps_ports,
    tasks,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def _read_ps(address: str, names: list[str]) -> dict[str, np.ndarray]:
    """What one ps task holds now, over a raw client (registering an existing name with its
    dtype/shape/optimizer finds it and changes nothing)."""
    specs = {"W": ("float32", [D, K], "Adagrad"), "b": ("float32", [K], "Adagrad"),
             "global_step": ("int64", [], "None")}
    c = _core.Client("worker", 97)
    try:
        c.connect(0, address, 10.0)
        out: dict[str, np.ndarray] = {}
        for name in names:
            dtype, shape, opt = specs[name]
            [(h, initialized)] = c.register([(0, name, dtype, shape, opt, {}, None)])
            assert initialized, f"{name} is not initialized on {address}"
            if name == "global_step":
                out[name] = np.int64(c.step_read(h))
                continue
            for slot, key in ((0, name), (1, f"{name}/Adagrad")):
                buf = np.empty(shape, np.float32)
                c.pull([h], [buf], slot=slot)
                out[key] = buf
        return out
    finally:
        c.close()


def _checkpoint(path: str) -> dict[str, np.ndarray]:
    reader = psrt.train.load_checkpoint(path)
    return {k: reader.get_tensor(k) for k in ("W", "b", "W/Adagrad", "b/Adagrad", "global_step")}


def _ckpt_step(ckpt_dir: str) -> int:
    return int(psrt.train.latest_checkpoint(ckpt_dir).rsplit("-", 1)[1])


# ---- (a) the chief restarted -----------------------------------------------------------------

@pytest.mark.slow
def test_a_restarted_chief_continues_from_the_ps_values_not_the_checkpoint(tasks, tmp_path):
    ckpt = str(tmp_path / "train")
    ps = tasks.ps(2, workers=1)
    addr = [f"{LOCALHOST}:{p}" for p in ps_ports(ps)]
    common = dict(checkpoint_dir=ckpt, save_checkpoint_steps=100, step_sleep=0.005,
                  init_seed=7)
    chief = tasks.worker("chief", ps, 1, 0, last_step=100000, report_step=140, **common)
    chief.expect("reached", timeout=60)
    chief.kill9()
    held = {**_read_ps(addr[0], ["W", "global_step"]), **_read_ps(addr[1], ["b"])}
    saved_step = _ckpt_step(ckpt)
    assert saved_step == 100 and int(held["global_step"]) >= 140

    again = tasks.worker("chief2", ps, 1, 0, last_step=int(held["global_step"]) + 20, **common)
    session = again.expect("session", timeout=60)
    # The first thing the restarted chief sees is what the ps tasks held, exactly.
    assert session["step"] == int(held["global_step"])
    for k in ("W", "b", "W/Adagrad", "b/Adagrad"):
        np.testing.assert_array_equal(np.asarray(session["state"][k], np.float32), held[k],
                                      err_msg=k)
    # ... and not the checkpoint of step 100 (it differs: 40+ Adagrad steps later).
    saved = _checkpoint(os.path.join(ckpt, f"model.ckpt-{saved_step}"))
    assert not np.array_equal(saved["W"], held["W"])
    again.expect_exit(0, timeout=60)
    assert again.expect("done")["last"] >= int(held["global_step"]) + 20


# ---- (b) one ps task restarted ---------------------------------------------------------------

@pytest.mark.slow
def test_b_only_the_restarted_ps_task_is_restored(tasks, tmp_path):
    ckpt = str(tmp_path / "train")
    ps = tasks.ps(2, workers=1)
    ports = ps_ports(ps)
    addr = [f"{LOCALHOST}:{p}" for p in ports]
    chief = tasks.worker("chief", ps, 1, 0, checkpoint_dir=ckpt, save_checkpoint_steps=100,
                         last_step=100000, step_sleep=0.005, init_seed=7, report_step=140)
    chief.expect("reached", timeout=60)
    ps[1].kill9()
    time.sleep(1.0)  # the chief's step failed at once (connection reset): it waits now
    held0 = _read_ps(addr[0], ["W", "global_step"])
    saved_step = _ckpt_step(ckpt)
    assert saved_step == 100 and int(held0["global_step"]) >= 140
    tasks.ps_task(1, 2, 1, port=ports[1]).expect("ready")

    session = chief.expect("session", nth=2, timeout=60)
    saved = _checkpoint(os.path.join(ckpt, f"model.ckpt-{saved_step}"))
    state = {k: np.asarray(v) for k, v in session["state"].items()}
    # ps 0 never restarted: W, its accumulator and the global step keep their newer values.
    assert session["step"] == int(held0["global_step"])
    for k in ("W", "W/Adagrad"):
        np.testing.assert_array_equal(state[k].astype(np.float32), held0[k], err_msg=k)
    assert not np.array_equal(saved["W"], held0["W"])
    # ps 1 lost b: b and its accumulator come from the checkpoint.
    for k in ("b", "b/Adagrad"):
        np.testing.assert_array_equal(state[k].astype(np.float32), saved[k], err_msg=k)
    chief.reap()


# ---- (c) a partition that heals --------------------------------------------------------------

class Proxy:
    """A TCP proxy process in front of one ps task: ``pause`` drops every byte either way
    (connections stay open; one opened or used during the pause never carries a byte again:
    what a partition's dropped packets leave behind), ``resume`` lets new connections
    through again."""

    def __init__(self, target_port: int) -> None:
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "proxy",
                                      str(target_port)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def _say(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == word

    def pause(self) -> None:
        self._say("pause")

    def resume(self) -> None:
        self._say("resume")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


@pytest.mark.slow
def test_c_a_healed_partition_loses_no_step_and_resumes_within_a_heartbeat(tasks, tmp_path):
    ps = tasks.ps(1, workers=1, behind_proxy=True)
    proxy = Proxy(ps_ports(ps)[0])
    try:
        cluster = {"ps": [f"{LOCALHOST}:{proxy.port}"], "worker": [f"{LOCALHOST}:0"]}
        heartbeat = 5.0
        w = tasks.start("chief", "worker", {
            "cluster": cluster, "task_index": 0, "checkpoint_dir": str(tmp_path / "train"),
            "save_checkpoint_steps": 100000, "last_step": 100000, "step_sleep": 0.01,
            "init_seed": 7, "report_step": 50, "heartbeat_timeout_secs": heartbeat,
            "connect_timeout_secs": 120, "report_every": 1})
        w.expect("reached", timeout=60)
        proxy.pause()
        paused_at = time.time()
        # The heartbeat notices within heartbeat_timeout_secs; the monitored session then
        # re-creates its session, which waits for the ps task to answer again.
        time.sleep(heartbeat + 3.0)
        steps = w.all("step")
        before = max(e["step"] for e in steps)
        assert steps[-1]["t"] < paused_at + 1.0  # nothing trained during the partition
        proxy.resume()
        healed_at = time.time()
        first_after = w.expect("step", nth=len(steps) + 1, timeout=60)
        session = w.expect("session", nth=2, timeout=5)
        # No step lost: the ps task held the model all along, nothing was restored.
        assert session["step"] >= before
        resumed = first_after["t"] - healed_at
        print(f"partition {healed_at - paused_at:.1f} s; training resumed {resumed:.2f} s "
              f"after it healed (heartbeat {heartbeat:g} s)")
        assert first_after["step"] >= before
        assert resumed < heartbeat / 4 + 1.5, resumed  # one ping interval (1 s) + margin
    finally:
        proxy.close()


# ---- a connect whose SYNs are dropped ---------------------------------------------------------

def _netns_with_a_silent_peer():
    """A network namespace behind a veth pair whose far end is down: packets to 10.231.K.2
    are dropped without an answer (a partition, for real). None when this process may not
    make one (not root, no ``ip``)."""
    name = f"psrt{os.getpid() % 100000}"
    k = os.getpid() % 250 + 1
    host, peer = f"vh{name[4:]}", f"vn{name[4:]}"
    cmds = [["ip", "netns", "add", name],
            ["ip", "link", "add", host, "type", "veth", "peer", "name", peer],
            ["ip", "link", "set", peer, "netns", name],
            ["ip", "addr", "add", f"10.231.{k}.1/30", "dev", host],
            ["ip", "link", "set", host, "up"],
            ["ip", "netns", "exec", name, "ip", "addr", "add", f"10.231.{k}.2/30", "dev", peer]]
    try:
        for c in cmds:
            subprocess.run(c, check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        subprocess.run(["ip", "link", "del", host], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        return None
    return name, host, f"10.231.{k}.2"


def test_a_connect_to_a_peer_whose_packets_are_dropped_ends_at_its_deadline():
    # Before: a blocking connect() waited out the kernel's SYN retries (~2 min) whatever the
    # attempt's deadline, so a session could not retry the moment a partition healed.
    made = _netns_with_a_silent_peer()
    if made is None:
        pytest.skip("cannot create a network namespace here (needs root and iproute2)")
    name, host, address = made
    try:
        c = _core.Client("worker", 0)
        t0 = time.monotonic()
        with pytest.raises(psrt.errors.UnavailableError) as e:
            c.connect(0, f"{address}:45678", 1.0)
        took = time.monotonic() - t0
        c.close()
        print(f"connect to a silent peer gave up after {took:.2f} s (deadline 1 s)")
        assert 0.9 <= took < 3.0, took
        assert "timed out" in e.value.message, e.value.message
    finally:
        subprocess.run(["ip", "link", "del", host], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


# ---- the proxy child ---------------------------------------------------------------------------

def proxy_main(target_port: str) -> None:
    """While paused every byte either way is dropped, and a connection that lost bytes (or
    was opened during the pause) stays dead: its stream cannot be resumed, as a TCP
    connection whose packets a partition dropped waits out its retransmission backoff."""
    up = threading.Event()
    up.set()
    lst = socket.socket()
    lst.bind((LOCALHOST, 0))
    lst.listen(64)
    print(lst.getsockname()[1], flush=True)

    def pump(src: socket.socket, dst: socket.socket | None, dead: list[bool]) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not up.is_set():
                    dead[0] = True
                if dead[0] or dst is None:
                    continue  # dropped
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                if s is not None:
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def serve(client: socket.socket) -> None:
        dead = [not up.is_set()]
        upstream = None
        if not dead[0]:
            try:
                upstream = socket.create_connection((LOCALHOST, int(target_port)))
            except OSError:
                client.close()
                return
            threading.Thread(target=pump, args=(upstream, client, dead), daemon=True).start()
        pump(client, upstream, dead)

    def accept() -> None:
        while True:
            c, _ = lst.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    for line in sys.stdin:
        word = line.strip()
        if word == "pause":
            up.clear()
        elif word == "resume":
            up.set()
        print(word, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "proxy":
        proxy_main(sys.argv[2])
