"""Dynamic embedding tables (TF Recommenders-Addons' ``tfra.dynamic_embedding`` names): re-exports only."""

from psrt.ops.dynamic_embedding import (
    DynamicEmbeddingVariable,
    EvictionHook,
    embedding_lookup,
    get_variable,
)

__all__ = [
    "DynamicEmbeddingVariable",
    "EvictionHook",
    "embedding_lookup",
    "get_variable",
]
