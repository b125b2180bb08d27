"""psrt.train's learning-rate schedules (psrt/learning_rate_decay.py): TF's own test values
(tensorflow/python/training/learning_rate_decay_test.py, TF 1.15), read from a global step
held by a ps subprocess over TCP, fetched with Session.run and summarized; and training where
the ps applies the decayed rate the worker computes from the global step at each step,
checked against a numpy loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import psrt

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401  (fixtures)

T = psrt.train
TOL = 1e-6  # TF's tests: assertAllClose(..., 1e-6)


@pytest.fixture
def step_var(shared_ps2, worker, prefix):
    """(session, int64 step Variable on a ps task, prefix); the variable starts at 0."""
    server = worker(shared_ps2)
    with psrt.device("/job:ps/task:0"):
        step = psrt.Variable(np.int64(0), name=f"{prefix}/step", trainable=False)
    sess = psrt.Session(server.target)
    sess.run(psrt.global_variables_initializer())
    yield sess, step, prefix
    sess.close()


def _at(sess, step, value, tensor):
    sess.run(step.assign(value))
    return float(sess.run(tensor))


# ---- TF's test values (learning_rate_decay_test.py) -------------------------------------------

def test_constant_steps(fresh_graph):
    with psrt.Session("") as sess:
        # LRDecayTest.testContinuous
        assert sess.run(T.exponential_decay(0.05, 5, 10, 0.96)) == pytest.approx(
            .05 * 0.96 ** (5.0 / 10.0), rel=TOL)
        # LinearDecayTest, SqrtDecayTest, PolynomialDecayTest
        lr, end = 0.05, 0.001
        cases = [((lr, 5, 10, 0.0), {}, lr * 0.5), ((lr, 10, 10, end), {}, end),
                 ((lr, 5, 10, end), {}, (lr + end) * 0.5), ((lr, 15, 10, end), {}, end),
                 ((lr, 15, 10, end), {"cycle": True}, (lr - end) * 0.25 + end),
                 ((lr, 5, 10, 0.0), {"power": 0.5}, lr * 0.5 ** 0.5),
                 ((lr, 5, 10, end), {"power": 0.5}, (lr - end) * 0.5 ** 0.5 + end),
                 ((lr, 15, 10, end), {"power": 0.5, "cycle": True},
                  (lr - end) * 0.25 ** 0.5 + end),
                 ((0.001, 0, 10), {"cycle": True}, 0.001)]
        for args, kw, want in cases:
            got = sess.run(T.polynomial_decay(*args, **kw))
            assert got == pytest.approx(want, rel=TOL, abs=TOL), (args, kw)

        # CosineDecayTest.testDecay / testAlpha (np_cosine_decay)
        def np_cosine_decay(step, decay_steps, alpha=0.0):
            step = min(step, decay_steps)
            decay = 0.5 * (1.0 + math.cos(math.pi * step / decay_steps))
            return (1.0 - alpha) * decay + alpha
        for step in range(0, 1500, 250):
            assert sess.run(T.cosine_decay(1.0, step, 1000)) == pytest.approx(
                np_cosine_decay(step, 1000), rel=TOL, abs=TOL)
            assert sess.run(T.cosine_decay(1.0, step, 1000, 0.1)) == pytest.approx(
                np_cosine_decay(step, 1000, 0.1), rel=TOL, abs=TOL)


def test_staircase_from_a_variable_on_the_ps(step_var):
    """LRDecayTest.testVariables: the rate follows the variable's value on its ps task."""
    sess, step, _ = step_var
    lr = T.exponential_decay(.1, step, 3, 0.96, staircase=True)
    assert lr.dtype == np.float32 and lr.shape == ()
    assert _at(sess, step, 1, lr) == pytest.approx(.1, rel=TOL)
    assert _at(sess, step, 2, lr) == pytest.approx(.1, rel=TOL)
    assert _at(sess, step, 100, lr) == pytest.approx(.1 * 0.96 ** (100 // 3), rel=TOL)


def test_natural_exp_and_inverse_time(step_var):
    """ExponentialDecayTest and InverseDecayTest (continuous and staircase), the step
    advanced by assign_add on the ps."""
    sess, step, _ = step_var
    k, rate = 10, 0.96
    nat = T.natural_exp_decay(0.1, step, k, rate)
    nat_s = T.natural_exp_decay(0.1, step, k, rate, staircase=True)
    inv = T.inverse_time_decay(0.1, step, k, rate)
    inv_s = T.inverse_time_decay(0.1, step, k, rate, staircase=True)
    for i in range(k + 1):
        got = sess.run([nat, nat_s, inv, inv_s])
        want = [0.1 * math.exp(-i / k * rate), 0.1 * math.exp(-rate * (i // k)),
                0.1 / (1 + i / k * rate), 0.1 / (1 + rate * (i // k))]
        np.testing.assert_allclose(got, want, rtol=TOL)
        sess.run(step.assign_add(1))


def test_piecewise_constant(step_var):
    """LRDecayTest.testPiecewiseConstant and ...EdgeCases."""
    sess, step, prefix = step_var
    lr = T.piecewise_constant(step, [100, 110, 120], [1.0, 0.1, 0.01, 0.001])
    for x, want in [(-999, 1.0), (100, 1.0), (105, 0.1), (110, 0.1), (120, 0.01),
                    (999, 0.001)]:
        assert _at(sess, step, x, lr) == pytest.approx(want, rel=TOL)
    int64_lr = T.piecewise_constant(step, [1, 2, 3], [0.4, 0.5, 0.6, 0.7])
    for x, want in [(0, 0.4), (1, 0.4), (2, 0.5), (3, 0.6), (4, 0.7)]:
        assert _at(sess, step, x, int64_lr) == pytest.approx(want, rel=TOL)
    with psrt.device("/job:ps/task:0"):
        x_float = psrt.Variable(np.float32(0.0), name=f"{prefix}/x")
    with pytest.raises(ValueError, match=r"Boundaries \(float\) must have the same dtype as "
                                         r"x \(int\)"):
        T.piecewise_constant(step, [-1.0, 1.0], [1, 2, 3])
    with pytest.raises(ValueError, match=r"Values must have elements all with the same dtype "
                                         r"\(float vs int\)"):
        T.piecewise_constant(x_float, [-1.0, 1.0], [1.0, 2, 3])
    with pytest.raises(ValueError, match="The length of boundaries should be 1 less than the "
                                         "length of values"):
        T.piecewise_constant(step, [1, 2], [1.0, 2.0])


def test_errors(fresh_graph):
    step = T.get_or_create_global_step()
    for fn in (T.exponential_decay, T.natural_exp_decay, T.inverse_time_decay):
        with pytest.raises(ValueError, match=f"global_step is required for {fn.__name__}."):
            fn(0.1, None, 10, 0.96)
        with pytest.raises(ValueError, match="decay_steps must be > 0 .* got 0"):
            fn(0.1, step, 0, 0.96)
    with pytest.raises(ValueError, match="global_step is required for polynomial_decay."):
        T.polynomial_decay(0.1, None, 10)
    with pytest.raises(ValueError, match="global_step is required for cosine_decay."):
        T.cosine_decay(0.1, None, 10)
    with pytest.raises(TypeError, match="global_step must be the global step psrt.Variable, a "
                                        "psrt.Tensor or a number; got 'step'"):
        T.exponential_decay(0.1, "step", 10, 0.5)
    with pytest.raises(TypeError, match="learning_rate must be a number or a psrt.Tensor"):
        T.cosine_decay([0.1], step, 10)


# ---- training: the ps applies the decayed rate --------------------------------------------

@pytest.mark.parametrize("schedule", ["exponential_staircase", "polynomial", "piecewise"])
def test_ps_applies_the_rate_of_each_step(schedule, shared_ps2, worker, prefix):
    """A worker process and a ps process: GradientDescent with a schedule of the global
    step. Step k (global step k before it) applies rate(k): W equals numpy's loop
    ``w -= rate(k) * g`` after every step, in float32 as the kernel (``var - g * lr``)."""
    server = worker(shared_ps2)
    with psrt.device(T.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(np.array([1.0, -2.0, 3.0], np.float32), name=f"{prefix}/W")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
    rates = {
        "exponential_staircase": (T.exponential_decay(0.5, gs, 2, 0.5, staircase=True),
                                  lambda k: 0.5 * 0.5 ** (k // 2)),
        "polynomial": (T.polynomial_decay(0.5, gs, 4, end_learning_rate=0.05, power=2.0),
                       lambda k: (0.5 - 0.05) * (1 - min(k, 4) / 4) ** 2 + 0.05),
        "piecewise": (T.piecewise_constant(gs, [1, 3], [0.5, 0.2, 0.05]),
                      lambda k: 0.5 if k <= 1 else 0.2 if k <= 3 else 0.05),
    }
    lr, rate = rates[schedule]
    train_op = T.GradientDescentOptimizer(lr).minimize(
        lambda w: (float(np.sum(w * w)), [2 * w]), global_step=gs, var_list=[W])
    summary = psrt.summary.scalar("learning_rate", lr)
    ref = np.array([1.0, -2.0, 3.0], np.float32)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for k in range(6):
            assert float(sess.run(lr)) == pytest.approx(rate(k), rel=TOL)
            value = psrt.Summary.FromString(sess.run(summary)).value[0]
            assert value.tag == "learning_rate"
            assert value.simple_value == pytest.approx(rate(k), rel=TOL)
            sess.run(train_op)
            ref = ref - (2 * ref) * np.float32(rate(k))
            np.testing.assert_allclose(sess.run(W), ref, rtol=TOL)
            assert sess.run(gs) == k + 1


def test_every_optimizer_takes_a_schedule_and_a_fed_placeholder(shared_ps2, worker, prefix):
    """A schedule as RMSProp's rate, and TF1's fed-placeholder rate for Momentum: the ps
    applies the rate of each step (checked against test_kernels' reference of the kernel)."""
    from test_kernels import reference_step

    server = worker(shared_ps2)
    with psrt.device(T.replica_device_setter(cluster=server.server_def_cluster)):
        A = psrt.Variable(np.array([0.5, -1.5], np.float32), name=f"{prefix}/A")
        B = psrt.Variable(np.array([2.0, 1.0], np.float32), name=f"{prefix}/B")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
    lr = T.inverse_time_decay(0.3, gs, 1, 1.0)
    feed_lr = psrt.placeholder(np.float32, [], name=f"{prefix}_lr")
    rms = T.RMSPropOptimizer(lr, momentum=0.5).minimize(
        lambda a, **_: (0.0, [a - np.float32(1)]), global_step=gs, var_list=[A])
    mom = T.MomentumOptimizer(feed_lr, 0.9).minimize(lambda b, **_: (0.0, [b]), var_list=[B])
    ra, sa = np.array([0.5, -1.5], np.float32), [np.ones(2, np.float32), np.zeros(2, np.float32)]
    rb, sb = np.array([2.0, 1.0], np.float32), [np.zeros(2, np.float32)]
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for k in range(4):
            ga, gb = ra - np.float32(1), rb.copy()
            sess.run([rms, mom], feed_dict={feed_lr: 0.1 * (k + 1)})
            reference_step("RMSProp", ra, sa, ga, {"learning_rate": 0.3 / (1 + k),
                                                   "rho": 0.9, "momentum": 0.5,
                                                   "epsilon": 1e-10})
            reference_step("Momentum", rb, sb, gb, {"learning_rate": np.float32(0.1 * (k + 1)),
                                                    "momentum": 0.9})
            np.testing.assert_allclose(sess.run(A), ra, rtol=1e-5)
            np.testing.assert_allclose(sess.run(B), rb, rtol=1e-5)
