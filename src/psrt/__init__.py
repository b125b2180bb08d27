"""psrt: a parameter-server training runtime for numpy with TensorFlow 1.x's API.

This is the ``tf`` namespace, a face that only re-exports (docs/architecture.md): ``psrt.train``
is ``tf.train``, ``psrt.nn`` is ``tf.nn``, and ``psrt.Variable``, ``psrt.device``,
``psrt.Session`` and ``psrt.errors`` mirror their TF1 names.

Importing psrt gives its ``"psrt"`` logger a stderr handler at INFO unless the application
has configured ``logging``, so a ps task's "Started server with target: ..." and a waiting
worker's lines show without any setup; ``PSRT_LOG_LEVEL`` (e.g. ``WARNING``) changes the
level. See ``psrt/platform/psrt_logging.py``. A process that runs as PID 1 (a container
without an init) gets a SIGTERM handler, so it ends on SIGTERM as any other process does
(``psrt/platform/sigterm.py``).
"""

from psrt.platform import psrt_logging as _logging
from psrt.platform import sigterm as _sigterm

_logging.install()
_sigterm.install()  # only as PID 1 (a container without an init): SIGTERM ends the task

# The namespaces (each a face of its own), then the names, each from its home.
# ruff: noqa: E402  (after the logging set-up)
from psrt import (
    dynamic_embedding,
    embedding_ops,
    errors,
    feature_column,
    init_ops,
    nn,
    summary,
    train,
)
from psrt.framework import missing as _missing
from psrt.framework.device import DeviceSpec, device
from psrt.framework.dtypes import (  # noqa: A004  (TF's names: psrt.bool is tf.bool)
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
from psrt.framework.indexed_slices import IndexedSlices
from psrt.framework.ops import (
    GLOBAL_VARIABLES,
    Graph,
    GraphKeys,
    TRAINABLE_VARIABLES,
    add_to_collection,
    add_to_collections,
    get_collection,
    get_collection_ref,
    get_default_graph,
    name_scope,
    reset_default_graph,
)
from psrt.framework.protos import ConfigProto, GPUOptions, RunMetadata, RunOptions
from psrt.framework.random_seed import set_random_seed
from psrt.framework.sparse_tensor import SparseTensor, SparseTensorValue, sparse_placeholder
from psrt.framework.tensor import (
    Tensor,
    custom_gradient,
    function,
    numpy_function,
    placeholder,
    placeholder_with_default,
    py_func,
)
from psrt.ops.feature_column import (
    sparse_cross_hashed,
    string_to_hash_bucket_fast,
    string_to_hash_bucket_strong,
)
from psrt.ops.init_ops import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from psrt.ops.nn_ops import matmul, reduce_mean, reduce_sum, sigmoid, tanh
from psrt.ops.partitioned_variables import (
    fixed_size_partitioner,
    min_max_variable_partitioner,
    variable_axis_size_partitioner,
)
from psrt.ops.variable_scope import (
    AUTO_REUSE,
    VariableScope,
    get_variable,
    get_variable_scope,
    variable_scope,
)
from psrt.ops.variables import (
    PartitionedVariable,
    Variable,
    all_variables,
    global_variables,
    global_variables_initializer,
    initialize_all_variables,
    is_variable_initialized,
    report_uninitialized_variables,
    trainable_variables,
    variables_initializer,
)
from psrt.runtime.session import Session

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``psrt.Summary`` (TF1's ``tf.Summary`` protocol buffer), imported on first use: its
    module (tensorboardX's) takes ~70 ms to import, paid only where summaries are written.
    A TF1 name psrt lacks raises an AttributeError saying what to use instead."""
    if name == "Summary":
        return summary.Summary
    err = _missing.missing("psrt", name)
    if err is not None:
        raise err
    raise AttributeError(f"module 'psrt' has no attribute {name!r}")


__all__ = [
    "AUTO_REUSE",
    "ConfigProto",
    "DType",
    "DeviceSpec",
    "GLOBAL_VARIABLES",
    "GPUOptions",
    "Graph",
    "GraphKeys",
    "IndexedSlices",
    "PartitionedVariable",
    "RunMetadata",
    "RunOptions",
    "Session",
    "SparseTensor",
    "SparseTensorValue",
    "TRAINABLE_VARIABLES",
    "Tensor",
    "Variable",
    "VariableScope",
    "add_to_collection",
    "add_to_collections",
    "all_variables",
    "as_dtype",
    "bool",
    "constant_initializer",
    "custom_gradient",
    "device",
    "double",
    "dynamic_embedding",
    "embedding_ops",
    "errors",
    "feature_column",
    "fixed_size_partitioner",
    "float16",
    "float32",
    "float64",
    "function",
    "get_collection",
    "get_collection_ref",
    "get_default_graph",
    "get_variable",
    "get_variable_scope",
    "global_variables",
    "global_variables_initializer",
    "glorot_normal_initializer",
    "glorot_uniform_initializer",
    "half",
    "init_ops",
    "initialize_all_variables",
    "int16",
    "int32",
    "int64",
    "int8",
    "is_variable_initialized",
    "matmul",
    "min_max_variable_partitioner",
    "name_scope",
    "nn",
    "numpy_function",
    "ones_initializer",
    "placeholder",
    "placeholder_with_default",
    "py_func",
    "random_normal_initializer",
    "random_uniform_initializer",
    "reduce_mean",
    "reduce_sum",
    "report_uninitialized_variables",
    "reset_default_graph",
    "set_random_seed",
    "sigmoid",
    "sparse_cross_hashed",
    "sparse_placeholder",
    "string",
    "string_to_hash_bucket_fast",
    "string_to_hash_bucket_strong",
    "summary",
    "tanh",
    "train",
    "trainable_variables",
    "truncated_normal_initializer",
    "uint16",
    "uint8",
    "variable_axis_size_partitioner",
    "variable_scope",
    "variables_initializer",
    "variance_scaling_initializer",
    "zeros_initializer",
]
