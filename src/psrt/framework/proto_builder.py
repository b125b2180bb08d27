"""Protobuf messages built from descriptors at import, without generated code.

framework/example_protos.py (TF's example.proto and feature.proto) and
framework/server_protos.py (cluster.proto, tensorflow_server.proto) describe TF's messages
field by field in a ``FileDescriptorProto`` and load them into a private descriptor pool, so
a process that also imports TensorFlow's own ``*_pb2`` modules has no clash and the bytes on
the wire are TF's. This module holds what both need: adding a field the way ``protoc``
records it, and the message class of a name with its TF1 docstring.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["FIELD", "add_field", "message_class"]

FIELD = descriptor_pb2.FieldDescriptorProto


def add_field(msg: Any, name: str, number: int, ftype: int,
              label: int = FIELD.LABEL_OPTIONAL, type_name: str | None = None,
              oneof: int | None = None) -> None:
    """Adds field ``name`` = ``number`` of type ``ftype`` to the ``DescriptorProto``
    ``msg``: ``type_name`` for message fields (``".tensorflow.Feature"``), ``oneof`` the
    index of its oneof, and the lowerCamelCase ``json_name`` protoc would record."""
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name is not None:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof
    f.json_name = "".join(p if i == 0 else p.capitalize() for i, p in
                          enumerate(name.split("_")))


def message_class(pool: descriptor_pool.DescriptorPool, name: str, doc: str,
                  proto_files: str) -> Any:
    """The message class of ``tensorflow.<name>`` in ``pool``, documented as TF1's
    ``tf.train.<name>`` (protobuf's generated classes carry no docstring)."""
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.{name}"))
    cls.__doc__ = (f"tf.train.{name}: {doc} A protobuf message, byte-identical on the wire "
                   f"to TF's tensorflow.{name} ({proto_files}).")
    return cls
