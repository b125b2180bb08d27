"""Hash tables on a ps task (wire version 5, csrc/table.h): rows keyed by arbitrary int64 ids,
created on first use from the table's initializer, trained by the fused sparse kernels,
exported and imported page by page, evicted, and bounded by max_rows. Every test drives a
real ps process over TCP through psrt._core."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import _frames as fr
from _init_ref import initial_value
from _ps_task import PsProcess
from psrt import _core, errors

DIM = 4
MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def ps():
    proc = PsProcess()
    yield proc
    proc.stop()


@pytest.fixture()
def client(ps):
    c = _core.Client("worker", 0)
    c.connect(0, ps.address, 10.0)
    yield c
    c.close()


_names = iter(range(1_000_000))


def table(client, optimizer="Adagrad", params=None, init=None, max_rows=0, dim=DIM,
          dtype="float32", initialize=True, name=None):
    """Registers (and by default initializes) a table of rows [dim]; returns its handle."""
    name = name or f"table{next(_names)}"
    p = {"learning_rate": 0.5, "slot_init": 0.1, "table": 1, "max_rows": max_rows,
         "initialize": 1.0 if initialize else 0.0, **(params or {})}
    [(h, initialized)] = client.register([(0, name, dtype, [0, dim], optimizer, p, init)])
    assert initialized is initialize
    return h


def row_reference(spec, ids, dim=DIM, dtype=np.float32):
    """The rows the ps computes: element j of id k is element k*dim + j of the stream."""
    return np.stack([initial_value(spec, [dim], dtype, offset=(int(k) * dim) & MASK,
                                   full_shape=[dim]) for k in ids])


def pull(client, h, ids, dim=DIM, dtype=np.float32):
    ids = np.asarray(ids, np.int64)
    out = np.empty((len(ids), dim), dtype)
    client.pull_rows(h, ids, out)
    return out


def test_rows_are_created_on_first_pull_from_the_initializer_per_id(client):
    spec = {"kind": "truncated_normal", "a": 0.0, "b": 0.5, "seed": 1234}
    h = table(client, init=spec)
    ids = [7, 3, 1 << 40, -5, 7]
    got = pull(client, h, ids)
    np.testing.assert_array_equal(got, row_reference(spec, ids))
    assert (got[0] == got[4]).all()
    # A second table with the same seed gives every id the same row, whatever the order.
    h2 = table(client, init=spec)
    again = pull(client, h2, list(reversed(ids)))
    np.testing.assert_array_equal(again, got[::-1])
    rows = {v["name"]: v for v in client.list_variables(0)}
    listed = rows[client.var_info(h)[2]]
    assert listed["table"] is True and listed["rows"] == 4 and listed["bytes"] > 4 * DIM * 4
    assert listed["shape"] == (0, DIM)


def test_zeros_when_no_initializer_and_glorot_uses_the_row_shape(client):
    h = table(client, init=None)
    np.testing.assert_array_equal(pull(client, h, [11, 12]), np.zeros((2, DIM), np.float32))
    spec = {"kind": "variance_scaling", "a": 1.0, "fan_mode": "fan_avg",
            "distribution": "uniform", "seed": 9}
    h = table(client, init=spec, dtype="float64")
    np.testing.assert_allclose(pull(client, h, [0, 99], dtype=np.float64),
                               row_reference(spec, [0, 99], dtype=np.float64), rtol=0, atol=0)


def test_push_applies_adagrad_to_the_rows_it_names_summing_duplicates(client):
    spec = {"kind": "random_uniform", "a": -1.0, "b": 1.0, "seed": 5}
    h = table(client, init=spec)
    ids = np.array([2, 9, 2, 40], np.int64)
    grads = np.arange(4 * DIM, dtype=np.float32).reshape(4, DIM) / 10
    before = pull(client, h, [2, 9, 40, 77])
    client.push_sparse(h, ids, grads, None, -1, 0)
    after = pull(client, h, [2, 9, 40, 77])
    # numpy reference of TF's SparseApplyAdagrad after summing duplicates (lr 0.5, accum 0.1)
    summed = {2: grads[0] + grads[2], 9: grads[1], 40: grads[3]}
    for i, k in enumerate([2, 9, 40]):
        g = summed[k].astype(np.float32)
        accum = np.float32(0.1) + g * g
        want = before[i] - np.float32(0.5) * g / np.sqrt(accum)
        np.testing.assert_allclose(after[i], want, rtol=1e-6)
    np.testing.assert_array_equal(after[3], before[3])  # untouched
    # A push may name ids never pulled: they are created, then updated.
    client.push_sparse(h, np.array([1000], np.int64), np.ones((1, DIM), np.float32), None, -1, 0)
    created = row_reference(spec, [1000])[0]
    accum = np.float32(0.1) + np.float32(1.0)
    np.testing.assert_allclose(pull(client, h, [1000])[0],
                               created - np.float32(0.5) / np.sqrt(accum), rtol=1e-6)


def test_ftrl_table_with_three_hyper_parameters(client):
    # FTRL-proximal on rows: TF's SparseApplyFtrl (kernels.h); l1 zeroes small weights.
    h = table(client, optimizer="Ftrl", params={"slot_init": 0.1, "l1": 0.001, "l2": 0.0,
                                                 "lr_power": -0.5, "learning_rate": 0.1})
    ids = np.array([5], np.int64)
    g = np.full((1, DIM), 0.3, np.float32)
    client.push_sparse(h, ids, g, None, -1, 0)
    accum0, linear0, var0 = np.float32(0.1), np.float32(0.0), np.float32(0.0)
    new_accum = accum0 + g[0] * g[0]
    linear = linear0 + g[0] - (np.sqrt(new_accum) - np.sqrt(accum0)) / np.float32(0.1) * var0
    y = np.sqrt(new_accum) / np.float32(0.1)
    want = (np.clip(linear, -0.001, 0.001) - linear) / y
    np.testing.assert_allclose(pull(client, h, [5])[0], want, rtol=1e-5)


def test_export_pages_then_import_restores_rows_slots_and_counts(client, ps):
    spec = {"kind": "random_normal", "a": 0.0, "b": 1.0, "seed": 77}
    h = table(client, init=spec)
    ids = np.arange(100, 137, dtype=np.int64)
    client.push_sparse(h, ids, np.full((len(ids), DIM), 0.25, np.float32), None, -1, 0)
    client.push_sparse(h, ids[:5], np.full((5, DIM), 0.5, np.float32), None, -1, 0)
    pages, cursor = [], 0
    while cursor != -1:
        got_ids, counts, values, slots, cursor = client.table_export(h, cursor, 8)
        assert len(got_ids) <= 8
        pages.append((got_ids, counts, values, slots))
    assert len(pages) >= 5
    all_ids = np.concatenate([p[0] for p in pages])
    assert sorted(all_ids.tolist()) == ids.tolist()
    counts = dict(zip(all_ids.tolist(), np.concatenate([p[1] for p in pages]).tolist()))
    assert counts[100] == 2 and counts[136] == 1
    values = np.concatenate([p[2] for p in pages])
    accums = np.concatenate([p[3][0] for p in pages])
    np.testing.assert_array_equal(values, pull(client, h, all_ids))
    np.testing.assert_allclose(accums[all_ids == 136][0], 0.1 + 0.0625, rtol=1e-6)

    # Import into a fresh table (clear), page by page: the same rows, slots and counts.
    h2 = table(client, init={"kind": "zeros"}, initialize=False)
    for i, (pi, pc, pv, ps_) in enumerate(pages):
        client.table_import(h2, pi, pc, pv, ps_, i == 0)
    np.testing.assert_array_equal(pull(client, h2, all_ids), values)
    ids2, counts2, values2, slots2, _ = client.table_export(h2, 0, 1000)
    order = np.argsort(ids2)
    ref = np.argsort(all_ids)
    np.testing.assert_array_equal(slots2[0][order], accums[ref])
    np.testing.assert_array_equal(counts2[order], np.concatenate([p[1] for p in pages])[ref])
    # Training continues from the restored accumulator.
    client.push_sparse(h2, np.array([136], np.int64), np.full((1, DIM), 0.25, np.float32),
                       None, -1, 0)
    client.push_sparse(h, np.array([136], np.int64), np.full((1, DIM), 0.25, np.float32),
                       None, -1, 0)
    np.testing.assert_array_equal(pull(client, h2, [136]), pull(client, h, [136]))


def test_evict_by_staleness_and_by_count(client):
    h = table(client)
    client.push_sparse(h, np.array([1, 2, 3], np.int64), np.ones((3, DIM), np.float32),
                       None, -1, 0)
    for _ in range(3):  # ids 1 and 2 keep training; 3 goes stale
        client.push_sparse(h, np.array([1, 2], np.int64), np.ones((2, DIM), np.float32),
                           None, -1, 0)
    pull(client, h, [50])  # looked up, never trained: count 0
    assert client.table_evict(h, 3, 0) == (1, 3)  # id 3: unseen for 3 updates
    assert client.table_evict(h, 0, 2) == (1, 2)  # id 50: updated 0 < 2 times
    ids, counts, *_ = client.table_export(h, 0, 100)
    assert sorted(ids.tolist()) == [1, 2] and sorted(counts.tolist()) == [4, 4]
    # An evicted id comes back as a fresh row from the initializer (zeros here).
    np.testing.assert_array_equal(pull(client, h, [3]), np.zeros((1, DIM), np.float32))
    assert client.table_evict(h, 0, 0) == (0, 3)


def test_max_rows_refuses_new_rows_and_creates_nothing(client):
    h = table(client, max_rows=5)
    pull(client, h, [1, 2, 3])
    with pytest.raises(errors.ResourceExhaustedError) as e:
        pull(client, h, [4, 5, 6, 1])
    msg = e.value.message
    assert "holds 3 rows" in msg and "3 more" in msg and "limit of 5 rows" in msg
    assert "nothing was created" in msg
    with pytest.raises(errors.ResourceExhaustedError):
        client.push_sparse(h, np.array([7, 8, 9], np.int64), np.ones((3, DIM), np.float32),
                           None, -1, 0)
    ids, *_ = client.table_export(h, 0, 100)
    assert sorted(ids.tolist()) == [1, 2, 3]
    pull(client, h, [4, 5])  # up to the limit is fine
    assert client.table_evict(h, 0, 0)[1] == 5


def test_dense_access_and_table_ops_on_variables_are_refused(client):
    h = table(client)
    with pytest.raises(errors.InvalidArgumentError, match="rows are addressed by id"):
        client.pull([h], [np.empty((0, DIM), np.float32)])
    [(v, _)] = client.register([(0, f"plain{next(_names)}", "float32", [3, DIM], "Adagrad",
                                 {"learning_rate": 0.1}, np.zeros((3, DIM), np.float32))])
    with pytest.raises(errors.InvalidArgumentError, match="not a hash table"):
        client.table_export(v, 0, 10)
    with pytest.raises(errors.InvalidArgumentError, match="max_rows 3 is for hash tables only"):
        client.register([(0, f"plain{next(_names)}", "float32", [3], "", {"max_rows": 3}, None)])
    with pytest.raises(errors.InvalidArgumentError, match=r"shape is \[0, row dims"):
        client.register([(0, f"t{next(_names)}", "float32", [5, DIM], "", {"table": 1}, None)])
    with pytest.raises(errors.InvalidArgumentError, match=r"more than 2\^40 elements"):
        # Found by the frame fuzzer: [0, 2^63-1] once passed (0 elements) and its record
        # size overflowed to 0 (SIGFPE in TABLE_EXPORT).
        client.register([(0, f"t{next(_names)}", "float32", [0, (1 << 63) - 1], "",
                          {"table": 1}, None)])
    with pytest.raises(errors.InvalidArgumentError, match="not int64"):
        client.register([(0, f"t{next(_names)}", "int64", [0, DIM], "", {"table": 1}, None)])


def test_uninitialized_table_is_refused_until_initialized(client):
    name = f"lazy{next(_names)}"
    h = table(client, initialize=False, name=name)
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
        pull(client, h, [1])
    h = table(client, initialize=True, name=name)
    assert pull(client, h, [1]).shape == (1, DIM)


def test_crafted_table_frames_get_errors_and_the_connection_stays(ps, client):
    h = table(client)
    var_id = client.var_info(h)[1]
    with fr.connect(ps.address) as sock:
        # TABLE_IMPORT whose payload does not hold `count` records.
        sock.sendall(fr.header(fr.TABLE_IMPORT, var_id=var_id, dtype=fr.FLOAT32, count=3,
                               payload_len=10) + b"\0" * 10)
        h_, payload = fr.read_frame(sock)
        assert h_["status"] == fr.INVALID_ARGUMENT and b"expected 144" in payload  # 3 x (16 + 2 x 16)
        # TABLE_IMPORT with a dtype unlike the table's.
        sock.sendall(fr.header(fr.TABLE_IMPORT, var_id=var_id, dtype=fr.FLOAT64, count=0))
        h_, payload = fr.read_frame(sock)
        assert h_["status"] == fr.INVALID_ARGUMENT and b"float64" in payload
        # TABLE_EVICT with a negative threshold; TABLE_EXPORT of an unknown id.
        sock.sendall(fr.header(fr.TABLE_EVICT, var_id=var_id, arg0=-1.0))
        assert fr.read_frame(sock)[0]["status"] == fr.INVALID_ARGUMENT
        sock.sendall(fr.header(fr.TABLE_EXPORT, var_id=999_999, count=5))
        assert fr.read_frame(sock)[0]["status"] == fr.NOT_FOUND
        # A dense PUSH of a table, with a payload: refused, stream kept in step.
        sock.sendall(fr.header(fr.PUSH, var_id=var_id, dtype=fr.FLOAT32, payload_len=16)
                     + b"\0" * 16)
        h_, payload = fr.read_frame(sock)
        assert h_["status"] == fr.INVALID_ARGUMENT and b"addressed by id" in payload
        # A sparse PULL of ids at the extremes of int64 works (rows are created).
        ids = struct.pack("<2q", -(1 << 63), (1 << 63) - 1)
        sock.sendall(fr.header(fr.PULL, var_id=var_id, flags=fr.F_SPARSE, count=2,
                               payload_len=16) + ids)
        h_, payload = fr.read_frame(sock)
        assert h_["status"] == fr.OK and len(payload) == 2 * DIM * 4
        sock.sendall(fr.header(fr.PING))
        assert fr.read_frame(sock)[0]["status"] == fr.OK


def test_cluster_info_returns_what_the_task_was_started_with():
    cluster = json.dumps({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
                          "job_name": "worker", "task_index": 0})
    srv = _core.Server("127.0.0.1", 0, "worker", 0, cluster_def=cluster)
    bare = _core.Server("127.0.0.1", 0, "worker", 1)
    c = _core.Client("client", 0)
    try:
        c.connect(0, f"127.0.0.1:{srv.port}", 5.0)
        c.connect(1, f"127.0.0.1:{bare.port}", 5.0)
        assert json.loads(c.cluster_info(0)) == json.loads(cluster)
        assert c.cluster_info(1) == b""
        bare.set_cluster_def('{"cluster": {}}')
        assert c.cluster_info(1) == b'{"cluster": {}}'
        with pytest.raises(errors.InvalidArgumentError, match="1048576"):
            bare.set_cluster_def("y" * ((1 << 20) + 1))
        assert c.cluster_info(1) == b'{"cluster": {}}'
    finally:
        c.close()
        srv.stop()
        bare.stop()
    with pytest.raises(errors.InvalidArgumentError, match="1048576"):
        _core.Server("127.0.0.1", 0, cluster_def="x" * ((1 << 20) + 1))



def test_a_refused_push_creates_no_row(client):
    # Found by the frame fuzzer: Ftrl refuses a learning rate <= 0 (TF's ApplyFtrl check);
    # the ids of the refused gradient must not have become rows.
    h = table(client, optimizer="Ftrl", params={"slot_init": 0.1, "lr_power": -0.5,
                                                 "learning_rate": 0.1})
    with pytest.raises(errors.InvalidArgumentError, match="learning_rate"):
        client.push_sparse(h, np.array([5, 6], np.int64), np.ones((2, DIM), np.float32),
                           -1.0, -1, 0)
    ids, *_ = client.table_export(h, 0, 100)
    assert ids.tolist() == []
