"""psrt.nn.embedding_lookup: row pulls of an embedding on a ps subprocess, trained with
row-sparse gradients of the same ids."""

from __future__ import annotations

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401  (fixtures)


def test_embedding_lookup_pulls_rows_and_trains_with_indexed_slices(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        emb = psrt.Variable(table, name=f"{prefix}/emb")
    ids = np.array([[3, 7], [3, 0]])
    lookup = psrt.nn.embedding_lookup(emb, ids)
    flat = ids.reshape(-1)
    grads = psrt.IndexedSlices(np.ones((flat.size, 2), np.float32), flat)
    train = psrt.train.GradientDescentOptimizer(0.5).apply_gradients([(grads, emb)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        rows = sess.run(lookup)
        assert rows.shape == (2, 2, 2)
        np.testing.assert_array_equal(rows, table[ids])
        sess.run(train)
        expected = table.copy()
        np.subtract.at(expected, flat, 0.5)  # row 3 appears twice: its gradients are summed
        np.testing.assert_array_equal(sess.run(lookup), expected[ids])
        np.testing.assert_array_equal(sess.run(emb), expected)
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"index 10 at position 1 is out of range \[0, 10\)"):
            sess.run(psrt.nn.embedding_lookup(emb, [1, 10]))


def test_embedding_lookup_argument_errors(fresh_graph):
    v = psrt.Variable(np.zeros((4, 2), np.float32), name="v")
    with pytest.raises(TypeError, match="ids must be integers; got dtype float64"):
        psrt.nn.embedding_lookup(v, [0.5])
    with pytest.raises(ValueError, match="'s' is a scalar"):
        psrt.nn.embedding_lookup(psrt.Variable(np.float32(1), name="s"), [0])
    with pytest.raises(TypeError, match="params must be a psrt Variable"):
        psrt.nn.embedding_lookup(np.zeros((4, 2)), [0])


# ---- fused ops with hand-written gradients (issue 13) ----------------------------------------
# TF references: tensorflow/python/ops/nn_ops.py (softmax_cross_entropy_with_logits(_v2),
# sparse_softmax_cross_entropy_with_logits, bias_add, xw_plus_b, l2_loss),
# tensorflow/python/ops/nn_impl.py (sigmoid_cross_entropy_with_logits: max(x, 0) - x * z +
# log(1 + exp(-abs(x)))), tensorflow/python/ops/nn_grad.py (their gradients: softmax -
# labels for the logits, -log_softmax for v2's labels), tensorflow/core/kernels/
# sparse_xent_op.cc (the out-of-range label message). Values are checked against numpy
# written independently here, gradients against central finite differences in float64.

import autograd  # noqa: E402
import autograd.numpy as anp  # noqa: E402

RNG = np.random.default_rng(7)
LOGITS = RNG.normal(0, 2, (4, 5))
ONE_HOT = np.eye(5)[[0, 3, 4, 1]]
SOFT = RNG.dirichlet(np.ones(5), 4)
IDS = np.array([0, 3, 4, 1])
CUBE = LOGITS[:, :, None] * np.array([1.0, -2.0])   # [4, 5, 2]: NCHW with 5 channels


def _np_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = f(x)
        x[idx] = old - eps
        down = f(x)
        x[idx] = old
        g[idx] = (up - down) / (2 * eps)
    return g


CASES = {
    # name: (psrt function of one float64 array, numpy reference, input)
    "softmax_xent": (lambda x: anp.sum(psrt.nn.softmax_cross_entropy_with_logits(
        labels=SOFT, logits=x)), lambda x: -np.sum(SOFT * _np_log_softmax(x)), LOGITS),
    "softmax_xent_v2_labels": (lambda z: anp.sum(psrt.nn.softmax_cross_entropy_with_logits_v2(
        labels=z, logits=LOGITS)), lambda z: -np.sum(z * _np_log_softmax(LOGITS)), SOFT),
    "softmax_xent_axis0": (lambda x: anp.sum(psrt.nn.softmax_cross_entropy_with_logits(
        labels=SOFT.T, logits=x, dim=0)), lambda x: -np.sum(SOFT.T * _np_log_softmax(x, 0)),
        LOGITS.T.copy()),
    "sparse_xent": (lambda x: anp.sum(psrt.nn.sparse_softmax_cross_entropy_with_logits(
        labels=IDS, logits=x)), lambda x: -np.sum(_np_log_softmax(x)[np.arange(4), IDS]),
        LOGITS),
    "sigmoid_xent": (lambda x: anp.sum(psrt.nn.sigmoid_cross_entropy_with_logits(
        labels=SOFT, logits=x)),
        lambda x: np.sum(-SOFT * np.log(1 / (1 + np.exp(-x)))
                         - (1 - SOFT) * np.log(1 - 1 / (1 + np.exp(-x)))), LOGITS),
    "relu": (lambda x: anp.sum(psrt.nn.relu(x) * SOFT), lambda x: np.sum(np.maximum(x, 0) * SOFT),
             LOGITS),
    "sigmoid": (lambda x: anp.sum(psrt.sigmoid(x) * SOFT),
                lambda x: np.sum(SOFT / (1 + np.exp(-x))), LOGITS),
    "tanh": (lambda x: anp.sum(psrt.tanh(x) * SOFT), lambda x: np.sum(np.tanh(x) * SOFT), LOGITS),
    "softmax": (lambda x: anp.sum(psrt.nn.softmax(x) * SOFT),
                lambda x: np.sum(np.exp(_np_log_softmax(x)) * SOFT), LOGITS),
    "log_softmax": (lambda x: anp.sum(psrt.nn.log_softmax(x) * SOFT),
                    lambda x: np.sum(_np_log_softmax(x) * SOFT), LOGITS),
    "bias_add": (lambda b: anp.sum(psrt.nn.bias_add(LOGITS, b) ** 2),
                 lambda b: np.sum((LOGITS + b) ** 2), RNG.normal(size=5)),
    "bias_add_nchw": (lambda b: anp.sum(psrt.nn.bias_add(CUBE, b, data_format="NCHW") ** 2),
                      lambda b: np.sum((CUBE + b[None, :, None]) ** 2), RNG.normal(size=5)),
    "xw_plus_b_w": (lambda w: anp.sum(psrt.nn.xw_plus_b(LOGITS, w, np.ones(3)) ** 2),
                    lambda w: np.sum((LOGITS @ w + 1) ** 2), RNG.normal(size=(5, 3))),
    "l2_loss": (lambda x: psrt.nn.l2_loss(x), lambda x: np.sum(x ** 2) / 2, LOGITS),
    "matmul_t": (lambda a: anp.sum(psrt.matmul(a, LOGITS, transpose_a=True) ** 2),
                 lambda a: np.sum((a.T @ LOGITS) ** 2), RNG.normal(size=(4, 3))),
    "reduce_mean_axis": (lambda x: anp.sum(psrt.reduce_mean(x, axis=1) ** 2),
                         lambda x: np.sum(x.mean(axis=1) ** 2), LOGITS),
    "reduce_sum_keep": (lambda x: anp.sum(psrt.reduce_sum(x, reduction_indices=[0],
                                                          keep_dims=True) ** 2),
                        lambda x: np.sum(x.sum(axis=0, keepdims=True) ** 2), LOGITS),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_op_value_and_gradient_on_arrays(name):
    # On arrays the ops compute at once and are autograd primitives (usable in traced code).
    f, ref, x0 = CASES[name]
    x = np.array(x0, np.float64)
    assert float(f(x)) == pytest.approx(ref(x), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(autograd.grad(f)(x), _numeric_grad(ref, x), rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("shape", [(6, 5, 4, 16), (7, 3, 5, 2), (9, 1), (5, 4, 1)])
def test_bias_add_channels_last_value_and_gradient(fresh_graph, shape):  # noqa: F811
    # A conv layer's bias: value + bias per channel, and the bias gradient dy summed over
    # N, H, W (float32, channels last). Rank 3 and up add along rows of W * C values, and
    # two or more channels sum by einsum over the [-1, C] view: both must give numpy's
    # float32 results bit for bit (one channel keeps np.sum).
    rng = np.random.default_rng(3)
    w = rng.normal(0, 100, shape).astype(np.float32)
    xv = rng.normal(0, 10, shape).astype(np.float32)
    bv = rng.normal(0, 10, shape[-1]).astype(np.float32)
    x = psrt.placeholder(psrt.float32, [None] + list(shape[1:]))
    b = psrt.Variable(bv)
    y = psrt.nn.bias_add(x, b)
    (grad,) = psrt.gradients(psrt.reduce_sum(y * w), [b])
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        got_y, got = sess.run([y, grad], {x: xv})
    assert got_y.dtype == got.dtype == np.float32
    np.testing.assert_array_equal(got_y, xv + bv)
    np.testing.assert_array_equal(got, w.sum(axis=tuple(range(len(shape) - 1))))


def test_fused_ops_as_graph_tensors_train_with_their_own_gradients(fresh_graph):  # noqa: F811
    # A two-layer model written with psrt.nn on placeholders; one GradientDescent step
    # (lr 1) must move each variable by exactly minus the gradient that autograd computes
    # through the numpy reference of the same model.
    x = psrt.placeholder(np.float64, [None, 5], name="x")
    y_ = psrt.placeholder(np.int64, [None], name="y_")
    w1 = RNG.normal(0, 0.5, (5, 6))
    b1 = RNG.normal(0, 0.1, 6)
    w2 = RNG.normal(0, 0.5, (6, 5))
    b2 = RNG.normal(0, 0.1, 5)
    vs = [psrt.Variable(v, name=n) for v, n in zip([w1, b1, w2, b2], ["w1", "b1", "w2", "b2"])]
    hidden = psrt.nn.relu(psrt.nn.xw_plus_b(x, vs[0], vs[1]))
    logits = psrt.nn.bias_add(psrt.matmul(hidden, vs[2]), vs[3])
    loss = psrt.reduce_mean(psrt.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y_, logits=logits)) + 0.01 * psrt.nn.l2_loss(vs[0])
    assert loss.op.vjp is not None and logits.op.vjp is not None
    train = psrt.train.GradientDescentOptimizer(1.0).minimize(loss)

    def reference(w1, b1, w2, b2):
        h = anp.maximum(LOGITS @ w1 + b1, 0)
        lg = h @ w2 + b2
        lp = lg - anp.log(anp.sum(anp.exp(lg), axis=1, keepdims=True))
        return -anp.mean(lp[np.arange(4), IDS]) + 0.01 * anp.sum(w1 ** 2) / 2

    want_loss = reference(w1, b1, w2, b2)
    want_grads = autograd.grad(lambda p: reference(*p))([w1, b1, w2, b2])
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        got_loss, _ = sess.run([loss, train], feed_dict={x: LOGITS, y_: IDS})
        assert got_loss == pytest.approx(want_loss, rel=1e-12)
        for v, before, g in zip(vs, [w1, b1, w2, b2], want_grads):
            np.testing.assert_allclose(sess.run(v), before - g, rtol=1e-10, atol=1e-12)


def test_custom_gradient_op_in_the_graph_uses_its_gradient_function(fresh_graph):  # noqa: F811
    # tf.custom_gradient (tensorflow/python/ops/custom_gradient.py): the given grad_fn,
    # not the function's own derivative, is what minimize applies.
    @psrt.custom_gradient
    def scaled_identity(v):
        return v, lambda dy: (3 * dy,)

    w = psrt.Variable(np.array([1.0, 2.0]), name="w")
    loss = psrt.reduce_sum(scaled_identity(w))
    assert loss.op.inputs[0].op.vjp is not None
    train = psrt.train.GradientDescentOptimizer(0.5).minimize(loss)
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [1.0 - 1.5, 2.0 - 1.5])


def test_fused_op_errors_are_tfs():
    with pytest.raises(ValueError, match=r"Only call `softmax_cross_entropy_with_logits` with "
                                         r"named arguments \(labels=\.\.\., logits=\.\.\., \.\.\.\)"):
        psrt.nn.softmax_cross_entropy_with_logits(ONE_HOT, LOGITS)
    with pytest.raises(ValueError, match="Both labels and logits must be provided"):
        psrt.nn.sparse_softmax_cross_entropy_with_logits(logits=LOGITS)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Received a label value of 5 which is outside the valid range of "
                             r"\[0, 5\)\.  Label values: 0 5 4 1"):
        psrt.nn.sparse_softmax_cross_entropy_with_logits(labels=np.array([0, 5, 4, 1]),
                                                         logits=LOGITS)
    with pytest.raises(errors.InvalidArgumentError, match=r"logits_size=\[4,5\] labels_size=\[4,4\]"):
        psrt.nn.softmax_cross_entropy_with_logits(labels=ONE_HOT[:, :4], logits=LOGITS)
    with pytest.raises(errors.InvalidArgumentError, match="same shape"):
        psrt.nn.sigmoid_cross_entropy_with_logits(labels=ONE_HOT[:, :4], logits=LOGITS)
    with pytest.raises(ValueError, match="data_format must be one of 'NHWC', 'NCHW' or None; "
                                         "got 'NWHC'"):
        psrt.nn.bias_add(LOGITS, np.ones(5), data_format="NWHC")
    with pytest.raises(errors.InvalidArgumentError, match="as many biases as the channel"):
        psrt.nn.bias_add(LOGITS, np.ones(4))
    with pytest.raises(ValueError, match="both 'axis' and 'reduction_indices'"):
        psrt.reduce_mean(LOGITS, axis=0, reduction_indices=0)
    # float32 in, float32 out (the dtype TF keeps).
    out = psrt.reduce_mean(psrt.nn.softmax_cross_entropy_with_logits(
        labels=ONE_HOT.astype(np.float32), logits=LOGITS.astype(np.float32)))
    assert np.asarray(out).dtype == np.float32


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
def test_mean_of_softmax_cross_entropy_is_one_fused_op(fresh_graph, v2):  # noqa: F811
    # reduce_mean(softmax_cross_entropy_with_logits(...)) over every axis becomes one op on
    # the labels and logits: the same value as the mean of the per-example tensor (fetched
    # in the same run) and the same gradients (numpy: (softmax - labels) / n for the logits,
    # -log_softmax / n for v2's labels).
    logits0 = RNG.normal(0, 1, (4, 5))
    logits = psrt.Variable(logits0, name="logits")
    labels = psrt.Variable(SOFT, name="labels")
    xent_fn = psrt.nn.softmax_cross_entropy_with_logits_v2 if v2 else \
        psrt.nn.softmax_cross_entropy_with_logits
    per_example = xent_fn(labels=labels, logits=logits)
    loss = psrt.reduce_mean(per_example)
    assert per_example.op not in [getattr(i, "op", None) for i in loss.op.inputs]
    train = psrt.train.GradientDescentOptimizer(1.0).minimize(loss)
    log_p = _np_log_softmax(logits0)
    want_loss = -np.mean(np.sum(SOFT * log_p, axis=1))
    with psrt.Session() as sess:
        sess.run(psrt.global_variables_initializer())
        assert sess.run(loss) == pytest.approx(np.mean(sess.run(per_example)), rel=1e-12)
        got_loss, _ = sess.run([loss, train])
        assert got_loss == pytest.approx(want_loss, rel=1e-12)
        np.testing.assert_allclose(sess.run(logits),
                                   logits0 - (np.exp(log_p) - SOFT) / 4, rtol=1e-12)
        want_labels = SOFT - (-log_p / 4) if v2 else SOFT
        np.testing.assert_allclose(sess.run(labels), want_labels, rtol=1e-12)
