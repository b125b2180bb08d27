"""``tensorflow.core``: the TF1 protobuf module paths scripts import (``tensorflow.core.protobuf.config_pb2``, ...)."""

__all__: list[str] = []
