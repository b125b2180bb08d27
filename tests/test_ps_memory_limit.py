"""A ps task's memory limit (issue 22 item 2; csrc/memory_account.h, psrt.runtime.memory_limit):
registrations, table growth and initial values past it are refused with ResourceExhaustedError
naming the variable, the bytes asked and the limit, before anything is allocated.

Every test drives real ps processes (tests/_cluster.py's ``ps`` child: a psrt.train.Server
that reads PSRT_PS_MEMORY_LIMIT) over TCP. The 1 GiB test puts the ps in a real cgroup (v1
memory.limit_in_bytes or v2 memory.max) when this machine lets the test create one; else it
emulates one with PSRT_PS_MEMORY_LIMIT=1G and RLIMIT_AS, and says which in its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from _cluster import LOCALHOST, _child_env, fresh_graph, read_line, reap, spawn  # noqa: F401
import psrt
from psrt import _core, errors
from psrt.runtime import memory_limit as ml

MiB = 1 << 20
GiB = 1 << 30


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _start_ps(env: dict[str, str], preexec=None) -> tuple[subprocess.Popen, str]:
    cluster = {"ps": [f"{LOCALHOST}:0"]}
    if preexec is None:
        proc = spawn("ps", json.dumps(cluster), 0, env=env)
    else:
        full = _child_env()
        full.update(env)
        proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__),
                                                              "_cluster.py"),
                                 "ps", json.dumps(cluster), "0"], stdout=subprocess.PIPE,
                                text=True, env=full, preexec_fn=preexec)
    try:
        port = int(read_line(proc, "READY "))
    except BaseException:
        reap(proc)
        raise
    return proc, f"{LOCALHOST}:{port}"


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        reap(p)


def _client(address: str) -> _core.Client:
    c = _core.Client("worker", 0)
    c.connect(0, address, 10.0)
    return c


# ---- the limit's forms --------------------------------------------------------------------

@pytest.mark.parametrize("text,want", [("1073741824", GiB), ("1G", GiB), ("512m", 512 * MiB),
                                       ("64K", 64 << 10), ("2GiB", 2 * GiB), ("1T", 1 << 40),
                                       (" 3 G ", 3 * GiB), ("0", 0)])
def test_memory_sizes_parse_with_binary_suffixes(text, want):
    assert ml.parse_memory_size(text) == want


@pytest.mark.parametrize("bad", ["lots", "1.5G", "-1", "1P", "G", ""])
def test_a_bad_memory_size_names_the_variable_and_the_valid_forms(bad):
    with pytest.raises(ValueError) as e:
        ml.parse_memory_size(bad)
    msg = str(e.value)
    assert "PSRT_PS_MEMORY_LIMIT" in msg and repr(bad) in msg
    assert "K, M, G or T" in msg and "1073741824" in msg


def test_config_then_env_then_the_machine(monkeypatch):
    monkeypatch.setenv("PSRT_PS_MEMORY_LIMIT", "3M")
    assert ml.resolve_memory_limit(5 * MiB) == 5 * MiB
    assert ml.resolve_memory_limit(None) == 3 * MiB
    monkeypatch.delenv("PSRT_PS_MEMORY_LIMIT")
    available = min(v for v in (ml.cgroup_memory_limit(), ml.physical_memory()) if v)
    assert ml.resolve_memory_limit(None) == available - max(available // 8, 128 * MiB)
    with pytest.raises(ValueError, match="ps_memory_limit_bytes"):
        psrt.ConfigProto(ps_memory_limit_bytes=-1)


def test_a_ps_started_with_a_bad_limit_exits_naming_it():
    env = _child_env()
    env["PSRT_PS_MEMORY_LIMIT"] = "12 apples"
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "_cluster.py"),
                           "ps", json.dumps({"ps": [f"{LOCALHOST}:0"]}), "0"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "READY" not in proc.stdout
    assert "PSRT_PS_MEMORY_LIMIT='12 apples' is not a memory size" in proc.stderr
    assert "K, M, G or T" in proc.stderr


# ---- refused before allocating ------------------------------------------------------------

def test_a_register_past_the_limit_allocates_nothing_and_the_rest_trains(procs, fresh_graph):
    proc, address = _start_ps({"PSRT_PS_MEMORY_LIMIT": "64M"})
    procs.append(proc)
    cluster = {"ps": [address]}
    config = psrt.ConfigProto(cluster_def=cluster)
    with psrt.device("/job:ps/task:0"):
        W = psrt.Variable(np.ones((4, 3), np.float32), name="W")
    loss = psrt.reduce_sum(W * W)
    train = psrt.train.AdamOptimizer(0.1).minimize(loss)
    with psrt.Session(f"grpc://{address}", config=config) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train)
        w_before = sess.run(W)
    rss_before = _rss(proc.pid)

    # One small REGISTER asking for 3 x 32 MiB (value and Adam's two slots) of a 64 MiB limit.
    c = _client(address)
    try:
        with pytest.raises(errors.ResourceExhaustedError) as e:
            c.register([(0, "big", "float32", [8 * MiB], "Adam",
                         {"learning_rate": 0.1, "initialize": 0.0}, None)])
        msg = e.value.message
        assert "'big'" in msg and str(96 * MiB) in msg and str(64 * MiB) in msg
        assert "nothing was allocated" in msg and "PSRT_PS_MEMORY_LIMIT" in msg
        names = {v["name"] for v in c.list_variables(0)}
        # The same through a streamed initial value (32 MiB of bytes follow the spec).
        with pytest.raises(errors.ResourceExhaustedError, match="'big2'.*67108864"):
            c.register([(0, "big2", "float32", [8 * MiB], "Adam",
                         {"learning_rate": 0.1}, np.zeros(8 * MiB, np.float32))])
        names_after = {v["name"] for v in c.list_variables(0)}
    finally:
        c.close()
    assert "big" not in names and "big2" not in names_after
    grew = _rss(proc.pid) - rss_before
    print(f"ps RSS grew by {grew / MiB:.1f} MiB across two refused 96 MiB registrations")
    assert grew < 16 * MiB, grew  # 96 MiB would have been written (zeroed) had it allocated

    # The variable already there is intact and still trains.
    psrt.reset_default_graph()
    with psrt.device("/job:ps/task:0"):
        W = psrt.Variable(np.ones((4, 3), np.float32), name="W")
    train = psrt.train.AdamOptimizer(0.1).minimize(psrt.reduce_sum(W * W))
    with psrt.Session(f"grpc://{address}", config=config) as sess:
        np.testing.assert_array_equal(sess.run(W), w_before)
        sess.run(train)
        w_after = sess.run(W)
    assert np.all(w_after < w_before)


def test_a_table_growing_past_the_limit_is_refused_and_keeps_its_rows(procs):
    proc, address = _start_ps({"PSRT_PS_MEMORY_LIMIT": "8M"})
    procs.append(proc)
    c = _client(address)
    try:
        dim = 256  # 1 KiB rows, Adagrad: 2 KiB + metadata per row of capacity
        [(h, _)] = c.register([(0, "emb", "float32", [0, dim], "Adagrad",
                                {"learning_rate": 0.5, "slot_init": 0.1, "table": 1,
                                 "initialize": 1.0}, None)])
        ids = np.arange(1000, dtype=np.int64)
        out = np.empty((1000, dim), np.float32)
        c.pull_rows(h, ids, out)
        many = np.arange(1000, 5000, dtype=np.int64)
        with pytest.raises(errors.ResourceExhaustedError) as e:
            c.pull_rows(h, many, np.empty((4000, dim), np.float32))
        msg = e.value.message
        assert "'emb'" in msg and str(8 * MiB) in msg and "nothing was created" in msg
        got, *_ = c.table_export(h, 0, 10000)
        assert sorted(got.tolist()) == list(range(1000))
        c.push_sparse(h, ids[:10], np.ones((10, dim), np.float32), None, -1, 0)
        again = np.empty((10, dim), np.float32)
        c.pull_rows(h, ids[:10], again)
        assert np.all(again < out[:10])
    finally:
        c.close()


# ---- a 1 GiB ps and a 3 GiB variable -------------------------------------------------------

def _own_memory_cgroup() -> tuple[str, str] | None:
    """(directory to create a child cgroup in, the limit file's name), if writable."""
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
                base, leaf = "/sys/fs/cgroup" + path, "memory.max"
            elif "memory" in controllers.split(","):
                base, leaf = "/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes"
            else:
                continue
            if os.access(base, os.W_OK):
                return base, leaf
    return None


def test_a_ps_in_one_gib_refuses_a_three_gib_variable_instead_of_dying(procs):
    found = _own_memory_cgroup()
    group = None
    if found is not None:
        base, leaf = found
        group = os.path.join(base, f"psrt-test-{os.getpid()}")
        try:
            os.mkdir(group)
            with open(os.path.join(group, leaf), "w") as f:
                f.write(str(GiB))
        except OSError:
            if os.path.isdir(group):
                os.rmdir(group)
            group = None
    try:
        if group is not None:
            mode = f"a real cgroup ({group}/{leaf} = 1 GiB); the limit is the ps's default"
            procs_file = os.path.join(group, "cgroup.procs")

            def preexec() -> None:
                with open(procs_file, "w") as f:
                    f.write(str(os.getpid()))
            env: dict[str, str] = {}
            want_limit = GiB - 128 * MiB
        else:
            mode = "emulated: PSRT_PS_MEMORY_LIMIT=1G and RLIMIT_AS (no writable cgroup)"

            def preexec() -> None:
                import resource  # noqa: PLC0415

                # (ASan reserves terabytes of address space: no RLIMIT_AS under it.)
                if not os.environ.get("PSRT_SANITIZED"):
                    resource.setrlimit(resource.RLIMIT_AS, (4 * GiB, 4 * GiB))
            env = {"PSRT_PS_MEMORY_LIMIT": "1G"}
            want_limit = GiB
        print(mode)
        env["PSRT_PS_MEMORY_LIMIT"] = env.get("PSRT_PS_MEMORY_LIMIT", "")
        proc, address = _start_ps(env, preexec)
        procs.append(proc)
        c = _client(address)
        try:
            with pytest.raises(errors.ResourceExhaustedError) as e:
                c.register([(0, "huge", "float32", [3 * GiB // 4], "GradientDescent",
                             {"learning_rate": 0.1, "initialize": 1.0}, None)])
            msg = e.value.message
            assert "'huge'" in msg and str(3 * GiB) in msg and str(want_limit) in msg
            # Still alive, and it still serves what fits.
            [(h, ok)] = c.register([(0, "fits", "float32", [1024], "GradientDescent",
                                     {"learning_rate": 0.5}, np.full(1024, 2, np.float32))])
            assert ok
            c.push([h], [np.ones(1024, np.float32)])
            got = np.empty(1024, np.float32)
            c.pull([h], [got])
            np.testing.assert_array_equal(got, np.full(1024, 1.5, np.float32))
        finally:
            c.close()
        time.sleep(0.2)
        assert proc.poll() is None, f"the ps died ({mode})"
    finally:
        for p in procs:
            reap(p)
        if group is not None:
            for _ in range(50):
                try:
                    os.rmdir(group)
                    break
                except OSError:
                    time.sleep(0.1)


def test_config_proto_limit_and_a_synchronous_variable_counts_its_gradient_sum(monkeypatch):
    # ConfigProto's limit wins over the environment (set here to something far larger).
    monkeypatch.setenv("PSRT_PS_MEMORY_LIMIT", "1G")
    server = psrt.train.Server({"ps": [f"{LOCALHOST}:0"]}, job_name="ps", task_index=0,
                               config=psrt.ConfigProto(ps_memory_limit_bytes=3 * MiB))
    try:
        c = _client(f"{LOCALHOST}:{server.port}")
        try:
            # 1 MiB value + 1 MiB Momentum slot fit ...
            c.register([(0, "async", "float32", [MiB // 4], "Momentum",
                         {"learning_rate": 0.1, "momentum": 0.9}, None)])
            # ... but a synchronous one also holds its step's gradient sum: 3 MiB > 1 MiB left.
            with pytest.raises(errors.ResourceExhaustedError) as e:
                c.register([(0, "sync", "float32", [MiB // 4], "Momentum",
                             {"learning_rate": 0.1, "momentum": 0.9,
                              "replicas_to_aggregate": 2, "total_num_replicas": 2}, None)])
            msg = e.value.message
            # asks 3 MiB (value, slot, sum) of a 3 MiB limit, 2 MiB of it already held
            assert f"asks for {3 * MiB} bytes" in msg and f"limit is {3 * MiB} bytes" in msg
            assert "synchronous gradient sum" in msg and f"{2 * MiB} are already held" in msg
        finally:
            c.close()
    finally:
        server.stop()
