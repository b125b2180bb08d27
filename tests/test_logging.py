"""Tests for psrt's default logging (psrt/_logging.py) and the progress lines it shows: a
server's "Started server with target: ..." and a session waiting for its ps task.

Whether ``import psrt`` installs its handler depends on the logging set-up of the process
that imports it, so those cases run in fresh interpreters; the waiting session runs here,
with the log intervals shortened.
"""

from __future__ import annotations

import io
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import psrt
from psrt import errors
from psrt.platform import psrt_logging as _logging
from psrt.runtime import session

SRC = str(Path(psrt.__file__).resolve().parents[1])

# A ps task on a port the OS hands out, started and stopped: one "Started server" line.
_START_SERVER = textwrap.dedent("""
    import psrt
    server = psrt.train.Server({"ps": ["127.0.0.1:0"]}, job_name="ps", task_index=0)
    print(server.port, flush=True)
    server.stop()
""")
_STARTED = re.compile(r"Started server with target: psrt://127\.0\.0\.1:(\d+) "
                      r"\(/job:ps/task:0, listening on 127\.0\.0\.1:(\d+)\)")


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != _logging.LOG_LEVEL_ENV}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (SRC, os.environ.get("PYTHONPATH")) if p)
    full_env.update(env or {})
    result = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result


def test_without_logging_setup_a_ps_says_where_it_serves():
    result = _python(_START_SERVER)
    port = result.stdout.strip()
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("INFO:psrt:Started server with target: "), lines
    m = _STARTED.search(lines[0])
    assert m is not None and m.group(1) == m.group(2) == port, lines


@pytest.mark.parametrize("value, shown", [("WARNING", False), ("error", False),
                                          ("INFO", True), ("10", True)])
def test_psrt_log_level_sets_the_level(value, shown):
    result = _python(_START_SERVER, env={"PSRT_LOG_LEVEL": value})
    assert bool(_STARTED.search(result.stderr)) is shown, result.stderr


def test_a_bad_psrt_log_level_is_named_and_info_stays():
    result = _python(_START_SERVER, env={"PSRT_LOG_LEVEL": "chatty"})
    assert ("WARNING:psrt:PSRT_LOG_LEVEL='chatty' is not a logging level; expected one of "
            "DEBUG, INFO, WARNING, ERROR, CRITICAL or an integer") in result.stderr
    assert _STARTED.search(result.stderr), result.stderr


def test_an_application_configured_before_import_keeps_its_own_level():
    # basicConfig at WARNING first: psrt is a library like any other, nothing at INFO shows.
    code = "import logging; logging.basicConfig(level=logging.WARNING)\n" + _START_SERVER
    result = _python(code)
    assert result.stderr == ""
    # ... and at INFO with its own format, each line once, in that format.
    code = ("import logging; logging.basicConfig(level=logging.INFO, format='APP %(name)s "
            "%(message)s')\n" + _START_SERVER)
    lines = _python(code).stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("APP psrt Started server"), lines


def test_an_application_configured_after_import_sees_each_line_once():
    # mnist_dist.py's order: import psrt, then logging.basicConfig in main().
    code = _START_SERVER.replace(
        "import psrt\n", "import psrt, logging\nlogging.basicConfig(format='APP %(message)s')\n")
    lines = _python(code).stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("APP Started server"), lines


def test_psrt_log_level_also_applies_when_the_application_configured_logging():
    code = "import logging; logging.basicConfig(level=logging.INFO)\n" + _START_SERVER
    assert _python(code, env={"PSRT_LOG_LEVEL": "WARNING"}).stderr == ""


def test_install_writes_to_the_current_stderr(monkeypatch):
    logger = logging.Logger("psrt-test-install")  # not in the manager: no parent handlers
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    handler = _logging.install(environ={}, logger=logger)
    assert handler is not None and logger.level == logging.INFO
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buffer)
    logger.info("step %d", 7)
    logger.debug("not shown")
    assert buffer.getvalue() == "INFO:psrt-test-install:step 7\n"


def test_install_leaves_a_configured_logger_alone(monkeypatch):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    logger = logging.Logger("psrt-test-configured")
    logger.setLevel(logging.ERROR)
    assert _logging.install(environ={}, logger=logger) is None
    assert logger.level == logging.ERROR and not logger.handlers
    assert _logging.install(environ={"PSRT_LOG_LEVEL": "debug"}, logger=logger) is None
    assert logger.level == logging.DEBUG


# ---- a session waiting for its ps task ----------------------------------------------------

def _refused_port() -> socket.socket:
    """A socket bound to a port the OS hands out but not listening: connects are refused
    until it is closed and a server takes the port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s


@pytest.fixture
def quick_logs(monkeypatch, caplog):
    monkeypatch.setattr(session, "_CONNECT_FIRST_LOG_SECS", 0.3)
    monkeypatch.setattr(session, "_CONNECT_LOG_SECS", 0.5)
    caplog.set_level(logging.INFO, logger="psrt")
    return caplog


def _waiting_lines(caplog) -> list[tuple[float, str]]:
    return [(r.created, r.getMessage()) for r in caplog.records
            if r.getMessage().startswith("Waiting for ")]


def test_a_worker_waiting_for_its_ps_logs_which_task_and_gives_up(quick_logs):
    blocker = _refused_port()
    address = "127.0.0.1:%d" % blocker.getsockname()[1]
    graph = psrt.Graph()
    with graph.as_default(), psrt.device("/job:ps/task:0"):
        psrt.Variable([1.0, 2.0], name="w")
    config = psrt.ConfigProto(connect_timeout_secs=1.5, cluster_def={"ps": [address]})
    start = time.monotonic()
    try:
        with pytest.raises(errors.UnavailableError, match=re.escape(
                f"/job:ps/task:0 at {address} did not accept a connection within 1.5 s")):
            psrt.Session(address, graph=graph, config=config)
    finally:
        blocker.close()
    elapsed = time.monotonic() - start
    assert 1.5 <= elapsed < 5
    lines = _waiting_lines(quick_logs)
    # At 0.3, 0.8 and 1.3 s: the first soon, then one per interval, never more often.
    assert len(lines) == 3, lines
    for _, message in lines:
        assert re.fullmatch(rf"Waiting for /job:ps/task:0 at {re.escape(address)} to start "
                            rf"\(\d+ s so far; giving up after 1.5 s\)", message), message
    gaps = [b[0] - a[0] for a, b in zip(lines, lines[1:])]
    assert all(0.4 <= gap <= 0.9 for gap in gaps), gaps


def test_a_worker_started_before_its_ps_connects_once_it_is_up(quick_logs):
    blocker = _refused_port()
    port = blocker.getsockname()[1]
    address = f"127.0.0.1:{port}"
    servers = []

    def start_ps_late() -> None:
        time.sleep(0.6)
        blocker.close()
        servers.append(psrt.train.Server({"ps": [address]}, job_name="ps", task_index=0))

    graph = psrt.Graph()
    with graph.as_default(), psrt.device("/job:ps/task:0"):
        psrt.Variable([1.0, 2.0], name="w")
    config = psrt.ConfigProto(connect_timeout_secs=30, cluster_def={"ps": [address]})
    starter = threading.Thread(target=start_ps_late)
    starter.start()
    try:
        with psrt.Session(address, graph=graph, config=config):
            pass
    finally:
        starter.join()
        for s in servers:
            s.stop()
    messages = [r.getMessage() for r in quick_logs.records]
    assert any(m.startswith(f"Waiting for /job:ps/task:0 at {address} to start")
               for m in messages), messages
    assert any(re.fullmatch(rf"Connected to /job:ps/task:0 at {re.escape(address)} after "
                            r"\d+ s", m) for m in messages), messages
    assert any(m.startswith(f"Started server with target: psrt://{address} ")
               for m in messages), messages
