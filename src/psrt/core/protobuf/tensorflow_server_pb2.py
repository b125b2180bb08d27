"""``tensorflow.core.protobuf.tensorflow_server_pb2``: ``ServerDef`` (a protobuf message,
psrt/framework/server_protos.py; its ``cluster`` is a ``ClusterDef``). A face."""

from psrt.framework.server_protos import ServerDef

__all__ = ["ServerDef"]
