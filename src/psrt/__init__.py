"""psrt: a parameter-server training runtime for numpy with TensorFlow 1.x's API.

``psrt.train`` is the ``tf.train`` namespace; ``psrt.Variable``, ``psrt.device``,
``psrt.Session`` and ``psrt.errors`` mirror their TF1 names.

Importing psrt gives its ``"psrt"`` logger a stderr handler at INFO unless the application
has configured ``logging``, so a ps task's "Started server with target: ..." and a waiting
worker's lines show without any setup; ``PSRT_LOG_LEVEL`` (e.g. ``WARNING``) changes the
level. See ``psrt/_logging.py``.
"""

from psrt.platform import psrt_logging as _logging

_logging.install()

from psrt import errors  # noqa: E402  (after the logging set-up)
from psrt.framework import missing as _missing
from psrt.framework.dtypes import (  # noqa: A004  (TF's names: psrt.bool is tf.bool)
    DType,
    as_dtype,
    bool,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    string,
    uint8,
    uint16,
)
from psrt.framework.protos import GPUOptions, RunMetadata, RunOptions
from psrt.framework.tensor import (
    Tensor,
    custom_gradient,
    function,
    numpy_function,
    placeholder,
    placeholder_with_default,
    py_func,
)
from psrt.training.optimizer import IndexedSlices
from psrt.framework.device import DeviceSpec
from psrt.framework.device import device as device
from psrt.runtime.session import ConfigProto, Session
from psrt.ops.variable_scope import AUTO_REUSE, VariableScope, get_variable_scope, variable_scope, get_variable
from psrt.ops.variables import GLOBAL_VARIABLES, TRAINABLE_VARIABLES, Graph, all_variables, initialize_all_variables, PartitionedVariable, Variable, constant_initializer, fixed_size_partitioner, get_default_graph, global_variables, global_variables_initializer, glorot_uniform_initializer, is_variable_initialized, ones_initializer, random_normal_initializer, random_uniform_initializer, report_uninitialized_variables, trainable_variables, truncated_normal_initializer, variables_initializer, zeros_initializer
from psrt.framework.ops import GraphKeys, add_to_collection, add_to_collections, get_collection, get_collection_ref, name_scope, reset_default_graph
from psrt.framework.random_seed import set_random_seed
# ---- initializers computed on the ps (issue 11; area "init") ----
from psrt import init_ops  # noqa: E402
from psrt.ops.init_ops import glorot_normal_initializer, variance_scaling_initializer  # noqa: E402
# ---- embeddings at scale (issue 14; area "emb") ----
from psrt import embedding_ops  # noqa: E402
from psrt.framework.sparse_tensor import SparseTensor, SparseTensorValue, sparse_placeholder  # noqa: E402
from psrt.ops.partitioned_variables import (  # noqa: E402
    min_max_variable_partitioner,
    variable_axis_size_partitioner,
)
from psrt import feature_column  # noqa: E402
from psrt.ops.feature_column import (  # noqa: E402
    sparse_cross_hashed,
    string_to_hash_bucket_fast,
    string_to_hash_bucket_strong,
)
# ---- dynamic embedding tables (issue 14, item 5; TF Recommenders-Addons' names) ----
from psrt import dynamic_embedding  # noqa: E402
from psrt import nn, train  # noqa: E402
from psrt import summary  # noqa: E402
# -- ports (issue 13): TF's tf.matmul, tf.reduce_sum, tf.reduce_mean, tf.sigmoid, tf.tanh,
# fused ops with hand-written gradients (psrt/nn.py)
from psrt.ops.nn_ops import matmul, reduce_mean, reduce_sum, sigmoid, tanh  # noqa: E402

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``psrt.Summary`` (TF1's ``tf.Summary`` protocol buffer), imported on first use: its
    module (tensorboardX's) takes ~70 ms to import, paid only where summaries are written."""
    if name == "Summary":
        return summary.Summary
    err = _missing.missing("psrt", name)  # a TF1 name psrt lacks: say what to use instead
    if err is not None:
        raise err
    raise AttributeError(f"module 'psrt' has no attribute {name!r}")
