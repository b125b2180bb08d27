"""``tensorflow.python.framework.dtypes``: ``DType``, ``as_dtype`` and the dtypes. A face."""

from psrt.framework.dtypes import (  # noqa: A004  (TF's names)
    DType,
    as_dtype,
    bool,
    double,
    float16,
    float32,
    float64,
    half,
    int16,
    int32,
    int64,
    int8,
    string,
    uint16,
    uint8,
)

__all__ = ["DType", "as_dtype", "bool", "double", "float16", "float32", "float64", "half",
           "int16", "int32", "int64", "int8", "string", "uint16", "uint8"]
