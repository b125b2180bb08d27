"""Tests for psrt.graph and psrt.executor: placeholders, derived tensors (py_func,
psrt.function, operators), what a fetch of them runs, and minimize() of a loss tensor with
gradients by autodiff. TF1's behaviour is the reference; each test cites the TF source.

Most tests run a single-process ``Session("")`` (TF's local session: a private in-process
ps); the cluster tests use ps subprocesses (tests/_cluster.py) on ports the OS hands out.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import fresh_graph, ps1, ps2, ps_tasks, worker  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _fresh(fresh_graph):  # noqa: F811
    yield


def _linear_model(calls=None):
    """y = x @ W + b with a squared loss; ``calls`` counts runs of the loss function."""
    x = psrt.placeholder(np.float32, [None, 3], name="x")
    y_ = psrt.placeholder(np.float32, [None], name="y_")
    W = psrt.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="W")
    b = psrt.Variable(np.float32(0.5), name="b")

    def squared_error(W, b, x, y):
        if calls is not None:
            calls.append(1)
        return anp.mean((x @ W + b - y) ** 2)

    loss = psrt.py_func(squared_error, [W, b, x, y_], np.float32)
    return x, y_, W, b, loss


FEED_X = np.array([[1, 0, 0], [0, 1, 1]], np.float32)
FEED_Y = np.array([1, 2], np.float32)


def _expected_loss(W, b):
    return np.mean((FEED_X @ W + b - FEED_Y) ** 2)


# ---- placeholders as feed keys ---------------------------------------------------------------

def test_placeholder_object_name_and_tensor_name_are_feed_keys():
    # TF: tensorflow/python/client/session.py, _run: feed keys are Tensors, or strings that
    # graph.as_graph_element resolves ("x:0"); psrt also takes the op name ("x").
    x = psrt.placeholder(np.float32, [None, 2], name="x")
    double = psrt.py_func(lambda v: v * 2, [x], np.float32)
    assert x.name == "x:0" and x.op.name == "x" and double.name == "PyFunc:0"
    with psrt.Session() as sess:
        for key in (x, "x", "x:0"):
            out = sess.run(double, feed_dict={key: [[1, 2]]})
            np.testing.assert_array_equal(out, np.array([[2, 4]], np.float32))
            assert out.dtype == np.float32
        # A fed placeholder is itself fetchable (TF returns the fed value, converted).
        out = sess.run(x, feed_dict={"x:0": [[3, 4]]})
        assert out.dtype == np.float32 and out.tolist() == [[3.0, 4.0]]
        assert sess.run("x:0", feed_dict={x: [[5, 6]]}).tolist() == [[5.0, 6.0]]


def test_placeholder_names_are_made_unique_as_tf():
    # TF: ops.Graph.unique_name, the "_1" suffix.
    a = psrt.placeholder(np.float32, name="p")
    b = psrt.placeholder(np.float32, name="p")
    c = psrt.placeholder(np.float32)
    assert (a.name, b.name, c.name) == ("p:0", "p_1:0", "Placeholder:0")


def test_missing_feed_is_tfs_error_before_anything_runs():
    # TF: tensorflow/core/kernels/placeholder_op.cc: "You must feed a value for placeholder
    # tensor 'x' with dtype float and shape [?,3]" (InvalidArgumentError).
    x, y_, W, b, loss = _linear_model()
    gs = psrt.train.get_or_create_global_step()
    train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(loss, feed_dict={x: FEED_X})
        assert e.value.message == ("You must feed a value for placeholder tensor 'y_' with "
                                   "dtype float and shape [?]")
        # With a train op: the step does not run at all.
        with pytest.raises(errors.InvalidArgumentError, match="placeholder tensor 'x' with "
                           r"dtype float and shape \[\?,3\]"):
            sess.run([train_op, gs], feed_dict={y_: FEED_Y})
        assert sess.run(gs) == 0
        np.testing.assert_array_equal(sess.run(W), [1, 2, 3])
        i64 = psrt.placeholder(np.int64, name="ids")
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(psrt.py_func(lambda v: v + 1, [i64], np.int64))
        assert e.value.message == ("You must feed a value for placeholder tensor 'ids' with "
                                   "dtype int64")


def test_fed_value_is_converted_and_its_shape_checked():
    # TF: session.py _run: np.asarray(val, dtype=subfeed_dtype), then "Cannot feed value of
    # shape (1, 2) for Tensor 'x:0', which has shape '(?, 3)'" (ValueError).
    x = psrt.placeholder(np.float32, [None, 3], name="x")
    with psrt.Session() as sess:
        with pytest.raises(ValueError) as e:
            sess.run(x, feed_dict={x: [[1, 2]]})
        assert str(e.value) == ("Cannot feed value of shape (1, 2) for Tensor 'x:0', which "
                                "has shape '(?, 3)'")
        assert sess.run(x, {x: np.ones((4, 3), np.float64)}).dtype == np.float32


def test_feeds_that_do_not_convert_exactly_are_refused_and_nothing_is_trained(ps1, worker):  # noqa: F811
    # TF r1.15, tensorflow/python/client/session.py, BaseSession._run: a Python int that
    # `_convert_to_numpy_obj(subfeed_dtype, v) != v` does not survive is refused ("Type of feed
    # value ... is not compatible with Tensor type ..."), then `np.asarray(subfeed_val,
    # dtype=subfeed_dtype)`, which makes NaN of None and 1 of 1.5. psrt applies TF's round-trip
    # rule to every element (issue 22, item 4): the old code trained the NaN of None into W.
    server = worker(ps1)
    with psrt.device(psrt.train.replica_device_setter(cluster=ps1.cluster(1))):
        x, y_, W, b, loss = _linear_model()
        gs = psrt.train.get_or_create_global_step()
    train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    n = psrt.placeholder(np.int32, [], name="n")
    scaled = psrt.py_func(lambda v, k: v * k, [loss, n], np.float32, name="scaled")
    feed = {x: FEED_X, y_: FEED_Y, n: 1}
    refused = [
        (x, [[1, 0, 0], [0, 1, None]], "None (element [1, 2] of the fed value) to 'x' of dtype "
                                       "float32"),
        (y_, [1.0, "2"], "'2' (element [1] of the fed value) to 'y_' of dtype float32"),
        (y_, [1.0, 2j], "2j (element [1] of the fed value) to 'y_' of dtype float32"),
        (y_, [1.0, 1e39], "1e+39 (element [1] of the fed value) to 'y_' of dtype float32"),
        (n, 1.5, "1.5 to 'n' of dtype int32"),
        (n, 2**31, "2147483648 to 'n' of dtype int32"),
        (n, np.nan, "nan to 'n' of dtype int32"),
    ]
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for key, value, shown in refused:
            with pytest.raises(errors.InvalidArgumentError) as e:
                sess.run([train_op, scaled, gs], feed_dict={**feed, key: value})
            assert e.value.message.startswith(f"Cannot feed {shown}: it does not convert "
                                              f"exactly"), e.value.message
        assert "integers in [-2147483648, 2147483647]" in e.value.message
        # Nothing was sent: the ps task holds the initial values and the step is 0.
        assert sess.run(gs) == 0
        np.testing.assert_array_equal(sess.run(W), [1, 2, 3])
        assert sess.run(b) == 0.5
        # Values that convert exactly still train: ints into float32, 2.0 into int32.
        out = sess.run([train_op, scaled, gs],
                       feed_dict={x: [[1, 0, 0], [0, 1, 1]], y_: [1, 2], n: 2.0})
        assert out[2] == 1 and out[1] == pytest.approx(2 * _expected_loss([1, 2, 3], 0.5))
        # One step of gradient descent: residuals [0.5, 3.5], dW = x^T r, db = 2 mean(r).
        np.testing.assert_allclose(sess.run(W), [0.95, 1.65, 2.65], rtol=1e-6)
        assert sess.run(b) == pytest.approx(0.1)


def test_placeholder_with_default():
    # TF: array_ops.placeholder_with_default: the default when not fed.
    p = psrt.placeholder_with_default(np.float32(2.0), [], name="keep_prob")
    with psrt.Session() as sess:
        assert sess.run(p) == 2.0
        assert sess.run(p, {p: 0.5}) == 0.5


# ---- derived tensors ----------------------------------------------------------------------------

def test_py_func_outputs_and_dtype_conversion():
    # TF: ops/script_ops.py py_func: Tout a list -> a list of tensors; results converted to
    # Tout (_convert: np.asarray(value, dtype)).
    x = psrt.placeholder(np.float32, name="x")
    lo, hi = psrt.py_func(lambda v: (v.min(), v.max()), [x], [np.float64, np.int64])
    with psrt.Session() as sess:
        a, b = sess.run([lo, hi], {x: [3.5, 1.0, 9.0]})
        assert a == 1.0 and a.dtype == np.float64 and b == 9 and b.dtype == np.int64
        bad = psrt.py_func(lambda v: (v,), [x], [np.float32, np.float32], name="bad")
        with pytest.raises(errors.InvalidArgumentError,
                           match="op 'bad' returned 1 values, but expects to see 2 values"):
            sess.run(bad, {x: [1.0]})


def test_function_decorator_and_operators_build_tensors():
    # TF 1.15's tf.function in graph mode: calling it with tensors adds a call op.
    x = psrt.placeholder(np.float32, [None, 2], name="x")
    W = psrt.Variable(np.array([[1.0], [2.0]], np.float32), name="W")

    @psrt.function
    def affine(W, x, shift=0.0):
        return x @ W + shift

    y = affine(W, x, shift=1.0)
    assert isinstance(y, psrt.Tensor) and y.op.name == "affine"
    z = -(2 * (x @ W) + 1) / 2 - y[:, 0:1] ** 2
    # Called with plain arrays, the function just computes.
    np.testing.assert_allclose(affine(np.ones((2, 1)), np.ones((1, 2))), [[2.0]])
    with pytest.raises(TypeError, match="not allowed"):
        bool(y)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        yv, zv = sess.run([y, z], {x: [[1, 1]]})
        np.testing.assert_allclose(yv, [[4.0]])
        np.testing.assert_allclose(zv, [[-(2 * 3 + 1) / 2 - 16.0]])


def test_fetching_a_tensor_alone_pulls_and_computes_without_a_step():
    # TF: session.py fetches only what the fetch needs (the pruned subgraph): evaluating a
    # loss runs no optimizer update and no global-step increment.
    x, y_, W, b, loss = _linear_model()
    gs = psrt.train.get_or_create_global_step()
    train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    assert train_op.loss is loss
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        for _ in range(3):
            value = sess.run(loss, feed_dict={x: FEED_X, y_: FEED_Y})
            assert value == pytest.approx(_expected_loss([1, 2, 3], 0.5))
        assert sess.run(gs) == 0
        np.testing.assert_array_equal(sess.run(W), [1, 2, 3])
        # A structure of tensors and variables in one run.
        out = sess.run({"loss": loss, "W": W, "both": (loss, b)}, {x: FEED_X, y_: FEED_Y})
        assert out["both"][0] == out["loss"] and out["both"][1] == 0.5


def test_a_tensor_fetched_with_the_train_op_is_computed_once_on_the_steps_values():
    # TF: session.py runs each distinct fetch once; the loss feeding the gradients is the
    # one fetched, computed before the update (the update depends on it).
    calls = []
    x, y_, W, b, loss = _linear_model(calls)
    W_seen = psrt.py_func(lambda w: w, [W], np.float32, name="W_seen")  # an alias of W
    gs = psrt.train.get_or_create_global_step()
    train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    feed = {x: FEED_X, y_: FEED_Y}
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        w = np.array([1, 2, 3], np.float32)
        bb = np.float32(0.5)
        for step in range(1, 4):
            calls.clear()
            step_loss, loss_value, loss_again, w_seen, step_value = sess.run(
                [train_op, loss, loss, W_seen, gs], feed_dict=feed)
            assert len(calls) == 1
            assert step_loss == loss_value == loss_again
            assert loss_value == pytest.approx(_expected_loss(w, bb))
            np.testing.assert_array_equal(w_seen, w)  # the step's values, not the new ones
            assert step_value == step
            r = FEED_X @ w + bb - FEED_Y
            w = w - np.float32(0.1) * (2 * FEED_X.T @ r / 2)
            bb = bb - np.float32(0.1) * (2 * r.sum() / 2)
            np.testing.assert_allclose(sess.run(W), w, rtol=1e-6)
            assert sess.run(b) == pytest.approx(bb)


def test_autodiff_gradients_equal_hand_written_ones():
    # TF: optimizer.py minimize = compute_gradients (gradients_impl.gradients) +
    # apply_gradients. Reference: the hand-written gradients of softmax regression, on the
    # same data and starting point; float32, rtol 1e-5 / atol 1e-6.
    rng = np.random.default_rng(0)
    images = rng.random((20, 8), dtype=np.float32)
    labels = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 20)]
    w0 = rng.normal(0, 0.1, (8, 4)).astype(np.float32)

    def hand(W, b, images, labels):
        logits = images @ W + b
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        p = exp / exp.sum(axis=1, keepdims=True)
        loss = -np.mean(np.sum(labels * np.log(p), axis=1))
        d = (p - labels) / np.float32(len(images))
        return loss, [images.T @ d, d.sum(axis=0)]

    def forward(W, b, x, y):
        logits = x @ W + b
        shifted = logits - anp.max(logits, axis=1, keepdims=True)
        log_p = shifted - anp.log(anp.sum(anp.exp(shifted), axis=1, keepdims=True))
        return -anp.mean(anp.sum(y * log_p, axis=1))

    results = {}
    for style in ("hand", "auto"):
        psrt.reset_default_graph()
        W = psrt.Variable(w0, name="W")
        b = psrt.Variable(np.zeros(4, np.float32), name="b")
        opt = psrt.train.AdagradOptimizer(0.5)
        if style == "hand":
            train_op = opt.minimize(hand, var_list=[W, b])
            feed = {"images": images, "labels": labels}
        else:
            x = psrt.placeholder(np.float32, [None, 8], name="x")
            y = psrt.placeholder(np.float32, [None, 4], name="y")
            loss = psrt.py_func(forward, [W, b, x, y], np.float32)
            train_op = opt.minimize(loss)
            feed = {x: images, y: labels}
            assert [v.name for _, v in opt.compute_gradients(loss)] == ["W", "b"]
        with psrt.Session() as sess:
            sess.run(psrt.global_variables_initializer())
            losses = [sess.run(train_op, feed) for _ in range(5)]
            results[style] = (losses, sess.run([W, b]))
    np.testing.assert_allclose(results["auto"][0], results["hand"][0], rtol=1e-5)
    for a, h in zip(results["auto"][1], results["hand"][1]):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, h, rtol=1e-5, atol=1e-6)


def test_gradient_of_a_variable_the_loss_does_not_read_is_none():
    # TF: optimizer.py compute_gradients pairs unconnected variables with None;
    # minimize raises "No gradients provided for any variable, check your graph ..." when
    # every gradient is None.
    W = psrt.Variable(np.ones(2, np.float32), name="W")
    unused = psrt.Variable(np.ones(2, np.float32), name="unused")
    x = psrt.placeholder(np.float32, [2], name="x")
    loss = psrt.py_func(lambda w, x: anp.sum(w * x), [W, x], np.float32)
    opt = psrt.train.GradientDescentOptimizer(1.0)
    pairs = opt.compute_gradients(loss)
    assert [(g is None, v.name) for g, v in pairs] == [(False, "W"), (True, "unused")]
    const = psrt.py_func(lambda x: anp.sum(x), [x], np.float32)
    with pytest.raises(ValueError, match="No gradients provided for any variable, check your "
                       r"graph for ops that do not support gradients, between variables "
                       r"\['W', 'unused'\] and loss"):
        opt.minimize(const)
    train_op = opt.minimize(loss)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train_op, {x: [1.0, 3.0]})
        np.testing.assert_array_equal(sess.run(W), [0.0, -2.0])
        np.testing.assert_array_equal(sess.run(unused), [1.0, 1.0])


def test_custom_gradient_replaces_the_traced_one():
    # TF: ops/custom_gradient.py: f returns (y, grad_fn); grad_fn(dy) gives the inputs'
    # gradients.
    @psrt.custom_gradient
    def clipped_identity(v):
        def grad(dy):
            return anp.clip(dy, -0.5, 0.5)
        return v, grad

    W = psrt.Variable(np.zeros(3, np.float32), name="W")
    x = psrt.placeholder(np.float32, [3], name="x")
    loss = psrt.py_func(lambda w, x: anp.sum(clipped_identity(w) * x), [W, x], np.float32)
    train_op = psrt.train.GradientDescentOptimizer(1.0).minimize(loss)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train_op, {x: [0.1, 2.0, -3.0]})
        np.testing.assert_allclose(sess.run(W), [-0.1, -0.5, 0.5])


def test_numpy_calls_on_traced_values_name_the_op():
    W = psrt.Variable(np.ones(2, np.float32), name="W")
    loss = psrt.py_func(lambda w: float(np.exp(w).sum()), [W], np.float32, name="to_float")
    train_op = psrt.train.GradientDescentOptimizer(1.0).minimize(loss)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run(loss) == pytest.approx(2 * np.e)  # forward: plain numpy is fine
        with pytest.raises(TypeError, match=r"op 'to_float' \(<lambda>\) cannot be "
                           r"differentiated by autograd: compute with autograd.numpy"):
            sess.run(train_op)


def test_feeding_a_derived_tensor_replaces_its_value():
    # TF: session.py: any feedable tensor may be fed; what it depends on is pruned (its
    # placeholders need no feed).
    x = psrt.placeholder(np.float32, name="x")
    y = psrt.py_func(lambda v: v + 1, [x], np.float32, name="y")
    z = psrt.py_func(lambda v: v * 10, [y], np.float32, name="z")
    with psrt.Session() as sess:
        assert sess.run(z, {x: 1.0}) == 20.0
        assert sess.run(z, {y: 5.0}) == 50.0
        assert sess.run(z, {"y:0": 7.0}) == 70.0


def test_summaries_of_derived_tensors():
    # TF: summary.scalar of a tensor computed from placeholders and variables; its value is
    # computed in the same run as the other fetches (each op once).
    calls = []
    x, y_, W, b, loss = _linear_model(calls)
    scalar = psrt.summary.scalar("loss", loss)
    hist = psrt.summary.histogram("pred", x @ W + b)
    merged = psrt.summary.merge_all()
    train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: FEED_X, y_: FEED_Y}
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        summary = psrt.Summary()
        summary.ParseFromString(sess.run(scalar, feed))
        assert summary.value[0].tag == "loss"
        assert summary.value[0].simple_value == pytest.approx(_expected_loss([1, 2, 3], 0.5))
        calls.clear()
        step_loss, blob = sess.run([train_op, merged], feed)
        assert len(calls) == 1
        summary.ParseFromString(blob)
        assert [v.tag for v in summary.value] == ["loss", "pred"]
        assert summary.value[0].simple_value == pytest.approx(step_loss)
        assert summary.value[1].histo.num == 2
        with pytest.raises(errors.InvalidArgumentError, match="placeholder tensor 'x'"):
            sess.run(merged)


def test_hand_written_gradients_and_indexed_slices_keep_working():
    # The loss_fn style: (loss, grads) with an IndexedSlices gradient (TF's sparse update).
    E = psrt.Variable(np.ones((4, 2), np.float32), name="E")
    rows = psrt.placeholder(np.int64, [None], name="rows")

    def loss_fn(E, rows):
        return float(E[rows].sum()), [psrt.IndexedSlices(np.ones((len(rows), 2), np.float32),
                                                         rows)]

    train_op = psrt.train.GradientDescentOptimizer(0.5).minimize(loss_fn, var_list=[E])
    picked = psrt.py_func(lambda e, r: e[r], [E, rows], np.float32)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        loss, before = sess.run([train_op, picked], {rows: [1, 3]})
        assert loss == 4.0
        np.testing.assert_array_equal(before, np.ones((2, 2)))
        np.testing.assert_array_equal(sess.run(E)[:, 0], [1.0, 0.5, 1.0, 0.5])


def test_derived_tensors_on_a_cluster_of_two_ps_tasks(ps2, worker):  # noqa: F811
    # The pull of a forward fetch reaches every ps task the variables live on.
    server = worker(ps2)
    with psrt.device(psrt.train.replica_device_setter(cluster=ps2.cluster(1))):
        x, y_, W, b, loss = _linear_model()
        gs = psrt.train.get_or_create_global_step()
        train_op = psrt.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    assert {W.device, b.device} == {"/job:ps/task:0", "/job:ps/task:1"}
    feed = {x: FEED_X, y_: FEED_Y}
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        first = sess.run(loss, feed)
        assert first == pytest.approx(_expected_loss([1, 2, 3], 0.5))
        for _ in range(20):
            sess.run(train_op, feed)
        assert sess.run(gs) == 20
        assert sess.run(loss, feed) < first / 10


def test_variables_take_tensor_operators_as_tf():
    """TF1 converts a variable to the tensor of its value: ``w * 2.0``, ``2.0 * w``, ``-w``,
    ``w ** 2``, ``1.0 - w`` (tensorflow/python/ops/variables.py: Variable._OverloadAllOperators)
    are tensors, fetchable and differentiable."""
    w = psrt.Variable(np.array([1.0, -2.0, 3.0], np.float32), name="w")
    exprs = [w * 2.0, 2.0 * w, -w, w ** 2, 1.0 - w, w / 4.0, np.float32(3) * w]
    loss = psrt.reduce_sum(w * w * 0.5)
    train = psrt.train.GradientDescentOptimizer(0.5).minimize(loss, var_list=[w])
    with psrt.Session("") as sess:
        sess.run(psrt.global_variables_initializer())
        v = np.array([1.0, -2.0, 3.0], np.float32)
        got = sess.run(exprs)
        for g, want in zip(got, [v * 2, 2 * v, -v, v ** 2, 1 - v, v / 4, 3 * v]):
            np.testing.assert_array_equal(g, want.astype(np.float32))
        sess.run(train)  # d(0.5 w.w)/dw = w: w -= 0.5 w
        np.testing.assert_array_equal(sess.run(w), v * np.float32(0.5))
