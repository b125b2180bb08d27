"""Job authentication (csrc/auth.cc, docs/protocol.md "Authentication"): SHA-256 and HMAC-SHA256
against their published test vectors, then the challenge-response between real processes.

A ps task with the job's secret (tests/_ps_task.py, in a subprocess on a port the OS picks)
serves only peers that answer its challenge: a worker with the same secret trains normally; a
peer with no secret or a wrong one, or one that replays another connection's answer, can read
nothing, write nothing and end nothing, and the ps task reports its address.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import socket
import struct
import time

import numpy as np
import pytest

import _frames as fr
from _ps_task import PsProcess
from psrt import _core, errors

SECRET = b"correct horse battery staple"


# ---- SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 4231) ------------------------------------

# FIPS 180-4 / the NIST examples: one block, two blocks, a million 'a', and the empty message.
SHA256_VECTORS = [
    (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    (b"a" * 1_000_000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
    (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
]

# RFC 4231 section 4, test cases 1-7 (case 5 compares the first 128 bits only).
HMAC_VECTORS = [
    (b"\x0b" * 20, b"Hi There",
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe", b"what do ya want for nothing?",
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    (b"\xaa" * 20, b"\xdd" * 50,
     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
    (bytes(range(1, 26)), b"\xcd" * 50,
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
    (b"\x0c" * 20, b"Test With Truncation", "a3b6167473100ee06e0c796c2955552b"),
    (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    (b"\xaa" * 131, b"This is a test using a larger than block-size key and a larger than "
     b"block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
]


@pytest.mark.parametrize("message,digest", SHA256_VECTORS, ids=["abc", "448-bit", "1M a", "empty"])
def test_sha256_fips_180_4_vectors(message, digest):
    assert _core.sha256(message).hex() == digest


@pytest.mark.parametrize("key,message,mac", HMAC_VECTORS, ids=[f"case {i}" for i in range(1, 8)])
def test_hmac_sha256_rfc_4231_vectors(key, message, mac):
    assert _core.hmac_sha256(key, message).hex()[:len(mac)] == mac


def test_sha256_and_hmac_match_hashlib_at_every_length_around_the_block():
    # Padding is where SHA-256 implementations break: every length across two blocks, and
    # keys shorter than, equal to and longer than the 64-byte block.
    rng = np.random.default_rng(7)
    for n in range(0, 200):
        data = rng.bytes(n)
        assert _core.sha256(data) == hashlib.sha256(data).digest(), n
        key = rng.bytes(n % 130)
        assert _core.hmac_sha256(key, data) == hmac.new(key, data, hashlib.sha256).digest(), n


# ---- The handshake between processes ----------------------------------------------------

def worker_proof(secret, server_nonce, client_nonce, job: bytes, task: int) -> bytes:
    """The AUTH proof as docs/protocol.md defines it, written from the document."""
    msg = b"psrt-auth-v1 worker" + server_nonce + client_nonce + job + struct.pack("<I", task)
    return hmac.new(secret, msg, hashlib.sha256).digest()


def server_proof(secret, server_nonce, client_nonce) -> bytes:
    return hmac.new(secret, b"psrt-auth-v1 ps" + server_nonce + client_nonce,
                    hashlib.sha256).digest()


@pytest.fixture(scope="module")
def ps():
    proc = PsProcess(secret=SECRET, hello_timeout=1.0)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def worker(ps):
    """A worker with the secret that registered W (float32[4], Adagrad) and the global step."""
    c = _core.Client("worker", 0, SECRET)
    c.timeout = 10.0
    c.connect(0, ps.address, 10.0)
    (w, _), (gs, _) = c.register([
        (0, "W", "float32", [4], "Adagrad", {"learning_rate": 0.1, "slot_init": 0.1},
         np.arange(4, dtype=np.float32)),
        (0, "global_step", "int64", [], "", {}, np.array(0, np.int64)),
    ])
    yield c, w, gs
    c.close()


def state(worker):
    c, w, gs = worker
    out = np.empty(4, np.float32)
    c.pull([w], [out])
    return out.tobytes(), c.step_read(gs), sorted(v["name"] for v in c.list_variables(0))


@pytest.fixture
def raw(ps):
    """Raw sockets to the ps, closed at teardown."""
    socks = []

    def connect():
        host, port = ps.address.rsplit(":", 1)
        socks.append(socket.create_connection((host, int(port)), timeout=5))
        return socks[-1]

    yield connect
    for s in socks:
        s.close()


def hello(sock, job=b"worker", task=0):
    sock.sendall(fr.frame(fr.HELLO, fr.hello_payload(job), var_id=task))
    got = fr.read_frame(sock)
    assert got is not None
    return got


def test_worker_with_the_secret_trains(worker):
    c, w, gs = worker
    before = np.frombuffer(state(worker)[0], np.float32).copy()
    c.push([w], [np.ones(4, np.float32)], step_handle=gs)
    after = np.frombuffer(state(worker)[0], np.float32)
    np.testing.assert_allclose(after, before - 0.1 / np.sqrt(1.1), rtol=1e-6)


def test_hello_reply_is_a_challenge_with_a_fresh_nonce(raw):
    nonces = set()
    for _ in range(3):
        h, payload = hello(raw())
        assert h["status"] == fr.OK and h["flags"] & fr.F_INIT  # AUTH_REQUIRED
        assert h["count"] == 32 and payload[32:] == b"ps"
        nonces.add(payload[:32])
    assert len(nonces) == 3


@pytest.mark.parametrize("secret", [None, b"wrong secret"], ids=["no secret", "wrong secret"])
def test_worker_without_the_right_secret_is_refused(ps, worker, secret):
    before = state(worker)
    c = _core.Client("worker", 1, secret or b"")
    with pytest.raises(errors.UnauthenticatedError) as e:
        c.connect(0, ps.address, 5.0)
    assert "/job:ps/task:0" in e.value.message
    assert ("PSRT_AUTH_SECRET" if secret is None else "secret") in e.value.message
    assert state(worker) == before


def test_failed_authentication_is_logged_with_the_peer_address(ps, raw):
    sock = raw()
    h, payload = hello(sock, b"intruder", 3)
    local = "%s:%d" % sock.getsockname()
    sock.sendall(fr.frame(fr.AUTH, os.urandom(32) + os.urandom(32)))
    h, msg = fr.read_frame(sock)
    assert h["status"] == 16 and b"authentication failed" in msg
    assert fr.is_closed(sock)
    deadline = time.monotonic() + 5
    while not any(local in e and "authentication failed" in e for e in ps.events()):
        assert time.monotonic() < deadline, ps.events()
        time.sleep(0.05)


WRITES = [
    ("list", lambda ids: fr.frame(fr.LIST)),
    ("pull", lambda ids: fr.frame(fr.PULL, var_id=1)),
    ("assign NaN", lambda ids: fr.frame(fr.ASSIGN, np.full(4, np.nan, np.float32).tobytes(),
                                        var_id=1, dtype=fr.FLOAT32)),
    ("global step 1e9", lambda ids: fr.frame(fr.STEP_INCREMENT, var_id=2, step=10**9)),
    ("register a squatter", lambda ids: fr.frame(
        fr.REGISTER, fr.var_spec(b"X", 1, (), 1, learning_rate=0.1))),
    ("worker done", lambda ids: fr.frame(fr.WORKER_DONE, b"worker", var_id=0)),
]


@pytest.mark.parametrize("make", [w[1] for w in WRITES], ids=[w[0] for w in WRITES])
def test_unauthenticated_peer_can_neither_read_nor_write(ps, worker, raw, make):
    before = state(worker)
    sock = raw()
    hello(sock)
    sock.sendall(make(None))
    got = fr.read_frame(sock)
    assert got is not None
    h, msg = got
    assert h["status"] == 16 and b"requires authentication" in msg, (h, msg)
    assert fr.is_closed(sock)
    assert state(worker) == before


def test_a_replayed_answer_does_not_authenticate(ps, worker, raw):
    # An honest handshake, written from the protocol document, then its AUTH frame replayed on
    # a new connection: the challenge differs, so the proof is refused.
    sock = raw()
    _, payload = hello(sock)
    client_nonce = os.urandom(32)
    proof = worker_proof(SECRET, payload[:32], client_nonce, b"worker", 0)
    auth = fr.frame(fr.AUTH, client_nonce + proof)
    sock.sendall(auth)
    h, back = fr.read_frame(sock)
    assert h["status"] == fr.OK and back == server_proof(SECRET, payload[:32], client_nonce)
    sock.sendall(fr.frame(fr.PING, request_id=5))
    assert fr.read_frame(sock)[0]["status"] == fr.OK
    again = raw()
    hello(again)
    again.sendall(auth)
    assert fr.read_frame(again)[0]["status"] == 16
    assert fr.is_closed(again)


def test_peer_that_never_answers_the_challenge_is_closed(ps, raw):
    sock = raw()
    hello(sock)
    t0 = time.monotonic()
    assert fr.is_closed(sock)  # hello_timeout 1 s
    assert time.monotonic() - t0 < 5


def test_worker_with_a_secret_refuses_a_ps_without_one():
    proc = PsProcess()
    try:
        c = _core.Client("worker", 0, SECRET)
        with pytest.raises(errors.UnauthenticatedError) as e:
            c.connect(0, proc.address, 5.0)
        assert "does not ask for authentication" in e.value.message
    finally:
        proc.stop()


def test_no_secret_on_either_side_is_unchanged():
    with contextlib.ExitStack() as stack:
        proc = PsProcess()
        stack.callback(proc.stop)
        c = _core.Client("worker", 0)
        c.connect(0, proc.address, 5.0)
        stack.callback(c.close)
        [(h, _)] = c.register([(0, "v", "float32", [2], "GradientDescent",
                                {"learning_rate": 1.0}, np.ones(2, np.float32))])
        c.push([h], [np.ones(2, np.float32)])
        out = np.empty(2, np.float32)
        c.pull([h], [out])
        assert out.tolist() == [0.0, 0.0]


# ---- A whole job with a secret, and an intruder -------------------------------------------

@pytest.mark.slow
def test_job_with_a_secret_trains_while_an_intruder_gets_nowhere(tmp_path):
    # The ps tasks end when every worker is done (as under psrt-launch): before authentication
    # two forged WORKER_DONE frames made one exit mid-training. Here the intruder, without the
    # secret and with a wrong one, reads nothing, writes nothing and ends nothing; the real
    # worker trains to its last step and the ps tasks exit 0 after it.
    from _mts_cluster import Tasks, ps_ports

    env = {"PSRT_AUTH_SECRET": "job-secret-" + os.urandom(8).hex()}
    tasks = Tasks(str(tmp_path))
    try:
        ps = tasks.ps(2, workers=1, exit_when_workers_done=[True, True], env=[env, env])
        cfg = {"cluster": {"ps": [f"127.0.0.1:{p}" for p in ps_ports(ps)],
                           "worker": ["127.0.0.1:0"]},
               "task_index": 0, "last_step": 300, "step_sleep": 0.01, "init_seed": 3}
        worker = tasks.start("chief", "worker", cfg, env=env)
        worker.expect("first_step", timeout=30)
        for port in ps_ports(ps):
            for secret in (b"", b"guess"):
                c = _core.Client("worker", 0, secret)
                with pytest.raises(errors.UnauthenticatedError):
                    c.connect(0, f"127.0.0.1:{port}", 5.0)
            for _ in range(2):
                with contextlib.closing(socket.create_connection(("127.0.0.1", port))) as s:
                    hello(s)
                    s.sendall(fr.frame(fr.WORKER_DONE, b"worker", var_id=0))
                    assert fr.read_frame(s)[0]["status"] == 16
        time.sleep(0.5)
        assert all(p.proc.poll() is None for p in ps), "a forged WORKER_DONE ended a ps task"
        assert worker.expect("done", timeout=60)["last"] >= 300
        worker.expect_exit(0)
        for p in ps:
            p.expect_exit(0, timeout=15)
    finally:
        tasks.reap_all()
