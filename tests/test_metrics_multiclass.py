"""tf.metrics' class metrics (psrt/ops/metrics_multiclass.py): values against TF r1.15's own
tests (tensorflow/python/kernel_tests/metrics_test.py: MeanIOUTest, MeanPerClassAccuracyTest,
SingleLabelPrecisionAtKTest, MultiLabelPrecisionAtKTest, SingleLabelRecallAtKTest,
MultiLabel2dRecallAtKTest, MultiLabel3dRecallAtKTest), dense and sparse labels alike, the
local variables' names, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import psrt as tf

NAN = float("nan")


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s


def _names():
    return [v.name for v in tf.local_variables()]


# ---- mean_iou and mean_per_class_accuracy ---------------------------------------------------

def test_mean_iou_and_per_class_accuracy_variables_and_shape_errors(sess):
    # MeanIOUTest / MeanPerClassAccuracyTest: testVars, testMetricsCollections,
    # testUpdatesCollection, testPredictionsAndLabelsOfDifferentSizeRaisesValueError,
    # testLabelsAndWeightsOfDifferentSizeRaisesValueError
    m, u = tf.metrics.mean_iou(tf.ones([10, 1]), tf.ones([10, 1]), num_classes=2,
                               metrics_collections=["m"], updates_collections=["u"])
    assert _names() == ["mean_iou/total_confusion_matrix"]
    assert tf.local_variables()[0].dtype == np.float64
    a, au = tf.metrics.mean_per_class_accuracy(tf.ones([10, 1]), tf.ones([10, 1]), 2,
                                               metrics_collections=["m"],
                                               updates_collections=["u"])
    assert _names()[1:] == ["mean_accuracy/total", "mean_accuracy/count"]
    assert tf.get_collection("m") == [m, a] and tf.get_collection("u") == [u, au]
    for fn in (tf.metrics.mean_iou, tf.metrics.mean_per_class_accuracy):
        with pytest.raises(ValueError):
            fn(tf.ones([10, 4]), tf.ones([10, 3]), num_classes=2)
        with pytest.raises(ValueError):
            fn(tf.ones([10]), tf.ones([10]), num_classes=2, weights=tf.zeros([9]))


def _stream(sess, update, lp, pp, labels, preds, wp=None, weights=None):
    for i in range(len(labels)):
        feed = {lp: [labels[i]], pp: [preds[i]]}
        if wp is not None:
            feed[wp] = [weights[i]]
        sess.run(update, feed)


@pytest.mark.parametrize("n,preds,labels,weights,iou,per_class", [
    # testMultipleUpdates (both classes' tests use these batches)
    (3, [0, 1, 2, 1, 0], [0, 1, 1, 2, 1], None, [1 / 2, 1 / 4, 0.], [1.0, 1 / 3, 0.0]),
    # testMultipleUpdatesWithWeights
    (2, [0, 1, 0, 1, 0, 1], [0, 1, 1, 0, 0, 1], [1.0, 1.0, 1.0, 0.0, 1.0, 0.0],
     [2 / 3, 1 / 2], None),
    (2, [0, 1, 0, 1, 0, 1], [0, 1, 1, 0, 0, 1], [1.0, 0.5, 1.0, 0.0, 1.0, 0.0],
     None, [2 / 2, 0.5 / 1.5]),
    # testMultipleUpdatesWithMissingClass
    (3, [0, 1, 1, 1, 0], [0, 1, 1, 0, 1], None, [1 / 3, 2 / 4], [1 / 2, 2 / 3, 0.])])
def test_class_metrics_streamed_tf_values(sess, n, preds, labels, weights, iou, per_class):
    lp, pp = tf.placeholder(tf.int32, [1]), tf.placeholder(tf.int32, [1])
    wp = None if weights is None else tf.placeholder(tf.float32, [1])
    metrics = []
    if iou is not None:
        metrics.append((tf.metrics.mean_iou(lp, pp, n, weights=wp), np.mean(iou)))
    if per_class is not None:
        metrics.append((tf.metrics.mean_per_class_accuracy(lp, pp, n, weights=wp),
                        np.mean(per_class)))
    sess.run(tf.local_variables_initializer())
    _stream(sess, [u for (_, u), _ in metrics], lp, pp, labels, preds, wp, weights)
    for (value, _), expected in metrics:
        assert sess.run(value) == pytest.approx(expected, rel=1e-6)


def test_mean_iou_confusion_matrix_tf_values(sess):
    # MeanIOUTest: testUpdateOpEvalIsAccumulatedConfusionMatrix, testAllCorrect,
    # testAllWrong, testResultsWithSomeMissing, testMissingClassInLabels,
    # testMissingClassOverallSmall, testMissingClassOverallLarge
    preds10 = tf.concat([tf.constant(0, shape=[5]), tf.constant(1, shape=[5])], 0)
    labels10 = tf.concat([tf.constant(0, shape=[3]), tf.constant(1, shape=[7])], 0)
    w10 = tf.concat([tf.constant(0, shape=[1]), tf.constant(1, shape=[8]),
                     tf.constant(0, shape=[1])], 0)
    lab3 = tf.constant([[[0, 0, 1, 1, 0, 0], [1, 0, 0, 0, 0, 1]],
                        [[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]]])
    pred_in = tf.constant([[[0, 0, 2, 1, 1, 0], [0, 1, 2, 2, 0, 1]],
                           [[0, 0, 2, 1, 1, 1], [1, 1, 2, 0, 0, 0]]])
    pred_large = tf.constant([[[0, 0, 1, 1, 0, 0], [1, 1, 0, 0, 1, 1]],
                              [[0, 0, 0, 1, 1, 1], [1, 1, 1, 0, 0, 0]]])
    cases = [
        (tf.metrics.mean_iou(labels10, preds10, 2), [[3, 0], [2, 5]], np.mean([3 / 5, 5 / 7])),
        (tf.metrics.mean_iou(tf.zeros([40]), tf.zeros([40]), 1), [[40]], 1.0),
        (tf.metrics.mean_iou(tf.ones([40]), tf.zeros([40]), 2), [[0, 0], [40, 0]], 0.0),
        (tf.metrics.mean_iou(labels10, preds10, 2, weights=w10), [[2, 0], [2, 4]],
         np.mean([2 / 4, 4 / 6])),
        (tf.metrics.mean_iou(lab3, pred_in, 3), [[7, 4, 3], [3, 5, 2], [0, 0, 0]],
         1 / 3 * (7 / (7 + 3 + 7) + 5 / (5 + 4 + 5) + 0 / (0 + 5 + 0))),
        (tf.metrics.mean_iou(tf.constant([0]), tf.constant([0]), 2), [[1, 0], [0, 0]], 1.0),
        (tf.metrics.mean_iou(lab3, pred_large, 3), [[9, 5, 0], [3, 7, 0], [0, 0, 0]],
         1 / 2 * (9 / (9 + 3 + 5) + 7 / (7 + 5 + 3)))]
    sess.run(tf.local_variables_initializer())
    for (value, update), cm, expected in cases:
        got = sess.run(update)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, cm)
        assert sess.run(value) == pytest.approx(expected, rel=1e-6)
    _, bad = tf.metrics.mean_iou(tf.constant([0, 2]), tf.constant([0, 1]), 2)
    sess.run(tf.local_variables_initializer())
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"`labels` out of bound: 2 is "
                                                             r"not in \[0, 2\)"):
        sess.run(bad)


def test_mean_per_class_accuracy_update_values_tf(sess):
    # MeanPerClassAccuracyTest: testAllCorrect, testAllWrong, testResultsWithSomeMissing
    preds10 = tf.concat([tf.constant(0, shape=[5]), tf.constant(1, shape=[5])], 0)
    labels10 = tf.concat([tf.constant(0, shape=[3]), tf.constant(1, shape=[7])], 0)
    w10 = tf.concat([tf.constant(0, shape=[1]), tf.constant(1, shape=[8]),
                     tf.constant(0, shape=[1])], 0)
    cases = [(tf.metrics.mean_per_class_accuracy(tf.zeros([40]), tf.zeros([40]), 1), [1.0],
              1.0),
             (tf.metrics.mean_per_class_accuracy(tf.ones([40]), tf.zeros([40]), 2),
              [0.0, 0.0], 0.0),
             (tf.metrics.mean_per_class_accuracy(labels10, preds10, 2, weights=w10),
              [2. / 2., 4. / 6.], np.mean([2. / 2., 4. / 6.]))]
    sess.run(tf.local_variables_initializer())
    for (value, update), per_class, expected in cases:
        np.testing.assert_allclose(sess.run(update), per_class, rtol=1e-6)
        assert sess.run(value) == pytest.approx(expected, rel=1e-6)


# ---- precision@k and recall@k -----------------------------------------------------------------

def _sparse_2d(indicator):
    """TF's _binary_2d_label_to_2d_sparse_value: the ids of each row's 1s."""
    ind, val = [], []
    for r, row in enumerate(indicator):
        ids = [c for c, x in enumerate(row) if x == 1]
        ind += [[r, j] for j in range(len(ids))]
        val += ids
    return tf.SparseTensorValue(np.array(ind, np.int64), np.array(val, np.int64),
                                np.array([len(indicator), len(indicator[0])], np.int64))


def _sparse_1d(indicator):
    """TF's _binary_2d_label_to_1d_sparse_value: one id per row, a rank-1 sparse tensor."""
    val = [row.index(1) for row in map(list, indicator)]
    return tf.SparseTensorValue(np.array([[r] for r in range(len(val))], np.int64),
                                np.array(val, np.int64), np.array([len(val)], np.int64))


def _sparse_3d(indicator):
    """TF's _binary_3d_label_to_sparse_value."""
    ind, val = [], []
    for a, plane in enumerate(indicator):
        for b, row in enumerate(plane):
            ids = [c for c, x in enumerate(row) if x == 1]
            ind += [[a, b, j] for j in range(len(ids))]
            val += ids
    shape = [len(indicator), len(indicator[0]), len(indicator[0][0])]
    return tf.SparseTensorValue(np.array(ind, np.int64), np.array(val, np.int64),
                                np.array(shape, np.int64))


def _check_at_k(kind, predictions, predictions_idx, labels, k, expected, class_id=None,
                weights=None):
    """TF's _test_precision_at_k / _test_precision_at_top_k (and recall's): both forms in
    one graph, failing before the local variables are initialized, then ``expected`` from
    the update op and the value (NaN as NaN)."""
    tf.reset_default_graph()
    w = None if weights is None else tf.constant(weights, tf.float32)
    by_scores = getattr(tf.metrics, f"{kind}_at_k")(
        labels, tf.constant(predictions, tf.float32), k, class_id=class_id, weights=w)
    by_idx = getattr(tf.metrics, f"{kind}_at_top_k")(
        labels, tf.constant(predictions_idx, tf.int32), k=k, class_id=class_id, weights=w)
    with tf.Session("") as s:
        with pytest.raises(tf.errors.OpError):
            s.run(by_scores[0])
        s.run(tf.variables_initializer(tf.local_variables()))
        for metric, update in (by_scores, by_idx):
            got = s.run([update, metric])
            for g in got:
                assert g.dtype == np.float64
                if math.isnan(expected):
                    assert math.isnan(g), (kind, class_id, weights, got)
                else:
                    assert g == expected, (kind, class_id, weights, got)


SINGLE_PREDS = ((0.1, 0.3, 0.2, 0.4), (0.1, 0.2, 0.3, 0.4))
SINGLE_IDX = [[3], [3]]
SINGLE_INDICATOR = ((0, 0, 0, 1), (0, 0, 1, 0))
SINGLE_LABELS = (_sparse_1d(SINGLE_INDICATOR), _sparse_2d(SINGLE_INDICATOR),
                 np.array((3, 2), np.int64), np.array([[3], [2]], np.int64))


def test_single_label_precision_at_k_tf_values():
    # SingleLabelPrecisionAtKTest.test_at_k1_nan, test_at_k1: sparse vs dense, 1-D vs 2-D
    # labels all the same
    for labels in SINGLE_LABELS:
        for class_id in (-1, 0, 1, 2, 4):
            _check_at_k("precision", SINGLE_PREDS, SINGLE_IDX, labels, 1, NAN, class_id)
        _check_at_k("precision", SINGLE_PREDS, SINGLE_IDX, labels, 1, 1.0 / 2, class_id=3)
        _check_at_k("precision", SINGLE_PREDS, SINGLE_IDX, labels, 1, 1.0 / 2)
    assert _names() == ["precision_at_1/true_positive_at_1",
                        "precision_at_1/false_positive_at_1",
                        "precision_at_1_1/true_positive_at_1",
                        "precision_at_1_1/false_positive_at_1"]


def test_single_label_recall_at_k_tf_values():
    # SingleLabelRecallAtKTest: test_at_k1_nan, test_at_k1_no_predictions,
    # test_one_label_at_k1, test_one_label_at_k1_weighted_class_id3,
    # test_one_label_at_k1_weighted
    for labels in SINGLE_LABELS:
        check = lambda exp, **kw: _check_at_k("recall", SINGLE_PREDS, SINGLE_IDX,  # noqa: E731
                                              labels, 1, exp, **kw)
        for class_id in (-1, 0, 1, 4):
            check(NAN, class_id=class_id)
        check(0.0, class_id=2)
        check(1.0, class_id=3)
        check(1.0 / 2)
        for w, exp3, exp_all in (((0.0,), NAN, NAN), ((1.0,), 1.0, 1.0 / 2),
                                 ((2.0,), 1.0, 1.0 / 2), ((0.0, 1.0), NAN, 0.0),
                                 ((1.0, 0.0), 1.0, 1.0), ((2.0, 3.0), 2.0 / 2, 2.0 / 5)):
            check(exp3, class_id=3, weights=w)
            check(exp_all, weights=w)
    assert _names() == ["recall_at_1/true_positive_at_1", "recall_at_1/false_negative_at_1",
                        "recall_at_1_1/true_positive_at_1",
                        "recall_at_1_1/false_negative_at_1"]


MULTI_PREDS = [[0.5, 0.1, 0.6, 0.3, 0.8, 0.0, 0.7, 0.2, 0.4, 0.9],
               [0.3, 0.0, 0.7, 0.2, 0.4, 0.9, 0.5, 0.8, 0.1, 0.6]]
MULTI_IDX = [[9, 4, 6, 2, 0], [5, 7, 2, 9, 6]]
MULTI_INDICATOR = [[0, 0, 1, 0, 0, 0, 0, 1, 1, 0], [0, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
MULTI_LABELS = (_sparse_2d(MULTI_INDICATOR), np.array([[2, 7, 8], [1, 2, 5]], np.int64))
OUT_OF_RANGE = tf.SparseTensorValue(
    indices=[[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2], [1, 3]],
    values=np.array([2, 7, -1, 8, 1, 2, 5, 10], np.int64), dense_shape=[2, 4])


def test_multi_label_precision_at_k_tf_values():
    # MultiLabelPrecisionAtKTest: test_average_precision (its precision@k), test_three_labels_
    # at_k5_no_predictions, _no_labels, test_three_labels_at_k5, _some_out_of_range,
    # test_average_precision_different_num_labels (its precision@k)
    ex1 = ((0, 1, 2, 3, 4), (0.2, 0.1, 0.0, 0.4, 0.0, 0.5, 0.3), (5, 3, 6, 0, 1),
           (0.0 / 1, 1.0 / 2, 1.0 / 3, 2.0 / 4))
    ex2 = ((0, 2, 4, 5, 6), (0.3, 0.5, 0.0, 0.4, 0.0, 0.1, 0.2), (1, 3, 0, 6, 5),
           (0.0 / 1, 0.0 / 2, 1.0 / 3, 2.0 / 4))
    for labels, preds, idx, precisions in (ex1, ex2):
        for k in range(1, 5):
            _check_at_k("precision", (preds,), (idx[:k],), np.array([labels], np.int64), k,
                        precisions[k - 1])
    both = np.array([ex1[0], ex2[0]], np.int64)
    for k in range(1, 5):
        _check_at_k("precision", (ex1[1], ex2[1]), (ex1[2][:k], ex2[2][:k]), both, k,
                    (ex1[3][k - 1] + ex2[3][k - 1]) / 2)
    for labels in MULTI_LABELS + (OUT_OF_RANGE,):
        check = lambda exp, **kw: _check_at_k("precision", MULTI_PREDS,  # noqa: E731
                                              MULTI_IDX, labels, 5, exp, **kw)
        for class_id in (-1, 1, 3, 8, 10):
            check(NAN, class_id=class_id)
        for class_id in (0, 4, 6, 9):
            check(0.0, class_id=class_id)
        check(2.0 / 2, class_id=2)
        check(1.0 / 1, class_id=5)
        check(0.0 / 1, class_id=7)
        check(3.0 / 10)
    preds = [[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]]
    idx = np.array(((0, 1, 2, 3), (3, 2, 1, 0)))
    mean_precision = np.mean(((0.0 / 1, 0.0 / 2, 1.0 / 3, 2.0 / 4),
                              (1.0 / 1, 1.0 / 2, 1.0 / 3, 1.0 / 4)), axis=0)
    for labels in (_sparse_2d([[0, 0, 1, 1], [0, 0, 0, 1]]),
                   np.array([[2, 3], [3, -1]], np.int64)):
        for k in range(1, 5):
            _check_at_k("precision", preds, idx[:, :k], labels, k, mean_precision[k - 1])


PREDS_3D = [[[0.5, 0.1, 0.6, 0.3, 0.8, 0.0, 0.7, 0.2, 0.4, 0.9],
             [0.3, 0.0, 0.7, 0.2, 0.4, 0.9, 0.5, 0.8, 0.1, 0.6]],
            [[0.3, 0.0, 0.7, 0.2, 0.4, 0.9, 0.5, 0.8, 0.1, 0.6],
             [0.5, 0.1, 0.6, 0.3, 0.8, 0.0, 0.7, 0.2, 0.4, 0.9]]]
IDX_3D = [[[9, 4, 6, 2, 0], [5, 7, 2, 9, 6]], [[5, 7, 2, 9, 6], [9, 4, 6, 2, 0]]]
LABELS_3D = _sparse_3d([[[0, 0, 1, 0, 0, 0, 0, 1, 1, 0], [0, 1, 1, 0, 0, 1, 0, 0, 0, 0]],
                        [[0, 1, 1, 0, 0, 1, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0, 0, 0, 1, 0]]])


def test_3d_precision_at_k_tf_values():
    # MultiLabelPrecisionAtKTest: test_3d_nan, test_3d_no_labels, test_3d, test_3d_ignore_some
    check = lambda exp, **kw: _check_at_k("precision", PREDS_3D, IDX_3D,  # noqa: E731
                                          LABELS_3D, 5, exp, **kw)
    for class_id in (-1, 1, 3, 8, 10):
        check(NAN, class_id=class_id)
    for class_id in (0, 4, 6, 9):
        check(0.0, class_id=class_id)
    check(4.0 / 4, class_id=2)
    check(2.0 / 2, class_id=5)
    check(1.0 / 2, class_id=7)
    check(7.0 / 20)
    for w, cid, exp in (([[1], [0]], 2, 1.0), ([[0], [1]], 2, 1.0), ([[1], [0]], 7, 0.0),
                        ([[0], [1]], 7, 1.0), ([[1, 0], [0, 1]], 7, NAN),
                        ([[0, 1], [1, 0]], 7, 1.0 / 2.0)):
        check(exp, class_id=cid, weights=w)


def test_multi_label_recall_at_k_tf_values():
    # MultiLabel2dRecallAtKTest: test_at_k5_nan, test_at_k5_no_predictions, test_at_k5,
    # test_at_k5_some_out_of_range (out-of-range ids count as false negatives)
    for labels in MULTI_LABELS:
        check = lambda exp, **kw: _check_at_k("recall", MULTI_PREDS, MULTI_IDX,  # noqa: E731
                                              labels, 5, exp, **kw)
        for class_id in (0, 3, 4, 6, 9, 10):
            check(NAN, class_id=class_id)
        check(0.0 / 1, class_id=8)
        check(2.0 / 2, class_id=2)
        check(1.0 / 1, class_id=5)
        check(0.0 / 1, class_id=7)
        check(3.0 / 6)
    for cid, exp in ((2, 1.0), (5, 1.0), (7, 0.0), (None, 3.0 / 8)):
        _check_at_k("recall", MULTI_PREDS, MULTI_IDX, OUT_OF_RANGE, 5, exp, class_id=cid)


def test_3d_recall_at_k_tf_values():
    # MultiLabel3dRecallAtKTest: test_3d_nan, test_3d_no_predictions, test_3d,
    # test_3d_ignore_all, test_3d_ignore_some
    check = lambda exp, **kw: _check_at_k("recall", PREDS_3D, IDX_3D,  # noqa: E731
                                          LABELS_3D, 5, exp, **kw)
    for class_id in (0, 3, 4, 6, 9, 10):
        check(NAN, class_id=class_id)
    for class_id in (1, 8):
        check(0.0, class_id=class_id)
    check(4.0 / 4, class_id=2)
    check(2.0 / 2, class_id=5)
    check(1.0 / 2, class_id=7)
    check(7.0 / 12)
    for w in ([[0], [0]], [[0, 0], [0, 0]]):
        check(NAN, class_id=2, weights=w)
        check(NAN, weights=w)
    for w, cid, exp in (([[1], [0]], 2, 1.0), ([[0], [1]], 2, 1.0), ([[0], [1]], 7, 1.0),
                        ([[1], [0]], 7, 0.0), ([[1, 0], [1, 0]], 7, 1.0 / 2.0),
                        ([[0, 1], [0, 1]], 7, NAN)):
        check(exp, class_id=cid, weights=w)


def test_at_k_errors_and_names():
    tf.reset_default_graph()
    with pytest.raises(ValueError, match="Unexpected labels shape"):
        tf.metrics.recall_at_k(np.zeros((2, 1, 1, 1), np.int64), tf.ones((2, 4)), 1)
    m, u = tf.metrics.precision_at_k(np.array([[1]], np.int64), tf.ones((1, 4)), 2,
                                     class_id=3, name="p")
    assert _names() == ["p/true_positive_at_2_class3", "p/false_positive_at_2_class3"]
    assert tf.metrics.sparse_precision_at_k is not tf.metrics.precision_at_k
    _, bad = tf.metrics.recall_at_top_k(np.array([1, 2], np.int64), tf.constant([[1], [2]]),
                                        weights=tf.ones((3,)))
    with tf.Session("") as s:
        s.run(tf.local_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match="can not be broadcast"):
            s.run(bad)
