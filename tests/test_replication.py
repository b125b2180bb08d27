"""The ps side of ps replication (issue 23, wire version 7; docs/protocol.md "Replication").

In-process ``_core.Server`` objects with replication on play the two ps tasks of a replica
group; raw frames (tests/_frames.py, packed from the documented layout, independent of
csrc/wire.h) play a worker's SEQUENCED requests, and ``_core.Client`` registers, reads and
copies (``replica_read``). The ReplicaState records are parsed here from the byte layout
docs/protocol.md gives, so the tests also pin that layout. Checked: a duplicate SEQUENCED
request is answered and not applied, marks are kept per client, a copy (REPLICA_READ then
REPLICA_INSTALL) reproduces values, optimizer slots, Adam's beta powers, a synchronous
variable mid-step, the global step and a hash table's rows; the install marks make the
requests already in the copy duplicates; awaiting variables make mutations wait and reads
answer AWAITING; STALE makes a variable await again; and a snapshot taken while pushes stream
in never disagrees with its own marks.
"""

from __future__ import annotations

import math
import struct
import threading
import time

import numpy as np
import pytest

import _frames as fr
from psrt import _core, errors

SEQ, DUP, AWAIT, STALE = fr.F2_SEQUENCED, fr.F2_DUPLICATE, fr.F2_AWAITING, fr.F2_STALE
CHUNK = 4096  # so a push of more than 1024 float32s is streamed chunk by chunk
_names = iter(range(1_000_000))


def _server(**kw) -> _core.Server:
    s = _core.Server("127.0.0.1", 0, "ps", kw.pop("task", 0), chunk_bytes=CHUNK, **kw)
    s.set_replication(True)
    return s


@pytest.fixture(scope="module")
def pair():
    """Two replicating ps tasks: a (the original) and b (the copy)."""
    a, b = _server(task=0), _server(task=1)
    yield a, b
    a.stop()
    b.stop()


def _client(server) -> _core.Client:
    c = _core.Client("worker", 0)
    c.timeout = 20.0
    c.connect(0, f"127.0.0.1:{server.port}", 10.0)
    return c


@pytest.fixture(scope="module")
def clients(pair):
    ca, cb = _client(pair[0]), _client(pair[1])
    yield ca, cb
    ca.close()
    cb.close()


class Raw:
    """A raw connection whose HELLO gave `client_id`; call() sends one frame, reads its reply."""

    def __init__(self, server, client_id: int = 0):
        self.sock = fr.connect(f"127.0.0.1:{server.port}", timeout=20.0, client_id=client_id)

    def call(self, op: int, payload: bytes = b"", **fields):
        self.sock.sendall(fr.frame(op, payload, **fields))
        got = fr.read_frame(self.sock)
        assert got is not None, "the ps task closed the connection"
        return got

    def close(self) -> None:
        self.sock.close()


def register(client, name, dtype, shape, optimizer="GradientDescent", params=None, init=None):
    """Registers one variable; returns (handle, wire id)."""
    [(h, _)] = client.register([(0, name, dtype, list(shape), optimizer, params or {}, init)])
    return h, client.var_info(h)[1]


def push(raw, var_id, grad, rid, flags2=SEQ, **fields):
    return raw.call(fr.PUSH, np.ascontiguousarray(grad).tobytes(), var_id=var_id,
                    dtype=fr.FLOAT32, request_id=rid, flags2=flags2, **fields)


def value(client, handle, shape, dtype=np.float32, slot=0):
    out = np.empty(shape, dtype)
    client.pull([handle], [out], slot=slot)
    return out


# ---- ReplicaState, parsed from docs/protocol.md's layout -----------------------------------

ESIZE = {fr.FLOAT32: 4, fr.FLOAT64: 8, fr.INT64: 8}


class _Reader:
    def __init__(self, b: bytes):
        self.b, self.at = b, 0

    def unpack(self, fmt: str):
        got = struct.unpack_from(fmt, self.b, self.at)
        self.at += struct.calcsize(fmt)
        return got

    def take(self, n: int) -> bytes:
        assert self.at + n <= len(self.b), "record cut short"
        self.at, got = self.at + n, self.b[self.at:self.at + n]
        return got


def parse_state(b: bytes) -> dict:
    r = _Reader(b)
    tag, fmt, kind, dtype, opt, k, initialized = r.unpack("<IHBBBBB")
    assert (tag, fmt, initialized) == (0x53525350, 7, 1) and b[:4] == b"PSRS"
    name = r.take(r.unpack("<H")[0]).decode()
    rank, = r.unpack("<B")
    shape = r.unpack(f"<{rank}q")
    reps, total, max_rows, m = r.unpack("<IIQI")
    marks = [r.unpack("<QQ") for _ in range(m)]
    beta1, beta2, applies, step, count, has_dense = r.unpack("<ddqqIB")
    es = ESIZE[dtype]
    if kind:
        row, nbytes = math.prod(shape[1:]) * es, 0
    else:
        nbytes = math.prod(shape) * es
        row = nbytes // shape[0] if shape and shape[0] else 0
    dense = r.take(nbytes) if has_dense else None
    s, = r.unpack("<Q")
    out = dict(kind=kind, dtype=dtype, optimizer=opt, slots=k, name=name, shape=shape,
               reps=reps, total=total, max_rows=max_rows, marks=marks, beta=(beta1, beta2),
               applies=applies, step=step, count=count, dense=dense,
               sum=(r.unpack(f"<{s}q"), r.unpack(f"<{s}I"), r.unpack(f"<{s}I"), r.take(s * row)))
    if kind == 0:
        out["value"] = r.take(nbytes)
        out["slot_values"] = [r.take(nbytes) for _ in range(k)]
    else:
        clock, t = r.unpack("<QQ")
        out.update(clock=clock, ids=r.unpack(f"<{t}q"), counts=r.unpack(f"<{t}Q"),
                   seen=r.unpack(f"<{t}Q"), value=r.take(t * row),
                   slot_values=[r.take(t * row) for _ in range(k)])
    assert r.at == len(b), f"{len(b) - r.at} bytes after the record"
    return out


# ---- SEQUENCED requests and marks -----------------------------------------------------------

def test_a_duplicate_sequenced_push_is_answered_and_not_applied(pair, clients):
    a, _ = pair
    ca, _ = clients
    h, vid = register(ca, f"dup{next(_names)}", "float32", [3], params={"learning_rate": 1.0},
                      init=np.zeros(3, np.float32))
    raw, other = Raw(a, client_id=0xC0FFEE), Raw(a, client_id=0xBEEF)
    try:
        g = np.array([-1.0, -2.0, -3.0], np.float32)  # lr 1: the value grows by -g
        hd, _ = push(raw, vid, g, rid=5)
        assert hd["status"] == fr.OK and hd["flags2"] == 0
        for rid in (5, 4, 1):  # the same request again, and older ones: not applied
            hd, _ = push(raw, vid, g, rid=rid)
            assert hd["status"] == fr.OK and hd["flags2"] == DUP and hd["request_id"] == rid
        np.testing.assert_array_equal(value(ca, h, 3), -g)
        # Marks are per client: another client's request 3 is new.
        hd, _ = push(other, vid, g, rid=3)
        assert hd["status"] == fr.OK and hd["flags2"] == 0
        hd, _ = push(raw, vid, g, rid=6)
        assert hd["flags2"] == 0
        np.testing.assert_array_equal(value(ca, h, 3), -3 * g)
        marks = dict(a.marks())
        assert marks[0xC0FFEE] == 6 and marks[0xBEEF] == 3
        # A duplicate RETURN_VALUE push still carries the value (the worker reads it).
        hd, p = push(raw, vid, g, rid=6, flags=fr.F_RETURN_VALUE)
        assert hd["flags2"] == DUP and np.frombuffer(p, np.float32).tolist() == (-3 * g).tolist()
        # A refused request completes no mark.
        hd, _ = raw.call(fr.PUSH, b"\0" * 4, var_id=vid, dtype=fr.FLOAT32, request_id=9,
                         flags2=SEQ)
        assert hd["status"] == fr.INVALID_ARGUMENT and dict(a.marks())[0xC0FFEE] == 6
    finally:
        raw.close()
        other.close()


def test_flags2_rules(pair, clients):
    a, _ = pair
    ca, _ = clients
    _, vid = register(ca, f"rules{next(_names)}", "float32", [2], init=np.zeros(2, np.float32))
    anon, raw = Raw(a), Raw(a, client_id=1)
    try:
        hd, msg = push(anon, vid, np.zeros(2, np.float32), rid=1)
        assert hd["status"] == fr.FAILED_PRECONDITION and b"gave no client id" in msg
        hd, msg = raw.call(fr.PULL, var_id=vid, flags2=SEQ)
        assert hd["status"] == fr.INVALID_ARGUMENT
        assert b"SEQUENCED (0x01) is not valid for PULL" in msg and b"TABLE_EVICT" in msg
        hd, msg = raw.call(fr.REGISTER, fr.var_spec("r", fr.FLOAT32, [2]), flags2=SEQ)
        assert hd["status"] == fr.INVALID_ARGUMENT and b"REGISTER without INIT" in msg
        hd, msg = raw.call(fr.PUSH, var_id=vid, dtype=fr.FLOAT32, flags2=STALE)
        assert hd["status"] == fr.INVALID_ARGUMENT and b"REGISTER without INIT only" in msg
        # Reply-only bits on a request are a bad fixed header: answered, then closed.
        hd, msg = raw.call(fr.PING, flags2=DUP)
        assert hd["status"] == fr.INVALID_ARGUMENT and b"0x02" in msg
        assert fr.is_closed(raw.sock)
    finally:
        anon.close()
        raw.close()


def test_replication_off_keeps_todays_behaviour():
    s = _core.Server("127.0.0.1", 0)
    c = _client(s)
    raw = Raw(s, client_id=7)
    try:
        assert not s.replication
        # No INIT: uninitialized, and not awaiting a copy.
        h, vid = register(c, "plain", "float32", [2], params={"learning_rate": 1.0})
        assert s.awaiting_variables() == []
        hd, _ = raw.call(fr.IS_INITIALIZED, var_id=vid)
        assert hd["flags"] & fr.F_INITIALIZED == 0 and hd["flags2"] == 0
        hd, msg = raw.call(fr.REPLICA_READ, var_id=vid)
        assert hd["status"] == fr.FAILED_PRECONDITION and b"replication is off" in msg
        hd, msg = raw.call(fr.REPLICA_INSTALL, b"PSRS", var_id=vid)
        assert hd["status"] == fr.FAILED_PRECONDITION and b"replication is off" in msg
        hd, msg = raw.call(fr.REGISTER, fr.var_spec("plain", fr.FLOAT32, [2]), flags2=STALE)
        assert hd["status"] == fr.FAILED_PRECONDITION and b"replication is off" in msg
        # SEQUENCED still deduplicates (no section is needed for that).
        c.assign([h], [np.zeros(2, np.float32)])
        for _ in range(2):
            hd, _ = push(raw, vid, np.ones(2, np.float32), rid=3)
        assert hd["flags2"] == DUP and value(c, h, 2).tolist() == [-1.0, -1.0]
    finally:
        raw.close()
        c.close()
        s.stop()


# ---- a copy reproduces everything -----------------------------------------------------------

def _tagged(raw, vid, grad, tag, rows=None):
    """A step-tagged PUSH (dense, or row-sparse of `rows`), not sequenced."""
    payload = np.ascontiguousarray(grad, np.float32).tobytes()
    flags, count = fr.F_STEP_TAGGED, 0
    if rows is not None:
        payload = np.asarray(rows, np.int64).tobytes() + payload
        flags, count = flags | fr.F_SPARSE, len(rows)
    hd, msg = raw.call(fr.PUSH, payload, var_id=vid, dtype=fr.FLOAT32, flags=flags, step=tag,
                       count=count)
    assert hd["status"] == fr.OK, msg
    return hd


def test_a_copy_reproduces_values_slots_sync_state_step_and_table(pair, clients):
    a, b = pair
    ca, cb = clients
    n = next(_names)
    sync = {"learning_rate": 0.5, "replicas_to_aggregate": 2, "total_num_replicas": 2}
    table = {"learning_rate": 0.5, "slot_init": 0.1, "table": 1, "max_rows": 50,
             "initialize": 1.0}
    specs = [  # name, dtype, shape, optimizer, params, init
        (f"ada{n}", "float32", [4, 3], "Adagrad", {"learning_rate": 0.1, "slot_init": 0.1},
         np.arange(12, dtype=np.float32).reshape(4, 3)),
        (f"adam{n}", "float32", [5], "Adam", {"learning_rate": 0.01},
         np.linspace(-1, 1, 5).astype(np.float32)),
        (f"sync{n}", "float32", [3], "GradientDescent", sync, np.ones(3, np.float32)),
        (f"rows{n}", "float32", [4, 2], "GradientDescent", sync,
         np.arange(8, dtype=np.float32).reshape(4, 2)),
        (f"step{n}", "int64", [], "", {"replicas_to_aggregate": 2, "total_num_replicas": 2},
         np.array(7, np.int64)),
        (f"table{n}", "float32", [0, 4], "Adagrad", table, None),
    ]
    ha = [register(ca, nm, dt, sh, opt, p, init) for nm, dt, sh, opt, p, init in specs]
    # b registers them without a value: each awaits its copy.
    hb = [register(cb, nm, dt, sh, opt, p if nm != f"table{n}" else {**p, "initialize": 0.0})
          for nm, dt, sh, opt, p, _ in specs]
    assert set(b.awaiting_variables()) >= {s[0] for s in specs}
    rng = np.random.default_rng(3)
    for _ in range(2):
        ca.push([ha[0][0], ha[1][0]], [rng.standard_normal((4, 3), np.float32),
                                        rng.standard_normal(5, np.float32)])
    ca.push_sparse(ha[5][0], np.array([3, 1_000_000_007, -5], np.int64),
                   rng.standard_normal((3, 4), np.float32))
    raw_a = Raw(a)
    try:
        # Mid-step: one of two gradients in (dense, row-sparse, the global step's count).
        g1 = rng.standard_normal(3, np.float32)
        _tagged(raw_a, ha[2][1], g1, tag=0)
        r1 = rng.standard_normal((2, 2), np.float32)
        _tagged(raw_a, ha[3][1], r1, tag=0, rows=[1, 3])
        hd, _ = raw_a.call(fr.STEP_INCREMENT, var_id=ha[4][1], flags=fr.F_STEP_TAGGED, step=7)
        assert hd["flags"] & fr.F_STEP_TAGGED and hd["count"] == 1 and hd["step"] == 7
    finally:
        raw_a.close()

    states = {}
    for (nm, *_), (_, vid) in zip(specs, ha):
        states[nm] = ca.replica_read(0, vid)
        b.replica_install(nm, states[nm])
    assert not set(b.awaiting_variables()) & {s[0] for s in specs}
    # What b holds now reads back as the same record, marks included: a record carries the
    # marks of its variable (the requests applied to it, and those of the copy it holds), each
    # at most the ps task's own mark of that client.
    task_marks = dict(a.marks())
    for (nm, *_), (_, vid) in zip(specs, hb):
        got, want = parse_state(cb.replica_read(0, vid)), parse_state(states[nm])
        assert got == want, nm
        assert all(m <= task_marks[c] for c, m in want["marks"]), nm
    # Readable values, slots and Adam's beta powers agree.
    for (nm, dt, sh, opt, *_), (h_a, _), (h_b, _) in zip(specs[:2], ha, hb):
        for slot in range(3 if opt == "Adam" else 2):
            np.testing.assert_array_equal(value(cb, h_b, sh, slot=slot),
                                          value(ca, h_a, sh, slot=slot), err_msg=f"{nm}/{slot}")
        if opt == "Adam":  # slot 255: the beta powers, f64[2]
            powers = []
            for server, (_, vid) in ((a, ha[1]), (b, hb[1])):
                raw = Raw(server)
                powers.append(struct.unpack("<2d", raw.call(fr.PULL, var_id=vid, slot=255)[1]))
                raw.close()
            assert powers[0] == powers[1] == pytest.approx((0.9 ** 3, 0.999 ** 3))
    adam = parse_state(states[f"adam{n}"])
    assert adam["beta"] == pytest.approx((0.9 ** 3, 0.999 ** 3)) and len(adam["slot_values"]) == 2
    rows = parse_state(states[f"rows{n}"])
    assert rows["count"] == 1 and rows["sum"][0] == (1, 3) and rows["sum"][1] == (1, 1)
    step = parse_state(states[f"step{n}"])
    assert step["count"] == 1 and struct.unpack("<q", step["value"]) == (7,)
    tab = parse_state(states[f"table{n}"])
    assert sorted(tab["ids"]) == [-5, 3, 1_000_000_007] and tab["counts"] == (1, 1, 1)
    ids_a, counts_a, values_a, slots_a, _ = ca.table_export(ha[5][0], 0, 100)
    ids_b, counts_b, values_b, slots_b, _ = cb.table_export(hb[5][0], 0, 100)
    assert ids_a.tolist() == ids_b.tolist() and counts_a.tolist() == counts_b.tolist()
    np.testing.assert_array_equal(values_a, values_b)
    np.testing.assert_array_equal(slots_a[0], slots_b[0])

    # The next tagged gradients complete the step on the copy exactly as on the original.
    g2 = rng.standard_normal(3, np.float32)
    r2 = rng.standard_normal((2, 2), np.float32)
    for server, hs in ((a, ha), (b, hb)):
        raw = Raw(server)
        try:
            hd = _tagged(raw, hs[2][1], g2, tag=0)
            assert hd["step"] == 1 and hd["count"] == 0
            _tagged(raw, hs[3][1], r2, tag=0, rows=[3, 0])
            hd, _ = raw.call(fr.STEP_INCREMENT, var_id=hs[4][1], flags=fr.F_STEP_TAGGED, step=7)
            assert hd["step"] == 8
        finally:
            raw.close()
    want = np.ones(3, np.float32) - np.float32(0.5) * ((g1 + g2) / np.float32(2))
    np.testing.assert_allclose(value(cb, hb[2][0], 3), want, rtol=1e-6)
    # Row-sparse: each row's sum divided by the gradients that held it (row 3: both).
    want_rows = np.arange(8, dtype=np.float32).reshape(4, 2)
    want_rows[1] -= 0.5 * r1[0]
    want_rows[3] -= 0.5 * (r1[1] + r2[0]) / 2
    want_rows[0] -= 0.5 * r2[1]
    np.testing.assert_allclose(value(cb, hb[3][0], (4, 2)), want_rows, rtol=1e-6)
    for i, sh in ((2, 3), (3, (4, 2))):
        np.testing.assert_array_equal(value(cb, hb[i][0], sh), value(ca, ha[i][0], sh))
    assert cb.step_read(hb[4][0]) == ca.step_read(ha[4][0]) == 8


# ---- install marks, awaiting, STALE ---------------------------------------------------------

def test_install_marks_make_the_copied_requests_duplicates(pair, clients):
    a, b = pair
    ca, cb = clients
    name = f"marked{next(_names)}"
    h_a, vid_a = register(ca, name, "float32", [2], params={"learning_rate": 1.0},
                          init=np.zeros(2, np.float32))
    h_b, vid_b = register(cb, name, "float32", [2], params={"learning_rate": 1.0})
    _, other_b = register(cb, f"other{name}", "float32", [2], params={"learning_rate": 1.0},
                          init=np.zeros(2, np.float32))
    minus_one = -np.ones(2, np.float32)
    wa, wb = Raw(a, client_id=77), Raw(b, client_id=77)
    try:
        for rid in (101, 102, 103):
            push(wa, vid_a, minus_one, rid)
        state = ca.replica_read(0, vid_a)
        assert (77, 103) in parse_state(state)["marks"]
        b.replica_install(name, state)
        # Install marks are the variable's: another variable of b takes request 102.
        hd, _ = push(wb, other_b, minus_one, 102)
        assert hd["flags2"] == 0
        # The worker's requests 102 and 103 reach b late: they are in the copy already.
        for rid in (102, 103):
            hd, _ = push(wb, vid_b, minus_one, rid)
            assert hd["flags2"] == DUP, rid
        hd, _ = push(wb, vid_b, minus_one, 104)
        assert hd["flags2"] == 0
        push(wa, vid_a, minus_one, 104)
        assert value(cb, h_b, 2).tolist() == value(ca, h_a, 2).tolist() == [4.0, 4.0]
    finally:
        wa.close()
        wb.close()


def test_a_mutation_of_an_awaiting_variable_waits_for_its_copy(pair, clients):
    a, b = pair
    ca, cb = clients
    name = f"await{next(_names)}"
    h_a, vid_a = register(ca, name, "float32", [4], params={"learning_rate": 1.0},
                          init=np.full(4, 10, np.float32))
    h_b, vid_b = register(cb, name, "float32", [4], params={"learning_rate": 1.0})
    assert name in b.awaiting_variables()
    w = Raw(b, client_id=5)
    got = []
    t = threading.Thread(target=lambda: got.append(push(w, vid_b, -np.ones(4, np.float32), 1)))
    try:
        t.start()
        time.sleep(0.3)
        assert t.is_alive() and not got  # waiting for the copy, not refused
        b.replica_install(name, ca.replica_read(0, vid_a))
        t.join(10)
        assert got and got[0][0]["status"] == fr.OK and got[0][0]["flags2"] == 0
        assert value(cb, h_b, 4).tolist() == [11.0] * 4
        assert name not in b.awaiting_variables()
        # Without a copy the wait ends at replica_wait_s, and the push fails as today.
        b.replica_wait_s = 0.2
        _, late = register(cb, f"late{name}", "float32", [4], params={"learning_rate": 1.0})
        t0 = time.monotonic()
        hd, msg = push(w, late, np.ones(4, np.float32), 2)
        assert hd["status"] == fr.FAILED_PRECONDITION and b"uninitialized" in msg
        assert 0.15 < time.monotonic() - t0 < 5
        with pytest.raises(errors.InvalidArgumentError, match="replica_wait_s -1"):
            b.replica_wait_s = -1
    finally:
        b.replica_wait_s = 30.0
        t.join(10)
        w.close()


def test_reads_of_an_awaiting_variable_answer_awaiting(pair, clients):
    _, b = pair
    _, cb = clients
    n = next(_names)
    _, e = register(cb, f"e{n}", "float32", [3, 2])
    _, gs = register(cb, f"gs{n}", "int64", [], "")
    _, t = register(cb, f"t{n}", "float32", [0, 2], "Adagrad", {"table": 1, "max_rows": 9})
    r = Raw(b)
    try:
        for op, fields in ((fr.PULL, dict(var_id=e)), (fr.IS_INITIALIZED, dict(var_id=e)),
                           (fr.PULL, dict(var_id=e, flags=fr.F_WAIT_STEP, step=3, arg1=1.0)),
                           (fr.STEP_READ, dict(var_id=gs)),
                           (fr.TABLE_EXPORT, dict(var_id=t, count=10))):
            hd, p = r.call(op, **fields)
            assert hd["status"] == fr.OK and hd["flags2"] == AWAIT and p == b"", (op, hd)
            assert hd["flags"] == fr.F_REPLY and hd["step"] == 0
        hd, p = r.call(fr.PULL, struct.pack("<2q", 0, 2), var_id=e, flags=fr.F_SPARSE, count=2)
        assert hd["status"] == fr.OK and hd["flags2"] == AWAIT and p == b""
        hd, msg = r.call(fr.REPLICA_READ, var_id=e)
        assert hd["status"] == fr.FAILED_PRECONDITION and b"holds no value to copy" in msg
        hd, _ = r.call(fr.PING, request_id=8)  # still in step
        assert hd["request_id"] == 8
    finally:
        r.close()


def test_stale_register_makes_a_variable_await_again(pair, clients):
    a, b = pair
    ca, cb = clients
    name = f"stale{next(_names)}"
    init = np.array([1.0, 2.0], np.float32)
    h_a, vid_a = register(ca, name, "float32", [2], init=init)
    h_b, vid_b = register(cb, name, "float32", [2], init=np.zeros(2, np.float32))
    assert name not in b.awaiting_variables()
    r = Raw(b)
    try:
        spec = fr.var_spec(name, fr.FLOAT32, [2], 1)
        hd, msg = r.call(fr.REGISTER, spec, flags2=STALE, flags=fr.F_INIT)
        assert hd["status"] == fr.INVALID_ARGUMENT and b"with INIT" in msg
        hd, _ = r.call(fr.REGISTER, spec, flags2=STALE)
        assert hd["status"] == fr.OK and hd["var_id"] == vid_b and hd["flags2"] == AWAIT
        assert name in b.awaiting_variables()
        hd, _ = r.call(fr.PULL, var_id=vid_b)
        assert hd["flags2"] == AWAIT
        b.replica_install(name, ca.replica_read(0, vid_a))
        assert value(cb, h_b, 2).tolist() == init.tolist()
    finally:
        r.close()


# ---- REPLICA_INSTALL checks the whole record ------------------------------------------------

def test_a_bad_record_is_refused_and_writes_nothing(pair, clients):
    a, b = pair
    ca, cb = clients
    n = next(_names)
    sync = {"learning_rate": 0.5, "replicas_to_aggregate": 2, "total_num_replicas": 2}
    _, src = register(ca, f"src{n}", "float32", [4, 2], params=sync,
                      init=np.zeros((4, 2), np.float32))
    raw_a = Raw(a)
    _tagged(raw_a, src, np.ones((1, 2), np.float32), tag=0, rows=[2])
    raw_a.close()
    good = ca.replica_read(0, src)
    h, dst = register(cb, f"src{n}", "float32", [4, 2], params=sync,
                      init=np.full((4, 2), 5, np.float32))
    _, other = register(cb, f"other{n}", "float32", [4, 3], params=sync,
                        init=np.zeros((4, 3), np.float32))
    at_sum = good.index(struct.pack("<Q", 1) + struct.pack("<q", 2))  # s = 1, row id 2
    bad = {
        "tag": (b"XXXX" + good[4:], ["not a ReplicaState", "PSRS"]),
        "format": (good[:4] + struct.pack("<H", 6) + good[6:], ["format 6", "format 7"]),
        "cut short": (good[:-3], ["ends inside its value"]),
        "trailing": (good + b"\0", ["1 bytes after"]),
        "row index": (good[:at_sum + 8] + struct.pack("<q", 4) + good[at_sum + 16:],
                      ["row 0 (index 4", "out of range"]),
    }
    r = Raw(b)
    try:
        for what, (record, words) in bad.items():
            hd, msg = r.call(fr.REPLICA_INSTALL, record, var_id=dst)
            assert hd["status"] == fr.INVALID_ARGUMENT, (what, msg)
            for word in words:
                assert word.encode() in msg, (what, word, msg)
        # Another variable's copy names both declarations.
        hd, msg = r.call(fr.REPLICA_INSTALL, good, var_id=other)
        assert hd["status"] == fr.INVALID_ARGUMENT
        assert f"'src{n}' float32[4,2]".encode() in msg and f"'other{n}'".encode() in msg
        assert value(cb, h, (4, 2)).tolist() == [[5.0, 5.0]] * 4  # nothing was written
        hd, _ = r.call(fr.REPLICA_INSTALL, good, var_id=dst)  # the good one, over the wire
        assert hd["status"] == fr.OK and value(cb, h, (4, 2)).tolist() == [[0.0, 0.0]] * 4
    finally:
        r.close()


def test_a_copy_past_max_payload_is_resource_exhausted():
    s = _server(max_payload=1 << 16, max_inflight_bytes=1 << 16)
    c = _client(s)
    try:
        _, vid = register(c, "big", "float32", [20000], "Adagrad", {"learning_rate": 0.1},
                          init=np.zeros(20000, np.float32))
        with pytest.raises(errors.ResourceExhaustedError, match=r"'big' float32\[20000\].*"
                           r"exceeds the maximum of 65536 bytes"):
            c.replica_read(0, vid)
    finally:
        c.close()
        s.stop()


# ---- the exclusive section ------------------------------------------------------------------

def test_a_snapshot_under_streamed_pushes_agrees_with_its_marks(pair, clients):
    """Every push adds 1 to every element (GradientDescent lr 1, gradient -1), streamed in 8
    chunks; each snapshot's value must be one number, the count its own marks name."""
    a, _ = pair
    ca, _ = clients
    n = 8 * CHUNK // 4
    h, vid = register(ca, f"race{next(_names)}", "float32", [n], params={"learning_rate": 1.0},
                      init=np.zeros(n, np.float32))
    frame = fr.header(fr.PUSH, 4 * n, var_id=vid, dtype=fr.FLOAT32, flags2=SEQ)
    grad = (-np.ones(n, np.float32)).tobytes()
    pushes, batch, cid = 240, 8, 0x5EED
    w = Raw(a, client_id=cid)

    def stream():
        for first in range(1, pushes + 1, batch):
            data = b"".join(frame[:8] + struct.pack("<Q", rid) + frame[16:] + grad
                            for rid in range(first, first + batch))
            w.sock.sendall(data)
            for _ in range(batch):
                assert fr.read_frame(w.sock)[0]["status"] == fr.OK

    t = threading.Thread(target=stream)
    t.start()
    seen = []
    try:
        while t.is_alive() or not seen:
            st = parse_state(ca.replica_read(0, vid))
            v = np.frombuffer(st["value"], np.float32)
            mark = dict(st["marks"]).get(cid, 0)
            assert v.min() == v.max() == mark, (v.min(), v.max(), mark)
            seen.append(mark)
    finally:
        t.join(30)
        w.close()
    assert value(ca, h, n).min() == pushes
    assert any(0 < m < pushes for m in seen), seen  # some snapshots were taken mid-stream
