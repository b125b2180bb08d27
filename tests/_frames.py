"""Raw psrt frames for tests: the 64-byte header of docs/protocol.md, packed with ``struct``.

Deliberately independent of the C++ encoder (csrc/wire.h), so a test that passes here checks
the documented byte layout, not the code against itself.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from typing import Any

MAGIC = 0x54525350  # b"PSRT"
VERSION = 7
HEADER = struct.Struct("<IHBBQIBBBBQqddII")
assert HEADER.size == 64
FIELDS = ("magic", "version", "op", "flags", "request_id", "var_id", "dtype", "status", "slot",
          "flags2", "payload_len", "step", "arg0", "arg1", "count", "reserved2")

HELLO, REGISTER, PULL, PUSH, ASSIGN, ASSIGN_ADD = 1, 2, 3, 4, 5, 6
STEP_READ, STEP_INCREMENT, IS_INITIALIZED, LIST, PING, WORKER_DONE, AUTH = 7, 8, 9, 10, 11, 12, 13
TABLE_EXPORT, TABLE_IMPORT, TABLE_EVICT, CLUSTER_INFO = 14, 15, 16, 17  # version 5
REPLICA_READ, REPLICA_INSTALL = 18, 19  # version 7
MAX_OP = REPLICA_INSTALL

F_REPLY, F_SPARSE, F_INIT, F_INITIALIZED = 1, 2, 4, 8
F_HAS_LR, F_RETURN_VALUE, F_STEP_TAGGED, F_WAIT_STEP = 16, 32, 64, 128
F_ATOMIC = 8  # version 6: PUSH, applied only once all of it arrived (bit 3, as INITIALIZED)
# Version 7: header byte 23, flags2 (docs/protocol.md, "Flags2").
F2_SEQUENCED, F2_DUPLICATE, F2_AWAITING, F2_STALE = 1, 2, 4, 8
ANY_TASK = 0xFFFF_FFFF

FLOAT32, FLOAT64, INT64 = 1, 2, 3

OK, INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED = 0, 3, 5, 8
FAILED_PRECONDITION, UNIMPLEMENTED = 9, 12


def header(op: int, payload_len: int = 0, **fields: Any) -> bytes:
    """Packs a header; every field not given is the valid default (magic, this version, zeros)."""
    values = dict.fromkeys(FIELDS, 0)
    values.update(magic=MAGIC, version=VERSION, op=op, payload_len=payload_len,
                  arg0=0.0, arg1=0.0)
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"unknown header fields {sorted(unknown)}")
    values.update(fields)
    return HEADER.pack(*(values[f] for f in FIELDS))


def frame(op: int, payload: bytes = b"", **fields: Any) -> bytes:
    """A whole frame whose payload_len is the payload's length unless given."""
    fields.setdefault("payload_len", len(payload))
    return header(op, **fields) + payload


def var_spec(name: bytes | str, dtype: int, shape: Sequence[int] = (), optimizer: int = 0, *,
             use_locking: int = 0, use_nesterov: int = 0, learning_rate: float = 0.0,
             momentum: float = 0.0, beta1: float = 0.9, beta2: float = 0.999,
             epsilon: float = 1e-8, slot_init: float = 0.0, replicas_to_aggregate: int = 0,
             total_num_replicas: int = 0, rank: int | None = None,
             name_len: int | None = None, rho: float = 0.0, l1: float = 0.0, l2: float = 0.0,
             l2_shrinkage: float = 0.0, lr_power: float = -0.5, slot_init2: float = 0.0,
             slot_init3: float = 0.0, init_kind: int = 0, init_a: float = 0.0,
             init_b: float = 0.0, fan_mode: int = 0, distribution: int = 0, seed: int = 0,
             offset: int = 0, full_shape: Sequence[int] = (), table: int = 0,
             max_rows: int = 0) -> bytes:
    """A REGISTER payload (VarSpec), field by field in the order docs/protocol.md lists them.

    Any value the layout can carry is packed, valid or not: `name` may be bytes that are not
    UTF-8, dims wrap to 64 bits, and `rank`/`name_len` override the rank byte and the name's
    length field so a spec can lie about what follows.
    """
    raw = name.encode() if isinstance(name, str) else name
    dims = b"".join(struct.pack("<Q", d & 0xFFFF_FFFF_FFFF_FFFF) for d in shape)
    return (struct.pack("<H", len(raw) if name_len is None else name_len) + raw
            + struct.pack("<BB", dtype, len(shape) if rank is None else rank) + dims
            + struct.pack("<BBB6dII", optimizer, use_locking, use_nesterov, learning_rate,
                          momentum, beta1, beta2, epsilon, slot_init, replicas_to_aggregate,
                          total_num_replicas)
            + struct.pack("<7d", rho, l1, l2, l2_shrinkage, lr_power, slot_init2, slot_init3)
            + struct.pack("<BddBBQQB", init_kind, init_a, init_b, fan_mode, distribution,
                          seed & 0xFFFF_FFFF_FFFF_FFFF, offset & 0xFFFF_FFFF_FFFF_FFFF,
                          len(full_shape))
            + b"".join(struct.pack("<q", d) for d in full_shape)
            + struct.pack("<BQ", table, max_rows & 0xFFFF_FFFF_FFFF_FFFF))  # version 5


def decode(raw: bytes) -> dict[str, Any]:
    return dict(zip(FIELDS, HEADER.unpack(raw)))


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """n bytes, or None when the peer closed (or reset) the connection first."""
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> tuple[dict[str, Any], bytes] | None:
    """The next frame (header dict, payload), or None when the connection closed first."""
    raw = recv_exact(sock, HEADER.size)
    if raw is None:
        return None
    h = decode(raw)
    payload = recv_exact(sock, h["payload_len"]) if h["payload_len"] else b""
    if payload is None:
        return None
    return h, payload


def is_closed(sock: socket.socket) -> bool:
    """True when the peer has closed: reads return EOF (or a reset) and carry no data."""
    try:
        data = sock.recv(1)
    except ConnectionResetError:
        return True
    return data == b""


def _string(s: bytes | str) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<H", len(b)) + b


def hello_payload(job: bytes | str = b"worker", expect_job: bytes | str = b"",
                  expect_task: int = ANY_TASK,
                  jobs: Sequence[tuple[bytes | str, int]] = (), client_id: int = 0) -> bytes:
    """The version-7 HELLO payload (docs/protocol.md, HELLO): the sender's job, the job and
    task it means to reach (empty: any), (job, digest) pairs of its cluster, then its client
    id (0: none; the key of its SEQUENCED requests' marks)."""
    return (_string(job) + _string(expect_job) + struct.pack("<IB", expect_task, len(jobs))
            + b"".join(_string(j) + struct.pack("<Q", d) for j, d in jobs)
            + struct.pack("<Q", client_id))


def hello_frame(job: bytes = b"worker", task: int = 0, client_id: int = 0,
                **fields: Any) -> bytes:
    """A whole HELLO frame of /job:JOB/task:TASK, expecting no particular ps task (fields
    override the header's)."""
    return frame(HELLO, hello_payload(job, client_id=client_id), var_id=task, **fields)


def hello(sock: socket.socket, job: bytes = b"worker", task: int = 0,
          client_id: int = 0) -> dict[str, Any]:
    """Sends HELLO and returns the reply header (asserting it is OK)."""
    sock.sendall(hello_frame(job, task, client_id))
    got = read_frame(sock)
    assert got is not None, "connection closed during HELLO"
    h, _ = got
    assert h["status"] == OK and h["flags"] & F_REPLY, h
    return h


def connect(address: str, timeout: float = 5.0, say_hello: bool = True,
            client_id: int = 0) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if say_hello:
        hello(sock, client_id=client_id)
    return sock


def reply_frame(request: dict[str, Any], payload: bytes = b"", status: int = OK,
                **fields: Any) -> bytes:
    """A reply to a decoded request, as a (fake) ps task sends it."""
    fields.setdefault("flags", F_REPLY)
    return frame(request["op"], payload, request_id=request["request_id"], status=status,
                 dtype=request["dtype"], slot=request["slot"], **fields)
