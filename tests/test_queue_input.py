"""TF1's queue-based input as graph ops: queues (tensorflow/python/kernel_tests/
fifo_queue_test.py, random_shuffle_queue_test.py, padding_fifo_queue_test.py), readers
(kernel_tests/reader_ops_test.py), producers and batching (python/training/input_test.py),
and the end of the epochs / a corrupt record in a MonitoredTrainingSession loop
(python/training/monitored_session.py). The values are those TF's tests use where they
have them; the multi-process job is in tests/test_queue_input_cluster.py."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import psrt as tf
from psrt import errors


@pytest.fixture(autouse=True)
def _fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


@pytest.fixture
def sess():
    s = tf.Session()
    yield s
    s.close()


def _run_threads(sess, coord=None):
    coord = coord or tf.train.Coordinator()
    return coord, tf.train.start_queue_runners(sess, coord)


# ---- FIFOQueue (fifo_queue_test.py) -----------------------------------------------------------


def test_fifo_enqueue_dequeue_in_order(sess):
    # testEnqueueDequeueOneComponent / testEnqueueAndBlockingDequeue values.
    q = tf.FIFOQueue(10, tf.float32)
    elems = [10.0, 20.0, 30.0]
    enq = [q.enqueue((x,)) for x in elems]
    deq = q.dequeue()
    for op in enq:
        assert sess.run(op) is None
    assert sess.run(q.size()) == 3
    assert [float(sess.run(deq)) for _ in elems] == elems
    assert deq.dtype == np.float32 and deq.shape == tf.TensorShape(None)


def test_fifo_multi_component_dequeue_many_and_static_shapes(sess):
    # testMultiEnqueueManyWithPartiallyKnownShapes-like: two components, enqueue_many.
    q = tf.FIFOQueue(10, (tf.float32, tf.int32), shapes=((), (2,)))
    float_elems = [10.0, 20.0, 30.0, 40.0]
    int_elems = [[1, 2], [3, 4], [5, 6], [7, 8]]
    sess.run(q.enqueue_many((float_elems, int_elems)))
    f, i = q.dequeue_many(4)
    assert f.shape == tf.TensorShape([4]) and i.shape == tf.TensorShape([4, 2])
    fv, iv = sess.run([f, i])   # one dequeue per run, shared by both fetches
    np.testing.assert_array_equal(fv, float_elems)
    np.testing.assert_array_equal(iv, int_elems)
    assert iv.dtype == np.int32


def test_fifo_closed_queue_errors(sess):
    # testEnqueueAfterClose ("is closed"), testDequeueFromClosedQueue (OutOfRange after the
    # elements drain), testBlockingDequeueManyFromClosedQueue.
    q = tf.FIFOQueue(10, tf.float32, shapes=())
    sess.run(q.enqueue_many([[10.0, 20.0, 30.0]]))
    sess.run(q.close())
    assert bool(sess.run(q.is_closed()))
    with pytest.raises(errors.CancelledError, match="is closed"):
        sess.run(q.enqueue(40.0))
    deq_many = q.dequeue_many(4)
    with pytest.raises(errors.OutOfRangeError,
                       match=r"is closed and has insufficient elements \(requested 4, "
                             r"current size 3\)"):
        sess.run(deq_many)
    assert sess.run(q.size()) == 3          # a failed dequeue_many keeps the elements
    np.testing.assert_array_equal(sess.run(q.dequeue_up_to(2)), [10.0, 20.0])
    np.testing.assert_array_equal(sess.run(q.dequeue_up_to(2)), [30.0])
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue())


def test_fifo_blocking_dequeue_and_cancel_pending_enqueue(sess):
    # testBlockingDequeue: a dequeue waits for another thread's enqueue;
    # testClosedBlockingEnqueue(cancel_pending_enqueues=True).
    q = tf.FIFOQueue(1, tf.int32, shapes=())
    got = []
    t = threading.Thread(target=lambda: got.append(int(sess.run(q.dequeue()))))
    t.start()
    time.sleep(0.1)
    assert not got
    sess.run(q.enqueue(7))
    t.join(5)
    assert got == [7]
    sess.run(q.enqueue(1))       # full now
    err = []

    def blocked():
        try:
            sess.run(q.enqueue(2))
        except errors.CancelledError as e:
            err.append(e)
    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.1)
    sess.run(q.close(cancel_pending_enqueues=True))
    t.join(5)
    assert len(err) == 1 and not t.is_alive()


def test_fifo_shape_and_dtype_checks(sess):
    # TF's _as_shape_list: a list of ints or None is one shape.
    assert tf.FIFOQueue(1, tf.int32, shapes=[None]).shapes == [tf.TensorShape([None])]
    assert tf.FIFOQueue(1, tf.int32, shapes=()).shapes == [tf.TensorShape([])]
    q = tf.FIFOQueue(10, tf.float32, shapes=[(2,)])
    with pytest.raises(ValueError, match="incompatible"):
        q.enqueue(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype int32"):
        q.enqueue(tf.constant([1, 2]))
    p = tf.placeholder(tf.float32)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Shape mismatch in tuple component 0. Expected \[2\], got \[3\]"):
        sess.run(q.enqueue(p), feed_dict={p: [1.0, 2.0, 3.0]})
    unshaped = tf.FIFOQueue(10, tf.float32)
    sess.run(unshaped.enqueue(1.0))
    with pytest.raises(errors.InvalidArgumentError, match="require the components to have "
                                                          "specified shapes"):
        sess.run(unshaped.dequeue_many(1))


def test_fifo_names_give_dicts(sess):
    # testEnqueueDequeueNames-like: a queue with names takes and gives dicts.
    q = tf.FIFOQueue(10, [tf.int32, tf.string], shapes=[(), ()], names=["i", "s"])
    sess.run(q.enqueue({"i": 1, "s": "a"}))
    sess.run(q.enqueue_many({"i": [2, 3], "s": ["b", "c"]}))
    with pytest.raises(ValueError, match="do not match names"):
        q.enqueue({"i": 1})
    out = sess.run(q.dequeue_many(3))
    assert out["i"].tolist() == [1, 2, 3] and out["s"].tolist() == [b"a", b"b", b"c"]


def test_padding_fifo_queue_pads_to_the_largest(sess):
    # padding_fifo_queue_test.py testMultiEnqueueAndDequeueMany: None dimensions padded.
    q = tf.PaddingFIFOQueue(10, [tf.int32, tf.string], shapes=[(None,), ()])
    for v, s in [([1], "a"), ([1, 2, 3], "b"), ([], "c")]:
        sess.run(q.enqueue((np.array(v, np.int32), s)))
    a, b = sess.run(q.dequeue_many(3))
    np.testing.assert_array_equal(a, [[1, 0, 0], [1, 2, 3], [0, 0, 0]])
    assert b.tolist() == [b"a", b"b", b"c"]
    with pytest.raises(ValueError, match="Shapes must be provided for all components"):
        tf.PaddingFIFOQueue(10, [tf.int32, tf.int32], shapes=[[None]])


# ---- RandomShuffleQueue -------------------------------------------------------------------


def _drain(sess, q, n):
    return [int(sess.run(q.dequeue())) for _ in range(n)]


def test_random_shuffle_queue_seeded_order_repeats_and_is_a_permutation():
    # random_shuffle_queue_test.py testEnqueueAndDequeue: every element once, in an order
    # the seed fixes.
    orders = []
    for seed in (1, 1, 2):
        tf.reset_default_graph()
        q = tf.RandomShuffleQueue(20, 0, tf.int32, shapes=(), seed=seed)
        with tf.Session() as s:
            s.run(q.enqueue_many([np.arange(20, dtype=np.int32)]))
            orders.append(_drain(s, q, 20))
    assert sorted(orders[0]) == list(range(20))
    assert orders[0] == orders[1]
    assert orders[0] != orders[2] and orders[0] != list(range(20))


def test_random_shuffle_queue_keeps_min_after_dequeue_until_closed(sess):
    # testBlockingDequeueFromClosedQueue-like: min_after_dequeue=2 holds back the last two
    # elements until the close, then they drain.
    q = tf.RandomShuffleQueue(10, 2, tf.int32, shapes=(), seed=3)
    sess.run(q.enqueue_many([np.arange(4, dtype=np.int32)]))
    got = _drain(sess, q, 2)
    result = []
    t = threading.Thread(target=lambda: result.append(int(sess.run(q.dequeue()))))
    t.start()
    time.sleep(0.2)
    assert not result            # 2 left = min_after_dequeue: the dequeue waits
    sess.run(q.close())
    t.join(5)
    got += result + _drain(sess, q, 1)
    assert sorted(got) == [0, 1, 2, 3]
    with pytest.raises(errors.OutOfRangeError, match="RandomShuffleQueue"):
        sess.run(q.dequeue())


# ---- readers (reader_ops_test.py) -------------------------------------------------------------


def _tfrecord_files(tmp_path, num_files=2, num_records=7):
    names = []
    for i in range(num_files):
        fn = str(tmp_path / f"tf_record.{i}.txt")
        with tf.python_io.TFRecordWriter(fn) as w:
            for j in range(num_records):
                w.write(f"Record {j} of file {i}".encode())
        names.append(fn)
    return names


def test_tfrecord_reader_keys_are_file_and_offset(tmp_path, sess):
    # TFRecordReaderTest.testOneEpoch: the records in order, key "<file>:<offset>" (the
    # offset of the record's 12-byte header), then OutOfRange once the queue is closed.
    files = _tfrecord_files(tmp_path)
    reader = tf.TFRecordReader(name="test_reader")
    queue = tf.FIFOQueue(99, [tf.string], shapes=())
    key, value = reader.read(queue)
    assert reader.read(queue)._fields == ("key", "value")
    sess.run(queue.enqueue_many([files]))
    sess.run(queue.close())
    for i, fn in enumerate(files):
        offset = 0
        for j in range(7):
            k, v = sess.run([key, value])
            want = f"Record {j} of file {i}".encode()
            assert k == f"{fn}:{offset}".encode() and v == want
            offset += 8 + 4 + len(want) + 4
    with pytest.raises(errors.OutOfRangeError, match="is closed and has insufficient"):
        sess.run([key, value])
    assert sess.run(reader.num_records_produced()) == 14
    assert sess.run(reader.num_work_units_completed()) == 2


def test_tfrecord_reader_gzip_and_read_up_to(tmp_path, sess):
    # TFRecordReaderTest.testReadUpTo / testReadGzipFiles: at most one file per call.
    opts = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    fn = str(tmp_path / "a.gz")
    with tf.python_io.TFRecordWriter(fn, options=opts) as w:
        for j in range(5):
            w.write(b"r%d" % j)
    reader = tf.TFRecordReader(options=opts)
    queue = tf.FIFOQueue(9, [tf.string], shapes=())
    keys, values = reader.read_up_to(queue, 3)
    sess.run(queue.enqueue_many([[fn, fn]]))
    sess.run(queue.close())
    got = [sess.run([keys, values]) for _ in range(4)]
    assert [v.tolist() for _, v in got] == [[b"r0", b"r1", b"r2"], [b"r3", b"r4"],
                                            [b"r0", b"r1", b"r2"], [b"r3", b"r4"]]
    assert got[1][0].tolist() == [f"{fn}:{3 * 18}".encode(), f"{fn}:{4 * 18}".encode()]  # 12 + 2 + 4 bytes each
    with pytest.raises(errors.OutOfRangeError):
        sess.run(keys)


def test_text_line_reader_keys_skip_header_and_crlf(tmp_path, sess):
    # TextLineReaderTest.testOneEpoch/testSkipHeaderLines/testOneEpochWithCrlf: keys count
    # lines from 1 (header lines too), no "\n" or "\r\n" in values, a last line without
    # a newline is read.
    files = []
    for i in range(2):
        fn = str(tmp_path / f"text_line.{i}.txt")
        with open(fn, "wb") as f:
            f.write(b"ABC\r\n")                      # the header
            for j in range(5):
                f.write(b"%d: %d" % (i, j))
                if j + 1 != 5 or i == 0:
                    f.write(b"\r\n")
        files.append(fn)
    reader = tf.TextLineReader(skip_header_lines=1, name="test_reader")
    queue = tf.FIFOQueue(99, [tf.string], shapes=())
    key, value = reader.read(queue)
    sess.run(queue.enqueue_many([files]))
    sess.run(queue.close())
    for i in range(2):
        for j in range(5):
            k, v = sess.run([key, value])
            assert k == f"{files[i]}:{j + 2}".encode()
            assert v == b"%d: %d" % (i, j)
    with pytest.raises(errors.OutOfRangeError):
        sess.run(key)


def test_fixed_length_record_reader_header_footer_keys(tmp_path, sess):
    # FixedLengthRecordReaderTest.testOneEpoch: header_bytes=5, record_bytes=3,
    # footer_bytes=2; key "<file>:<record number>" from 0.
    files = []
    for i in range(2):
        fn = str(tmp_path / f"fixed_length_record.{i}.txt")
        with open(fn, "wb") as f:
            f.write(b"H" * 5)
            for j in range(7):
                f.write(bytes([ord("0") + (i * 7 + j) % 10]) * 3)
            f.write(b"F" * 2)
        files.append(fn)
    reader = tf.FixedLengthRecordReader(header_bytes=5, record_bytes=3, footer_bytes=2)
    queue = tf.FIFOQueue(99, [tf.string], shapes=())
    key, value = reader.read(queue)
    sess.run(queue.enqueue_many([files]))
    sess.run(queue.close())
    for i in range(2):
        for j in range(7):
            k, v = sess.run([key, value])
            assert k == f"{files[i]}:{j}".encode()
            assert v == bytes([ord("0") + (i * 7 + j) % 10]) * 3
    with pytest.raises(errors.OutOfRangeError):
        sess.run(key)


def test_whole_file_reader_and_reset(tmp_path, sess):
    # WholeFileReaderTest.testOneEpoch / testInfiniteEpochs; IdentityReaderTest.testReset.
    contents = [b"foo", b"bar", b""]
    files = []
    for i, c in enumerate(contents):
        fn = str(tmp_path / f"whole_file.{i}.txt")
        with open(fn, "wb") as f:
            f.write(c)
        files.append(fn)
    reader = tf.WholeFileReader("test_reader")
    queue = tf.FIFOQueue(99, [tf.string], shapes=())
    key, value = reader.read(queue)
    sess.run(queue.enqueue_many([files]))
    for fn, c in zip(files[:2], contents[:2]):
        assert sess.run([key, value]) == [fn.encode(), c]
    assert sess.run(reader.num_records_produced()) == 2
    sess.run(reader.reset())
    assert sess.run(reader.num_records_produced()) == 0
    assert sess.run([key, value]) == [files[2].encode(), b""]


def _flip(path, index):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[index] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))


def test_reader_errors_missing_file_and_corrupt_record(tmp_path, sess):
    fn = str(tmp_path / "bad.tfrecord")
    with tf.python_io.TFRecordWriter(fn) as w:
        w.write(b"good")
        w.write(b"will be corrupted")
    _flip(fn, -6)                                      # a byte of the second record
    reader = tf.TFRecordReader()
    queue = tf.FIFOQueue(9, [tf.string], shapes=())
    key, value = reader.read(queue)
    sess.run(queue.enqueue_many([[fn, str(tmp_path / "missing")]]))
    assert sess.run(value) == b"good"
    with pytest.raises(errors.DataLossError, match=r"corrupted record at 20 in file"):
        sess.run(value)
    with pytest.raises(errors.NotFoundError, match="missing"):
        sess.run(value)


# ---- producers (input_test.py) ----------------------------------------------------------------


def test_limit_epochs_and_local_init(sess):
    # LimitEpochsTest.testNoLimit/testLimit: the tensor computed num_epochs times, then
    # OutOfRange("Reached limit of 2"); uninitialized: FailedPrecondition.
    love_me = tf.constant("Love Me")
    love_me_two_times = tf.train.limit_epochs(love_me, num_epochs=2)
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized value"):
        sess.run(love_me_two_times)
    sess.run(tf.local_variables_initializer())
    assert sess.run(love_me_two_times) == b"Love Me"
    assert sess.run(love_me_two_times) == b"Love Me"
    with pytest.raises(errors.OutOfRangeError, match="Reached limit of 2"):
        sess.run(love_me_two_times)
    with pytest.raises(ValueError, match="num_epochs must be > 0 not 0"):
        tf.train.limit_epochs(love_me, num_epochs=0)


def test_string_input_producer_no_shuffle_counts_epochs(sess):
    # StringInputProducerTest.testNoShuffle: 3 epochs of the strings in order, then the
    # queue closes.
    strings = [b"to", b"be", b"or", b"not", b"to", b"be"]
    num_epochs = 3
    queue = tf.train.string_input_producer(strings, num_epochs=num_epochs, shuffle=False)
    dequeue_many = queue.dequeue_many(len(strings) * num_epochs)
    dequeue = queue.dequeue()
    sess.run(tf.local_variables_initializer())
    assert len(tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)) == 1
    coord, threads = _run_threads(sess)
    assert sess.run(dequeue_many).tolist() == strings * num_epochs
    with pytest.raises(errors.OutOfRangeError):
        sess.run(dequeue)
    coord.request_stop()
    coord.join(threads)
    with pytest.raises(ValueError, match="requires a non-null input tensor"):
        tf.train.string_input_producer([])


def test_string_input_producer_shuffle_is_seeded(sess):
    # StringInputProducerTest.testShuffle: each epoch a permutation; with a seed the same
    # permutations in a new graph.
    strings = [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]

    def epochs(seed):
        tf.reset_default_graph()
        q = tf.train.string_input_producer(strings, num_epochs=3, shuffle=True, seed=seed)
        many = q.dequeue_many(len(strings) * 3)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            c, th = _run_threads(s)
            out = s.run(many).tolist()
            c.request_stop()
            c.join(th)
        return [out[i * 8:(i + 1) * 8] for i in range(3)]
    a, b = epochs(7), epochs(7)
    assert a == b
    assert all(sorted(e) == strings for e in a)
    assert len({tuple(e) for e in a}) > 1                 # a new order each epoch


def test_range_and_slice_input_producer(sess):
    # RangeInputProducerTest.testNoShuffle, SliceInputProducerTest.testNoShuffle.
    q = tf.train.range_input_producer(5, num_epochs=2, shuffle=False)
    many = q.dequeue_many(10)
    source_strings = [b"Alpha", b"Beta", b"Delta", b"Gamma"]
    source_ints = [2, 3, 5, 7]
    slices = tf.train.slice_input_producer([source_strings, source_ints], num_epochs=2,
                                           shuffle=False)
    sess.run(tf.local_variables_initializer())
    coord, threads = _run_threads(sess)
    assert sess.run(many).tolist() == list(range(5)) * 2
    got = [sess.run(slices) for _ in range(8)]
    assert [(s, int(i)) for s, i in got] == list(zip(source_strings, source_ints)) * 2
    with pytest.raises(errors.OutOfRangeError):
        sess.run(slices)
    coord.request_stop()
    coord.join(threads)


def test_match_filenames_once(tmp_path, sess):
    # MatchFilenamesOnceTest.testOne: the matching files, sorted, a local variable.
    for name in ("A", "B", "C", "AA"):
        (tmp_path / f"match_filenames.{name}").write_bytes(b"")
    star = tf.train.match_filenames_once(str(tmp_path / "match_filenames.?"))
    question = tf.train.match_filenames_once(str(tmp_path / "match_filenames.A*"))
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized value"):
        sess.run(star)
    sess.run(tf.local_variables_initializer())
    assert sess.run(star).tolist() == sess.run(star.value()).tolist() == [
        os.fsencode(str(tmp_path / f"match_filenames.{n}")) for n in "ABC"]
    assert sess.run(question.value()).tolist() == [
        os.fsencode(str(tmp_path / f"match_filenames.{n}")) for n in ("A", "AA")]


# ---- batching (input_test.py BatchTest, ShuffleBatchTest) --------------------------------------


def test_batch_one_thread_and_smaller_final_batch(sess):
    # BatchTest.testOneThread / testOneThreadSmallerBatch: batches in order; the last
    # smaller with allow_smaller_final_batch, then OutOfRange.
    extra = 5
    batch_size, num_batches = 10, 3
    counter = tf.train.range_input_producer(num_batches * batch_size + extra, num_epochs=1,
                                            shuffle=False).dequeue()
    batched = tf.train.batch([counter, "string"], batch_size=batch_size,
                             allow_smaller_final_batch=True)
    assert batched[0].shape.as_list() == [None]
    sess.run(tf.local_variables_initializer())
    coord, threads = _run_threads(sess)
    for i in range(num_batches):
        ints, strs = sess.run(batched)
        assert ints.tolist() == list(range(i * batch_size, (i + 1) * batch_size))
        assert strs.tolist() == [b"string"] * batch_size
    ints, strs = sess.run(batched)
    assert ints.tolist() == list(range(30, 35)) and len(strs) == extra
    with pytest.raises(errors.OutOfRangeError):
        sess.run(batched)
    coord.request_stop()
    coord.join(threads)


def test_batch_dict_single_tensor_enqueue_many_and_dynamic_pad(sess):
    # TF's _as_original_type: a dict comes back as a dict, a one-element list as a tensor;
    # BatchTest.testOneThreadDynamicPad: None dimensions padded with zeros.
    x = tf.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
    d = tf.train.batch({"x": x, "y": x * 2}, batch_size=3)
    assert sorted(d) == ["x", "y"]
    single = tf.train.batch([tf.constant(np.arange(4, dtype=np.int32))], batch_size=2,
                            enqueue_many=True)
    assert isinstance(single, tf.Tensor) and single.shape.as_list() == [2]
    p = tf.placeholder_with_default(np.arange(3, dtype=np.int32), [None])
    padded = tf.train.batch([p], batch_size=2, dynamic_pad=True, shapes=[[None]])
    sess.run(tf.local_variables_initializer())
    coord, threads = _run_threads(sess)
    out = sess.run(d)
    assert out["x"].tolist() == [0, 1, 2] and out["y"].tolist() == [0, 2, 4]
    assert sess.run(single).tolist() == [0, 1]
    assert sess.run(padded).tolist() == [[0, 1, 2], [0, 1, 2]]
    coord.request_stop()
    coord.join(threads)
    with pytest.raises(ValueError, match="Cannot infer Tensor's rank"):
        tf.train.batch([tf.placeholder(tf.float32)], 2)


def _shuffled_batches(seed, n=40, batch_size=8):
    tf.reset_default_graph()
    x = tf.train.range_input_producer(n, num_epochs=1, shuffle=False).dequeue()
    b = tf.train.shuffle_batch([x], batch_size, capacity=32, min_after_dequeue=10, seed=seed)
    out = []
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        coord, threads = _run_threads(s)
        try:
            while True:
                out.append(s.run(b).tolist())
        except errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    return out


def test_shuffle_batch_is_a_seeded_shuffle():
    # ShuffleBatchTest.testOneThread: every example once (whole batches only), shuffled;
    # the same seed gives the same batches.
    a, b, c = _shuffled_batches(5), _shuffled_batches(5), _shuffled_batches(6)
    assert len(a) == 5 and all(len(x) == 8 for x in a)
    flat = sorted(v for batch in a for v in batch)
    assert flat == list(range(40))
    assert a == b and a != c
    assert [v for batch in a for v in batch] != list(range(40))


def test_batch_join_and_shuffle_batch_join(sess):
    # BatchJoinTest.testTwoThreads: each list's examples arrive, none mixed.
    a = tf.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
    b = tf.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue() + 100
    joined = tf.train.batch_join([[a], [b]], batch_size=4, allow_smaller_final_batch=True)
    sess.run(tf.local_variables_initializer())
    coord, threads = _run_threads(sess)
    seen = []
    try:
        while True:
            seen.extend(sess.run(joined).tolist())
    except errors.OutOfRangeError:
        pass
    coord.request_stop()
    coord.join(threads)
    assert sorted(seen) == list(range(6)) + list(range(100, 106))
    tf.reset_default_graph()
    x = tf.train.range_input_producer(4, shuffle=False).dequeue()
    sj = tf.train.shuffle_batch_join([[x], [x]], 2, capacity=8, min_after_dequeue=2, seed=1)
    assert sj.shape.as_list() == [2]


# ---- the training loop --------------------------------------------------------------------


def _write_examples(path, n, offset=0):
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(n):
            v = float(i + offset)
            ex = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[v, 1.0])),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=[2.0 * v + 1.0])),
            }))
            w.write(ex.SerializeToString())


def _pipeline(files, num_epochs, batch_size=4, seed=3):
    fq = tf.train.string_input_producer(files, num_epochs=num_epochs, seed=seed)
    _, value = tf.TFRecordReader().read(fq)
    feat = tf.parse_single_example(value, {"x": tf.FixedLenFeature([2], tf.float32),
                                           "y": tf.FixedLenFeature([1], tf.float32)})
    return tf.train.shuffle_batch(feat, batch_size, capacity=20, min_after_dequeue=5,
                                  seed=seed, allow_smaller_final_batch=True)


def test_monitored_session_stops_at_the_end_of_the_epochs(tmp_path):
    # monitored_session.py: the OutOfRangeError of the last epoch ends the with block
    # normally; the Scaffold's default local_init_op initialized the epoch counter.
    files = [str(tmp_path / f"d{i}.tfrecord") for i in range(2)]
    for i, f in enumerate(files):
        _write_examples(f, 6, offset=10 * i)
    # TF's idiom: the file list a local variable (match_filenames_once), set by the same
    # local_init_op as the epoch counter.
    batch = _pipeline(tf.train.match_filenames_once(str(tmp_path / "d*.tfrecord")),
                      num_epochs=3)
    w = tf.Variable(np.zeros((2, 1), np.float32), name="w")

    @tf.function
    def loss_fn(w, x, y):
        import autograd.numpy as anp
        return anp.mean((x @ w - y) ** 2)
    loss = loss_fn(w, batch["x"], batch["y"])
    train = tf.train.GradientDescentOptimizer(1e-3).minimize(
        loss, global_step=tf.train.get_or_create_global_step())
    seen = 0
    with tf.train.MonitoredTrainingSession() as mon:
        while not mon.should_stop():
            _, n = mon.run([train, tf.shape(batch["y"])])
            seen += int(n[0])
    assert seen == 2 * 6 * 3


def test_a_corrupt_record_reaches_the_training_loop(tmp_path):
    # A reader thread's DataLossError stops the coordinator; the loop's run raises it (TF's
    # _CoordinatedSession.run: coord.raise_requested_exception), no hang.
    good, bad = str(tmp_path / "good.tfrecord"), str(tmp_path / "bad.tfrecord")
    _write_examples(good, 50)
    _write_examples(bad, 50)
    _flip(bad, os.path.getsize(bad) // 2)
    batch = _pipeline([good, bad], num_epochs=None)
    tf.train.get_or_create_global_step()
    t0 = time.monotonic()
    with pytest.raises(errors.DataLossError, match="bad.tfrecord"):
        with tf.train.MonitoredTrainingSession() as mon:
            while not mon.should_stop():
                mon.run(batch)
    assert time.monotonic() - t0 < 30


def test_supervisor_starts_queue_runners(tmp_path):
    files = [str(tmp_path / "d.tfrecord")]
    _write_examples(files[0], 8)
    batch = _pipeline(files, num_epochs=2, batch_size=4)
    tf.train.get_or_create_global_step()
    sv = tf.train.Supervisor(logdir=None)
    n = 0
    with sv.managed_session() as s:
        while not sv.should_stop():
            n += len(s.run(batch["y"]))
    assert n == 16


def test_queue_runner_threads_end_when_the_session_closed_first():
    # A script that closes its session before stopping the coordinator: the cancel thread
    # still closes the queue, so blocked enqueue threads end (no wait for the grace period).
    q = tf.FIFOQueue(1, tf.int32, shapes=())
    qr = tf.train.QueueRunner(q, [q.enqueue(1)] * 2)
    s = tf.Session()
    coord = tf.train.Coordinator()
    threads = qr.create_threads(s, coord=coord, start=True)
    time.sleep(0.2)                        # one element in, both threads blocked
    assert int(s.run(q.size())) == 1
    s.close()
    t0 = time.monotonic()
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)
    assert time.monotonic() - t0 < 5 and not any(t.is_alive() for t in threads)


def test_a_step_waiting_for_input_holds_no_session_lock(sess):
    # The training step's dequeue waits before the run takes the session's lock, so a
    # producer whose enqueue reads a ps variable (its run takes the lock) still fills it.
    v = tf.Variable(3.0, name="v")
    q = tf.FIFOQueue(2, tf.float32, shapes=())
    enqueue = q.enqueue(v * 2.0)
    w = tf.Variable(1.0, name="w")
    loss = tf.square(w - q.dequeue())
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    sess.run(tf.global_variables_initializer())

    def produce():
        time.sleep(0.3)
        sess.run(enqueue)
    t = threading.Thread(target=produce)
    t.start()
    assert float(sess.run(train)) == pytest.approx(25.0)    # (1 - 6)^2, from the queue
    t.join(5)
    assert float(sess.run(w)) == pytest.approx(1.0 - 0.25 * 2 * (1.0 - 6.0))


def test_batch_of_var_len_features_is_a_sparse_tensor(tmp_path, sess):
    # input_test.py BatchTest.testOneThreadWithSparse-like: a VarLenFeature of each
    # example batched into one SparseTensor [batch, longest].
    fn = str(tmp_path / "v.tfrecord")
    with tf.python_io.TFRecordWriter(fn) as w:
        for vals in ([1], [2, 3], [], [4, 5, 6]):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "v": tf.train.Feature(int64_list=tf.train.Int64List(value=vals)),
                "k": tf.train.Feature(int64_list=tf.train.Int64List(value=[len(vals)])),
            })).SerializeToString())
    fq = tf.train.string_input_producer([fn], num_epochs=1, shuffle=False)
    _, ser = tf.TFRecordReader().read(fq)
    feat = tf.parse_single_example(ser, {"v": tf.VarLenFeature(tf.int64),
                                         "k": tf.FixedLenFeature([], tf.int64)})
    b = tf.train.batch(feat, batch_size=4)
    assert isinstance(b["v"], tf.SparseTensor)
    sess.run(tf.local_variables_initializer())
    coord, threads = _run_threads(sess)
    out = sess.run(b)
    coord.request_stop()
    coord.join(threads)
    assert out["k"].tolist() == [1, 2, 0, 3]
    v = out["v"]
    assert v.indices.tolist() == [[0, 0], [1, 0], [1, 1], [3, 0], [3, 1], [3, 2]]
    assert v.values.tolist() == [1, 2, 3, 4, 5, 6]
    assert v.dense_shape.tolist() == [4, 3]


def test_start_queue_runners_needs_the_session():
    q = tf.train.range_input_producer(3)
    assert q.dtypes == [np.dtype(np.int32)]
    with pytest.raises(ValueError, match="Pass the session"):
        tf.train.start_queue_runners()


def test_input_continues_after_the_session_is_recreated(tmp_path):
    # MonitoredSession recovery (an UnavailableError: a ps task was lost) re-creates the
    # session and restarts the queue runners: the queues the old coordinator closed open
    # again and every example is still read once per epoch.
    x = tf.train.range_input_producer(40, num_epochs=2, shuffle=False).dequeue()
    batch = tf.train.batch([x], 5)
    tf.train.get_or_create_global_step()

    class Preempt(tf.train.SessionRunHook):
        def __init__(self):
            self.runs = 0

        def before_run(self, run_context):
            self.runs += 1
            if self.runs == 3:
                raise errors.UnavailableError(None, None, "ps task lost (test)")

    seen = []
    with tf.train.MonitoredSession(hooks=[Preempt()]) as mon:
        while not mon.should_stop():
            seen.extend(mon.run(batch).tolist())
    assert mon.should_stop()
    # Nothing is lost: elements already dequeued by the old session's threads stay queued
    # (the epoch counter is a local variable, initialized again by the new session).
    assert sorted(set(seen)) == list(range(40))
    assert len(seen) >= 80
