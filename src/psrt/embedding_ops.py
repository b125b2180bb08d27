"""TF1's ``embedding_ops`` module (``tf.nn.embedding_lookup`` and its relatives): re-exports
only (``psrt/ops/embedding_ops.py``). ``psrt.nn`` has the same names."""

from psrt.ops.embedding_ops import (
    embedding_lookup,
    embedding_lookup_sparse,
    partition_assignments,
    safe_embedding_lookup_sparse,
)

__all__ = [
    "embedding_lookup",
    "embedding_lookup_sparse",
    "partition_assignments",
    "safe_embedding_lookup_sparse",
]
