"""A frame fuzzer for the ps task: frames built from the header of docs/protocol.md, valid and
broken, sent to a live ``psrt._core.Server`` in another process (tests/test_fuzz.py).

What it sends, over many short connections (a fresh one after every closed one), pipelined:
clean frames (every op 1..MAX_OP with every flag combination, wrong dtypes, slots, var ids and
payload lengths that the header announces truthfully, sparse index lists that are empty, out
of range, huge or repeated, step-tagged and waiting requests, absurd REGISTER specs; version
7: flags2 bits, HELLOs with client ids, SEQUENCED frames sent again to be answered
DUPLICATE, REPLICA_READ and REPLICA_INSTALL on a ps task that does not replicate) in
batches whose replies are read before the next batch; then, to end a connection, a broken
tail (one bad header field, a truncated header or payload, a lying payload length, random
bytes) and an end of stream. Everything comes from one ``random.Random(seed)``, so a run is
repeatable from its seed.

What it checks while sending: every reply is a well-formed reply to its request, in order;
every documented check gives its documented status (a header check: the first failing one,
then the connection closes; a per-op check: INVALID_ARGUMENT/NOT_FOUND and the connection stays
open); a truncated frame gets no reply; an OK reply keeps what the op promises (the slot,
index, tag and size rules). On some connections each frame goes between two snapshots of the
variable it names, and a refused one must leave every byte of it as it was. It records every
variable an accepted write may have touched, so the test can assert that the others are
unchanged bit for bit.

Run as a script this file is the ps task under test: ``_core.Server`` on 127.0.0.1, port 0,
printing its port, answering ``stats`` lines on stdin with a JSON line of its connection and
variable counts, and serving until stdin closes or SIGTERM. :class:`FuzzPs` starts and reaps
one by PID.
"""

from __future__ import annotations

import json
import math
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _frames as fr

HEADER = fr.HEADER
HSIZE = HEADER.size
MAGIC, VERSION = fr.MAGIC, fr.VERSION
MASK64 = (1 << 64) - 1
I64_MAX, I64_MIN = (1 << 63) - 1, -(1 << 63)

HELLO, REGISTER, PULL, PUSH, ASSIGN, ASSIGN_ADD = 1, 2, 3, 4, 5, 6
STEP_READ, STEP_INCREMENT, IS_INITIALIZED, LIST, PING, WORKER_DONE = 7, 8, 9, 10, 11, 12
# Op codes run 1..MAX_OP (docs/protocol.md, "Ops"); the fuzzer follows tests/_frames.py, so a
# wire version that adds AUTH (13) is fuzzed with it: sent clean, expected answered.
AUTH = getattr(fr, "AUTH", None)
MAX_OP = getattr(fr, "MAX_OP", AUTH or WORKER_DONE)
# Version 5: hash tables (TABLE_EXPORT/IMPORT/EVICT) and CLUSTER_INFO.
TABLE_EXPORT, TABLE_IMPORT, TABLE_EVICT, CLUSTER_INFO = 14, 15, 16, 17
TABLE_OPS = frozenset((TABLE_EXPORT, TABLE_IMPORT, TABLE_EVICT))
# Version 7: ps replication. The fuzzed ps task runs with replication off, so both are refused
# (FAILED_PRECONDITION) once their frame passed the per-op checks; tests/test_fuzz.py fuzzes
# REPLICA_INSTALL's record on a replicating ps task.
REPLICA_READ, REPLICA_INSTALL = 18, 19
REPLICA_OPS = frozenset((REPLICA_READ, REPLICA_INSTALL))
# Header byte 23, flags2: the request bits, and the reply bits.
SEQUENCED, DUPLICATE, AWAITING, STALE = 0x01, 0x02, 0x04, 0x08
FLAGS2_REQUEST = SEQUENCED | STALE
# The ops this model sends as clean frames with known answers: all of them.
CLEAN_MAX_OP = MAX_OP
OP_NAMES = {1: "HELLO", 2: "REGISTER", 3: "PULL", 4: "PUSH", 5: "ASSIGN", 6: "ASSIGN_ADD",
            7: "STEP_READ", 8: "STEP_INCREMENT", 9: "IS_INITIALIZED", 10: "LIST", 11: "PING",
            12: "WORKER_DONE", 13: "AUTH", 14: "TABLE_EXPORT", 15: "TABLE_IMPORT",
            16: "TABLE_EVICT", 17: "CLUSTER_INFO", 18: "REPLICA_READ", 19: "REPLICA_INSTALL"}
REPLY, SPARSE, INIT, INITIALIZED = 0x01, 0x02, 0x04, 0x08
HAS_LR, RETURN_VALUE, TAGGED, WAIT = 0x10, 0x20, 0x40, 0x80
FLAG_NAMES = ((REPLY, "REPLY"), (SPARSE, "SPARSE"), (INIT, "INIT"), (INITIALIZED, "INITIALIZED"),
              (HAS_LR, "HAS_LR"), (RETURN_VALUE, "RETURN_VALUE"), (TAGGED, "STEP_TAGGED"),
              (WAIT, "WAIT_STEP"))
(OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS,
 PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE,
 UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED) = range(17)
MAX_CODE = UNAUTHENTICATED
# Ops that name no variable.
NO_VAR_OPS = frozenset((HELLO, REGISTER, LIST, PING, WORKER_DONE, CLUSTER_INFO))
# Ops that write a variable when they are answered OK (REGISTER only with INIT).
WRITE_OPS = frozenset((PUSH, ASSIGN, ASSIGN_ADD, STEP_INCREMENT, REGISTER, TABLE_IMPORT,
                       TABLE_EVICT, REPLICA_INSTALL))
# A row-sparse PULL of a table writes too: it creates the rows of ids it does not hold.

F32, F64, I64 = 1, 2, 3
ELEMENT = {F32: (4, "<f4"), F64: (8, "<f8"), I64: (8, "<i8")}
NONE, SGD, ADAGRAD, MOMENTUM, ADAM = 0, 1, 2, 3, 4
ADADELTA, ADAGRAD_DA, FTRL, PROXIMAL_SGD, PROXIMAL_ADAGRAD, RMSPROP, CENTERED_RMSPROP = range(5, 12)
OPTIMIZERS = {NONE: "", SGD: "GradientDescent", ADAGRAD: "Adagrad", MOMENTUM: "Momentum",
              ADAM: "Adam", ADADELTA: "Adadelta", ADAGRAD_DA: "AdagradDA", FTRL: "Ftrl",
              PROXIMAL_SGD: "ProximalGradientDescent", PROXIMAL_ADAGRAD: "ProximalAdagrad",
              RMSPROP: "RMSProp", CENTERED_RMSPROP: "CenteredRMSProp"}
NUM_SLOTS = {NONE: 0, SGD: 0, ADAGRAD: 1, MOMENTUM: 1, ADAM: 2, ADADELTA: 2, ADAGRAD_DA: 2,
             FTRL: 2, PROXIMAL_SGD: 0, PROXIMAL_ADAGRAD: 1, RMSPROP: 2, CENTERED_RMSPROP: 3}
# The flags each request op may carry (csrc/wire.h AllowedFlags); any other is INVALID_ARGUMENT.
# PUSH 0x08: ATOMIC (version 6), a request bit shared with the reply-only INITIALIZED.
ALLOWED_FLAGS = {REGISTER: 0x04, PULL: 0x02 | 0x80, PUSH: 0x02 | 0x08 | 0x10 | 0x20 | 0x40,
                 ASSIGN: 0x04, STEP_READ: 0x80, STEP_INCREMENT: 0x40, TABLE_IMPORT: 0x04}
STATE_SLOT = 255  # Adam's beta powers, f64[2]
# Ids at or above this are never a variable: the store holds at most 4096 chunks of 1024.
NEVER_AN_ID = 1 << 22


# ---- the variables ---------------------------------------------------------------------------

@dataclass
class Var:
    """A variable the fuzzer registers through a normal client and then knows the shape of."""

    name: str
    dtype: int
    shape: tuple[int, ...]
    optimizer: int = NONE
    replicas: int = 0          # replicas_to_aggregate = total_num_replicas; 0: asynchronous
    initialized: bool = True   # registered with an initial value
    hyper: dict[str, float] = field(default_factory=dict)
    var_id: int = 0
    table: bool = False        # a hash table (wire version 5): shape (0, row dims...)
    max_rows: int = 0          # a table's row limit (0: none)
    init: dict[str, Any] | None = None  # a table's initializer spec (None: zeros)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def record_bytes(self) -> int:
        """A TABLE_EXPORT/TABLE_IMPORT record: id, update count, value row, every slot row."""
        return 16 + self.row_bytes * (1 + self.slots)

    @property
    def esize(self) -> int:
        return ELEMENT[self.dtype][0]

    @property
    def nbytes(self) -> int:
        return self.size * self.esize

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 0

    @property
    def row_bytes(self) -> int:
        if self.table:
            return math.prod(self.shape[1:]) * self.esize
        return self.nbytes // self.rows if self.rows else 0

    @property
    def slots(self) -> int:
        return NUM_SLOTS[self.optimizer]

    @property
    def step_var(self) -> bool:
        """STEP_READ/STEP_INCREMENT accept it: an int64 with one element."""
        return self.dtype == I64 and self.size == 1

    def spec(self) -> tuple[int, str, str, list[int], str, dict[str, float], None]:
        dtype = {F32: "float32", F64: "float64", I64: "int64"}[self.dtype]
        hyper = dict(self.hyper)
        if self.replicas:
            hyper.update(replicas_to_aggregate=self.replicas, total_num_replicas=self.replicas)
        if self.table:
            hyper.update(table=1, max_rows=self.max_rows)
        return (0, self.name, dtype, list(self.shape), OPTIMIZERS[self.optimizer], hyper, None)


def _vars(prefix: str) -> list[Var]:
    lr = {"learning_rate": 0.05}
    return [
        Var(f"{prefix}/sgd_f32", F32, (16,), SGD, hyper=dict(lr)),
        Var(f"{prefix}/adagrad_f64", F64, (4, 5), ADAGRAD, hyper={**lr, "slot_init": 0.1}),
        Var(f"{prefix}/momentum_f32", F32, (8, 3), MOMENTUM,
            hyper={**lr, "momentum": 0.9, "use_nesterov": 1, "use_locking": 1}),
        Var(f"{prefix}/adam_f64", F64, (6, 4), ADAM, hyper={**lr, "use_locking": 1}),
        Var(f"{prefix}/adam_f32", F32, (7,), ADAM, hyper=dict(lr)),
        Var(f"{prefix}/plain_i64", I64, (5, 2)),
        Var(f"{prefix}/scalar_f32", F32, ()),
        Var(f"{prefix}/global_step", I64, ()),
        Var(f"{prefix}/sync_sgd_f32", F32, (5, 3), SGD, replicas=2, hyper=dict(lr)),
        Var(f"{prefix}/sync_adam_f64", F64, (4, 2), ADAM, replicas=1, hyper=dict(lr)),
        Var(f"{prefix}/sync_momentum_f32", F32, (6, 2), MOMENTUM, replicas=3,
            hyper={**lr, "momentum": 0.5}),
        Var(f"{prefix}/sync_step", I64, (), replicas=2),
        Var(f"{prefix}/uninitialized_f32", F32, (3,), SGD, initialized=False, hyper=dict(lr)),
        Var(f"{prefix}/no_rows_f32", F32, (0, 4), SGD, hyper=dict(lr)),
        Var(f"{prefix}/zero_width_f64", F64, (3, 0), ADAGRAD, hyper=dict(lr)),
        Var(f"{prefix}/sync_empty_f32", F32, (0,), SGD, replicas=1, hyper=dict(lr)),
        # Hash tables (wire version 5): rows keyed by any int64 id, made on first use.
        Var(f"{prefix}/table_adagrad_f32", F32, (0, 4), ADAGRAD, table=True,
            hyper={**lr, "slot_init": 0.1},
            init={"kind": "random_uniform", "a": -1.0, "b": 1.0, "seed": 7}),
        Var(f"{prefix}/table_adam_f64", F64, (0, 2, 3), ADAM, table=True, hyper=dict(lr),
            init={"kind": "truncated_normal", "a": 0.0, "b": 0.5, "seed": 3}),
        Var(f"{prefix}/table_small_f32", F32, (0, 3), SGD, table=True, max_rows=6,
            hyper=dict(lr)),
        Var(f"{prefix}/table_plain_f64", F64, (0, 2), table=True, max_rows=40),
        Var(f"{prefix}/table_ftrl_f32", F32, (0, 2), FTRL, table=True, max_rows=12,
            hyper={**lr, "slot_init": 0.1, "l1": 0.001, "lr_power": -0.5}),
        Var(f"{prefix}/table_uninitialized_f32", F32, (0, 2), MOMENTUM, table=True,
            max_rows=4, initialized=False, hyper={**lr, "momentum": 0.9}),
    ]


def target_vars() -> list[Var]:
    """The variables the fuzzer addresses: every dtype, dense and 2-D, each optimizer,
    synchronous ones, global steps, an uninitialized one and empty ones."""
    return _vars("target")


def sentinel_vars() -> list[Var]:
    """The same kinds again; the fuzzer never addresses their ids on purpose."""
    return _vars("sentinel")


def initial_value(var: Var, seed: int) -> Any:
    import numpy as np

    rng = np.random.default_rng([seed, len(var.name), sum(var.name.encode())])
    if var.dtype == I64:
        return rng.integers(-1000, 1000, size=var.shape, dtype=np.int64)
    return rng.standard_normal(var.shape).astype(ELEMENT[var.dtype][1])


def register(address: str, variables: Sequence[Var], seed: int) -> None:
    """Registers `variables` through a normal client (``_core.Client``) and fills in their ids."""
    from psrt import _core

    client = _core.Client("worker", 0)
    client.timeout = 30.0
    try:
        client.connect(0, address, 30.0)
        specs = []
        for v in variables:
            s = v.spec()
            if v.table:  # the initializer spec travels with it; "initialize" empties it
                specs.append(s[:5] + ({**s[5], "initialize": float(v.initialized)}, v.init))
            else:
                specs.append(s[:6] + (initial_value(v, seed) if v.initialized else None,))
        for v, (handle, initialized) in zip(variables, client.register(specs)):
            assert initialized == v.initialized, (v.name, initialized)
            v.var_id = client.var_info(handle)[1]
    finally:
        client.close()


# ---- the ps task in another process ------------------------------------------------------------

SRC: str | None = None


def _src() -> str:
    """The directory holding the psrt the tests import, for the child's PYTHONPATH."""
    global SRC
    if SRC is None:
        import psrt

        SRC = str(Path(psrt.__file__).resolve().parents[1])
    return SRC


class FuzzPs:
    """A ps task (this file run as a script) in a subprocess, reaped by PID.

    Args:
        max_payload: The server's frame payload limit in bytes.
        replication: Version 7: the task replicates (``Server.set_replication(True)``).

    stderr goes to a file (a sanitizer report can be long; a full pipe would block the task).
    Under AddressSanitizer the child gets ``allocator_may_return_null=1`` unless
    ASAN_OPTIONS says otherwise: the fuzzer asks for variables too large for any memory, which
    the server must refuse with RESOURCE_EXHAUSTED rather than have the allocator abort.
    """

    def __init__(self, max_payload: int, replication: bool = False) -> None:
        self.max_payload = max_payload
        env = dict(os.environ)
        env["PYTHONPATH"] = _src() + os.pathsep + env.get("PYTHONPATH", "")
        if "allocator_may_return_null" not in env.get("ASAN_OPTIONS", ""):
            env["ASAN_OPTIONS"] = ":".join(
                x for x in (env.get("ASAN_OPTIONS", ""), "allocator_may_return_null=1") if x)
        self._err = tempfile.TemporaryFile(mode="w+b")
        self._err_text: str | None = None
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--max-payload", str(max_payload)]
            + (["--replication"] if replication else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=env, text=True)
        line = self._readline(60.0)
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"ps task did not start: {line!r} {self.stderr()}")
        self.port = int(line)
        self.address = f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _readline(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if ready else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stats(self) -> dict[str, int] | None:
        """{"connections", "variables", "done_workers"} from the server, or None if it is gone."""
        if not self.alive():
            return None
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("stats\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        line = self._readline(10.0)
        return json.loads(line) if line else None

    def idle(self) -> bool:
        """True when the server counts no open connection."""
        got = self.stats()
        return got is not None and got["connections"] == 0

    def resources(self) -> tuple[int, int]:
        """(open fds, threads) of the process, from /proc."""
        return (len(os.listdir(f"/proc/{self.pid}/fd")), len(os.listdir(f"/proc/{self.pid}/task")))

    def accepts(self, timeout: float = 5.0) -> bool:
        """True when a new connection gets HELLO and PING answered."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                s.sendall(fr.frame(HELLO, fr.hello_payload(b"probe")) + fr.frame(PING, request_id=7))
                first, second = fr.read_frame(s), fr.read_frame(s)
        except OSError:
            return False
        return (first is not None and second is not None and second[0]["status"] == OK
                and second[0]["request_id"] == 7)

    def dead(self, grace: float = 0.5) -> bool:
        """True when the process has exited; waits up to `grace` s for one that stopped
        answering to be reaped (a crash closes its sockets before the exit is visible)."""
        if not self.alive():
            return True
        if self.accepts(timeout=grace + 1.0):
            return False
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self.alive():
                return True
            time.sleep(0.01)
        return not self.alive()

    def exit_description(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "running"
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit status {rc}"

    def stderr(self, limit: int = 6000) -> str:
        if self._err_text is None:
            self._err.flush()
            self._err.seek(0)
            text = self._err.read().decode(errors="replace")
        else:
            text = self._err_text
        return text if len(text) <= limit else "...\n" + text[-limit:]

    def stop(self) -> None:
        """SIGTERM, wait, SIGKILL after 5 s; then close the pipes."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        if self._err_text is None:
            self._err_text = self.stderr(limit=1 << 20)
            self._err.close()


# ---- snapshots -------------------------------------------------------------------------------

def snapshot_frames(var: Var, rid: int) -> list[bytes]:
    """Requests that read everything of `var` a client can see: IS_INITIALIZED, every slot,
    the optimizer state slot, and for a synchronous variable its step and pending count."""
    vid = var.var_id
    out = [fr.frame(IS_INITIALIZED, var_id=vid, request_id=rid)]
    if var.table:  # every row (ids, update counts, values, slots) and Adam's beta powers
        out.append(fr.frame(TABLE_EXPORT, var_id=vid, count=1 << 20, request_id=rid))
        if var.optimizer == ADAM:
            out.append(fr.frame(PULL, var_id=vid, slot=STATE_SLOT, request_id=rid))
        return out
    for slot in list(range(var.slots + 1)) + ([STATE_SLOT] if var.optimizer == ADAM else []):
        out.append(fr.frame(PULL, var_id=vid, slot=slot, request_id=rid))
    if var.replicas and var.step_var:
        out.append(fr.frame(STEP_READ, var_id=vid, flags=WAIT, step=I64_MIN, request_id=rid))
    elif var.replicas:
        out.append(fr.frame(PULL, var_id=vid, flags=WAIT, step=I64_MIN, request_id=rid))
    return out


def snapshot(address: str, variables: Sequence[Var], timeout: float = 30.0) -> dict[str, Any]:
    """name -> the replies (status, flags, step, count, payload) to `snapshot_frames`."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return snapshot_on(s, variables, hello=True, timeout=timeout)


def snapshot_on(sock: socket.socket, variables: Sequence[Var], hello: bool,
                timeout: float = 30.0) -> dict[str, Any]:
    frames = [fr.frame(HELLO, fr.hello_payload(b"worker"))] if hello else []
    spans = []
    for v in variables:
        fs = snapshot_frames(v, 0x5EED)
        spans.append((v.name, len(frames), len(fs)))
        frames += fs
    sock.setblocking(False)
    try:
        got = exchange(sock, b"".join(frames), len(frames), timeout, finish=False)
    finally:
        sock.setblocking(True)
    if len(got.replies) != len(frames):
        raise ConnectionError(f"snapshot: {len(got.replies)} of {len(frames)} replies "
                              f"(eof={got.eof}, timed_out={got.timed_out})")
    out = {}
    for name, start, n in spans:
        out[name] = [(h[7], h[3], h[11], h[14], p) for h, p in got.replies[start:start + n]]
    return out


# ---- hash tables: what a table holds -----------------------------------------------------------

# Server behaviour that contradicts docs/protocol.md, reported to the owners of csrc/ and
# modelled as it is until fixed (then the entry is deleted: the fuzzer enforces the document).
# None now. Fixed: "refused-push-creates-rows" (a table PUSH refused by the optimizer's
# hyper-parameter check had already created its rows; HashTable::Apply now checks first).
KNOWN_BUGS: frozenset[str] = frozenset()


class TableModel:
    """A table's rows as the ps task holds them (csrc/table.cc): id -> [update count, clock
    when last seen], the update clock, and whether it is initialized. `known` is False after a
    frame that may have changed it went unanswered; an INIT import or register makes it known
    again."""

    def __init__(self, initialized: bool) -> None:
        self.known = True
        self.initialized = initialized
        self.rows: dict[int, list[int]] = {}
        self.clock = 0

    def reset(self) -> None:
        self.known, self.initialized, self.rows, self.clock = True, True, {}, 0

    def fits(self, ids: Sequence[int], max_rows: int) -> bool:
        missing = {i for i in ids if i not in self.rows}
        return not (max_rows and missing and len(self.rows) + len(missing) > max_rows)

    def locate(self, ids: Sequence[int]) -> None:
        for i in ids:
            row = self.rows.setdefault(i, [0, self.clock])
            row[1] = max(row[1], self.clock)

    def apply(self, ids: Sequence[int]) -> None:
        self.locate(ids)
        now = self.clock + 1
        for i in set(ids):  # an id repeated in one gradient counts once (a u64 count)
            self.rows[i][0] = (self.rows[i][0] + 1) & MASK64
            self.rows[i][1] = now
        self.clock = now

    def evict(self, unseen: int, min_count: int) -> int:
        gone = [i for i, (count, seen) in self.rows.items()
                if (unseen and self.clock - seen >= unseen) or (min_count and count < min_count)]
        for i in gone:
            del self.rows[i]
        return len(gone)


def bad_hyper(var: Var, flags: int, arg0: float) -> bool:
    """True when the kernel's hyper-parameter check refuses a PUSH to `var` (kernels.cc
    CheckHyperParameters: Ftrl and ProximalAdagrad need learning_rate > 0 in the dtype)."""
    if var.optimizer not in (FTRL, PROXIMAL_ADAGRAD):
        return False
    lr = arg0 if flags & HAS_LR else var.hyper.get("learning_rate", 0.0)
    if var.dtype == F32:
        try:
            lr = struct.unpack("<f", struct.pack("<f", lr))[0]
        except OverflowError:
            lr = math.copysign(math.inf, lr)
    return not lr > 0


# ---- one connection's traffic ------------------------------------------------------------------

@dataclass
class Exchanged:
    replies: list[tuple[tuple[Any, ...], bytes]]
    eof: bool = False
    reset: bool = False
    timed_out: bool = False
    leftover: int = 0          # bytes after the last whole reply when the stream ended


def exchange(sock: socket.socket, data: bytes, want: int | None, timeout: float,
             finish: bool) -> Exchanged:
    """Sends `data` on a non-blocking socket while reading replies, so neither side's buffers
    fill: until `want` replies arrived, or with `finish` (shut down the sending side once all
    is sent) until end of stream."""
    out = memoryview(data)
    sent, shut = 0, False
    buf = bytearray()
    res = Exchanged([])
    deadline = time.monotonic() + timeout
    poller = select.poll()  # not select(): no limit on the descriptor's number
    poller.register(sock, select.POLLIN | (select.POLLOUT if data else 0))
    while True:
        if sent >= len(out) and finish and not shut:
            shut = True
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if res.eof:
            break
        if sent >= len(out) and not finish and want is not None and len(res.replies) >= want:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            res.timed_out = True
            break
        events = 0
        for _, ev in poller.poll(left * 1000.0):
            events |= ev
        if events & select.POLLOUT and sent < len(out):
            try:
                sent += sock.send(out[sent:sent + 262144])
            except BlockingIOError:
                pass
            except OSError:  # the peer closed (EPIPE/ECONNRESET): read what it sent before
                sent, shut = len(out), True
            if sent >= len(out):
                poller.modify(sock, select.POLLIN)
        if events & (select.POLLIN | select.POLLHUP | select.POLLERR):
            try:
                chunk = sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                res.reset = True
                chunk = b""
            if not chunk:
                res.eof = True
                continue
            buf += chunk
            pos = 0
            while len(buf) - pos >= HSIZE:
                h = HEADER.unpack_from(buf, pos)
                end = pos + HSIZE + h[10]
                if len(buf) < end:
                    break
                res.replies.append((h, bytes(buf[pos + HSIZE:end])))
                pos = end
            if pos:
                del buf[:pos]
    res.leftover = len(buf)
    return res


# ---- frames ------------------------------------------------------------------------------------

class Sent:
    """What the fuzzer knows about one frame it sent (request_id -> Sent)."""

    __slots__ = ("rid", "op", "flags", "var_id", "dtype", "slot", "count", "plen", "arg1",
                 "var", "expect", "bad_index", "data", "kind", "target", "flags2", "client")

    def __init__(self, rid: int, op: int, flags: int, var_id: int, dtype: int, slot: int,
                 count: int, plen: int, arg1: float, var: Var | None, expect: int | None,
                 bad_index: bool, data: bytes, kind: str) -> None:
        self.rid, self.op, self.flags, self.var_id = rid, op, flags, var_id
        self.dtype, self.slot, self.count, self.plen, self.arg1 = dtype, slot, count, plen, arg1
        self.var, self.expect, self.bad_index, self.data, self.kind = (var, expect, bad_index,
                                                                       data, kind)
        self.target = var  # the variable a checked frame snapshots (REGISTER: the one named)
        self.flags2 = 0    # version 7: header byte 23
        self.client = 0    # the client id of the connection it was built for


# The most any frame may announce (the largest variable and its spec), and the frames the
# server may stream chunk by chunk, which only that bounds at the header (docs/protocol.md).
MAX_STREAM_PAYLOAD = (1 << 43) + (1 << 16)


def may_stream(op: int, flags: int, slot: int) -> bool:
    return ((op == PUSH and not flags & (SPARSE | TAGGED)) or (op == ASSIGN and slot != 255)
            or (op == REGISTER and bool(flags & INIT)))


# Version 6: the longest HELLO payload (two job names of 256 bytes, the task, 16 digests);
# version 7 appends the client id.
MAX_HELLO_PAYLOAD = 2 + 256 + 2 + 256 + 4 + 1 + 16 * (2 + 256 + 8) + 8
# The fuzzed ps task is /job:ps/task:0, started without a cluster (no digest is compared).
PS_JOB, PS_TASK = b"ps", 0


def hello_content_error(payload: bytes) -> int | None:
    """What the documented HELLO payload rules give `payload` (within MAX_HELLO_PAYLOAD):
    INVALID_ARGUMENT for a malformed record, FAILED_PRECONDITION when it means to reach
    another task than PS_JOB/PS_TASK, None when it is fine."""
    pos = 0

    def string(limit: int) -> bytes | None:
        nonlocal pos
        if len(payload) - pos < 2:
            return None
        n = int.from_bytes(payload[pos:pos + 2], "little")
        if n > limit or len(payload) - pos - 2 < n:
            return None
        pos += 2 + n
        return payload[pos - n:pos]

    job, expect_job = string(256), string(256)
    if job is None or expect_job is None or len(payload) - pos < 5:
        return INVALID_ARGUMENT
    expect_task, count = struct.unpack_from("<IB", payload, pos)
    pos += 5
    if count > 16:
        return INVALID_ARGUMENT
    names = [job, expect_job]
    for _ in range(count):
        name = string(256)
        if not name or len(payload) - pos < 8:
            return INVALID_ARGUMENT
        pos += 8
        names.append(name)
    if len(payload) - pos != 8:  # version 7: the client id, and nothing after it
        return INVALID_ARGUMENT
    for n in names:
        try:
            n.decode()
        except UnicodeDecodeError:
            return INVALID_ARGUMENT
    if expect_job and (expect_job != PS_JOB or expect_task != PS_TASK):
        return FAILED_PRECONDITION
    return None


def header_error(h: Sequence[Any], max_payload: int, hello_done: bool) -> int | None:
    """The status of the first documented fixed-header check `h` (a HEADER tuple) fails, in
    the documented order, or None when it passes them all."""
    magic, version, op, flags, _, _, dtype, status, slot, flags2, plen = h[:11]
    if magic != MAGIC:
        return INVALID_ARGUMENT
    if version != VERSION:
        return FAILED_PRECONDITION
    if op == 0 or op > MAX_OP or dtype > 3 or status or flags2 & ~FLAGS2_REQUEST or h[15]:
        return INVALID_ARGUMENT
    if plen > (MAX_STREAM_PAYLOAD if may_stream(op, flags, slot) else max_payload):
        return RESOURCE_EXHAUSTED
    if flags & REPLY:
        return INVALID_ARGUMENT
    if not hello_done and op != HELLO:
        return FAILED_PRECONDITION
    return None


def is_mutation(op: int, flags: int) -> bool:
    """The ops SEQUENCED may mark (docs/protocol.md, Flags2)."""
    return op in (PUSH, ASSIGN, ASSIGN_ADD, STEP_INCREMENT, TABLE_IMPORT, TABLE_EVICT) or (
        op == REGISTER and bool(flags & INIT))


def flags2_error(op: int, flags: int, flags2: int, client: int) -> int | None:
    """The documented flags2 checks (after the op's flags) on a ps task that does not
    replicate: SEQUENCED on a mutation of a connection with a client id only, STALE on a
    REGISTER without INIT only and then refused (no copy would come)."""
    if flags2 & SEQUENCED:
        if not is_mutation(op, flags):
            return INVALID_ARGUMENT
        if client == 0:
            return FAILED_PRECONDITION
    if flags2 & STALE:
        if op != REGISTER or flags & INIT:
            return INVALID_ARGUMENT
        return FAILED_PRECONDITION
    return None


def op_error(op: int, flags: int, dtype: int, count: int, plen: int, arg1: float, slot: int,
             var: Var | None, var_id: int, arg0: float = 0.0, step: int = 0, flags2: int = 0,
             client: int = 0) -> int | None:
    """The status the documented per-op checks (before the payload is read) give a frame with
    a valid header, or None when they pass (or cannot be predicted: an id the fuzzer did not
    register itself). CLUSTER_INFO and AUTH, which depend on no state, are answered in full,
    as are REPLICA_READ and REPLICA_INSTALL (refused: the fuzzed ps task does not replicate)."""
    bad_flags = bool(flags & ~ALLOWED_FLAGS.get(op, 0))
    if flags2 and op in NO_VAR_OPS | {AUTH}:
        # The op's payload bound, then its flags, then flags2 (dispatch.cc's order).
        if op == HELLO and plen > MAX_HELLO_PAYLOAD or op == WORKER_DONE and plen > 256 or (
                op == AUTH and plen != 64) or (op in (LIST, PING, CLUSTER_INFO) and plen):
            return INVALID_ARGUMENT
        if bad_flags:
            return INVALID_ARGUMENT
        return flags2_error(op, flags, flags2, client)
    if op == HELLO:  # version 6: a HelloRecord of at most MAX_HELLO_PAYLOAD bytes
        return INVALID_ARGUMENT if plen > MAX_HELLO_PAYLOAD or bad_flags else None
    if op == WORKER_DONE:
        return INVALID_ARGUMENT if plen > 256 or bad_flags else None
    if op == REGISTER:
        return INVALID_ARGUMENT if bad_flags else None
    if op == AUTH:  # the fuzzed ps task has no secret: AUTH is not used
        return INVALID_ARGUMENT if plen != 64 or bad_flags else FAILED_PRECONDITION
    if op in (LIST, PING):
        return INVALID_ARGUMENT if plen or bad_flags else None
    if op == CLUSTER_INFO:  # a task started without a cluster definition: OK, empty
        return INVALID_ARGUMENT if plen or bad_flags else OK
    if var is None:
        return NOT_FOUND if var_id == 0 or var_id >= NEVER_AN_ID else None
    sparse = flags & SPARSE
    state = slot == STATE_SLOT
    if op in TABLE_OPS and not var.table:
        return INVALID_ARGUMENT
    if var.table and ((op == PUSH and not sparse) or (op == ASSIGN and not state)
                      or op == ASSIGN_ADD or (op == PULL and not sparse and not state)):
        return INVALID_ARGUMENT  # dense access to a table: its rows are addressed by id
    if op in (PUSH, ASSIGN, ASSIGN_ADD, TABLE_IMPORT) and dtype != var.dtype:
        return INVALID_ARGUMENT
    if sparse and op not in (PULL, PUSH):
        return INVALID_ARGUMENT
    if flags & WAIT and (op not in (PULL, STEP_READ) or sparse or not 0.0 <= arg1 <= 60.0):
        return INVALID_ARGUMENT
    if flags & TAGGED and op not in (PUSH, STEP_INCREMENT):
        return INVALID_ARGUMENT
    if sparse and not var.shape:
        return INVALID_ARGUMENT
    if op == TABLE_EVICT and not (0 <= arg0 <= 9e18 and 0 <= arg1 <= 9e18):
        return INVALID_ARGUMENT
    if flags2:  # the op's flags, then flags2 (dispatch.cc's order)
        if bad_flags:
            return INVALID_ARGUMENT
        f2 = flags2_error(op, flags, flags2, client)
        if f2 is not None:
            return f2
    if op in REPLICA_OPS:  # no flag, REPLICA_READ no payload; then replication is off
        if bad_flags or (sparse and state) or (op == REPLICA_READ and plen):
            return INVALID_ARGUMENT
        return FAILED_PRECONDITION
    if op == PULL:
        expect = count * 8 if sparse else 0
    elif op == PUSH:
        expect = count * (8 + var.row_bytes) if sparse else var.nbytes
    elif op == ASSIGN:
        expect = 16 if slot == STATE_SLOT else var.nbytes
    elif op == ASSIGN_ADD:
        expect = var.nbytes
    elif op == TABLE_IMPORT:
        expect = count * var.record_bytes
    else:
        expect = 0
    if op in TABLE_OPS or var.table:  # the remaining checks in full (the model has them)
        if bad_flags or (sparse and state) or (flags & TAGGED and (step < 0 or step == I64_MAX)):
            return INVALID_ARGUMENT
    return INVALID_ARGUMENT if plen != expect else None


# ---- REGISTER: VarSpec::Decode (csrc/wire.h) and the store's rules, for an exact answer ------

class _Short(Exception):
    pass


def decode_spec(p: bytes) -> tuple[bool, bytes, tuple[Any, ...] | None, int, int]:
    """(valid, name, identity, value bytes an INIT needs or -1 when the ps task runs the
    initializer, bytes after the spec) of a REGISTER payload, as VarSpec::Decode reads it.
    identity: what a second registration of the name must repeat (dtype, shape, optimizer,
    replicas, total, table, max_rows), and the bytes its value and slots hold."""
    pos = 0

    def get(fmt: str) -> Any:
        nonlocal pos
        n = struct.calcsize(fmt)
        if len(p) - pos < n:
            raise _Short
        v = struct.unpack_from(fmt, p, pos)[0]
        pos += n
        return v

    def dims(rank: int) -> tuple[tuple[int, ...], int] | None:
        out, n = [], 1
        for _ in range(rank):
            d = get("<q")
            if d < 0 or (d > 0 and n > (1 << 40) // d):
                return None
            n *= d
            out.append(d)
        return tuple(out), n

    bad = (False, b"", None, 0, 0)
    try:
        n = get("<H")
        if n > 1024 or len(p) - pos < n or n == 0:
            return bad
        name = p[pos:pos + n]
        pos += n
        try:
            name.decode()
        except UnicodeDecodeError:
            return bad
        dt, rank = get("<B"), get("<B")
        if dt not in (F32, F64, I64) or rank > 8:
            return bad
        got = dims(rank)
        if got is None:
            return bad
        shape, n_el = got
        opt = get("<B")
        get("<BB")
        get("<6d")
        reps, total = get("<I"), get("<I")
        get("<7d")
        kind, a, b = get("<B"), get("<d"), get("<d")
        fan, dist = get("<B"), get("<B")
        get("<Q")
        offset, full_rank = get("<Q"), get("<B")
        if kind > 7 or fan > 2 or dist > 2 or full_rank > 8:
            return bad
        got = dims(full_rank)
        if got is None:
            return bad
        full_n = got[1]
        table, max_rows = get("<B"), get("<Q")
    except _Short:
        return bad
    if table > 1:
        return bad
    finite = math.isfinite(a) and math.isfinite(b)
    if table:
        row = 1
        for d in shape[1:]:  # each row dim > 0, the row at most 2^40 elements
            if d == 0 or row > (1 << 40) // d:
                return bad
            row *= d
        if rank < 2 or shape[0] != 0 or dt == I64 or reps or total or not finite:
            return bad
    else:
        if max_rows:
            return bad
        if kind:
            if full_rank == 0 and shape:
                full_n = n_el
            if offset > full_n or n_el > full_n - offset or not finite or (dt == I64
                                                                           and kind > 3):
                return bad
        if (reps == 0) != (total == 0):
            return bad
    if opt > 11 or (opt and dt == I64):
        return bad
    nbytes = n_el * ELEMENT[dt][0]
    ident = (dt, shape, opt, reps, total, table, max_rows, nbytes * (1 + NUM_SLOTS[opt]))
    return True, name, ident, (-1 if kind else nbytes), len(p) - pos


UNKNOWN_SPEC = "unknown"  # a name registered (or not) by a frame whose answer was never read


def describe(data: bytes, limit: int = 160) -> str:
    """One frame (or piece of one) as its header fields and payload, for a repro."""
    if len(data) < HSIZE:
        return f"{len(data)} bytes (less than a header): {data.hex(' ')}"
    d = dict(zip(fr.FIELDS, HEADER.unpack_from(data)))
    flags = "|".join(n for bit, n in FLAG_NAMES if d["flags"] & bit) or "0"
    fields = [f"op={OP_NAMES.get(d['op'], d['op'])}", f"flags={flags}"]
    defaults = {"magic": MAGIC, "version": VERSION}
    for k in fr.FIELDS[4:]:
        if k in ("request_id",):
            continue
        if d[k] != defaults.get(k, 0):
            fields.append(f"{k}={d[k]!r}")
    if d["magic"] != MAGIC:
        fields.append(f"magic=0x{d['magic']:08x}")
    if d["version"] != VERSION:
        fields.append(f"version={d['version']}")
    body = data[HSIZE:]
    shown = body[:limit].hex(" ") + (" ..." if len(body) > limit else "")
    return " ".join(fields) + f"; {len(body)} payload bytes sent" + (f": {shown}" if body else "")


@dataclass
class Anomaly:
    kind: str
    detail: str
    frame: bytes

    def __str__(self) -> str:
        return f"[{self.kind}] {self.detail}\n    frame: {describe(self.frame)}"


class Crash(Exception):
    """The ps task died during the run.

    Attributes:
        history: The connections of the run so far (each the list of frames sent on it), the
            oldest dropped past HISTORY_FRAMES.
        culprit: (connection, frame) indices into `history` of the frame whose reply never
            came, or None when the death was seen only afterwards.
    """

    def __init__(self, message: str, history: list[list[bytes]],
                 culprit: tuple[int, int] | None) -> None:
        super().__init__(message)
        self.history, self.culprit = history, culprit


HISTORY_FRAMES = 300_000


@dataclass
class Stats:
    frames: int = 0
    connections: int = 0
    replies: int = 0
    seconds: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        codes = ", ".join(f"{c}:{n}" for c, n in sorted(self.statuses.items()))
        return (f"{self.frames} frames on {self.connections} connections in {self.seconds:.1f} s "
                f"({rate:.0f} frames/s), {self.replies} replies; statuses {{{codes}}}; "
                f"tails {dict(sorted(self.kinds.items()))}")


def huge_allocations_fail() -> bool:
    """True when an allocation of terabytes fails here (Linux's heuristic or strict
    overcommit), so a REGISTER of 2^40 elements is a safe test of the out-of-memory path."""
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() in ("0", "2")
    except OSError:
        return False


class Fuzzer:
    """Generates frames from one seed and runs them against a ps task.

    Args:
        seed: Seeds every choice; the same seed sends the same bytes.
        address: "127.0.0.1:PORT" of the ps task.
        targets: Registered variables (ids filled in) the frames address.
        avoid: Ids never addressed on purpose (sentinels); random ids may still hit them.
        max_payload: The server's limit, for the header-check oracle.
        alive: Called after every connection; False means the ps task died.
        idle: True when the server serves no connection. After a connection closed with
            replies unread the fuzzer waits for it, so the server never runs two of its
            connections at once and every run is the same.
    """

    OP_TABLE = ([PULL] * 18 + [PUSH] * 24 + [ASSIGN] * 9 + [ASSIGN_ADD] * 6 + [STEP_READ] * 6
                + [STEP_INCREMENT] * 7 + [IS_INITIALIZED] * 3 + [PING] * 2 + [LIST]
                + [REGISTER] * 11 + [HELLO] * 2 + [WORKER_DONE] + [TABLE_EXPORT] * 3
                + [TABLE_IMPORT] * 4 + [TABLE_EVICT] * 3 + [CLUSTER_INFO]
                + [REPLICA_READ] * 2 + [REPLICA_INSTALL] * 2)
    # Version 7: the client ids connections give in HELLO (0: none), a few reused so that
    # frames can be sent again to a ps task that marked them.
    CLIENT_IDS = (0, 0, 0x51, 0x52, 0x53, 0xFFFF_FFFF_FFFF_FFFF)
    NOT_UTF8 = (b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"ok\x80", b"\xe2\x82")
    ODD_NAMES = (b"nul\x00inside", b" ", b"/", "wörker\u2028".encode(), b"\x7f")

    def __init__(self, seed: int, address: str, targets: Sequence[Var], avoid: Iterable[int],
                 max_payload: int, alive: Callable[[], bool],
                 idle: Callable[[], bool]) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        host, port = address.rsplit(":", 1)
        self.addr = (host, int(port))
        self.targets = list(targets)
        self.by_id = {v.var_id: v for v in self.targets}
        self.by_name = {v.name.encode(): v for v in self.targets}
        # Version 5: what each target table holds, and what every name is registered as.
        self.table_targets = [v for v in self.targets if v.table]
        self.tables = {v.var_id: TableModel(v.initialized) for v in self.table_targets}
        self.registry: dict[bytes, Any] = {
            v.name.encode(): (v.dtype, tuple(v.shape), v.optimizer, v.replicas, v.replicas,
                              int(v.table), v.max_rows) for v in self.targets}
        self.ended = False  # a WORKER_DONE on this connection ended synchronous training
        self.avoid = set(avoid)
        self.first_free = max([*self.by_id, *self.avoid]) + 1
        self.max_payload = max_payload
        self.alive, self.idle = alive, idle
        # Under sanitizers (PSRT_SANITIZED, set by .ci/run) a refused allocation of terabytes
        # is right, but ASan logs a warning for it, which the sanitizer stage counts as a
        # report: the out-of-memory path is fuzzed in the plain build only.
        self.huge = huge_allocations_fail() and not os.environ.get("PSRT_SANITIZED")
        self.stats = Stats()
        self.anomalies: list[Anomaly] = []
        self.anomaly_kinds: Counter[str] = Counter()
        self.touched: set[int] = set()
        self.sync_step: dict[int, int] = {}
        self.rid = self.rng.getrandbits(40)
        # Version 7: the client id of the connection being built (its last HELLO expected to
        # be accepted), and per client id the SEQUENCED frames answered OK, to send again.
        self.client = 0
        self.marked: dict[int, deque[Sent]] = {}
        self.history: deque[list[bytes]] = deque()
        self.history_frames = 0
        self.conn_frames: list[bytes] = []
        self.culprit: tuple[int, int] | None = None
        prng = random.Random(seed ^ 0x5A5A)
        self.pool = {F32: struct.pack("<4096f", *(prng.uniform(-2, 2) for _ in range(4096))),
                     F64: struct.pack("<2048d", *(prng.uniform(-2, 2) for _ in range(2048))),
                     I64: struct.pack("<2048q", *(prng.choice((I64_MAX, I64_MIN, I64_MAX - 1))
                                                  if prng.random() < 0.02 else
                                                  prng.randrange(-50, 50) for _ in range(2048)))}
        self.fuzz_specs = [self._random_spec(prng) for _ in range(48)]
        # The sweep: every op 1..MAX_OP with every flag combination, as clean frames; every op
        # outside them and every flag combination with REPLY, as connection-ending tails.
        self.sweep_clean = deque((op, flags) for op in range(1, CLEAN_MAX_OP + 1)
                                 for flags in range(0, 256, 2))
        self.sweep_tails = deque([("op", op) for op in [0, *range(MAX_OP + 1, 256)]]
                                 + [("flags", f) for f in range(1, 256, 2)])

    # ---- running ----

    def run(self, frames: int) -> Stats:
        start = time.monotonic()
        try:
            while self.stats.frames < frames:
                self._connection()
                self.stats.connections += 1
                if self.culprit is not None or not self.alive():
                    if self.culprit is None:  # seen late: most likely the last frame sent
                        self.culprit = (len(self.history) - 1, len(self.conn_frames) - 1)
                    raise Crash("the ps task died", list(self.history), self.culprit)
        finally:
            self.stats.seconds = time.monotonic() - start
        return self.stats

    def _gone(self, grace: float = 0.5) -> bool:
        """True when the ps task exited; a crashed one closes its sockets a moment before its
        exit can be seen, so a failure waits up to `grace` s before calling it an anomaly."""
        deadline = time.monotonic() + grace
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def _anomaly(self, kind: str, detail: str, frame: bytes) -> None:
        self.anomaly_kinds[kind] += 1
        if self.anomaly_kinds[kind] <= 5 and len(self.anomalies) < 60:
            self.anomalies.append(Anomaly(kind, detail, frame))

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(self.addr, timeout=10.0)
        except OSError as e:
            if self._gone():
                raise Crash(f"the ps task died (connect: {e})", list(self.history),
                            self.culprit) from None
            self._anomaly("connect", f"connect failed: {e}", b"")
            return None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        return sock

    def _connection(self) -> None:
        rng = self.rng
        sock = self._connect()
        if sock is None:
            return
        self.conn_frames = []
        self.client = 0
        self.history.append(self.conn_frames)
        while self.history_frames > HISTORY_FRAMES and len(self.history) > 1:
            self.history_frames -= len(self.history.popleft())
        try:
            sweeping = bool(self.sweep_tails)
            r = rng.random()
            if r < 0.03:  # no HELLO: the first frame is refused and the connection closed
                self._tail(sock, hello_done=False)
                return
            if r < 0.06:  # a HELLO that is refused
                if not self._bad_hello(sock):
                    return
                self._tail(sock, hello_done=False)
                return
            hello = self._hello_frame(rng.randrange(4))
            self.ended = False
            if not sweeping and r < 0.16:
                self._checked(sock, hello)
                return
            n_batches = 1 if sweeping else rng.choice((1, 1, 2, 3, 4))
            for i in range(n_batches):
                size = rng.randrange(1, 33) if sweeping else rng.choice((1, 4, 16, 32, 64, 128))
                batch = [self._clean() for _ in range(rng.randrange(1, size + 1))]
                if i == 0:
                    batch.insert(0, hello)
                if self._batch(sock, batch) is None:
                    return
            end = rng.random()
            if sweeping or end < 0.55:
                self._tail(sock, hello_done=True)
            elif end < 0.85:  # an orderly end of stream: no reply, then the server closes
                self._expect_close(sock, [], None, "end of stream")
            else:  # a batch sent, then the socket closed without reading a reply
                batch = [self._clean() for _ in range(rng.randrange(1, 9))]
                self._send_and_abandon(sock, batch)
        finally:
            sock.close()

    def _count(self, sent: Sent) -> None:
        self._record(sent.data)

    def _record(self, data: bytes) -> None:
        self.stats.frames += 1
        self.history_frames += 1
        self.conn_frames.append(data)

    def _died_at(self, data: bytes) -> None:
        """The ps task died while `data` (a frame of this connection) was unanswered."""
        if self.culprit is None:
            for i in range(len(self.conn_frames) - 1, -1, -1):
                if self.conn_frames[i] is data:
                    self.culprit = (len(self.history) - 1, i)
                    return

    def _checked(self, sock: socket.socket, hello: Sent) -> None:
        """Clean frames one at a time between two snapshots of the variable each names: a
        refused frame must leave it exactly as it was."""
        if not self._batch(sock, [hello]):
            return
        for _ in range(self.rng.randrange(4, 33)):
            s = self._clean()
            var = s.target
            if var is None:
                if not self._batch(sock, [s]):
                    return
                continue
            before = [self._make(*args, kind="snapshot") for args in self._snapshot_args(var)]
            after = [self._make(*args, kind="snapshot") for args in self._snapshot_args(var)]
            got = self._batch(sock, before + [s] + after)
            if not got:
                return
            n = len(before)
            status = got[n][0][7]
            seen = [[(h[7], h[3], h[11], h[14], p) for h, p in part]
                    for part in (got[:n], got[n + 1:])]
            if status == OK and got[n][0][9] & DUPLICATE and seen[0] != seen[1]:
                self._anomaly("duplicate-wrote", f"{var.name}: a DUPLICATE reply, yet it "
                              f"changed", s.data)
            elif status != OK and seen[0] != seen[1] and self._known_bug(s, status):
                self._anomaly("known-bug", f"{var.name}: refused-push-creates-rows", s.data)
            elif status != OK and seen[0] != seen[1]:
                if var.var_id in self.tables:
                    self.tables[var.var_id].known = False
                diff = [f"{describe(b.data)[:60]}: {x[:4]} {x[4][:24].hex()} -> "
                        f"{y[:4]} {y[4][:24].hex()}"
                        for b, x, y in zip(before, seen[0], seen[1]) if x != y]
                self._anomaly("rejected-frame-wrote", f"{var.name}: status {status} "
                              f"({got[n][1][:120]!r}), yet it changed: {'; '.join(diff)}",
                              s.data)
        self._expect_close(sock, [], None, "end of stream")

    @staticmethod
    def _snapshot_args(var: Var) -> list[tuple[Any, ...]]:
        vid, dt = var.var_id, var.dtype
        out: list[tuple[Any, ...]] = [(IS_INITIALIZED, 0, vid, dt, 0, b"")]
        if var.table:
            out.append((TABLE_EXPORT, 0, vid, dt, 0, b"", 0, 0.0, 0.0, 1 << 20))
            if var.optimizer == ADAM:
                out.append((PULL, 0, vid, dt, STATE_SLOT, b""))
            return out
        for slot in list(range(var.slots + 1)) + ([STATE_SLOT] if var.optimizer == ADAM else []):
            out.append((PULL, 0, vid, dt, slot, b""))
        if var.replicas:
            out.append((STEP_READ if var.step_var else PULL, WAIT, vid, dt, 0, b"", I64_MIN))
        return out

    def _batch(self, sock: socket.socket,
               batch: list[Sent]) -> list[tuple[tuple[Any, ...], bytes]] | None:
        """Sends clean frames and reads one reply for each, in order: the replies, or None
        when the connection ended first (an anomaly is recorded)."""
        for s in batch:
            self._count(s)
        got = exchange(sock, b"".join(s.data for s in batch), len(batch), 15.0, finish=False)
        for s, (h, p) in zip(batch, got.replies):
            self._reply(s, h, p)
        if len(got.replies) < len(batch):
            lost = batch[len(got.replies)]
            self._untracked_writes(batch[len(got.replies):])
            if self._gone():
                self._died_at(lost.data)
                return None
            what = "no reply within 15 s" if got.timed_out else "connection closed"
            self._anomaly("clean-frame-unanswered",
                          f"{what} after {len(got.replies)} of {len(batch)} replies "
                          f"(a clean frame must be answered and keep the connection)",
                          lost.data)
            return None
        return got.replies

    def _send_and_abandon(self, sock: socket.socket, batch: list[Sent]) -> None:
        for s in batch:
            self._count(s)
        self._untracked_writes(batch)
        try:
            sock.setblocking(True)
            sock.settimeout(2.0)
            sock.sendall(b"".join(s.data for s in batch))
            # Unread replies make close() send a reset to a server that may still write.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        sock.close()
        self.stats.kinds["abandoned"] += 1
        deadline = time.monotonic() + 15.0
        while not self.idle():
            if time.monotonic() > deadline:
                if not self._gone():
                    self._anomaly("connection-left-open", "15 s after a reset the server still "
                                  "counted the connection", batch[-1].data)
                return
            time.sleep(0.001)

    def _untracked_writes(self, frames: Iterable[Sent]) -> None:
        """Writes whose replies were not read may have been applied."""
        for s in frames:
            if (s.op in WRITE_OPS and s.op != REGISTER) or (s.op == PULL and s.flags & SPARSE):
                self.touched.add(s.var_id)
            if s.var_id in self.tables and s.op in (PULL, PUSH, TABLE_IMPORT, TABLE_EVICT):
                self.tables[s.var_id].known = False
            if s.op == REGISTER and len(s.data) >= HSIZE + 2:
                n = int.from_bytes(s.data[HSIZE:HSIZE + 2], "little")
                name = s.data[HSIZE + 2:HSIZE + 2 + n]
                self.registry[name] = UNKNOWN_SPEC
                t = self.by_name.get(name)
                if t is not None and t.var_id in self.tables:
                    self.tables[t.var_id].known = False

    def _expect_close(self, sock: socket.socket, tail: list[Sent], status: int | None,
                      kind: str, data: bytes | None = None, any_reply: bool = False) -> None:
        """Sends the tail, ends the stream, and reads to the end: exactly one reply with
        `status` (None: no reply) unless `any_reply`, then the server must close."""
        payload = b"".join(s.data for s in tail) if data is None else data
        self.stats.kinds[kind] += 1
        got = exchange(sock, payload, None, 15.0, finish=True)
        by_rid = {s.rid: s for s in tail}
        for h, p in got.replies:
            s = by_rid.get(h[4])
            if s is not None and not any_reply:
                self._reply(s, h, p, check_expect=False)
            else:
                self._loose_reply(h, p, payload)
        frame0 = payload[:HSIZE + 64]
        last = tail[-1].data if tail else payload
        if not self.alive():
            self._died_at(last)
            return
        if got.timed_out:
            self._untracked_writes(tail)
            if self._gone():
                self._died_at(last)
                return
            self._anomaly("not-closed", f"{kind}: the server neither closed the connection "
                          f"nor answered within 15 s", frame0)
            return
        if got.leftover:
            self._anomaly("truncated-reply", f"{kind}: {got.leftover} bytes of an incomplete "
                          f"reply before the end of stream", frame0)
        if any_reply:
            return
        codes = [h[7] for h, _ in got.replies]
        want = [] if status is None else [status]
        if codes != want and self._gone():
            self._died_at(last)
        elif codes != want:
            self._anomaly("wrong-close", f"{kind}: replies with status {codes}; expected "
                          f"{want} and then a closed connection", frame0)

    # ---- replies ----

    def _reply(self, s: Sent, h: tuple[Any, ...], p: bytes, check_expect: bool = True) -> None:
        st = self.stats
        st.replies += 1
        status = h[7]
        st.statuses[status] += 1
        # flags2: DUPLICATE only on an OK reply to a SEQUENCED request; never AWAITING (the
        # fuzzed ps task does not replicate).
        dup = bool(h[9] & DUPLICATE)
        flags2_ok = h[9] == 0 or (h[9] == DUPLICATE and status == OK and s.flags2 & SEQUENCED)
        if (h[0] != MAGIC or h[1] != VERSION or not h[3] & REPLY or h[2] != s.op or h[4] != s.rid
                or h[6] != s.dtype or h[8] != s.slot or not flags2_ok or h[15] or h[12] != 0.0
                or h[13] != 0.0 or status > MAX_CODE):
            self._anomaly("malformed-reply", f"reply {dict(zip(fr.FIELDS, h))} does not "
                          f"answer request id {s.rid} op {s.op} dtype {s.dtype} slot {s.slot}",
                          s.data)
        if s.kind == "replay" and check_expect and not (status == OK and dup):
            self._anomaly("replay-not-duplicate", f"a SEQUENCED {OP_NAMES.get(s.op)} answered "
                          f"OK before, sent again with its request id {s.rid} by client "
                          f"{s.client:#x}: status {status} flags2 {h[9]:#04x}; expected OK "
                          f"with DUPLICATE ({p[:120]!r})", s.data)
        elif s.kind != "replay" and dup:
            self._anomaly("fresh-duplicate", f"a SEQUENCED {OP_NAMES.get(s.op)} with a new "
                          f"request id {s.rid} answered DUPLICATE", s.data)
        if dup:  # nothing was applied: the models follow nothing
            if (s.op == PUSH and s.flags & RETURN_VALUE and not s.flags & TAGGED
                    and s.var is not None and len(p) != s.var.nbytes):
                self._anomaly("wrong-ok", f"duplicate RETURN_VALUE reply of {len(p)} bytes; "
                              f"expected {s.var.nbytes}", s.data)
            return
        if status == OK and s.flags2 & SEQUENCED and s.kind != "replay":
            marked = self.marked.setdefault(s.client, deque(maxlen=32))
            marked.append(s)
        if status != OK and not p:
            self._anomaly("no-message", f"status {status} without a message", s.data)
        if status == OK and s.op == REGISTER:
            n = int.from_bytes(s.data[HSIZE:HSIZE + 2], "little")
            try:
                s.data[HSIZE + 2:HSIZE + 2 + n].decode()
            except UnicodeDecodeError:
                self._anomaly("name-not-utf8", "REGISTER of a name that is not UTF-8 answered "
                              "OK (a client's LIST then cannot decode it)", s.data)
        if status == OK and s.op in NO_VAR_OPS and s.flags & (SPARSE | WAIT | TAGGED):
            self._anomaly("flag-ignored", f"{OP_NAMES[s.op]} with flags {s.flags:#04x} answered "
                          f"OK; SPARSE, WAIT_STEP and STEP_TAGGED are documented as "
                          f"INVALID_ARGUMENT on any op but PULL/PUSH/STEP_READ/STEP_INCREMENT",
                          s.data)
        if status == OK and s.op == WORKER_DONE:
            self.ended = True
        elif status == OK and s.op == HELLO:
            self.ended = False
        if status == OK and (s.op in WRITE_OPS or (s.op == PULL and s.flags & SPARSE)):
            if s.op != REGISTER or s.flags & INIT:
                self.touched.add(h[5])
                self.touched.add(s.var_id)
        if (status == INVALID_ARGUMENT and s.op == PUSH and s.flags & SPARSE
                and "refused-push-creates-rows" in KNOWN_BUGS):
            self.touched.add(s.var_id)  # may have made rows of a table (a reported bug)
        expect = s.expect
        if expect is None and s.op == REGISTER:
            expect = self._register_expect(s)
        elif expect is None and s.var is not None and s.var.var_id in self.tables:
            expect = self._table_expect(s)
        wrong = expect is not None and (status not in expect if isinstance(expect, frozenset)
                                        else status != expect)
        if check_expect and wrong:
            self._anomaly("wrong-status", f"status {status}; the documented checks give "
                          f"{expect} ({p[:160]!r})", s.data)
        if s.op == REGISTER:
            self._register_seen(s, status, h)
        elif s.var is not None and s.var.var_id in self.tables and s.expect is None:
            if check_expect:
                self._table_seen(s, status, h, p)
            elif status == OK:  # a tail's frame: answered, not followed
                self.tables[s.var.var_id].known = False
        if s.op == CLUSTER_INFO and status == OK and (p or h[5]):
            self._anomaly("wrong-ok", f"CLUSTER_INFO of a task without a cluster definition "
                          f"answered {p[:80]!r} var_id {h[5]}", s.data)
        var = s.var
        if var is None or status != OK or s.expect is not None:
            return
        if s.flags & (TAGGED | WAIT):
            self.sync_step[var.var_id] = h[11]
        self._check_ok(s, var, h, p)

    def _check_ok(self, s: Sent, var: Var, h: tuple[Any, ...], p: bytes) -> None:
        """What an OK reply to a frame that passed the per-op checks promises."""
        op, flags, slot = s.op, s.flags, s.slot
        bad = None
        kind = "wrong-ok"
        if op in (PULL, ASSIGN) and slot == STATE_SLOT and var.optimizer != ADAM and not (
                op == PULL and flags & WAIT and h[3] & WAIT):
            bad = f"{OP_NAMES[op]} of slot 255 of a variable without Adam answered OK"
        elif op == PULL:
            if flags & WAIT and h[3] & WAIT:
                bad = "NOT_READY reply with a payload" if p else None
            elif slot != STATE_SLOT and slot > var.slots:
                bad = f"PULL of slot {slot} of a variable with {var.slots} slots answered OK"
            elif flags & SPARSE and slot == STATE_SLOT:
                kind = "sparse-state-pull"
                bad = (f"row PULL of {s.count} rows of the optimizer-state slot answered OK with "
                       f"{len(p)} bytes" + (", though an index is out of range"
                                            if s.bad_index else ""))
            elif flags & SPARSE and s.bad_index:
                bad = "row PULL with an index out of range answered OK"
            elif flags & SPARSE and len(p) != s.count * var.row_bytes:
                bad = f"row PULL reply of {len(p)} bytes; expected {s.count * var.row_bytes}"
            elif not flags & SPARSE and len(p) != (16 if slot == STATE_SLOT else var.nbytes):
                bad = f"PULL reply of {len(p)} bytes"
        elif op == PUSH:
            if flags & TAGGED and self.ended:
                kind = "ended-sync-unchecked"
            if var.optimizer == NONE:
                bad = "PUSH to a variable without optimizer answered OK"
            elif bool(flags & TAGGED) != bool(var.replicas):
                bad = ("step-tagged PUSH to an asynchronous variable answered OK"
                       if flags & TAGGED else
                       "untagged PUSH to a synchronous variable answered OK")
            elif flags & SPARSE and s.bad_index:
                bad = "row PUSH with an index out of range answered OK"
            elif flags & RETURN_VALUE and not flags & TAGGED and len(p) != var.nbytes:
                bad = f"RETURN_VALUE reply of {len(p)} bytes; expected {var.nbytes}"
        elif op == ASSIGN:
            if slot != STATE_SLOT and slot > var.slots:
                bad = f"ASSIGN to slot {slot} of a variable with {var.slots} slots answered OK"
        elif op in (STEP_READ, STEP_INCREMENT):
            if flags & TAGGED and self.ended:
                kind = "ended-sync-unchecked"
            if not var.step_var:
                bad = f"{OP_NAMES[op]} of a {var.shape} variable of dtype {var.dtype} answered OK"
            elif op == STEP_INCREMENT and bool(flags & TAGGED) != bool(var.replicas):
                bad = "STEP_INCREMENT answered OK though its tag does not match the variable"
        if not bad and op in (PUSH, STEP_INCREMENT) and flags & TAGGED and h[3] & TAGGED:
            tag = struct.unpack_from("<q", s.data, 32)[0]
            if h[11] < tag:  # accepted for step `tag`: the step can only have moved up from it
                kind = "step-wrapped"
                bad = (f"tagged {OP_NAMES[op]} for step {tag} accepted, yet the step is now "
                       f"{h[11]}")
        if bad:
            if kind == "ended-sync-unchecked":
                bad += " (after WORKER_DONE ended synchronous training on this connection)"
            self._anomaly(kind, f"{var.name}: {bad}", s.data)

    def _loose_reply(self, h: tuple[Any, ...], p: bytes, context: bytes) -> None:
        """A reply the fuzzer cannot match to a frame it built (a lying length made the server
        read a header elsewhere): only its form is checked; an OK write counts as touching."""
        self.stats.replies += 1
        self.stats.statuses[h[7]] += 1
        if h[0] != MAGIC or h[1] != VERSION or not h[3] & REPLY or h[7] > MAX_CODE:
            self._anomaly("malformed-reply", f"reply {dict(zip(fr.FIELDS, h))}", context[:128])
        if h[7] == OK and (h[2] in WRITE_OPS or h[2] == PULL):
            self.touched.add(h[5])
        if h[7] == OK and h[5] in self.tables and h[2] in (REGISTER, PULL, PUSH, TABLE_IMPORT,
                                                          TABLE_EVICT):
            self.tables[h[5]].known = False

    # ---- version 5: the registry and the tables ----

    def _register_expect(self, s: Sent) -> int | frozenset[int] | None:
        """A REGISTER's answer: the spec rules of VarSpec::Decode, the value bytes INIT needs,
        then the name's registration (the same declaration: OK; another: INVALID_ARGUMENT)."""
        valid, name, ident, need, rest = decode_spec(s.data[HSIZE:])
        if not valid or (rest != (0 if need < 0 or not s.flags & INIT else need)):
            return INVALID_ARGUMENT
        assert ident is not None
        cur = self.registry.get(name)
        if cur is UNKNOWN_SPEC:
            return frozenset((OK, INVALID_ARGUMENT, RESOURCE_EXHAUSTED))
        if cur is not None:
            return OK if cur[:7] == ident[:7] else INVALID_ARGUMENT
        # A new variable: its value and slots are allocated (a table's rows come later).
        return frozenset((OK, RESOURCE_EXHAUSTED)) if ident[7] > (64 << 20) else OK

    def _register_seen(self, s: Sent, status: int, h: tuple[Any, ...]) -> None:
        if status != OK:
            return
        valid, name, ident, _, _ = decode_spec(s.data[HSIZE:])
        if not valid:
            return
        self.registry[name] = ident[:7] if ident else UNKNOWN_SPEC
        t = self.by_name.get(name)
        if t is not None and t.var_id in self.tables and s.flags & INIT:
            self.tables[t.var_id].reset()  # initialized: emptied

    def _known_bug(self, s: Sent, status: int) -> bool:
        var = s.var
        return ("refused-push-creates-rows" in KNOWN_BUGS and var is not None and var.table
                and s.op == PUSH and status == INVALID_ARGUMENT
                and bad_hyper(var, s.flags, HEADER.unpack_from(s.data)[12]))

    @staticmethod
    def _ids(s: Sent) -> list[int]:
        n = s.count if len(s.data) - HSIZE >= 8 * s.count else 0
        return list(struct.unpack_from(f"<{n}q", s.data, HSIZE))

    def _table_expect(self, s: Sent) -> int | None:
        """The answer to a frame at a target table that passed the per-op checks, from what
        the table holds (dispatch.cc and handlers_*.cc, store.cc, table.cc); None when it is not known."""
        var = s.var
        assert var is not None
        tm = self.tables[var.var_id]
        if not tm.known:
            return None
        op, flags, init = s.op, s.flags, tm.initialized
        if op == PULL:
            if not init:
                return FAILED_PRECONDITION
            if not flags & SPARSE:  # dense: slot 255 only
                if flags & WAIT:
                    return None
                return OK if var.optimizer == ADAM else INVALID_ARGUMENT
            if s.count * var.row_bytes > self.max_payload:
                return RESOURCE_EXHAUSTED
            if s.slot > var.slots:
                return INVALID_ARGUMENT
            return OK if tm.fits(self._ids(s), var.max_rows) else RESOURCE_EXHAUSTED
        if op == PUSH:  # row-sparse: dense is refused before
            if flags & TAGGED or var.optimizer == NONE or not init:
                return FAILED_PRECONDITION  # a table is trained asynchronously
            # The kernel's hyper-parameter check comes before any row is made.
            if bad_hyper(var, flags, HEADER.unpack_from(s.data)[12]):
                return INVALID_ARGUMENT
            if not tm.fits(self._ids(s), var.max_rows):
                return RESOURCE_EXHAUSTED
            return OK
        if op == ASSIGN:  # slot 255: Adam's beta powers
            return OK if var.optimizer == ADAM else INVALID_ARGUMENT
        if op in (STEP_READ, STEP_INCREMENT):
            return INVALID_ARGUMENT
        if op == IS_INITIALIZED:
            return OK
        if op in (TABLE_EXPORT, TABLE_EVICT):
            return OK if init else FAILED_PRECONDITION
        if op == TABLE_IMPORT:
            ids = self._ids(s)
            if flags & INIT:
                return (RESOURCE_EXHAUSTED if var.max_rows and len(set(ids)) > var.max_rows
                        else OK)
            if not init:
                return FAILED_PRECONDITION
            return OK if tm.fits(ids, var.max_rows) else RESOURCE_EXHAUSTED
        return None

    def _table_seen(self, s: Sent, status: int, h: tuple[Any, ...], p: bytes) -> None:
        """Follows a target table through an answered frame, and checks what an OK reply
        carries against it (IS_INITIALIZED, TABLE_EXPORT's rows, TABLE_EVICT's counts)."""
        var = s.var
        assert var is not None
        tm = self.tables[var.var_id]
        op, flags = s.op, s.flags
        req = HEADER.unpack_from(s.data)
        if op == TABLE_EXPORT and status == OK:
            self._check_export(s, var, tm, req, h, p)
        if status != OK:
            if self._known_bug(s, status) and tm.known and tm.fits(self._ids(s), var.max_rows):
                self._anomaly("known-bug", f"{var.name}: refused-push-creates-rows", s.data)
                tm.locate(self._ids(s))  # as the ps task does until it is fixed
            return
        if op == TABLE_IMPORT and flags & INIT:
            tm.reset()
        if not tm.known:
            return
        bad = None
        if op == PULL and flags & SPARSE:
            tm.locate(self._ids(s))
        elif op == PUSH and flags & SPARSE and not flags & TAGGED:
            tm.apply(self._ids(s))
        elif op == IS_INITIALIZED and bool(h[3] & INITIALIZED) != tm.initialized:
            bad = f"IS_INITIALIZED says {bool(h[3] & INITIALIZED)}; expected {tm.initialized}"
        elif op == TABLE_IMPORT:
            n = s.count
            ids = self._ids(s)
            counts = struct.unpack_from(f"<{n}q", s.data, HSIZE + 8 * n)
            tm.locate(ids)
            for i, c in zip(ids, counts):
                tm.rows[i] = [max(c, 0), tm.clock]
            tm.initialized = True
        elif op == TABLE_EVICT:
            gone = tm.evict(int(req[12]), int(req[13]))
            if (h[14], h[11]) != (gone, len(tm.rows)):
                bad = (f"TABLE_EVICT({req[12]!r}, {req[13]!r}) removed {h[14]} rows leaving "
                       f"{h[11]}; expected {gone} leaving {len(tm.rows)}")
        if bad:
            self._anomaly("table-model", f"{var.name}: {bad}", s.data)
            tm.known = False

    def _check_export(self, s: Sent, var: Var, tm: TableModel, req: tuple[Any, ...],
                      h: tuple[Any, ...], p: bytes) -> None:
        n, rec = h[14], var.record_bytes
        limit = max(1, min(req[14], self.max_payload // rec))
        bad = None
        if len(p) != n * rec or n > limit:
            bad = f"{n} rows in {len(p)} bytes (records of {rec}, at most {limit} asked)"
        elif h[11] < -1:
            bad = f"next cursor {h[11]}"
        else:
            ids = struct.unpack_from(f"<{n}q", p)
            counts = struct.unpack_from(f"<{n}q", p, 8 * n)
            if len(set(ids)) != n:
                bad = f"ids repeat: {ids[:16]}"
            elif tm.known and s.kind != "snapshot":
                got = dict(zip(ids, counts))
                want = {i: r[0] - (1 << 64) if r[0] > I64_MAX else r[0]  # u64 sent as i64
                        for i, r in tm.rows.items()}
                if any(want.get(i) != c for i, c in got.items()):
                    bad = (f"rows {sorted(got.items())[:8]} are not the table's "
                           f"{sorted(want.items())[:8]}")
                elif req[11] <= 0 and len(want) <= limit and (got != want or h[11] != -1):
                    bad = (f"a first page of {limit} rows gave {len(got)} rows (next "
                           f"{h[11]}); the table holds {len(want)}")
        if bad:
            self._anomaly("table-export", f"{var.name}: {bad}", s.data)
            tm.known = False

    # ---- builders ----

    def _next_rid(self) -> int:
        self.rid = (self.rid + 1) & MASK64
        return self.rid

    def _values(self, dtype: int, n: int) -> bytes:
        """n bytes of values of `dtype` (n need not be a multiple of the element size)."""
        if n <= 0:
            return b""
        pool = self.pool.get(dtype)
        if pool is None or n > len(pool) or self.rng.random() < 0.1:
            return self.rng.randbytes(n)
        off = self.rng.randrange(0, (len(pool) - n) // 8 + 1) * 8
        return pool[off:off + n]

    def _indices(self, rows: int) -> list[int]:
        """Row indices: none, a few or many; in range, repeated, or one of them out of range
        (negative, at the end, huge)."""
        rng = self.rng
        r = rng.random()
        n = 0 if r < 0.15 else rng.randrange(1, 9) if r < 0.85 else rng.randrange(9, 200)
        if rows > 0:
            if rng.random() < 0.2:
                pick = [rng.randrange(rows) for _ in range(2)]
                idx = [rng.choice(pick) for _ in range(n)]
            else:
                idx = [rng.randrange(rows) for _ in range(n)]
        else:
            idx = [0] * n
        if n and rng.random() < 0.12:
            idx[rng.randrange(n)] = rng.choice(
                (-1, rows, rows + 1, 1 << 31, 1 << 40, I64_MAX, I64_MIN, -rows))
        return idx

    def _table_ids(self, var: Var) -> list[int]:
        """Ids of a table's rows: none, a few or many; ones it holds, small ones, repeated, and
        the extremes of int64."""
        rng = self.rng
        r = rng.random()
        n = 0 if r < 0.1 else rng.randrange(1, 7) if r < 0.9 else rng.randrange(7, 80)
        tm = self.tables.get(var.var_id)
        held = list(tm.rows) if tm is not None and tm.rows else [0]
        out = []
        for _ in range(n):
            k = rng.random()
            if k < 0.45:
                out.append(rng.choice(held))
            elif k < 0.85:
                out.append(rng.randrange(-3, 12))
            elif k < 0.95:
                out.append(rng.choice((I64_MIN, I64_MAX, I64_MIN + 1, I64_MAX - 1, -1, 1 << 40,
                                       1 << 62, -(1 << 32))))
            else:
                out.append(rng.getrandbits(64) + I64_MIN)
        return out

    def _tag(self, var: Var | None) -> int:
        rng = self.rng
        if rng.random() < 0.04:
            return rng.choice((I64_MAX, I64_MAX - 1, I64_MIN, -1, 1 << 62))
        base = self.sync_step.get(var.var_id, 0) if var is not None else 0
        tag = base + rng.choice((-1, 0, 0, 0, 0, 1, 1, 2))
        return (tag - I64_MIN) % (1 << 64) + I64_MIN  # wraps as the server's int64 would

    def _wait_seconds(self) -> float:
        rng = self.rng
        if rng.random() < 0.85:
            return rng.choice((0.0, -0.0, 1e-4, 5e-4, 1e-3))
        return rng.choice((-1e-9, -1.0, 60.5, 61.0, 1e300, math.inf, -math.inf, math.nan))

    def _pick_var(self) -> tuple[Var | None, int, Var]:
        """(the Var the id names if the fuzzer knows it, the id, a Var to shape the payload)."""
        rng = self.rng
        r = rng.random()
        t = rng.choice(self.targets)
        if r < 0.86:
            return t, t.var_id, t
        if r < 0.89:
            vid = 0
        elif r < 0.93:
            vid = self.first_free + rng.randrange(64)
        elif r < 0.97:
            vid = rng.getrandbits(32)
        else:  # one bit flipped; rarely the one that turns a target's id into a sentinel's
            vid = t.var_id ^ (1 << (rng.randrange(5, 32) if rng.random() < 0.9995 else 4))
        return self.by_id.get(vid), vid, t

    def _flags(self, op: int, var: Var) -> int:
        rng = self.rng
        if rng.random() < 0.25:
            return rng.randrange(0, 256, 2)
        f = 0
        if op == PULL:
            if rng.random() < (0.8 if var.table else 0.25):
                f |= SPARSE
            elif rng.random() < 0.2:
                f |= WAIT
        elif op == PUSH:
            if var.shape and rng.random() < (0.85 if var.table else 0.35):
                f |= SPARSE
            if rng.random() < 0.2:
                f |= HAS_LR
            if rng.random() < 0.15:
                f |= RETURN_VALUE
            if rng.random() < (0.85 if var.replicas else 0.05):
                f |= TAGGED
            if rng.random() < 0.15:
                f |= INITIALIZED  # ATOMIC on a PUSH (version 6)
        elif op == ASSIGN:
            if rng.random() < 0.15:
                f |= INIT
        elif op == STEP_INCREMENT:
            if rng.random() < (0.85 if var.replicas else 0.05):
                f |= TAGGED
        elif op == STEP_READ:
            if rng.random() < 0.3:
                f |= WAIT
        return f

    def _slot(self, op: int, var: Var) -> int:
        rng = self.rng
        r = rng.random()
        if op in (PULL, ASSIGN):
            if r < 0.65:
                return 0
            if r < 0.85:
                valid = list(range(1, var.slots + 1)) + ([STATE_SLOT] if var.optimizer == ADAM
                                                         else [])
                return rng.choice(valid) if valid else 0
            return rng.choice((1, 2, 3, 4, 254, STATE_SLOT, rng.randrange(256)))
        return 0 if r < 0.95 else rng.choice((1, 2, STATE_SLOT, rng.randrange(256)))

    def _make(self, op: int, flags: int, var_id: int, dtype: int, slot: int, payload: bytes,
              step: int = 0, arg0: float = 0.0, arg1: float = 0.0, count: int = 0,
              var: Var | None = None, bad_index: bool = False, kind: str = "clean",
              flags2: int = 0) -> Sent:
        rid = self._next_rid()
        plen = len(payload)
        data = HEADER.pack(MAGIC, VERSION, op, flags, rid, var_id, dtype, 0, slot, flags2, plen,
                           step, arg0, arg1, count, 0) + payload
        expect = op_error(op, flags, dtype, count, plen, arg1, slot, var, var_id, arg0, step,
                          flags2, self.client)
        sent = Sent(rid, op, flags, var_id, dtype, slot, count, plen, arg1, var, expect,
                    bad_index, data, kind)
        sent.flags2, sent.client = flags2, self.client
        return sent

    def _flags2(self) -> int:
        """Version 7: flags2 of a clean frame, mostly none."""
        rng = self.rng
        if rng.random() < 0.94:
            return 0
        return rng.choice((SEQUENCED, SEQUENCED, SEQUENCED, STALE, SEQUENCED | STALE))

    def _replay(self) -> Sent | None:
        """Now and then, a SEQUENCED frame this connection's client id had answered OK, sent
        again byte for byte (the same request id): a duplicate, answered OK with DUPLICATE
        and applied no second time."""
        marked = self.marked.get(self.client)
        if not marked or self.rng.random() > 0.03:
            return None
        old = self.rng.choice(marked)
        s = Sent(old.rid, old.op, old.flags, old.var_id, old.dtype, old.slot, old.count,
                 old.plen, old.arg1, old.var, OK, old.bad_index, old.data, "replay")
        s.flags2, s.client, s.target = old.flags2, old.client, old.target
        return s

    def _clean(self) -> Sent:
        """A frame with a valid header whose payload_len is the number of bytes that follow:
        answered, and the connection stays open, whatever the per-op checks say."""
        rng = self.rng
        forced_flags = None
        if self.sweep_clean:
            op, forced_flags = self.sweep_clean.popleft()
        else:
            replay = self._replay()
            if replay is not None:
                return replay
            op = self.OP_TABLE[rng.randrange(len(self.OP_TABLE))]
        if op == REGISTER:
            return self._register(forced_flags)
        if op in (HELLO, WORKER_DONE):
            return self._named(op, forced_flags)
        if op in (LIST, PING, AUTH, CLUSTER_INFO):
            flags = forced_flags if forced_flags is not None else (
                0 if rng.random() < 0.8 else rng.randrange(0, 256, 2))
            payload = b"" if rng.random() < 0.9 else rng.randbytes(rng.randrange(1, 40))
            if op == AUTH and rng.random() < 0.8:
                payload = rng.randbytes(64)
            return self._make(op, flags, rng.choice((0, 0, 1, rng.getrandbits(32))),
                              rng.randrange(4) if rng.random() < 0.1 else 0, 0, payload,
                              flags2=self._flags2())
        var, var_id, shape = self._pick_var()
        if (op in TABLE_OPS or rng.random() < 0.08) and var is shape and rng.random() < 0.8:
            var = shape = rng.choice(self.table_targets)
            var_id = var.var_id
        flags = forced_flags if forced_flags is not None else self._flags(op, shape)
        dtype = shape.dtype if rng.random() < 0.9 else rng.randrange(4)
        slot = self._slot(op, shape)
        step, arg0, arg1, count, bad = 0, 0.0, 0.0, 0, False
        if flags & (TAGGED | WAIT):
            step = self._tag(var)
        elif op == STEP_INCREMENT:
            step = rng.choice((1, 1, 1, 0, -1, 7, I64_MAX, I64_MIN))
        if flags & WAIT:
            arg1 = self._wait_seconds()
        if flags & HAS_LR:
            arg0 = rng.choice((0.01, 0.0, -0.5, 1e30, math.nan, math.inf, 5e-324))
        sparse = flags & SPARSE
        payload = b""
        if op == TABLE_EXPORT:
            step = rng.choice((0, 0, 0, 1, 2, rng.randrange(64), -1, I64_MIN, I64_MAX, 1 << 40))
            count = rng.choice((0, 1, 2, 5, 64, 1000, 0xFFFFFFFF))
        elif op == TABLE_IMPORT:
            if forced_flags is None:
                flags = INIT if rng.random() < 0.3 else 0
            idx = self._table_ids(shape)
            count = len(idx)
            payload = (struct.pack(f"<{2 * count}q", *idx, *(
                rng.choice((0, 1, 2, 3, 7, -1, I64_MIN, I64_MAX)) for _ in idx))
                       + self._values(shape.dtype, count * (shape.record_bytes - 16)))
            if rng.random() < 0.08:
                count = rng.choice((count + 1, max(count - 1, 0), 0xFFFFFFFF))
        elif op == TABLE_EVICT:
            pick = (0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.5, 2.7, 1e18, 9e18, -0.0, 9.1e18, -1.0,
                    -1e-300, math.nan, math.inf, -math.inf)
            arg0, arg1 = rng.choice(pick), rng.choice(pick)
        elif op == REPLICA_INSTALL:  # a record's start, or bytes (refused either way)
            payload = rng.choice((b"", b"PSRS\x07\x00", b"PSRS\x07\x00" + rng.randbytes(64),
                                  rng.randbytes(rng.randrange(1, 200))))
        elif op in (PULL, PUSH) and sparse and shape.table:
            idx = self._table_ids(shape)
            count = len(idx)
            payload = struct.pack(f"<{count}q", *idx)
            if op == PUSH:
                payload += self._values(shape.dtype, count * shape.row_bytes)
            if rng.random() < 0.05:
                count = rng.choice((count + 1, max(count - 1, 0), 0xFFFFFFFF))
        elif op in (PULL, PUSH) and sparse:
            idx = self._indices(shape.rows)
            count = len(idx)
            payload = struct.pack(f"<{count}q", *idx)
            if op == PUSH:
                payload += self._values(shape.dtype, count * shape.row_bytes)
            if rng.random() < 0.08:
                count = rng.choice((count + 1, max(count - 1, 0), 0, 0xFFFFFFFF,
                                    rng.getrandbits(32)))
        elif op == PUSH or op == ASSIGN_ADD:
            payload = self._values(shape.dtype, shape.nbytes)
        elif op == ASSIGN:
            if slot == STATE_SLOT:
                payload = struct.pack("<2d", rng.random(), rng.random())
            else:
                payload = self._values(shape.dtype, shape.nbytes)
        if rng.random() < 0.08:  # a truthful payload_len of the wrong size for the op
            k = rng.choice((1, 4, 8, shape.esize, shape.row_bytes or 3))
            payload = rng.choice((payload[:-k], payload + rng.randbytes(k), b"",
                                  rng.randbytes(rng.randrange(1, 64))))
        if not sparse and rng.random() < 0.03:
            count = rng.getrandbits(32)
        if sparse and op in (PULL, PUSH) and not (var or shape).table:
            rows = (var or shape).rows  # the indices the server will read, after mutation
            k = min(count, len(payload) // 8)
            bad = any(i < 0 or i >= rows for i in struct.unpack_from(f"<{k}q", payload))
        return self._make(op, flags, var_id, dtype, slot, payload, step, arg0, arg1, count, var,
                          bad, flags2=self._flags2())

    def _job(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.8:
            return rng.choice((b"worker", b"worker", b"chief", b"", "wörker".encode()))
        if r < 0.85:
            return rng.choice(self.NOT_UTF8)
        if r < 0.9:
            return rng.choice(self.ODD_NAMES)
        return rng.choice((b"w" * 256, b"w" * 257, rng.randbytes(300)))

    def _named(self, op: int, forced_flags: int | None) -> Sent:
        rng = self.rng
        flags = forced_flags if forced_flags is not None else (
            0 if rng.random() < 0.9 else rng.randrange(0, 256, 2))
        task = rng.randrange(4) if rng.random() < 0.95 else rng.getrandbits(32)
        if op == HELLO:
            client = rng.choice(self.CLIENT_IDS)
            payload = self._hello_payload(client)
            s = self._make(op, flags, task, 0, 0, payload)
            if s.expect is None:
                s.expect = hello_content_error(payload)
            if s.expect is None:  # accepted: the frames after it are this client's
                self.client = client
            return s
        return self._make(op, flags, task, 0, 0, self._job())

    def _hello_payload(self, client: int = 0) -> bytes:
        """A version-7 HELLO payload that keeps the connection open: a valid record (no
        expectation, or this ps task's own identity; digests of jobs the fuzzed ps task does
        not know; the client id), or a malformed one (INVALID_ARGUMENT)."""
        rng = self.rng
        jobs = [(rng.choice((b"ps", b"worker", "wörker".encode())), rng.getrandbits(64))
                for _ in range(rng.choice((0, 0, 1, 2, 16)))]
        expect = rng.choice(((b"", fr.ANY_TASK), (b"", rng.getrandbits(32)), (PS_JOB, PS_TASK)))
        r = rng.random()
        job = self._job() if r < 0.7 else rng.choice((b"worker", b"chief"))
        if len(job) > 256:
            job = job[:256]
        good = fr.hello_payload(job, expect[0], expect[1], jobs, client_id=client)
        if r < 0.7:
            return good
        if r < 0.8:  # cut short (in the client id too)
            return good[:rng.randrange(len(good))]
        if r < 0.85:  # trailing bytes
            return good + rng.randbytes(rng.randrange(1, 9))
        if r < 0.9:  # more digests than the count allows
            bare = fr.hello_payload(job, expect[0], expect[1], client_id=client)
            return bare[:-9] + bytes([rng.randrange(17, 256)]) + bare[-8:]
        if r < 0.95:  # a name past 256 bytes
            return struct.pack("<H", 257) + b"w" * 257 + good[2 + len(job):]
        return fr.hello_payload(job, expect[0], expect[1], [(rng.choice(self.NOT_UTF8), 1)],
                                client_id=client)

    def _hello_frame(self, task: int) -> Sent:
        """A connection's first HELLO; the frames built after it are its client id's."""
        client = self.rng.choice(self.CLIENT_IDS)
        s = self._make(HELLO, 0, task, 0, 0, fr.hello_payload(b"worker", client_id=client),
                       kind="hello")
        self.client = client
        return s

    def _random_spec(self, rng: random.Random) -> dict[str, Any]:
        if rng.random() < 0.3:
            return self._random_table_spec(rng)
        dtype = rng.choice((F32, F32, F64, I64))
        rank = rng.randrange(4)
        shape = tuple(rng.randrange(0, 7) for _ in range(rank))
        opt = NONE if dtype == I64 else rng.randrange(5)
        reps = 0 if rng.random() < 0.8 else rng.randrange(1, 4)
        return dict(dtype=dtype, shape=shape, optimizer=opt, replicas_to_aggregate=reps,
                    total_num_replicas=reps, learning_rate=0.01)

    @staticmethod
    def _random_table_spec(rng: random.Random) -> dict[str, Any]:
        """A hash table's spec: mostly valid (rank >= 2, shape[0] == 0, float rows, any
        optimizer and initializer, sometimes a small max_rows), sometimes breaking one rule."""
        dtype = rng.choice((F32, F64))
        shape = (0,) + tuple(rng.randrange(1, 6) for _ in range(rng.randrange(1, 3)))
        spec = dict(dtype=dtype, shape=shape, optimizer=rng.randrange(12), table=1,
                    max_rows=rng.choice((0, 0, 1, 3, 16)), learning_rate=0.05,
                    init_kind=rng.randrange(8), init_a=rng.choice((0.0, -1.0, 1.0)),
                    init_b=rng.choice((1.0, 0.5)), seed=rng.getrandbits(64),
                    fan_mode=rng.randrange(3), distribution=rng.randrange(3))
        r = rng.random()
        if r < 0.04:
            spec["shape"] = rng.choice(((0,), (), (1, 4), (0, 0), (0, 3, 0), (3,)))
        elif r < 0.07:
            spec["dtype"] = I64
        elif r < 0.10:
            spec["replicas_to_aggregate"] = spec["total_num_replicas"] = 1
        elif r < 0.12:
            spec["table"] = rng.choice((2, 255))
        elif r < 0.14:
            spec["init_a"] = rng.choice((math.nan, math.inf))
        elif r < 0.17:  # max_rows on a variable
            spec.update(table=0, shape=shape[1:], max_rows=rng.choice((1, 1 << 40)))
        return spec

    def _register(self, forced_flags: int | None) -> Sent:
        rng = self.rng
        r = rng.random()
        if r < 0.25:  # a target again: the same declaration, or one that disagrees
            t = rng.choice(self.targets)
            if rng.random() < 0.3:
                t = rng.choice(self.table_targets)
            name: bytes = t.name.encode()
            spec = dict(dtype=t.dtype, shape=t.shape, optimizer=t.optimizer,
                        replicas_to_aggregate=t.replicas, total_num_replicas=t.replicas,
                        learning_rate=0.01, table=int(t.table), max_rows=t.max_rows)
            if rng.random() < 0.2:
                key = rng.choice(("dtype", "shape", "optimizer", "replicas_to_aggregate",
                                  "table", "max_rows"))
                spec[key] = {"dtype": rng.choice((F32, F64)), "shape": (1,) + t.shape,
                             "optimizer": (t.optimizer + 1) % 12,
                             "replicas_to_aggregate": t.replicas + 1, "table": 1 - t.table,
                             "max_rows": rng.choice((0, 1, t.max_rows + 1))}[key]
                if key == "replicas_to_aggregate":
                    spec["total_num_replicas"] = spec[key]
        elif r < 0.80:
            k = rng.randrange(len(self.fuzz_specs))
            name = f"fuzz/{k}".encode()
            spec = dict(self.fuzz_specs[k]) if rng.random() < 0.7 else self._random_spec(rng)
        elif r < 0.88:
            name = rng.choice(self.NOT_UTF8 + self.ODD_NAMES) + bytes([rng.randrange(48, 58)])
            spec = self._random_spec(rng)
        elif r < 0.95:
            name = rng.choice((b"", b"n" * 1024, b"n" * 1025, b"n" * 4000))
            spec = self._random_spec(rng)
        else:  # one random byte and a suffix: new names, but not without bound
            name = bytes([rng.randrange(256)]) + rng.choice((b"", b"/a", b"\x80", b"\xff\xff"))
            spec = self._random_spec(rng)
        r = rng.random()
        if r < 0.12:  # absurd shapes; the legal ones among them hold no memory or cannot
            shapes = [(1 << 40) + 1, (1 << 21, 1 << 20), I64_MAX, (0, I64_MAX),
                      (1 << 40, 0), (3, -1), (-1,), (I64_MIN,), (1 << 62, 1 << 62),
                      (2,) * 9, (1,) * 8]
            if self.huge:
                shapes.append((1 << 20, 1 << 20))
            s = rng.choice(shapes)
            spec["shape"] = s if isinstance(s, tuple) else (s,)
        elif r < 0.17:
            spec["dtype"] = rng.choice((0, 4, 255))
        elif r < 0.21:
            spec["optimizer"] = rng.choice((12, 255, rng.randrange(12, 256)))
        elif r < 0.26:
            spec["replicas_to_aggregate"], spec["total_num_replicas"] = rng.choice(
                ((0, 1), (1, 0), (0xFFFFFFFF, 0xFFFFFFFF), (3, 1), (1, 3)))
        elif r < 0.29:
            spec["learning_rate"] = rng.choice((math.nan, -math.inf, 1e308))
        payload = fr.var_spec(name, **spec)
        shape = spec["shape"]
        rank = len(shape)
        if rng.random() < 0.04:  # a rank byte that lies
            payload = fr.var_spec(name, **spec, rank=rng.choice((rank + 1, 9, 200, 255)))
        elif rng.random() < 0.03:  # a name length that lies
            payload = fr.var_spec(name, **spec, name_len=rng.choice((len(name) + 1, 0xFFFF)))
        flags = forced_flags if forced_flags is not None else (
            INIT if rng.random() < 0.55 else 0) | (rng.randrange(0, 256, 2)
                                                     if rng.random() < 0.08 else 0)
        esize = ELEMENT.get(spec["dtype"], (4, ""))[0]
        n = math.prod(shape) * esize if all(d >= 0 for d in shape) else -1
        if spec.get("init_kind"):  # the ps task runs the initializer: no value bytes
            n = 0
        if flags & INIT:
            if 0 <= n <= 4096 and rng.random() < 0.85:
                payload += self._values(spec["dtype"], n)
            else:
                want = max(n, 0)
                payload += self.rng.randbytes(rng.choice(
                    (max(want - 1, 0), want + 1, want + esize, 0, 16)) % 5000)
        elif rng.random() < 0.05:
            payload += rng.randbytes(rng.randrange(1, 9))
        if rng.random() < 0.05:
            payload = payload[:rng.randrange(len(payload))]
        sent = self._make(REGISTER, flags, rng.choice((0, 0, 0, rng.getrandbits(32))),
                          0 if rng.random() < 0.9 else rng.randrange(4), 0, payload,
                          flags2=self._flags2())
        sent.target = self.by_name.get(name)
        return sent

    # ---- connection-ending tails ----

    def _bad_hello(self, sock: socket.socket) -> bool:
        """A refused HELLO. True when the connection stays open (a bad job name)."""
        rng = self.rng
        r = rng.random()
        if r < 0.4:
            s = self._make(HELLO, 0, 0, 0, 0, fr.hello_payload(b"worker"), kind="hello")
            version = rng.choice([v for v in (0, 1, 2, 3, 4, 5, 0xFFFF) if v != VERSION])
            s.data = s.data[:4] + struct.pack("<H", version) + s.data[6:]
            self._count(s)
            self._expect_close(sock, [s], FAILED_PRECONDITION, "hello-version")
            return False
        if r < 0.55:  # version 6: it means to reach another task: refused, then closed
            expect_job, expect_task = rng.choice(((PS_JOB, 1), (PS_JOB, rng.getrandbits(32) | 1),
                                                  (b"worker", PS_TASK), (b"chief", 0)))
            s = self._make(HELLO, 0, 0, 0, 0,
                           fr.hello_payload(b"worker", expect_job, expect_task), kind="hello")
            self._count(s)
            self._expect_close(sock, [s], FAILED_PRECONDITION, "hello-identity")
            return False
        if r < 0.8:
            payload = fr.hello_payload(rng.choice(self.NOT_UTF8))
        else:
            payload = b"w" * rng.choice((257, 1000, MAX_HELLO_PAYLOAD + 1))
        s = self._make(HELLO, 0, 0, 0, 0, payload, kind="hello")
        s.expect = INVALID_ARGUMENT
        return self._batch(sock, [s]) is not None

    def _tail(self, sock: socket.socket, hello_done: bool) -> None:
        rng = self.rng
        if self.sweep_tails:
            what, v = self.sweep_tails.popleft()
            s = self._clean_for_tail()
            h = list(HEADER.unpack_from(s.data))
            if what == "op":
                h[2] = v
            else:
                h[3] = v
            self._send_header_tail(sock, s, h, hello_done, f"sweep-{what}")
            return
        if not hello_done and rng.random() < 0.5:
            s = self._clean_for_tail()
            while s.op == HELLO:
                s = self._clean_for_tail()
            self._count(s)
            self._expect_close(sock, [s], FAILED_PRECONDITION, "first-not-hello")
            return
        r = rng.random()
        if r < 0.30:
            s = self._clean_for_tail()
            h = list(HEADER.unpack_from(s.data))
            for _ in range(1 if rng.random() < 0.8 else 2):
                self._corrupt(h)
            self._send_header_tail(sock, s, h, hello_done, "bad-header")
        elif r < 0.40:
            s = self._clean_for_tail()
            s.data = s.data[:rng.randrange(1, HSIZE)]
            self._count(s)
            self._expect_close(sock, [s], None, "truncated-header")
        elif r < 0.55:
            s = self._clean_for_tail(with_payload=True)
            if len(s.data) > HSIZE:
                s.data = s.data[:rng.randrange(HSIZE, len(s.data))]
            else:  # announce more than is sent
                h = list(HEADER.unpack_from(s.data))
                h[10] = rng.randrange(1, self.max_payload + 1)
                s.data = HEADER.pack(*h) + rng.randbytes(rng.randrange(h[10]) % 512)
            self._count(s)
            status = header_error(HEADER.unpack_from(s.data), self.max_payload, hello_done)
            self._expect_close(sock, [s], status, "truncated-payload")
        elif r < 0.70:
            s = self._clean_for_tail(with_payload=rng.random() < 0.7)
            h = list(HEADER.unpack_from(s.data))
            plen = h[10]
            h[10] = rng.choice((plen + 1, max(plen - 1, 0), plen + HSIZE, plen + 8,
                                rng.randrange(self.max_payload + 1), 0))
            s.data = HEADER.pack(*h) + s.data[HSIZE:]
            s.var = None
            s.expect = None
            rest = [self._clean() for _ in range(rng.randrange(0, 5))]
            for x in [s, *rest]:
                self._count(x)
            self._expect_close(sock, [s, *rest], None, "lying-length", any_reply=True)
            self._untracked_writes([s, *rest])
        elif r < 0.82:
            data = rng.randbytes(rng.randrange(1, 400))
            self._record(data)
            status = header_error(HEADER.unpack_from(data), self.max_payload, hello_done) if (
                len(data) >= HSIZE) else None
            self._expect_close(sock, [], status, "random-bytes", data=data,
                               any_reply=len(data) >= HSIZE and status is None)
        elif r < 0.92:  # the documented magic and version, then random bytes
            h = list(HEADER.unpack_from(struct.pack("<IH", MAGIC, VERSION)
                                        + rng.randbytes(HSIZE - 6)))
            if rng.random() < 0.7:
                h[2] = rng.randrange(1, MAX_OP + 1)
            if rng.random() < 0.7:
                h[6], h[7], h[9], h[15] = h[6] % 4, 0, 0, 0
            body = rng.randbytes(rng.randrange(0, 64))
            if rng.random() < 0.6:
                h[10] = len(body)
            if h[3] & WAIT:
                h[13] = 1e-4
            data = HEADER.pack(*h) + body
            self._record(data)
            status = header_error(h, self.max_payload, hello_done)
            self._expect_close(sock, [], status, "random-header", data=data,
                               any_reply=status is None)
            if status is None and (h[2] in WRITE_OPS or h[2] == PULL):
                self.touched.add(h[5])
        else:  # a clean frame answered, then a refused op code
            s = self._clean_for_tail()
            h = list(HEADER.unpack_from(s.data))
            h[2] = rng.choice((0, MAX_OP + 1, 255, rng.randrange(MAX_OP + 1, 256)))
            self._send_header_tail(sock, s, h, hello_done, "bad-op")

    def _clean_for_tail(self, with_payload: bool = False) -> Sent:
        for _ in range(20):
            s = self._clean()
            if not with_payload or s.plen:
                return s
        return s

    def _corrupt(self, h: list[Any]) -> None:
        rng = self.rng
        k = rng.randrange(9)
        if k == 0:
            h[0] = rng.choice((0, 0x50535254, MAGIC ^ (1 << rng.randrange(32)),
                               rng.getrandbits(32)))
        elif k == 1:
            h[1] = rng.choice((0, VERSION - 1, VERSION + 1, 0xFFFF, rng.getrandbits(16)))
        elif k == 2:
            h[2] = rng.choice((0, MAX_OP + 1, 255, rng.randrange(MAX_OP + 1, 256)))
        elif k == 3:
            h[6] = rng.randrange(4, 256)
        elif k == 4:
            h[7] = rng.randrange(1, 256)
        elif k == 5:
            h[9] = rng.randrange(1, 256)
        elif k == 6:
            h[15] = rng.choice((1, 1 << 31, rng.randrange(1, 1 << 32)))
        elif k == 7:
            h[10] = rng.choice((self.max_payload + 1, 1 << 63, MASK64,
                                rng.randrange(self.max_payload + 1, 1 << 64)))
        else:
            h[3] |= REPLY

    def _send_header_tail(self, sock: socket.socket, s: Sent, h: list[Any], hello_done: bool,
                          kind: str) -> None:
        s.data = HEADER.pack(*h) + s.data[HSIZE:]
        s.op, s.flags, s.dtype, s.slot = h[2], h[3], h[6], h[8]
        status = header_error(h, self.max_payload, hello_done)
        self._count(s)
        if status is None:  # two corruptions that cancel out (a valid frame after all)
            self._expect_close(sock, [s], None, kind, any_reply=True)
            self._untracked_writes([s])
            return
        self._expect_close(sock, [s], status, kind)


# ---- reduction of a crash to a minimal frame sequence ----------------------------------------

def _replay(ps: FuzzPs, connections: Sequence[Sequence[bytes]]) -> bool:
    """Sends each connection's frames, ends its stream and reads to the end, one connection
    after the other. True when the ps task died."""
    host, port = ps.address.rsplit(":", 1)
    for frames in connections:
        if not ps.alive():
            return True
        try:
            sock = socket.create_connection((host, int(port)), timeout=5.0)
        except OSError:
            return ps.dead()
        try:
            sock.setblocking(False)
            exchange(sock, b"".join(frames), None, 5.0, finish=True)
        finally:
            sock.close()
    return ps.dead()


class Reducer:
    """Replays a crashed run on fresh ps tasks (the same variables with the same values) and
    shrinks it to the fewest frames that still kill a task: the frame that was unanswered when
    the task died, after as few of the frames before it as the crash needs (ddmin).

    Args:
        setup: Registers the variables on a new ps task's address.
        max_payload: The limit the fuzzed task had.
        seconds: Time for the search; past it the smallest sequence found so far is kept.
    """

    HELLO_FRAME = fr.frame(HELLO, b"worker")

    def __init__(self, setup: Callable[[str], None], max_payload: int,
                 seconds: float = 120.0) -> None:
        self.setup, self.max_payload = setup, max_payload
        self.deadline = time.monotonic() + seconds
        self.trials = 0
        self.last_stderr = ""
        self.last_exit = ""

    def crashes(self, connections: Sequence[Sequence[bytes]]) -> bool:
        """Whether `connections`, replayed on a fresh task, kill it."""
        self.trials += 1
        ps = FuzzPs(self.max_payload)
        try:
            self.setup(ps.address)
            died = _replay(ps, connections)
            if died:
                self.last_stderr, self.last_exit = ps.stderr(), ps.exit_description()
            return died
        finally:
            ps.stop()

    def reduce(self, history: Sequence[Sequence[bytes]],
               culprit: tuple[int, int] | None) -> list[list[bytes]] | None:
        """The connections (each a list of frames) of a minimal crash, or None if the crash does
        not replay."""
        history = [list(c) for c in history if c]
        if not history:
            return None
        if culprit is None:
            culprit = (len(history) - 1, len(history[-1]) - 1)
        ci, fi = culprit
        killer = history[ci][fi]
        alone = [[self.HELLO_FRAME, killer]]
        if self.crashes(alone):
            return alone
        # Items: every frame before the killer but each connection's first (its HELLO, or the
        # frame that replaced it), which stays with the connection.
        items = [(c, f) for c in range(ci + 1) for f in range(1, len(history[c]))
                 if (c, f) < (ci, fi)]

        def build(keep: Sequence[tuple[int, int]]) -> list[list[bytes]]:
            by_conn: dict[int, list[bytes]] = {}
            for c, f in keep:
                by_conn.setdefault(c, []).append(history[c][f])
            conns = [[history[c][0], *by_conn[c]] for c in sorted(by_conn) if c != ci]
            return conns + [[history[ci][0], *by_conn.get(ci, []), killer]]

        if not self.crashes(build(items)):
            return None
        # Frames naming the killer's variable (and every REGISTER) first: often all it needs.
        vid = killer[16:20] if len(killer) >= HSIZE else b""
        named = [(c, f) for c, f in items if len(history[c][f]) >= HSIZE
                 and (history[c][f][16:20] == vid or history[c][f][6] == REGISTER)]
        if len(named) < len(items) and self.crashes(build(named)):
            items = named
        items = self._ddmin(items, lambda keep: self.crashes(build(keep)))
        return build(items)

    def _ddmin(self, items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
        n = 2
        while len(items) >= 2 and time.monotonic() < self.deadline:
            chunk = math.ceil(len(items) / n)
            parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
            for i in range(len(parts)):
                if time.monotonic() >= self.deadline:
                    return items
                rest = [x for j, part in enumerate(parts) if j != i for x in part]
                if fails(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), 2 * n)
        if len(items) == 1 and fails([]):
            return []
        return items


def format_repro(connections: Sequence[Sequence[bytes]]) -> str:
    lines = []
    for i, conn in enumerate(connections):
        lines.append(f"  connection {i + 1}:")
        for f in conn:
            lines.append(f"    {describe(f)}")
            lines.append(f"      hex: {f[:HSIZE + 256].hex()}" + ("..." if len(f) > HSIZE + 256
                                                                  else ""))
    return "\n".join(lines)


# ---- the ps task process ------------------------------------------------------------------------

def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-payload", type=int, required=True)
    parser.add_argument("--replication", action="store_true")
    args = parser.parse_args()

    from psrt import _core

    server = _core.Server("127.0.0.1", 0, "ps", 0, args.max_payload)
    server.set_replication(args.replication)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    lock = threading.Lock()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "stats":
                with lock:
                    out = {"connections": server.num_connections(),
                           "variables": server.num_variables(),
                           "done_workers": len(server.done_workers())}
                print(json.dumps(out), flush=True)
        stop.set()

    threading.Thread(target=commands, daemon=True).start()
    print(server.port, flush=True)
    # As psrt.Server.join does: state a peer left that Python cannot read ends this process.
    while not stop.is_set():
        server.wait(0.05)
        with lock:
            server.done_workers()
            server.num_connections()
    server.stop()


if __name__ == "__main__":
    main()
