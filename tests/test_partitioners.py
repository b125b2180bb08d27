"""psrt.partitioners: TF1's partitioners' arithmetic (tensorflow/python/ops/
partitioned_variables.py, its docstring examples and the formulas of
tensorflow/python/kernel_tests/partitioned_variables_test.py), checked against values worked
out by hand from those formulas, and their use by get_variable and variable_scope with the
parts placed on two ps tasks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import psrt
from psrt.ops import embedding_ops as eo
from psrt.ops.partitioned_variables import fixed_size_partitioner
from psrt.ops.partitioned_variables import min_max_variable_partitioner, variable_axis_size_partitioner

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401


def test_min_max_variable_partitioner_arithmetic():
    # TF's docstring: float32 [1024, 1024] is 4 MiB = 16 slices of 256 KiB.
    assert min_max_variable_partitioner(max_partitions=16)([1024, 1024], np.float32) == [16, 1]
    assert min_max_variable_partitioner(max_partitions=100)([1024, 1024], np.float32) == [16, 1]
    assert min_max_variable_partitioner(max_partitions=5)([1024, 1024], np.float32) == [5, 1]
    assert min_max_variable_partitioner()([1024, 1024], np.float32) == [1, 1]   # default 1
    # [2048] float32 = 8 KiB; 2 KiB slices -> 4 parts.
    assert min_max_variable_partitioner(100, min_slice_size=2 << 10)([2048], np.float32) == [4]
    # float64 doubles the bytes; the ceiling rounds a partial slice up: 8000*8/3000 = 21.3.
    assert min_max_variable_partitioner(100, min_slice_size=3000)([8000], np.float64) == [22]
    # Never more parts than rows: 3 rows of 4 MB.
    assert min_max_variable_partitioner(100)([3, 1000000], np.float32) == [3, 1]
    # A tiny variable still gets one part.
    assert min_max_variable_partitioner(100)([2, 2], np.float32) == [1, 1]
    # Strings count bytes_per_string_element per element: 1000 * 16 / 4000 = 4.
    assert min_max_variable_partitioner(10, min_slice_size=4000)([1000], np.str_) == [4]
    assert min_max_variable_partitioner(
        10, min_slice_size=4000, bytes_per_string_element=4)([1000], np.object_) == [1]
    # psrt.float32 (a TF-style DType) is accepted as TF passes it.
    assert min_max_variable_partitioner(16)([1024, 1024], psrt.float32) == [16, 1]


def test_variable_axis_size_partitioner_arithmetic():
    # (4, 8, 16, 32) float32: a row (slice along axis 0) is 8*16*32*4 = 16384 bytes.
    shape = [4, 8, 16, 32]
    assert variable_axis_size_partitioner(16384)(shape, np.float32) == [4, 1, 1, 1]
    assert variable_axis_size_partitioner(2 * 16384)(shape, np.float32) == [2, 1, 1, 1]
    assert variable_axis_size_partitioner(3 * 16384 - 1)(shape, np.float32) == [2, 1, 1, 1]
    assert variable_axis_size_partitioner(4 * 16384)(shape, np.float32) == [1, 1, 1, 1]
    # A row larger than max_shard_bytes: one row per part (rows_per_part = max(1, 0)).
    assert variable_axis_size_partitioner(100)(shape, np.float32) == [4, 1, 1, 1]
    assert variable_axis_size_partitioner(100, max_shards=3)(shape, np.float32) == [3, 1, 1, 1]
    # An embedding table: [100000, 64] float32 rows are 256 bytes.
    table = [100000, 64]
    assert variable_axis_size_partitioner((64 << 20) - 1)(table, np.float32) == [1, 1]
    assert variable_axis_size_partitioner(1 << 20)(table, np.float32) == \
        [math.ceil(100000 / 4096), 1]
    assert variable_axis_size_partitioner(1 << 20, max_shards=8)(table, np.float32) == [8, 1]
    assert variable_axis_size_partitioner(1 << 20)(table, np.float64) == \
        [math.ceil(100000 / 2048), 1]
    assert variable_axis_size_partitioner(64, bytes_per_string_element=8)([10, 4], np.str_) \
        == [5, 1]


def test_partitioner_argument_errors():
    with pytest.raises(ValueError, match="Both max_shard_bytes and bytes_per_string_element "
                                         "must be positive; got max_shard_bytes=0"):
        variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="max_shards must be positive; got -2"):
        variable_axis_size_partitioner(10, max_shards=-2)
    with pytest.raises(ValueError, match="psrt partitions along axis 0 only; got axis=1"):
        variable_axis_size_partitioner(10, axis=1)
    with pytest.raises(ValueError, match="psrt partitions along axis 0 only; got axis=2"):
        min_max_variable_partitioner(4, axis=2)
    with pytest.raises(ValueError, match="max_partitions must be a positive integer; got 0"):
        min_max_variable_partitioner(0)
    with pytest.raises(ValueError, match=r"Can not partition variable along axis 0 when "
                                         r"shape is only \[\]"):
        min_max_variable_partitioner(4)([], np.float32)
    with pytest.raises(ValueError, match=r"shape is not fully defined: \[None, 4\]"):
        variable_axis_size_partitioner(10)([None, 4], np.float32)
    assert fixed_size_partitioner is psrt.fixed_size_partitioner
    assert fixed_size_partitioner(5)([3, 2]) == [3, 1]        # min(num_shards, rows)


def test_get_variable_and_variable_scope_use_partitioners(fresh_graph):
    with psrt.variable_scope("wide", partitioner=min_max_variable_partitioner(
            max_partitions=4, min_slice_size=4 << 10)):
        a = psrt.get_variable("a", shape=[1000, 8], dtype=np.float32,   # 32000 B -> 8 -> 4
                              initializer=psrt.zeros_initializer())
        b = psrt.get_variable("b", shape=[10, 8], dtype=np.float32,     # 320 B -> 1 part
                              initializer=psrt.zeros_initializer())
    c = psrt.get_variable("c", shape=[1001, 4], dtype=np.float32,
                          initializer=psrt.zeros_initializer(),
                          partitioner=variable_axis_size_partitioner(4000))  # 250 rows/part
    assert isinstance(a, psrt.PartitionedVariable) and len(a) == 4
    assert a.offsets == [0, 250, 500, 750, 1000]
    assert [p.name for p in a] == [f"wide/a/part_{k}" for k in range(4)]
    assert len(b) == 1 and b.offsets == [0, 10]
    assert len(c) == 5 and c.offsets == [0, 201, 401, 601, 801, 1001]   # TF's uneven split


def test_partitioned_table_from_scope_partitioner_over_two_ps(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    table = np.arange(300 * 2, dtype=np.float32).reshape(300, 2)
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        with psrt.variable_scope(prefix, partitioner=variable_axis_size_partitioner(
                max_shard_bytes=800)):                                  # 100 rows per part
            emb = psrt.get_variable("emb", initializer=table)
    assert emb.offsets == [0, 100, 200, 300]
    assert [p.device for p in emb] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    ids = np.array([0, 150, 299, 100, 99])
    rows = eo.embedding_lookup(emb, ids, partition_strategy="div")
    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(rows), table[ids])
        np.testing.assert_array_equal(sess.run(emb), table)
