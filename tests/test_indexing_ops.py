"""psrt/framework/slicing.py and psrt/ops/indexing_ops.py, sparse_ops.py: ``Tensor[...]`` and
``tf.strided_slice``, ``unique``, ``unique_with_counts``, ``tensordot``, ``sparse_to_dense``;
compute_gradients' tensors and moving averages of tensors (the rest of issue 20's item 1).

Values from TF r1.15's docstrings and kernel tests (cited per test); gradients against central
finite differences in float64 (tests/test_math_ops.check_grad)."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf
from tests.test_math_ops import check_grad, sess  # noqa: F401  (fixture)

# tensorflow/python/ops/array_ops.py, strided_slice's docstring.
T = [[[1, 1, 1], [2, 2, 2]], [[3, 3, 3], [4, 4, 4]], [[5, 5, 5], [6, 6, 6]]]


def test_strided_slice_docstring_values(sess):  # noqa: F811
    t = tf.constant(T)
    assert sess.run(tf.strided_slice(t, [1, 0, 0], [2, 1, 3], [1, 1, 1])).tolist() == \
        [[[3, 3, 3]]]
    assert sess.run(tf.strided_slice(t, [1, 0, 0], [2, 2, 3], [1, 1, 1])).tolist() == \
        [[[3, 3, 3], [4, 4, 4]]]
    assert sess.run(tf.strided_slice(t, [1, -1, 0], [2, -3, 3], [1, -1, 1])).tolist() == \
        [[[4, 4, 4], [3, 3, 3]]]
    # Masks: begin/end bits take the whole range, shrink removes the axis, new_axis adds
    # one, an ellipsis stands for the axes not named (StridedSlice's op definition).
    v = np.asarray(T)
    assert sess.run(tf.strided_slice(t, [0, 0, 0], [0, 0, 0], begin_mask=7, end_mask=7)
                    ).tolist() == v.tolist()
    s = tf.strided_slice(t, [1, 0], [2, 0], shrink_axis_mask=1, end_mask=2)
    assert s.shape == (2, 3) and sess.run(s).tolist() == v[1].tolist()
    e = tf.strided_slice(t, [0, 2], [0, 3], ellipsis_mask=1)
    assert e.shape == (3, 2, 1) and sess.run(e).tolist() == v[..., 2:3].tolist()
    n = tf.strided_slice(t, [0, 0], [0, 1], new_axis_mask=1, end_mask=0)
    assert n.shape == (1, 1, 2, 3) and sess.run(n).tolist() == v[None, 0:1].tolist()


def test_getitem_is_tf_slice_helper(sess):  # noqa: F811
    # array_ops._slice_helper: ints shrink, None adds an axis, ... fills, negative steps.
    x = tf.placeholder(tf.float32, [None, 4, 5])
    assert x[0].shape == (4, 5) and x[:, 1].shape == (None, 5)
    assert x[..., 2].shape == (None, 4) and x[:, tf.newaxis, 1:3].shape == (None, 1, 2, 5)
    assert x[::2, -1, ::-1].shape == (None, 5)
    v = np.arange(40, dtype=np.float32).reshape(2, 4, 5)
    got = sess.run(x[:, 1, ::-2], {x: v})
    assert got.dtype == np.float32 and got.tolist() == v[:, 1, ::-2].tolist()
    # A scalar int tensor as an index and as a bound.
    i = tf.placeholder(tf.int32, [])
    assert sess.run(x[i, 1:i + 2], {x: v, i: 1}).tolist() == v[1, 1:3].tolist()
    # Variables slice too (a variable converts to its value's tensor).
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2))
    sess.run(tf.global_variables_initializer())
    assert w[1].shape == (2,) and sess.run(w[1]).tolist() == [2.0, 3.0]
    assert sess.run(w[-1, 0]) == 4.0


def test_slicing_errors_are_tfs(sess):  # noqa: F811
    x = tf.placeholder(tf.float32, [None, 4, 5])
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[[0, 1]]
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[tf.placeholder(tf.float32, [])]
    with pytest.raises(ValueError, match="Multiple ellipses in slice spec not allowed"):
        x[..., ...]
    with pytest.raises(ValueError, match="slice index 7 of dimension 1 out of bounds"):
        x[:, 7]
    with pytest.raises(ValueError, match="Index out of range using input dim 3"):
        x[0, 0, 0, 0]
    # An index out of a dimension known only at run time: InvalidArgumentError in the run.
    with pytest.raises(tf.errors.InvalidArgumentError, match="slice index 5 of dimension 0"):
        sess.run(x[5], {x: np.zeros((2, 4, 5), np.float32)})
    with pytest.raises(NotImplementedError, match="var="):
        tf.strided_slice(x, [0], [1], var=x)


def test_strided_slice_gradient(sess):  # noqa: F811
    # StridedSliceGrad: the incoming gradient written into zeros of the input's shape.
    check_grad(sess, lambda a: a[:, 1:3] * tf.constant([2.0, 3.0], tf.float64), (2, 4))
    check_grad(sess, lambda a: a[::-2, ..., tf.newaxis] * 1.5, (3, 4))
    check_grad(sess, lambda a: tf.strided_slice(a, [0, 1], [0, 4], [1, 2], begin_mask=1,
                                                end_mask=1) ** 2, (3, 4))
    check_grad(sess, lambda a: a[1] * a[0], (2, 3))


def test_unique_and_counts(sess):  # noqa: F811
    # array_ops.unique / unique_with_counts docstrings.
    x = tf.constant([1, 1, 2, 4, 4, 4, 7, 8, 8])
    y, idx = tf.unique(x)
    assert y.shape == (None,) and idx.shape == (9,) and idx.dtype == np.int32
    assert sess.run(y).tolist() == [1, 2, 4, 7, 8]
    assert sess.run(idx).tolist() == [0, 0, 1, 2, 2, 2, 3, 4, 4]
    yc, idxc, count = tf.unique_with_counts(x, out_idx=tf.int64)
    assert sess.run(count).tolist() == [2, 1, 3, 1, 2] and sess.run(idxc).dtype == np.int64
    # First-occurrence order, not sorted order; strings too (unique_op_test.testString).
    assert sess.run(tf.unique(tf.constant([5, 3, 5, 1])).y).tolist() == [5, 3, 1]
    words = sess.run(tf.unique(tf.constant(np.array([b"b", b"a", b"b"], object))).y)
    assert list(words) == [b"b", b"a"]
    with pytest.raises(ValueError, match="unique expects a 1D vector"):
        tf.unique(tf.constant([[1, 2]]))


def test_tensordot_values_and_gradient(sess):  # noqa: F811
    # math_ops.tensordot's docstring: axes=1 is matmul, axes=[[1],[0]] the same, axes=0
    # the outer product; the result's shape is a's free axes then b's.
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    assert tf.tensordot(a, b, 1).shape == (2, 4)
    np.testing.assert_allclose(sess.run(tf.tensordot(a, b, 1)), a @ b)
    np.testing.assert_allclose(sess.run(tf.tensordot(a, b, [[1], [0]])), a @ b)
    assert tf.tensordot(a, b, 0).shape == (2, 3, 3, 4)
    c = np.arange(24.0).reshape(2, 3, 4)
    d = np.arange(12.0).reshape(4, 3)
    td = tf.tensordot(c, d, [[1, 2], [1, 0]])
    assert td.shape == (2,)
    np.testing.assert_allclose(sess.run(td), np.tensordot(c, d, [[1, 2], [1, 0]]))
    with pytest.raises(ValueError, match="contracted dimensions differ"):
        tf.tensordot(a, b, [[0], [0]])
    x = tf.placeholder(tf.float32, [None, 3])
    assert tf.tensordot(x, tf.constant(np.ones((3, 4), np.float32)), 1).dtype == np.float32
    w = np.random.default_rng(3).normal(size=(4, 3, 2))
    check_grad(sess, lambda v: tf.tensordot(v, tf.constant(w), [[1, 2], [2, 1]]), (2, 2, 3))
    check_grad(sess, lambda u, v: tf.tensordot(u, v, [[0], [1]]), (3, 2), (4, 3))


def test_sparse_to_dense(sess):  # noqa: F811
    # tensorflow/python/kernel_tests/sparse_to_dense_op_py_test.py.
    assert sess.run(tf.sparse_to_dense([1, 3], [5], 1, 0)).tolist() == [0, 1, 0, 1, 0]
    f = tf.sparse_to_dense([1, 3], [5], 1.0, 0.0)
    assert f.dtype == np.float32 and sess.run(f).tolist() == [0, 1, 0, 1, 0]
    assert sess.run(tf.sparse_to_dense([1, 3], [5], [1, 2], -1)).tolist() == [-1, 1, -1, 2, -1]
    assert sess.run(tf.sparse_to_dense([[1, 3], [2, 0]], [3, 4], 1, -1)).tolist() == \
        [[-1, -1, -1, -1], [-1, -1, -1, 1], [1, -1, -1, -1]]
    assert sess.run(tf.sparse_to_dense(2, [4], 7)).tolist() == [0, 0, 7, 0]
    with pytest.raises(tf.errors.InvalidArgumentError, match="is out of bounds"):
        sess.run(tf.sparse_to_dense([1, 8], [5], 1))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[1\] = \[1\] is repeated"):
        sess.run(tf.sparse_to_dense([1, 1], [5], 1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of order"):
        sess.run(tf.sparse_to_dense([3, 1], [5], 1))
    assert sess.run(tf.sparse_to_dense([3, 1], [5], 1, validate_indices=False)).tolist() == \
        [0, 1, 0, 1, 0]
    with pytest.raises(tf.errors.InvalidArgumentError, match="sparse_values has incorrect"):
        sess.run(tf.sparse_to_dense([1, 3], [5], [1, 2, 3]))


def test_sparse_to_dense_gradient(sess):  # noqa: F811
    # sparse_grad.py _SparseToDenseGrad: values get the gathered gradient, the default
    # value the sum of the rest.
    vals = tf.placeholder(tf.float64, [2])
    default = tf.placeholder(tf.float64, [])
    y = tf.sparse_to_dense([[0, 1], [2, 2]], [3, 3], vals, default)
    weights = np.arange(9.0).reshape(3, 3)
    gv, gd = tf.gradients(y * weights, [vals, default])
    out = sess.run([gv, gd], {vals: [1.0, 2.0], default: 0.5})
    assert out[0].tolist() == [1.0, 8.0] and out[1] == weights.sum() - 9.0


def test_compute_gradients_are_tensors_to_clip_fetch_and_apply(sess):  # noqa: F811
    # TF's idiom: grads_and_vars = opt.compute_gradients(loss); clip; apply_gradients.
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None])
    w = tf.Variable(np.zeros(3, np.float32), name="w")
    b = tf.Variable(np.float32(0), name="b")
    unused = tf.Variable(np.float32(1), name="unused")
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, 1) + b - y))
    opt = tf.train.GradientDescentOptimizer(0.1)
    gv = opt.compute_gradients(loss)
    assert [v.name for _, v in gv] == ["w", "b", "unused"] and gv[2][0] is None
    assert isinstance(gv[0][0], tf.Tensor) and gv[0][0].shape == (3,)
    assert gv[0][0].dtype == np.float32
    live = [(g, v) for g, v in gv if g is not None]
    clipped, norm = tf.clip_by_global_norm([g for g, _ in live], 0.5)
    clip_op = opt.apply_gradients(list(zip(clipped, [v for _, v in live])))
    plain_op = opt.apply_gradients(live)
    sess.run(tf.global_variables_initializer())
    X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    Y = np.array([1, 2], np.float32)
    feed = {x: X, y: Y}
    gw, gb, n = sess.run([live[0][0], live[1][0], norm], feed)
    # d/dw mean((xw+b-y)^2) at w=0, b=0: 2/N * X^T (-Y) = [-9, -12, -15]; d/db = -3.
    np.testing.assert_allclose(gw, [-9.0, -12.0, -15.0])
    assert float(gb) == pytest.approx(-3.0)
    assert float(n) == pytest.approx(np.sqrt(81 + 144 + 225 + 9), rel=1e-6)
    _, fetched = sess.run([clip_op, clipped[0]], feed)
    scale = 0.5 / float(n)
    np.testing.assert_allclose(sess.run(w), -0.1 * gw * scale, rtol=1e-6)
    np.testing.assert_allclose(fetched, gw * scale, rtol=1e-6)
    # Unchanged gradients: the train op pushes them from the loss's own backward pass.
    assert plain_op.loss is loss
    w0, g1 = sess.run(w), sess.run(live[0][0], feed)
    sess.run(plain_op, feed)
    np.testing.assert_allclose(sess.run(w), w0 - 0.1 * g1, rtol=1e-6)
    assert sess.run(unused) == 1.0


def test_moving_average_of_a_tensor(sess):  # noqa: F811
    # moving_averages.py apply(): a tensor's average starts at zeros (create_zeros_slot), is
    # named after its op, is not debiased by default and does not join
    # MOVING_AVERAGE_VARIABLES (only variables do).
    x = tf.placeholder(tf.float32, [2])
    w = tf.Variable(np.float32(2.0), name="w")
    loss = tf.reduce_mean(x * w, name="loss")
    ema = tf.train.ExponentialMovingAverage(0.9)
    update = ema.apply([loss, w])
    shadow = ema.average(loss)
    assert shadow.name == "loss/ExponentialMovingAverage" and shadow.shape == ()
    assert tf.moving_average_variables() == [w]
    assert shadow not in tf.trainable_variables()
    sess.run(tf.global_variables_initializer())
    sess.run(update, {x: [1.0, 3.0]})                    # loss = 4
    assert sess.run(shadow) == pytest.approx(0.1 * 4.0)
    sess.run(update, {x: [2.0, 2.0]})                    # loss = 4 again
    assert sess.run(shadow) == pytest.approx(0.9 * 0.4 + 0.1 * 4.0)
    assert sess.run(ema.average(w)) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="fully defined shape"):
        ema.apply([tf.placeholder(tf.float32, [None])])
    with pytest.raises(NotImplementedError, match="zero_debias"):
        tf.train.ExponentialMovingAverage(0.9, zero_debias=True).apply([loss])
    with pytest.raises(TypeError, match="half, float, or double"):
        ema.apply([tf.constant([1, 2])])
