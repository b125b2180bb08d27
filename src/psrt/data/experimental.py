"""The ``tf.data.experimental`` names of TF r1.15 that psrt has: ``AUTOTUNE`` and the
transformations ``shuffle_and_repeat``, ``map_and_batch``, ``parallel_interleave``, ``unbatch`` (for
``Dataset.apply``). Re-exports only (``psrt/ops/dataset_ops.py``)."""

from psrt.framework import missing as _missing
from psrt.ops.dataset_ops import (
    AUTOTUNE,
    map_and_batch,
    parallel_interleave,
    shuffle_and_repeat,
    unbatch,
)

__getattr__ = _missing.module_getattr("psrt.data.experimental")

__all__ = [
    "AUTOTUNE",
    "map_and_batch",
    "parallel_interleave",
    "shuffle_and_repeat",
    "unbatch",
]
