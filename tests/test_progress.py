"""Tests for psrt.platform.progress, and the progress lines of long checkpoint saves and
restores, big initial values and table restores on real ps subprocesses.

"Large" is made cheap: ``PSRT_PROGRESS_SECS=0`` reports every update, so a 48 MB variable
(three 16 MB pieces) shows the lines a multi-GB checkpoint shows every 5 s.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import threading
import time

import numpy as np
import pytest

import psrt
from psrt import dynamic_embedding as de
from psrt.platform import progress as progress_mod
from psrt.platform.progress import Progress, progress_interval_secs, watch

from _cluster import fresh_graph, ps_tasks, worker  # noqa: F401  (fixtures)

_LINE = re.compile(r"^(?P<what>.+?), (?P<done>[0-9.]+)(?: of (?P<total>[0-9.]+))? MB"
                   r"(?: \((?P<pct>\d+)%\))?, (?P<rate>[0-9.]+) MB/s"
                   r"(?:, about (?P<left>[0-9.]+ (?:s|min \d+ s)) left)?$")


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "psrt"]


def _lines(caplog, what: str) -> list[re.Match]:
    found = [_LINE.match(m) for m in _messages(caplog)]
    return [m for m in found if m and m.group("what") == what]


def _closing(caplog, what: str) -> list[str]:
    return [m for m in _messages(caplog) if re.fullmatch(
        re.escape(what) + r": [0-9.]+ MB in [0-9.]+ s, [0-9.]+ MB/s", m)]


# ---- Progress ------------------------------------------------------------------------------

def test_lines_give_bytes_done_rate_and_time_left(caplog):
    caplog.set_level(logging.INFO, logger="psrt")
    with Progress("Saving checkpoint x: writing", 200_000_000, interval_secs=0,
                  bar=False) as p:
        p.update(50_000_000)
        p.add(50_000_000)
    [first, second] = _lines(caplog, "Saving checkpoint x: writing")
    assert (first["done"], first["total"], first["pct"]) == ("50.0", "200.0", "25")
    assert (second["done"], second["pct"]) == ("100.0", "50")
    assert float(second["rate"]) > 0 and second["left"] is not None
    assert len(_closing(caplog, "Saving checkpoint x: writing")) == 1
    assert p.lines == 2


def test_unknown_total_and_quiet_short_operations(caplog):
    caplog.set_level(logging.INFO, logger="psrt")
    with Progress("table", None, interval_secs=0, bar=False) as p:
        p.update(3_000_000)
    [line] = _lines(caplog, "table")
    assert line["total"] is None and line["pct"] is None and line["left"] is None
    caplog.clear()
    with Progress("quick", 10, interval_secs=60, bar=False) as p:
        p.update(10)  # done well within the interval: nothing to say
    assert _messages(caplog) == []


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.delenv(progress_mod.PROGRESS_SECS_ENV, raising=False)
    assert progress_interval_secs() == progress_mod.DEFAULT_INTERVAL_SECS == 5.0
    monkeypatch.setenv(progress_mod.PROGRESS_SECS_ENV, "0.5")
    assert progress_interval_secs() == 0.5
    for bad in ("-1", "soon", "nan"):
        monkeypatch.setenv(progress_mod.PROGRESS_SECS_ENV, bad)
        assert progress_interval_secs() == 5.0


def test_interval_between_lines_is_kept(caplog):
    caplog.set_level(logging.INFO, logger="psrt")
    p = Progress("paced", 100, interval_secs=0.2, bar=False)
    for i in range(1, 11):
        p.update(i)
        time.sleep(0.05)  # 0.5 s of updates: a line at 0.2 s and at 0.4 s
    p.close()
    assert 1 <= len(_lines(caplog, "paced")) <= 3


def test_no_bar_without_a_terminal():
    # Under pytest stderr is captured, not a terminal: plain lines.
    assert Progress("x", 1)._bar is None


def test_watch_samples_a_counter_while_a_call_blocks(caplog):
    caplog.set_level(logging.INFO, logger="psrt")
    counted = [1000]  # what was counted before the block: not reported
    stop = threading.Event()

    def transfer():  # another thread moves bytes while "the call" blocks
        while not stop.is_set():
            counted[0] += 1_000_000
            time.sleep(0.01)

    t = threading.Thread(target=transfer)
    t.start()
    try:
        with watch(Progress("pull", None, interval_secs=0, bar=False), lambda: counted[0],
                   poll_secs=0.01) as p:
            time.sleep(0.2)
    finally:
        stop.set()
        t.join()
    lines = _lines(caplog, "pull")
    assert len(lines) >= 3
    done = [float(m["done"]) for m in lines]
    assert done == sorted(done) and done[-1] > 5
    assert p.done < counted[0] - 1000 + 1_000_001
    assert len(_closing(caplog, "pull")) == 1


# ---- real saves and restores ---------------------------------------------------------------

ROWS, COLS = 3072, 4096  # float32: 50.3 MB


def test_large_checkpoint_save_and_restore_log_progress(ps_tasks, worker, tmp_path,
                                                        monkeypatch, caplog):
    monkeypatch.setenv(progress_mod.PROGRESS_SECS_ENV, "0")
    caplog.set_level(logging.INFO, logger="psrt")
    ps = ps_tasks(1)
    server = worker(ps)
    value = np.random.default_rng(0).standard_normal((ROWS, COLS), dtype=np.float32)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        big = psrt.Variable(value, name="big")  # an initial value held by the worker
        table = de.get_variable("emb", dim=64, initializer=psrt.zeros_initializer())
    ids = psrt.placeholder(np.int64, [None], name="ids")
    rows = de.embedding_lookup(table, ids)
    saver = psrt.train.Saver([big, table])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(rows, {ids: np.arange(20_000, dtype=np.int64)})  # 20,000 rows: 5.1 MB
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=7)
        sess.run(big.assign(np.zeros_like(value)))
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(big), value)
        assert table.size(sess) == 20_000

    sending = _lines(caplog, "Sending the initial values of 1 variable(s) to the ps tasks")
    assert sending and sending[-1]["total"] == f"{value.nbytes / 1e6:.1f}", _messages(caplog)
    what = {
        "pull": f"Saving checkpoint {path}: reading from the ps tasks",
        "write": f"Saving checkpoint {path}: writing",
        "read": f"Restoring checkpoint {path}: reading",
        "push": f"Restoring checkpoint {path}: writing to the ps tasks",
    }
    for step, description in what.items():
        lines = _lines(caplog, description)
        assert lines, (step, _messages(caplog))
        done = [float(m["done"]) for m in lines]
        assert done == sorted(done), (step, done)
        assert float(lines[-1]["rate"]) > 0
        assert len(_closing(caplog, description)) == 1, (step, _messages(caplog))
    # The file's pieces: the 50 MB tensor is written and read 16 MB at a time, each reported
    # with its share of the whole and the time left.
    for step in ("write", "read"):
        lines = _lines(caplog, what[step])
        assert len(lines) >= 4, (step, [m.group(0) for m in lines])
        assert all(m["total"] and m["pct"] for m in lines)
        assert all(m["left"] for m in lines if m["pct"] != "100")
        assert float(lines[-1]["done"]) == pytest.approx(float(lines[-1]["total"]), rel=0.01)
        assert int(lines[-1]["pct"]) == 100
    # A save's pull has no total when a table's row count is unknown; the restore's push
    # (the dense variable and the table's rows) has one.
    assert _lines(caplog, what["pull"])[-1]["total"] is None
    push = _lines(caplog, what["push"])[-1]
    assert float(push["total"]) >= (value.nbytes + 20_000 * 64 * 4) / 1e6 - 0.1
    # TF's order: the save's lines, then the restore's.
    messages = _messages(caplog)
    firsts = [next(i for i, m in enumerate(messages) if m.startswith(d)) for d in what.values()]
    assert firsts == sorted(firsts)


def test_a_bar_needs_tqdm_else_plain_lines(caplog):
    caplog.set_level(logging.INFO, logger="psrt")
    p = Progress("bar", 10, interval_secs=0, bar=True)
    has_tqdm = importlib.util.find_spec("tqdm") is not None
    assert (p._bar is not None) is has_tqdm
    p.update(5)
    p.close()
    assert len(_lines(caplog, "bar")) == (0 if has_tqdm else 1)
    assert len(_closing(caplog, "bar")) == 1
