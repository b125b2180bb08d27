"""Tests for psrt.placement (psrt.device and replica_device_setter): DeviceSpec, device() scopes and replica_device_setter.

The scope cases port TF's ops_test.py DeviceTest; the placement cases port TF's
device_setter_test.py and tf.contrib.training's device_setter_test.py.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from psrt.distribute.cluster_spec import ClusterSpec
from psrt.distribute.device_setter import (
    STANDARD_PS_OPS,
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from psrt.framework.device import (
    DeviceSpec,
    OpDef,
    canonical_name,
    current_device_stack,
    device,
    get_device_for,
    merge_device,
)

CLUSTER = ClusterSpec({
    "ps": ["ps0:2222", "ps1:2222"],
    "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
})
SUN_MOON = ClusterSpec({
    "sun": ["sun0:2222", "sun1:2222", "sun2:2222"],
    "moon": ["moon0:2222", "moon1:2222"],
})


def var(name: str = "v", shape=(2,), dtype=np.float32, **kwargs) -> str:
    """Places a variable op as variables.py will, returning its device."""
    return get_device_for(OpDef(name, "VariableV2", shape=shape, dtype=dtype, **kwargs))


def compute(name: str = "add") -> str:
    """Places a non-variable op (TF's ``a = v + w``)."""
    return get_device_for(OpDef(name, "Add"))


# --- DeviceSpec ---------------------------------------------------------------------


@pytest.mark.parametrize("text, fields, canonical", [
    ("", (None, None, None, None, None), ""),
    ("/job:ps/task:0", ("ps", None, 0, None, None), "/job:ps/task:0"),
    ("/job:worker/task:1/cpu:0", ("worker", None, 1, "CPU", 0),
     "/job:worker/task:1/device:CPU:0"),
    ("/cpu:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/device:CPU:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/gpu:1", (None, None, None, "GPU", 1), "/device:GPU:1"),
    ("/GPU:1", (None, None, None, "GPU", 1), "/device:GPU:1"),
    ("/gpu", (None, None, None, "GPU", None), "/device:GPU:*"),
    ("/device:GPU:*", (None, None, None, "GPU", None), "/device:GPU:*"),
    ("/device:TPU:3", (None, None, None, "TPU", 3), "/device:TPU:3"),
    ("/device:cpu:2", (None, None, None, "CPU", 2), "/device:CPU:2"),
    ("/task:3/replica:1/job:ps/", ("ps", 1, 3, None, None), "/job:ps/replica:1/task:3"),
    ("job:ps/replica:0/task:1/device:CPU:0", ("ps", 0, 1, "CPU", 0),
     "/job:ps/replica:0/task:1/device:CPU:0"),
])
def test_device_spec_parse_and_to_string(text, fields, canonical):
    spec = DeviceSpec.from_string(text)
    assert (spec.job, spec.replica, spec.task, spec.device_type,
            spec.device_index) == fields
    assert spec.to_string() == canonical
    assert canonical_name(text) == canonical
    assert DeviceSpec.from_string(canonical) == spec


@pytest.mark.parametrize("text, reason", [
    ("/job:ps/foo:1", "unknown part 'foo:1'"),
    ("/job:ps/task:x", "device task must be an int >= 0, got 'x'"),
    ("/job:ps/task:-1", "device task must be an int >= 0, got '-1'"),
    ("/cpu:0/gpu:0", "more than one device type"),
    ("/device:CPU:0/cpu:1", "more than one device type"),
    ("/job:", "device job must be a non-empty str"),
    ("/device:CPU", "unknown part 'device:CPU'"),
    ("/job:ps:1", "unknown part 'job:ps:1'"),
    ("ps", "unknown part 'ps'"),
])
def test_device_spec_bad_strings_name_the_string(text, reason):
    with pytest.raises(ValueError, match=f"invalid device spec {text!r}: .*{reason}"):
        DeviceSpec.from_string(text)


def test_device_spec_non_string_raises_type_error():
    with pytest.raises(TypeError, match="device spec must be a str, got 3"):
        DeviceSpec.from_string(3)  # type: ignore[arg-type]


def test_device_spec_constructor():
    spec = DeviceSpec(job="ps", replica=0, task=np.int64(1), device_type="cpu",
                      device_index=0)
    assert spec.to_string() == "/job:ps/replica:0/task:1/device:CPU:0"
    assert type(spec.task) is int
    assert DeviceSpec().to_string() == ""
    assert DeviceSpec(device_type="GPU").to_string() == "/device:GPU:*"
    with pytest.raises(ValueError, match="device task must be an int >= 0, got -2"):
        DeviceSpec(task=-2)
    with pytest.raises(ValueError, match="non-empty str"):
        DeviceSpec(job="")


def test_device_spec_parse_from_string_replaces_fields():
    spec = DeviceSpec(job="ps", task=3, device_type="GPU", device_index=1)
    assert spec.parse_from_string("/job:worker") is spec
    assert spec.to_string() == "/job:worker"


def test_device_spec_merge_from_inner_fields_override():
    spec = DeviceSpec.from_string("/job:ps/replica:0/cpu:0")
    spec.merge_from(DeviceSpec.from_string("/task:1/gpu:0"))
    assert spec.to_string() == "/job:ps/replica:0/task:1/device:GPU:0"
    spec.merge_from("/job:worker")
    assert spec.to_string() == "/job:worker/replica:0/task:1/device:GPU:0"
    spec.merge_from("")
    assert spec.to_string() == "/job:worker/replica:0/task:1/device:GPU:0"


def test_device_spec_make_merged_spec_leaves_self_unchanged():
    base = DeviceSpec.from_string("/job:ps/device:GPU:7")
    merged = base.make_merged_spec(DeviceSpec.from_string("/task:2/device:GPU:*"))
    assert merged.to_string() == "/job:ps/task:2/device:GPU:7"
    assert base.to_string() == "/job:ps/device:GPU:7"


def test_device_spec_eq_repr_and_unhashable():
    assert DeviceSpec.from_string("/cpu:0") == DeviceSpec(device_type="CPU",
                                                          device_index=0)
    assert DeviceSpec.from_string("/cpu:0") != DeviceSpec.from_string("/cpu:1")
    assert repr(DeviceSpec(job="ps", task=0)) == "DeviceSpec.from_string('/job:ps/task:0')"
    with pytest.raises(TypeError):
        hash(DeviceSpec())


def test_canonical_name():
    assert canonical_name(None) == ""
    assert canonical_name(DeviceSpec(job="ps")) == "/job:ps"
    assert canonical_name("/job:ps/task:0/cpu:0") == "/job:ps/task:0/device:CPU:0"


def test_op_def_normalizes_fields():
    op = OpDef("w", "VariableV2", device=None, shape=[784, 100])  # type: ignore[arg-type]
    assert op.device == ""
    assert op.shape == (784, 100)
    assert op.dtype is np.float32
    assert op.colocate_with is None
    assert OpDef("w", "VariableV2", device=DeviceSpec(job="ps")).device == "/job:ps"


# --- device() scopes: ports of TF's ops_test DeviceTest ------------------------------


def test_no_device():
    assert var() == ""
    assert current_device_stack() == []


def test_device_partial_string():
    with device("/job:worker/replica:2"):
        assert var() == "/job:worker/replica:2"


def test_device_full():
    with device(DeviceSpec(job="worker", replica=2, task=0, device_type="CPU",
                           device_index=3)):
        assert var() == "/job:worker/replica:2/task:0/device:CPU:3"


def test_nesting():
    with device("/job:worker/replica:2"):
        assert var("a") == "/job:worker/replica:2"
        with device("/job:worker/replica:3/task:0"):
            assert var("b") == "/job:worker/replica:3/task:0"
        assert var("c") == "/job:worker/replica:2"
    assert var("d") == ""


def test_nesting_override_gpu_cpu():
    with device("/job:worker/replica:2/device:CPU:1"):
        assert var("a") == "/job:worker/replica:2/device:CPU:1"
        with device("/job:worker/replica:2/device:GPU:2"):
            assert var("b") == "/job:worker/replica:2/device:GPU:2"
        assert var("c") == "/job:worker/replica:2/device:CPU:1"


def test_nesting_with_merge_device_function():
    with device(merge_device("/device:GPU:0")):
        assert var() == "/device:GPU:0"
        with device(merge_device("/job:worker")):
            assert var() == "/job:worker/device:GPU:0"
            with device(merge_device("/device:CPU:0")):
                assert var() == "/job:worker/device:CPU:0"
                with device(merge_device("/job:ps")):
                    assert var() == "/job:ps/device:CPU:0"
                    with device(merge_device(None)):
                        assert var() == "/job:ps/device:CPU:0"


def test_nesting_with_device_strings():
    with device("/device:GPU:0"):
        assert var() == "/device:GPU:0"
        with device("/job:worker"):
            assert var() == "/job:worker/device:GPU:0"
            with device("/device:CPU:0"):
                assert var() == "/job:worker/device:CPU:0"
                with device("/job:ps"):
                    assert var() == "/job:ps/device:CPU:0"
                    with device(""):
                        assert var() == "/job:ps/device:CPU:0"


def test_nesting_with_device_string_wildcard():
    with device("/device:GPU:7"):
        assert var() == "/device:GPU:7"
        with device("/device:GPU:*"):
            assert var() == "/device:GPU:7"
    with device("/device:CPU:*"):
        assert var() == "/device:CPU:*"
        with device("/device:CPU:5"):
            assert var() == "/device:CPU:5"


def test_none_clears_default():
    with device("/job:worker/replica:2/device:CPU:1"):
        assert var("a") == "/job:worker/replica:2/device:CPU:1"
        with device(None):
            assert var("b") == ""
        assert var("c") == "/job:worker/replica:2/device:CPU:1"


def test_none_ignores_outer_device_function():
    with device(lambda op: "/job:worker/replica:2/device:CPU:1"):
        assert var("a") == "/job:worker/replica:2/device:CPU:1"
        with device(None):
            assert var("b") == ""
        assert var("c") == "/job:worker/replica:2/device:CPU:1"


def test_overwriting_behavior():
    def overwrite(unused_op):
        return "/job:overwrite"

    with device(overwrite):
        assert var() == "/job:overwrite"
        with device("/job:ps"):  # Overwritten: the outer function runs last.
            assert var() == "/job:overwrite"
        with device(merge_device("/job:ps")):
            assert var() == "/job:overwrite"
        with device(None):
            with device("/job:ps"):
                assert var() == "/job:ps"
        with device(None):
            with device(merge_device("/job:ps")):
                assert var() == "/job:ps"


def test_device_function_sees_inner_device_and_op_is_not_modified():
    seen = []

    def record(op):
        seen.append((op.name, op.type, op.device, op.shape))
        return DeviceSpec.from_string(op.device).make_merged_spec("/task:4")

    op = OpDef("w", "VariableV2", shape=(3, 2))
    with device(record):
        with device("/job:ps/cpu:0"):
            assert get_device_for(op) == "/job:ps/task:4/device:CPU:0"
    assert seen == [("w", "VariableV2", "/job:ps/device:CPU:0", (3, 2))]
    assert op.device == ""


def test_op_device_wins_over_scope_strings():
    with device("/job:worker/task:1/cpu:0"):
        assert var(device="/job:ps/gpu:0") == "/job:ps/task:1/device:GPU:0"


def test_device_function_returning_none_clears():
    with device("/job:ps"):
        with device(lambda op: None):
            assert var() == "/job:ps"
    with device(lambda op: None):
        with device("/job:ps"):
            assert var() == ""


def test_device_function_bad_result_raises_type_error():
    with device(lambda op: 3):
        with pytest.raises(TypeError, match="returned 3 .*expected a device string"):
            var()


def test_device_bad_arguments_raise_at_call():
    with pytest.raises(ValueError, match="invalid device spec '/jb:ps'"):
        device("/jb:ps")
    with pytest.raises(TypeError, match=r"device\(\) takes .* got 3"):
        device(3)  # type: ignore[arg-type]
    assert current_device_stack() == []


def test_get_device_for_requires_op_def():
    with pytest.raises(TypeError, match="takes an OpDef"):
        get_device_for("w")  # type: ignore[arg-type]


def test_current_device_stack_and_pop_on_exception():
    def fn(op):
        return ""

    with pytest.raises(RuntimeError, match="boom"):
        with device("/job:ps/cpu:0"):
            with device(fn):
                with device(None):
                    assert current_device_stack() == ["/job:ps/device:CPU:0", fn, None]
                    raise RuntimeError("boom")
    assert current_device_stack() == []


def test_scope_object_cannot_be_entered_twice():
    scope = device("/job:ps")
    with scope:
        with pytest.raises(RuntimeError, match="entered twice"):
            scope.__enter__()
    assert current_device_stack() == []


def test_device_stack_is_per_thread():
    results = {}
    inside = threading.Event()
    release = threading.Event()

    def other():
        with device("/job:worker/replica:1"):
            inside.set()
            release.wait(5)
            results["other"] = var()
        results["other_after"] = var()

    with device("/job:ps"):
        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(5)
        results["main"] = var()
        release.set()
        t.join(5)
    assert results == {"main": "/job:ps", "other": "/job:worker/replica:1",
                       "other_after": ""}


# --- replica_device_setter: ports of TF's device_setter_test ------------------------


def test_standard_ps_ops():
    assert STANDARD_PS_OPS == (
        "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
        "MutableHashTableV2", "MutableHashTableOfTensors",
        "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
        "MutableDenseHashTableV2", "VarHandleOp")


def test_pinned_mnist_placement():
    cluster = {"ps": ["ps0:2222", "ps1:2222"], "worker": ["worker0:2222",
                                                          "worker1:2222"]}
    with device(replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")):
        placed = {
            "global_step": var("global_step", shape=(), dtype=np.int64),
            "hid_w": var("hid_w", shape=(784, 100)),
            "hid_b": var("hid_b", shape=(100,)),
            "sm_w": var("sm_w", shape=(100, 10)),
            "sm_b": var("sm_b", shape=(10,)),
        }
        assert compute("matmul") == "/job:worker/task:0"
    assert placed == {
        "global_step": "/job:ps/task:0",
        "hid_w": "/job:ps/task:1",
        "hid_b": "/job:ps/task:0",
        "sm_w": "/job:ps/task:1",
        "sm_b": "/job:ps/task:0",
    }


def test_cpu_override():
    with device(replica_device_setter(cluster=CLUSTER)):
        with device("/cpu:0"):
            v = var("v")
        w = var("w")
        with device("/cpu:0"):
            a = compute()
    assert v == "/job:ps/task:0/device:CPU:0"
    assert w == "/job:ps/task:1"
    assert a == "/job:worker/device:CPU:0"


def test_resource():
    with device(replica_device_setter(cluster=CLUSTER)):
        assert get_device_for(OpDef("v", "VarHandleOp")) == "/job:ps/task:0"


def test_ps2_tasks_with_cluster_spec_class():
    with device(replica_device_setter(cluster=CLUSTER)):
        assert var("v") == "/job:ps/task:0"
        assert var("w") == "/job:ps/task:1"
        assert compute() == "/job:worker"


def test_ps2_tasks_pin_variable_to_job():
    with device(replica_device_setter(cluster=CLUSTER)):
        v = var("v")
        with device("/job:moon"):
            w = var("w")
            with device("/job:ps"):  # An explicit ps job still gets a task.
                x = var("x")
        a = compute()
    assert v == "/job:ps/task:0"
    assert w == "/job:moon"
    assert x == "/job:ps/task:1"
    assert a == "/job:worker"


def test_ps2_tasks_use_cpu_for_ps():
    with device(replica_device_setter(ps_tasks=1, ps_device="/cpu:0")):
        v = var("v")
        with device("/job:moon"):
            w = var("w")
        a = compute()
    assert v == "/device:CPU:0"
    assert w == "/job:moon/device:CPU:0"
    assert a == "/job:worker"


def test_ps2_tasks_no_merging(caplog):
    with caplog.at_level(logging.WARNING, logger="psrt.distribute.device_setter"):
        setter = replica_device_setter(cluster=CLUSTER, merge_devices=False)
    assert "merge_devices=True" in caplog.text
    with device(setter):
        v = var("v")
        with device("/job:ps"):  # No task is assigned when merge_devices=False.
            w = var("w")
        a = compute()
    assert v == "/job:ps/task:0"
    assert w == "/job:ps"
    assert a == "/job:worker"


def test_ps2_tasks_with_cluster_spec_dict():
    with device(replica_device_setter(cluster=CLUSTER.as_dict())):
        assert var("v") == "/job:ps/task:0"
        assert var("w") == "/job:ps/task:1"
        assert compute() == "/job:worker"


def test_ps2_tasks_with_cluster_def():
    # psrt has no ClusterDef proto; its stand-in is the JSON form with string keys.
    cluster = {"ps": {"0": "ps0:2222", "1": "ps1:2222"}, "worker": {"0": "worker0:2222"}}
    with device(replica_device_setter(cluster=cluster)):
        assert var("v") == "/job:ps/task:0"
        assert var("w") == "/job:ps/task:1"
        assert compute() == "/job:worker"


def test_ps2_tasks_with_device():
    with device(replica_device_setter(ps_device="/job:moon", worker_device="/job:sun",
                                      cluster=SUN_MOON)):
        assert var("v") == "/job:moon/task:0"
        assert var("w") == "/job:moon/task:1"
        assert compute() == "/job:sun"


def test_ps2_tasks_with_cpu_constraint():
    with device(replica_device_setter(ps_device="/job:moon/cpu:0",
                                      worker_device="/job:sun", cluster=SUN_MOON)):
        assert var("v") == "/job:moon/task:0/device:CPU:0"
        assert var("w") == "/job:moon/task:1/device:CPU:0"
        assert compute() == "/job:sun"


def test_ps_tasks_without_cluster_round_robin_wraps():
    with device(replica_device_setter(ps_tasks=3)):
        assert [var(f"v{i}") for i in range(5)] == [
            "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2", "/job:ps/task:0",
            "/job:ps/task:1"]


def test_inner_task_pin_still_advances_round_robin():
    # As TF: the strategy runs for any op on the ps job; the inner task then wins.
    with device(replica_device_setter(cluster=CLUSTER)):
        with device("/job:ps/task:1"):
            assert var("a") == "/job:ps/task:1"
        assert var("b") == "/job:ps/task:1"


def test_returns_none_without_ps():
    assert replica_device_setter() is None
    assert replica_device_setter(ps_tasks=0) is None
    assert replica_device_setter(cluster={"worker": ["w:1"]}) is None
    assert replica_device_setter(cluster={"ps": [], "worker": ["w:1"]}) is None
    assert replica_device_setter(cluster=CLUSTER, ps_device="/job:moon") is None
    assert replica_device_setter(cluster=CLUSTER, ps_device="") is None


def test_replica_device_setter_errors():
    with pytest.raises(TypeError, match="ps_strategy must be callable, got 3"):
        replica_device_setter(cluster=CLUSTER, ps_strategy=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a dict mapping"):
        replica_device_setter(cluster=["ps0:2222"])
    with pytest.raises(ValueError, match="ps_tasks must be >= 0, got -1"):
        replica_device_setter(ps_tasks=-1)
    with pytest.raises(ValueError, match="invalid device spec '/jb:ps'"):
        replica_device_setter(cluster=CLUSTER, ps_device="/jb:ps")


def test_custom_ps_ops_and_strategy():
    calls = []

    def last_task(op):
        calls.append(op.name)
        return 1

    with device(replica_device_setter(cluster=CLUSTER, ps_ops=["Table"],
                                      ps_strategy=last_task)):
        assert get_device_for(OpDef("t", "Table")) == "/job:ps/task:1"
        assert var("v") == "/job:worker"
    assert calls == ["t"]


def test_worker_device_merges_inner_fields():
    with device(replica_device_setter(cluster=CLUSTER, worker_device="/job:worker/task:2")):
        with device("/gpu:0"):
            assert compute() == "/job:worker/task:2/device:GPU:0"
        with device("/job:chief"):
            assert compute() == "/job:chief/task:2"


def test_outer_string_scope_fills_fields_after_setter():
    with device("/job:worker/task:1/cpu:0"):
        with device(replica_device_setter(cluster=CLUSTER)):
            assert var("v") == "/job:ps/task:0/device:CPU:0"
            assert compute() == "/job:worker/task:1/device:CPU:0"


# --- slots: colocate_with --------------------------------------------------------------


def test_slots_colocate_with_variable_and_do_not_advance_counter():
    with device(replica_device_setter(cluster=CLUSTER)):
        w = var("w")
        w_momentum = var("w/Momentum", colocate_with=w)
        b = var("b")
        b_momentum = var("b/Momentum", colocate_with=b)
        c = var("c")
    assert (w, w_momentum) == ("/job:ps/task:0", "/job:ps/task:0")
    assert (b, b_momentum) == ("/job:ps/task:1", "/job:ps/task:1")
    assert c == "/job:ps/task:0"


def test_colocate_with_skips_device_functions():
    calls = []

    def fn(op):
        calls.append(op.name)
        return "/job:other"

    with device(fn):
        assert var("slot", colocate_with="/job:ps/task:1/cpu:0") == (
            "/job:ps/task:1/device:CPU:0")
        assert var("slot2", colocate_with="") == ""
    assert calls == []


def test_colocate_with_conflicting_device_keeps_requested(caplog):
    with caplog.at_level(logging.WARNING, logger="psrt.framework.device"):
        got = var("slot", device="/job:ps/task:0", colocate_with="/job:ps/task:1")
    assert got == "/job:ps/task:0"
    assert "colocated with device '/job:ps/task:1'" in caplog.text


# --- GreedyLoadBalancingStrategy (tf.contrib.training) -------------------------------


def test_uniform_load_equals_round_robin():
    strategy = GreedyLoadBalancingStrategy(2, lambda op: 1)
    with device(replica_device_setter(cluster=CLUSTER, ps_strategy=strategy)):
        placed = [var("u", (2, 2)), var("v", (2, 1)), var("w", (2, 2)), var("x", (1, 3))]
        assert compute() == "/job:worker"
    assert placed == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0",
                      "/job:ps/task:1"]


def test_byte_size_load_fn_placement():
    strategy = GreedyLoadBalancingStrategy(2, byte_size_load_fn)
    with device(replica_device_setter(cluster=CLUSTER, ps_strategy=strategy)):
        # Loads after each: [16, 0], [16, 8], [16, 24], [28, 24].
        placed = [var("u", (2, 2)), var("v", (2, 1)), var("w", (2, 2)), var("x", (1, 3))]
        assert compute() == "/job:worker"
    assert placed == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:1",
                      "/job:ps/task:0"]


def test_byte_size_load_fn_with_scalar():
    strategy = GreedyLoadBalancingStrategy(2, byte_size_load_fn)
    with device(replica_device_setter(cluster=CLUSTER, ps_strategy=strategy)):
        assert var("u", shape=(), dtype=np.int32) == "/job:ps/task:0"
        assert var("v", shape=(), dtype=np.int32) == "/job:ps/task:1"


def test_greedy_strategy_returns_python_int_and_breaks_ties_low():
    strategy = GreedyLoadBalancingStrategy(3, byte_size_load_fn)
    tasks = [strategy(OpDef(n, "VariableV2", shape=s)) for n, s in
             [("a", (10,)), ("b", (1,)), ("c", (1,)), ("d", (1,)), ("e", (100,))]]
    assert tasks == [0, 1, 2, 1, 2]
    assert all(type(t) is int for t in tasks)


def test_byte_size_load_fn_values():
    assert byte_size_load_fn(OpDef("w", "VariableV2", shape=(784, 100))) == 313600
    assert byte_size_load_fn(OpDef("s", "VariableV2", shape=(), dtype=np.int64)) == 8
    assert byte_size_load_fn(OpDef("h", "VariableV2", shape=(3, 5),
                                   dtype="float16")) == 30
    assert byte_size_load_fn(OpDef("z", "VariableV2", shape=(0, 5))) == 0


@pytest.mark.parametrize("shape", [None, (None, 3), (-1, 3)])
def test_byte_size_load_fn_unknown_shape_raises(shape):
    with pytest.raises(ValueError, match="fully defined shape; op 'w' has shape"):
        byte_size_load_fn(OpDef("w", "VariableV2", shape=shape))


def test_greedy_strategy_argument_errors():
    with pytest.raises(ValueError, match="num_tasks must be an int >= 1, got 0"):
        GreedyLoadBalancingStrategy(0, byte_size_load_fn)
    with pytest.raises(TypeError, match="load_fn must be callable"):
        GreedyLoadBalancingStrategy(2, 3)  # type: ignore[arg-type]
