"""psrt.train.ExponentialMovingAverage (psrt/moving_averages.py) against TF1's
tensorflow/python/training/moving_averages.py (TF 1.15): shadow variables on their variable's
ps task (subprocesses, over TCP) updated as ``shadow -= (1 - decay) * (shadow - var)`` with
``decay = min(decay, (1 + num_updates) / (10 + num_updates))``, compared with a numpy loop;
saved under TF's names and restored into the plain variables with
``Saver(ema.variables_to_restore())``; and updated by the chief after each step of a
SyncReplicasOptimizer with ``variable_averages``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import psrt

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401  (fixtures)

T = psrt.train
F32 = np.float32


def _ema_step(shadow, value, decay, num_updates=None):
    """TF's assign_moving_average in float32: ``shadow -= (shadow - value) * (1 - decay)``."""
    if num_updates is not None:
        decay = min(decay, (1.0 + num_updates) / (10.0 + num_updates))
    return shadow - (shadow - value) * F32(1.0 - decay)


def _model(server, prefix):
    with psrt.device(T.replica_device_setter(cluster=server.server_def_cluster)):
        W = psrt.Variable(np.array([[1.0, -2.0], [0.5, 3.0]], F32), name=f"{prefix}/W")
        b = psrt.Variable(np.array([0.25, -0.75], F32), name=f"{prefix}/b")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
    return W, b, gs


def test_apply_updates_shadows_on_the_ps_as_tf(shared_ps2, worker, prefix, tmp_path):
    server = worker(shared_ps2)
    W, b, gs = _model(server, prefix)
    target = np.array([[2.0, 0.0], [-1.0, 1.0]], F32)
    train_op = T.AdagradOptimizer(0.5).minimize(
        lambda w, bb: (0.0, [w - target, bb * F32(2)]), global_step=gs, var_list=[W, b])
    ema = T.ExponentialMovingAverage(0.9, num_updates=gs)
    averages = ema.apply([W, b])
    sw, sb = ema.average(W), ema.average(b)
    # TF's names, placement beside the variable, not trainable, saved with the model.
    assert (sw.name, sb.name) == (f"{prefix}/W/ExponentialMovingAverage",
                                  f"{prefix}/b/ExponentialMovingAverage")
    assert ema.average_name(W) == sw.name and ema.name == "ExponentialMovingAverage"
    assert (sw.device, sb.device) == (W.device, b.device) != ("", "")
    assert W.device != b.device
    assert not sw.trainable and sw not in psrt.trainable_variables()
    assert sw in psrt.global_variables()
    assert psrt.get_collection(psrt.GraphKeys.MOVING_AVERAGE_VARIABLES) == [W, b]
    with pytest.raises(ValueError, match=f"Moving average already computed for: {prefix}/W"):
        ema.apply([W])

    rw, rb = W.initial_value_array().copy(), b.initial_value_array().copy()
    aw, ab = rw.copy(), rb.copy()  # shadows start at the variables' initial values
    accum_w, accum_b = np.full_like(rw, 0.1), np.full_like(rb, 0.1)
    saver = T.Saver()
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(sw), aw)
        for step in range(1, 5):
            _, zero, got_step = sess.run([train_op, averages, gs])  # TF: control_dependencies
            assert zero == 0.0 and got_step == step
            gw, gb = rw - target, rb * F32(2)
            accum_w, accum_b = accum_w + gw * gw, accum_b + gb * gb
            rw = rw - F32(0.5) * gw / np.sqrt(accum_w)
            rb = rb - F32(0.5) * gb / np.sqrt(accum_b)
            aw, ab = _ema_step(aw, rw, 0.9, step), _ema_step(ab, rb, 0.9, step)
            np.testing.assert_allclose(sess.run(W), rw, rtol=1e-6)
            np.testing.assert_allclose(sess.run(sw), aw, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(sess.run(sb), ab, rtol=1e-6, atol=1e-7)
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=gs)
    saved = dict(T.list_variables(path))
    assert saved[sw.name] == [2, 2] and saved[sb.name] == [2]

    # Evaluation as TF's eval jobs do it: a new graph with the same model and no optimizer,
    # in a process of its own (here a local session), the averages restored into the plain
    # variables.
    with psrt.Graph().as_default():
        W2 = psrt.Variable(np.zeros((2, 2), F32), name=f"{prefix}/W")
        b2 = psrt.Variable(np.zeros(2, F32), name=f"{prefix}/b")
        gs2 = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
        ema2 = T.ExponentialMovingAverage(0.9)
        to_restore = ema2.variables_to_restore()
        assert to_restore == {sw.name: W2, sb.name: b2, gs2.name: gs2}
        with psrt.Session("") as sess:
            T.Saver(to_restore).restore(sess, path)
            np.testing.assert_allclose(sess.run(W2), aw, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(sess.run(b2), ab, rtol=1e-6, atol=1e-7)
            assert sess.run(gs2) == 4


def test_constant_decay_and_partitioned_variables(shared_ps2, worker, prefix):
    """No num_updates: the decay is constant; a PartitionedVariable is averaged part by part
    (each shadow on its part's ps task)."""
    server = worker(shared_ps2)
    with psrt.device(T.replica_device_setter(cluster=server.server_def_cluster)):
        P = psrt.get_variable(f"{prefix}/P", initializer=np.arange(8, dtype=F32).reshape(4, 2),
                              partitioner=psrt.fixed_size_partitioner(2))
    parts = list(P)
    train_op = T.GradientDescentOptimizer(0.25).minimize(
        lambda p: (0.0, [np.ones_like(p)]), var_list=[P])
    ema = T.ExponentialMovingAverage(0.5, name="avg")
    averages = ema.apply([P])
    assert [ema.average(p).device for p in parts] == [p.device for p in parts]
    assert parts[0].device != parts[1].device
    ref = np.arange(8, dtype=F32).reshape(4, 2)
    avg = ref.copy()
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for _ in range(3):
            sess.run([train_op, averages])
            ref = ref - F32(0.25)
            avg = _ema_step(avg, ref, 0.5)
        got = np.concatenate([sess.run(ema.average(p)) for p in parts])
        np.testing.assert_allclose(got, avg, rtol=1e-6)


def test_errors_and_names(fresh_graph):
    i = psrt.Variable(np.int64(3), name="i", trainable=False)
    w = psrt.Variable(np.zeros(2, F32), name="scope/w")
    ema = T.ExponentialMovingAverage(0.99, name="EMA")
    assert ema.average_name(w) == "scope/w/EMA" and ema.average(w) is None
    with pytest.raises(TypeError, match="The variables must be half, float, or double: i"):
        ema.apply([i])
    with pytest.raises(TypeError, match="decay must be a number"):
        T.ExponentialMovingAverage("0.99")
    with pytest.raises(TypeError, match="num_updates must be the global step"):
        T.ExponentialMovingAverage(0.99, num_updates="step")
    with pytest.raises(TypeError, match="variable_averages must be a psrt.train."
                                        "ExponentialMovingAverage or None"):
        T.SyncReplicasOptimizer(T.GradientDescentOptimizer(0.1), 1, variable_averages=0.9)
    # apply() defaults to the trainable variables (TF's var_list=None).
    shadows = ema.apply()
    assert [v.name for v in shadows.var_list] == ["scope/w/EMA"]


def test_sync_replicas_chief_updates_averages_after_each_step(shared_ps2, worker, prefix):
    """SyncReplicasOptimizer(variable_averages=ema, variables_to_average=[W]), 2 replicas of
    2 workers: after each aggregated step the chief's hook updates W's average from W's
    value after that step (TF: the chief queue runner's update)."""
    chief_server = worker(shared_ps2, 0, 2)
    other_server = worker(shared_ps2, 1, 2)
    with psrt.device(T.replica_device_setter(cluster=chief_server.server_def_cluster)):
        W = psrt.Variable(np.array([1.0, -2.0, 0.5], F32), name=f"{prefix}/W")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/global_step", trainable=False)
    psrt.add_to_collection(psrt.GraphKeys.GLOBAL_STEP, gs)
    ema = T.ExponentialMovingAverage(0.8, num_updates=gs)
    sync = T.SyncReplicasOptimizer(T.GradientDescentOptimizer(0.5), 2, 2,
                                   variable_averages=ema, variables_to_average=[W])
    train_op = sync.minimize(lambda w, x: (0.0, [w - x]), global_step=gs, var_list=[W])
    shadow = ema.average(W)
    assert shadow is not None and shadow.device == W.device
    steps = 3
    xs = [np.full(3, k + 1, F32) for k in range(steps)]
    ys = [np.full(3, -2.0 * k, F32) for k in range(steps)]
    errors: list[BaseException] = []
    graph = psrt.get_default_graph()

    def other() -> None:
        try:
            with psrt.Session(other_server.target, graph=graph,
                              config=psrt.ConfigProto(sync_timeout_secs=60)) as s:
                for k in range(steps):
                    s.run(train_op, feed_dict={"x": ys[k]})
        except BaseException as e:  # noqa: BLE001 - re-raised by the test
            errors.append(e)

    ref = np.array([1.0, -2.0, 0.5], F32)
    avg = ref.copy()
    hooks = [sync.make_session_run_hook(is_chief=True)]
    with T.MonitoredTrainingSession(master=chief_server.target, is_chief=True, hooks=hooks,
                                    config=psrt.ConfigProto(sync_timeout_secs=60)) as sess:
        thread = threading.Thread(target=other, daemon=True)
        thread.start()
        for k in range(steps):
            sess.run(train_op, feed_dict={"x": xs[k]})
            ref = ref - (((ref - xs[k]) + (ref - ys[k])) / F32(2)) * F32(0.5)
            avg = _ema_step(avg, ref, 0.8, k + 1)
            np.testing.assert_allclose(sess.run(W), ref, rtol=1e-6)
            np.testing.assert_allclose(sess.run(shadow), avg, rtol=1e-6, atol=1e-7)
        thread.join(60)
        assert not thread.is_alive() and not errors, errors
