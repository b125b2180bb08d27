"""TF1 graph-building idioms on psrt: the global-step idioms (issue 13, item 2) and the
graph-building names (item 3): variable_scope, name_scope, dtypes, collections and
GraphKeys, set_random_seed, RunOptions/RunMetadata, GPUOptions, ServerDef.

TF's behaviour is the reference throughout; each test cites the TF source (and TF's own
test where it pins values).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import psrt

from _cluster import fresh_graph, ps1, ps2, ps_tasks, worker  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("fresh_graph")


def _loss(w, **feeds):
    return float(np.sum(w * w)), [2 * w]


# ---- item 2: global-step idioms (tensorflow/python/training/training_util.py) ---------------

def test_a_variable_named_global_step_is_the_global_step():
    # training_util.get_global_step: with an empty GLOBAL_STEP collection it falls back to
    # graph.get_tensor_by_name('global_step:0') (training_util_test.py,
    # GlobalStepTest.test_get_global_step: a Variable named global_step is found).
    assert psrt.train.get_global_step() is None
    gs = psrt.Variable(0, name="global_step", trainable=False)
    assert psrt.train.get_global_step() is gs
    assert psrt.train.get_or_create_global_step() is gs
    with pytest.raises(ValueError, match="'global_step' already exists."):
        psrt.train.create_global_step()


def test_assert_global_step_has_tfs_checks_and_messages():
    # training_util.assert_global_step: Variable or Tensor, integer dtype, scalar.
    with pytest.raises(TypeError, match='must be a Variable or Tensor'):
        psrt.train.assert_global_step(3)
    with pytest.raises(TypeError, match='does not have integer type: float32'):
        psrt.train.assert_global_step(psrt.Variable(0.0, name="f"))
    with pytest.raises(TypeError, match=r'is not scalar: \(2,\)'):
        psrt.train.assert_global_step(psrt.Variable(np.zeros(2, np.int64), name="v"))
    for dtype in (psrt.int32, np.int64):
        psrt.train.assert_global_step(psrt.Variable(0, dtype=dtype, name="ok"))
    # A float variable named global_step is found, then rejected, as TF.
    with psrt.Graph().as_default():
        psrt.Variable(0.0, name="global_step")
        with pytest.raises(TypeError, match="does not have integer type"):
            psrt.train.get_global_step()


def test_multiple_global_steps_log_an_error_and_give_none(caplog):
    # training_util.get_global_step: logging.error("Multiple tensors in global_step
    # collection.") and None.
    psrt.train.create_global_step()
    psrt.add_to_collection(psrt.GraphKeys.GLOBAL_STEP,
                           psrt.Variable(np.int64(0), name="other"))
    with caplog.at_level(logging.ERROR, logger="psrt"):
        assert psrt.train.get_global_step() is None
    assert "Multiple tensors in global_step collection." in caplog.text


def test_int32_global_step_on_the_ps(ps1, worker):
    # TF accepts int32 global steps (training_util.assert_global_step: is_integer); psrt
    # keeps them as int64 on the ps and presents the user's dtype.
    server = worker(ps1)
    with psrt.device("/job:ps/task:0"):
        gs = psrt.Variable(0, name="global_step", trainable=False, dtype=psrt.int32)
        w = psrt.Variable(np.ones(3, np.float32), name="w")
        counts = psrt.Variable(np.array([1, 2], np.int32), name="counts")
    assert gs.dtype == np.int32 and gs.dtype == psrt.int32 and gs.nbytes == 8
    assert psrt.train.get_global_step() is gs
    train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(_loss, global_step=gs,
                                                                var_list=[w])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op)
        assert sess.run(gs) == 3 and type(sess.run(gs)) is int
        assert psrt.train.global_step(sess, gs) == 3
        got = sess.run(counts)
        assert got.dtype == np.int32 and got.tolist() == [1, 2]
        sess.run(counts.assign_add(np.array([5, 5], np.int32)))
        assert sess.run(counts).tolist() == [6, 7]
        np.testing.assert_allclose(sess.run(w), 0.8 ** 3, rtol=1e-6)


def test_a_float_global_step_is_incremented_by_minimize(ps1, worker):
    # optimizer.py apply_gradients: state_ops.assign_add(global_step, 1) whatever its
    # dtype, so a float32 get_variable counts steps too.
    server = worker(ps1)
    with psrt.device("/job:ps/task:0"):
        gs = psrt.get_variable("global_step", [], dtype=psrt.float32,
                               initializer=psrt.zeros_initializer(), trainable=False)
        w = psrt.Variable(np.ones(2, np.float32), name="w")
    train_op = psrt.train.AdagradOptimizer(0.1).minimize(_loss, global_step=gs, var_list=[w])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for _ in range(4):
            sess.run(train_op)
        step = sess.run(gs)
        assert step.dtype == np.float32 and float(step) == 4.0
    with pytest.raises(TypeError, match="is not scalar"):
        psrt.train.GradientDescentOptimizer(0.1).minimize(
            _loss, var_list=[w], global_step=psrt.Variable(np.zeros(2, np.float32), name="x"))


# ---- item 3: variable_scope (tensorflow/python/ops/variable_scope.py) ------------------------

def test_variable_scope_names_and_reuse():
    # variable_scope_test.py testVarScopeReuse / testVarScopeNameScope: get_variable names
    # follow variable scopes; reuse=True returns the same variable; nested scopes inherit it.
    with psrt.variable_scope("foo"):
        with psrt.variable_scope("bar"):
            v = psrt.get_variable("v", [1])
            assert psrt.get_variable_scope().name == "foo/bar"
    assert v.name == "foo/bar/v"
    with psrt.variable_scope("foo", reuse=True):
        with psrt.variable_scope("bar"):
            assert psrt.get_variable_scope().reuse is True
            assert psrt.get_variable("v") is v
            with pytest.raises(ValueError, match="Variable foo/bar/w does not exist"):
                psrt.get_variable("w", [1])
        with psrt.variable_scope("bar", reuse=False):
            assert psrt.get_variable_scope().reuse is True  # False cannot undo reuse
    with psrt.variable_scope("foo"):
        with pytest.raises(ValueError, match="Variable foo/bar/v already exists"):
            with psrt.variable_scope("bar"):
                psrt.get_variable("v", [1])
    with psrt.variable_scope("foo", reuse=True):
        with pytest.raises(ValueError, match="specified dtype int64"):
            psrt.get_variable("bar/v", [1], dtype=psrt.int64)


def test_auto_reuse_and_reuse_variables():
    # variable_scope_test.py testAutoReuse: AUTO_REUSE creates then returns.
    def layer():
        with psrt.variable_scope("layer", reuse=psrt.AUTO_REUSE):
            return psrt.get_variable("w", [2, 2])
    assert layer() is layer()
    assert [v.name for v in psrt.global_variables()] == ["layer/w"]
    with psrt.variable_scope("tower") as scope:
        a = psrt.get_variable("a", [1])
        scope.reuse_variables()
        assert psrt.get_variable("a") is a
    # Re-entering a VariableScope object uses its name, not a nested one.
    with psrt.variable_scope("other"):
        with psrt.variable_scope(scope, reuse=True):
            assert psrt.get_variable_scope().name == "tower"
            assert psrt.get_variable("a") is a


def test_scope_initializer_partitioner_and_dtype_are_inherited():
    # variable_scope_test.py testVarScopeInitializer / testVarScopeDType.
    with psrt.variable_scope("s", initializer=psrt.constant_initializer(0.3),
                             partitioner=psrt.fixed_size_partitioner(2), dtype=psrt.float64):
        with psrt.variable_scope("inner"):
            p = psrt.get_variable("p", [5, 2])
            q = psrt.get_variable("q", [3], initializer=psrt.ones_initializer(),
                                  partitioner=None)
            assert psrt.get_variable_scope().initializer is not None
    assert isinstance(p, psrt.PartitionedVariable) and p.dtype == np.float64
    assert [x.name for x in p] == ["s/inner/p/part_0", "s/inner/p/part_1"]
    np.testing.assert_array_equal(p._parts[0].initial_value_array(), np.full((3, 2), 0.3))
    assert isinstance(q, psrt.PartitionedVariable)  # the scope's partitioner still applies
    np.testing.assert_array_equal(q._parts[1].initial_value_array(), [1.0])


def test_default_name_scopes_are_unique():
    # variable_scope_test.py testVarScopeDefaultName: default_name, default_name_1, ...
    names = []
    for _ in range(3):
        with psrt.variable_scope(None, default_name="layer"):
            names.append(psrt.get_variable_scope().name)
    assert names == ["layer", "layer_1", "layer_2"]
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with psrt.variable_scope(None, default_name="x", reuse=True):
            pass


def test_name_scope_prefixes_variables_not_get_variable():
    # ops.py Graph.name_scope and variable_scope.py VariableScope.get_variable
    # (ops.name_scope(None) around the store): Variable names take the name scope,
    # get_variable names only the variable scope.
    with psrt.name_scope("ns") as ns:
        assert ns == "ns/"
        a = psrt.Variable([1.0], name="a")
        b = psrt.get_variable("b", [1])
        with psrt.name_scope("inner"):
            c = psrt.Variable([1.0], name="c")
    with psrt.name_scope("ns") as again:
        assert again == "ns_1/"
    with psrt.variable_scope("vs"):
        d = psrt.Variable([1.0], name="d")
        e = psrt.get_variable("e", [1])
    assert [a.name, b.name, c.name, d.name, e.name] == \
        ["ns/a", "b", "ns/inner/c", "vs/d", "vs/e"]
    assert psrt.get_default_graph().get_name_scope() == ""


# ---- item 3: dtypes, collections, seeds, options -----------------------------------------------

def test_dtypes_are_tfs():
    # tensorflow/python/framework/dtypes.py: names, as_dtype, is_integer, comparisons.
    assert psrt.as_dtype("float32") is psrt.float32 and psrt.as_dtype(np.int64) is psrt.int64
    assert psrt.float32 == np.float32 and psrt.float32 == "float32" and psrt.float32 != "int32"
    assert psrt.int32.is_integer and not psrt.bool.is_integer and psrt.float64.is_floating
    assert psrt.int32.as_numpy_dtype is np.int32 and psrt.string.as_numpy_dtype is np.object_
    assert (psrt.int32.min, psrt.int32.max) == (-2 ** 31, 2 ** 31 - 1)
    assert psrt.double is psrt.float64 and psrt.as_dtype(psrt.bool).name == "bool"
    assert np.zeros(2, psrt.float32).dtype == np.float32
    with pytest.raises(TypeError, match="Cannot convert value 'nope' to a TensorFlow DType."):
        psrt.as_dtype("nope")
    v = psrt.get_variable("w", [2], dtype=psrt.float64)
    assert v.dtype == np.float64


def test_collections_and_graph_keys():
    # ops.py: GraphKeys strings, get_collection(key, scope) re.match on names,
    # get_collection_ref is the live list.
    assert (psrt.GraphKeys.GLOBAL_VARIABLES, psrt.GraphKeys.TRAINABLE_VARIABLES,
            psrt.GraphKeys.GLOBAL_STEP, psrt.GraphKeys.QUEUE_RUNNERS,
            psrt.GraphKeys.LOSSES) == ("variables", "trainable_variables", "global_step",
                                       "queue_runners", "losses")
    with psrt.variable_scope("a"):
        x = psrt.get_variable("x", [1])
    with psrt.variable_scope("b"):
        y = psrt.get_variable("y", [1])
    assert psrt.get_collection(psrt.GraphKeys.TRAINABLE_VARIABLES) == [x, y]
    assert psrt.get_collection(psrt.GraphKeys.GLOBAL_VARIABLES, scope="b") == [y]
    psrt.add_to_collection("mine", 1)
    psrt.add_to_collections(["mine", "yours"], 2)
    ref = psrt.get_collection_ref("mine")
    assert ref == [1, 2]
    ref.append(3)
    assert psrt.get_collection("mine") == [1, 2, 3] and psrt.get_collection("yours") == [2]
    assert psrt.get_collection("mine", scope="x") == []  # items without names drop out
    assert psrt.initialize_all_variables().variables == [x, y]


def test_set_random_seed_makes_initial_values_repeatable():
    # random_seed.py get_seed: with a graph seed, ops without a seed get the graph's
    # counter as op seed: the same program gives the same values, distinct variables differ.
    def build():
        with psrt.Graph().as_default() as g:
            psrt.set_random_seed(1234)
            assert g.seed == 1234
            a = psrt.get_variable("a", [3, 4])
            b = psrt.get_variable("b", [3, 4])
            c = psrt.Variable(psrt.random_normal_initializer()([5]), name="c")
            return [v.initial_value_array() for v in (a, b, c)]
    first, second = build(), build()
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], first[1])
    assert psrt.framework.random_seed.get_seed(None) == (None, None)
    assert psrt.framework.random_seed.get_seed(7) == (87654321, 7)  # DEFAULT_GRAPH_SEED, as TF


def test_run_options_and_metadata_are_accepted(ps1, worker, caplog):
    server = worker(ps1)
    with psrt.device("/job:ps/task:0"):
        v = psrt.Variable(np.ones(2, np.float32), name="v")
    opts = psrt.RunOptions(trace_level=psrt.RunOptions.FULL_TRACE)
    meta = psrt.RunMetadata()
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer(), options=opts, run_metadata=meta)
        np.testing.assert_array_equal(sess.run(v, options=opts, run_metadata=meta), [1, 1])
    assert meta.partition_graphs == ()
    with caplog.at_level(logging.DEBUG, logger="psrt"):
        gpu = psrt.GPUOptions(allow_growth=True)
        sd = psrt.train.ServerDef(job_name="worker", task_index=1)
    assert gpu.allow_growth and sd.task_index == 1
    # ServerDef is a real protobuf message now (tests/test_compat.py): no log of its own
    assert "GPUOptions" in caplog.text
    with pytest.raises(ValueError, match="has no field"):
        psrt.RunOptions(bogus=1)


def test_config_proto_fields_psrt_ignores_read_and_set_as_tfs():
    # TF1 scripts read and set tf.ConfigProto's fields after construction (config.proto:
    # allow_soft_placement = 7, log_device_placement = 8, gpu_options = 6, ...); psrt ignores
    # them but they are attributes with TF's defaults, as on TF's message.
    config = psrt.ConfigProto()
    assert config.allow_soft_placement is False and config.log_device_placement is False
    assert config.device_filters == [] and config.device_count == {}
    assert config.intra_op_parallelism_threads == 0
    assert isinstance(config.gpu_options, psrt.GPUOptions)
    assert config.gpu_options.allow_growth is False
    config.gpu_options.allow_growth = True
    config.allow_soft_placement = True
    assert config.gpu_options.allow_growth and config.allow_soft_placement
    # each config has its own GPUOptions and lists (no shared mutable default)
    other = psrt.ConfigProto(device_filters=["/job:ps"], allow_soft_placement=True)
    assert other.gpu_options.allow_growth is False and other.device_filters == ["/job:ps"]
    assert other.allow_soft_placement is True and psrt.ConfigProto().device_filters == []
    assert "allow_soft_placement" not in other.ignored
