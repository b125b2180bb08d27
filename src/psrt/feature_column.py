"""The ``tf.feature_column`` namespace: re-exports only (``psrt/ops/feature_column.py``)."""

from psrt.ops.feature_column import (
    BucketizedColumn,
    CrossedColumn,
    EmbeddingColumn,
    HashedCategoricalColumn,
    NumericColumn,
    bucketize,
    bucketized_column,
    categorical_column_with_hash_bucket,
    crossed_column,
    embedding_column,
    input_layer,
    linear_model,
    numeric_column,
    sparse_cross_hashed,
    string_to_hash_bucket_fast,
    string_to_hash_bucket_strong,
)

__all__ = [
    "BucketizedColumn",
    "CrossedColumn",
    "EmbeddingColumn",
    "HashedCategoricalColumn",
    "NumericColumn",
    "bucketize",
    "bucketized_column",
    "categorical_column_with_hash_bucket",
    "crossed_column",
    "embedding_column",
    "input_layer",
    "linear_model",
    "numeric_column",
    "sparse_cross_hashed",
    "string_to_hash_bucket_fast",
    "string_to_hash_bucket_strong",
]
