"""TF1's random ops (tensorflow/python/ops/random_ops.py, r1.15): ``random_normal``,
``random_uniform``, ``truncated_normal``, drawn anew at every run.

Seeds as TF's graph + op seeds (psrt/framework/random_seed.py ``get_seed``): with a graph or
op seed the sequence of values run after run is the same for the same program; with neither
it differs per process. psrt's generator is numpy's (PCG64), so the values are not TF's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psrt.framework import op_def_library as _lib
from psrt.framework.random_seed import get_seed
from psrt.framework.tensor import Tensor


class _Draw:
    """The kernel of a random op: its own generator, advanced at each run."""

    __slots__ = ("rng", "kind", "a", "b", "dtype")

    def __init__(self, seed: Any, kind: str, a: float, b: float, dtype: np.dtype) -> None:
        graph_seed, op_seed = get_seed(seed)
        self.rng = np.random.default_rng(None if op_seed is None else [graph_seed, op_seed])
        self.kind, self.a, self.b, self.dtype = kind, a, b, dtype

    def __call__(self, needs: Any, shape: Any) -> Any:
        shp = tuple(int(d) for d in np.asarray(shape).reshape(-1))
        if self.kind == "normal":
            y = self.rng.standard_normal(shp) * self.b + self.a
        elif self.kind == "truncated":
            y = self.rng.standard_normal(shp)
            bad = np.abs(y) > 2
            while bad.any():   # TF's: redraw values more than 2 stddevs from the mean
                y[bad] = self.rng.standard_normal(int(bad.sum()))
                bad = np.abs(y) > 2
            y = y * self.b + self.a
        elif self.dtype.kind in "iu":
            y = self.rng.integers(int(self.a), int(self.b), shp)
        else:
            y = self.rng.uniform(self.a, self.b, shp)
        return np.asarray(y, self.dtype), lambda dy: (None,)


def _random(op: str, shape: Any, kind: str, a: Any, b: Any, dtype: Any, seed: Any,
            name: str | None) -> Tensor:
    dt = _lib.np_dtype(dtype)
    if kind != "uniform" and dt.kind != "f":
        raise ValueError(f"Invalid dtype {dt.name} for {op}; expected a float dtype")
    dims = _lib.constant_value(shape)
    out = None if dims is None else [int(d) for d in np.asarray(dims).reshape(-1)]
    return _lib.apply_op(op, name, [shape], _Draw(seed, kind, float(a), float(b), dt), dt,
                         out)


def random_normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = np.float32,
                  seed: int | None = None, name: str | None = None) -> Tensor:
    """Normal values of ``shape``, as ``tf.random_normal`` (float32 by default)."""
    return _random("RandomStandardNormal", shape, "normal", mean, stddev, dtype, seed, name)


def truncated_normal(shape: Any, mean: float = 0.0, stddev: float = 1.0,
                     dtype: Any = np.float32, seed: int | None = None,
                     name: str | None = None) -> Tensor:
    """Normal values of ``shape`` redrawn when more than 2 ``stddev`` from ``mean``, as
    ``tf.truncated_normal``."""
    return _random("TruncatedNormal", shape, "truncated", mean, stddev, dtype, seed, name)


def random_uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = np.float32,
                   seed: int | None = None, name: str | None = None) -> Tensor:
    """Uniform values in ``[minval, maxval)`` of ``shape``, as ``tf.random_uniform``
    (``maxval`` 1 for floats; required for integer dtypes).

    Raises:
        ValueError: an integer dtype without ``maxval`` (TF's message).
    """
    dt = _lib.np_dtype(dtype)
    if maxval is None:
        if dt.kind in "iu":
            raise ValueError(f"Must specify maxval for integer dtype {dt.name}")
        maxval = 1
    return _random("RandomUniform", shape, "uniform", minval, maxval, dt, seed, name)
