"""``tensorflow.core.example.example_pb2``: ``Example``, ``SequenceExample``. A face."""

from psrt.framework.example_protos import Example, SequenceExample

__all__ = ["Example", "SequenceExample"]
