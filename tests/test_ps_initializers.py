"""psrt's initializers (psrt/init_ops.py) sent to the ps tasks as specifications.

TF1's arguments, defaults, aliases and formulas are the reference
(tensorflow/python/ops/init_ops.py, r1.15; seeds: tensorflow/python/framework/random_seed.py
and its random_seed_test.py). The values are psrt's own counter-based streams, checked against
the numpy reference written from docs/protocol.md (tests/_init_ref.py): on the host when an
initializer is called, and on real ps subprocesses when get_variable's variables are
initialized there, whole or partitioned, with the worker never holding the value.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import psrt
from psrt import init_ops
from psrt.ops import init_ops as ops_init_ops

from _cluster import fresh_graph, ps2, ps_tasks, worker  # noqa: F401  (fixtures)
from _init_ref import initial_value as ref_value
from _ps_task import SRC, PsProcess

pytestmark = pytest.mark.usefixtures("fresh_graph")

DEFAULT_GRAPH_SEED = 87654321  # random_seed.py


def seed64(graph_seed: int, op_seed: int) -> int:
    """The 64-bit ps seed psrt documents for TF's (graph seed, op seed)."""
    return (graph_seed << 32) | op_seed


# ---- TF's names, defaults and checks ---------------------------------------------------------

def test_get_seed_follows_tf_random_seed_test():
    # random_seed_test.py's graph-mode cases: (graph seed, op seed) in -> out.
    cases = [((None, None), (None, None)), ((None, 1), (DEFAULT_GRAPH_SEED, 1)),
             ((1, 1), (1, 1)), ((0, 0), (0, 2**31 - 1)), ((2**31 - 1, 0), (0, 2**31 - 1)),
             ((0, 2**31 - 1), (0, 2**31 - 1)), ((1, None), (1, 0))]
    for (graph_seed, op_seed), want in cases:
        with psrt.Graph().as_default():
            psrt.set_random_seed(graph_seed)
            assert psrt.framework.random_seed.get_seed(op_seed) == want, (graph_seed, op_seed)


def test_tf_aliases_defaults_and_configs():
    assert psrt.glorot_uniform_initializer is init_ops.GlorotUniform
    assert psrt.glorot_normal_initializer is init_ops.GlorotNormal
    assert psrt.variance_scaling_initializer is init_ops.VarianceScaling
    assert psrt.truncated_normal_initializer is init_ops.TruncatedNormal
    # init_ops.py r1.15 defaults, as get_config reports them.
    assert psrt.zeros_initializer().get_config() == {"dtype": "float32"}
    assert psrt.constant_initializer().get_config() == {"value": 0, "dtype": "float32",
                                                        "verify_shape": False}
    assert psrt.random_uniform_initializer().get_config() == {
        "minval": 0, "maxval": None, "seed": None, "dtype": "float32"}
    assert psrt.random_normal_initializer().get_config() == {
        "mean": 0.0, "stddev": 1.0, "seed": None, "dtype": "float32"}
    assert psrt.truncated_normal_initializer().get_config() == {
        "mean": 0.0, "stddev": 1.0, "seed": None, "dtype": "float32"}
    assert psrt.variance_scaling_initializer().get_config() == {
        "scale": 1.0, "mode": "fan_in", "distribution": "truncated_normal", "seed": None,
        "dtype": "float32"}
    assert psrt.glorot_uniform_initializer(3).get_config() == {"seed": 3, "dtype": "float32"}
    vs = psrt.variance_scaling_initializer(2.0, "fan_avg", "Uniform", 5, np.float64)
    again = init_ops.VarianceScaling.from_config(vs.get_config())
    assert again.get_config() == vs.get_config() and vs.distribution == "uniform"
    assert (psrt.glorot_normal_initializer().mode,
            psrt.glorot_normal_initializer().distribution) == ("fan_avg", "truncated_normal")


def test_bad_arguments_name_the_value_and_the_choices():
    with pytest.raises(ValueError, match=r"`scale` must be positive float; got 0\.0"):
        psrt.variance_scaling_initializer(scale=0.0)
    with pytest.raises(ValueError) as e:
        psrt.variance_scaling_initializer(mode="fan_sum")
    assert str(e.value) == ("Invalid `mode` argument: 'fan_sum'; expected 'fan_in', 'fan_out' "
                            "or 'fan_avg'")
    with pytest.raises(ValueError) as e:
        psrt.variance_scaling_initializer(distribution="gamma")
    assert "Invalid `distribution` argument: 'gamma'" in str(e.value)
    assert "'untruncated_normal'" in str(e.value)
    with pytest.raises(ValueError, match="Expected floating point type, got int64"):
        psrt.truncated_normal_initializer(dtype=np.int64)
    with pytest.raises(ValueError, match="Expected floating point type, got int32"):
        psrt.glorot_uniform_initializer()([2, 2], dtype=np.int32)
    with pytest.raises(ValueError, match="Must specify maxval for integer dtype int64"):
        psrt.random_uniform_initializer(dtype=np.int64)([3])
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 4, but "
                                         "received 5"):
        psrt.constant_initializer([1, 2, 3, 4, 5])([2, 2])


def test_constant_lists_fill_as_tf_constant():
    # TF1's tf.constant(value, shape): the last element repeats past the list's end.
    out = psrt.constant_initializer([1, 2, 3])([2, 3])
    np.testing.assert_array_equal(out, [[1, 2, 3], [3, 3, 3]])
    assert out.dtype == np.float32
    with pytest.raises(TypeError, match=r"Expected Tensor's shape: \(2, 2\), got \(4,\)"):
        psrt.constant_initializer([1, 2, 3, 4], verify_shape=True)([2, 2])


# ---- values on the host: the documented streams ----------------------------------------------

CASES = [  # (initializer, the spec psrt documents for it, without the seed)
    (psrt.zeros_initializer(), {"kind": "zeros"}),
    (psrt.ones_initializer(), {"kind": "ones"}),
    (psrt.constant_initializer(-0.25), {"kind": "constant", "a": -0.25}),
    (psrt.random_uniform_initializer(-2.0, 3.0, seed=1), {"kind": "random_uniform", "a": -2.0,
                                                          "b": 3.0}),
    (psrt.random_uniform_initializer(seed=1), {"kind": "random_uniform", "a": 0.0, "b": 1.0}),
    (psrt.random_normal_initializer(0.5, 2.0, seed=2), {"kind": "random_normal", "a": 0.5,
                                                        "b": 2.0}),
    (psrt.truncated_normal_initializer(-1.0, 0.1, seed=3), {"kind": "truncated_normal",
                                                            "a": -1.0, "b": 0.1}),
    (psrt.glorot_uniform_initializer(4), {"kind": "variance_scaling", "a": 1.0,
                                          "fan_mode": "fan_avg", "distribution": "uniform"}),
    (psrt.glorot_normal_initializer(5), {"kind": "variance_scaling", "a": 1.0,
                                         "fan_mode": "fan_avg",
                                         "distribution": "truncated_normal"}),
    (psrt.variance_scaling_initializer(2.0, "fan_in", "untruncated_normal", seed=6),
     {"kind": "variance_scaling", "a": 2.0, "fan_mode": "fan_in",
      "distribution": "untruncated_normal"}),
    (psrt.variance_scaling_initializer(3.0, "fan_out", "normal", seed=7),
     {"kind": "variance_scaling", "a": 3.0, "fan_mode": "fan_out",
      "distribution": "truncated_normal"}),
]
IDS = [type(c[0]).__name__ + str(i) for i, c in enumerate(CASES)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("init,spec", CASES, ids=IDS)
def test_calling_an_initializer_gives_the_ps_stream(init, spec, dtype):
    shape = [3, 4, 9, 7]  # conv-like: fans over the receptive field
    seed = getattr(init, "seed", None)
    want_spec = dict(spec, seed=seed64(DEFAULT_GRAPH_SEED, seed)) if seed is not None else spec
    np.testing.assert_allclose(init(shape, dtype), ref_value(want_spec, shape, dtype),
                               rtol=1e-12, atol=0)
    assert init(shape, dtype).dtype == dtype and init(shape).dtype == np.float32


def test_a_part_computes_its_slice_of_the_whole():
    init = psrt.glorot_normal_initializer(seed=9)
    whole = init([10, 6])
    info = ops_init_ops._PartitionInfo([10, 6], [4, 0])
    np.testing.assert_array_equal(init([3, 6], partition_info=info), whole[4:7])


def test_tf_formulas_hold_statistically():
    # init_ops.py r1.15: VarianceScaling's truncated normal is scaled by 1/0.8796... so the
    # truncated values have stddev sqrt(scale / n); untruncated: sqrt(scale / n); uniform:
    # within +-sqrt(3 scale / n). TruncatedNormal keeps |x - mean| <= 2 stddev.
    shape = (400, 250)
    fan_in, fan_out = 400.0, 250.0
    for mode, n in (("fan_in", fan_in), ("fan_out", fan_out), ("fan_avg", (fan_in + fan_out) / 2)):
        for dist in ("truncated_normal", "untruncated_normal"):
            x = psrt.variance_scaling_initializer(2.0, mode, dist, seed=1)(shape, np.float64)
            assert x.std() == pytest.approx(np.sqrt(2.0 / n), rel=0.01), (mode, dist)
            assert abs(x.mean()) < 0.01 * np.sqrt(2.0 / n)
        u = psrt.variance_scaling_initializer(2.0, mode, "uniform", seed=1)(shape, np.float64)
        limit = np.sqrt(3 * 2.0 / n)
        assert np.abs(u).max() <= limit and u.std() == pytest.approx(limit / np.sqrt(3),
                                                                      rel=0.01)
    g = psrt.glorot_normal_initializer(seed=2)(shape, np.float64)
    assert g.std() == pytest.approx(np.sqrt(2 / (fan_in + fan_out)), rel=0.01)
    t = psrt.truncated_normal_initializer(1.0, 0.5, seed=3)(shape, np.float64)
    assert np.abs(t - 1.0).max() <= 1.0
    assert t.std() == pytest.approx(0.5 * ops_init_ops.TRUNCATED_NORMAL_STDDEV, rel=0.01)


def test_seeds_follow_tf():
    # An op seed: every call (every op, in TF) draws the same values.
    a = psrt.random_normal_initializer(seed=5)
    np.testing.assert_array_equal(a([50]), a([50]))
    # Neither seed: a new random seed per call.
    b = psrt.random_normal_initializer()
    assert not np.array_equal(b([50]), b([50]))

    # A graph seed: the same program draws the same values; distinct ops differ.
    def program():
        with psrt.Graph().as_default():
            psrt.set_random_seed(77)
            x = psrt.get_variable("x", [20, 3])
            y = psrt.get_variable("y", [20, 3])
            return x.initial_value_array(), y.initial_value_array(), x._init_spec["seed"]
    x1, y1, seed_x = program()
    x2, y2, _ = program()
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(x1, y1)
    assert seed_x == seed64(77, 0)  # the first op seed is the graph's counter, 0


def test_variable_from_a_partial_keeps_the_spec_and_decides_the_seed_once():
    # TF's get_variable gives its Variable functools.partial(initializer, shape, ...).
    v = psrt.Variable(functools.partial(psrt.truncated_normal_initializer(stddev=0.2),
                                        [30, 4]), name="v")
    assert (v.shape, v.dtype) == ((30, 4), np.float32)
    assert v._init_spec is not None and v._initial_value is None and v._init_fn is None
    np.testing.assert_array_equal(v.initial_value_array(), v.initial_value_array())
    spec = dict(v._init_spec)
    np.testing.assert_array_equal(v.initial_value_array(),
                                  ref_value(spec, (30, 4), np.float32))
    # A list constant needs the host: the partial is evaluated as any callable.
    w = psrt.Variable(functools.partial(psrt.constant_initializer([1, 2]), [2, 2]), name="w")
    assert w._init_spec is None
    np.testing.assert_array_equal(w.initial_value_array(), [[1, 2], [2, 2]])


# ---- on the ps tasks -------------------------------------------------------------------------

def test_get_variable_initializes_on_the_ps_tasks(ps2, worker):
    server = worker(ps2)
    shape = (37, 11)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        tn = psrt.get_variable("tn", shape, initializer=psrt.truncated_normal_initializer(
            stddev=0.05, seed=11))
        gl = psrt.get_variable("gl", shape, dtype=np.float64)  # TF's default: glorot uniform
        vs = psrt.get_variable("vs", shape, initializer=psrt.variance_scaling_initializer(
            2.0, "fan_in", "truncated_normal", seed=12))
        const = psrt.get_variable("const", shape, initializer=0.75)
        counts = psrt.get_variable("counts", (5,), dtype=np.int64,
                                   initializer=psrt.constant_initializer(7))
        arr = psrt.get_variable("arr", initializer=np.arange(6.0, dtype=np.float32))
        plain = psrt.Variable(np.eye(3, dtype=np.float32), name="plain")
    for v in (tn, gl, vs, const, counts):
        assert v._init_spec is not None and v._initial_value is None, v.name
    assert arr._init_spec is None and plain._init_spec is None  # numpy values, as before
    glorot_seed = gl._init_spec["seed"]  # no seed anywhere: drawn when the variable was built
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        got = dict(zip(["tn", "gl", "vs", "const", "counts", "arr", "plain"],
                       sess.run([tn, gl, vs, const, counts, arr, plain])))
    want = {
        "tn": ref_value({"kind": "truncated_normal", "a": 0.0, "b": 0.05,
                         "seed": seed64(DEFAULT_GRAPH_SEED, 11)}, shape, np.float32),
        "gl": ref_value({"kind": "variance_scaling", "a": 1.0, "fan_mode": "fan_avg",
                         "distribution": "uniform", "seed": glorot_seed}, shape, np.float64),
        "vs": ref_value({"kind": "variance_scaling", "a": 2.0, "fan_mode": "fan_in",
                         "distribution": "truncated_normal",
                         "seed": seed64(DEFAULT_GRAPH_SEED, 12)}, shape, np.float32),
        "const": np.full(shape, 0.75, np.float32),
        "counts": np.full(5, 7, np.int64),
        "arr": np.arange(6.0, dtype=np.float32),
        "plain": np.eye(3, dtype=np.float32),
    }
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-7, err_msg=name)
    assert ps2.names_on(0) | ps2.names_on(1) == set(want)


@pytest.mark.parametrize("init", [
    psrt.glorot_normal_initializer(seed=21),  # fans of the whole, not of a part
    psrt.truncated_normal_initializer(stddev=0.3, seed=22),
    psrt.random_uniform_initializer(-1.0, 1.0),  # no seed: decided once for every part
], ids=["glorot_normal", "truncated_normal", "uniform_unseeded"])
def test_a_partitioned_variable_equals_the_unpartitioned_one(ps2, worker, init):
    server = worker(ps2)
    shape = (101, 7)
    seeded = init._seeded()  # both variables below from one decided seed
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        whole = psrt.get_variable("whole", shape, initializer=seeded)
        split = psrt.get_variable("split", shape, initializer=seeded,
                                  partitioner=psrt.fixed_size_partitioner(3))
    assert [p.shape for p in split] == [(34, 7), (34, 7), (33, 7)]
    assert [p.device for p in split] == ["/job:ps/task:1", "/job:ps/task:0", "/job:ps/task:1"]
    assert all(p._init_spec is not None for p in split)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        a, b = sess.run([whole, split])
    assert a.tobytes() == b.tobytes()
    spec = {k: v for k, v in whole._init_spec.items()}
    np.testing.assert_allclose(a, ref_value(spec, shape, np.float32), rtol=1e-6, atol=1e-7)


WORKER = """
import json, sys
import psrt

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

table = psrt.get_variable("table", [1000000, 128], initializer=psrt.truncated_normal_initializer(
    stddev=0.05, seed=13))
sess = psrt.Session(sys.argv[1])
sess.run(psrt.report_uninitialized_variables())  # connections and buffers set up
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    reset = True
except OSError:
    reset = False
before = status("VmRSS") if reset else status("VmHWM")
sess.run(psrt.global_variables_initializer())
peak = status("VmHWM")
rows = sess.pull_rows(table, [0, 999999])
print(json.dumps({"reset": reset, "before": before, "peak": peak, "rows": rows.tolist(),
                  "uninitialized": sess.run(psrt.report_uninitialized_variables()).tolist()}))
sess.close()
"""


def test_a_worker_initializing_a_1e6_by_128_table_stays_at_its_baseline():
    # TF runs initializers on the variable's device; so does psrt: a [1e6, 128] float32
    # get_variable (488 MiB) initialized from a worker process raises its peak RSS by at
    # most a few MB.
    ps = PsProcess()
    try:
        out = subprocess.run([sys.executable, "-c", WORKER, ps.address], text=True,
                             capture_output=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": SRC})
    finally:
        ps.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    m = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"worker peak RSS over its baseline: {(m['peak'] - m['before']) / 2**20:.2f} MiB "
          f"(VmHWM reset: {m['reset']})")
    assert m["peak"] - m["before"] < 4 << 20, m
    assert m["uninitialized"] == []
    spec = {"kind": "truncated_normal", "a": 0.0, "b": 0.05,
            "seed": seed64(DEFAULT_GRAPH_SEED, 13)}
    for row, values in zip((0, 999999), m["rows"]):
        want = ref_value(spec, (128,), np.float32, offset=row * 128)
        np.testing.assert_allclose(values, want, rtol=1e-6, atol=1e-7)
