"""Dynamic embedding tables (TF Recommenders-Addons' ``tfra.dynamic_embedding`` names):
re-exports only."""

from psrt.ops.dynamic_embedding import DynamicEmbeddingVariable, get_variable
from psrt.ops.embedding_ops import dynamic_embedding_lookup as embedding_lookup
from psrt.training.dynamic_embedding_hooks import EvictionHook

__all__ = [
    "DynamicEmbeddingVariable",
    "EvictionHook",
    "embedding_lookup",
    "get_variable",
]
