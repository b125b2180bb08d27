"""``tensorflow.core.protobuf.cluster_pb2``: ``ClusterDef``, ``JobDef`` (protobuf messages,
psrt/framework/server_protos.py). A face."""

from psrt.framework.server_protos import ClusterDef, JobDef

__all__ = ["ClusterDef", "JobDef"]
