"""``tensorflow.core.example.feature_pb2``: the ``Feature`` messages. A face."""

from psrt.framework.example_protos import (
    BytesList,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
)

__all__ = ["BytesList", "Feature", "FeatureList", "FeatureLists", "Features", "FloatList",
           "Int64List"]
