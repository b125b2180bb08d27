"""Dynamic embedding tables (psrt.dynamic_embedding): rows keyed by arbitrary int64 ids,
created on the ps at first lookup, trained through a loss tensor, sharded by id over real ps
processes, bounded, evicted, checkpointed and restored into another number of ps tasks.

References: the rows' first values are the ps initializer streams (psrt.init_ops, tested
against tests/_init_ref.py), Adagrad is TF's SparseApplyAdagrad after summing duplicates
(tensorflow/core/kernels/training_ops.cc), as a numpy loop here."""

from __future__ import annotations

import numpy as np
import pytest

import psrt
from psrt import dynamic_embedding as de
from psrt import errors
from psrt.init_ops import initial_value

from _cluster import fresh_graph, ps_tasks, worker  # noqa: F401  (fixtures)

DIM = 3
MASK = (1 << 64) - 1
LR = 0.5


def first_rows(table, ids):
    """Rows as the ps creates them: element j of id k is element k*dim + j of the stream."""
    spec = table._init_spec
    return np.stack([initial_value({**spec, "offset": (int(k) * table.dim) & MASK,
                                    "full_shape": [table.dim]}, [table.dim], table.dtype)
                     for k in ids])


def model(num_shards=None, max_rows=None, seed=11):
    ids = psrt.placeholder(np.int64, [None], name="ids")
    target = psrt.placeholder(np.float32, [None, DIM], name="target")
    table = de.get_variable("emb", dim=DIM, num_shards=num_shards, max_rows=max_rows,
                            initializer=psrt.truncated_normal_initializer(stddev=0.5,
                                                                          seed=seed))
    rows = de.embedding_lookup(table, ids)

    @psrt.function
    def sq_loss(r, t):
        d = r - t
        return (d * d).sum()

    loss = sq_loss(rows, target)
    return table, ids, target, rows, loss


def adagrad_reference(state, table, ids, target):
    """Applies one step of the loss sum((rows - target)^2) to `state` {id: (row, accum)}."""
    for k in ids:
        if k not in state:
            state[k] = (first_rows(table, [k])[0].astype(np.float32), np.full(DIM, 0.1, np.float32))
    grads = {}
    for k, t in zip(ids, target):
        grads[k] = grads.get(k, np.zeros(DIM, np.float32)) + 2 * (state[k][0] - t)
    for k, g in grads.items():
        row, acc = state[k]
        g = g.astype(np.float32)
        acc = acc + g * g
        state[k] = (row - np.float32(LR) * g / np.sqrt(acc), acc)


IDS = [np.array([5, -7, 1 << 40, 5, 12], np.int64), np.array([12, 3, 8, -7], np.int64),
       np.array([5, 5, 99, 1 << 40], np.int64)]


def targets(i, n):
    return np.linspace(-1, 1, n * DIM, dtype=np.float32).reshape(n, DIM) * (i + 1)


def test_rows_are_made_on_the_ps_sharded_by_id_and_trained_sparsely(ps_tasks, worker):
    ps = ps_tasks(2)
    server = worker(ps)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        gs = psrt.train.get_or_create_global_step()
        table, ids, target, rows, loss = model()
    assert table.num_shards == 2
    assert [s.device for s in table.shards] == ["/job:ps/task:1", "/job:ps/task:0"]
    train_op = psrt.train.AdagradOptimizer(LR).minimize(loss, global_step=gs)
    state: dict = {}
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        first = sess.run(rows, {ids: IDS[0]})
        np.testing.assert_array_equal(first, first_rows(table, IDS[0]))
        for i, batch in enumerate(IDS):
            t = targets(i, len(batch))
            sess.run(train_op, {ids: batch, target: t})
            adagrad_reference(state, table, batch.tolist(), t)
        every = sorted(state)
        got = sess.run(rows, {ids: np.array(every, np.int64)})
        np.testing.assert_allclose(got, np.stack([state[k][0] for k in every]), rtol=2e-6,
                                   atol=1e-7)
        assert table.size(sess) == len(every)
        assert table.memory_bytes(sess) > len(every) * DIM * 4 * 2
        # Each shard holds exactly its ids: id % 2.
        for k, shard in enumerate(table.shards):
            held, *_ = sess._client.table_export(sess._handle(shard), 0, 1000)
            assert sorted(held.tolist()) == sorted(i for i in every if i % 2 == k)
        # Nothing pulled the table whole: the ps rows are the touched ids only.
        names = ps.names_on(0) | ps.names_on(1)
        assert {"emb/shard_0", "emb/shard_1"} <= names


def test_checkpoint_restores_into_another_number_of_ps_tasks(ps_tasks, worker, tmp_path):
    ps = ps_tasks(2)
    server = worker(ps)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        gs = psrt.train.get_or_create_global_step()
        table, ids, target, rows, loss = model()
    train_op = psrt.train.AdagradOptimizer(LR).minimize(loss, global_step=gs)
    saver = psrt.train.Saver()
    state: dict = {}
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        for i, batch in enumerate(IDS[:2]):
            t = targets(i, len(batch))
            sess.run(train_op, {ids: batch, target: t})
            adagrad_reference(state, table, batch.tolist(), t)
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=gs)
    stored = dict(psrt.train.list_variables(path))
    assert stored["emb-keys"] == [len(state)] and stored["emb-values"] == [len(state), DIM]
    assert stored["emb/Adagrad-values"] == [len(state), DIM]

    # A new job with 3 ps tasks and 3 shards: every row, accumulator and count comes back.
    psrt.reset_default_graph()
    ps3 = ps_tasks(3)
    server3 = worker(ps3)
    with psrt.device(psrt.train.replica_device_setter(cluster=server3.server_def_cluster)):
        gs = psrt.train.get_or_create_global_step()
        table3, ids, target, rows, loss = model()
    assert table3.num_shards == 3
    train_op = psrt.train.AdagradOptimizer(LR).minimize(loss, global_step=gs)
    with psrt.Session(server3.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(rows, {ids: np.array([777], np.int64)})  # a row the restore must drop
        psrt.train.Saver().restore(sess, path)
        assert table3.size(sess) == len(state)
        for k, shard in enumerate(table3.shards):
            held, *_ = sess._client.table_export(sess._handle(shard), 0, 1000)
            assert sorted(held.tolist()) == sorted(i for i in state if i % 3 == k)
        every = sorted(state)
        np.testing.assert_allclose(sess.run(rows, {ids: np.array(every, np.int64)}),
                                   np.stack([state[k][0] for k in every]), rtol=2e-6, atol=1e-7)
        # Training goes on from the restored accumulators.
        t = targets(2, len(IDS[2]))
        sess.run(train_op, {ids: IDS[2], target: t})
        adagrad_reference(state, table3, IDS[2].tolist(), t)
        every = sorted(state)
        np.testing.assert_allclose(sess.run(rows, {ids: np.array(every, np.int64)}),
                                   np.stack([state[k][0] for k in every]), rtol=2e-6, atol=1e-7)


def test_max_rows_is_a_clear_error_and_creates_nothing(ps_tasks, worker):
    ps = ps_tasks(1)
    server = worker(ps)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        table, ids, target, rows, loss = model(max_rows=4)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(rows, {ids: np.array([1, 2, 3], np.int64)})
        with pytest.raises(errors.ResourceExhaustedError, match=r"limit of 4 rows \(max_rows\)"):
            sess.run(rows, {ids: np.array([4, 5], np.int64)})
        assert table.size(sess) == 3


def test_evict_by_count_and_staleness_and_the_hook(ps_tasks, worker):
    ps = ps_tasks(1)
    server = worker(ps)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        gs = psrt.train.get_or_create_global_step()
        table, ids, target, rows, loss = model()
    train_op = psrt.train.AdagradOptimizer(LR).minimize(loss, global_step=gs)
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(train_op, {ids: np.array([1, 2, 3], np.int64), target: targets(0, 3)})
        for _ in range(3):
            sess.run(train_op, {ids: np.array([1, 2], np.int64), target: targets(1, 2)})
        sess.run(rows, {ids: np.array([40], np.int64)})  # looked up, never trained
        assert table.evict(sess, min_count=1) == 1        # id 40
        assert table.evict(sess, unseen_steps=3) == 1     # id 3: not seen for 3 updates
        assert table.size(sess) == 2
        with pytest.raises(ValueError, match=r"must be in \[0, 2\^63 - 1\]"):
            table.evict(sess, unseen_steps=-1)
    # The hook, on a monitored session: evicts every 2 global steps.
    hook = de.EvictionHook([table], every_n_steps=2, min_count=2)
    with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=True,
                                             hooks=[hook]) as mon:
        for k in range(5):
            mon.run(train_op, {ids: np.array([100 + k], np.int64), target: targets(0, 1)})
    assert hook.evicted >= 2  # ids seen once each are removed as they age
    with pytest.raises(ValueError, match="at least one > 0"):
        de.EvictionHook([table], every_n_steps=1)


def test_restore_past_max_rows_changes_nothing_and_mts_sessions_work(ps_tasks, worker,
                                                                     tmp_path):
    ps = ps_tasks(2)
    server = worker(ps)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        gs = psrt.train.get_or_create_global_step()
        table, ids, target, rows, loss = model()
    train_op = psrt.train.AdagradOptimizer(LR).minimize(loss, global_step=gs)
    saver = psrt.train.Saver()
    # size(), evict() and Saver take the MonitoredTrainingSession a training loop holds.
    with psrt.train.MonitoredTrainingSession(master=server.target, is_chief=True) as mon:
        mon.run(train_op, {ids: np.arange(8, dtype=np.int64), target: targets(0, 8)})
        assert table.size(mon) == 8
        path = saver.save(mon, str(tmp_path / "m.ckpt"), global_step=gs)
        assert table.evict(mon, min_count=2) == 8 and table.size(mon) == 0
    psrt.reset_default_graph()
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        table2, ids, target, rows, loss = model(max_rows=6)  # 3 rows a shard: 4 come back
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        sess.run(rows, {ids: np.array([100, 101], np.int64)})
        with pytest.raises(errors.ResourceExhaustedError, match="nothing was restored"):
            psrt.train.Saver().restore(sess, path)
        held = sorted(int(k) for s in table2.shards
                      for k in sess._client.table_export(sess._handle(s), 0, 100)[0])
        assert held == [100, 101]


def test_bad_arguments_name_the_value():
    psrt.reset_default_graph()
    de.get_variable("dup", dim=2)
    with pytest.raises(ValueError, match="Variable dup already exists"):
        de.get_variable("dup", dim=2)
    with pytest.raises(TypeError, match="dim must be an integer; got 2.7"):
        de.get_variable("t", dim=2.7)
    with pytest.raises(TypeError, match="max_rows must be an integer"):
        de.get_variable("t", dim=2, max_rows=1.5)
    with pytest.raises(ValueError, match="key_dtype must be int64"):
        de.get_variable("t", dim=2, key_dtype=np.uint64)
    with pytest.raises(ValueError, match="dim must be >= 1; got 0"):
        de.get_variable("t", dim=0)
    with pytest.raises(TypeError, match="float32 or float64; got int64"):
        de.get_variable("t", dim=2, value_dtype=np.int64)
    with pytest.raises(TypeError, match="initializer must be one the ps task computes"):
        de.get_variable("t", dim=2, initializer=lambda shape, dtype=None: np.zeros(shape))
    with pytest.raises(TypeError, match="DynamicEmbeddingVariable"):
        de.embedding_lookup(psrt.Variable(np.zeros((2, 2), np.float32)), [0])
