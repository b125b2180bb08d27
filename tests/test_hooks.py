"""Tests for psrt.hooks: TF1's basic_session_run_hooks_test.py cases, against fakes.

The fake session keeps the global step as an int. Fetching a ``TrainOp`` adds its
increment *before* any value in the same run is read, so a global step fetched beside a
train op is the post-increment value, as psrt's push reply delivers it. ``HookedSession``
merges hook fetches into one ``run()`` the way the MonitoredSession contract says.
"""

from __future__ import annotations

import logging
import importlib
import os
import sys
import types

import numpy as np
import pytest

import psrt
from psrt import errors
from psrt.training import basic_session_run_hooks as hooks
from psrt.training.saver_hooks import CheckpointSaverHook, CheckpointSaverListener, SummarySaverHook
from psrt.training.basic_session_run_hooks import FeedFnHook, FinalOpsHook, GlobalStepWaiterHook, LoggingTensorHook, NanLossDuringTrainingError, NanTensorHook, NeverTriggerTimer, SecondOrStepTimer, StepCounterHook, StopAtStepHook
from psrt.training.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues

MOCK_START_TIME = 1484695987.209386


# --------------------------------------------------------------------------------------
# Fakes
# --------------------------------------------------------------------------------------


class FakeVariable:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<FakeVariable %s>" % self.name


class TrainOp:
    """Adds ``increment`` to the global step when fetched; its value is None."""

    def __init__(self, increment=1):
        self.increment = increment


class Expr:
    """A fetch computed from the feed_dict."""

    def __init__(self, fn):
        self.fn = fn


class Exhausted:
    """A fetch whose input is used up."""


class FakeSession:
    def __init__(self, global_step, step=0, values=None):
        self.global_step = global_step
        self.step = step
        self.values = dict(values or {})
        self.run_calls = 0
        self.feeds = []

    def run(self, fetches, feed_dict=None):
        self.run_calls += 1
        self.feeds.append(feed_dict)
        for item in _leaves(fetches):
            if isinstance(item, TrainOp):
                self.step += item.increment
        return self._value(fetches, feed_dict or {})

    def _value(self, fetch, feed):
        if fetch is None or isinstance(fetch, TrainOp):
            return None
        if isinstance(fetch, list):
            return [self._value(f, feed) for f in fetch]
        if isinstance(fetch, tuple):
            return tuple(self._value(f, feed) for f in fetch)
        if isinstance(fetch, dict):
            return {k: self._value(v, feed) for k, v in fetch.items()}
        if isinstance(fetch, Expr):
            return fetch.fn(feed)
        if isinstance(fetch, Exhausted):
            raise errors.OutOfRangeError(None, None, "End of sequence")
        if fetch is self.global_step or fetch == self.global_step.name:
            return int(self.step)
        if isinstance(fetch, FakeVariable):
            return self.values[fetch.name]
        return self.values[fetch]


def _leaves(fetches):
    if isinstance(fetches, (list, tuple)):
        for f in fetches:
            yield from _leaves(f)
    elif isinstance(fetches, dict):
        for f in fetches.values():
            yield from _leaves(f)
    else:
        yield fetches


class HookedSession:
    """As TF's monitored_session._HookedSession: one merged run per call."""

    def __init__(self, sess, hook_list):
        self._sess = sess
        self._hooks = list(hook_list)
        self._should_stop = False

    def should_stop(self):
        return self._should_stop

    def run(self, fetches, feed_dict=None):
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        hook_args = [h.before_run(context) for h in self._hooks]
        merged_feed = dict(feed_dict or {})
        for args in hook_args:
            if args is not None and args.feed_dict:
                merged_feed.update(args.feed_dict)
        merged = {"user": fetches,
                  "hooks": [a.fetches if a is not None else None for a in hook_args]}
        out = self._sess.run(merged, feed_dict=merged_feed or None)
        for h, r in zip(self._hooks, out["hooks"]):
            h.after_run(context, SessionRunValues(results=r, options=None,
                                                  run_metadata=None))
        self._should_stop = self._should_stop or context.stop_requested
        return out["user"]


class MockCheckpointSaverListener(CheckpointSaverListener):
    def __init__(self):
        self.begin_count = 0
        self.before_save_count = 0
        self.after_save_count = 0
        self.end_count = 0
        self.ask_for_stop = False
        self.steps = []

    def begin(self):
        self.begin_count += 1

    def before_save(self, session, global_step_value):
        self.before_save_count += 1

    def after_save(self, session, global_step_value):
        self.after_save_count += 1
        self.steps.append(global_step_value)
        if self.ask_for_stop:
            return True
        return None

    def end(self, session, global_step_value):
        self.end_count += 1
        self.end_step = global_step_value

    def get_counts(self):
        return {"begin": self.begin_count, "before_save": self.before_save_count,
                "after_save": self.after_save_count, "end": self.end_count}


class FakeSaver:
    def __init__(self):
        self.saves = []

    def save(self, sess, save_path, global_step=None):
        self.saves.append((save_path, global_step))
        return "%s-%d" % (save_path, global_step)

    @property
    def steps(self):
        return [step for _, step in self.saves]


class FakeScaffold:
    def __init__(self, saver=None, summary_op=None):
        self.saver = saver
        self.summary_op = summary_op


class FakeSummaryWriter:
    """Records what hooks write, as TF's fake_summary_writer: ``summaries[step]`` is the
    list of ``(tag, simple_value)`` of the summaries written at that step."""

    def __init__(self):
        self.summaries = {}
        self.session_logs = []
        self.flushes = 0

    def add_summary(self, summary, global_step=None):
        if isinstance(summary, bytes):
            summary = psrt.Summary.FromString(summary)
        self.summaries.setdefault(global_step, []).extend(
            (v.tag, v.simple_value) for v in summary.value)

    def add_session_log(self, session_log, global_step=None):
        self.session_logs.append((session_log.status, global_step))

    def flush(self):
        self.flushes += 1


class Clock:
    def __init__(self, now):
        self.now = now


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


# The modules whose functions the hooks call, by the short name these tests use.
_HOOK_DEPENDENCIES = {"variables": "psrt.training.training_util",
                      "checkpoint": "psrt.checkpoint.saver"}


def _install_module(monkeypatch, name, **attrs):
    """Replaces the named functions of a module the hooks call for the test's duration."""
    module = importlib.import_module(_HOOK_DEPENDENCIES[name])
    for key, value in attrs.items():
        monkeypatch.setattr(module, key, value, raising=False)
    return module


@pytest.fixture
def gstep(monkeypatch):
    var = FakeVariable("global_step")
    _install_module(monkeypatch, "variables", get_global_step=lambda: var)
    return var


@pytest.fixture
def no_gstep(monkeypatch):
    _install_module(monkeypatch, "variables", get_global_step=lambda: None)


@pytest.fixture
def clock(monkeypatch):
    c = Clock(MOCK_START_TIME)
    monkeypatch.setattr(hooks.time, "monotonic", lambda: c.now)
    return c


@pytest.fixture(autouse=True)
def _close_cached_writers():
    """The hooks given an output directory share psrt.summary.FileWriterCache's writers."""
    yield
    psrt.summary.FileWriterCache.clear()


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG, logger="psrt")
    return caplog


def _messages(caplog, level=None):
    return [r.getMessage() for r in caplog.records
            if r.name == "psrt" and (level is None or r.levelno == level)]


# --------------------------------------------------------------------------------------
# session_run_hook
# --------------------------------------------------------------------------------------


def test_session_run_args_defaults_and_fields():
    args = SessionRunArgs("x")
    assert args == ("x", None, None)
    assert args.fetches == "x" and args.feed_dict is None and args.options is None
    assert SessionRunArgs(fetches=[1], feed_dict={"a": 1}).feed_dict == {"a": 1}
    assert SessionRunArgs._fields == ("fetches", "feed_dict", "options")


def test_session_run_values_fields():
    values = SessionRunValues(results=3, options=None, run_metadata=None)
    assert values.results == 3
    assert SessionRunValues._fields == ("results", "options", "run_metadata")


def test_session_run_context():
    args = SessionRunArgs("loss", {"x": 1})
    context = SessionRunContext(original_args=args, session="sess")
    assert context.original_args is args
    assert context.session == "sess"
    assert not context.stop_requested
    context.request_stop()
    assert context.stop_requested


def test_base_hook_does_nothing():
    hook = SessionRunHook()
    context = SessionRunContext(None, None)
    hook.begin()
    hook.after_create_session(None, None)
    assert hook.before_run(context) is None
    hook.after_run(context, SessionRunValues(None, None, None))
    hook.end(None)
    assert not context.stop_requested


# --------------------------------------------------------------------------------------
# SecondOrStepTimer
# --------------------------------------------------------------------------------------


def test_timer_raise_in_both_secs_and_steps():
    with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps"):
        SecondOrStepTimer(every_secs=2.0, every_steps=10)


def test_timer_raise_in_none_secs_and_steps():
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        SecondOrStepTimer()


def test_timer_every_secs(clock):
    timer = SecondOrStepTimer(every_secs=1.0)
    assert timer.should_trigger_for_step(1)
    timer.update_last_triggered_step(1)
    assert not timer.should_trigger_for_step(1)
    assert not timer.should_trigger_for_step(2)
    clock.now += 1.0
    assert not timer.should_trigger_for_step(1)
    assert timer.should_trigger_for_step(2)


def test_timer_every_steps():
    timer = SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(1)
    timer.update_last_triggered_step(1)
    assert not timer.should_trigger_for_step(1)
    assert not timer.should_trigger_for_step(2)
    assert not timer.should_trigger_for_step(3)
    assert timer.should_trigger_for_step(4)


def test_timer_update_last_triggered_step(clock):
    timer = SecondOrStepTimer(every_steps=1)
    assert timer.last_triggered_step() is None
    assert timer.update_last_triggered_step(1) == (None, None)
    clock.now += 0.5
    assert timer.update_last_triggered_step(5) == (pytest.approx(0.5), 4)
    clock.now += 0.25
    assert timer.update_last_triggered_step(7) == (pytest.approx(0.25), 2)
    assert timer.last_triggered_step() == 7


def test_timer_reset():
    timer = SecondOrStepTimer(every_steps=100)
    timer.update_last_triggered_step(5)
    assert not timer.should_trigger_for_step(6)
    timer.reset()
    assert timer.last_triggered_step() is None
    assert timer.should_trigger_for_step(6)
    assert timer.update_last_triggered_step(6) == (None, None)


def test_never_trigger_timer():
    timer = NeverTriggerTimer()
    assert not timer.should_trigger_for_step(0)
    assert timer.update_last_triggered_step(3) == (None, None)
    assert timer.last_triggered_step() is None


# --------------------------------------------------------------------------------------
# StopAtStepHook
# --------------------------------------------------------------------------------------


def test_stop_raise_in_both_last_step_and_num_steps():
    with pytest.raises(ValueError, match="Only one of num_steps or last_step can be"):
        StopAtStepHook(num_steps=10, last_step=20)


def test_stop_raise_in_neither():
    with pytest.raises(ValueError, match="One of num_steps or last_step must be"):
        StopAtStepHook()


def test_stop_needs_global_step(no_gstep):
    with pytest.raises(RuntimeError,
                       match=r"Global step should be created to use StopAtStepHook\."):
        StopAtStepHook(last_step=1).begin()


def _run_at(mon_sess, sess, step):
    """As TF's test: assign the global step, then run a no-op."""
    sess.step = step
    calls = sess.run_calls
    mon_sess.run(None)
    assert sess.run_calls == calls + 1  # no extra read of the global step


def test_stop_based_on_last_step(gstep):
    h = StopAtStepHook(last_step=10)
    h.begin()
    sess = FakeSession(gstep, step=5)
    mon_sess = HookedSession(sess, [h])
    h.after_create_session(sess, None)
    _run_at(mon_sess, sess, 5)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 9)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 10)
    assert mon_sess.should_stop()
    mon_sess._should_stop = False
    _run_at(mon_sess, sess, 11)
    assert mon_sess.should_stop()


def test_stop_based_on_num_step(gstep):
    h = StopAtStepHook(num_steps=10)
    h.begin()
    sess = FakeSession(gstep, step=5)
    mon_sess = HookedSession(sess, [h])
    h.after_create_session(sess, None)
    _run_at(mon_sess, sess, 5)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 13)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 14)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 15)
    assert mon_sess.should_stop()
    mon_sess._should_stop = False
    _run_at(mon_sess, sess, 16)
    assert mon_sess.should_stop()


def test_stop_based_with_multiple_steps(gstep):
    h = StopAtStepHook(num_steps=10)
    h.begin()
    sess = FakeSession(gstep, step=5)
    mon_sess = HookedSession(sess, [h])
    h.after_create_session(sess, None)
    _run_at(mon_sess, sess, 5)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 15)
    assert mon_sess.should_stop()


@pytest.mark.parametrize("start, kwargs, final", [
    (0, {"last_step": 3}, 3),
    (10, {"num_steps": 4}, 14),
    (0, {"last_step": 1}, 1),
])
def test_stop_training_loop_runs_exact_steps(gstep, start, kwargs, final):
    h = StopAtStepHook(**kwargs)
    h.begin()
    sess = FakeSession(gstep, step=start)
    h.after_create_session(sess, None)
    mon_sess = HookedSession(sess, [h])
    train_op = TrainOp()
    runs = 0
    while not mon_sess.should_stop():
        mon_sess.run(train_op)
        runs += 1
    assert sess.step == final
    assert runs == final - start
    assert sess.run_calls == runs + (1 if "num_steps" in kwargs else 0)


def test_stop_num_steps_counted_once_per_hook(gstep):
    h = StopAtStepHook(num_steps=10)
    h.begin()
    sess = FakeSession(gstep, step=5)
    h.after_create_session(sess, None)
    sess.step = 8  # a recovered session: the target stays 15
    h.after_create_session(sess, None)
    mon_sess = HookedSession(sess, [h])
    _run_at(mon_sess, sess, 14)
    assert not mon_sess.should_stop()
    _run_at(mon_sess, sess, 15)
    assert mon_sess.should_stop()


def test_stop_last_step_reads_nothing_at_session_creation(gstep):
    h = StopAtStepHook(last_step=4)
    h.begin()
    sess = FakeSession(gstep)
    h.after_create_session(sess, None)
    assert sess.run_calls == 0


def test_stop_num_steps_without_session_creation_says_why(gstep):
    h = StopAtStepHook(num_steps=3)
    h.begin()
    mon_sess = HookedSession(FakeSession(gstep), [h])
    with pytest.raises(RuntimeError, match="after_create_session"):
        mon_sess.run(None)


# --------------------------------------------------------------------------------------
# LoggingTensorHook
# --------------------------------------------------------------------------------------


def test_logging_illegal_args():
    with pytest.raises(ValueError, match="nvalid every_n_iter"):
        LoggingTensorHook(tensors=["t"], every_n_iter=0)
    with pytest.raises(ValueError, match="nvalid every_n_iter"):
        LoggingTensorHook(tensors=["t"], every_n_iter=-10)
    with pytest.raises(ValueError, match="xactly one of"):
        LoggingTensorHook(tensors=["t"], every_n_iter=5, every_n_secs=5)
    with pytest.raises(ValueError, match="xactly one of"):
        LoggingTensorHook(tensors=["t"])


def _foo_session(gstep):
    return FakeSession(gstep, values={"foo:0": 42.0})


def test_logging_print_at_end_only(gstep, logs):
    sess = _foo_session(gstep)
    hook = LoggingTensorHook(tensors=["foo:0"], at_end=True)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    for _ in range(3):
        mon_sess.run(TrainOp())
        assert not any("foo:0" in m for m in _messages(logs))
    hook.end(sess)
    assert _messages(logs) == ["foo:0 = 42.0"]


def _validate_print_every_n_steps(gstep, logs, at_end):
    sess = _foo_session(gstep)
    hook = LoggingTensorHook(tensors=["foo:0"], every_n_iter=10, at_end=at_end)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    logs.clear()
    mon_sess.run(TrainOp())
    assert _messages(logs) == ["foo:0 = 42.0"]
    for _ in range(3):
        logs.clear()
        for _ in range(9):
            mon_sess.run(TrainOp())
            assert _messages(logs) == []
        mon_sess.run(TrainOp())
        [message] = _messages(logs)
        assert message.startswith("foo:0 = 42.0 (") and message.endswith(" sec)")
    logs.clear()
    mon_sess.run(TrainOp())
    assert _messages(logs) == []
    hook.end(sess)
    assert len(_messages(logs)) == (1 if at_end else 0)
    if at_end:
        assert "foo:0 = 42.0" in _messages(logs)[0]


@pytest.mark.parametrize("at_end", [False, True])
def test_logging_print_every_n_steps(gstep, logs, at_end):
    _validate_print_every_n_steps(gstep, logs, at_end)
    _validate_print_every_n_steps(gstep, logs, at_end)  # a fresh hook behaves the same


def test_logging_begin_resets(gstep, logs):
    sess = _foo_session(gstep)
    hook = LoggingTensorHook(tensors=["foo:0"], every_n_iter=3)
    for _ in range(2):
        hook.begin()
        mon_sess = HookedSession(sess, [hook])
        logs.clear()
        for _ in range(4):
            mon_sess.run(TrainOp())
        assert len(_messages(logs)) == 2  # iterations 0 and 3


def test_logging_print_first_step(gstep, logs):
    sess = _foo_session(gstep)
    hook = LoggingTensorHook(tensors={"foo": "foo:0"}, every_n_iter=1)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    mon_sess.run(TrainOp())
    assert _messages(logs) == ["foo = 42.0"]  # no elapsed time on the first log


def _validate_print_every_n_secs(gstep, logs, clock, at_end):
    sess = _foo_session(gstep)
    hook = LoggingTensorHook(tensors=["foo:0"], every_n_secs=1.0, at_end=at_end)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    logs.clear()
    mon_sess.run(TrainOp())
    assert _messages(logs) == ["foo:0 = 42.0"]
    logs.clear()
    mon_sess.run(TrainOp())
    assert _messages(logs) == []
    clock.now += 1.0
    mon_sess.run(TrainOp())
    assert _messages(logs) == ["foo:0 = 42.0 (1.000 sec)"]
    logs.clear()
    hook.end(sess)
    assert _messages(logs) == (["foo:0 = 42.0 (0.000 sec)"] if at_end else [])


@pytest.mark.parametrize("at_end", [False, True])
def test_logging_print_every_n_secs(gstep, logs, clock, at_end):
    _validate_print_every_n_secs(gstep, logs, clock, at_end)
    _validate_print_every_n_secs(gstep, logs, clock, at_end)


def test_logging_print_formatter(gstep, logs):
    sess = _foo_session(gstep)
    hook = LoggingTensorHook(tensors=["foo:0"], every_n_iter=10,
                             formatter=lambda items: "qqq=%s" % items["foo:0"])
    hook.begin()
    HookedSession(sess, [hook]).run(TrainOp())
    assert _messages(logs) == ["qqq=42.0"]


def test_logging_variables_and_dict_order(gstep, logs):
    w = FakeVariable("w:0")
    sess = FakeSession(gstep, step=7, values={"w:0": np.array([1e-9, 2.5]),
                                               "loss": 0.25})
    hook = LoggingTensorHook(tensors=[w, "loss", gstep], every_n_iter=1)
    hook.begin()
    HookedSession(sess, [hook]).run(None)
    # numpy values print with suppress=True; Variables are tagged by their names.
    assert _messages(logs) == ["w:0 = [0.  2.5], loss = 0.25, global_step = 7"]
    logs.clear()
    hook = LoggingTensorHook(tensors={"z": "loss", "a": gstep}, every_n_iter=1)
    hook.begin()
    HookedSession(sess, [hook]).run(None)
    assert _messages(logs) == ["a = 7, z = 0.25"]
    assert np.get_printoptions()["suppress"] is False


def test_logging_single_name(gstep, logs):
    hook = LoggingTensorHook(tensors="foo:0", every_n_iter=1)
    hook.begin()
    HookedSession(_foo_session(gstep), [hook]).run(None)
    assert _messages(logs) == ["foo:0 = 42.0"]


# --------------------------------------------------------------------------------------
# CheckpointSaverHook
# --------------------------------------------------------------------------------------


@pytest.fixture
def ckpt(gstep, tmp_path):
    saver = FakeSaver()
    return types.SimpleNamespace(
        gstep=gstep, saver=saver, scaffold=FakeScaffold(saver), model_dir=str(tmp_path),
        sess=FakeSession(gstep), train_op=TrainOp(1))


def test_ckpt_raise_when_saver_and_scaffold_both_present(ckpt):
    with pytest.raises(ValueError, match="You cannot provide both saver and scaffold"):
        CheckpointSaverHook(ckpt.model_dir, save_steps=1, saver=ckpt.saver,
                            scaffold=ckpt.scaffold)


def test_ckpt_raise_in_both_secs_and_steps(ckpt):
    with pytest.raises(ValueError):
        CheckpointSaverHook(ckpt.model_dir, save_secs=10, save_steps=20)


def test_ckpt_raise_in_none_secs_and_steps(ckpt):
    with pytest.raises(ValueError):
        CheckpointSaverHook(ckpt.model_dir)


def test_ckpt_needs_global_step(no_gstep, tmp_path):
    hook = CheckpointSaverHook(str(tmp_path), save_steps=1, saver=FakeSaver())
    with pytest.raises(RuntimeError,
                       match=r"Global step should be created to use CheckpointSaverHook\."):
        hook.begin()


def test_ckpt_save_path_and_basename(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=1, saver=ckpt.saver,
                               checkpoint_basename="my.ckpt")
    hook.begin()
    ckpt.sess.step = 4
    hook.after_create_session(ckpt.sess, None)
    assert ckpt.saver.saves == [(os.path.join(ckpt.model_dir, "my.ckpt"), 4)]


@pytest.mark.parametrize("kwargs", [{"save_secs": 2}, {"save_steps": 2}])
def test_ckpt_saves_in_first_step(ckpt, kwargs):
    hook = CheckpointSaverHook(ckpt.model_dir, scaffold=ckpt.scaffold, **kwargs)
    hook.begin()
    HookedSession(ckpt.sess, [hook]).run(ckpt.train_op)
    assert ckpt.saver.saves == [(os.path.join(ckpt.model_dir, "model.ckpt"), 1)]


def test_ckpt_save_secs_calls_listeners_at_begin_and_end(ckpt):
    listener = MockCheckpointSaverListener()
    hook = CheckpointSaverHook(ckpt.model_dir, save_secs=2, scaffold=ckpt.scaffold,
                               listeners=[listener])
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    mon_sess.run(ckpt.train_op)  # saves here
    mon_sess.run(ckpt.train_op)  # not here, so it does at end
    hook.end(ckpt.sess)
    assert listener.get_counts() == {"begin": 1, "before_save": 2, "after_save": 2,
                                     "end": 1}
    assert ckpt.saver.steps == [1, 2]


def _monitored(ckpt, hook, steps):
    """begin, after_create_session, ``steps`` train runs, end: a MonitoredSession's life."""
    hook.begin()
    hook.after_create_session(ckpt.sess, None)
    mon_sess = HookedSession(ckpt.sess, [hook])
    for _ in range(steps):
        mon_sess.run(ckpt.train_op)
    hook.end(ckpt.sess)


@pytest.mark.parametrize("n_listeners", [1, 2])
def test_ckpt_listeners_with_monitored_session(ckpt, n_listeners):
    listeners = [MockCheckpointSaverListener() for _ in range(n_listeners)]
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=1, scaffold=ckpt.scaffold,
                               listeners=listeners)
    _monitored(ckpt, hook, 2)
    assert ckpt.sess.step == 2
    for listener in listeners:
        assert listener.get_counts() == {"begin": 1, "before_save": 3, "after_save": 3,
                                         "end": 1}
        assert listener.steps == [0, 1, 2]
        assert listener.end_step == 2
    assert ckpt.saver.steps == [0, 1, 2]


def test_ckpt_listener_stops_training_in_after_save(ckpt):
    listener = MockCheckpointSaverListener()
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=1, scaffold=ckpt.scaffold,
                               listeners=[listener])
    hook.begin()
    hook.after_create_session(ckpt.sess, None)
    mon_sess = HookedSession(ckpt.sess, [hook])
    mon_sess.run(ckpt.train_op)
    assert not mon_sess.should_stop()
    mon_sess.run(ckpt.train_op)
    assert not mon_sess.should_stop()
    listener.ask_for_stop = True
    mon_sess.run(ckpt.train_op)
    assert mon_sess.should_stop()


def test_ckpt_save_secs_saves_periodically(ckpt, clock):
    hook = CheckpointSaverHook(ckpt.model_dir, save_secs=2, scaffold=ckpt.scaffold)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    for offset, saved in [(0, [1]), (0.5, [1]), (2.5, [1, 3]), (2.6, [1, 3]),
                          (2.7, [1, 3]), (10, [1, 3, 6])]:
        clock.now = MOCK_START_TIME + offset
        mon_sess.run(ckpt.train_op)
        assert ckpt.saver.steps == saved


def test_ckpt_save_secs_calls_listeners_periodically(ckpt, clock):
    listener = MockCheckpointSaverListener()
    hook = CheckpointSaverHook(ckpt.model_dir, save_secs=2, scaffold=ckpt.scaffold,
                               listeners=[listener])
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    for offset in [0.5, 0.5, 3.0, 3.5, 4.0, 6.5, 7.0]:
        clock.now = MOCK_START_TIME + offset
        mon_sess.run(ckpt.train_op)
    clock.now = MOCK_START_TIME + 7.5
    hook.end(ckpt.sess)
    assert listener.get_counts() == {"begin": 1, "before_save": 4, "after_save": 4,
                                     "end": 1}
    assert listener.steps == [1, 3, 6, 7]


def test_ckpt_save_steps_saves_periodically(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=2, scaffold=ckpt.scaffold)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    expected = [[1], [1], [1, 3], [1, 3], [1, 3, 5]]
    for saved in expected:
        mon_sess.run(ckpt.train_op)
        assert ckpt.saver.steps == saved


def test_ckpt_save_saves_at_end(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_secs=2, scaffold=ckpt.scaffold)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    mon_sess.run(ckpt.train_op)
    mon_sess.run(ckpt.train_op)
    hook.end(ckpt.sess)
    assert ckpt.saver.steps == [1, 2]


def test_ckpt_end_does_not_save_twice(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=2, scaffold=ckpt.scaffold)
    _monitored(ckpt, hook, 2)
    assert ckpt.saver.steps == [0, 2]


def test_ckpt_save_checkpoint_before_first_train_step(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=2, scaffold=ckpt.scaffold)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    hook.after_create_session(ckpt.sess, None)
    assert ckpt.saver.steps == [0]
    mon_sess.run(ckpt.train_op)
    assert ckpt.saver.steps == [0]
    mon_sess.run(ckpt.train_op)
    assert ckpt.saver.steps == [0, 2]


def test_ckpt_multi_step_saves_periodically(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=10, scaffold=ckpt.scaffold)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    for saved in [[5], [5], [5, 15], [5, 15], [5, 15, 25]]:
        mon_sess.run(TrainOp(5))
        assert ckpt.saver.steps == saved


def test_ckpt_multi_step_saves_at_end(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=10, scaffold=ckpt.scaffold)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    mon_sess.run(TrainOp(5))
    mon_sess.run(TrainOp(5))
    hook.end(ckpt.sess)
    assert ckpt.saver.steps == [5, 10]


def test_ckpt_one_round_trip_per_step(ckpt):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=1, saver=ckpt.saver)
    hook.begin()
    mon_sess = HookedSession(ckpt.sess, [hook])
    for _ in range(5):
        mon_sess.run(ckpt.train_op)
    assert ckpt.sess.run_calls == 5
    assert ckpt.saver.steps == [1, 2, 3, 4, 5]


def test_ckpt_logs_saves(ckpt, logs):
    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=1, saver=ckpt.saver)
    hook.begin()
    hook.after_create_session(ckpt.sess, None)
    path = os.path.join(ckpt.model_dir, "model.ckpt")
    assert "Saving checkpoints for 0 into %s." % path in _messages(logs, logging.INFO)


def test_ckpt_default_saver_lookup(gstep, monkeypatch, tmp_path):
    default = FakeSaver()
    calls = []

    def get_saver_or_default():
        calls.append(1)
        return default

    _install_module(monkeypatch, "checkpoint", _get_saver_or_default=get_saver_or_default,
                    Saver=None)
    hook = CheckpointSaverHook(str(tmp_path), save_steps=1)
    _monitored(types.SimpleNamespace(sess=FakeSession(gstep), train_op=TrainOp()), hook, 2)
    assert default.steps == [0, 1, 2]
    assert calls == [1]  # looked up once, then kept


def test_ckpt_default_saver_falls_back_to_new_saver(gstep, monkeypatch, tmp_path):
    made = []

    def make_saver():
        made.append(FakeSaver())
        return made[-1]

    _install_module(monkeypatch, "checkpoint", Saver=make_saver)
    hook = CheckpointSaverHook(str(tmp_path), save_steps=1)
    # The new saver joins the graph's SAVERS collection: a graph of its own keeps it out of
    # the process's default graph, which later tests share.
    with psrt.Graph().as_default():
        _monitored(types.SimpleNamespace(sess=FakeSession(gstep), train_op=TrainOp()), hook, 1)
    assert len(made) == 1 and made[0].steps == [0, 1]


def test_ckpt_scaffold_without_saver_uses_default(gstep, monkeypatch, tmp_path):
    default = FakeSaver()
    _install_module(monkeypatch, "checkpoint", _get_saver_or_default=lambda: default)
    hook = CheckpointSaverHook(str(tmp_path), save_steps=1, scaffold=FakeScaffold(None))
    hook.begin()
    hook.after_create_session(FakeSession(gstep), None)
    assert default.steps == [0]


# --------------------------------------------------------------------------------------
# StepCounterHook
# --------------------------------------------------------------------------------------


def _rate_log_steps(hook, sess, logs, clock, runs, increment=1, dt=0.01):
    """Runs ``runs`` train steps; returns {global step: logged rate} for each rate log."""
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    logged = {}
    for _ in range(runs):
        clock.now += dt
        logs.clear()
        mon_sess.run(TrainOp(increment))
        for message in _messages(logs, logging.INFO):
            tag, _, value = message.partition(": ")
            logged[sess.step] = (tag, float(value))
    hook.end(sess)
    return logged


def test_step_counter_every_n_steps(gstep, logs, clock):
    sess = FakeSession(gstep)
    hook = StepCounterHook(every_n_steps=10)
    logged = _rate_log_steps(hook, sess, logs, clock, 30, dt=0.25)
    assert logged == {11: ("global_step/sec", 4.0), 21: ("global_step/sec", 4.0)}
    assert sess.run_calls == 30  # no extra read of the global step


def test_step_counter_writes_steps_per_sec_to_its_summary_writer(gstep, logs, clock):
    writer = FakeSummaryWriter()
    logged = _rate_log_steps(StepCounterHook(every_n_steps=10, summary_writer=writer),
                             FakeSession(gstep), logs, clock, 30, dt=0.25)
    assert writer.summaries == {11: [("global_step/sec", 4.0)], 21: [("global_step/sec", 4.0)]}
    assert logged == {11: ("global_step/sec", 4.0), 21: ("global_step/sec", 4.0)}


def test_step_counter_output_dir_writes_an_event_file(gstep, clock, tmp_path):
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415

    hook = StepCounterHook(every_n_steps=2, output_dir=str(tmp_path / "out"))
    sess = FakeSession(gstep)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    for _ in range(5):
        clock.now += 0.5
        mon_sess.run(TrainOp())
    psrt.summary.FileWriterCache.get(str(tmp_path / "out")).flush()
    acc = ea.EventAccumulator(str(tmp_path / "out"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("global_step/sec")] == [(3, 2.0), (5, 2.0)]


def test_step_counter_no_warning_when_step_increases(gstep, logs, clock):
    _rate_log_steps(StepCounterHook(every_n_steps=10), FakeSession(gstep), logs, clock, 30)
    assert _messages(logs, logging.WARNING) == []


def test_step_counter_every_n_secs(gstep, logs, clock):
    sess = FakeSession(gstep)
    hook = StepCounterHook(every_n_steps=None, every_n_secs=0.1)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    logged = []
    for dt in [0.0, 0.2, 0.2]:
        clock.now += dt
        logs.clear()
        mon_sess.run(TrainOp())
        if _messages(logs, logging.INFO):
            [message] = _messages(logs, logging.INFO)
            logged.append((sess.step, message))
    assert [step for step, _ in logged] == [2, 3]
    for _, message in logged:
        assert message.startswith("global_step/sec: ")
        assert float(message.split(": ")[1]) == pytest.approx(5.0)


def test_step_counter_global_step_name(monkeypatch, logs, clock):
    var = FakeVariable("bar/foo:0")
    _install_module(monkeypatch, "variables", get_global_step=lambda: var)
    logged = _rate_log_steps(StepCounterHook(every_n_steps=1, every_n_secs=None),
                             FakeSession(var), logs, clock, 2)
    assert list(logged) == [2]
    assert logged[2][0] == "bar/foo/sec"


def test_step_counter_warns_if_global_step_not_increased(gstep, logs, clock):
    sess = FakeSession(gstep)
    hook = StepCounterHook(every_n_steps=1, every_n_secs=None)
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    mon_sess.run(TrainOp(0))
    assert _messages(logs, logging.WARNING) == []
    for _ in range(30):
        mon_sess.run(TrainOp(0))
    warnings = _messages(logs, logging.WARNING)
    assert len(warnings) == 5  # the first 5, as TF's log_first_n
    assert "global step (psrt.train.get_global_step) has not been increased" in warnings[0]
    assert "Current value (could be stable): 0 vs previous value: 0" in warnings[0]


@pytest.mark.parametrize("every_n_steps, steps_per_run, expected", [
    (10, 5, [15, 25]),
    (5, 5, [10, 15, 20, 25]),
    (5, 10, [20, 30, 40, 50]),
])
def test_step_counter_steps_per_run(gstep, logs, clock, every_n_steps, steps_per_run,
                                    expected):
    logged = _rate_log_steps(StepCounterHook(every_n_steps=every_n_steps),
                             FakeSession(gstep), logs, clock, 5, increment=steps_per_run)
    assert sorted(logged) == expected
    for tag, rate in logged.values():
        assert tag == "global_step/sec" and rate > 0


def test_step_counter_zero_elapsed_time_does_not_divide_by_zero(gstep, logs, clock):
    logged = _rate_log_steps(StepCounterHook(every_n_steps=1), FakeSession(gstep), logs,
                             clock, 3, dt=0.0)
    assert logged == {}


def test_step_counter_args():
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        StepCounterHook(every_n_steps=None, every_n_secs=None)
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        StepCounterHook(every_n_steps=10, every_n_secs=1)
    StepCounterHook(every_n_steps=10, output_dir="/nonexistent", summary_writer=object())


def test_step_counter_needs_global_step(no_gstep):
    with pytest.raises(RuntimeError, match="to use StepCounterHook"):
        StepCounterHook().begin()


# --------------------------------------------------------------------------------------
# NanTensorHook
# --------------------------------------------------------------------------------------


def test_nan_fails(gstep, logs):
    sess = FakeSession(gstep, values={"loss": float("nan")})
    mon_sess = HookedSession(sess, [NanTensorHook("loss")])
    with pytest.raises(NanLossDuringTrainingError) as info:
        mon_sess.run(TrainOp())
    assert str(info.value) == "NaN loss during training."
    assert isinstance(info.value, RuntimeError)
    assert _messages(logs, logging.ERROR) == ["Model diverged with loss = NaN."]


def test_nan_stops_without_failing(gstep, logs):
    loss = FakeVariable("loss")
    sess = FakeSession(gstep, values={"loss": np.float32("nan")})
    mon_sess = HookedSession(sess, [NanTensorHook(loss, fail_on_nan_loss=False)])
    mon_sess.run(TrainOp())
    assert mon_sess.should_stop()
    assert _messages(logs, logging.WARNING) == ["Model diverged with loss = NaN."]


def test_nan_finite_loss_continues(gstep, logs):
    sess = FakeSession(gstep, values={"loss": 0.5})
    mon_sess = HookedSession(sess, [NanTensorHook("loss")])
    mon_sess.run(TrainOp())
    assert not mon_sess.should_stop()
    assert _messages(logs) == []


def test_nan_in_array_loss(gstep):
    sess = FakeSession(gstep, values={"loss": np.array([1.0, np.nan], np.float32)})
    with pytest.raises(NanLossDuringTrainingError):
        HookedSession(sess, [NanTensorHook("loss")]).run(TrainOp())


# --------------------------------------------------------------------------------------
# GlobalStepWaiterHook
# --------------------------------------------------------------------------------------


def test_waiter_not_wait_for_step_zero(gstep, monkeypatch):
    def no_sleep(seconds):
        raise AssertionError("must not wait")

    monkeypatch.setattr(hooks.time, "sleep", no_sleep)
    hook = GlobalStepWaiterHook(wait_until_step=0)
    hook.begin()
    sess = FakeSession(gstep)
    assert hook.before_run(SessionRunContext(original_args=None, session=sess)) is None
    assert sess.run_calls == 0


def test_waiter_wait_for_step(gstep, monkeypatch, logs):
    sess = FakeSession(gstep)
    sleeps = []

    def fake_sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 1:
            sess.step = 500
        elif len(sleeps) == 2:
            sess.step = 1100
        else:
            raise AssertionError("before_run() should end after the 2nd sleep")

    monkeypatch.setattr(hooks.time, "sleep", fake_sleep)
    hook = GlobalStepWaiterHook(wait_until_step=1000)
    hook.begin()
    context = SessionRunContext(original_args=None, session=sess)
    assert hook.before_run(context) is None
    assert sleeps == [0.1, 0.1]
    assert sess.run_calls == 3
    assert _messages(logs) == ["Waiting for global step 1000 before starting training."]
    # Started: later runs neither read the step nor sleep.
    assert hook.before_run(context) is None
    assert sess.run_calls == 3 and len(sleeps) == 2


def test_waiter_logs_progress(gstep, monkeypatch, logs):
    sess = FakeSession(gstep)

    def fake_sleep(seconds):
        sess.step += 600

    monkeypatch.setattr(hooks.time, "sleep", fake_sleep)
    hook = GlobalStepWaiterHook(wait_until_step=3000)
    hook.begin()
    hook.before_run(SessionRunContext(None, sess))
    assert sess.step == 3000
    assert _messages(logs)[1:] == [
        "Waiting for global step 3000 before starting training. Current step is 1200.",
        "Waiting for global step 3000 before starting training. Current step is 2400."]


def test_waiter_needs_global_step(no_gstep):
    with pytest.raises(RuntimeError, match="to use GlobalStepWaiterHook"):
        GlobalStepWaiterHook(3).begin()


# --------------------------------------------------------------------------------------
# FinalOpsHook and FeedFnHook
# --------------------------------------------------------------------------------------


def test_final_ops_is_scalar(gstep):
    hook = FinalOpsHook("four")
    hook.begin()
    assert hook.final_ops_values is None
    hook.end(FakeSession(gstep, values={"four": 4}))
    assert hook.final_ops_values == 4


def test_final_ops_structures(gstep):
    sess = FakeSession(gstep, step=9, values={"v": np.array([1, 6, 3, 5, 2, 4])})
    hook = FinalOpsHook({"v": "v", "both": ["v", gstep]})
    hook.end(sess)
    assert hook.final_ops_values["v"].tolist() == [1, 6, 3, 5, 2, 4]
    assert hook.final_ops_values["both"][1] == 9


def test_final_ops_with_feed_dict(gstep):
    x = object()
    hook = FinalOpsHook(Expr(lambda feed: feed[x]), {x: [4, -3]})
    hook.end(FakeSession(gstep))
    assert hook.final_ops_values == [4, -3]


def test_final_ops_none(gstep):
    sess = FakeSession(gstep)
    hook = FinalOpsHook(None)
    hook.end(sess)
    assert hook.final_ops_values is None and sess.run_calls == 0


def test_final_ops_triggers_out_of_range_error(gstep, logs):
    hook = FinalOpsHook(Exhausted())
    with pytest.raises(errors.OutOfRangeError, match="End of sequence"):
        hook.end(FakeSession(gstep))
    [warning] = _messages(logs, logging.WARNING)
    assert "dependency back to some input source" in warning


def test_feed_fn_hook(gstep):
    x = object()
    y = Expr(lambda feed: feed[x] + 1)
    sess = FakeSession(gstep)
    hook = FeedFnHook(feed_fn=lambda: {x: 1.0})
    hook.begin()
    assert HookedSession(sess, [hook]).run(y) == 2
    assert sess.feeds == [{x: 1.0}]
    assert hook.before_run(SessionRunContext(None, sess)) == (None, {x: 1.0}, None)


def test_public_names():
    # The hooks now live in several modules (session_run_hook, basic_session_run_hooks,
    # saver_hooks); psrt.train re-exports every one of them.
    for name in psrt.train.__all__:
        assert getattr(psrt.train, name).__doc__, name


# --------------------------------------------------------------------------------------
# SummarySaverHook
# --------------------------------------------------------------------------------------


class FakeSummaryOp:
    """A summary op: its value in FakeSession is a serialized Summary of the step the run
    reached (so each write can be matched to its run)."""

    def __init__(self, tag):
        self.tag = tag


class SummarySession(FakeSession):
    def _value(self, fetch, feed):
        if isinstance(fetch, FakeSummaryOp):
            return psrt.Summary(value=[psrt.Summary.Value(
                tag=fetch.tag, simple_value=self.step)]).SerializeToString()
        return super()._value(fetch, feed)


def _run_summary_hook(hook, sess, runs, clock=None, dt=0.0, train_op=None):
    hook.begin()
    mon_sess = HookedSession(sess, [hook])
    for _ in range(runs):
        if clock is not None:
            clock.now += dt
        mon_sess.run(train_op or TrainOp())
    hook.end(sess)


def test_summary_saver_args(gstep):
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        SummarySaverHook(save_steps=1)
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        SummarySaverHook(save_steps=1, scaffold=FakeScaffold(), summary_op=FakeSummaryOp("x"))
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        SummarySaverHook(summary_op=FakeSummaryOp("x"))
    with pytest.raises(ValueError, match="Can not provide both"):
        SummarySaverHook(save_steps=1, save_secs=1, summary_op=FakeSummaryOp("x"))


def test_summary_saver_needs_global_step(no_gstep):
    with pytest.raises(RuntimeError, match="to use SummarySaverHook"):
        SummarySaverHook(save_steps=1, summary_op=FakeSummaryOp("x")).begin()


def test_summary_saver_save_steps(gstep):
    # TF's test_save_steps: with save_steps=8 over 30 steps, summaries at 1, 9, 17, 25.
    writer = FakeSummaryWriter()
    sess = SummarySession(gstep)
    hook = SummarySaverHook(save_steps=8, summary_writer=writer,
                            summary_op=[FakeSummaryOp("a"), FakeSummaryOp("b")])
    _run_summary_hook(hook, sess, 30)
    assert writer.summaries == {s: [("a", s), ("b", s)] for s in (1, 9, 17, 25)}
    assert writer.session_logs == [(psrt.summary.SessionLog.START, 1)]
    assert writer.flushes == 1                  # end() flushes
    assert sess.run_calls == 30                 # no extra read of the global step


def test_summary_saver_multiple_steps_per_run(gstep):
    # Each run advances the global step by 5 (steps 5, 10, ..., 30). As TF, a run fetches
    # summaries when the step before it plus one is >= the last saved step + 8: the runs
    # ending at 5 and at 20 (15 + 1 >= 5 + 8), then none (25 + 1 < 20 + 8).
    writer = FakeSummaryWriter()
    hook = SummarySaverHook(save_steps=8, summary_writer=writer,
                            summary_op=FakeSummaryOp("a"))
    _run_summary_hook(hook, SummarySession(gstep), 6, train_op=TrainOp(5))
    assert sorted(writer.summaries) == [5, 20]


def test_summary_saver_save_secs(gstep, clock):
    writer = FakeSummaryWriter()
    hook = SummarySaverHook(save_secs=0.5, summary_writer=writer,
                            summary_op=FakeSummaryOp("a"))
    _run_summary_hook(hook, SummarySession(gstep), 8, clock=clock, dt=0.2)
    # Runs at 0.2 s apart: the first, then every third (0.6 s >= 0.5 s).
    assert sorted(writer.summaries) == [1, 4, 7]


def test_summary_saver_scaffold_summary_op_and_none(gstep):
    writer = FakeSummaryWriter()
    hook = SummarySaverHook(save_steps=2, summary_writer=writer,
                            scaffold=FakeScaffold(summary_op=FakeSummaryOp("s")))
    _run_summary_hook(hook, SummarySession(gstep), 3)
    assert writer.summaries == {1: [("s", 1)], 3: [("s", 3)]}
    # A scaffold without summaries: only the START log, no summary fetched.
    writer = FakeSummaryWriter()
    sess = SummarySession(gstep)
    hook = SummarySaverHook(save_steps=2, summary_writer=writer, scaffold=FakeScaffold())
    _run_summary_hook(hook, sess, 3)
    assert writer.summaries == {} and writer.session_logs == [(1, 1)]


def test_summary_saver_without_writer_fetches_and_drops(gstep):
    sess = SummarySession(gstep)
    hook = SummarySaverHook(save_steps=1, summary_op=FakeSummaryOp("a"))
    _run_summary_hook(hook, sess, 2)
    assert sess.step == 2


def test_summary_saver_output_dir_with_real_summaries(tmp_path):
    """A real monitored session on a private ps: the loss of each saved step and a
    histogram of the variable, read back by TensorBoard."""
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415

    psrt.reset_default_graph()
    try:
        w = psrt.Variable(np.ones(4, np.float32), name="w")
        gs = psrt.train.get_or_create_global_step()
        train_op = psrt.train.GradientDescentOptimizer(0.25).minimize(
            lambda w: (float(w @ w), [2 * w]), var_list=[w], global_step=gs)
        psrt.summary.scalar("loss", train_op)
        psrt.summary.histogram("weights", w)
        hook = SummarySaverHook(save_steps=3, output_dir=str(tmp_path),
                                summary_op=psrt.summary.merge_all())
        losses = {}
        with psrt.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(7):
                loss, step = sess.run([train_op, gs])
                losses[step] = loss
        acc = ea.EventAccumulator(str(tmp_path), size_guidance={ea.SCALARS: 0,
                                                                ea.HISTOGRAMS: 0})
        acc.Reload()                                  # end() flushed the cached writer
        assert [(e.step, e.value) for e in acc.Scalars("loss")] == [
            (s, pytest.approx(losses[s])) for s in (1, 4, 7)]
        assert [e.step for e in acc.Histograms("weights")] == [1, 4, 7]
        assert acc.Histograms("weights")[0].histogram_value.num == 4
    finally:
        psrt.reset_default_graph()


# --------------------------------------------------------------------------------------
# CheckpointSaverHook and summaries
# --------------------------------------------------------------------------------------


def test_ckpt_writes_a_checkpoint_session_log_per_save(ckpt):
    from tensorboard.backend.event_processing import event_file_loader  # noqa: PLC0415

    hook = CheckpointSaverHook(ckpt.model_dir, save_steps=2, saver=ckpt.saver)
    hook.begin()
    hook.after_create_session(ckpt.sess, None)
    mon_sess = HookedSession(ckpt.sess, [hook])
    for _ in range(3):
        mon_sess.run(ckpt.train_op)
    hook.end(ckpt.sess)
    writer = psrt.summary.FileWriterCache.get(ckpt.model_dir)
    writer.flush()
    logs = [(e.step, e.session_log.status, e.session_log.checkpoint_path)
            for e in event_file_loader.LegacyEventFileLoader(writer.event_file_path).Load()
            if e.HasField("session_log")]
    path = os.path.join(ckpt.model_dir, "model.ckpt")
    assert logs == [(0, 3, path), (2, 3, path), (3, 3, path)]
    assert ckpt.saver.steps == [0, 2, 3]
