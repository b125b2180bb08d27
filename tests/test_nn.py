"""psrt.nn.embedding_lookup: row pulls of an embedding on a ps subprocess, trained with
row-sparse gradients of the same ids."""

from __future__ import annotations

import numpy as np
import pytest

import psrt
from psrt import errors

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401  (fixtures)


def test_embedding_lookup_pulls_rows_and_trains_with_indexed_slices(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        emb = psrt.Variable(table, name=f"{prefix}/emb")
    ids = np.array([[3, 7], [3, 0]])
    lookup = psrt.nn.embedding_lookup(emb, ids)
    flat = ids.reshape(-1)
    grads = psrt.IndexedSlices(np.ones((flat.size, 2), np.float32), flat)
    train = psrt.train.GradientDescentOptimizer(0.5).apply_gradients([(grads, emb)])
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        rows = sess.run(lookup)
        assert rows.shape == (2, 2, 2)
        np.testing.assert_array_equal(rows, table[ids])
        sess.run(train)
        expected = table.copy()
        np.subtract.at(expected, flat, 0.5)  # row 3 appears twice: its gradients are summed
        np.testing.assert_array_equal(sess.run(lookup), expected[ids])
        np.testing.assert_array_equal(sess.run(emb), expected)
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"index 10 at position 1 is out of range \[0, 10\)"):
            sess.run(psrt.nn.embedding_lookup(emb, [1, 10]))


def test_embedding_lookup_argument_errors(fresh_graph):
    v = psrt.Variable(np.zeros((4, 2), np.float32), name="v")
    with pytest.raises(TypeError, match="ids must be integers; got dtype float64"):
        psrt.nn.embedding_lookup(v, [0.5])
    with pytest.raises(ValueError, match="'s' is a scalar"):
        psrt.nn.embedding_lookup(psrt.Variable(np.float32(1), name="s"), [0])
    with pytest.raises(TypeError, match="params must be a psrt Variable"):
        psrt.nn.embedding_lookup(np.zeros((4, 2)), [0])
