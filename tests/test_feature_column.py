"""psrt.feature_column: stable feature hashes (XXH64 known answers, keyed BLAKE2b, the cross
mix written out independently here), TF's bucketize and missing-value rules
(tensorflow/python/feature_column/feature_column.py, tensorflow/python/ops/sparse_ops.py),
and input_layer / linear_model trained on two ps tasks against numpy."""

from __future__ import annotations

import hashlib

import autograd.numpy as anp
import numpy as np
import pytest
import xxhash

import psrt
from psrt import feature_column as fc

from _cluster import fresh_graph, prefix, shared_ps2, worker  # noqa: F401

_M64 = (1 << 64) - 1


def _hash128to64(low: int, high: int) -> int:
    """CityHash's Hash128to64 in Python ints (the reference for psrt's numpy version)."""
    k = 0x9DDFEA08EB382D69
    a = ((low ^ high) * k) & _M64
    a ^= a >> 47
    b = ((high ^ a) * k) & _M64
    b ^= b >> 47
    return (b * k) & _M64


def _cross_reference(values: list, buckets: int, key: int = 0xDECAFCAFFE) -> int:
    h = key
    for v in values:
        h = _hash128to64(h, v & _M64 if isinstance(v, int) else
                         xxhash.xxh64_intdigest(v.encode("utf-8")))
    return h % buckets


def test_fast_hash_is_xxh64_with_its_published_test_vectors():
    # XXH64 with seed 0: "" -> 0xEF46DB3751D8E999, "a" -> 0xD24EC4F1A98C6E5B (xxHash's
    # documented sanity values).
    big = 1 << 62
    got = fc.string_to_hash_bucket_fast(np.array(["", "a"]), big)
    assert got.tolist() == [0xEF46DB3751D8E999 % big, 0xD24EC4F1A98C6E5B % big]
    # Pinned buckets: they must not change between psrt versions (models depend on them).
    assert fc.string_to_hash_bucket_fast(["a", "b", "c"], 10).tolist() == [5, 5, 9]
    words = np.array([["Bachelors", "HS-grad"], ["Bachelors", "é"]])
    want = [[xxhash.xxh64_intdigest(w.encode()) % 1000 for w in row] for row in words]
    got = fc.string_to_hash_bucket_fast(words, 1000)
    assert got.dtype == np.int64 and got.tolist() == want
    assert fc.string_to_hash_bucket_fast([b"HS-grad"], 1000).tolist() == [want[0][1]]
    with pytest.raises(ValueError, match="num_buckets must be a positive integer; got 0"):
        fc.string_to_hash_bucket_fast(["a"], 0)


def test_strong_hash_is_keyed_blake2b():
    key = [0x0123456789ABCDEF, 0xFEDCBA9876543210]
    raw = key[0].to_bytes(8, "little") + key[1].to_bytes(8, "little")
    words = ["Prof-school", "Doctorate", ""]
    want = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8, key=raw).digest(),
                           "little") % 97 for w in words]
    assert fc.string_to_hash_bucket_strong(words, 97, key).tolist() == want
    other = fc.string_to_hash_bucket_strong(words, 1 << 40, [1, 2])
    assert other.tolist() != fc.string_to_hash_bucket_strong(words, 1 << 40, [1, 3]).tolist()
    with pytest.raises(ValueError, match=r"Key must have 2 elements.*got \[1\]"):
        fc.string_to_hash_bucket_strong(words, 10, [1])


def test_hash_of_a_tensor_is_computed_per_run(fresh_graph):
    s = psrt.placeholder(np.str_, [None], name="s")
    t = fc.string_to_hash_bucket_fast(s, 10)
    assert isinstance(t, psrt.Tensor)
    with psrt.Session() as sess:
        assert sess.run(t, {s: ["a", "c"]}).tolist() == [5, 9]


def test_sparse_cross_hashed_matches_the_documented_mix():
    a = np.array(["x", "y"])
    b = np.array([[3], [-4]])
    got = fc.sparse_cross_hashed([a, b], 1000)
    assert got.indices.tolist() == [[0, 0], [1, 0]]
    assert got.values.tolist() == [_cross_reference(["x", 3], 1000),
                                   _cross_reference(["y", -4], 1000)]
    # Several values per row: every combination, in input order, row-major.
    sp = psrt.SparseTensorValue([[0, 0], [0, 1], [1, 0]], ["p", "q", "r"], [2, 2])
    got = fc.sparse_cross_hashed([sp, a], 50, hash_key=7)
    assert got.indices.tolist() == [[0, 0], [0, 1], [1, 0]]
    assert got.values.tolist() == [_cross_reference(["p", "x"], 50, 7),
                                   _cross_reference(["q", "x"], 50, 7),
                                   _cross_reference(["r", "y"], 50, 7)]
    assert got.dense_shape.tolist() == [2, 2]
    with pytest.raises(ValueError, match=r"batch sizes \[2, 3\]"):
        fc.sparse_cross_hashed([a, np.array([1, 2, 3])], 10)


def test_bucketize_and_columns_ids():
    boundaries = [18, 25, 30.5]
    x = np.array([-1, 18, 24.9, 25, 30.5, 99])
    assert fc.bucketize(x, boundaries).tolist() == np.digitize(x, boundaries).tolist() == \
        [0, 1, 1, 2, 3, 3]
    with pytest.raises(ValueError, match="boundaries must be a sorted list"):
        fc.bucketize(x, [3, 1])
    age = fc.numeric_column("age")
    buckets = fc.bucketized_column(age, boundaries)
    assert buckets.num_buckets == 4 and buckets.name == "age_bucketized"
    two = fc.bucketized_column(fc.numeric_column("hw", shape=2), [1.0])
    ids = two.ids({"hw": np.array([[0.5, 2.0], [3.0, 0.0]])})
    assert two.num_buckets == 4 and ids.values.tolist() == [0, 3, 1, 2]   # + i * 2
    edu = fc.categorical_column_with_hash_bucket("education", 100)
    feats = {"age": np.array([[17.0], [40.0], [26.0]]),
             "education": np.array(["Bachelors", "", "HS-grad"]),
             "hours": np.array([40, -1, 20])}
    ids = edu.ids(feats)              # '' is missing: no id, as TF
    assert ids.indices.tolist() == [[0, 0], [2, 0]]
    assert ids.values.tolist() == [xxhash.xxh64_intdigest(b"Bachelors") % 100,
                                   xxhash.xxh64_intdigest(b"HS-grad") % 100]
    hours = fc.categorical_column_with_hash_bucket("hours", 10, dtype=np.int64)
    assert hours.ids(feats).values.tolist() == [xxhash.xxh64_intdigest(b"40") % 10,
                                                xxhash.xxh64_intdigest(b"20") % 10]
    cross = fc.crossed_column([buckets, "education"], 1000)
    assert cross.name == "age_bucketized_X_education"
    got = cross.ids(feats)            # row 1's education is missing: no cross
    assert got.indices.tolist() == [[0, 0], [2, 0]]
    assert got.values.tolist() == [_cross_reference([0, "Bachelors"], 1000),
                                   _cross_reference([2, "HS-grad"], 1000)]
    with pytest.raises(ValueError, match="does not support HashedCategoricalColumn 'education'"):
        fc.crossed_column([edu, "age"], 10)
    with pytest.raises(ValueError, match="keys must be a list with length > 1"):
        fc.crossed_column(["age"], 10)
    with pytest.raises(ValueError, match="needs feature"):
        edu.ids({"age": feats["age"]})


def test_linear_model_and_input_layer_train_on_two_ps(shared_ps2, worker, prefix):
    server = worker(shared_ps2)
    age = fc.numeric_column("age")
    age_b = fc.bucketized_column(age, [25, 40])
    edu = fc.categorical_column_with_hash_bucket("education", 16)
    cross = fc.crossed_column([age_b, "education"], 32)
    emb = fc.embedding_column(edu, 3, combiner="mean")
    x_age = psrt.placeholder(np.float32, [None, 1], name=f"{prefix}/age")
    x_edu = psrt.placeholder(np.str_, [None], name=f"{prefix}/education")
    features = {"age": x_age, "education": x_edu}
    wide_vars: dict = {}
    deep_vars: dict = {}
    with psrt.device(psrt.train.replica_device_setter(cluster=server.server_def_cluster)):
        with psrt.variable_scope(prefix, partitioner=psrt.fixed_size_partitioner(2)):
            wide = fc.linear_model(features, [age_b, edu, cross, age], cols_to_vars=wide_vars)
            deep = fc.input_layer(features, [emb, age], cols_to_vars=deep_vars)
    names = sorted(v.name for v in psrt.trainable_variables())
    assert f"{prefix}/linear_model/age_bucketized_X_education/weights/part_1" in names
    assert f"{prefix}/input_layer/education_embedding/embedding_weights/part_0" in names

    @psrt.function
    def total(w, d):
        return anp.sum(w) + anp.sum(d[:, 1:] ** 2) / 2      # d[:, 0] is the age column

    loss = total(wide, deep)
    train = psrt.train.GradientDescentOptimizer(0.5).minimize(loss)
    batch = {"age": np.array([[20.0], [30.0], [30.0], [50.0]], np.float32),
             "education": np.array(["BS", "MS", "MS", ""])}
    feed = {x_age: batch["age"], x_edu: batch["education"]}

    def whole(vs, sess):
        return np.concatenate([sess.run(v) for v in vs])

    with psrt.Session(server.target) as sess:
        sess.run(psrt.global_variables_initializer())
        table0 = whole(deep_vars[emb], sess)
        wide0, deep0 = sess.run([wide, deep], feed)
        sess.run(train, feed)
        table1 = whole(deep_vars[emb], sess)
        after = {c: whole(vs, sess) for c, vs in wide_vars.items()}
    # Forward: zeros everywhere in the wide part; the deep part is [age, mean embedding].
    np.testing.assert_array_equal(wide0, np.zeros((4, 1)))
    edu_ids = edu.ids(batch)
    want_deep = np.zeros((4, 4), np.float32)
    want_deep[:, 0] = batch["age"][:, 0]
    for r, i in zip(edu_ids.indices[:, 0], edu_ids.values):
        want_deep[r, 1:] = table0[i]                     # one id per row: mean = the row
    np.testing.assert_allclose(deep0, want_deep, rtol=1e-6)
    # One SGD step of sum(wide): each categorical weight row falls by lr * its count in the
    # batch ("sum" combiner), the age weight by lr * sum(age), the bias by lr * batch.
    for col in (age_b, edu, cross):
        ids = col.ids(batch)
        want = np.zeros((col.num_buckets, 1))
        np.subtract.at(want, ids.values, 0.5)
        np.testing.assert_allclose(after[col], want, err_msg=col.name)
    np.testing.assert_allclose(after[age], [[-0.5 * batch["age"].sum()]])
    np.testing.assert_allclose(after["bias"], [-0.5 * 4])
    # Deep: d(|e|^2 / 2) = e per row; the MS row appears twice.
    want_table = table0.copy()
    for r, i in zip(edu_ids.indices[:, 0], edu_ids.values):
        want_table[i] -= 0.5 * table0[i]
    np.testing.assert_allclose(table1, want_table, rtol=1e-6)
