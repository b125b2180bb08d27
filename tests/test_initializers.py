"""Initializers run on the ps task (csrc/initializers.cc): each kind equals its numpy reference
(tests/_init_ref.py) for the same seed, a partitioned variable's parts on different ps tasks
make exactly the whole, bad specs are refused, and a worker that creates a big variable this
way never holds its value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from _init_ref import initial_value
from _ps_task import SRC, PsProcess
from psrt import _core, errors

SPECS = [
    {"kind": "zeros"},
    {"kind": "ones"},
    {"kind": "constant", "a": -2.5},
    {"kind": "random_uniform", "a": -0.05, "b": 0.05, "seed": 1},
    {"kind": "random_normal", "a": 0.5, "b": 2.0, "seed": 2},
    {"kind": "truncated_normal", "a": 0.0, "b": 0.1, "seed": 3},
    {"kind": "variance_scaling", "a": 1.0, "fan_mode": "fan_avg", "distribution": "uniform",
     "seed": 4},  # glorot_uniform
    {"kind": "variance_scaling", "a": 1.0, "fan_mode": "fan_avg",
     "distribution": "truncated_normal", "seed": 5},  # glorot_normal
    {"kind": "variance_scaling", "a": 2.0, "fan_mode": "fan_in",
     "distribution": "untruncated_normal", "seed": 6},
    {"kind": "variance_scaling", "a": 1.0, "fan_mode": "fan_out", "distribution": "uniform",
     "seed": 7},
]


@pytest.fixture(scope="module")
def ps_pair():
    procs = [PsProcess(task=0), PsProcess(task=1)]
    yield procs
    for p in procs:
        p.stop()


_names = iter(range(1_000_000))


def client(*addresses: str) -> _core.Client:
    c = _core.Client("worker", 0)
    c.timeout = 30.0
    for shard, a in enumerate(addresses):
        c.connect(shard, a, 10.0)
    return c


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", SPECS, ids=[s["kind"] + str(s.get("seed", "")) for s in SPECS])
def test_each_kind_equals_its_numpy_reference(ps_pair, spec, dtype):
    c = client(ps_pair[0].address)
    try:
        shape = [3, 5, 37, 11]  # a conv-like shape: fans over the receptive field
        [(h, initialized)] = c.register([(0, f"v{next(_names)}", dtype, shape, "", {}, spec)])
        assert initialized
        out = np.empty(shape, dtype)
        c.pull([h], [out])
        want = initial_value(spec, shape, dtype)
        tol = 1e-6 if dtype == "float32" else 1e-13
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
        if spec["kind"] in ("random_normal", "truncated_normal"):
            assert 0.5 * spec["b"] < out.std() < 1.5 * spec["b"]
        if spec["kind"] == "truncated_normal":
            assert np.abs(out - spec["a"]).max() <= 2 * spec["b"] * (1 + 1e-6)
    finally:
        c.close()


def test_parts_on_different_ps_tasks_make_the_whole(ps_pair):
    # A [1003, 16] glorot_normal table, whole on ps0 and as three row parts over ps0 and ps1
    # (fixed_size_partitioner-like: 335, 334, 334 rows): the same values, element for element.
    spec = {"kind": "variance_scaling", "a": 1.0, "fan_mode": "fan_avg",
            "distribution": "truncated_normal", "seed": 42}
    full = [1003, 16]
    c = client(ps_pair[0].address, ps_pair[1].address)
    try:
        name = f"t{next(_names)}"
        entries = [(0, name, "float32", full, "", {}, spec)]
        row = 0
        for k, rows in enumerate((335, 334, 334)):
            part = dict(spec, offset=row * 16, full_shape=full)
            entries.append((k % 2, f"{name}/part_{k}", "float32", [rows, 16], "", {}, part))
            row += rows
        handles = [h for h, _ in c.register(entries)]
        whole = np.empty(full, np.float32)
        parts = [np.empty((r, 16), np.float32) for r in (335, 334, 334)]
        c.pull(handles, [whole] + parts)
        assert np.concatenate(parts).tobytes() == whole.tobytes()
        np.testing.assert_allclose(whole, initial_value(spec, full, np.float32), rtol=1e-6,
                                   atol=1e-7)
    finally:
        c.close()


BAD = [
    ({"kind": "glorot"}, ["initializer kind 'glorot'", "random_normal"]),
    ({"kind": "variance_scaling", "fan_mode": "fan_sum"}, ["fan_mode 'fan_sum'", "fan_avg"]),
    ({"kind": "variance_scaling", "distribution": "normal"}, ["distribution 'normal'",
                                                              "untruncated_normal"]),
    ({"kind": "random_normal", "b": float("nan")}, ["must be finite"]),
    ({"kind": "zeros", "offset": 100, "full_shape": [10, 4]}, ["offset 100", "40 elements"]),
]


@pytest.mark.parametrize("spec,words", BAD, ids=[b[0]["kind"] + str(i) for i, b in enumerate(BAD)])
def test_bad_specs_are_refused_with_the_value_and_the_choices(ps_pair, spec, words):
    c = client(ps_pair[0].address)
    try:
        with pytest.raises(errors.InvalidArgumentError) as e:
            c.register([(0, f"bad{next(_names)}", "float32", [10, 4], "", {}, spec)])
        for w in words:
            assert w in e.value.message, e.value.message
    finally:
        c.close()


def test_random_initializer_of_an_int64_variable_is_refused(ps_pair):
    c = client(ps_pair[0].address)
    try:
        with pytest.raises(errors.InvalidArgumentError, match="needs float32 or float64"):
            c.register([(0, f"i{next(_names)}", "int64", [4], "", {},
                         {"kind": "random_uniform", "a": 0, "b": 1})])
        [(h, _)] = c.register([(0, f"i{next(_names)}", "int64", [4], "", {},
                                {"kind": "constant", "a": 7})])
        out = np.empty(4, np.int64)
        c.pull([h], [out])
        assert out.tolist() == [7] * 4
    finally:
        c.close()


WORKER = """
import json, sys
from psrt import _core
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
c = _core.Client("worker", 0)
c.timeout = 120.0
c.connect(0, sys.argv[1], 10.0)
before = hwm()
c.register([(0, "table", "float32", [250000, 128], "Adagrad", {"slot_init": 0.1},
             {"kind": "truncated_normal", "a": 0.0, "b": 0.05, "seed": 9})])
print(json.dumps({"before": before, "after": hwm()}))
c.close()
"""


def test_a_worker_creating_a_big_table_does_not_hold_its_value(ps_pair):
    # TF runs initializers on the variable's device; a [250000, 128] float32 table (122 MiB)
    # created this way raises the worker's peak RSS by well under a tenth of it.
    out = subprocess.run([sys.executable, "-c", WORKER, ps_pair[1].address], text=True,
                         capture_output=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": SRC})
    assert out.returncode == 0, out.stderr[-2000:]
    m = json.loads(out.stdout.strip().splitlines()[-1])
    table = 250000 * 128 * 4
    assert m["after"] - m["before"] < table // 10, m
