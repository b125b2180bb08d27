"""The ``tf.nn`` namespace: re-exports only (the ops live in ``psrt/ops/``)."""

from psrt.framework import missing as _missing
from psrt.ops.candidate_sampling_ops import (
    compute_accidental_hits,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)
from psrt.ops.conv3d_ops import conv3d, conv3d_transpose, convolution
from psrt.ops.conv_backprop_ops import conv2d_backprop_filter, conv2d_backprop_input
from psrt.ops.conv_ops import (
    atrous_conv2d,
    atrous_conv2d_transpose,
    conv1d,
    conv2d,
    conv2d_transpose,
)
from psrt.ops.depthwise_conv_ops import depthwise_conv2d, separable_conv2d
from psrt.ops.embedding_ops import (
    embedding_lookup,
    embedding_lookup_sparse,
    safe_embedding_lookup_sparse,
)
from psrt.ops.nn_impl import (
    batch_normalization,
    fused_batch_norm,
    l2_normalize,
    moments,
    nce_loss,
    sampled_softmax_loss,
    weighted_cross_entropy_with_logits,
    zero_fraction,
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
from psrt.ops.nn_ops_extra import (
    dropout,
    elu,
    in_top_k,
    leaky_relu,
    local_response_normalization,
    lrn,
    relu6,
    softplus,
    softsign,
    top_k,
)
from psrt.ops.pooling_ops import avg_pool, max_pool, pool

__all__ = [
    "atrous_conv2d",
    "atrous_conv2d_transpose",
    "avg_pool",
    "batch_normalization",
    "bias_add",
    "compute_accidental_hits",
    "conv1d",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "conv2d_transpose",
    "conv3d",
    "conv3d_transpose",
    "convolution",
    "depthwise_conv2d",
    "dropout",
    "elu",
    "embedding_lookup",
    "embedding_lookup_sparse",
    "fused_batch_norm",
    "in_top_k",
    "l2_loss",
    "l2_normalize",
    "leaky_relu",
    "local_response_normalization",
    "log_softmax",
    "log_uniform_candidate_sampler",
    "lrn",
    "matmul",
    "max_pool",
    "moments",
    "nce_loss",
    "pool",
    "reduce_mean",
    "reduce_sum",
    "relu",
    "relu6",
    "safe_embedding_lookup_sparse",
    "sampled_softmax_loss",
    "separable_conv2d",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "softplus",
    "softsign",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "top_k",
    "uniform_candidate_sampler",
    "weighted_cross_entropy_with_logits",
    "xw_plus_b",
    "zero_fraction",
]

__getattr__ = _missing.module_getattr("psrt.nn")  # TF1 names psrt lacks: what to use instead
