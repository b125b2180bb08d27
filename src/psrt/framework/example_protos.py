"""``tf.train.Example`` and its parts as protobuf messages identical on the wire to TF's.

The messages are those of TF's ``tensorflow/core/example/feature.proto`` and
``example.proto`` (proto3, package ``tensorflow``, the same field numbers): ``BytesList``,
``FloatList``, ``Int64List``, ``Feature`` (a oneof of the three), ``Features`` (a map of
name to ``Feature``), ``FeatureList``, ``FeatureLists``, ``Example`` and
``SequenceExample``. Their descriptors are built here at import from a
``FileDescriptorProto`` (no generated code), in a private descriptor pool, so a process
that also imports TensorFlow's own ``example_pb2`` has no clash; the serialized bytes are
the same, so ``Example.FromString`` reads what TF wrote and TF reads what is written here.

The classes are ordinary protobuf message classes (``SerializeToString``, ``FromString``,
``ParseFromString``, keyword construction, ``text_format``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool

from psrt.framework.proto_builder import FIELD as _F
from psrt.framework.proto_builder import add_field as _field
from psrt.framework.proto_builder import message_class

__all__ = [
    "BytesList",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "SequenceExample",
]


def _map(msg: Any, name: str, number: int, entry: str, value_type: str) -> None:
    m = msg.nested_type.add(name=entry)
    m.options.map_entry = True
    _field(m, "key", 1, _F.TYPE_STRING)
    _field(m, "value", 2, _F.TYPE_MESSAGE, type_name=value_type)
    _field(msg, name, number, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
           f".tensorflow.{msg.name}.{entry}")


def _feature_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/feature.proto", package="tensorflow", syntax="proto3")
    for name, ftype in (("BytesList", _F.TYPE_BYTES), ("FloatList", _F.TYPE_FLOAT),
                        ("Int64List", _F.TYPE_INT64)):
        m = fd.message_type.add(name=name)
        _field(m, "value", 1, ftype, _F.LABEL_REPEATED)
        if ftype != _F.TYPE_BYTES:
            m.field[0].options.packed = True  # as feature.proto's [packed = true]
    feature = fd.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (name, kind) in enumerate((("bytes_list", "BytesList"),
                                           ("float_list", "FloatList"),
                                           ("int64_list", "Int64List")), start=1):
        _field(feature, name, number, _F.TYPE_MESSAGE, type_name=f".tensorflow.{kind}", oneof=0)
    _map(fd.message_type.add(name="Features"), "feature", 1, "FeatureEntry",
         ".tensorflow.Feature")
    flist = fd.message_type.add(name="FeatureList")
    _field(flist, "feature", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.Feature")
    _map(fd.message_type.add(name="FeatureLists"), "feature_list", 1, "FeatureListEntry",
         ".tensorflow.FeatureList")
    fd.options.java_package = "org.tensorflow.example"
    fd.options.java_outer_classname = "FeatureProtos"
    fd.options.java_multiple_files = True
    fd.options.cc_enable_arenas = True
    return fd


def _example_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/example.proto", package="tensorflow", syntax="proto3",
        dependency=["tensorflow/core/example/feature.proto"])
    ex = fd.message_type.add(name="Example")
    _field(ex, "features", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    seq = fd.message_type.add(name="SequenceExample")
    _field(seq, "context", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    _field(seq, "feature_lists", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FeatureLists")
    fd.options.java_package = "org.tensorflow.example"
    fd.options.java_outer_classname = "ExampleProtos"
    fd.options.java_multiple_files = True
    fd.options.cc_enable_arenas = True
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_feature_file())
_POOL.Add(_example_file())


def _cls(name: str, doc: str) -> Any:
    return message_class(_POOL, name, doc, "tensorflow/core/example/*.proto")


BytesList: Any = _cls("BytesList", "`value`: a repeated field of bytes strings.")
FloatList: Any = _cls("FloatList", "`value`: a packed repeated field of float32 values.")
Int64List: Any = _cls("Int64List", "`value`: a packed repeated field of int64 values.")
Feature: Any = _cls("Feature", "one of `bytes_list`, `float_list` or `int64_list`.")
Features: Any = _cls("Features", "`feature`: a map from feature name (str) to Feature.")
FeatureList: Any = _cls("FeatureList", "`feature`: a repeated field of Feature, one per step.")
FeatureLists: Any = _cls("FeatureLists", "`feature_list`: a map from name to FeatureList.")
Example: Any = _cls("Example", "`features`: the Features of one training example.")
SequenceExample: Any = _cls("SequenceExample",
                            "`context` (Features) and `feature_lists` (FeatureLists).")
