"""``tensorflow.python.framework.ops``: the graph and its collections. A face."""

from psrt.framework.constant_op import convert_to_tensor
from psrt.framework.device import device
from psrt.framework.ops import (
    Graph,
    GraphKeys,
    Operation,
    add_to_collection,
    add_to_collections,
    control_dependencies,
    get_collection,
    get_collection_ref,
    get_default_graph,
    name_scope,
    reset_default_graph,
)
from psrt.framework.tensor import Tensor

__all__ = [
    "Graph",
    "GraphKeys",
    "Operation",
    "Tensor",
    "add_to_collection",
    "add_to_collections",
    "control_dependencies",
    "convert_to_tensor",
    "device",
    "get_collection",
    "get_collection_ref",
    "get_default_graph",
    "name_scope",
    "reset_default_graph",
]
