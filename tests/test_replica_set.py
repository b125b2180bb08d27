"""Replica groups in the worker's client (csrc/replica_set.h; issue 23, wire version 7).

With ``set_replicas`` a shard's variables live on two ps tasks: mutations go to both with one
SEQUENCED request id, reads to the first whole one. Checked here against fake ps tasks that
record every frame (the ids, the flags, the HELLO's client id: what the wire carries), and
against real ps processes killed with SIGKILL and restarted at their port (failover, reads
on the backup, reconnect and re-registration, promotion, the second failure's error). A
restarted ps task here copies nothing (that is the ps side's copier): the test restores the
values itself, as the copier's REPLICA_INSTALL would.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

import _frames as fr
from _ps_task import PsProcess
from psrt import _core, errors

LR = 0.5  # GradientDescent steps of 0.5 on float32 zeros stay exact


class FakePs:
    """A ps task that answers HELLO, REGISTER, PUSH, PULL, STEP_INCREMENT, IS_INITIALIZED and
    PING like the real one and records every request frame as (channel, header dict,
    payload): channel 0 the request connection, 1 the heartbeat one (the HELLO's count). A
    PULL of a scalar float64 gives task + 1 (which replica answered). With ``awaiting`` it holds
    no copy (wire version 7): reads are answered OK + AWAITING, without a value; with
    ``refuse_pushes`` a PUSH is answered INVALID_ARGUMENT."""

    def __init__(self, task: int, incarnation: int = 1000) -> None:
        self.task = task
        self.incarnation = incarnation
        self.frames: list[tuple[int, dict[str, Any], bytes]] = []
        self.out_of_order = False  # reply to the next PULL with a wrong request id
        self.awaiting = False
        self.refuse_pushes = False
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        channel = 0
        while True:
            try:
                got = fr.read_frame(sock)
            except OSError:
                return
            if got is None:
                return
            h, payload = got
            if h["op"] == fr.HELLO:
                channel = h["count"]
            with self._lock:
                self.frames.append((channel, h, payload))
            op, reply, status = h["op"], b"", fr.OK
            fields: dict[str, Any] = {}
            if op == fr.HELLO:
                fields = {"var_id": self.task, "step": self.incarnation}
                reply = b"ps"
            elif op == fr.REGISTER:
                fields = {"var_id": 7, "flags": fr.F_REPLY | fr.F_INITIALIZED}
            elif op == fr.PULL and self.awaiting:
                fields = {"flags2": fr.F2_AWAITING}
            elif op == fr.PULL:
                reply = struct.pack("<d", self.task + 1.0)
                if self.out_of_order:
                    h = dict(h, request_id=h["request_id"] + 1)
            elif op == fr.PUSH and self.refuse_pushes:
                status, reply = fr.INVALID_ARGUMENT, b"refused on purpose"
            elif op == fr.STEP_INCREMENT:
                fields = {"step": 3}
            elif op == fr.IS_INITIALIZED:
                fields = ({"flags2": fr.F2_AWAITING} if self.awaiting
                          else {"flags": fr.F_REPLY | fr.F_INITIALIZED})
            try:
                sock.sendall(fr.reply_frame(h, reply, status, **fields))
            except OSError:
                return

    def requests(self, op: int | None = None) -> list[dict[str, Any]]:
        """The request connection's frames of `op` (None: every one but HELLO), in order."""
        with self._lock:
            return [h for c, h, _ in self.frames
                    if c == 0 and (h["op"] == op or (op is None and h["op"] != fr.HELLO))]

    def drop(self) -> None:
        """Closes every connection (a lost network path); the port keeps listening."""
        for s in self._socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._socks.clear()

    def close(self) -> None:
        self._listener.close()
        self.drop()


@pytest.fixture
def fakes():
    made = [FakePs(0, 1000), FakePs(1, 2000)]
    yield made
    for f in made:
        f.close()


def _register_pair(client: Any, shard: int) -> int:
    [(handle, _)] = client.register([(shard, f"v{shard}", "float64", [], "GradientDescent",
                                      {"learning_rate": LR}, np.zeros((), np.float64))])
    return handle


def test_hello_client_id_and_sequenced_ids_from_one_counter(fakes):
    """Every HELLO of one client carries its random non-zero client_id (two clients differ);
    a mutation goes to both replicas with the same id and SEQUENCED; a read only to the
    primary; the ids are increasing on each connection, from one counter over all of them."""
    client = _core.Client("worker", 0, heartbeat_timeout=30.0)
    other = _core.Client("worker", 0)
    assert client.client_id != 0 and other.client_id != 0
    assert client.client_id != other.client_id
    for i, f in enumerate(fakes):
        client.connect(i, f.address, 5.0)
    # Request and heartbeat connections alike: the client id ends the HelloRecord.
    for f in fakes:
        hellos = [p for _, h, p in f.frames if h["op"] == fr.HELLO]
        assert len(hellos) == 2
        assert {struct.unpack("<Q", p[-8:])[0] for p in hellos} == {client.client_id}
    client.set_replicas(0, [0, 1])
    v = _register_pair(client, 0)
    [register0], [register1] = fakes[0].requests(fr.REGISTER), fakes[1].requests(fr.REGISTER)
    # REGISTER with INIT is a mutation: the same id, SEQUENCED, on both.
    assert register0["request_id"] == register1["request_id"]
    assert register0["flags2"] == register1["flags2"] == fr.F2_SEQUENCED
    client.push([v], [np.ones((), np.float64)])
    client.push([v], [np.ones((), np.float64)])
    out = np.empty((), np.float64)
    client.pull([v], [out])
    pushes = [f.requests(fr.PUSH) for f in fakes]
    assert [h["request_id"] for h in pushes[0]] == [h["request_id"] for h in pushes[1]]
    assert all(h["flags2"] == fr.F2_SEQUENCED for p in pushes for h in p)
    # Reads go to the primary only, never SEQUENCED.
    [pull] = fakes[0].requests(fr.PULL)
    assert fakes[1].requests(fr.PULL) == [] and pull["flags2"] == 0
    ids0 = [h["request_id"] for h in fakes[0].requests()]
    ids1 = [h["request_id"] for h in fakes[1].requests()]
    assert len(ids0) == 4 and ids0 == sorted(set(ids0))
    assert ids1 == ids0[:-1]  # all but the primary's PULL
    # A plain (unreplicated) call on shard 1 takes the next id of the same counter.
    client.ping([1])
    assert fakes[1].requests()[-1]["request_id"] == ids0[-1] + 1
    client.close()


def test_reply_is_checked_against_the_id_sent_for_its_call(fakes):
    client = _core.Client("worker", 0)
    client.connect(0, fakes[0].address, 5.0)
    [(v, _)] = client.register([(0, "w", "float64", [], "", {}, None)])
    fakes[0].out_of_order = True
    with pytest.raises(errors.InternalError, match=r"reply out of order .*request id (\d+), "
                                                   r"expected \d+"):
        client.pull([v], [np.empty((), np.float64)])
    client.close()


def test_set_replicas_refuses_bad_lists_and_late_calls(fakes):
    client = _core.Client("worker", 0)
    for i, f in enumerate(fakes):
        client.connect(i, f.address, 5.0)
    with pytest.raises(errors.InvalidArgumentError, match=r"start with the shard itself"):
        client.set_replicas(0, [1, 0])
    with pytest.raises(errors.InvalidArgumentError, match=r"shard 5 is not connected"):
        client.set_replicas(0, [0, 5])
    with pytest.raises(errors.InvalidArgumentError, match=r"shard 1 appears twice"):
        client.set_replicas(1, [1, 1])
    _register_pair(client, 1)
    with pytest.raises(errors.FailedPreconditionError, match=r"'v1' of that shard is "
                                                             r"registered already"):
        client.set_replicas(1, [1, 0])
    client.set_replicas(0, [0, 1])
    with pytest.raises(errors.FailedPreconditionError, match=r"already has its replicas"):
        client.set_replicas(0, [0, 1])
    assert client.replica_status() == [(0, "whole"), (1, "whole")]
    client.close()


def _joined(client: Any, shard: int) -> None:
    """Waits (running a call now and then: they adopt new connections) until `shard` is a
    joining replica again."""
    _until(lambda: (client.ping([1 - shard]), client.replica_status())[1][shard] ==
           (shard, "joining"))


def test_awaiting_replies_send_reads_to_the_next_replica(fakes):
    """A replica that answers AWAITING (it holds no copy yet) is passed over in a second
    round: the read is answered by the next one, and the first one is joining until its
    IS_INITIALIZED check finds it whole. Every replica AWAITING: an uninitialized variable."""
    client = _core.Client("worker", 0)
    for i, f in enumerate(fakes):
        client.connect(i, f.address, 5.0)
    client.set_replicas(0, [0, 1])
    v = _register_pair(client, 0)
    out = np.empty((), np.float64)
    client.pull([v], [out])
    assert out == 1.0  # the primary's value
    fakes[0].awaiting = True
    client.pull([v], [out])
    assert out == 2.0 and client.replica_status() == [(0, "joining"), (1, "whole")]
    assert client.failovers() == 0  # nothing was lost
    client.pull([v], [out])
    assert out == 2.0 and len(fakes[0].requests(fr.PULL)) == 2  # not read while joining
    fakes[1].awaiting = True
    with pytest.raises(errors.FailedPreconditionError,
                       match=r"uninitialized value v0 \(its ps task awaits a copy of it\)"):
        client.pull([v], [out])
    assert client.is_initialized([v]) == [False]
    fakes[0].awaiting = fakes[1].awaiting = False
    time.sleep(1.05)  # the joining replicas' checks are due
    client.pull([v], [out])
    assert client.replica_status() == [(0, "whole"), (1, "whole")]
    client.pull([v], [out])
    assert out == 1.0  # the primary again
    client.close()


def test_a_replica_reached_again_is_always_registered_stale(fakes):
    """A replica reached again missed this client's updates, whether its connection was lost
    while its process lived on (same incarnation in the new HELLO) or it restarted (a new
    one, whose copy may have been taken before this client came back): its variables are
    registered again with STALE, so a copy comes after this client writes to it again. A
    whole replica that answers a mutation unlike the primary has diverged: it is dropped and
    rejoins the same way."""
    client = _core.Client("worker", 0)
    for i, f in enumerate(fakes):
        client.connect(i, f.address, 5.0)
    client.set_replicas(0, [0, 1])
    v = _register_pair(client, 0)
    g = np.ones((), np.float64)
    fakes[1].drop()
    client.push([v], [g])  # acknowledged by ps 0: OK
    assert client.replica_status() == [(0, "whole"), (1, "dead")]
    _joined(client, 1)
    last = fakes[1].requests(fr.REGISTER)[-1]
    assert last["flags2"] == fr.F2_STALE and last["flags"] == 0  # no INIT: a copy comes
    fakes[1].incarnation += 1  # restarted
    fakes[1].drop()
    client.push([v], [g])
    _joined(client, 1)
    last = fakes[1].requests(fr.REGISTER)[-1]
    assert last["flags2"] == fr.F2_STALE and last["flags"] == 0
    time.sleep(1.05)
    client.push([v], [g])
    assert client.replica_status() == [(0, "whole"), (1, "whole")]
    fakes[1].refuse_pushes = True
    client.push([v], [g])  # the primary's answer counts
    assert client.replica_status() == [(0, "whole"), (1, "dead")]
    fakes[1].refuse_pushes = False
    _joined(client, 1)
    assert fakes[1].requests(fr.REGISTER)[-1]["flags2"] == fr.F2_STALE
    client.close()


# ---- real ps processes, killed -------------------------------------------------------------

def _until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _held(address: str) -> dict[str, tuple[bool, Any]]:
    """name -> (initialized, value) of every float32 variable at `address`, over a plain
    client (the ps task's own view, not the replicated client's)."""
    plain = _core.Client("worker", 9)
    try:
        plain.connect(0, address, 5.0)
        out = {}
        for d in plain.list_variables(0):
            [(h, init)] = plain.register([(0, d["name"], d["dtype"], list(d["shape"]),
                                           d["optimizer"], {}, None)])
            value = None
            if init and d["dtype"] == "float32":
                value = np.empty(d["shape"], np.float32)
                plain.pull([h], [value])
            out[d["name"]] = (init, value)
        return out
    finally:
        plain.close()


def test_kill_failover_rejoin_promotion_and_second_failure():
    """Two ps tasks, groups [0, 1] and [1, 0]. Killing ps 0 (SIGKILL) loses no update: the
    pushes go on to ps 1, reads move there (one failover). Restarted at its port, ps 0 is
    dialed again, gets the variables registered again (uninitialized: a fresh process) and is
    written but not read while joining; once every variable is initialized there (restored
    here, as the copier would) it is whole and primary again. Then ps 1 dies and restarts
    (joining), and ps 0, now the only whole replica, dies: UnavailableError saying that the
    other replica holds the only copy and is still copying."""
    ps = [PsProcess(task=0), PsProcess(task=1)]
    client = _core.Client("worker", 0)
    try:
        for i, p in enumerate(ps):
            client.connect(i, p.address, 10.0)
        client.set_replicas(0, [0, 1])
        client.set_replicas(1, [1, 0])
        zeros = np.zeros(3, np.float32)
        specs = [(s, f"w{s}", "float32", [3], "GradientDescent", {"learning_rate": LR}, zeros)
                 for s in (0, 1)]
        specs.append((0, "step", "int64", [], "", {}, np.zeros((), np.int64)))
        w0, w1, step = [h for h, _ in client.register(specs)]
        g = np.ones(3, np.float32)
        for _ in range(4):
            client.push([w0, w1], [g, g], step_handle=step)
        # Fan-out: each ps task holds both shards, with the same values.
        for p in ps:
            held = _held(p.address)
            assert set(held) == {"w0", "w1", "step"}
            np.testing.assert_array_equal(held["w0"][1], np.full(3, -2.0, np.float32))
            np.testing.assert_array_equal(held["w1"][1], np.full(3, -2.0, np.float32))

        ps[0].kill()
        for _ in range(4):
            new_step = client.push([w0, w1], [g, g], step_handle=step)
        assert new_step == 8  # no increment lost or applied twice
        out = np.empty(3, np.float32)
        client.pull([w0], [out])
        np.testing.assert_array_equal(out, np.full(3, -4.0, np.float32))
        assert client.replica_status() == [(0, "dead"), (1, "whole")]
        assert client.failovers() == 1

        ps[0].stop()  # reaps the killed process and closes its pipes
        ps[0] = PsProcess(port=ps[0].port, task=0)
        _until(lambda: (client.ping([1]), client.replica_status())[1][0] == (0, "joining"))
        held = _held(ps[0].address)
        assert {n: init for n, (init, _) in held.items()} == {"w0": False, "w1": False,
                                                               "step": False}
        # Joining: written (its uninitialized variables refuse the push; no matter), not read.
        client.push([w0, w1], [g, g], step_handle=step)
        client.pull([w0, w1], [out, out])
        np.testing.assert_array_equal(out, np.full(3, -4.5, np.float32))
        # What the copier's REPLICA_INSTALL would do: the values, on every live replica.
        client.assign([w0, w1], [np.full(3, -4.5, np.float32)] * 2)
        client.assign([step], [np.array(9, np.int64)])
        time.sleep(1.1)  # the next check of the joining replica is due
        client.pull([w0], [out])
        assert client.replica_status() == [(0, "whole"), (1, "whole")]
        client.push([w0], [g])
        assert _held(ps[0].address)["w0"][1][0] == -5.0  # primary again, and written

        ps[1].kill()
        client.push([w1], [g])
        ps[1].stop()
        ps[1] = PsProcess(port=ps[1].port, task=1)
        _until(lambda: (client.ping([0]), client.replica_status())[1][1] == (1, "joining"))
        ps[0].kill()
        with pytest.raises(errors.UnavailableError) as e:
            client.pull([w0], [out])
        msg = str(e.value)
        assert f"lost /job:ps/task:0 at {ps[0].address}" in msg
        assert "last whole replica of /job:ps/task:0's variables" in msg
        assert (f"/job:ps/task:1 at {ps[1].address} holds the only copy and it is still "
                f"copying from /job:ps/task:0; falling back to the checkpoint") in msg
        # Sticky: the group stays lost (the session is re-created from the checkpoint).
        with pytest.raises(errors.UnavailableError, match="holds the only copy"):
            client.push([w1], [g])
    finally:
        client.close()
        for p in ps:
            p.stop()
