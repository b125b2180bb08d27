"""``tensorflow.core.protobuf``."""

__all__: list[str] = []
