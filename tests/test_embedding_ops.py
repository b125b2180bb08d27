"""psrt.embedding_ops across processes over TCP: lookups of plain, partitioned and listed
variables on two ps tasks (TF's ``mod`` and ``div`` id-to-part mappings), ids fed per run,
each distinct row pulled once, the sparse combiners against numpy, row-sparse training of
partitioned tables against a numpy reference, and the bytes a training step puts on the
wire.

The reference semantics are TF 1.15's ``tensorflow/python/ops/embedding_ops.py``
(``embedding_lookup``'s documented 13-ids-over-5-parts example, ``_clip``'s
``clip_by_norm``, ``embedding_lookup_sparse``'s combiners and its documented 10x20 example)
and ``tensorflow/python/ops/embedding_ops_test.py`` (the partitioned-lookup checks).
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import autograd.numpy as anp
import numpy as np
import pytest

import psrt
from psrt.ops import embedding_ops as eo
from psrt import errors

from _cluster import LOCALHOST, fresh_graph, prefix, shared_ps2, worker  # noqa: F401


def _setter(server: Any) -> Any:
    return psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster))


# ---- the id -> part mapping: TF's documented example and formula ------------------------------

def test_partition_assignments_match_tf_documented_example():
    # embedding_lookup's docstring: 13 ids over 5 partitions.
    sizes = [3, 3, 3, 2, 2]
    ids = np.arange(13)
    for strategy, expected in (
            ("mod", [[0, 5, 10], [1, 6, 11], [2, 7, 12], [3, 8], [4, 9]]),
            ("div", [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10], [11, 12]])):
        part, row = eo.partition_assignments(ids, sizes, strategy)
        got = [[int(i) for i in ids[part == p]] for p in range(5)]
        assert got == expected
        for p in range(5):  # rows within a part are 0, 1, 2, ... in id order
            np.testing.assert_array_equal(row[part == p], np.arange(len(expected[p])))


@pytest.mark.parametrize("total,parts", [(100000, 2), (10, 3), (7, 7), (1001, 4)])
def test_div_assignment_is_the_contiguous_split_of_tfs_partitioner(total, parts):
    # TF splits a partitioned variable's rows so that the first (total % parts) parts get one
    # extra row; "div" must send id i to the part holding row i of the concatenation.
    base, extra = divmod(total, parts)
    sizes = [base + (1 if k < extra else 0) for k in range(parts)]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    ids = np.arange(total)
    part, row = eo.partition_assignments(ids, sizes, "div")
    want_part = np.searchsorted(starts, ids, side="right") - 1
    np.testing.assert_array_equal(part, want_part)
    np.testing.assert_array_equal(row, ids - starts[want_part])
    part, row = eo.partition_assignments(ids, sizes, "mod")
    np.testing.assert_array_equal(part, ids % parts)
    np.testing.assert_array_equal(row, ids // parts)
    assert all(np.bincount(part, minlength=parts) == sizes)


def test_unknown_strategy_and_bad_params(fresh_graph):
    v = psrt.Variable(np.zeros((4, 2), np.float32), name="v")
    with pytest.raises(ValueError, match="Unrecognized partition strategy: 'cyclic'; "
                                         "expected 'mod' or 'div'"):
        eo.embedding_lookup(v, [0], partition_strategy="cyclic")
    with pytest.raises(ValueError, match="Need at least one param"):
        eo.embedding_lookup([], [0])
    with pytest.raises(TypeError, match="ids must be integers; got dtype float64"):
        eo.embedding_lookup(v, [0.5])
    w = psrt.Variable(np.zeros((4, 3), np.float32), name="w")
    with pytest.raises(ValueError, match="same shape except for the first dimension"):
        eo.embedding_lookup([v, w], [0])
    with pytest.raises(TypeError, match="sp_ids must be SparseTensor; got ndarray"):
        eo.embedding_lookup_sparse(v, np.zeros(3), None)
    sp = psrt.SparseTensor([[0, 0]], [1], [1, 1])
    with pytest.raises(ValueError, match="combiner must be one of 'mean', 'sqrtn' or 'sum'; "
                                         "got 'max'"):
        eo.embedding_lookup_sparse(v, sp, None, combiner="max")


# ---- lookups on two ps tasks ---------------------------------------------------------------

def _mod_reference(table: np.ndarray, offsets: list[int]) -> np.ndarray:
    """The rows TF's mod strategy returns for ids 0..N-1 of a partitioned variable whose part
    k holds rows offsets[k]:offsets[k+1]: id i is row i // P of part i % P."""
    n = len(offsets) - 1
    parts = [table[offsets[k]:offsets[k + 1]] for k in range(n)]
    return np.stack([parts[i % n][i // n] for i in range(table.shape[0])])


def test_lookup_of_partitioned_variable_mod_and_div_with_feeds(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(13 * 3, dtype=np.float32).reshape(13, 3) / 7
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=table,
                                partitioner=psrt.fixed_size_partitioner(5))
    assert emb.offsets == [0, 3, 6, 9, 11, 13]  # uneven: 3, 3, 3, 2, 2
    assert {p.device for p in emb} == {"/job:ps/task:0", "/job:ps/task:1"}
    ids = psrt.placeholder(np.int64, [None, 2], name=f"{prefix}/ids")
    by_mod = eo.embedding_lookup(emb, ids)
    by_div = eo.embedding_lookup(emb, ids, partition_strategy="div")
    assert by_mod.shape == (None, 2, 3) and by_mod.dtype == np.float32
    mod_table = _mod_reference(table, emb.offsets)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for batch in (np.array([[0, 12], [5, 5], [11, 3]]), np.array([[7, 1]])):
            got_mod, got_div = sess.run([by_mod, by_div], feed_dict={ids: batch})
            np.testing.assert_array_equal(got_mod, mod_table[batch])
            np.testing.assert_array_equal(got_div, table[batch])
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"index 13 at position 1 is out of range \[0, 13\)"):
            sess.run(by_div, feed_dict={ids: [[2, 13]]})


def test_float_ids_are_refused_not_truncated_and_nothing_is_trained(shared_ps2, worker, prefix):
    # Issue 22, item 4: ids 1.5 fed to an int64 placeholder were truncated to row 1 and
    # trained. TF's gather takes int32/int64 indices only (array_ops.gather, Tindices); a
    # feed converts as TF r1.15's session.py (BaseSession._run) does, with its round-trip
    # rule applied to every element: a value that is not exactly an integer is refused.
    server = worker(shared_ps2)
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    with _setter(server):
        emb = psrt.Variable(table, name=f"{prefix}/emb")
        gs = psrt.Variable(np.int64(0), name=f"{prefix}/step")
    ids = psrt.placeholder(np.int64, [None], name=f"{prefix}/ids")
    loss = psrt.py_func(lambda r: anp.sum(r), [eo.embedding_lookup(emb, ids)], np.float32)
    train_op = psrt.train.GradientDescentOptimizer(1.0).minimize(loss, global_step=gs)
    halved = psrt.py_func(lambda i: i / 2, [ids], name=f"{prefix}/halved")  # float64 values
    train_halved = psrt.train.GradientDescentOptimizer(1.0).minimize(
        psrt.py_func(lambda r: anp.sum(r), [eo.embedding_lookup(emb, halved)], np.float32),
        global_step=gs)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for value, shown in (([0, 1.5], "1.5 (element [1] of the fed value)"),
                             (np.array([2.5]), "2.5 (element [0] of the fed value)"),
                             ([np.nan], "nan (element [0] of the fed value)"),
                             (["1"], "'1' (element [0] of the fed value)"),
                             ([None, 1], "None (element [0] of the fed value)")):
            with pytest.raises(errors.InvalidArgumentError) as e:
                sess.run(train_op, feed_dict={ids: value})
            assert e.value.message.startswith(
                f"Cannot feed {shown} to '{prefix}/ids' of dtype int64: it does not convert "
                f"exactly"), e.value.message
        # ids computed as floats (a derived tensor of no dtype) are refused at the lookup.
        with pytest.raises(errors.InvalidArgumentError,
                           match="ids must be int32 or int64; got float64"):
            sess.run(train_halved, feed_dict={ids: [2, 3]})
        # Nothing was pushed: the table and the step are as initialized.
        np.testing.assert_array_equal(sess.run(emb), table)
        assert sess.run(gs) == 0
        # Integral values convert exactly: 1.0 is id 1. Each looked-up row's gradient is 1.
        sess.run(train_op, feed_dict={ids: [1.0, 3]})
        expected = table.copy()
        expected[[1, 3]] -= 1.0
        np.testing.assert_array_equal(sess.run(emb), expected)
        assert sess.run(gs) == 1
    # Constant ids are checked when the lookup is built.
    with pytest.raises(TypeError, match="ids must be integers; got dtype float64"):
        eo.embedding_lookup(emb, np.array([0.0, 1.5]))


def test_lookup_of_a_list_of_variables_and_of_a_plain_one(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    rng = np.random.default_rng(3)
    shards = [rng.normal(size=(n, 4)).astype(np.float32) for n in (4, 3, 3)]
    with _setter(server):
        parts = [psrt.Variable(s, name=f"{prefix}/shard{k}") for k, s in enumerate(shards)]
        plain = psrt.Variable(np.concatenate(shards), name=f"{prefix}/plain")
    ids = np.array([9, 0, 4, 4, 8])
    mod = eo.embedding_lookup(parts, ids)                         # a constant ids array
    div = eo.embedding_lookup(parts, ids, partition_strategy="div")
    one = eo.embedding_lookup(plain, ids.reshape(5, 1))
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        got_mod, got_div, got_one = sess.run([mod, div, one])
    # mod: id i -> shard i % 3, row i // 3; div over 10 ids / 3 shards: [0..3], [4..6], [7..9].
    np.testing.assert_array_equal(got_mod, np.stack([shards[i % 3][i // 3] for i in ids]))
    starts = [0, 4, 7, 10]
    div_ref = [shards[k][i - starts[k]] for i in ids for k in range(3)
               if starts[k] <= i < starts[k + 1]]
    np.testing.assert_array_equal(got_div, np.stack(div_ref))
    np.testing.assert_array_equal(got_one, np.concatenate(shards)[ids].reshape(5, 1, 4))


def test_max_norm_clips_rows_as_tf_clip_by_norm(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.array([[3, 4], [0.3, 0.4], [0, 0], [6, 8]], np.float32)
    with _setter(server):
        emb = psrt.Variable(table, name=f"{prefix}/emb")
    ids = np.array([0, 1, 2, 3, 0])
    clipped = eo.embedding_lookup(emb, ids, max_norm=2.0)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        got = sess.run(clipped)
        np.testing.assert_array_equal(sess.run(emb), table)   # the table is not changed
    rows = table[ids].astype(np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    want = rows * 2.0 / np.maximum(norms, 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


class _RecordingClient:
    """Wraps a session's core client, recording each row pull (handle, indices) and each
    batch of them (one parallel round trip)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.row_pulls: list[tuple[int, np.ndarray]] = []
        self.row_batches: list[list[int]] = []
        self.dense_pulls: list[list[int]] = []

    def pull_rows_batch(self, handles: Any, indices: Any, outs: Any) -> None:
        self.row_batches.append(list(handles))
        self.row_pulls.extend((h, i.copy()) for h, i in zip(handles, indices))
        self._client.pull_rows_batch(handles, indices, outs)

    def pull_rows(self, handle: int, indices: np.ndarray, out: np.ndarray) -> None:
        self.row_pulls.append((handle, indices.copy()))
        self._client.pull_rows(handle, indices, out)

    def pull(self, handles: Any, outs: Any, slot: int = 0) -> None:
        self.dense_pulls.append(list(handles))
        self._client.pull(handles, outs, slot)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_each_distinct_row_is_pulled_once_per_run(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(40, dtype=np.float32).reshape(20, 2)
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=table,
                                partitioner=psrt.fixed_size_partitioner(2))
    ids = psrt.placeholder(np.int64, [None], name=f"{prefix}/ids")
    first = eo.embedding_lookup(emb, ids)
    second = eo.embedding_lookup(emb, ids[::-1] + 1)   # a derived tensor as ids
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        rec = sess._client = _RecordingClient(sess._client)
        batch = np.array([4, 4, 17, 4, 2, 17, 3])
        a, b = sess.run([first, second], feed_dict={ids: batch})
    mod_table = _mod_reference(table, emb.offsets)
    np.testing.assert_array_equal(a, mod_table[batch])
    np.testing.assert_array_equal(b, mod_table[batch[::-1] + 1])
    assert rec.dense_pulls == []            # never the whole table
    # ids {2,3,4,5,17,18}: mod 2 -> part 0 rows {1, 2, 9}, part 1 rows {1, 2, 8}; one
    # request per part, each row once, sorted, both parts in one round trip.
    pulled = {h: idx.tolist() for h, idx in rec.row_pulls}
    assert len(rec.row_pulls) == 2 and len(rec.row_batches) == 1
    assert sorted(pulled.values()) == [[1, 2, 8], [1, 2, 9]]


# ---- embedding_lookup_sparse -----------------------------------------------------------------

def _combine_reference(table: np.ndarray, indices: np.ndarray, ids: np.ndarray,
                       weights: np.ndarray | None, combiner: str) -> np.ndarray:
    """TF's documented combiners, row by row in float64."""
    rows = int(indices[:, 0].max()) + 1
    w = np.ones(len(ids)) if weights is None else weights.astype(np.float64)
    out = np.zeros((rows, table.shape[1]))
    for r in range(rows):
        m = indices[:, 0] == r
        if not m.any():
            continue
        total = (table[ids[m]].astype(np.float64) * w[m, None]).sum(axis=0)
        if combiner == "sum":
            out[r] = total
        elif combiner == "mean":
            out[r] = total / w[m].sum()
        else:
            out[r] = total / np.sqrt((w[m] ** 2).sum())
    return out


def test_embedding_lookup_sparse_tf_documented_example(shared_ps2, worker, prefix):
    # embedding_lookup_sparse's docstring: params 10x20, [0,0]: id 1 w 2.0, [0,1]: id 3
    # w 0.5, [1,0]: id 0 w 1.0, [2,3]: id 1 w 3.0, combiner "mean".
    server = worker(shared_ps2)
    params = np.random.default_rng(0).normal(size=(10, 20)).astype(np.float32)
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=params,
                                partitioner=psrt.fixed_size_partitioner(2))
    indices = [[0, 0], [0, 1], [1, 0], [2, 3]]
    sp_ids = psrt.SparseTensor(indices, np.array([1, 3, 0, 1], np.int64), [3, 4])
    sp_w = psrt.SparseTensor(indices, np.array([2.0, 0.5, 1.0, 3.0], np.float32), [3, 4])
    out = eo.embedding_lookup_sparse(emb, sp_ids, sp_w, partition_strategy="div",
                                     combiner="mean")
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        got = sess.run(out)
    want = np.stack([(params[1] * 2.0 + params[3] * 0.5) / 2.5, params[0], params[1]])
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse_combiners_vs_numpy(shared_ps2, worker, prefix, combiner):
    server = worker(shared_ps2)
    rng = np.random.default_rng(7)
    table = rng.normal(size=(50, 6)).astype(np.float32)
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=table,
                                partitioner=psrt.fixed_size_partitioner(3))
    sp = psrt.sparse_placeholder(np.int64, name=f"{prefix}/sp")
    wp = psrt.sparse_placeholder(np.float32, name=f"{prefix}/wp")
    plain = eo.embedding_lookup_sparse(emb, sp, None, partition_strategy="div",
                                       combiner=combiner)
    weighted = eo.embedding_lookup_sparse(emb, sp, wp, partition_strategy="div",
                                          combiner=combiner)
    # 4 rows (row 2 empty, in the middle), duplicates within and across rows.
    indices = np.array([[0, 0], [0, 1], [0, 2], [1, 0], [3, 0], [3, 1]])
    ids = np.array([7, 49, 7, 0, 23, 7])
    weights = rng.uniform(0.5, 2.0, size=6).astype(np.float32)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        got_plain, got_weighted = sess.run(
            [plain, weighted],
            feed_dict={sp: psrt.SparseTensorValue(indices, ids, [4, 3]),
                       wp: (indices, weights, [4, 3])})
    np.testing.assert_allclose(got_plain, _combine_reference(table, indices, ids, None,
                                                             combiner), rtol=1e-5)
    want = _combine_reference(table, indices, ids, weights, combiner)
    if combiner != "sum":   # TF divides 0 by a weight sum of 0 on an empty row: NaN
        assert np.isnan(got_weighted[2]).all()
        want[2] = np.nan
    np.testing.assert_allclose(got_weighted, want, rtol=1e-5)


def test_safe_embedding_lookup_sparse_prunes_and_fills_rows(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(24, dtype=np.float32).reshape(8, 3)
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=table,
                                partitioner=psrt.fixed_size_partitioner(2))
    # Rank 3: [2, 2, 3]; entry (0,1,*) has only an invalid id, (1,0,*) nothing.
    indices = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 1, 0], [1, 1, 2]])
    ids = np.array([1, 6, -1, 5, 2])
    weights = np.array([1.0, 3.0, 1.0, 0.0, 2.0], np.float32)
    sp = psrt.SparseTensor(indices, ids, [2, 2, 3])
    spw = psrt.SparseTensor(indices, weights, [2, 2, 3])
    zeros = eo.safe_embedding_lookup_sparse(emb, sp, spw, combiner="mean")
    default = eo.safe_embedding_lookup_sparse(emb, sp, None, combiner="sum", default_id=7)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        got_zeros, got_default = sess.run([zeros, default])
    assert got_zeros.shape == (2, 2, 3)
    np.testing.assert_allclose(got_zeros[0, 0], (table[1] + 3 * table[6]) / 4)
    np.testing.assert_array_equal(got_zeros[0, 1], 0)
    np.testing.assert_array_equal(got_zeros[1, 0], 0)
    np.testing.assert_allclose(got_zeros[1, 1], table[2])      # id 5 had weight 0
    np.testing.assert_allclose(got_default[0, 0], table[1] + table[6])
    np.testing.assert_array_equal(got_default[0, 1], table[7])
    np.testing.assert_array_equal(got_default[1, 0], table[7])
    np.testing.assert_allclose(got_default[1, 1], table[5] + table[2])


# ---- training: row-sparse gradients of partitioned tables -----------------------------------

def _adagrad_reference(table: np.ndarray, w: np.ndarray, batches: list[tuple[np.ndarray,
                       np.ndarray]], lr: float, offsets: list[int]) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """numpy, float64: TF's Adagrad (accumulators start at 0.1) on
    loss = mean((sum_j E[ids[:, j]] @ w - y)^2) with E looked up by the mod strategy over
    the parts of ``offsets``; duplicate ids' gradients summed."""
    table, w = table.astype(np.float64), w.astype(np.float64)
    acc_t, acc_w = np.full_like(table, 0.1), np.full_like(w, 0.1)
    n = len(offsets) - 1
    for ids, y in batches:
        whole = np.array([offsets[i % n] + i // n for i in ids.reshape(-1)]).reshape(ids.shape)
        e = table[whole]                                  # [B, J, D]
        h = e.sum(axis=1)                                 # [B, D]
        r = h @ w - y                                     # [B, K]
        dr = 2 * r / r.size
        dw = h.T @ dr
        dh = dr @ w.T                                     # [B, D]
        g = np.zeros_like(table)
        for j in range(ids.shape[1]):
            np.add.at(g, whole[:, j], dh)
        touched = np.unique(whole)
        acc_t[touched] += g[touched] ** 2
        table[touched] -= lr * g[touched] / np.sqrt(acc_t[touched])
        acc_w += dw ** 2
        w -= lr * dw / np.sqrt(acc_w)
    return table, w


def test_autodiff_training_of_partitioned_table_matches_numpy(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    rng = np.random.default_rng(11)
    table = rng.normal(size=(30, 4)).astype(np.float32)
    w0 = rng.normal(size=(4, 2)).astype(np.float32)
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=table,
                                partitioner=psrt.fixed_size_partitioner(3))
        w = psrt.Variable(w0, name=f"{prefix}/w")
        step = psrt.Variable(np.int64(0), name=f"{prefix}/step", trainable=False)
    ids = psrt.placeholder(np.int64, [None, 3], name=f"{prefix}/ids")
    y = psrt.placeholder(np.float32, [None, 2], name=f"{prefix}/y")

    @psrt.function
    def mse(e, w, y):
        r = anp.sum(e, axis=1) @ w - y
        return anp.mean(r * r)

    loss = mse(eo.embedding_lookup(emb, ids), w, y)
    train = psrt.train.AdagradOptimizer(0.3).minimize(loss, global_step=step)
    assert [v.name for v in train.var_list] == [f"{prefix}/emb", f"{prefix}/w"]
    batches = [(rng.integers(0, 30, size=(5, 3)), rng.normal(size=(5, 2)).astype(np.float32))
               for _ in range(4)]
    batches[0][0][:2] = 7   # duplicates within a batch
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        rec = sess._client = _RecordingClient(sess._client)
        for b_ids, b_y in batches:
            sess.run(train, feed_dict={ids: b_ids, y: b_y})
        emb_handles = {sess._handle(p) for p in emb}
        assert not any(set(h) & emb_handles for h in rec.dense_pulls)   # never pulled whole
        got_table, got_w, got_step = sess.run([emb, w, step])
    assert got_step == 4
    # The mapping of the reference: id i -> part i % 3, row i // 3 -> whole row offset + row.
    ref_table, ref_w = _adagrad_reference(table, w0, batches, 0.3, emb.offsets)
    np.testing.assert_allclose(got_table, ref_table, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got_w, ref_w, rtol=2e-5, atol=2e-6)


def test_hand_written_indexed_slices_for_partitioned_variable(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(22, dtype=np.float32).reshape(11, 2)
    with _setter(server):
        emb = psrt.get_variable(f"{prefix}/emb", initializer=table,
                                partitioner=psrt.fixed_size_partitioner(2))
    rows = np.array([10, 0, 5, 6, 10])       # part 0 holds 0..5, part 1 6..10
    grads = np.arange(10, dtype=np.float32).reshape(5, 2)

    def loss_fn(value):
        return 0.0, [psrt.IndexedSlices(grads, rows, emb.shape)]

    train = psrt.train.GradientDescentOptimizer(0.5).minimize(loss_fn, var_list=[emb])
    given = psrt.train.GradientDescentOptimizer(0.5).apply_gradients(
        [(psrt.IndexedSlices(grads, rows), emb)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train)
        sess.run(given)
        got = sess.run(emb)
    want = table.astype(np.float64)
    for _ in range(2):
        np.subtract.at(want, rows, 0.5 * grads)
    np.testing.assert_array_equal(got, want)


# ---- bytes on the wire -----------------------------------------------------------------------

class _CountingProxy:
    """A TCP proxy on an OS-chosen port in front of ``target`` ("host:port"), counting the
    bytes it forwards in each direction over every connection."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((LOCALHOST, 0))
        self.sock.listen(16)
        self.address = f"{LOCALHOST}:{self.sock.getsockname()[1]}"
        self.lock = threading.Lock()
        self.up = 0      # worker -> ps
        self.down = 0    # ps -> worker
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns += [client, server]
            threading.Thread(target=self._pump, args=(client, server, "up"),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while True:
                data = src.recv(1 << 20)
                if not data:
                    break
                with self.lock:
                    setattr(self, direction, getattr(self, direction) + len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return self.up, self.down

    def close(self) -> None:
        self.sock.close()
        with self.lock:
            for s in self.conns:
                s.close()


def test_a_training_step_moves_only_the_touched_rows(shared_ps2, fresh_graph, prefix):
    """A [100000, 64] float32 table (25.6 MB) in 2 parts on 2 ps tasks, reached through
    byte-counting proxies: a step's traffic is the distinct rows pulled and pushed (8-byte id
    + 256-byte row each way) plus frame headers, never the table."""
    proxies = [_CountingProxy(a) for a in shared_ps2.addresses]
    server = psrt.train.Server({"ps": [p.address for p in proxies],
                                "worker": [f"{LOCALHOST}:0"]}, job_name="worker",
                               task_index=0)
    try:
        rows, dim = 100000, 64
        rng = np.random.default_rng(5)
        with _setter(server):
            emb = psrt.get_variable(
                f"{prefix}/emb", shape=[rows, dim], dtype=np.float32,
                initializer=psrt.zeros_initializer(), partitioner=psrt.fixed_size_partitioner(2))
            w = psrt.Variable(np.ones((dim, 1), np.float32), name=f"{prefix}/w")
        ids = psrt.placeholder(np.int64, [None], name=f"{prefix}/ids")

        @psrt.function
        def loss_of(e, w):
            return anp.sum(e @ w)

        loss = loss_of(eo.embedding_lookup(emb, ids), w)
        train = psrt.train.AdagradOptimizer(0.1).minimize(loss)
        with psrt.Session(server.target) as sess:
            sess.run(psrt.global_variables_initializer())
            sess.run(train, feed_dict={ids: [1, 2]})     # w is cached from here on
            for _ in range(3):
                batch = rng.integers(0, rows, size=512)
                batch[:100] = batch[100]                  # duplicates
                distinct = len(np.unique(batch))
                up0, down0 = proxies[0].counts()
                up1, down1 = proxies[1].counts()
                sess.run(train, feed_dict={ids: batch})
                up = proxies[0].counts()[0] - up0 + proxies[1].counts()[0] - up1
                down = proxies[0].counts()[1] - down0 + proxies[1].counts()[1] - down1
                # Pull: ids up, rows down; push: ids + rows up; plus 64-byte headers (one
                # request and one reply per part and per variable) and w's dense push.
                rows_bytes = distinct * (8 + dim * 4)
                dense = dim * 4 * 2                    # w's gradient up, its new value down
                assert up >= rows_bytes + distinct * 8 and down >= distinct * dim * 4
                assert up + down <= 2 * rows_bytes + dense + 4096, (up, down, distinct)
                assert up + down < rows * dim * 4 / 100   # < 1% of the table
    finally:
        server.stop()
        for p in proxies:
            p.close()


def _ftrl_rows(var: np.ndarray, accum: np.ndarray, linear: np.ndarray, rows: np.ndarray,
               g: np.ndarray, lr: float, l1: float, l2: float) -> None:
    """TF's ApplyFtrl (learning_rate_power -0.5) on ``rows`` in place, float64
    (tensorflow/core/kernels/training_ops.cc, as documented by tf.train.FtrlOptimizer)."""
    new = accum[rows] + g * g
    linear[rows] += g - (np.sqrt(new) - np.sqrt(accum[rows])) / lr * var[rows]
    quad = np.sqrt(new) / lr + 2 * l2
    lin = linear[rows]
    var[rows] = np.where(np.abs(lin) > l1, (np.sign(lin) * l1 - lin) / quad, 0.0)
    accum[rows] = new


def test_ftrl_trains_looked_up_rows_of_a_partitioned_table(shared_ps2, worker, prefix):
    """The wide model's optimizer: FTRL-proximal on the distinct rows of each batch
    (duplicates summed first), the untouched rows and their slots left alone."""
    server = worker(shared_ps2)
    rng = np.random.default_rng(2)
    table = rng.normal(scale=0.1, size=(40, 1)).astype(np.float32)
    with _setter(server):
        wide = psrt.get_variable(f"{prefix}/wide", initializer=table,
                                 partitioner=psrt.fixed_size_partitioner(2))
    ids = psrt.placeholder(np.int64, [None, 2], name=f"{prefix}/ids")
    y = psrt.placeholder(np.float32, [None], name=f"{prefix}/y")

    @psrt.function
    def squared(rows, y):
        r = anp.sum(rows[:, :, 0], axis=1) - y
        return anp.sum(r * r) / 2

    loss = squared(eo.embedding_lookup(wide, ids, partition_strategy="div"), y)
    train = psrt.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01,
                                     l2_regularization_strength=0.1).minimize(loss)
    batches = [(np.array([[3, 3], [30, 5]]), np.array([1.0, -1.0], np.float32)),
               (np.array([[5, 39], [3, 0]]), np.array([0.5, 2.0], np.float32))]
    var = table[:, 0].astype(np.float64)
    accum, linear = np.full(40, 0.1), np.zeros(40)
    for b_ids, b_y in batches:
        r = var[b_ids].sum(axis=1) - b_y
        g = np.zeros(40)
        for j in range(2):
            np.add.at(g, b_ids[:, j], r)
        rows = np.unique(b_ids)
        _ftrl_rows(var, accum, linear, rows, g[rows], 0.2, 0.01, 0.1)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for b_ids, b_y in batches:
            sess.run(train, feed_dict={ids: b_ids, y: b_y})
        got = sess.run(wide)[:, 0]
    np.testing.assert_allclose(got, var, rtol=1e-5, atol=1e-7)
    untouched = np.setdiff1d(np.arange(40), [0, 3, 5, 30, 39])
    np.testing.assert_array_equal(got[untouched], table[untouched, 0])


def test_max_norm_lookup_trains_through_the_clipping(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.array([[3, 4], [0.3, 0.4], [6, 8]], np.float32)
    c = np.array([1.0, -2.0], np.float32)
    with _setter(server):
        emb = psrt.Variable(table, name=f"{prefix}/emb")
    ids = psrt.placeholder(np.int64, [None], name=f"{prefix}/ids")

    @psrt.function
    def dot(e):
        return anp.sum(e @ c)

    train = psrt.train.GradientDescentOptimizer(0.1).minimize(
        dot(eo.embedding_lookup(emb, ids, max_norm=2.0)))
    batch = np.array([0, 1, 0])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train, feed_dict={ids: batch})
        got = sess.run(emb)
    # d/dx of x * m / |x| (|x| > m) applied to c: (m / |x|) (c - x (x.c) / |x|^2).
    want = table.astype(np.float64)
    for i in batch:
        x = table[i].astype(np.float64)
        norm = np.linalg.norm(x)
        g = c if norm <= 2.0 else (2.0 / norm) * (c - x * (x @ c) / norm ** 2)
        want[i] -= 0.1 * g
    np.testing.assert_allclose(got, want, rtol=1e-5)
