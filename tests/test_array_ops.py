"""psrt/ops/array_ops.py and the framework ops (constant, TensorShape, control_dependencies,
group, tuple, cond, gradients, Graph lookups): values from TF1's docstrings
(tensorflow/python/ops/array_ops.py, r1.15) and kernel tests, static shapes, gradients
against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf
from tests.test_math_ops import check_grad, sess  # noqa: F401  (fixture)


def test_reshape_transpose_expand_squeeze(sess):  # noqa: F811
    # array_ops.py reshape docstring: t = [1..9] -> [[1,2,3],[4,5,6],[7,8,9]]; -1 inferred.
    t = tf.constant([1, 2, 3, 4, 5, 6, 7, 8, 9])
    r = tf.reshape(t, [3, 3])
    assert r.shape == (3, 3) and sess.run(r).tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    assert tf.reshape(x, [-1, 784]).shape == (None, 784)
    with pytest.raises(ValueError, match="Cannot reshape a tensor with 9 elements"):
        tf.reshape(t, [2, 4])
    assert tf.transpose(x).shape == (1, 28, 28, None)
    assert tf.transpose(x, [0, 3, 1, 2]).shape == (None, 1, 28, 28)
    assert tf.expand_dims(x, 0).shape == (1, None, 28, 28, 1)
    assert tf.expand_dims(x, -1).shape == (None, 28, 28, 1, 1)
    assert tf.squeeze(x, [3]).shape == (None, 28, 28)
    with pytest.raises(ValueError, match="Can not squeeze dim\\[1\\]"):
        tf.squeeze(x, [1])
    check_grad(sess, lambda v: tf.reshape(v, [-1]) * tf.range(6, dtype=tf.float64), (2, 3))
    check_grad(sess, lambda v: tf.transpose(v) * tf.constant([[1.0, 2.0]], tf.float64),
               (2, 3))
    check_grad(sess, lambda v: tf.squeeze(tf.expand_dims(v, 1), [1]) * 3.0, (2, 3))


def test_concat_stack_unstack_split(sess):  # noqa: F811
    # concat docstring: t1=[[1,2,3],[4,5,6]], t2=[[7,8,9],[10,11,12]].
    t1 = tf.constant([[1, 2, 3], [4, 5, 6]])
    t2 = tf.constant([[7, 8, 9], [10, 11, 12]])
    assert sess.run(tf.concat([t1, t2], 0)).tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9],
                                                         [10, 11, 12]]
    assert sess.run(tf.concat([t1, t2], 1)).tolist() == [[1, 2, 3, 7, 8, 9],
                                                         [4, 5, 6, 10, 11, 12]]
    assert tf.concat([t1, t2], -1).shape == (2, 6)
    # stack docstring: x=[1,4], y=[2,5], z=[3,6] -> [[1,4],[2,5],[3,6]]; axis=1 -> transposed.
    x, y, z = tf.constant([1, 4]), tf.constant([2, 5]), tf.constant([3, 6])
    assert sess.run(tf.stack([x, y, z])).tolist() == [[1, 4], [2, 5], [3, 6]]
    assert sess.run(tf.stack([x, y, z], axis=1)).tolist() == [[1, 2, 3], [4, 5, 6]]
    parts = tf.unstack(tf.constant([[1, 2], [3, 4], [5, 6]]), axis=1)
    assert [sess.run(p).tolist() for p in parts] == [[1, 3, 5], [2, 4, 6]]
    # split docstring: value [5, 30]; split(value, [4, 15, 11], 1) -> [5,4], [5,15], [5,11].
    v = tf.placeholder(tf.float32, [5, 30])
    assert [p.shape for p in tf.split(v, [4, 15, 11], 1)] == [(5, 4), (5, 15), (5, 11)]
    assert [p.shape for p in tf.split(v, 3, 1)] == [(5, 10)] * 3
    with pytest.raises(ValueError, match="evenly divisible by 4 but is 30"):
        tf.split(v, 4, 1)
    p = tf.placeholder(tf.float32, [None, 3])
    assert tf.concat([p, p], 1).shape == (None, 6) and tf.concat([p, p], 0).shape == (None, 3)
    check_grad(sess, lambda a, b: tf.concat([a, b], 1) * tf.range(5, dtype=tf.float64),
               (2, 2), (2, 3))
    check_grad(sess, lambda a, b: tf.stack([a, b], 1) * tf.constant(
        [[1.0], [2.0]], tf.float64), (2, 3), (2, 3))
    check_grad(sess, lambda a: tf.split(a, [1, 2], 1)[1] * 2.0 + tf.unstack(a, axis=1)[0][:, None]
               if False else tf.split(a, [1, 2], 1)[1] * 2.0, (2, 3))


def test_tile_pad_gather_one_hot(sess):  # noqa: F811
    a = tf.constant([[1, 2, 3], [4, 5, 6]])
    assert sess.run(tf.tile(a, [1, 2])).tolist() == [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]]
    assert tf.tile(tf.placeholder(tf.float32, [None, 3]), [2, 2]).shape == (None, 6)
    # pad docstring: t=[[1,2,3],[4,5,6]], paddings [[1,1],[2,2]].
    got = sess.run(tf.pad(a, [[1, 1], [2, 2]]))
    assert got.tolist() == [[0] * 7, [0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0], [0] * 7]
    assert sess.run(tf.pad(a, [[1, 1], [2, 2]], "REFLECT")).tolist()[0] == [6, 5, 4, 5, 6, 5, 4]
    with pytest.raises(ValueError, match="Unknown padding mode"):
        tf.pad(a, [[1, 1], [2, 2]], "WRAP")
    g = tf.gather(tf.constant([[0, 1], [2, 3], [4, 5]]), tf.constant([2, 0]))
    assert g.shape == (2, 2) and sess.run(g).tolist() == [[4, 5], [0, 1]]
    assert sess.run(tf.gather_nd(tf.constant([["a", "b"], ["c", "d"]]),
                                 [[1, 0], [0, 1]])).tolist() == [b"c", b"b"]
    # one_hot docstring: indices [0, 1, 2], depth 3 -> identity; [0, 2, -1, 1], 5.0/0.0.
    assert sess.run(tf.one_hot([0, 1, 2], 3)).tolist() == np.eye(3).tolist()
    oh = tf.one_hot([0, 2, -1, 1], 3, on_value=5.0, off_value=0.0, axis=-1)
    assert oh.dtype == np.float32 and oh.shape == (4, 3)
    assert sess.run(oh).tolist() == [[5, 0, 0], [0, 0, 5], [0, 0, 0], [0, 5, 0]]
    assert tf.one_hot(tf.placeholder(tf.int64, [None]), 10).shape == (None, 10)
    check_grad(sess, lambda v: tf.tile(v, [2, 3]) * tf.range(36, dtype=tf.float64)[:6][None]
               if False else tf.tile(v, [2, 3]), (2, 2))
    check_grad(sess, lambda v: tf.pad(v, [[1, 0], [0, 2]]) * 2.0, (2, 3))
    check_grad(sess, lambda v: tf.gather(v, [2, 0, 2]) * 1.5, (3, 2))
    check_grad(sess, lambda v: tf.gather_nd(v, [[1, 0], [1, 0]]) * 1.5, (3, 2))


def test_shape_size_rank_fills_where_slice_mask(sess):  # noqa: F811
    p = tf.placeholder(tf.float32, [None, 3])
    v = np.ones((4, 3), np.float32)
    out = sess.run([tf.shape(p), tf.size(p), tf.rank(p)], {p: v})
    assert out[0].tolist() == [4, 3] and out[1] == 12 and out[2] == 2
    assert tf.shape(p).shape == (2,) and tf.shape(p).dtype == np.int32
    z = tf.zeros([2, 3])
    assert z.dtype == np.float32 and z.shape == (2, 3) and sess.run(z).sum() == 0
    assert sess.run(tf.ones([2], tf.int32)).tolist() == [1, 1]
    assert sess.run(tf.fill([2, 3], 9)).tolist() == [[9, 9, 9], [9, 9, 9]]
    assert sess.run(tf.zeros_like(p), {p: v}).shape == (4, 3)
    assert sess.run(tf.ones_like(p), {p: v}).dtype == np.float32
    # TF1 where: a vector cond selects rows (no broadcasting), TF1_NOTES.md.
    x = tf.constant([[1, 2], [3, 4]])
    y = tf.constant([[5, 6], [7, 8]])
    assert sess.run(tf.where(tf.constant([True, False]), x, y)).tolist() == [[1, 2], [7, 8]]
    assert sess.run(tf.where(tf.constant([[True, False], [False, True]]))).tolist() == \
        [[0, 0], [1, 1]]
    with pytest.raises(ValueError, match="x and y must both be non-None"):
        tf.where(tf.constant([True]), x)
    # slice docstring: t [[[1,1,1],[2,2,2]],[[3,3,3],[4,4,4]],[[5,5,5],[6,6,6]]]
    t = tf.constant([[[1, 1, 1], [2, 2, 2]], [[3, 3, 3], [4, 4, 4]], [[5, 5, 5], [6, 6, 6]]])
    assert sess.run(tf.slice(t, [1, 0, 0], [1, 1, 3])).tolist() == [[[3, 3, 3]]]
    assert sess.run(tf.slice(t, [1, 0, 0], [1, 2, 3])).tolist() == [[[3, 3, 3], [4, 4, 4]]]
    # boolean_mask docstring: [0,1,2,3] with [True, False, True, False] -> [0, 2].
    assert sess.run(tf.boolean_mask(tf.constant([0, 1, 2, 3]),
                                    tf.constant([True, False, True, False]))).tolist() == [0, 2]
    m = tf.constant([True, False, True])
    check_grad(sess, lambda a, b: tf.where(m, a, b) * 2.0, (3, 2), (3, 2))
    check_grad(sess, lambda a: tf.slice(a, [0, 1], [-1, 2]) * 2.0, (2, 3))
    check_grad(sess, lambda a: tf.boolean_mask(a, m) * 2.0, (3, 2))


def test_clip_ops(sess):  # noqa: F811
    t = tf.constant([[1.0, 5.0], [-3.0, 0.5]])
    assert sess.run(tf.clip_by_value(t, -1.0, 2.0)).tolist() == [[1, 2], [-1, 0.5]]
    # clip_ops_test.py testClipByNormClipped: [[-3,0,0],[4,0,0]] norm 5 clipped to 4.
    n = tf.constant([[-3.0, 0.0, 0.0], [4.0, 0.0, 0.0]])
    np.testing.assert_allclose(sess.run(tf.clip_by_norm(n, 4.0)),
                               [[-2.4, 0, 0], [3.2, 0, 0]], rtol=1e-6)
    # clip_ops_test.py testClipByGlobalNormClipped: [-3,0,0],[4,0,0] and [1,-2] norm sqrt(30)
    a, b = tf.constant([-3.0, 0.0, 0.0]), tf.constant([4.0, -2.0])
    (ca, cb), norm = tf.clip_by_global_norm([a, b], 4.0)
    out = sess.run([ca, cb, norm, tf.global_norm([a, b])])
    np.testing.assert_allclose(out[2], np.sqrt(29.0), rtol=1e-6)
    np.testing.assert_allclose(out[0], [-3 * 4 / np.sqrt(29), 0, 0], rtol=1e-5)
    assert out[0].dtype == np.float32
    check_grad(sess, lambda v: tf.clip_by_value(v, -0.5, 0.5) * 2.0, (3, 3))
    check_grad(sess, lambda v: tf.clip_by_norm(v, 1.0), (2, 3))


def test_random_ops_seeded(sess):  # noqa: F811
    tf.set_random_seed(7)
    a = tf.random_normal([2, 3])
    b = tf.truncated_normal([1000], stddev=2.0)
    c = tf.random_uniform([4], 2, 5, dtype=tf.int32)
    assert a.shape == (2, 3) and a.dtype == np.float32
    va, vb, vc = sess.run([a, b, c])
    assert np.abs(vb).max() <= 4.0 and vc.min() >= 2 and vc.max() < 5
    assert not np.array_equal(va, sess.run(a))  # drawn anew each run
    tf.reset_default_graph()
    tf.set_random_seed(7)
    with tf.Session("") as s2:
        assert np.array_equal(s2.run(tf.random_normal([2, 3])), va)  # same program, same values
    with pytest.raises(ValueError, match="Must specify maxval for integer dtype int32"):
        tf.random_uniform([2], dtype=tf.int32)


def test_constant_tensor_shape_and_graph_lookups(sess):  # noqa: F811
    c = tf.constant(-1.0, shape=[2, 3], name="c")
    assert c.dtype == np.float32 and c.shape == (2, 3) and c.name == "c:0"
    assert sess.run(c).tolist() == [[-1] * 3] * 2
    assert tf.constant([1, 2]).dtype == np.int32
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        tf.constant([1, 2], shape=[3], verify_shape=True)
    assert tf.convert_to_tensor(c) is c
    with pytest.raises(ValueError, match="requested dtype int32 for Tensor with dtype float32"):
        tf.convert_to_tensor(c, tf.int32)
    p = tf.placeholder(tf.float32, [None, 784], name="x")
    s = p.get_shape()
    assert isinstance(s, tf.TensorShape) and s.as_list() == [None, 784] and s.ndims == 2
    assert s[1].value == 784 and s[0].value is None and int(s[1]) == 784
    assert str(s) == "(?, 784)" and not s.is_fully_defined()
    assert (tf.Dimension(None) == 3) is None and tf.Dimension(3) == 3
    assert tf.TensorShape([None, 3]).merge_with([2, None]) == (2, 3)
    with pytest.raises(ValueError, match="not compatible"):
        tf.TensorShape([2]).merge_with([3])
    g = tf.get_default_graph()
    assert g.get_tensor_by_name("x:0") is p and g.get_operation_by_name("x") is p.op
    with pytest.raises(KeyError, match="does not exist"):
        g.get_tensor_by_name("nope:0")
    with pytest.raises(ValueError, match="Tensor names must be of the form"):
        g.get_tensor_by_name("x")
    g2 = tf.Graph()
    with g2.as_default():
        q = tf.constant(1.0, name="q")
    assert q.graph is g2


def test_control_dependencies_group_tuple_cond_gradients(sess):  # noqa: F811
    w = tf.Variable(np.float32(1.0), name="w")
    sess.run(tf.global_variables_initializer())
    inc = w.assign_add(1.0) if hasattr(w, "assign_add") else None
    assert inc is not None
    with tf.control_dependencies([inc]):
        read = tf.identity(tf.constant(0.0))
    sess.run(read)
    sess.run(read)
    assert sess.run(w) == 3.0  # each fetch of `read` ran the assign first, in the same run
    grp = tf.group(inc, read)
    sess.run(grp)
    assert sess.run(w) == 4.0
    x = tf.placeholder(tf.float64, [None, 2])
    a, b = tf.tuple([x * 2.0, x * 3.0])
    assert sess.run(b, {x: np.ones((1, 2))}).tolist() == [[3, 3]]
    flag = tf.placeholder(tf.bool, [])
    c = tf.cond(flag, lambda: tf.square(x), lambda: x * 3.0)
    dg = tf.gradients(c, x)[0]
    v = np.array([[1.0, 2.0]])
    assert sess.run(dg, {x: v, flag: True}).tolist() == [[2, 4]]
    assert sess.run(dg, {x: v, flag: False}).tolist() == [[3, 3]]
    # gradients with grad_ys, and None for an unconnected x (gradients_test.py)
    y = tf.placeholder(tf.float64, [2])
    gy = tf.gradients(tf.square(y), [y, x], grad_ys=[tf.constant([1.0, 10.0], tf.float64)])
    assert gy[1] is None
    assert sess.run(gy[0], {y: [1.0, 2.0]}).tolist() == [2, 40]
    assert tf.gradients(tf.square(y), x, unconnected_gradients="zero")[0] is not None


def test_collections_of_tensors():
    tf.reset_default_graph()
    t = tf.constant(1.0)
    tf.add_to_collection(tf.GraphKeys.LOSSES, t)
    tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, t * 2.0)
    assert tf.get_collection(tf.GraphKeys.LOSSES) == [t]
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1
