"""Tests for psrt.optimizers: each optimizer applied on real ps tasks (subprocesses, over
TCP) equals a numpy implementation of TF1's formula; the ways to give gradients
(minimize, compute_gradients + apply_gradients, numpy arrays, feed names, row-sparse
IndexedSlices); slots; and every error by type and message.

The numpy references are written from TF1's documented update rules, not from the C++
kernels, in the dtype of the variable.
"""

from __future__ import annotations

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import (  # noqa: F401  (fixtures)
    fresh_graph,
    prefix,
    ps2,
    ps_tasks,
    shared_ps2,
    softmax_loss_and_grads,
    softmax_problem,
    worker,
)

TOL = 1e-6


# ---- numpy references (TF1's update rules) ---------------------------------------------------

class RefGradientDescent:
    def __init__(self, lr):
        self.lr = lr

    def apply(self, var, g, slots):
        return var - self.lr * g


class RefAdagrad:
    def __init__(self, lr, initial_accumulator_value=0.1):
        self.lr, self.init = lr, initial_accumulator_value

    def slots(self, var):
        return [np.full_like(var, self.init)]

    def apply(self, var, g, slots):
        slots[0] = slots[0] + g * g
        return var - self.lr * g / np.sqrt(slots[0])


class RefMomentum:
    def __init__(self, lr, momentum, use_nesterov=False):
        self.lr, self.m, self.nesterov = lr, momentum, use_nesterov

    def slots(self, var):
        return [np.zeros_like(var)]

    def apply(self, var, g, slots):
        slots[0] = slots[0] * self.m + g
        if self.nesterov:
            return var - (g * self.lr + slots[0] * self.m * self.lr)
        return var - self.lr * slots[0]


class RefAdam:
    def __init__(self, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, epsilon
        self.t = {}

    def slots(self, var):
        return [np.zeros_like(var), np.zeros_like(var)]

    def apply(self, var, g, slots):
        t = self.t[id(slots)] = self.t.get(id(slots), 0) + 1
        lr_t = self.lr * np.sqrt(1 - self.b2 ** t) / (1 - self.b1 ** t)
        slots[0] = self.b1 * slots[0] + (1 - self.b1) * g
        slots[1] = self.b2 * slots[1] + (1 - self.b2) * g * g
        return var - (lr_t * slots[0] / (np.sqrt(slots[1]) + self.eps)).astype(var.dtype)


def _slots(ref, var):
    return ref.slots(var) if hasattr(ref, "slots") else []


OPTIMIZERS = {
    "GradientDescent": (lambda: psrt.train.GradientDescentOptimizer(0.3),
                        lambda: RefGradientDescent(0.3), []),
    "Adagrad": (lambda: psrt.train.AdagradOptimizer(0.5, initial_accumulator_value=0.2),
                lambda: RefAdagrad(0.5, 0.2), ["accumulator"]),
    "Momentum": (lambda: psrt.train.MomentumOptimizer(0.1, 0.9),
                 lambda: RefMomentum(0.1, 0.9), ["momentum"]),
    "Nesterov": (lambda: psrt.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
                 lambda: RefMomentum(0.1, 0.9, use_nesterov=True), ["momentum"]),
    "Adam": (lambda: psrt.train.AdamOptimizer(0.05, beta1=0.8, beta2=0.95, epsilon=1e-7),
             lambda: RefAdam(0.05, 0.8, 0.95, 1e-7), ["m", "v"]),
}


def _quadratic(target_w, target_b):
    """loss = 0.5 |W - tW|^2 + 0.5 |b^2 - tb|^2: gradients that change every step."""
    def loss(W, b):
        dw = W - target_w
        db = 2 * b * (b * b - target_b)
        return float(0.5 * np.sum(dw * dw) + 0.5 * np.sum((b * b - target_b) ** 2)), (
            np.ascontiguousarray(dw), np.ascontiguousarray(db.astype(b.dtype)))
    return loss


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_on_the_ps_equals_numpy(name, dtype, shared_ps2, worker, prefix):
    make_opt, make_ref, slot_names = OPTIMIZERS[name]
    server = worker(shared_ps2)
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(5, 3)).astype(dtype)
    b0 = rng.uniform(0.5, 1.5, size=4).astype(dtype)
    tw = rng.normal(size=(5, 3)).astype(dtype)
    tb = rng.uniform(0.5, 2.0, size=4).astype(dtype)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(w0, name=f"{prefix}/W")
        b = psrt.Variable(b0, name=f"{prefix}/b")
        gs = psrt.train.get_or_create_global_step()  # global_step: shared name, same spec
    assert {W.device, b.device} == {"/job:ps/task:0", "/job:ps/task:1"}
    opt = make_opt()
    loss_fn = _quadratic(tw, tb)
    train_op = opt.minimize(loss_fn, var_list=[W, b], global_step=gs)
    assert opt.get_slot_names() == sorted(slot_names)

    ref = make_ref()
    rw, rb = w0.copy(), b0.copy()
    sw, sb = _slots(ref, rw), _slots(ref, rb)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for step in range(1, 7):
            ref_loss, (gw, gb) = loss_fn(rw, rb)
            loss, got_step = sess.run([train_op, gs])
            assert loss == pytest.approx(ref_loss, rel=TOL, abs=TOL)
            assert got_step == step
            rw, rb = ref.apply(rw, gw, sw), ref.apply(rb, gb, sb)
        w, bias = sess.run([W, b])
        assert w.dtype == dtype and bias.dtype == dtype
        np.testing.assert_allclose(w, rw, rtol=TOL, atol=TOL)
        np.testing.assert_allclose(bias, rb, rtol=TOL, atol=TOL)
        for i, slot_name in enumerate(opt.get_slot_names()):
            k = slot_names.index(slot_name)
            slot_w = sess.run(opt.get_slot(W, slot_name))
            slot_b = sess.run(opt.get_slot(b, slot_name))
            np.testing.assert_allclose(slot_w, sw[k], rtol=TOL, atol=TOL)
            np.testing.assert_allclose(slot_b, sb[k], rtol=TOL, atol=TOL)


def test_one_worker_adagrad_run_equals_numpy(ps2, worker):
    """The issue's "Done when": 50 Adagrad steps of softmax regression on random data over
    TCP equal the same 50 steps in numpy to 1e-6, step by step."""
    server = worker(ps2)
    x, y = softmax_problem(seed=3)
    d, k = x.shape[1], y.shape[1]
    with psrt.device(psrt.train.replica_device_setter(
            worker_device="/job:worker/task:0", cluster=server.server_def_cluster)):
        W = psrt.Variable(np.zeros((d, k), np.float32), name="W")
        b = psrt.Variable(np.zeros(k, np.float32), name="b")
        global_step = psrt.train.get_or_create_global_step()
    opt = psrt.train.AdagradOptimizer(0.5)
    train_op = opt.minimize(softmax_loss_and_grads, var_list=[W, b], global_step=global_step)

    rw, rb = np.zeros((d, k), np.float32), np.zeros(k, np.float32)
    aw, ab = np.full_like(rw, 0.1), np.full_like(rb, 0.1)
    lr = np.float32(0.5)
    losses = []
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for step in range(1, 51):
            ref_loss, (gw, gb) = softmax_loss_and_grads(rw, rb, x, y)
            aw, ab = aw + gw * gw, ab + gb * gb
            rw, rb = rw - lr * gw / np.sqrt(aw), rb - lr * gb / np.sqrt(ab)
            loss, got = sess.run([train_op, global_step], feed_dict={"images": x, "labels": y})
            assert got == step
            assert abs(loss - ref_loss) <= TOL, step
            losses.append(loss)
        w_value, b_value, acc_w, step = sess.run(
            [W, b, opt.get_slot(W, "accumulator"), global_step])
    assert step == 50
    np.testing.assert_allclose(w_value, rw, rtol=0, atol=TOL)
    np.testing.assert_allclose(b_value, rb, rtol=0, atol=TOL)
    np.testing.assert_allclose(acc_w, aw, rtol=TOL, atol=TOL)
    assert losses[-1] < 0.5 * losses[0]


# ---- ways to give gradients ---------------------------------------------------------------

@pytest.fixture
def gd_model(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(np.ones((2, 3), np.float32), name=f"{prefix}/W")
        b = psrt.Variable(np.zeros(3, np.float32), name=f"{prefix}/b")
        gs = psrt.Variable(np.int64(0), trainable=False, name=f"{prefix}/step",
                           collections=[psrt.GLOBAL_VARIABLES, "global_step"])
    return server, W, b, gs


def test_apply_gradients_with_numpy_gradients(gd_model):
    server, W, b, gs = gd_model
    gw = np.full((2, 3), 0.5, np.float32)
    gb = np.arange(3, dtype=np.float32)
    op = psrt.train.GradientDescentOptimizer(0.2).apply_gradients([(gw, W), (gb, b)],
                                                                    global_step=gs)
    assert op.name == "GradientDescent"
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for step in (1, 2, 3):
            assert sess.run([op, gs]) == [None, step]
        w, bias = sess.run([W, b])
    np.testing.assert_allclose(w, np.ones((2, 3)) - 3 * 0.2 * gw, atol=TOL)
    np.testing.assert_allclose(bias, -3 * 0.2 * gb, atol=TOL)


def test_apply_gradients_with_feed_names(gd_model):
    server, W, b, gs = gd_model
    op = psrt.train.GradientDescentOptimizer(0.5).apply_gradients(
        [("grad_W:0", W), ("grad_b", b)], global_step=gs, name="feed_step")
    assert op.name == "feed_step"
    gw = np.full((2, 3), 2.0, np.float32)
    gb = np.array([1.0, -1.0, 4.0], np.float32)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(op, feed_dict={"grad_W": gw, "grad_b:0": gb})
        sess.run(op, feed_dict={"grad_W": gw, "grad_b": np.zeros(3, np.float32)})
        w, bias, step = sess.run([W, b, gs])
        assert step == 2
        np.testing.assert_allclose(w, np.ones((2, 3)) - 2 * 0.5 * gw, atol=TOL)
        np.testing.assert_allclose(bias, -0.5 * gb, atol=TOL)
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(op, feed_dict={"grad_W": gw})
        assert str(e.value) == (f"You must feed a value for 'grad_b', the gradient of "
                                f"variable '{b.name}' (float32[3])")
        assert sess.run(gs) == 2


def test_compute_gradients_then_apply_gradients(gd_model):
    server, W, b, gs = gd_model
    calls = []

    def loss(W, b, scale):
        calls.append(scale)
        return float(scale * (W.sum() + b.sum())), (np.full_like(W, scale), np.full_like(b, scale))

    opt = psrt.train.GradientDescentOptimizer(0.1)
    pairs = opt.compute_gradients(loss, var_list=[W, b])
    assert [v for _, v in pairs] == [W, b]
    assert calls == []  # gradients are computed when the op runs
    op = opt.apply_gradients(pairs, global_step=gs)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run(op, feed_dict={"scale": 2.0}) == pytest.approx(12.0)
        assert sess.run(op, feed_dict={"scale": 1.0}) == pytest.approx(6 * 0.8 + 3 * -0.2)
        w, bias, step = sess.run([W, b, gs])
    assert calls == [2.0, 1.0] and step == 2
    np.testing.assert_allclose(w, np.full((2, 3), 1 - 0.3), atol=TOL)
    np.testing.assert_allclose(bias, np.full(3, -0.3), atol=TOL)
    with pytest.raises(ValueError) as e:
        opt.apply_gradients([pairs[0], (None, b)])
    assert str(e.value) == ("apply_gradients: pass every pair from compute_gradients "
                            "unchanged (drop a variable from var_list instead of setting its "
                            "gradient to None)")
    with pytest.raises(ValueError) as e:
        opt.apply_gradients([pairs[0], (np.zeros(3, np.float32), b)])
    assert str(e.value) == ("apply_gradients: mix gradients from one compute_gradients call "
                            "only with each other")


def test_compute_gradients_defaults_to_the_trainable_variables(gd_model):
    server, W, b, gs = gd_model
    pairs = psrt.train.GradientDescentOptimizer(0.1).compute_gradients(lambda W, b: (0.0, []))
    assert [v for _, v in pairs] == [W, b]  # not the (non-trainable) step


def test_none_gradient_skips_a_variable(gd_model):
    server, W, b, gs = gd_model
    op = psrt.train.GradientDescentOptimizer(1.0).minimize(
        lambda W, b: (0.0, [None, np.ones(3, np.float32)]), var_list=[W, b], global_step=gs)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(op)
        sess.run(op)
        w, bias, step = sess.run([W, b, gs])
    np.testing.assert_array_equal(w, np.ones((2, 3)))
    np.testing.assert_array_equal(bias, np.full(3, -2.0))
    assert step == 2


def test_learning_rate_callable_is_read_every_step(gd_model):
    server, W, b, gs = gd_model
    schedule = {"lr": 0.5}
    op = psrt.train.GradientDescentOptimizer(lambda: schedule["lr"]).apply_gradients(
        [(np.ones(3, np.float32), b)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(op)
        schedule["lr"] = 0.125
        sess.run(op)
        np.testing.assert_allclose(sess.run(b), np.full(3, -0.5 - 0.125), atol=TOL)


def test_use_locking_gives_the_same_values(gd_model):
    server, W, b, gs = gd_model
    op = psrt.train.AdagradOptimizer(0.1, use_locking=True).apply_gradients(
        [(np.full((2, 3), 2.0, np.float32), W)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(op)
        np.testing.assert_allclose(sess.run(W), np.full((2, 3), 1 - 0.1 * 2 / np.sqrt(4.1)),
                                   atol=TOL)


# ---- row-sparse gradients -----------------------------------------------------------------

def test_indexed_slices_duplicates_are_summed(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    e0 = np.arange(12, dtype=np.float32).reshape(6, 2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        E = psrt.Variable(e0, name=f"{prefix}/E")
        A = psrt.Variable(e0, name=f"{prefix}/A")
        gs = psrt.Variable(np.int64(0), trainable=False, name=f"{prefix}/step")
    values = np.array([[1.0, 2.0], [10.0, 20.0], [3.0, 4.0]], np.float32)
    indices = np.array([1, 4, 1], np.int32)  # any integer dtype; duplicates summed
    slices = psrt.IndexedSlices(values, indices, dense_shape=(6, 2))
    assert repr(slices) == "IndexedSlices(indices=(3,), values=(3, 2), dense_shape=(6, 2))"
    sgd = psrt.train.GradientDescentOptimizer(0.5).apply_gradients([(slices, E)],
                                                                    global_step=gs)
    ada = psrt.train.AdagradOptimizer(1.0).minimize(lambda A: (0.0, [slices]), var_list=[A])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run([sgd, gs]) == [None, 1]
        sess.run(ada)
        e, a, acc = sess.run([E, A, ada.optimizer.get_slot(A, "accumulator")])
        rows = sess.run(E)[[1, 4]]
        np.testing.assert_array_equal(sess.pull_rows(E, [4, 1]), rows[::-1])
        np.testing.assert_array_equal(sess.pull_rows(E, np.array([[1], [4]])),
                                      rows.reshape(2, 1, 2))
        with pytest.raises(errors.InvalidArgumentError) as err:
            sess.pull_rows(E, [0, 6])
        assert str(err.value) == (f"variable '{E.name}': index 6 at position 1 is out of "
                                  f"range [0, 6)")
        with pytest.raises(errors.InvalidArgumentError) as err:
            sess.run(psrt.train.GradientDescentOptimizer(0.5).apply_gradients(
                [(psrt.IndexedSlices(values[:2], [0, -1]), E)]))
        assert str(err.value) == (f"variable '{E.name}': index -1 at position 1 is out of "
                                  f"range [0, 6)")
        np.testing.assert_array_equal(sess.run(E), e)  # a rejected update writes nothing
    summed = np.zeros_like(e0)
    summed[1] = values[0] + values[2]
    summed[4] = values[1]
    np.testing.assert_allclose(e, e0 - 0.5 * summed, atol=TOL)
    ref_acc = np.full_like(e0, 0.1)
    ref_acc[[1, 4]] += summed[[1, 4]] ** 2  # only the touched rows
    ref_a = e0.copy()
    ref_a[[1, 4]] -= summed[[1, 4]] / np.sqrt(ref_acc[[1, 4]])
    np.testing.assert_allclose(acc, ref_acc, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(a, ref_a, rtol=TOL, atol=TOL)


def test_dense_and_sparse_gradients_in_one_step_increment_the_step_once(gd_model):
    server, W, b, gs = gd_model
    slices = psrt.IndexedSlices(np.ones((1, 3), np.float32), np.array([1]))
    op = psrt.train.GradientDescentOptimizer(0.5).minimize(
        lambda W, b: (2.0, [slices, np.ones(3, np.float32)]), var_list=[W, b], global_step=gs)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run([op, gs]) == [2.0, 1]
        assert sess.run([op, gs]) == [2.0, 2]
        w, bias = sess.run([W, b])
    np.testing.assert_array_equal(w, [[1, 1, 1], [0, 0, 0]])
    np.testing.assert_array_equal(bias, np.full(3, -1.0))


def test_indexed_slices_errors(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        E = psrt.Variable(np.zeros((4, 2), np.float32), name=f"{prefix}/E")
    opt = psrt.train.GradientDescentOptimizer(0.5)
    float_idx = opt.apply_gradients([(psrt.IndexedSlices(np.ones((1, 2), np.float32),
                                                         np.array([0.5])), E)])
    bad_rows = opt.apply_gradients([(psrt.IndexedSlices(np.ones((2, 3), np.float32),
                                                        np.array([0, 1])), E)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(float_idx)
        assert str(e.value) == f"indices for variable '{E.name}' must be integers; got float64"
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(bad_rows)
        assert str(e.value) == (f"gradient rows for variable '{E.name}' must be float32[2,2]; "
                                f"got float32[2,3]")


# ---- errors ------------------------------------------------------------------------------------

def test_wrong_dtype_or_shape_gradient_names_variable_and_both(gd_model):
    server, W, b, gs = gd_model
    opt = psrt.train.GradientDescentOptimizer(0.1)
    op = opt.apply_gradients([("gW", W), ("gb", b)], global_step=gs)
    ok_b = np.zeros(3, np.float32)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        cases = [
            (np.zeros((2, 3), np.float64),
             f"gradient for variable '{W.name}' must be float32[2,3]; got float64[2,3]"),
            (np.zeros((3, 2), np.float32),
             f"gradient for variable '{W.name}' must be float32[2,3]; got float32[3,2]"),
            ([[0.0] * 3] * 2,
             f"gradient for variable '{W.name}' must be a numpy array of float32[2, 3]; "
             f"got list"),
        ]
        for grad, message in cases:
            with pytest.raises(errors.InvalidArgumentError) as e:
                sess.run(op, feed_dict={"gW": grad, "gb": ok_b})
            assert str(e.value) == message
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(op, feed_dict={"gW": np.zeros((3, 2), np.float32).T, "gb": ok_b})
        assert str(e.value).startswith(f"gradient for variable '{W.name}' must be ")
        assert "C-contiguous" in str(e.value) and "numpy.ascontiguousarray" in str(e.value)
        # Nothing was applied and the step did not move.
        assert sess.run(gs) == 0
        np.testing.assert_array_equal(sess.run(W), np.ones((2, 3)))


def test_loss_function_errors(gd_model):
    server, W, b, gs = gd_model
    opt = psrt.train.GradientDescentOptimizer(0.1)
    too_few = opt.minimize(lambda W, b: (0.0, [np.zeros_like(W)]), var_list=[W, b])
    no_pair = opt.minimize(lambda W, b: 0.0, var_list=[W, b])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        with pytest.raises(ValueError) as e:
            sess.run(too_few)
        assert str(e.value) == (f"the loss function returned 1 gradients for 2 variables "
                                f"['{W.name}', '{b.name}']")
        with pytest.raises(TypeError) as e:
            sess.run(no_pair)
        assert str(e.value) == "the loss function must return (loss, grads); got float"


def test_no_variables_to_optimize(fresh_graph):
    opt = psrt.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError) as e:
        opt.minimize(lambda: (0.0, []))
    assert str(e.value) == "No variables to optimize."
    with pytest.raises(ValueError, match=r"^No variables to optimize\.$"):
        opt.compute_gradients(lambda: (0.0, []), var_list=[])
    psrt.Variable(np.zeros(2, np.float32), trainable=False, name="frozen")
    with pytest.raises(ValueError, match=r"^No variables to optimize\.$"):
        opt.minimize(lambda: (0.0, []))


def test_apply_gradients_argument_errors(fresh_graph):
    W = psrt.Variable(np.zeros(2, np.float32), name="W")
    c = psrt.Variable(np.zeros(2, np.int64), name="c")
    wrong_step = psrt.Variable(np.zeros(1, np.int64), trainable=False, name="wrong_step")
    opt = psrt.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError) as e:
        opt.apply_gradients([])
    assert str(e.value) == "No variables provided."
    with pytest.raises(ValueError) as e:
        opt.apply_gradients([(None, W)])
    assert str(e.value) == "No gradients provided for any variable: ['W']."
    with pytest.raises(TypeError, match="apply_gradients needs psrt Variables; got 3"):
        opt.apply_gradients([(np.zeros(2, np.float32), 3)])
    with pytest.raises(ValueError) as e:
        opt.apply_gradients([(np.zeros(2, np.int64), c)])
    assert str(e.value) == "variable 'c' is int64; optimizers need float32 or float64"
    # TF's assert_global_step (training_util.py): an int64 vector is "not scalar".
    with pytest.raises(TypeError, match='Existing "global_step" is not scalar'):
        opt.apply_gradients([(np.zeros(2, np.float32), W)], global_step=wrong_step)
    with pytest.raises(TypeError) as e:
        opt.minimize(np.zeros(2))
    assert str(e.value).startswith("loss must be a psrt.Tensor, or a callable returning (loss, "
                                   "grads) from the variables' values; got ")


def test_one_optimizer_per_variable(fresh_graph):
    W = psrt.Variable(np.zeros(2, np.float32), name="W")
    g = np.zeros(2, np.float32)
    psrt.train.AdagradOptimizer(0.1).apply_gradients([(g, W)])
    psrt.train.AdagradOptimizer(0.1).apply_gradients([(g, W)])  # same kernel and settings
    with pytest.raises(ValueError) as e:
        psrt.train.AdamOptimizer(0.1).apply_gradients([(g, W)])
    assert str(e.value) == ("variable 'W' is already trained by Adagrad (Adagrad); psrt "
                            "applies one optimizer per variable on the ps, so it cannot also "
                            "be trained by Adam (Adam)")
    with pytest.raises(ValueError, match="already trained by Adagrad"):
        psrt.train.AdagradOptimizer(0.1, initial_accumulator_value=1.0).apply_gradients(
            [(g, W)])


def test_constructor_errors():
    with pytest.raises(ValueError) as e:
        psrt.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    assert str(e.value) == "initial_accumulator_value must be positive: 0.0"
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive: -1"):
        psrt.train.AdagradOptimizer(0.1, initial_accumulator_value=-1)
    with pytest.raises(TypeError) as e:
        psrt.train.GradientDescentOptimizer("fast")
    assert str(e.value) == ("GradientDescent: learning_rate must be a number or a callable "
                            "returning one; got 'fast'")
    with pytest.raises(TypeError, match="Adam: learning_rate must be a number"):
        psrt.train.AdamOptimizer(True)
    with pytest.raises(TypeError) as e:
        psrt.train.MomentumOptimizer(0.1, momentum="0.9")
    assert str(e.value) == "Momentum: momentum must be a number; got '0.9'"
    with pytest.raises(ValueError, match="Must specify the optimizer name"):
        psrt.train.GradientDescentOptimizer(0.1, name="")


def test_slots_names_and_lookup(fresh_graph):
    W = psrt.Variable(np.zeros((2, 2), np.float32), name="W")
    other = psrt.Variable(np.zeros(2, np.float32), name="other")
    adam = psrt.train.AdamOptimizer()
    adam.apply_gradients([(np.zeros((2, 2), np.float32), W)])
    assert adam.get_slot_names() == ["m", "v"]
    m, v = adam.get_slot(W, "m"), adam.get_slot(W, "v")
    assert (m.name, v.name) == ("W/Adam", "W/Adam_1")
    assert m.shape == (2, 2) and m.dtype == np.float32 and m.primary is W
    assert adam.get_slot(other, "m") is None and adam.get_slot(W, "nope") is None
    assert adam.variables() == [m, v]
    assert psrt.train.GradientDescentOptimizer(0.1).get_slot_names() == []
    assert psrt.train.MomentumOptimizer(0.1, 0.5).get_slot_names() == ["momentum"]
    mom = psrt.train.MomentumOptimizer(0.1, 0.5, name="Mom")
    mom.apply_gradients([(np.zeros(2, np.float32), other)])
    assert mom.get_slot(other, "momentum").name == "other/Mom"
    assert mom.get_name() == "Mom"
