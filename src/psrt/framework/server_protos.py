"""``tf.train.ServerDef``, ``ClusterDef`` and ``JobDef`` as protobuf messages identical on the
wire to TF's ``tensorflow/core/protobuf/cluster.proto`` and ``tensorflow_server.proto``
(proto3, package ``tensorflow``, the same field numbers).

A TF1 launcher builds a server's definition field by field::

    server_def = tf.train.ServerDef(job_name="worker", task_index=0, protocol="grpc")
    job = server_def.cluster.job.add()
    job.name = "ps"
    job.tasks[0] = "ps0:2222"
    server = tf.train.Server(server_def)

and ``psrt.train.Server`` and ``psrt.train.ClusterSpec`` take these messages
(``ClusterSpec.as_cluster_def()`` makes one). ``ServerDef`` has TF's fields ``cluster`` (1),
``job_name`` (2), ``task_index`` (3), ``protocol`` (5) and ``port`` (6); ``default_session_config``
(4, a ConfigProto message) and ``cluster_device_filters`` (7) are left out: psrt's
``ConfigProto`` is no protobuf message, so a server's config goes to ``Server(config=...)``.
Descriptors are built at import in a private pool, as framework/example_protos.py's.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool

from psrt.framework.proto_builder import FIELD as _F
from psrt.framework.proto_builder import add_field as _field
from psrt.framework.proto_builder import message_class

__all__ = ["ClusterDef", "JobDef", "ServerDef"]


def _cluster_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/protobuf/cluster.proto", package="tensorflow", syntax="proto3")
    job = fd.message_type.add(name="JobDef")
    _field(job, "name", 1, _F.TYPE_STRING)
    entry = job.nested_type.add(name="TasksEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_INT32)
    _field(entry, "value", 2, _F.TYPE_STRING)
    _field(job, "tasks", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.JobDef.TasksEntry")
    cluster = fd.message_type.add(name="ClusterDef")
    _field(cluster, "job", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.JobDef")
    return fd


def _server_file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/protobuf/tensorflow_server.proto", package="tensorflow",
        syntax="proto3", dependency=["tensorflow/core/protobuf/cluster.proto"])
    sd = fd.message_type.add(name="ServerDef")
    _field(sd, "cluster", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.ClusterDef")
    _field(sd, "job_name", 2, _F.TYPE_STRING)
    _field(sd, "task_index", 3, _F.TYPE_INT32)
    _field(sd, "protocol", 5, _F.TYPE_STRING)
    _field(sd, "port", 6, _F.TYPE_INT32)
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_cluster_file())
_POOL.Add(_server_file())


def _cls(name: str, doc: str) -> Any:
    return message_class(_POOL, name, doc, "tensorflow/core/protobuf/*.proto")


JobDef: Any = _cls("JobDef", "`name` (str) and `tasks`, a map from task index (int32) to "
                   "its 'host:port' address.")
ClusterDef: Any = _cls("ClusterDef", "`job`: a repeated field of JobDef (`job.add()`).")
ServerDef: Any = _cls("ServerDef", "`cluster` (ClusterDef), `job_name` (str), `task_index` "
                      "(int32), `protocol` (str, e.g. 'grpc'), `port` (int32).")


def is_message(value: Any, name: str) -> bool:
    """Whether ``value`` is a ``tensorflow.<name>`` message (psrt's class or another's with
    that full name, e.g. TensorFlow's own generated one)."""
    descriptor = getattr(value, "DESCRIPTOR", None)
    return getattr(descriptor, "full_name", None) == f"tensorflow.{name}"
