"""Tests for psrt.variables: Variable, get_variable and its initializers, partitioned
variables placed across real ps tasks, the global step, collections and the default graph.

Values are checked on ps subprocesses (tests/_cluster.py) where the behaviour depends on
them; the rest is the graph-side bookkeeping TF1's variables_test and
training_util_test pin.
"""

from __future__ import annotations

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import fresh_graph, ps2, ps_tasks, worker  # noqa: F401  (fixtures)

TOL = 1e-6

pytestmark = pytest.mark.usefixtures("fresh_graph")


# ---- Variable --------------------------------------------------------------------------------

def test_variable_from_an_array():
    init = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = psrt.Variable(init, name="W")
    assert (v.name, v.shape, v.get_shape(), v.dtype) == ("W", (2, 3), (2, 3), np.float32)
    assert v.trainable and v.nbytes == 24 and v.op is v and v.device == ""
    assert v.graph is psrt.get_default_graph()
    value = v.initial_value_array()
    np.testing.assert_array_equal(value, init)
    assert not value.flags.writeable
    init[0, 0] = 100  # the variable keeps its own copy
    assert v.initial_value_array()[0, 0] == 0
    assert repr(v) == "<psrt.Variable 'W' shape=(2, 3) dtype=float32 device=''>"
    assert psrt.global_variables() == [v] and psrt.trainable_variables() == [v]


@pytest.mark.parametrize("initial, dtype, expected", [
    ([1.0, 2.0], None, np.float32),
    (3.0, None, np.float32),
    (np.zeros(2), None, np.float64),
    (np.float64(1.5), None, np.float64),
    (np.zeros(2, np.float16), None, np.float32),
    ([1, 2], None, np.int64),
    (np.zeros(2, np.int32), None, np.int32),  # TF keeps int32 (kept as int64 on the ps)
    ([True, False], None, np.int64),
    ([1, 2], np.float32, np.float32),
    (np.zeros(2), np.float32, np.float32),
    (lambda: np.zeros(2), None, np.float64),
    (lambda: [1.0], None, np.float32),
])
def test_variable_dtype(initial, dtype, expected):
    v = psrt.Variable(initial, dtype=dtype)
    assert v.dtype == expected
    assert v.initial_value_array().dtype == (np.int64 if expected is np.int32 else expected)


def test_variable_dtype_errors():
    with pytest.raises(TypeError) as e:
        psrt.Variable(np.zeros(2, np.complex64), name="z")
    assert str(e.value) == ("dtype complex64 not supported for variable 'z'; expected "
                            "float32, float64, int32 or int64")
    with pytest.raises(TypeError) as e:
        psrt.Variable([True], dtype=psrt.bool, name="b")
    assert str(e.value) == ("dtype bool not supported for variable 'b'; expected float32, "
                            "float64, int32 or int64")
    with pytest.raises(TypeError) as e:
        psrt.Variable([b"x"], dtype=psrt.string, name="s")
    assert str(e.value) == ("dtype string not supported for variable 's'; expected float32, "
                            "float64, int32 or int64")
    with pytest.raises(TypeError, match="dtype 'nonsense' of variable 'n' is not a numpy dtype"):
        psrt.Variable([1.0], dtype="nonsense", name="n")


def test_variable_argument_errors():
    with pytest.raises(ValueError) as e:
        psrt.Variable(None)
    assert str(e.value) == "initial_value must be specified."
    with pytest.raises(ValueError) as e:
        psrt.Variable([1.0], name="has space")
    assert str(e.value) == ("'has space' is not a valid variable name: use letters, digits, "
                            "'.', '_', '-' and '/'")
    assert psrt.global_variables() == []


def test_duplicate_names_get_tf_unique_names():
    names = [psrt.Variable([1.0], name="W").name for _ in range(3)]
    assert names == ["W", "W_1", "W_2"]
    assert psrt.Variable([1.0]).name == "Variable"
    assert psrt.Variable([1.0]).name == "Variable_1"
    assert psrt.Variable([1.0], name="x:0").name == "x"
    # An explicit name that a suffix would produce is skipped, as TF's unique_name.
    assert psrt.Variable([1.0], name="b_1").name == "b_1"
    assert psrt.Variable([1.0], name="b").name == "b"
    assert psrt.Variable([1.0], name="b").name == "b_2"


def test_callable_initial_value_is_evaluated_at_each_initialization():
    calls = []

    def init():
        calls.append(1)
        return np.full(2, float(len(calls)), np.float32)

    v = psrt.Variable(init, name="v")
    assert v.shape == (2,) and len(calls) == 1
    with psrt.Session("") as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v), [2.0, 2.0])
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v), [3.0, 3.0])


def test_callable_returning_a_wrong_shape_at_initialization():
    shapes = iter([(2,), (3,)])
    bad = psrt.Variable(lambda: np.zeros(next(shapes), np.float32), name="bad")
    with psrt.Session("") as sess:
        with pytest.raises(ValueError) as e:
            sess.run(bad.initializer)
    assert str(e.value) == "initializer of 'bad' returned shape (3,); expected (2,)"


def test_collections_and_trainable():
    a = psrt.Variable([1.0], name="a")
    frozen = psrt.Variable([1.0], trainable=False, name="frozen")
    local = psrt.Variable([1.0], name="local", collections=["my_collection"])
    assert psrt.global_variables() == [a, frozen]
    assert psrt.trainable_variables() == [a, local]
    assert psrt.get_default_graph().get_collection("my_collection") == [local]
    assert psrt.global_variables(scope="fro") == [frozen]


def test_values_on_the_ps_and_assign(ps2, worker):
    server = worker(ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        f32 = psrt.Variable(np.arange(4, dtype=np.float32), name="f32")
        f64 = psrt.Variable(np.linspace(0, 1, 3), name="f64")
        i64 = psrt.Variable([[1, 2], [3, 4]], name="i64")
    assert [v.device for v in (f32, f64, i64)] == ["/job:ps/task:0", "/job:ps/task:1",
                                                  "/job:ps/task:0"]
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        a, b, c = sess.run([f32, f64, i64])
        np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))
        assert b.dtype == np.float64 and c.dtype == np.int64
        np.testing.assert_array_equal(b, np.linspace(0, 1, 3))
        np.testing.assert_array_equal(c, [[1, 2], [3, 4]])
        sess.run(f64.assign(2.0))  # broadcast, as TF's assign of a scalar to a filled shape
        np.testing.assert_array_equal(sess.run(f64), np.full(3, 2.0))
    assert ps2.names_on(0) == {"f32", "i64"} and ps2.names_on(1) == {"f64"}


# ---- get_variable and initializers ----------------------------------------------------------

def test_get_variable_with_initializers():
    shape = (40, 30)
    zeros = psrt.get_variable("zeros", shape, initializer=psrt.zeros_initializer())
    ones = psrt.get_variable("ones", shape, initializer=psrt.ones_initializer())
    const = psrt.get_variable("const", shape, initializer=psrt.constant_initializer(0.5))
    arr = psrt.get_variable("arr", (2, 3), initializer=psrt.constant_initializer(
        [1, 2, 3, 4, 5, 6]))
    normal = psrt.get_variable("normal", shape, initializer=psrt.random_normal_initializer(
        mean=1.0, stddev=2.0, seed=7))
    trunc = psrt.get_variable("trunc", shape, initializer=psrt.truncated_normal_initializer(
        mean=-1.0, stddev=0.5, seed=7))
    uniform = psrt.get_variable("uniform", shape, initializer=psrt.random_uniform_initializer(
        -3.0, -2.0, seed=7))
    glorot = psrt.get_variable("glorot", shape, initializer=psrt.glorot_uniform_initializer(7))
    default = psrt.get_variable("default", shape)
    counts = psrt.get_variable("counts", (3,), dtype=np.int64)
    from_array = psrt.get_variable("from_array", initializer=np.eye(2, dtype=np.float32))
    scalar_fill = psrt.get_variable("scalar_fill", (2, 2), initializer=3.0)
    f64 = psrt.get_variable("f64", (2,), dtype=np.float64, initializer=psrt.ones_initializer())

    def value(v):
        return v.initial_value_array()

    assert all(v.dtype == np.float32 for v in (zeros, ones, const, normal, glorot, default))
    np.testing.assert_array_equal(value(zeros), np.zeros(shape))
    np.testing.assert_array_equal(value(ones), np.ones(shape))
    np.testing.assert_array_equal(value(const), np.full(shape, 0.5))
    np.testing.assert_array_equal(value(arr), [[1, 2, 3], [4, 5, 6]])
    n = value(normal)
    assert abs(n.mean() - 1.0) < 0.3 and abs(n.std() - 2.0) < 0.3
    np.testing.assert_array_equal(
        n, psrt.random_normal_initializer(mean=1.0, stddev=2.0, seed=7)(shape))
    t = value(trunc)
    assert np.all(np.abs(t + 1.0) <= 1.0) and abs(t.mean() + 1.0) < 0.1
    u = value(uniform)
    assert u.min() >= -3.0 and u.max() < -2.0
    limit = np.sqrt(6.0 / (40 + 30))
    for g in (value(glorot), value(default)):
        assert np.abs(g).max() <= limit and g.std() > limit / 3
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(value(counts), [0, 0, 0])
    assert from_array.shape == (2, 2)
    np.testing.assert_array_equal(value(from_array), np.eye(2))
    np.testing.assert_array_equal(value(scalar_fill), np.full((2, 2), 3.0))
    assert f64.dtype == np.float64


def test_get_variable_reuse():
    v = psrt.get_variable("W", (2, 3))
    with pytest.raises(ValueError) as e:
        psrt.get_variable("W", (2, 3))
    assert str(e.value) == ("Variable W already exists, disallowed. Did you mean to set "
                            "reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
    assert psrt.get_variable("W", (2, 3), reuse=True) is v
    assert psrt.get_variable("W", reuse=True) is v
    with pytest.raises(ValueError) as e:
        psrt.get_variable("W", (3, 2), reuse=True)
    assert str(e.value) == ("Trying to share variable W, but specified shape (3, 2) and "
                            "found shape (2, 3).")
    with pytest.raises(ValueError) as e:
        psrt.get_variable("missing", (1,), reuse=True)
    assert str(e.value) == ("Variable missing does not exist, or was not created with "
                            "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                            "VarScope?")
    with pytest.raises(ValueError) as e:
        psrt.get_variable("noshape")
    assert str(e.value) == ("Shape of a new variable (noshape) must be fully defined, but "
                            "instead was None.")
    assert [x.name for x in psrt.global_variables()] == ["W"]


def test_get_variable_and_variable_share_the_unique_name_rule():
    v = psrt.Variable([1.0], name="W")
    g = psrt.get_variable("W", (1,))
    assert (v.name, g.name) == ("W", "W_1")


# ---- partitioned variables ------------------------------------------------------------------

def test_fixed_size_partitioner_splits_rows_as_tf():
    assert psrt.fixed_size_partitioner(3)((7, 2)) == [3, 1]
    assert psrt.fixed_size_partitioner(5)((2, 4)) == [2, 1]
    emb = psrt.get_variable("emb", (7, 2), partitioner=psrt.fixed_size_partitioner(3),
                            initializer=np.arange(14, dtype=np.float32).reshape(7, 2))
    assert isinstance(emb, psrt.PartitionedVariable)
    assert [p.name for p in emb] == ["emb/part_0", "emb/part_1", "emb/part_2"]
    assert [p.shape for p in emb] == [(3, 2), (2, 2), (2, 2)]  # TF: the first get the extra
    assert emb.offsets == [0, 3, 5, 7]
    assert (emb.name, emb.shape, emb.get_shape(), emb.dtype) == ("emb", (7, 2), (7, 2),
                                                                np.float32)
    assert len(emb) == 3 and emb.nbytes == 56 and emb.trainable
    assert repr(emb) == "<psrt.PartitionedVariable 'emb' shape=(7, 2) parts=3>"
    assert psrt.get_variable("emb", reuse=True) is emb
    assert psrt.global_variables() == list(emb)


def test_fixed_size_partitioner_errors():
    with pytest.raises(ValueError) as e:
        psrt.fixed_size_partitioner(0)
    assert str(e.value) == "num_shards must be a positive integer; got 0"
    with pytest.raises(ValueError) as e:
        psrt.fixed_size_partitioner(2, axis=1)
    assert str(e.value) == "psrt partitions along axis 0 only; got axis=1"
    with pytest.raises(ValueError) as e:
        psrt.get_variable("s", (), partitioner=psrt.fixed_size_partitioner(2))
    assert str(e.value) == "cannot partition scalar variable s"


def test_partitioned_variable_is_placed_by_part_and_trained_as_one_array(ps2, worker):
    server = worker(ps2)
    init = np.arange(15, dtype=np.float32).reshape(5, 3) / 10
    target = np.ones((5, 3), np.float32)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        emb = psrt.get_variable("emb", (5, 3), initializer=init,
                                partitioner=psrt.fixed_size_partitioner(2))
        gs = psrt.train.get_or_create_global_step()
    part0, part1 = emb
    assert (part0.device, part1.device, gs.device) == ("/job:ps/task:0", "/job:ps/task:1",
                                                       "/job:ps/task:0")

    def loss(e):
        assert e.shape == (5, 3)  # the loss function sees the whole array
        d = e - target
        return float(0.5 * np.sum(d * d)), [np.ascontiguousarray(d)]

    opt = psrt.train.AdagradOptimizer(0.3)
    train_op = opt.minimize(loss, var_list=[emb], global_step=gs)
    ref, acc = init.copy(), np.full_like(init, 0.1)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(emb), init)
        for step in range(1, 4):
            ref_loss, (g,) = loss(ref)
            assert sess.run([train_op, gs]) == [pytest.approx(ref_loss, abs=TOL), step]
            acc = acc + g * g
            ref = ref - np.float32(0.3) * g / np.sqrt(acc)
        whole, p0, p1, slot = sess.run([emb, part0, part1, opt.get_slot(emb, "accumulator")])
    np.testing.assert_allclose(whole, ref, atol=TOL)
    np.testing.assert_array_equal(p0, whole[:3])
    np.testing.assert_array_equal(p1, whole[3:])
    np.testing.assert_allclose(slot, acc, rtol=TOL, atol=TOL)
    on0 = {v["name"]: v for v in ps2.list_variables(0)}
    on1 = {v["name"]: v for v in ps2.list_variables(1)}
    assert set(on0) == {"emb/part_0", "global_step"} and set(on1) == {"emb/part_1"}
    assert on0["emb/part_0"]["shape"] == (3, 3) and on1["emb/part_1"]["shape"] == (2, 3)


def test_initializers_on_the_ps_reinitialize_and_restore(ps2, worker, tmp_path):
    # A partitioned get_variable whose initializer the ps tasks compute: trained, then
    # re-initialized (the same initial value again: psrt's streams are a function of the
    # seed), then restored from a checkpoint (the trained value), across two ps processes.
    server = worker(ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        emb = psrt.get_variable("emb", (9, 4), initializer=psrt.glorot_normal_initializer(3),
                                partitioner=psrt.fixed_size_partitioner(2))
        gs = psrt.train.get_or_create_global_step()
    init = np.concatenate([p.initial_value_array() for p in emb])  # the host's computation
    train_op = psrt.train.GradientDescentOptimizer(0.5).minimize(
        lambda e: (0.0, [np.ones_like(e)]), var_list=[emb], global_step=gs)
    saver = psrt.train.Saver()
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_allclose(sess.run(emb), init, rtol=1e-6, atol=1e-7)
        sess.run(train_op)
        trained = sess.run(emb)
        np.testing.assert_allclose(trained, init - 0.5, rtol=1e-6, atol=1e-6)
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=gs)
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_allclose(sess.run(emb), init, rtol=1e-6, atol=1e-7)
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(emb), trained)


def test_partitioned_variable_gradients(ps2, worker):
    # A dense gradient of the wrong shape is refused; a row-sparse one goes to the part
    # owning each row (since embedding_ops, 63596b3), as TF's scatter into the partitions.
    server = worker(ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        emb = psrt.get_variable("emb", (4, 2), initializer=psrt.zeros_initializer(),
                                partitioner=psrt.fixed_size_partitioner(2))
    opt = psrt.train.GradientDescentOptimizer(0.5)
    wrong = opt.apply_gradients([(np.zeros((2, 4), np.float32), emb)])
    sparse = opt.apply_gradients([(psrt.IndexedSlices(np.ones((1, 2), np.float32), [3]), emb)])
    dense = opt.apply_gradients([(np.ones((4, 2), np.float32), emb)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(wrong)
        assert str(e.value) == ("gradient for variable 'emb' must be float32[4, 2] "
                                "C-contiguous; got float32[2, 4]")
        sess.run(sparse)  # row 3 lives in part 1: rows 2..3
        want = np.zeros((4, 2), np.float32)
        want[3] = -0.5
        np.testing.assert_array_equal(sess.run(emb), want)
        np.testing.assert_array_equal(sess.run(emb._get_variable_list()[1]), want[2:])
        sess.run(dense)
        np.testing.assert_array_equal(sess.run(emb), want - 0.5)


# ---- global step -------------------------------------------------------------------------------

def test_global_step_functions():
    assert psrt.train.get_global_step() is None
    gs = psrt.train.get_or_create_global_step()
    assert (gs.name, gs.dtype, gs.shape, gs.trainable) == ("global_step", np.int64, (), False)
    assert psrt.train.get_global_step() is gs
    assert psrt.train.get_or_create_global_step() is gs
    assert psrt.global_variables() == [gs] and psrt.trainable_variables() == []
    assert psrt.get_default_graph().get_collection("global_step") == [gs]
    with pytest.raises(ValueError) as e:
        psrt.train.create_global_step()
    assert str(e.value) == "'global_step' already exists."
    psrt.train.assert_global_step(gs)
    with pytest.raises(TypeError, match='Existing "global_step" does not have integer type'):
        psrt.train.assert_global_step(psrt.Variable([1.0], name="not_a_step"))


def test_global_step_per_graph():
    g = psrt.Graph()
    made = psrt.train.create_global_step(g)
    assert psrt.train.get_global_step(g) is made
    assert psrt.train.get_global_step() is None
    assert g.get_collection(psrt.GLOBAL_VARIABLES) == [made]
    g.add_to_collection("global_step", psrt.Variable(np.int64(0), name="other"))
    # TF (training_util.get_global_step): several in the collection is logged, None returned.
    assert psrt.train.get_global_step(g) is None


def test_global_step_value_on_the_ps(ps2, worker):
    server = worker(ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        gs = psrt.train.get_or_create_global_step()
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        assert type(sess.run(gs)) is int and sess.run(gs) == 0
        sess.run(gs.assign_add(np.int64(5)))
        assert psrt.train.global_step(sess, gs) == 5
    assert ps2.names_on(0) == {"global_step"} and ps2.names_on(1) == set()


# ---- the default graph ---------------------------------------------------------------------------

def test_graph_defaults_and_finalize():
    g = psrt.Graph()
    with g.as_default() as entered:
        assert entered is g and psrt.get_default_graph() is g
        v = psrt.Variable([1.0], name="v")
        with pytest.raises(AssertionError, match="Do not use tf.reset_default_graph"):
            psrt.reset_default_graph()
    assert v.graph is g and psrt.get_default_graph() is not g
    assert g.get_variable_by_name("v") is v
    g.finalize()
    assert g.finalized
    with g.as_default():
        with pytest.raises(RuntimeError) as e:
            psrt.Variable([1.0], name="late")
    assert str(e.value) == "Graph is finalized and cannot be modified."
    before = psrt.get_default_graph()
    psrt.Variable([1.0], name="x")
    psrt.reset_default_graph()
    assert psrt.get_default_graph() is not before and psrt.global_variables() == []
