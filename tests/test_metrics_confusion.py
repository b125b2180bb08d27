"""tf.metrics' binary counts (psrt/ops/metrics_confusion.py): values against TF r1.15's own
tests (tensorflow/python/kernel_tests/metrics_test.py: PrecisionTest, RecallTest, AUCTest,
SpecificityAtSensitivityTest, SensitivityAtSpecificityTest, PrecisionRecallThresholdsTest,
TruePositivesTest ... FalseNegativesAtThresholdsTest), the local variables' names as TF's
testVars, the collections, a metric streamed over batches, and the bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

import psrt as tf


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _names():
    return [v.name for v in tf.local_variables()]


def _both(sess, value, update):
    sess.run(tf.local_variables_initializer())
    return sess.run(update), sess.run(value)


# ---- true/false positives/negatives ---------------------------------------------------------

COUNT_LABELS = ((0, 1, 0, 1, 0), (0, 0, 1, 1, 1), (1, 1, 1, 1, 0), (0, 0, 0, 0, 1))
COUNT_PREDS = ((0, 0, 1, 1, 0), (1, 1, 1, 1, 1), (0, 1, 0, 1, 0), (1, 1, 1, 1, 1))


@pytest.mark.parametrize("fn,unweighted,weighted", [
    ("false_negatives", 3., 5.), ("false_positives", 7., 14.),   # FalseNegativesTest, ...
    ("true_negatives", 3., 4.), ("true_positives", 7., 12.)])    # testUnweighted/testWeighted
def test_counts_tf_values(sess, fn, unweighted, weighted):
    metric = getattr(tf.metrics, fn)
    value, update = metric(tf.constant(COUNT_LABELS), tf.constant(COUNT_PREDS))
    assert _names() == [f"{fn}/count"]                            # testVars
    w_value, w_update = metric(tf.constant(COUNT_LABELS), tf.constant(COUNT_PREDS),
                               weights=tf.constant((1., 1.5, 2., 2.5)))  # per row
    sess.run(tf.local_variables_initializer())
    assert sess.run([value, w_value]) == [0.0, 0.0]
    assert sess.run([update, w_update]) == [unweighted, weighted]
    assert sess.run([value, w_value]) == [unweighted, weighted]
    assert sess.run(update) == 2 * unweighted                      # it streams
    with pytest.raises(ValueError, match="rank"):
        metric(tf.constant(COUNT_LABELS), tf.constant(COUNT_PREDS),
               weights=tf.ones((4, 5, 1, 1)))


TH_PREDS = ((0.9, 0.2, 0.8, 0.1), (0.2, 0.9, 0.7, 0.6), (0.1, 0.2, 0.4, 0.3))
TH_LABELS = ((0, 1, 1, 0), (1, 0, 0, 0), (0, 0, 0, 0))


@pytest.mark.parametrize("fn,unweighted,weights,weighted", [
    ("false_negatives", (0, 2, 3), ((3.0,), (5.0,), (7.0,)), (0.0, 8.0, 11.0)),
    ("false_positives", (7, 4, 2), ((1.0, 2.0, 3.0, 5.0), (7.0, 11.0, 13.0, 17.0),
                                    (19.0, 23.0, 29.0, 31.0)), (125.0, 42.0, 12.0)),
    ("true_negatives", (2, 5, 7), ((0.0, 2.0, 3.0, 5.0),), (5.0, 15.0, 23.0)),
    ("true_positives", (3, 1, 0), 37.0, (111.0, 37.0, 0.0))])
def test_counts_at_thresholds_tf_values(sess, fn, unweighted, weights, weighted):
    # TruePositivesAtThresholdsTest ... FalseNegativesAtThresholdsTest: testVars,
    # testUnweighted, testWeighted
    metric = getattr(tf.metrics, f"{fn}_at_thresholds")
    th = [0.15, 0.5, 0.85]
    value, update = metric(predictions=tf.constant(TH_PREDS), labels=tf.constant(TH_LABELS),
                           thresholds=th)
    assert _names() == [f"{fn}/{fn}"]
    w_value, w_update = metric(predictions=tf.constant(TH_PREDS),
                               labels=tf.constant(TH_LABELS), weights=weights, thresholds=th)
    sess.run(tf.local_variables_initializer())
    np.testing.assert_array_equal(sess.run(value), (0, 0, 0))
    np.testing.assert_array_equal(sess.run(update), unweighted)
    np.testing.assert_array_equal(sess.run(w_update), weighted)
    np.testing.assert_array_equal(sess.run(w_value), weighted)


# ---- precision and recall ---------------------------------------------------------------------

def test_precision_recall_variables_and_collections(sess):
    # PrecisionTest / RecallTest: testVars, testMetricsCollection, testUpdatesCollection
    p, pu = tf.metrics.precision(tf.ones((10, 1)), tf.ones((10, 1)),
                                 metrics_collections=["m"], updates_collections=["u"])
    assert _names() == ["precision/true_positives/count", "precision/false_positives/count"]
    r, ru = tf.metrics.recall(tf.ones((10, 1)), tf.ones((10, 1)), metrics_collections=["m"],
                              updates_collections=["u"])
    assert _names()[2:] == ["recall/true_positives/count", "recall/false_negatives/count"]
    assert tf.get_collection("m") == [p, r] and tf.get_collection("u") == [pu, ru]
    assert tf.get_collection(tf.GraphKeys.METRIC_VARIABLES) == tf.local_variables()


@pytest.mark.parametrize("dtype", [tf.bool, tf.int32, tf.float32])
def test_precision_recall_some_correct_input_dtypes(sess, dtype):
    # PrecisionTest / RecallTest.testSomeCorrect_multipleInputDtypes
    preds = tf.cast(tf.constant([1, 0, 1, 0], shape=(1, 4)), dtype)
    labels = tf.cast(tf.constant([0, 1, 1, 0], shape=(1, 4)), dtype)
    p, pu = tf.metrics.precision(labels, preds)
    r, ru = tf.metrics.recall(labels, preds)
    sess.run(tf.local_variables_initializer())
    assert sess.run([pu, ru]) == [0.5, 0.5]
    assert sess.run([p, r]) == [0.5, 0.5]


def test_precision_recall_weighted_tf_values(sess):
    # PrecisionTest.testWeighted1d (7/14), testWeightedScalar_placeholders (4/8),
    # testWeighted2d (7/10); RecallTest.testWeighted1d (7/14), testWeighted2d (4/10)
    preds = tf.constant([[1, 0, 1, 0], [1, 0, 1, 0]])
    labels = tf.constant([[0, 1, 1, 0], [1, 0, 0, 1]])
    rpreds = tf.constant([[1, 0, 1, 0], [0, 1, 0, 1]])
    w2d = tf.constant([[1, 2, 3, 4], [4, 3, 2, 1]])
    ph_p, ph_l = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    cases = [tf.metrics.precision(labels, preds, weights=tf.constant([[2], [5]])),
             tf.metrics.precision(ph_l, ph_p, weights=2),
             tf.metrics.precision(labels, preds, weights=w2d),
             tf.metrics.recall(labels, rpreds, weights=tf.constant([[2], [5]])),
             tf.metrics.recall(labels, rpreds, weights=w2d)]
    feed = {ph_p: ((1, 0, 1, 0), (1, 0, 1, 0)), ph_l: ((0, 1, 1, 0), (1, 0, 0, 1))}
    sess.run(tf.local_variables_initializer())
    expected = [7 / 14, 4 / 8, 7 / 10, 7 / 14, 4 / 10]
    np.testing.assert_allclose(sess.run([u for _, u in cases], feed), expected, rtol=1e-6)
    np.testing.assert_allclose(sess.run([v for v, _ in cases], feed), expected, rtol=1e-6)


def test_precision_recall_all_correct_incorrect_and_empty(sess):
    # PrecisionTest / RecallTest: testAllCorrect, testAllIncorrect,
    # testZeroTrueAndFalsePositivesGivesZeroPrecision, testZeroTruePositives...ZeroRecall
    inputs = np.random.default_rng(1).integers(0, 2, size=(100, 1))
    cases = [tf.metrics.precision(inputs, inputs), tf.metrics.recall(inputs, inputs),
             tf.metrics.precision(1 - inputs, inputs), tf.metrics.recall(1 - inputs, inputs),
             tf.metrics.precision(tf.zeros(4), tf.zeros(4)),
             tf.metrics.recall(tf.zeros((1, 4)), tf.zeros((1, 4)))]
    sess.run(tf.local_variables_initializer())
    sess.run([u for _, u in cases])
    assert sess.run([v for v, _ in cases]) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_precision_recall_at_thresholds_tf_values(sess):
    # PrecisionRecallThresholdsTest: testVars, testMetricsCollection, testUpdatesCollection,
    # testWeights1d, testWeights2d, testExtremeThresholds, testZeroLabelsPredictions
    prec, prec_op = tf.metrics.precision_at_thresholds(
        tf.ones((10, 1)), tf.ones((10, 1)), [0, 0.5, 1.0], metrics_collections=["m"],
        updates_collections=["u"])
    assert _names() == ["precision_at_thresholds/true_positives",
                        "precision_at_thresholds/false_positives"]
    rec, rec_op = tf.metrics.recall_at_thresholds(
        tf.ones((10, 1)), tf.ones((10, 1)), [0, 0.5, 1.0], metrics_collections=["m"],
        updates_collections=["u"])
    assert _names()[2:] == ["recall_at_thresholds/true_positives",
                            "recall_at_thresholds/false_negatives"]
    assert tf.get_collection("m") == [prec, rec] and tf.get_collection("u") == [prec_op,
                                                                              rec_op]
    preds = tf.constant([[1, 0], [1, 0]], shape=(2, 2), dtype=tf.float32)
    labels = tf.constant([[0, 1], [1, 0]], shape=(2, 2))
    w1 = tf.constant([[0], [1]], shape=(2, 1), dtype=tf.float32)
    w2 = tf.constant([[0, 0], [1, 1]], shape=(2, 2), dtype=tf.float32)
    cases = [(fn(labels, preds, [0.5, 1.1], weights=w), [1.0, 0.0])
             for w in (w1, w2) for fn in (tf.metrics.precision_at_thresholds,
                                          tf.metrics.recall_at_thresholds)]
    xp = tf.constant([1, 0, 1, 0], shape=(1, 4), dtype=tf.float32)
    xl = tf.constant([0, 1, 1, 1], shape=(1, 4))
    cases += [(tf.metrics.precision_at_thresholds(xl, xp, [-1.0, 2.0]), [0.75, 0.0]),
              (tf.metrics.recall_at_thresholds(xl, xp, [-1.0, 2.0]), [1.0, 0.0]),
              (tf.metrics.precision_at_thresholds(tf.zeros(4), tf.zeros(4), [0.5]), [0.0]),
              (tf.metrics.recall_at_thresholds(tf.zeros(4), tf.zeros(4), [0.5]), [0.0])]
    sess.run(tf.local_variables_initializer())
    sess.run([u for (_, u), _ in cases])
    for (value, _), expected in cases:
        np.testing.assert_allclose(sess.run(value), expected, atol=1e-5)


def test_precision_recall_at_thresholds_stream_as_one(sess):
    # PrecisionRecallThresholdsTest.testWithMultipleUpdates: 1000 samples in batches of 10
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, size=(1000,)).astype(np.float32)
    preds = np.clip(0.4 + 0.2 * labels + rng.normal(0.0, 0.2, size=1000), 0, 1
                    ).astype(np.float32)
    lp, pp = tf.placeholder(tf.float32, [10]), tf.placeholder(tf.float32, [10])
    prec, prec_op = tf.metrics.precision_at_thresholds(lp, pp, [0.3])
    rec, rec_op = tf.metrics.recall_at_thresholds(lp, pp, [0.3])
    sess.run(tf.local_variables_initializer())
    for i in range(0, 1000, 10):
        sess.run([prec_op, rec_op], {lp: labels[i:i + 10], pp: preds[i:i + 10]})
    pos, lab = preds > 0.3, labels == 1
    tp, fp, fn = np.sum(pos & lab), np.sum(pos & ~lab), np.sum(~pos & lab)
    assert sess.run(prec)[0] == pytest.approx(tp / (1e-7 + tp + fp), rel=1e-6)
    assert sess.run(rec)[0] == pytest.approx(tp / (1e-7 + tp + fn), rel=1e-6)


# ---- auc --------------------------------------------------------------------------------------

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


def test_auc_manual_thresholds_and_careful_interpolation_tf_values(sess):
    # AUCTest.testManualThresholds (0.875 default, 0.75 manual), testCorrectAUCPRSpecialCase,
    # testCorrectAnotherAUCPRSpecialCase, testThirdCorrectAUCPRSpecialCase
    preds = tf.constant([0.12, 0.3001, 0.3003, 0.72], shape=(1, 4), dtype=tf.float32)
    labels = tf.constant([0, 1, 0, 1], shape=(1, 4))
    weights = tf.constant([1, 1, 1, 1], shape=(1, 4))
    cases = [(tf.metrics.auc(labels, preds, weights=weights), 0.875),
             (tf.metrics.auc(labels, preds, weights=weights,
                             thresholds=[0.0, 0.2, 0.3002, 0.6, 1.0]), 0.75)]
    pr = [([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], 1 - math.log(1.5) / 2),
          ([0.1, 0.4, 0.35, 0.8, 0.1, 0.135, 0.81], [0, 0, 1, 0, 1, 0, 1],
           (2.5 - 2 * math.log(4. / 3) - 0.25 * math.log(7. / 5)) / 3),
          ([0.0, 0.1, 0.2, 0.33, 0.3, 0.4, 0.5], [0, 0, 0, 0, 1, 1, 1], 1 - math.log(4. / 3) / 3)]
    for p, lab, expected in pr:
        cases.append((tf.metrics.auc(tf.constant([lab]), tf.constant([p], tf.float32),
                                     curve="PR", summation_method="careful_interpolation"),
                      expected))
    sess.run(tf.local_variables_initializer())
    got = sess.run([u for (_, u), _ in cases])
    for g, (_, expected) in zip(got, cases):
        assert g == pytest.approx(expected, abs=1e-3)


# ---- specificity and sensitivity --------------------------------------------------------------

SENS_LABELS = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]


def test_specificity_sensitivity_variables_and_all_correct(sess):
    # SpecificityAtSensitivityTest / SensitivityAtSpecificityTest: testVars, testAllCorrect,
    # testMetricsCollection, testUpdatesCollection
    s, su = tf.metrics.specificity_at_sensitivity(tf.ones((10, 1)), tf.ones((10, 1)),
                                                  sensitivity=0.7, metrics_collections=["m"],
                                                  updates_collections=["u"])
    assert _names() == [f"specificity_at_sensitivity/{n}" for n in (
        "true_positives", "false_negatives", "true_negatives", "false_positives")]
    assert tf.get_collection("m") == [s] and tf.get_collection("u") == [su]
    tf.metrics.sensitivity_at_specificity(tf.ones((10, 1)), tf.ones((10, 1)), specificity=0.7)
    assert _names()[4] == "sensitivity_at_specificity/true_positives"
    inputs = np.random.default_rng(1).integers(0, 2, size=(100, 1))
    a, au = tf.metrics.specificity_at_sensitivity(inputs, inputs.astype(np.float32), 0.7)
    b, bu = tf.metrics.sensitivity_at_specificity(inputs, inputs.astype(np.float32), 0.7)
    sess.run(tf.local_variables_initializer())
    assert sess.run([au, bu]) == pytest.approx([1.0, 1.0], abs=1e-6)
    with pytest.raises(ValueError, match=r"`sensitivity` must be in the range \[0, 1\]"):
        tf.metrics.specificity_at_sensitivity(inputs, inputs, 1.5)
    with pytest.raises(ValueError, match=r"`specificity` must be in the range \[0, 1\]"):
        tf.metrics.sensitivity_at_specificity(inputs, inputs, -0.1)


@pytest.mark.parametrize("fn,preds,target,weights,expected", [
    ("specificity_at_sensitivity", [0.1, 0.2, 0.4, 0.3, 0.0, 0.1, 0.45, 0.5, 0.8, 0.9], 0.8,
     None, 1.0),                                    # testSomeCorrectHighSensitivity
    ("specificity_at_sensitivity", [0.1, 0.2, 0.4, 0.3, 0.0, 0.1, 0.2, 0.2, 0.26, 0.26], 0.4,
     None, 0.6),                                    # testSomeCorrectLowSensitivity
    ("specificity_at_sensitivity", [0.1, 0.2, 0.4, 0.3, 0.0, 0.1, 0.2, 0.2, 0.26, 0.26], 0.4,
     [3], 0.6),                                     # testWeighted1d_multipleLabelDtypes
    ("specificity_at_sensitivity", [0.1, 0.2, 0.4, 0.3, 0.0, 0.1, 0.2, 0.2, 0.26, 0.26], 0.4,
     list(range(1, 11)), 8.0 / 15.0),               # testWeighted2d
    ("sensitivity_at_specificity", [0.0, 0.1, 0.2, 0.3, 0.4, 0.1, 0.45, 0.5, 0.8, 0.9], 0.8,
     None, 0.8),                                    # testSomeCorrectHighSpecificity
    ("sensitivity_at_specificity", [0.0, 0.1, 0.2, 0.3, 0.4, 0.01, 0.02, 0.25, 0.26, 0.26],
     0.4, None, 0.6),                               # testSomeCorrectLowSpecificity
    ("sensitivity_at_specificity", [0.0, 0.1, 0.2, 0.3, 0.4, 0.01, 0.02, 0.25, 0.26, 0.26],
     0.4, list(range(1, 11)), 0.675)])              # testWeighted_multipleLabelDtypes
def test_specificity_sensitivity_tf_values(sess, fn, preds, target, weights, expected):
    p = tf.constant(preds, dtype=tf.float32)
    w = None if weights is None else tf.constant(weights)
    ops = [getattr(tf.metrics, fn)(tf.cast(SENS_LABELS, dt), p, target, weights=w)
           for dt in (tf.bool, tf.int32, tf.float32)]
    sess.run(tf.local_variables_initializer())
    np.testing.assert_allclose(sess.run([u for _, u in ops]), [expected] * 3, rtol=1e-6)
    np.testing.assert_allclose(sess.run([v for v, _ in ops]), [expected] * 3, rtol=1e-6)
