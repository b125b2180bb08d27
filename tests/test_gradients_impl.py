"""psrt.gradients (psrt/ops/gradients_impl.py, the backward op of psrt/framework/autodiff.py)
against TF r1.15's semantics: tensorflow/python/ops/gradients_impl.py's docstring and
gradients_util.py's ``_GradientsHelper`` (sum of ys, ``grad_ys`` as the initial gradients,
``stop_gradients``, unconnected xs None or zeros, integer tensors constant), with the values of
tensorflow/python/ops/gradients_test.py; the row-sparse gradient of ``embedding_lookup``
(array_grad.py ``_GatherGrad``: an IndexedSlices of one row per looked-up id, lookups
concatenated by gradients_util ``_AggregateIndexedSlicesGradients``; ``convert_to_tensor``
makes it dense with ``unsorted_segment_sum``), for plain and partitioned variables, through
``embedding_lookup_sparse``, in-process and on a real ps task; gradient values against float64
central differences; and one forward pass per run (a py_func counting its calls, dropout's and
random_uniform's draws shared by the fetched forward value and its gradient), as TF evaluates
each op once per run.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest

import psrt as tf
from psrt import errors

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def numeric_grad(f, x, eps=1e-6):
    """Central differences of sum(f(x)) in float64."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (np.sum(f(xp)) - np.sum(f(xm))) / (2 * eps)
    return g


def dense(s):
    """An IndexedSlicesValue made dense (rows of repeated indices added)."""
    out = np.zeros(tuple(s.dense_shape), s.values.dtype)
    np.add.at(out, s.indices, s.values)
    return out


# ---- TF's gradients_test.py values ------------------------------------------------------------

def test_tf_gradients_test_values(sess):
    # testDependentYs: y = x^2, y2 = y^4 at x = 3; d(y + y2)/dx = 6 + 8 * 3^7 = 17502.
    x = tf.constant(3.0)
    y = tf.square(x)
    y2 = tf.square(tf.square(y))
    assert sess.run(tf.gradients([y, y2], x))[0] == pytest.approx(17502.0)
    assert sess.run(tf.gradients(y + y2, x))[0] == pytest.approx(17502.0)
    assert sess.run(tf.gradients([tf.identity(y), tf.identity(y2)], x))[0] == \
        pytest.approx(17502.0)
    # testPartialDerivatives (also gradients_impl.py's docstring example).
    x = tf.constant(1.0)
    y = 2 * x
    z = x + y
    assert sess.run(tf.gradients(z, [x, y])) == [3.0, 1.0]
    assert sess.run(tf.gradients(z, [x, y], stop_gradients=[x, y])) == [1.0, 1.0]
    # testBoundaryContinue and testAggregationMethod*: x is a predecessor of y.
    x = tf.constant(1.0)
    y = x * 2.0
    assert sess.run(tf.gradients(y * 3.0, [x, y])) == [6.0, 3.0]
    z = y + y + y + y + y + y + y + y + y + y
    assert sess.run(tf.gradients(z, [x, y])) == [20.0, 10.0]
    # testStopGradient: the only path goes through stop_gradient: None at graph time.
    inp = tf.constant(1.0, shape=[100, 32])
    assert tf.gradients(tf.stop_gradient(inp), inp)[0] is None
    # testUnconnectedGradients*: none, zero, and zero for a connected x.
    a = tf.constant(1.0, shape=[2, 2])
    b = tf.constant(3.0, shape=[3, 1])
    assert tf.gradients([b], [a], unconnected_gradients="none") == [None]
    zeros = tf.gradients([b], [a], unconnected_gradients="zero")
    assert sess.run(zeros)[0].tolist() == [[0.0, 0.0], [0.0, 0.0]]
    c = tf.constant(1.0)
    assert sess.run(tf.gradients([c * 3.0], [c], unconnected_gradients="zero"))[0] == 3.0
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients: 'nonsense'"):
        tf.gradients([b], [a], unconnected_gradients="nonsense")


def test_stop_gradients_equal_stop_gradient_ops(sess):
    # testStopGradients: for every subset of a, b, c, d held constant, the gradients of d
    # with respect to every subset equal those of the same graph built with stop_gradient.
    def make(rng, stops=""):
        def function_of(xs, k=3):
            out = tf.constant(rng.rand(k, k))
            for x in xs:
                out = out + tf.matmul(tf.constant(rng.rand(k, k)), x)
            return out
        a = function_of([])
        a = tf.stop_gradient(a) if "a" in stops else a
        b = function_of([a])
        b = tf.stop_gradient(b) if "b" in stops else b
        c = function_of([a, b])
        c = tf.stop_gradient(c) if "c" in stops else c
        d = function_of([b, c])
        d = tf.stop_gradient(d) if "d" in stops else d
        return dict(a=a, b=b, c=c, d=d)

    def grads(ys, xs, **kw):
        return [0.0 * x if g is None else g for x, g in zip(xs, tf.gradients(ys, xs, **kw))]

    subsets = ["a", "b", "c", "ab", "bc", "ac", "abc", "abcd"]
    graph = make(np.random.RandomState(7))
    cases = []
    for stops in [""] + subsets:
        stopped = make(np.random.RandomState(7), stops)
        for xs in subsets:
            cases.append((grads([stopped["d"]], [stopped[v] for v in xs]),
                          grads([graph["d"]], [graph[v] for v in xs],
                                stop_gradients=[graph[v] for v in stops])))
    results = sess.run(cases)   # every case in one run, as TF's test
    nonzero = 0
    for by_op, by_kwarg in results:
        for p, q in zip(by_op, by_kwarg):
            np.testing.assert_allclose(p, q, rtol=1e-12)
            nonzero += bool(np.any(p))
    assert nonzero > 20


def test_grad_ys_lists_and_unconnected_xs(sess):
    x = tf.placeholder(tf.float64, [3])
    w = tf.placeholder(tf.float64, [3])
    y1 = x * x
    y2 = tf.reduce_sum(x * w)
    xv, wv = np.array([1.0, -2.0, 0.5]), np.array([3.0, 1.0, 2.0])
    feed = {x: xv, w: wv}
    # The gradient of sum(ys): 2x + w; with grad_ys, each y weighted (None: ones).
    g, = tf.gradients([y1, y2], x)
    np.testing.assert_allclose(sess.run(g, feed), 2 * xv + wv)
    gy = tf.constant([1.0, 10.0, 100.0], tf.float64)
    g, = tf.gradients([y1, y2], x, grad_ys=[gy, None])
    np.testing.assert_allclose(sess.run(g, feed), 2 * xv * [1, 10, 100] + wv)
    g, = tf.gradients(y1, x, grad_ys=2.0)   # a constant broadcast to y's shape
    np.testing.assert_allclose(sess.run(g, feed), 4 * xv)
    # An x the ys do not read, one read only through an integer tensor, one only through
    # stop_gradient: None (TF: integer tensors are constant with respect to all xs).
    other = tf.placeholder(tf.float64, [3])
    through_int = tf.cast(tf.cast(other, tf.int32), tf.float64)
    y3 = tf.reduce_sum(y1 + through_int + tf.stop_gradient(w))
    assert tf.gradients(y3, [other, w]) == [None, None]
    gx, go = tf.gradients(y3, [x, other], unconnected_gradients="zero")
    got = sess.run([gx, go], {x: xv, w: wv, other: xv})
    np.testing.assert_allclose(got[0], 2 * xv)
    assert got[1].tolist() == [0, 0, 0]
    # TF's _DefaultGradYs checks.
    with pytest.raises(ValueError, match="Passed 2 grad_ys for 1 ys"):
        tf.gradients(y1, x, grad_ys=[gy, gy])
    with pytest.raises(TypeError, match="Gradient type bool generated for real or "
                                        "integer-valued tensor .* must be real or integer"):
        tf.gradients(y1, x, grad_ys=[tf.constant([True, False, True])])
    bad = tf.gradients(y1, x, grad_ys=tf.constant([1.0, 2.0], tf.float64))[0]
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"grad_ys\[0\] has shape \[2\], which does not broadcast to "
                             r"the shape \[3\] of ys\[0\]"):
        sess.run(bad, feed)
    with pytest.raises(NotImplementedError, match="second derivatives"):
        tf.gradients(tf.gradients(y2, x)[0], x)


def test_gradients_of_a_model_against_central_differences(sess):
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(4, 3))
    wv = rng.normal(size=(3, 2))
    W = tf.Variable(wv, name="W")
    x = tf.placeholder(tf.float64, [None, 3])
    h = tf.tanh(tf.matmul(x, W))
    loss = tf.reduce_mean(tf.square(h - 0.3)) + tf.reduce_sum(W * W) * 0.01
    gW, gx = tf.gradients(loss, [W, x])
    sess.run(tf.global_variables_initializer())
    got_w, got_x = sess.run([gW, gx], {x: xv})

    def f(xa, wa):
        return np.mean((np.tanh(xa @ wa) - 0.3) ** 2) + 0.01 * np.sum(wa * wa)
    np.testing.assert_allclose(got_w, numeric_grad(lambda a: f(xv, a), wv), rtol=1e-6,
                               atol=1e-9)
    np.testing.assert_allclose(got_x, numeric_grad(lambda a: f(a, wv), xv), rtol=1e-6,
                               atol=1e-9)


# ---- embedding lookups: row-sparse gradients ------------------------------------------------

def _emb_loss(rows):
    return tf.reduce_sum(tf.square(tf.tanh(rows)) * tf.constant([1.0, 2.0, 3.0], tf.float64))


def _emb_loss_np(rows):
    return np.sum(np.tanh(rows) ** 2 * [1.0, 2.0, 3.0])


def test_embedding_lookup_gradient_is_tfs_indexed_slices(sess):
    table = np.random.default_rng(1).normal(size=(6, 3))
    emb = tf.Variable(table, name="emb")
    ids = tf.placeholder(tf.int32, [None, 2])
    rows = tf.nn.embedding_lookup(emb, ids)
    loss = _emb_loss(rows)
    # The crash: the gradient with respect to the lookup's output tensor.
    g_rows, = tf.gradients(loss, rows)
    g, = tf.gradients(loss, emb)
    assert isinstance(g, tf.IndexedSlices)
    assert g.values.dtype == np.float64 and g.indices.dtype == np.int32
    assert g.values.shape.as_list() == [None, 3]
    g_dense = tf.convert_to_tensor(g)
    assert g_dense.shape.as_list() == [6, 3]
    sess.run(tf.global_variables_initializer())
    idv = np.array([[4, 1], [4, 0]], np.int32)
    got, got_rows, got_dense = sess.run([g, g_rows, g_dense], {ids: idv})
    assert isinstance(got, tf.IndexedSlicesValue)
    # _GatherGrad: one row per id, in ids order, duplicates not summed; int32 dense_shape.
    assert got.indices.tolist() == [4, 1, 4, 0] and got.indices.dtype == np.int32
    np.testing.assert_allclose(got.values, got_rows.reshape(4, 3))
    assert got.dense_shape.tolist() == [6, 3] and got.dense_shape.dtype == np.int32
    want = numeric_grad(lambda t: _emb_loss_np(t[idv]), table)
    np.testing.assert_allclose(got_dense, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dense(got), want, rtol=1e-6, atol=1e-9)
    assert not got_dense[[2, 3, 5]].any()
    # Read whole too: TF's aggregation of a dense and a sparse gradient is an IndexedSlices
    # of every row (the dense one, _as_indexed_slices) and the lookup's rows, concatenated.
    both, = tf.gradients(loss + tf.reduce_sum(emb * emb), emb)
    got = sess.run(both, {ids: idv})
    assert got.indices.tolist() == [0, 1, 2, 3, 4, 5, 4, 1, 4, 0]
    np.testing.assert_allclose(dense(got), want + 2 * table, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_partitioned_lookup_gradients_per_part_and_whole(sess, strategy):
    table = np.random.default_rng(2).normal(size=(7, 3))
    pv = tf.get_variable("pemb", initializer=table, dtype=tf.float64,
                         partitioner=tf.fixed_size_partitioner(3))
    off = pv.offsets                     # [0, 3, 5, 7]
    ids = tf.placeholder(tf.int64, [None])
    loss = _emb_loss(tf.nn.embedding_lookup(pv, ids, partition_strategy=strategy))
    parts = list(pv)
    g_parts = tf.gradients(loss, parts)
    g_whole, = tf.gradients(loss, pv)
    sess.run(tf.global_variables_initializer())
    idv = np.array([6, 0, 3, 6, 2])
    got_parts, got_whole = sess.run([g_parts, g_whole], {ids: idv})

    def lookup(t):   # the rows TF's strategy gives the ids (mod: part i % 3, row i // 3)
        if strategy == "div":
            return t[idv]
        pieces = [t[off[k]:off[k + 1]] for k in range(3)]
        return np.stack([pieces[i % 3][i // 3] for i in idv])
    want = numeric_grad(lambda t: _emb_loss_np(lookup(t)), table)
    for k, gp in enumerate(got_parts):
        assert gp.dense_shape.tolist() == [off[k + 1] - off[k], 3]
        assert gp.indices.dtype == np.int64
        np.testing.assert_allclose(dense(gp), want[off[k]:off[k + 1]], rtol=1e-6, atol=1e-9)
    if strategy == "mod":   # TF's dynamic_partition order: part 0 gets ids 6, 0, 3, 6
        assert got_parts[0].indices.tolist() == [2, 0, 1, 2]
    else:                   # div: part 0 rows 0-2 (ids 0, 2), part 2 rows 5-6 (id 6 twice)
        assert got_parts[0].indices.tolist() == [0, 2]
        assert got_parts[2].indices.tolist() == [1, 1]
    np.testing.assert_allclose(dense(got_whole), want, rtol=1e-6, atol=1e-9)


def test_embedding_lookup_sparse_and_max_norm_gradients(sess):
    table = np.random.default_rng(3).normal(size=(5, 3)) * 2
    emb = tf.Variable(table, name="emb_sp")
    sp_ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 0], [2, 1]], [1, 3, 3, 0, 1], [3, 2])
    wts = np.array([0.5, 2.0, 1.0, 1.5, 0.25])
    sp_w = tf.SparseTensor(sp_ids.indices, wts, [3, 2])
    comb = tf.nn.embedding_lookup_sparse(emb, sp_ids, sp_w, combiner="mean")
    clipped = tf.nn.embedding_lookup(emb, [4, 1, 4], max_norm=1.5)
    g_sp = tf.convert_to_tensor(tf.gradients(_emb_loss(comb), emb)[0])
    g_clip = tf.convert_to_tensor(tf.gradients(_emb_loss(clipped), emb)[0])
    sess.run(tf.global_variables_initializer())
    got_sp, got_clip = sess.run([g_sp, g_clip])
    ids_v = np.array([1, 3, 3, 0, 1])
    seg = np.array([0, 0, 1, 2, 2])

    def combine(t):
        out = np.zeros((3, 3))
        np.add.at(out, seg, t[ids_v] * wts[:, None])
        return out / np.bincount(seg, weights=wts)[:, None]

    def clip(t):
        r = t[[4, 1, 4]]
        n = np.sqrt(np.sum(r * r, axis=1, keepdims=True))
        return r * 1.5 / np.maximum(n, 1.5)
    np.testing.assert_allclose(got_sp, numeric_grad(lambda t: _emb_loss_np(combine(t)), table),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got_clip, numeric_grad(lambda t: _emb_loss_np(clip(t)), table),
                               rtol=1e-6, atol=1e-9)


# ---- one forward pass per run ------------------------------------------------------------------

def test_one_forward_per_run_and_shared_random_draws(sess):
    calls = []

    def scaled(a):
        calls.append(1)
        return a * 3.0

    x = tf.placeholder(tf.float64, [None, 8])
    h = tf.py_func(scaled, [x], tf.float64)
    d = tf.nn.dropout(h, rate=0.5, seed=3)
    u = tf.random_uniform([2, 8], dtype=tf.float64, seed=4)
    loss = tf.reduce_sum(d * d) + tf.reduce_sum(x * u)
    g, = tf.gradients(loss, x)
    g2, = tf.gradients(loss, [x])   # a second backward op of the same loss
    xv = np.ones((2, 8))
    for fetches in ([d, u, g], [d, u, g, g2, loss]):
        calls.clear()
        out = sess.run(fetches, {x: xv})
        assert len(calls) == 1            # the forward pass ran once for every fetch
        dv, uv, gv = out[:3]
        kept = dv != 0
        assert 0 < kept.sum() < 16
        # d = 3x * mask * 2: d(sum d^2)/dx = 2 d * 6 on kept elements; d(x * u)/dx = u,
        # with the very mask and draw this run fetched.
        np.testing.assert_allclose(gv, 12 * dv * kept + uv)
        if len(out) > 3:
            np.testing.assert_allclose(out[3], gv)
            assert out[4] == pytest.approx(np.sum(dv * dv) + np.sum(xv * uv))
    calls.clear()
    a, b = sess.run(g, {x: xv}), sess.run(g, {x: xv})
    assert len(calls) == 2 and not np.array_equal(a, b)   # a new draw per run


def test_compute_gradients_fetched_with_the_loss_and_the_train_op(sess):
    calls = []

    def scaled(a):
        calls.append(1)
        return a * 2.0

    wv = np.array([[1.0, -1.0], [0.5, 2.0]])
    W = tf.Variable(wv, name="Wc")
    emb = tf.Variable(np.arange(8.0).reshape(4, 2) / 4, name="embc")
    x = tf.placeholder(tf.float64, [None, 2])
    ids = tf.placeholder(tf.int64, [None])
    h = tf.py_func(scaled, [tf.matmul(x, W)], tf.float64) + tf.nn.embedding_lookup(emb, ids)
    loss = tf.reduce_sum(tf.square(h))
    opt = tf.train.GradientDescentOptimizer(0.1)
    gv = opt.compute_gradients(loss, [W, emb])
    assert isinstance(gv[1][0], tf.IndexedSlices)
    grads = [g for g, _ in gv]
    # apply_gradients of the unchanged pairs trains from the loss's own backward pass.
    train = opt.apply_gradients(gv)
    sess.run(tf.global_variables_initializer())
    xv, idv = np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([3, 3])
    feed = {x: xv, ids: idv}
    calls.clear()
    lv, gW, gE = sess.run([loss, *grads], feed)
    assert len(calls) == 1
    table = np.arange(8.0).reshape(4, 2) / 4
    hv = 2 * xv @ wv + table[idv]
    assert lv == pytest.approx(np.sum(hv * hv))
    np.testing.assert_allclose(gW, 2 * xv.T @ (2 * hv))
    assert gE.indices.tolist() == [3, 3]
    np.testing.assert_allclose(gE.values, 2 * hv)
    # The gradients fetched with the train op are the ones it applied (before its push),
    # from the same forward pass.
    calls.clear()
    _, l2, gW2, gE2 = sess.run([train, loss, *grads], feed)
    assert len(calls) == 1
    assert l2 == pytest.approx(lv)
    np.testing.assert_allclose(gW2, gW)
    np.testing.assert_allclose(gE2.values, gE.values)
    np.testing.assert_allclose(sess.run(W), wv - 0.1 * gW)
    np.testing.assert_allclose(sess.run(emb), table - 0.1 * dense(gE))


# ---- on a ps task ------------------------------------------------------------------------------

def test_gradients_of_lookups_on_ps_tasks_and_clipped_sparse_updates(shared_ps2, worker,
                                                                     prefix):
    server = worker(shared_ps2)
    table = np.random.default_rng(4).normal(size=(9, 3))
    with tf.device(tf.train.replica_device_setter(cluster=server.server_def_cluster)):
        emb = tf.get_variable(f"{prefix}/emb", initializer=table, dtype=tf.float64,
                              partitioner=tf.fixed_size_partitioner(2))
        bias = tf.Variable(np.zeros(3), name=f"{prefix}/bias")
    assert {p.device for p in emb} == {"/job:ps/task:0", "/job:ps/task:1"}
    ids = tf.placeholder(tf.int64, [None])
    rows = tf.nn.embedding_lookup(emb, ids) + bias
    loss = _emb_loss(rows)
    g_emb, g_bias = tf.gradients(loss, [emb, bias])
    g_rows, = tf.gradients(loss, rows)
    clipped, norm = tf.clip_by_global_norm([g_emb, g_bias], 0.5)
    assert isinstance(clipped[0], tf.IndexedSlices)
    train = tf.train.GradientDescentOptimizer(1.0).apply_gradients(
        zip(clipped, [emb, bias]))
    idv = np.array([8, 1, 8, 4])
    with tf.Session(server.target) as sess:
        sess.run(tf.global_variables_initializer())
        ge, gb, gr, nv = sess.run([g_emb, g_bias, g_rows, norm], {ids: idv})
        whole = idv % 2 * 5 + idv // 2    # "mod": part i % 2 (rows 0-4, 5-8), row i // 2
        # The whole variable's IndexedSlices: each part's rows (in ids order) at their rows.
        assert ge.values.shape == (4, 3) and sorted(ge.indices.tolist()) == sorted(whole)
        by_id = np.zeros((9, 3))
        np.add.at(by_id, whole, gr)
        np.testing.assert_allclose(dense(ge), by_id)
        want = numeric_grad(lambda r: _emb_loss_np(r), table[whole])
        np.testing.assert_allclose(gr, want, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(gb, want.sum(axis=0), rtol=1e-6, atol=1e-9)
        # TF's global norm counts an IndexedSlices by its values (repeated ids separately).
        assert nv == pytest.approx(np.sqrt(np.sum(gr ** 2) + np.sum(gb ** 2)))
        before = sess.run(emb)
        sess.run(train, {ids: idv})
        scale = min(1.0, 0.5 / nv)
        expect = before.copy()
        np.add.at(expect, ge.indices, -scale * ge.values)
        np.testing.assert_allclose(sess.run(emb), expect, rtol=1e-12)
        np.testing.assert_allclose(sess.run(bias), -scale * gb, rtol=1e-12)
