"""psrt.train.Example & co. (psrt/framework/example_protos.py) on the wire: the bytes of
TF's own serializations (tensorflow/core/example/example.proto, feature.proto; the hex
strings below were printed by TensorFlow's tf.train.Example(...).SerializeToString()) and the
Examples of the TF-written fixture tests/data/tf_examples.tfrecord."""

from __future__ import annotations

import os

import pytest

import psrt
from psrt import train

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "data")


def _feats(**kw):
    return train.Example(features=train.Features(feature=kw))


@pytest.mark.parametrize("msg,tf_hex", [
    (_feats(x=train.Feature(float_list=train.FloatList(value=[1.5, -2.0]))),
     "0a130a110a0178120c120a0a080000c03f000000c0"),
    (_feats(ids=train.Feature(int64_list=train.Int64List(value=[3, -1, 2 ** 40]))),
     "0a1e0a1c0a0369647312151a130a1103ffffffffffffffffff01808080808020"),
    (_feats(s=train.Feature(bytes_list=train.BytesList(value=[b"ab", b""]))),
     "0a0f0a0d0a017312080a060a0261620a00"),
    (_feats(e=train.Feature()), "0a070a050a01651200"),
])
def test_bytes_identical_to_tfs(msg, tf_hex):
    assert msg.SerializeToString().hex() == tf_hex
    assert train.Example.FromString(bytes.fromhex(tf_hex)) == msg


def test_sequence_example_bytes_identical_to_tfs():
    s = train.SequenceExample()
    s.context.feature["n"].int64_list.value.append(2)
    s.feature_lists.feature_list["t"].feature.add().float_list.value.append(0.25)
    tf_hex = "0a0c0a0a0a016e12051a030a010212110a0f0a0174120a0a0812060a040000803e"
    assert s.SerializeToString().hex() == tf_hex
    back = train.SequenceExample.FromString(bytes.fromhex(tf_hex))
    assert list(back.feature_lists.feature_list["t"].feature[0].float_list.value) == [0.25]
    assert isinstance(back.feature_lists, train.FeatureLists)
    assert isinstance(back.feature_lists.feature_list["t"], train.FeatureList)


def test_reads_the_examples_tf_wrote():
    records = list(psrt.python_io.tf_record_iterator(os.path.join(DATA,
                                                                  "tf_examples.tfrecord")))
    for i, r in enumerate(records):
        ex = train.Example.FromString(r)
        f = ex.features.feature
        assert list(f["label"].int64_list.value) == [i, -(2 ** 40)]
        assert f["image_raw"].bytes_list.value[0] == bytes(range(i, i + 4))
        assert list(f["weights"].float_list.value) == [0.5 * k for k in range(i + 1)]
        assert f["name"].WhichOneof("kind") == "bytes_list"
        assert ("opt" in f) == (i != 1)
        # re-serialized and read again: the same message
        assert train.Example.FromString(ex.SerializeToString()) == ex


def test_message_api_and_names():
    ex = train.Example()
    ex.features.feature["a"].float_list.value.extend([1.0, 2.0])
    assert type(ex).DESCRIPTOR.full_name == "tensorflow.Example"
    assert train.Feature.DESCRIPTOR.oneofs_by_name["kind"].fields[2].name == "int64_list"
    assert train.FloatList.DESCRIPTOR.fields[0].number == 1
    with pytest.raises(ValueError):
        train.Feature(bogus=1)
    with pytest.raises(TypeError):
        train.Int64List(value=["x"])
