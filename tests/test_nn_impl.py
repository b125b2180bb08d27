"""psrt.nn's ops of TF1's nn_impl.py, the rest of nn_ops.py (beyond conv/pool) and
candidate_sampling_ops.py: forward values against TF's documented formulas and TF's own
kernel-test values, gradients against central finite differences in float64 (placeholders
with a None batch dimension, broadcast arguments), float32 in -> float32 out, TF's errors,
and the row-sparse training of nce_loss / sampled_softmax_loss over two ps tasks.

TF sources (r1.15): tensorflow/python/ops/nn_impl.py (moments, batch_normalization,
fused_batch_norm, l2_normalize, zero_fraction, weighted_cross_entropy_with_logits,
_compute_sampled_logits, nce_loss, sampled_softmax_loss), nn_ops.py (dropout, top_k,
in_top_k, leaky_relu, lrn), candidate_sampling_ops.py and core/kernels/range_sampler.cc
(the samplers and expected counts), core/kernels/fused_batch_norm_op.cc (Bessel's correction),
core/kernels/in_topk_op.h; kernel tests tensorflow/python/kernel_tests/relu_op_test.py,
topk_op_test.py, in_topk_op_test.py, lrn_op_test.py, softplus_op_test.py,
softsign_op_test.py, tensorflow/python/ops/nn_test.py, nn_fused_batchnorm_test.py,
candidate_sampler_ops_test.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import psrt as tf
from psrt import errors

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401  (fixtures)

RNG = np.random.default_rng(20)


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(sess, build, *vals, batch_none=True, rtol=1e-5, atol=1e-7):
    """tf.gradients of sum(w * build(*placeholders)) (w a random cotangent) against
    central differences, float64; each placeholder's first dimension None."""
    phs = [tf.placeholder(tf.float64, ([None] + list(v.shape[1:])) if v.ndim and batch_none
                          else list(v.shape)) for v in vals]
    y = build(*phs)
    feed = dict(zip(phs, vals))
    w = RNG.normal(size=np.shape(sess.run(y, feed)))
    grads = tf.gradients(y, phs, grad_ys=[w])
    got = sess.run(grads, feed)
    for k, v in enumerate(vals):
        def f(xk, k=k):
            fd = dict(feed)
            fd[phs[k]] = xk
            return float(np.sum(w * sess.run(y, fd)))
        np.testing.assert_allclose(got[k], _numeric_grad(f, v), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k}")


def _away_from(x, kinks, gap=0.05):
    x = x.copy()
    for k in kinks:
        near = np.abs(x - k) < gap
        x[near] += 2 * gap
    return x


# ---- activations (relu_op_test.py, softplus_op_test.py, softsign_op_test.py) ---------------

TF_X = np.array([[-9, 7, -5, 3, -1], [1, -3, 5, -7, 9]], np.float32)


def test_activations_match_tfs_kernel_test_values(sess):
    x = tf.placeholder(tf.float32, [None, 5])
    ops = [tf.nn.relu6(x), tf.nn.leaky_relu(x, alpha=0.1), tf.nn.leaky_relu(x),
           tf.nn.elu(x), tf.nn.softplus(x), tf.nn.softsign(x)]
    got = sess.run(ops, {x: TF_X})
    for t, g in zip(ops, got):
        assert g.dtype == np.float32 and t.dtype == np.float32
        assert t.shape.as_list() == [None, 5]
    np.testing.assert_array_equal(got[0], [[0, 6, 0, 3, 0], [1, 0, 5, 0, 6]])
    np.testing.assert_allclose(got[1], [[-0.9, 7, -0.5, 3, -0.1], [1, -0.3, 5, -0.7, 9]],
                               rtol=1e-6)
    np.testing.assert_allclose(got[2], np.where(TF_X > 0, TF_X, 0.2 * TF_X), rtol=1e-6)
    np.testing.assert_allclose(got[3], np.where(TF_X < 0, np.exp(TF_X) - 1, TF_X), rtol=1e-6)
    np.testing.assert_allclose(got[4], np.logaddexp(0, TF_X.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(got[5], TF_X / (np.abs(TF_X) + 1), rtol=1e-6)


def test_softplus_does_not_overflow_and_integer_leaky_relu_is_float32(sess):
    big = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    got = sess.run(tf.nn.softplus(big))
    np.testing.assert_allclose(got, [0, np.exp(-50.0), np.log(2), 50, 1000], rtol=1e-6)
    assert np.isfinite(got).all()
    # TF's kernel selects (x > 0 ? x : alpha * x), so alpha > 1 is not max(x, alpha * x).
    np.testing.assert_allclose(sess.run(tf.nn.leaky_relu(np.array([-1.0, 3.0]), 2.0)),
                               [-2.0, 3.0])
    # Gradients stay finite (no overflow warning) far from 0, in float32 too.
    far = tf.placeholder(tf.float32, [3])
    g = sess.run(tf.gradients([tf.nn.softplus(far), tf.nn.weighted_cross_entropy_with_logits(
        np.ones(3, np.float32), far, 2.0)], far)[0], {far: [-1000.0, 0.0, 1000.0]})
    # softplus' sigmoid(x) plus -(1 + (q - 1) z) sigmoid(-x) at z = 1, q = 2.
    np.testing.assert_allclose(g, [0 - 2, 0.5 - 2 * 0.5, 1 - 0], atol=1e-6)
    y = tf.nn.leaky_relu(np.array([-10, 5], np.int32))
    assert y.dtype == np.float32
    np.testing.assert_allclose(sess.run(y), [-2.0, 5.0])


@pytest.mark.parametrize("op,kinks", [
    (tf.nn.elu, [0]), (tf.nn.relu6, [0, 6]), (lambda x: tf.nn.leaky_relu(x, 0.3), [0]),
    (tf.nn.softplus, []), (tf.nn.softsign, [0])], ids=["elu", "relu6", "leaky", "softplus",
                                                        "softsign"])
def test_activation_gradients(sess, op, kinks):
    x = _away_from(RNG.normal(size=(4, 3)) * 4, kinks)
    check_grad(sess, op, x)


def test_activation_dtype_errors():
    with pytest.raises(TypeError, match=r"parameter 'features' of op 'Elu' has DataType int32"
                                        r" not in list of allowed values: float16, float32"):
        tf.nn.elu(np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="alpha must be a Python number"):
        tf.nn.leaky_relu(np.ones(2, np.float32), alpha="x")


# ---- dropout (nn_test.py DropoutTest) --------------------------------------------------------


def test_dropout_keeps_a_fraction_scaled_by_one_over_keep_prob(sess):
    x = tf.placeholder(tf.float32, [None, 100])
    y = tf.nn.dropout(x, keep_prob=0.3)
    assert y.dtype == np.float32 and y.shape.as_list() == [None, 100]
    got = sess.run(y, {x: np.ones((400, 100), np.float32)})
    assert got.dtype == np.float32
    kept = got != 0
    np.testing.assert_allclose(got[kept], 1 / np.float32(0.3), rtol=1e-6)
    # 40000 Bernoulli(0.3) draws: the fraction is within 5 standard deviations of 0.3.
    assert abs(kept.mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / kept.size)
    again = sess.run(y, {x: np.ones((400, 100), np.float32)})
    assert (again != 0).tolist() != kept.tolist()         # a new mask each run


def test_dropout_noise_shape_drops_whole_rows_and_rate_spelling(sess):
    x = tf.placeholder(tf.float32, [None, 8])
    y = tf.nn.dropout(x, rate=0.5, noise_shape=[None, 1])
    got = sess.run(y, {x: np.ones((200, 8), np.float32)})
    assert set(np.unique(got)) <= {0.0, 2.0}
    assert (got == got[:, :1]).all()                       # one draw per row
    assert 0 < (got[:, 0] != 0).sum() < 200
    # TF's idiom with a tensor entry: the same per-row mask.
    y2 = tf.nn.dropout(x, rate=0.5, noise_shape=[tf.shape(x)[0], 1])
    got2 = sess.run(y2, {x: np.ones((200, 8), np.float32)})
    assert (got2 == got2[:, :1]).all() and 0 < (got2[:, 0] != 0).sum() < 200
    with pytest.raises(ValueError, match=r"noise_shape \[3, 2\] does not broadcast to x's "
                                         r"shape"):
        tf.nn.dropout(tf.placeholder(tf.float32, [None, 8]), 0.5, noise_shape=[3, 2])


def test_dropout_of_rate_zero_is_x_itself_and_keep_prob_may_be_a_tensor(sess):
    x = tf.placeholder(tf.float32, [None, 4])
    assert tf.nn.dropout(x, keep_prob=1.0) is x
    assert tf.nn.dropout(x, rate=0) is x
    kp = tf.placeholder(tf.float32, [])
    y = tf.nn.dropout(x, keep_prob=kp)
    ones = np.ones((50, 4), np.float32)
    np.testing.assert_array_equal(sess.run(y, {x: ones, kp: 1.0}), ones)
    got = sess.run(y, {x: ones, kp: 0.25})
    assert set(np.unique(got)) <= {0.0, 4.0} and (got == 4).any()


def _mask_of(seed, graph_seed, runs=2):
    tf.reset_default_graph()
    tf.set_random_seed(graph_seed)
    y = tf.nn.dropout(np.ones((10, 10), np.float32), 0.5, seed=seed)
    with tf.Session("") as s:
        return [s.run(y) for _ in range(runs)]


def test_dropout_is_seeded_as_tfs_graph_and_op_seeds():
    a, b = _mask_of(7, 1), _mask_of(7, 1)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)                # same program, same masks
    assert not np.array_equal(a[0], a[1])                  # but new ones each run
    assert not np.array_equal(a[0], _mask_of(8, 1)[0])     # another op seed


def test_dropout_gradient_uses_the_mask_of_its_run(fresh_graph):  # noqa: F811
    # One training step: the fetched loss and the update use one mask (TF draws once per
    # run): w moves by -c * mask / keep_prob, and the loss is sum(w * c * mask / keep_prob).
    w0 = RNG.normal(size=(20, 5))
    c = RNG.uniform(1, 2, size=(20, 5))
    w = tf.Variable(w0, name="w")
    loss = tf.reduce_sum(tf.nn.dropout(tf.multiply(w, c), keep_prob=0.5, seed=3))
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got_loss, _ = s.run([loss, train])
        step = w0 - s.run(w)
    mask = step / (2 * c)
    np.testing.assert_allclose(mask, np.round(mask), atol=1e-12)
    assert set(np.unique(np.round(mask))) == {0.0, 1.0}
    assert got_loss == pytest.approx(np.sum(w0 * c * 2 * np.round(mask)), rel=1e-12)


def test_dropout_errors():
    x = np.ones((2, 2), np.float32)
    for bad in (-1.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"rate must be a scalar tensor or a float in the "
                                             r"range \[0, 1\)"):
            tf.nn.dropout(x, rate=bad)
    with pytest.raises(ValueError, match=r"rate must be a scalar tensor or a float in the "
                                         r"range \[0, 1\), got 1.1"):
        tf.nn.dropout(x, keep_prob=-0.1)
    with pytest.raises(ValueError, match="Cannot specify both 'keep_prob' and 'rate'"):
        tf.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError, match="You must provide a rate to dropout"):
        tf.nn.dropout(x)
    with pytest.raises(ValueError, match="keep_prob must be a floating point number or Tensor"):
        tf.nn.dropout(x, keep_prob="half")
    with pytest.raises(ValueError, match="keep_prob must be a floating point number or Tensor"):
        tf.nn.dropout(x, keep_prob=[0.0, 1.0])
    with pytest.raises(ValueError, match="rate must be a scalar"):
        tf.nn.dropout(x, rate=np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="x has to be a floating point tensor since it's going "
                                         "to be scaled. Got a int32 tensor instead."):
        tf.nn.dropout(np.ones(3, np.int32), 0.5)


# ---- top_k, in_top_k (topk_op_test.py, in_topk_op_test.py) --------------------------------


def test_top_k_tfs_values_and_stable_ties(sess):
    inputs = np.array([[0.1, 0.3, 0.2, 0.4], [0.1, 0.3, 0.4, 0.2]], np.float32)
    v1, i1 = sess.run(tf.nn.top_k(inputs, 1))
    np.testing.assert_array_equal(v1, np.array([[0.4], [0.4]], np.float32))
    np.testing.assert_array_equal(i1, [[3], [2]])
    res = tf.nn.top_k(inputs, k=2)
    v2, i2 = sess.run([res.values, res.indices])
    np.testing.assert_array_equal(v2, np.array([[0.4, 0.3], [0.4, 0.3]], np.float32))
    np.testing.assert_array_equal(i2, [[3, 1], [2, 1]])
    assert v2.dtype == np.float32 and i2.dtype == np.int32
    # Equal values: the lower index first (TF's stable sort), also for ints.
    tv, ti = sess.run(tf.nn.top_k(np.array([[3, 1, 3, 2, 3]], np.int64), 4))
    np.testing.assert_array_equal(tv, [[3, 3, 3, 2]])
    np.testing.assert_array_equal(ti, [[0, 2, 4, 3]])
    x = tf.placeholder(tf.float32, [None, 2, 6])
    t = tf.nn.top_k(x, 3)
    assert t.values.shape.as_list() == [None, 2, 3] and t.indices.shape.as_list() == [None, 2, 3]
    z = sess.run(tf.nn.top_k(inputs, 0).values)
    assert z.shape == (2, 0)


def test_top_k_gradient_and_errors(sess):
    x = RNG.permutation(24).reshape(4, 6).astype(np.float64) / 7    # distinct values
    check_grad(sess, lambda p: tf.nn.top_k(p, 3).values, x)
    with pytest.raises(ValueError, match="Need k >= 0, got -1"):
        tf.nn.top_k(np.ones((2, 3)), -1)
    with pytest.raises(ValueError, match=r"input must have last dimension >= k = 4 but is 3"):
        tf.nn.top_k(np.ones((2, 3)), 4)
    p = tf.placeholder(tf.float32, [None, None])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"input must have at least k columns. Had 3, needed 4"):
        sess.run(tf.nn.top_k(p, 4).values, {p: np.ones((2, 3))})


def test_in_top_k_tfs_values(sess):
    pred = np.array([[0.1, 0.3, 0.2, 0.4], [0.1, 0.2, 0.3, 0.4]], np.float32)
    assert sess.run(tf.nn.in_top_k(pred, [3, 1], 1)).tolist() == [True, False]
    assert sess.run(tf.nn.in_top_k(pred, [0, 2], 2)).tolist() == [False, True]
    tie = np.array([[0.1, 0.3, 0.2, 0.2], [0.1, 0.3, 0.2, 0.2]], np.float32)
    assert sess.run(tf.nn.in_top_k(tie, [2, 3], 2)).tolist() == [True, True]
    nan = np.array([[0.1, np.nan, 0.2, 0.4], [0.1, 0.2, 0.3, np.inf]], np.float32)
    assert sess.run(tf.nn.in_top_k(nan, [0, 2], 2)).tolist() == [False, False]
    assert sess.run(tf.nn.in_top_k(pred, np.array([0, 80000], np.int64), 2)).tolist() == \
        [False, False]
    p = tf.placeholder(tf.float32, [None, 4])
    out = tf.nn.in_top_k(p, tf.placeholder(tf.int32, [None]), 2)
    assert out.dtype == np.bool_ and out.shape.as_list() == [None]


def test_in_top_k_errors():
    with pytest.raises(TypeError, match="parameter 'targets' of op 'InTopKV2'"):
        tf.nn.in_top_k(np.ones((2, 3), np.float32), np.array([0.5, 1.0]), 1)
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        tf.nn.in_top_k(np.ones(3, np.float32), [0], 1)
    with pytest.raises(ValueError, match="Need k >= 0, got -2"):
        tf.nn.in_top_k(np.ones((2, 3), np.float32), [0, 1], -2)


# ---- lrn (lrn_op_test.py's numpy reference) ---------------------------------------------------


def _lrn_reference(x, r, bias, alpha, beta):
    out = np.empty_like(x)
    depth = x.shape[-1]
    for idx in np.ndindex(x.shape):
        d = idx[-1]
        lo, hi = max(0, d - r), min(depth, d + r + 1)
        s = np.sum(x[idx[:-1]][lo:hi] ** 2)
        out[idx] = x[idx] / (bias + alpha * s) ** beta
    return out


@pytest.mark.parametrize("r,bias,alpha,beta", [(5, 1.0, 1.0, 0.5), (2, 2.0, 0.3, 0.75),
                                               (0, 1.5, 0.5, 1.0)])
def test_lrn_values_and_gradient(sess, r, bias, alpha, beta):
    x = RNG.normal(size=(2, 3, 2, 7)).astype(np.float32)
    if (r, bias, alpha, beta) == (5, 1.0, 1.0, 0.5):
        y = tf.nn.lrn(x)                                   # TF's defaults
    else:
        y = tf.nn.local_response_normalization(x, r, bias, alpha, beta)
    got = sess.run(y)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _lrn_reference(x.astype(np.float64), r, bias, alpha, beta),
                               rtol=1e-5, atol=1e-6)
    check_grad(sess, lambda p: tf.nn.lrn(p, r, bias, alpha, beta),
               RNG.normal(size=(2, 2, 3, 6)))


def test_lrn_errors():
    with pytest.raises(ValueError, match="Shape must be rank 4 but is rank 3 for 'LRN'"):
        tf.nn.lrn(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="depth_radius must be a non-negative int"):
        tf.nn.lrn(np.ones((1, 1, 1, 4), np.float32), depth_radius=-1)


# ---- moments, batch_normalization, fused_batch_norm -------------------------------------------


def test_moments_values_shapes_and_gradients(sess):
    x = RNG.normal(size=(6, 3, 2, 4)).astype(np.float32)
    m, v = tf.nn.moments(x, [0, 1, 2])
    gm, gv = sess.run([m, v])
    assert gm.dtype == np.float32 and m.shape.as_list() == [4] and v.shape.as_list() == [4]
    np.testing.assert_allclose(gm, x.mean((0, 1, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gv, x.var((0, 1, 2)), rtol=1e-5)     # biased, as TF's
    mk, vk = tf.nn.moments(x, [1], keep_dims=True)
    assert mk.shape.as_list() == [6, 1, 2, 4]
    np.testing.assert_allclose(sess.run(vk), x.var(1, keepdims=True), rtol=1e-5)
    check_grad(sess, lambda p: tf.nn.moments(p, [0])[0], RNG.normal(size=(5, 3)))
    check_grad(sess, lambda p: tf.nn.moments(p, [0, 1])[1], RNG.normal(size=(5, 3)))
    with pytest.raises(ValueError, match="Can not specify both 'keepdims' and 'keep_dims'"):
        tf.nn.moments(x, [0], keep_dims=True, keepdims=True)


def test_batch_normalization_formula_and_broadcast_gradients(sess):
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    mean, var = x.mean(0), x.var(0)
    off, sc = RNG.normal(size=3).astype(np.float32), RNG.uniform(0.5, 2, 3).astype(np.float32)
    y = tf.nn.batch_normalization(x, mean, var, off, sc, 1e-3)
    got = sess.run(y)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, sc * (x - mean) / np.sqrt(var + 1e-3) + off, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(sess.run(tf.nn.batch_normalization(x, mean, var, None, None,
                                                                  0.0)),
                               (x - mean) / np.sqrt(var), rtol=1e-5, atol=1e-5)
    vals = [RNG.normal(size=(4, 3)), RNG.normal(size=3), RNG.uniform(0.5, 2, 3),
            RNG.normal(size=3), RNG.uniform(0.5, 2, 3)]
    phs = [tf.placeholder(tf.float64, [None, 3])] + [tf.placeholder(tf.float64, [3])
                                                     for _ in range(4)]
    out = tf.nn.batch_normalization(*phs, variance_epsilon=0.01)
    feed = dict(zip(phs, vals))
    w = RNG.normal(size=(4, 3))
    grads = sess.run(tf.gradients(out, phs, grad_ys=[w]), feed)
    for k, v in enumerate(vals):
        def f(xk, k=k):
            fd = dict(feed)
            fd[phs[k]] = xk
            return float(np.sum(w * sess.run(out, fd)))
        np.testing.assert_allclose(grads[k], _numeric_grad(f, v), rtol=1e-5, atol=1e-7)


def _bn_training_reference(x, scale, offset, eps, data_format):
    # nn_fused_batchnorm_test.py's _training_ref: normalize by the biased variance, return the
    # variance times sample_size / max(sample_size - 1, 1).
    xc = np.moveaxis(x, 1, -1) if data_format == "NCHW" else x
    axes = (0, 1, 2)
    m, v = xc.mean(axes), xc.var(axes)
    y = (xc - m) / np.sqrt(v + eps) * scale + offset
    n = xc.size / scale.size
    return (np.moveaxis(y, -1, 1) if data_format == "NCHW" else y), m, v * n / max(n - 1, 1)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_fused_batch_norm_training_outputs_bessel_variance(sess, data_format):
    shape = (3, 4, 5, 2) if data_format == "NHWC" else (3, 2, 4, 5)
    x = RNG.normal(1.0, 2.0, size=shape).astype(np.float32)
    scale, offset = np.array([1.5, 0.5], np.float32), np.array([0.1, -0.2], np.float32)
    y, bm, bv = tf.nn.fused_batch_norm(x, scale, offset, data_format=data_format)
    gy, gm, gv = sess.run([y, bm, bv])
    assert gy.dtype == gm.dtype == gv.dtype == np.float32
    assert y.shape.as_list() == list(shape) and bm.shape.as_list() == [2]
    ry, rm, rv = _bn_training_reference(x.astype(np.float64), scale, offset, 1e-3, data_format)
    np.testing.assert_allclose(gy, ry, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gm, rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gv, rv, rtol=1e-5)


def test_fused_batch_norm_inference_and_minimum_epsilon(sess):
    x = RNG.normal(size=(2, 3, 3, 4)).astype(np.float32)
    scale, offset = RNG.uniform(0.5, 2, 4).astype(np.float32), RNG.normal(size=4).astype(
        np.float32)
    mean, var = RNG.normal(size=4).astype(np.float32), RNG.uniform(0.5, 2, 4).astype(np.float32)
    y, bm, bv = tf.nn.fused_batch_norm(x, scale, offset, mean, var, epsilon=0.01,
                                       is_training=False)
    gy, gm, gv = sess.run([y, bm, bv])
    np.testing.assert_allclose(gy, (x - mean) / np.sqrt(var + 0.01) * scale + offset,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(gm, mean)
    np.testing.assert_array_equal(gv, var)
    # epsilon below cuDNN's minimum is raised to 1.001e-5 (nn_impl.py).
    x1 = np.array([[[[1.0], [3.0]]]], np.float64)           # mean 2, biased variance 1
    y0 = sess.run(tf.nn.fused_batch_norm(x1, np.ones(1), np.zeros(1), epsilon=0.0)[0])
    np.testing.assert_allclose(y0.ravel(), [-1, 1] / np.sqrt(1 + 1.001e-5), rtol=1e-12)


@pytest.mark.parametrize("is_training,data_format", [(True, "NHWC"), (True, "NCHW"),
                                                     (False, "NHWC")])
def test_fused_batch_norm_gradients(sess, is_training, data_format):
    shape = (3, 2, 2, 3) if data_format == "NHWC" else (3, 3, 2, 2)
    x, scale, offset = RNG.normal(size=shape), RNG.uniform(0.5, 2, 3), RNG.normal(size=3)
    mean, var = RNG.normal(size=3), RNG.uniform(0.5, 2, 3)

    def build(px, ps, po):
        return tf.nn.fused_batch_norm(px, ps, po, None if is_training else mean,
                                      None if is_training else var, epsilon=0.01,
                                      data_format=data_format, is_training=is_training)[0]
    check_grad(sess, build, x, scale, offset, rtol=1e-5, atol=1e-6)


def test_fused_batch_norm_errors():
    x = np.ones((2, 2, 2, 3), np.float32)
    with pytest.raises(ValueError, match="data_format must be 'NHWC' or 'NCHW'; got 'NCW'"):
        tf.nn.fused_batch_norm(x, np.ones(3), np.zeros(3), data_format="NCW")
    with pytest.raises(ValueError, match="x must be 4-dimensional"):
        tf.nn.fused_batch_norm(np.ones((2, 3), np.float32), np.ones(3), np.zeros(3))
    with pytest.raises(ValueError, match="Both 'mean' and 'variance' must be None if "
                                         "is_training is True."):
        tf.nn.fused_batch_norm(x, np.ones(3), np.zeros(3), np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="is_training=False needs the mean and variance"):
        tf.nn.fused_batch_norm(x, np.ones(3), np.zeros(3), is_training=False)
    with tf.Session("") as s, pytest.raises(
            errors.InvalidArgumentError, match="scale must have the same number of elements "
                                               "as the channels of x, got 2 and 3"):
        s.run(tf.nn.fused_batch_norm(x, np.ones(2, np.float32), np.zeros(3, np.float32))[0])


# ---- l2_normalize, zero_fraction, weighted cross-entropy ---------------------------------------


def test_l2_normalize_values_and_gradient(sess):
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    for axis in (0, 1, [0, 1]):
        got = sess.run(tf.nn.l2_normalize(x, axis))
        ax = tuple(axis) if isinstance(axis, list) else axis
        want = x / np.sqrt(np.maximum(np.sum(x ** 2, ax, keepdims=True), 1e-12))
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(sess.run(tf.nn.l2_normalize(x, dim=1)),
                               sess.run(tf.nn.l2_normalize(x, axis=1)))
    np.testing.assert_array_equal(sess.run(tf.nn.l2_normalize(np.zeros(3, np.float32), 0)),
                                  np.zeros(3))             # epsilon: no 0/0
    check_grad(sess, lambda p: tf.nn.l2_normalize(p, 1), RNG.normal(size=(3, 4)))
    with pytest.raises(ValueError, match="Cannot specify both 'axis' and 'dim'"):
        tf.nn.l2_normalize(x, axis=0, dim=0)


def test_zero_fraction(sess):
    x = RNG.normal(size=(20, 30)).astype(np.float32)
    x[x < 0.3] = 0
    z = tf.nn.zero_fraction(tf.placeholder(tf.float32, [None, 30]))
    assert z.dtype == np.float32 and z.shape.as_list() == []
    got = sess.run(z, {z.op.inputs[0]: x})
    assert got.dtype == np.float32 and got == pytest.approx(np.mean(x == 0), rel=1e-6)
    assert sess.run(tf.nn.zero_fraction(np.array([0, 1, 0, 2], np.int32))) == 0.5
    assert np.isnan(sess.run(tf.nn.zero_fraction(np.zeros(0, np.float32))))


def test_weighted_cross_entropy_formula_and_gradients(sess):
    # nn_impl_test.py's reference: q*z*-log(sigmoid(x)) + (1-z)*-log(1-sigmoid(x)).
    x = RNG.normal(size=(4, 3)).astype(np.float32) * 3
    z = RNG.uniform(size=(4, 3)).astype(np.float32)
    q = 2.5
    got = sess.run(tf.nn.weighted_cross_entropy_with_logits(z, x, q))
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    want = q * z * -np.log(sig) + (1 - z) * -np.log(1 - sig)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    kw = sess.run(tf.nn.weighted_cross_entropy_with_logits(targets=z, logits=x, pos_weight=q))
    np.testing.assert_array_equal(kw, got)
    check_grad(sess, lambda t, lg, w: tf.nn.weighted_cross_entropy_with_logits(t, lg, w),
               RNG.uniform(size=(4, 3)), RNG.normal(size=(4, 3)) * 3,
               RNG.uniform(0.5, 3, size=(1, 3)), batch_none=True)
    with pytest.raises(ValueError, match=r"logits and targets must have the same shape"):
        tf.nn.weighted_cross_entropy_with_logits(np.ones((2, 3)), np.ones((3, 2)), 1.0)


# ---- candidate samplers (range_sampler.cc, candidate_sampler_ops_test.py) -------------------


def _log_uniform_p(c, range_max):
    return np.log((c + 2.0) / (c + 1.0)) / np.log(range_max + 1.0)


def test_log_uniform_sampler_distribution_and_expected_counts(sess):
    true = np.array([[0], [3], [9]], np.int64)
    s, te, se = tf.nn.log_uniform_candidate_sampler(true, 1, 20000, False, 10, seed=1)
    assert s.dtype == np.int64 and te.dtype == np.float32 and se.dtype == np.float32
    assert s.shape.as_list() == [20000] and te.shape.as_list() == [3, 1]
    gs, gte, gse = sess.run([s, te, se])
    assert gs.min() >= 0 and gs.max() < 10
    freq = np.bincount(gs, minlength=10) / gs.size
    p = _log_uniform_p(np.arange(10), 10)
    np.testing.assert_allclose(freq, p, atol=5 * np.sqrt(p * (1 - p) / gs.size).max())
    # Without unique every draw counts: expected count p * num_sampled.
    np.testing.assert_allclose(gte.ravel(), (p[[0, 3, 9]] * 20000).astype(np.float32),
                               rtol=1e-6)
    np.testing.assert_allclose(gse, (p[gs] * 20000).astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("sampler,prob", [
    (tf.nn.log_uniform_candidate_sampler, lambda c: _log_uniform_p(c, 50)),
    (tf.nn.uniform_candidate_sampler, lambda c: np.full(np.shape(c), 1 / 50))],
    ids=["log_uniform", "uniform"])
def test_unique_sampling_expected_counts_follow_the_number_of_tries(sess, sampler, prob):
    true = np.array([[1, 7], [30, 2]], np.int64)
    s, te, se = sampler(true, 2, 20, True, 50, seed=4)
    gs, gte, gse = sess.run([s, te, se])
    assert len(set(gs.tolist())) == 20 and gs.min() >= 0 and gs.max() < 50
    # 1 - (1 - p)**tries for one number of tries >= num_sampled shared by every count.
    p0 = prob(gs[:1])[0]
    tries = np.log1p(-np.float64(gse[0])) / np.log1p(-p0)
    assert tries >= 20 - 1e-3
    tries = round(tries)
    np.testing.assert_allclose(gse, -np.expm1(tries * np.log1p(-prob(gs))), rtol=1e-5)
    np.testing.assert_allclose(gte, -np.expm1(tries * np.log1p(-prob(true))), rtol=1e-5)


def test_samplers_are_seeded_and_check_their_arguments():
    def draw(seed):
        tf.reset_default_graph()
        s = tf.nn.uniform_candidate_sampler(np.zeros((1, 1), np.int64), 1, 5, True, 100,
                                            seed=seed)[0]
        with tf.Session("") as sess:
            return sess.run(s).tolist()
    assert draw(3) == draw(3) and draw(3) != draw(4)
    tf.reset_default_graph()
    with pytest.raises(errors.InvalidArgumentError, match="Sampler's range is too small"):
        tf.nn.log_uniform_candidate_sampler(np.zeros((1, 1), np.int64), 1, 6, True, 5)
    with pytest.raises(TypeError, match="true_classes must be int64"):
        tf.nn.log_uniform_candidate_sampler(np.zeros((1, 1)), 1, 2, True, 5)
    with pytest.raises(ValueError, match="num_sampled must be an int >= 1; got 0"):
        tf.nn.uniform_candidate_sampler(np.zeros((1, 1), np.int64), 1, 0, True, 5)
    with tf.Session("") as sess, pytest.raises(errors.InvalidArgumentError,
                                               match=r"true_classes must have num_true "
                                                     r"columns, expected: \[2\] was: \[3\]"):
        sess.run(tf.nn.uniform_candidate_sampler(np.zeros((2, 3), np.int64), 2, 2, True, 5)[0])


def test_compute_accidental_hits(sess):
    true = np.array([[1, 2], [0, 4], [3, 3]], np.int64)
    sampled = np.array([0, 1, 2, 3, 4], np.int64)
    idx, ids, w = sess.run(list(tf.nn.compute_accidental_hits(true, sampled, 2)))
    assert idx.dtype == np.int32 and ids.dtype == np.int64 and w.dtype == np.float32
    assert list(zip(idx.tolist(), ids.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 4), (2, 3),
                                                     (2, 3)]
    np.testing.assert_array_equal(w, np.full(6, -np.finfo(np.float32).max, np.float32))


# ---- nce_loss, sampled_softmax_loss (nn_impl.py _compute_sampled_logits) --------------------


def _sampled_logits_reference(w, b, labels, h, sampled, te, se, remove_hits):
    # (The float32 expected counts are taken in the inputs' dtype before their log.)
    true_logits = np.einsum("bd,btd->bt", h, w[labels]) + b[labels] - np.log(te.astype(h.dtype))
    s_logits = h @ w[sampled].T + b[sampled] - np.log(se.astype(h.dtype))
    if remove_hits:
        for i in range(labels.shape[0]):
            for c in labels[i]:
                hit = np.nonzero(sampled == c)[0]
                if len(hit):
                    s_logits[i, hit[-1]] += -np.finfo(np.float32).max
    t = labels.shape[1]
    logits = np.concatenate([true_logits, s_logits], 1)
    out_labels = np.concatenate([np.full(true_logits.shape, 1 / t), np.zeros(s_logits.shape)],
                                1)
    return logits, out_labels


def _nce_reference(*args):
    x, z = _sampled_logits_reference(*args)
    return np.sum(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x))), 1)


def _softmax_reference(*args):
    x, z = _sampled_logits_reference(*args)
    x = x - x.max(1, keepdims=True)
    return -np.sum(z * (x - np.log(np.sum(np.exp(x), 1, keepdims=True))), 1)


SAMPLED = np.array([3, 7, 0, 12, 5], np.int64)


def _sampled_problem(num_true):
    labels = np.array([[3, 9], [1, 7], [11, 2], [5, 6]], np.int64)[:, :num_true]
    return (RNG.normal(size=(13, 4)), RNG.normal(size=13), labels, RNG.normal(size=(4, 4)),
            RNG.uniform(0.1, 1, size=(4, num_true)).astype(np.float32),
            RNG.uniform(0.1, 1, size=5).astype(np.float32))


@pytest.mark.parametrize("loss_name,num_true,remove", [
    ("nce", 1, False), ("nce", 2, True), ("softmax", 1, True), ("softmax", 2, False)])
def test_sampled_losses_values_and_gradients_against_numpy(fresh_graph, loss_name,  # noqa: F811
                                                           num_true, remove):
    w0, b0, labels, h0, te, se = _sampled_problem(num_true)
    ref = _nce_reference if loss_name == "nce" else _softmax_reference
    op = tf.nn.nce_loss if loss_name == "nce" else tf.nn.sampled_softmax_loss
    # The weights in two parts ("div"), the inputs a Variable too: one GradientDescent step
    # of lr 1 moves each by minus its gradient, checked against central differences of the
    # numpy reference.
    w = [tf.Variable(w0[:7], name="w0"), tf.Variable(w0[7:], name="w1")]
    b = tf.Variable(b0, name="b")
    h = tf.Variable(h0, name="h")
    lab = tf.placeholder(tf.int64, [None, num_true])
    loss = op(w, b, lab, h, 5, 13, num_true=num_true, sampled_values=(SAMPLED, te, se),
              remove_accidental_hits=remove, partition_strategy="div")
    assert loss.dtype == np.float64 and loss.shape.as_list() == [4]
    train = tf.train.GradientDescentOptimizer(1.0).minimize(tf.reduce_sum(loss))
    args = (labels, None, SAMPLED, te, se, remove)

    def total(w_, b_, h_):
        return float(np.sum(ref(w_, b_, labels, h_, SAMPLED, te, se, remove)))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got = s.run(loss, {lab: labels})
        np.testing.assert_allclose(got, ref(w0, b0, labels, h0, *args[2:]), rtol=1e-10)
        s.run(train, {lab: labels})
        dw = w0 - np.concatenate(s.run(w))
        db, dh = b0 - s.run(b), h0 - s.run(h)
    np.testing.assert_allclose(dw, _numeric_grad(lambda v: total(v, b0, h0), w0), atol=1e-7)
    np.testing.assert_allclose(db, _numeric_grad(lambda v: total(w0, v, h0), b0), atol=1e-7)
    np.testing.assert_allclose(dh, _numeric_grad(lambda v: total(w0, b0, v), h0), atol=1e-7)
    touched = np.unique(np.concatenate([labels.ravel(), SAMPLED]))
    untouched = np.setdiff1d(np.arange(13), touched)
    assert (dw[untouched] == 0).all() and (db[untouched] == 0).all()


def test_sampled_losses_float32_and_default_sampler(fresh_graph):  # noqa: F811
    w = tf.Variable(RNG.normal(size=(50, 6)).astype(np.float32), name="w")
    b = tf.Variable(np.zeros(50, np.float32), name="b")
    x = tf.placeholder(tf.float32, [None, 6])
    lab = tf.placeholder(tf.int64, [None, 1])
    nce = tf.nn.nce_loss(w, b, lab, x, 10, 50)
    ssm = tf.nn.sampled_softmax_loss(w, b, lab, x, 10, 50, seed=2)
    assert nce.dtype == np.float32 and ssm.dtype == np.float32
    assert nce.shape.as_list() == [None] and ssm.shape.as_list() == [None]
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        feed = {x: RNG.normal(size=(8, 6)).astype(np.float32),
                lab: RNG.integers(0, 50, (8, 1))}
        a, c = s.run([nce, ssm], feed)
    assert a.dtype == np.float32 and a.shape == (8,) and np.isfinite(a).all() and (a > 0).all()
    assert c.dtype == np.float32 and c.shape == (8,) and np.isfinite(c).all() and (c > 0).all()
    with pytest.raises(ValueError, match="inputs must be"):
        tf.nn.nce_loss(w, b, lab, np.ones(6, np.float32), 10, 50)
    with pytest.raises(TypeError, match="labels must be int64"):
        tf.nn.nce_loss(w, b, np.ones((8, 1)), x, 10, 50)
    with pytest.raises(ValueError, match="sampled_values must be a tuple"):
        tf.nn.sampled_softmax_loss(w, b, lab, x, 10, 50, sampled_values=(1, 2))


class _RecordingClient:
    """Wraps a session's core client, recording the rows pulled and pushed per handle."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.row_pulls: list[tuple[int, list[int]]] = []
        self.dense_pulls: list[int] = []
        self.sparse_pushes: list[tuple[int, list[int]]] = []
        self.dense_pushes: list[int] = []

    def pull_rows_batch(self, handles: Any, indices: Any, outs: Any) -> None:
        self.row_pulls.extend((h, sorted(i.tolist())) for h, i in zip(handles, indices))
        self._client.pull_rows_batch(handles, indices, outs)

    def pull(self, handles: Any, outs: Any, slot: int = 0) -> None:
        self.dense_pulls.extend(handles)
        self._client.pull(handles, outs, slot)

    def push(self, handles: Any, grads: Any, *args: Any) -> Any:
        self.dense_pushes.extend(handles)
        if len(args) >= 7:
            self.sparse_pushes.extend((h, sorted(np.asarray(i).tolist()))
                                      for h, i in zip(args[4], args[5]))
        return self._client.push(handles, grads, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("loss_name", ["nce", "softmax"])
def test_training_pulls_and_pushes_only_the_sampled_rows(shared_ps2, worker, prefix,  # noqa: F811
                                                         loss_name):
    # Over two ps tasks: the weights and biases (1000 classes, two parts, "mod") are read
    # only at the true and sampled classes of the run, and only those rows are pushed.
    server = worker(shared_ps2)
    classes, dim = 1000, 8
    w0 = RNG.normal(size=(classes, dim)).astype(np.float32)
    with tf.device(tf.train.replica_device_setter(cluster=server.server_def_cluster)):
        w = tf.get_variable(f"{prefix}/w", initializer=w0,
                            partitioner=tf.fixed_size_partitioner(2))
        b = tf.get_variable(f"{prefix}/b", initializer=np.zeros(classes, np.float32),
                            partitioner=tf.fixed_size_partitioner(2))
    x = tf.placeholder(tf.float32, [None, dim])
    lab = tf.placeholder(tf.int64, [None, 1])
    sampled = tf.nn.log_uniform_candidate_sampler(lab, 1, 16, True, classes, seed=5)
    op = tf.nn.nce_loss if loss_name == "nce" else tf.nn.sampled_softmax_loss
    loss = tf.reduce_mean(op(w, b, lab, x, 16, classes, sampled_values=sampled))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    labels = np.array([[3], [400], [3], [999]], np.int64)
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        rec = sess._client = _RecordingClient(sess._client)
        _, cands = sess.run([train, sampled[0]],
                            {x: RNG.normal(size=(4, dim)).astype(np.float32), lab: labels})
        handles = {sess._handle(p): (name, k) for name, v in (("w", w), ("b", b))
                   for k, p in enumerate(v)}
        sess._client = rec._client
        w1 = sess.run(w)
    ids = np.unique(np.concatenate([labels.ravel(), cands]))
    want = {(name, k): sorted((ids[ids % 2 == k] // 2).tolist())
            for name in ("w", "b") for k in range(2)}
    assert not set(handles) & set(rec.dense_pulls)        # never the whole table
    assert not set(handles) & set(rec.dense_pushes)
    pulled = {handles[h]: rows for h, rows in rec.row_pulls if h in handles}
    pushed = {handles[h]: rows for h, rows in rec.sparse_pushes if h in handles}
    assert pulled == want and pushed == want
    # The "mod" strategy's id i is row i // 2 of part i % 2; part k holds rows 500k.. of
    # the whole table a fetch returns, initialized from w0 in that layout.
    changed = np.nonzero((w1 != w0).any(axis=1))[0]
    assert set(changed.tolist()) <= set(((ids % 2) * 500 + ids // 2).tolist())
    assert len(changed) > 0


def test_tf_math_namespace_re_exports_the_same_ops():
    # TF1 has top_k, in_top_k, softplus, ... under tf.math as well as tf.nn.
    for name in ("top_k", "in_top_k", "softplus", "softsign", "l2_normalize", "zero_fraction",
                 "softmax", "log_softmax"):
        assert getattr(tf.math, name) is getattr(tf.nn, name)
    assert tf.math.log is tf.log and tf.math.reduce_sum is tf.reduce_sum
    assert "top_k" in tf.math.__all__ and "math" in tf.__all__
    with pytest.raises(AttributeError, match="module 'psrt.math' has no attribute 'erf'"):
        tf.math.erf  # noqa: B018
