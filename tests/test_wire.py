"""Bad input never hurts the server (docs/protocol.md, "Validation").

A ps task runs in a subprocess (tests/_ps_task.py) with a small max_payload. Each test sends
crafted frames over a raw socket and checks the designed outcome: an error reply with the
canonical status code and a message naming the bad value, then either a closed connection (bad
fixed header) or a connection still in step (per-op mismatch: the payload is discarded), or a
closed connection and no reply at all (truncated frame). Around every test a fixture checks that
the ps process is alive, that a connection opened before the test still gets answers, and that
no stored value (variables, optimizer slots, global step) changed.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import _frames as fr
from _ps_task import SRC, PsProcess
from psrt import _core, errors

MAX_PAYLOAD = 1 << 20
W_SHAPE = (4, 3)           # float32, Adagrad: 48 bytes
W_BYTES = 48
E_SHAPE = (4, 32768)       # float32, GradientDescent: 512 KiB, rows of 128 KiB
D_SHAPE = (5,)             # float64, GradientDescent


@pytest.fixture(scope="module")
def ps():
    proc = PsProcess(max_payload=MAX_PAYLOAD)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def cluster(ps):
    """A well-behaved worker (psrt Client) that registered the variables; ids by name."""
    client = _core.Client("worker", 0)
    client.timeout = 10.0
    client.connect(0, ps.address, 10.0)
    handles = client.register([
        (0, "W", "float32", list(W_SHAPE), "Adagrad", {"learning_rate": 0.1, "slot_init": 0.1},
         np.arange(12, dtype=np.float32).reshape(W_SHAPE)),
        (0, "E", "float32", list(E_SHAPE), "GradientDescent", {"learning_rate": 1.0},
         np.ones(E_SHAPE, np.float32)),
        (0, "D", "float64", list(D_SHAPE), "GradientDescent", {"learning_rate": 1.0},
         np.linspace(0, 1, 5)),
        (0, "global_step", "int64", [], "", {}, np.array(7, np.int64)),
    ])
    names = ["W", "E", "D", "global_step"]
    h = {n: handle for n, (handle, _) in zip(names, handles)}
    ids = {e["name"]: e["id"] for e in client.list_variables(0)}
    yield client, h, ids
    client.close()


def snapshot(client, h):
    w = np.empty(W_SHAPE, np.float32)
    accum = np.empty(W_SHAPE, np.float32)
    e = np.empty(E_SHAPE, np.float32)
    d = np.empty(D_SHAPE, np.float64)
    client.pull([h["W"], h["E"], h["D"]], [w, e, d])
    client.pull([h["W"]], [accum], slot=1)
    return {"W": w, "W/Adagrad": accum, "E": e, "D": d,
            "global_step": client.step_read(h["global_step"])}


@pytest.fixture(autouse=True)
def unharmed(ps, cluster):
    """Checks after each test: ps alive, an older connection still served, values unchanged."""
    client, h, _ = cluster
    before = snapshot(client, h)
    bystander = fr.connect(ps.address)
    yield
    assert ps.alive(), f"ps task died: {ps.stderr()}"
    bystander.sendall(fr.frame(fr.PING, request_id=77))
    got = fr.read_frame(bystander)
    assert got is not None and got[0]["status"] == fr.OK and got[0]["request_id"] == 77
    bystander.close()
    client.ping([0])
    after = snapshot(client, h)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


@pytest.fixture
def peer(ps):
    """A raw connection that has said HELLO."""
    sock = fr.connect(ps.address)
    yield sock
    sock.close()


def expect_error(sock, code, *words):
    got = fr.read_frame(sock)
    assert got is not None, "expected an error reply, the connection closed"
    h, payload = got
    msg = payload.decode()
    assert h["flags"] & fr.F_REPLY
    assert h["status"] == code, (h["status"], msg)
    assert h["version"] == fr.VERSION and h["magic"] == fr.MAGIC
    for w in words:
        assert w in msg, (w, msg)
    return h, msg


def assert_in_step(sock):
    """The stream is still framed correctly: a PING on the same connection is answered."""
    sock.sendall(fr.frame(fr.PING, request_id=4242))
    got = fr.read_frame(sock)
    assert got is not None, "connection closed; expected it to stay open"
    assert got[0]["status"] == fr.OK and got[0]["request_id"] == 4242


def var_spec(name: bytes, dtype=fr.FLOAT32, shape=(2,), optimizer=1, rank=None, lr=0.1,
             replicas=0, total=0) -> bytes:
    """A VarSpec (docs/protocol.md); optimizer codes: 1 GD, 2 Adagrad, 3 Momentum, 4 Adam."""
    rank = len(shape) if rank is None else rank
    return (struct.pack("<H", len(name)) + name + struct.pack("<BB", dtype, rank) +
            b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<BBB", optimizer, 0, 0) +
            struct.pack("<6d", lr, 0.0, 0.9, 0.999, 1e-8, 0.0) +
            struct.pack("<2I", replicas, total) +
            struct.pack("<7d", 0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0) +  # v4 optimizer fields
            struct.pack("<BddBBQQB", 0, 0.0, 0.0, 0, 0, 0, 0, 0) +    # no initializer
            struct.pack("<BQ", 0, 0))                                  # v5: not a table


# ---- A bad fixed header: one error reply, then the connection is closed -------------------

BAD_HEADERS = [
    ("magic", lambda ids: fr.header(fr.PING, magic=0xDEADBEEF), fr.INVALID_ARGUMENT,
     ["magic", "0xdeadbeef", "0x54525350"]),
    ("version 6", lambda ids: fr.header(fr.PING, version=6), fr.FAILED_PRECONDITION,
     ["version 6", "version 7"]),
    ("version 0", lambda ids: fr.header(fr.PING, version=0), fr.FAILED_PRECONDITION,
     ["version 0", "version 7"]),
    ("op 0", lambda ids: fr.header(0), fr.INVALID_ARGUMENT, ["unknown op 0", "1..19"]),
    ("op 20", lambda ids: fr.header(20), fr.INVALID_ARGUMENT, ["unknown op 20"]),
    ("op 255", lambda ids: fr.header(255), fr.INVALID_ARGUMENT, ["unknown op 255"]),
    ("dtype code", lambda ids: fr.header(fr.PULL, var_id=ids["W"], dtype=9),
     fr.INVALID_ARGUMENT, ["dtype code 9"]),
    ("status on request", lambda ids: fr.header(fr.PING, status=99), fr.INVALID_ARGUMENT,
     ["status code 99"]),
    ("status 3 on request", lambda ids: fr.header(fr.PING, status=3), fr.INVALID_ARGUMENT,
     ["status code 3", "requests must carry 0"]),
    ("flags2 bit 4", lambda ids: fr.header(fr.PING, flags2=0x10), fr.INVALID_ARGUMENT,
     ["flags2 bits 0x10", "0x01 SEQUENCED", "0x08 STALE"]),
    ("flags2 reply bits on a request",
     lambda ids: fr.header(fr.PULL, var_id=ids["W"], flags2=fr.F2_DUPLICATE | fr.F2_AWAITING),
     fr.INVALID_ARGUMENT, ["flags2 bits 0x06", "not valid on a request"]),
    ("reserved2", lambda ids: fr.header(fr.PING, reserved2=5), fr.INVALID_ARGUMENT,
     ["reserved"]),
    ("reply flag", lambda ids: fr.header(fr.PULL, var_id=ids["W"], flags=fr.F_REPLY),
     fr.INVALID_ARGUMENT, ["reply flag"]),
    ("above max_payload",  # a frame read whole (REGISTER without an initial value)
     lambda ids: fr.header(fr.REGISTER, MAX_PAYLOAD + 1),
     fr.RESOURCE_EXHAUSTED, [f"{MAX_PAYLOAD + 1} bytes", f"maximum of {MAX_PAYLOAD}"]),
    ("push of the wrong size above max_payload",
     lambda ids: fr.header(fr.PUSH, MAX_PAYLOAD + 1, var_id=ids["E"], dtype=fr.FLOAT32),
     fr.INVALID_ARGUMENT, [f"{MAX_PAYLOAD + 1} bytes", "expected 524288"]),
    ("payload_len 2**64-1", lambda ids: fr.header(fr.REGISTER, 2**64 - 1),
     fr.RESOURCE_EXHAUSTED, [str(2**64 - 1), f"maximum of {MAX_PAYLOAD}"]),
]


@pytest.mark.parametrize("make,code,words", [c[1:] for c in BAD_HEADERS],
                         ids=[c[0] for c in BAD_HEADERS])
def test_bad_fixed_header_gets_error_then_close(peer, cluster, make, code, words):
    _, _, ids = cluster
    peer.sendall(make(ids))
    expect_error(peer, code, *words)
    assert fr.is_closed(peer)


def test_bad_header_before_hello_gets_error_then_close(ps):
    with fr.connect(ps.address, say_hello=False) as sock:
        sock.sendall(fr.header(fr.HELLO, version=8))
        expect_error(sock, fr.FAILED_PRECONDITION, "version 8", "version 7")
        assert fr.is_closed(sock)


def test_first_frame_must_be_hello(ps, cluster):
    _, _, ids = cluster
    with fr.connect(ps.address, say_hello=False) as sock:
        sock.sendall(fr.frame(fr.PUSH, b"\0" * W_BYTES, var_id=ids["W"], dtype=fr.FLOAT32))
        expect_error(sock, fr.FAILED_PRECONDITION, "first frame must be HELLO", "PUSH")
        assert fr.is_closed(sock)


def test_hello_reply_names_version_task_and_incarnation(ps):
    with fr.connect(ps.address, say_hello=False) as sock:
        sock.sendall(fr.frame(fr.HELLO, fr.hello_payload(b"worker"), var_id=3, request_id=9))
        h, payload = fr.read_frame(sock)
        assert h["status"] == fr.OK and h["flags"] == fr.F_REPLY and h["request_id"] == 9
        assert h["version"] == fr.VERSION and h["var_id"] == 0 and payload == b"ps"
        assert h["step"] > 0  # the incarnation


def test_protocol_doc_states_the_version_and_op_range_a_ps_task_speaks(ps):
    """docs/protocol.md says what a running ps task does (issue 22, item 11): the version it
    puts in every header and the HELLO reply, and the highest op it accepts. Learned from the
    ps process itself, not from constants a test could get wrong the same way as the doc."""
    with fr.connect(ps.address, say_hello=False) as sock:
        sock.sendall(fr.frame(fr.HELLO, fr.hello_payload(b"worker"), var_id=0))
        h, _ = fr.read_frame(sock)
        assert h["status"] == fr.OK
        version = h["version"]
        sock.sendall(fr.header(255))
        _, msg = expect_error(sock, fr.INVALID_ARGUMENT, "unknown op 255")
    max_op = int(re.search(r"valid ops are 1\.\.(\d+)", msg).group(1))
    assert (version, max_op) == (7, 19)   # csrc/wire.h: kWireVersion, kMaxOp (REPLICA_INSTALL)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "docs", "protocol.md"), encoding="utf-8") as f:
        doc = f.read()
    assert doc.startswith(f"# The psrt wire protocol, version {version}\n")
    assert f"| `version` | wire version of the sender: `{version}`" in doc
    assert f"replies OK with `version` {version}," in doc
    assert f"| `version` ≠ {version} " in doc
    assert f"| `op` = 0 or > {max_op} " in doc
    assert f"operation code, 1..{max_op} " in doc
    assert f"\n| {max_op} | REPLICA_INSTALL |" in doc
    assert not re.search(r"\n\| %d \| [A-Z_]+ \|" % (max_op + 1), doc)  # no op row past it
    # No stale number is left in the header checks or the set-up.
    stale = [line for line in doc.splitlines()
             if re.search(r"`version` ≠ (?!%d\b)\d|`op` = 0 or > (?!%d\b)\d" % (version, max_op),
                          line)]
    assert stale == []


def test_protocol_doc_hello_example_is_the_documented_layout():
    """docs/protocol.md's HELLO example (version 7, with a client id) is byte for byte what
    tests/_frames.py packs from the documented fields."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "docs", "protocol.md"), encoding="utf-8") as f:
        doc = f.read()
    block = doc.split("from a Client whose id is `0x0123456789abcdef`:\n```\n", 1)[1]
    block = block.split("```", 1)[0]
    example = bytes.fromhex(" ".join(line[:49] for line in block.splitlines()))
    want = fr.frame(fr.HELLO, fr.hello_payload(b"worker", b"ps", 0,
                                               client_id=0x0123456789ABCDEF), var_id=1)
    assert example == want


# ---- Per-op mismatches: an error reply, the payload discarded, the stream stays in step ---

def push_w(ids, payload=b"\0" * W_BYTES, **kw):
    kw.setdefault("var_id", ids["W"])
    kw.setdefault("dtype", fr.FLOAT32)
    return fr.frame(fr.PUSH, payload, **kw)


def nan_bytes(n):
    return np.full(n // 4, np.nan, np.float32).tobytes()


PER_OP = [
    ("pull unknown id", lambda ids: fr.frame(fr.PULL, var_id=9999), fr.NOT_FOUND,
     ["no variable with id 9999"]),
    ("pull id 0", lambda ids: fr.frame(fr.PULL, var_id=0), fr.NOT_FOUND, ["id 0"]),
    ("push unknown id", lambda ids: push_w(ids, nan_bytes(W_BYTES), var_id=12345),
     fr.NOT_FOUND, ["12345"]),
    ("push float64 to float32",
     lambda ids: push_w(ids, nan_bytes(2 * W_BYTES), dtype=fr.FLOAT64), fr.INVALID_ARGUMENT,
     ["dtype float64", "'W'", "float32"]),
    ("push dtype 0", lambda ids: push_w(ids, nan_bytes(W_BYTES), dtype=0), fr.INVALID_ARGUMENT,
     ["dtype invalid", "'W'"]),
    ("push int64 to float64",
     lambda ids: push_w(ids, b"\1" * 40, var_id=ids["D"], dtype=fr.INT64), fr.INVALID_ARGUMENT,
     ["dtype int64", "'D'", "float64"]),
    ("push short", lambda ids: push_w(ids, nan_bytes(W_BYTES - 4)), fr.INVALID_ARGUMENT,
     ["'W' float32[4,3]", "payload of 44 bytes", "expected 48"]),
    ("push long", lambda ids: push_w(ids, nan_bytes(W_BYTES + 4)), fr.INVALID_ARGUMENT,
     ["payload of 52 bytes", "expected 48"]),
    ("push empty", lambda ids: push_w(ids, b""), fr.INVALID_ARGUMENT,
     ["payload of 0 bytes", "expected 48"]),
    ("assign wrong size",
     lambda ids: fr.frame(fr.ASSIGN, b"\0" * 40, var_id=ids["W"], dtype=fr.FLOAT32),
     fr.INVALID_ARGUMENT, ["ASSIGN", "payload of 40 bytes", "expected 48"]),
    ("assign wrong dtype",
     lambda ids: fr.frame(fr.ASSIGN, b"\0" * 48, var_id=ids["W"], dtype=fr.INT64),
     fr.INVALID_ARGUMENT, ["dtype int64", "'W'"]),
    ("assign to missing slot",
     lambda ids: fr.frame(fr.ASSIGN, b"\0" * 48, var_id=ids["W"], dtype=fr.FLOAT32, slot=9),
     fr.INVALID_ARGUMENT, ["'W'", "slot index 8"]),
    ("assign_add wrong size",
     lambda ids: fr.frame(fr.ASSIGN_ADD, b"\0" * 16, var_id=ids["global_step"], dtype=fr.INT64),
     fr.INVALID_ARGUMENT, ["ASSIGN_ADD", "payload of 16 bytes", "expected 8"]),
    ("pull with payload", lambda ids: fr.frame(fr.PULL, b"\0" * 8, var_id=ids["W"]),
     fr.INVALID_ARGUMENT, ["payload of 8 bytes", "expected 0"]),
    ("pull missing slot", lambda ids: fr.frame(fr.PULL, var_id=ids["E"], slot=1),
     fr.INVALID_ARGUMENT, ["'E'", "slot 0"]),
    ("step_read with payload",
     lambda ids: fr.frame(fr.STEP_READ, b"\0" * 8, var_id=ids["global_step"]),
     fr.INVALID_ARGUMENT, ["expected 0"]),
    ("step_increment on float var",
     lambda ids: fr.frame(fr.STEP_INCREMENT, var_id=ids["W"], step=1), fr.INVALID_ARGUMENT,
     ["'W'", "int64 scalar"]),
    ("sparse flag on assign",
     lambda ids: fr.frame(fr.ASSIGN, b"\0" * 48, var_id=ids["W"], dtype=fr.FLOAT32,
                          flags=fr.F_SPARSE, count=1),
     fr.INVALID_ARGUMENT, ["sparse flag"]),
    ("sparse pull of a scalar",
     lambda ids: fr.frame(fr.PULL, b"\0" * 8, var_id=ids["global_step"], flags=fr.F_SPARSE,
                          count=1),
     fr.INVALID_ARGUMENT, ["scalar", "'global_step'"]),
    ("sparse push count lies",
     lambda ids: push_w(ids, struct.pack("<q", 0) + nan_bytes(12), flags=fr.F_SPARSE, count=2),
     fr.INVALID_ARGUMENT, ["payload of 20 bytes", "expected 40"]),
    ("sparse push index out of range",
     lambda ids: push_w(ids, struct.pack("<2q", 0, 7) + nan_bytes(24), flags=fr.F_SPARSE,
                        count=2),
     fr.INVALID_ARGUMENT, ["'W'", "index 7 at position 1", "[0, 4)"]),
    ("sparse push negative index",
     lambda ids: push_w(ids, struct.pack("<q", -1) + nan_bytes(12), flags=fr.F_SPARSE, count=1),
     fr.INVALID_ARGUMENT, ["index -1 at position 0"]),
    ("sparse pull index out of range",
     lambda ids: fr.frame(fr.PULL, struct.pack("<3q", 1, 2, 4), var_id=ids["E"],
                          flags=fr.F_SPARSE, count=3),
     fr.INVALID_ARGUMENT, ["'E'", "index 4 at position 2", "[0, 4)"]),
    ("sparse pull reply above max_payload",
     lambda ids: fr.frame(fr.PULL, b"\0" * MAX_PAYLOAD, var_id=ids["E"], flags=fr.F_SPARSE,
                          count=MAX_PAYLOAD // 8),
     fr.RESOURCE_EXHAUSTED, ["'E'", f"maximum of {MAX_PAYLOAD}"]),
    ("step-tagged push to an asynchronous variable",
     lambda ids: push_w(ids, nan_bytes(W_BYTES), flags=fr.F_STEP_TAGGED),
     fr.FAILED_PRECONDITION, ["'W'", "not trained synchronously"]),
    ("wait flag on a push",
     lambda ids: push_w(ids, nan_bytes(W_BYTES), flags=fr.F_WAIT_STEP, arg1=1.0),
     fr.INVALID_ARGUMENT, ["wait flag", "PUSH"]),
    ("wait of 61 s", lambda ids: fr.frame(fr.PULL, var_id=ids["W"], flags=fr.F_WAIT_STEP,
                                          arg1=61.0),
     fr.INVALID_ARGUMENT, ["wait flag", "0..60 s"]),
    ("wait of NaN s", lambda ids: fr.frame(fr.PULL, var_id=ids["W"], flags=fr.F_WAIT_STEP,
                                           arg1=float("nan")),
     fr.INVALID_ARGUMENT, ["wait flag"]),
    ("wait on an asynchronous variable",
     lambda ids: fr.frame(fr.PULL, var_id=ids["W"], flags=fr.F_WAIT_STEP, step=1, arg1=0.0),
     fr.FAILED_PRECONDITION, ["'W'", "not trained synchronously"]),
    ("step tag on a pull", lambda ids: fr.frame(fr.PULL, var_id=ids["W"],
                                                flags=fr.F_STEP_TAGGED),
     fr.INVALID_ARGUMENT, ["step-tag flag"]),
    ("step-tagged increment of an asynchronous step",
     lambda ids: fr.frame(fr.STEP_INCREMENT, var_id=ids["global_step"],
                          flags=fr.F_STEP_TAGGED, step=7),
     fr.FAILED_PRECONDITION, ["'global_step'", "not trained synchronously"]),
    ("second hello too long", lambda ids: fr.frame(fr.HELLO, b"w" * 5000), fr.INVALID_ARGUMENT,
     ["HELLO", "payload of 5000 bytes", "at most 4785"]),
    ("second hello malformed", lambda ids: fr.frame(fr.HELLO, b"worker"), fr.INVALID_ARGUMENT,
     ["HELLO", "truncated payload"]),
    ("worker_done name not utf-8", lambda ids: fr.frame(fr.WORKER_DONE, b"\xff\xfeworker"),
     fr.INVALID_ARGUMENT, ["WORKER_DONE", "UTF-8"]),
    ("worker_done overlong utf-8", lambda ids: fr.frame(fr.WORKER_DONE, b"\xc0\xaf"),
     fr.INVALID_ARGUMENT, ["UTF-8"]),
    ("register garbage", lambda ids: fr.frame(fr.REGISTER, b"\x05\x00ab"), fr.INVALID_ARGUMENT,
     ["register", "name"]),
    ("register truncated spec", lambda ids: fr.frame(fr.REGISTER, var_spec(b"X")[:-9]),
     fr.INVALID_ARGUMENT, ["'X'", "truncated"]),
    ("register rank 9", lambda ids: fr.frame(fr.REGISTER, var_spec(b"X", shape=(1,) * 9)),
     fr.INVALID_ARGUMENT, ["'X'", "rank 9"]),
    ("register negative dim", lambda ids: fr.frame(fr.REGISTER, var_spec(b"X", shape=(2, -3))),
     fr.INVALID_ARGUMENT, ["'X'", "dimension -3"]),
    ("register huge", lambda ids: fr.frame(fr.REGISTER, var_spec(b"X", shape=(1 << 30, 1 << 30))),
     fr.INVALID_ARGUMENT, ["'X'", "dimension"]),
    ("register existing name, other shape",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"W", shape=(3, 4), optimizer=2)),
     fr.INVALID_ARGUMENT, ["'W'", "already registered", "float32[4,3]", "float32[3,4]"]),
    ("register init of wrong size",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"W", shape=(4, 3), optimizer=2) + b"\0" * 8,
                          flags=fr.F_INIT),
     fr.INVALID_ARGUMENT, ["'W'", "initial value of 8 bytes", "expected 48"]),
    ("register trailing bytes",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"W", shape=(4, 3), optimizer=2) + b"\0" * 48),
     fr.INVALID_ARGUMENT, ["'W'", "48 unexpected bytes"]),
    ("register int64 with optimizer",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"X", dtype=fr.INT64, optimizer=1)),
     fr.INVALID_ARGUMENT, ["'X'", "int64"]),
    ("register name not utf-8",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"X\xff\xfe")), fr.INVALID_ARGUMENT,
     ["variable name 'X\\xff\\xfe'", "not valid UTF-8"]),
    ("register overlong utf-8 name",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"\xc0\xaf")), fr.INVALID_ARGUMENT,
     ["not valid UTF-8"]),
    ("pull optimizer state of a non-Adam variable",
     lambda ids: fr.frame(fr.PULL, var_id=ids["W"], slot=255), fr.INVALID_ARGUMENT,
     ["'W'", "Adagrad", "Adam's beta powers only"]),
    ("assign optimizer state of a non-Adam variable",
     lambda ids: fr.frame(fr.ASSIGN, nan_bytes(16), var_id=ids["W"], dtype=fr.FLOAT32,
                          slot=255), fr.INVALID_ARGUMENT, ["'W'", "Adam's beta powers only"]),
    ("register unknown optimizer",
     lambda ids: fr.frame(fr.REGISTER, var_spec(b"X", optimizer=12)),
     fr.INVALID_ARGUMENT, ["'X'", "optimizer code 12"]),
]


@pytest.mark.parametrize("make,code,words", [c[1:] for c in PER_OP],
                         ids=[c[0] for c in PER_OP])
def test_per_op_mismatch_gets_error_and_stays_in_step(peer, cluster, make, code, words):
    _, _, ids = cluster
    peer.sendall(make(ids))
    expect_error(peer, code, *words)
    assert_in_step(peer)


def test_error_reply_echoes_request_id(peer, cluster):
    peer.sendall(fr.frame(fr.PULL, var_id=9999, request_id=0x1122334455667788))
    h, _ = expect_error(peer, fr.NOT_FOUND)
    assert h["request_id"] == 0x1122334455667788 and h["op"] == fr.PULL


def test_pipelined_bad_and_good_frames_answered_in_order(peer, cluster):
    client, h, ids = cluster
    frames = [fr.frame(fr.PULL, var_id=ids["W"], request_id=1),
              push_w(ids, nan_bytes(W_BYTES - 4), request_id=2),
              fr.frame(fr.STEP_READ, var_id=ids["global_step"], request_id=3),
              push_w(ids, nan_bytes(W_BYTES), var_id=999, request_id=4),
              fr.frame(fr.PING, request_id=5)]
    peer.sendall(b"".join(frames))
    replies = [fr.read_frame(peer) for _ in frames]
    assert [r[0]["request_id"] for r in replies] == [1, 2, 3, 4, 5]
    assert [r[0]["status"] for r in replies] == [fr.OK, fr.INVALID_ARGUMENT, fr.OK,
                                                  fr.NOT_FOUND, fr.OK]
    w = np.frombuffer(replies[0][1], np.float32).reshape(W_SHAPE)
    np.testing.assert_array_equal(w, snapshot(client, h)["W"])
    assert replies[2][0]["step"] == 7


# ---- Truncated frames and lengths that lie: no reply, connection closed, nothing written --

def test_truncated_header_writes_nothing(peer):
    peer.sendall(fr.header(fr.PING)[:30])
    peer.shutdown(socket.SHUT_WR)
    assert fr.is_closed(peer)


def test_truncated_payload_writes_nothing(peer, cluster):
    _, _, ids = cluster
    full = push_w(ids, nan_bytes(W_BYTES))
    peer.sendall(full[:64 + 20])
    peer.shutdown(socket.SHUT_WR)
    assert fr.is_closed(peer)


def test_truncated_large_push_writes_nothing(peer, cluster):
    _, _, ids = cluster
    payload = nan_bytes(4 * 32768 * 4)
    peer.sendall(fr.frame(fr.PUSH, payload, var_id=ids["E"], dtype=fr.FLOAT32)[:-1])
    peer.shutdown(socket.SHUT_WR)
    assert fr.is_closed(peer)


def test_length_larger_than_sent_then_close(peer, cluster):
    _, _, ids = cluster
    # payload_len is plausible for the frame limit but not what the variable needs, and the
    # peer sends less than it announced before closing: the discard hits EOF.
    peer.sendall(fr.header(fr.PUSH, 1000, var_id=ids["W"], dtype=fr.FLOAT32) + b"\0" * 10)
    peer.shutdown(socket.SHUT_WR)
    assert fr.is_closed(peer)


def test_unknown_id_with_short_payload_then_close(peer):
    peer.sendall(fr.header(fr.PUSH, 4096, var_id=31337, dtype=fr.FLOAT32) + b"\0" * 100)
    peer.shutdown(socket.SHUT_WR)
    assert fr.is_closed(peer)


def test_peer_vanishes_mid_reply(ps, cluster):
    # A peer that asks for 1 MiB and resets the connection without reading it.
    _, _, ids = cluster
    for _ in range(3):
        sock = fr.connect(ps.address)
        sock.sendall(fr.frame(fr.PULL, var_id=ids["E"]) * 4)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def test_many_garbage_connections_in_parallel(ps):
    socks = []
    for i in range(20):
        sock = fr.connect(ps.address, say_hello=(i % 2 == 0))
        socks.append(sock)
    for i, sock in enumerate(socks):
        sock.sendall(fr.header(fr.PING, magic=i))
    for sock in socks:
        expect_error(sock, fr.INVALID_ARGUMENT, "magic")
        assert fr.is_closed(sock)
        sock.close()


# ---- Fuzz: random frames with a valid magic and version ----------------------------------

def random_frame(rng: random.Random, ids: dict[str, int]) -> bytes:
    # Ops that may legitimately change a value (PUSH, ASSIGN, ASSIGN_ADD, STEP_INCREMENT,
    # REGISTER with an initial value) get a payload length that cannot be right for any
    # variable here, so every frame is one the server must refuse or answer read-only.
    op = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 200])
    var_id = rng.choice(list(ids.values()) + [0, 99, 2**32 - 1])
    flags = rng.getrandbits(8) & ~fr.F_REPLY if rng.random() < 0.95 else rng.getrandbits(8)
    dtype = rng.choice([0, 1, 2, 3, 4, 255])
    slot = rng.choice([0, 0, 1, 2, 255, 17])
    count = rng.choice([0, 1, 2, 3, 2**32 - 1, rng.getrandbits(16)])
    n = rng.choice([0, 1, 7, 8, 16, 24, 63, 200])
    if op in (fr.PUSH, fr.ASSIGN, fr.ASSIGN_ADD, fr.STEP_INCREMENT, fr.REGISTER):
        n = rng.choice([1, 3, 5, 7, 13])  # odd: never a whole number of any element size
        if op == fr.STEP_INCREMENT:
            var_id = rng.choice([ids["W"], 99])
    payload = rng.randbytes(n)
    flags2 = rng.choice([1, 2, 4, 8, 16, 128]) if rng.random() < 0.03 else 0
    return fr.frame(op, payload, var_id=var_id, flags=flags, dtype=dtype, slot=slot,
                    count=count, flags2=flags2, step=rng.getrandbits(63),
                    request_id=rng.getrandbits(64), arg0=rng.random())


def test_fuzz_random_frames(ps, cluster):
    _, _, ids = cluster
    rng = random.Random(20261129)
    sock = fr.connect(ps.address)
    closed = 0
    for _ in range(600):
        sock.sendall(random_frame(rng, ids))
        got = fr.read_frame(sock)
        if got is None:  # the server closed this connection (bad fixed header): a new one
            closed += 1
            sock.close()
            sock = fr.connect(ps.address)
            continue
        h, _ = got
        assert h["flags"] & fr.F_REPLY and h["magic"] == fr.MAGIC
        if h["status"] != fr.OK:
            continue
        assert h["op"] in (fr.HELLO, fr.PULL, fr.STEP_READ, fr.IS_INITIALIZED, fr.LIST,
                           fr.PING, fr.WORKER_DONE), h
    sock.close()
    assert closed > 0


# ---- Regressions: frames and calls that crashed a ps or wrote on refusal -----------------

@pytest.fixture
def own_ps():
    """Starts extra ps processes (PsProcess keyword arguments); stops them by PID and closes
    every socket `make.connect` opened, also when the test failed."""
    made: list[PsProcess] = []
    socks: list[socket.socket] = []

    def make(**kw) -> PsProcess:
        made.append(PsProcess(**kw))
        return made[-1]

    def connect(proc: PsProcess) -> socket.socket:
        socks.append(fr.connect(proc.address))
        return socks[-1]

    make.connect = connect  # type: ignore[attr-defined]
    yield make
    for sock in socks:
        sock.close()
    for proc in made:
        proc.stop()


def request(sock, op, payload=b"", **fields):
    """Sends one frame and returns its reply (header, payload); fails if the ps closed."""
    sock.sendall(fr.frame(op, payload, **fields))
    got = fr.read_frame(sock)
    assert got is not None, "the ps closed the connection"
    return got


def register(sock, spec: bytes, init: bytes | None = None) -> int:
    h, msg = request(sock, fr.REGISTER, spec + (init if init is not None else b""), flags=fr.F_INIT if init is not None else 0)
    assert h["status"] == fr.OK, msg
    return h["var_id"]


def pull(sock, var_id: int, slot: int = 0) -> bytes:
    h, payload = request(sock, fr.PULL, var_id=var_id, slot=slot)
    assert h["status"] == fr.OK, payload
    return payload


def test_empty_sparse_step_tagged_push_is_a_no_op(own_ps):
    # Once a SIGSEGV: the server handed the store a null gradient, which copied from it.
    proc = own_ps()
    sock = own_ps.connect(proc)
    e0 = np.arange(8, dtype=np.float32)
    sid = register(sock, var_spec(b"S", shape=(4, 2), lr=1.0, replicas=1, total=1), e0.tobytes())
    h, _ = request(sock, fr.PUSH, var_id=sid, dtype=fr.FLOAT32,
                   flags=fr.F_SPARSE | fr.F_STEP_TAGGED, count=0, step=0)
    assert h["status"] == fr.OK
    assert h["flags"] & fr.F_STEP_TAGGED, "an empty gradient counts as the replica's gradient"
    assert h["step"] == 1  # R = 1: the (empty) mean was applied and the step advanced
    assert pull(sock, sid) == e0.tobytes()
    # R = 2: an empty gradient and one row; the row is averaged over the one gradient
    # that held it (TF's SparseConditionalAccumulator), the other rows stay.
    s2 = register(sock, var_spec(b"S2", shape=(4, 2), lr=1.0, replicas=2, total=2),
                  e0.tobytes())
    h, _ = request(sock, fr.PUSH, var_id=s2, dtype=fr.FLOAT32,
                   flags=fr.F_SPARSE | fr.F_STEP_TAGGED, count=0, step=0)
    assert (h["status"], h["step"], h["count"]) == (fr.OK, 0, 1)
    row = np.array([4, 8], np.float32)
    h, _ = request(sock, fr.PUSH, struct.pack("<q", 2) + row.tobytes(), var_id=s2,
                   dtype=fr.FLOAT32, flags=fr.F_SPARSE | fr.F_STEP_TAGGED, count=1, step=0)
    assert (h["status"], h["step"]) == (fr.OK, 1)
    want = e0.reshape(4, 2).copy()
    want[2] -= row
    assert np.frombuffer(pull(sock, s2), np.float32).tolist() == want.ravel().tolist()
    # A dense tagged gradient of a variable with no elements: an empty payload too.
    z = register(sock, var_spec(b"Z", shape=(0,), lr=1.0, replicas=1, total=1), b"")
    h, _ = request(sock, fr.PUSH, var_id=z, dtype=fr.FLOAT32, flags=fr.F_STEP_TAGGED, step=0)
    assert (h["status"], h["step"]) == (fr.OK, 1)
    assert proc.alive(), proc.stderr()


EMPTY_SLICES_SCRIPT = """
import numpy as np, psrt
gs = psrt.train.get_or_create_global_step()
emb = psrt.Variable(np.arange(12, dtype=np.float32).reshape(6, 2), name="emb")
opt = psrt.train.SyncReplicasOptimizer(psrt.train.GradientDescentOptimizer(0.5), 1, 1)
empty = psrt.IndexedSlices(np.zeros((0, 2), np.float32), np.zeros(0, np.int64))
train = opt.minimize(lambda e: (0.0, [empty]), global_step=gs, var_list=[emb])
with psrt.Session("") as sess:
    sess.run(psrt.global_variables_initializer())
    for _ in range(3):
        sess.run(train)
    print("RESULT", sess.run(gs), sess.run(emb).ravel().tolist())
"""


def test_sync_replicas_with_an_empty_indexed_slices_trains_on():
    # Through the public API the same frame ended the process with signal 11. A subprocess,
    # so a crash fails this test instead of ending the test run.
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", EMPTY_SLICES_SCRIPT], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    assert line == "RESULT 3 " + str([float(i) for i in range(12)])


def test_failed_slot_allocation_is_resource_exhausted_and_registers_nothing(own_ps):
    # Under an address-space limit a float32[2**27] Adam variable gets its value (512 MiB)
    # but not its first slot: once a write through a null pointer in the slot fill.
    proc = own_ps(address_space_extra=700 << 20)
    client = _core.Client("worker", 0)
    client.timeout = 30.0
    client.connect(0, proc.address, 10.0)
    with pytest.raises(errors.ResourceExhaustedError) as e:
        client.register([(0, "big", "float32", [1 << 27], "Adam", {"learning_rate": 0.1},
                          None)])
    msg = str(e.value)
    assert "'big'" in msg and str(1 << 29) in msg and "nothing was registered" in msg, msg
    assert [v["name"] for v in client.list_variables(0)] == []
    # The ps goes on: a variable that fits registers, trains and reads back.
    [(h, _)] = client.register([(0, "small", "float32", [4], "Adam", {"learning_rate": 0.1},
                                 np.ones(4, np.float32))])
    client.push([h], [np.ones(4, np.float32)])
    out = np.empty(4, np.float32)
    client.pull([h], [out])
    np.testing.assert_allclose(out, 0.9, rtol=1e-6)  # Adam's first step moves by ~lr
    assert [v["name"] for v in client.list_variables(0)] == ["small"]
    client.close()
    assert proc.alive(), proc.stderr()


def test_refused_sparse_adam_push_leaves_beta_powers_and_slots(own_ps):
    # An index out of range was refused with INVALID_ARGUMENT but had already advanced Adam's
    # beta powers: every later update then used the wrong step size.
    proc = own_ps()
    sock = own_ps.connect(proc)
    a = register(sock, var_spec(b"A", shape=(4, 2), optimizer=4), np.ones(8, np.float32).tobytes())
    before = [pull(sock, a, slot) for slot in (0, 1, 2, 255)]
    rows = np.full((2, 2), 3.0, np.float32).tobytes()
    for indices in ((0, 4), (-1, 1), (1, 2**40)):
        h, msg = request(sock, fr.PUSH, struct.pack("<2q", *indices) + rows, var_id=a,
                         dtype=fr.FLOAT32, flags=fr.F_SPARSE, count=2)
        assert h["status"] == fr.INVALID_ARGUMENT and b"out of range" in msg, msg
    assert [pull(sock, a, slot) for slot in (0, 1, 2, 255)] == before
    assert struct.unpack("<2d", before[3]) == (0.9, 0.999)
    # A good sparse push then advances the powers exactly once.
    h, _ = request(sock, fr.PUSH, struct.pack("<2q", 0, 3) + rows, var_id=a, dtype=fr.FLOAT32,
                   flags=fr.F_SPARSE, count=2)
    assert h["status"] == fr.OK
    assert struct.unpack("<2d", pull(sock, a, 255)) == (0.9 * 0.9, 0.999 * 0.999)


def test_refused_sync_gradient_leaves_the_pending_step(own_ps):
    # A synchronous gradient refused for a bad index, also one tagged with a newer step,
    # neither counts nor drops what the step has collected so far.
    proc = own_ps()
    sock = own_ps.connect(proc)
    e0 = np.zeros(8, np.float32)
    s = register(sock, var_spec(b"S", shape=(4, 2), lr=1.0, replicas=2, total=2), e0.tobytes())
    one = struct.pack("<q", 1) + np.ones(2, np.float32).tobytes()
    h, _ = request(sock, fr.PUSH, one, var_id=s, dtype=fr.FLOAT32,
                   flags=fr.F_SPARSE | fr.F_STEP_TAGGED, count=1, step=0)
    assert (h["status"], h["step"], h["count"]) == (fr.OK, 0, 1)
    bad = struct.pack("<q", 9) + np.ones(2, np.float32).tobytes()
    for tag in (0, 5):
        h, msg = request(sock, fr.PUSH, bad, var_id=s, dtype=fr.FLOAT32,
                         flags=fr.F_SPARSE | fr.F_STEP_TAGGED, count=1, step=tag)
        assert h["status"] == fr.INVALID_ARGUMENT and b"index 9" in msg, msg
    h, _ = request(sock, fr.PUSH, one, var_id=s, dtype=fr.FLOAT32,
                   flags=fr.F_SPARSE | fr.F_STEP_TAGGED, count=1, step=0)
    assert (h["status"], h["step"]) == (fr.OK, 1)  # the first gradient was still pending
    assert np.frombuffer(pull(sock, s), np.float32).tolist() == [0, 0, -1, -1, 0, 0, 0, 0]


def test_name_that_is_not_utf8_is_refused_and_list_still_works(ps, cluster):
    client, _, _ = cluster
    with contextlib.closing(fr.connect(ps.address)) as sock:
        h, msg = request(sock, fr.REGISTER, var_spec(b"bad\xff", shape=(1,)))
    assert h["status"] == fr.INVALID_ARGUMENT and b"not valid UTF-8" in msg
    names = [v["name"] for v in client.list_variables(0)]  # once a UnicodeDecodeError
    assert names == ["W", "E", "D", "global_step"]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_backs_off_and_serves_open_connections(own_ps):
    # With RLIMIT_NOFILE 64 and 100 idle peers accept() fails with EMFILE; the accept loop
    # used to poll and retry at once, 100 % of a CPU, forever.
    proc = own_ps(nofile=64)
    worker = own_ps.connect(proc)
    with contextlib.ExitStack() as idle_socks:
        idle = [idle_socks.enter_context(
            socket.create_connection(("127.0.0.1", proc.port), timeout=5)) for _ in range(100)]
        time.sleep(0.5)  # the ps accepts what it can and runs out of descriptors
        cpu0, t0 = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(2.0)
        busy = (_cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
        assert busy < 0.25, f"the ps used {busy:.0%} of a CPU while out of descriptors"
        assert_in_step(worker)  # the connection it had is still served
        # Peers past the limit are told why, not left hanging.
        refused = 0
        for sock in idle:
            sock.setblocking(False)
            try:
                data = sock.recv(4096)
            except (BlockingIOError, ConnectionResetError):
                continue
            if data[:4] == struct.pack("<I", fr.MAGIC):
                hdr = fr.decode(data[:64])
                assert hdr["status"] == 14, hdr
                assert b"cannot take another connection" in data[64:], data
                refused += 1
        assert refused >= 1
    # Once descriptors are free again new workers get in.
    deadline = time.monotonic() + 10
    while True:
        try:
            late = own_ps.connect(proc)
            break
        except (AssertionError, OSError):
            assert time.monotonic() < deadline, "no new connection served after the peers left"
            time.sleep(0.2)
    assert_in_step(late)
    assert proc.alive(), proc.stderr()


# ---- Connection limits: idle peers, peers that never say HELLO, too many peers -------------

def test_idle_and_silent_peers_are_closed_and_logged(own_ps):
    proc = own_ps(hello_timeout=1.0, idle_timeout=1.0)
    silent = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
    idle = own_ps.connect(proc)  # said HELLO, then nothing, and has no heartbeat
    with contextlib.closing(silent):
        t0 = time.monotonic()
        assert fr.is_closed(silent)
        assert fr.is_closed(idle)
        assert time.monotonic() - t0 < 5
    deadline = time.monotonic() + 5
    while len(proc.events()) < 2:
        assert time.monotonic() < deadline, proc.events()
        time.sleep(0.05)
    events = " | ".join(proc.events())
    assert "no HELLO within 1 s" in events and "closed idle connection of /job:worker/task:0" \
        in events, events


def test_a_half_sent_hello_is_closed_within_hello_timeout(own_ps):
    # Issue 22, item 3: part of a HELLO (a header cut short, a payload cut short, or a HELLO
    # trickled in a byte at a time) held the connection for the stall timeout (60 s), not
    # hello_timeout. Each is closed within hello_timeout + 1 s of its connect.
    hello_timeout = 2.0
    proc = own_ps(hello_timeout=hello_timeout, stall_timeout=60.0)
    hello = fr.hello_frame(b"worker", task=0)
    partial_header = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
    partial_payload = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
    trickle = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
    t0 = time.monotonic()
    socks = (partial_header, partial_payload, trickle)
    with contextlib.ExitStack() as stack:
        for s in socks:
            stack.enter_context(contextlib.closing(s))
        partial_header.sendall(hello[:30])
        partial_payload.sendall(hello[:-3])
        closed_at: dict[int, float] = {}
        sent = 0
        while len(closed_at) < len(socks) and time.monotonic() - t0 < 10:
            if 2 not in closed_at and sent < len(hello):
                try:
                    trickle.sendall(hello[sent:sent + 1])  # one byte every 0.1 s: never stalls
                    sent += 1
                except OSError:
                    closed_at[2] = time.monotonic() - t0
            for i, s in enumerate(socks):
                if i in closed_at:
                    continue
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        closed_at[i] = time.monotonic() - t0
                except BlockingIOError:
                    pass
                except ConnectionResetError:
                    closed_at[i] = time.monotonic() - t0
            time.sleep(0.1)
        assert sorted(closed_at) == [0, 1, 2], closed_at
        for i, at in closed_at.items():
            assert hello_timeout - 0.5 <= at <= hello_timeout + 1.0, (i, at)
    deadline = time.monotonic() + 5
    while sum("did not complete its HELLO within 2 s" in e for e in proc.events()) < 3:
        assert time.monotonic() < deadline, proc.events()
        time.sleep(0.05)
    assert_in_step(own_ps.connect(proc))  # the others are served as before
    assert proc.alive(), proc.stderr()


def test_idle_worker_with_a_heartbeat_keeps_its_connection(own_ps):
    # The request connection idles past idle_timeout, but its task's heartbeat keeps pinging:
    # a live worker computing for a long time is not cut off.
    proc = own_ps(idle_timeout=1.0)
    c = _core.Client("worker", 0, b"", 0.5)
    c.timeout = 5.0
    c.connect(0, proc.address, 10.0)
    try:
        [(h, _)] = c.register([(0, "v", "float32", [2], "GradientDescent",
                                {"learning_rate": 1.0}, np.ones(2, np.float32))])
        time.sleep(2.5)
        out = np.empty(2, np.float32)
        c.pull([h], [out])
        assert out.tolist() == [1.0, 1.0]
    finally:
        c.close()
    assert not any("idle" in e for e in proc.events()), proc.events()


def test_connections_past_the_maximum_get_a_clear_refusal(own_ps):
    proc = own_ps(max_connections=3)
    kept = [own_ps.connect(proc) for _ in range(3)]
    c = _core.Client("worker", 9)
    with pytest.raises(errors.ResourceExhaustedError) as e:
        c.connect(0, proc.address, 5.0)
    assert "maximum of 3 connections" in e.value.message and "max_connections" in e.value.message
    assert_in_step(kept[0])  # the others are served as before
    kept[1].close()
    deadline = time.monotonic() + 5
    while True:  # a slot frees once the server reaps the closed connection
        try:
            c.connect(0, proc.address, 5.0)
            break
        except errors.ResourceExhaustedError:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    c.close()
