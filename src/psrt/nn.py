"""The ``tf.nn`` namespace: re-exports only (the ops live in ``psrt/ops/``)."""

from psrt.framework import missing as _missing
from psrt.ops.conv_backprop_ops import conv2d_backprop_filter, conv2d_backprop_input
from psrt.ops.conv_ops import atrous_conv2d, conv1d, conv2d, conv2d_transpose, convolution
from psrt.ops.depthwise_conv_ops import depthwise_conv2d, separable_conv2d
from psrt.ops.embedding_ops import (
    embedding_lookup,
    embedding_lookup_sparse,
    safe_embedding_lookup_sparse,
)
from psrt.ops.nn_ops import (
    bias_add,
    l2_loss,
    log_softmax,
    matmul,
    reduce_mean,
    reduce_sum,
    relu,
    sigmoid,
    sigmoid_cross_entropy_with_logits,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    sparse_softmax_cross_entropy_with_logits,
    tanh,
    xw_plus_b,
)
from psrt.ops.pooling_ops import avg_pool, max_pool, pool

__all__ = [
    "atrous_conv2d",
    "avg_pool",
    "bias_add",
    "conv1d",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "conv2d_transpose",
    "convolution",
    "depthwise_conv2d",
    "embedding_lookup",
    "embedding_lookup_sparse",
    "l2_loss",
    "log_softmax",
    "matmul",
    "max_pool",
    "pool",
    "reduce_mean",
    "reduce_sum",
    "relu",
    "safe_embedding_lookup_sparse",
    "separable_conv2d",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "xw_plus_b",
]

__getattr__ = _missing.module_getattr("psrt.nn")  # TF1 names psrt lacks: what to use instead
