"""tf.metrics' means (psrt/ops/metrics_impl.py) and local variables: values against TF r1.15's
own tests (tensorflow/python/kernel_tests/metrics_test.py: MeanTest, MeanTensorTest,
AccuracyTest, MeanAbsoluteErrorTest, MeanRelativeErrorTest, MeanSquaredErrorTest,
RootMeanSquaredErrorTest, MeanCosineDistanceTest, PcntBelowThreshTest), a metric updated over
several sess.run calls, TF's weight rules (weights_broadcast_ops), the accumulators' names
and collections as TF's metric_variable (LOCAL_VARIABLES + METRIC_VARIABLES, not global, not
trainable, not saved), local_variables_initializer resetting them, MonitoredTrainingSession's
local_init_op, and assign ops of tensors computed in the run (what the update ops are)."""

from __future__ import annotations

import numpy as np
import pytest

import psrt as tf


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


MEAN_VALUES = np.array([[0, 1], [-4.2, 9.1], [6.5, 0], [-3.2, 4.0]], np.float32)


def _batches(sess, update_op, ph, values, extra=None):
    out = []
    for i in range(len(values)):
        feed = {ph: values[i:i + 1]}
        if extra is not None:
            feed[extra[0]] = extra[1][i:i + 1]
        out.append(sess.run(update_op, feed))
    return out


def test_mean_variables_and_collections(sess):
    # MeanTest.testVars / testMetricsCollection / testUpdatesCollection
    mean, update = tf.metrics.mean(tf.ones([4, 3]), metrics_collections=["my_metrics"],
                                   updates_collections=["my_updates"])
    assert [v.name for v in tf.local_variables()] == ["mean/total", "mean/count"]
    assert tf.get_collection(tf.GraphKeys.METRIC_VARIABLES) == tf.local_variables()
    assert tf.global_variables() == [] and tf.trainable_variables() == []
    assert tf.get_collection("my_metrics") == [mean]
    assert tf.get_collection("my_updates") == [update]
    tf.metrics.mean(tf.ones([4, 3]))
    assert [v.name for v in tf.local_variables()][2:] == ["mean_1/total", "mean_1/count"]


def test_mean_over_several_runs_tf_values(sess):
    # MeanTest.testBasic and testUpdateOpsReturnsCurrentValue: 0.5, 1.475, 12.4/6, 1.65
    values = tf.placeholder(tf.float32, [None, 2])
    mean, update = tf.metrics.mean(values)
    sess.run(tf.local_variables_initializer())
    got = _batches(sess, update, values, MEAN_VALUES)
    np.testing.assert_allclose(got, [0.5, 1.475, 12.4 / 6.0, 1.65], rtol=1e-5)
    assert sess.run(mean) == pytest.approx(1.65, rel=1e-5)
    assert sess.run(mean) == pytest.approx(1.65, rel=1e-5)     # reading does not add
    sess.run(tf.local_variables_initializer())                 # a reset, as TF's
    assert sess.run(mean) == 0.0


@pytest.mark.parametrize("weights,expected", [
    (np.array([[1], [0], [0], [1]], np.float32), (0 + 1 - 3.2 + 4.0) / 4.0),   # testWeighted1d
    (np.array([[1, 0], [1, 0], [0, 1], [0, 0]], np.float32), (0 - 4.2 + 0) / 3.0)])  # 2d
def test_mean_weighted_tf_values(sess, weights, expected):
    values = tf.placeholder(tf.float32, [None, 2])
    w = tf.placeholder(tf.float32, [None, weights.shape[1]])
    mean, update = tf.metrics.mean(values, w)
    sess.run(tf.local_variables_initializer())
    _batches(sess, update, values, MEAN_VALUES, (w, weights))
    assert sess.run(mean) == pytest.approx(expected, rel=1e-5)


def test_accuracy_over_several_runs(sess):
    labels = tf.placeholder(tf.int64, [None])
    predictions = tf.placeholder(tf.int64, [None])
    acc, update = tf.metrics.accuracy(labels, predictions)
    assert [v.name for v in tf.local_variables()] == ["accuracy/total", "accuracy/count"]
    sess.run(tf.local_variables_initializer())
    assert sess.run(update, {labels: [1, 2, 3, 4], predictions: [1, 2, 0, 0]}) == 0.5
    assert sess.run(update, {labels: [1, 2], predictions: [1, 2]}) == pytest.approx(4 / 6)
    assert sess.run(update, {labels: [5, 5, 5, 5], predictions: [0, 0, 0, 5]}) == \
        pytest.approx(5 / 10)
    assert sess.run(acc) == pytest.approx(0.5)


def test_accuracy_tf_squeezable_sizes_and_weights(sess):
    # AccuracyTest.testEffectivelyEquivalentSizes(WithScalarWeight, WithStaticShapedWeight)
    p = tf.ones((40, 1))
    lab = tf.ones((40,))
    a1, u1 = tf.metrics.accuracy(lab, p)
    a2, u2 = tf.metrics.accuracy(lab, p, weights=2.0)
    a3, u3 = tf.metrics.accuracy(tf.expand_dims(tf.constant([1, 0, 0]), 1),
                                 tf.constant([1, 1, 1]),
                                 weights=tf.expand_dims(tf.constant([100, 1, 1]), 1))
    sess.run(tf.local_variables_initializer())
    assert sess.run([u1, u2, u3]) == pytest.approx([1.0, 1.0, 100 / 102], rel=1e-5)
    assert sess.run([a1, a2, a3]) == pytest.approx([1.0, 1.0, 100 / 102], rel=1e-5)
    with pytest.raises(ValueError, match="incompatible"):
        tf.metrics.accuracy(tf.ones((4, 3)), tf.ones((4, 2)))


def _test_values(shape):
    return np.reshape(np.cumsum(np.ones(shape)), shape).astype(np.float32)


def test_mean_weights_broadcast_as_tf(sess):
    # MeanTest.testUnweighted: every weight shape TF broadcasts (a rank lower gets a trailing
    # 1, a rank higher loses its trailing 1); MeanTest.test1xNxNWeighted, testNx1x1Weighted.
    values = _test_values((3, 2, 4, 1))
    shapes = [(), (1, 1, 1), (1, 1, 1, 1, 1), (1, 1, 4), (1, 2, 1, 1), (3, 2, 4), (3, 2, 4, 1),
              (3, 2, 4, 1, 1)]
    results = [tf.metrics.mean(values, weights=np.ones(s, np.float32)) for s in shapes]
    v3 = _test_values((3, 2, 4))
    w1 = np.asarray((5, 7, 11, 3, 2, 13, 7, 5), np.float32).reshape((1, 2, 4))
    w2 = np.asarray((5, 7, 11), np.float32).reshape((3, 1, 1))
    weighted = [tf.metrics.mean(v3, weights=w) for w in (w1, w2)]
    sess.run(tf.local_variables_initializer())
    for m, u in results:
        assert sess.run(u) == pytest.approx(np.mean(values))
        assert sess.run(m) == pytest.approx(np.mean(values))
    for (m, u), w in zip(weighted, (w1, w2)):
        expected = np.sum(w * v3) / np.sum(w * np.ones_like(v3))
        assert sess.run(u) == pytest.approx(expected, rel=1e-6)


def test_mean_invalid_weights_static_and_dynamic(sess):
    # MeanTest.testInvalidWeights: ValueError at build, OpError at run, TF's message.
    values = _test_values((3, 2, 4, 1))
    for bad in [(1,), (1, 1), (3, 2), (2, 4, 1), (4, 2, 4, 1), (3, 3, 4, 1), (3, 2, 5, 1),
                (3, 2, 4, 2), (1, 1, 1, 1, 1)]:       # TF's: each tuple is the weights' value
        with pytest.raises(ValueError, match="weights can not be broadcast to values"):
            tf.metrics.mean(values, np.asarray(bad, np.float32))
    ph = tf.placeholder(tf.float32)
    _, update = tf.metrics.mean(ph, np.ones((3, 3, 4, 1), np.float32))
    sess.run(tf.local_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"weights can not be broadcast to values\. values.rank=4"):
        sess.run(update, {ph: values})


def test_mean_tensor_tf_values(sess):
    # MeanTensorTest.testVars, testUpdateOpsReturnsCurrentValue, testBinaryWeighted1d,
    # testWeighted1d, testWeighted2d_1, testWeighted2d_2, testMultiDimensional
    values = tf.placeholder(tf.float32, [1, 2])
    weights = tf.placeholder(tf.float32, [1, None])
    mean, update = tf.metrics.mean_tensor(values)
    assert [v.name for v in tf.local_variables()] == ["mean/total_tensor", "mean/count_tensor"]
    cases = [(np.array([[1], [0], [1], [0]], np.float32), [[3.25, 0.5]]),
             # TF's testWeighted1d expects [[0.8, 3.52]] under assertAllClose(..., 5), i.e.
             # rtol=5; the weighted mean of [1, 9.1, 0, 4] is 0.078 / 0.025 = 3.12.
             (np.array([[0.0025], [0.005], [0.01], [0.0075]], np.float32), [[0.8, 3.12]]),
             (np.array([[1, 1], [1, 0], [0, 1], [0, 0]], np.float32), [[-2.1, 0.5]]),
             (np.array([[0, 1], [0, 0], [0, 1], [0, 0]], np.float32), [[0, 0.5]])]
    weighted = [tf.metrics.mean_tensor(values, weights) for _ in cases]
    sess.run(tf.local_variables_initializer())
    got = [sess.run(update, {values: MEAN_VALUES[i:i + 1]}) for i in range(4)]
    np.testing.assert_allclose(np.concatenate(got), [[0, 1], [-2.1, 5.05],
                                                     [2.3 / 3., 10.1 / 3.],
                                                     [-0.9 / 4., 3.525]], rtol=1e-5)
    np.testing.assert_allclose(sess.run(mean), [[-0.9 / 4., 3.525]], rtol=1e-5)
    for (m, u), (w, expected) in zip(weighted, cases):
        for i in range(4):
            sess.run(u, {values: MEAN_VALUES[i:i + 1], weights: w[i:i + 1]})
        np.testing.assert_allclose(sess.run(m), expected, rtol=1e-5, atol=1e-7)
    m3, u3 = tf.metrics.mean_tensor(tf.placeholder(tf.float32, [2, 2, 2], name="v3"))
    sess.run(tf.local_variables_initializer())
    for val in ([[[1, 2], [1, 2]], [[1, 2], [1, 2]]], [[[1, 2], [1, 2]], [[3, 4], [9, 10]]]):
        sess.run(u3, {"v3:0": val})
    np.testing.assert_allclose(sess.run(m3), [[[1, 2], [1, 2]], [[2, 3], [5, 6]]])
    with pytest.raises(ValueError, match="fully defined static shape"):
        tf.metrics.mean_tensor(tf.placeholder(tf.float32, [None, 2]))


def test_regression_errors_tf_values(sess):
    # MeanAbsoluteErrorTest / MeanSquaredErrorTest / RootMeanSquaredErrorTest:
    # testSingleUpdateWithErrorAndWeights (3, 13, sqrt(13)), testSingleUpdateWithError (6,
    # sqrt(6)); MeanRelativeErrorTest.testSingleUpdateNormalizedByLabels / ByZeros; testVars
    p4 = tf.constant([2, 4, 6, 8], shape=(1, 4), dtype=tf.float32)
    l4 = tf.constant([1, 3, 2, 3], shape=(1, 4), dtype=tf.float32)
    w4 = tf.constant([0, 1, 0, 1], shape=(1, 4))
    p3 = tf.constant([2, 4, 6], shape=(1, 3), dtype=tf.float32)
    l3 = tf.constant([1, 3, 2], shape=(1, 3), dtype=tf.float32)
    ops = [tf.metrics.mean_absolute_error(l4, p4, w4),
           tf.metrics.mean_squared_error(l4, p4, w4),
           tf.metrics.root_mean_squared_error(l4, p4, w4),
           tf.metrics.mean_squared_error(l3, p3),
           tf.metrics.root_mean_squared_error(l3, p3),
           tf.metrics.mean_relative_error(l4, p4, normalizer=l4),
           tf.metrics.mean_relative_error(l4, p4, normalizer=tf.zeros_like(l4))]
    assert [v.name for v in tf.local_variables()][:6] == [
        "mean_absolute_error/total", "mean_absolute_error/count", "mean_squared_error/total",
        "mean_squared_error/count", "root_mean_squared_error/total",
        "root_mean_squared_error/count"]
    assert tf.local_variables()[10].name == "mean_relative_error/total"
    rel = np.mean(np.abs(np.array([2, 4, 6, 8.]) - [1, 3, 2, 3]) / [1, 3, 2, 3])
    expected = [3, 13, np.sqrt(13), 6, np.sqrt(6), rel, 0.0]
    sess.run(tf.local_variables_initializer())
    np.testing.assert_allclose(sess.run([u for _, u in ops]), expected, rtol=1e-6)
    np.testing.assert_allclose(sess.run([v for v, _ in ops]), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="incompatible"):
        tf.metrics.mean_squared_error(tf.ones((10, 3)), tf.ones((10, 4)))


def test_squared_and_absolute_errors_over_batches(sess):
    # MeanSquaredErrorTest.testMultipleBatchesOfSizeOne, testMetricsComputedConcurrently,
    # testMultipleMetricsOnMultipleBatchesOfSizeOne: 208/6, 79/6, mae 32/6
    preds0, labels0 = [[10, 8, 6], [-4, 3, -1]], [[1, 3, 2], [2, 4, 6]]
    preds1, labels1 = [[0, 1, 1], [1, 1, 0]], [[-5, -3, -1], [5, 4, 3]]
    p0, l0, p1, l1 = (tf.placeholder(tf.float32, [1, 3]) for _ in range(4))
    mse0, up0 = tf.metrics.mean_squared_error(l0, p0, name="msd0")
    mse1, up1 = tf.metrics.mean_squared_error(l1, p1, name="msd1")
    mae, up_mae = tf.metrics.mean_absolute_error(l0, p0)
    assert tf.local_variables()[0].name == "msd0/total"
    sess.run(tf.local_variables_initializer())
    for i in range(2):
        sess.run([up0, up1, up_mae], {p0: preds0[i:i + 1], l0: labels0[i:i + 1],
                                      p1: preds1[i:i + 1], l1: labels1[i:i + 1]})
    np.testing.assert_allclose(sess.run([mse0, mse1, mae]), [208 / 6, 79 / 6, 32 / 6],
                               rtol=1e-6)


@pytest.mark.parametrize("preds,shape,weights,expected", [
    ("1 0 0;0 0 1;0 1 0", (1, 3, 3), None, 0.0),                 # testSingleUpdateZeroError
    ("1 0 0;0 0 -1;1 0 0", (3, 1, 3), None, 1.0),                # testSingleUpdateWithError1
    ("1 0 0;0 0 -1;1 0 0", (3, 1, 3), [1, 0, 0], 0.0),     # testSingleUpdateWithErrorAndWeights1
    ("1 0 0;0 0 -1;1 0 0", (3, 1, 3), [0, 1, 1], 1.5)])    # testSingleUpdateWithErrorAndWeights2
def test_mean_cosine_distance_tf_values(sess, preds, shape, weights, expected):
    labels = np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]], np.float32).reshape(shape)
    p = np.array([[float(x) for x in row.split()] for row in preds.split(";")],
                 np.float32).reshape(shape)
    w = None if weights is None else np.array(weights, np.float32).reshape(3, 1, 1)
    dist, update = tf.metrics.mean_cosine_distance(labels, p, dim=2, weights=w)
    assert [v.name for v in tf.local_variables()] == ["mean_cosine_distance/total",
                                                     "mean_cosine_distance/count"]
    sess.run(tf.local_variables_initializer())
    assert sess.run(update) == pytest.approx(expected, abs=1e-6)
    assert sess.run(dist) == pytest.approx(expected, abs=1e-6)


def test_mean_cosine_distance_unit_vectors_tf_value(sess):
    # MeanCosineDistanceTest.testSingleUpdateWithError2: opposite and orthogonal vectors
    p = np.array([[0.819031913261206, 0.567041924552012, 0.087465312324590],
                  [-0.665139432070255, -0.739487441769973, -0.103671883216994],
                  [0.707106781186548, -0.707106781186548, 0]], np.float32).reshape(3, 1, 3)
    lab = np.abs(p)
    dist, update = tf.metrics.mean_cosine_distance(lab, p, dim=2)
    sess.run(tf.local_variables_initializer())
    assert sess.run(update) == pytest.approx(1.0, abs=1e-5)


def test_percentage_below_tf_values(sess):
    # PcntBelowThreshTest.testVars, testOneUpdate, testSomePresentOneUpdate
    values = tf.constant([2, 4, 6, 8], shape=(1, 4), dtype=tf.float32)
    weights = tf.constant([1, 0, 0, 1], shape=(1, 4), dtype=tf.float32)
    plain = [tf.metrics.percentage_below(values, t, name=n)
             for t, n in ((100, "high"), (7, "medium"), (1, "low"))]
    weighted = [tf.metrics.percentage_below(values, t, weights=weights)
                for t in (100, 7, 1)]
    assert tf.local_variables()[6].name == "percentage_below_threshold/total"
    sess.run(tf.local_variables_initializer())
    sess.run([u for _, u in plain])
    np.testing.assert_allclose(sess.run([v for v, _ in plain]), [1.0, 0.75, 0.0])
    assert sess.run([u for _, u in weighted]) == [1.0, 0.5, 0.0]


def test_local_variables_not_saved_not_global():
    tf.reset_default_graph()
    w = tf.get_variable("w", [2])
    tf.metrics.mean(tf.constant([1.0, 2.0]))
    assert tf.global_variables() == [w]
    saver = tf.train.Saver()
    saver.build()
    assert [name for name, _ in saver._pairs] == ["w"]
    own = tf.Variable(np.zeros(2, np.float32), collections=[tf.GraphKeys.LOCAL_VARIABLES],
                      name="mine")
    assert own in tf.local_variables() and own not in tf.global_variables()


def test_assign_of_tensors_computed_in_the_run(sess):
    v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")
    x = tf.placeholder(tf.float32, [2])
    add = v.assign_add(x * 2.0)
    sub = tf.assign_sub(v, v * 0.5)            # reads v when it runs
    put = tf.assign(v, tf.reduce_sum(x) + v)   # broadcast of a scalar tensor
    sess.run(tf.global_variables_initializer())
    assert sess.run(add, {x: [1.0, 1.0]}) is None
    np.testing.assert_allclose(sess.run(v), [3.0, 4.0])
    sess.run(sub)
    np.testing.assert_allclose(sess.run(v), [1.5, 2.0])
    sess.run(put, {x: [1.0, 2.0]})
    np.testing.assert_allclose(sess.run(v), [4.5, 5.0])
    with tf.control_dependencies([v.assign_add(np.ones(2, np.float32))]):
        after = tf.identity(v)
    np.testing.assert_allclose(sess.run(after), [5.5, 6.0])   # the read follows the add
    with pytest.raises(TypeError, match="needs a psrt.Variable"):
        tf.assign(x, 1.0)


def test_monitored_training_session_runs_local_init_op():
    tf.reset_default_graph()
    gs = tf.train.get_or_create_global_step()
    values = tf.placeholder(tf.float32, [None])
    mean, update = tf.metrics.mean(values)
    with tf.train.MonitoredTrainingSession(master="") as mon:
        assert mon.run(mean) == 0.0          # initialized by the scaffold's local_init_op
        mon.run(update, {values: [1.0, 2.0]})
        mon.run(update, {values: [6.0]})
        assert mon.run(mean) == pytest.approx(3.0)
    assert gs is not None
