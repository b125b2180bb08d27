"""``tensorflow.core.protobuf.config_pb2``: ``ConfigProto``, ``GPUOptions``, ``RunOptions``,
``RunMetadata`` (psrt's option classes, psrt/framework/protos.py). A face."""

from psrt.framework.protos import ConfigProto, GPUOptions, RunMetadata, RunOptions

__all__ = ["ConfigProto", "GPUOptions", "RunMetadata", "RunOptions"]
