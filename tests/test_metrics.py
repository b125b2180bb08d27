"""tf.metrics (psrt/ops/metrics_impl.py) and local variables: values against TF r1.15's own
tests (tensorflow/python/kernel_tests/metrics_test.py: MeanTest, AccuracyTest, AUCTest), a
metric updated over several sess.run calls, the accumulators' names and collections as TF's
metric_variable (LOCAL_VARIABLES + METRIC_VARIABLES, not global, not trainable, not saved),
local_variables_initializer resetting them, MonitoredTrainingSession's local_init_op, and
assign ops of tensors computed in the run (what the update ops are)."""

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


@pytest.mark.parametrize("preds,labels,weights,curve,expected", [
    ([1, 0, 1, 0], [0, 1, 1, 0], None, "ROC", 0.5),              # testSomeCorrect
    ([1, 0, 1, 0], [0, 1, 1, 0], [2.0], "ROC", 0.5),             # testWeighted1d
    ([1, 0, 1, 0], [0, 1, 1, 0], [1.0, 2.0, 3.0, 4.0], "ROC", 0.7),   # testWeighted2d
    ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], None, "PR", 0.79166),      # testAUCPRSpecialCase
    ([0.1, 0.4, 0.35, 0.8, 0.1, 0.135, 0.81], [0, 0, 1, 0, 1, 0, 1], None, "PR", 0.610317),
    ([0.0, 0.1, 0.2, 0.33, 0.3, 0.4, 0.5], [0, 0, 0, 0, 1, 1, 1], None, "PR", 0.90277),
    ([0, 0, 0, 0], [0, 0, 0, 0], None, "ROC", 1.0),  # testZeroTruePositivesAndFalseNegatives
    ([1, 1, 1, 1], [1, 1, 1, 1], None, "PR", 1.0),   # testRecallOneAndPrecisionOneGivesOne
    ([1, 0, 1, 0], [1, 0, 1, 0], None, "ROC", 1.0),  # testAllCorrect
    ([1, 0, 1, 0], [0, 1, 0, 1], None, "ROC", 0.0)])  # testAllIncorrect
def test_auc_tf_values(sess, preds, labels, weights, curve, expected):
    w = None if weights is None else tf.constant(weights, tf.float32)
    value, update = tf.metrics.auc(tf.constant(labels), tf.constant(preds, tf.float32), w,
                                   curve=curve)
    sess.run(tf.local_variables_initializer())
    assert sess.run(update) == pytest.approx(expected, abs=1e-3)
    assert sess.run(value) == pytest.approx(expected, abs=1e-3)


def _np_auc(labels, preds, n=200):
    th = np.array([-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + 1e-7],
                  np.float32)
    pos = preds[None, :] > th[:, None]
    tp = (pos & labels).sum(1).astype(np.float64)
    fp = (pos & ~labels).sum(1)
    fn = labels.sum() - tp
    tn = (~labels).sum() - fp
    rec = (tp + 1e-6) / (tp + fn + 1e-6)
    fpr = fp / (fp + tn + 1e-6)
    return np.sum((fpr[:-1] - fpr[1:]) * (rec[:-1] + rec[1:]) / 2)


def test_auc_streams_over_batches_as_one(sess):
    rng = np.random.default_rng(0)
    labels = rng.uniform(size=300) > 0.6
    preds = np.clip(labels * 0.3 + rng.uniform(size=300) * 0.7, 0, 1).astype(np.float32)
    lp = tf.placeholder(tf.bool, [None])
    pp = tf.placeholder(tf.float32, [None])
    value, update = tf.metrics.auc(lp, pp)
    assert [v.name for v in tf.local_variables()] == [
        "auc/true_positives", "auc/false_negatives", "auc/true_negatives",
        "auc/false_positives"]
    assert tf.local_variables()[0].shape == (200,)
    sess.run(tf.local_variables_initializer())
    for k in range(0, 300, 100):
        sess.run(update, {lp: labels[k:k + 100], pp: preds[k:k + 100]})
    assert sess.run(value) == pytest.approx(_np_auc(labels, preds), abs=1e-5)
    # The exact ROC AUC (Mann-Whitney) of these values, which 200 thresholds approximate.
    pos, neg = preds[labels], preds[~labels]
    exact = np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :])
    assert sess.run(value) == pytest.approx(exact, abs=0.01)


def test_auc_arguments_and_bad_predictions(sess):
    with pytest.raises(ValueError, match="curve must be either ROC or PR, XY unknown"):
        tf.metrics.auc([True], [0.5], curve="XY")
    with pytest.raises(ValueError, match="Invalid summation_method: nope"):
        tf.metrics.auc([True], [0.5], summation_method="nope")
    _, update = tf.metrics.auc(tf.constant([True, False]), tf.constant([1.5, 0.2]))
    sess.run(tf.local_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"predictions must be in \[0, 1\]"):
        sess.run(update)
    for method in ("minoring", "majoring", "careful_interpolation"):
        v, u = tf.metrics.auc(tf.constant([0, 0, 1, 1]), tf.constant([0.1, 0.4, 0.35, 0.8]),
                              curve="PR", summation_method=method, num_thresholds=50)
        sess.run(tf.local_variables_initializer())
        assert 0.5 < sess.run(u) < 1.0
    # Explicit thresholds: [-1e-7, 0.5, 1 + 1e-7]; 0.5 separates these perfectly.
    lo, up = tf.metrics.auc(tf.constant([0, 1]), tf.constant([0.3, 0.7]), thresholds=[0.5])
    assert tf.local_variables()[-1].shape == (3,)
    sess.run(tf.local_variables_initializer())
    assert sess.run(up) == pytest.approx(1.0, abs=1e-5)


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
