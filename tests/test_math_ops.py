"""psrt/ops/math_ops.py, array_ops.py, clip_ops.py, random_ops.py: forward values against
TF1's documented behaviour and TF's own test values, static shapes and dtypes, and every
differentiable op's gradient (psrt.gradients) against central finite differences in float64.

TF sources cited per test: tensorflow/python/kernel_tests/*_test.py and
tensorflow/python/ops/*.py docstrings (r1.15)."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf


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
        g[i] = (np.sum(f(xp)) - np.sum(f(xm))) / (2 * eps)
    return g


def check_grad(sess, build, *shapes, feed_shapes=None, positive=False, seed=0):
    """psrt.gradients of sum(build(*phs)) vs central differences, float64, placeholders
    with a None batch dimension."""
    rng = np.random.default_rng(seed)
    vals = [rng.uniform(0.5, 2.0, s) if positive else rng.normal(size=s) for s in shapes]
    phs = [tf.placeholder(tf.float64, [None] + list(s[1:]) if len(s) else []) for s in shapes]
    y = build(*phs)
    grads = tf.gradients(y, phs)
    feed = dict(zip(phs, vals))
    got = sess.run(grads, feed)
    for k, v in enumerate(vals):
        def f(xk, k=k):
            fd = dict(feed)
            fd[phs[k]] = xk
            return sess.run(y, fd)
        np.testing.assert_allclose(got[k], _numeric_grad(f, v), rtol=1e-5, atol=1e-6)


UNARY = [("square", tf.square, False), ("sqrt", tf.sqrt, True), ("rsqrt", tf.rsqrt, True),
         ("exp", tf.exp, False), ("log", tf.log, True), ("log1p", tf.log1p, True),
         ("abs", tf.abs, False), ("negative", tf.negative, False),
         ("reciprocal", tf.reciprocal, True), ("sin", tf.sin, False), ("cos", tf.cos, False),
         ("expm1", tf.expm1, False)]


@pytest.mark.parametrize("name,fn,positive", UNARY, ids=[u[0] for u in UNARY])
def test_unary_value_dtype_and_gradient(sess, name, fn, positive):
    x = tf.placeholder(tf.float32, [None, 3])
    y = fn(x)
    assert y.dtype == np.float32 and y.shape == (None, 3)
    v = np.random.default_rng(1).uniform(0.5, 2, (2, 3)).astype(np.float32)
    out = sess.run(y, {x: v})
    assert out.dtype == np.float32
    ref = {"rsqrt": lambda a: 1 / np.sqrt(a), "reciprocal": lambda a: 1 / a,
           "negative": np.negative}.get(name, getattr(np, name, None))
    np.testing.assert_allclose(out, ref(v), rtol=1e-6)
    check_grad(sess, fn, (3, 2), positive=positive)


BINARY = [("add", tf.add), ("subtract", tf.subtract), ("multiply", tf.multiply),
          ("truediv", tf.truediv), ("maximum", tf.maximum), ("minimum", tf.minimum),
          ("squared_difference", tf.squared_difference), ("pow", tf.pow)]


@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcasts_keeps_float32_and_differentiates(sess, name, fn):
    x = tf.placeholder(tf.float32, [None, 3])
    y = fn(x, tf.constant([1.0, 2.0, 3.0]))
    assert y.dtype == np.float32 and y.shape == (None, 3)
    assert sess.run(y, {x: np.ones((2, 3))}).dtype == np.float32
    # broadcasting [n, 3] with [1, 3] and a None batch dimension
    check_grad(sess, fn, (4, 3), (1, 3), positive=(name == "pow"))


def test_binary_dtype_mismatch_is_tf_typeerror():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [2])
    y = tf.placeholder(tf.float64, [2])
    with pytest.raises(TypeError, match="Input 'y' of 'Add' Op has type float64 that does not "
                                        "match type float32 of argument 'x'"):
        tf.add(x, y)


def test_integer_division_rules(sess):
    # TF1: int32 truediv gives float64; floordiv and mod floor negatives
    # (tensorflow/python/kernel_tests/cwise_ops_binary_test.py, testFloorModInt/FloorDivide).
    a = tf.constant([-7, 7], tf.int32)
    b = tf.constant(3, tf.int32)
    q = tf.truediv(a, b)
    assert q.dtype == np.float64
    out = sess.run([q, tf.floordiv(a, b), tf.mod(a, b), tf.div(a, b)])
    np.testing.assert_allclose(out[0], [-7 / 3, 7 / 3])
    assert out[1].tolist() == [-3, 2] and out[2].tolist() == [2, 1] and out[3].tolist() == [-3, 2]
    assert sess.run(tf.reduce_mean(tf.constant([1, 2]))) == 1  # integer mean truncates


def test_comparisons_and_logic(sess):
    x = tf.constant([1.0, 2.0, 3.0])
    out = sess.run([tf.equal(x, 2.0), tf.not_equal(x, 2.0), tf.less(x, 2.0),
                    tf.less_equal(x, 2.0), tf.greater(x, 2.0), tf.greater_equal(x, 2.0)])
    assert [o.tolist() for o in out] == [[False, True, False], [True, False, True],
                                         [True, False, False], [True, True, False],
                                         [False, False, True], [False, True, True]]
    a, b = tf.constant([True, True, False]), tf.constant([True, False, False])
    out = sess.run([tf.logical_and(a, b), tf.logical_or(a, b), tf.logical_xor(a, b),
                    tf.logical_not(a)])
    assert [o.tolist() for o in out] == [[True, False, False], [True, True, False],
                                         [False, True, False], [False, False, True]]
    assert tf.equal(x, 2.0).dtype == np.bool_


def test_cast_and_to_float(sess):
    x = tf.constant([1.8, -1.8, 0.0])
    out = sess.run([tf.cast(x, tf.int32), tf.to_int64(x), tf.cast(x, tf.bool), tf.to_float(
        tf.constant([1, 2]))])
    assert out[0].tolist() == [1, -1, 0] and out[0].dtype == np.int32
    assert out[1].dtype == np.int64 and out[2].tolist() == [True, True, False]
    assert out[3].dtype == np.float32
    check_grad(sess, lambda v: tf.cast(v, tf.float64) * 2.0, (2, 2))


def test_reductions_axis_keepdims_and_old_names(sess):
    # tensorflow/python/ops/math_ops.py reduce_sum docstring: x = [[1, 1, 1], [1, 1, 1]].
    x = tf.constant([[1, 1, 1], [1, 1, 1]])
    out = sess.run([tf.reduce_sum(x), tf.reduce_sum(x, 0), tf.reduce_sum(x, 1),
                    tf.reduce_sum(x, 1, keepdims=True), tf.reduce_sum(x, [0, 1]),
                    tf.reduce_sum(x, reduction_indices=1, keep_dims=True)])
    assert out[0] == 6 and out[1].tolist() == [2, 2, 2] and out[2].tolist() == [3, 3]
    assert out[3].tolist() == [[3], [3]] and out[4] == 6 and out[5].tolist() == [[3], [3]]
    p = tf.placeholder(tf.float32, [None, 4])
    assert tf.reduce_max(p, 1).shape == (None,) and tf.reduce_mean(p, 0, True).shape == (1, 4)
    with pytest.raises(ValueError, match="both 'axis' and 'reduction_indices'"):
        tf.reduce_sum(p, 1, reduction_indices=1)
    # reduce_logsumexp docstring: log(sum(exp([[0,0,0],[0,0,0]]))) = log(6)
    z = tf.constant([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(sess.run(tf.reduce_logsumexp(z)), np.log(6), rtol=1e-6)
    b = tf.constant([[True, True], [False, False]])
    assert sess.run(tf.reduce_all(b, 1)).tolist() == [True, False]
    assert sess.run(tf.reduce_any(b, 0)).tolist() == [True, True]
    assert sess.run(tf.count_nonzero(tf.constant([0, 1, 2, 0]))) == 2


@pytest.mark.parametrize("fn", [tf.reduce_sum, tf.reduce_mean, tf.reduce_max, tf.reduce_min,
                                tf.reduce_prod, tf.reduce_logsumexp])
@pytest.mark.parametrize("axis,keep", [(None, False), (1, False), ([0, 1], True), (-1, True)])
def test_reduction_gradients(sess, fn, axis, keep):
    check_grad(sess, lambda v: fn(v, axis, keepdims=keep), (3, 4))


def test_argmax_argmin_add_n(sess):
    x = tf.constant([[1.0, 5.0, 3.0], [4.0, 2.0, 4.0]])
    out = sess.run([tf.argmax(x, 1), tf.argmin(x, 1), tf.argmax(x), tf.argmax(x, 1,
                    output_type=tf.int32)])
    assert out[0].tolist() == [1, 0] and out[1].tolist() == [0, 1] and out[2].tolist() == [1, 0, 1]
    assert out[0].dtype == np.int64 and out[3].dtype == np.int32
    check_grad(sess, lambda a, b: tf.add_n([a, b, a]), (2, 3), (2, 3))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes(sess, ta, tb):
    a = tf.placeholder(tf.float32, [None, 3] if not ta else [3, None])
    assert tf.matmul(a, tf.zeros([4, 3] if tb else [3, 4]), ta, tb).shape == \
        ((3 if False else None, 4) if not ta else (None, 4))
    sa = (3, 2) if ta else (2, 3)
    sb = (4, 3) if tb else (3, 4)
    rng = np.random.default_rng(0)
    va, vb = rng.normal(size=sa), rng.normal(size=sb)
    pa, pb = tf.placeholder(tf.float64, sa), tf.placeholder(tf.float64, sb)
    got = sess.run(tf.matmul(pa, pb, transpose_a=ta, transpose_b=tb), {pa: va, pb: vb})
    np.testing.assert_allclose(got, (va.T if ta else va) @ (vb.T if tb else vb))
    check_grad(sess, lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb), sa, sb)


def test_cumsum_segments_range(sess):
    # tensorflow/python/ops/math_ops.py cumsum docstring.
    x = tf.constant([1, 2, 3])
    out = sess.run([tf.cumsum(x), tf.cumsum(x, exclusive=True), tf.cumsum(x, reverse=True),
                    tf.cumsum(x, exclusive=True, reverse=True)])
    assert [o.tolist() for o in out] == [[1, 3, 6], [0, 1, 3], [6, 5, 3], [5, 3, 0]]
    check_grad(sess, lambda v: tf.cumsum(v, 1, exclusive=True), (2, 4))
    # segment_sum docstring: c = [[1,2,3,4],[4,3,2,1],[5,6,7,8]], ids [0,0,1] -> [[5,5,5,5],
    # [5,6,7,8]].
    c = tf.constant([[1, 2, 3, 4], [4, 3, 2, 1], [5, 6, 7, 8]])
    assert sess.run(tf.segment_sum(c, tf.constant([0, 0, 1]))).tolist() == \
        [[5, 5, 5, 5], [5, 6, 7, 8]]
    # unsorted_segment_sum docstring: ids [0, 1, 0] -> [[6, 8, 10, 12], [-1, -2, -3, -4]]
    c2 = tf.constant([[1, 2, 3, 4], [-1, -2, -3, -4], [5, 6, 7, 8]])
    u = tf.unsorted_segment_sum(c2, tf.constant([0, 1, 0]), 2)
    assert u.shape == (2, 4) and sess.run(u).tolist() == [[6, 8, 10, 12], [-1, -2, -3, -4]]
    # range docstring: range(3, 18, 3) -> [3, 6, 9, 12, 15]; range(5) -> [0..4]
    r = tf.range(3, 18, 3)
    assert r.shape == (5,) and sess.run(r).tolist() == [3, 6, 9, 12, 15]
    assert sess.run(tf.range(5)).dtype == np.int32
    np.testing.assert_allclose(sess.run(tf.linspace(10.0, 12.0, 3)), [10, 11, 12])
