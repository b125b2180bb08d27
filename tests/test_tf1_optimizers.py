"""TF1's other optimizers as psrt.train classes (Adadelta, AdagradDA, Ftrl/FtrlV2,
ProximalGradientDescent, ProximalAdagrad, RMSProp, centered RMSProp), trained end to end on
two ps tasks (subprocesses, over TCP): dense and row-sparse (IndexedSlices) gradients, in
float32 and float64, the variables and every slot compared after each step with a numpy
reference of TF1's formulas (tensorflow/core/kernels/training_ops.cc, TF 1.15: the
``reference_step``/``sparse_reference`` of tests/test_kernels.py, written from those
kernels), the slots saved under TF's slot-variable names and restored through Saver, and
each class wrapped by SyncReplicasOptimizer.

Constructor signatures, defaults, argument checks and slot names are TF's
(tensorflow/python/training/adadelta.py, adagrad_da.py, ftrl.py,
proximal_gradient_descent.py, proximal_adagrad.py, rmsprop.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import psrt

from _cluster import fresh_graph, prefix, ps_tasks, shared_ps2, worker  # noqa: F401
from test_kernels import reference_step, sparse_reference

T = psrt.train
LR = 0.1

# name: (optimizer factory (global_step) -> psrt optimizer, kernel, kernel keyword arguments,
#        slot names in kernel order, TF's slot variable suffixes in kernel order,
#        slot initial values in kernel order)
CASES = {
    "Adadelta": (lambda gs: T.AdadeltaOptimizer(LR, rho=0.9, epsilon=1e-6), "Adadelta",
                 {"rho": 0.9, "epsilon": 1e-6}, ["accum", "accum_update"],
                 ["Adadelta", "Adadelta_1"], [0.0, 0.0]),
    "AdagradDA": (lambda gs: T.AdagradDAOptimizer(
        LR, gs, initial_gradient_squared_accumulator_value=0.2, l1_regularization_strength=0.01,
        l2_regularization_strength=0.1), "AdagradDA", {"l1": 0.01, "l2": 0.1},
        ["gradient_accumulator", "gradient_squared_accumulator"], ["AdagradDA", "AdagradDA_1"],
        [0.0, 0.2]),
    "Ftrl": (lambda gs: T.FtrlOptimizer(LR, l1_regularization_strength=0.05,
                                        l2_regularization_strength=0.1), "Ftrl",
             {"l1": 0.05, "l2": 0.1, "lr_power": -0.5}, ["accum", "linear"], ["Ftrl", "Ftrl_1"],
             [0.1, 0.0]),
    "FtrlV2": (lambda gs: T.FtrlOptimizer(LR, learning_rate_power=-0.5,
                                          initial_accumulator_value=0.3,
                                          l1_regularization_strength=0.05,
                                          l2_regularization_strength=0.1,
                                          l2_shrinkage_regularization_strength=0.2),
               "Ftrl", {"l1": 0.05, "l2": 0.1, "l2_shrinkage": 0.2, "lr_power": -0.5},
               ["accum", "linear"], ["Ftrl", "Ftrl_1"], [0.3, 0.0]),
    "ProximalGradientDescent": (lambda gs: T.ProximalGradientDescentOptimizer(
        LR, l1_regularization_strength=0.05, l2_regularization_strength=0.1),
        "ProximalGradientDescent", {"l1": 0.05, "l2": 0.1}, [], [], []),
    "ProximalAdagrad": (lambda gs: T.ProximalAdagradOptimizer(
        LR, initial_accumulator_value=0.2, l1_regularization_strength=0.05,
        l2_regularization_strength=0.1), "ProximalAdagrad", {"l1": 0.05, "l2": 0.1},
        ["accumulator"], ["ProximalAdagrad"], [0.2]),
    "RMSProp": (lambda gs: T.RMSPropOptimizer(LR, decay=0.8, momentum=0.5, epsilon=1e-6),
                "RMSProp", {"rho": 0.8, "momentum": 0.5, "epsilon": 1e-6}, ["rms", "momentum"],
                ["RMSProp", "RMSProp_1"], [1.0, 0.0]),
    "CenteredRMSProp": (lambda gs: T.RMSPropOptimizer(LR, decay=0.8, momentum=0.5,
                                                      epsilon=1e-6, centered=True),
                        "CenteredRMSProp", {"rho": 0.8, "momentum": 0.5, "epsilon": 1e-6},
                        ["rms", "momentum", "mg"], ["RMSProp", "RMSProp_2", "RMSProp_1"],
                        [1.0, 0.0, 0.0]),
}

# Row-sparse steps of the embedding: indices (with duplicates, summed on the ps as TF's
# _apply_sparse_duplicate_indices) of a [6, 2] table.
SPARSE_INDICES = [[0, 3, 3], [5, 1], [3, 0, 4, 3], [2, 2], [1, 5, 0]]


def _gradients(dtype, steps, seed):
    """Fixed per-step gradients: dense [4, 3] and the sparse rows of SPARSE_INDICES."""
    rng = np.random.default_rng(seed)
    dense = [rng.standard_normal((4, 3)).astype(dtype) for _ in range(steps)]
    rows = [rng.standard_normal((len(SPARSE_INDICES[k % len(SPARSE_INDICES)]), 2)).astype(dtype)
            for k in range(steps)]
    return dense, rows


class _Ref:
    """The numpy reference of one variable and its slots."""

    def __init__(self, kernel, kw, value, slot_init):
        self.kernel, self.kw = kernel, dict(kw, learning_rate=LR)
        self.var = value.copy()
        self.slots = [np.full_like(value, s) for s in slot_init]
        self.steps = 0

    def dense(self, g):
        self.steps += 1
        reference_step(self.kernel, self.var, self.slots, g, dict(self.kw,
                                                                   global_step=self.steps))

    def sparse(self, idx, rows):
        self.steps += 1
        sparse_reference(self.kernel, self.var, self.slots, np.asarray(idx), rows,
                         dict(self.kw, global_step=self.steps))

    def copy(self):
        other = _Ref.__new__(_Ref)
        other.kernel, other.kw, other.steps = self.kernel, self.kw, self.steps
        other.var, other.slots = self.var.copy(), [s.copy() for s in self.slots]
        return other


def _tol(dtype):
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12,
                                                                      "atol": 1e-12}


def _check(sess, opt, var, ref, slot_names, dtype, what):
    np.testing.assert_allclose(sess.run(var), ref.var, err_msg=what, **_tol(dtype))
    for k, slot in enumerate(slot_names):
        np.testing.assert_allclose(sess.run(opt.get_slot(var, slot)), ref.slots[k],
                                   err_msg=f"{what}: slot {slot}", **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_dense_and_sparse_steps_equal_tf_formulas_and_slots_restore(
        name, dtype, shared_ps2, worker, prefix, tmp_path):
    make, kernel, kw, slot_names, slot_vars, slot_init = CASES[name]
    server = worker(shared_ps2)
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((4, 3)).astype(dtype)
    e0 = rng.standard_normal((6, 2)).astype(dtype)
    with psrt.device(T.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(w0, name=f"{prefix}/W")
        E = psrt.Variable(e0, name=f"{prefix}/E")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
    assert {W.device, E.device} == {"/job:ps/task:0", "/job:ps/task:1"}
    steps = 5
    dense, rows = _gradients(dtype, steps + 1, seed=11)
    step = {"k": 0}

    def loss(w, e):
        k = step["k"]
        step["k"] += 1
        idx = np.asarray(SPARSE_INDICES[k % len(SPARSE_INDICES)], np.int64)
        return 0.0, [dense[k], psrt.IndexedSlices(rows[k], idx, e.shape)]

    opt = make(gs)
    train_op = opt.minimize(loss, global_step=gs, var_list=[W, E])
    assert opt.get_slot_names() == sorted(slot_names)
    assert [s.name for s in opt.variables()] == (
        [f"{W.name}/{v}" for v in slot_vars] + [f"{E.name}/{v}" for v in slot_vars])

    rw, re_ = _Ref(kernel, kw, w0, slot_init), _Ref(kernel, kw, e0, slot_init)
    saver = T.Saver([W, E, gs])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        _check(sess, opt, W, rw, slot_names, dtype, "initial W")
        for k in range(3):
            assert sess.run([train_op, gs])[1] == k + 1
            rw.dense(dense[k])
            re_.sparse(SPARSE_INDICES[k], rows[k])
            _check(sess, opt, W, rw, slot_names, dtype, f"W after step {k + 1}")
            _check(sess, opt, E, re_, slot_names, dtype, f"E after step {k + 1}")
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=gs)
        saved = dict(T.list_variables(path))
        for var in (W, E):
            for suffix in slot_vars:  # TF's slot-variable names
                assert saved[f"{var.name}/{suffix}"] == list(var.shape)
        saved_w, saved_e = rw.copy(), re_.copy()
        for k in range(3, 5):  # train on, then go back to the checkpoint
            sess.run(train_op)
        saver.restore(sess, path)
        assert sess.run(gs) == 3
        _check(sess, opt, W, saved_w, slot_names, dtype, "W restored")
        _check(sess, opt, E, saved_e, slot_names, dtype, "E restored")
        if kernel != "AdagradDA":  # its step count lives on the ps, not in checkpoints
            step["k"] = 5
            sess.run(train_op)
            saved_w.dense(dense[5])
            saved_e.sparse(SPARSE_INDICES[0], rows[5])
            _check(sess, opt, W, saved_w, slot_names, dtype, "W: a step from the restore")
            _check(sess, opt, E, saved_e, slot_names, dtype, "E: a step from the restore")


@pytest.mark.parametrize("name", ["Ftrl", "CenteredRMSProp", "ProximalAdagrad"])
def test_sync_replicas_wraps_them(name, shared_ps2, worker, prefix):
    """SyncReplicasOptimizer(opt, replicas_to_aggregate=2, total_num_replicas=1): each step
    applies opt's update to the mean of two gradients (float32 sum, then / 2)."""
    make, kernel, kw, slot_names, _, slot_init = CASES[name]
    server = worker(shared_ps2)
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    with psrt.device(T.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(w0, name=f"{prefix}/W")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
    rng = np.random.default_rng(3)
    g = [rng.standard_normal(3).astype(np.float32) for _ in range(6)]
    it = iter(g)
    inner = make(gs)
    sync = T.SyncReplicasOptimizer(inner, replicas_to_aggregate=2, total_num_replicas=1)
    train_op = sync.minimize(lambda w: (0.0, [next(it)]), global_step=gs, var_list=[W])
    assert sync.get_slot_names() == sorted(slot_names)
    ref = _Ref(kernel, kw, w0, slot_init)
    with psrt.Session(server.target, config=psrt.ConfigProto(sync_timeout_secs=30)) as sess:
        sess.run(psrt.global_variables_initializer())
        for k in range(3):
            sess.run(train_op)
            assert sess.run(train_op) == 0.0
            ref.dense((g[2 * k] + g[2 * k + 1]) / np.float32(2))
            assert sess.run(gs) == k + 1
            _check(sess, inner, W, ref, slot_names, np.float32, f"step {k + 1}")


# ---- constructors: TF's signatures, defaults and checks ---------------------------------------

def test_defaults_are_tfs(fresh_graph):
    gs = T.get_or_create_global_step()
    ada = T.AdadeltaOptimizer()
    assert (ada._learning_rate, ada._rho, ada._epsilon, ada.get_name()) == (
        0.001, 0.95, 1e-8, "Adadelta")
    da = T.AdagradDAOptimizer(0.1, gs)
    assert (da._initial_gradient_squared_accumulator_value, da._l1, da._l2, da.get_name()) == (
        0.1, 0.0, 0.0, "AdagradDA")
    ftrl = T.FtrlOptimizer(0.1)
    assert (ftrl._learning_rate_power, ftrl._initial_accumulator_value, ftrl._l1, ftrl._l2,
            ftrl._l2_shrinkage, ftrl.get_name()) == (-0.5, 0.1, 0.0, 0.0, 0.0, "Ftrl")
    assert T.ProximalGradientDescentOptimizer(0.1).get_name() == "ProximalGradientDescent"
    pa = T.ProximalAdagradOptimizer(0.1)
    assert (pa._initial_accumulator_value, pa.get_name()) == (0.1, "ProximalAdagrad")
    rms = T.RMSPropOptimizer(0.1)
    assert (rms._decay, rms._momentum, rms._epsilon, rms._centered, rms.get_name()) == (
        0.9, 0.0, 1e-10, False, "RMSProp")
    # The hyper-parameters each registers with (TF1's defaults, explicit on the wire).
    assert rms._hyper() == {"learning_rate": 0.1, "use_locking": 0.0, "rho": 0.9,
                            "momentum": 0.0, "epsilon": 1e-10, "slot_init": 1.0,
                            "slot_init2": 0.0, "slot_init3": 0.0}
    assert ftrl._hyper()["slot_init"] == 0.1 and ftrl._hyper()["lr_power"] == -0.5
    assert da._hyper()["slot_init2"] == 0.1


def test_slot_variable_names_follow_tfs_creation_order(fresh_graph):
    W = psrt.Variable(np.zeros(2, np.float32), name="W")
    for opt, want in [
            (T.RMSPropOptimizer(0.1), {"rms": "W/RMSProp", "momentum": "W/RMSProp_1"}),
            (T.RMSPropOptimizer(0.1, centered=True, name="C"),
             {"rms": "W/C", "mg": "W/C_1", "momentum": "W/C_2"}),
            (T.FtrlOptimizer(0.1, name="F"), {"accum": "W/F", "linear": "W/F_1"}),
            (T.FtrlOptimizer(0.1, accum_name="acc", linear_name="lin"),
             {"accum": "W/acc", "linear": "W/lin"}),
            (T.AdadeltaOptimizer(name="D"), {"accum": "W/D", "accum_update": "W/D_1"})]:
        W._optimizer = None
        opt._bind(W)
        assert {k: opt.get_slot(W, k).name for k in want} == want
        assert opt.get_slot(W, "nonesuch") is None


@pytest.mark.parametrize("make,error,message", [
    (lambda: T.FtrlOptimizer(0.1, initial_accumulator_value=-0.1), ValueError,
     "initial_accumulator_value -0.100000 needs to be positive or zero"),
    (lambda: T.FtrlOptimizer(0.1, learning_rate_power=0.5), ValueError,
     "learning_rate_power 0.500000 needs to be negative or zero"),
    (lambda: T.FtrlOptimizer(0.1, l1_regularization_strength=-1.0), ValueError,
     "l1_regularization_strength -1.000000 needs to be positive or zero"),
    (lambda: T.FtrlOptimizer(0.1, l2_regularization_strength=-1.0), ValueError,
     "l2_regularization_strength -1.000000 needs to be positive or zero"),
    (lambda: T.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=-1.0), ValueError,
     "l2_shrinkage_regularization_strength -1.000000 needs to be positive or zero"),
    (lambda: T.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0), ValueError,
     "initial_accumulator_value must be positive: 0.0"),
    (lambda: T.ProximalGradientDescentOptimizer(0.1, l1_regularization_strength=-2.0),
     ValueError, "l1_regularization_strength -2.000000 needs to be positive or zero"),
    (lambda: T.AdagradDAOptimizer(0.1, T.get_or_create_global_step(),
                                  initial_gradient_squared_accumulator_value=0.0), ValueError,
     "initial_gradient_squared_accumulator_value must be positive: 0.0"),
    (lambda: T.AdagradDAOptimizer(0.1, 5), TypeError,
     "global_step must be the global step psrt.Variable"),
    (lambda: T.RMSPropOptimizer(0.1, decay="0.9"), TypeError,
     "RMSProp: decay must be a number; got '0.9'"),
    (lambda: T.AdadeltaOptimizer("fast"), TypeError,
     "Adadelta: learning_rate must be a number or a callable returning one; got 'fast'"),
])
def test_bad_arguments_raise_tfs_errors(fresh_graph, make, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        make()
