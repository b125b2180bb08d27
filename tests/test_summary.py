"""Tests for psrt.summary: summary ops run by a real Session (a private in-process ps), and
event files written by FileWriter read back with TensorBoard's own EventAccumulator.

TF1's reference: tensorflow/python/summary/summary.py (scalar, histogram, text, merge,
merge_all, collections), summary_op_util.py (tag cleaning and uniqueness, family),
writer/writer.py (add_summary with bytes or a proto, metadata kept on a tag's first value
only, add_session_log, warnings once closed, reopen), writer_cache.py (FileWriterCache),
core/lib/histogram/histogram.cc (bucket limits, collapsed empty buckets) and
core/kernels/summary_op.cc (NaN/Infinity errors, duplicate tags in merge).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator as ea

import psrt
from psrt import errors


@pytest.fixture(autouse=True)
def fresh_graph():
    psrt.reset_default_graph()
    yield
    psrt.reset_default_graph()
    psrt.summary.FileWriterCache.clear()


def read_events(logdir) -> ea.EventAccumulator:
    """Every event of ``logdir``, read by TensorBoard (nothing sampled away)."""
    acc = ea.EventAccumulator(str(logdir), size_guidance={
        ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0, ea.COMPRESSED_HISTOGRAMS: 0})
    acc.Reload()
    return acc


def scalars(acc: ea.EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def parse(serialized: bytes):
    assert isinstance(serialized, bytes)
    return psrt.Summary.FromString(serialized)


class Model:
    """W [2, 3], a scalar c, the global step, and a plain SGD train op whose loss function
    takes the feed ``x``: loss = x * sum(W), gradient x everywhere."""

    def __init__(self) -> None:
        self.W = psrt.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="W")
        self.c = psrt.Variable(np.float32(2.5), name="c")
        self.global_step = psrt.train.get_or_create_global_step()
        self.losses_computed = 0

        def loss_fn(W, x):
            self.losses_computed += 1
            return float(x * W.sum()), [np.full(W.shape, x, np.float32)]

        self.train_op = psrt.train.GradientDescentOptimizer(0.5).minimize(
            loss_fn, var_list=[self.W], global_step=self.global_step)


@pytest.fixture
def model_sess():
    m = Model()
    sess = psrt.Session()
    sess.run(psrt.global_variables_initializer())
    yield m, sess
    sess.close()


# ---- the protocol buffers ----------------------------------------------------------------------

def test_summary_protos_are_tf1s_and_load_lazily():
    s = psrt.Summary(value=[psrt.Summary.Value(tag="acc", simple_value=0.25)])
    assert psrt.summary.Summary is psrt.Summary
    assert psrt.Summary.FromString(s.SerializeToString()).value[0].simple_value == 0.25
    assert psrt.summary.SessionLog.START == 1 and psrt.summary.SessionLog.CHECKPOINT == 3
    assert psrt.summary.Event(step=3).step == 3
    with pytest.raises(AttributeError, match="no attribute 'audio'"):
        psrt.summary.audio  # noqa: B018
    # Importing psrt does not import tensorboardX (~70 ms): only summary users pay for it.
    code = ("import sys, psrt; assert 'tensorboardX' not in sys.modules; psrt.Summary; "
            "assert 'tensorboardX' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                       psrt.__file__)) + os.pathsep + os.environ.get("PYTHONPATH", "")))


# ---- scalar ------------------------------------------------------------------------------------

def test_scalar_of_a_variable_a_feed_a_function_and_a_constant(model_sess):
    m, sess = model_sess
    ops = [psrt.summary.scalar("c_value", m.c), psrt.summary.scalar("x_fed", "x"),
           psrt.summary.scalar("x_twice", lambda x: 2 * x),
           psrt.summary.scalar("rate", 0.125), psrt.summary.scalar("all_feeds",
                                                                    lambda **f: len(f))]
    values = sess.run(ops, feed_dict={"x": 3.0, "y": 1})
    got = [(v.tag, v.simple_value) for s in values for v in parse(s).value]
    assert got == [("c_value", 2.5), ("x_fed", 3.0), ("x_twice", 6.0), ("rate", 0.125),
                   ("all_feeds", 2.0)]
    assert m.losses_computed == 0 and sess.run(m.global_step) == 0  # nothing trained
    # A feed given by a placeholder-like object with a name, and with TF's ":0".
    named = type("Placeholder", (), {"name": "x:0"})()
    assert parse(sess.run(psrt.summary.scalar("p", named), {"x": 4.0})).value[0] \
        .simple_value == 4.0
    assert parse(sess.run(psrt.summary.scalar("q", "x:0"), {named: 5.0})).value[0] \
        .simple_value == 5.0


def test_scalar_of_a_train_op_is_the_loss_of_that_runs_step(model_sess):
    m, sess = model_sess
    loss_summary = psrt.summary.scalar("loss", m.train_op)
    loss, summary, step = sess.run([m.train_op, loss_summary, m.global_step], {"x": 1.0})
    assert (loss, step) == (15.0, 1)                      # sum(0..5) at x = 1
    assert parse(summary).value[0].simple_value == 15.0   # the same step's loss, once
    assert m.losses_computed == 1
    # In a dict, beside hooks' fetches, as a MonitoredSession merges them.
    out = sess.run({"caller": [m.train_op], "hooks": {"s": [loss_summary]}}, {"x": 1.0})
    assert parse(out["hooks"]["s"][0]).value[0].simple_value == out["caller"][0] == 12.0
    assert sess.run(m.global_step) == 2 and m.losses_computed == 2


def test_scalar_of_a_train_op_never_trains_by_itself(model_sess):
    m, sess = model_sess
    loss_summary = psrt.summary.scalar("loss", m.train_op)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"scalar summary 'loss' reads the loss of train op "
                             r"'GradientDescent'.*sess.run\(\[train_op, summary_op\]\)"):
        sess.run(loss_summary, {"x": 1.0})
    # The failed run ran nothing, not even the other fetches.
    with pytest.raises(errors.InvalidArgumentError):
        sess.run([m.W.assign(np.zeros((2, 3), np.float32)), loss_summary], {"x": 1.0})
    assert m.losses_computed == 0 and sess.run(m.global_step) == 0
    np.testing.assert_array_equal(sess.run(m.W), np.arange(6).reshape(2, 3))


def test_scalar_missing_feed_and_bad_values(model_sess):
    m, sess = model_sess
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"You must feed a value for 'x' \(read by scalar summary 'x'\)"):
        sess.run(psrt.summary.scalar("x", "x"))
    with pytest.raises(errors.InvalidArgumentError, match="You must feed a value for 'y'"):
        sess.run([m.train_op, psrt.summary.scalar("f", lambda y: y)], {"x": 1.0})
    assert m.losses_computed == 0 and sess.run(m.global_step) == 0  # the run ran nothing
    assert parse(sess.run(psrt.summary.scalar("d", lambda y=7: y))).value[0].simple_value == 7
    # A name nothing feeds is the variable of that name.
    assert parse(sess.run(psrt.summary.scalar("by_name", "c"))).value[0].simple_value == 2.5
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"scalar summary 'v' takes one real number; got float32\[2\]"):
        sess.run(psrt.summary.scalar("v", "x"), {"x": np.zeros(2, np.float32)})
    with pytest.raises(ValueError, match=r"variable 'W' has shape \[2, 3\]"):
        psrt.summary.scalar("w", m.W)
    with pytest.raises(TypeError, match="cannot summarize"):
        psrt.summary.scalar("o", object())
    with pytest.raises(ValueError, match="needs a name"):
        psrt.summary.scalar("", 1.0)


def test_scalar_nan_is_written_as_tf_does(model_sess):
    _, sess = model_sess
    value = parse(sess.run(psrt.summary.scalar("n", float("nan")))).value[0].simple_value
    assert math.isnan(value)


# ---- names, tags and collections --------------------------------------------------------------

def test_tags_are_cleaned_made_unique_and_prefixed_by_family():
    v = psrt.Variable(np.float32(1), name="w")
    a = psrt.summary.scalar("loss", 1.0)
    b = psrt.summary.scalar("loss", 2.0)
    c = psrt.summary.scalar("w", v)                  # the variable's name is taken, as TF
    d = psrt.summary.scalar("bad name!", 3.0)
    e = psrt.summary.scalar("/lead", 4.0)
    f = psrt.summary.scalar("acc", 5.0, family="eval")
    g = psrt.summary.scalar("acc", 6.0, family="eval")
    assert [op.tags[0] for op in (a, b, c, d, e, f, g)] == [
        "loss", "loss_1", "w_1", "bad_name_", "lead", "eval/eval/acc", "eval/eval/acc_1"]
    assert (a.name, f.name) == ("loss", "eval/acc")
    assert a.op is a and a.dtype == "string"


def test_collections_merge_and_merge_all(model_sess):
    m, sess = model_sess
    assert psrt.summary.merge_all() is None               # no summaries yet: None, as TF
    a = psrt.summary.scalar("a", 1.0)
    h = psrt.summary.histogram("h", m.W)
    t = psrt.summary.text("t", "hello")
    hidden = psrt.summary.scalar("hidden", 2.0, collections=[])
    ev = psrt.summary.scalar("ev", 3.0, collections=["eval"])
    graph = psrt.get_default_graph()
    assert graph.get_collection(psrt.summary.SUMMARIES) == [a, h, t]
    merged = psrt.summary.merge_all()
    assert merged.tags == ["a", "h", "t"] and graph.get_collection("summaries") == [a, h, t]
    assert [v.tag for v in parse(sess.run(merged)).value] == ["a", "h", "t"]
    assert [v.tag for v in parse(sess.run(psrt.summary.merge_all("eval"))).value] == ["ev"]
    assert psrt.summary.merge_all(scope="h").tags == ["h"]
    assert psrt.summary.merge_all(scope="nothing") is None
    # merge: ops, merges of ops, serialized Summary bytes and protos, in order.
    inner = psrt.summary.merge([hidden, a])
    by_hand = psrt.Summary(value=[psrt.Summary.Value(tag="by_hand", simple_value=9.0)])
    mixed = psrt.summary.merge([inner, by_hand.SerializeToString(), ev], name="mixed",
                               collections=["mine"])
    assert graph.get_collection("mine") == [mixed] and mixed.name == "mixed"
    assert [(v.tag, v.simple_value) for v in parse(sess.run(mixed)).value] == [
        ("hidden", 2.0), ("a", 1.0), ("by_hand", 9.0), ("ev", 3.0)]
    with pytest.raises(errors.InvalidArgumentError,
                       match="Duplicate tag a found in summary inputs"):
        sess.run(psrt.summary.merge([a, inner]))
    with pytest.raises(TypeError, match="merge: inputs must be summary ops"):
        psrt.summary.merge([m.W])


def test_summaries_cannot_be_added_to_a_finalized_graph():
    psrt.get_default_graph().finalize()
    with pytest.raises(RuntimeError, match="Graph is finalized"):
        psrt.summary.scalar("late", 1.0)


# ---- histogram ---------------------------------------------------------------------------------

def tf_bucket_limits() -> list[float]:
    """histogram.cc's InitDefaultBucketsInner, written out again."""
    pos, v = [], 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


def tf_histogram(values) -> tuple[list[float], list[float]]:
    """(bucket_limit, bucket) of TF's Histogram::Add then EncodeToProto, value by value."""
    limits = tf_bucket_limits()
    counts = [0.0] * len(limits)
    for x in values:
        counts[next(i for i, lim in enumerate(limits) if lim > x)] += 1
    out_limits, out_counts, i = [], [], 0
    while i < len(counts):
        end, count = limits[i], counts[i]
        i += 1
        if count <= 0:
            while i < len(counts) and counts[i] <= 0:
                end, count = limits[i], counts[i]
                i += 1
        out_limits.append(end)
        out_counts.append(count)
    return out_limits, out_counts


def test_histogram_has_tfs_buckets_and_statistics(model_sess, tmp_path):
    m, sess = model_sess
    values = np.array([-3.0, 0.0, 0.0, 1.0, 1.0, 2.5, 1e-13, 7e6], np.float64)
    h_var = psrt.summary.histogram("weights", m.W)
    h_feed = psrt.summary.histogram("fed", "v")
    got_var, got_feed = sess.run([h_var, h_feed], {"v": values})
    for serialized, data in [(got_var, np.arange(6.0)), (got_feed, values)]:
        histo = parse(serialized).value[0].histo
        limits, counts = tf_histogram(data)
        assert list(histo.bucket_limit) == limits
        assert list(histo.bucket) == counts
        assert (histo.min, histo.max, histo.num) == (data.min(), data.max(), data.size)
        assert histo.sum == pytest.approx(data.sum())
        assert histo.sum_squares == pytest.approx((data * data).sum())
    # An empty histogram is one empty bucket at DBL_MAX, as TF's.
    empty = parse(sess.run(h_feed, {"v": np.zeros(0)})).value[0].histo
    assert (list(empty.bucket_limit), list(empty.bucket), empty.num) == (
        [sys.float_info.max], [0.0], 0.0)
    # TensorBoard reads them as histograms and distributions.
    with psrt.summary.FileWriter(tmp_path) as writer:
        writer.add_summary(got_var, 7)
    acc = read_events(tmp_path)
    assert acc.Tags()["histograms"] == ["weights"]
    [event] = acc.Histograms("weights")
    assert (event.step, event.histogram_value.num, event.histogram_value.max) == (7, 6, 5.0)
    assert acc.CompressedHistograms("weights")[0].step == 7


@pytest.mark.parametrize("bad, word", [(float("nan"), "Nan"), (float("inf"), "Infinity"),
                                        (-float("inf"), "Infinity")])
def test_histogram_of_nan_or_infinity_fails_as_tf(model_sess, bad, word):
    _, sess = model_sess
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"^{word} in summary histogram for: h$"):
        sess.run(psrt.summary.histogram("h", "v"), {"v": [1.0, bad]})
    with pytest.raises(errors.InvalidArgumentError, match="takes real numbers"):
        sess.run(psrt.summary.histogram("s", "v"), {"v": ["a"]})


# ---- text --------------------------------------------------------------------------------------

def test_text_of_a_string_and_a_table_for_tensorboards_text_plugin(model_sess, tmp_path):
    _, sess = model_sess
    note = psrt.summary.text("note", "lr = **0.5**")     # a str is the text, not a name
    table = psrt.summary.text("table", lambda rows: rows)
    rows = np.array([["a", "b"], ["c", "d"]])
    with psrt.summary.FileWriter(tmp_path) as writer:
        writer.add_summary(sess.run(note), 1)
        writer.add_summary(sess.run(table, {"rows": rows}), 1)
        writer.add_summary(sess.run(note), 2)
    acc = read_events(tmp_path)
    assert sorted(acc.Tags()["tensors"]) == ["note", "table"]
    assert [e.step for e in acc.Tensors("note")] == [1, 2]
    proto = acc.Tensors("note")[0].tensor_proto
    assert list(proto.string_val) == [b"lr = **0.5**"] and proto.dtype == 7  # DT_STRING
    proto = acc.Tensors("table")[0].tensor_proto
    assert list(proto.string_val) == [b"a", b"b", b"c", b"d"]
    assert [d.size for d in proto.tensor_shape.dim] == [2, 2]
    assert acc.SummaryMetadata("note").plugin_data.plugin_name == "text"
    with pytest.raises(errors.InvalidArgumentError, match="text summary 'bad' takes str"):
        sess.run(psrt.summary.text("bad", lambda: 3))


# ---- FileWriter --------------------------------------------------------------------------------

def test_file_writer_writes_what_tensorboard_reads(model_sess, tmp_path):
    m, sess = model_sess
    loss = psrt.summary.scalar("loss", m.train_op)
    merged = psrt.summary.merge_all()
    logdir = tmp_path / "logs"                          # created by the writer, as TF's
    writer = psrt.summary.FileWriter(str(logdir), graph=psrt.get_default_graph())
    assert writer.get_logdir() == str(logdir) and os.path.isdir(logdir)
    writer.add_session_log(psrt.summary.SessionLog(status=psrt.summary.SessionLog.START), 0)
    losses = []
    for _ in range(5):
        loss_value, summary, step = sess.run([m.train_op, merged, m.global_step], {"x": 0.5})
        writer.add_summary(summary, step)
        losses.append((step, loss_value))
    writer.add_summary(psrt.Summary(value=[psrt.Summary.Value(tag="acc", simple_value=0.75)]),
                       global_step=5)
    writer.flush()                      # readable before close: flush writes everything
    acc = read_events(logdir)
    assert scalars(acc, "loss") == [(s, pytest.approx(v)) for s, v in losses]
    assert scalars(acc, "acc") == [(5, 0.75)]
    assert not acc.Tags()["graph"]      # add_graph is accepted; psrt has no graph to write
    assert loss.tags == ["loss"]
    writer.close()
    writer.close()                       # idempotent
    [name] = os.listdir(logdir)
    assert name.startswith("events.out.tfevents.")
    assert writer.event_file_path == os.path.join(str(logdir), name)


def test_add_summary_takes_bytes_or_a_summary_not_the_op(tmp_path):
    op = psrt.summary.scalar("x", 1.0)
    with psrt.summary.FileWriter(tmp_path) as writer:
        with pytest.raises(TypeError, match=r"pass sess.run\(x\) rather than the op"):
            writer.add_summary(op, 1)
        with pytest.raises(TypeError, match="takes a serialized Summary"):
            writer.add_summary("x", 1)
        with pytest.raises(ValueError, match="only graph, or graph_def"):
            writer.add_graph(object(), graph_def=object())


def test_metadata_is_kept_on_a_tags_first_value_only_and_the_callers_proto_intact(tmp_path):
    first = psrt.Summary(value=[psrt.Summary.Value(tag="t", simple_value=1.0)])
    first.value[0].metadata.plugin_data.plugin_name = "scalars"
    second = psrt.Summary.FromString(first.SerializeToString())
    writer = psrt.summary.FileWriter(tmp_path)
    writer.add_summary(first, 1)
    writer.add_summary(second, 2)
    writer.close()
    assert second.value[0].HasField("metadata")      # the caller's object is unchanged
    from tensorboard.backend.event_processing import event_file_loader  # noqa: PLC0415

    events = list(event_file_loader.LegacyEventFileLoader(writer.event_file_path).Load())
    values = [e.summary.value[0] for e in events if e.HasField("summary")]
    assert [v.HasField("metadata") for v in values] == [True, False]


def test_closed_writer_warns_and_reopen_starts_a_new_file(tmp_path):
    writer = psrt.summary.FileWriter(tmp_path)
    one = psrt.Summary(value=[psrt.Summary.Value(tag="s", simple_value=1.0)])
    writer.add_summary(one, 1)
    writer.close()
    with pytest.warns(UserWarning, match="Attempting to use a closed FileWriter"):
        writer.add_summary(one, 2)
    with pytest.warns(UserWarning, match="closed FileWriter"):
        writer.flush()
    first_file = writer.event_file_path
    writer.reopen()
    writer.add_summary(one, 3)
    writer.close()
    assert writer.event_file_path != first_file
    assert len(os.listdir(tmp_path)) == 2
    assert scalars(read_events(tmp_path), "s") == [(1, 1.0), (3, 1.0)]


def test_writers_of_one_directory_in_one_second_do_not_clobber_each_other(tmp_path):
    writers = [psrt.summary.FileWriter(tmp_path) for _ in range(3)]
    for i, w in enumerate(writers):
        w.add_summary(psrt.Summary(value=[psrt.Summary.Value(tag=f"w{i}", simple_value=i)]),
                      i)
        w.close()
    assert len({w.event_file_path for w in writers}) == 3
    acc = read_events(tmp_path)
    assert sorted(acc.Tags()["scalars"]) == ["w0", "w1", "w2"]


def test_unclosed_writers_are_flushed_at_exit(tmp_path):
    code = ("import psrt; w = psrt.summary.FileWriter(r'%s', flush_secs=3600); "
            "w.add_summary(psrt.Summary(value=[psrt.Summary.Value(tag='late', "
            "simple_value=2.0)]), 9)" % tmp_path)
    subprocess.run([sys.executable, "-c", code], check=True,
                   env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                       psrt.__file__)) + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert scalars(read_events(tmp_path), "late") == [(9, 2.0)]


def test_file_writer_cache_shares_one_writer_per_directory(tmp_path):
    a = psrt.summary.FileWriterCache.get(tmp_path / "a")
    assert psrt.summary.FileWriterCache.get(str(tmp_path / "a")) is a
    b = psrt.summary.FileWriterCache.get(tmp_path / "b")
    assert b is not a
    psrt.summary.FileWriterCache.clear()
    with pytest.warns(UserWarning, match="closed FileWriter"):
        a.flush()                                        # clear() closed it
    assert psrt.summary.FileWriterCache.get(tmp_path / "a") is not a
